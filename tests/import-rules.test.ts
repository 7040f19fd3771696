// Imports under the source rules, imports that appear late or are shared, and files that govern
// several folders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  textOf,
  toolTurn,
  withTree,
} from "./harness.ts";

const recordOf = (details: unknown) =>
  (details as { lazyAgents?: { files: Array<{ path: string; scope: string; version: string; via: string }> } })
    .lazyAgents;

test("imports of dotfiles, ignored folders, git-ignored files and links into them are refused with their reason", () =>
  withTree(
    {
      ".gitignore": "private/\n*.local.md\n",
      ".env": "ENV-SECRET",
      ".npmrc": "NPMRC-SECRET",
      "node_modules/dep/NOTES.md": "VENDOR-NOTES",
      "private/notes.md": "IGNORED-FOLDER-NOTES",
      "docs/rules.local.md": "IGNORED-FILE-NOTES",
      "docs/ok.md": "OK-IMPORT",
      "pkg/AGENTS.md": "PKG @../.git/config @../.env @../.npmrc @../node_modules/dep/NOTES.md @../private/notes.md",
      "pkg/x.ts": "x",
      "lib/AGENTS.md": "LIB @../docs/rules.local.md @env.md @vendor.md @../docs/ok.md",
      "lib/y.ts": "y",
    },
    async (tree) => {
      execFileSync("git", ["init", "-q"], { cwd: tree.cwd });
      tree.link("lib/env.md", "../.env");
      tree.link("lib/vendor.md", "../node_modules/dep/NOTES.md");
      const h = await loadRunner(tree, { hasUI: true });
      const pkg = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      const lib = reminderOf((await h.call("read", { path: "lib/y.ts" })).content) ?? "";
      const both = pkg + lib;
      for (const secret of [
        "repositoryformatversion",
        "ENV-SECRET",
        "NPMRC-SECRET",
        "VENDOR-NOTES",
        "IGNORED-FOLDER-NOTES",
        "IGNORED-FILE-NOTES",
      ]) {
        assert.ok(!both.includes(secret), `${secret} must not be imported`);
      }
      assert.match(pkg, /PKG @/);
      assert.match(lib, /OK-IMPORT/, "an import that git does not ignore arrives in the first result");
      const notices = (reminder: string) =>
        reminder
          .split("\n")
          .filter((line) => line.startsWith("- "))
          .sort();
      assert.deepEqual(notices(pkg), [
        "- an import in pkg/AGENTS.md was not loaded: a dotfile, which may hold credentials.",
        "- an import in pkg/AGENTS.md was not loaded: ignored by git.",
        "- an import in pkg/AGENTS.md was not loaded: inside an ignored directory.",
      ]);
      assert.deepEqual(notices(lib), [
        "- an import in lib/AGENTS.md was not loaded: a dotfile, which may hold credentials.",
        "- an import in lib/AGENTS.md was not loaded: ignored by git.",
        "- an import in lib/AGENTS.md was not loaded: inside an ignored directory.",
      ]);
      assert.equal(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content), undefined, "each told once");
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      const report = h.notifications.join("\n");
      for (const reason of ["a dotfile, which may hold credentials", "ignored by git", "inside an ignored directory"]) {
        assert.ok(report.includes(`pkg/AGENTS.md  ${reason}`), reason);
      }
    },
  ));

test("an import of a file inside .git is refused even when ignoreDirs leaves .git out", () =>
  withTree({ "pkg/AGENTS.md": "PKG @../.git/config", "pkg/x.ts": "x" }, async (tree) => {
    execFileSync("git", ["init", "-q"], { cwd: tree.cwd });
    const h = await loadRunner(tree, { settings: { lazyAgents: { ignoreDirs: ["node_modules"] } } });
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.doesNotMatch(reminder, /repositoryformatversion/);
    assert.match(reminder, /an import in pkg\/AGENTS.md was not loaded: inside an ignored directory/);
  }));

test("the write gate holds a write once, with the imports git has cleared, and the retry goes through", () =>
  withTree({ "pkg/AGENTS.md": "PKG @rules.md", "pkg/rules.md": "GATE-RULES" }, async (tree) => {
    execFileSync("git", ["init", "-q"], { cwd: tree.cwd });
    const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    const held = await h.call("write", { path: "pkg/new.ts", content: "n" });
    assert.equal(held.blocked, true);
    assert.match(held.reason ?? "", /GATE-RULES/);
    // The model retries in its next turn, once it has the instructions.
    await h.runner.emit({ type: "turn_end", turnIndex: 0, toolResults: [] } as never);
    assert.equal((await h.call("write", { path: "pkg/new.ts", content: "n" })).blocked, false);
  }));

