// docs/behaviour.md, Ledger and Delivered means persisted: resume, fork, tree navigation and compaction.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { SessionManager, type ExtensionFactory, type ToolResultEvent } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, REMINDER_OPEN, readRecord } from "../index.ts";
import {
  countOccurrences,
  finalTurn,
  persistedToolResults,
  prefixBreaks,
  reminderOf,
  startRuntime,
  startSession,
  summaryTurn,
  textOf,
  toolTurn,
  withTree,
  type Tree,
} from "./harness.ts";
import { noGit } from "./fuzz-lib.ts";
import { PNG, files, readA, remindersIn } from "./fixtures.ts";

const readB = toolTurn(["read", { path: "other/b.ts" }]);

/** Reminder texts the model saw in the last provider request. */
function remindersInLastRequest(requestMessages: unknown[][]): string[] {
  const last = requestMessages.at(-1) ?? [];
  return last
    .filter((m) => (m as { role: string }).role === "toolResult")
    .map((m) => reminderOf((m as { content: Array<{ type: string; text?: string }> }).content))
    .filter((r): r is string => r !== undefined);
}

async function firstSession(tree: Tree) {
  const h = await startSession(tree, [readA, finalTurn()]);
  await h.session.prompt("first");
  const file = h.sessionManager.getSessionFile()!;
  h.dispose();
  return file;
}

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
  {
    what: "cuts short after its opening tag",
    rewrite: (content: ToolResultEvent["content"]) =>
      content.map((block) => (block.type === "text" ? { ...block, text: block.text.slice(0, 80) } : block)),
  },
  {
    what: "replaces with its opening tag and [redacted]",
    rewrite: (content: ToolResultEvent["content"]) =>
      content.map((block) =>
        block.type === "text" && block.text.startsWith(REMINDER_OPEN)
          ? { ...block, text: `${REMINDER_OPEN}\n[redacted]` }
          : block,
      ),
  },
];

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

test("a second runtime on the same session file (pi --continue) does not re-send what the model holds", () =>
  withTree(files, async (tree) => {
    const file = await firstSession(tree);
    const h = await startSession(tree, [readA, readB, finalTurn()], { sessionFile: file });
    try {
      await h.session.prompt("second");
      const reminders = remindersIn(file);
      assert.equal(reminders.filter((r) => r.includes("PKG-RULES")).length, 1);
      assert.equal(reminders.filter((r) => r.includes("OTHER-RULES")).length, 1);
      assert.deepEqual(prefixBreaks(h.requestMessages), []);
    } finally {
      h.dispose();
    }
  }));

test("/resume (switchSession) rebuilds the ledger from the resumed session", () =>
  withTree(files, async (tree) => {
    const h = await startRuntime(tree);
    try {
      h.script([readA, finalTurn()]);
      await h.session.prompt("first");
      const first = h.session.sessionFile!;
      await h.runtime.newSession();
      await h.bind();
      h.script([readA, finalTurn()]);
      await h.session.prompt("in a new session the model lacks the file");
      assert.equal(remindersIn(h.session.sessionFile!).length, 1, "the new session gets its own copy");
      await h.runtime.switchSession(first);
      await h.bind();
      h.script([readA, finalTurn()]);
      await h.session.prompt("back in the first session");
      assert.equal(remindersIn(first).length, 1, "the resumed session still holds it");
    } finally {
      await h.dispose();
    }
  }));

test("a fork keeps what its copied branch delivered and re-sends nothing", () =>
  withTree(files, async (tree) => {
    const h = await startRuntime(tree);
    try {
      h.script([readA, finalTurn(), readB, finalTurn()]);
      await h.session.prompt("first");
      await h.session.prompt("second");
      const userEntries = h.session.sessionManager
        .getEntries()
        .filter((e) => e.type === "message" && e.message.role === "user");
      // Fork before the second prompt: the fork holds the PKG delivery but not the OTHER one.
      await h.runtime.fork(userEntries[1]!.id);
      await h.bind();
      h.script([readA, readB, finalTurn()]);
      await h.session.prompt("on the fork");
      const reminders = remindersIn(h.session.sessionFile!);
      assert.equal(reminders.filter((r) => r.includes("PKG-RULES")).length, 1, "PKG was on the copied branch");
      assert.equal(reminders.filter((r) => r.includes("OTHER-RULES")).length, 1, "OTHER is sent once on the fork");
    } finally {
      await h.dispose();
    }
  }));

