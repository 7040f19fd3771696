// The benchmark: `bun run bench` (full) or `bun run bench -- --quick` (under a minute on
// two cores). It prints readable tables, then, as its very last line, one machine-readable summary:
//   bench: warm_p50_us=… warm_p99_us=… … heap_growth_mb=…
// Timing is a benchmark's, never a test's: nothing here asserts a figure.

import { statSync } from "node:fs";
import { cpus } from "node:os";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { bashReplay, type BashReplay } from "./bash.ts";
import { loadRunner, OURS_PATH, PEER_PATH, type BenchRunner, type ToolCallSpec } from "./runner.ts";
import { installFsCounter, installSpawnCounter } from "./probes.ts";
import {
  buildSpecs,
  countReplay,
  timeLanes,
  toolExecutions,
  type CountSample,
  type Lane,
  type Sample,
} from "./replay.ts";
import { CHAIN_DEPTHS, measureChains, type ChainMeasured } from "./chain.ts";
import { runEconomy, type EconomyResult } from "./session.ts";
import { measureChecks, type ChecksMeasured } from "./checks.ts";
import { fmt, mean, percentile, ratio, table } from "./stats.ts";
import {
  dirsAtDepth,
  floorOf,
  generateTree,
  parkGit,
  removeTreesAtExit,
  removeTree,
  treeBase,
  type SyntheticTree,
} from "./tree.ts";
import { buildWorkload, type ReplayCall } from "./workload.ts";

// ---------------------------------------------------------------------------------------------
// Settings of a run.

interface Config {
  quick: boolean;
  seed: number;
  sizes: number[];
  /** The tree the goals are stated on ("the git tree"). */
  mainSize: number;
  calls: number;
  warmup: number;
  /** The peer spawns git for every folder of every call in a git tree: it replays a prefix only. */
  peerGitCalls: number;
  soakCalls: number;
  sessionCalls: number;
  sessionFiles: number;
  /** Every-folder chains per depth, JIT warm-up chains, and chains the peer replays with git. */
  chains: { chains: number; warmupChains: number; peerGitChains: number };
}

const GOAL_DEPTH = 8;

function configOf(argv: string[]): Config {
  const quick = argv.includes("--quick");
  const seedArg = argv.find((arg) => arg.startsWith("--seed="));
  return {
    quick,
    seed: seedArg ? Number(seedArg.slice("--seed=".length)) : 1,
    sizes: [1_000, 10_000, 100_000],
    mainSize: 10_000,
    calls: quick ? 2_500 : 8_000,
    warmup: quick ? 300 : 500,
    peerGitCalls: quick ? 16 : 60,
    soakCalls: quick ? 50_000 : 100_000,
    sessionCalls: 300,
    sessionFiles: 600,
    chains: quick
      ? { chains: 30, warmupChains: 6, peerGitChains: 1 }
      : { chains: 80, warmupChains: 10, peerGitChains: 3 },
  };
}

/** `gc()` without a command-line flag, for the heap figures. */
function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

const benchStart = performance.now();
/** Progress on stderr, with the seconds since start, so stdout holds only the report. */
const log = (message: string) =>
  process.stderr.write(`[${((performance.now() - benchStart) / 1000).toFixed(1).padStart(5)} s] ${message}\n`);

// ---------------------------------------------------------------------------------------------
// Measurements.

interface Replayed {
  label: string;
  samples: Sample[];
}

/** Calls at the goals' depth outside vendored folders, split warm and cold. */
function atGoalDepth<T extends { call: ReplayCall }>(samples: T[], cold: boolean): T[] {
  return samples.filter((s) => s.call.cold === cold && !s.call.dir.ignored && s.call.dir.depth === GOAL_DEPTH);
}

function p50(samples: Sample[]): number {
  return percentile(added(samples), 50);
}

function p99(samples: Sample[]): number {
  return percentile(added(samples), 99);
}

function added(samples: Sample[]): number[] {
  return samples.map((s) => s.added);
}

async function shutdown(runner: BenchRunner): Promise<void> {
  await runner.runner.emit({ type: "session_shutdown" } as never);
}

interface TreeRun {
  tree: SyntheticTree;
  calls: ReplayCall[];
  specs: ToolCallSpec[];
  /** The tool execution that runs between each call's hooks while timing. */
  tools: Array<() => Promise<unknown>>;
  seconds: number;
}

