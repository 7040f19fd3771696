// Synthetic monorepos for the benchmark: seeded, up to 10 levels deep, an instruction file in about
// one directory in five, some overrides and CLAUDE.md files, a few `.agents/skills` folders, 50 glob
// rules across `.claude/rules`, `.cursor/rules` and `.github/instructions`, and a `node_modules`
// subtree with instruction files of its own that must never reach the model.

import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rng } from "../tests/rng.ts";

export function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

export const MAX_DEPTH = 10;

export interface DirNode {
  /** cwd-relative, forward slashes. */
  rel: string;
  depth: number;
  files: string[];
  /** Name of the instruction file that applies in this directory, if any. */
  instruction?: string;
  /** Skill files in this directory's `.agents/skills`. */
  skills: number;
  /** Inside `node_modules`: never speaks to the model. */
  ignored: boolean;
  children: string[];
}

export interface SyntheticTree {
  root: string;
  cwd: string;
  agentDir: string;
  dirs: DirNode[];
  byRel: Map<string, DirNode>;
  fileCount: number;
  instructionFiles: number;
  git: boolean;
}

export interface TreeOptions {
  files: number;
  seed: number;
  git: boolean;
}

const NAMES = [
  "src",
  "lib",
  "core",
  "api",
  "internal",
  "components",
  "utils",
  "handlers",
  "models",
  "services",
  "server",
  "client",
  "shared",
  "features",
  "routes",
  "hooks",
  "store",
  "db",
  "schema",
  "jobs",
] as const;
const TOP_LEVEL = ["packages", "apps", "libs", "services", "tools"] as const;
const EXTENSIONS = [".ts", ".ts", ".ts", ".tsx", ".js", ".json", ".md"] as const;

/**
 * Where trees go: $TMPDIR when set, else /dev/shm on Linux, else os.tmpdir(). A 100k-file tree on
 * a busy virtual disk can take a minute to write and as long to delete; in memory it takes seconds,
 * and the figures measured are the extension's, not the disk's (every stat hits the inode cache).
 */
export function treeBase(): string {
  if (process.env.TMPDIR) return tmpdir();
  if (process.platform === "linux") {
    try {
      accessSync("/dev/shm", constants.W_OK);
      return "/dev/shm";
    } catch {
      // No writable /dev/shm: fall back to the system temporary directory.
    }
  }
  return tmpdir();
}

/** A fresh temporary root, removed at exit: cwd `root/repo` and an empty agent directory `root/agent`. */
export function newTreeRoot(prefix: string): { root: string; cwd: string; agentDir: string } {
  const root = realpathSync(mkdtempSync(join(treeBase(), prefix)));
  liveRoots.add(root);
  const cwd = join(root, "repo");
  const agentDir = join(root, "agent");
  mkdirSync(cwd, { recursive: true });
  mkdirSync(agentDir, { recursive: true });
  return { root, cwd, agentDir };
}

/** Average files per directory; sets the number of directories for a given file count. */
const FILES_PER_DIR = 9;

/**
 * Writes a tree of about `files` files under a fresh temporary root. cwd is `root/repo`, so
 * paths outside cwd exist; the agent directory `root/agent` stays empty.
 */
export function generateTree(options: TreeOptions): SyntheticTree {
  const random = rng(options.seed);
  const { root, cwd, agentDir } = newTreeRoot("lazy-agents-bench-");

  const byRel = new Map<string, DirNode>();
  const dirs: DirNode[] = [];
  const addDir = (parent: DirNode | undefined, name: string, ignored: boolean): DirNode => {
    const rel = parent ? `${parent.rel}/${name}` : name;
    const node: DirNode = { rel, depth: (parent?.depth ?? 0) + 1, files: [], skills: 0, ignored, children: [] };
    parent?.children.push(name);
    byRel.set(rel, node);
    dirs.push(node);
    return node;
  };

  growDirectories(random, Math.max(40, Math.round(options.files / FILES_PER_DIR)), addDir, byRel);
  growNodeModules(random, Math.max(2, Math.round(options.files / 400)), addDir);
  assignInstructionFiles(random, dirs);
  const written = writeTree(random, cwd, dirs, options.files);
  const rules = writeRules(random, cwd, dirs);

  writeFileSync(join(cwd, "AGENTS.md"), "# Root rules (Pi loads this one itself)\n");
  writeFileSync(join(cwd, ".gitignore"), "node_modules/\ndist/\ncoverage/\n*.log\n.cache/\n");
  writeFileSync(join(cwd, "package.json"), '{ "name": "synthetic-monorepo", "private": true }\n');
  if (options.git) gitInit(cwd);
  return {
    root,
    cwd,
    agentDir,
    dirs,
    byRel,
    fileCount: written.files + rules + 3,
    instructionFiles: written.instructionFiles,
    git: options.git,
  };
}

/**
 * Random walks from a top-level folder down to a random depth, mostly reusing existing children,
 * so that the tree is bushy near the top and every depth down to MAX_DEPTH is represented.
 */
