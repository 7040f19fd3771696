// Issue 7, part 3: never outside cwd. Every path the extension stats, opens, reads or lists is
// recorded through the FileSystem seam; none may lie outside the real path of cwd, whatever the
// tool's path argument. (The fuzz suite checks the same across its whole corpus.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLazyAgents, resolveToolPath } from "../index.ts";
import { callsOutside, insideOrSame, recordingFileSystem, type Recorder } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import { loadRunner, reminderOf, textOf, withTree, type RunnerHarness, type Tree } from "./harness.ts";

const files = {
  "a/AGENTS.md": "A-RULES\n",
  "a/x.ts": "export const x = 1;\n",
  "a/.agents/skills/sk/SKILL.md": "---\nname: sk\ndescription: inside skill\n---\n",
};

/** Outside cwd: a sibling folder full of instruction files, and links into it from inside. */
function outside(tree: Tree): void {
  const out = join(tree.root, "outside");
  mkdirSync(join(out, "sub", ".agents", "skills", "o"), { recursive: true });
  writeFileSync(join(out, "AGENTS.md"), "OUTSIDE-SECRET\n");
  writeFileSync(join(out, "x.ts"), "outside\n");
  writeFileSync(join(out, "sub", "CLAUDE.md"), "OUTSIDE-SECRET-SUB\n");
  writeFileSync(
    join(out, "sub", ".agents", "skills", "o", "SKILL.md"),
    "---\nname: o\ndescription: OUTSIDE-SECRET\n---\n",
  );
  mkdirSync(`${tree.cwd}-evil/a`, { recursive: true });
  writeFileSync(`${tree.cwd}-evil/a/AGENTS.md`, "OUTSIDE-SECRET-EVIL\n");
  writeFileSync(`${tree.cwd}-evil/a/x.ts`, "evil\n");
  tree.link("a/out", out);
  tree.link("a/sub-out", join(out, "sub"));
  tree.link("b/AGENTS.md", join(out, "AGENTS.md"));
  tree.link("b/CLAUDE.md", "/dev/zero");
  writeFileSync(tree.abs("b/x.ts"), "b\n");
  tree.link("c/.agents", join(out, "sub", ".agents"));
  writeFileSync(tree.abs("c/x.ts"), "c\n");
  tree.link("a/loop", "loop");
}

async function recordingRunner(tree: Tree, cwd = tree.cwd): Promise<{ h: RunnerHarness; recorder: Recorder }> {
  const recorder = recordingFileSystem();
  const h = await loadRunner(
    { ...tree, cwd },
    { hasUI: true, factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })] },
  );
  return { h, recorder };
}

function assertStayedInside(
  recorder: Recorder,
  cwdReal: string,
  alsoAllowed: string[] = [],
  targets: string[] = [],
): void {
  assert.ok(recorder.calls.length > 0, "the recorder saw the extension's calls");
  const outsideCalls = callsOutside(recorder.calls, cwdReal, alsoAllowed, targets);
  assert.deepEqual(outsideCalls, [], "no stat, open, read or listing outside cwd");
}

/** Path arguments that leave cwd, come back, or are not paths at all. `{cwd}`/`{root}` are filled in. */
const ADVERSARIAL: Array<{ name: string; path: unknown; inside?: boolean }> = [
  { name: "a relative path that leaves cwd", path: "../outside/x.ts" },
  { name: "a path that leaves cwd and re-enters it", path: "../repo/a/x.ts", inside: true },
  { name: "a path that climbs twice and re-enters", path: "a/../../repo/a/x.ts", inside: true },
  { name: "an absolute path elsewhere", path: "{root}/outside/x.ts" },
  { name: "an absolute system path", path: "/etc/hostname" },
  { name: "a sibling whose name extends cwd's", path: "{cwd}-evil/a/x.ts" },
  { name: "cwd, out, and back in by text", path: "{cwd}/../outside/x.ts" },
  { name: "a link to a folder outside cwd", path: "a/out/x.ts" },
  { name: "a link out, then .. by text", path: "a/out/../x.ts", inside: true },
  { name: "a link to a folder outside with its own instruction file", path: "a/sub-out/CLAUDE.md" },
  { name: "a symlink loop", path: "a/loop/x.ts", inside: true },
  { name: "~", path: "~" },
  { name: "~/ and a file", path: "~/x.ts" },
  { name: "~ and climbing", path: "~/../../etc/hostname" },
  { name: "a file URL outside", path: "file:///etc/hostname" },
  { name: "a file URL into the outside folder", path: "file://{root}/outside/x.ts" },
  { name: "an @-prefixed path that leaves", path: "@../outside/x.ts" },
  { name: "a NUL byte at the end", path: "a/x.ts\0" },
  { name: "a NUL byte alone", path: "\0" },
  { name: "a NUL byte inside", path: "a/\0/../../outside/x.ts" },
  { name: "an empty path", path: "" },
  { name: "a blank path", path: "   " },
  { name: "a number", path: 42 },
  { name: "null", path: null },
  { name: "no path at all", path: undefined },
  { name: "an object", path: { path: "a/x.ts" } },
  { name: "an array", path: ["a/x.ts"] },
  { name: "a boolean", path: true },
  { name: "a path over 4096 bytes", path: `a/${"x".repeat(5000)}` },
  { name: "a path of many segments over 4096 bytes", path: `${"a/".repeat(2100)}x.ts` },
  {
    name: "a component over 255 bytes (regression: its ENAMETOOLONG cost an edit its delivery)",
    path: `a/${"n".repeat(300)}/x.ts`,
    inside: true,
  },
  { name: "unicode spaces", path: "a/x\u00A0.ts", inside: true },
  { name: "doubled and dotted separators", path: "./a//./x.ts", inside: true },
];

