// Ledger: a context edit that takes a reminder out of the model's context makes its files due again,
// and a held-back write's delivery is recorded once, on Pi's error result.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createLazyAgents, REMINDER_OPEN, type LazyAgents } from "../index.ts";
import {
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
  type Tree,
} from "./harness.ts";

const files = { "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n", "pkg/b.ts": "b\n" };

/** Reads pkg/a.ts in one session, edits that result's context, then reads pkg/b.ts after `--continue`. */
async function afterContextEdit(tree: Tree, keep: (content: Array<{ type: string; text?: string }>) => unknown[]) {
  const first = await startSession(tree, [toolTurn(["read", { path: "pkg/a.ts" }]), finalTurn()]);
  await first.session.prompt("first");
  const entry = first.sessionManager
    .getEntries()
    .find((e) => e.type === "message" && e.message.role === "toolResult") as {
    id: string;
    message: { content: Array<{ type: string; text?: string }> };
  };
  assert.match(reminderOf(entry.message.content) ?? "", /PKG-RULES/);
  first.sessionManager.appendContextEdit(entry.id, { content: keep(entry.message.content) } as never);
  const file = first.sessionManager.getSessionFile()!;
  first.dispose();
  const second = await startSession(tree, [toolTurn(["read", { path: "pkg/b.ts" }]), finalTurn()], {
    sessionFile: file,
  });
  try {
    await second.session.prompt("second");
    return reminderOf(persistedToolResults(second.sessionManager).at(-1)!.content);
  } finally {
    second.dispose();
  }
}

test("a context edit that removes only the reminder makes its file due again", () =>
  withTree(files, async (tree) => {
    const reminder = await afterContextEdit(tree, (content) =>
      content.filter((block) => !block.text?.startsWith(REMINDER_OPEN)),
    );
    assert.match(reminder ?? "", /PKG-RULES/);
  }));

test("a context edit that keeps the reminder leaves its file delivered", () =>
  withTree(files, async (tree) => {
    const reminder = await afterContextEdit(tree, (content) => content);
    assert.equal(reminder, undefined);
  }));

test("a held-back write's delivery goes on its error result once, and no per-call gate state is left", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a" }, async (tree) => {
    let engine: LazyAgents | undefined;
    const h = await loadRunner(tree, {
      settings: { lazyAgents: { gateWrites: true } },
      factories: [createLazyAgents({ onEngine: (e) => (engine = e) })],
    });
    const held = await h.call("write", { path: "pkg/b.ts", content: "b" }, { id: "held-write" });
    assert.equal(held.blocked, true);
    const errorResult = () =>
      h.runner.emitMessageEnd({
        type: "message_end",
        message: {
          role: "toolResult",
          toolCallId: "held-write",
          toolName: "write",
          content: [{ type: "text", text: held.reason ?? "" }],
          isError: true,
          timestamp: Date.now(),
        },
      } as never) as Promise<{ details?: { lazyAgents?: { files: Array<{ path: string }> } } } | undefined>;
    const recorded = await errorResult();
    assert.deepEqual(
      recorded?.details?.lazyAgents?.files.map((file) => file.path),
      ["pkg/AGENTS.md"],
    );
    assert.equal(engine!.stateSizes().gateRecords, 0, "the gate's state ends with the result it was recorded on");
    assert.equal((await errorResult())?.details?.lazyAgents, undefined, "recorded once");
  }));

test("the ledger record joins the tool's own details instead of replacing them", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "one\n" }, async (tree) => {
    const h = await loadRunner(tree);
    const edit = await h.call("edit", { path: "pkg/a.ts", edits: [{ oldText: "one", newText: "two" }] });
    const details = edit.details as { diff?: unknown; lazyAgents?: { files: Array<{ path: string }> } };
    assert.match(String(details.diff), /two/);
    assert.deepEqual(
      details.lazyAgents?.files.map((file) => file.path),
      ["pkg/AGENTS.md"],
    );
  }));
