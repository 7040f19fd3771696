// README "What it does" and docs/behaviour.md (When, Which files, Only below cwd, Order, Reading the file itself).

import { test } from "node:test";
import assert from "node:assert/strict";
import { unlinkSync, readFileSync } from "node:fs";
import type { LedgerRecord } from "../index.ts";
import {
  countOccurrences,
  loadRunner,
  reminderOf,
  textOf,
  withTree,
  twoTrees,
  finalTurn,
  persistedToolResults,
  prefixBreaks,
  startSession,
  toolTurn,
  lockFile,
} from "./harness.ts";
import { chain, tree } from "./fixtures.ts";

function systemMessages(messages: unknown[]): string[] {
  return messages.filter((m) => (m as { role: string }).role === "system").map((m) => JSON.stringify(m));
}

const recordOf = (details: unknown) => (details as { lazyAgents?: LedgerRecord } | undefined)?.lazyAgents;

test("read below cwd appends the nested chain once, parent first, with scopes", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const first = await h.call("read", { path: "src/components/button.ts" });
    const reminder = reminderOf(first.content);
    assert.ok(reminder, "reminder appended");
    assert.deepEqual(first.content.slice(0, -1), first.original, "tool content intact");
    assert.ok(!reminder.includes("ROOT-RULES"), "cwd's own file is Pi's job");
    assert.ok(reminder.indexOf("SRC-RULES") < reminder.indexOf("COMPONENT-RULES"));
    // Each file governs its own folder, so its tag names its path alone.
    assert.match(reminder, /<file path="src\/AGENTS.md">\n/);
    assert.match(reminder, /<file path="src\/components\/AGENTS.md">\n/);
    assert.match(reminder, /where two disagree, the deeper folder.s wins/);
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

test("a failed read activates nothing, the next successful one delivers", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const failed = await h.call("read", { path: "src/components/missing.ts" });
    assert.equal(failed.isError, true);
    assert.deepEqual(failed.content, failed.original);
    const ok = await h.call("read", { path: "src/components/button.ts" });
    assert.match(reminderOf(ok.content) ?? "", /COMPONENT-RULES/);
  }));

test("a failed edit still activates its scope", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("edit", {
      path: "src/components/button.ts",
      edits: [{ oldText: "NOT THERE", newText: "x" }],
    });
    assert.equal(result.isError, true);
    assert.match(reminderOf(result.content) ?? "", /COMPONENT-RULES/);
  }));

test("a write into directories that do not exist yet resolves through the nearest ancestor", () =>
  withTree({ "src/AGENTS.md": "SRC-RULES" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("write", { path: "src/new/deeper/file.ts", content: "x" });
    assert.equal(result.isError, false);
    assert.match(reminderOf(result.content) ?? "", /SRC-RULES/);
  }));

test("an absolute path inside cwd works like a relative one", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: tree.abs("src/components/button.ts") });
    assert.match(reminderOf(result.content) ?? "", /COMPONENT-RULES/);
  }));

test("AGENTS.override.md wins, and its removal lets AGENTS.md apply at the next access", () =>
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

test("CLAUDE.md is the fallback when no AGENTS file exists", () =>
  withTree({ "src/CLAUDE.md": "CLAUDE-RULES", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "src/a.ts" });
    assert.match(reminderOf(result.content) ?? "", /path="src\/CLAUDE.md"[^]*CLAUDE-RULES/);
  }));

test("reading the instruction file itself counts as its delivery", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const own = await h.call("read", { path: "src/AGENTS.md" });
    assert.equal(countOccurrences(textOf(own.content), "SRC-RULES"), 1);
    const next = reminderOf((await h.call("read", { path: "src/components/button.ts" })).content) ?? "";
    assert.doesNotMatch(next, /SRC-RULES/);
    assert.match(next, /COMPONENT-RULES/);
  }));

test("a partial read of an instruction file does not count, the next access sends it", () =>
  withTree({ "src/AGENTS.md": "L1\nL2\nL3\n", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree);
    const partial = await h.call("read", { path: "src/AGENTS.md", limit: 1 });
    assert.deepEqual(partial.content, partial.original);
    assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /L1\nL2\nL3/);
  }));

test("a real session delivers each file once, keeps the prompt prefix stable and never touches the system prompt", () =>
  withTree(tree, async (t) => {
    const h = await startSession(t, [
      toolTurn(["read", { path: "packages/api/server.ts" }]),
      toolTurn(["read", { path: "packages/api/routes.ts" }], ["read", { path: "packages/web/page.ts" }]),
      toolTurn(["edit", { path: "packages/web/page.ts", edits: [{ oldText: "3", newText: "4" }] }]),
      toolTurn(["write", { path: "packages/api/new/handler.ts", content: "x\n" }]),
      finalTurn(),
    ]);
    try {
      await h.session.prompt("work on the api");
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      for (const marker of ["PACKAGES-RULES", "API-RULES", "WEB-RULES"]) {
        assert.equal(countOccurrences(file, marker), 1, marker);
      }
      const toolText = persistedToolResults(h.sessionManager)
        .map((r) => textOf(r.content))
        .join("\n");
      assert.equal(
        countOccurrences(toolText, "ROOT-RULES"),
        0,
        "Pi's own context file stays in the system prompt only",
      );
      assert.match(h.session.systemPrompt, /ROOT-RULES/);
      assert.equal(countOccurrences(toolText, "ui-review"), 1);
      assert.equal(countOccurrences(file, "<nested-instructions"), 2, "one reminder for api, one for web");
      assert.equal(countOccurrences(file, "UI-SKILL-BODY"), 0);
      assert.deepEqual(prefixBreaks(h.requestMessages), []);
      const systems = h.requestMessages.map(systemMessages);
      for (const s of systems) assert.deepEqual(s, systems[0]);
      assert.equal(h.session.systemPrompt.includes("API-RULES"), false);
      const results = persistedToolResults(h.sessionManager);
      assert.match(reminderOf(results[0]!.content) ?? "", /PACKAGES-RULES[^]*API-RULES/);
    } finally {
      h.dispose();
    }
  }));

