// docs/behaviour.md "Bash": the words of a bash command activate scopes; the command is read, never run.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createLazyAgents, readShellCommand } from "../index.ts";
import { MAX_SHELL_COMMAND_CHARS, MAX_SHELL_WORDS } from "../config.ts";
import { callsOutside, fsError, interceptFileSystem, recordingFileSystem } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import {
  countOccurrences,
  finalTurn,
  loadRunner,
  persistedToolResults,
  reminderOf,
  startSession,
  textOf,
  toolTurn,
  twoTrees,
  withTree,
  type Tree,
} from "./harness.ts";

const tree = {
  "AGENTS.md": "ROOT-RULES",
  "packages/AGENTS.md": "PACKAGES-RULES",
  "packages/api/AGENTS.md": "API-RULES",
  "packages/api/src/server.ts": "export const server = 1;\n",
  "packages/web/AGENTS.md": "WEB-RULES",
  "packages/web/page.ts": "export const page = 3;\n",
  "docs/AGENTS.md": "DOCS-RULES",
  "docs/guide.md": "guide\n",
  "lib/AGENTS.md": "LIB-RULES",
  "node_modules/dep/AGENTS.md": "IGNORED-RULES",
  "node_modules/dep/index.js": "module.exports = 1;\n",
};

function outside(t: Tree): void {
  mkdirSync(join(t.root, "outside"), { recursive: true });
  writeFileSync(join(t.root, "outside", "AGENTS.md"), "OUTSIDE-RULES");
  writeFileSync(join(t.root, "outside", "x.txt"), "outside\n");
}

/** The paths a command names, as `read:path` or `write:path`, in reading order. */
function named(command: string): string[] {
  return readShellCommand(command).flatMap(({ uses }) =>
    uses.flatMap((use) => (use.role === "skip" ? [] : [`${use.role}:${use.path}`])),
  );
}

