// docs/behaviour.md, Budget and Caps are announced: what fits in one reminder and how cuts and caps are told.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createLazyAgents, cutUtf8 } from "../index.ts";
import { MAX_LEFT_OUT_NAMES, MAX_REMINDER_FILES, REMINDER_BUDGET_BYTES } from "../config.ts";
import { countOccurrences, loadRunner, reminderOf, withTree, twoTrees, type TreeSpec } from "./harness.ts";

/** An instruction file of about 24 KiB that imports `count` small files, one token each, and a deeper scope. */
function manyImports(count: number): TreeSpec {
  const spec: TreeSpec = { "pkg/deep/AGENTS.md": "DEEP-RULES\n", "pkg/deep/x.ts": "x\n", "pkg/y.ts": "y\n" };
  const names = Array.from({ length: count }, (_, i) => `imp/f${String(i).padStart(4, "0")}.md`);
  for (const name of names) spec[`pkg/${name}`] = `RULE ${name}\n`;
  spec["pkg/AGENTS.md"] = `PKG-RULES\n${"p".repeat(12 * 1024)}\n${names.map((name) => `@${name}`).join("\n")}\n`;
  return spec;
}

interface Recorded {
  lazyAgents: { files: Array<{ path: string }> };
}

const skillText = (name: string) => `---\nname: ${name}\ndescription: Skill ${name}\n---\nbody\n`;

/** Trees that reach one cap each, and the line that must announce it; each runs in a plain folder and under `git init`. */
const caps: Array<{ cap: string; spec: () => TreeSpec; line: RegExp }> = [
  {
    cap: "a folder import",
    spec: () => {
      const spec: TreeSpec = { "pkg/AGENTS.md": "PKG @docs\n", "pkg/a.ts": "a\n" };
      for (let i = 0; i < 40; i++) spec[`pkg/docs/d${String(i).padStart(2, "0")}.md`] = `DOC ${i}\n`;
      return spec;
    },
    line: /^- pkg\/AGENTS\.md was not loaded whole: .*import limit \(32\).* 32 of 40 /m,
  },
  {
    cap: "the entries of a skills folder",
    spec: () => {
      const spec: TreeSpec = { "pkg/a.ts": "a\n" };
      for (let i = 0; i < 300; i++)
        spec[`pkg/.agents/skills/s${String(i).padStart(3, "0")}/SKILL.md`] = skillText(`s${i}`);
      return spec;
    },
    line: /^- pkg\/\.agents\/skills was not loaded whole: .*scan limit.* 256 of 300 /m,
  },
  {
    cap: "the depth of a skills tree",
    spec: () => ({ "pkg/a.ts": "a\n", "pkg/.agents/skills/1/2/3/4/5/6/7/8/9/deep/SKILL.md": skillText("deep") }),
    line: /^- pkg\/\.agents\/skills\/1\/2\/3\/4\/5\/6\/7\/8\/9 was not loaded whole: .*depth limit \(8\)/m,
  },
  {
    cap: "the hops of an import chain",
    spec: () => {
      const spec: TreeSpec = { "pkg/AGENTS.md": "PKG @i1.md\n", "pkg/a.ts": "a\n" };
      for (let i = 1; i <= 7; i++) spec[`pkg/i${i}.md`] = `HOP ${i} @i${i + 1}.md\n`;
      spec["pkg/i8.md"] = "LAST\n";
      return spec;
    },
    line: /^- pkg\/i5\.md was not loaded whole: .*import depth limit \(5\)/m,
  },
  {
    cap: "the entries of a rule folder",
    spec: () => {
      const spec: TreeSpec = { "pkg/a.ts": "a\n" };
      for (let i = 0; i < 260; i++)
        spec[`.claude/rules/r${String(i).padStart(3, "0")}.md`] = `---\npaths: "nowhere/**"\n---\nRULE ${i}\n`;
      return spec;
    },
    line: /^- \.claude\/rules was not loaded whole: .*scan limit.* 256 of 260 /m,
  },
  {
    cap: "the entries of an imported folder, whose files lie past its first entries by name",
    spec: () => {
      const spec: TreeSpec = { "pkg/AGENTS.md": "PKG @docs\n", "pkg/a.ts": "a\n", "pkg/docs/zz.md": "LAST DOC\n" };
      for (let i = 0; i < 260; i++) spec[`pkg/docs/d${String(i).padStart(3, "0")}/x.txt`] = "x\n";
      return spec;
    },
    line: /^- pkg\/AGENTS\.md was not loaded whole: .*scan limit \(256\).* 256 of 261 /m,
  },
];

