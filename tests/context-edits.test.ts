// docs/behaviour.md, Ledger, and docs/limits.md: a context edit that drops a reminder makes its files due again.

import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { REMINDER_OPEN } from "../index.ts";
import {
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
  type Tree,
  EXTENSION_PATH,
  countOccurrences,
  textOf,
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

/** Another extension that prunes every tool result carrying a reminder, at the end of its turn. */
function pruner(replacement: { content: string } | null): ExtensionFactory {
  return (pi) => {
    pi.on("turn_end", (event) => {
      const targets = event.toolResultEntryIds.filter((_, index) =>
        event.toolResults[index]?.content.some(
          (block) => block.type === "text" && block.text.startsWith(REMINDER_OPEN),
        ),
      );
      if (targets.length === 0) return undefined;
      const edits = targets.map((targetId) => ({ type: "context_edit" as const, targetId, replacement }));
      return { entries: [...event.entries, ...edits] };
    });
  };
}

const cases: Array<[string, { content: string } | null]> = [
  ["replaced", { content: "[pruned]" }],
  ["omitted", null],
];

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

for (const [how, replacement] of cases) {
  test(`a tool result ${how} by a context edit mid-session has its instructions sent again at the next access`, () =>
    withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n", "pkg/b.ts": "b\n" }, async (tree) => {
      const steps = [toolTurn(["read", { path: "pkg/a.ts" }]), toolTurn(["read", { path: "pkg/b.ts" }]), finalTurn()];
      const h = await startSession(tree, steps, {
        extensionPaths: [EXTENSION_PATH],
        factories: [pruner(replacement)],
      });
      try {
        await h.session.prompt("read both");
        const kinds = h.sessionManager.getEntries().map((entry) => entry.type);
        assert.ok(kinds.includes("context_edit"), "Pi persisted the edit");
        assert.equal(countOccurrences(h.requests[1]!, "PKG-RULES"), 0, "the model lost the first delivery");
        const results = persistedToolResults(h.sessionManager);
        assert.match(reminderOf(results[1]!.content) ?? "", /PKG-RULES/, "sent again before the model works on");
      } finally {
        h.dispose();
      }
    }));
}

test("a context edit that replaces the model's own whole read of an instruction file makes the file due again", () =>
  withTree(files, async (tree) => {
    // Another extension prunes the result of the model's read of pkg/AGENTS.md at the end of its turn.
    const pruneRead: ExtensionFactory = (pi) => {
      pi.on("turn_end", (event) => {
        const read = event.toolResults.findIndex((result) => textOf(result.content) === "PKG-RULES");
        const targetId = event.toolResultEntryIds[read];
        if (targetId === undefined) return undefined;
        const edit = { type: "context_edit" as const, targetId, replacement: { content: "[pruned]" } };
        return { entries: [...event.entries, edit] };
      });
    };
    const steps = [
      toolTurn(["read", { path: "pkg/AGENTS.md" }]),
      toolTurn(["read", { path: "pkg/b.ts" }]),
      finalTurn(),
    ];
    const h = await startSession(tree, steps, { extensionPaths: [EXTENSION_PATH], factories: [pruneRead] });
    try {
      await h.session.prompt("read the rules, then b");
      assert.equal(countOccurrences(h.requests[1]!, "PKG-RULES"), 0, "the model lost its read");
      assert.match(reminderOf(persistedToolResults(h.sessionManager)[1]!.content) ?? "", /PKG-RULES/);
    } finally {
      h.dispose();
    }
  }));

test("a compaction that another extension's turn_end appends makes the files it summarized away due again", () =>
  withTree(files, async (tree) => {
    // Another extension compacts at the end of the first prompt, keeping only its final answer.
    let compacted = false;
    const compactor: ExtensionFactory = (pi) => {
      pi.on("turn_end", (event) => {
        if (compacted || event.toolResults.length > 0) return undefined;
        compacted = true;
        const compaction = { type: "compaction" as const, summary: "Read a.", firstKeptEntryId: event.messageEntryId };
        return { entries: [...event.entries, compaction] };
      });
    };
    const steps = [toolTurn(["read", { path: "pkg/a.ts" }]), finalTurn(), toolTurn(["read", { path: "pkg/b.ts" }])];
    const h = await startSession(tree, [...steps, finalTurn()], {
      extensionPaths: [EXTENSION_PATH],
      factories: [compactor],
    });
    try {
      await h.session.prompt("read a");
      await h.session.prompt("read b");
      assert.ok(
        h.sessionManager.getEntries().some((entry) => entry.type === "compaction"),
        "Pi persisted it",
      );
      assert.equal(countOccurrences(h.requests[2]!, "PKG-RULES"), 0, "the model lost the first delivery");
      const results = persistedToolResults(h.sessionManager);
      assert.match(reminderOf(results[1]!.content) ?? "", /PKG-RULES/, "sent again before the model works on");
    } finally {
      h.dispose();
    }
  }));
