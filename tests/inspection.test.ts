// README "What you see" and docs/behaviour.md "Commands": the /lazy-agents report, why <path>, completions, the status line, notifications and the flag.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, REMINDER_OPEN } from "../index.ts";
import { COMMAND_DESCRIPTION, REPORT_USAGE } from "../config.ts";
import {
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
  type RunnerOptions,
  type Tree,
  twoTrees,
} from "./harness.ts";
import { callsOutside, fsError, interceptFileSystem, recordingFileSystem } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";

const skill = (name: string, description: string, extra = "") =>
  `---\nname: ${name}\n${description ? `description: ${description}\n` : ""}${extra}---\nBODY\n`;

/** The text of one `/lazy-agents` command, as a UI shows it. */
async function report(tree: Tree, args: string, options: RunnerOptions = {}, reads: string[] = []): Promise<string> {
  const h = await loadRunner(tree, { hasUI: true, ...options });
  for (const path of reads) await h.call("read", { path });
  h.notifications.length = 0;
  await h.command("lazy-agents", args);
  return h.notifications.join("\n");
}

test("the command reports every file, skill and refused candidate with its reason, never contents", () =>
  withTree(
    {
      ".gitignore": "generated/\n",
      "generated/AGENTS.md": "GEN",
      "generated/x.ts": "x",
      "node_modules/dep/AGENTS.md": "VENDOR",
      "node_modules/dep/x.js": "x",
      "src/AGENTS.override.md": "OVERRIDE-CONTENT",
      "src/AGENTS.md": "PLAIN-CONTENT",
      "src/x.ts": "x",
      "big/AGENTS.md": "b".repeat(70 * 1024),
      "big/x.ts": "x",
      "bad/AGENTS.md": new Uint8Array([0xc3, 0x28]),
      "bad/x.ts": "x",
      "pkg/AGENTS.md": "PKG-CONTENT",
      "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Outer deploy"),
      "pkg/.agents/skills/nodesc/SKILL.md": skill("nodesc", ""),
      "pkg/.agents/skills/hidden/SKILL.md": skill("hidden", "Hidden one", "disable-model-invocation: true\n"),
      "pkg/inner/.agents/skills/deploy/SKILL.md": skill("deploy", "Inner deploy"),
      "pkg/inner/x.ts": "x",
    },
    async (tree) => {
      execFileSync("git", ["init", "-q"], { cwd: tree.cwd });
      writeFileSync(join(tree.root, "outside.md"), "OUTSIDE");
      tree.link("esc/AGENTS.md", join(tree.root, "outside.md"));
      tree.write("esc/x.ts", "x");
      const h = await loadRunner(tree, { hasUI: true });
      for (const path of [
        "generated/x.ts",
        "node_modules/dep/x.js",
        "src/x.ts",
        "big/x.ts",
        "bad/x.ts",
        "pkg/inner/x.ts",
        "esc/x.ts",
      ]) {
        await h.call("read", { path });
      }
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      const report = h.notifications.join("\n");
      assert.match(report, /src\/AGENTS.override.md {2,}scope src\/\*\* {2,}\d+ B {2,}delivered/);
      assert.match(report, /pkg\/AGENTS.md {2,}scope pkg\/\*\*/);
      assert.match(
        report,
        /deploy {2,}scope pkg\/inner\/\*\* {2,}pkg\/inner\/.agents\/skills\/deploy\/SKILL.md {2,}listed/,
      );
      for (const expected of [
        /generated {2,}ignored by git/,
        /node_modules {2,}inside an ignored directory/,
        /src\/AGENTS.md {2,}overridden by a preferred file/,
        /big\/AGENTS.md {2,}larger than the size limit/,
        /bad\/AGENTS.md {2,}not valid UTF-8/,
        /esc\/AGENTS.md {2,}a link that leads outside the working directory/,
        /pkg\/.agents\/skills\/nodesc\/SKILL.md {2,}skill without a description/,
        /pkg\/.agents\/skills\/hidden\/SKILL.md {2,}skill hidden from the model/,
        /pkg\/.agents\/skills\/deploy\/SKILL.md {2,}skill shadowed/,
      ]) {
        assert.match(report, expected);
      }
      for (const secret of ["OVERRIDE-CONTENT", "PLAIN-CONTENT", "PKG-CONTENT", "OUTSIDE", "bbbb", tree.root]) {
        assert.ok(!report.includes(secret), `report leaks ${secret.slice(0, 20)}`);
      }
    },
  ));