async function prepare(size: number, config: Config): Promise<TreeRun> {
  const started = performance.now();
  const tree = generateTree({ files: size, seed: config.seed + size, git: true });
  const calls = buildWorkload(tree, { calls: config.calls, seed: config.seed });
  const specs = await buildSpecs(tree.cwd, calls);
  const tools = toolExecutions(tree.cwd, specs);
  return { tree, calls, specs, tools, seconds: (performance.now() - started) / 1000 };
}

/**
 * Replays every run's workload with one fresh extension runner and one bare runner per run, all
 * runs in lockstep. Loaded with pristine node:fs (no probes).
 */
async function replay(
  runs: Array<{ run: TreeRun; path: string; label: string }>,
  config: Config,
  probe: () => void,
): Promise<Replayed[]> {
  const lanes: Lane[] = [];
  const runners: BenchRunner[] = [];
  try {
    for (const { run, path, label } of runs) {
      const base = await loadRunner("base", [], run.tree.cwd, run.tree.agentDir);
      const ext = await loadRunner(label, [path], run.tree.cwd, run.tree.agentDir);
      runners.push(ext);
      lanes.push({ ext, base, calls: run.calls, specs: run.specs, tools: run.tools });
    }
    const samples = await timeLanes(lanes, { warmup: config.warmup, limit: config.calls, probe });
    return runs.map(({ label }, index) => ({ label, samples: samples[index]! }));
  } finally {
    for (const runner of runners) await shutdown(runner);
  }
}

/**
 * Bare statSync of depth-8 folders: the unit the ratios are expressed in. Batches are taken during
 * the replays (see timeLanes), so the unit sees the same machine as the calls it divides; the
 * figure is the median batch, in µs per stat.
 */
function statProbe(tree: SyntheticTree): { sample(): void; us(): number } {
  const paths = dirsAtDepth(tree, GOAL_DEPTH).map((dir) => `${tree.cwd}/${dir.rel}`);
  const batch = 200;
  const perStat: number[] = [];
  let next = 0;
  return {
    sample() {
      const start = performance.now();
      for (let index = 0; index < batch; index++) statSync(paths[next++ % paths.length]!);
      perStat.push(((performance.now() - start) * 1000) / batch);
    },
    us: () => percentile(perStat, 50),
  };
}

interface Counted {
  label: string;
  samples: CountSample[];
}

/**
 * Counting passes. The probes are installed before the runners load: Pi's loader evaluates each
 * extension afresh, and an extension's view of node:fs is fixed when it loads.
 */
async function countPasses(main: TreeRun, config: Config): Promise<{ counted: Counted[]; peerGit: Replayed }> {
  const fs = installFsCounter();
  const spawns = installSpawnCounter();
  const counters = { fs, spawns };
  const counted: Counted[] = [];
  try {
    const { cwd, agentDir } = main.tree;
    const ours = await loadRunner("ours", [OURS_PATH], cwd, agentDir);
    counted.push({ label: "ours, git", samples: await countReplay(ours, main.calls, main.specs, counters) });
    await shutdown(ours);

    // The peer in the git tree: timed against the bare runner and counted, call by call. Its cost
    // is git processes (tens of ms each), so the probes' few ns do not matter here.
    const base = await loadRunner("base", [], cwd, agentDir);
    const peer = await loadRunner("peer", [PEER_PATH], cwd, agentDir);
    const timedSamples: Sample[] = [];
    const countSamples: CountSample[] = [];
    const setCounting = (on: boolean) => {
      fs.enabled = spawns.enabled = on;
    };
    for (let index = 0; index < Math.min(config.peerGitCalls, main.calls.length); index++) {
      const call = main.calls[index]!;
      const spec = main.specs[index]!;
      const tool = main.tools[index]!;
      const baseUs = (await base.hooks(spec, tool)).us;
      fs.reset();
      spawns.reset();
      setCounting(true);
      // The tool runs uncounted between the hooks.
      const paused = async () => {
        setCounting(false);
        await tool();
        setCounting(true);
      };
      const peerUs = (await peer.hooks(spec, paused)).us;
      setCounting(false);
      timedSamples.push({ call, added: peerUs - baseUs, base: baseUs });
      countSamples.push({ call, fs: fs.total(), spawns: spawns.total(), byName: new Map(fs.counts) });
    }
    await shutdown(peer);
    counted.push({ label: "peer, git", samples: countSamples });

    const parked = parkGit(main.tree);
    try {
      const oursNoGit = await loadRunner("ours", [OURS_PATH], cwd, agentDir);
      counted.push({ label: "ours, no git", samples: await countReplay(oursNoGit, main.calls, main.specs, counters) });
      await shutdown(oursNoGit);
      // The peer's count does not vary from call to call at a given depth: a prefix is enough.
      const peerNoGit = await loadRunner("peer", [PEER_PATH], cwd, agentDir);
      const limit = Math.min(main.calls.length, 800);
      counted.push({
        label: "peer, no git",
        samples: await countReplay(peerNoGit, main.calls, main.specs, counters, limit),
      });
      await shutdown(peerNoGit);
    } finally {
      parked.restore();
    }
    return { counted, peerGit: { label: "peer, git", samples: timedSamples } };
  } finally {
    fs.uninstall();
    spawns.uninstall();
  }
}

