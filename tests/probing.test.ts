// docs/behaviour.md, Which files: a folder is listed once or probed name by name; a file is read in one read.
// How many calls that costs is a performance contract in bench/contracts.test.ts; here, what arrives.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createLazyAgents, nodeFileSystem, type FileSystem } from "../index.ts";
import { fsError, interceptFileSystem } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import { probedFolders } from "./fixtures.ts";
import { loadRunner, reminderOf, withTree, type Tree } from "./harness.ts";

async function readThrough(tree: Tree, fs: FileSystem, path: string): Promise<string> {
  const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs, spawnGit: noGit })] });
  const result = await h.call("read", { path });
  return reminderOf(result.content) ?? "";
}

/** Folder contents that decide between one listing and the name probes. */
const FOLDERS: Array<{ name: string; spec: Record<string, string>; delivers: boolean }> = [
  {
    name: "a small folder's instruction file arrives",
    spec: probedFolders.small,
    delivers: true,
  },
  {
    name: "a folder too large to list cheaply still delivers its file",
    spec: probedFolders.large,
    delivers: true,
  },
  {
    name: "a name that matches an instruction file only in case is not one",
    spec: probedFolders.caseOnly,
    delivers: false,
  },
];

for (const folder of FOLDERS) {
  test(folder.name, () =>
    withTree(folder.spec, async (tree) => {
      const reminder = await readThrough(tree, nodeFileSystem, "a/x.ts");
      if (folder.delivers) assert.match(reminder, /A-RULES/);
      // On a case-sensitive filesystem the probes find no file named like one.
      else if (process.platform === "linux") assert.equal(reminder, "");
    }),
  );
}

test("a folder that cannot be listed still delivers its file, with no notice", () =>
  withTree({ "a/AGENTS.md": "A-RULES\n", "a/x.ts": "x\n" }, async (tree) => {
    const dir = tree.abs("a");
    const fs = interceptFileSystem((call, proceed) => {
      if (call.method === "readdir" && call.path === dir) throw fsError("EACCES", "scandir", call.path);
      return proceed();
    });
    const reminder = await readThrough(tree, fs, "a/x.ts");
    assert.match(reminder, /A-RULES/);
    assert.doesNotMatch(reminder, /not loaded|unreadable/);
  }));

test("an instruction file that does not grow arrives whole", () =>
  withTree({ "a/AGENTS.md": `A-RULES\n${"- keep it short\n".repeat(500)}`, "a/x.ts": "x\n" }, async (tree) => {
    const reminder = await readThrough(tree, nodeFileSystem, "a/x.ts");
    assert.match(reminder, /A-RULES/);
    assert.equal(reminder.split("- keep it short").length - 1, 500, "the whole file arrives");
  }));
