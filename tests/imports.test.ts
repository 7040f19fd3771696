// docs/behaviour.md, Imports: what @path tokens bring in, under the same rules as instruction files.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { importTokens } from "../index.ts";
import {
  firstReads,
  costRatio,
  loadRunner,
  reminderOf,
  withTree,
  countOccurrences,
  textOf,
  twoTrees,
} from "./harness.ts";

const recordOf = (details: unknown) =>
  (details as { lazyAgents?: { files: Array<{ path: string; scope: string; version: string; via: string }> } })
    .lazyAgents;

test("import tokens: paths outside code, not emails, not inside fences or code spans", () => {
  const text = [
    "See @docs/api.md and @./rules.md, also (@../shared/style.md).",
    "Mail me at someone@example.com or ping @scope/pkg.",
    "Inline `@not/this.md` is code.",
    "```",
    "@not/fenced.md",
    "```",
    "~~~md",
    "@also/not.md",
    "~~~",
    "Last: @docs/api.md again.",
  ].join("\n");
  assert.deepEqual(importTokens(text), ["docs/api.md", "./rules.md", "../shared/style.md", "scope/pkg"]);
});

test("an import chain with a cycle delivers each file once, each under its own path", () =>
  withTree(
    {
      "pkg/AGENTS.md": "PKG imports @docs/a.md",
      "pkg/docs/a.md": "A-TEXT imports @b.md",
      "pkg/docs/b.md": "B-TEXT imports @a.md and @../AGENTS.md",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /path="pkg\/docs\/a.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md"/);
      assert.match(reminder, /path="pkg\/docs\/b.md" scope="pkg\/\*\*" imported-by="pkg\/docs\/a.md"/);
      assert.equal(reminder.split("A-TEXT").length - 1, 1);
      assert.equal(reminder.split("B-TEXT").length - 1, 1);
      assert.ok(reminder.indexOf("PKG imports") < reminder.indexOf("A-TEXT"));
      const again = await h.call("read", { path: "pkg/x.ts" });
      assert.deepEqual(again.content, again.original);
    },
  ));

test("imports nest at most five hops", () =>
  withTree(
    {
      "pkg/AGENTS.md": "@h1.md",
      "pkg/h1.md": "H1 @h2.md",
      "pkg/h2.md": "H2 @h3.md",
      "pkg/h3.md": "H3 @h4.md",
      "pkg/h4.md": "H4 @h5.md",
      "pkg/h5.md": "H5 @h6.md",
      "pkg/h6.md": "H6-TOO-DEEP",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /H5 @h6.md/);
      assert.doesNotMatch(reminder, /H6-TOO-DEEP/);
    },
  ));

test("an imported directory brings its regular files in sorted order", () =>
  withTree(
    {
      "pkg/AGENTS.md": "Rules: @rules",
      "pkg/rules/b.md": "RULE-B",
      "pkg/rules/a.md": "RULE-A",
      "pkg/rules/.hidden": "HIDDEN",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.ok(reminder.indexOf("RULE-A") < reminder.indexOf("RULE-B"));
      assert.doesNotMatch(reminder, /HIDDEN/);
    },
  ));

test("an import that escapes through .. is refused without reading it", () =>
  twoTrees({ "pkg/AGENTS.md": "PKG @../../secret.md", "pkg/x.ts": "x" }, async (tree) => {
    writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
    assert.match(reminder, /an import in pkg\/AGENTS.md was not loaded: outside the working directory/);
    const notices = reminder.split("\n").filter((line) => line.startsWith("- "));
    assert.equal(notices.length, 1);
    assert.doesNotMatch(notices[0]!, /secret/, "the notice never repeats the token");
  }));

test("an import that escapes through a symlink is refused", () =>
  twoTrees({ "pkg/AGENTS.md": "PKG @link.md", "pkg/x.ts": "x" }, async (tree) => {
    writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
    tree.link("pkg/link.md", join(tree.root, "secret.md"));
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
    assert.match(
      reminder,
      /an import in pkg\/AGENTS.md was not loaded: a link that leads outside the working directory/,
    );
  }));

test("an @scope/pkg token that names nothing is ignored silently", () =>
  twoTrees({ "pkg/AGENTS.md": "Use @acme/logger for logs; mail ops@acme.dev.", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /Use @acme\/logger/);
    assert.doesNotMatch(reminder, /not loaded/);
  }));

test("a changed import is re-sent alone, marked as replacing the earlier version", () =>
  twoTrees({ "pkg/AGENTS.md": "PKG @style.md", "pkg/style.md": "STYLE-V1", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "pkg/x.ts" });
    writeFileSync(tree.abs("pkg/style.md"), "STYLE-V2");
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /STYLE-V2/);
    assert.match(reminder, /supersedes/);
    assert.doesNotMatch(reminder, /PKG @style/);
  }));

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
  twoTrees({ "pkg/AGENTS.md": "PKG @../docs/rules.md", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "", /PKG/);
    tree.write("docs/rules.md", "LATE-RULES");
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /path="docs\/rules.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md"/);
    assert.match(reminder, /LATE-RULES/);
  }));

