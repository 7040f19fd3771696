// Whole Pi sessions: the SDK, the scripted faux model and the real built-in tools.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  countOccurrences,
  finalTurn,
  persistedToolResults,
  prefixBreaks,
  reminderOf,
  startSession,
  textOf,
  toolTurn,
  withTree,
} from "./harness.ts";

const tree = {
  "AGENTS.md": "ROOT-RULES",
  "packages/AGENTS.md": "PACKAGES-RULES",
  "packages/api/AGENTS.md": "API-RULES",
  "packages/api/server.ts": "export const server = 1;\n",
  "packages/api/routes.ts": "export const routes = 2;\n",
  "packages/api/data.json": '{"answer":42}\n',
  "packages/web/AGENTS.md": "WEB-RULES",
  "packages/web/page.ts": "export const page = 3;\n",
  "packages/web/.agents/skills/ui/SKILL.md":
    "---\nname: ui-review\ndescription: Review UI changes\n---\nUI-SKILL-BODY\n",
};

function systemMessages(messages: unknown[]): string[] {
  return messages.filter((m) => (m as { role: string }).role === "system").map((m) => JSON.stringify(m));
}

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

test("regression: parallel reads in one assistant turn deliver exactly one reminder", () =>
  withTree(tree, async (t) => {
    const h = await startSession(t, [
      toolTurn(
        ["read", { path: "packages/api/server.ts" }],
        ["read", { path: "packages/api/routes.ts" }],
        ["read", { path: "packages/api/data.json" }],
      ),
      finalTurn(),
    ]);
    try {
      await h.session.prompt("read three files");
      const reminders = persistedToolResults(h.sessionManager).filter((r) => reminderOf(r.content));
      assert.equal(reminders.length, 1);
      assert.equal(countOccurrences(readFileSync(h.sessionManager.getSessionFile()!, "utf8"), "API-RULES"), 1);
    } finally {
      h.dispose();
    }
  }));

test("regression: a codemode script gets the plain file text and the codemode result carries the reminder", () =>
  withTree(tree, async (t) => {
    const h = await startSession(
      t,
      [
        toolTurn([
          "codemode",
          {
            code: "const a = await tools.read({ path: 'packages/api/data.json' });\nconst b = await tools.read({ path: 'packages/api/server.ts' });\nreturn JSON.stringify({ a, exact: a === '{\"answer\":42}\\n' });",
          },
        ]),
        finalTurn(),
      ],
      { codemode: true },
    );
    try {
      await h.session.prompt("use a script");
      const [result] = persistedToolResults(h.sessionManager);
      assert.equal(result!.toolName, "codemode");
      const text = textOf(result!.content);
      assert.match(text, /\\"exact\\":true|"exact":true/);
      const reminder = reminderOf(result!.content) ?? "";
      assert.match(reminder, /PACKAGES-RULES[^]*API-RULES/);
      assert.equal(countOccurrences(text, "API-RULES"), 1);
      assert.ok((result!.details as { lazyAgents?: unknown }).lazyAgents, "ledger record on the outer result");
    } finally {
      h.dispose();
    }
  }));

test("regression: an untrusted session lists no skills but still delivers instructions", () =>
  withTree(tree, async (t) => {
    const h = await startSession(t, [toolTurn(["read", { path: "packages/web/page.ts" }]), finalTurn()], {
      trusted: false,
    });
    try {
      await h.session.prompt("look");
      const [result] = persistedToolResults(h.sessionManager);
      const reminder = reminderOf(result!.content) ?? "";
      assert.match(reminder, /WEB-RULES/);
      assert.doesNotMatch(reminder, /ui-review/);
    } finally {
      h.dispose();
    }
  }));
