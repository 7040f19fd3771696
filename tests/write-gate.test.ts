// docs/behaviour.md "The write gate": the first write into a scope is held back once with its instructions.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, type LazyAgents, type LedgerRecord } from "../index.ts";
import {
  EXTENSION_PATH,
  finalTurn,
  loadRunner,
  persistedToolResults,
  startRuntime,
  startSession,
  toolTurn,
  withTree,
  countOccurrences,
  twoTrees,
} from "./harness.ts";

const recordOf = (details: unknown) => (details as { lazyAgents?: LedgerRecord } | undefined)?.lazyAgents;

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

test("the gate holds the first write into an undelivered scope once, then lets the retry through, in a real session", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\n" }, async (tree) => {
    const write = toolTurn(["write", { path: "pkg/b.ts", content: "b\n" }]);
    const h = await startSession(tree, [write, write, finalTurn()], { settings: { lazyAgents: { gateWrites: true } } });
    try {
      await h.session.prompt("write b");
      const results = persistedToolResults(h.sessionManager);
      assert.equal(results.length, 2);
      assert.equal(results[0]!.isError, true, "the first write was held back");
      assert.match(results[0]!.content[0]!.text!, /PKG-RULES: use tabs[^]*retry the same call/);
      assert.ok((results[0]!.details as { lazyAgents?: unknown }).lazyAgents, "the gate's delivery is in the ledger");
      assert.equal(results[1]!.isError, false, "the retry went through");
      assert.equal(readFileSync(tree.abs("pkg/b.ts"), "utf8"), "b\n");
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      assert.equal(countOccurrences(file, "PKG-RULES: use tabs"), 1, "exactly one delivery");
    } finally {
      h.dispose();
    }
  }));

test("a write issued beside a command that only shows the scope's instruction file is still held back", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\n" }, async (tree) => {
    // The command shows pkg/AGENTS.md, but only in its own result: the model issued the write before it saw it.
    const turn = toolTurn(["bash", { command: "cat pkg/AGENTS.md" }], ["write", { path: "pkg/b.ts", content: "b\n" }]);
    const h = await startSession(tree, [turn, finalTurn()], {
      settings: { lazyAgents: { gateWrites: true } },
      tools: ["read", "bash", "edit", "write"],
    });
    try {
      await h.session.prompt("show the rules and write b");
      const [, write] = persistedToolResults(h.sessionManager);
      assert.equal(write!.isError, true, "the write was held back");
      assert.match(write!.content[0]!.text!, /PKG-RULES: use tabs[^]*retry the same call/);
    } finally {
      h.dispose();
    }
  }));

test("the gate is off by default and never holds a scope the model already has", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n" }, async (tree) => {
    const plain = await loadRunner(tree);
    assert.equal((await plain.call("write", { path: "pkg/b.ts", content: "b" })).blocked, false);
    const gated = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    await gated.call("read", { path: "pkg/a.ts" });
    assert.equal((await gated.call("write", { path: "pkg/c.ts", content: "c" })).blocked, false);
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

test("a write held back for a chain of more files than one reminder takes goes through when retried", () => {
  const spec: Record<string, string> = {};
  let dir = "";
  for (let i = 0; i < 40; i++) {
    dir = dir === "" ? `d${i}` : `${dir}/d${i}`;
    spec[`${dir}/AGENTS.md`] = `RULES-OF-D${i}`;
  }
  return withTree(spec, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    assert.equal((await h.call("write", { path: `${dir}/x.ts`, content: "x" })).blocked, true);
    await h.runner.emit({ type: "turn_end", turnIndex: 0, toolResults: [] } as never);
    assert.equal(
      (await h.call("write", { path: `${dir}/x.ts`, content: "x" })).blocked,
      false,
      "the retry goes through",
    );
  });
});

test("a context edit of another result between the held write and its retry still lets the retry through", () => {
  // 40 nested folders: more files than one reminder takes, so the retry's own plan still carries some.
  const spec: Record<string, string> = { "notes.txt": "old notes\n" };
  let dir = "";
  for (let i = 0; i < 40; i++) {
    dir = dir === "" ? `d${i}` : `${dir}/d${i}`;
    spec[`${dir}/AGENTS.md`] = `RULES-OF-D${i}`;
  }
  return withTree(spec, async (tree) => {
    // Another extension prunes the first result (the read of notes.txt) at the end of the held write's turn.
    let pruned = false;
    const pruner: ExtensionFactory = (pi) => {
      pi.on("turn_end", (event, ctx) => {
        if (pruned || !event.toolResults.some((result) => result.isError)) return undefined;
        pruned = true;
        const [read] = ctx.sessionManager
          .getEntries()
          .filter((e) => e.type === "message" && e.message.role === "toolResult");
        return {
          entries: [...event.entries, { type: "context_edit" as const, targetId: read!.id, replacement: null }],
        };
      });
    };
    const write = toolTurn(["write", { path: `${dir}/x.ts`, content: "x\n" }]);
    const h = await startSession(tree, [toolTurn(["read", { path: "notes.txt" }]), write, write, finalTurn()], {
      settings: { lazyAgents: { gateWrites: true } },
      extensionPaths: [EXTENSION_PATH],
      factories: [pruner],
    });
    try {
      await h.session.prompt("read the notes, then write x");
      assert.ok(pruned, "the other extension pruned the read");
      const [, held, retry] = persistedToolResults(h.sessionManager);
      assert.equal(held!.isError, true, "the first write was held back");
      assert.equal(retry!.isError, false, "the retry went through, as the reason promised");
    } finally {
      h.dispose();
    }
  });
});

