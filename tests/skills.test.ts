// docs/behaviour.md, Skills and Skills that collide: nested skills listed by Pi's own rules.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { utimesSync } from "node:fs";
import { relative } from "node:path";
import { DefaultResourceLoader, SettingsManager } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, globWork } from "../index.ts";
import { MAX_SKILL_DEPTH, SKILLS_HEADER, SKILLS_INTRO } from "../config.ts";
import {
  firstReads,
  costRatio,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  type TreeSpec,
  twoTrees,
  withTree,
} from "./harness.ts";
import { noGit } from "./fuzz-lib.ts";
import { rng } from "./rng.ts";
import { skillFolders, tree } from "./fixtures.ts";

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

const ours = createLazyAgents({ spawnGit: noGit });

// Skills by Pi's rules: Pi's own discovery of `.agents/skills` at cwd and ours, on the same trees.

const DIR_NAMES = ["a", "b", "tools", "lint-fix", "x"];

const SKILL_NAMES = ["review", "deploy", "lint-fix"];

const PATTERNS = [
  "a",
  "b/",
  "tools",
  "*.md",
  "SKILL.md",
  "!SKILL.md",
  "/x",
  "x/",
  "**/b",
  "a/*",
  "t*s",
  "?",
  "!a",
  "l[i]nt-fix",
  "!b/",
  "**/tools/",
  "*-fix",
  "x/**",
  "[!a]",
  "notes-*",
];

/** A seeded skills tree under pkg/.agents/skills: skills, plain .md files, ignore files, dot and node_modules folders. */
function skillsTree(seed: number): TreeSpec {
  const random = rng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const chance = (p: number) => random() < p;
  const root = "pkg/.agents/skills";
  const spec: TreeSpec = { "pkg/a.ts": "a\n" };
  let count = 0;
  const frontmatter = (name: string | undefined) => {
    const lines = ["---"];
    if (name !== undefined) lines.push(`name: ${name}`);
    if (chance(0.9)) lines.push(`description: Does thing ${++count} of seed ${seed}`);
    if (chance(0.1)) lines.push("disable-model-invocation: true");
    return `${lines.join("\n")}\n---\nbody\n`;
  };
  const fill = (dir: string, depth: number): void => {
    if (depth > 0 && chance(0.45)) spec[`${dir}/SKILL.md`] = frontmatter(chance(0.5) ? pick(SKILL_NAMES) : undefined);
    if (chance(0.3)) spec[`${dir}/notes-${depth}.md`] = frontmatter(chance(0.5) ? pick(SKILL_NAMES) : undefined);
    if (chance(0.25)) {
      const lines = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(PATTERNS));
      spec[`${dir}/${pick([".gitignore", ".ignore", ".fdignore"])}`] = `# rules\n${lines.join("\n")}\n`;
    }
    if (chance(0.1)) spec[`${dir}/${pick([".hidden", "node_modules"])}/s/SKILL.md`] = frontmatter("hidden-away");
    if (depth >= 6) return;
    const children = Math.floor(random() * (depth === 0 ? 4 : 3));
    for (let i = 0; i < children; i++) fill(`${dir}/${pick(DIR_NAMES)}`, depth + 1);
  };
  fill(root, 0);
  spec[`${root}/1/2/3/4/5/deep/SKILL.md`] = frontmatter("five-deep");
  return spec;
}

interface Listed {
  name: string;
  description: string;
  path: string;
}

const byPath = (a: Listed, b: Listed) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/** What Pi itself lists for a session started in `pkg`, and the collisions it reports. */
async function piSkills(tree: { cwd: string; agentDir: string; abs(path: string): string }) {
  const loader = new DefaultResourceLoader({
    cwd: tree.abs("pkg"),
    agentDir: tree.agentDir,
    settingsManager: SettingsManager.inMemory({}, { projectTrusted: true }),
    noExtensions: true,
    noPromptTemplates: true,
    noThemes: true,
    noContextFiles: true,
  });
  await loader.reload();
  const { skills, diagnostics } = loader.getSkills();
  const listed = skills
    .filter((skill) => !skill.disableModelInvocation)
    .map((skill) => ({
      name: skill.name,
      description: skill.description.trim(),
      path: relative(tree.cwd, skill.filePath),
    }));
  const collisions = diagnostics
    .filter((d) => d.type === "collision" && d.collision?.loserPath !== undefined)
    .map((d) => relative(tree.cwd, d.collision!.loserPath));
  return { listed: listed.sort(byPath), collisions };
}

