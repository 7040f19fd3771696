// docs/behaviour.md, Vendored and ignored code: ignored folder names and what git ignores never contribute.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLazyAgents, type SpawnGit } from "../index.ts";
import { loadRunner, reminderOf, withTree, twoTrees } from "./harness.ts";
import { rng } from "./rng.ts";

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;

function gitInit(cwd: string): void {
  execFileSync("git", ["init", "-q"], { cwd });
}

const ignoredTree = {
  ".gitignore": "generated/\n",
  "generated/AGENTS.md": "GENERATED-RULES",
  "generated/out.ts": "x",
  "src/AGENTS.md": "SRC-RULES",
  "src/a.ts": "a",
};

/** Git's own check-ignore helper, answering only after a pause: slower than the tool it races. */
const slowGit: SpawnGit = (cwd) =>
  spawn("sh", ["-c", "sleep 0.5; exec git check-ignore --stdin -z --verbose --non-matching"], {
    cwd,
    env: { ...process.env, GIT_FLUSH: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });

test("vendored node_modules instructions never reach the model", () =>
  twoTrees(
    {
      "node_modules/dep/AGENTS.md": "VENDOR",
      "node_modules/dep/index.js": "x",
      "node_modules/dep/.agents/skills/v/SKILL.md": "---\nname: v\ndescription: vendor skill\n---\n",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const result = await h.call("read", { path: "node_modules/dep/index.js" });
      assert.deepEqual(result.content, result.original);
    },
  ));

test("a node_modules package's AGENTS.md and skills never reach the model", () =>
  twoTrees(
    {
      "node_modules/some-dep/AGENTS.md": "VENDOR-RULES",
      "node_modules/some-dep/.agents/skills/evil/SKILL.md": skill("evil", "vendor skill"),
      "node_modules/some-dep/index.js": "module.exports = 1;\n",
      "packages/app/node_modules/x/AGENTS.md": "NESTED-VENDOR",
      "packages/app/node_modules/x/y.js": "y",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      for (const path of ["node_modules/some-dep/index.js", "packages/app/node_modules/x/y.js"]) {
        const result = await h.call("read", { path });
        assert.deepEqual(result.content, result.original, path);
      }
    },
  ));

test("a .gitignored generated/AGENTS.md inside a real git repository is skipped", () =>
  withTree(
    {
      ".gitignore": "generated/\n",
      "generated/AGENTS.md": "GENERATED-RULES",
      "generated/deep/AGENTS.md": "GENERATED-DEEP",
      "generated/deep/out.ts": "x",
      "src/AGENTS.md": "SRC-RULES",
      "src/a.ts": "a",
    },
    async (tree) => {
      gitInit(tree.cwd);
      const h = await loadRunner(tree);
      const ignored = await h.call("read", { path: "generated/deep/out.ts" });
      assert.deepEqual(ignored.content, ignored.original);
      assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /SRC-RULES/);
    },
  ));

test("without git, only the constant name list applies", () =>
  withTree(
    { ".gitignore": "generated/\n", "generated/AGENTS.md": "GENERATED-RULES", "generated/out.ts": "x" },
    async (tree) => {
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "generated/out.ts" })).content) ?? "", /GENERATED-RULES/);
    },
  ));

test("with the write gate on, a write into a git-ignored folder is neither held back nor given its rules", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    const write = await h.call("write", { path: "generated/new.ts", content: "n" });
    assert.equal(write.blocked, false);
    assert.deepEqual(write.content, write.original);
    const held = await h.call("write", { path: "src/new.ts", content: "n" });
    assert.equal(held.blocked, true, "the same gate holds a folder git does not ignore");
    assert.match(held.reason ?? "", /SRC-RULES/);
  }));

test("writing or editing an instruction file in a git-ignored folder delivers nothing", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree);
    const write = await h.call("write", { path: "generated/sub/AGENTS.md", content: "WRITTEN-RULES" });
    assert.deepEqual(write.content, write.original);
    const edit = await h.call("edit", {
      path: "generated/AGENTS.md",
      edits: [{ oldText: "GENERATED-RULES", newText: "EDITED-RULES" }],
    });
    assert.equal(edit.isError, false);
    assert.deepEqual(edit.content, edit.original);
    const control = await h.call("edit", {
      path: "src/AGENTS.md",
      edits: [{ oldText: "SRC-RULES", newText: "SRC-2" }],
    });
    assert.match(reminderOf(control.content) ?? "", /SRC-2/, "an edit outside the ignored folder delivers");
  }));