interface Soak {
  checkpoints: Array<{ calls: number; heapMb: number }>;
  growthMb: number;
  instructionFiles: number;
}

/** Heap after many warm calls: it may grow with the files the extension knows, not with calls. */
async function soak(main: TreeRun, config: Config, gc: () => void): Promise<Soak> {
  const ours = await loadRunner("ours", [OURS_PATH], main.tree.cwd, main.tree.agentDir);
  try {
    for (const spec of main.specs) await ours.hooks(spec);
    const warm = main.specs.filter((_, index) => !main.calls[index]!.dir.ignored);
    const heap = () => {
      gc();
      gc();
      return process.memoryUsage().heapUsed / (1024 * 1024);
    };
    const start = heap();
    const checkpoints = [{ calls: 0, heapMb: start }];
    const marks = new Set([config.soakCalls / 10, config.soakCalls / 2, config.soakCalls]);
    for (let index = 1; index <= config.soakCalls; index++) {
      const spec = warm[index % warm.length]!;
      await ours.hooks({ ...spec, toolCallId: `soak-${index}` });
      if (marks.has(index)) checkpoints.push({ calls: index, heapMb: heap() });
    }
    const known = new Set(main.calls.flatMap((call) => chainFiles(main.tree, call))).size;
    return { checkpoints, growthMb: checkpoints.at(-1)!.heapMb - start, instructionFiles: known };
  } finally {
    await shutdown(ours);
  }
}

function chainFiles(tree: SyntheticTree, call: ReplayCall): string[] {
  if (call.dir.ignored) return [];
  const parts = call.dir.rel.split("/");
  const files: string[] = [];
  for (let index = 1; index <= parts.length; index++) {
    const rel = parts.slice(0, index).join("/");
    const node = tree.byRel.get(rel)!;
    if (node.instruction) files.push(`${rel}/${node.instruction}`);
  }
  return files;
}

// ---------------------------------------------------------------------------------------------
// Report.

function machine(): string {
  const cpu = cpus()[0]?.model ?? "unknown CPU";
  return `node ${process.version}, ${cpus().length} cores, ${cpu}`;
}

function sizeLabel(size: number): string {
  return size >= 1000 ? `${size / 1000}k` : String(size);
}

function treeTable(runs: Map<number, TreeRun>): string {
  const rows = [...runs.entries()].map(([size, run]) => {
    const working = run.tree.dirs.filter((dir) => !dir.ignored);
    return [
      `${sizeLabel(size)} git`,
      String(run.tree.fileCount),
      String(run.tree.dirs.length),
      `${run.tree.instructionFiles} (${fmt((100 * working.filter((d) => d.instruction).length) / working.length, 0)}% of dirs)`,
      String(working.filter((dir) => dir.skills > 0).length),
      String(dirsAtDepth(run.tree, GOAL_DEPTH).length),
      String(run.calls.length),
      String(new Set(run.calls.map((call) => call.dir.rel)).size),
      fmt(run.seconds, 1),
    ];
  });
  return table(
    ["tree", "files", "dirs", "instruction files", "skill dirs", "dirs@8", "calls", "scopes", "setup s"],
    rows,
  );
}

function replayRow(replayed: Replayed, tree: SyntheticTree): string[] {
  const warm = atGoalDepth(replayed.samples, false);
  const cold = atGoalDepth(replayed.samples, true);
  const allWarm = replayed.samples.filter((s) => !s.call.cold);
  const bare = replayed.samples.map((s) => s.base);
  return [
    replayed.label,
    String(replayed.samples.length),
    `${fmt(p50(warm))} / ${fmt(p99(warm))} (${warm.length})`,
    `${fmt(p50(cold))} / ${fmt(p99(cold))} (${cold.length})`,
    fmt(mean(warm.map((s) => floorOf(tree, s.call.dir))), 1),
    fmt(p50(allWarm)),
    fmt(percentile(bare, 50)),
  ];
}

