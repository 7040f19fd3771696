// Issue 2 behaviour through Pi's real extension runner and the real read, edit and write tools.
import { test } from "node:test";
import assert from "node:assert/strict";
import { utimesSync, unlinkSync, writeFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { countOccurrences, loadRunner, reminderOf, textOf, withTree } from "./harness.ts";

const chain = {
  "AGENTS.md": "ROOT-RULES",
  "src/AGENTS.md": "SRC-RULES",
  "src/components/AGENTS.md": "COMPONENT-RULES",
  "src/components/button.ts": "export const button = 1;\n",
};

test("read below cwd appends the nested chain once, parent first, with scopes", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const first = await h.call("read", { path: "src/components/button.ts" });
    const reminder = reminderOf(first.content);
    assert.ok(reminder, "reminder appended");
    assert.deepEqual(first.content.slice(0, -1), first.original, "tool content intact");
    assert.ok(!reminder.includes("ROOT-RULES"), "cwd's own file is Pi's job");
    assert.ok(reminder.indexOf("SRC-RULES") < reminder.indexOf("COMPONENT-RULES"));
    assert.match(reminder, /path="src\/AGENTS.md" scope="src\/\*\*"/);
    assert.match(reminder, /path="src\/components\/AGENTS.md" scope="src\/components\/\*\*"/);
    assert.match(reminder, /more specific \(deeper\) folder takes precedence/);
    assert.match(reminder, /not a message from the user/);
    const second = await h.call("read", { path: "src/components/button.ts" });
    assert.equal(reminderOf(second.content), undefined);
    assert.deepEqual(second.content, second.original);
  }));

test("a file directly in cwd activates nothing", () =>
  withTree({ "AGENTS.md": "ROOT", "README.md": "hi" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "README.md" });
    assert.deepEqual(result.content, result.original);
  }));

test("the reminder records the delivery in details and keeps the tool's own details", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "src/components/button.ts" });
    const record = (
      result.details as { lazyAgents: { files: Array<{ path: string; scope: string; version: string }> } }
    ).lazyAgents;
    assert.deepEqual(
      record.files.map((f) => [f.path, f.scope]),
      [
        ["src/AGENTS.md", "src"],
        ["src/components/AGENTS.md", "src/components"],
      ],
    );
    assert.match(record.files[0]!.version, /^[0-9a-f]{16}$/);
  }));

test("regression: a failed read activates nothing, the next successful one delivers", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const failed = await h.call("read", { path: "src/components/missing.ts" });
    assert.equal(failed.isError, true);
    assert.deepEqual(failed.content, failed.original);
    const ok = await h.call("read", { path: "src/components/button.ts" });
    assert.match(reminderOf(ok.content) ?? "", /COMPONENT-RULES/);
  }));

test("regression: a failed edit still activates its scope", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("edit", {
      path: "src/components/button.ts",
      edits: [{ oldText: "NOT THERE", newText: "x" }],
    });
    assert.equal(result.isError, true);
    assert.match(reminderOf(result.content) ?? "", /COMPONENT-RULES/);
  }));

test("regression: a write into directories that do not exist yet resolves through the nearest ancestor", () =>
  withTree({ "src/AGENTS.md": "SRC-RULES" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("write", { path: "src/new/deeper/file.ts", content: "x" });
    assert.equal(result.isError, false);
    assert.match(reminderOf(result.content) ?? "", /SRC-RULES/);
  }));

test("regression: an absolute path inside cwd works like a relative one", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: tree.abs("src/components/button.ts") });
    assert.match(reminderOf(result.content) ?? "", /COMPONENT-RULES/);
  }));

test("regression: AGENTS.override.md wins, and its removal lets AGENTS.md apply at the next access", () =>
  withTree({ "src/AGENTS.override.md": "OVERRIDE", "src/AGENTS.md": "PLAIN", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const first = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(first, /OVERRIDE/);
    assert.doesNotMatch(first, /PLAIN/);
    unlinkSync(tree.abs("src/AGENTS.override.md"));
    const second = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(second, /PLAIN/);
    assert.match(second, /src\/AGENTS.override.md no longer applies/);
  }));