test("/lazy-agents why <path> explains one path, including one outside cwd", () =>
  withTree(
    {
      "src/AGENTS.md": "S",
      "src/y.ts": "y",
      "src/deep/AGENTS.md": "D",
      "src/deep/x.ts": "x",
      "node_modules/a/b.js": "b",
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true });
      await h.call("read", { path: "src/y.ts" });
      h.notifications.length = 0;
      await h.command("lazy-agents", "why src/deep/x.ts");
      await h.command("lazy-agents", "why ../elsewhere.txt");
      await h.command("lazy-agents", "why node_modules/a/b.js");
      const [deep, outside, vendored] = h.notifications;
      assert.match(deep!, /src\/ {2,}scope src\/\*\*: src\/AGENTS.md \(delivered\)/);
      assert.match(deep!, /src\/deep\/ {2,}scope src\/deep\/\*\*: src\/deep\/AGENTS.md \(pending\)/);
      assert.match(outside!, /outside the working directory/);
      assert.match(vendored!, /node_modules\/ {2,}inside an ignored directory/);
    },
  ));

test("why <path> answers for a path below a file and for a link that loops, instead of failing the report", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    tree.link("src/loop", "loop");
    const h = await loadRunner(tree, { hasUI: true });
    for (const path of ["src/x.ts/sub", "src/loop"]) {
      h.notifications.length = 0;
      await h.command("lazy-agents", `why ${path}`);
      const answer = h.notifications.join("\n");
      assert.match(answer, new RegExp(`^pi-lazy-agents: why ${path}\n`), answer);
      assert.match(answer, /src\/AGENTS.md +pending/, answer);
    }
  }));

test("the command offers completions for `why` and for seen paths", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/x.ts" });
    const command = h.runner.getCommand("lazy-agents")!;
    assert.deepEqual(await command.getArgumentCompletions!("w"), [{ value: "why ", label: "why " }]);
    const paths = (await command.getArgumentCompletions!("why src/A"))!.map((item) => item.value);
    assert.deepEqual(paths, ["why src/AGENTS.md"]);
  }));

test("completions never show a seen name's control or format characters raw", () => {
  const hostile = "pkg\u202Eevil\u001b]0;x\u0007";
  return withTree(
    { [`${hostile}/AGENTS.md`]: "E", [`${hostile}/x.ts`]: "x", "src/AGENTS.md": "S", "src/y.ts": "y" },
    async (tree) => {
      const h = await loadRunner(tree);
      await h.call("read", { path: `${hostile}/x.ts` });
      await h.call("read", { path: "src/y.ts" });
      const command = h.runner.getCommand("lazy-agents")!;
      const items = (await command.getArgumentCompletions!("why ")) ?? [];
      assert.ok(
        items.some(({ value }) => value === "why src/AGENTS.md"),
        "a plain name is offered",
      );
      for (const { value, label } of items)
        assert.doesNotMatch(value + label, /[\p{Cc}\p{Cf}]/u, JSON.stringify(value));
    },
  );
});

test("after a resume, /lazy-agents lists what the model holds, and its counts agree", () =>
  withTree(
    {
      "pkg/AGENTS.md": "PKG-RULES",
      "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Deploy the package"),
      "pkg/deep/AGENTS.md": "DEEP-RULES",
      "pkg/deep/a.ts": "a\n",
    },
    async (tree) => {
      const first = await startSession(tree, [toolTurn(["read", { path: "pkg/deep/a.ts" }]), finalTurn()]);
      let file: string;
      try {
        await first.session.prompt("read a");
        file = first.session.sessionFile!;
      } finally {
        first.dispose();
      }
      const notifications: string[] = [];
      const second = await startSession(tree, [], { sessionFile: file, notifications });
      try {
        await second.session.prompt("/lazy-agents --verbose");
        const report = notifications.join("\n");
        assert.match(report, /Instruction files and imports \(2\):/);
        assert.match(
          report,
          /^ {2,}pkg\/AGENTS.md {2,}scope pkg\/\*\* {2,}9 B {2,}delivered {2,}version [0-9a-f]{8}$/m,
        );
        assert.match(
          report,
          /^ {2,}pkg\/deep\/AGENTS.md {2,}scope pkg\/deep\/\*\* {2,}10 B {2,}delivered {2,}version [0-9a-f]{8}$/m,
        );
        assert.match(
          report,
          /Nested skills \(1\):\n {2}deploy {2,}scope pkg\/\*\* {2,}pkg\/.agents\/skills\/deploy\/SKILL.md {2,}listed {2,}version [0-9a-f]{8}$/m,
        );
        assert.match(report, /Delivered in this context: 2 files · 1 skill\./);
        assert.doesNotMatch(report, /PKG-RULES|DEEP-RULES/);
      } finally {
        second.dispose();
      }
    },
  ));