test("the whole reminder stays within the budget and the file cap; what is left out is announced once and stays pending", () =>
  twoTrees(manyImports(400), async (tree) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents()], hasUI: true });
    const first = await h.call("read", { path: "pkg/deep/x.ts" });
    const reminder = reminderOf(first.content) ?? "";
    assert.ok(Buffer.byteLength(reminder) <= REMINDER_BUDGET_BYTES, `${Buffer.byteLength(reminder)} bytes`);
    const blocks = countOccurrences(reminder, "<file ");
    assert.ok(blocks <= MAX_REMINDER_FILES && blocks > 2, `${blocks} instruction blocks`);
    assert.match(reminder, /DEEP-RULES/, "the deepest file keeps its priority");
    const delivered = (first.details as Recorded).lazyAgents.files.map((file) => file.path);
    assert.equal(delivered.length, blocks, "only what the reminder carries is recorded");
    const leftOut = 402 - blocks;
    const notices = reminder.split("\n").filter((line) => line.includes("this reminder left out"));
    assert.equal(notices.length, 1, "one line for everything left out");
    assert.match(notices[0]!, new RegExp(`\\b${leftOut} instruction files\\b`));
    assert.doesNotMatch(notices[0]!, /\/lazy-agents/, "the model cannot run a user command");
    const names = notices[0]!.split("read them yourself: ")[1] ?? "";
    const name = "pkg/[\\w/.]+\\.md";
    assert.match(
      names,
      new RegExp(`^${name}(, ${name}){${MAX_LEFT_OUT_NAMES - 1}} and ${leftOut - MAX_LEFT_OUT_NAMES} more\\.$`),
    );
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1) ?? "";
    assert.equal(countOccurrences(report, "  pending"), leftOut, "/lazy-agents lists them as pending");
    const next = await h.call("read", { path: "pkg/y.ts" });
    const more = (next.details as Recorded).lazyAgents.files.map((file) => file.path);
    assert.ok(more.length > 0 && more.every((path) => !delivered.includes(path)), "a later access sends more of them");
    assert.ok(Buffer.byteLength(reminderOf(next.content) ?? "") <= REMINDER_BUDGET_BYTES);
  }));

