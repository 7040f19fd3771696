// docs/behaviour.md, Parallel calls and Nested calls: each version goes out once, beside other extensions too.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import type { JsonObject } from "@earendil-works/pi-ai";
import { REMINDER_OPEN, type LazyAgents } from "../index.ts";
import {
  countOccurrences,
  loadRunner,
  reminderOf,
  textOf,
  withTree,
  twoTrees,
  finalTurn,
  persistedToolResults,
  startSession,
  toolTurn,
  type CallResult,
  type RunnerHarness,
  type Tree,
  type TreeSpec,
} from "./harness.ts";
import { PNG, lazyAgents, tree } from "./fixtures.ts";

const SCOPES = 20;

const FILES = 10;

const scopeName = (i: number) => `s${String(i).padStart(2, "0")}`;

const rules = (i: number) => `RULES-${scopeName(i)}-V1`;

function twentyScopes(): TreeSpec {
  const spec: TreeSpec = {};
  for (let i = 0; i < SCOPES; i++) {
    spec[`pkg/${scopeName(i)}/AGENTS.md`] = `${rules(i)}\n`;
    for (let j = 0; j < FILES; j++) spec[`pkg/${scopeName(i)}/f${j}.ts`] = `export const v${j} = ${j};\n`;
  }
  return spec;
}

/** Emits the result of a call whose tool_call was emitted earlier; returns the content the model gets. */
async function finishCall(
  h: RunnerHarness,
  toolName: string,
  toolCallId: string,
  input: Record<string, unknown>,
): Promise<CallResult["content"]> {
  const content = [{ type: "text", text: "x\n" }];
  const patched = await h.runner.emitToolResult({
    type: "tool_result",
    toolName,
    toolCallId,
    input,
    content,
    details: undefined,
    isError: false,
  } as never);
  await h.runner.emit({ type: "tool_execution_end", toolCallId, toolName, isError: false } as never);
  return (patched?.content ?? content) as CallResult["content"];
}

/** Per-call maps are empty once every call has finished. */
function assertNoPerCallState(engine: LazyAgents): void {
  const sizes = engine.stateSizes();
  for (const key of ["pending", "nested", "parentOf", "gateRecords"]) {
    assert.equal(sizes[key] ?? 0, 0, `${key} is empty after the turn`);
  }
}

/** Collects unhandled rejections while `fn` runs. */
async function noUnhandledRejections(fn: () => Promise<void>): Promise<void> {
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  process.on("unhandledRejection", onRejection);
  try {
    await fn();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("unhandledRejection", onRejection);
  }
  assert.deepEqual(rejections, [], "no unhandled rejections");
}

function blocker(blocked: (path: string) => boolean): ExtensionFactory {
  return (pi) => {
    pi.on("tool_call", (event) => {
      const path = (event.input as { path?: unknown }).path;
      return typeof path === "string" && blocked(path) ? { block: true, reason: "not allowed here" } : undefined;
    });
  };
}

test("three parallel reads in one scope deliver exactly once", () =>
  withTree({ "src/AGENTS.md": "ONCE", "src/a.ts": "a", "src/b.ts": "b", "src/c.ts": "c" }, async (tree) => {
    const h = await loadRunner(tree);
    const results = await Promise.all(["a", "b", "c"].map((name) => h.call("read", { path: `src/${name}.ts` })));
    const total = results.reduce((sum, r) => sum + countOccurrences(textOf(r.content), "ONCE"), 0);
    assert.equal(total, 1);
  }));