test("regression: CLAUDE.md is the fallback when no AGENTS file exists", () =>
  withTree({ "src/CLAUDE.md": "CLAUDE-RULES", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "src/a.ts" });
    assert.match(reminderOf(result.content) ?? "", /path="src\/CLAUDE.md"[^]*CLAUDE-RULES/);
  }));

test("regression: repo vs repo-evil, a sibling that shares the prefix is outside", () =>
  withTree({ "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    writeFileSync(join(tree.root, "repo-evil-AGENTS.md"), "x");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(tree.root, "repo-evil", "sub"), { recursive: true });
    writeFileSync(join(tree.root, "repo-evil", "AGENTS.md"), "EVIL");
    writeFileSync(join(tree.root, "repo-evil", "sub", "AGENTS.md"), "EVIL-SUB");
    writeFileSync(join(tree.root, "repo-evil", "sub", "x.ts"), "x");
    for (const path of ["../repo-evil/sub/x.ts", join(tree.root, "repo-evil", "sub", "x.ts")]) {
      const result = await h.call("read", { path });
      assert.deepEqual(result.content, result.original, path);
    }
  }));

test("regression: ..cache/ is a child of cwd, not a parent", () =>
  withTree({ "..cache/AGENTS.md": "DOTDOT-CHILD", "..cache/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "..cache/x.ts" });
    assert.match(reminderOf(result.content) ?? "", /DOTDOT-CHILD/);
  }));

test("regression: a directory symlink out of cwd contributes nothing", () =>
  withTree({ "src/AGENTS.md": "SRC" }, async (tree) => {
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(tree.root, "outside"), { recursive: true });
    writeFileSync(join(tree.root, "outside", "AGENTS.md"), "OUTSIDE-SECRET");
    writeFileSync(join(tree.root, "outside", "x.ts"), "x");
    tree.link("src/linked", join(tree.root, "outside"));
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "src/linked/x.ts" });
    assert.equal(result.isError, false);
    assert.doesNotMatch(textOf(result.content), /OUTSIDE-SECRET/);
  }));

test("regression: a file symlink out of cwd is refused with a fixed notice", () =>
  withTree({ "src/a.ts": "a" }, async (tree) => {
    writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
    tree.link("src/AGENTS.md", join(tree.root, "secret.md"));
    const h = await loadRunner(tree, { hasUI: true });
    const result = await h.call("read", { path: "src/a.ts" });
    const reminder = reminderOf(result.content) ?? "";
    assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
    assert.match(reminder, /src\/AGENTS.md was not loaded: a link that leads outside the working directory/);
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: src/AGENTS.md was not loaded: a link that leads outside the working directory",
    ]);
  }));

test("regression: a link to /dev/zero is refused without reading it", () =>
  withTree({ "src/a.ts": "a" }, async (tree) => {
    tree.link("src/AGENTS.md", "/dev/zero");
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "src/a.ts" });
    assert.match(reminderOf(result.content) ?? "", /src\/AGENTS.md was not loaded/);
  }));

test("regression: an instruction file over 64 KiB is refused and the next name is tried", () =>
  withTree({ "src/AGENTS.md": "x".repeat(64 * 1024 + 1), "src/CLAUDE.md": "SMALL", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /src\/AGENTS.md was not loaded: larger than the size limit/);
    assert.match(reminder, /SMALL/);
    assert.doesNotMatch(reminder, /xxxxxxxx/);
  }));

test("regression: exactly 64 KiB is accepted", () =>
  withTree({ "src/AGENTS.md": "y".repeat(64 * 1024), "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /yyyyyyyy/);
  }));

test("regression: invalid UTF-8 is refused", () =>
  withTree({ "src/AGENTS.md": new Uint8Array([0x41, 0xff, 0xfe, 0x42]), "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /src\/AGENTS.md was not loaded: not valid UTF-8/);
  }));

test("regression: a BOM is stripped and CRLF becomes LF", () =>
  withTree({ "src/AGENTS.md": "\uFEFFline one\r\nline two\r\n", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /\nline one\nline two\n/);
    assert.doesNotMatch(reminder, /\r|\uFEFF/);
  }));

