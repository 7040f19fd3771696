// bash as a trigger: Pi's real bash tool, through the real runner and in real sessions.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLazyAgents } from "../index.ts";
import { callsOutside, recordingFileSystem } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  textOf,
  toolTurn,
  withTree,
  type Tree,
} from "./harness.ts";

const tree = {
  "AGENTS.md": "ROOT-RULES",
  "packages/AGENTS.md": "PACKAGES-RULES",
  "packages/api/AGENTS.md": "API-RULES",
  "packages/api/src/server.ts": "export const server = 1;\n",
  "packages/web/AGENTS.md": "WEB-RULES",
  "packages/web/page.ts": "export const page = 3;\n",
  "docs/AGENTS.md": "DOCS-RULES",
  "docs/guide.md": "guide\n",
  "lib/AGENTS.md": "LIB-RULES",
  "node_modules/dep/AGENTS.md": "IGNORED-RULES",
  "node_modules/dep/index.js": "module.exports = 1;\n",
};

function outside(t: Tree): void {
  mkdirSync(join(t.root, "outside"), { recursive: true });
  writeFileSync(join(t.root, "outside", "AGENTS.md"), "OUTSIDE-RULES");
  writeFileSync(join(t.root, "outside", "x.txt"), "outside\n");
}

test("a real session delivers each scope a bash command touches once, parent first, whatever the exit status", () =>
  withTree(tree, async (t) => {
    outside(t);
    const h = await startSession(
      t,
      [
        toolTurn(["bash", { command: "cd packages/api && cat src/server.ts" }]),
        toolTurn(["bash", { command: "cat node_modules/dep/index.js ../outside/x.txt; ls ../outside" }]),
        toolTurn(["bash", { command: "cat packages/web/page.ts docs/guide.md; exit 3" }]),
        toolTurn(["bash", { command: "mkdir -p lib/new && echo hi > lib/new/note.txt" }]),
        toolTurn(["read", { path: "packages/api/src/server.ts" }], ["bash", { command: "ls packages/web docs" }]),
        finalTurn(),
      ],
      { tools: ["read", "bash"] },
    );
    try {
      await h.session.prompt("work through the shell");
      const results = persistedToolResults(h.sessionManager);
      assert.equal(results.length, 6);
      const [api, ignored, failing, written, read, again] = results;
      assert.equal(api!.content[0]!.text, "export const server = 1;\n", "bash output intact");
      const apiReminder = reminderOf(api!.content) ?? "";
      assert.ok(apiReminder.indexOf("PACKAGES-RULES") < apiReminder.indexOf("API-RULES"), "parent first");
      assert.ok(apiReminder.includes("PACKAGES-RULES"));
      assert.equal(reminderOf(ignored!.content), undefined, "ignored and outside folders deliver nothing");
      assert.equal(failing!.isError, true);
      assert.match(textOf(failing!.content), /^export const page = 3;\nguide\n[^]*Command exited with code 3/);
      const failingReminder = reminderOf(failing!.content) ?? "";
      assert.ok(
        failingReminder.indexOf("DOCS-RULES") < failingReminder.indexOf("WEB-RULES"),
        "one reminder, parent first",
      );
      assert.equal(countOccurrences(failingReminder, "<nested-instructions"), 1);
      assert.match(
        reminderOf(written!.content) ?? "",
        /LIB-RULES/,
        "a redirect into a new folder uses the nearest one",
      );
      assert.equal(reminderOf(read!.content), undefined, "a later read adds nothing");
      assert.equal(reminderOf(again!.content), undefined);
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      for (const marker of ["PACKAGES-RULES", "API-RULES", "WEB-RULES", "DOCS-RULES", "LIB-RULES"])
        assert.equal(countOccurrences(file, marker), 1, marker);
      for (const marker of ["IGNORED-RULES", "OUTSIDE-RULES"]) assert.equal(countOccurrences(file, marker), 0, marker);
      const toolText = results.map((r) => textOf(r.content)).join("\n");
      assert.equal(countOccurrences(toolText, "ROOT-RULES"), 0, "cwd's own file is Pi's");
    } finally {
      h.dispose();
    }
  }));

