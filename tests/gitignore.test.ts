// Vendored and ignored code: folders that git ignores, on every path that reaches a folder's view, and
// in whichever cwd the extension is bound to.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createLazyAgents, type SpawnGit } from "../index.ts";
import { loadRunner, reminderOf, withTree } from "./harness.ts";

function gitInit(cwd: string): void {
  execFileSync("git", ["init", "-q"], { cwd });
}

const ignoredTree = {
  ".gitignore": "generated/\n",
  "generated/AGENTS.md": "GENERATED-RULES",
  "generated/out.ts": "x",
  "src/AGENTS.md": "SRC-RULES",
  "src/a.ts": "a",
};

test("with the write gate on, a write into a git-ignored folder is neither held back nor given its rules", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    const write = await h.call("write", { path: "generated/new.ts", content: "n" });
    assert.equal(write.blocked, false);
    assert.deepEqual(write.content, write.original);
    const held = await h.call("write", { path: "src/new.ts", content: "n" });
    assert.equal(held.blocked, true, "the same gate holds a folder git does not ignore");
    assert.match(held.reason ?? "", /SRC-RULES/);
  }));

test("writing or editing an instruction file in a git-ignored folder delivers nothing", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree);
    const write = await h.call("write", { path: "generated/sub/AGENTS.md", content: "WRITTEN-RULES" });
    assert.deepEqual(write.content, write.original);
    const edit = await h.call("edit", {
      path: "generated/AGENTS.md",
      edits: [{ oldText: "GENERATED-RULES", newText: "EDITED-RULES" }],
    });
    assert.equal(edit.isError, false);
    assert.deepEqual(edit.content, edit.original);
    const control = await h.call("edit", {
      path: "src/AGENTS.md",
      edits: [{ oldText: "SRC-RULES", newText: "SRC-2" }],
    });
    assert.match(reminderOf(control.content) ?? "", /SRC-2/, "an edit outside the ignored folder delivers");
  }));

test("a folder that a negated .gitignore pattern re-includes is not ignored", () =>
  withTree(
    {
      ".gitignore": "generated/*\n!generated/keep/\n",
      "generated/keep/AGENTS.md": "KEEP-RULES",
      "generated/keep/a.ts": "a",
      "generated/drop/AGENTS.md": "DROP-RULES",
      "generated/drop/a.ts": "a",
    },
    async (tree) => {
      gitInit(tree.cwd);
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "generated/keep/a.ts" })).content) ?? "", /KEEP-RULES/);
      const dropped = await h.call("read", { path: "generated/drop/a.ts" });
      assert.deepEqual(dropped.content, dropped.original);
    },
  ));

test("one loaded extension hosted on a second cwd rebinds to it: its files, its paths, its git", () =>
  withTree({ "a/AGENTS.md": "FIRST-RULES", "a/x.ts": "x", "gen/AGENTS.md": "FIRST-GEN", "gen/x.ts": "x" }, (first) =>
    withTree(
      {
        ".gitignore": "gen/\n",
        "b/AGENTS.md": "SECOND-RULES",
        "b/x.ts": "x",
        "gen/AGENTS.md": "SECOND-GEN",
        "gen/x.ts": "x",
      },
      async (second) => {
        execFileSync("git", ["init", "-q"], { cwd: second.cwd });
        const one = await loadRunner(first);
        assert.match(reminderOf((await one.call("read", { path: "a/x.ts" })).content) ?? "", /FIRST-RULES/);
        assert.match(reminderOf((await one.call("read", { path: "gen/x.ts" })).content) ?? "", /FIRST-GEN/);
        const two = await loadRunner(second, { loaded: one.loaded });
        const reminder = reminderOf((await two.call("read", { path: "b/x.ts" })).content) ?? "";
        assert.match(reminder, /<instructions path="b\/AGENTS.md" scope="b\/\*\*">\nSECOND-RULES/);
        const ignored = await two.call("read", { path: "gen/x.ts" });
        assert.deepEqual(ignored.content, ignored.original, "the second cwd's .gitignore applies");
      },
    ),
  ));

/** Git's own check-ignore helper, answering only after a pause: slower than the tool it races. */
const slowGit: SpawnGit = (cwd) =>
  spawn("sh", ["-c", "sleep 0.5; exec git check-ignore --stdin -z --verbose --non-matching"], {
    cwd,
    env: { ...process.env, GIT_FLUSH: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });

test("the first call into a new folder waits for git's answer before its result is built", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: slowGit })] });
    const ignored = await h.call("read", { path: "generated/out.ts" });
    assert.deepEqual(ignored.content, ignored.original);
    assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /SRC-RULES/);
  }));
