// Differential fuzzing: seeded random trees and access sequences, played against the extension
// (through Pi's real extension runner and real read, edit and write tools) and against the
// reference model. Used by tests/fuzz.test.ts (a few hundred cases) and tests/fuzz-cli.ts
// (`bun run fuzz -- --cases N --seed S`).

import {
  accessSync,
  constants,
  existsSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  type Stats as FsStats,
} from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { basename, dirname, join, posix, resolve } from "node:path";
import {
  alsoGovernsNotice,
  INSTRUCTIONS_INTRO,
  REMINDER_PREAMBLE,
  loadedNotice,
  REASONS,
  SKILLS_HEADER,
  SKILLS_INTRO,
} from "../config.ts";
import { createLazyAgents, REMINDER_OPEN, type LazyAgents } from "../index.ts";
import { callsOutside, fsError, interceptFileSystem, recordingFileSystem, type FsCall } from "./fs-seam.ts";
import { loadRunner, lockFile, type CallResult, type RunnerHarness, type Tree } from "./harness.ts";
import {
  bashWords,
  bashNamesInstruction,
  emptyExpected,
  isEmptyRecord,
  modelTarget,
  NAMES,
  ReferenceModel,
  showsText,
  type BashPart,
  type ExpectedRecord,
  type Shown,
} from "./reference-model.ts";
import { rng } from "./rng.ts";

// ---------------------------------------------------------------------------------------------
// Cases: plain data, so that a failing case can be shrunk, printed and replayed.

/** File content: text, raw bytes, or `size` bytes of one character (ending in `tail`, hex, if given). */
export type Content = string | { hex: string } | { fill: string; size: number; tail?: string };

export type Entry =
  | { kind: "file"; path: string; content: Content }
  | { kind: "dir"; path: string }
  | { kind: "link"; path: string; target: string }
  | { kind: "fifo"; path: string };

export type Call =
  | { tool: "read"; path: string; limit?: number; offset?: number }
  | { tool: "edit"; path: string; newText: string }
  /** `locked`: the target refuses writes while the call runs (read-only or immutable), so the write fails. */
  | { tool: "write"; path: string; content: string; locked?: boolean }
  | { tool: "bash"; parts: BashPart[] };

export type Step =
  /** `fault`: a cwd-relative instruction or skill file whose lstat fails with EIO during the call. */
  | { op: "call"; call: Call; fault?: string }
  | { op: "batch"; calls: Call[] }
  | { op: "put"; path: string; content: Content }
  | { op: "rm"; path: string }
  | { op: "link"; path: string; target: string }
  | { op: "mv"; path: string; to: string }
  | { op: "mkdir"; path: string }
  | { op: "touch"; path: string }
  | { op: "compact"; keep: number }
  | { op: "reload" };

/** Paths are cwd-relative; `{cwd}` and `{root}` stand for the case's directories. */
export interface Case {
  seed: number;
  entries: Entry[];
  steps: Step[];
}

// ---------------------------------------------------------------------------------------------
// Seeded generation.

const DIR_NAMES = ["a", "b", "src", "lib", "pkg", "node_modules", "dist", "..cache", "sp ace", "deep", ".agents"];
const NAME_WEIGHTS: Array<[string, number]> = [
  ["AGENTS.md", 6],
  ["AGENTS.override.md", 2],
  ["CLAUDE.md", 2],
  ["AGENTS.MD", 1],
  ["CLAUDE.MD", 1],
];

/**
 * FIFOs are made by hard-linking one template, made once per process with `mkfifo` in its own
 * temporary folder (removed at exit): a link is a syscall, a spawn per FIFO is not.
 */
let fifoTemplate: string | null | undefined;
function fifoTemplatePath(): string | null {
  if (fifoTemplate === undefined) {
    try {
      const dir = mkdtempSync(join(scratchBase(), "lazy-agents-fifo-"));
      process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
      execFileSync("mkfifo", [join(dir, "fifo")], { stdio: "ignore" });
      fifoTemplate = join(dir, "fifo");
    } catch {
      fifoTemplate = null;
    }
  }
  return fifoTemplate;
}

function canMakeFifo(): boolean {
  return fifoTemplatePath() !== null;
}

function makeFifo(path: string): void {
  const template = fifoTemplatePath();
  if (template === null) return;
  try {
    linkSync(template, path);
  } catch {
    execFileSync("mkfifo", [path], { stdio: "ignore" });
  }
}

export interface GenerateOptions {
  steps?: number;
  fifos?: boolean;
}

