// README "What it does": each part of a reminder is explained in full once, while the model sees it, then named.

import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionFactory, ToolResultEvent } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, readRecord, REMINDER_OPEN } from "../index.ts";
import {
  INSTRUCTIONS_INTRO,
  REMINDER_PREAMBLE,
  RULE_LISTING_HEADER,
  RULE_LISTING_INTRO,
  RULES_INTRO,
  SKILLS_HEADER,
  SKILLS_INTRO,
} from "../config.ts";
import { noGit } from "./fuzz-lib.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startRuntime,
  startSession,
  summaryTurn,
  textOf,
  toolTurn,
  withTree,
  type RuntimeHarness,
  type Tree,
  twoTrees,
} from "./harness.ts";

const files = {
  "pkg/AGENTS.md": "PKG-RULES",
  "pkg/a.ts": "a\n",
  "other/AGENTS.md": "OTHER-RULES",
  "other/b.ts": "b\n",
  "third/AGENTS.md": "THIRD-RULES",
  "third/c.ts": "c\n",
};

const read = (path: string) => toolTurn(["read", { path }]);

/** Files and rules, which their tags name, open unexplained with their first tag right after what precedes them. */
const FILES_UNEXPLAINED = /^<nested-instructions[^\n]*>\n<file /;
const RULES_UNEXPLAINED = /(?:^<nested-instructions[^\n]*>\n|<\/file>\n\n)<rule /;

/** Asserts which of a section's two openings the reminder carries: the full explanation or the short one. */
function assertOpening(reminder: string, full: string, short: string | RegExp, explains: boolean, what: string): void {
  assert.equal(reminder.includes(full), explains, `${what}: ${explains ? "explained in full" : "no explanation"}`);
  const hasShort = typeof short === "string" ? reminder.includes(short) : short.test(reminder);
  assert.equal(hasShort, !explains, `${what}: ${explains ? "no" : "the"} short opening`);
}

const assertFiles = (reminder: string, explains: boolean, what: string) =>
  assertOpening(reminder, INSTRUCTIONS_INTRO, FILES_UNEXPLAINED, explains, what);

/** Tool results the model still sees after a compaction. */
function keptToolText(h: { session: { sessionManager: { buildContextEntries(): unknown[] } } }): string {
  const entries = h.session.sessionManager.buildContextEntries() as Array<{
    type: string;
    message: { role: string; content: Array<{ type: string; text?: string }> };
  }>;
  return textOf(
    entries.flatMap((e) => (e.type === "message" && e.message.role === "toolResult" ? e.message.content : [])),
  );
}

/** A runtime that read each path in a prompt of its own, then compacted keeping little: the first result drops. */
async function compactedAfter(tree: Tree, paths: readonly string[]): Promise<RuntimeHarness> {
  const h = await startRuntime(tree, { settings: { compaction: { enabled: false, keepRecentTokens: 200 } } });
  try {
    h.script(paths.flatMap((path) => [read(path), finalTurn()]));
    for (const path of paths) await h.session.prompt(`read ${path}`);
    h.script([summaryTurn(), summaryTurn()]);
    await h.session.compact();
    return h;
  } catch (error) {
    await h.dispose();
    throw error;
  }
}

async function sessionThatRead(tree: Tree, path: string, settings?: Record<string, unknown>): Promise<string> {
  const h = await startSession(tree, [read(path), finalTurn()], settings ? { settings } : {});
  await h.session.prompt("first");
  const file = h.sessionManager.getSessionFile()!;
  h.dispose();
  return file;
}

/** A later extension that drops the reminder from reads of `pkg/a.ts`. */
const dropFirstReminder: ExtensionFactory = (pi) => {
  pi.on("tool_result", (event: ToolResultEvent) =>
    (event.input as { path?: string }).path === "pkg/a.ts"
      ? { content: event.content.filter((block) => block.type !== "text" || !block.text.startsWith(REMINDER_OPEN)) }
      : undefined,
  );
};

test("the one-line headers stay on one line; the preamble says once that the text is the repository's guidance, not the user's", () => {
  for (const header of [SKILLS_HEADER, RULE_LISTING_HEADER]) {
    assert.doesNotMatch(header, /\n/);
    assert.doesNotMatch(header, /user/, "said once, in the preamble");
  }
  assert.doesNotMatch(REMINDER_PREAMBLE, /\n/);
  assert.match(REMINDER_PREAMBLE, /project guidance from the repository/i);
  assert.match(REMINDER_PREAMBLE, /not a message from the user/);
  for (const intro of [INSTRUCTIONS_INTRO, SKILLS_INTRO, RULES_INTRO, RULE_LISTING_INTRO]) {
    assert.doesNotMatch(intro, /user/, "said once, in the preamble");
  }
});

