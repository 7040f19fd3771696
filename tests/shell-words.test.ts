// The shell-word reader: which words of a bash command name paths, and against which directory.
// A pure function, so its cases are a table of real command shapes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_SHELL_COMMAND_CHARS, MAX_SHELL_WORDS } from "../config.ts";
import { readShellCommand } from "../index.ts";

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
  // Tool directory options.
  ["git -C packages/api status", ["read:packages/api", "read:packages/api/status"]],
  [
    "git -C packages/api diff -- src/x.ts",
    ["read:packages/api", "read:packages/api/diff", "read:packages/api/src/x.ts"],
  ],
  ["make -C services/auth test", ["read:services/auth", "read:services/auth/test"]],
  ["make --directory=services/auth", ["read:services/auth"]],
  ["npm --prefix web run build", ["read:web", "read:web/run", "read:web/build"]],
  ["npm --prefix=web test", ["read:web", "read:web/test"]],
  ["pnpm -C packages/ui test", ["read:packages/ui", "read:packages/ui/test"]],
  ["pnpm --dir packages/ui lint", ["read:packages/ui", "read:packages/ui/lint"]],
  ["yarn --cwd apps/site build", ["read:apps/site", "read:apps/site/build"]],
  ["cargo test --manifest-path crates/core/Cargo.toml", ["read:test", "read:crates/core/Cargo.toml"]],
  // Outside, home, and absolute paths are named; activation refuses them.
  ["cat ../outside/x.ts ~/notes.md /etc/passwd", ["read:../outside/x.ts", "read:~/notes.md", "read:/etc/passwd"]],
];

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