test("parallel reads in one assistant turn deliver exactly one reminder", () =>
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

test("a codemode script gets the plain file text and the codemode result carries the reminder", () =>
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

test("200 parallel tool calls over 20 scopes in one turn deliver every version exactly once", () =>
  withTree(twentyScopes(), (tree) =>
    noUnhandledRejections(async () => {
      // A real git work tree: the git helper answers for the 20 new folders while the calls run.
      execFileSync("git", ["init", "-q"], { cwd: tree.cwd });
      const { factory, engine } = lazyAgents({ git: true });
      const calls: Array<[string, JsonObject]> = [];
      for (let j = 0; j < FILES; j++) {
        for (let i = 0; i < SCOPES; i++) {
          const path = `pkg/${scopeName(i)}/f${j}.ts`;
          if (j < 6) calls.push(["read", { path }]);
          else if (j < 8) calls.push(["edit", { path, edits: [{ oldText: `= ${j};`, newText: `= ${j + 100};` }] }]);
          else if (j === 8) calls.push(["write", { path: `pkg/${scopeName(i)}/new.ts`, content: "x\n" }]);
          else calls.push(["read", { path: `pkg/${scopeName(i)}/missing.ts` }]);
        }
      }
      assert.equal(calls.length, 200);
      const h = await startSession(tree, [toolTurn(...calls), finalTurn()], { factories: [factory] });
      try {
        await h.session.prompt("touch everything at once");
        const results = persistedToolResults(h.sessionManager);
        assert.equal(results.length, 200, "every call has a result");
        const all = results.map((r) => textOf(r.content)).join("\n");
        for (let i = 0; i < SCOPES; i++) assert.equal(countOccurrences(all, rules(i)), 1, rules(i));
        const reminders = results.filter((r) => reminderOf(r.content) !== undefined);
        assert.ok(reminders.length >= 1 && reminders.length <= SCOPES, `${reminders.length} results carry reminders`);
        for (const result of results) {
          const blocks = result.content.filter((b) => b.type === "text" && b.text?.includes(REMINDER_OPEN));
          assert.ok(blocks.length <= 1, "at most one reminder per result");
          if (blocks.length === 1) assert.equal(result.content.at(-1), blocks[0], "and it is the last block");
        }
        const reads = results.filter((r) => r.toolName === "read" && !r.isError);
        for (const read of reads) assert.match(read.content[0]!.text ?? "", /^export const v\d = \d;\n?$/);
        const recorded = results.flatMap(
          (r) =>
            (r.details as { lazyAgents?: { files: Array<{ path: string }> } } | undefined)?.lazyAgents?.files ?? [],
        );
        assert.equal(recorded.length, SCOPES, "one ledger entry per scope");
        assert.equal(new Set(recorded.map((f) => f.path)).size, SCOPES);
        assertNoPerCallState(engine());
        assert.equal(engine().ledger.all("file").length, SCOPES);
      } finally {
        h.dispose();
      }
    }),
  ));

for (const order of ["before", "after"] as const) {
  test(`a second extension (loaded ${order} this one) that blocks calls activates nothing for them and leaks no state`, () =>
    withTree(twentyScopes(), (tree) =>
      noUnhandledRejections(async () => {
        const { factory, engine } = lazyAgents();
        const block = blocker((path) => path.startsWith("pkg/s00/") || path.startsWith("pkg/s01/"));
        const calls: Array<[string, JsonObject]> = [];
        for (let i = 0; i < 4; i++) {
          for (let j = 0; j < 5; j++) calls.push(["read", { path: `pkg/${scopeName(i)}/f${j}.ts` }]);
          calls.push(["write", { path: `pkg/${scopeName(i)}/w.ts`, content: "w\n" }]);
        }
        const h = await startSession(
          tree,
          [toolTurn(...calls), finalTurn(), toolTurn(["read", { path: "pkg/s00/f0.ts" }]), finalTurn()],
          { factories: order === "before" ? [block, factory] : [factory, block] },
        );
        try {
          await h.session.prompt("blocked in s00 and s01");
          const first = persistedToolResults(h.sessionManager);
          assert.equal(first.length, calls.length);
          const text = first.map((r) => textOf(r.content)).join("\n");
          assert.equal(countOccurrences(text, rules(0)), 0, "nothing of a blocked scope is delivered");
          assert.equal(countOccurrences(text, rules(1)), 0);
          assert.equal(countOccurrences(text, rules(2)), 1);
          assert.equal(countOccurrences(text, rules(3)), 1);
          for (const result of first.filter((r) => r.isError)) assert.equal(reminderOf(result.content), undefined);
          assertNoPerCallState(engine());
          assert.equal(
            engine().ledger.get("file", "pkg/s00/AGENTS.md") !== undefined,
            false,
            "not counted as delivered",
          );
          // A second turn into the blocked scope: blocked again, still nothing activated or left over.
          await h.session.prompt("again");
          const second = persistedToolResults(h.sessionManager).slice(first.length);
          assert.equal(second.length, 1);
          assert.equal(countOccurrences(textOf(second[0]!.content), rules(0)), 0);
          assertNoPerCallState(engine());
        } finally {
          h.dispose();
        }
      }),
    ));
}

test("a blocked call leaves its scope to the next call that goes through", () =>
  withTree(twentyScopes(), async (tree) => {
    const { factory, engine } = lazyAgents();
    let blocking = true;
    const block: ExtensionFactory = (pi) => {
      pi.on("tool_call", () => (blocking ? { block: true, reason: "held" } : undefined));
    };
    const h = await loadRunner(tree, { factories: [factory, block] });
    const blocked = await h.call("read", { path: "pkg/s05/f0.ts" });
    assert.equal(blocked.blocked, true);
    // A call without a result leaves its state until its turn ends; Pi then emits turn_end and agent_end.
    await h.runner.emit({ type: "agent_end", messages: [] } as never);
    assertNoPerCallState(engine());
    blocking = false;
    const through = await h.call("read", { path: "pkg/s05/f0.ts" });
    assert.match(reminderOf(through.content) ?? "", new RegExp(rules(5)));
  }));

test("an edit of an instruction file that a later extension blocks leaves that file to the batch's other results", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const { factory, engine } = lazyAgents();
    // A later extension that protects instruction files: the edit never runs, and has no result to carry the file.
    const protect = blocker((path) => path.endsWith("AGENTS.md"));
    const edit = ["edit", { path: "pkg/AGENTS.md", edits: [{ oldText: "PKG", newText: "NEW" }] }] as [
      string,
      JsonObject,
    ];
    const h = await startSession(tree, [toolTurn(edit, ["read", { path: "pkg/x.ts" }]), finalTurn()], {
      factories: [factory, protect],
    });
    try {
      await h.session.prompt("edit the rules and read x");
      const [blocked, read] = persistedToolResults(h.sessionManager);
      assert.equal(blocked!.isError, true);
      assert.match(reminderOf(read!.content) ?? "", /PKG-RULES/, "the read that went through carries its scope");
      assertNoPerCallState(engine());
    } finally {
      h.dispose();
    }
  }));

