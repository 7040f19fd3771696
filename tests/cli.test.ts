// README "Install" and CONTRIBUTING.md: the real pi binary loads the package, and ./dev on a fresh machine.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  readFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join, resolve, delimiter } from "node:path";
import { tmpdir } from "node:os";
import { withTree, type Tree } from "./harness.ts";

const ROOT = resolve(import.meta.dirname, "..");

const PI_CLI = join(ROOT, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js");

const PROVIDER = join(ROOT, "tests", "scripted-provider.ts");

const SCRIPT = JSON.stringify([[["read", { path: "src/a.ts" }]]]);

function pi(tree: Tree, args: string[]): string {
  return execFileSync(process.execPath, [PI_CLI, ...args], {
    cwd: tree.cwd,
    env: { ...process.env, PI_CODING_AGENT_DIR: tree.agentDir, LAZY_AGENTS_SCRIPT: SCRIPT },
    encoding: "utf8",
    timeout: 60_000,
  });
}

const run = (tree: Tree, extensionArgs: string[]) =>
  pi(tree, ["-p", ...extensionArgs, "-e", PROVIDER, "--provider", "scripted", "--model", "scripted-model", "go"]);

const files = { "src/AGENTS.md": "CLI-SRC-RULES", "src/a.ts": "a\n" };

const DEV = resolve(import.meta.dirname, "..", "dev");

test("pi -e ./index.ts delivers the nested file to the model", () =>
  withTree(files, (tree) => {
    const out = run(tree, ["-e", join(ROOT, "index.ts")]);
    assert.match(out, /received 1 reminder/);
    assert.match(out, /<file path="src\/AGENTS.md">\nCLI-SRC-RULES/);
  }));

test("pi -e <checkout dir> loads the package manifest", () =>
  withTree(files, (tree) => {
    assert.match(run(tree, ["-e", ROOT]), /CLI-SRC-RULES/);
  }));

test("pi install <local path> makes it load without -e", () =>
  withTree(files, (tree) => {
    pi(tree, ["install", ROOT]);
    assert.match(readFileSync(join(tree.agentDir, "settings.json"), "utf8"), /"packages"/);
    assert.match(run(tree, []), /CLI-SRC-RULES/);
  }));

test("a build installs as CONTRIBUTING.md says: npm pack, unpack into a folder, pi install -l that folder", () =>
  withTree(files, (tree) => {
    const build = join(tree.root, "build");
    const unpacked = join(tree.root, "pi-lazy-agents");
    mkdirSync(build);
    mkdirSync(unpacked);
    execFileSync("npm", ["pack", "--silent", "--pack-destination", build], { cwd: ROOT, encoding: "utf8" });
    const [tarball] = readdirSync(build).filter((name) => name.endsWith(".tgz"));
    assert.ok(tarball, "npm pack made a tarball");
    execFileSync("tar", ["-xzf", join(build, tarball), "-C", unpacked, "--strip-components=1"]);
    // A temp HOME as well as a temp agent dir: nothing of this machine's Pi is read or written.
    const env = { ...process.env, HOME: tree.root, PI_CODING_AGENT_DIR: tree.agentDir, LAZY_AGENTS_SCRIPT: SCRIPT };
    const cli = (args: string[]) =>
      execFileSync(process.execPath, [PI_CLI, ...args], { cwd: tree.cwd, env, encoding: "utf8", timeout: 60_000 });
    cli(["install", "-l", unpacked]);
    assert.match(readFileSync(join(tree.cwd, ".pi", "settings.json"), "utf8"), /pi-lazy-agents/);
    const out = cli(["--approve", "-p", "-e", PROVIDER, "--provider", "scripted", "--model", "scripted-model", "go"]);
    assert.match(out, /<file path="src\/AGENTS.md">\nCLI-SRC-RULES/, "the installed build loaded and delivered");
  }));

test("./dev says in one line which registry it could not reach, without npm's output", () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-agents-dev-"));
  try {
    copyFileSync(DEV, join(dir, "dev"));
    writeFileSync(join(dir, "package.json"), "{}");
    // Only the machine's own node and npm, as on a fresh clone: no .tools of this checkout.
    const path = (process.env.PATH ?? "")
      .split(delimiter)
      .filter((entry) => !entry.includes(".tools"))
      .join(delimiter);
    const run = spawnSync("bash", ["./dev", "true"], {
      cwd: dir,
      env: { ...process.env, PATH: path, npm_config_registry: "http://127.0.0.1:9/", npm_config_fetch_retries: "0" },
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(run.status, 1);
    const lines = run.stderr.trim().split("\n");
    assert.equal(lines.length, 2, run.stderr);
    assert.match(lines[0] ?? "", /^dev: installing bun@[\d.]+ and node@\d+ from npm into \.tools\/$/);
    assert.match(
      lines[1] ?? "",
      /^dev: npm install bun@[\d.]+ node@\d+ could not reach http:\/\/127\.0\.0\.1:9\/; check the network or proxy .* and run \.\/dev again \(details: \S+\)$/,
    );
    const log = /\(details: (\S+)\)$/.exec(lines[1] ?? "")?.[1] ?? "";
    assert.ok(existsSync(log), "the log keeps npm's own output");
    rmSync(log, { force: true });
    assert.equal(run.stdout, "");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the README stays a user's page: at most 12 KB, and every file it links to exists", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  assert.ok(Buffer.byteLength(readme) <= 12 * 1024, `${Buffer.byteLength(readme)} bytes`);
  const links = [...readme.matchAll(/\]\(((?:docs\/|CONTRIBUTING|CHANGELOG)[^)#]*)/g)].map((match) => match[1]!);
  assert.ok(links.length >= 5, links.join(", "));
  for (const link of links) assert.ok(existsSync(join(ROOT, link)), link);
});