export function generateCase(seed: number, options: GenerateOptions = {}): Case {
  const random = rng(seed);
  const chance = (p: number) => random() < p;
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const weighted = (items: Array<[string, number]>): string => {
    let r = random() * items.reduce((sum, [, w]) => sum + w, 0);
    for (const [item, w] of items) if ((r -= w) < 0) return item;
    return items[0]![0];
  };
  let counter = 0;
  const token = () => `T${seed.toString(36)}x${(counter++).toString(36)}`;
  const join2 = (dir: string, name: string) => (dir === "" ? name : `${dir}/${name}`);

  const instructionContent = (): Content => {
    const r = random();
    const t = token();
    if (r < 0.45) return `${t}\n`;
    if (r < 0.52) return `\uFEFF${t} bom\r\nline two\r\n`;
    if (r < 0.56) return `${t} cr\rline two\r`;
    if (r < 0.59) return `\uFEFF\uFEFF${t} two boms\n`;
    if (r < 0.62) return "";
    if (r < 0.65) return `${t}\n\n\n`;
    if (r < 0.7) return `${t} é ü ✓ 𝄞\n`;
    if (r < 0.76) return { fill: "x", size: 64 * 1024 + 1 + int(3) };
    // Exactly at the cap but invalid, and one byte over: refused as not UTF-8, then as too large.
    if (r < 0.78) return { fill: "x", size: 64 * 1024, tail: "ff" };
    if (r < 0.8) return { fill: "x", size: 64 * 1024 + 1, tail: "ff" };
    if (r < 0.84) return { hex: "41ff42" };
    if (r < 0.87) return { hex: "41e282" };
    if (r < 0.9) return { hex: "c0af0a" };
    return `${t} ${"y".repeat(int(200))}\n`;
  };
  const skillContent = (dirName: string): Content => {
    const r = random();
    const t = token();
    if (r < 0.6) return `---\nname: ${dirName}-${t}\ndescription: Skill ${t}\n---\nBODY ${t}\n`;
    if (r < 0.7) return `---\ndescription: Unnamed ${t}\n---\nBODY\n`;
    if (r < 0.8) return `---\nname: nodesc\n---\nBODY\n`;
    if (r < 0.9) return `---\nname: hid\ndescription: Hidden ${t}\ndisable-model-invocation: true\n---\n`;
    return { fill: "s", size: 64 * 1024 + 5 };
  };

  // Folders below cwd.
  const dirs: string[] = [""];
  const dirCount = 2 + int(6);
  for (let i = 0; i < dirCount * 3 && dirs.length <= dirCount; i++) {
    const parent = pick(dirs);
    if (parent.split("/").length >= 4) continue;
    const path = join2(parent, pick(DIR_NAMES));
    if (!dirs.includes(path)) dirs.push(path);
  }
  const below = dirs.filter((d) => d !== "");

  const entries: Entry[] = [
    { kind: "file", path: "../outside/AGENTS.md", content: "OUTSIDE-SECRET\n" },
    { kind: "file", path: "../outside/x.ts", content: "outside\n" },
    { kind: "file", path: "../outside/sub/CLAUDE.md", content: "OUTSIDE-SECRET-SUB\n" },
    {
      kind: "file",
      path: "../outside/skills/out/SKILL.md",
      content: "---\nname: outside\ndescription: OUTSIDE-SECRET skill\n---\n",
    },
  ];
  const instructionPaths: string[] = [];
  const filePaths: string[] = [];
  const linkDirs: string[] = [];
  const skillPaths: string[] = [];

  if (chance(0.5)) entries.push({ kind: "file", path: "AGENTS.md", content: `${token()} root, Pi's own\n` });
  if (chance(0.2))
    entries.push({ kind: "file", path: ".agents/skills/rootskill/SKILL.md", content: skillContent("rootskill") });
  entries.push({ kind: "file", path: "f.ts", content: "root\n" });
  for (const dir of below) {
    entries.push({ kind: "dir", path: dir });
    if (chance(0.85)) {
      entries.push({ kind: "file", path: join2(dir, "f.ts"), content: `f ${dir}\n` });
      filePaths.push(join2(dir, "f.ts"));
    }
    if (chance(0.6)) {
      const first = weighted(NAME_WEIGHTS);
      entries.push({ kind: "file", path: join2(dir, first), content: instructionContent() });
      instructionPaths.push(join2(dir, first));
      if (chance(0.3)) {
        const second = weighted(NAME_WEIGHTS);
        if (second !== first) {
          entries.push({ kind: "file", path: join2(dir, second), content: instructionContent() });
          instructionPaths.push(join2(dir, second));
        }
      }
    }
    if (chance(0.2)) {
      const name = pick(["deploy", "lint", "review"]);
      const path = join2(dir, `.agents/skills/${name}/SKILL.md`);
      entries.push({ kind: "file", path, content: skillContent(name) });
      skillPaths.push(path);
      if (chance(0.4)) {
        const loose = join2(dir, `.agents/skills/group/loose${int(3)}.md`);
        entries.push({ kind: "file", path: loose, content: skillContent("group") });
        skillPaths.push(loose);
      }
      if (chance(0.3))
        entries.push({ kind: "file", path: join2(dir, ".agents/skills/top.md"), content: skillContent("top") });
    }
  }

  const relativeTo = (from: string, to: string): string => {
    const up = from === "" ? [] : from.split("/").map(() => "..");
    const target = [...up, ...(to === "" ? [] : to.split("/"))].join("/");
    return target === "" ? "." : target;
  };
  const depthUp = (dir: string) =>
    dir === ""
      ? ""
      : dir
          .split("/")
          .map(() => "..")
          .join("/") + "/";

  const linkCount = int(5);
  for (let i = 0; i < linkCount && below.length > 0; i++) {
    const dir = pick(below);
    const kind = int(11);
    if (kind === 0) {
      const to = pick(dirs);
      const path = join2(dir, `ln${i}`);
      entries.push({ kind: "link", path, target: relativeTo(dir, to) });
      linkDirs.push(path);
    } else if (kind === 1) {
      const path = join2(dir, `out${i}`);
      entries.push({ kind: "link", path, target: chance(0.5) ? "{root}/outside" : `${depthUp(dir)}../outside` });
      linkDirs.push(path);
    } else if (kind === 2 && instructionPaths.length > 0) {
      const to = pick(instructionPaths);
      const path = join2(dir, weighted(NAME_WEIGHTS));
      entries.push({
        kind: "link",
        path,
        target: relativeTo(dir, dirname(to) === "." ? "" : dirname(to)) + "/" + basename(to),
      });
      instructionPaths.push(path);
    } else if (kind === 3) {
      const path = join2(dir, weighted(NAME_WEIGHTS));
      entries.push({ kind: "link", path, target: pick(["{root}/outside/AGENTS.md", "/dev/null", "/dev/zero"]) });
      instructionPaths.push(path);
    } else if (kind === 4) {
      const path = join2(dir, weighted(NAME_WEIGHTS));
      entries.push({ kind: "link", path, target: "nowhere.md" });
      instructionPaths.push(path);
    } else if (kind === 5) {
      const name = weighted(NAME_WEIGHTS);
      entries.push({ kind: "link", path: join2(dir, name), target: name });
      instructionPaths.push(join2(dir, name));
    } else if (kind === 6) {
      entries.push({ kind: "link", path: join2(dir, "l1"), target: "l2" });
      entries.push({ kind: "link", path: join2(dir, "l2"), target: "l1" });
      linkDirs.push(join2(dir, "l1"));
    } else if (kind === 7) {
      entries.push({ kind: "dir", path: join2(dir, "AGENTS.md") });
      entries.push({ kind: "file", path: join2(dir, "CLAUDE.md"), content: instructionContent() });
      instructionPaths.push(join2(dir, "CLAUDE.md"));
    } else if (kind === 8 && instructionPaths.length > 0) {
      const to = pick(instructionPaths);
      const path = join2(dir, `alias${i}.ts`);
      entries.push({ kind: "link", path, target: resolveRel(dir, to) });
      filePaths.push(path);
    } else if (kind === 9) {
      entries.push({ kind: "link", path: join2(dir, ".agents"), target: "{root}/outside/skills-parent" });
      entries.push({ kind: "dir", path: "../outside/skills-parent/skills/o" });
      entries.push({
        kind: "file",
        path: "../outside/skills-parent/skills/o/SKILL.md",
        content: "---\nname: o\ndescription: OUTSIDE-SECRET linked skill\n---\n",
      });
    } else if (kind === 10 && (options.fifos ?? true) && canMakeFifo()) {
      const path = join2(dir, pick(["AGENTS.md", "AGENTS.override.md"]));
      entries.push({ kind: "fifo", path });
    }
  }

  // Paths the steps touch.
  const dirOf = () => pick(dirs);
  const accessPath = (): string => {
    const r = random();
    if (r < 0.35 && filePaths.length > 0) return pick(filePaths);
    if (r < 0.5 && instructionPaths.length > 0) return pick(instructionPaths);
    if (r < 0.58 && linkDirs.length > 0) return `${pick(linkDirs)}/f.ts`;
    if (r < 0.63) return join2(dirOf(), "missing.ts");
    if (r < 0.68 && skillPaths.length > 0) return pick(skillPaths);
    if (r < 0.72) return `../repo/${join2(dirOf(), "f.ts")}`;
    if (r < 0.76) return `{cwd}/${join2(dirOf(), "f.ts")}`;
    if (r < 0.79) return pick(["../outside/x.ts", "{root}/outside/x.ts", "../outside/AGENTS.md", "/etc/hostname"]);
    if (r < 0.82) {
      const d = dirOf();
      return d === "" ? "./f.ts" : `${d}/../${d}/f.ts`;
    }
    return join2(dirOf(), pick(["f.ts", "g.ts", weighted(NAME_WEIGHTS)]));
  };
  const writablePath = (): string => {
    const r = random();
    if (r < 0.3) return join2(dirOf(), weighted(NAME_WEIGHTS));
    if (r < 0.45) return join2(join2(dirOf(), `new${int(3)}`), pick(["AGENTS.md", "n.ts", "CLAUDE.md"]));
    if (r < 0.55 && instructionPaths.length > 0) return pick(instructionPaths);
    return join2(dirOf(), pick(["f.ts", "g.ts", "h.ts"]));
  };
  const bashPart = (): BashPart => {
    const r = random();
    if (r < 0.3) return { kind: "read", path: chance(0.3) ? dirOf() : accessPath() };
    if (r < 0.42) return { kind: "glob", dir: dirOf() };
    if (r < 0.6) {
      const path = chance(0.6) ? writablePath() : join2(join2(dirOf(), `new${int(3)}`), "w.txt");
      return { kind: "write", path };
    }
    if (r < 0.75)
      return { kind: "cd", dir: dirOf(), path: pick(["f.ts", "g.ts", "missing.ts", weighted(NAME_WEIGHTS)]) };
    if (r < 0.87) return { kind: "heredoc", write: join2(dirOf(), "h.txt"), hidden: accessPath() };
    return { kind: "script", path: accessPath() };
  };
  const call = (): Call => {
    if (chance(0.15)) return { tool: "bash", parts: Array.from({ length: 1 + int(3) }, bashPart) };
    const r = random();
    if (r < 0.6) {
      const path = accessPath();
      const partial = random();
      if (partial < 0.1) return { tool: "read", path, limit: 1 };
      if (partial < 0.15) return { tool: "read", path, offset: 2 };
      return { tool: "read", path };
    }
    if (r < 0.78)
      return { tool: "edit", path: random() < 0.5 ? accessPath() : writablePath(), newText: `${token()} edited` };
    const content = chance(0.2) ? `\uFEFF${token()} written\r\n` : `${token()} written\n`;
    if (instructionPaths.length > 0 && chance(0.15))
      return { tool: "write", path: pick(instructionPaths), content, locked: true };
    return { tool: "write", path: writablePath(), content };
  };
  const batchCall = (): Call => {
    const r = random();
    const path = accessPath();
    if (r < 0.75) return { tool: "read", path };
    if (r < 0.88) return { tool: "edit", path: join2(dirOf(), "f.ts"), newText: `${token()}` };
    return { tool: "write", path: join2(dirOf(), pick(["g.ts", "h.ts"])), content: `${token()}\n` };
  };

  const stepCount = options.steps ?? 6 + int(10);
  const steps: Step[] = [];
  for (let i = 0; i < stepCount; i++) {
    const r = random();
    if (r < 0.5) {
      const faultable = [...instructionPaths, ...skillPaths];
      const step: Step = { op: "call", call: call() };
      if (faultable.length > 0 && chance(0.2)) step.fault = pick(faultable);
      steps.push(step);
    } else if (r < 0.6) steps.push({ op: "batch", calls: Array.from({ length: 2 + int(5) }, batchCall) });
    else if (r < 0.72) {
      const path =
        chance(0.6) && instructionPaths.length > 0 ? pick(instructionPaths) : join2(dirOf(), weighted(NAME_WEIGHTS));
      steps.push({ op: "put", path, content: instructionContent() });
      if (!instructionPaths.includes(path)) instructionPaths.push(path);
    } else if (r < 0.8) {
      const targets = [...instructionPaths, ...skillPaths, ...below, ...linkDirs];
      if (targets.length > 0) steps.push({ op: "rm", path: pick(targets) });
    } else if (r < 0.84 && instructionPaths.length > 0) steps.push({ op: "touch", path: pick(instructionPaths) });
    else if (r < 0.88) {
      const dir = join2(dirOf(), `scope${i}`);
      steps.push({ op: "mkdir", path: dir });
      steps.push({ op: "put", path: join2(dir, weighted(NAME_WEIGHTS)), content: instructionContent() });
      steps.push({ op: "put", path: join2(dir, "f.ts"), content: "new scope\n" });
      filePaths.push(join2(dir, "f.ts"));
    } else if (r < 0.91) {
      const dir = pick(below.length > 0 ? below : [""]);
      const name = pick(["deploy", "lint", "fresh"]);
      const path = join2(dir, `.agents/skills/${name}/SKILL.md`);
      steps.push({ op: "put", path, content: skillContent(name) });
      skillPaths.push(path);
    } else if (r < 0.93 && instructionPaths.length > 0) {
      const to = pick(instructionPaths);
      const dir = dirOf();
      steps.push({ op: "link", path: join2(dir, weighted(NAME_WEIGHTS)), target: resolveRel(dir, to) });
    } else if (r < 0.95 && instructionPaths.length > 0) {
      // A file replaced by a directory.
      const path = pick(instructionPaths);
      steps.push({ op: "rm", path });
      steps.push({ op: "mkdir", path });
    } else if (r < 0.96 && below.length > 1) {
      // A folder moved, or replaced by a link to another folder (and so turned from a real
      // folder into a link on the chain).
      const from = pick(below);
      const other = pick(below.filter((d) => d !== from && !d.startsWith(`${from}/`) && !from.startsWith(`${d}/`)));
      if (other === undefined) continue;
      if (chance(0.5))
        steps.push({ op: "mv", path: from, to: join2(dirname(from) === "." ? "" : dirname(from), `moved${i}`) });
      else
        steps.push({ op: "link", path: from, target: resolveRel(dirname(from) === "." ? "" : dirname(from), other) });
    } else if (r < 0.985) steps.push({ op: "compact", keep: random() });
    else steps.push({ op: "reload" });
  }
  return { seed, entries, steps };
}