const SKILL_LINE = /^- (\S+): (.*) \[(.*)\]$/;

const nested = (depth: number) => Array.from({ length: depth }, (_, i) => `d${i + 1}`).join("/");

test("trusted project: nested skills are listed by name, description and location, never body", () =>
  twoTrees(skillTree, async (tree) => {
    const h = await loadRunner(tree, { trusted: true });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /- deploy: Ship the package \[pkg\/\.agents\/skills\/deploy\/SKILL\.md\]/);
    assert.match(reminder, /- inner: Nested skill root/);
    assert.match(reminder, /- loose: Loose md below the root/);
    assert.doesNotMatch(reminder, /SKILL-BODY/);
    assert.doesNotMatch(reminder, /hidden|nodesc|empty|rootlevel/);
  }));

test("an untrusted project lists no skills", () =>
  twoTrees(skillTree, async (tree) => {
    const h = await loadRunner(tree, { trusted: false });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /PKG/);
    assert.doesNotMatch(reminder, /deploy/);
  }));

test("skills are listed once, and a removed skill is withdrawn once", () =>
  twoTrees(skillTree, async (tree) => {
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

test("a skills directory that links outside cwd is not scanned", () =>
  twoTrees({ "pkg/a.ts": "a" }, async (tree) => {
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
  twoTrees({ "pkg/a.ts": "a" }, async (tree) => {
    for (let i = 0; i < 300; i++) {
      const name = `s${String(i).padStart(3, "0")}`;
      tree.write(`pkg/.agents/skills/${name}/SKILL.md`, skill(name, `Skill ${name}`));
    }
    const h = await loadRunner(tree, { hasUI: true });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /- s000: /);
    assert.match(reminder, /- s255: /);
    assert.doesNotMatch(reminder, /- s256: /);
    h.notifications.length = 0;
    await h.command("lazy-agents", "");
    assert.match(
      h.notifications.join("\n"),
      /pkg\/\.agents\/skills {2,}directory has more entries than the scan limit/,
    );
  }));

test("an untrusted session lists no skills but still delivers instructions", () =>
  twoTrees(tree, async (t) => {
    const h = await startSession(t, [toolTurn(["read", { path: "packages/web/page.ts" }]), finalTurn()], {
      trusted: false,
    });
    try {
      await h.session.prompt("look");
      const [result] = persistedToolResults(h.sessionManager);
      const reminder = reminderOf(result!.content) ?? "";
      assert.match(reminder, /WEB-RULES/);
      assert.doesNotMatch(reminder, /ui-review/);
    } finally {
      h.dispose();
    }
  }));

test("nested skills follow Pi's own discovery: ignore files, one skill per name, any depth (differential)", async () => {
  for (let seed = 1; seed <= 40; seed++) {
    await withTree(skillsTree(seed), async (tree) => {
      const pi = await piSkills(tree);
      const h = await loadRunner(tree, { factories: [ours], hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      const listed = reminder
        .split("\n")
        .map((line) => SKILL_LINE.exec(line))
        .filter((match) => match !== null)
        .map(([, name, description, path]) => ({ name: name!, description: description!, path: path! }));
      assert.deepEqual(listed.sort(byPath), pi.listed, `seed ${seed}: the same skills as Pi`);
      await h.command("lazy-agents", "");
      const report = h.notifications.at(-1) ?? "";
      for (const loser of pi.collisions)
        assert.ok(
          report
            .split("\n")
            .some(
              (line) =>
                line.startsWith(`  ${loser}  `) &&
                line.endsWith("skill name collision: an earlier skill of the same name in this skills folder is kept"),
            ),
          `seed ${seed}: ${loser}`,
        );
    });
  }
});

test("a nested skill whose name Pi lists at start-up is listed once, with its precedence", () =>
  twoTrees(
    {
      ".agents/skills/deploy/SKILL.md": skill("deploy", "Root deploy"),
      "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Package deploy"),
      "pkg/.agents/skills/lint/SKILL.md": skill("lint", "Package lint"),
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await startSession(tree, [toolTurn(["read", { path: "pkg/x.ts" }]), finalTurn()]);
      try {
        assert.match(h.session.systemPrompt, /<name>deploy<\/name>/, "Pi lists the root skill");
        await h.session.prompt("go");
        const reminder = reminderOf(persistedToolResults(h.sessionManager)[0]!.content) ?? "";
        assert.match(
          reminder,
          /- deploy: Package deploy \[pkg\/.agents\/skills\/deploy\/SKILL.md\] Inside this scope it takes precedence/,
        );
        assert.match(reminder, /- lint: Package lint/);
        assert.equal(reminder.split("- deploy").length - 1, 1);
      } finally {
        h.dispose();
      }
    },
  ));

test("the skill scan lists a skill at its depth limit and none below it", () =>
  twoTrees(
    {
      [`pkg/.agents/skills/${nested(MAX_SKILL_DEPTH)}/SKILL.md`]: skill("at-limit", "At the limit"),
      [`pkg/.agents/skills/${nested(MAX_SKILL_DEPTH)}/e/SKILL.md`]: skill("too-deep", "Below the limit"),
      [`pkg/.agents/skills/x/${nested(MAX_SKILL_DEPTH)}/SKILL.md`]: skill("also-too-deep", "Below the limit"),
      "pkg/a.ts": "a",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- at-limit: At the limit/);
      assert.doesNotMatch(reminder, /too-deep/);
    },
  ));

test("a reminder without skills has no skills header", () =>
  twoTrees(
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
      assert.ok(!plain.includes(SKILLS_INTRO) && !plain.includes(SKILLS_HEADER), plain);
      assert.ok((reminderOf((await h.call("read", { path: "tools/a.ts" })).content) ?? "").includes(SKILLS_INTRO));
    },
  ));

test("a skill added to a folder the model holds is listed by the next call there", () =>
  withTree(skillFolders, async (tree) => {
    const h = await loadRunner(tree);
    const cold = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(cold, /RULE-A[^]*- deploy: [^]*- lint: /);
    await h.call("read", { path: "pkg/b.ts" });
    tree.write("pkg/.agents/skills/group/review/SKILL.md", skill("review", "Review it"));
    const later = new Date(Date.now() + 5000);
    utimesSync(tree.abs("pkg/.agents/skills/group"), later, later);
    const changed = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(changed, /- review: /);
  }));

test("the skill scan skips node_modules and dot folders inside a skills folder", () =>
  twoTrees(
    {
      "pkg/.agents/skills/node_modules/vendored/SKILL.md": skill("vendored", "From a package"),
      "pkg/.agents/skills/.cache/hidden/SKILL.md": skill("hidden", "From a dot folder"),
      "pkg/.agents/skills/own/SKILL.md": skill("own", "The project's own"),
      "pkg/a.ts": "a",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- own: /);
      assert.doesNotMatch(reminder, /vendored|hidden/);
    },
  ));

test("a skill folder linked from inside cwd is scanned; one linked from outside is not", () =>
  twoTrees(
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
      assert.equal(h.statuses.get("lazy-agents"), "lazy-agents: 1 skill", "a skill alone shows in the status");
    },
  ));

test("a skills folder's ignore file hides a skill named by a one-character class", () =>
  twoTrees(
    {
      "pkg/a.ts": "a",
      "pkg/.agents/skills/.ignore": "[x]\n",
      "pkg/.agents/skills/x/SKILL.md": skill("x", "Hidden by the class"),
      "pkg/.agents/skills/y/SKILL.md": skill("y", "Listed"),
    },
    async (tree) => {
      const h = await loadRunner(tree, { factories: [ours] });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /Listed/);
      assert.doesNotMatch(reminder, /Hidden by the class/);
    },
  ));