test("a second extension's tool_result that rewrites the content: the reminder is appended after its blocks", () =>
  withTree(twentyScopes(), async (tree) => {
    const { factory } = lazyAgents();
    const rewriter: ExtensionFactory = (pi) => {
      pi.on("tool_result", (event) => ({
        content: [
          { type: "text", text: `SUMMARY of ${(event.input as { path: string }).path}` },
          ...event.content.map((block) =>
            block.type === "text" ? { ...block, text: block.text.toUpperCase() } : block,
          ),
        ],
      }));
    };
    const h = await startSession(
      tree,
      [toolTurn(["read", { path: "pkg/s03/f1.ts" }], ["read", { path: "pkg/s04/f1.ts" }]), finalTurn()],
      { factories: [rewriter, factory] },
    );
    try {
      await h.session.prompt("read two");
      const results = persistedToolResults(h.sessionManager);
      for (const [index, result] of results.entries()) {
        const scope = index === 0 ? 3 : 4;
        assert.equal(result.content.length, 3, "two rewritten blocks and the reminder");
        assert.deepEqual(result.content.slice(0, 2), [
          { type: "text", text: `SUMMARY of pkg/${scopeName(scope)}/f1.ts` },
          { type: "text", text: "EXPORT CONST V1 = 1;\n" },
        ]);
        assert.match(reminderOf(result.content) ?? "", new RegExp(rules(scope)));
      }
    } finally {
      h.dispose();
    }
  }));

