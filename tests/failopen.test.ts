// Failures never reach Pi and never go unnoticed; a ledger written by another version loses only
// what does not fit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { createLazyAgents, readRecord } from "../index.ts";
import { FAILURE_LABELS, FAILURE_WARNING } from "../config.ts";
import {
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
} from "./harness.ts";

test("a hook that fails leaves the tool alone, is counted in /lazy-agents under a fixed label, and warns once", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n", "pkg/b.ts": "b\n" }, async (tree) => {
    const broken = createLazyAgents({
      onEngine: (engine) => {
        engine.onToolCall = () => {
          throw new Error(`${tree.cwd}/pkg/AGENTS.md: BOOM`);
        };
        engine.onToolResult = () => {
          throw new Error("BOOM");
        };
      },
    });
    const h = await loadRunner(tree, { hasUI: true, factories: [broken] });
    for (const path of ["pkg/a.ts", "pkg/b.ts"]) {
      const result = await h.call("read", { path });
      assert.equal(result.blocked, false);
      assert.equal(result.isError, false);
      assert.deepEqual(result.content, result.original, "the tool's own result is intact");
    }
    assert.deepEqual(h.notifications, [FAILURE_WARNING], "one fixed warning, no exception text");
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1)!;
    assert.match(report, new RegExp(`${FAILURE_LABELS.toolCall}: 2`));
    assert.match(report, new RegExp(`${FAILURE_LABELS.toolResult}: 2`));
    assert.doesNotMatch(report, /BOOM/);
  }));

const files = {
  "pkg/AGENTS.md": "PKG-RULES",
  "pkg/a.ts": "a\n",
  "other/AGENTS.md": "OTHER-RULES",
  "other/b.ts": "b\n",
};
const readA = toolTurn(["read", { path: "pkg/a.ts" }]);
const readB = toolTurn(["read", { path: "other/b.ts" }]);

/** Rewrites the session file's tool results that carry a record for `path`. */
function editRecords(sessionFile: string, path: string, edit: (record: Record<string, unknown>) => void): void {
  const lines = readFileSync(sessionFile, "utf8").trim().split("\n");
  const edited = lines.map((line) => {
    const entry = JSON.parse(line);
    const record = entry.message?.details?.lazyAgents;
    if (!record?.files?.some((file: { path: string }) => file.path === path)) return line;
    edit(record);
    return JSON.stringify(entry);
  });
  writeFileSync(sessionFile, `${edited.join("\n")}\n`);
}

test("a ledger entry that does not fit is dropped alone: a resumed session still holds every other delivery", () =>
  withTree(files, async (tree) => {
    const first = await startSession(tree, [readA, readB, finalTurn()]);
    await first.session.prompt("first");
    const sessionFile = first.sessionManager.getSessionFile()!;
    first.dispose();
    editRecords(sessionFile, "other/AGENTS.md", (record) => {
      record.retracted = [null, { path: 7 }];
      record.skipped = [{ path: "other/CLAUDE.md", reason: "a reason from a later version" }];
      (record.files as unknown[]).push({ path: "other/x.md", scope: "other" });
    });
    const resumed = await startSession(tree, [readA, readB, finalTurn()], { sessionFile });
    try {
      await resumed.session.prompt("second");
      const results = persistedToolResults(resumed.sessionManager);
      assert.equal(results.length, 4);
      for (const result of results.slice(2)) assert.equal(reminderOf(result.content), undefined, "nothing re-sent");
    } finally {
      resumed.dispose();
    }
  }));

test("ledger records are read entry by entry", () => {
  const file = { path: "a/AGENTS.md", scope: "a", version: "0123456789abcdef", bytes: 3, via: "reminder" };
  const cases: Array<[string, unknown, number]> = [
    ["a valid record", { v: 1, files: [file] }, 1],
    ["a record of another version", { v: 2, files: [file] }, -1],
    ["a file entry without bytes", { v: 1, files: [file, { ...file, bytes: "3" }] }, 1],
    ["a file entry read some other way", { v: 1, files: [file, { ...file, via: "telepathy" }] }, 1],
    ["null entries", { v: 1, files: [null, file], retracted: [null], skills: [null], skipped: [null] }, 1],
    ["files that are not a list", { v: 1, files: { 0: file } }, 0],
  ];
  for (const [name, record, count] of cases) {
    const read = readRecord({ lazyAgents: record });
    assert.equal(read === undefined ? -1 : read.files.length, count, name);
  }
  const skips = readRecord({
    lazyAgents: {
      v: 1,
      skipped: [
        { path: "x", reason: "tooLarge" },
        { path: "y", reason: "toString" },
      ],
    },
  });
  assert.deepEqual(skips?.skipped, [{ path: "x", reason: "tooLarge" }], "only reasons this version knows");
});
