// The every-folder case: chains of folders below cwd where every folder holds an AGENTS.md, each
// chain touched for the first time in a running session (cold), then again (warm). Measured with
// and without git, at depths 4 and 8, ours and the peer in lockstep, in µs and in fs calls.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rng } from "../tests/rng.ts";
import { installFsCounter, installSpawnCounter } from "./probes.ts";
import { buildSpecs, countReplay, timeLanes, toolExecutions, type CountSample, type Sample } from "./replay.ts";
import { loadRunner, OURS_PATH, PEER_PATH, type BenchRunner, type ToolCallSpec } from "./runner.ts";
import { gitInit, instructionText, newTreeRoot, type DirNode, type SyntheticTree } from "./tree.ts";
import type { ReplayCall } from "./workload.ts";

export const CHAIN_DEPTHS = [4, 8] as const;
/** Warm calls in each chain after its cold one. */
const WARM_PER_CHAIN = 3;
/** Warm reads back to back in one deepest folder, kept after as many unkept ones (JIT warm-up). */
const WARM_STREAK = 100;
const FILES_PER_FOLDER = 4;

export interface ChainOptions {
  /** Chains per depth; each is cold exactly once. */
  chains: number;
  /** Chains per depth replayed before any sample is kept (JIT warm-up). */
  warmupChains: number;
  /** Chains per depth the peer replays in the git tree, where each folder costs it a git process. */
  peerGitChains: number;
  seed: number;
}

/**
 * A tree of `chains` chains per depth: `d<depth>-<i>/l2/…/l<depth>`, an AGENTS.md and a few source
 * files in every folder. The same seed gives the same bytes with and without git.
 */
export function generateChainTree(options: ChainOptions, git: boolean): SyntheticTree {
  const random = rng(options.seed);
  const { root, cwd, agentDir } = newTreeRoot("lazy-agents-chain-");
  const dirs: DirNode[] = [];
  const byRel = new Map<string, DirNode>();
  let files = 0;
  for (const depth of CHAIN_DEPTHS) {
    for (let chain = 0; chain < options.chains; chain++) {
      let parent: DirNode | undefined;
      for (let level = 1; level <= depth; level++) {
        const name = level === 1 ? `d${depth}-${chain}` : `l${level}`;
        const rel: string = parent ? `${parent.rel}/${name}` : name;
        const node: DirNode = {
          rel,
          depth: level,
          files: [],
          instruction: "AGENTS.md",
          skills: 0,
          ignored: false,
          children: [],
        };
        parent?.children.push(name);
        const abs = join(cwd, rel);
        mkdirSync(abs, { recursive: true });
        writeFileSync(join(abs, "AGENTS.md"), instructionText(rel, "AGENTS.md", random));
        for (let index = 0; index < FILES_PER_FOLDER; index++) {
          const file = `file-${index}.ts`;
          writeFileSync(join(abs, file), `export const value${index} = ${index};\n`);
          node.files.push(file);
        }
        files += 1 + FILES_PER_FOLDER;
        dirs.push(node);
        byRel.set(rel, node);
        parent = node;
      }
    }
  }
  writeFileSync(join(cwd, "AGENTS.md"), "# Root rules (Pi loads this one itself)\n");
  writeFileSync(join(cwd, ".gitignore"), "node_modules/\n");
  if (git) gitInit(cwd);
  return { root, cwd, agentDir, dirs, byRel, fileCount: files + 2, instructionFiles: dirs.length, git };
}

/**
 * Per chain, depth by depth in turn: one read in its deepest folder (cold: no folder of the chain
 * was touched before), then `WARM_PER_CHAIN` reads of other files there (warm).
 */
export function chainWorkload(tree: SyntheticTree, options: ChainOptions): ReplayCall[] {
  const calls: ReplayCall[] = [];
  const deepest = (depth: number, chain: number) =>
    tree.dirs.find((dir) => dir.depth === depth && dir.rel.startsWith(`d${depth}-${chain}/`))!;
  for (let chain = 0; chain < options.chains; chain++) {
    for (const depth of CHAIN_DEPTHS) {
      const dir = deepest(depth, chain);
      for (let visit = 0; visit <= WARM_PER_CHAIN; visit++) {
        calls.push({
          toolName: "read",
          path: `${dir.rel}/${dir.files[visit % dir.files.length]}`,
          dir,
          cold: visit === 0,
        });
      }
    }
  }
  return calls;
}

interface ChainSide {
  tree: SyntheticTree;
  specs: ToolCallSpec[];
  tools: Array<() => Promise<unknown>>;
}

export interface ChainRun {
  label: string;
  samples: Sample[];
}

export interface ChainCounted {
  label: string;
  samples: CountSample[];
}

export interface ChainMeasured {
  calls: ReplayCall[];
  timed: ChainRun[];
  /** WARM_STREAK warm reads at the bottom of one 8-folder chain, with and without git (see `warmStreak`). */
  streak: { git: Sample[]; noGit: Sample[] };
  counted: ChainCounted[];
  trees: { git: SyntheticTree; noGit: SyntheticTree };
}

async function side(tree: SyntheticTree, calls: ReplayCall[]): Promise<ChainSide> {
  const specs = await buildSpecs(tree.cwd, calls);
  return { tree, specs, tools: toolExecutions(tree.cwd, specs) };
}

async function shutdown(runner: BenchRunner): Promise<void> {
  await runner.runner.emit({ type: "session_shutdown" } as never);
}

