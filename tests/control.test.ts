// Issue 5: the inspection command, settings, the opt-in write gate, wider triggers, the UI and the flag.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { optionsFromSettings } from "../index.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  toolTurn,
  withTree,
} from "./harness.ts";

const skill = (name: string, description: string, extra = "") =>
  `---\nname: ${name}\n${description ? `description: ${description}\n` : ""}${extra}---\nBODY\n`;

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
      assert.match(report, /src\/AGENTS.override.md {2}scope src\/\*\* {2}\d+ B {2}delivered/);
      assert.match(report, /pkg\/AGENTS.md {2}scope pkg\/\*\*/);
      assert.match(
        report,
        /deploy {2}scope pkg\/inner\/\*\* {2}pkg\/inner\/.agents\/skills\/deploy\/SKILL.md {2}listed/,
      );
      for (const expected of [
        /generated {2}ignored by git/,
        /node_modules {2}inside an ignored directory/,
        /src\/AGENTS.md {2}overridden by a preferred file/,
        /big\/AGENTS.md {2}larger than the size limit/,
        /bad\/AGENTS.md {2}not valid UTF-8/,
        /esc\/AGENTS.md {2}a link that leads outside the working directory/,
        /pkg\/.agents\/skills\/nodesc\/SKILL.md {2}skill without a description/,
        /pkg\/.agents\/skills\/hidden\/SKILL.md {2}skill hidden from the model/,
        /pkg\/.agents\/skills\/deploy\/SKILL.md {2}skill shadowed/,
      ]) {
        assert.match(report, expected);
      }
      for (const secret of ["OVERRIDE-CONTENT", "PLAIN-CONTENT", "PKG-CONTENT", "OUTSIDE", "bbbb", tree.root]) {
        assert.ok(!report.includes(secret), `report leaks ${secret.slice(0, 20)}`);
      }
    },
  ));

test("regression: a FIFO named AGENTS.md is refused as not a regular file, without blocking", () =>
  withTree({ "fifo/x.ts": "x" }, async (tree) => {
    execFileSync("mkfifo", [tree.abs("fifo/AGENTS.md")]);
    const h = await loadRunner(tree);
    const result = await h.call("read", { path: "fifo/x.ts" });
    assert.match(reminderOf(result.content) ?? "", /fifo\/AGENTS.md was not loaded: not a regular file/);
  }));

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
      assert.match(deep!, /src\/ {2}scope src\/\*\*: src\/AGENTS.md \(delivered\)/);
      assert.match(deep!, /src\/deep\/ {2}scope src\/deep\/\*\*: src\/deep\/AGENTS.md \(pending\)/);
      assert.match(outside!, /outside the working directory/);
      assert.match(vendored!, /node_modules\/ {2}inside an ignored directory/);
    },
  ));

test("the command offers completions for `why` and for seen paths", () =>
  withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree);
    await h.call("read", { path: "src/x.ts" });
    const command = h.runner.getCommand("lazy-agents")!;
    assert.deepEqual(await command.getArgumentCompletions!("w"), [{ value: "why ", label: "why " }]);
    const paths = (await command.getArgumentCompletions!("why src/A"))!.map((item) => item.value);
    assert.deepEqual(paths, ["why src/AGENTS.md"]);
  }));

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
        await second.session.prompt("/lazy-agents");
        const report = notifications.join("\n");
        assert.match(report, /Instruction files and imports \(2\):/);
        assert.match(report, /^ {2}pkg\/AGENTS.md {2}scope pkg\/\*\* {2}9 B {2}delivered {2}version [0-9a-f]{8}$/m);
        assert.match(
          report,
          /^ {2}pkg\/deep\/AGENTS.md {2}scope pkg\/deep\/\*\* {2}10 B {2}delivered {2}version [0-9a-f]{8}$/m,
        );
        assert.match(
          report,
          /Nested skills \(1\):\n {2}deploy {2}scope pkg\/\*\* {2}pkg\/.agents\/skills\/deploy\/SKILL.md {2}listed/,
        );
        assert.match(report, /Delivered in this context: 2 file\(s\), 1 skill\(s\)\./);
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

