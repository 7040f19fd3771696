// docs/limits.md: paths resolve as Pi's tools resolve them, case-folding filesystems, caches follow the tree.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, symlinkSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join, relative, sep } from "node:path";
import { createLazyAgents, isPathInside, nodeFileSystem, resolveToolPath, type FileSystem } from "../index.ts";
import { noGit } from "./fuzz-lib.ts";
import { loadRunner, reminderOf, withTree } from "./harness.ts";
import { lazyAgents } from "./fixtures.ts";

const NNBSP = "\u202F";

const CURLY = "\u2019";

const NFD_E = "e\u0301";

/** The on-disk spelling of `path`, matching each name below `root` without regard to case. */
function foldedSpelling(root: string, path: string): string {
  if (!isPathInside(root, path)) return path;
  let current = root;
  for (const name of relative(root, path).split(sep)) {
    let names: string[] = [];
    try {
      names = readdirSync(current);
    } catch {
      // Not a folder: keep the name as typed.
    }
    current = join(current, names.find((n) => n.toLowerCase() === name.toLowerCase()) ?? name);
  }
  return current;
}

/** The real filesystem as a case-insensitive one (macOS, Windows) would answer, below `root`. */
function caseInsensitive(root: string): FileSystem {
  const fold = (path: string) => foldedSpelling(root, path);
  return {
    ...nodeFileSystem,
    stat: (path) => nodeFileSystem.stat(fold(path)),
    lstat: (path) => nodeFileSystem.lstat(fold(path)),
    realpath: (path) => nodeFileSystem.realpath(fold(path)),
    open: (path) => nodeFileSystem.open(fold(path)),
    readdir: (path) => nodeFileSystem.readdir(fold(path)),
  };
}

test("tool paths resolve like Pi's tools: relative, absolute, @, ~, file:// and unicode spaces", () => {
  const cwd = "/work/repo";
  const table: Array<[unknown, string | undefined]> = [
    ["src/a.ts", "/work/repo/src/a.ts"],
    ["./src//a.ts", "/work/repo/src/a.ts"],
    ["/work/repo/src/a.ts", "/work/repo/src/a.ts"],
    ["@src/a.ts", "/work/repo/src/a.ts"],
    ["~", homedir()],
    ["~/x", `${homedir()}/x`],
    ["file:///work/repo/a.ts", "/work/repo/a.ts"],
    ["src/a\u00A0b.ts", "/work/repo/src/a b.ts"],
    ["../elsewhere", "/work/elsewhere"],
    ["", undefined],
    ["   ", undefined],
    ["a\0b", undefined],
    [42, undefined],
    [undefined, undefined],
    ["x".repeat(4097), undefined],
  ];
  for (const [raw, expected] of table) assert.equal(resolveToolPath(raw, cwd), expected, String(raw).slice(0, 30));
});

test("read paths fall back like Pi's read tool: screenshot AM/PM, NFD, curly apostrophes, NFD with curly", () => {
  const cwd = "/work/repo";
  // [typed, on disk (undefined: nothing there), resolved]
  const table: Array<[string, string | undefined, string]> = [
    ["shot 10.00 AM.d/x.ts", `shot 10.00${NNBSP}AM.d/x.ts`, `/work/repo/shot 10.00${NNBSP}AM.d/x.ts`],
    ["shot 9.41 pm.d/x.ts", `shot 9.41${NNBSP}pm.d/x.ts`, `/work/repo/shot 9.41${NNBSP}pm.d/x.ts`],
    ["café/x.ts", `caf${NFD_E}/x.ts`, `/work/repo/caf${NFD_E}/x.ts`],
    ["it's/x.ts", `it${CURLY}s/x.ts`, `/work/repo/it${CURLY}s/x.ts`],
    ["d'écran/x.ts", `d${CURLY}${NFD_E}cran/x.ts`, `/work/repo/d${CURLY}${NFD_E}cran/x.ts`],
    ["café/x.ts", "café/x.ts", "/work/repo/café/x.ts"],
    ["café/x.ts", undefined, "/work/repo/café/x.ts"],
    ["it's/x.ts", undefined, "/work/repo/it's/x.ts"],
    ["plain/x.ts", undefined, "/work/repo/plain/x.ts"],
  ];
  for (const [typed, onDisk, expected] of table) {
    const exists = (path: string) => onDisk !== undefined && path === `${cwd}/${onDisk}`;
    assert.equal(resolveToolPath(typed, cwd, exists), expected, typed);
  }
  const probed: string[] = [];
  resolveToolPath("plain/x.ts", cwd, (path) => (probed.push(path), false));
  assert.deepEqual(probed, [], "a path with no other spelling costs no filesystem call");
});

for (const [name, onDisk, typed] of [
  ["an NFD folder name typed in NFC", `caf${NFD_E}`, "café"],
  ["a curly apostrophe typed straight", `team${CURLY}s`, "team's"],
  ["a screenshot name with a narrow no-break space before PM", `Shot 1.02${NNBSP}PM.d`, "Shot 1.02 PM.d"],
  ["NFD and a curly apostrophe together", `d${CURLY}${NFD_E}cran`, "d'écran"],
]) {
  test(`a read through ${name} finds the folder Pi's read tool opened, and its instructions`, () =>
    withTree({ [`${onDisk}/AGENTS.md`]: "FOLDER-RULES\n", [`${onDisk}/x.ts`]: "x\n" }, async (tree) => {
      const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: noGit })] });
      const result = await h.call("read", { path: `${typed}/x.ts` });
      assert.equal(result.isError, false, "Pi's read tool found the file");
      assert.match(reminderOf(result.content) ?? "", /FOLDER-RULES/);
    }));
}