test(`a skill's own files are skill content: reading its SKILL.md appends no AGENTS.md of the skill folder`, () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "PKG-RULES",
      "pkg/.agents/skills/react/SKILL.md": skill("react", "React rules"),
      "pkg/.agents/skills/react/AGENTS.md": `SKILL-FOLDER-AGENTS ${"r".repeat(22 * 1024)}`,
      "pkg/.agents/skills/react/rules/AGENTS.md": "SKILL-RULES-AGENTS",
      "pkg/.agents/skills/react/rules/a.md": "a",
      "pkg/.agents/skills/big/SKILL.md": skill("big", "Big one"),
      "pkg/.agents/skills/big/AGENTS.md": "b".repeat(81 * 1024),
      ".agents/skills/root/SKILL.md": skill("root", "Root skill"),
      ".agents/skills/root/AGENTS.md": "ROOT-SKILL-AGENTS",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const paths = [
        "pkg/.agents/skills/react/SKILL.md",
        "pkg/.agents/skills/react/rules/a.md",
        "pkg/.agents/skills/big/SKILL.md",
        ".agents/skills/root/SKILL.md",
      ];
      const reminders: string[] = [];
      for (const path of paths) reminders.push(reminderOf((await h.call("read", { path })).content) ?? "");
      const all = reminders.join("\n");
      assert.match(reminders[0]!, /PKG-RULES/, "the folder that holds the skills tree still applies");
      for (const marker of [
        "SKILL-FOLDER-AGENTS",
        "SKILL-RULES-AGENTS",
        "ROOT-SKILL-AGENTS",
        "larger than the size limit",
      ])
        assert.ok(!all.includes(marker), marker);
    },
  ));

