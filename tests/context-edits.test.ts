// Context edits that Pi 1.6 appends mid-session (here from another extension's turn_end, the way
// Pi's docs show) take tool results out of the model's context: the ledger follows before the
// next delivery.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { REMINDER_OPEN } from "../index.ts";
import {
  EXTENSION_PATH,
  countOccurrences,
  finalTurn,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
} from "./harness.ts";

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
