// Two builds of index.ts compared in one process: `./dev bench ab [A] [B]` (default A = HEAD, B = the
// working tree). A and B are each a path to an index.ts (its config.ts beside it) or a git revision,
// whose index.ts and config.ts are exported to a temporary folder. Both builds and a runner with no
// extension are loaded through Pi's ExtensionRunner on the same tree and replay the same calls,
// interleaved call by call (A, B, bare, then B, A, bare), in ROUNDS rounds (env, default 6). A build's
// added cost in a round is its p50 minus the bare runner's; each workload's table gives them and B/A
// per round, with the median. The last line is machine-readable, the median B/A of each workload:
//   ab: warm_nogit=… warm_git=… cold_nogit=… replay=…
// Timing is a benchmark's: nothing here asserts a figure.

import { execFileSync } from "node:child_process";
import { existsSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { chainWorkload, generateChainTree, streakCalls } from "./chain.ts";
import { buildSpecs, toolExecutions } from "./replay.ts";
import { loadRunner } from "./runner.ts";
import { fmt, median, percentile, ratio, table } from "./stats.ts";
import { generateTree, newTreeRoot, removeTree, removeTreesAtExit, type SyntheticTree } from "./tree.ts";
import { buildWorkload, type ReplayCall } from "./workload.ts";

const ROOT = resolve(import.meta.dirname, "..");
const ROUNDS = Number(process.env.ROUNDS ?? 6);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`ab: ROUNDS must be a whole number from 1, not ${ROUNDS}`);
const SEED = 1;

interface Build {
  label: string;
  path: string;
}