/** Cost by depth of the target folder: it should grow with the chain, one stat per folder. */
function depthTable(replayed: Replayed, counted: CountSample[], tree: SyntheticTree): string {
  const rows: string[][] = [];
  const at = <T extends { call: ReplayCall }>(samples: T[], depth: number, cold: boolean) =>
    samples.filter((s) => s.call.cold === cold && !s.call.dir.ignored && s.call.dir.depth === depth);
  for (let depth = 1; depth <= 10; depth++) {
    const warm = at(replayed.samples, depth, false);
    const cold = at(replayed.samples, depth, true);
    if (warm.length === 0 && cold.length === 0) continue;
    const warmCounted = at(counted, depth, false);
    rows.push([
      String(depth),
      String(warm.length),
      fmt(p50(warm)),
      fmt(p99(warm)),
      String(cold.length),
      fmt(p50(cold)),
      fmt(mean(warmCounted.map((s) => s.fs)), 1),
      fmt(mean(warmCounted.map((s) => floorOf(tree, s.call.dir))), 1),
    ]);
  }
  return table(["depth", "warm n", "warm p50", "warm p99", "cold n", "cold p50", "warm fs calls", "floor"], rows);
}

interface FsFigures {
  calls: number;
  floor: number;
  maxExcess: number;
  spawns: number;
  n: number;
}

function fsFigures(samples: CountSample[], tree: SyntheticTree, cold: boolean): FsFigures {
  const chosen = atGoalDepth(samples, cold);
  return {
    calls: mean(chosen.map((s) => s.fs)),
    floor: mean(chosen.map((s) => floorOf(tree, s.call.dir))),
    maxExcess: Math.max(...chosen.map((s) => s.fs - floorOf(tree, s.call.dir))),
    spawns: mean(chosen.map((s) => s.spawns)),
    n: chosen.length,
  };
}

function fsBreakdown(samples: CountSample[]): string {
  return fsBreakdownOf(atGoalDepth(samples, false));
}

/** Mean calls per function over the samples, most called first. */
function fsBreakdownOf(samples: CountSample[]): string {
  const totals = new Map<string, number>();
  for (const sample of samples) {
    for (const [name, count] of sample.byName) totals.set(name, (totals.get(name) ?? 0) + count);
  }
  return [...totals.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([name, count]) => `${name} ${fmt(count / Math.max(1, samples.length), 1)}`)
    .join(", ");
}

function economyTable(results: EconomyResult[], scopes: number, mutations: number): string {
  const rows = results.map((r) => [
    r.name,
    String(r.requests),
    String(r.toolCalls),
    String(r.deliveries),
    String(r.reminderBytes),
    String(r.contentBytes),
    String(r.duplicates),
    String(r.prefixBreaks),
    fmt(r.seconds, 1),
  ]);
  return `${table(
    [
      "extension",
      "requests",
      "tool calls",
      "file deliveries",
      "bytes",
      "content bytes",
      "duplicates",
      "prefix breaks",
      "s",
    ],
    rows,
  )}\n(${scopes} scopes, ${mutations} external changes, one compaction; duplicates: a version delivered while the model still had it)`;
}

interface Goal {
  name: string;
  value: number;
  target: string;
  met: boolean;
}

function goalTable(goals: Goal[]): string {
  return table(
    ["goal", "value", "target", ""],
    goals.map((goal) => [goal.name, fmt(goal.value, 2), goal.target, goal.met ? "met" : "MISSED"]),
  );
}

function atMost(name: string, value: number, limit: number): Goal {
  return { name, value, target: limit === 0 ? "= 0" : `<= ${limit}`, met: value <= limit };
}

function atLeast(name: string, value: number, limit: number): Goal {
  return { name, value, target: `>= ${limit}`, met: value >= limit };
}

// ---------------------------------------------------------------------------------------------
// Main: measure everything, derive the figures, print the report and the summary line.

