// Reminders that really arrived, stay within their budget, announce every cap, and list skills by
// Pi's own rules.
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionFactory, ToolResultEvent } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, REMINDER_OPEN } from "../index.ts";
import { noGit } from "./fuzz-lib.ts";
import { finalTurn, persistedToolResults, reminderOf, startSession, toolTurn, withTree } from "./harness.ts";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

const ours = createLazyAgents({ spawnGit: noGit });

/** A later extension that rewrites the result of reads of `first.png` only. */
function laterRewriter(rewrite: (content: ToolResultEvent["content"]) => ToolResultEvent["content"]): ExtensionFactory {
  return (pi) => {
    pi.on("tool_result", (event) =>
      (event.input as { path?: string }).path?.endsWith("first.png") ? { content: rewrite(event.content) } : undefined,
    );
  };
}

const rewrites = [
  {
    what: "replaces the result with the image alone",
    rewrite: (content: ToolResultEvent["content"]) => content.filter((block) => block.type === "image"),
  },
  {
    what: "drops the reminder block",
    rewrite: (content: ToolResultEvent["content"]) =>
      content.filter((block) => block.type !== "text" || !block.text.startsWith(REMINDER_OPEN)),
  },
];

for (const { what, rewrite } of rewrites) {
  test(`a reminder that a later extension ${what} is sent again with the next access`, () =>
    withTree({ "img/AGENTS.md": "IMG-RULES\n", "img/first.png": PNG, "img/second.png": PNG }, async (tree) => {
      const h = await startSession(
        tree,
        [toolTurn(["read", { path: "img/first.png" }]), toolTurn(["read", { path: "img/second.png" }]), finalTurn()],
        { factories: [ours, laterRewriter(rewrite)] },
      );
      try {
        await h.session.prompt("look at the pictures");
        const [first, second] = persistedToolResults(h.sessionManager);
        assert.equal(reminderOf(first!.content), undefined, "the later extension removed it");
        assert.match(reminderOf(second!.content) ?? "", /IMG-RULES/, "the next access carries the rules");
        assert.match(h.requests.at(-1) ?? "", /IMG-RULES/, "the model received them");
      } finally {
        h.dispose();
      }
    }));
}
