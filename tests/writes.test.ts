// Writes and the write gate: what a failed write delivers, and which sibling calls the gate holds.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { LedgerRecord } from "../index.ts";
import { loadRunner, lockFile, reminderOf, withTree } from "./harness.ts";

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