test("a write that fails on an existing instruction file delivers the file on disk, not the model's text", (t) =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES on disk\n", "pkg/a.ts": "a\n" }, async (tree) => {
    const unlock = lockFile(tree.abs("pkg/AGENTS.md"));
    if (!unlock) return t.skip("this machine cannot make a file refuse writes");
    try {
      const h = await loadRunner(tree);
      const failed = await h.call("write", { path: "pkg/AGENTS.md", content: "MODEL-TEXT\n" });
      assert.equal(failed.isError, true, "the write failed");
      assert.match(reminderOf(failed.content) ?? "", /PKG-RULES on disk/);
      assert.deepEqual(
        recordOf(failed.details)?.files.map((file) => [file.path, file.via]),
        [["pkg/AGENTS.md", "reminder"]],
      );
      const read = await h.call("read", { path: "pkg/a.ts" });
      assert.deepEqual(read.content, read.original, "delivered once");
    } finally {
      unlock();
    }
  }));

test("a write that succeeds on an instruction file counts as its delivery", () =>
  withTree({ "pkg/AGENTS.md": "OLD-RULES\n", "pkg/a.ts": "a\n" }, async (tree) => {
    const h = await loadRunner(tree);
    const written = await h.call("write", { path: "pkg/AGENTS.md", content: "NEW-RULES\n" });
    assert.equal(written.isError, false);
    assert.deepEqual(written.content, written.original);
    assert.deepEqual(
      recordOf(written.details)?.files.map((file) => [file.path, file.via]),
      [["pkg/AGENTS.md", "read"]],
    );
    const read = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(read.content, read.original);
  }));

test("a write through a link to an instruction file counts as its delivery, whatever the link's name", () =>
  twoTrees(
    { "pkg/AGENTS.md": "OLD-RULES\n", "pkg/NOTES.md": { link: "AGENTS.md" }, "pkg/a.ts": "a\n" },
    async (tree) => {
      const h = await loadRunner(tree);
      const written = await h.call("write", { path: "pkg/NOTES.md", content: "NEW-RULES\n" });
      assert.equal(written.isError, false);
      assert.deepEqual(written.content, written.original, "the model wrote the file: nothing to append");
      assert.deepEqual(
        recordOf(written.details)?.files.map((file) => [file.path, file.via]),
        [["pkg/AGENTS.md", "read"]],
      );
      const read = await h.call("read", { path: "pkg/a.ts" });
      assert.deepEqual(read.content, read.original);
    },
  ));

test("a tool result's structured content stays as the tool gave it when the reminder is appended", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    const input = { path: "src/components/button.ts" };
    const structuredContent = { kind: "file", lines: 1 };
    await h.runner.emitToolCall({ type: "tool_call", toolName: "read", toolCallId: "sc-1", input } as never);
    const patched = await h.runner.emitToolResult({
      type: "tool_result",
      toolName: "read",
      toolCallId: "sc-1",
      input,
      content: [{ type: "text", text: "export const button = 1;\n" }],
      details: undefined,
      structuredContent,
      isError: false,
    } as never);
    const result = patched as { content?: Array<{ type: string; text?: string }>; structuredContent?: unknown };
    assert.match(reminderOf(result.content ?? []) ?? "", /COMPONENT-RULES/);
    assert.deepEqual(result.structuredContent, structuredContent);
  }));

test("a read through a link named otherwise is judged as a read of the file it shows, in part or whole", () =>
  twoTrees({ "pkg/AGENTS.md": "L1\nL2\n", "pkg/NOTES.md": { link: "AGENTS.md" }, "pkg/a.ts": "a\n" }, async (tree) => {
    const h = await loadRunner(tree);
    const partial = await h.call("read", { path: "pkg/NOTES.md", limit: 1 });
    assert.deepEqual(partial.content, partial.original, "a partial read neither counts nor is followed by the file");
    const whole = await h.call("read", { path: "pkg/NOTES.md" });
    assert.deepEqual(whole.content, whole.original, "the read shows the file: no second copy");
    assert.deepEqual(
      recordOf(whole.details)?.files.map((file) => `${file.path} ${file.via}`),
      ["pkg/AGENTS.md read"],
    );
    const next = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(next.content, next.original, "delivered by the read");
  }));

test("a write through a link to an instruction file not there yet counts as its delivery", () =>
  twoTrees({ "pkg/NOTES.md": { link: "AGENTS.md" }, "pkg/a.ts": "a\n" }, async (tree, mode) => {
    const h = await loadRunner(tree);
    const written = await h.call("write", { path: "pkg/NOTES.md", content: "NEW-RULES\n" });
    assert.equal(written.isError, false, mode);
    assert.equal(readFileSync(tree.abs("pkg/AGENTS.md"), "utf8"), "NEW-RULES\n", "the write made the link's target");
    assert.deepEqual(written.content, written.original, `${mode}: the model wrote the file: nothing to append`);
    assert.deepEqual(
      recordOf(written.details)?.files.map((file) => `${file.path} ${file.via}`),
      ["pkg/AGENTS.md read"],
      mode,
    );
    const read = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(read.content, read.original, `${mode}: the model's own text is not sent back`);
  }));
