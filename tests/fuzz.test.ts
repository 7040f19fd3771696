// CONTRIBUTING.md "Reliability": differential fuzzing against the reference model, never outside cwd.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createLazyAgents } from "../index.ts";
import { describeFailure, fuzz, generateCase, noGit, runCase, shrink, type Case, type Stats } from "./fuzz-lib.ts";
import type { FsCall } from "./fs-seam.ts";
import { canLockFiles, loadRunner, reminderOf, withTree } from "./harness.ts";

const CASES = 200;

const SEED = 1;

test(`differential fuzz: ${CASES} seeded cases agree with the reference model, and nothing outside cwd is touched`, async () => {
  const stats: Stats = {};
  const report = await fuzz(SEED, CASES, { stats });
  assert.equal(report, undefined, report);
  // A fuzzer that exercises nothing must not pass quietly.
  for (const key of [
    "delivered",
    "delivered:supersedes",
    "delivered:via-read",
    "retracted",
    "skills",
    "refused:tooLarge",
    "refused:notUtf8",
    "refused:symlinkEscape",
    "fault",
    "refused:unreadable",
    "step:batch",
    "step:compact",
    "call:failed",
    ...(canLockFiles() ? ["call:write-failed-on-instruction"] : []),
    "call:bash",
    "bash:activated",
  ]) {
    assert.ok((stats[key] ?? 0) > 0, `the corpus never exercised ${key}: ${JSON.stringify(stats)}`);
  }
});

const GIT_CASES = 40;

test(`differential fuzz in a git repository: ${GIT_CASES} seeded cases agree with the reference model`, async () => {
  const report = await fuzz(SEED, GIT_CASES, { git: true });
  assert.equal(report, undefined, report);
  // A batch whose first result waits a second round for git, while a sibling plans at once: the model must replay
  // them in the order they were planned, not the order their promises resolved.
  const planned = await fuzz(4865, 1, { git: true });
  assert.equal(planned, undefined, planned);
});

test("the reference model agrees that an unreadable skill file costs only its own skill, whatever the folder order", async () => {
  // Seed 20261611: a skills tree whose loose skill file fails with EIO, listed before a folder with a SKILL.md.
  for (const git of [false, true]) {
    const report = await fuzz(20261611, 1, { git });
    assert.equal(report, undefined, report);
  }
});

test("a failing case is reported with its seed, a minimal reproduction and the replay command", async () => {
  // A case that passes, played again with a read fault the model does not know of: a bug to find.
  const c: Case = {
    seed: 4242,
    entries: [
      { kind: "file", path: "src/f.ts", content: "f\n" },
      { kind: "file", path: "src/AGENTS.md", content: "\uFEFF\uFEFFTWO-BOMS\n" },
      { kind: "file", path: "lib/AGENTS.md", content: "UNRELATED\n" },
      { kind: "file", path: "lib/f.ts", content: "f\n" },
    ],
    steps: [
      { op: "call", call: { tool: "read", path: "lib/f.ts" } },
      { op: "put", path: "lib/CLAUDE.md", content: "NOISE\n" },
      { op: "call", call: { tool: "read", path: "src/f.ts" } },
      { op: "reload" },
    ],
  };
  assert.equal(await runCase(c), undefined, "the case passes as it is");
  const options = { sabotage: (call: FsCall) => call.method === "open" && call.path.endsWith("/src/AGENTS.md") };
  const failure = await runCase(c, options);
  assert.ok(failure, "the fault the model does not know of is found");
  const minimal = await shrink(c, failure, options);
  assert.equal(minimal.case.steps.length, 1, "only the read of src/f.ts is left");
  assert.deepEqual(
    minimal.case.entries.map((entry) => entry.path),
    ["src/f.ts", "src/AGENTS.md"],
  );
  const report = describeFailure(failure, minimal);
  assert.match(report, /fuzz case failed: seed 4242, step 2/);
  assert.match(report, /\\ufeff\\ufeffTWO-BOMS/, "invisible characters are escaped");
  assert.match(report, /replay: bun run fuzz -- --seed 4242 --cases 1/);
});

test("the generator is deterministic: one seed, one case", () => {
  assert.deepEqual(generateCase(77), generateCase(77));
  assert.notDeepEqual(generateCase(77), generateCase(78));
});

// ---------------------------------------------------------------------------------------------
// Bugs the fuzzer found.

test("a second BOM at the start of an instruction file is kept as text", () =>
  withTree({ "src/AGENTS.md": "\uFEFF\uFEFFTWO-BOMS\n", "src/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: noGit })] });
    const reminder = reminderOf((await h.call("read", { path: "src/a.ts" })).content) ?? "";
    assert.match(reminder, />\n\uFEFFTWO-BOMS\n<\/file>/, "one BOM dropped, the second one is content");
  }));

test("writing an instruction file into a new folder directly below cwd counts as its delivery, rules on or off", async () => {
  for (const rules of [true, false]) {
    await withTree({ "f.ts": "root" }, async (tree) => {
      const factories = [createLazyAgents({ spawnGit: noGit })];
      const h = await loadRunner(tree, { factories, settings: { lazyAgents: { rules } } });
      const written = await h.call("write", { path: "pkg/AGENTS.md", content: "WRITTEN-RULES\n" });
      assert.deepEqual(written.content, written.original, "the model wrote it: no copy appended");
      const record = (written.details as { lazyAgents?: { files: Array<{ path: string; via: string }> } }).lazyAgents;
      assert.deepEqual(
        record?.files.map((file) => [file.path, file.via]),
        [["pkg/AGENTS.md", "read"]],
        "recorded as delivered",
      );
      const next = await h.call("write", { path: "pkg/a.ts", content: "a" });
      assert.equal(reminderOf(next.content), undefined, "not sent back to the model that wrote it");
    });
  }
});