test(`a write held back for a Claude rule carries the rule's imports, and the retry goes through`, () =>
  twoTrees(
    {
      ".claude/rules/api.md": '---\npaths: "src/**"\n---\nAPI-RULE\nSee @../../docs/one.md\n',
      "docs/one.md": "RULE-IMPORT @two.md",
      "docs/two.md": "RULE-IMPORT-TWO",
      "src/a.ts": "a\n",
    },
    async (tree) => {
      const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
      const held = await h.call("write", { path: "src/b.ts", content: "b" });
      assert.equal(held.blocked, true);
      assert.match(held.reason ?? "", /RULE-IMPORT-TWO/);
      await h.runner.emit({ type: "turn_end", turnIndex: 0, toolResults: [] } as never);
      assert.equal(
        (await h.call("write", { path: "src/b.ts", content: "b" })).blocked,
        false,
        "the retry goes through",
      );
    },
  ));

test("a second write or edit of the gated file in the same assistant message is held too; the retry goes through", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\nb\n" }, async (tree) => {
    const twice = toolTurn(
      ["edit", { path: "pkg/a.ts", edits: [{ oldText: "a", newText: "A" }] }],
      ["edit", { path: "pkg/a.ts", edits: [{ oldText: "b", newText: "B" }] }],
    );
    const h = await startSession(tree, [twice, twice, finalTurn()], { settings: { lazyAgents: { gateWrites: true } } });
    try {
      await h.session.prompt("change pkg/a.ts");
      const results = persistedToolResults(h.sessionManager);
      assert.deepEqual(
        results.map((result) => result.isError),
        [true, true, false, false],
        "both edits of the first message were held back, both retries went through",
      );
      assert.match(results[1]!.content[0]!.text!, /retry the same call/);
      assert.equal(readFileSync(tree.abs("pkg/a.ts"), "utf8"), "A\nB\n");
    } finally {
      h.dispose();
    }
  }));

test("writes that one assistant message issues into paths a gated rule governs are held too, and the retries go through", () =>
  twoTrees({ ".claude/rules/api.md": '---\npaths: "src/**"\n---\nAPI-RULE\n', "src/a.ts": "a\n" }, async (tree) => {
    const writes = toolTurn(
      ["write", { path: "src/b.ts", content: "b\n" }],
      ["write", { path: "src/deep/c.ts", content: "c\n" }],
      ["write", { path: "lib/d.ts", content: "d\n" }],
    );
    const h = await startSession(tree, [writes, writes, finalTurn()], {
      settings: { lazyAgents: { gateWrites: true } },
    });
    try {
      await h.session.prompt("write them");
      const results = persistedToolResults(h.sessionManager);
      assert.deepEqual(
        results.map((result) => result.isError),
        [true, true, false, false, false, false],
        "both writes the rule governs were held; the one outside its globs and the retries went through",
      );
      assert.match(results[0]!.content[0]!.text!, /API-RULE/);
      assert.match(results[1]!.content[0]!.text!, /retry the same call/);
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      assert.equal(countOccurrences(file, "API-RULE"), 1, "the rule is sent once");
    } finally {
      h.dispose();
    }
  }));

test("after /tree leaves the held write's branch, the next write there is held again: the model never saw the reason", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\n" }, async (tree) => {
    const write = toolTurn(["write", { path: "pkg/b.ts", content: "b\n" }]);
    const h = await startRuntime(tree, { settings: { lazyAgents: { gateWrites: true } } });
    try {
      h.script([finalTurn("hello"), write, finalTurn()]);
      await h.session.prompt("say hello");
      const afterHello = h.session.sessionManager.getLeafId()!;
      await h.session.prompt("write b");
      assert.equal(persistedToolResults(h.session.sessionManager).at(-1)?.isError, true, "held on the first branch");
      await h.session.navigateTree(afterHello);
      h.script([write, finalTurn()]);
      await h.session.prompt("write b on the other branch");
      const last = persistedToolResults(h.session.sessionManager).at(-1)!;
      assert.equal(last.isError, true, "held again: this branch holds no reason");
      assert.match(last.content[0]!.text!, /PKG-RULES: use tabs/);
    } finally {
      await h.dispose();
    }
  }));

test("a write the gate holds carries the hookify warning it met in its reason: the model hears it before the retry", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "PKG-RULES",
      ".claude/hookify.todo.local.md":
        "---\nname: no-todo\nevent: file\npattern: TODO\naction: warn\n---\nTODO-WARNING\n",
    },
    async (tree, mode) => {
      const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
      const held = await h.call("write", { path: "pkg/b.ts", content: "// TODO" });
      assert.equal(held.blocked, true, mode);
      assert.match(held.reason ?? "", /PKG-RULES[^]*TODO-WARNING/, mode);
      await h.endTurn();
      const retry = await h.call("write", { path: "pkg/b.ts", content: "// TODO" });
      assert.equal(retry.blocked, false, mode);
      assert.match(JSON.stringify(retry.content), /TODO-WARNING/, `${mode}: the retry meets the rule again`);
    },
  ));