function git(...args: string[]): string {
  return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/**
 * A path to an index.ts (or to the folder holding it) as it is; a revision exported next to a link to
 * the root's node_modules, so that the build resolves the same Pi as the working tree.
 */
function buildOf(arg: string): Build {
  if (existsSync(arg)) {
    const path = statSync(arg).isDirectory() ? join(resolve(arg), "index.ts") : resolve(arg);
    return { label: arg, path };
  }
  let commit: string;
  try {
    commit = git("rev-parse", "--short", "--verify", "--end-of-options", `${arg}^{commit}`).trim();
  } catch {
    throw new Error(`ab: ${arg} is neither a file nor a git revision`);
  }
  const { cwd } = newTreeRoot(`lazy-agents-ab-${commit}-`);
  symlinkSync(join(ROOT, "node_modules"), join(cwd, "node_modules"));
  writeFileSync(join(cwd, "package.json"), '{ "type": "module" }\n');
  for (const file of ["index.ts", "config.ts"]) writeFileSync(join(cwd, file), git("show", `${commit}:${file}`));
  return { label: `${arg} (${commit})`, path: join(cwd, "index.ts") };
}

interface Workload {
  key: string;
  title: string;
  tree: SyntheticTree;
  calls: ReplayCall[];
  /** Calls run before the first round, not kept (JIT warm-up, and the chain's first touch). */
  warmup: number;
  perRound: number;
  /** Which calls of a round are timed into its figures. */
  kept: (call: ReplayCall) => boolean;
}

interface Measured {
  /** µs per kept call, by round, for A, B and the bare runner (indices 0, 1, 2). */
  times: number[][][];
  /** Calls whose result each runner changed: a build that broke (Pi swallows a hook's throw) delivers less. */
  delivered: number[];
}

async function measure(workload: Workload, builds: [Build, Build]): Promise<Measured> {
  const { tree, calls, warmup, perRound } = workload;
  const specs = await buildSpecs(tree.cwd, calls);
  const tools = toolExecutions(tree.cwd, specs);
  const load = (name: string, paths: string[]) => loadRunner(name, paths, tree.cwd, tree.agentDir);
  const runners = [await load("A", [builds[0].path]), await load("B", [builds[1].path]), await load("bare", [])];
  const times: number[][][] = Array.from({ length: ROUNDS }, () => [[], [], []]);
  const delivered = [0, 0, 0];
  try {
    for (let index = 0; index < calls.length; index++) {
      const round = Math.floor((index - warmup) / perRound);
      for (const which of index % 2 === 0 ? [0, 1, 2] : [1, 0, 2]) {
        const { us, patched } = await runners[which]!.hooks(specs[index]!, tools[index]);
        if (patched !== undefined) delivered[which]!++;
        if (index >= warmup && workload.kept(calls[index]!)) times[round]![which]!.push(us);
      }
    }
  } finally {
    for (const runner of runners) await runner.runner.emit({ type: "session_shutdown" } as never);
  }
  return { times, delivered };
}

/** The workload's table and its median B/A. */
function report(workload: Workload, { times, delivered }: Measured): { text: string; median: number } {
  const rows: string[][] = [];
  const added: number[][] = [[], []];
  const ratios: number[] = [];
  times.forEach((round, index) => {
    const bare = percentile(round[2]!, 50);
    const [a, b] = [0, 1].map((which) => percentile(round[which]!, 50) - bare) as [number, number];
    added[0]!.push(a);
    added[1]!.push(b);
    ratios.push(ratio(b, a));
    rows.push([String(index + 1), String(round[0]!.length), fmt(bare), fmt(a), fmt(b), fmt(ratio(b, a), 3)]);
  });
  const middle = median(ratios);
  const spread = `${fmt(Math.min(...ratios), 3)} to ${fmt(Math.max(...ratios), 3)}`;
  rows.push(["median", "", "", fmt(median(added[0]!)), fmt(median(added[1]!)), fmt(middle, 3)]);
  const header = ["round", "calls", "bare p50 µs", "A added µs p50", "B added µs p50", "B/A"];
  const title = `${workload.title} (results changed, A / B / bare: ${delivered.join(" / ")})`;
  return { text: `${title}\n${table(header, rows)}\nB/A over rounds: ${spread}\n`, median: middle };
}

/** Tree and calls of each workload, built only when its turn comes. */
const WORKLOADS: Array<() => Promise<Workload> | Workload> = [
  () => chainStreak("warm_nogit", false),
  () => chainStreak("warm_git", true),
  () => {
    const [warmup, perRound] = [10, 50];
    const chains = { chains: warmup + ROUNDS * perRound, warmupChains: 0, peerGitChains: 0, seed: SEED };
    const tree = generateChainTree(chains, false);
    const calls = chainWorkload(tree, chains).filter((call) => call.cold && call.dir.depth === 8);
    const title = "Cold read: first touch of an 8-folder chain with an AGENTS.md in every folder, no git";
    return { key: "cold_nogit", title, tree, calls, warmup, perRound, kept: () => true };
  },
  () => {
    const [warmup, perRound] = [300, 600];
    const tree = generateTree({ files: 10_000, seed: SEED + 10_000, git: true });
    const calls = buildWorkload(tree, { calls: warmup + ROUNDS * perRound, seed: SEED });
    const title = "Replay: the bench's read/edit/write mix on the 10k-file git tree, warm calls outside node_modules";
    return { key: "replay", title, tree, calls, warmup, perRound, kept: (call) => !call.cold && !call.dir.ignored };
  },
];

/** Warm reads at the bottom of one 8-folder chain, an AGENTS.md in every folder, with or without git. */
function chainStreak(key: string, withGit: boolean): Workload {
  const [warmup, perRound] = [300, 500];
  const tree = generateChainTree({ chains: 1, warmupChains: 0, peerGitChains: 0, seed: SEED }, withGit);
  const title = `Warm read at the bottom of an 8-folder chain, an AGENTS.md in every folder, ${withGit ? "git" : "no git"}`;
  const calls = streakCalls(tree, warmup + ROUNDS * perRound);
  return { key, title, tree, calls, warmup, perRound, kept: () => true };
}

async function main(): Promise<void> {
  removeTreesAtExit();
  const [a = "HEAD", b = join(ROOT, "index.ts")] = process.argv.slice(2);
  const builds: [Build, Build] = [buildOf(a), buildOf(b)];
  const load = loadavg()
    .map((value) => fmt(value, 2))
    .join(" ");
  const out = [
    `A = ${builds[0].label}: ${builds[0].path}`,
    `B = ${builds[1].label}: ${builds[1].path}`,
    `node ${process.version}, ${cpus().length} cores, load ${load} at start; µs per call, hooks only`,
    "",
  ];
  const medians: string[] = [];
  for (const make of WORKLOADS) {
    const workload = await make();
    try {
      process.stderr.write(`ab: ${workload.key}, ${ROUNDS} rounds of ${workload.perRound} calls\n`);
      const { text, median: middle } = report(workload, await measure(workload, builds));
      out.push(text);
      medians.push(`${workload.key}=${fmt(middle, 2)}`);
    } finally {
      removeTree(workload.tree);
    }
  }
  process.stdout.write(`${out.join("\n")}\nab: ${medians.join(" ")}\n`);
}

await main();
