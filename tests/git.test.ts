// docs/limits.md, git: submodules, names that look like pathspec magic, and a cwd that git itself ignores.

import { test } from "node:test";
import assert from "node:assert/strict";
import { makeLibrary } from "./fixtures.ts";
import { git, loadRunner, reminderOf, withCwdAt, withTree } from "./harness.ts";

const ignoredTree = {
  ".gitignore": "generated/\nnotes/\n",
  "generated/AGENTS.md": "GENERATED-RULES",
  "generated/x.ts": "x",
  "notes/AGENTS.md": "NOTES-RULES",
  "notes/x.ts": "x",
};

async function reminder(h: Awaited<ReturnType<typeof loadRunner>>, path: string): Promise<string> {
  return reminderOf((await h.call("read", { path })).content) ?? "";
}

test("a read inside a git submodule delivers its files and keeps ignore checking for the rest of the session", () =>
  withTree(ignoredTree, async (tree) => {
    const lib = makeLibrary(tree);
    git(tree.cwd, "init", "-q");
    git(tree.cwd, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib");
    const h = await loadRunner(tree);
    assert.match(await reminder(h, "vendor/lib/src/a.ts"), /LIB-RULES/);
    assert.equal(await reminder(h, "generated/x.ts"), "", "git still answers after the submodule path");
  }));

test("folders named like pathspec magic are asked about literally, and ignore checking goes on", () =>
  withTree(
    { ...ignoredTree, ":(glob)notes/AGENTS.md": "GLOB-NAMED-RULES", ":(glob)notes/x.ts": "x", ":notes/x.ts": "x" },
    async (tree) => {
      tree.write(":notes/AGENTS.md", "COLON-NAMED-RULES");
      git(tree.cwd, "init", "-q");
      const h = await loadRunner(tree);
      assert.match(await reminder(h, ":(glob)notes/x.ts"), /GLOB-NAMED-RULES/);
      assert.match(await reminder(h, ":notes/x.ts"), /COLON-NAMED-RULES/);
      assert.equal(await reminder(h, "notes/x.ts"), "");
      assert.equal(await reminder(h, "generated/x.ts"), "");
    },
  ));

test("with cwd inside a folder git ignores, nested files are delivered and only folders ignored below cwd are skipped", () =>
  withTree(
    {
      ".gitignore": "scratch/\n",
      "scratch/proj/pkg/AGENTS.md": "PKG-RULES",
      "scratch/proj/pkg/a.ts": "a\n",
      "scratch/proj/node_modules/dep/AGENTS.md": "VENDOR-RULES",
      "scratch/proj/node_modules/dep/x.js": "x",
    },
    async (tree) => {
      git(tree.cwd, "init", "-q");
      const h = await loadRunner(withCwdAt(tree, "scratch/proj"));
      assert.match(await reminder(h, "pkg/a.ts"), /PKG-RULES/);
      assert.equal(await reminder(h, "node_modules/dep/x.js"), "");
    },
  ));

test("with cwd in a subfolder of the repository, folders git ignores below cwd are skipped", () =>
  withTree(
    {
      ".gitignore": "app/gen/\n",
      "app/gen/AGENTS.md": "GENERATED-RULES",
      "app/gen/x.ts": "x",
      "app/src/AGENTS.md": "SRC-RULES",
      "app/src/a.ts": "a\n",
    },
    async (tree) => {
      git(tree.cwd, "init", "-q");
      const h = await loadRunner(withCwdAt(tree, "app"));
      assert.equal(await reminder(h, "gen/x.ts"), "");
      assert.match(await reminder(h, "src/a.ts"), /SRC-RULES/);
    },
  ));
