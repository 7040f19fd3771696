// Reminders that really arrived, stay within their budget, announce every cap, and list skills by
// Pi's own rules.
import { test } from "node:test";
import assert from "node:assert/strict";
import { relative } from "node:path";
import {
  DefaultResourceLoader,
  SettingsManager,
  type ExtensionFactory,
  type ToolResultEvent,
} from "@earendil-works/pi-coding-agent";
import { createLazyAgents, REMINDER_OPEN } from "../index.ts";
import { noGit } from "./fuzz-lib.ts";
import { rng } from "./rng.ts";
import { MAX_REMINDER_FILES, REMINDER_BUDGET_BYTES } from "../config.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
  type TreeSpec,
} from "./harness.ts";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

const ours = createLazyAgents({ spawnGit: noGit });

/** A later extension that rewrites the result of reads of `first.png` only. */
function laterRewriter(rewrite: (content: ToolResultEvent["content"]) => ToolResultEvent["content"]): ExtensionFactory {
  return (pi) => {
    pi.on("tool_result", (event) =>
      (event.input as { path?: string }).path?.endsWith("first.png") ? { content: rewrite(event.content) } : undefined,
    );
  };
}

const rewrites = [
  {
    what: "replaces the result with the image alone",
    rewrite: (content: ToolResultEvent["content"]) => content.filter((block) => block.type === "image"),
  },
  {
    what: "drops the reminder block",
    rewrite: (content: ToolResultEvent["content"]) =>
      content.filter((block) => block.type !== "text" || !block.text.startsWith(REMINDER_OPEN)),
  },
];

for (const { what, rewrite } of rewrites) {
  test(`a reminder that a later extension ${what} is sent again with the next access`, () =>
    withTree({ "img/AGENTS.md": "IMG-RULES\n", "img/first.png": PNG, "img/second.png": PNG }, async (tree) => {
      const h = await startSession(
        tree,
        [toolTurn(["read", { path: "img/first.png" }]), toolTurn(["read", { path: "img/second.png" }]), finalTurn()],
        { factories: [ours, laterRewriter(rewrite)] },
      );
      try {
        await h.session.prompt("look at the pictures");
        const [first, second] = persistedToolResults(h.sessionManager);
        assert.equal(reminderOf(first!.content), undefined, "the later extension removed it");
        assert.match(reminderOf(second!.content) ?? "", /IMG-RULES/, "the next access carries the rules");
        assert.match(h.requests.at(-1) ?? "", /IMG-RULES/, "the model received them");
      } finally {
        h.dispose();
      }
    }));
}

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

test("the whole reminder stays within the budget and the file cap; what is left out is announced once and stays pending", () =>
  withTree(manyImports(400), async (tree) => {
    const h = await loadRunner(tree, { factories: [ours], hasUI: true });
    const first = await h.call("read", { path: "pkg/deep/x.ts" });
    const reminder = reminderOf(first.content) ?? "";
    assert.ok(Buffer.byteLength(reminder) <= REMINDER_BUDGET_BYTES, `${Buffer.byteLength(reminder)} bytes`);
    const blocks = countOccurrences(reminder, "<instructions ");
    assert.ok(blocks <= MAX_REMINDER_FILES && blocks > 2, `${blocks} instruction blocks`);
    assert.match(reminder, /DEEP-RULES/, "the deepest file keeps its priority");
    const delivered = (first.details as Recorded).lazyAgents.files.map((file) => file.path);
    assert.equal(delivered.length, blocks, "only what the reminder carries is recorded");
    const leftOut = 402 - blocks;
    const notices = reminder.split("\n").filter((line) => line.includes("this reminder left out"));
    assert.equal(notices.length, 1, "one line for everything left out");
    assert.match(notices[0]!, new RegExp(`\\b${leftOut} instruction files\\b`));
    assert.match(notices[0]!, /\/lazy-agents/);
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1) ?? "";
    assert.equal(countOccurrences(report, "  pending"), leftOut, "/lazy-agents lists them as pending");
    const next = await h.call("read", { path: "pkg/y.ts" });
    const more = (next.details as Recorded).lazyAgents.files.map((file) => file.path);
    assert.ok(more.length > 0 && more.every((path) => !delivered.includes(path)), "a later access sends more of them");
    assert.ok(Buffer.byteLength(reminderOf(next.content) ?? "") <= REMINDER_BUDGET_BYTES);
  }));

const skillText = (name: string) => `---\nname: ${name}\ndescription: Skill ${name}\n---\nbody\n`;

/** Trees that reach one cap each, and the line that must announce it. */
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
];

for (const { cap, spec, line } of caps) {
  test(`a cap on ${cap} is announced to the model in one line and shown by /lazy-agents`, () =>
    withTree(spec(), async (tree) => {
      const h = await loadRunner(tree, { factories: [ours], hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/a.ts" })).content) ?? "";
      const lines = reminder.split("\n").filter((text) => line.test(text));
      assert.equal(lines.length, 1, reminder.split("\n").slice(-6).join("\n"));
      await h.command("lazy-agents", "");
      const cut = lines[0]!.slice(2).split(" was not loaded whole: ");
      assert.ok(h.notifications.at(-1)?.includes(`${cut[0]}  ${cut[1]!.replace(/\.$/, "")}`), h.notifications.at(-1));
      const again = await h.call("read", { path: "pkg/a.ts" });
      assert.doesNotMatch(reminderOf(again.content) ?? "", line, "announced once");
    }));
}

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

const SKILL_LINE = /^- (\S+) \(scope pkg\/\*\*\): (.*) \[(.*)\]$/;

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
        assert.ok(report.includes(`${loser}  skill name collision`), `seed ${seed}: ${loser}`);
    });
  }
});