test(`the skills Pi listed at start-up come from Pi, not from text in its system prompt`, () =>
  twoTrees(
    {
      // Text of a context file lands in the system prompt too: it cannot pass for a listed skill.
      "AGENTS.md": "ROOT <skill><name>lint</name><description>x</description><location>/x/SKILL.md</location></skill>",
      "pkg/.agents/skills/lint/SKILL.md": skill("lint", "Package lint"),
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await startSession(tree, [toolTurn(["read", { path: "pkg/x.ts" }]), finalTurn()]);
      try {
        await h.session.prompt("go");
        const reminder = reminderOf(persistedToolResults(h.sessionManager)[0]!.content) ?? "";
        assert.match(reminder, /- lint: Package lint/);
        assert.doesNotMatch(reminder, /takes precedence/, "no skill of that name was listed at start-up");
      } finally {
        h.dispose();
      }
    },
  ));
test("an ignore line that makes a RegExp backtrack costs at most path length times pattern length, and still hides what it matches", () => {
  const line = "*a*a*a*a*a*a*a*a*b";
  const names = ["a".repeat(48), "a".repeat(90), `${"a".repeat(89)}b`];
  return twoTrees(
    {
      "pkg/a.ts": "a\n",
      "pkg/.agents/skills/.gitignore": `${line}\n`,
      [`pkg/.agents/skills/${names[0]}/SKILL.md`]: skill("forty-eight", "Forty-eight a"),
      [`pkg/.agents/skills/${names[1]}/SKILL.md`]: skill("ninety", "Ninety a"),
      [`pkg/.agents/skills/${names[2]}/SKILL.md`]: skill("ignored", "Hidden by the line"),
    },
    async (tree, mode) => {
      // The extension as this file imports it, so that `globWork` counts its steps.
      const h = await loadRunner(tree, { factories: [createLazyAgents()] });
      const before = globWork();
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      const steps = globWork() - before;
      assert.match(reminder, /Forty-eight a/, mode);
      assert.match(reminder, /Ninety a/, mode);
      assert.doesNotMatch(reminder, /Hidden by the line/, mode);
      // Each folder and its SKILL.md are tested against the line: at most (path + 1) × (line + 1) steps each.
      const bound = names.reduce((sum, name) => sum + 2 * (name.length + 10) * (line.length + 4), 0);
      assert.ok(steps > 0 && steps <= bound, `${mode}: ${steps} steps, bound ${bound}`);
    },
  );
});

test("an ignore file's lines decide each entry of a skills tree once: a warm call matches no glob again", () => {
  const lines = Array.from({ length: 200 }, (_, i) => `*a*a*c*${i}b`).join("\n");
  const notes = Object.fromEntries(
    Array.from({ length: 50 }, (_, i) => [`pkg/.agents/skills/notes/${"a".repeat(30)}${i}b.md`, "n\n"]),
  );
  return twoTrees(
    {
      "pkg/a.ts": "a\n",
      "pkg/.agents/skills/.gitignore": `${lines}\nhidden/\n`,
      "pkg/.agents/skills/kept/SKILL.md": skill("kept", "Kept"),
      "pkg/.agents/skills/hidden/SKILL.md": skill("hidden", "Hidden by the last line"),
      ...notes,
    },
    async (tree, mode) => {
      // The extension as this file imports it, so that `globWork` counts its steps.
      const h = await loadRunner(tree, { factories: [createLazyAgents()] });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /- kept: Kept/, mode);
      assert.doesNotMatch(reminder, /Hidden by the last line/, mode);
      const before = globWork();
      await h.call("read", { path: "pkg/a.ts" });
      assert.equal(globWork() - before, 0, `${mode}: a warm call matched the ignore lines again`);
    },
  );
});

