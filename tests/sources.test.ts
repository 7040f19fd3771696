// Issue 4: vendored and git-ignored trees, @imports, the byte budget and skill collisions.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire, syncBuiltinESMExports } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { importTokens } from "../index.ts";
import {
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
} from "./harness.ts";

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;

function gitInit(cwd: string): void {
  execFileSync("git", ["init", "-q"], { cwd });
}

test("regression: a node_modules package's AGENTS.md and skills never reach the model", () =>
  withTree(
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

test("regression: a .gitignored generated/AGENTS.md inside a real git repository is skipped", () =>
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

test("regression: on a warm registry no tool call spawns a child process", () =>
  withTree(
    { ".gitignore": "generated/\n", "src/deep/AGENTS.md": "DEEP", "src/deep/a.ts": "a", "src/deep/b.ts": "b" },
    async (tree) => {
      gitInit(tree.cwd);
      const childProcess = createRequire(import.meta.url)("node:child_process") as Record<string, unknown>;
      const names = ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"];
      const originals = Object.fromEntries(names.map((name) => [name, childProcess[name]]));
      let spawns = 0;
      for (const name of names) {
        childProcess[name] = (...args: unknown[]) => {
          spawns++;
          return (originals[name] as (...a: unknown[]) => unknown)(...args);
        };
      }
      syncBuiltinESMExports();
      try {
        const h = await loadRunner(tree);
        await h.call("read", { path: "src/deep/a.ts" });
        const afterCold = spawns;
        assert.equal(afterCold, 1, "exactly one git helper per session, started with the session");
        for (let i = 0; i < 20; i++) await h.call("read", { path: i % 2 ? "src/deep/a.ts" : "src/deep/b.ts" });
        assert.equal(spawns, afterCold, "warm calls spawn nothing");
      } finally {
        for (const name of names) childProcess[name] = originals[name];
        syncBuiltinESMExports();
      }
    },
  ));

test("import tokens: paths outside code, not emails, not inside fences or code spans", () => {
  const text = [
    "See @docs/api.md and @./rules.md, also (@../shared/style.md).",
    "Mail me at someone@example.com or ping @scope/pkg.",
    "Inline `@not/this.md` is code.",
    "```",
    "@not/fenced.md",
    "```",
    "~~~md",
    "@also/not.md",
    "~~~",
    "Last: @docs/api.md again.",
  ].join("\n");
  assert.deepEqual(importTokens(text), ["docs/api.md", "./rules.md", "../shared/style.md", "scope/pkg"]);
});

test("regression: an import chain with a cycle delivers each file once, each under its own path", () =>
  withTree(
    {
      "pkg/AGENTS.md": "PKG imports @docs/a.md",
      "pkg/docs/a.md": "A-TEXT imports @b.md",
      "pkg/docs/b.md": "B-TEXT imports @a.md and @../AGENTS.md",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /path="pkg\/docs\/a.md" scope="pkg\/\*\*" imported-by="pkg\/AGENTS.md"/);
      assert.match(reminder, /path="pkg\/docs\/b.md" scope="pkg\/\*\*" imported-by="pkg\/docs\/a.md"/);
      assert.equal(reminder.split("A-TEXT").length - 1, 1);
      assert.equal(reminder.split("B-TEXT").length - 1, 1);
      assert.ok(reminder.indexOf("PKG imports") < reminder.indexOf("A-TEXT"));
      const again = await h.call("read", { path: "pkg/x.ts" });
      assert.deepEqual(again.content, again.original);
    },
  ));

test("imports nest at most five hops", () =>
  withTree(
    {
      "pkg/AGENTS.md": "@h1.md",
      "pkg/h1.md": "H1 @h2.md",
      "pkg/h2.md": "H2 @h3.md",
      "pkg/h3.md": "H3 @h4.md",
      "pkg/h4.md": "H4 @h5.md",
      "pkg/h5.md": "H5 @h6.md",
      "pkg/h6.md": "H6-TOO-DEEP",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /H5 @h6.md/);
      assert.doesNotMatch(reminder, /H6-TOO-DEEP/);
    },
  ));

test("an imported directory brings its regular files in sorted order", () =>
  withTree(
    {
      "pkg/AGENTS.md": "Rules: @rules",
      "pkg/rules/b.md": "RULE-B",
      "pkg/rules/a.md": "RULE-A",
      "pkg/rules/.hidden": "HIDDEN",
      "pkg/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.ok(reminder.indexOf("RULE-A") < reminder.indexOf("RULE-B"));
      assert.doesNotMatch(reminder, /HIDDEN/);
    },
  ));

test("regression: an import that escapes through .. is refused without reading it", () =>
  withTree({ "pkg/AGENTS.md": "PKG @../../secret.md", "pkg/x.ts": "x" }, async (tree) => {
    writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
    assert.match(reminder, /an import in pkg\/AGENTS.md was not loaded: outside the working directory/);
    const notices = reminder.split("\n").filter((line) => line.startsWith("- "));
    assert.equal(notices.length, 1);
    assert.doesNotMatch(notices[0]!, /secret/, "the notice never repeats the token");
  }));

test("regression: an import that escapes through a symlink is refused", () =>
  withTree({ "pkg/AGENTS.md": "PKG @link.md", "pkg/x.ts": "x" }, async (tree) => {
    writeFileSync(join(tree.root, "secret.md"), "OUTSIDE-SECRET");
    tree.link("pkg/link.md", join(tree.root, "secret.md"));
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.doesNotMatch(reminder, /OUTSIDE-SECRET/);
    assert.match(
      reminder,
      /an import in pkg\/AGENTS.md was not loaded: a link that leads outside the working directory/,
    );
  }));

test("regression: an @scope/pkg token that names nothing is ignored silently", () =>
  withTree({ "pkg/AGENTS.md": "Use @acme/logger for logs; mail ops@acme.dev.", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /Use @acme\/logger/);
    assert.doesNotMatch(reminder, /not loaded/);
  }));