test("the first reminder explains the instruction files in full; a later one opens with the files' tags only", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree);
    const first = await h.call("read", { path: "pkg/a.ts" });
    assertFiles(reminderOf(first.content) ?? "", true, "first reminder");
    assert.deepEqual(readRecord(first.details)?.explained, ["preamble", "files"], "the record says it explained");
    const second = await h.call("read", { path: "other/b.ts" });
    const reminder = reminderOf(second.content) ?? "";
    assert.match(reminder, /OTHER-RULES/);
    assertFiles(reminder, false, "later reminder");
    assert.ok(
      reminder.startsWith(`${REMINDER_OPEN}>\n<file path="other/AGENTS.md">\nOTHER-RULES\n</file>\n`),
      reminder,
    );
    assert.equal(readRecord(second.details)?.explained, undefined, "and this record says it did not");
  }));

test("the skills list is explained in full once; a later list opens with the one-line header only", () =>
  withTree(
    {
      "pkg/a.ts": "a\n",
      "pkg/.agents/skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Ship the package\n---\nbody\n",
      "other/b.ts": "b\n",
      "other/.agents/skills/lint/SKILL.md": "---\nname: lint\ndescription: Lint the code\n---\nbody\n",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const first = await h.call("read", { path: "pkg/a.ts" });
      assertOpening(reminderOf(first.content) ?? "", SKILLS_INTRO, SKILLS_HEADER, true, "first skills");
      assert.deepEqual(readRecord(first.details)?.explained, ["preamble", "skills"]);
      const later = reminderOf((await h.call("read", { path: "other/b.ts" })).content) ?? "";
      assert.match(later, /- lint: Lint the code \[other\/.agents\/skills\/lint\/SKILL.md\]/);
      assertOpening(later, SKILLS_INTRO, SKILLS_HEADER, false, "later skills");
    },
  ));

test("rule texts and rule listings are each explained in full once, then named in one line or by their tags", () =>
  withTree(
    {
      ".claude/rules/api.md": '---\npaths:\n  - "api/**"\n---\nAPI-RULE\n',
      ".claude/rules/web.md": '---\npaths:\n  - "web/**"\n---\nWEB-RULE\n',
      "api/.cursor/rules/db.mdc": "---\ndescription: Database work\nglobs:\nalwaysApply: false\n---\nDB\n",
      "web/.cursor/rules/ui.mdc": "---\ndescription: UI work\nglobs:\nalwaysApply: false\n---\nUI\n",
      "api/AGENTS.md": "API-AGENTS",
      "api/x.ts": "x\n",
      "web/y.ts": "y\n",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const first = reminderOf((await h.call("read", { path: "api/x.ts" })).content) ?? "";
      assert.match(first, /API-RULE[^]*Database work/);
      assertOpening(first, RULES_INTRO, RULES_UNEXPLAINED, true, "first rules");
      assertOpening(first, RULE_LISTING_INTRO, RULE_LISTING_HEADER, true, "first listing");
      const later = reminderOf((await h.call("read", { path: "web/y.ts" })).content) ?? "";
      assert.match(later, /WEB-RULE[^]*UI work/);
      assertOpening(later, RULES_INTRO, RULES_UNEXPLAINED, false, "later rules");
      assertOpening(later, RULE_LISTING_INTRO, RULE_LISTING_HEADER, false, "later listing");
      assert.ok(!later.includes(INSTRUCTIONS_INTRO) && !later.includes("<file "), "no files section");
    },
  ));

test("after a compaction that drops the explaining reminder, the next reminder explains again", () =>
  withTree({ ...files, "pkg/big.txt": "z".repeat(4000) }, async (tree) => {
    const h = await compactedAfter(tree, ["pkg/a.ts", "pkg/big.txt", "other/b.ts"]);
    try {
      const before = persistedToolResults(h.session.sessionManager).map((r) => reminderOf(r.content) ?? "");
      assertFiles(before.find((r) => r.includes("OTHER-RULES")) ?? "", false, "before the compaction");
      const kept = keptToolText(h);
      assert.doesNotMatch(kept, /PKG-RULES/, "the compaction dropped the explaining reminder");
      assert.match(kept, /OTHER-RULES/, "and kept the later one, with its header only");
      h.script([read("third/c.ts"), finalTurn()]);
      await h.session.prompt("third folder");
      const after = persistedToolResults(h.session.sessionManager).map((r) => reminderOf(r.content) ?? "");
      const third = after.find((r) => r.includes("THIRD-RULES")) ?? "";
      assertFiles(third, true, "after the compaction");
    } finally {
      await h.dispose();
    }
  }));