test("an import still imported by a deeper file on the chain is not withdrawn", () =>
  twoTrees(
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
  twoTrees(
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

test("an imported folder takes a symlinked file that stays inside cwd, and refuses one that leads out", () =>
  withTree(
    {
      "pkg/AGENTS.md": "Rules: @rules",
      "pkg/rules/a.md": "RULE-A",
      "shared/b.md": "RULE-B-SHARED",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      tree.link("pkg/rules/b.md", tree.abs("shared/b.md"));
      writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
      tree.link("pkg/rules/c.md", join(tree.root, "secret.md"));
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /RULE-A/);
      assert.match(
        reminder,
        /<file path="shared\/b.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md">\nRULE-B-SHARED/,
      );
      assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
      assert.match(reminder, /an import in pkg\/AGENTS.md was not loaded: a link that leads outside/);
    },
  ));

test("import tokens: relative paths and names only, never absolute paths or bare slashes", () => {
  const table: Array<[string, string[]]> = [
    ["@/etc/passwd", []],
    ["see @/abs/path.md here", []],
    ["@./a.md", ["./a.md"]],
    ["@../b.md", ["../b.md"]],
    ["@.../c.md", []],
    ["@docs/d.md.", ["docs/d.md"]],
    ["(@e.md)", ["e.md"]],
  ];
  for (const [text, expected] of table) assert.deepEqual(importTokens(text), expected, text);
});

test("an import reached twice, through a cycle or two importers, is listed once by /lazy-agents", () =>
  withTree(
    {
      "pkg/AGENTS.md": "Rules: @a.md @b.md",
      "pkg/a.md": "A imports @c.md and @b.md",
      "pkg/b.md": "B imports @c.md and @a.md",
      "pkg/c.md": "C-RULES",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true });
      await h.call("read", { path: "pkg/x.ts" });
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      const report = h.notifications.join("\n");
      assert.match(report, /Instruction files and imports \(4\):/);
      for (const name of ["a", "b", "c"])
        assert.equal(
          report.split("\n").filter((line) => new RegExp(`^ {2}pkg/${name}\\.md +scope `).test(line)).length,
          1,
          name,
        );
    },
  ));

test("an import after a closed fenced block is followed; one inside the block is not", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": ["PKG-RULES", "```sh", "@fenced.md", "```", "Also read @after.md."].join("\n"),
      "pkg/fenced.md": "FENCED-IMPORT",
      "pkg/after.md": "AFTER-FENCE-IMPORT",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /AFTER-FENCE-IMPORT/);
      assert.doesNotMatch(reminder, /FENCED-IMPORT/);
    },
  ));

test(`an import into a dot folder is refused; a source's own home is not a dotfile`, () =>
  twoTrees(
    {
      ".aws/credentials": "AWS-SECRET",
      ".claude/rules/style.md": "CLAUDE-STYLE",
      "pkg/AGENTS.md": "PKG @../.aws/credentials @../.claude/rules/style.md",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.doesNotMatch(reminder, /AWS-SECRET/);
      assert.match(reminder, /an import in pkg\/AGENTS.md was not loaded: a dotfile, which may hold credentials/);
      assert.match(reminder, /<file path=".claude\/rules\/style.md"[^>]*imported-by="pkg\/AGENTS.md"/);
    },
  ));

test(`a read delivers imports of imports and folder imports in its own result`, () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "PKG @docs/a.md @../shared/",
      "pkg/docs/a.md": "HOP-ONE @b.md",
      "pkg/docs/b.md": "HOP-TWO @c.md",
      "pkg/docs/c.md": "HOP-THREE",
      "shared/one.md": "SHARED-ONE",
      "shared/two.md": "SHARED-TWO",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      for (const text of ["PKG", "HOP-ONE", "HOP-TWO", "HOP-THREE", "SHARED-ONE", "SHARED-TWO"])
        assert.match(reminder, new RegExp(text), text);
    },
  ));

test(`an import that an edit adds arrives with the edit's result, imports of it included`, () =>
  twoTrees(
    { "pkg/AGENTS.md": "PKG-V1", "pkg/docs/a.md": "ADDED-A @b.md", "pkg/docs/b.md": "ADDED-B", "pkg/x.ts": "x" },
    async (tree) => {
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "", /PKG-V1/);
      const edit = await h.call("edit", {
        path: "pkg/AGENTS.md",
        edits: [{ oldText: "PKG-V1", newText: "PKG-V2 @docs/a.md" }],
      });
      const reminder = reminderOf(edit.content) ?? "";
      assert.match(reminder, /ADDED-A/);
      assert.match(reminder, /ADDED-B/);
    },
  ));