interface Measured {
  runs: Map<number, TreeRun>;
  oursBySize: Map<number, Replayed>;
  oursNoGit: Replayed;
  peerGit: Replayed;
  peerNoGit: Replayed;
  counted: Counted[];
  statUs: number;
  soaked: Soak;
  chains: ChainMeasured;
  economy: { ours: EconomyResult; peer: EconomyResult; scopes: number; mutations: number };
  bash: BashReplay;
  checks: ChecksMeasured;
}

async function measure(config: Config, runs: Map<number, TreeRun>, gc: () => void): Promise<Measured> {
  log(`generating trees in ${treeBase()} (${config.sizes.map(sizeLabel).join(", ")} files)`);
  for (const size of config.sizes) runs.set(size, await prepare(size, config));
  const main = runs.get(config.mainSize)!;
  const mainLabel = sizeLabel(config.mainSize);

  log("replaying ours against the bare runner on every tree, in lockstep");
  const stat = statProbe(main.tree);
  gc();
  const gitRuns = await replay(
    config.sizes.map((size) => ({ run: runs.get(size)!, path: OURS_PATH, label: `ours, ${sizeLabel(size)} git` })),
    config,
    stat.sample,
  );
  const oursBySize = new Map(config.sizes.map((size, index) => [size, gitRuns[index]!]));

  log("bash replay: commands from a fixed corpus in the replay's folders, ours against the bare runner");
  gc();
  const bash = await bashReplay(main.tree, main.calls, {
    seed: config.seed,
    warmup: config.warmup,
    probe: stat.sample,
  });

  log("replaying ours and the peer without git (the same tree, its .git moved out), in lockstep");
  const parked = parkGit(main.tree);
  let noGit: Replayed[];
  try {
    gc();
    noGit = await replay(
      [
        { run: main, path: OURS_PATH, label: `ours, ${mainLabel} no git` },
        { run: main, path: PEER_PATH, label: `peer, ${mainLabel} no git` },
      ],
      config,
      stat.sample,
    );
  } finally {
    parked.restore();
  }

  log("every-folder chains: ours with and without git and the peer without, in lockstep; then the peer with git");
  const chains = await measureChains({ ...config.chains, seed: config.seed }, stat.sample);
  removeTree(chains.trees.git);
  removeTree(chains.trees.noGit);

  log(`counting fs calls and spawns; the peer in the git tree (${config.peerGitCalls} calls)`);
  const { counted, peerGit } = await countPasses(main, config);
  peerGit.label = `peer, ${mainLabel} git (first ${config.peerGitCalls} calls)`;

  log(`heap over ${config.soakCalls} warm calls`);
  const soaked = await soak(main, config, gc);

  // The other trees are done with: free their memory before the sessions.
  for (const size of config.sizes) if (size !== config.mainSize) removeTree(runs.get(size)!.tree);

  log("checks: a write with 20 hookify rules against one with checks off, in lockstep");
  gc();
  const checks = await measureChecks(config.quick ? 500 : 2000, 100);

  log("prompt economy: one scripted session per extension");
  const sessionOptions = { seed: config.seed, toolCalls: config.sessionCalls, files: config.sessionFiles };
  const ours = await runEconomy("ours", OURS_PATH, sessionOptions);
  const peer = await runEconomy("peer", PEER_PATH, sessionOptions);
  return {
    runs,
    oursBySize,
    oursNoGit: noGit[0]!,
    peerNoGit: noGit[1]!,
    peerGit,
    counted,
    statUs: stat.us(),
    soaked,
    chains,
    economy: { ours: ours.result, peer: peer.result, scopes: ours.plan.scopes, mutations: ours.plan.mutations },
    bash,
    checks,
  };
}

interface Figures {
  summary: Array<[string, string]>;
  goals: Goal[];
}