test("a changed import is re-sent alone, marked as replacing the earlier version", () =>
  withTree({ "pkg/AGENTS.md": "PKG @style.md", "pkg/style.md": "STYLE-V1", "pkg/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "pkg/x.ts" });
    writeFileSync(tree.abs("pkg/style.md"), "STYLE-V2");
    const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
    assert.match(reminder, /STYLE-V2/);
    assert.match(reminder, /supersedes/);
    assert.doesNotMatch(reminder, /PKG @style/);
  }));

test("regression: a three-file chain of about 30 KiB each keeps the deepest file whole", () =>
  withTree(
    {
      "a/AGENTS.md": `A-START${"a".repeat(30 * 1024)}A-END`,
      "a/b/AGENTS.md": `B-START${"b".repeat(30 * 1024)}B-END`,
      "a/b/c/AGENTS.md": `C-START${"é".repeat(15 * 1024)}C-END`,
      "a/b/c/x.ts": "x",
    },
    async (tree) => {
      const h = await loadRunner(tree);
      const result = await h.call("read", { path: "a/b/c/x.ts" });
      const reminder = reminderOf(result.content) ?? "";
      assert.ok(/C-START(é)+C-END/.test(reminder), "the deepest file arrives whole");
      assert.ok(reminder.includes("B-START"), "the middle file keeps what fits");
      assert.ok(reminder.includes("[a/b/AGENTS.md was cut here to fit the size budget; read the file for the rest.]"));
      assert.match(reminder, /this reminder left out 1 instruction file; .* \/lazy-agents lists them as pending\./);
      assert.ok(!reminder.includes("A-START"), "nothing of the broadest file is left");
      assert.ok(!reminder.includes("\uFFFD"), "never cut inside a character");
      assert.ok(Buffer.byteLength(reminder) <= 48 * 1024, "the whole reminder fits the budget");
      const record = (result.details as { lazyAgents: { files: Array<{ path: string; truncated?: boolean }> } })
        .lazyAgents;
      assert.deepEqual(
        record.files.map((f) => [f.path, f.truncated ?? false]),
        [
          ["a/b/AGENTS.md", true],
          ["a/b/c/AGENTS.md", false],
        ],
        "the file left out stays pending",
      );
      const next = await h.call("read", { path: "a/b/c/x.ts" });
      assert.match(reminderOf(next.content) ?? "", /A-START/, "and comes with the next access");
    },
  ));

test("regression: a nested skill whose name Pi lists at start-up is listed once, with its precedence", () =>
  withTree(
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
          /- deploy \(scope pkg\/\*\*\): Package deploy \[pkg\/.agents\/skills\/deploy\/SKILL.md\] Inside this scope it takes precedence/,
        );
        assert.match(reminder, /- lint \(scope pkg\/\*\*\): Package lint/);
        assert.equal(reminder.split("- deploy").length - 1, 1);
      } finally {
        h.dispose();
      }
    },
  ));