test("with nothing seen yet, /lazy-agents says so in one line and suggests why <path>", () =>
  withTree({ "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true });
    await h.call("read", { path: "src/x.ts" });
    await h.command("lazy-agents", "");
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: nothing seen yet in this session; `/lazy-agents why <path>` shows what applies to a path.",
    ]);
  }));

test("in print mode the report goes where the user sees it (stderr: Pi keeps stdout for the answer)", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, (tree) => {
    const root = join(import.meta.dirname, "..");
    const run = spawnSync(
      process.execPath,
      [
        join(root, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"),
        "-p",
        "-e",
        join(root, "index.ts"),
        "/lazy-agents",
      ],
      { cwd: tree.cwd, env: { ...process.env, PI_CODING_AGENT_DIR: tree.agentDir }, encoding: "utf8" },
    );
    assert.equal(run.status, 0);
    assert.match(run.stderr, /^pi-lazy-agents: nothing seen yet in this session; `\/lazy-agents why <path>`/m);
    assert.doesNotMatch(run.stdout, /pi-lazy-agents/);
  }));

test(`with a UI: parallel calls of one turn get one notification naming all they loaded, counted as the status counts`, () =>
  twoTrees(
    {
      "a/AGENTS.md": "A",
      "a/b/AGENTS.md": "B",
      "a/b/x.ts": "x",
      "a/b/.agents/skills/s/SKILL.md": skill("s", "S skill"),
      "c/AGENTS.md": "C",
      "c/y.ts": "y",
      ".claude/rules/ts.md": '---\npaths: "**/*.ts"\n---\nTS-RULE\n',
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true });
      await Promise.all([h.call("read", { path: "a/b/x.ts" }), h.call("read", { path: "c/y.ts" })]);
      assert.deepEqual(h.notifications, [], "nothing is told before the turn ends");
      assert.equal(h.statuses.get("lazy-agents"), "lazy-agents: 3 files · 1 rule · 1 skill");
      await h.endTurn();
      assert.equal(h.notifications.length, 1, h.notifications.join("\n"));
      const notice: string = String(h.notifications.at(0));
      assert.match(notice, /^pi-lazy-agents: loaded 3 files · 1 rule · 1 skill: /);
      for (const path of [
        "a/AGENTS.md",
        "a/b/AGENTS.md",
        "c/AGENTS.md",
        ".claude/rules/ts.md",
        "a/b/.agents/skills/s/SKILL.md",
      ])
        assert.ok(notice.includes(path), path);
      await h.endTurn();
      assert.equal(h.notifications.length, 1, "a turn that loads nothing tells nothing");
    },
  ));

test("with a UI: a turn's notification lists each kind in path order, not in the order its results came", () =>
  twoTrees(
    {
      "z/AGENTS.md": "Z",
      "z/x.ts": "x",
      "z/.agents/skills/zz/SKILL.md": skill("zz", "ZZ skill"),
      "a/AGENTS.md": "A",
      "a/y.ts": "y",
      "a/.agents/skills/aa/SKILL.md": skill("aa", "AA skill"),
    },
    async (tree, mode) => {
      const h = await loadRunner(tree, { hasUI: true });
      await h.call("read", { path: "z/x.ts" });
      await h.call("read", { path: "a/y.ts" });
      await h.endTurn();
      assert.deepEqual(
        h.notifications,
        [
          "pi-lazy-agents: loaded 2 files · 2 skills: a/AGENTS.md, z/AGENTS.md, a/.agents/skills/aa/SKILL.md, z/.agents/skills/zz/SKILL.md",
        ],
        mode,
      );
    },
  ));

