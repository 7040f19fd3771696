// Skills in `.agents/skills` of directories below cwd.
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadRunner, reminderOf, withTree } from "./harness.ts";

const skill = (name: string, description: string, extra = "") =>
  `---\nname: ${name}\ndescription: ${description}\n${extra}---\nSKILL-BODY-${name}\n`;

const skillTree = {
  "pkg/AGENTS.md": "PKG",
  "pkg/a.ts": "a",
  "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Ship the package"),
  "pkg/.agents/skills/hidden/SKILL.md": skill("hidden", "Only by command", "disable-model-invocation: true\n"),
  "pkg/.agents/skills/nodesc/SKILL.md": "---\nname: nodesc\n---\nbody\n",
  "pkg/.agents/skills/empty/SKILL.md": '---\nname: empty\ndescription: "  "\n---\nbody\n',
  "pkg/.agents/skills/root-level.md": skill("rootlevel", "Ignored like Pi"),
  "pkg/.agents/skills/group/inner/SKILL.md": skill("inner", "Nested skill root"),
  "pkg/.agents/skills/group/loose.md": skill("loose", "Loose md below the root"),
};

test("trusted project: nested skills are listed by name, description and location, never body", () =>
  withTree(skillTree, async (tree) => {
    const h = await loadRunner(tree, { trusted: true });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(
      reminder,
      /- deploy \(scope pkg\/\*\*\): Ship the package \[pkg\/\.agents\/skills\/deploy\/SKILL\.md\]/,
    );
    assert.match(reminder, /- inner \(scope pkg\/\*\*\): Nested skill root/);
    assert.match(reminder, /- loose \(scope pkg\/\*\*\): Loose md below the root/);
    assert.doesNotMatch(reminder, /SKILL-BODY/);
    assert.doesNotMatch(reminder, /hidden|nodesc|empty|rootlevel/);
  }));

test("regression: an untrusted project lists no skills", () =>
  withTree(skillTree, async (tree) => {
    const h = await loadRunner(tree, { trusted: false });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /PKG/);
    assert.doesNotMatch(reminder, /deploy/);
  }));

test("skills are listed once, and a removed skill is withdrawn once", () =>
  withTree(skillTree, async (tree) => {
    const { rmSync } = await import("node:fs");
    const h = await loadRunner(tree);
    await h.call("read", { path: "pkg/a.ts" });
    const again = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(again.content, again.original);
    rmSync(tree.abs("pkg/.agents/skills/deploy"), { recursive: true });
    const withdrawn = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(withdrawn, /The skill at pkg\/\.agents\/skills\/deploy\/SKILL\.md is gone/);
    const after = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(after.content, after.original);
  }));

test("regression: a skills directory that links outside cwd is not scanned", () =>
  withTree({ "pkg/a.ts": "a" }, async (tree) => {
    const { mkdirSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    mkdirSync(join(tree.root, "ext", "s"), { recursive: true });
    writeFileSync(join(tree.root, "ext", "s", "SKILL.md"), skill("outside", "Must not appear"));
    tree.link("pkg/.agents/skills", join(tree.root, "ext"));
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(result.content, result.original);
  }));

test("a skills folder with more entries than the scan limit is scanned up to the limit and reported", () =>
  withTree({ "pkg/a.ts": "a" }, async (tree) => {
    for (let i = 0; i < 300; i++) {
      const name = `s${String(i).padStart(3, "0")}`;
      tree.write(`pkg/.agents/skills/${name}/SKILL.md`, skill(name, `Skill ${name}`));
    }
    const h = await loadRunner(tree, { hasUI: true });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /- s000 /);
    assert.match(reminder, /- s255 /);
    assert.doesNotMatch(reminder, /- s256 /);
    h.notifications.length = 0;
    await h.command("lazy-agents", "");
    assert.match(h.notifications.join("\n"), /pkg\/\.agents\/skills {2}directory has more entries than the scan limit/);
  }));