test("settings: project values win over global ones, key by key", () =>
  withTree({ "src/RULES.md": "CUSTOM-NAME", "src/AGENTS.md": "DEFAULT-NAME", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, {
      settings: { lazyAgents: { fileNames: ["AGENTS.md"], reminderBudgetBytes: 4096 } },
      projectSettings: { lazyAgents: { fileNames: ["RULES.md", "AGENTS.md"] } },
      trusted: true,
    });
    const reminder = reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "";
    assert.match(reminder, /CUSTOM-NAME/);
    assert.doesNotMatch(reminder, /DEFAULT-NAME/);
  }));

test("regression: an untrusted project's settings are not applied", () =>
  withTree({ "src/RULES.md": "CUSTOM-NAME", "src/AGENTS.md": "DEFAULT-NAME", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { projectSettings: { lazyAgents: { fileNames: ["RULES.md"] } }, trusted: false });
    const reminder = reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "";
    assert.match(reminder, /DEFAULT-NAME/);
  }));

test("regression: a bad settings value gives one fixed warning and keeps the default", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, {
      hasUI: true,
      settings: { lazyAgents: { maxFileBytes: "huge", triggers: ["read", "rm -rf /"], secretKey: "SECRET-VALUE" } },
    });
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents.secretKey in ~/.pi/agent/settings.json is not a setting",
      "pi-lazy-agents: lazyAgents.maxFileBytes in ~/.pi/agent/settings.json must be a whole number of bytes from 1 to 1048576; its default applies",
      "pi-lazy-agents: lazyAgents.triggers in ~/.pi/agent/settings.json must be a list of tool names from: read, edit, write, bash, ls, grep, find; its default applies",
    ]);
    assert.match(reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "", /RULES/);
  }));

test("settings validation: every key and its bounds", () => {
  const ok = optionsFromSettings({
    enabled: false,
    fileNames: ["A.md"],
    ignoreDirs: [],
    maxFileBytes: 10,
    reminderBudgetBytes: 2048,
    triggers: ["read", "ls"],
    skills: false,
    imports: false,
    gateWrites: true,
  });
  assert.deepEqual(ok.warnings, []);
  assert.equal(ok.options.enabled, false);
  assert.deepEqual([...ok.options.triggers], ["read", "ls"]);
  assert.equal(ok.options.gateWrites, true);
  const cases: Array<[unknown, number]> = [
    [{ fileNames: [] }, 1],
    [{ fileNames: ["a/b.md"] }, 1],
    [{ fileNames: ["A.md", "A.md"] }, 1],
    [{ ignoreDirs: [".."] }, 1],
    [{ maxFileBytes: 0 }, 1],
    [{ maxFileBytes: 1.5 }, 1],
    [{ reminderBudgetBytes: 10 }, 1],
    [{ skills: "yes" }, 1],
    ["not an object", 1],
    [null, 1],
  ];
  for (const [raw, warnings] of cases)
    assert.equal(optionsFromSettings(raw).warnings.length, warnings, JSON.stringify(raw));
});

test("regression: a broken settings file never stops Pi", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    tree.write(".pi/settings.json", "{ this is not json");
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "", /RULES/);
  }));