function growDirectories(
  random: () => number,
  budget: number,
  addDir: (parent: DirNode | undefined, name: string, ignored: boolean) => DirNode,
  byRel: Map<string, DirNode>,
): void {
  const tops = TOP_LEVEL.map((name) => addDir(undefined, name, false));
  let created = tops.length;
  while (created < budget) {
    // Depths 6-10 are common in real monorepos (package/src/feature/…); skew the walk there.
    const target = 2 + Math.floor(random() * (MAX_DEPTH - 1));
    let node = pick(random, tops);
    while (node.depth < target && created < budget) {
      const reuse = node.children.length > 0 && random() < 0.55 + 0.04 * node.depth;
      if (reuse) {
        node = byRel.get(`${node.rel}/${pick(random, node.children)}`)!;
        continue;
      }
      let name: string = pick(random, NAMES);
      if (node.children.includes(name)) name = `${name}-${node.children.length}`;
      node = addDir(node, name, false);
      created++;
    }
  }
}

/** A vendored subtree: ignored by name and by .gitignore, with instruction files that must never apply. */
function growNodeModules(
  random: () => number,
  packages: number,
  addDir: (parent: DirNode | undefined, name: string, ignored: boolean) => DirNode,
): void {
  const nodeModules = addDir(undefined, "node_modules", true);
  for (let index = 0; index < packages; index++) {
    const pkg = addDir(nodeModules, `dep-${index}`, true);
    let node = pkg;
    const depth = 1 + Math.floor(random() * 3);
    for (let level = 0; level < depth; level++) node = addDir(node, pick(random, ["lib", "dist", "src"]), true);
  }
}

/**
 * Guidance is densest where packages begin and sparse deep down, as in real monorepos; over a
 * whole tree (most folders are deep) about one folder in five holds an instruction file.
 */
const INSTRUCTION_SHARE_BY_DEPTH = [0, 0.6, 0.5, 0.3];
const INSTRUCTION_SHARE_DEEP = 0.12;

function assignInstructionFiles(random: () => number, dirs: DirNode[]): void {
  for (const dir of dirs) {
    const roll = random();
    if (roll < (INSTRUCTION_SHARE_BY_DEPTH[dir.depth] ?? INSTRUCTION_SHARE_DEEP)) {
      // About one directory in five; a few use CLAUDE.md or carry an override next to AGENTS.md.
      const kind = random();
      dir.instruction = kind < 0.08 ? "CLAUDE.md" : kind < 0.16 ? "AGENTS.override.md" : "AGENTS.md";
    }
    if (!dir.ignored && random() < 1 / 30) dir.skills = 1 + Math.floor(random() * 2);
  }
}

/** Writes every directory, instruction file, skill and ordinary file; returns what it wrote. */
function writeTree(
  random: () => number,
  cwd: string,
  dirs: DirNode[],
  totalFiles: number,
): { files: number; instructionFiles: number } {
  let files = 0;
  let instructionFiles = 0;
  const perDir = Math.max(1, totalFiles / dirs.length);
  for (const dir of dirs) {
    const abs = join(cwd, dir.rel);
    mkdirSync(abs, { recursive: true });
    if (dir.instruction) {
      writeFileSync(join(abs, dir.instruction), instructionText(dir.rel, dir.instruction, random));
      instructionFiles++;
      files++;
      if (dir.instruction === "AGENTS.override.md") {
        // The override wins; the AGENTS.md under it is what a deletion of the override would expose.
        writeFileSync(join(abs, "AGENTS.md"), instructionText(dir.rel, "AGENTS.md", random));
        files++;
      }
    }
    for (let index = 0; index < dir.skills; index++) {
      const skillDir = join(abs, ".agents", "skills", `skill-${index}`);
      mkdirSync(skillDir, { recursive: true });
      const name = `${dir.rel.replaceAll("/", "-")}-skill-${index}`;
      writeFileSync(
        join(skillDir, "SKILL.md"),
        `---\nname: ${name}\ndescription: How to work on ${dir.rel} (${index}).\n---\nSteps for ${name}.\n`,
      );
      files++;
    }
    const count = Math.max(1, Math.round(perDir * (0.4 + random() * 1.2)));
    for (let index = 0; index < count; index++) {
      const name = `file-${index}${pick(random, EXTENSIONS)}`;
      writeFileSync(join(abs, name), sourceText(dir.rel, name, random));
      dir.files.push(name);
      files++;
    }
  }
  return { files, instructionFiles };
}

/** Glob rules the trees carry, split over the three rule sources at cwd. */
export const RULE_COUNT = 50;

/** Stats a warm call spends on rules beyond the chain: cwd itself and the three rule folders. */
export const RULE_FOLDER_STATS = 4;