/** `to` (cwd-relative) as a link target relative to the folder `from`. */
function resolveRel(from: string, to: string): string {
  const up = from === "" ? [] : from.split("/").map(() => "..");
  return [...up, ...to.split("/")].join("/");
}

// ---------------------------------------------------------------------------------------------
// Playing a case.

export interface Failure {
  seed: number;
  step: number;
  message: string;
}

function bytesOf(content: Content): Uint8Array | string {
  if (typeof content === "string") return content;
  if ("hex" in content) return Buffer.from(content.hex, "hex");
  const tail = Buffer.from(content.tail ?? "", "hex");
  const body = Buffer.from(content.fill.repeat(content.size), "utf8").subarray(0, content.size - tail.length);
  return Buffer.concat([body, tail]);
}

function expand(path: string, tree: Tree): string {
  return path.replaceAll("{cwd}", tree.cwd).replaceAll("{root}", tree.root);
}

/** Mutations stay inside cwd: a path whose folder leads out (through a link) is left alone. */
function safeToMutate(tree: Tree, rel: string): boolean {
  const abs = resolve(tree.cwd, rel);
  if (!abs.startsWith(tree.cwd + "/")) return false;
  let dir = dirname(abs);
  while (!existsSync(dir)) dir = dirname(dir);
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return false;
  }
  return real === tree.cwd || real.startsWith(tree.cwd + "/");
}

/** Writing to a FIFO would block: one in the way is removed first. */
function clearFifo(abs: string): void {
  try {
    if (!statSync(abs).isFile()) rmSync(abs, { force: true });
  } catch {
    // Nothing there, or a dangling link: writeFileSync copes.
  }
}