test("a read that returns image content only gets the reminder as a text block after the untouched image", () =>
  withTree({ "img/AGENTS.md": "IMG-RULES\n", "img/dot.png": PNG, "img/two.png": PNG }, async (tree) => {
    const { factory } = lazyAgents();
    // Drops the text note Pi's read puts before an image: the content is the image block alone.
    const imageOnly: ExtensionFactory = (pi) => {
      pi.on("tool_result", (event) =>
        (event.input as { path: string }).path.endsWith("dot.png")
          ? { content: event.content.filter((block) => block.type === "image") }
          : undefined,
      );
    };
    const h = await startSession(
      tree,
      [toolTurn(["read", { path: "img/dot.png" }]), toolTurn(["read", { path: "img/two.png" }]), finalTurn()],
      { factories: [imageOnly, factory] },
    );
    try {
      await h.session.prompt("look at the picture");
      const [imageOnlyResult, plain] = persistedToolResults(h.sessionManager);
      const image = { type: "image", data: PNG.toString("base64"), mimeType: "image/png" };
      assert.deepEqual(imageOnlyResult!.content.slice(0, 1), [image], "the image block is untouched");
      assert.equal(imageOnlyResult!.content.length, 2);
      assert.equal(imageOnlyResult!.content[1]!.type, "text");
      assert.match(reminderOf(imageOnlyResult!.content) ?? "", /IMG-RULES/);
      assert.deepEqual(plain!.content, [{ type: "text", text: "Read image file [image/png]" }, image]);
    } finally {
      h.dispose();
    }
  }));

test("a read discovered before a parallel edit of its instruction file does not send the older version after the newer one", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const { factory } = lazyAgents();
    const h = await loadRunner(tree, { factories: [factory] });
    // Pi preflights sibling calls in order, then runs them concurrently: the read's tool_call
    // sees V1, the edit finishes first and sends V2, and only then the read's result is built.
    const input = { path: "pkg/x.ts" };
    await h.runner.emitToolCall({ type: "tool_call", toolName: "read", toolCallId: "read-1", input } as never);
    const edit = await h.call("edit", {
      path: "pkg/AGENTS.md",
      edits: [{ oldText: "RULE-V1", newText: "RULE-V2" }],
    });
    assert.match(reminderOf(edit.content) ?? "", /RULE-V2/);
    const reminder = reminderOf(await finishCall(h, "read", "read-1", input)) ?? "";
    assert.doesNotMatch(reminder, /RULE-V1/, "the older version must not replace the newer one");
    const next = await h.call("read", input);
    assert.equal(reminderOf(next.content), undefined, "the model holds V2: nothing to send");
  }));

test("a codemode script's read taken before a sibling edit does not send the older version as the newer one", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const { factory } = lazyAgents();
    const h = await loadRunner(tree, { factories: [factory] });
    // The script's nested read finishes first and sees V1; a sibling edit then sends V2; only then
    // does the script return, and its result carries what the nested read activated.
    const input = { code: "return await tools.read({ path: 'pkg/x.ts' });" };
    await h.runner.emitToolCall({ type: "tool_call", toolName: "codemode", toolCallId: "cm-1", input } as never);
    const nested = await h.call("read", { path: "pkg/x.ts" }, { parentToolCallId: "cm-1" });
    assert.equal(reminderOf(nested.content), undefined, "a nested result stays untouched");
    const edit = await h.call("edit", { path: "pkg/AGENTS.md", edits: [{ oldText: "RULE-V1", newText: "RULE-V2" }] });
    assert.match(reminderOf(edit.content) ?? "", /RULE-V2/);
    const reminder = reminderOf(await finishCall(h, "codemode", "cm-1", input)) ?? "";
    assert.doesNotMatch(reminder, /RULE-V1|replaces/, "the older version must not replace the newer one");
    const next = await h.call("read", { path: "pkg/x.ts" });
    assert.equal(reminderOf(next.content), undefined, "the model holds V2: nothing to send");
  }));

/**
 * Pi preflights both calls in order, then runs them concurrently: here the read finishes first,
 * before the writer (an edit of pkg/AGENTS.md or a link to it, or a command naming it) has written,
 * and Pi still persists the writer's result first. The model must end on the newer version, carried
 * by the writer's result.
 */