test("an absolute path through a link to cwd finds the folder Pi's read tool opened, and its instructions", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const alias = join(tree.root, "alias");
    symlinkSync(tree.cwd, alias);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: noGit })] });
    const result = await h.call("read", { path: join(alias, "pkg", "x.ts") });
    assert.equal(result.isError, false);
    assert.match(reminderOf(result.content) ?? "", /path="pkg\/AGENTS.md">[^]*PKG-RULES/);
    const again = await h.call("read", { path: "pkg/x.ts" });
    assert.equal(reminderOf(again.content), undefined, "one folder, one identity");
  }));

test("on a filesystem that folds case, one folder has one identity: the real path's spelling", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const fs = caseInsensitive(tree.cwd);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    // Pi's read tool opens PKG/x.ts on such a filesystem; here it is given the output it would give.
    const typed = await h.callWithOutput("read", { path: "PKG/x.ts" }, [{ type: "text", text: "x\n" }]);
    const reminder = reminderOf(typed.content) ?? "";
    assert.match(reminder, /path="pkg\/AGENTS.md">/, "the folder's own spelling");
    const again = await h.call("read", { path: "pkg/x.ts" });
    assert.equal(reminderOf(again.content), undefined, "the same folder by its own spelling: already delivered");
    const mixed = await h.callWithOutput("read", { path: "Pkg/x.ts" }, [{ type: "text", text: "x\n" }]);
    assert.equal(reminderOf(mixed.content), undefined, "and by a third spelling");
  }));

test("on a filesystem that folds case, a folder below one whose name has no letters has one identity too", () =>
  withTree({ "2024/pkg/AGENTS.md": "PKG-RULES\n", "2024/pkg/x.ts": "x\n" }, async (tree) => {
    const fs = caseInsensitive(tree.cwd);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    const typed = await h.callWithOutput("read", { path: "2024/PKG/x.ts" }, [{ type: "text", text: "x\n" }]);
    assert.match(reminderOf(typed.content) ?? "", /path="2024\/pkg\/AGENTS.md">/, "the folder's own spelling");
    const again = await h.call("read", { path: "2024/pkg/x.ts" });
    assert.equal(reminderOf(again.content), undefined, "the same folder by its own spelling: already delivered");
  }));

test("on a filesystem that folds case, a bash word names the folder by its real path's spelling", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const fs = caseInsensitive(tree.cwd);
    const h = await loadRunner(tree, { factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    // Pi's bash tool would run `cat PKG/x.ts` on such a filesystem; here it is given the output it would give.
    for (const command of ["cat PKG/x.ts", "cat PKG/x.ts"]) {
      const typed = await h.callWithOutput("bash", { command }, [{ type: "text", text: "x\n" }]);
      const reminder = reminderOf(typed.content) ?? "";
      assert.doesNotMatch(reminder, /path="PKG/, `${command}: never the typed spelling`);
    }
    const own = await h.call("read", { path: "pkg/x.ts" });
    assert.equal(reminderOf(own.content), undefined, "the folder by its own spelling: already delivered");
  }));

test("caches drop the entries of deleted folders and files: they grow with the tree, not with churn", () =>
  withTree({ "pkg/AGENTS.md": "PKG\n" }, async (tree) => {
    const { factory, engine } = lazyAgents();
    const h = await loadRunner(tree, { factories: [factory] });
    // 300 short-lived scopes, one at a time: each is created, read and deleted.
    for (let i = 0; i < 300; i++) {
      if (i % 10 === 0) tree.write(`pkg/tmp${i}/.agents/skills/s/SKILL.md`, "---\nname: s\ndescription: brief\n---\n");
      tree.write(`pkg/tmp${i}/AGENTS.md`, `TMP-${i}\n`);
      await h.call("read", { path: `pkg/tmp${i}/AGENTS.md` });
      rmSync(tree.abs(`pkg/tmp${i}`), { recursive: true });
    }
    let folders = 0;
    let files = 0;
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) {
          folders++;
          walk(join(dir, entry.name));
        } else files++;
      }
    };
    walk(tree.cwd);
    const sizes = engine().stateSizes();
    // Between two sweeps a cache may run to twice the tree plus a constant; never to every path seen.
    for (const key of ["directories", "listings", "gitAnswers", "inspectedScopes"]) {
      assert.ok(sizes[key]! <= 2 * folders + 256, `${key} = ${sizes[key]} for ${folders} folders on disk`);
    }
    assert.ok(sizes.files! <= 2 * files + 256, `files = ${sizes.files} for ${files} files on disk`);
  }));

test("on a filesystem that folds case, a skills folder spelled .Agents/skills is found as .agents/skills", () =>
  withTree(
    {
      "pkg/x.ts": "x\n",
      "pkg/.Agents/skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Ship the package\n---\nbody\n",
    },
    async (tree) => {
      const fs = caseInsensitive(tree.cwd);
      const h = await loadRunner(tree, { factories: [createLazyAgents({ fs, spawnGit: noGit })] });
      const result = await h.call("read", { path: "pkg/x.ts" });
      assert.match(reminderOf(result.content) ?? "", /deploy[^\n]*Ship the package/);
    },
  ));

test("on a filesystem that folds case, a file found by two spellings of its name is one file, not one overriding the other", () =>
  withTree({ "pkg/claude.md": "PKG-RULES\n", "pkg/x.ts": "x\n" }, async (tree) => {
    const fs = caseInsensitive(tree.cwd);
    const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    assert.match(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "", /PKG-RULES/);
    h.notifications.length = 0;
    await h.command("lazy-agents", "");
    assert.doesNotMatch(h.notifications.join("\n"), /overridden/, "CLAUDE.md and CLAUDE.MD name the one claude.md");
  }));
