import { test } from "node:test";
import assert from "node:assert/strict";
import { loadRunner, reminderOf, textOf, withTree } from "./harness.ts";

test("read below cwd appends the nested chain once, parent first, with scopes", () =>
  withTree(
    {
      "AGENTS.md": "ROOT-RULES",
      "src/AGENTS.md": "SRC-RULES",
      "src/components/AGENTS.md": "COMPONENT-RULES",
      "src/components/button.ts": "export const button = 1;\n",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const first = await h.call("read", { path: "src/components/button.ts" });
      const reminder = reminderOf(first.content);
      assert.ok(reminder, "reminder appended");
      assert.deepEqual(first.content.slice(0, -1), first.original, "tool content intact");
      assert.ok(!reminder.includes("ROOT-RULES"), "cwd's own file is Pi's job");
      assert.ok(reminder.indexOf("SRC-RULES") < reminder.indexOf("COMPONENT-RULES"));
      assert.match(reminder, /path="src\/AGENTS.md" scope="src\/\*\*"/);
      assert.match(reminder, /path="src\/components\/AGENTS.md" scope="src\/components\/\*\*"/);
      const second = await h.call("read", { path: "src/components/button.ts" });
      assert.equal(reminderOf(second.content), undefined);
      assert.equal(textOf(second.content), textOf(second.original));
    },
  ));