test(`an import two files share stays while one the model holds still imports it`, () =>
  twoTrees(
    {
      "a/AGENTS.md": "A @shared.md",
      "a/shared.md": "SHARED-TEXT",
      "a/b/AGENTS.md": "B @../shared.md",
      "a/b/y.ts": "y",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "a/b/y.ts" })).content) ?? "", /SHARED-TEXT/);
      const edit = await h.call("edit", { path: "a/AGENTS.md", edits: [{ oldText: "A @shared.md", newText: "A" }] });
      assert.doesNotMatch(reminderOf(edit.content) ?? "", /shared\.md no longer applies/);
      const again = reminderOf((await h.call("read", { path: "a/b/y.ts" })).content) ?? "";
      assert.doesNotMatch(again, /SHARED-TEXT/, "the model still holds it");
    },
  ));

test("an import within five hops by a shorter way arrives, though a longer way reached its importer first", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "ROOT @h1.md @b.md",
      "pkg/h1.md": "H1 @h2.md",
      "pkg/h2.md": "H2 @h3.md",
      "pkg/h3.md": "H3 @h4.md",
      "pkg/h4.md": "H4 @h5.md",
      "pkg/h5.md": "H5 @y.md",
      "pkg/b.md": "B @h5.md",
      "pkg/y.md": "Y-TEXT",
      "pkg/x.ts": "x",
    },
    async (tree, mode) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      // y.md is three hops away: AGENTS.md, b.md, h5.md, y.md.
      assert.match(reminder, /Y-TEXT/, mode);
      assert.doesNotMatch(reminder, /import depth limit/, mode);
    },
  ));

test("a fifth-hop import that imports only files already delivered is told no depth cap: nothing lies past it", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "ROOT @h1.md",
      "pkg/h1.md": "H1 @h2.md",
      "pkg/h2.md": "H2 @h3.md",
      "pkg/h3.md": "H3 @h4.md",
      "pkg/h4.md": "H4 @h5.md",
      "pkg/h5.md": "H5 @AGENTS.md @h1.md",
      "pkg/x.ts": "x",
    },
    async (tree, mode) => {
      const h = await loadRunner(tree, { hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /H5 @AGENTS.md/, mode);
      assert.doesNotMatch(reminder, /import depth limit/, mode);
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      assert.doesNotMatch(h.notifications.join("\n"), /import depth limit/, mode);
    },
  ));

test(`an import two files share is withdrawn once it is deleted, though the other file still names it`, () => {
  // Two folders, a and b, each with an AGENTS.md that imports docs/x.md and a file to read.
  const folders = ["a", "b"].flatMap((d) => [
    [`${d}/AGENTS.md`, `${d} @../docs/x.md`],
    [`${d}/${d}.ts`, d],
  ]);
  return twoTrees({ ...Object.fromEntries(folders), "docs/x.md": "X-TEXT" }, async (tree) => {
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "a/a.ts" })).content) ?? "", /X-TEXT/);
    assert.match(reminderOf((await h.call("read", { path: "b/b.ts" })).content) ?? "", /b @/);
    rmSync(tree.abs("docs/x.md"));
    const reminder = reminderOf((await h.call("read", { path: "a/a.ts" })).content) ?? "";
    assert.match(reminder, /docs\/x\.md no longer applies/);
  });
});

test("an instruction file whose token runs on in 60,000 dots is read in linear time, its imports still followed", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": `PKG imports @docs/a.md.\nNot a path: @x${".".repeat(60_000)}y\n`,
      "pkg/docs/a.md": "A-TEXT",
      "pkg/x.ts": "x",
      "other/AGENTS.md": `OTHER imports @docs/a.md.\nNot a path: _x${".".repeat(60_000)}y\n`,
      "other/docs/a.md": "A-TEXT",
      "other/x.ts": "x",
    },
    async (tree, mode) => {
      const { reminders, read } = firstReads(tree, { settings: { lazyAgents: { reminderBudgetBytes: 128 * 1024 } } });
      // A guard against a quadratic scan: trimming the dots with `[.:!?]+$` took over 4 s (Node 24, this VM), against
      // about 100 ms for the same file without the token.
      const ratio = await costRatio(read("pkg/x.ts"), read("other/x.ts"));
      assert.ok(ratio < 4, `${mode}: ${ratio.toFixed(1)} times the same read without the token`);
      assert.match(reminders["pkg/x.ts"]!, /A-TEXT/, mode);
    },
  ));

test("import tokens: a code span closes only with a backtick run of its own length", () => {
  const table: Array<[string, string[]]> = [
    ["`` a @in/span.md ` b ``", []],
    ["``` x @in/three.md `` y ```", []],
    ["`unclosed @out/a.md", ["out/a.md"]],
    ["`` x ` @out/b.md", ["out/b.md"]],
    ["`a` @out/c.md `b`", ["out/c.md"]],
    ["`` @out/d.md ` ``` x", ["out/d.md"]],
  ];
  for (const [text, expected] of table) assert.deepEqual(importTokens(text), expected, text);
});
