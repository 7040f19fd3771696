// `bun run soak [-- --calls N]`: 50,000 tool calls through Pi's real extension runner and real
// tools, with churn: instruction files edited, deleted and re-created, skills and rules added and removed,
// new scopes created and old ones deleted, parallel batches, and a compaction every few thousand
// calls. Prints heap growth and the size of every internal map, with the number of folders and
// files on disk and ever created, and exits with 1 when a map is bounded by the calls made rather
// than by what is on disk.

import { mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SessionManager } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, type LazyAgents } from "../index.ts";
import { MAX_UNCONFIRMED_RESULTS } from "../config.ts";
import { makeScratchTree, noGit } from "./fuzz-lib.ts";
import { rng } from "./rng.ts";
import { loadRunner, type CallResult } from "./harness.ts";

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "50000" },
    seed: { type: "string", default: "7" },
    live: { type: "string", default: "40" },
  },
});
const CALLS = Number(values.calls);
const LIVE_SCOPES = Number(values.live);
const random = rng(Number(values.seed));
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

const gc = (globalThis as { gc?: () => void }).gc;
function heapUsed(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

const tree = makeScratchTree();
let clock = 1_000_000_000;
const stamp = (path: string) => {
  clock++;
  utimesSync(path, clock, clock);
};

/** Live scopes by name; each has an instruction file (maybe), five files and maybe a skill. */
const live: string[] = [];
let created = 0;
let deleted = 0;
function createScope(): void {
  const name = `pkg/g${Math.floor(created / 100)}/s${created++}`;
  const dir = tree.abs(name);
  mkdirSync(dir, { recursive: true });
  if (random() < 0.8) writeFileSync(join(dir, pick(["AGENTS.md", "CLAUDE.md"])), `RULES ${name} v0\n`);
  for (let i = 0; i < 5; i++) writeFileSync(join(dir, `f${i}.ts`), `export const v = ${i};\n`);
  if (random() < 0.3) {
    mkdirSync(join(dir, ".agents/skills/tool"), { recursive: true });
    writeFileSync(join(dir, ".agents/skills/tool/SKILL.md"), `---\nname: tool\ndescription: Tool of ${name}\n---\n`);
  }
  live.push(name);
}
function deleteScope(): void {
  const name = live.shift();
  if (!name) return;
  rmSync(tree.abs(name), { recursive: true, force: true });
  stamp(tree.abs(name.slice(0, name.lastIndexOf("/"))));
  deleted++;
}

/** The soak itself; its exit code. */
async function soak(): Promise<number> {
  for (let i = 0; i < LIVE_SCOPES; i++) createScope();
  writeFileSync(tree.abs("pkg/AGENTS.md"), "PKG RULES\n");

  let engine: LazyAgents | undefined;
  const h = await loadRunner(tree, {
    factories: [createLazyAgents({ spawnGit: noGit, onEngine: (e) => (engine = e) })],
  });
  const errors: string[] = [];
  h.runner.onError((error) => errors.push(error.error));

  /** The results still in context: a window of the latest ones, as after compactions. */
  const window: Array<{ toolCallId: string; toolName: string; result: CallResult }> = [];
  const WINDOW = 200;
  let compactions = 0;
  async function compact(): Promise<void> {
    const session = SessionManager.inMemory(tree.cwd);
    for (const { toolCallId, toolName, result } of window) {
      session.appendMessage({
        role: "toolResult",
        toolCallId,
        toolName,
        content: result.content as never,
        details: result.details as never,
        isError: result.isError,
        timestamp: Date.now(),
      });
    }
    // The runner's session is the one Pi would have after a compaction: only the kept results.
    (h.runner as unknown as { sessionManager: SessionManager }).sessionManager = session;
    await h.runner.emit({ type: "session_compact", compactionEntry: undefined, fromExtension: false } as never);
    compactions++;
  }

  function churn(): void {
    const r = random();
    const scope = pick(live);
    const dir = tree.abs(scope);
    if (r < 0.35) {
      const file = join(dir, pick(["AGENTS.md", "CLAUDE.md", "AGENTS.override.md"]));
      writeFileSync(file, `RULES ${scope} v${clock}\n`);
      stamp(file);
      stamp(dir);
    } else if (r < 0.5) {
      rmSync(join(dir, pick(["AGENTS.md", "CLAUDE.md", "AGENTS.override.md"])), { force: true });
      stamp(dir);
    } else if (r < 0.6) {
      const skills = join(dir, ".agents/skills");
      if (random() < 0.5) rmSync(skills, { recursive: true, force: true });
      else {
        mkdirSync(join(skills, `s${clock}`), { recursive: true });
        writeFileSync(join(skills, `s${clock}`, "SKILL.md"), `---\nname: s${clock}\ndescription: churn\n---\n`);
        stamp(join(skills, `s${clock}`));
        stamp(skills);
      }
      stamp(dir);
    } else if (r < 0.7) {
      // Rule files come and go: each name compiles once, and what is deleted must not stay compiled.
      const rules = join(dir, ".cursor/rules");
      if (random() < 0.5) rmSync(join(dir, ".cursor"), { recursive: true, force: true });
      else {
        mkdirSync(rules, { recursive: true });
        writeFileSync(join(rules, `r${clock}.mdc`), `---\nglobs: "f*.ts"\n---\nRULE ${scope} ${clock}\n`);
        stamp(rules);
      }
      stamp(dir);
    } else {
      // A new scope replaces the oldest one: the disk stays bounded while names keep changing.
      createScope();
      deleteScope();
    }
  }

  let n = 0;
  let heapAfterWarmup = 0;
  const started = performance.now();
  const call = async (toolName: string, input: Record<string, unknown>) => {
    const toolCallId = `soak-${n++}`;
    const result = await h.call(toolName, input, { id: toolCallId });
    window.push({ toolCallId, toolName, result });
    if (window.length > WINDOW) window.shift();
  };
  while (n < CALLS) {
    const scope = pick(live);
    const r = random();
    if (r < 0.1) {
      await Promise.all(
        Array.from({ length: 8 }, () => call("read", { path: `${pick(live)}/f${Math.floor(random() * 5)}.ts` })),
      );
    } else if (r < 0.12) {
      // A path into a folder that does not exist: every one is new.
      await call("read", { path: `${scope}/missing-${n}/x.ts` });
    } else if (r < 0.8) await call("read", { path: `${scope}/f${Math.floor(random() * 5)}.ts` });
    else if (r < 0.9) {
      const i = Math.floor(random() * 5);
      await call("edit", { path: `${scope}/f${i}.ts`, edits: [{ oldText: "export", newText: "export" }] });
    } else await call("write", { path: `${scope}/w.ts`, content: `w ${n}\n` });
    if (n % 10 < 1) churn();
    if (n % 5000 < 1) await compact();
    if (heapAfterWarmup === 0 && n >= 2000) heapAfterWarmup = heapUsed();
    if (n % 10000 < 1) console.log(`  ${n} calls, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  await compact();
  const seconds = (performance.now() - started) / 1000;
  const heapEnd = heapUsed();

  // What is on disk now.
  const sizes = engine!.stateSizes();
  let dirsOnDisk = 0;
  let filesOnDisk = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        dirsOnDisk++;
        walk(join(dir, entry.name));
      } else filesOnDisk++;
    }
  };
  walk(tree.cwd);

  console.log(`\nsoak: ${n} tool calls in ${seconds.toFixed(1)} s (${((seconds * 1e6) / n).toFixed(0)} µs per call)`);
  console.log(
    `churn: ${created} scopes created, ${deleted} deleted, ${live.length} live; ${compactions} compactions` +
      `; on disk now: ${dirsOnDisk} folders, ${filesOnDisk} files`,
  );
  console.log(
    `heap: ${(heapAfterWarmup / 1048576).toFixed(1)} MiB after 2000 calls, ${(heapEnd / 1048576).toFixed(1)} MiB at the end` +
      ` (growth ${((heapEnd - heapAfterWarmup) / 1048576).toFixed(1)} MiB)${gc ? "" : " [run with --expose-gc for exact figures]"}`,
  );
  console.log("internal maps at the end:");
  for (const [key, value] of Object.entries(sizes)) console.log(`  ${key.padEnd(16)} ${value}`);

  // Bounds: per-call state is empty; caches are bounded by the folders and files on disk (a cache
  // may run to twice the tree, plus a constant, between two sweeps); the ledger by the results still
  // in context.
  const cacheBound = (onDisk: number) => 2 * onDisk + 256;
  const bounds: Record<string, number> = {
    pending: 0,
    nested: 0,
    parentOf: 0,
    gateRecords: 0,
    unconfirmed: MAX_UNCONFIRMED_RESULTS,
    directories: cacheBound(dirsOnDisk),
    chains: cacheBound(dirsOnDisk),
    ignoredSeen: cacheBound(dirsOnDisk),
    listings: cacheBound(dirsOnDisk),
    gitAnswers: cacheBound(dirsOnDisk),
    gitFileAnswers: cacheBound(filesOnDisk),
    inspectedScopes: cacheBound(dirsOnDisk),
    files: cacheBound(filesOnDisk),
    compiledRules: cacheBound(filesOnDisk),
    ruleFolders: cacheBound(dirsOnDisk),
    rulePlaces: cacheBound(dirsOnDisk),
    ledgerFiles: WINDOW,
    ledgerScopes: WINDOW,
    ledgerRules: WINDOW,
    ledgerWithdrawn: WINDOW,
    ledgerSkills: WINDOW,
    ledgerSkipped: WINDOW,
    ledgerAlsoGoverns: WINDOW,
    ledgerImports: WINDOW,
    gateRetries: 0,
  };
  const violations = Object.entries(bounds).filter(([key, bound]) => (sizes[key] ?? 0) > bound);
  for (const [key, bound] of violations) console.log(`UNBOUNDED: ${key} = ${sizes[key]} > ${bound}`);
  if (errors.length > 0) console.log(`errors reached Pi: ${errors.slice(0, 3).join("; ")}`);
  return violations.length > 0 || errors.length > 0 ? 1 : 0;
}

let code = 1;
try {
  code = await soak();
} finally {
  rmSync(tree.root, { recursive: true, force: true });
}
process.exit(code);