test("a codemode script's bash calls activate scopes and the codemode result carries the reminder", () =>
  withTree(tree, async (t) => {
    const h = await startSession(
      t,
      [
        toolTurn([
          "codemode",
          {
            code: "const r = await tools.bash({ command: 'cat packages/api/src/server.ts' });\nreturn JSON.stringify({ exact: r.output === 'export const server = 1;\\n' });",
          },
        ]),
        finalTurn(),
      ],
      { codemode: true, tools: ["read", "bash", "codemode"] },
    );
    try {
      await h.session.prompt("use a script");
      const results = persistedToolResults(h.sessionManager);
      const outer = results.find((r) => r.toolName === "codemode")!;
      assert.match(textOf(outer.content), /"exact":true|\\"exact\\":true/);
      assert.match(reminderOf(outer.content) ?? "", /PACKAGES-RULES[^]*API-RULES/);
    } finally {
      h.dispose();
    }
  }));

test("bash output stays byte for byte and an ignored, outside or /dev/null target activates nothing", () =>
  withTree(tree, async (t) => {
    outside(t);
    const h = await loadRunner(t);
    const quiet = await h.call("bash", {
      command: "echo x > /dev/null; cat node_modules/dep/index.js > ../outside/copy.txt; ls ../outside >/dev/null",
    });
    assert.equal(quiet.details && (quiet.details as { lazyAgents?: unknown }).lazyAgents, undefined);
    assert.deepEqual(quiet.content, quiet.original);
    const result = await h.call("bash", { command: "git -C packages/web status 2>/dev/null; printf 'a\\tb'" });
    assert.deepEqual(result.content.slice(0, -1), result.original);
    assert.match(reminderOf(result.content) ?? "", /PACKAGES-RULES[^]*WEB-RULES/);
  }));

test("a word that names nothing, an option or a path built at run time activates nothing", () =>
  withTree({ ...tree, "list.txt": "packages/api/src/server.ts\n" }, async (t) => {
    const h = await loadRunner(t);
    for (const command of [
      "cat packages/api/missing.ts",
      "grep --include=packages/api -r x . || true",
      'D=packages/api; cat "$D"/src/server.ts',
      "cat $(cat list.txt)",
    ]) {
      const result = await h.call("bash", { command });
      assert.equal(reminderOf(result.content), undefined, command);
    }
  }));

test("bash can be removed from the triggers", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t, { settings: { lazyAgents: { triggers: ["read", "edit", "write"] } } });
    const result = await h.call("bash", { command: "cat packages/api/src/server.ts" });
    assert.equal(reminderOf(result.content), undefined);
    const read = await h.call("read", { path: "packages/api/src/server.ts" });
    assert.match(reminderOf(read.content) ?? "", /API-RULES/);
  }));

test("a bash command that writes or edits an instruction file delivers the new version in its own result", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t);
    await h.call("bash", { command: "cat docs/guide.md" });
    const result = await h.call("bash", { command: "printf 'DOCS-RULES-2' > docs/AGENTS.md" });
    assert.match(reminderOf(result.content) ?? "", /DOCS-RULES-2/);
    const edited = await h.call("bash", { command: "sed -i 's/RULES-2/RULES-3/' docs/AGENTS.md" });
    assert.match(reminderOf(edited.content) ?? "", /supersedes[^]*DOCS-RULES-3/);
  }));

test('/lazy-agents why "<command>" explains which words activated which scopes, and why the others did not', () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t, { hasUI: true });
    await h.command(
      "lazy-agents",
      `why "cd packages/api && cat src/server.ts ../../node_modules/dep/index.js -n missing.ts $HOME/x > /dev/null"`,
    );
    const report = h.notifications.at(-1)!;
    assert.match(report, /why "cd packages\/api && cat/);
    assert.match(
      report,
      /packages\/api: activates packages\/\*\* \(packages\/AGENTS.md, pending\), packages\/api\/\*\* \(packages\/api\/AGENTS.md, pending\)/,
    );
    assert.match(report, /\.\.\/\.\.\/node_modules\/dep\/index.js: inside an ignored directory/);
    assert.match(report, /-n: an option/);
    assert.match(report, /missing.ts: names nothing that exists/);
    assert.match(report, /\$HOME\/x: built when the command runs/);
    assert.match(report, /\/dev\/null: outside the working directory/);
    assert.match(report, /cd: a command name/);
    await h.command("lazy-agents", "why packages/api/src/server.ts");
    assert.match(
      h.notifications.at(-1)!,
      /packages\/api\/  scope packages\/api\/\*\*/,
      "a bare argument is still a path",
    );
  }));