const RULE_SOURCES_ON_DISK = [
  { dir: ".claude/rules", file: (i: number) => `rule-${i}.md`, front: (glob: string) => `paths:\n  - "${glob}"` },
  {
    dir: ".cursor/rules",
    file: (i: number) => `rule-${i}.mdc`,
    // Unquoted, as hand-written Cursor rules often are: not valid YAML when the glob starts with `*`.
    front: (glob: string) => `description: Conventions ${glob}\nglobs: ${glob}\nalwaysApply: false`,
  },
  {
    dir: ".github/instructions",
    file: (i: number) => `rule-${i}.instructions.md`,
    front: (glob: string) => `applyTo: "${glob}"`,
  },
] as const;

const WIDE_GLOBS = ["**/*.md", "*.json", "**/*.{tsx,jsx}", "**/file-1.ts", "*.test.ts"] as const;

/** Writes RULE_COUNT rules: nine in ten scoped to a package folder, the rest by file name anywhere. */
function writeRules(random: () => number, cwd: string, dirs: DirNode[]): number {
  const folders = dirs.filter((dir) => !dir.ignored && dir.depth >= 2 && dir.depth <= 3);
  for (let index = 0; index < RULE_COUNT; index++) {
    const source = RULE_SOURCES_ON_DISK[index % RULE_SOURCES_ON_DISK.length]!;
    const glob = index % 10 === 9 ? pick(random, WIDE_GLOBS) : `${pick(random, folders).rel}/**/*.{ts,tsx}`;
    mkdirSync(join(cwd, source.dir), { recursive: true });
    const body = `# Rule ${index} (${source.dir})\nKeep ${glob} consistent with its neighbours.\n`;
    writeFileSync(join(cwd, source.dir, source.file(index)), `---\n${source.front(glob)}\n---\n${body}`);
  }
  return RULE_COUNT;
}

/**
 * An instruction file's text. Its first line is unique per folder, name and version: the bench
 * finds deliveries by it. Package-level guides (depth 1-2) are long; deep notes are short.
 */
export function instructionText(rel: string, name: string, random: () => number, version = 0): string {
  const lines = [`# Rules for ${rel}/ (${name}, v${version})`, ""];
  const depth = rel.split("/").length;
  const count = depth <= 2 ? 30 + Math.floor(random() * 50) : 4 + Math.floor(random() * 16);
  for (let index = 0; index < count; index++) {
    lines.push(`- Rule ${index} for ${rel}: keep modules small, test every handler, document the public API.`);
  }
  return `${lines.join("\n")}\n`;
}

function sourceText(rel: string, name: string, random: () => number): string {
  const lines = [`// ${rel}/${name}`];
  const count = 5 + Math.floor(random() * 40);
  for (let index = 0; index < count; index++) lines.push(`export const value${index} = ${index * 7}; // line ${index}`);
  return `${lines.join("\n")}\n`;
}

export function gitInit(cwd: string): void {
  const result = spawnSync("git", ["init", "-q"], { cwd, stdio: "ignore" });
  if (result.status !== 0) throw new Error("bench: git init failed (is git installed?)");
}

/**
 * Takes the tree out of its git repository by moving `.git` next to cwd, outside it: the same
 * files, ignored and not, now outside any repository. `restore` moves it back.
 */
export function parkGit(tree: SyntheticTree): { restore(): void } {
  const parked = join(tree.root, "git-parked");
  renameSync(join(tree.cwd, ".git"), parked);
  return { restore: () => renameSync(parked, join(tree.cwd, ".git")) };
}

/** Roots of the trees written and not yet removed, so an interrupted run can clean up. */
const liveRoots = new Set<string>();

export function removeTree(tree: { root: string }): void {
  rmSync(tree.root, { recursive: true, force: true });
  liveRoots.delete(tree.root);
}

/** Removes every tree still on disk (after Ctrl-C, say). */
export function removeAllTrees(): void {
  for (const root of liveRoots) removeTree({ root });
}

/**
 * Trees can hold 100k files in memory-backed storage: never leave them behind, whatever ends the
 * run (an error, a closed pipe, Ctrl-C).
 */
export function removeTreesAtExit(): void {
  process.once("exit", removeAllTrees);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      removeAllTrees();
      process.exit(130);
    });
  }
}

/** Working directories (not vendored) by depth. */
export function dirsAtDepth(tree: SyntheticTree, depth: number): DirNode[] {
  return tree.dirs.filter((dir) => !dir.ignored && dir.depth === depth);
}

/**
 * The physical floor of a warm call in `dir`: one stat per directory on the chain below cwd, plus
 * one per instruction file and skill file the chain holds (each must be re-checked for changes),
 * plus cwd and the rule folders (re-checked for new rules).
 */
export function floorOf(tree: SyntheticTree, dir: DirNode): number {
  if (dir.ignored) return 0;
  let floor = RULE_FOLDER_STATS;
  const parts = dir.rel.split("/");
  for (let index = 1; index <= parts.length; index++) {
    const node = tree.byRel.get(parts.slice(0, index).join("/"))!;
    floor += 1 + (node.instruction ? 1 : 0) + node.skills;
  }
  return floor;
}
