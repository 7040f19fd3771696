// Skills: how deep the scan goes, a reminder that has none, and which folders a warm call lists again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { utimesSync } from "node:fs";
import { MAX_SKILL_DEPTH } from "../config.ts";
import { createLazyAgents } from "../index.ts";
import { recordingFileSystem } from "./fs-seam.ts";
import { loadRunner, reminderOf, withTree } from "./harness.ts";

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;
const nested = (depth: number) => Array.from({ length: depth }, (_, i) => `d${i + 1}`).join("/");

test("the skill scan lists a skill at its depth limit and none below it", () =>
  withTree(
    {
      [`pkg/.agents/skills/${nested(MAX_SKILL_DEPTH)}/SKILL.md`]: skill("at-limit", "At the limit"),
      [`pkg/.agents/skills/${nested(MAX_SKILL_DEPTH)}/e/SKILL.md`]: skill("too-deep", "Below the limit"),
      [`pkg/.agents/skills/x/${nested(MAX_SKILL_DEPTH)}/SKILL.md`]: skill("also-too-deep", "Below the limit"),
      "pkg/a.ts": "a",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- at-limit \(scope pkg\/\*\*\): At the limit/);
      assert.doesNotMatch(reminder, /too-deep/);
    },
  ));

test("a reminder without skills has no skills header", () =>
  withTree(
    {
      "pkg/AGENTS.md": "PKG-RULES",
      "pkg/a.ts": "a",
      "tools/.agents/skills/s/SKILL.md": skill("s", "S"),
      "tools/a.ts": "a",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const plain = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(plain, /PKG-RULES/);
      assert.doesNotMatch(plain, /Skills found/);
      assert.match(reminderOf((await h.call("read", { path: "tools/a.ts" })).content) ?? "", /Skills found/);
    },
  ));

test("a warm call lists no unchanged folder again; only a changed one and its new folder are listed", () =>
  withTree(
    {
      "pkg/AGENTS.md": "Rules: @rules",
      "pkg/rules/a.md": "RULE-A",
      "pkg/.agents/skills/group/deploy/SKILL.md": skill("deploy", "Deploy it"),
      "pkg/.agents/skills/lint/SKILL.md": skill("lint", "Lint it"),
      "pkg/a.ts": "a",
      "pkg/b.ts": "b",
    },
    async (tree) => {
      const recorder = recordingFileSystem();
      const h = await loadRunner(tree, { factories: [createLazyAgents({ fs: recorder.fs })] });
      const cold = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(cold, /RULE-A[^]*- deploy [^]*- lint /);
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
      const changed = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(changed, /- review /);
      assert.deepEqual(
        recorder.calls.filter((call) => call.method === "readdir").map((call) => call.path),
        [tree.abs("pkg/.agents/skills/group"), tree.abs("pkg/.agents/skills/group/review")],
      );
    },
  ));

test("the skill scan skips node_modules and dot folders inside a skills folder", () =>
  withTree(
    {
      "pkg/.agents/skills/node_modules/vendored/SKILL.md": skill("vendored", "From a package"),
      "pkg/.agents/skills/.cache/hidden/SKILL.md": skill("hidden", "From a dot folder"),
      "pkg/.agents/skills/own/SKILL.md": skill("own", "The project's own"),
      "pkg/a.ts": "a",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- own \(scope pkg\/\*\*\)/);
      assert.doesNotMatch(reminder, /vendored|hidden/);
    },
  ));

test("a skill folder linked from inside cwd is scanned; one linked from outside is not", () =>
  withTree(
    {
      "shared/deploy/SKILL.md": skill("deploy", "Shared deploy"),
      "pkg/a.ts": "a",
    },
    async (tree) => {
      tree.link("pkg/.agents/skills/deploy", tree.abs("shared/deploy"));
      tree.write("../outside/evil/SKILL.md", skill("evil", "From outside"));
      tree.link("pkg/.agents/skills/evil", tree.abs("../outside/evil"));
      const h = await loadRunner(tree, { hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- deploy \(scope pkg\/\*\*\): Shared deploy \[shared\/deploy\/SKILL.md\]/);
      assert.doesNotMatch(reminder, /evil|From outside/);
      assert.equal(h.statuses.get("lazy-agents"), "nested: 0 files, 1 skill", "a skill alone shows in the status");
    },
  ));