const cases: Array<[string, string[]]> = [
  // Plain commands, pipes and lists.
  ["cat src/a.ts", ["read:src/a.ts"]],
  ["sed -n '1,40p' src/server.ts", ["read:1,40p", "read:src/server.ts"]],
  ["rg -n 'TODO' packages/api", ["read:TODO", "read:packages/api"]],
  ["cat src/a.ts | grep foo | head -5", ["read:src/a.ts", "read:foo"]],
  ["npm test && cat coverage/summary.txt", ["read:test", "read:coverage/summary.txt"]],
  ["make lint || cat lint.log", ["read:lint", "read:lint.log"]],
  ["ls src; ls lib", ["read:src", "read:lib"]],
  ["ls src\nls lib", ["read:src", "read:lib"]],
  ["sleep 1 & cat src/a.ts", ["read:1", "read:src/a.ts"]],
  ["wc -l src/a.ts src/b.ts src/a.ts", ["read:src/a.ts", "read:src/b.ts", "read:src/a.ts"]],
  // cd, pushd and popd.
  ["cd packages/api && npm test", ["read:packages/api", "read:packages/api/test"]],
  ["cd packages/api; cat src/x.ts", ["read:packages/api", "read:packages/api/src/x.ts"]],
  ["cd packages && cd api && ls", ["read:packages", "read:packages/api"]],
  ["cd packages/api/.. && ls web", ["read:packages", "read:packages/web"]],
  ["cd /tmp && cat notes.txt", ["read:/tmp", "read:/tmp/notes.txt"]],
  ["cd ../other && cat x", ["read:../other", "read:../other/x"]],
  ["cd - && cat x", []],
  ["cd && cat x", []],
  ["cd ~ && cat x", ["read:~"]],
  ['cd "$DIR" && cat x.ts', []],
  ["cd -P src && cat a.ts", ["read:src", "read:src/a.ts"]],
  ["cd src | cat a.ts", ["read:src", "read:a.ts"]],
  ["pushd src && cat a.ts && popd && cat b.ts", ["read:src", "read:src/a.ts", "read:b.ts"]],
  // Subshells and substitutions.
  ["(cd web && npm run build) && cat log.txt", ["read:web", "read:web/run", "read:web/build", "read:log.txt"]],
  ["{ cd web; ls; } && cat a", ["read:web", "read:web/a"]],
  ["cat $(find src -name '*.ts')", ["read:src", "read:*.ts"]],
  ["cd lib && echo $(ls docs)", ["read:lib", "read:lib/docs"]],
  ["echo `ls docs`", ["read:docs"]],
  ["cat $(cat list.txt)", ["read:list.txt"]],
  ["diff <(sort a.txt) <(sort b.txt)", ["read:a.txt", "read:b.txt"]],
  ["echo $((1 + 2)) src", ["read:src"]],
  // Quotes and escapes.
  ['cat "sp ace/x.ts"', ["read:sp ace/x.ts"]],
  ["cat 'sp ace/x.ts'", ["read:sp ace/x.ts"]],
  ["cat sp\\ ace/x.ts", ["read:sp ace/x.ts"]],
  ["cat $'sp\\x'", ["read:spx"]],
  ['cat "src/"a.ts', ["read:src/a.ts"]],
  ['echo "a;b" src', ["read:a;b", "read:src"]],
  ["cat src/a.ts # and lib/b.ts", ["read:src/a.ts"]],
  // bash -c, sh -c, zsh -c.
  ["bash -c 'cd pkg && cat x.ts'", ["read:pkg", "read:pkg/x.ts"]],
  ['sh -c "ls src"', ["read:src"]],
  ["zsh -lc 'cat lib/a.ts'", ["read:lib/a.ts"]],
  ["cd pkg && bash -c 'cat x.ts' && cat y.ts", ["read:pkg", "read:pkg/x.ts", "read:pkg/y.ts"]],
  ["bash scripts/run.sh", ["read:scripts/run.sh"]],
  // Heredocs and here-strings are data.
  [
    "cat > src/new.ts <<'EOF'\nexport const x = 1; # cat secret/a.ts\nrm -rf lib\nEOF\nls docs",
    ["write:src/new.ts", "read:docs"],
  ],
  ["cat <<-EOF > out.txt\n\tcat lib/a\n\tEOF\ncat b", ["write:out.txt", "read:b"]],
  ["python3 - <<EOF\nopen('lib/x')\nEOF", []],
  ["cat > out.txt <<EOF\ncat lib/a", ["write:out.txt"]],
  ['grep x <<< "lib/a.ts"', ["read:x"]],
  // sed -i, tee, xargs, find, for.
  ["sed -i 's/a/b/' src/x.ts", ["read:s/a/b/", "read:src/x.ts"]],
  ["echo hi | tee logs/out.txt", ["read:hi", "write:logs/out.txt"]],
  [
    "echo hi | tee -a logs/a.txt logs/b.txt > /dev/null",
    ["read:hi", "write:logs/a.txt", "write:logs/b.txt", "write:/dev/null"],
  ],
  ['for f in src/*.ts; do wc -l "$f"; done', ["read:src"]],
  ["for d in packages lib; do ls $d; done", ["read:packages", "read:lib"]],
  ["find src -name '*.test.ts' -exec cat {} +", ["read:src", "read:*.test.ts", "read:cat", "read:.", "read:+"]],
  ["find lib -type f | xargs grep -l TODO", ["read:lib", "read:f", "read:TODO"]],
  ["ls src/**/*.ts", ["read:src"]],
  ["cat src/comp*/index.ts", ["read:src"]],
  ["ls *.md", ["read:."]],
  ["cat src/{a,b}.ts", ["read:src"]],
  ["ls 'sp ace'/*.ts \"src\"/**/x.ts 'lit*.ts'", ["read:sp ace", "read:src", "read:lit*.ts"]],
  // Env assignments and wrappers.
  ["NODE_ENV=test node scripts/run.js", ["read:scripts/run.js"]],
  ['FOO=1 BAR="a b" cat src/a.ts', ["read:src/a.ts"]],
  ["env CI=1 timeout 60 npm test", ["read:test"]],
  ["sudo cat /etc/hosts", ["read:/etc/hosts"]],
  // A wrapper's `--` ends its own options, not the tool's.
  ["sudo -- ls -la src", ["read:src"]],
  ["nohup -- cat -n notes.txt", ["read:notes.txt"]],
  ["./scripts/test.sh --watch", ["read:scripts/test.sh"]],
  // Redirects of every kind.
  ["echo x > out/a.txt", ["read:x", "write:out/a.txt"]],
  ["echo x >> out/a.txt", ["read:x", "write:out/a.txt"]],
  ["make 2> logs/err.txt", ["write:logs/err.txt"]],
  ["make 2>> logs/err.txt", ["write:logs/err.txt"]],
  ["make &> logs/all.txt", ["write:logs/all.txt"]],
  ["make &>> logs/all.txt", ["write:logs/all.txt"]],
  ["echo x >| out/a.txt", ["read:x", "write:out/a.txt"]],
  ["make >& logs/all.txt", ["write:logs/all.txt"]],
  ["make 2>&1 | tail", []],
  ["make >/dev/null 2>&1", ["write:/dev/null"]],
  ["sort < data/in.txt > data/out.txt", ["read:data/in.txt", "write:data/out.txt"]],
  ["cd out && echo x > a.txt", ["read:out", "read:out/x", "write:out/a.txt"]],
  // A redirect without a target leaves the operator after it to end the command.
  ["echo > ; cd lib && ls src", ["read:lib", "read:lib/src"]],
  ["echo x >\ncat a", ["read:x", "read:a"]],
  // A redirect is relative to the shell's directory, not to a tool's directory option.
  ["git -C sub log > out.txt", ["read:sub", "read:sub/log", "write:out.txt"]],
  // Tool directory options.
  ["git -C packages/api status", ["read:packages/api", "read:packages/api/status"]],
  [
    "git -C packages/api diff -- src/x.ts",
    ["read:packages/api", "read:packages/api/diff", "read:packages/api/src/x.ts"],
  ],
  ["make -C services/auth test", ["read:services/auth", "read:services/auth/test"]],
  ["make --directory=services/auth", ["read:services/auth"]],
  ["make -Cservices/auth test", ["read:services/auth", "read:services/auth/test"]],
  ["make --directoryx --directory= test", ["read:test"]],
  ["npm --prefix web run build", ["read:web", "read:web/run", "read:web/build"]],
  ["npm --prefix=web test", ["read:web", "read:web/test"]],
  ["pnpm -C packages/ui test", ["read:packages/ui", "read:packages/ui/test"]],
  ["pnpm --dir packages/ui lint", ["read:packages/ui", "read:packages/ui/lint"]],
  ["yarn --cwd apps/site build", ["read:apps/site", "read:apps/site/build"]],
  ["cargo test --manifest-path crates/core/Cargo.toml", ["read:test", "read:crates/core/Cargo.toml"]],
  // Outside, home, and absolute paths are named; activation refuses them.
  ["cat ../outside/x.ts ~/notes.md /etc/passwd", ["read:../outside/x.ts", "read:~/notes.md", "read:/etc/passwd"]],
];

