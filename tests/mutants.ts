// Sampled mutation testing of index.ts: single-line mutants, kept when they still typecheck, each
// run against the suite in a scratch copy of the project, stopping at the first failing test.
//
//   bun run mutants                          # 100 mutants spread over index.ts, seed from the clock
//   bun run mutants -- --sample 120 --seed 7 --lines 400-900
//   bun run mutants -- --list --lines 80-95  # the candidates only, nothing is run
//   bun run mutants -- --rerun .mutants/last.json   # the survivors of an earlier run not judged equivalent, again
//   bun run mutants -- --report a.json,b.json       # score of saved runs, later verdicts winning
//
// Not part of `bun run test`: one mutant costs up to a whole suite run. See CONTRIBUTING.md, Mutation testing.

import { spawn, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { rng } from "./rng.ts";

const ROOT = resolve(import.meta.dirname, "..");
/** Fast, broad files first: most mutants die there. A file that kills moves to the front. */
const FIRST_FILES = [
  "delivery",
  "once-per-version",
  "safety",
  "paths",
  "imports",
  "skills",
  "inspection",
  "settings",
  "compaction-and-resume",
  "fault-tolerance",
];
const EQUIVALENTS_FILE = join(ROOT, "tests", "mutants-equivalent.json");

export interface Mutant {
  line: number;
  operator: string;
  original: string;
  mutated: string;
}

export type Verdict = "killed" | "survived" | "timeout" | "no-typecheck";

export interface MutantResult extends Mutant {
  verdict: Verdict;
  /** The test file and test that failed first. */
  killedBy?: string;
  ms: number;
}

// ---------------------------------------------------------------------------------------------
// Candidates.

/** Marks the characters of a line that are code: not inside a string, template or comment. */
export function codeMask(line: string): boolean[] {
  const mask: boolean[] = [];
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      mask.push(false);
      if (ch === "\\") {
        mask.push(false);
        i++;
      } else if (ch === quote) quote = undefined;
      continue;
    }
    if (ch === "/" && line[i + 1] === "/") {
      while (mask.length < line.length) mask.push(false);
      break;
    }
    if (ch === '"' || ch === "'" || ch === "`") {
      quote = ch;
      mask.push(false);
      continue;
    }
    mask.push(true);
  }
  return mask;
}

const REPLACEMENTS: Array<[string, RegExp, (match: string) => string]> = [
  [
    "comparison flip",
    / (===|!==|<=|>=|<|>) /g,
    (m) => ({ " === ": " !== ", " !== ": " === ", " <= ": " < ", " >= ": " > ", " < ": " <= ", " > ": " >= " })[m]!,
  ],
  ["and/or swap", / (&&|\|\|) /g, (m) => (m === " && " ? " || " : " && ")],
  ["literal +1", /(?<![\w.$])\d+(?![\w.])/g, (m) => String(Number(m) + 1)],
  ["literal -1", /(?<![\w.$])\d+(?![\w.])/g, (m) => String(Number(m) - 1)],
  ["boolean flip", /\b(true|false)\b/g, (m) => (m === "true" ? "false" : "true")],
];

/** The single-line mutants of one source line. */
export function mutantsOfLine(text: string, line: number): Mutant[] {
  const trimmed = text.trim();
  if (trimmed === "" || /^(\/\/|\*|\/\*\*|import |export type |type |\}? ?from )/.test(trimmed)) return [];
  const mask = codeMask(text);
  const out: Mutant[] = [];
  const push = (operator: string, mutated: string) => {
    if (mutated !== text) out.push({ line, operator, original: text, mutated });
  };
  for (const [operator, pattern, replace] of REPLACEMENTS) {
    for (const match of text.matchAll(pattern)) {
      const at = match.index;
      if (!mask[at + match[0].length - 1] || !mask[at]) continue;
      push(operator, text.slice(0, at) + replace(match[0]) + text.slice(at + match[0].length));
    }
  }
  for (const match of text.matchAll(/\b(if|while) \(/g)) {
    const open = match.index + match[0].length - 1;
    const close = matchingParen(text, open, mask);
    if (close === undefined) continue;
    push("negated condition", `${text.slice(0, open + 1)}!(${text.slice(open + 1, close)})${text.slice(close)}`);
  }
  const ret = /^(\s*)return (?!undefined;)(.+);$/.exec(text);
  if (ret && mask[text.indexOf("return")]) {
    push("replaced return", `${ret[1]}return undefined;`);
    push("replaced return", `${ret[1]}return !(${ret[2]});`);
  }
  if (/^\s*[\w.?![\]()]+\.(set|add|push|delete)\(.*\);$/.test(text) && mask[text.search(/\S/)]) {
    push("deleted statement", text.replace(/\S.*$/, "void 0;"));
  }
  return out;
}