test("a folder that a negated .gitignore pattern re-includes is not ignored", () =>
  withTree(
    {
      ".gitignore": "generated/*\n!generated/keep/\n",
      "generated/keep/AGENTS.md": "KEEP-RULES",
      "generated/keep/a.ts": "a",
      "generated/drop/AGENTS.md": "DROP-RULES",
      "generated/drop/a.ts": "a",
    },
    async (tree) => {
      gitInit(tree.cwd);
      const h = await loadRunner(tree);
      assert.match(reminderOf((await h.call("read", { path: "generated/keep/a.ts" })).content) ?? "", /KEEP-RULES/);
      const dropped = await h.call("read", { path: "generated/drop/a.ts" });
      assert.deepEqual(dropped.content, dropped.original);
    },
  ));

test("one loaded extension hosted on a second cwd rebinds to it: its files, its paths, its git", () =>
  withTree({ "a/AGENTS.md": "FIRST-RULES", "a/x.ts": "x", "gen/AGENTS.md": "FIRST-GEN", "gen/x.ts": "x" }, (first) =>
    withTree(
      {
        ".gitignore": "gen/\n",
        "b/AGENTS.md": "SECOND-RULES",
        "b/x.ts": "x",
        "gen/AGENTS.md": "SECOND-GEN",
        "gen/x.ts": "x",
      },
      async (second) => {
        execFileSync("git", ["init", "-q"], { cwd: second.cwd });
        const one = await loadRunner(first);
        assert.match(reminderOf((await one.call("read", { path: "a/x.ts" })).content) ?? "", /FIRST-RULES/);
        assert.match(reminderOf((await one.call("read", { path: "gen/x.ts" })).content) ?? "", /FIRST-GEN/);
        const two = await loadRunner(second, { loaded: one.loaded });
        const reminder = reminderOf((await two.call("read", { path: "b/x.ts" })).content) ?? "";
        assert.match(reminder, /<file path="b\/AGENTS.md">\nSECOND-RULES/);
        const ignored = await two.call("read", { path: "gen/x.ts" });
        assert.deepEqual(ignored.content, ignored.original, "the second cwd's .gitignore applies");
      },
    ),
  ));

test("the first call into a new folder waits for git's answer before its result is built", () =>
  withTree(ignoredTree, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: slowGit })] });
    const ignored = await h.call("read", { path: "generated/out.ts" });
    assert.deepEqual(ignored.content, ignored.original);
    assert.match(reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "", /SRC-RULES/);
  }));

test("a reload that changes how folders are read, between a call and its result, keeps a git-ignored folder ignored", () =>
  withTree({ ...ignoredTree, "generated/more.ts": "m" }, async (tree) => {
    gitInit(tree.cwd);
    const h = await loadRunner(tree);
    const first = await h.call("read", { path: "generated/out.ts" });
    assert.deepEqual(first.content, first.original);
    // Git has answered for generated/ already: the second read asks it nothing at its call.
    const input = { path: "generated/more.ts" };
    await h.runner.emitToolCall({ type: "tool_call", toolName: "read", toolCallId: "r2", input } as never);
    writeFileSync(join(tree.agentDir, "settings.json"), JSON.stringify({ lazyAgents: { maxFileBytes: 4096 } }));
    await h.settingsManager.reload();
    await h.emitSessionStart("reload");
    const content = [{ type: "text", text: "m" }];
    const event = { type: "tool_result", toolName: "read", toolCallId: "r2", input, content, isError: false };
    const patched = await h.runner.emitToolResult({ ...event, details: {} } as never);
    assert.doesNotMatch(reminderOf(patched?.content ?? content) ?? "", /GENERATED-RULES/);
  }));

/** A helper that answers cwd, then dies on the next question; starting it again throws at once. */
function dyingGit(): SpawnGit {
  let spawned = 0;
  const script = `let seen = 0; process.stdin.on("data", (chunk) => {
    for (const byte of chunk) if (byte === 0 && ++seen === 1) process.stdout.write("\\0\\0\\0./\\0");
    if (seen > 1) process.exit(1);
  });`;
  return () => {
    if (spawned++ > 0) throw Object.assign(new Error("spawn git EMFILE"), { code: "EMFILE" });
    return spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "pipe"] });
  };
}

test("when git dies after it has answered and cannot start again, the questions waiting on it are answered at once", () =>
  withTree({ "a/AGENTS.md": "A-RULES", "a/x.ts": "x", "b/AGENTS.md": "B-RULES", "b/y.ts": "y" }, async (tree) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: dyingGit() })] });
    const started = Date.now();
    const reminder = reminderOf((await h.call("bash", { command: "cat a/x.ts b/y.ts" })).content) ?? "";
    assert.match(reminder, /A-RULES[^]*B-RULES/);
    assert.ok(Date.now() - started < 1500, `answered after ${Date.now() - started} ms, not at git's timeout`);
  }));