test("a real session delivers each scope a bash command touches once, parent first, whatever the exit status", () =>
  withTree(tree, async (t) => {
    outside(t);
    const h = await startSession(
      t,
      [
        toolTurn(["bash", { command: "cd packages/api && cat src/server.ts" }]),
        toolTurn(["bash", { command: "cat node_modules/dep/index.js ../outside/x.txt; ls ../outside" }]),
        toolTurn(["bash", { command: "cat packages/web/page.ts docs/guide.md; exit 3" }]),
        toolTurn(["bash", { command: "mkdir -p lib/new && echo hi > lib/new/note.txt" }]),
        toolTurn(["read", { path: "packages/api/src/server.ts" }], ["bash", { command: "ls packages/web docs" }]),
        finalTurn(),
      ],
      { tools: ["read", "bash"] },
    );
    try {
      await h.session.prompt("work through the shell");
      const results = persistedToolResults(h.sessionManager);
      assert.equal(results.length, 6);
      const [api, ignored, failing, written, read, again] = results;
      assert.equal(api!.content[0]!.text, "export const server = 1;\n", "bash output intact");
      const apiReminder = reminderOf(api!.content) ?? "";
      assert.ok(apiReminder.indexOf("PACKAGES-RULES") < apiReminder.indexOf("API-RULES"), "parent first");
      assert.ok(apiReminder.includes("PACKAGES-RULES"));
      assert.equal(reminderOf(ignored!.content), undefined, "ignored and outside folders deliver nothing");
      assert.equal(failing!.isError, true);
      assert.match(textOf(failing!.content), /^export const page = 3;\nguide\n[^]*Command exited with code 3/);
      const failingReminder = reminderOf(failing!.content) ?? "";
      assert.ok(
        failingReminder.indexOf("DOCS-RULES") < failingReminder.indexOf("WEB-RULES"),
        "one reminder, parent first",
      );
      assert.equal(countOccurrences(failingReminder, "<nested-instructions"), 1);
      assert.match(
        reminderOf(written!.content) ?? "",
        /LIB-RULES/,
        "a redirect into a new folder uses the nearest one",
      );
      assert.equal(reminderOf(read!.content), undefined, "a later read adds nothing");
      assert.equal(reminderOf(again!.content), undefined);
      const file = readFileSync(h.sessionManager.getSessionFile()!, "utf8");
      for (const marker of ["PACKAGES-RULES", "API-RULES", "WEB-RULES", "DOCS-RULES", "LIB-RULES"])
        assert.equal(countOccurrences(file, marker), 1, marker);
      for (const marker of ["IGNORED-RULES", "OUTSIDE-RULES"]) assert.equal(countOccurrences(file, marker), 0, marker);
      const toolText = results.map((r) => textOf(r.content)).join("\n");
      assert.equal(countOccurrences(toolText, "ROOT-RULES"), 0, "cwd's own file is Pi's");
    } finally {
      h.dispose();
    }
  }));