function matchingParen(text: string, open: number, mask: boolean[]): number | undefined {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (!mask[i]) continue;
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0) return i;
  }
  return undefined;
}

export function candidates(source: string, from = 1, to = Number.POSITIVE_INFINITY): Mutant[] {
  return source
    .split("\n")
    .flatMap((text, index) => (index + 1 >= from && index + 1 <= to ? mutantsOfLine(text, index + 1) : []));
}

/** `count` buckets of consecutive candidates, so a sample covers the whole range; each bucket shuffled. */
export function buckets(all: Mutant[], count: number, seed: number): Mutant[][] {
  const random = rng(seed);
  const n = Math.min(count, all.length);
  const result: Mutant[][] = [];
  for (let b = 0; b < n; b++) {
    const bucket = all.slice(Math.floor((b * all.length) / n), Math.floor(((b + 1) * all.length) / n));
    for (let i = bucket.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [bucket[i], bucket[j]] = [bucket[j]!, bucket[i]!];
    }
    result.push(bucket);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Running.

/** A copy of the project whose index.ts can be rewritten; node_modules is shared through a link. */
function scratchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "lazy-agents-mutants-"));
  // The project as git sees it, new untracked tests included.
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    encoding: "utf8",
  }).stdout;
  for (const name of listed.split("\0").filter((n) => n !== "" && existsSync(join(ROOT, n)))) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    cpSync(join(ROOT, name), join(dir, name));
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  writeFileSync(join(dir, "first-failure.mjs"), FIRST_FAILURE_REPORTER);
  return dir;
}

// Prints one line per failing test as soon as it fails, with its file, so the run can stop there.
const FIRST_FAILURE_REPORTER = `export default async function* (source) {
  for await (const event of source) {
    if (event.type === "test:fail" && !event.data.details?.error?.failureType?.includes("subtestsFailed")) {
      yield "FAIL\\t" + (event.data.file ?? "") + "\\t" + event.data.name + "\\n";
    }
  }
}
`;

function typechecks(dir: string): boolean {
  return spawnSync("bun", ["check", "--no-script"], { cwd: dir, stdio: "ignore" }).status === 0;
}

/**
 * Runs the test files two at a time, one `node --test` each, and stops everything at the first
 * failing test: a process per file reports at once, where one runner over all files holds back the
 * events of later files until earlier ones finish.
 */
/** Test processes of the current mutant, each the leader of its own process group. */
const running = new Set<ReturnType<typeof spawn>>();

function stopAll(): void {
  for (const child of running) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

function runSuite(dir: string, files: string[], timeoutMs: number): Promise<{ killedBy?: string; timedOut: boolean }> {
  return new Promise((done) => {
    const queue = [...files];
    let killedBy: string | undefined;
    let timedOut = false;
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      stopAll();
      done({ killedBy, timedOut });
    };
    const timer = setTimeout(() => {
      timedOut = true;
      finish();
    }, timeoutMs);
    const next = (): void => {
      if (finished) return;
      const file = queue.shift();
      if (file === undefined) {
        if (running.size === 0) finish();
        return;
      }
      const child = spawn(
        process.execPath,
        ["--test", "--test-reporter=./first-failure.mjs", `tests/${file}.test.ts`],
        { cwd: dir, detached: true, stdio: ["ignore", "pipe", "ignore"] },
      );
      running.add(child);
      let output = "";
      child.stdout!.setEncoding("utf8");
      child.stdout!.on("data", (chunk: string) => {
        output += chunk;
        const line = output.split("\n").find((l) => l.startsWith("FAIL\t"));
        if (line && killedBy === undefined) {
          killedBy = `${file}.test.ts: ${line.split("\t")[2]}`;
          finish();
        }
      });
      child.on("close", (code) => {
        running.delete(child);
        if (code !== 0 && code !== null && killedBy === undefined) {
          killedBy = `${file}.test.ts: exited with code ${code}`;
          finish();
        }
        next();
      });
    };
    next();
    next();
  });
}