test("in print mode nothing goes to stdout", () =>
  withTree({ "src/AGENTS.md": "PRINT-RULES", "src/a.ts": "a" }, (tree) => {
    const root = join(import.meta.dirname, "..");
    const out = execFileSync(
      process.execPath,
      [
        join(root, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"),
        "-p",
        "-e",
        join(root, "index.ts"),
        "-e",
        join(root, "tests/scripted-provider.ts"),
        "--provider",
        "scripted",
        "--model",
        "scripted-model",
        "go",
      ],
      {
        cwd: tree.cwd,
        env: {
          ...process.env,
          PI_CODING_AGENT_DIR: tree.agentDir,
          LAZY_AGENTS_SCRIPT: JSON.stringify([[["read", { path: "src/a.ts" }]]]),
        },
        encoding: "utf8",
      },
    );
    assert.match(out, /^The model received 1 reminder/, "stdout holds only the model's answer");
    assert.doesNotMatch(out, /pi-lazy-agents: loaded/);
  }));

test("the --no-lazy-agents flag turns it off for one run", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { flags: { "no-lazy-agents": true } });
    const result = await h.call("read", { path: "src/x.ts" });
    assert.deepEqual(result.content, result.original);
  }));

test("a skill file that links outside cwd, or is not a regular file, is listed as not used with its reason", () =>
  withTree({ "pkg/x.ts": "x", "pkg/.agents/skills/fine/SKILL.md": skill("fine", "A fine skill") }, async (tree) => {
    writeFileSync(join(tree.root, "outside.md"), skill("outside", "OUTSIDE-DESCRIPTION"));
    tree.link("pkg/.agents/skills/out/SKILL.md", join(tree.root, "outside.md"));
    tree.write("pkg/.agents/skills/fifo/keep", "");
    execFileSync("mkfifo", [tree.abs("pkg/.agents/skills/fifo/SKILL.md")]);
    const text = await report(tree, "", {}, ["pkg/x.ts"]);
    assert.match(text, /pkg\/.agents\/skills\/out\/SKILL.md {2,}a link that leads outside the working directory/);
    assert.match(text, /pkg\/.agents\/skills\/fifo\/SKILL.md {2,}not a regular file/);
    assert.match(text, /fine {2,}scope pkg\/\*\* {2,}pkg\/.agents\/skills\/fine\/SKILL.md {2,}listed/);
    assert.doesNotMatch(text, /OUTSIDE-DESCRIPTION/);
  }));

test("a SKILL.md that is not a regular file is listed as not used once, when its folder is viewed again", () =>
  withTree({ "pkg/x.ts": "x", "pkg/.agents/skills/fifo/keep": "" }, async (tree) => {
    execFileSync("mkfifo", [tree.abs("pkg/.agents/skills/fifo/SKILL.md")]);
    const text = await report(tree, "", {}, ["pkg/x.ts", "pkg/x.ts"]);
    assert.equal(text.match(/pkg\/.agents\/skills\/fifo\/SKILL.md {2,}not a regular file/g)?.length, 1);
  }));

test("/lazy-agents says the extension is off only when it is", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    assert.doesNotMatch(await report(tree, ""), /off for this run/);
    assert.match(await report(tree, "", { flags: { "no-lazy-agents": true } }), /off for this run/);
    assert.match(await report(tree, "", { settings: { lazyAgents: { enabled: false } } }), /off for this run/);
  }));

test("with the extension off, /lazy-agents lists no hookify rule as active: none of them runs", () =>
  withTree(
    {
      ".claude/hookify.rm.local.md":
        "---\nname: block-rm\nenabled: true\nevent: all\npattern: rm\\s+-rf\naction: block\n---\nNo.\n",
      "src/x.ts": "x",
    },
    async (tree) => {
      for (const options of [{ flags: { "no-lazy-agents": true } }, { settings: { lazyAgents: { enabled: false } } }]) {
        const h = await loadRunner(tree, { hasUI: true, ...options });
        assert.equal(
          (await h.call("bash", { command: "rm -rf nothing-here" })).blocked,
          false,
          "the rule does not run",
        );
        for (const args of ["", "why src/x.ts"]) {
          h.notifications.length = 0;
          await h.command("lazy-agents", args);
          const text = h.notifications.join("\n");
          assert.doesNotMatch(text, /block-rm[^\n]*active/, `${args}: ${JSON.stringify(options)}`);
          if (args === "") assert.match(text, /Checks are off with the extension\./);
        }
      }
    },
  ));