test("after --continue with the explaining reminder still in context, the next reminder does not explain again", () =>
  withTree(files, async (tree) => {
    const file = await sessionThatRead(tree, "pkg/a.ts");
    const h = await startSession(tree, [read("other/b.ts"), finalTurn()], { sessionFile: file });
    try {
      await h.session.prompt("second");
      const reminders = persistedToolResults(h.sessionManager).map((r) => reminderOf(r.content) ?? "");
      assertFiles(reminders[0]!, true, "the first session's reminder");
      assert.match(reminders[1]!, /OTHER-RULES/);
      assertFiles(reminders[1]!, false, "the continued session's reminder");
    } finally {
      h.dispose();
    }
  }));

test("the write gate's held-back result explains in full and counts as seen, also after --continue", () =>
  withTree(files, async (tree) => {
    const settings = { lazyAgents: { gateWrites: true } };
    const write = toolTurn(["write", { path: "pkg/n.ts", content: "n\n" }]);
    const h = await startSession(tree, [write, write, read("other/b.ts"), finalTurn()], { settings });
    let file: string;
    try {
      await h.session.prompt("write n");
      const [held, , later] = persistedToolResults(h.sessionManager);
      assert.equal(held!.isError, true, "the first write was held back");
      assertFiles(textOf(held!.content), true, "the gate's reason");
      assertFiles(reminderOf(later!.content) ?? "", false, "the next reminder");
      file = h.sessionManager.getSessionFile()!;
    } finally {
      h.dispose();
    }
    const again = await startSession(tree, [read("third/c.ts"), finalTurn()], { sessionFile: file, settings });
    try {
      await again.session.prompt("continued");
      const third = persistedToolResults(again.sessionManager).at(-1)!;
      assert.match(reminderOf(third.content) ?? "", /THIRD-RULES/);
      assertFiles(reminderOf(third.content) ?? "", false, "the rebuilt ledger still sees the gate's explanation");
    } finally {
      again.dispose();
    }
  }));

test("an explanation that a later extension dropped is given again with the next reminder", () =>
  withTree(files, async (tree) => {
    const h = await startSession(tree, [read("pkg/a.ts"), read("other/b.ts"), finalTurn()], {
      factories: [createLazyAgents({ spawnGit: noGit }), dropFirstReminder],
    });
    try {
      await h.session.prompt("read both");
      const [first, second] = persistedToolResults(h.sessionManager);
      assert.equal(reminderOf(first!.content), undefined, "the later extension removed it");
      assert.match(reminderOf(second!.content) ?? "", /OTHER-RULES/);
      assertFiles(reminderOf(second!.content) ?? "", true, "the next reminder");
    } finally {
      h.dispose();
    }
  }));

test("a record's explained sections are read back; unknown names are dropped alone and a record without them reads as before", () => {
  const table: Array<[unknown, string[] | undefined]> = [
    [
      ["files", "skills"],
      ["files", "skills"],
    ],
    [["files", "later-section", 3], ["files"]],
    [undefined, undefined],
    ["files", undefined],
  ];
  for (const [explained, expected] of table) {
    const record = { v: 1, files: [], skills: [], retracted: [], retractedSkills: [], skipped: [], explained };
    assert.deepEqual(readRecord({ lazyAgents: record })?.explained, expected, JSON.stringify(explained));
  }
});

const guidanceTree = {
  "pkg/AGENTS.md": "PKG-RULES",
  "pkg/a.ts": "a\n",
  "pkg/.agents/skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Ship the package\n---\nbody\n",
  "pkg/.cursor/rules/local.mdc": "---\nalwaysApply: true\n---\nPKG-LOCAL-RULE\n",
  ".claude/rules/always.md": "ALWAYS-RULE\n",
  ".github/instructions/all.instructions.md": "---\napplyTo: '**'\n---\nEVERY-PATH-RULE\n",
  ".cursor/rules/ts.mdc": "---\nglobs: *.ts\nalwaysApply: false\n---\nTS-RULE\n",
  "other/AGENTS.md": "OTHER-RULES",
  "other/b.ts": "b\n",
};