/** Test files in running order; for a rerun, the newest first: they were written to kill these survivors. */
function testFiles(dir: string, newestFirst: boolean): string[] {
  const all = readdirSync(join(dir, "tests"))
    .filter((name) => name.endsWith(".test.ts"))
    .map((name) => name.slice(0, -".test.ts".length));
  if (newestFirst) {
    const mtime = (f: string) => statSync(join(ROOT, "tests", `${f}.test.ts`)).mtimeMs;
    return all.sort((a, b) => mtime(b) - mtime(a));
  }
  return [...FIRST_FILES.filter((f) => all.includes(f)), ...all.filter((f) => !FIRST_FILES.includes(f)).sort()];
}

interface Equivalent {
  original: string;
  mutated: string;
  why: string;
}

function loadEquivalents(): Equivalent[] {
  try {
    return JSON.parse(readFileSync(EQUIVALENTS_FILE, "utf8")) as Equivalent[];
  } catch {
    return [];
  }
}

const sameMutant = (a: Pick<Mutant, "original" | "mutated">, b: Pick<Mutant, "original" | "mutated">) =>
  a.original.trim() === b.original.trim() && a.mutated.trim() === b.mutated.trim();

async function runMutant(dir: string, source: string[], mutant: Mutant, files: string[], timeoutMs: number) {
  const started = Date.now();
  const lines = [...source];
  lines[mutant.line - 1] = mutant.mutated;
  writeFileSync(join(dir, "index.ts"), lines.join("\n"));
  if (!typechecks(dir)) return { ...mutant, verdict: "no-typecheck" as const, ms: Date.now() - started };
  const outcome = await runSuite(dir, files, timeoutMs);
  const verdict: Verdict = outcome.timedOut ? "timeout" : outcome.killedBy ? "killed" : "survived";
  // A file that kills goes first for the next mutant: neighbouring lines tend to die in the same file.
  const file = outcome.killedBy?.split(".test.ts")[0];
  if (file && files.includes(file)) files.splice(0, files.length, file, ...files.filter((f) => f !== file));
  return { ...mutant, verdict, killedBy: outcome.killedBy, ms: Date.now() - started };
}

/** `--buckets 50-99`: part of a sample, so that two machines (or two runs) can share one seed. */
function bucketRange(spec: string | undefined): [number, number?] {
  if (spec === undefined) return [0];
  const [from, to] = spec.split("-").map(Number);
  return [from ?? 0, to === undefined ? undefined : to + 1];
}

/**
 * A mutant of an earlier run at its line in the current source, which may have moved: the line
 * with the same text nearest to where it was (a note says when several match), if still there.
 */
function relocate(mutant: Mutant, source: string[]): Mutant[][] {
  const want = mutant.original.trim();
  const matches = source.flatMap((text, index) => (text.trim() === want ? [index + 1] : []));
  if (matches.length === 0) {
    console.log(`gone from index.ts, not rerun:\n  ${describe(mutant)}`);
    return [];
  }
  const line = matches.reduce((a, b) => (Math.abs(b - mutant.line) < Math.abs(a - mutant.line) ? b : a));
  if (matches.length > 1) console.log(`${matches.length} lines match, the nearest taken:\n  ${describe(mutant)}`);
  const original = source[line - 1]!;
  const indent = original.slice(0, original.length - original.trimStart().length);
  return [[{ ...mutant, line, original, mutated: indent + mutant.mutated.trim() }]];
}