for (const { cap, spec, line } of caps) {
  test(`a cap on ${cap} is announced to the model in one line and shown by /lazy-agents`, () =>
    twoTrees(spec(), async (tree, mode) => {
      const h = await loadRunner(tree, { factories: [createLazyAgents()], hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      const lines = reminder.split("\n").filter((text) => line.test(text));
      assert.equal(lines.length, 1, `${mode}: ${reminder.split("\n").slice(-6).join("\n")}`);
      await h.command("lazy-agents", "");
      const cut = lines[0]!.slice(2).split(" was not loaded whole: ");
      assert.ok(h.notifications.at(-1)?.includes(`${cut[0]}  ${cut[1]!.replace(/\.$/, "")}`), h.notifications.at(-1));
      const again = await h.call("read", { path: "pkg/a.ts" });
      assert.doesNotMatch(reminderOf(again.content) ?? "", line, "announced once");
    }));
}

test("a three-file chain of about 30 KiB each keeps the deepest file whole", () =>
  withTree(
    {
      "a/AGENTS.md": `A-START${"a".repeat(30 * 1024)}A-END`,
      "a/b/AGENTS.md": `B-START${"b".repeat(30 * 1024)}B-END`,
      "a/b/c/AGENTS.md": `C-START${"é".repeat(15 * 1024)}C-END`,
      "a/b/c/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const result = await h.call("read", { path: "a/b/c/x.ts" });
      const reminder = reminderOf(result.content) ?? "";
      assert.ok(/C-START(é)+C-END/.test(reminder), "the deepest file arrives whole");
      assert.ok(reminder.includes("B-START"), "the middle file keeps what fits");
      assert.ok(reminder.includes("[a/b/AGENTS.md was cut here to fit the size budget; read the file for the rest.]"));
      assert.match(reminder, /this reminder left out 1 instruction file; .* read them yourself: a\/AGENTS\.md\.\n/);
      assert.ok(!reminder.includes("A-START"), "nothing of the broadest file is left");
      assert.ok(!reminder.includes("\uFFFD"), "never cut inside a character");
      assert.ok(Buffer.byteLength(reminder) <= 48 * 1024, "the whole reminder fits the budget");
      const record = (result.details as { lazyAgents: { files: Array<{ path: string; truncated?: boolean }> } })
        .lazyAgents;
      assert.deepEqual(
        record.files.map((f) => [f.path, f.truncated ?? false]),
        [
          ["a/b/AGENTS.md", true],
          ["a/b/c/AGENTS.md", false],
        ],
        "the file left out stays pending",
      );
      const next = await h.call("read", { path: "a/b/c/x.ts" });
      assert.match(reminderOf(next.content) ?? "", /A-START/, "and comes with the next access");
    },
  ));

test("a UTF-8 cut to nothing or less keeps nothing", () => {
  const table: Array<[string, number, string]> = [
    ["abc", 0, ""],
    ["abc", -1, ""],
    ["abc", -5, ""],
    ["é", 1, ""],
    ["abc", 3, "abc"],
  ];
  for (const [text, max, expected] of table) assert.equal(cutUtf8(text, max), expected, `${text} to ${max}`);
});

test("within one folder the budget keeps the instruction file whole before its imports", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": `RULES @extra.md ${"r".repeat(2000)} RULES-END`,
      "pkg/extra.md": `EXTRA ${"e".repeat(3000)} EXTRA-END`,
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree, { settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /RULES-END/);
      assert.doesNotMatch(reminder, /EXTRA-END/);
      assert.match(reminder, /\[pkg\/extra.md was cut here to fit the size budget/);
    },
  ));

test("UTF-8 cuts never split a character", () => {
  assert.equal(cutUtf8("aé", 2), "a");
  assert.equal(cutUtf8("aé", 3), "aé");
  assert.equal(cutUtf8("😀x", 3), "");
  assert.equal(cutUtf8("😀x", 4), "😀");
  assert.equal(cutUtf8("abc", 0), "");
});

test("a skills folder of exactly 256 entries is read whole: all its skills listed, no cap announced", () => {
  const spec: TreeSpec = { "pkg/a.ts": "a\n" };
  for (let i = 0; i < 256; i++) spec[`pkg/.agents/skills/s${String(i).padStart(3, "0")}/SKILL.md`] = skillText(`s${i}`);
  return twoTrees(spec, async (tree, mode) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents()] });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /Skill s255/, mode);
    assert.doesNotMatch(reminder, /scan limit/, mode);
  });
});

test("a file cut to the budget stays within it when its text holds what reads as a closing tag", () =>
  twoTrees({ "pkg/AGENTS.md": "</file>".repeat(2000), "pkg/x.ts": "x" }, async (tree, mode) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /\[pkg\/AGENTS\.md was cut here to fit the size budget/, mode);
    assert.doesNotMatch(reminder, /<\/file><\/file>/, `${mode}: the file's own closing tags are escaped`);
    assert.ok(Buffer.byteLength(reminder) <= 4096, `${mode}: ${Buffer.byteLength(reminder)} bytes`);
  }));

test("the left-out line has room when it names rule listings the budget left out", () => {
  const spec: TreeSpec = { "src/a.ts": "a\n" };
  const described = (i: number) => `---\ndescription: Rule ${i} ${"d".repeat(120)}\n---\nbody\n`;
  for (let i = 0; i < 22; i++) spec[`.cursor/rules/r${String(i).padStart(2, "0")}.mdc`] = described(i);
  spec[`.cursor/rules/${"a".repeat(120)}/${"b".repeat(120)}/${"c".repeat(110)}.mdc`] = described(99);
  return twoTrees(spec, async (tree, mode) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, /this reminder left out/, mode);
    assert.ok(Buffer.byteLength(reminder) <= 4096, `${mode}: ${Buffer.byteLength(reminder)} bytes`);
  });
});

