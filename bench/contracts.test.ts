// Performance contracts: how many filesystem calls, listings, child processes and questions to git a call
// costs. The bench measures time; these pin the counts that time comes from, and `./dev test` runs them with the
// suite (they need no peer). What a call delivers is pinned by the behaviour tests in tests/.

import { test } from "node:test";
import assert from "node:assert/strict";
import { utimesSync, writeFileSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { createLazyAgents, type FileSystem } from "../index.ts";
import { fsError, interceptFileSystem, recordingFileSystem, type FsCall } from "../tests/fs-seam.ts";
import { noGit } from "../tests/fuzz-lib.ts";
import { probedFolders, skillFolders } from "../tests/fixtures.ts";
import { git, loadRunner, withTree, type Tree } from "../tests/harness.ts";

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;

// ---------------------------------------------------------------------------------------------
// Which files: a folder is listed once or probed name by name; a file is read in one read.

const NAMES = ["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD", ".agents", ".cursor"];

async function readThrough(tree: Tree, fs: FileSystem, path: string): Promise<void> {
  const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs, spawnGit: noGit })] });
  await h.call("read", { path });
}

/** Names looked up one by one in `dir` that it does not hold (the file it holds is checked anyway). */
const probesOf = (calls: FsCall[], dir: string, holds: string[] = []) =>
  NAMES.filter(
    (name) => !holds.includes(name) && calls.some((call) => call.method === "lstat" && call.path === `${dir}/${name}`),
  );
const listingsOf = (calls: FsCall[], dir: string) =>
  calls.filter((call) => call.method === "readdir" && call.path === dir).length;

/** Folder contents that decide between one listing and the name probes. */
const FOLDERS: Array<{ name: string; spec: Record<string, string>; listed: boolean }> = [
  {
    name: "a small folder is listed once instead of probed name by name",
    spec: probedFolders.small,
    listed: true,
  },
  {
    name: "a folder too large to list cheaply keeps the name probes",
    spec: probedFolders.large,
    listed: false,
  },
  {
    name: "a name that matches an instruction file only in case leaves the folder to the name probes",
    spec: probedFolders.caseOnly,
    listed: true,
  },
];

for (const folder of FOLDERS) {
  test(folder.name, () =>
    withTree(folder.spec, async (tree) => {
      const recorder = recordingFileSystem();
      await readThrough(tree, recorder.fs, "a/x.ts");
      const dir = tree.abs("a");
      const caseOnly = folder.spec === probedFolders.caseOnly;
      assert.equal(listingsOf(recorder.calls, dir), folder.listed ? 1 : 0, "listings of the folder");
      const holds = NAMES.filter((name) => `a/${name}` in folder.spec);
      const probes = folder.listed && !caseOnly ? [] : NAMES.filter((name) => !holds.includes(name));
      assert.deepEqual(probesOf(recorder.calls, dir, holds), probes, "name probes");
    }),
  );
}

test("a folder that cannot be listed is probed by name", () =>
  withTree({ "a/AGENTS.md": "A-RULES\n", "a/x.ts": "x\n" }, async (tree) => {
    const dir = tree.abs("a");
    const calls: FsCall[] = [];
    const fs = interceptFileSystem((call, proceed) => {
      calls.push(call);
      if (call.method === "readdir" && call.path === dir) throw fsError("EACCES", "scandir", call.path);
      return proceed();
    });
    await readThrough(tree, fs, "a/x.ts");
    assert.deepEqual(
      probesOf(calls, dir, ["AGENTS.md"]),
      NAMES.filter((name) => name !== "AGENTS.md"),
    );
  }));

test("an instruction file that does not grow is read in one read", () =>
  withTree({ "a/AGENTS.md": `A-RULES\n${"- keep it short\n".repeat(500)}`, "a/x.ts": "x\n" }, async (tree) => {
    const recorder = recordingFileSystem();
    await readThrough(tree, recorder.fs, "a/x.ts");
    const reads = recorder.calls.filter((call) => call.method === "read" && call.path === tree.abs("a/AGENTS.md"));
    assert.equal(reads.length, 1);
  }));

// ---------------------------------------------------------------------------------------------
// Warm calls: what the model touched before costs no listing, no word lookup and no question to git.

test("a warm call lists no unchanged folder again; only a changed one and its new folder are listed", () =>
  withTree(skillFolders, async (tree) => {
    const recorder = recordingFileSystem();
    const h = await loadRunner(tree, { factories: [createLazyAgents({ fs: recorder.fs })] });
    await h.call("read", { path: "pkg/a.ts" });
    assert.ok(
      recorder.calls.some((call) => call.method === "readdir"),
      "the cold call lists the folders",
    );
    recorder.calls.length = 0;
    await h.call("read", { path: "pkg/b.ts" });
    assert.deepEqual(
      recorder.calls.filter((call) => call.method === "readdir"),
      [],
      "a warm call lists nothing",
    );
    tree.write("pkg/.agents/skills/group/review/SKILL.md", skill("review", "Review it"));
    const later = new Date(Date.now() + 5000);
    utimesSync(tree.abs("pkg/.agents/skills/group"), later, later);
    recorder.calls.length = 0;
    await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(
      recorder.calls.filter((call) => call.method === "readdir").map((call) => call.path),
      [tree.abs("pkg/.agents/skills/group"), tree.abs("pkg/.agents/skills/group/review")],
    );
  }));