function describe(m: Mutant): string {
  return `index.ts:${m.line} ${m.operator}\n    - ${m.original.trim()}\n    + ${m.mutated.trim()}`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      sample: { type: "string", default: "100" },
      seed: { type: "string" },
      lines: { type: "string" },
      list: { type: "boolean", default: false },
      rerun: { type: "string" },
      buckets: { type: "string" },
      report: { type: "string" },
      timeout: { type: "string", default: "180" },
      out: { type: "string", default: join(ROOT, ".mutants", "last.json") },
    },
  });
  const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Date.now() / 1000);
  const [from, to] = (values.lines ?? "1-").split("-").map((n) => (n === "" ? undefined : Number(n)));
  const sourceText = readFileSync(join(ROOT, "index.ts"), "utf8");
  const source = sourceText.split("\n");
  const all = candidates(sourceText, from ?? 1, to ?? Number.POSITIVE_INFINITY);
  if (values.report) {
    const results = mergedResults(values.report.split(","));
    summarize(results, `${results.length} mutants from ${values.report}`);
    return;
  }
  if (values.list) {
    for (const m of all) console.log(describe(m));
    console.log(`${all.length} candidates`);
    return;
  }
  const planned: Mutant[][] = values.rerun
    ? mergedResults(values.rerun.split(","))
        .filter((r) => r.verdict === "survived" && !loadEquivalents().some((e) => sameMutant(e, r)))
        .flatMap((r) => relocate(r, source))
    : buckets(all, Number(values.sample), seed).slice(...bucketRange(values.buckets));
  console.log(`mutants: seed ${seed}, ${planned.length} mutants from ${all.length} candidates`);
  const dir = scratchCopy();
  const files = testFiles(dir, values.rerun !== undefined);
  const results: MutantResult[] = [];
  const started = Date.now();
  mkdirSync(join(values.out, ".."), { recursive: true });
  const cleanUp = () => {
    stopAll();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("SIGINT", () => {
    cleanUp();
    process.exit(130);
  });
  process.once("SIGTERM", () => {
    cleanUp();
    process.exit(143);
  });
  try {
    for (const bucket of planned) {
      // Up to three tries per bucket for a mutant that typechecks.
      for (const mutant of bucket.slice(0, 3)) {
        const result = await runMutant(dir, source, mutant, files, Number(values.timeout) * 1000);
        if (result.verdict === "no-typecheck") continue;
        results.push(result);
        // Written after every mutant, so an interrupted run keeps what it found.
        writeFileSync(values.out, JSON.stringify({ seed, results }, null, 2));
        const note = result.killedBy ? `  (${result.killedBy})` : "";
        console.log(
          `[${results.length}/${planned.length}] ${result.verdict} ${(result.ms / 1000).toFixed(1)} s${note}\n  ${describe(result)}`,
        );
        break;
      }
    }
  } finally {
    cleanUp();
  }
  const wallS = (Date.now() - started) / 1000;
  writeFileSync(values.out, JSON.stringify({ seed, wallS, results }, null, 2));
  summarize(results, `seed ${seed}: ${results.length} mutants run in ${wallS.toFixed(0)} s`);
  console.log(`results: ${values.out}`);
}

/**
 * Results of several runs as one: a later file's verdict on the same mutant wins, so a run's
 * results followed by the rerun of its survivors give the run's score against the current tests.
 */
function mergedResults(paths: string[]): MutantResult[] {
  const byMutant = new Map<string, MutantResult>();
  for (const path of paths) {
    for (const r of (JSON.parse(readFileSync(path, "utf8")) as { results: MutantResult[] }).results)
      byMutant.set(`${r.original.trim()}\0${r.mutated.trim()}`, r);
  }
  return [...byMutant.values()];
}

function summarize(results: MutantResult[], heading: string): void {
  const equivalents = loadEquivalents();
  const killed = results.filter((r) => r.verdict !== "survived").length;
  const survivors = results.filter((r) => r.verdict === "survived");
  const judged = survivors.map((s) => ({ s, eq: equivalents.find((e) => sameMutant(e, s)) }));
  const equivalent = judged.filter((j) => j.eq).length;
  const pct = (a: number, b: number) => (b === 0 ? "n/a" : `${((100 * a) / b).toFixed(1)}%`);
  console.log(`\nSurvivors (${survivors.length}):`);
  for (const { s, eq } of judged) console.log(`  ${describe(s)}${eq ? `\n    equivalent: ${eq.why}` : ""}`);
  console.log(
    `\n${heading}: ${killed} killed, ${survivors.length} survived ` +
      `(${equivalent} judged equivalent in tests/mutants-equivalent.json)`,
  );
  console.log(
    `score: ${pct(killed, results.length)} of all, ${pct(killed, results.length - equivalent)} of behaviour-changing`,
  );
}

if (import.meta.main) await main();