test("an ignore line of 60,000 spaces before one character is read in linear time, not the quadratic of a trailing-space RegExp", () =>
  twoTrees(
    {
      "pkg/a.ts": "a\n",
      "pkg/.agents/skills/.ignore": `${" ".repeat(60_000)}x\nhidden\n`,
      "pkg/.agents/skills/hidden/SKILL.md": skill("hidden", "Hidden by the second line"),
      "pkg/.agents/skills/kept/SKILL.md": skill("kept", "Kept"),
      "other/a.ts": "a\n",
      "other/.agents/skills/.ignore": `${"y".repeat(60_000)}x\nhidden\n`,
      "other/.agents/skills/hidden/SKILL.md": skill("hidden", "Hidden by the second line"),
      "other/.agents/skills/kept/SKILL.md": skill("kept", "Kept"),
    },
    async (tree, mode) => {
      const { reminders, read } = firstReads(tree, { factories: [createLazyAgents()] });
      // A guard against a quadratic scan: `\s+$` takes 5.5 s on this line (Node 24, this VM), against about 140 ms
      // for a line of as many letters.
      const ratio = await costRatio(read("pkg/a.ts"), read("other/a.ts"));
      assert.ok(ratio < 4, `${mode}: ${ratio.toFixed(1)} times the same read with a line of letters`);
      assert.match(reminders["pkg/a.ts"]!, /- kept: Kept/, mode);
      assert.doesNotMatch(reminders["pkg/a.ts"]!, /Hidden by the second line/, mode);
    },
  ));

test("a skill folder with more entries than the scan limit is one skill, and no cap is announced for it", () => {
  const spec: TreeSpec = { "pkg/a.ts": "a\n", "pkg/.agents/skills/big/SKILL.md": skill("big", "Big one") };
  for (let i = 0; i < 300; i++) spec[`pkg/.agents/skills/big/f${String(i).padStart(3, "0")}.txt`] = "x\n";
  return twoTrees(spec, async (tree, mode) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents()] });
    const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
    assert.match(reminder, /- big: Big one/, mode);
    assert.doesNotMatch(reminder, /scan limit/, `${mode}: Pi reads nothing else in a skill's folder`);
  });
});

test("a skill reached through a link is named by the folder it is listed in, as Pi names it", () =>
  twoTrees(
    {
      "pkg/a.ts": "a\n",
      "shared/real-name/SKILL.md": "---\ndescription: Through a linked folder\n---\nbody\n",
      "pkg/.agents/skills/linked": { link: "../../../shared/real-name" },
      "pkg/.agents/skills/again": { link: "../../../shared/real-name" },
      "docs/notes.md": "---\ndescription: Through a linked file\n---\nbody\n",
      "pkg/.agents/skills/file-link/SKILL.md": { link: "../../../../docs/notes.md" },
    },
    async (tree, mode) => {
      const pi = (await piSkills(tree)).listed.map((listed) => listed.name).sort();
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      const names = [...reminder.matchAll(/^- (\S+)/gm)].map(([, name]) => name).sort();
      assert.equal(pi.length, 2, `${mode}: Pi lists the linked folder once`);
      assert.deepEqual(names, pi, `${mode}: the names Pi gives`);
    },
  ));

test("a SKILL.md that is not a regular file makes no skill of its folder: its subfolders are searched, as Pi does", () =>
  twoTrees(
    { "pkg/a.ts": "a\n", "pkg/.agents/skills/group/sub/SKILL.md": skill("sub", "Below a FIFO") },
    async (tree, mode) => {
      execFileSync("mkfifo", [tree.abs("pkg/.agents/skills/group/SKILL.md")]);
      const pi = (await piSkills(tree)).listed.map((listed) => listed.name);
      assert.deepEqual(pi, ["sub"], `${mode}: Pi goes on below the FIFO`);
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      assert.match(reminder, /^- sub: Below a FIFO/m, mode);
    },
  ));