/** The summary line's keys, all at depth 8 in the main git tree unless their name says otherwise. */
function figuresOf(m: Measured, config: Config): Figures {
  const main = m.runs.get(config.mainSize)!;
  const mainOurs = m.oursBySize.get(config.mainSize)!;
  const warm = atGoalDepth(mainOurs.samples, false);
  const warmP50 = p50(warm);
  const warmOverStat = ratio(warmP50, m.statUs);
  const coldOverStat = ratio(p50(atGoalDepth(mainOurs.samples, true)), m.statUs);
  const coldNoGitOverStat = ratio(p50(atGoalDepth(m.oursNoGit.samples, true)), m.statUs);
  const smallest = m.oursBySize.get(config.sizes[0]!)!;
  const largest = m.oursBySize.get(config.sizes.at(-1)!)!;
  const scale = ratio(p50(atGoalDepth(largest.samples, false)), p50(atGoalDepth(smallest.samples, false)));
  const peerOverOurs = ratio(p50(atGoalDepth(m.peerGit.samples, false)), warmP50);
  const peerOverOursNoGit = ratio(
    p50(atGoalDepth(m.peerNoGit.samples, false)),
    p50(atGoalDepth(m.oursNoGit.samples, false)),
  );
  const oursCounted = m.counted.find((c) => c.label === "ours, git")!;
  const fsWarm = fsFigures(oursCounted.samples, main.tree, false);
  const spawnsWarm = mean(oursCounted.samples.filter((s) => !s.call.cold).map((s) => s.spawns));
  const { ours, peer } = m.economy;
  const bytesRatio = ratio(peer.reminderBytes, ours.reminderBytes);
  const wrapperBytes = ours.reminderBytes - ours.contentBytes;
  const chainP50 = (label: string, depth: number, cold: boolean) => p50(chainSamples(m.chains, label, depth, cold));
  const coldNoGitPeerOverOurs = ratio(
    chainP50("peer, no git", GOAL_DEPTH, true),
    chainP50("ours, no git", GOAL_DEPTH, true),
  );
  // Added cost, git over no git, of warm reads back to back at the bottom of an 8-folder chain.
  const warmGitOverNoGit = ratio(p50(m.chains.streak.git), p50(m.chains.streak.noGit));

  const summary: Array<[string, string]> = [
    ["warm_p50_us", fmt(warmP50, 1)],
    ["warm_p99_us", fmt(p99(warm), 1)],
    ["stat_us", fmt(m.statUs, 2)],
    ["warm_over_stat", fmt(warmOverStat, 1)],
    ["cold_over_stat", fmt(coldOverStat, 1)],
    ["cold_nogit_over_stat", fmt(coldNoGitOverStat, 1)],
    ["scale_100k_over_1k", fmt(scale, 2)],
    ["peer_over_ours", fmt(peerOverOurs, 0)],
    ["peer_over_ours_nogit", fmt(peerOverOursNoGit, 1)],
    ["fs_calls_warm", fmt(fsWarm.calls, 1)],
    ["fs_floor_warm", fmt(fsWarm.floor, 1)],
    ["spawns_warm", fmt(spawnsWarm, spawnsWarm === 0 ? 0 : 2)],
    ["reminder_bytes", String(ours.reminderBytes)],
    ["peer_bytes_over_ours", fmt(bytesRatio, 2)],
    ["duplicate_deliveries", String(ours.duplicates)],
    ["prefix_breaks", String(ours.prefixBreaks)],
    ["heap_growth_mb", fmt(m.soaked.growthMb, 2)],
    ...bashFigures(m, warmP50),
    ["wrapper_bytes", String(wrapperBytes)],
    ["content_bytes", String(ours.contentBytes)],
    ["wrapper_ratio", fmt(ratio(wrapperBytes, ours.contentBytes), 3)],
    ["cold_nogit_peer_over_ours", fmt(coldNoGitPeerOverOurs, 2)],
    ["warm_streak_git_p50_us", fmt(p50(m.chains.streak.git), 1)],
    ["warm_streak_nogit_p50_us", fmt(p50(m.chains.streak.noGit), 1)],
    ["warm_git_over_nogit", fmt(warmGitOverNoGit, 2)],
    ["checks_write_over_plain", fmt(ratio(m.checks.checksP50Us, m.checks.plainP50Us), 2)],
    ["checks_write_added_us", fmt(m.checks.checksP50Us - m.checks.plainP50Us, 0)],
  ];
  const goals = [
    atMost("warm_over_stat", warmOverStat, 12),
    atMost("fs_calls_warm - fs_floor_warm", fsWarm.calls - fsWarm.floor, 2),
    atMost("cold_over_stat (git)", coldOverStat, 150),
    atMost("cold_nogit_over_stat", coldNoGitOverStat, 100),
    atMost("scale_100k_over_1k", scale, 1.3),
    atLeast("peer_over_ours (git)", peerOverOurs, 1000),
    atLeast("peer_over_ours_nogit", peerOverOursNoGit, 10),
    atLeast("peer_bytes_over_ours", bytesRatio, 10),
    atMost("spawns_warm", spawnsWarm, 0),
    atMost("duplicate_deliveries", ours.duplicates, 0),
    atMost("prefix_breaks", ours.prefixBreaks, 0),
    atMost("wrapper_bytes / content_bytes", ratio(wrapperBytes, ours.contentBytes), 0.15),
    atLeast("cold_nogit_peer_over_ours (every folder)", coldNoGitPeerOverOurs, 1.5),
    atMost("warm_git_over_nogit (every folder, back to back)", warmGitOverNoGit, 1.2),
  ];
  return { summary, goals };
}