test("a codemode script's bash calls activate scopes and the codemode result carries the reminder", () =>
  withTree(tree, async (t) => {
    const h = await startSession(
      t,
      [
        toolTurn([
          "codemode",
          {
            code: "const r = await tools.bash({ command: 'cat packages/api/src/server.ts' });\nreturn JSON.stringify({ exact: r.output === 'export const server = 1;\\n' });",
          },
        ]),
        finalTurn(),
      ],
      { codemode: true, tools: ["read", "bash", "codemode"] },
    );
    try {
      await h.session.prompt("use a script");
      const results = persistedToolResults(h.sessionManager);
      const outer = results.find((r) => r.toolName === "codemode")!;
      assert.match(textOf(outer.content), /"exact":true|\\"exact\\":true/);
      assert.match(reminderOf(outer.content) ?? "", /PACKAGES-RULES[^]*API-RULES/);
    } finally {
      h.dispose();
    }
  }));

test("bash output stays byte for byte and an ignored, outside or /dev/null target activates nothing", () =>
  withTree(tree, async (t) => {
    outside(t);
    const h = await loadRunner(t);
    const quiet = await h.call("bash", {
      command: "echo x > /dev/null; cat node_modules/dep/index.js > ../outside/copy.txt; ls ../outside >/dev/null",
    });
    assert.equal(quiet.details && (quiet.details as { lazyAgents?: unknown }).lazyAgents, undefined);
    assert.deepEqual(quiet.content, quiet.original);
    const result = await h.call("bash", { command: "git -C packages/web status 2>/dev/null; printf 'a\\tb'" });
    assert.deepEqual(result.content.slice(0, -1), result.original);
    assert.match(reminderOf(result.content) ?? "", /PACKAGES-RULES[^]*WEB-RULES/);
  }));

test("a word that names nothing, an option or a path built at run time activates nothing", () =>
  withTree({ ...tree, "list.txt": "packages/api/src/server.ts\n" }, async (t) => {
    const h = await loadRunner(t);
    for (const command of [
      "cat packages/api/missing.ts",
      "grep --include=packages/api -r x . || true",
      'D=packages/api; cat "$D"/src/server.ts',
      "cat $(cat list.txt)",
    ]) {
      const result = await h.call("bash", { command });
      assert.equal(reminderOf(result.content), undefined, command);
    }
  }));

test("bash can be removed from the triggers", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t, { settings: { lazyAgents: { triggers: ["read", "edit", "write"] } } });
    const result = await h.call("bash", { command: "cat packages/api/src/server.ts" });
    assert.equal(reminderOf(result.content), undefined);
    const read = await h.call("read", { path: "packages/api/src/server.ts" });
    assert.match(reminderOf(read.content) ?? "", /API-RULES/);
  }));