async function writeWhileReading(
  tree: Tree,
  writer: [string, Record<string, unknown>],
  git = false,
  reader: [string, Record<string, unknown>] = ["read", { path: "pkg/x.ts" }],
): Promise<void> {
  const { factory } = lazyAgents({ git });
  const h = await loadRunner(tree, { factories: [factory] });
  const [toolName, input] = writer;
  const [readName, read] = reader;
  await h.runner.emitToolCall({ type: "tool_call", toolName, toolCallId: "w-1", input } as never);
  await h.runner.emitToolCall({ type: "tool_call", toolName: readName, toolCallId: "r-1", input: read } as never);
  const readReminder = reminderOf(await finishCall(h, readName, "r-1", read)) ?? "";
  writeFileSync(tree.abs("pkg/AGENTS.md"), "RULE-V2\n");
  const writerReminder = reminderOf(await finishCall(h, toolName, "w-1", input)) ?? "";
  assert.doesNotMatch(readReminder, /RULE-V1/, "the writer's result carries the file it writes");
  assert.match(writerReminder, /RULE-V2/);
  await h.runner.emit({ type: "turn_end", turnIndex: 0, toolResults: [] } as never);
  assert.equal(reminderOf((await h.call(readName, read)).content), undefined, "the model holds V2");
}

const editOf = (path: string): [string, Record<string, unknown>] => [
  "edit",
  { path, edits: [{ oldText: "RULE-V1", newText: "RULE-V2" }] },
];

test("a batch that edits an instruction file and reads below it never leaves the model on the older version", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, (tree) =>
    writeWhileReading(tree, editOf("pkg/AGENTS.md")),
  ));

test("a batch that edits an instruction file through a link named otherwise leaves the file to the edit's result", () =>
  twoTrees({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/NOTES.md": { link: "AGENTS.md" }, "pkg/x.ts": "x\n" }, (tree) =>
    writeWhileReading(tree, editOf("pkg/NOTES.md"), true),
  ));

test("a batch that edits an instruction file and shows it with a command never leaves the model on the older version", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, (tree) =>
    writeWhileReading(tree, editOf("pkg/AGENTS.md"), false, ["bash", { command: "cat pkg/AGENTS.md" }]),
  ));

test("a batch whose bash command writes an instruction file and reads below it never leaves the model on the older version", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, (tree) =>
    writeWhileReading(tree, ["bash", { command: "echo RULE-V2 > pkg/AGENTS.md" }]),
  ));

test("in a real session, one turn that edits an instruction file and reads below it ends on the newer version", () =>
  withTree({ "pkg/AGENTS.md": "RULE-V1\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const h = await startSession(tree, [
      toolTurn(
        ["edit", { path: "pkg/AGENTS.md", edits: [{ oldText: "RULE-V1", newText: "RULE-V2" }] }],
        ["read", { path: "pkg/x.ts" }],
      ),
      finalTurn(),
    ]);
    try {
      await h.session.prompt("go");
      const transcript = persistedToolResults(h.sessionManager)
        .map((result) => textOf(result.content))
        .join("\n");
      assert.ok(transcript.lastIndexOf("RULE-V2") > transcript.lastIndexOf("RULE-V1"), "V2 comes last");
    } finally {
      h.dispose();
    }
  }));

test("a codemode script's nested reads in two scopes each bring their imports, in a plain folder and under git", () =>
  twoTrees(
    {
      "a/AGENTS.md": "A-RULES @../docs/a.md",
      "a/x.ts": "x\n",
      "b/AGENTS.md": "B-RULES @../notes/b.md",
      "b/y.ts": "y\n",
      "docs/a.md": "A-IMPORT",
      "notes/b.md": "B-IMPORT",
    },
    async (tree) => {
      const { factory } = lazyAgents({ git: true });
      const h = await loadRunner(tree, { factories: [factory] });
      // Both nested reads are viewed together at the script's result: each one's questions for git must be asked.
      await h.call("read", { path: "a/x.ts" }, { parentToolCallId: "cm-1" });
      await h.call("read", { path: "b/y.ts" }, { parentToolCallId: "cm-1" });
      const reminder = reminderOf((await h.call("codemode", { code: "…" }, { id: "cm-1" })).content) ?? "";
      for (const text of ["A-RULES", "B-RULES", "A-IMPORT", "B-IMPORT"]) assert.match(reminder, new RegExp(text));
    },
  ));