/** The bash replay's figures at the goals' depth, in µs and in stat units, next to a warm read's. */
function bashFigures(m: Measured, readWarmP50: number): Array<[string, string]> {
  const warm = atGoalDepth(m.bash.samples, false);
  const fsWarm = mean(atGoalDepth(m.bash.counted, false).map((s) => s.fs));
  return [
    ["bash_parse_us", fmt(m.bash.parseUs, 2)],
    ["bash_parse_over_stat", fmt(ratio(m.bash.parseUs, m.statUs), 2)],
    ["bash_warm_p50_us", fmt(p50(warm), 1)],
    ["bash_warm_over_stat", fmt(ratio(p50(warm), m.statUs), 1)],
    ["bash_cold_over_stat", fmt(ratio(p50(atGoalDepth(m.bash.samples, true)), m.statUs), 1)],
    ["bash_warm_over_read_warm", fmt(ratio(p50(warm), readWarmP50), 2)],
    ["bash_fs_calls_warm", fmt(fsWarm, 1)],
  ];
}

function bashTable(m: Measured, tree: SyntheticTree): string {
  const warm = atGoalDepth(m.bash.samples, false);
  const cold = atGoalDepth(m.bash.samples, true);
  const counted = atGoalDepth(m.bash.counted, false);
  return table(
    [
      "run",
      "calls",
      `warm@${GOAL_DEPTH} p50 / p99 (n)`,
      `cold@${GOAL_DEPTH} p50 / p99 (n)`,
      "warm fs calls",
      "floor",
      "spawns",
      "parse µs",
    ],
    [
      [
        "ours, bash",
        String(m.bash.samples.length),
        `${fmt(p50(warm))} / ${fmt(p99(warm))} (${warm.length})`,
        `${fmt(p50(cold))} / ${fmt(p99(cold))} (${cold.length})`,
        fmt(mean(counted.map((s) => s.fs)), 1),
        fmt(mean(counted.map((s) => floorOf(tree, s.call.dir))), 1),
        fmt(mean(counted.map((s) => s.spawns)), 1),
        fmt(m.bash.parseUs, 2),
      ],
    ],
  );
}