test("a bash command that writes or edits an instruction file delivers the new version in its own result", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t);
    await h.call("bash", { command: "cat docs/guide.md" });
    const result = await h.call("bash", { command: "printf 'DOCS-RULES-2' > docs/AGENTS.md" });
    assert.match(reminderOf(result.content) ?? "", /DOCS-RULES-2/);
    const edited = await h.call("bash", { command: "sed -i 's/RULES-2/RULES-3/' docs/AGENTS.md" });
    assert.match(reminderOf(edited.content) ?? "", /supersedes[^]*DOCS-RULES-3/);
  }));

test('/lazy-agents why "<command>" explains which words activated which scopes, and why the others did not', () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t, { hasUI: true });
    await h.command(
      "lazy-agents",
      `why "cd packages/api && cat src/server.ts ../../node_modules/dep/index.js -n missing.ts $HOME/x > /dev/null"`,
    );
    const report = h.notifications.at(-1)!;
    assert.match(report, /why "cd packages\/api && cat/);
    const lines = report.split("\n");
    assert.deepEqual(lines.slice(1, 4), [
      "  packages/** (packages/AGENTS.md, pending): packages/api activates, src/server.ts activates",
      "  packages/api/** (packages/api/AGENTS.md, pending): packages/api activates, src/server.ts activates",
      "  packages/api/src/** (no instruction file): src/server.ts activates",
    ]);
    const ignored = lines.filter((line) => line.startsWith("  ignored: "));
    assert.equal(ignored.length, 1, "one line for every word ignored");
    assert.equal(lines.length, 5, report);
    for (const word of [
      "../../node_modules/dep/index.js (node_modules/: inside an ignored directory)",
      "-n (an option)",
      "missing.ts (names nothing that exists)",
      "$HOME/x (built when the command runs",
      "/dev/null (outside the working directory)",
      "cd (a command name)",
    ])
      assert.ok(ignored[0]!.includes(word), word);
    await h.command("lazy-agents", "why packages/api/src/server.ts");
    assert.match(
      h.notifications.at(-1)!,
      /^ {2}Governed by:\n {4}packages\/AGENTS.md {2,}pending\n {4}packages\/api\/AGENTS.md {2}pending$/m,
      "a bare argument is still a path",
    );
  }));

test("bash words never lead the extension outside cwd, through a path or a link", () =>
  withTree(tree, async (t) => {
    outside(t);
    symlinkSync(join(t.root, "outside"), t.abs("packages/out"));
    const recorder = recordingFileSystem();
    const h = await loadRunner(t, { factories: [createLazyAgents({ fs: recorder.fs, spawnGit: noGit })] });
    for (const command of [
      "cat packages/out/x.txt packages/out/AGENTS.md ../outside/x.txt ~/x /etc/hostname",
      "cd packages/out && cat x.txt > ../../outside/y.txt",
      "ls packages/out/ packages/out/* ../outside/*",
      "git -C ../outside status; make -C packages/out",
      "cd . && ls; ls . ./",
    ]) {
      const result = await h.call("bash", { command });
      assert.equal(reminderOf(result.content), undefined, command);
    }
    assert.ok(recorder.calls.length > 0);
    assert.deepEqual(callsOutside(recorder.calls, t.cwd), []);
  }));

test("a nested bash call's scopes reach the outermost result even when the ledger moved in between", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t);
    await h.call("bash", { command: "cat packages/api/src/server.ts" }, { parentToolCallId: "outer-1" });
    await h.call("read", { path: "docs/guide.md" });
    const outer = await h.call("codemode", { code: "…" }, { id: "outer-1" });
    assert.match(reminderOf(outer.content) ?? "", /PACKAGES-RULES[^]*API-RULES/);
  }));