test("/tree navigation to a branch that never saw the reminder sends it there", () =>
  withTree(files, async (tree) => {
    const h = await startRuntime(tree);
    try {
      h.script([finalTurn("hello"), readA, finalTurn()]);
      await h.session.prompt("say hello");
      const afterHello = h.session.sessionManager.getLeafId()!;
      await h.session.prompt("read a");
      await h.session.navigateTree(afterHello);
      h.script([readA, finalTurn()]);
      await h.session.prompt("read a on the other branch");
      const visible = remindersInLastRequest(h.requestMessages);
      assert.equal(visible.filter((r) => r.includes("PKG-RULES")).length, 1, "delivered on the new branch");
      await h.session.navigateTree(afterHello);
      h.script([readB, finalTurn()]);
      await h.session.prompt("third branch");
      assert.equal(
        remindersInLastRequest(h.requestMessages).some((r) => r.includes("PKG-RULES")),
        false,
      );
    } finally {
      await h.dispose();
    }
  }));

test("a compaction that drops the carrying result re-sends that file, and only at its next access", () =>
  withTree({ ...files, "pkg/big.txt": "z".repeat(4000) }, async (tree) => {
    const h = await startRuntime(tree, { settings: { compaction: { enabled: false, keepRecentTokens: 200 } } });
    try {
      h.script([readA, finalTurn(), toolTurn(["read", { path: "pkg/big.txt" }]), finalTurn(), readB, finalTurn()]);
      await h.session.prompt("first");
      await h.session.prompt("filler");
      await h.session.prompt("third");
      h.script([summaryTurn(), summaryTurn()]);
      await h.session.compact();
      const kept = textOf(
        h.session.sessionManager
          .buildContextEntries()
          .flatMap((e) => (e.type === "message" && e.message.role === "toolResult" ? e.message.content : [])) as never,
      );
      assert.doesNotMatch(kept, /PKG-RULES/, "the compaction dropped the PKG delivery");
      assert.match(kept, /OTHER-RULES/, "and kept the OTHER one");
      h.script([readB, finalTurn(), readA, finalTurn()]);
      await h.session.prompt("other again");
      assert.equal(remindersInLastRequest(h.requestMessages).filter((r) => r.includes("OTHER-RULES")).length, 1);
      assert.equal(
        remindersInLastRequest(h.requestMessages).some((r) => r.includes("PKG-RULES")),
        false,
        "not eager",
      );
      await h.session.prompt("pkg again");
      assert.equal(remindersInLastRequest(h.requestMessages).filter((r) => r.includes("PKG-RULES")).length, 1);
      const afterCompaction = h.requestMessages.slice(-3);
      assert.deepEqual(prefixBreaks(afterCompaction), []);
    } finally {
      await h.dispose();
    }
  }));

test("a compaction that keeps the carrying result re-sends nothing", () =>
  withTree({ ...files, "filler.txt": "z".repeat(8000) }, async (tree) => {
    const h = await startRuntime(tree, { settings: { compaction: { enabled: false, keepRecentTokens: 400 } } });
    try {
      h.script([toolTurn(["read", { path: "filler.txt" }]), finalTurn(), readA, finalTurn(), finalTurn("more")]);
      await h.session.prompt("filler first");
      await h.session.prompt("then pkg");
      await h.session.prompt("more");
      h.script([summaryTurn(), summaryTurn()]);
      await h.session.compact();
      const kept = JSON.stringify(h.session.sessionManager.buildContextEntries());
      assert.doesNotMatch(kept, /zzzzzzzz/, "the compaction dropped the filler");
      assert.match(kept, /PKG-RULES/, "and kept the carrying result");
      h.script([readA, finalTurn()]);
      await h.session.prompt("again");
      assert.equal(remindersIn(h.session.sessionFile!).length, 1);
    } finally {
      await h.dispose();
    }
  }));

test("a deletion followed by two accesses retracts exactly once, and survives --continue", () =>
  withTree(files, async (tree) => {
    const h = await startRuntime(tree);
    let file: string;
    try {
      h.script([readA, finalTurn()]);
      await h.session.prompt("first");
      unlinkSync(tree.abs("pkg/AGENTS.md"));
      h.script([readA, finalTurn(), readA, finalTurn()]);
      await h.session.prompt("second");
      await h.session.prompt("third");
      file = h.session.sessionFile!;
      const reminders = remindersIn(file);
      assert.equal(reminders.length, 2);
      assert.match(reminders[1]!, /pkg\/AGENTS.md no longer applies/);
    } finally {
      await h.dispose();
    }
    const again = await startSession(tree, [readA, finalTurn()], { sessionFile: file });
    try {
      await again.session.prompt("continued");
      assert.equal(remindersIn(file).length, 2, "no second retraction after --continue");
    } finally {
      again.dispose();
    }
  }));