test("a reminder that the file cap cuts, well within its byte budget, does not say it ran out of size", () => {
  const spec: TreeSpec = { "pkg/AGENTS.md": "", "pkg/x.ts": "x" };
  const names = Array.from({ length: MAX_REMINDER_FILES + 8 }, (_, i) => `i${String(i).padStart(2, "0")}.md`);
  spec["pkg/AGENTS.md"] = `ROOT ${names.map((name) => `@${name}`).join(" ")}`;
  for (const name of names) spec[`pkg/${name}`] = `TEXT ${name}`;
  return twoTrees(spec, async (tree, mode) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.ok(Buffer.byteLength(reminder) < REMINDER_BUDGET_BYTES / 2, mode);
    const line = reminder.split("\n").find((text) => text.includes("this reminder left out")) ?? "";
    assert.match(line, /left out 9 instruction files/, mode);
    assert.match(line, /^To stay within its size and file limits, /, mode);
  });
});

test("a folder import whose files past the 32nd would all be refused announces no cap: it hides nothing", () => {
  const spec: TreeSpec = { "pkg/AGENTS.md": "PKG @docs\n", "pkg/a.ts": "a\n" };
  for (let i = 0; i < 32; i++) spec[`pkg/docs/d${String(i).padStart(2, "0")}.md`] = `DOC ${i}\n`;
  spec["pkg/docs/zz.md"] = new Uint8Array([0xff, 0xfe, 0x41]);
  return twoTrees(spec, async (tree, mode) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /DOC 30\n/, mode);
    assert.doesNotMatch(reminder, /import limit/, mode);
    assert.match(reminder, /an import in pkg\/AGENTS\.md was not loaded: not valid UTF-8/, mode);
  });
});

test("the left-out line counts instruction files, rules, rule listings and skills each by its own name, and names them", () => {
  const pad = (what: string, bytes: number) => `${what} ${"x".repeat(bytes)}\n`;
  const spec: TreeSpec = { "src/a.ts": "a\n", "src/AGENTS.md": "SRC @one.md @two.md @three.md\n" };
  for (const name of ["one", "two", "three"]) spec[`src/${name}.md`] = pad(`IMPORT-${name}`, 1400);
  for (let i = 0; i < 6; i++) spec[`.claude/rules/r${i}.md`] = `---\npaths: "src/**"\n---\n${pad(`RULE-${i}`, 700)}`;
  for (let i = 0; i < 5; i++)
    spec[`.cursor/rules/d${i}.mdc`] = `---\ndescription: Described ${i} ${"d".repeat(200)}\n---\nbody\n`;
  for (let i = 0; i < 4; i++)
    spec[`src/.agents/skills/k${i}/SKILL.md`] =
      `---\nname: k${i}\ndescription: Skill ${i} ${"s".repeat(200)}\n---\nbody\n`;
  return twoTrees(spec, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    const line = reminder.split("\n").find((text) => text.includes("this reminder left out")) ?? "";
    const left = {
      files: 4 - countOccurrences(reminder, "<file "),
      rules: 6 - countOccurrences(reminder, "<rule "),
      listings: 5 - reminder.split("\n").filter((text) => /^- d\d \(scope /.test(text)).length,
      skills: 4 - reminder.split("\n").filter((text) => /^- k\d: /.test(text)).length,
    };
    assert.ok(
      Object.values(left).every((count) => count > 0),
      `each kind is left out ${JSON.stringify(left)}`,
    );
    const counts = (line.match(/left out (.*?); /) ?? [])[1];
    const plural = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;
    assert.equal(
      counts,
      [
        plural(left.files, "instruction file", "instruction files"),
        plural(left.rules, "rule", "rules"),
        plural(left.listings, "rule listed by description", "rules listed by description"),
        plural(left.skills, "skill", "skills"),
      ].join(", "),
      `${line}`,
    );
    const names = (line.split("read them yourself: ")[1] ?? "").replace(/ and \d+ more\.$/, "").split(", ");
    assert.ok(names.includes(".claude/rules/r5.md"), `a left-out rule is named, to be read: ${line}`);
    assert.ok(names.includes("src/three.md"), `so is a left-out file: ${line}`);
    assert.ok(Buffer.byteLength(reminder) <= 4096, `${Buffer.byteLength(reminder)} bytes`);
  });
});