test("why <folder> walks down to the folder itself and shows its own scope", () =>
  withTree({ "src/AGENTS.md": "S", "src/deep/AGENTS.md": "D", "src/deep/x.ts": "x" }, async (tree) => {
    const text = await report(tree, "why src/deep");
    assert.match(text, /src\/ {2,}scope src\/\*\*: src\/AGENTS.md \(pending\)/);
    assert.match(text, /src\/deep\/ {2,}scope src\/deep\/\*\*: src\/deep\/AGENTS.md \(pending\)/);
  }));

test("why <path> says a folder it cannot read could not be read, and goes on to the folders below it", () =>
  withTree({ "a/AGENTS.md": "A", "a/b/AGENTS.md": "B", "a/b/c/AGENTS.md": "C", "a/b/c/x.ts": "x" }, async (tree) => {
    const fs = interceptFileSystem((call, proceed) => {
      if (call.method === "lstat" && call.path === tree.abs("a/b")) throw fsError("EIO", call.method, call.path);
      return proceed();
    });
    const text = await report(tree, "why a/b/c/x.ts", { factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    assert.match(text, /^ {4}a\/b\/ {2}could not be read now: the folders below it still count$/m);
    assert.match(text, /^ {4}a\/b\/c\/ {2}scope a\/b\/c\/\*\*: a\/b\/c\/AGENTS.md \(pending\)$/m);
  }));

test("why <path> inside a skills tree says, once, that its folders are skill content, not scopes", () =>
  twoTrees(
    { "pkg/.agents/skills/deploy/SKILL.md": skill("deploy", "Deploy it"), "pkg/.agents/skills/deploy/ref/a.md": "a" },
    async (tree) => {
      const text = await report(tree, "why pkg/.agents/skills/deploy/ref/a.md");
      assert.match(text, /skill deploy at pkg\/.agents\/skills\/deploy\/SKILL.md/);
      const lines = text.split("\n").filter((line) => line.startsWith("    pkg/.agents/skills/"));
      assert.deepEqual(lines, ["    pkg/.agents/skills/  a skills tree, whose folders are skill content, not scopes"]);
    },
  ));

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
      assert.match(report, /a\/AGENTS.md {2,}scope a\/\*\* .* {2,}delivered, truncated by the budget( {2,}|$)/m);
      assert.match(report, /a\/b\/AGENTS.md {2,}scope a\/b\/\*\* .* {2,}delivered( {2,}|$)/m);
      assert.match(report, /a\/b\/c\/AGENTS.md {2,}scope a\/b\/c\/\*\* .* {2,}delivered( {2,}|$)/m);
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
    assert.equal(h.statuses.get("lazy-agents"), "lazy-agents: 1 file");
  }));

test("the report has no failures section while no hook has failed", () =>
  withTree({ "src/AGENTS.md": "SRC-RULES", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true });
    assert.match(reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "", /SRC-RULES/);
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1)!;
    assert.match(report, /src\/AGENTS.md/);
    assert.doesNotMatch(report, /Failures caught/);
  }));

test("the report reads at a glance: no empty sections, real plurals, aligned columns, versions only with --verbose", () =>
  withTree({ "a/AGENTS.md": "A", "a/bb/AGENTS.md": "BB", "a/bb/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true });
    await h.call("read", { path: "a/bb/x.ts" });
    await h.endTurn();
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1) ?? "";
    assert.doesNotMatch(report, /\(0\)|Nested skills|Seen and not used|Rules|\(s\)|version /, report);
    const rows = report.split("\n").filter((line) => line.startsWith("  a/"));
    assert.equal(rows.length, 2, report);
    for (const column of ["scope ", "B  ", "delivered"]) {
      assert.equal(new Set(rows.map((row) => row.indexOf(column))).size, 1, `${column} aligned:\n${report}`);
    }
    assert.match(report, /Delivered in this context: 2 files\.$/);
    await h.command("lazy-agents", "--verbose");
    assert.equal((h.notifications.at(-1) ?? "").match(/ {2}version [0-9a-f]{8}$/gm)?.length, 2);
  }));

