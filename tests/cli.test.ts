// Smoke test of the real `pi` binary from node_modules, with the scripted provider of tests/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
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

test("pi -e ./index.ts delivers the nested file to the model", () =>
  withTree(files, (tree) => {
    const out = run(tree, ["-e", join(ROOT, "index.ts")]);
    assert.match(out, /received 1 reminder/);
    assert.match(out, /<instructions path="src\/AGENTS.md" scope="src\/\*\*">\nCLI-SRC-RULES/);
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