for (const { name, path, inside } of ADVERSARIAL) {
  test(`never outside cwd: ${name}`, () =>
    withTree(files, async (tree) => {
      outside(tree);
      const { h, recorder } = await recordingRunner(tree);
      const fill = (p: unknown) =>
        typeof p === "string" ? p.replaceAll("{cwd}", tree.cwd).replaceAll("{root}", tree.root) : p;
      const input = path === undefined ? {} : { path: fill(path) };
      const read = await h.call("read", input);
      const edit = await h.call("edit", { ...input, edits: [{ oldText: "NOT-IN-ANY-FILE", newText: "x" }] });
      for (const result of [read, edit]) {
        const reminder = reminderOf(result.content);
        const own = reminder === undefined ? result.content : result.content.slice(0, -1);
        assert.deepEqual(own, result.original, "the tool's own content is intact");
        assert.doesNotMatch(reminder ?? "", /OUTSIDE-SECRET/);
        if (!inside) assert.equal(reminder, undefined, "nothing is appended for a path outside cwd");
      }
      if (inside) assert.match(textOf(edit.content) + textOf(read.content), /A-RULES/, "inside cwd it works");
      for (const warning of h.notifications) assert.ok(!warning.includes(tree.root), "no absolute path in a warning");
      const target = resolveToolPath(input.path, tree.cwd);
      assertStayedInside(recorder, tree.cwd, [], target === undefined ? [] : [target]);
    }));
}

test("never outside cwd: instruction files and skills that link out are refused without being opened", () =>
  withTree(files, async (tree) => {
    outside(tree);
    const { h, recorder } = await recordingRunner(tree);
    const b = reminderOf((await h.call("read", { path: "b/x.ts" })).content) ?? "";
    assert.match(b, /b\/AGENTS.md was not loaded: a link that leads outside the working directory/);
    assert.match(b, /b\/CLAUDE.md was not loaded: a link that leads outside the working directory/);
    const c = await h.call("read", { path: "c/x.ts" });
    assert.equal(reminderOf(c.content), undefined, "a skills folder that links out is not listed");
    assert.doesNotMatch(b, /OUTSIDE-SECRET/);
    assertStayedInside(recorder, tree.cwd);
    assert.equal(recorder.calls.filter((call) => call.method === "open" && call.path.includes("outside")).length, 0);
  }));

test("never outside cwd: a cwd reached through a symlink bounds by its real path", () =>
  withTree(files, async (tree) => {
    outside(tree);
    const logical = join(tree.root, "cwd-link");
    symlinkSync(tree.cwd, logical);
    const { h, recorder } = await recordingRunner(tree, logical);
    const inside = await h.call("read", { path: "a/x.ts" });
    assert.match(reminderOf(inside.content) ?? "", /A-RULES/);
    const viaLink = await h.call("read", { path: join(logical, "a", "x.ts") });
    assert.equal(reminderOf(viaLink.content), undefined, "the same file by its logical path: already delivered");
    const out = await h.call("read", { path: "../outside/x.ts" });
    assert.equal(reminderOf(out.content), undefined);
    // realpath may be asked about the logical spelling of a path inside cwd, and about where the
    // tool's own path leads; nothing else leaves.
    assertStayedInside(recorder, tree.cwd, [logical], [join(logical, "..", "outside", "x.ts")]);
  }));

test("never outside cwd: a path through a link to cwd only asks where its own folder leads", () =>
  withTree(files, async (tree) => {
    const alias = join(tree.root, "alias");
    symlinkSync(tree.cwd, alias);
    const { h, recorder } = await recordingRunner(tree);
    const target = join(alias, "a", "x.ts");
    const result = await h.call("read", { path: target });
    assert.match(reminderOf(result.content) ?? "", /A-RULES/);
    const outside = recorder.calls.filter((call) => !insideOrSame(tree.cwd, call.path));
    assert.deepEqual(
      outside.map((call) => call.method),
      ["realpath"],
      "one name lookup of the target's folder, nothing else",
    );
    assertStayedInside(recorder, tree.cwd, [], [target]);
  }));