test("/lazy-agents help prints the usage, and the / menu's description fits on one line", () =>
  withTree({ "a/AGENTS.md": "A", "a/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true });
    await h.call("read", { path: "a/x.ts" });
    for (const args of ["help", "nonsense"]) {
      await h.command("lazy-agents", args);
      assert.equal(h.notifications.at(-1), REPORT_USAGE, args);
    }
    for (const word of ["why <path>", 'why "<command>"', "--verbose", "help"]) assert.ok(REPORT_USAGE.includes(word));
    assert.doesNotMatch(COMMAND_DESCRIPTION, /\n/);
    assert.ok(COMMAND_DESCRIPTION.length <= 64, COMMAND_DESCRIPTION);
  }));

test(`why <path> leads with the files and rules that govern it, then lists only the folders that add something`, () =>
  twoTrees(
    {
      "src/AGENTS.md": "S",
      "src/mid/deep/AGENTS.md": "D",
      "src/mid/deep/x.ts": "x",
      ".claude/rules/ts.md": '---\npaths: "src/**/*.ts"\n---\nTS-RULE\n',
      ".claude/rules/css.md": '---\npaths: "**/*.css"\n---\nCSS-RULE\n',
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true });
      await h.command("lazy-agents", "why src/mid/deep/x.ts");
      const lines = (h.notifications.at(-1) ?? "").split("\n");
      assert.deepEqual(lines.slice(0, 5), [
        "pi-lazy-agents: why src/mid/deep/x.ts",
        "  Governed by:",
        "    src/AGENTS.md           pending",
        "    src/mid/deep/AGENTS.md  pending",
        "    .claude/rules/ts.md     rule, pending",
      ]);
      assert.equal(lines[5], "  Folders that add something:");
      assert.ok(!lines.some((line) => line.includes("src/mid/ ")), "a folder that adds nothing is not listed");
      assert.ok(
        lines.some((line) => /css\.md.*does not match its globs/.test(line)),
        "other rules, after",
      );
    },
  ));

test("the report says a linked rule folder leads outside only when it does, in a plain folder and under git init", () =>
  twoTrees(
    {
      "shared/rules/api.mdc": "---\nalwaysApply: true\n---\nSHARED-CURSOR-RULE\n",
      "pkg/.cursor": { link: "../shared" },
      "pkg/x.ts": "x\n",
      "esc/.cursor": { link: "../../outside-cursor" },
      "esc/y.ts": "y\n",
      "../outside-cursor/rules/leak.mdc": "---\nalwaysApply: true\n---\nOUTSIDE-RULE\n",
    },
    async (tree, mode) => {
      const h = await loadRunner(tree, { hasUI: true });
      const reminder = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(reminder, /SHARED-CURSOR-RULE/, mode);
      assert.doesNotMatch(reminderOf((await h.call("read", { path: "esc/y.ts" })).content) ?? "", /OUTSIDE-RULE/, mode);
      await h.command("lazy-agents", "");
      const report = h.notifications.at(-1) ?? "";
      assert.doesNotMatch(report, /pkg\/\.cursor\/rules {2,}a link/, `${mode}: ${report}`);
      assert.match(report, /esc\/\.cursor\/rules {2,}a link that leads outside the working directory/, mode);
    },
  ));

test("a turn's notification names only what reached the model: not a reminder a later extension dropped", () =>
  withTree(
    { "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n", "other/AGENTS.md": "OTHER-RULES", "other/b.ts": "b\n" },
    async (tree) => {
      // A later extension drops the reminder from results in pkg only.
      const dropper: ExtensionFactory = (pi) => {
        pi.on("tool_result", (event) =>
          String((event.input as { path?: unknown }).path).startsWith("pkg/")
            ? { content: event.content.filter((b) => b.type !== "text" || !b.text.startsWith(REMINDER_OPEN)) }
            : undefined,
        );
      };
      const notifications: string[] = [];
      const turn = toolTurn(["read", { path: "pkg/a.ts" }], ["read", { path: "other/b.ts" }]);
      const h = await startSession(tree, [turn, finalTurn()], {
        factories: [createLazyAgents({ spawnGit: noGit }), dropper],
        notifications,
      });
      try {
        await h.session.prompt("read both");
        const [pkg, other] = persistedToolResults(h.sessionManager);
        assert.equal(reminderOf(pkg!.content), undefined, "the later extension dropped it");
        assert.match(reminderOf(other!.content) ?? "", /OTHER-RULES/);
        assert.deepEqual(notifications, ["pi-lazy-agents: loaded 1 file: other/AGENTS.md"]);
      } finally {
        h.dispose();
      }
    },
  ));
