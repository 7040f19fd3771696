// Imports and the budget: what an imported folder contributes, which tokens count, and how texts are cut.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cutUtf8, importTokens } from "../index.ts";
import { loadRunner, reminderOf, withTree } from "./harness.ts";

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
        /<instructions path="shared\/b.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md">\nRULE-B-SHARED/,
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

test("a UTF-8 cut to nothing or less keeps nothing", () => {
  const table: Array<[string, number, string]> = [
    ["abc", 0, ""],
    ["abc", -1, ""],
    ["abc", -5, ""],
    ["é", 1, ""],
    ["abc", 3, "abc"],
  ];
  for (const [text, max, expected] of table) assert.equal(cutUtf8(text, max), expected, `${text} to ${max}`);
});

test("within one folder the budget keeps the instruction file whole before its imports", () =>
  withTree(
    {
      "pkg/AGENTS.md": `RULES @extra.md ${"r".repeat(2000)} RULES-END`,
      "pkg/extra.md": `EXTRA ${"e".repeat(3000)} EXTRA-END`,
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree, { settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /RULES-END/);
      assert.doesNotMatch(reminder, /EXTRA-END/);
      assert.match(reminder, /\[pkg\/extra.md was cut here to fit the size budget/);
    },
  ));

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
      for (const name of ["a", "b", "c"]) assert.equal(report.split(`pkg/${name}.md  scope`).length, 2, name);
    },
  ));