test("the persisted record names path, scope and version of every delivery", () =>
  withTree(files, async (tree) => {
    const h = await startSession(tree, [readA, finalTurn()]);
    try {
      await h.session.prompt("go");
      const [result] = persistedToolResults(h.sessionManager);
      const record = (result!.details as { lazyAgents: { v: number; files: unknown[] } }).lazyAgents;
      assert.equal(record.v, 1);
      assert.deepEqual(Object.keys(record.files[0] as object).sort(), ["bytes", "path", "scope", "version", "via"]);
      const reopened = SessionManager.open(h.sessionManager.getSessionFile()!);
      assert.equal(countOccurrences(JSON.stringify(reopened.getEntries()), '"lazyAgents"'), 1);
    } finally {
      h.dispose();
    }
  }));

test("a whole read of a held instruction file is recorded, so a compaction that drops the first delivery sends nothing again", () =>
  withTree({ ...files, "filler.txt": "z".repeat(8000) }, async (tree) => {
    const h = await startRuntime(tree, { settings: { compaction: { enabled: false, keepRecentTokens: 300 } } });
    try {
      h.script([
        readA,
        finalTurn(),
        toolTurn(["read", { path: "filler.txt" }]),
        finalTurn(),
        toolTurn(["read", { path: "pkg/AGENTS.md" }]),
        finalTurn(),
      ]);
      await h.session.prompt("first");
      await h.session.prompt("filler");
      await h.session.prompt("read the rules file itself");
      h.script([summaryTurn(), summaryTurn()]);
      await h.session.compact();
      const kept = JSON.stringify(h.session.sessionManager.buildContextEntries());
      assert.doesNotMatch(kept, /<nested-instructions/, "the compaction dropped the reminder");
      assert.match(kept, /"via":"read"/, "and kept the read of the file itself");
      h.script([readA, finalTurn()]);
      await h.session.prompt("pkg again");
      assert.equal(remindersInLastRequest(h.requestMessages).length, 0);
    } finally {
      await h.dispose();
    }
  }));

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
        assert.doesNotMatch(reminderOf(first!.content) ?? "", /IMG-RULES/, "the later extension removed it");
        assert.match(reminderOf(second!.content) ?? "", /IMG-RULES/, "the next access carries the rules");
        assert.match(h.requests.at(-1) ?? "", /IMG-RULES/, "the model received them");
      } finally {
        h.dispose();
      }
    }));
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

test("a stored refusal of an import reads back as an import's, apart from a refusal of the same path itself", () => {
  const skipped = [
    { path: "pkg/AGENTS.md", reason: "tooLarge" },
    { path: "pkg/AGENTS.md", reason: "symlinkEscape", inImport: true },
  ];
  assert.deepEqual(readRecord({ lazyAgents: { v: 1, skipped } })?.skipped, skipped);
});

test("a later extension that replaces every result's details: after three reads and a resume the rule was sent once", () =>
  withTree(
    {
      ".claude/rules/api.md": '---\npaths: "src/**"\n---\nAPI-RULE\n',
      "src/a.ts": "a\n",
      "src/b.ts": "b\n",
      "src/c.ts": "c\n",
    },
    async (tree) => {
      const replacer: ExtensionFactory = (pi) => {
        pi.on("tool_result", () => ({ details: { replacedBy: "another extension" } }));
      };
      const read = (path: string) => toolTurn(["read", { path }]);
      const first = await startSession(tree, [read("src/a.ts"), read("src/b.ts"), finalTurn()], {
        factories: [ours, replacer],
      });
      await first.session.prompt("first");
      const sessionFile = first.sessionManager.getSessionFile()!;
      first.dispose();
      const resumed = await startSession(tree, [read("src/c.ts"), finalTurn()], {
        sessionFile,
        factories: [ours, replacer],
      });
      try {
        await resumed.session.prompt("second");
        assert.equal(countOccurrences(remindersIn(sessionFile).join("\n"), "API-RULE"), 1);
      } finally {
        resumed.dispose();
      }
    },
  ));

test("the model's own read of an instruction file that a later extension rewrites is no delivery: the next access sends it", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/b.ts": "b\n" }, async (tree) => {
    const redact: ExtensionFactory = (pi) => {
      pi.on("tool_result", (event) =>
        (event.input as { path?: string }).path === "pkg/AGENTS.md"
          ? { content: [{ type: "text" as const, text: "[redacted]" }] }
          : undefined,
      );
    };
    const h = await startSession(
      tree,
      [toolTurn(["read", { path: "pkg/AGENTS.md" }]), toolTurn(["read", { path: "pkg/b.ts" }]), finalTurn()],
      { factories: [ours, redact] },
    );
    try {
      await h.session.prompt("read the rules, then b");
      const [rules, b] = persistedToolResults(h.sessionManager);
      assert.doesNotMatch(textOf(rules!.content), /PKG-RULES/, "the later extension rewrote the read");
      assert.match(reminderOf(b!.content) ?? "", /PKG-RULES/, "the next access carries the file");
      assert.match(h.requests.at(-1) ?? "", /PKG-RULES/, "the model received it");
    } finally {
      h.dispose();
    }
  }));