test("path-scoped rules of other agents match the files a bash command names", () =>
  withTree(
    {
      ...tree,
      ".claude/rules/api.md": '---\npaths:\n  - "packages/api/**/*.ts"\n---\nCLAUDE-API-RULE\n',
      ".claude/rules/docs.md": '---\npaths: "docs/**"\n---\nCLAUDE-DOCS-RULE\n',
      "README.md": "readme\n",
    },
    async (t) => {
      const h = await loadRunner(t);
      const none = await h.call("bash", { command: "cat README.md" });
      assert.equal(reminderOf(none.content), undefined);
      const result = await h.call("bash", { command: "cd packages/api && sed -n '1,5p' src/server.ts" });
      const reminder = reminderOf(result.content) ?? "";
      assert.match(reminder, /CLAUDE-API-RULE/);
      assert.doesNotMatch(reminder, /CLAUDE-DOCS-RULE/);
      const again = await h.call("bash", { command: "cat packages/api/src/server.ts" });
      assert.equal(reminderOf(again.content), undefined, "a rule arrives once per version");
    },
  ));

test("the shell-word reader names the paths of real command shapes", () => {
  assert.ok(cases.length >= 60, `${cases.length} cases`);
  for (const [command, expected] of cases) assert.deepEqual(named(command), expected, command);
});

test("words that name nothing knowable say why", () => {
  const reasons = (command: string) =>
    readShellCommand(command).flatMap(({ uses }) =>
      uses.flatMap((use) => (use.role === "skip" ? [`${use.word}:${use.reason}`] : [])),
    );
  const table: Array<[string, string[]]> = [
    ["ls -la src", ["ls:commandName", "-la:option"]],
    ['cat $HOME/x "$DIR"/y', ["cat:commandName", "$HOME/x:dynamic", "$DIR/y:dynamic"]],
    ['cd "$D" && cat x', ["cd:commandName", "$D:dynamic", "cat:commandName", "x:unknownDirectory"]],
    ["bash -c 'ls'", ["bash:commandName", "-c:option", "ls:script", "ls:commandName"]],
    ["git -C pkg log", ["git:commandName", "-C:option"]],
    ["cat $(cat list.txt)", ["cat:commandName", "cat:commandName", "$(cat list.txt):dynamic"]],
  ];
  for (const [command, expected] of table) assert.deepEqual(reasons(command), expected, command);
});

test("the current directory of each simple command follows cd, and subshells keep their own", () => {
  const dirs = (command: string) => readShellCommand(command).map(({ cwd }) => cwd ?? "?");
  assert.deepEqual(dirs("cd a && ls; cd b; ls"), [".", "a", "a", "a/b"]);
  assert.deepEqual(dirs("(cd a; ls); ls"), [".", "a", "."]);
  assert.deepEqual(dirs('cd "$X"; ls; cd /abs; ls'), [".", "?", "?", "/abs"]);
  assert.deepEqual(dirs("pushd a; pushd b; popd; ls; popd; ls"), [".", "a", "a/b", "a", "a", "."]);
});

test("a huge command costs a bounded amount: words and length are capped, a cut word is dropped", () => {
  const many = Array.from({ length: MAX_SHELL_WORDS * 3 }, (_, i) => `f${i}`).join(" ");
  const words = readShellCommand(`cat ${many}`).flatMap(({ uses }) => uses);
  assert.ok(words.length <= MAX_SHELL_WORDS, `${words.length} words`);
  const long = `cat ${"a/".repeat(MAX_SHELL_COMMAND_CHARS)}x.ts`;
  assert.deepEqual(named(long), []);
  assert.deepEqual(readShellCommand("$(".repeat(10_000)), []);
});

test('/lazy-agents why "<command>" on a command without words says that no command words were found', () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t, { hasUI: true });
    await h.command("lazy-agents", 'why "# only a comment"');
    assert.deepEqual(h.notifications.at(-1)!.split("\n"), [
      'pi-lazy-agents: why "# only a comment"',
      "  No command words were found.",
    ]);
  }));

test("a parameter expansion nested in another ends at its own brace, with the words inside it", () =>
  withTree(tree, async (t) => {
    const h = await loadRunner(t);
    const result = await h.call("bash", { command: "echo ${A:-${B} docs }" });
    assert.equal(reminderOf(result.content), undefined);
  }));