function report(m: Measured, figures: Figures, config: Config, seconds: number): string {
  const main = m.runs.get(config.mainSize)!;
  const mainLabel = sizeLabel(config.mainSize);
  const out: string[] = [
    `pi-lazy-agents bench${config.quick ? " (quick)" : ""}: seed ${config.seed}, ${machine()}, trees in ${treeBase()}`,
    "",
    "Trees (synthetic monorepos, each a git repository with a .gitignore)",
    treeTable(m.runs),
    "",
    "Replay: µs the extension adds per call (its runner's tool_call + tool_result + tool_execution_end, minus",
    `the bare runner's on the same call, alternated). Depth ${GOAL_DEPTH} unless said; (n) = calls measured.`,
    table(
      [
        "run",
        "calls",
        `warm@${GOAL_DEPTH} p50 / p99 (n)`,
        `cold@${GOAL_DEPTH} p50 / p99 (n)`,
        `floor@${GOAL_DEPTH}`,
        "warm p50 all depths",
        "bare p50",
      ],
      [
        ...config.sizes.map((size) => replayRow(m.oursBySize.get(size)!, m.runs.get(size)!.tree)),
        replayRow(m.oursNoGit, main.tree),
        replayRow(m.peerGit, main.tree),
        replayRow(m.peerNoGit, main.tree),
      ],
    ),
    "",
    `Ours by depth (${mainLabel} git tree)`,
    depthTable(m.oursBySize.get(config.mainSize)!, m.counted.find((c) => c.label === "ours, git")!.samples, main.tree),
    "",
    `Filesystem calls per call at depth ${GOAL_DEPTH} (${mainLabel} tree; floor = one stat per folder on the chain`,
    "+ one per instruction or skill file on it; spawns = child processes started inside the hooks)",
    table(
      [
        "run",
        "warm fs calls",
        "floor",
        "max excess",
        "warm spawns",
        "cold fs calls",
        "cold spawns",
        "warm calls by function",
      ],
      m.counted.map((c) => fsRow(c, main.tree)),
    ),
    `One bare statSync of a depth-${GOAL_DEPTH} folder: ${fmt(m.statUs, 2)} µs (median of batches taken during the replays).`,
    "",
    "Bash replay: one command from a fixed corpus of agent commands (cat, sed -n, rg, cd && npm test, git -C,",
    `heredoc writes, find | xargs, …) per replayed call, in its folder; µs added per call, floor as above (${mainLabel} git tree)`,
    bashTable(m, main.tree),
    "",
    `Heap after warm calls (ours, ${mainLabel} git tree, ${m.soaked.instructionFiles} instruction files on the replayed chains)`,
    table(
      ["warm calls", "heap used MB"],
      m.soaked.checkpoints.map((c) => [String(c.calls), fmt(c.heapMb, 2)]),
    ),
    "",
    `Every folder holds an AGENTS.md: ${config.chains.chains} chains per depth below cwd, each read first cold, then warm`,
    "(µs added per call, p50 / p99 (n), against bare runners in lockstep; fs calls and spawns per call, counted apart)",
    chainTable(m.chains),
    "",
    "Prompt economy: one real Pi session per extension (createAgentSession, faux model, real tools)",
    economyTable([m.economy.ours, m.economy.peer], m.economy.scopes, m.economy.mutations),
    "",
    "Goals",
    goalTable(figures.goals),
    "",
    `total ${fmt(seconds, 1)} s`,
    `bench: ${figures.summary.map(([key, value]) => `${key}=${value}`).join(" ")}`,
  ];
  return `${out.join("\n")}\n`;
}

function chainSamples(measured: ChainMeasured, label: string, depth: number, cold: boolean): Sample[] {
  const run = measured.timed.find((r) => r.label === label);
  return (run?.samples ?? []).filter((s) => s.call.cold === cold && s.call.dir.depth === depth);
}

function chainTable(measured: ChainMeasured): string {
  const rows: string[][] = [];
  for (const run of measured.timed) {
    const counted = measured.counted.find((c) => c.label === run.label)?.samples ?? [];
    for (const depth of CHAIN_DEPTHS) {
      const at = (cold: boolean) => chainSamples(measured, run.label, depth, cold);
      const count = (cold: boolean) => counted.filter((s) => s.call.cold === cold && s.call.dir.depth === depth);
      rows.push([
        run.label,
        String(depth),
        `${fmt(p50(at(true)))} / ${fmt(p99(at(true)))} (${at(true).length})`,
        `${fmt(p50(at(false)))} / ${fmt(p99(at(false)))} (${at(false).length})`,
        fmt(mean(count(true).map((s) => s.fs)), 1),
        fmt(mean(count(false).map((s) => s.fs)), 1),
        fmt(mean(count(true).map((s) => s.spawns)), 1),
        fsBreakdownOf(count(true)),
      ]);
    }
  }
  return table(
    [
      "run",
      "depth",
      "cold p50 / p99 (n)",
      "warm p50 / p99 (n)",
      "cold fs",
      "warm fs",
      "cold spawns",
      "cold calls by function",
    ],
    rows,
  );
}

function fsRow(counted: Counted, tree: SyntheticTree): string[] {
  const warm = fsFigures(counted.samples, tree, false);
  const cold = fsFigures(counted.samples, tree, true);
  return [
    counted.label,
    `${fmt(warm.calls, 1)} (${warm.n})`,
    fmt(warm.floor, 1),
    fmt(warm.maxExcess, 0),
    fmt(warm.spawns, 1),
    `${fmt(cold.calls, 1)} (${cold.n})`,
    fmt(cold.spawns, 1),
    fsBreakdown(counted.samples),
  ];
}

async function main(): Promise<void> {
  removeTreesAtExit();
  const config = configOf(process.argv.slice(2));
  const gc = exposeGc();
  const started = performance.now();
  const runs = new Map<number, TreeRun>();
  try {
    const measured = await measure(config, runs, gc);
    const figures = figuresOf(measured, config);
    process.stdout.write(report(measured, figures, config, (performance.now() - started) / 1000));
  } finally {
    for (const run of runs.values()) removeTree(run.tree);
  }
}

await main();