function materialize(tree: Tree, entries: Entry[]): void {
  for (const entry of entries) {
    const abs = resolve(tree.cwd, expand(entry.path, tree));
    try {
      if (entry.kind === "file") clearFifo(abs);
      mkdirSync(dirname(abs), { recursive: true });
      if (entry.kind === "dir") mkdirSync(abs, { recursive: true });
      else if (entry.kind === "file") writeFileSync(abs, bytesOf(entry.content));
      else if (entry.kind === "link") symlinkSync(expand(entry.target, tree), abs);
      else makeFifo(abs);
    } catch {
      // An entry that cannot be made (a name taken, a parent that is a file) is simply absent.
    }
  }
}

/**
 * Gives every entry below cwd whose timestamps the step changed a fresh, unique, made-up mtime.
 * Coarse filesystem clocks could otherwise hide a change inside one tick (a limit the README
 * states); the fuzzer tests the rules, not the clock.
 */
function stampChanges(tree: Tree, clock: { next: number; seen: Map<string, number> }): void {
  const visit = (dir: string): void => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      let stats;
      try {
        stats = lstatSync(path);
      } catch {
        continue;
      }
      if (stats.isFIFO()) continue;
      if (clock.seen.get(path) !== stats.mtimeMs) {
        const when = clock.next++;
        try {
          if (stats.isSymbolicLink()) lutimesSync(path, when, when);
          else utimesSync(path, when, when);
          clock.seen.set(path, lstatSync(path).mtimeMs);
        } catch {
          // Gone meanwhile.
        }
      }
      if (stats.isDirectory()) visit(path);
    }
  };
  visit(tree.cwd);
  const rootStats = lstatSync(tree.cwd);
  if (clock.seen.get(tree.cwd) !== rootStats.mtimeMs) {
    const when = clock.next++;
    utimesSync(tree.cwd, when, when);
    clock.seen.set(tree.cwd, lstatSync(tree.cwd).mtimeMs);
  }
}

/** Reads, compactions and reloads leave the tree as it was. */
function changesTree(step: Step): boolean {
  if (step.op === "call") return step.call.tool !== "read";
  if (step.op === "batch") return step.calls.some((call) => call.tool !== "read");
  return step.op !== "compact" && step.op !== "reload";
}

function mutate(tree: Tree, step: Step): void {
  if (!("path" in step)) return;
  const rel = expand(step.path, tree);
  if (!safeToMutate(tree, rel)) return;
  const abs = resolve(tree.cwd, rel);
  try {
    if (step.op === "put") {
      clearFifo(abs);
      mkdirSync(dirname(abs), { recursive: true });
      writeFileSync(abs, bytesOf(step.content));
    } else if (step.op === "rm") rmSync(abs, { recursive: true, force: true });
    else if (step.op === "mv") {
      const to = expand(step.to, tree);
      if (safeToMutate(tree, to) && !existsSync(resolve(tree.cwd, to))) renameSync(abs, resolve(tree.cwd, to));
    } else if (step.op === "mkdir") mkdirSync(abs, { recursive: true });
    else if (step.op === "link") {
      rmSync(abs, { recursive: true, force: true });
      mkdirSync(dirname(abs), { recursive: true });
      symlinkSync(expand(step.target, tree), abs);
    } else if (step.op === "touch") {
      if (existsSync(abs)) {
        const stats = lstatSync(abs);
        utimesSync(abs, stats.atime, new Date(stats.mtimeMs + 1));
      }
    }
  } catch {
    // A mutation that cannot happen (a parent that is a file) leaves the tree as it was.
  }
}

/** A FIFO or device would block the real tools: such a target is not called at all. */
function blocksTools(tree: Tree, path: string): boolean {
  try {
    const stats = statSync(resolve(tree.cwd, path));
    return !stats.isFile() && !stats.isDirectory();
  } catch {
    return false;
  }
}

/** The tool input for a call, with an edit's old text taken from the file as it is now. */
function toolInput(tree: Tree, call: Call): Record<string, unknown> {
  if (call.tool === "bash") return { command: bashCommand(tree, call.parts) };
  let path = expand(call.path, tree);
  if (blocksTools(tree, path)) path = "fifo-stand-in/missing.ts";
  if (call.tool === "read") {
    const input: Record<string, unknown> = { path };
    if (call.limit !== undefined) input.limit = call.limit;
    if (call.offset !== undefined) input.offset = call.offset;
    return input;
  }
  if (call.tool === "write") return { path, content: call.content };
  let oldText = "NOT-IN-THE-FILE";
  try {
    const abs = resolve(tree.cwd, path);
    const stats = statSync(abs);
    if (stats.isFile() && stats.size <= 4096) {
      const text = readFileSync(abs, "utf8").replace(/^\uFEFF/, "");
      const first = text.split(/\r?\n|\r/)[0] ?? "";
      if (first !== "") oldText = first;
    }
  } catch {
    // Missing or unreadable: the edit fails, and an edit activates anyway.
  }
  return { path, edits: [{ oldText, newText: call.newText }] };
}

/** A part's paths with `{cwd}` and `{root}` filled in; a write that could leave cwd or block goes to /dev/null. */
function bashParts(tree: Tree, parts: BashPart[]): BashPart[] {
  const safeWrite = (path: string): string => {
    const rel = expand(path, tree);
    const abs = resolve(tree.cwd, rel);
    let link = false;
    try {
      link = lstatSync(abs).isSymbolicLink();
    } catch {
      // Nothing there: the redirect creates it, or fails in a folder that does not exist.
    }
    return link || blocksTools(tree, rel) || !safeToMutate(tree, rel) ? "/dev/null" : rel;
  };
  return parts.map((part): BashPart => {
    if (part.kind === "write") return { kind: "write", path: safeWrite(part.path) };
    if (part.kind === "heredoc") return { ...part, write: safeWrite(part.write), hidden: expand(part.hidden, tree) };
    if (part.kind === "glob") return { kind: "glob", dir: expand(part.dir, tree) };
    if (part.kind === "cd") return { kind: "cd", dir: expand(part.dir, tree), path: part.path };
    return { ...part, path: expand(part.path, tree) };
  });
}

const shellQuote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;

/** The command line of a bash call: one line per part. Reads use `test -e`, which opens nothing. */
function bashCommand(tree: Tree, parts: BashPart[]): string {
  return bashParts(tree, parts)
    .map((part) => {
      if (part.kind === "read") return `test -e ${shellQuote(part.path)}`;
      if (part.kind === "glob") return part.dir === "" ? "true *.ts" : `true ${shellQuote(part.dir)}/*.ts`;
      if (part.kind === "write") return `true > ${shellQuote(part.path)}`;
      if (part.kind === "cd")
        return `(cd ${shellQuote(part.dir === "" ? "." : part.dir)} && true ${shellQuote(part.path)})`;
      if (part.kind === "heredoc")
        return `cat > ${shellQuote(part.write)} <<'EOF'\ntest -e ${shellQuote(part.hidden)}\nEOF`;
      return `bash -c "test -e ${shellQuote(part.path)}"`;
    })
    .join("\n");
}

/** A batch must not change instruction files or skills while it runs: unsafe calls become reads. */
function batchSafe(tree: Tree, call: Call): Call {
  if (call.tool === "read" || call.tool === "bash") return call;
  const abs = resolve(tree.cwd, expand(call.path, tree));
  const name = basename(abs);
  const unsafe =
    NAMES.includes(name) ||
    name.endsWith(".md") ||
    abs.includes("/.agents") ||
    !existsSync(dirname(abs)) ||
    (existsSync(abs) && lstatSync(abs).isSymbolicLink()) ||
    !safeToMutate(tree, expand(call.path, tree));
  return unsafe ? { tool: "read", path: call.path } : call;
}