/**
 * Ours with git, ours without, and the peer without, in lockstep against bare runners; then the
 * peer with git on a prefix (it spawns git per folder per call); then fs calls per call.
 */
export async function measureChains(options: ChainOptions, probe?: () => void): Promise<ChainMeasured> {
  const git = generateChainTree(options, true);
  const noGit = generateChainTree(options, false);
  const calls = chainWorkload(git, options);
  const sides = { git: await side(git, calls), noGit: await side(noGit, calls) };
  const perChain = CHAIN_DEPTHS.length * (1 + WARM_PER_CHAIN);
  const runners: BenchRunner[] = [];
  const load = async (name: string, paths: string[], tree: SyntheticTree) => {
    const runner = await loadRunner(name, paths, tree.cwd, tree.agentDir);
    runners.push(runner);
    return runner;
  };
  const lanes = [
    { label: "ours, git", path: OURS_PATH, on: sides.git },
    { label: "ours, no git", path: OURS_PATH, on: sides.noGit },
    { label: "peer, no git", path: PEER_PATH, on: sides.noGit },
  ];
  const timed: ChainRun[] = [];
  try {
    const loaded = [];
    for (const lane of lanes) {
      loaded.push({
        ext: await load(lane.label, [lane.path], lane.on.tree),
        base: await load("base", [], lane.on.tree),
        calls,
        specs: lane.on.specs,
        tools: lane.on.tools,
      });
    }
    const samples = await timeLanes(loaded, { warmup: options.warmupChains * perChain, probe });
    lanes.forEach((lane, index) => timed.push({ label: lane.label, samples: samples[index]! }));
    const peerGit = {
      ext: await load("peer, git", [PEER_PATH], git),
      base: await load("base", [], git),
      calls,
      specs: sides.git.specs,
      tools: sides.git.tools,
    };
    // Its cost is git processes, tens of ms each: no JIT warm-up is worth its minutes.
    const limit = Math.min(calls.length, options.peerGitChains * perChain);
    const [peerSamples] = await timeLanes([peerGit], { warmup: 0, limit });
    timed.push({ label: "peer, git", samples: peerSamples! });
  } finally {
    for (const runner of runners.splice(0)) await shutdown(runner);
  }
  const streak = await warmStreak(git, noGit);
  return { calls, timed, streak, counted: await countChains(calls, sides, options, perChain), trees: { git, noGit } };
}

/** `length` reads of the files at the bottom of the tree's first 8-folder chain in turn; the first is cold. */
export function streakCalls(tree: SyntheticTree, length: number): ReplayCall[] {
  const bottom = tree.dirs.find((dir) => dir.depth === 8)!;
  return Array.from({ length }, (_, index) => ({
    toolName: "read",
    path: `${bottom.rel}/${bottom.files[index % bottom.files.length]}`,
    dir: bottom,
    cold: index === 0,
  }));
}

/**
 * The warm path at its purest, git against no git: one chain's cold read, then warm reads of the
 * files at its bottom, each call's tool_call then tool_result with no tool in between (nothing of
 * git's can finish meanwhile), interleaved call by call with a bare runner, both trees in lockstep.
 * Fresh runners, so the chain is cold for them at the first call only.
 */
async function warmStreak(git: SyntheticTree, noGit: SyntheticTree): Promise<{ git: Sample[]; noGit: Sample[] }> {
  const calls = streakCalls(git, 1 + 2 * WARM_STREAK);
  const runners: BenchRunner[] = [];
  try {
    const lanes = [];
    for (const tree of [git, noGit]) {
      const ext = await loadRunner("ours", [OURS_PATH], tree.cwd, tree.agentDir);
      const base = await loadRunner("base", [], tree.cwd, tree.agentDir);
      runners.push(ext, base);
      lanes.push({ ext, base, calls, specs: await buildSpecs(tree.cwd, calls), tools: [] });
    }
    const [withGit, withoutGit] = await timeLanes(lanes, { warmup: 1 + WARM_STREAK });
    return { git: withGit!, noGit: withoutGit! };
  } finally {
    for (const runner of runners) await shutdown(runner);
  }
}

/** fs calls and spawns per call; probes go in before the runners load (see bench.ts). */
async function countChains(
  calls: ReplayCall[],
  sides: { git: ChainSide; noGit: ChainSide },
  options: ChainOptions,
  perChain: number,
): Promise<ChainCounted[]> {
  const fs = installFsCounter();
  const spawns = installSpawnCounter();
  const counted: ChainCounted[] = [];
  try {
    const runs = [
      { label: "ours, git", path: OURS_PATH, on: sides.git, limit: calls.length },
      { label: "ours, no git", path: OURS_PATH, on: sides.noGit, limit: calls.length },
      { label: "peer, no git", path: PEER_PATH, on: sides.noGit, limit: calls.length },
      { label: "peer, git", path: PEER_PATH, on: sides.git, limit: options.peerGitChains * perChain },
    ];
    for (const run of runs) {
      const runner = await loadRunner(run.label, [run.path], run.on.tree.cwd, run.on.tree.agentDir);
      try {
        counted.push({
          label: run.label,
          samples: await countReplay(runner, calls, run.on.specs, { fs, spawns }, run.limit),
        });
      } finally {
        await shutdown(runner);
      }
    }
  } finally {
    fs.uninstall();
    spawns.uninstall();
  }
  return counted;
}