test("/lazy-agents says when git stopped answering in the session, and says nothing of git in a folder it never worked in", () =>
  withTree({ "a/AGENTS.md": "A-RULES", "a/x.ts": "x", "b/AGENTS.md": "B-RULES", "b/y.ts": "y" }, async (tree) => {
    const stopped = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ spawnGit: dyingGit() })] });
    await stopped.call("bash", { command: "cat a/x.ts b/y.ts" });
    await stopped.command("lazy-agents", "");
    assert.match(stopped.notifications.at(-1) ?? "", /^ {2}git stopped answering in this session/m);
    // The real git, in a folder that is no repository: it never answers there.
    const never = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents()] });
    await never.call("bash", { command: "cat a/x.ts b/y.ts" });
    await never.command("lazy-agents", "");
    assert.doesNotMatch(never.notifications.at(-1) ?? "", /git/);
  }));

/** A seeded tree with nothing git ignores: nested files, imports one to three hops deep, folder imports, skills and rules. */
function seededTree(seed: number): { spec: Record<string, string>; folders: string[]; next: () => number } {
  const next = rng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const folders = ["a", "a/b", "a/b/c", "d", "d/e", "f/g/h"];
  const spec: Record<string, string> = {};
  for (const [index, folder] of folders.entries()) {
    spec[`${folder}/x.ts`] = `export const x${index} = ${index};\n`;
    if (next() < 0.25) continue;
    const hops = 1 + Math.floor(next() * 3);
    for (let hop = 1; hop <= hops; hop++) {
      const more = hop < hops ? ` @d${index}-${hop + 1}.md` : "";
      spec[`docs/d${index}-${hop}.md`] = `DOC ${index} HOP ${hop}${more}\n`;
    }
    const folderImport = next() < 0.4 ? ` @${"../".repeat(folder.split("/").length)}shared/` : "";
    const depth = "../".repeat(folder.split("/").length);
    spec[`${folder}/${pick(["AGENTS.md", "CLAUDE.md"])}`] =
      `RULES OF ${folder} @${depth}docs/d${index}-1.md${folderImport}\n`;
    if (next() < 0.4)
      spec[`${folder}/.agents/skills/s${index}/SKILL.md`] =
        `---\nname: s${index}\ndescription: skill ${index}\n---\nbody\n`;
  }
  spec["shared/one.md"] = "SHARED ONE\n";
  spec["shared/two.md"] = "SHARED TWO @../docs/extra.md\n";
  spec["docs/extra.md"] = "EXTRA\n";
  spec[".claude/rules/deep.md"] = `---\npaths: "${pick(folders)}/**"\n---\nCLAUDE RULE @../../docs/rule-import.md\n`;
  spec["docs/rule-import.md"] = "RULE IMPORT @extra.md\n";
  spec[".cursor/rules/ts.mdc"] = `---\nglobs: ${pick(folders)}/*.ts\nalwaysApply: false\n---\nCURSOR RULE\n`;
  return { spec, folders, next };
}

type Step = [string, Record<string, unknown>];

function seededScript(folders: string[], next: () => number): Step[] {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const steps: Step[] = [];
  for (let i = 0; i < 14; i++) {
    const folder = pick(folders);
    const roll = next();
    if (roll < 0.5) steps.push(["read", { path: `${folder}/x.ts` }]);
    else if (roll < 0.65) steps.push(["bash", { command: `cat ${folder}/x.ts ${pick(folders)}/x.ts` }]);
    else if (roll < 0.8) steps.push(["write", { path: `${folder}/new${i}.ts`, content: "n\n" }]);
    else
      steps.push([
        "write",
        {
          path: `${folder}/AGENTS.md`,
          content: `NEW RULES ${i} @${"../".repeat(folder.split("/").length)}docs/extra.md\n`,
        },
      ]);
  }
  return steps;
}

for (const seed of [1, 2, 3]) {
  test(`seeded tree ${seed}: the same script appends the same text in a plain folder and under git init`, async () => {
    const { spec, folders, next } = seededTree(seed);
    const script = seededScript(folders, next);
    const appended: string[][] = [];
    await twoTrees(spec, async (tree) => {
      const h = await loadRunner(tree);
      const texts: string[] = [];
      for (const [tool, input] of script) {
        const result = await h.call(tool, input);
        texts.push(
          `${tool} ${JSON.stringify(input)}\n${result.content
            .slice(result.original.length)
            .map((b) => b.text)
            .join("\n")}`,
        );
      }
      appended.push(texts);
    });
    assert.ok(
      appended[0]!.some((text) => text.includes("HOP")),
      "the script reaches imports",
    );
    assert.deepEqual(appended[1], appended[0]);
  });
}