test("an import whose target is created later is delivered at the next access", () =>
  withTree({ "pkg/AGENTS.md": "PKG @../docs/rules.md", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "", /PKG/);
    tree.write("docs/rules.md", "LATE-RULES");
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /path="docs\/rules.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md"/);
    assert.match(reminder, /LATE-RULES/);
  }));

test("an import still imported by a deeper file on the chain is not withdrawn", () =>
  withTree(
    {
      "a/AGENTS.md": "A @shared.md",
      "a/shared.md": "SHARED-TEXT",
      "a/x.ts": "x",
      "a/b/AGENTS.md": "B @../shared.md",
      "a/b/y.ts": "y",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "a/x.ts" })).content) ?? "", /SHARED-TEXT/);
      writeFileSync(tree.abs("a/AGENTS.md"), "A without imports");
      const result = await h.call("read", { path: "a/b/y.ts" });
      const reminder = reminderOf(result.content) ?? "";
      assert.match(reminder, /A without imports/);
      assert.doesNotMatch(reminder, /a\/shared.md no longer applies/);
      assert.doesNotMatch(reminder, /SHARED-TEXT/, "the model still holds it");
      assert.equal(reminderOf((await h.call("read", { path: "a/b/y.ts" })).content), undefined);
    },
  ));

test("a whole read of an imported file counts as its delivery and is not appended again", () =>
  withTree(
    { "pkg/AGENTS.md": "PKG @docs/rules.md", "pkg/docs/rules.md": "RULES-TEXT\n", "pkg/x.ts": "x" },
    async (tree) => {
      const h = await loadRunner(tree);
      const read = await h.call("read", { path: "pkg/docs/rules.md" });
      assert.equal(countOccurrences(textOf(read.content), "RULES-TEXT"), 1);
      assert.match(reminderOf(read.content) ?? "", /PKG @docs/);
      const files = recordOf(read.details)?.files ?? [];
      assert.deepEqual(
        files.find((file) => file.path === "pkg/docs/rules.md"),
        {
          path: "pkg/docs/rules.md",
          scope: "pkg",
          version: files[1]?.version,
          bytes: 11,
          via: "read",
          importedBy: "pkg/AGENTS.md",
        },
      );
      assert.equal(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content), undefined);
    },
  ));

const linkedTree = {
  "docs/pkg-guidelines.md": "PKG-GUIDE",
  "packages/a/x.ts": "x",
  "packages/b/y.ts": "y",
};

function linkGuidelines(tree: { link(path: string, target: string): void }): void {
  tree.link("packages/a/AGENTS.md", "../../docs/pkg-guidelines.md");
  tree.link("packages/b/AGENTS.md", "../../docs/pkg-guidelines.md");
}

test("one file linked into two folders is sent once; the second scope gets one line naming it", () =>
  withTree(linkedTree, async (tree) => {
    linkGuidelines(tree);
    const h = await loadRunner(tree);
    const first = reminderOf((await h.call("read", { path: "packages/a/x.ts" })).content) ?? "";
    assert.match(first, /path="docs\/pkg-guidelines.md" scope="packages\/a\/\*\*"/);
    const second = reminderOf((await h.call("read", { path: "packages/b/y.ts" })).content) ?? "";
    assert.doesNotMatch(second, /PKG-GUIDE/);
    const lines = second.split("\n").filter((line) => line.startsWith("- "));
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /docs\/pkg-guidelines.md also governs packages\/b\/\*\*/);
    assert.equal(reminderOf((await h.call("read", { path: "packages/b/y.ts" })).content), undefined);
    assert.equal(reminderOf((await h.call("read", { path: "packages/a/x.ts" })).content), undefined);
  }));

test("the line that a linked file also governs another folder is said once across a resume", () =>
  withTree(linkedTree, async (tree) => {
    linkGuidelines(tree);
    const readA = toolTurn(["read", { path: "packages/a/x.ts" }]);
    const readB = toolTurn(["read", { path: "packages/b/y.ts" }]);
    const h = await startSession(tree, [readA, readB, finalTurn()]);
    await h.session.prompt("first");
    const file = h.sessionManager.getSessionFile()!;
    h.dispose();
    const again = await startSession(tree, [readB, readA, finalTurn()], { sessionFile: file });
    try {
      await again.session.prompt("second");
      const reminders = persistedToolResults(again.sessionManager)
        .map((result) => reminderOf(result.content))
        .filter((reminder): reminder is string => reminder !== undefined);
      assert.equal(reminders.length, 2);
      assert.equal(reminders.filter((r) => r.includes("also governs packages/b/**")).length, 1);
    } finally {
      again.dispose();
    }
  }));
