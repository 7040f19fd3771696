// README "What you see": the real pi TUI in tmux shows one notification a turn, the status line and the report.

import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { hasTmux, startTui } from "./tmux.ts";

const ROOT = resolve(import.meta.dirname, "..");

test("in the real TUI, three parallel reads give one notification naming all they loaded; status, notification and report count alike", async () => {
  // .ci/run installs tmux when it is missing; a machine without it fails here rather than passing unseen.
  assert.ok(hasTmux(), "tmux is needed for the TUI test: apt-get install -y tmux");
  const work = mkdtempSync(join(tmpdir(), "pi-lazy-agents-tui-"));
  const cwd = join(work, "acme");
  cpSync(join(ROOT, "example", "tree"), cwd, { recursive: true });
  mkdirSync(join(cwd, ".claude", "rules"), { recursive: true });
  writeFileSync(join(cwd, ".claude", "rules", "ts.md"), '---\npaths: "packages/api/**/*.ts"\n---\nAPI-TS-RULE\n');
  const reads = [
    "packages/api/src/server.ts",
    "packages/web/src/components/button.tsx",
    "node_modules/left-pad/index.js",
  ];
  const tui = await startTui({ work, cwd, script: [reads.map((path) => ["read", { path }])], cols: 220, rows: 60 });
  try {
    await tui.submit("Review the button and the server");
    const counts = "3 files · 1 rule · 1 skill";
    const after = await tui.waitFor(["Done.", `lazy-agents: ${counts}`]);
    const notices = after.split("\n").filter((line) => line.includes("pi-lazy-agents: loaded"));
    assert.equal(notices.length, 1, after);
    assert.match(notices[0]!, new RegExp(`loaded ${counts}: `));
    for (const path of ["packages/api/AGENTS.md", "packages/web/AGENTS.md", ".claude/rules/ts.md", "ui-review"]) {
      assert.ok(after.includes(path), `${path} named on screen:\n${after}`);
    }
    assert.doesNotMatch(after, /nested: |file\(s\)/);
    await tui.submit("/lazy-agents");
    const report = await tui.waitFor(["Instruction files and imports (3):", `Delivered in this context: ${counts}.`]);
    assert.match(report, /Rules \(1\):/);
    assert.match(report, /Nested skills \(1\):/);
    assert.doesNotMatch(report, /\(0\):|\(s\)|version [0-9a-f]{8}/, report);
    await tui.submit("/lazy-agents --verbose");
    await tui.waitFor(["version "]);
    await tui.submit("/lazy-agents help");
    await tui.waitFor(['/lazy-agents why "<command>"']);
  } finally {
    tui.close();
    rmSync(work, { recursive: true, force: true });
  }
});