test("the gate holds the first write into an undelivered scope once, then lets the retry through, in a real session", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES: use tabs", "pkg/a.ts": "a\n" }, async (tree) => {
    const write = toolTurn(["write", { path: "pkg/b.ts", content: "b\n" }]);
    const h = await startSession(tree, [write, write, finalTurn()], { settings: { lazyAgents: { gateWrites: true } } });
    try {
      await h.session.prompt("write b");
      const results = persistedToolResults(h.sessionManager);
      assert.equal(results.length, 2);
      assert.equal(results[0]!.isError, true, "the first write was held back");
      assert.match(results[0]!.content[0]!.text!, /PKG-RULES: use tabs[^]*retry the same call/);
      assert.ok((results[0]!.details as { lazyAgents?: unknown }).lazyAgents, "the gate's delivery is in the ledger");
      assert.equal(results[1]!.isError, false, "the retry went through");
      assert.equal(readFileSync(tree.abs("pkg/b.ts"), "utf8"), "b\n");
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      assert.equal(countOccurrences(file, "PKG-RULES: use tabs"), 1, "exactly one delivery");
    } finally {
      h.dispose();
    }
  }));

test("the gate is off by default and never holds a scope the model already has", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n" }, async (tree) => {
    const plain = await loadRunner(tree);
    assert.equal((await plain.call("write", { path: "pkg/b.ts", content: "b" })).blocked, false);
    const gated = await loadRunner(tree, { settings: { lazyAgents: { gateWrites: true } } });
    await gated.call("read", { path: "pkg/a.ts" });
    assert.equal((await gated.call("write", { path: "pkg/c.ts", content: "c" })).blocked, false);
  }));

test("ls triggers only when added to triggers", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/sub/a.ts": "needle\n" }, async (tree) => {
    const off = await loadRunner(tree);
    const ls = await off.call("ls", { path: "pkg/sub" });
    assert.equal(ls.isError, false);
    assert.deepEqual(ls.content, ls.original);
    const on = await loadRunner(tree, { settings: { lazyAgents: { triggers: ["read", "ls"] } } });
    assert.match(reminderOf((await on.call("ls", { path: "pkg/sub" })).content) ?? "", /PKG-RULES/);
  }));

// ripgrep is not installed on these machines (and Pi cannot download it here), so grep's own
// output is given; the hooks, the runner and the path argument are the real ones.
test("grep triggers only when added to triggers, and its path may name a file", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/sub/a.ts": "needle\n" }, async (tree) => {
    const output = [{ type: "text", text: "pkg/sub/a.ts:1: needle" }];
    const off = await loadRunner(tree);
    const quiet = await off.callWithOutput("grep", { pattern: "needle", path: "pkg/sub/a.ts" }, output);
    assert.deepEqual(quiet.content, quiet.original);
    const on = await loadRunner(tree, { settings: { lazyAgents: { triggers: ["grep"] } } });
    const loud = await on.callWithOutput("grep", { pattern: "needle", path: "pkg/sub/a.ts" }, output);
    assert.match(reminderOf(loud.content) ?? "", /PKG-RULES/);
    const read = await on.call("read", { path: "pkg/sub/a.ts" });
    assert.deepEqual(read.content, read.original, "read is no longer a trigger");
  }));

test("regression: a failed grep activates nothing", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { triggers: ["grep"] } } });
    const failed = await h.call("grep", { pattern: "x", path: "pkg" });
    assert.equal(failed.isError, true, "ripgrep is missing, so the real grep fails");
    assert.deepEqual(failed.content, failed.original);
  }));

test("with a UI: a status entry counts deliveries and a notification names each new file", () =>
  withTree(
    {
      "a/AGENTS.md": "A",
      "a/b/AGENTS.md": "B",
      "a/b/x.ts": "x",
      "a/b/.agents/skills/s/SKILL.md": skill("s", "S skill"),
    },
    async (tree) => {
      const h = await loadRunner(tree, { hasUI: true });
      await h.call("read", { path: "a/b/x.ts" });
      assert.deepEqual(h.notifications, ["pi-lazy-agents: loaded a/AGENTS.md, a/b/AGENTS.md"]);
      assert.equal(h.statuses.get("lazy-agents"), "nested: 2 files, 1 skill");
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

test("enabled: false in settings turns it off", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { enabled: false } } });
    const result = await h.call("read", { path: "src/x.ts" });
    assert.deepEqual(result.content, result.original);
  }));
