// Inspect and steer: what `/lazy-agents` and `/lazy-agents why <path>` show, budget cuts included.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLazyAgents } from "../index.ts";
import { callsOutside, recordingFileSystem } from "./fs-seam.ts";
import { loadRunner, reminderOf, withTree, type RunnerOptions, type Tree } from "./harness.ts";

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;

/** The text of one `/lazy-agents` command, as a UI shows it. */
async function report(tree: Tree, args: string, options: RunnerOptions = {}, reads: string[] = []): Promise<string> {
  const h = await loadRunner(tree, { hasUI: true, ...options });
  for (const path of reads) await h.call("read", { path });
  h.notifications.length = 0;
  await h.command("lazy-agents", args);
  return h.notifications.join("\n");
}

test("a skill file that links outside cwd, or is not a regular file, is listed as not used with its reason", () =>
  withTree({ "pkg/x.ts": "x", "pkg/.agents/skills/fine/SKILL.md": skill("fine", "A fine skill") }, async (tree) => {
    writeFileSync(join(tree.root, "outside.md"), skill("outside", "OUTSIDE-DESCRIPTION"));
    tree.link("pkg/.agents/skills/out/SKILL.md", join(tree.root, "outside.md"));
    tree.write("pkg/.agents/skills/fifo/keep", "");
    execFileSync("mkfifo", [tree.abs("pkg/.agents/skills/fifo/SKILL.md")]);
    const text = await report(tree, "", {}, ["pkg/x.ts"]);
    assert.match(text, /pkg\/.agents\/skills\/out\/SKILL.md {2}a link that leads outside the working directory/);
    assert.match(text, /pkg\/.agents\/skills\/fifo\/SKILL.md {2}not a regular file/);
    assert.match(text, /fine {2}scope pkg\/\*\* {2}pkg\/.agents\/skills\/fine\/SKILL.md {2}listed/);
    assert.doesNotMatch(text, /OUTSIDE-DESCRIPTION/);
  }));

test("/lazy-agents says the extension is off only when it is", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    assert.doesNotMatch(await report(tree, ""), /off for this run/);
    assert.match(await report(tree, "", { flags: { "no-lazy-agents": true } }), /off for this run/);
    assert.match(await report(tree, "", { settings: { lazyAgents: { enabled: false } } }), /off for this run/);
  }));

test("why <folder> walks down to the folder itself and shows its own scope", () =>
  withTree({ "src/AGENTS.md": "S", "src/deep/AGENTS.md": "D", "src/deep/x.ts": "x" }, async (tree) => {
    const text = await report(tree, "why src/deep");
    assert.match(text, /src\/ {2}scope src\/\*\*: src\/AGENTS.md \(pending\)/);
    assert.match(text, /src\/deep\/ {2}scope src\/deep\/\*\*: src\/deep\/AGENTS.md \(pending\)/);
  }));

test("why lists a folder's skills only in a trusted project with skills on", () =>
  withTree({ "pkg/x.ts": "x", "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Deploy it") }, async (tree) => {
    const listed = /skill deploy at pkg\/.agents\/skills\/deploy\/SKILL.md/;
    assert.match(await report(tree, "why pkg/x.ts"), listed);
    assert.doesNotMatch(await report(tree, "why pkg/x.ts", { trusted: false }), listed);
    assert.doesNotMatch(await report(tree, "why pkg/x.ts", { settings: { lazyAgents: { skills: false } } }), listed);
  }));

test("when the budget cuts one file of a chain, /lazy-agents marks that file alone as truncated", () =>
  withTree(
    {
      "a/AGENTS.md": `OUTER ${"o".repeat(5000)}`,
      "a/b/AGENTS.md": `MIDDLE ${"m".repeat(200)}`,
      "a/b/c/AGENTS.md": "INNER",
      "a/b/c/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true, settings: { lazyAgents: { reminderBudgetBytes: 4096 } } });
      const reminder = reminderOf((await h.call("read", { path: "a/b/c/x.ts" })).content) ?? "";
      assert.match(reminder, /\[a\/AGENTS.md was cut here to fit the size budget/);
      assert.doesNotMatch(reminder, /\[a\/b\/(c\/)?AGENTS.md was (cut|left out)/);
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      const report = h.notifications.join("\n");
      assert.match(report, /a\/AGENTS.md {2}scope a\/\*\* .* {2}delivered, truncated by the budget( {2}|$)/m);
      assert.match(report, /a\/b\/AGENTS.md {2}scope a\/b\/\*\* .* {2}delivered( {2}|$)/m);
      assert.match(report, /a\/b\/c\/AGENTS.md {2}scope a\/b\/c\/\*\* .* {2}delivered( {2}|$)/m);
    },
  ));

test("why <path outside cwd> answers without looking at that path", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    writeFileSync(join(tree.root, "elsewhere.txt"), "E");
    const recorder = recordingFileSystem();
    const text = await report(tree, "why ../elsewhere.txt", { factories: [createLazyAgents({ fs: recorder.fs })] });
    assert.match(text, /outside the working directory/);
    const outside = join(tree.root, "elsewhere.txt");
    assert.deepEqual(
      callsOutside(recorder.calls, tree.cwd).filter((call) => call.path === outside),
      [],
    );
  }));

test("the status line is empty until something is delivered, then counts even a single file", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true });
    assert.equal(h.statuses.get("lazy-agents"), undefined);
    await h.call("read", { path: "src/x.ts" });
    assert.equal(h.statuses.get("lazy-agents"), "nested: 1 file, 0 skills");
  }));
