// The replayed tool calls: mostly reads, some edits and writes, with the locality of a real agent.
// Most calls revisit one of the few folders it worked in lately; a few enter a folder it has never
// touched (a cold call); now and then it goes back to an older one, or reads into node_modules.

import { rng } from "../tests/rng.ts";
import { pick, type DirNode, type SyntheticTree } from "./tree.ts";

export interface ReplayCall {
  toolName: "read" | "edit" | "write";
  /** cwd-relative path of the file the tool touches. */
  path: string;
  dir: DirNode;
  /** First visit of this folder in the replay: the extension has never seen it. */
  cold: boolean;
}

export interface WorkloadOptions {
  calls: number;
  seed: number;
  /** Share of first visits that go to depth 8, the depth the goals are stated at. */
  depth8Share?: number;
  /** Probability that a call enters a folder never visited before. */
  newScopeRate?: number;
}

const RECENT = 6;
const P_VENDORED = 0.015;
const P_OLD = 0.04;
const P_INSTRUCTION_READ = 0.01;

export function buildWorkload(tree: SyntheticTree, options: WorkloadOptions): ReplayCall[] {
  const random = rng(options.seed);
  const depth8Share = options.depth8Share ?? 0.45;
  const pNew = options.newScopeRate ?? 0.06;
  const working = tree.dirs.filter((dir) => !dir.ignored);
  const vendored = tree.dirs.filter((dir) => dir.ignored && dir.files.length > 0);
  const unvisited = new Set(working);
  const unvisitedDepth8 = new Set(working.filter((dir) => dir.depth === 8));
  const visited: DirNode[] = [];
  const recent: DirNode[] = [];
  const calls: ReplayCall[] = [];
  let written = 0;

  const enter = (dir: DirNode): boolean => {
    const cold = unvisited.delete(dir);
    unvisitedDepth8.delete(dir);
    if (cold) visited.push(dir);
    const at = recent.indexOf(dir);
    if (at !== -1) recent.splice(at, 1);
    recent.unshift(dir);
    if (recent.length > RECENT) recent.pop();
    return cold;
  };

  const newScope = (): DirNode | undefined => {
    const pool = unvisitedDepth8.size > 0 && random() < depth8Share ? unvisitedDepth8 : unvisited;
    if (pool.size === 0) return undefined;
    return [...pool][Math.floor(random() * pool.size)];
  };

  // The session starts deep in one package, as an agent does after reading the task: the first
  // folder is at depth 8 when the tree has one, so that short prefixes of the replay (the peer's
  // run in a git tree) are measured at the goals' depth too.
  const first =
    unvisitedDepth8.size > 0 ? [...unvisitedDepth8][Math.floor(random() * unvisitedDepth8.size)]! : newScope()!;
  enter(first);
  calls.push(callIn(random, recent[0]!, true, written++));

  while (calls.length < options.calls) {
    const roll = random();
    let dir: DirNode | undefined;
    if (roll < pNew) dir = newScope();
    else if (roll < pNew + P_VENDORED && vendored.length > 0) {
      const vendor = pick(random, vendored);
      // Vendored folders are never cached scopes; they do not enter the working set.
      calls.push({ toolName: "read", path: `${vendor.rel}/${pick(random, vendor.files)}`, dir: vendor, cold: false });
      continue;
    } else if (roll < pNew + P_VENDORED + P_OLD && visited.length > RECENT) dir = pick(random, visited);
    // Mostly the most recent folders: a geometric pick over the working set.
    dir ??= recent[Math.min(recent.length - 1, Math.floor(-Math.log(1 - random()) * 1.2))]!;
    const cold = enter(dir);
    calls.push(callIn(random, dir, cold, written++));
  }
  return calls;
}

function callIn(random: () => number, dir: DirNode, cold: boolean, serial: number): ReplayCall {
  const roll = random();
  if (dir.instruction && roll < P_INSTRUCTION_READ) {
    return { toolName: "read", path: `${dir.rel}/${dir.instruction}`, dir, cold };
  }
  if (roll < 0.8) return { toolName: "read", path: `${dir.rel}/${pick(random, dir.files)}`, dir, cold };
  if (roll < 0.92) return { toolName: "edit", path: `${dir.rel}/${pick(random, dir.files)}`, dir, cold };
  return { toolName: "write", path: `${dir.rel}/new-${serial}.ts`, dir, cold };
}