test("env -C and --chdir name the folder the command runs in", () =>
  withTree({ ...tree, "lib/util.ts": "export const util = 1;\n" }, async (t) => {
    const h = await loadRunner(t);
    const lib = await h.call("bash", { command: "env -C lib cat util.ts" });
    assert.match(reminderOf(lib.content) ?? "", /LIB-RULES/);
    const docs = await h.call("bash", { command: "env --chdir=docs CI=1 cat guide.md" });
    assert.match(reminderOf(docs.content) ?? "", /DOCS-RULES/);
  }));

test('/lazy-agents why "<command>" names why a folder stopped a word: ignored by git, or by name', () =>
  twoTrees({ ...tree, ".gitignore": "gen/\n", "gen/AGENTS.md": "GEN-RULES", "gen/z.ts": "z\n" }, async (t, kind) => {
    const h = await loadRunner(t, { hasUI: true });
    await h.command("lazy-agents", 'why "cat gen/z.ts node_modules/dep/index.js"');
    const report = h.notifications.at(-1)!;
    assert.match(report, /node_modules\/dep\/index\.js \(node_modules\/: inside an ignored directory\)/);
    if (kind === "git repository") assert.match(report, /gen\/z\.ts \(gen\/: ignored by git\)/);
    else assert.match(report, /gen\/\*\* \(gen\/AGENTS\.md, pending\): gen\/z\.ts activates/);
  }));

test('/lazy-agents why "<command>" names a folder it cannot read and a skills tree where they stop a word, and the folders read below', () =>
  twoTrees(
    {
      "a/AGENTS.md": "A-RULES",
      "a/b/AGENTS.md": "B-RULES",
      "a/b/c/AGENTS.md": "C-RULES",
      "a/b/c/x.ts": "x\n",
      "a/.agents/skills/sk/SKILL.md": "---\nname: sk\ndescription: SK\n---\nbody\n",
    },
    async (t) => {
      const fs = interceptFileSystem((call, proceed) => {
        if (call.method === "lstat" && call.path === t.abs("a/b")) throw fsError("EIO", call.method, call.path);
        return proceed();
      });
      const h = await loadRunner(t, { hasUI: true, factories: [createLazyAgents({ fs })] });
      await h.command("lazy-agents", 'why "cat a/b/c/x.ts a/.agents/skills/sk/SKILL.md"');
      assert.deepEqual(h.notifications.at(-1)!.split("\n").slice(1), [
        "  a/** (a/AGENTS.md, pending): a/b/c/x.ts activates, a/.agents/skills/sk/SKILL.md activates",
        "  a/b/c/** (a/b/c/AGENTS.md, pending): a/b/c/x.ts activates",
        "  a/.agents/** (no instruction file): a/.agents/skills/sk/SKILL.md activates",
        "  ignored: cat (a command name), a/b/c/x.ts (a/b/: could not be read), a/.agents/skills/sk/SKILL.md (a/.agents/skills/: a skills tree, whose folders are skill content, not scopes)",
      ]);
    },
  ));

test('/lazy-agents why "<command>" names the instruction file a folder refused, not "no instruction file"', () =>
  twoTrees({ "a/x.ts": "x\n" }, async (t) => {
    writeFileSync(join(t.root, "outside.md"), "OUTSIDE\n");
    t.link("a/AGENTS.md", join(t.root, "outside.md"));
    const h = await loadRunner(t, { hasUI: true });
    await h.command("lazy-agents", 'why "cat a/x.ts"');
    assert.deepEqual(h.notifications.at(-1)!.split("\n").slice(1), [
      "  a/** (not used: a/AGENTS.md: a link that leads outside the working directory): a/x.ts activates",
      "  ignored: cat (a command name)",
    ]);
  }));

test('/lazy-agents why "<command>" does not call a file directly in cwd the working directory itself', () =>
  withTree({ ...tree, "README.md": "readme\n" }, async (t) => {
    const h = await loadRunner(t, { hasUI: true });
    await h.command("lazy-agents", 'why "cat README.md ."');
    assert.deepEqual(h.notifications.at(-1)!.split("\n").slice(1), [
      "  ignored: cat (a command name), README.md (the working directory or directly in it, whose AGENTS.md Pi loads), . (the working directory or directly in it, whose AGENTS.md Pi loads)",
    ]);
  }));
