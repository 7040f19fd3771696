// Writes and the write gate: what a failed write delivers, and which sibling calls the gate holds.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { LedgerRecord } from "../index.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  lockFile,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
} from "./harness.ts";

const recordOf = (details: unknown) => (details as { lazyAgents?: LedgerRecord } | undefined)?.lazyAgents;

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

test("the gate holds every write and edit into a gated scope that one assistant message issues, and lets the retries through", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\n" }, async (tree) => {
    const both = toolTurn(
      ["write", { path: "pkg/b.ts", content: "b\n" }],
      ["edit", { path: "pkg/a.ts", edits: [{ oldText: "a", newText: "A" }] }],
      ["write", { path: "pkg/sub/c.ts", content: "c\n" }],
    );
    const h = await startSession(tree, [both, both, finalTurn()], { settings: { lazyAgents: { gateWrites: true } } });
    try {
      await h.session.prompt("change pkg");
      const results = persistedToolResults(h.sessionManager);
      assert.equal(results.length, 6);
      assert.deepEqual(
        results.slice(0, 3).map((result) => result.isError),
        [true, true, true],
        "every sibling into the gated scope was held back",
      );
      assert.match(results[0]!.content[0]!.text!, /PKG-RULES: use tabs/);
      for (const sibling of results.slice(1, 3)) {
        assert.doesNotMatch(sibling.content[0]!.text!, /PKG-RULES/, "the instructions are sent once");
        assert.match(sibling.content[0]!.text!, /retry the same call/);
        assert.equal(recordOf(sibling.details), undefined, "a held sibling delivers nothing");
      }
      assert.deepEqual(
        results.slice(3).map((result) => result.isError),
        [false, false, false],
        "the retries went through",
      );
      assert.equal(readFileSync(tree.abs("pkg/b.ts"), "utf8"), "b\n");
      assert.equal(readFileSync(tree.abs("pkg/a.ts"), "utf8"), "A\n");
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      assert.equal(countOccurrences(file, "PKG-RULES: use tabs"), 1, "exactly one delivery");
    } finally {
      h.dispose();
    }
  }));