interface Played {
  id: string;
  call: Call;
  input: Record<string, unknown>;
  target?: string;
  viewsBefore: ReturnType<ReferenceModel["views"]>;
  instructionTargetBefore?: string;
  result?: CallResult;
}

interface Session {
  tree: Tree;
  h: RunnerHarness;
  engine: LazyAgents;
  model: ReferenceModel;
  /** Session entry ids of the appended tool results and the model's record for each. */
  results: Array<{ id: string; record: ExpectedRecord }>;
  keptFrom: number;
  stats?: Stats;
  order: string[];
  /** The absolute path whose lstat fails with EIO while the current call runs. */
  fault: { path?: string };
}

let callIds = 0;

function prepare(s: Session, call: Call): Played {
  const input = toolInput(s.tree, call);
  if (call.tool === "bash") {
    const words = bashWords(bashParts(s.tree, call.parts), s.tree.cwd);
    return { id: `fz-${++callIds}`, call, input, viewsBefore: s.model.bashViews(words, true) };
  }
  const target = modelTarget(input.path, s.tree.cwd);
  const folder = target === undefined ? undefined : s.model.targetFolder(target);
  return {
    id: `fz-${++callIds}`,
    call,
    input,
    target,
    viewsBefore: s.model.views(folder, true),
    instructionTargetBefore: target === undefined ? undefined : s.model.instructionTarget(target),
  };
}

/** The model's record for a call that has run (empty when the call activates nothing). */
function expectFor(s: Session, played: Played): ExpectedRecord {
  const { call, result, target } = played;
  const empty = emptyExpected();
  if (result && call.tool === "bash") {
    const parts = bashParts(s.tree, call.parts);
    const after = bashNamesInstruction(parts, s.tree.cwd);
    return s.model.plan(after ? s.model.bashViews(bashWords(parts, s.tree.cwd), true) : played.viewsBefore);
  }
  if (!result || target === undefined || call.tool === "bash") return empty;
  if (call.tool === "read" && result.isError) return empty;
  let views = played.viewsBefore;
  let instructionTarget = played.instructionTargetBefore;
  if (call.tool === "read") instructionTarget ??= s.model.readThrough(target, views);
  // A call's chain is viewed at its result: an edit or write, also through a link, is judged by the files and
  // folders as it left them, the folders it created included.
  if (call.tool !== "read") {
    views = s.model.views(s.model.targetFolder(target), true);
    instructionTarget = s.model.instructionTarget(target, true);
  }
  const shown: Shown = {};
  if (instructionTarget !== undefined) {
    // A failed write showed nothing of the file.
    if (call.tool === "write") {
      if (!result.isError) shown.whole = instructionTarget;
    } else if (call.tool === "read") {
      const truncated =
        (result.details as { truncation?: { truncated?: boolean } } | undefined)?.truncation?.truncated === true;
      if (call.limit !== undefined || call.offset !== undefined || truncated) shown.part = instructionTarget;
      else shown.whole = instructionTarget;
    }
  }
  return s.model.plan(views, shown);
}

const sortBy = <T>(items: T[], key: (item: T) => string) => [...items].sort((a, b) => (key(a) < key(b) ? -1 : 1));

/** Differences between what the extension did and what the model expects; empty when equal. */
function compare(s: Session, played: Played, expected: ExpectedRecord, notifications: string[]): string[] {
  const problems: string[] = [];
  const result = played.result!;
  const actual = (result.details as { lazyAgents?: Record<string, unknown[]> } | undefined)?.lazyAgents;
  const label = `${played.call.tool} ${JSON.stringify(played.input.path ?? played.input.command)}`;
  if (isEmptyRecord(expected)) {
    if (actual !== undefined) problems.push(`${label}: expected no record, got ${JSON.stringify(actual)}`);
  } else if (actual === undefined) {
    problems.push(`${label}: expected ${JSON.stringify(summarize(expected))}, got no record`);
  } else {
    const want = JSON.stringify(summarize(expected));
    const got = JSON.stringify(summarizeActual(actual));
    if (want !== got) problems.push(`${label}: record differs\n  expected ${want}\n  actual   ${got}`);
  }
  const reminderBlock = result.content.at(-1);
  const hasReminder = reminderBlock?.type === "text" && reminderBlock.text?.startsWith(REMINDER_OPEN) === true;
  const own = hasReminder ? result.content.slice(0, -1) : result.content;
  if (JSON.stringify(own) !== JSON.stringify(result.original))
    problems.push(`${label}: the tool's own content changed`);
  if (showsText(expected) !== hasReminder)
    problems.push(
      `${label}: expected ${showsText(expected) ? "a" : "no"} reminder, got ${hasReminder ? "one" : "none"}`,
    );
  if (hasReminder && showsText(expected))
    problems.push(...checkReminder(label, reminderBlock!.text!, expected, s.tree));
  const expectedWarnings = sortBy(expectedNotifications(expected), (x) => x);
  if (JSON.stringify(sortBy(notifications, (x) => x)) !== JSON.stringify(expectedWarnings))
    problems.push(`${label}: warnings ${JSON.stringify(notifications)} expected ${JSON.stringify(expectedWarnings)}`);
  for (const warning of notifications) {
    if (warning.includes(s.tree.root) || LEAK.test(warning)) problems.push(`${label}: a warning leaks: ${warning}`);
  }
  return problems;
}

/** File-content tokens, text from outside cwd and exception text: never in a warning. */
const LEAK = /\bT[0-9a-z]+x[0-9a-z]+\b|SECRET|Error|\b(EACCES|EIO|ENAMETOOLONG|ELOOP|ENOENT|ENOTDIR|EISDIR|EPERM)\b/;

/** What the user is told after one call: each refusal once, and the turn's one notification of what it loaded. */
function expectedNotifications(record: ExpectedRecord): string[] {
  return [...expectedWarningsOf(record), ...expectedLoaded([record])];
}

function expectedWarningsOf(record: ExpectedRecord): string[] {
  const unreadable = (record.unreadable ?? []).map((path) => ({ path, reason: "unreadable" as const }));
  const refused = [...record.skipped, ...unreadable];
  return refused.map((skip) => `pi-lazy-agents: ${skip.path} was not loaded: ${REASONS[skip.reason]}`);
}

/** One notification for a whole turn: its files, then its skills, each path once, in path order, counted. */
function expectedLoaded(records: ExpectedRecord[]): string[] {
  const paths = (all: string[]) => [...new Set(all)].sort();
  const files = paths(records.flatMap((r) => r.files.filter((f) => f.via === "reminder").map((f) => f.path)));
  const skills = paths(records.flatMap((r) => r.skills.map((k) => k.path)));
  if (files.length + skills.length === 0) return [];
  return [loadedNotice({ files: files.length, rules: 0, skills: skills.length }, [...files, ...skills])];
}

function summarize(record: ExpectedRecord) {
  return {
    files: record.files.map((f) => [f.path, f.scope, f.version, f.bytes, f.via]),
    skills: record.skills.map((k) => [k.path, k.name, k.scope]),
    retracted: sortBy(record.retracted, (r) => r.path).map((r) => [r.path, r.scope]),
    retractedSkills: sortBy(record.retractedSkills, (r) => r.path).map((r) => [r.path, r.scope]),
    skipped: sortBy(record.skipped, (r) => r.path).map((r) => [r.path, r.reason]),
    alsoGoverns: record.alsoGoverns.map((r) => [r.path, r.scope]),
    explained: record.explained,
  };
}