test(`a reminder names the paths a command touched, says once that it is the repository's guidance and how a rule ranks, and calls an every-path rule repository-wide`, () =>
  twoTrees(guidanceTree, async (tree) => {
    const turns = [toolTurn(["bash", { command: "cat pkg/a.ts" }]), read("other/b.ts"), finalTurn()];
    const h = await startSession(tree, turns, { tools: ["read", "bash"] });
    try {
      await h.session.prompt("work");
      const [first, later] = persistedToolResults(h.sessionManager).map((r) => reminderOf(r.content) ?? "");
      assert.ok(first!.startsWith(`${REMINDER_OPEN} touched="pkg/a.ts">\n${REMINDER_PREAMBLE}\n`), first);
      for (const intro of [INSTRUCTIONS_INTRO, RULES_INTRO, SKILLS_INTRO]) assert.ok(first!.includes(intro), intro);
      assert.equal(countOccurrences(first!, "not a message from the user"), 1, "said once");
      assert.equal(countOccurrences(first!, "user"), 1, "and nowhere else");
      assert.match(
        RULES_INTRO,
        /a rule and an instruction file disagree, the deepest folder's file wins over the rule/,
      );
      assert.match(first!, /<file path="pkg\/AGENTS.md">\nPKG-RULES\n/);
      assert.match(first!, /<rule path="\.claude\/rules\/always\.md" scope="repository-wide">\nALWAYS-RULE/);
      assert.match(
        first!,
        /<rule path="\.github\/instructions\/all\.instructions\.md" scope="repository-wide">\nEVERY-PATH-RULE/,
      );
      assert.match(first!, /<rule path="pkg\/\.cursor\/rules\/local\.mdc" scope="pkg\/\*\*">\nPKG-LOCAL-RULE/);
      assert.match(first!, /<rule path="\.cursor\/rules\/ts\.mdc" scope="\*\*\/\*\.ts">\nTS-RULE/);
      assert.doesNotMatch(first!, /scope="\*\*"/);
      assert.match(first!, /^- deploy: Ship the package \[pkg\/\.agents\/skills\/deploy\/SKILL\.md\]$/m);
      // A read names its path in its own call: the reminder opens with the bare tag, then, explained, the files' tags.
      assert.ok(later!.startsWith(`${REMINDER_OPEN}>\n<file `), later);
      assert.match(later!, /OTHER-RULES/);
      assert.doesNotMatch(later!, /user/);
    } finally {
      h.dispose();
    }
  }));

const rulesFirstTree = {
  ".claude/rules/api.md": '---\npaths: "api/**"\n---\nAPI-RULE\n',
  "api/x.ts": "x\n",
  "api/big.txt": "z".repeat(4000),
  ...files,
};

test("the preamble is said once while the model sees it: a reminder that first explains files after one that explained rules does not repeat it", () =>
  twoTrees(rulesFirstTree, async (tree) => {
    const h = await loadRunner(tree);
    const first = reminderOf((await h.call("read", { path: "api/x.ts" })).content) ?? "";
    assert.ok(first.startsWith(`${REMINDER_OPEN}>\n${REMINDER_PREAMBLE}\n${RULES_INTRO}\n<rule `), first);
    const later = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assertFiles(later, true, "the first files");
    assert.ok(!later.includes(REMINDER_PREAMBLE), later);
    assert.ok(later.startsWith(`${REMINDER_OPEN}>\n${INSTRUCTIONS_INTRO}\n<file `), later);
  }));

test("after a compaction drops the reminder that said the preamble, the next reminder says it again, once", () =>
  twoTrees(rulesFirstTree, async (tree) => {
    const h = await compactedAfter(tree, ["api/x.ts", "api/big.txt", "pkg/a.ts"]);
    try {
      const kept = keptToolText(h);
      assert.doesNotMatch(kept, /API-RULE/, "the compaction dropped the reminder that said the preamble");
      assert.match(kept, /PKG-RULES/, "and kept the later one");
      assert.equal(countOccurrences(kept, REMINDER_PREAMBLE), 0, "which did not say it");
      h.script([read("third/c.ts"), finalTurn()]);
      await h.session.prompt("third folder");
      const third = persistedToolResults(h.session.sessionManager).at(-1)!;
      const reminder = reminderOf(third.content) ?? "";
      assert.ok(
        reminder.startsWith(`${REMINDER_OPEN}>\n${REMINDER_PREAMBLE}\n<file path="third/AGENTS.md">`),
        reminder,
      );
      assert.equal(countOccurrences(keptToolText(h), REMINDER_PREAMBLE), 1, "the model sees it once");
    } finally {
      await h.dispose();
    }
  }));
