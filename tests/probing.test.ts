// docs/behaviour.md, Which files: a folder is listed once or probed name by name; a file is read in one read.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createLazyAgents, type FileSystem } from "../index.ts";
import { fsError, interceptFileSystem, recordingFileSystem, type FsCall } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import { loadRunner, reminderOf, withTree, type Tree } from "./harness.ts";

const NAMES = ["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD", ".agents", ".cursor"];

async function readThrough(tree: Tree, fs: FileSystem, path: string): Promise<string> {
  const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs, spawnGit: noGit })] });
  const result = await h.call("read", { path });
  return reminderOf(result.content) ?? "";
}

/** Names looked up one by one in `dir` that it does not hold (the file it holds is checked anyway). */
const probesOf = (calls: FsCall[], dir: string, holds: string[] = []) =>
  NAMES.filter(
    (name) => !holds.includes(name) && calls.some((call) => call.method === "lstat" && call.path === `${dir}/${name}`),
  );
const listingsOf = (calls: FsCall[], dir: string) =>
  calls.filter((call) => call.method === "readdir" && call.path === dir).length;

/** Folder contents that decide between one listing and the name probes. */
const FOLDERS: Array<{ name: string; spec: Record<string, string>; listed: boolean; delivers: boolean }> = [
  {
    name: "a small folder is listed once instead of probed name by name",
    spec: { "a/AGENTS.md": "A-RULES\n", "a/x.ts": "x\n" },
    listed: true,
    delivers: true,
  },
  {
    name: "a folder too large to list cheaply keeps the name probes and still delivers its file",
    spec: {
      "a/AGENTS.md": "A-RULES\n",
      "a/x.ts": "x\n",
      ...Object.fromEntries(Array.from({ length: 400 }, (_, index) => [`a/generated-source-file-${index}.ts`, "y\n"])),
    },
    listed: false,
    delivers: true,
  },
  {
    name: "a name that matches an instruction file only in case leaves the folder to the name probes",
    spec: { "a/agents.md": "lower\n", "a/x.ts": "x\n" },
    listed: true,
    delivers: false,
  },
];

for (const folder of FOLDERS) {
  test(folder.name, () =>
    withTree(folder.spec, async (tree) => {
      const recorder = recordingFileSystem();
      const reminder = await readThrough(tree, recorder.fs, "a/x.ts");
      const dir = tree.abs("a");
      const caseOnly = "a/agents.md" in folder.spec;
      assert.equal(listingsOf(recorder.calls, dir), folder.listed ? 1 : 0, "listings of the folder");
      const holds = NAMES.filter((name) => `a/${name}` in folder.spec);
      const probes = folder.listed && !caseOnly ? [] : NAMES.filter((name) => !holds.includes(name));
      assert.deepEqual(probesOf(recorder.calls, dir, holds), probes, "name probes");
      if (folder.delivers) assert.match(reminder, /A-RULES/);
      // On a case-sensitive filesystem the probes find no file named like one.
      else if (process.platform === "linux") assert.equal(reminder, "");
    }),
  );
}

test("a folder that cannot be listed is probed by name and still delivers its file", () =>
  withTree({ "a/AGENTS.md": "A-RULES\n", "a/x.ts": "x\n" }, async (tree) => {
    const dir = tree.abs("a");
    const calls: FsCall[] = [];
    const fs = interceptFileSystem((call, proceed) => {
      calls.push(call);
      if (call.method === "readdir" && call.path === dir) throw fsError("EACCES", "scandir", call.path);
      return proceed();
    });
    const reminder = await readThrough(tree, fs, "a/x.ts");
    assert.match(reminder, /A-RULES/);
    assert.deepEqual(
      probesOf(calls, dir, ["AGENTS.md"]),
      NAMES.filter((name) => name !== "AGENTS.md"),
    );
    assert.doesNotMatch(reminder, /not loaded|unreadable/);
  }));

test("an instruction file that does not grow is read whole in one read", () =>
  withTree({ "a/AGENTS.md": `A-RULES\n${"- keep it short\n".repeat(500)}`, "a/x.ts": "x\n" }, async (tree) => {
    const recorder = recordingFileSystem();
    const reminder = await readThrough(tree, recorder.fs, "a/x.ts");
    assert.match(reminder, /A-RULES/);
    assert.equal(reminder.split("- keep it short").length - 1, 500, "the whole file arrives");
    const reads = recorder.calls.filter((call) => call.method === "read" && call.path === tree.abs("a/AGENTS.md"));
    assert.equal(reads.length, 1);
  }));