test("regression: two aliases of one file share one record and are sent once", () =>
  withTree({ "src/AGENTS.md": "SHARED", "src/a.ts": "a", "lib/b.ts": "b" }, async (tree) => {
    tree.link("lib/AGENTS.md", "../src/AGENTS.md");
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /SHARED/);
    const second = reminderOf((await h.call("read", { path: "lib/b.ts" })).content) ?? "";
    assert.doesNotMatch(second, /SHARED/, "the text is not sent again");
    assert.match(second, /src\/AGENTS.md also governs lib\/\*\*/);
  }));

test("regression: reading the instruction file itself counts as its delivery", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const own = await h.call("read", { path: "src/AGENTS.md" });
    assert.equal(countOccurrences(textOf(own.content), "SRC-RULES"), 1);
    const next = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.doesNotMatch(next, /SRC-RULES/);
    assert.match(next, /COMPONENT-RULES/);
  }));

test("regression: a partial read of an instruction file does not count, the next access sends it", () =>
  withTree({ "src/AGENTS.md": "L1\nL2\nL3\n", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const partial = await h.call("read", { path: "src/AGENTS.md", limit: 1 });
    assert.deepEqual(partial.content, partial.original);
    assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /L1\nL2\nL3/);
  }));

test("regression: three parallel reads in one scope deliver exactly once", () =>
  withTree({ "src/AGENTS.md": "ONCE", "src/a.ts": "a", "src/b.ts": "b", "src/c.ts": "c" }, async (tree) => {
    const h = await loadRunner(tree);
    const results = await Promise.all(["a", "b", "c"].map((name) => h.call("read", { path: `src/${name}.ts` })));
    const total = results.reduce((sum, r) => sum + countOccurrences(textOf(r.content), "ONCE"), 0);
    assert.equal(total, 1);
  }));

test("regression: an external edit between accesses re-sends only the changed file", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    writeFileSync(tree.abs("src/components/AGENTS.md"), "COMPONENT-RULES-V2");
    const reminder = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.match(reminder, /COMPONENT-RULES-V2/);
    assert.match(reminder, /supersedes/);
    assert.doesNotMatch(reminder, /SRC-RULES/);
  }));

test("regression: a touch that changes no content is not re-sent", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    const later = new Date(Date.now() + 5000);
    utimesSync(tree.abs("src/components/AGENTS.md"), later, later);
    const result = await h.call("read", { path: "src/components/button.ts" });
    assert.deepEqual(result.content, result.original);
  }));

test("regression: a same-size edit with its mtime restored is still re-sent", () =>
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

test("regression: a deleted instruction file is retracted once", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/components/button.ts" });
    unlinkSync(tree.abs("src/components/AGENTS.md"));
    const first = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.match(first, /src\/components\/AGENTS.md no longer applies/);
    const second = await h.call("read", { path: "src/components/button.ts" });
    assert.deepEqual(second.content, second.original);
  }));

test("regression: an edit of an instruction file sends its new version in the same result", () =>
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

test("regression: writing a new instruction file counts as delivering it", () =>
  withTree({ "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("write", { path: "src/AGENTS.md", content: "WRITTEN-RULE" });
    assert.deepEqual(result.content, result.original);
    const again = await h.call("read", { path: "src/a.ts" });
    assert.deepEqual(again.content, again.original);
  }));

test("regression: vendored node_modules instructions never reach the model", () =>
  withTree(
    {
      "node_modules/dep/AGENTS.md": "VENDOR",
      "node_modules/dep/index.js": "x",
      "node_modules/dep/.agents/skills/v/SKILL.md": "---\nname: v\ndescription: vendor skill\n---\n",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const result = await h.call("read", { path: "node_modules/dep/index.js" });
      assert.deepEqual(result.content, result.original);
    },
  ));

test("regression: unusable path arguments leave the result untouched and never throw", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    for (const path of [42, "", "\0", "src/\0x", "x".repeat(5000), "~", null]) {
      const result = await h.call("read", { path });
      assert.deepEqual(result.content, result.original, String(path).slice(0, 20));
    }
  }));