test("known words in unchanged folders cost no more filesystem calls than a warm read there; each new word one lstat", () =>
  withTree(
    {
      "AGENTS.md": "ROOT-RULES",
      "packages/AGENTS.md": "PACKAGES-RULES",
      "packages/api/AGENTS.md": "API-RULES",
      "packages/api/src/server.ts": "export const server = 1;\n",
    },
    async (t) => {
      const recorder = recordingFileSystem();
      // Checks off: their one lstat of cwd's .claude per bash call is theirs, not the word reader's.
      const h = await loadRunner(t, {
        factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })],
        settings: { lazyAgents: { checks: false } },
      });
      const calls = async (tool: string, input: Record<string, unknown>) => {
        recorder.calls.length = 0;
        await h.call(tool, input);
        return recorder.calls.map((call) => `${call.method} ${call.path}`);
      };
      const command =
        "cat packages/api/src/server.ts packages/api/src/server.ts; cat packages/api/src/server.ts | wc -l";
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
    },
  ));

test("a warm edit or write with checks on stats only cwd's .claude and its rule file beyond the same call with checks off", () =>
  withTree(
    {
      ".claude/hookify.a.local.md": "---\nname: a\nevent: file\npattern: NEVER-WRITTEN\naction: block\n---\nA\n",
      "src/pkg/AGENTS.md": "PKG-RULES\n",
      "src/pkg/deep/x.ts": "v0\n",
    },
    async (t) => {
      const warmCalls = async (checks: boolean) => {
        const recorder = recordingFileSystem();
        const h = await loadRunner(t, {
          factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })],
          settings: { lazyAgents: { checks } },
        });
        const path = "src/pkg/deep/x.ts";
        const calls: string[][] = [];
        for (let i = 1; i <= 4; i++) {
          recorder.calls.length = 0;
          if (i % 2 === 0) await h.call("edit", { path, edits: [{ oldText: `v${i - 1}`, newText: `v${i}` }] });
          else await h.call("write", { path, content: `v${i}\n` });
          calls.push(recorder.calls.map((call) => `${call.method} ${call.path}`).sort());
        }
        writeFileSync(t.abs(path), "v0\n");
        return calls.slice(2);
      };
      const off = await warmCalls(false);
      const on = await warmCalls(true);
      const extra = [`lstat ${t.abs(".claude")}`, `lstat ${t.abs(".claude/hookify.a.local.md")}`];
      for (const [index, tool] of ["write", "edit"].entries()) {
        assert.deepEqual(on[index], [...off[index]!, ...extra].sort(), `a warm ${tool}`);
      }
    },
  ));

test("a warm read of a file no rule file or rule import is named like costs no call on its path, where rules are links", () =>
  withTree(
    {
      "shared/rules/csharp.md": '---\npaths: "**/*.cs"\n---\nCSHARP-RULE @../../docs/style.md\n',
      ".claude/rules/csharp.md": { link: "../../shared/rules/csharp.md" },
      "docs/style.md": "STYLE\n",
      "src/a.cs": "a\n",
      "src/b.cs": "b\n",
    },
    async (tree) => {
      const recorder = recordingFileSystem();
      const h = await loadRunner(tree, { factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })] });
      // A file tool's own target is Pi's to read: the extension looks at it only when it may be a rule or an import.
      const onTarget = async (path: string) => {
        recorder.calls.length = 0;
        await h.call("read", { path });
        return recorder.calls.filter((call) => call.path === tree.abs(path)).map((call) => call.method);
      };
      await onTarget("src/a.cs");
      assert.deepEqual(await onTarget("src/b.cs"), []);
      assert.deepEqual(await onTarget("docs/style.md"), ["lstat"], "a name a rule imports is looked at");
    },
  ));

test("one git helper starts with the session, and warm calls spawn no child process and ask git nothing", () =>
  withTree(
    { ".gitignore": "generated/\n", "src/deep/AGENTS.md": "DEEP", "src/deep/a.ts": "a", "src/deep/b.ts": "b" },
    async (tree) => {
      git(tree.cwd, "init", "-q");
      const childProcess = createRequire(import.meta.url)("node:child_process") as Record<string, unknown>;
      const names = ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"];
      const originals = Object.fromEntries(names.map((name) => [name, childProcess[name]]));
      let spawns = 0;
      let questions = 0;
      for (const name of names) {
        childProcess[name] = (...args: unknown[]) => {
          spawns++;
          const child = (originals[name] as (...a: unknown[]) => { stdin?: { write: (...a: unknown[]) => boolean } })(
            ...args,
          );
          const write = child.stdin?.write.bind(child.stdin);
          if (child.stdin && write) child.stdin.write = (...a: unknown[]) => (questions++, write(...a));
          return child;
        };
      }
      syncBuiltinESMExports();
      try {
        const h = await loadRunner(tree);
        await h.call("read", { path: "src/deep/a.ts" });
        const afterCold = spawns;
        const askedCold = questions;
        assert.equal(afterCold, 1, "exactly one git helper per session, started with the session");
        assert.ok(askedCold > 0, "the cold call asked git");
        for (let i = 0; i < 20; i++) await h.call("read", { path: i % 2 ? "src/deep/a.ts" : "src/deep/b.ts" });
        assert.equal(spawns, afterCold, "warm calls spawn nothing");
        assert.equal(questions, askedCold, "warm calls in known folders ask git nothing, so they wait for nothing");
      } finally {
        for (const name of names) childProcess[name] = originals[name];
        syncBuiltinESMExports();
      }
    },
  ));