function summarizeActual(record: Record<string, unknown[]>) {
  const list = <T>(key: string) => (record[key] ?? []) as T[];
  type F = { path: string; scope: string; version: string; bytes: number; via: string; truncated?: boolean };
  return {
    files: list<F>("files").map((f) => [f.path, f.scope, f.version, f.bytes, f.via]),
    skills: list<{ path: string; name: string; scope: string }>("skills").map((k) => [k.path, k.name, k.scope]),
    retracted: sortBy(list<{ path: string; scope: string }>("retracted"), (r) => r.path).map((r) => [r.path, r.scope]),
    retractedSkills: sortBy(list<{ path: string; scope: string }>("retractedSkills"), (r) => r.path).map((r) => [
      r.path,
      r.scope,
    ]),
    skipped: sortBy(list<{ path: string; reason: string }>("skipped"), (r) => r.path).map((r) => [r.path, r.reason]),
    alsoGoverns: list<{ path: string; scope: string }>("alsoGoverns").map((r) => [r.path, r.scope]),
    explained: list<string>("explained"),
  };
}

function checkReminder(label: string, reminder: string, expected: ExpectedRecord, tree: Tree): string[] {
  const problems: string[] = [];
  const appended = expected.files.filter((f) => f.via === "reminder");
  const blocks = reminder.split("<file ").length - 1;
  if (blocks !== appended.length) problems.push(`${label}: ${blocks} instruction blocks, expected ${appended.length}`);
  for (const file of appended) {
    // A file names its scope only when it governs another folder than its own (one linked there).
    const scope = posix.dirname(file.path) === file.scope ? "" : ` scope="${file.scope}/**"`;
    const header = `<file path="${file.path}"${scope}${file.supersedes ? ' supersedes="earlier version"' : ""}>\n`;
    const start = reminder.indexOf(header);
    if (start === -1) {
      problems.push(`${label}: no block for ${file.path} (supersedes: ${file.supersedes})`);
      continue;
    }
    const body = reminder.slice(start + header.length, reminder.indexOf("\n</file>", start));
    if (body !== file.text.replace(/\n+$/, ""))
      problems.push(`${label}: ${file.path} text differs: ${JSON.stringify(body)}`);
  }
  problems.push(...checkOpenings(label, reminder, expected));
  const lines = reminder.split("\n").filter((line) => line.startsWith("- "));
  const wanted = [
    ...expected.skills.map((k) => {
      const scope = k.path.startsWith(`${k.scope}/.agents/skills/`) ? "" : ` (scope ${k.scope}/**)`;
      return `- ${k.name}${scope}: ${k.description} [${k.path}]`;
    }),
    ...expected.retracted.map((r) => `- ${r.path} no longer applies: its earlier instructions are withdrawn.`),
    ...expected.retractedSkills.map((r) => `- The skill at ${r.path} is gone: do not use it.`),
    ...expected.skipped.map((r) => `- ${r.path} was not loaded: ${REASONS[r.reason]}.`),
    ...expected.alsoGoverns.map((r) => `- ${alsoGovernsNotice(r.path, `${r.scope}/**`)}`),
  ];
  if (JSON.stringify(sortBy(lines, (x) => x)) !== JSON.stringify(sortBy(wanted, (x) => x)))
    problems.push(`${label}: notice lines ${JSON.stringify(lines)} expected ${JSON.stringify(wanted)}`);
  for (const line of lines.filter((l) => / was not loaded| no longer applies| is gone/.test(l))) {
    if (line.includes(tree.root) || LEAK.test(line)) problems.push(`${label}: notice leaks: ${line}`);
  }
  if (reminder.includes("OUTSIDE-SECRET")) problems.push(`${label}: text from outside cwd reached the reminder`);
  return problems;
}

/**
 * Each section opens with its full explanation when the record explains it; else skills with their
 * one-line header, and files with their first tag right after the opening (or the preamble).
 */
function checkOpenings(label: string, reminder: string, expected: ExpectedRecord): string[] {
  const sections = [
    {
      name: "files",
      has: expected.files.some((f) => f.via === "reminder"),
      full: INSTRUCTIONS_INTRO,
      short: undefined,
    },
    { name: "skills", has: expected.skills.length > 0, full: SKILLS_INTRO, short: SKILLS_HEADER },
  ] as const;
  const problems: string[] = [];
  const lines = reminder.split("\n");
  // The preamble says once that this is the repository's guidance, when the record explains it.
  const preambles = lines.filter((line) => line === REMINDER_PREAMBLE).length;
  const preamble = expected.explained.includes("preamble");
  if (preambles !== (preamble ? 1 : 0)) problems.push(`${label}: ${preambles} preambles, expected: ${preamble}`);
  for (const { name, has, full, short } of sections) {
    const explains = expected.explained.includes(name);
    const want = !has ? [] : explains ? [full] : short === undefined ? [] : [short];
    const got = lines.filter((line) => line === full || line === short);
    if (JSON.stringify(got) !== JSON.stringify(want))
      problems.push(`${label}: ${name} opens with ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  }
  const firstFile = lines.findIndex((line) => line.startsWith("<file "));
  const beforeFiles = lines[firstFile - 1] ?? "";
  if (
    firstFile !== -1 &&
    !expected.explained.includes("files") &&
    !(beforeFiles.startsWith("<nested-instructions") || beforeFiles === REMINDER_PREAMBLE)
  )
    problems.push(`${label}: the unexplained files follow ${JSON.stringify(beforeFiles)}, not the opening`);
  return problems;
}

function appendResult(s: Session, played: Played, record: ExpectedRecord): void {
  const result = played.result!;
  const id = s.h.sessionManager.appendMessage({
    role: "toolResult",
    toolCallId: played.id,
    toolName: played.call.tool,
    content: result.content as never,
    details: result.details as never,
    isError: result.isError,
    timestamp: Date.now(),
  });
  s.results.push({ id, record });
}

async function playCall(s: Session, call: Call, fault?: string): Promise<string[]> {
  // A passing I/O error on a file that is there: the extension and the model both see it unknown. A folder that
  // cannot be read (a step made the path one) is told to the user alone: fault-tolerance.test.ts pins that.
  const faulty = fault === undefined ? undefined : s.tree.abs(fault);
  if (faulty !== undefined && entryAt(faulty)?.isDirectory() === false) {
    s.fault.path = faulty;
    s.model.faulty = faulty;
    count(s.stats, "fault");
  }
  const played = prepare(s, call);
  const before = s.h.notifications.length;
  const unlock = call.tool === "write" && call.locked ? lockTarget(s.tree, played.input.path) : undefined;
  try {
    played.result = await s.h.call(call.tool, played.input, { id: played.id });
  } finally {
    unlock?.();
  }
  await s.h.endTurn();
  const expected = expectFor(s, played);
  s.fault.path = undefined;
  s.model.faulty = undefined;
  const problems = compare(s, played, expected, s.h.notifications.slice(before));
  countRecord(s.stats, played, expected);
  s.model.apply(expected);
  appendResult(s, played, expected);
  return problems;
}

/** Locks a target that is a regular file (never a link, whose target may lie outside cwd). */
function lockTarget(tree: Tree, path: unknown): (() => void) | undefined {
  const abs = resolve(tree.cwd, String(path));
  return entryAt(abs)?.isFile() ? lockFile(abs) : undefined;
}

/** The entry at a path; undefined where none can be reached: nothing there, a link loop or a file on the way. */
function entryAt(path: string): FsStats | undefined {
  try {
    return lstatSync(path);
  } catch (error) {
    if (["ENOENT", "ENOTDIR", "ELOOP", "ENAMETOOLONG"].includes((error as NodeJS.ErrnoException).code ?? ""))
      return undefined;
    throw error;
  }
}

async function playBatch(s: Session, calls: Call[]): Promise<string[]> {
  const plays = calls.map((call) => prepare(s, batchSafe(s.tree, call)));
  s.order.length = 0;
  const notificationsBefore = s.h.notifications.length;
  await Promise.all(
    plays.map(async (played) => {
      played.result = await s.h.call(played.call.tool, played.input, { id: played.id });
    }),
  );
  await s.h.endTurn();
  // The model replays the calls in the order the extension saw their results, and the session
  // holds them in that order too, so that a later rebuild replays what happened live.
  const byId = new Map(plays.map((played) => [played.id, played]));
  const ordered = s.order.map((id) => byId.get(id)).filter((played): played is Played => played !== undefined);
  for (const played of plays) if (!ordered.includes(played)) ordered.push(played);
  const problems: string[] = [];
  const expectedWarnings: string[] = [];
  const records: ExpectedRecord[] = [];
  for (const played of ordered) {
    const expected = expectFor(s, played);
    problems.push(...compare(s, played, expected, []).filter((p) => !p.includes(": warnings ")));
    countRecord(s.stats, played, expected);
    records.push(expected);
    expectedWarnings.push(...expectedWarningsOf(expected));
    s.model.apply(expected);
    appendResult(s, played, expected);
  }
  expectedWarnings.push(...expectedLoaded(records));
  const got = sortBy(s.h.notifications.slice(notificationsBefore), (x) => x);
  if (JSON.stringify(got) !== JSON.stringify(sortBy(expectedWarnings, (x) => x)))
    problems.push(`batch: warnings ${JSON.stringify(got)} expected ${JSON.stringify(expectedWarnings)}`);
  return problems;
}

async function compact(s: Session, keep: number): Promise<void> {
  if (s.results.length === 0) return;
  const from = Math.max(s.keptFrom, Math.min(s.results.length - 1, Math.floor(keep * s.results.length)));
  s.keptFrom = from;
  const entryId = s.h.sessionManager.appendCompaction("Summary.", s.results[from]!.id, 0);
  const compactionEntry = s.h.sessionManager.getEntry(entryId);
  await s.h.runner.emit({ type: "session_compact", compactionEntry, fromExtension: false } as never);
  s.model.rebuild(s.results.slice(from).map((r) => r.record));
}

async function reload(s: Session): Promise<void> {
  await s.h.emitSessionStart("reload");
  s.model.rebuild(s.results.slice(s.keptFrom).map((r) => r.record));
}

/** A spawner that fails at once: the fuzzer runs without git, as on a machine without it. */
export const noGit = (): never => {
  throw fsError("ENOENT", "spawn", "git");
};

export interface RunOptions {
  /** Play the case in a git repository (`git init`, nothing ignored), with the real git helper. */
  git?: boolean;
  /** Record filesystem calls and fail on any outside cwd (the default). */
  boundary?: boolean;
  /** A fault the model does not know of, thrown at the matching filesystem call: a bug the run must find. */
  sabotage?: (call: FsCall) => boolean;
  /** Counts what the corpus exercised. */
  stats?: Stats;
}

/** What a corpus exercised, so that a fuzzer that tests nothing cannot pass quietly. */
export type Stats = Record<string, number>;

function count(stats: Stats | undefined, key: string, by = 1): void {
  if (stats && by > 0) stats[key] = (stats[key] ?? 0) + by;
}

function countRecord(stats: Stats | undefined, played: Played, record: ExpectedRecord): void {
  if (!stats) return;
  count(stats, `call:${played.call.tool}`);
  if (played.result?.isError) count(stats, "call:failed");
  if (played.call.tool === "write" && played.result?.isError && played.instructionTargetBefore)
    count(stats, "call:write-failed-on-instruction");
  if (isEmptyRecord(record)) return;
  if (played.call.tool === "bash") count(stats, "bash:activated");
  count(stats, "delivered", record.files.filter((f) => f.via === "reminder").length);
  count(stats, "delivered:supersedes", record.files.filter((f) => f.supersedes).length);
  count(stats, "delivered:via-read", record.files.filter((f) => f.via === "read").length);
  count(stats, "retracted", record.retracted.length);
  count(stats, "skills", record.skills.length);
  count(stats, "skills:retracted", record.retractedSkills.length);
  count(stats, "also-governs", record.alsoGoverns.length);
  for (const skip of record.skipped) count(stats, `refused:${skip.reason}`);
}

/** Where fuzz trees go: a RAM-backed temporary folder when the machine has one, else tmpdir(). */
function scratchBase(): string {
  try {
    const shm = "/dev/shm";
    if (statSync(shm).isDirectory()) {
      accessSync(shm, constants.W_OK);
      return shm;
    }
  } catch {
    // No /dev/shm: the ordinary temporary folder.
  }
  return tmpdir();
}

/** A tree like harness.ts makes (cwd is `root/repo`), in the scratch folder. */
export function makeScratchTree(): Tree {
  const root = realpathSync(mkdtempSync(join(scratchBase(), "lazy-agents-fuzz-")));
  const cwd = join(root, "repo");
  const agentDir = join(root, "agent");
  mkdirSync(cwd, { recursive: true });
  mkdirSync(agentDir, { recursive: true });
  const abs = (path: string) => resolve(cwd, path);
  return {
    root,
    cwd,
    agentDir,
    abs,
    write: (path, content) => {
      mkdirSync(dirname(abs(path)), { recursive: true });
      writeFileSync(abs(path), content);
    },
    link: (path, target) => {
      mkdirSync(dirname(abs(path)), { recursive: true });
      symlinkSync(target, abs(path));
    },
  };
}

/** The absolute paths a step's tool calls name: realpath may ask where they lead. */
function stepTargets(tree: Tree, step: Step): string[] {
  const calls = step.op === "call" ? [step.call] : step.op === "batch" ? step.calls : [];
  // A bash word outside cwd by its text is refused before any filesystem call: it needs no allowance.
  return calls.flatMap((call) => (call.tool === "bash" ? [] : (modelTarget(expand(call.path, tree), tree.cwd) ?? [])));
}

/** Plays one case; returns the first divergence, or undefined when extension and model agree. */
export async function runCase(c: Case, options: RunOptions = {}): Promise<Failure | undefined> {
  const tree = makeScratchTree();
  try {
    materialize(tree, c.entries);
    if (options.git) execFileSync("git", ["init", "-q"], { cwd: tree.cwd, stdio: "ignore" });
    const fault: { path?: string } = {};
    const recorder = recordingFileSystem(
      interceptFileSystem((call, proceed) => {
        if (call.method === "lstat" && call.path === fault.path) throw fsError("EIO", call.method, call.path);
        if (options.sabotage?.(call)) throw fsError("EACCES", call.method, call.path);
        return proceed();
      }),
    );
    let engine: LazyAgents | undefined;
    const order: string[] = [];
    const factory = createLazyAgents({
      fs: recorder.fs,
      ...(options.git ? {} : { spawnGit: noGit }),
      onEngine: (e) => {
        engine = e;
        // The order the results were planned in: one that waits for git is planned when its answer comes. Its
        // promise may resolve after a sibling planned later (a second round of questions adds ticks), so the order
        // is taken where the plan is applied, and at the result for a call that plans nothing.
        const internals = e as unknown as { deliver(event: { toolCallId: string }, plan: unknown): unknown };
        const deliver = internals.deliver.bind(e);
        internals.deliver = (event, plan) => {
          order.push(event.toolCallId);
          return deliver(event, plan);
        };
        const original = e.onToolResult.bind(e);
        const planned = (id: string) => void (order.includes(id) || order.push(id));
        e.onToolResult = (event, warn) => {
          const result = original(event, warn);
          if (!(result instanceof Promise)) planned(event.toolCallId);
          return result instanceof Promise ? result.finally(() => planned(event.toolCallId)) : result;
        };
      },
    });
    const clock = { next: 1_000_000_000, seen: new Map<string, number>() };
    stampChanges(tree, clock);
    const h = await loadRunner(tree, { hasUI: true, factories: [factory] });
    const errors: string[] = [];
    h.runner.onError((error) => errors.push(`${error.event}: ${error.error}`));
    const s: Session = {
      tree,
      h,
      engine: engine!,
      model: new ReferenceModel(tree.cwd),
      results: [],
      keptFrom: 0,
      stats: options.stats,
      order,
      fault,
    };
    for (const [index, step] of c.steps.entries()) {
      let problems: string[] = [];
      count(s.stats, `step:${step.op}`);
      if (step.op === "call") problems = await playCall(s, step.call, step.fault);
      else if (step.op === "batch") problems = await playBatch(s, step.calls);
      else if (step.op === "compact") await compact(s, step.keep);
      else if (step.op === "reload") await reload(s);
      else mutate(tree, step);
      if (errors.length > 0) problems.push(`an error reached Pi: ${errors.join("; ")}`);
      const sizes = s.engine.stateSizes();
      for (const key of ["pending", "nested", "parentOf"]) {
        if (sizes[key] !== 0) problems.push(`per-call state leaks: ${key} = ${sizes[key]}`);
      }
      if (options.boundary !== false) {
        const outside = callsOutside(recorder.calls, tree.cwd, [], stepTargets(tree, step));
        if (outside.length > 0) problems.push(`filesystem calls outside cwd: ${JSON.stringify(outside.slice(0, 3))}`);
      }
      recorder.calls.length = 0;
      if (problems.length > 0) return { seed: c.seed, step: index, message: problems.join("\n") };
      if (changesTree(step)) stampChanges(tree, clock);
    }
    return undefined;
  } finally {
    rmSync(tree.root, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Shrinking and reporting.

/**
 * The smallest case found that still fails: drops steps after the failing one, then single steps,
 * single calls of batches and single entries, as long as the case keeps failing.
 */
export async function shrink(
  c: Case,
  failure: Failure,
  options: RunOptions = {},
  budget = 300,
): Promise<{ case: Case; failure: Failure }> {
  let best = { ...c, steps: c.steps.slice(0, failure.step + 1) };
  let bestFailure = (await runCase(best, options)) ?? failure;
  let attempts = 0;
  const attempt = async (candidate: Case): Promise<boolean> => {
    if (attempts++ >= budget) return false;
    const result = await runCase(candidate, options);
    if (!result) return false;
    best = { ...candidate, steps: candidate.steps.slice(0, result.step + 1) };
    bestFailure = result;
    return true;
  };
  for (let changed = true; changed && attempts < budget;) {
    changed = false;
    for (let i = best.steps.length - 1; i >= 0; i--) {
      if (i >= best.steps.length) continue;
      if (await attempt({ ...best, steps: best.steps.filter((_, j) => j !== i) })) changed = true;
    }
    for (let i = 0; i < best.steps.length; i++) {
      const step = best.steps[i]!;
      if (step.op !== "batch") continue;
      for (let k = step.calls.length - 1; k >= 0; k--) {
        const current = best.steps[i];
        if (current?.op !== "batch" || k >= current.calls.length) continue;
        const calls = current.calls.filter((_, j) => j !== k);
        const replacement: Step = calls.length === 1 ? { op: "call", call: calls[0]! } : { op: "batch", calls };
        if (await attempt({ ...best, steps: best.steps.map((st, j) => (j === i ? replacement : st)) })) changed = true;
      }
    }
    for (let i = best.entries.length - 1; i >= 0; i--) {
      if (i >= best.entries.length) continue;
      if (await attempt({ ...best, entries: best.entries.filter((_, j) => j !== i) })) changed = true;
    }
  }
  return { case: best, failure: bestFailure };
}

/** JSON with every non-ASCII character escaped, so a BOM or a lone CR shows in the report. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value, null, 1).replace(
    /[^\x20-\x7e\n]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

export function describeFailure(original: Failure, minimal: { case: Case; failure: Failure }, git = false): string {
  const big = (content: Content) =>
    typeof content === "string" && content.length > 120 ? `${content.slice(0, 60)}…(${content.length} chars)` : content;
  const entries = minimal.case.entries.map((entry) =>
    entry.kind === "file" ? { ...entry, content: big(entry.content) } : entry,
  );
  return [
    `fuzz case failed: seed ${original.seed}, step ${original.step}`,
    original.message,
    "",
    `minimal reproduction (${minimal.case.steps.length} steps, ${minimal.case.entries.length} entries), failing at step ${minimal.failure.step}:`,
    minimal.failure.message,
    asciiJson({ seed: minimal.case.seed, entries, steps: minimal.case.steps }),
    "",
    `replay: bun run fuzz -- --seed ${original.seed} --cases 1${git ? " --git" : ""}`,
  ].join("\n");
}

/** Runs `count` cases from `seed` on; on the first failure, shrinks it and returns its report. */
export async function fuzz(
  seed: number,
  count: number,
  options: GenerateOptions &
    RunOptions & { onCase?: (index: number) => void; parallel?: number; shrink?: boolean } = {},
): Promise<string | undefined> {
  // Cases are independent (own tree, runner and engine): a few run interleaved, so that one's
  // filesystem waits overlap another's work. The first failure by seed order is reported.
  const parallel = Math.max(1, options.parallel ?? 3);
  let next = 0;
  let firstFailure: { case: Case; failure: Failure } | undefined;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      if (firstFailure && firstFailure.case.seed < seed + index) return;
      const c = generateCase(seed + index, options);
      const failure = await runCase(c, options);
      options.onCase?.(index);
      if (failure && (!firstFailure || c.seed < firstFailure.case.seed)) firstFailure = { case: c, failure };
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  if (!firstFailure) return undefined;
  const { case: failed, failure } = firstFailure;
  const minimal = options.shrink === false ? { case: failed, failure } : await shrink(failed, failure, options);
  return describeFailure(failure, minimal, options.git);
}

export function loadCase(path: string): Case {
  return JSON.parse(readFileSync(path, "utf8")) as Case;
}
