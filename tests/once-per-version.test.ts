// docs/behaviour.md, Once per version: never sent twice, a changed file supersedes, a deleted one is withdrawn.

import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync, utimesSync, unlinkSync, writeFileSync, statSync } from "node:fs";
import { loadRunner, reminderOf, twoTrees, withTree, finalTurn, startRuntime } from "./harness.ts";
import { chain, files, readA, remindersIn } from "./fixtures.ts";

test("an external edit between accesses re-sends only the changed file", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    writeFileSync(tree.abs("src/components/AGENTS.md"), "COMPONENT-RULES-V2");
    const reminder = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.match(reminder, /COMPONENT-RULES-V2/);
    assert.match(reminder, /supersedes/);
    assert.doesNotMatch(reminder, /SRC-RULES/);
  }));

test("a touch that changes no content is not re-sent", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    const later = new Date(Date.now() + 5000);
    utimesSync(tree.abs("src/components/AGENTS.md"), later, later);
    const result = await h.call("read", { path: "src/components/button.ts" });
    assert.deepEqual(result.content, result.original);
  }));

test("a same-size edit with its mtime restored is still re-sent", () =>
  withTree({ "src/AGENTS.md": "RULE-AAAA", "src/a.ts": "a" }, async (tree) => {
    const fixed = 1_700_000_000;
    utimesSync(tree.abs("src/AGENTS.md"), fixed, fixed);
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/a.ts" });
    writeFileSync(tree.abs("src/AGENTS.md"), "RULE-BBBB");
    utimesSync(tree.abs("src/AGENTS.md"), fixed, fixed);
    assert.equal(statSync(tree.abs("src/AGENTS.md")).mtimeMs, fixed * 1000);
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /RULE-BBBB/);
  }));

test("a deleted instruction file is retracted once", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    unlinkSync(tree.abs("src/components/AGENTS.md"));
    const first = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.match(first, /src\/components\/AGENTS.md no longer applies/);
    const second = await h.call("read", { path: "src/components/button.ts" });
    assert.deepEqual(second.content, second.original);
  }));

test("a write that re-creates a deleted folder without its instruction file withdraws it", () =>
  twoTrees({ "deep/src/AGENTS.md": "DEEP-RULE", "deep/src/f.ts": "f" }, async (tree) => {
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "deep/src/f.ts" })).content) ?? "", /DEEP-RULE/);
    rmSync(tree.abs("deep/src"), { recursive: true });
    const result = await h.call("write", { path: "deep/src/h.ts", content: "h" });
    assert.match(reminderOf(result.content) ?? "", /deep\/src\/AGENTS.md no longer applies/);
  }));

test("an edit of an instruction file sends its new version in the same result", () =>
  withTree({ "src/AGENTS.md": "OLD-RULE", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/a.ts" });
    const result = await h.call("edit", {
      path: "src/AGENTS.md",
      edits: [{ oldText: "OLD-RULE", newText: "NEW-RULE" }],
    });
    assert.match(reminderOf(result.content) ?? "", /NEW-RULE/);
    const again = await h.call("read", { path: "src/a.ts" });
    assert.deepEqual(again.content, again.original);
  }));

test("writing a new instruction file counts as delivering it", () =>
  withTree({ "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("write", { path: "src/AGENTS.md", content: "WRITTEN-RULE" });
    assert.deepEqual(result.content, result.original);
    const again = await h.call("read", { path: "src/a.ts" });
    assert.deepEqual(again.content, again.original);
  }));

test("in a real session a touch re-sends nothing and a same-size edit with its mtime restored supersedes", () =>
  withTree(files, async (tree) => {
    const fixed = 1_700_000_000;
    utimesSync(tree.abs("pkg/AGENTS.md"), fixed, fixed);
    const h = await startRuntime(tree);
    try {
      h.script([readA, finalTurn()]);
      await h.session.prompt("first");
      utimesSync(tree.abs("pkg/AGENTS.md"), fixed + 60, fixed + 60);
      h.script([readA, finalTurn()]);
      await h.session.prompt("after touch");
      assert.equal(remindersIn(h.session.sessionFile!).length, 1, "touch re-sends nothing");
      writeFileSync(tree.abs("pkg/AGENTS.md"), "PKG-RULEZ");
      utimesSync(tree.abs("pkg/AGENTS.md"), fixed + 60, fixed + 60);
      assert.equal(statSync(tree.abs("pkg/AGENTS.md")).size, "PKG-RULES".length);
      h.script([readA, finalTurn()]);
      await h.session.prompt("after same-size edit");
      const reminders = remindersIn(h.session.sessionFile!);
      assert.equal(reminders.length, 2);
      assert.match(reminders[1]!, /PKG-RULEZ/);
      assert.match(reminders[1]!, /<file path="[^"]*" supersedes="earlier version">\n/);
    } finally {
      await h.dispose();
    }
  }));