test("known words in unchanged folders cost no more filesystem calls than a warm read there; each new word one lstat", () =>
  withTree(tree, async (t) => {
    const recorder = recordingFileSystem();
    const h = await loadRunner(t, { factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })] });
    const calls = async (tool: string, input: Record<string, unknown>) => {
      recorder.calls.length = 0;
      await h.call(tool, input);
      return recorder.calls.map((call) => `${call.method} ${call.path}`);
    };
    const command = "cat packages/api/src/server.ts packages/api/src/server.ts; cat packages/api/src/server.ts | wc -l";
    const cold = await calls("bash", { command });
    const word = `lstat ${t.abs("packages/api/src/server.ts")}`;
    assert.equal(cold.filter((call) => call === word).length, 1, "one lstat for a word named three times");
    await calls("read", { path: "packages/api/src/server.ts" });
    const warmRead = await calls("read", { path: "packages/api/src/server.ts" });
    const warmBash = await calls("bash", { command });
    assert.ok(warmBash.length <= warmRead.length, `bash ${warmBash.length} calls, read ${warmRead.length}`);
    assert.ok(!warmBash.includes(word), "a known word in an unchanged folder is not looked at again");
    writeFileSync(t.abs("packages/api/src/other.ts"), "x\n");
    assert.ok((await calls("bash", { command })).includes(word), "a folder that changed is looked at again");
  }));

test("bash words never lead the extension outside cwd, through a path or a link", () =>
  withTree(tree, async (t) => {
    outside(t);
    symlinkSync(join(t.root, "outside"), t.abs("packages/out"));
    const recorder = recordingFileSystem();
    const h = await loadRunner(t, { factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })] });
    for (const command of [
      "cat packages/out/x.txt packages/out/AGENTS.md ../outside/x.txt ~/x /etc/hostname",
      "cd packages/out && cat x.txt > ../../outside/y.txt",
      "ls packages/out/ packages/out/* ../outside/*",
      "git -C ../outside status; make -C packages/out",
      "cd . && ls; ls . ./",
    ]) {
      const result = await h.call("bash", { command });
      assert.equal(reminderOf(result.content), undefined, command);
    }
    assert.ok(recorder.calls.length > 0);
    assert.deepEqual(callsOutside(recorder.calls, t.cwd), []);
  }));

test("a nested bash call's scopes reach the outermost result even when the ledger moved in between", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t);
    await h.call("bash", { command: "cat packages/api/src/server.ts" }, { parentToolCallId: "outer-1" });
    await h.call("read", { path: "docs/guide.md" });
    const outer = await h.call("codemode", { code: "…" }, { id: "outer-1" });
    assert.match(reminderOf(outer.content) ?? "", /PACKAGES-RULES[^]*API-RULES/);
  }));

test("path-scoped rules of other agents match the files a bash command names", () =>
  withTree(
    {
      ...tree,
      ".claude/rules/api.md": '---\npaths:\n  - "packages/api/**/*.ts"\n---\nCLAUDE-API-RULE\n',
      ".claude/rules/docs.md": '---\npaths: "docs/**"\n---\nCLAUDE-DOCS-RULE\n',
      "README.md": "readme\n",
    },
    async (t) => {
      const h = await loadRunner(t);
      const none = await h.call("bash", { command: "cat README.md" });
      assert.equal(reminderOf(none.content), undefined);
      const result = await h.call("bash", { command: "cd packages/api && sed -n '1,5p' src/server.ts" });
      const reminder = reminderOf(result.content) ?? "";
      assert.match(reminder, /CLAUDE-API-RULE/);
      assert.doesNotMatch(reminder, /CLAUDE-DOCS-RULE/);
      const again = await h.call("bash", { command: "cat packages/api/src/server.ts" });
      assert.equal(reminderOf(again.content), undefined, "a rule arrives once per version");
    },
  ));
