// docs/safety.md (never throws into Pi) and docs/limits.md (I/O errors): faults leave the tool's result intact.

import { test } from "node:test";
import assert from "node:assert/strict";
import { utimesSync, unlinkSync, writeFileSync, appendFileSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, nodeFileSystem, type FileSystem } from "../index.ts";
import { FAILURE_LABELS, FAILURE_WARNING, REASONS, REPORT_FAILED, SETTINGS_KEY } from "../config.ts";
import {
  loadRunner,
  reminderOf,
  stderrOf,
  textOf,
  twoTrees,
  withTree,
  type CallResult,
  type RunnerHarness,
  type Tree,
} from "./harness.ts";
import { fsError, interceptFileSystem, type FsCall, type FsMethod } from "./fs-seam.ts";
import { noGit } from "./fuzz-lib.ts";
import { chain } from "./fixtures.ts";

const skill = "---\nname: sk\ndescription: SKILL-DESCRIPTION\n---\nbody\n";

const files = {
  "a/AGENTS.md": "A-RULES\n",
  "a/b/AGENTS.md": "B-RULES\n",
  "a/b/x.ts": "export const x = 1;\n",
  "a/b/.agents/skills/sk/SKILL.md": skill,
};

const FIXED_WARNING = new RegExp(
  `^pi-lazy-agents: [^/\\s][^\\s]* was not loaded: (${Object.values(REASONS)
    .map((r) => r.replace(/[()]/g, "\\$&"))
    .join("|")})$`,
);

interface Faulty {
  h: RunnerHarness;
  errors: string[];
  /** Turns the fault on or off. */
  active: { on: boolean };
  /** How often the fault fired. */
  fired: { count: number };
}

/** A runner whose filesystem fails `method` on paths that `matches`, while `active.on`; with `git`, git answers. */
async function faultyRunner(
  tree: Tree,
  fault: (call: FsCall, proceed: () => unknown) => unknown,
  matches: (call: FsCall) => boolean,
  extra: ExtensionFactory[] = [],
  { git = false, hasUI = true } = {},
): Promise<Faulty> {
  const active = { on: true };
  const fired = { count: 0 };
  const fs: FileSystem = interceptFileSystem((call, proceed) => {
    if (!active.on || !matches(call)) return proceed();
    fired.count++;
    return fault(call, proceed);
  }, nodeFileSystem);
  const h = await loadRunner(tree, {
    hasUI,
    factories: [createLazyAgents({ fs, ...(!git && { spawnGit: noGit }) }), ...extra],
  });
  const errors: string[] = [];
  h.runner.onError((error) => errors.push(error.error));
  return { h, errors, active, fired };
}

/** The tool's own content is untouched, and whatever was added is one reminder block at the end. */
function assertIntact(result: CallResult): void {
  const own = reminderOf(result.content) === undefined ? result.content : result.content.slice(0, -1);
  assert.deepEqual(own, result.original, "the tool's own content is intact byte for byte");
}

/** At most one refusal warning, fixed wording, no absolute path, no exception text. */
function assertOneFixedWarning(tree: Tree, f: Faulty, result: CallResult): void {
  const warnings = f.h.notifications.filter((n) => n.includes("was not loaded"));
  assert.ok(warnings.length <= 1, `at most one warning: ${JSON.stringify(warnings)}`);
  const notices = (reminderOf(result.content) ?? "").split("\n").filter((line) => / was not loaded: /.test(line));
  assert.ok(notices.length <= 1, `at most one notice line: ${JSON.stringify(notices)}`);
  for (const text of [...warnings, ...notices]) {
    assert.doesNotMatch(text, /EACCES|EIO|ENAMETOOLONG|ELOOP|ENOENT|Error|denied|i\/o error|too many/);
    assert.ok(!text.includes(tree.root), "no absolute path");
  }
  for (const warning of warnings) assert.match(warning, FIXED_WARNING);
  assert.deepEqual(f.errors, [], "nothing threw into Pi");
}

const CODES = ["EACCES", "EIO", "ENAMETOOLONG", "ELOOP"] as const;

/**
 * Where a fault hits: the instruction file of a/b, its folder, its skills folder. Each site is a
 * call the extension really makes; a fault that never fires fails the test.
 */
const SITES: Array<{ name: string; method: FsMethod; path: string }> = [
  { name: "lstat of the instruction file", method: "lstat", path: "a/b/AGENTS.md" },
  { name: "lstat of its folder", method: "lstat", path: "a/b" },
  { name: "open of the instruction file", method: "open", path: "a/b/AGENTS.md" },
  { name: "fstat of the instruction file", method: "fstat", path: "a/b/AGENTS.md" },
  { name: "read of the instruction file", method: "read", path: "a/b/AGENTS.md" },
  { name: "close of the instruction file", method: "close", path: "a/b/AGENTS.md" },
  { name: "lstat of its skills folder", method: "lstat", path: "a/b/.agents/skills" },
  { name: "readdir of its skills folder", method: "readdir", path: "a/b/.agents/skills" },
];

/** Failures that a retry may not see: a transient read error must not stick in a cache. */
const STICKY = new Set(["open", "fstat", "read"]);

/** A runner whose filesystem throws `code` on `method` of the given cwd-relative paths while `on`. */
async function passingFault(
  tree: Tree,
  code: string,
  sites: Array<{ method: FsMethod; path: string }>,
  options?: { git?: boolean; hasUI?: boolean },
) {
  return faultyRunner(
    tree,
    (call) => {
      throw fsError(code, call.method, call.path);
    },
    (call) => sites.some((site) => call.method === site.method && call.path === tree.abs(site.path)),
    [],
    options,
  );
}

test("unusable path arguments leave the result untouched and never throw", () =>
  withTree(chain, async (tree) => {
    const h = await loadRunner(tree);
    for (const path of [42, "", "\0", "src/\0x", "x".repeat(5000), "~", null]) {
      const result = await h.call("read", { path });
      assert.deepEqual(result.content, result.original, String(path).slice(0, 20));
    }
  }));

test("a hook that fails leaves the tool alone, is counted in /lazy-agents under a fixed label, and warns once", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n", "pkg/b.ts": "b\n" }, async (tree) => {
    const broken = createLazyAgents({
      onEngine: (engine) => {
        engine.onToolCall = () => {
          throw new Error(`${tree.cwd}/pkg/AGENTS.md: BOOM`);
        };
        engine.onToolResult = () => {
          throw new Error("BOOM");
        };
      },
    });
    const h = await loadRunner(tree, { hasUI: true, factories: [broken] });
    for (const path of ["pkg/a.ts", "pkg/b.ts"]) {
      const result = await h.call("read", { path });
      assert.equal(result.blocked, false);
      assert.equal(result.isError, false);
      assert.deepEqual(result.content, result.original, "the tool's own result is intact");
    }
    assert.deepEqual(h.notifications, [FAILURE_WARNING], "one fixed warning, no exception text");
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1)!;
    assert.match(report, new RegExp(`${FAILURE_LABELS.toolCall}: 2`));
    assert.match(report, new RegExp(`${FAILURE_LABELS.toolResult}: 2`));
    assert.doesNotMatch(report, /BOOM/);
  }));

test("a bug while building /lazy-agents is counted under its label and warned once, the report replaced by a fixed line", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/a.ts": "a\n" }, async (tree) => {
    const broken = createLazyAgents({
      onEngine: (engine) => {
        const values = engine.inspection.values.bind(engine.inspection);
        let once = true;
        engine.inspection.values = () => {
          if (!once) return values();
          once = false;
          throw new TypeError(`${tree.cwd}: BOOM`);
        };
      },
    });
    const h = await loadRunner(tree, { hasUI: true, factories: [broken] });
    await h.call("read", { path: "pkg/a.ts" });
    const before = h.notifications.length;
    await h.command("lazy-agents", "--verbose");
    assert.deepEqual(h.notifications.slice(before), [FAILURE_WARNING, REPORT_FAILED]);
    await h.command("lazy-agents", "");
    const report = h.notifications.at(-1)!;
    assert.match(report, new RegExp(`${FAILURE_LABELS.report}: 1`));
    assert.doesNotMatch(report, /BOOM/);
  }));

test("a bug in the file layer is counted as the extension's failure, not shown as a file that could not be read", async () => {
  const methods: FsMethod[] = ["lstat", "readdir", "open", "fstat", "read", "close"];
  for (const method of methods) {
    await withTree({ "pkg/AGENTS.md": "PKG-RULES\n", "pkg/a.ts": "a\n" }, async (tree) => {
      const paths = [tree.abs("pkg"), tree.abs("pkg/AGENTS.md")];
      const f = await faultyRunner(
        tree,
        () => {
          f.active.on = false; // once: one bug, one failure
          throw new TypeError("Cannot read properties of undefined (reading 'size')");
        },
        (call) => call.method === method && paths.includes(call.path),
      );
      const result = await f.h.call("read", { path: "pkg/a.ts" });
      assert.equal(f.fired.count, 1, `${method}: the fault fired`);
      assert.deepEqual(result.content.slice(0, result.original.length), result.original, `${method}: result intact`);
      assert.doesNotMatch(textOf(result.content), /not loaded|could not be read/, `${method}: no notice for the model`);
      const warnings = f.h.notifications.filter((n) => !n.startsWith("pi-lazy-agents: loaded "));
      assert.deepEqual(warnings, [FAILURE_WARNING], `${method}: one fixed warning`);
      await f.h.call("read", { path: "pkg/a.ts" });
      await f.h.command("lazy-agents", "");
      const report = f.h.notifications.at(-1)!;
      const counted = [...report.matchAll(/^ {2}(.+): (\d+)$/gm)].filter(([, label]) =>
        (Object.values(FAILURE_LABELS) as string[]).includes(label!),
      );
      assert.deepEqual(
        counted.map(([, , count]) => count),
        ["1"],
        `${method}: one failure, under its label: ${report}`,
      );
      assert.doesNotMatch(report, /Cannot read|could not be read/, `${method}: no exception text`);
      assert.deepEqual(f.errors, [], `${method}: nothing reached Pi`);
    });
  }
});

for (const site of SITES) {
  for (const code of CODES) {
    const sticky = STICKY.has(site.method);
    test(`${code} on the ${site.name}: result intact, one fixed warning at most, picked up once it clears${sticky ? " (the error is not cached)" : ""}`, () =>
      withTree(files, async (tree) => {
        const f = await faultyRunner(
          tree,
          (call) => {
            throw fsError(code, call.method, call.path);
          },
          (call) => call.method === site.method && call.path === tree.abs(site.path),
        );
        const during = await f.h.call("read", { path: "a/b/x.ts" });
        assert.ok(f.fired.count > 0, `the fault never fired: no ${site.method} call on ${site.path}`);
        assertIntact(during);
        assertOneFixedWarning(tree, f, during);
        f.active.on = false;
        const after = await f.h.call("read", { path: "a/b/x.ts" });
        assertIntact(after);
        const seen = [reminderOf(during.content) ?? "", reminderOf(after.content) ?? ""].join("\n");
        assert.match(seen, /B-RULES/, "the instruction file is delivered once the fault clears");
        assert.match(seen, /SKILL-DESCRIPTION/, "and so is the skill");
        assert.equal(seen.split("B-RULES").length - 1, 1, "exactly once");
      }));
  }
}

for (const site of [
  { method: "lstat", path: "a/b/AGENTS.md" },
  { method: "lstat", path: "a/b" },
] as const) {
  test(`an EIO on the ${site.method} of ${site.path} does not cost the folders above it their delivery`, () =>
    withTree(files, async (tree) => {
      const f = await faultyRunner(
        tree,
        (call) => {
          throw fsError("EIO", call.method, call.path);
        },
        (call) => call.method === site.method && call.path === tree.abs(site.path),
      );
      const during = await f.h.call("read", { path: "a/b/x.ts" });
      assert.ok(f.fired.count > 0, `the fault never fired: no ${site.method} call on ${site.path}`);
      assertIntact(during);
      assert.match(reminderOf(during.content) ?? "", /A-RULES/, "a's file still arrives");
    }));
}

/** The user's warnings: every notification but the turn's "loaded" line. */
function warningsOf(h: RunnerHarness): string[] {
  return h.notifications.filter((n) => !n.startsWith("pi-lazy-agents: loaded "));
}

test("a folder on the way that cannot be read is told to the user once, in one fixed line with its cwd-relative path; the model's text is unchanged and the folders around it still count", () =>
  twoTrees(
    { "a/AGENTS.md": "A-RULES\n", "a/b/AGENTS.md": "B-RULES\n", "a/b/c/AGENTS.md": "C-RULES\n", "a/b/c/x.ts": "x\n" },
    async (tree, kind) => {
      const f = await passingFault(tree, "EIO", [{ method: "lstat", path: "a/b" }], { git: true });
      const during = await f.h.call("read", { path: "a/b/c/x.ts" });
      assert.ok(f.fired.count > 0, `${kind}: the fault fired`);
      assertIntact(during);
      const reminder = reminderOf(during.content) ?? "";
      assert.match(reminder, /A-RULES[^]*C-RULES/, kind);
      assert.doesNotMatch(reminder, /B-RULES|not loaded|could not be read/, `${kind}: nothing new for the model`);
      assert.deepEqual(warningsOf(f.h), ["pi-lazy-agents: a/b was not loaded: could not be read"], kind);
      await f.h.call("read", { path: "a/b/c/x.ts" });
      await f.h.call("bash", { command: "cat a/b/c/x.ts" });
      assert.equal(warningsOf(f.h).length, 1, `${kind}: told once: ${JSON.stringify(warningsOf(f.h))}`);
      f.active.on = false;
      const after = await f.h.call("read", { path: "a/b/c/x.ts" });
      assert.match(reminderOf(after.content) ?? "", /B-RULES/, `${kind}: picked up once it clears`);
      assert.equal(warningsOf(f.h).length, 1, kind);
      assert.ok(!f.h.notifications.includes(FAILURE_WARNING), `${kind}: an I/O error is not the extension's failure`);
      // Without a UI the model is still not told, so the user hears of it where Pi's print mode shows warnings.
      const headless = await stderrOf(async () => {
        const g = await passingFault(tree, "EIO", [{ method: "lstat", path: "a/b" }], { git: true, hasUI: false });
        await g.h.call("read", { path: "a/b/c/x.ts" });
      });
      assert.equal(headless, "pi-lazy-agents: a/b was not loaded: could not be read\n", kind);
    },
  ));

test("a folder named like an instruction file that cannot be read is told to the user once, not as a file and again as a folder", () =>
  twoTrees({ "a/AGENTS.md/x.ts": "x\n" }, async (tree, kind) => {
    const f = await passingFault(tree, "EIO", [{ method: "lstat", path: "a/AGENTS.md" }], { git: true });
    await f.h.call("read", { path: "a/AGENTS.md/x.ts" });
    assert.ok(f.fired.count > 0, `${kind}: the fault fired`);
    assert.deepEqual(warningsOf(f.h), ["pi-lazy-agents: a/AGENTS.md was not loaded: could not be read"], kind);
  }));

for (const site of [
  {
    name: "a skill file",
    method: "open",
    path: "a/.agents/skills/s\nk/SKILL.md",
    shown: "a/.agents/skills/s\\nk/SKILL.md",
  },
  { name: "a skills folder", method: "readdir", path: "a/.agents/skills", shown: "a/.agents/skills" },
] as const) {
  test(`${site.name} that cannot be read is told to the user once, in one fixed line with its escaped cwd-relative path; the model's text is unchanged`, () =>
    twoTrees(
      {
        "a/AGENTS.md": "A-RULES\n",
        "a/x.ts": "x\n",
        "a/.agents/skills/s\nk/SKILL.md": "---\nname: sk\ndescription: SK-DESCRIPTION\n---\nbody\n",
      },
      async (tree, kind) => {
        const f = await passingFault(tree, "EIO", [site], { git: true });
        const during = await f.h.call("read", { path: "a/x.ts" });
        assert.ok(f.fired.count > 0, `${kind}: the fault fired`);
        assertIntact(during);
        const reminder = reminderOf(during.content) ?? "";
        assert.match(reminder, /A-RULES/, kind);
        assert.doesNotMatch(
          reminder,
          /SK-DESCRIPTION|not loaded|could not be read/,
          `${kind}: nothing new for the model`,
        );
        assert.deepEqual(warningsOf(f.h), [`pi-lazy-agents: ${site.shown} was not loaded: could not be read`], kind);
        await f.h.call("read", { path: "a/x.ts" });
        assert.equal(warningsOf(f.h).length, 1, `${kind}: told once: ${JSON.stringify(warningsOf(f.h))}`);
        f.active.on = false;
        assert.match(reminderOf((await f.h.call("read", { path: "a/x.ts" })).content) ?? "", /SK-DESCRIPTION/, kind);
        assert.equal(warningsOf(f.h).length, 1, kind);
      },
    ));
}

// Two filesystem calls outside the folders below cwd: cwd's own lstat (its rule homes), and the stat that tells whether
// a search tool's target reached through a link is a folder. An I/O error on either is the filesystem's, not a bug.
test("an EIO on the lstat of cwd itself costs no delivery: the folders' files and cwd's rules still arrive, and nothing is counted as a failure", () =>
  twoTrees({ ...files, ".claude/rules/r.md": "---\npaths:\n  - a/**\n---\nRULE-TEXT\n" }, async (tree, kind) => {
    let fired = 0;
    const fs = interceptFileSystem((call, proceed) => {
      if (call.method !== "lstat" || call.path !== tree.cwd) return proceed();
      fired++;
      throw fsError("EIO", call.method, call.path);
    });
    const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs })] });
    const during = await h.call("read", { path: "a/b/x.ts" });
    assert.ok(fired > 0, `${kind}: the fault never fired: no lstat of cwd`);
    assertIntact(during);
    assert.match(reminderOf(during.content) ?? "", /B-RULES[^]*RULE-TEXT/, kind);
    assert.ok(!h.notifications.includes(FAILURE_WARNING), `${kind}: ${JSON.stringify(h.notifications)}`);
  }));

test("an EIO on the stat of a search tool's target reached through a link still delivers the files above it", () =>
  withTree({ ...files, l: { link: "a" } }, async (tree) => {
    const triggers = ["read", "edit", "write", "bash", "ls"];
    writeFileSync(join(tree.agentDir, "settings.json"), JSON.stringify({ [SETTINGS_KEY]: { triggers } }));
    const f = await faultyRunner(
      tree,
      (call) => {
        throw fsError("EIO", call.method, call.path);
      },
      (call) => call.method === "stat" && call.path === tree.abs("a/b"),
    );
    const during = await f.h.call("ls", { path: "l/b" });
    assert.ok(f.fired.count > 0, "the fault never fired: no stat of a/b");
    assertIntact(during);
    assert.match(reminderOf(during.content) ?? "", /A-RULES/);
    assert.ok(!f.h.notifications.includes(FAILURE_WARNING), JSON.stringify(f.h.notifications));
  }));

test("a file that grows past the cap between stat and read is refused once, and picked up when it shrinks", () =>
  withTree(files, async (tree) => {
    const target = tree.abs("a/b/AGENTS.md");
    const f = await faultyRunner(
      tree,
      (_call, proceed) => {
        appendFileSync(target, "g".repeat(70 * 1024));
        return proceed();
      },
      (call) => call.method === "open" && call.path === target,
    );
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    assertIntact(during);
    assertOneFixedWarning(tree, f, during);
    const reminder = reminderOf(during.content) ?? "";
    assert.match(reminder, /A-RULES/, "the rest of the chain still arrives");
    assert.match(reminder, /a\/b\/AGENTS.md was not loaded: larger than the size limit/);
    assert.doesNotMatch(reminder, /gggg/);
    f.active.on = false;
    writeFileSync(target, "B-RULES\n");
    utimesSync(target, 2_000_000_000, 2_000_000_000);
    const after = await f.h.call("read", { path: "a/b/x.ts" });
    assertIntact(after);
    assert.match(reminderOf(after.content) ?? "", /B-RULES/);
  }));

test("a file that grows past the cap while it is read (the stat still small) is refused, not cut", () =>
  withTree(files, async (tree) => {
    const target = tree.abs("a/b/AGENTS.md");
    // fstat still reports the small file; read returns a grown one, as if it grew after fstat.
    const grown = Buffer.alloc(64 * 1024 + 10, "h");
    const reads = new Map<number, number>();
    const base = nodeFileSystem;
    const fs: FileSystem = {
      ...base,
      open: (path) => {
        const fd = base.open(path);
        if (path === target) reads.set(fd, 0);
        return fd;
      },
      read: (fd, buffer, offset, length, position) => {
        if (!reads.has(fd)) return base.read(fd, buffer, offset, length, position);
        const chunk = grown.subarray(position, position + length);
        buffer.set(chunk, offset);
        return chunk.length;
      },
    };
    const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs, spawnGit: noGit })] });
    const result = await h.call("read", { path: "a/b/x.ts" });
    assertIntact(result);
    const reminder = reminderOf(result.content) ?? "";
    assert.match(reminder, /a\/b\/AGENTS.md was not loaded: larger than the size limit/);
    assert.doesNotMatch(reminder, /hhhh/);
  }));

test("a file replaced by a directory between stat and open is refused once, then picked up when it is a file again", () =>
  withTree(files, async (tree) => {
    const target = tree.abs("a/b/AGENTS.md");
    const f = await faultyRunner(
      tree,
      (_call, proceed) => {
        unlinkSync(target);
        mkdirSync(target);
        return proceed();
      },
      (call) => call.method === "open" && call.path === target,
    );
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    f.active.on = false;
    assertIntact(during);
    assertOneFixedWarning(tree, f, during);
    assert.match(reminderOf(during.content) ?? "", /A-RULES/);
    const asDirectory = await f.h.call("read", { path: "a/b/x.ts" });
    assertIntact(asDirectory);
    assert.doesNotMatch(reminderOf(asDirectory.content) ?? "", /was not loaded/, "a folder is skipped silently");
    rmSync(target, { recursive: true });
    writeFileSync(target, "B-RULES\n");
    const after = await f.h.call("read", { path: "a/b/x.ts" });
    assert.match(reminderOf(after.content) ?? "", /B-RULES/);
    assertOneFixedWarning(tree, f, after);
  }));

test("a file deleted between discovery and activation: result intact, one withdrawal, picked up when it returns", () =>
  withTree(files, async (tree) => {
    const target = tree.abs("a/b/AGENTS.md");
    let armed = true;
    // A second extension, loaded after this one, deletes the file in tool_call: after discovery,
    // before the tool runs and the result is built.
    const deleter: ExtensionFactory = (pi) => {
      pi.on("tool_call", () => {
        if (armed) unlinkSync(target);
        armed = false;
        return undefined;
      });
    };
    const f = await faultyRunner(
      tree,
      (_call, proceed) => proceed(),
      () => false,
      [deleter],
    );
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    assertIntact(during);
    assertOneFixedWarning(tree, f, during);
    const next = await f.h.call("read", { path: "a/b/x.ts" });
    assertIntact(next);
    const withdrawn = (reminderOf(next.content) ?? "").split("\n").filter((l) => l.includes("no longer applies"));
    const delivered = /B-RULES/.test(reminderOf(during.content) ?? "");
    assert.equal(withdrawn.length, delivered ? 1 : 0, "withdrawn once if it was delivered");
    writeFileSync(target, "B-RULES-AGAIN\n");
    const after = await f.h.call("read", { path: "a/b/x.ts" });
    assert.match(reminderOf(after.content) ?? "", /B-RULES-AGAIN/);
    assertOneFixedWarning(tree, f, after);
  }));

test("a file deleted between lstat and open gives one fixed warning, and is picked up when it returns", () =>
  withTree(files, async (tree) => {
    const target = tree.abs("a/b/AGENTS.md");
    const f = await faultyRunner(
      tree,
      (_call, proceed) => {
        unlinkSync(target);
        return proceed();
      },
      (call) => call.method === "open" && call.path === target,
    );
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    f.active.on = false;
    assertIntact(during);
    assertOneFixedWarning(tree, f, during);
    writeFileSync(target, "B-RULES-BACK\n");
    const after = await f.h.call("read", { path: "a/b/x.ts" });
    assert.match(reminderOf(after.content) ?? "", /B-RULES-BACK/);
  }));

test("every fault at once, on every call, never throws into Pi and never touches the tool's result", () =>
  withTree(files, async (tree) => {
    let n = 0;
    const f = await faultyRunner(
      tree,
      (call) => {
        throw fsError(CODES[n++ % CODES.length]!, call.method, call.path);
      },
      (call) => call.path !== tree.cwd,
    );
    for (const input of [
      { path: "a/b/x.ts" },
      { path: "a/b/AGENTS.md" },
      { path: "a/b/x.ts", limit: 1 },
      { path: "a/missing/deeper.ts" },
    ]) {
      const result = await f.h.call("read", input);
      assertIntact(result);
    }
    const edited = await f.h.call("edit", { path: "a/b/x.ts", edits: [{ oldText: "1", newText: "2" }] });
    assertIntact(edited);
    const written = await f.h.call("write", { path: "a/b/AGENTS.md", content: "NEW\n" });
    assertIntact(written);
    assertOneFixedWarning(tree, f, written);
  }));

for (const code of ["EIO", "EACCES", "EMFILE"]) {
  test(`${code} on opening a delivered instruction file keeps it: no withdrawal, and no second copy once it clears`, () =>
    withTree(files, async (tree) => {
      const f = await passingFault(tree, code, [{ method: "open", path: "a/b/AGENTS.md" }]);
      f.active.on = false;
      const first = await f.h.call("read", { path: "a/b/x.ts" });
      assert.match(reminderOf(first.content) ?? "", /B-RULES/);
      // Same text, new stamp: the extension must open the file again, and the open fails.
      utimesSync(tree.abs("a/b/AGENTS.md"), 2_000_000_000, 2_000_000_000);
      f.active.on = true;
      const during = await f.h.call("read", { path: "a/b/x.ts" });
      assert.ok(f.fired.count > 0, "the fault fired");
      assertIntact(during);
      assert.equal(reminderOf(during.content), undefined, "nothing is withdrawn or refused while it is unknown");
      f.active.on = false;
      const after = await f.h.call("read", { path: "a/b/x.ts" });
      assert.equal(reminderOf(after.content), undefined, "the model still holds this version: nothing is re-sent");
      assert.deepEqual(f.errors, []);
    }));
}

test("an I/O error on the preferred file name does not let the next name apply", () =>
  withTree({ ...files, "a/b/AGENTS.override.md": "OVERRIDE-RULES\n" }, async (tree) => {
    const f = await passingFault(tree, "EIO", [{ method: "open", path: "a/b/AGENTS.override.md" }]);
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    assert.ok(f.fired.count > 0, "the fault fired");
    assertIntact(during);
    const reminder = reminderOf(during.content) ?? "";
    assert.match(reminder, /A-RULES/, "the folders above still count");
    assert.doesNotMatch(reminder, /B-RULES/, "the overridden AGENTS.md does not stand in for an unreadable override");
    f.active.on = false;
    const after = reminderOf((await f.h.call("read", { path: "a/b/x.ts" })).content) ?? "";
    assert.match(after, /OVERRIDE-RULES/, "the override is delivered once it can be read");
    assert.doesNotMatch(after, /B-RULES|no longer applies/);
  }));

for (const code of ["EIO", "EACCES", "EMFILE"]) {
  test(`${code} on reading a skills folder keeps the skills the model holds`, () =>
    withTree(files, async (tree) => {
      const f = await passingFault(tree, code, [{ method: "readdir", path: "a/b/.agents/skills" }]);
      f.active.on = false;
      const first = await f.h.call("read", { path: "a/b/x.ts" });
      assert.match(reminderOf(first.content) ?? "", /SKILL-DESCRIPTION/);
      // A new stamp on the folder: the extension must list it again, and the listing fails.
      utimesSync(tree.abs("a/b/.agents/skills"), 2_000_000_000, 2_000_000_000);
      f.active.on = true;
      const during = await f.h.call("read", { path: "a/b/x.ts" });
      assert.ok(f.fired.count > 0, "the fault fired");
      assertIntact(during);
      assert.doesNotMatch(reminderOf(during.content) ?? "", /is gone/, "a skill is not withdrawn while unknown");
      f.active.on = false;
      const after = await f.h.call("read", { path: "a/b/x.ts" });
      assert.equal(reminderOf(after.content), undefined, "the model still holds the skill: nothing is re-sent");
    }));
}

test("an I/O error on a skill's own file keeps that skill", () =>
  withTree(files, async (tree) => {
    const f = await passingFault(tree, "EIO", [{ method: "open", path: "a/b/.agents/skills/sk/SKILL.md" }]);
    f.active.on = false;
    assert.match(reminderOf((await f.h.call("read", { path: "a/b/x.ts" })).content) ?? "", /SKILL-DESCRIPTION/);
    utimesSync(tree.abs("a/b/.agents/skills/sk/SKILL.md"), 2_000_000_000, 2_000_000_000);
    f.active.on = true;
    const during = await f.h.call("read", { path: "a/b/x.ts" });
    assert.ok(f.fired.count > 0, "the fault fired");
    assert.doesNotMatch(reminderOf(during.content) ?? "", /is gone/);
  }));

for (const method of ["open", "lstat"] as const) {
  test(`an I/O error on the ${method} of one skill's file costs only that skill: the other skills of its tree still arrive`, () =>
    twoTrees(
      {
        "pkg/AGENTS.md": "PKG-RULES",
        "pkg/x.ts": "x",
        ...Object.fromEntries(
          ["a", "b", "c"].map((name) => [
            `pkg/.agents/skills/${name}/SKILL.md`,
            `---\nname: ${name}\ndescription: SKILL-${name}\n---\n`,
          ]),
        ),
      },
      async (tree, mode) => {
        // Each in turn, so that one of them is listed before the others whatever the directory order.
        for (const failing of ["a", "b", "c"]) {
          const f = await passingFault(tree, "EIO", [{ method, path: `pkg/.agents/skills/${failing}/SKILL.md` }]);
          const reminder = reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.ok(f.fired.count > 0, `${mode}: the fault fired`);
          for (const name of ["a", "b", "c"].filter((name) => name !== failing))
            assert.match(reminder, new RegExp(`SKILL-${name}`), `${mode}: ${name} arrives while ${failing} fails`);
          assert.ok(
            !f.h.notifications.includes(FAILURE_WARNING),
            `${mode}: an I/O error is not the extension's failure`,
          );
        }
      },
    ));
}

for (const method of ["open", "lstat"] as const) {
  test(`an I/O error on the ${method} of a skills-tree ignore file leaves its folder unknown: what it hides stays unlisted, the rest of the tree still arrives`, () =>
    twoTrees(
      {
        "pkg/AGENTS.md": "PKG-RULES",
        "pkg/x.ts": "x",
        ...Object.fromEntries(
          ["a", "b", "c"].flatMap((group) => [
            [`pkg/.agents/skills/${group}/.ignore`, "hidden\n"],
            ...["hidden", "shown"].map((name) => [
              `pkg/.agents/skills/${group}/${name}/SKILL.md`,
              `---\nname: ${group}-${name}\ndescription: SKILL-${group}-${name}\n---\n`,
            ]),
          ]),
        ),
      },
      async (tree, mode) => {
        // Each in turn, so that one of them is listed before the others whatever the directory order.
        for (const failing of ["a", "b", "c"]) {
          const f = await passingFault(tree, "EIO", [{ method, path: `pkg/.agents/skills/${failing}/.ignore` }]);
          const during = reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.ok(f.fired.count > 0, `${mode}: the fault fired`);
          assert.doesNotMatch(
            during,
            /-hidden/,
            `${mode}: nothing an ignore file hides is listed while ${failing}'s fails`,
          );
          for (const group of ["a", "b", "c"].filter((group) => group !== failing))
            assert.match(
              during,
              new RegExp(`SKILL-${group}-shown`),
              `${mode}: ${group} arrives while ${failing} fails`,
            );
          assert.ok(
            !f.h.notifications.includes(FAILURE_WARNING),
            `${mode}: an I/O error is not the extension's failure`,
          );
          f.active.on = false;
          const after = reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.match(after, new RegExp(`SKILL-${failing}-shown`), `${mode}: ${failing}'s skill once it clears`);
          assert.doesNotMatch(after, /-hidden/, mode);
        }
      },
    ));
}

for (const method of ["lstat", "realpath"] as const) {
  test(`an I/O error on the ${method} of a linked skill folder costs only that skill: the model keeps it, and the other skills of its tree still arrive`, () =>
    twoTrees(
      {
        "pkg/AGENTS.md": "PKG-RULES",
        "pkg/x.ts": "x",
        ...Object.fromEntries(
          ["a", "b", "c"].flatMap((name) => [
            [`pkg/real-${name}/SKILL.md`, `---\nname: ${name}\ndescription: SKILL-${name}\n---\n`],
            [`pkg/.agents/skills/${name}`, { link: `../../real-${name}` }],
          ]),
        ),
      },
      async (tree, mode) => {
        // Each in turn, so that one of them is listed before the others whatever the directory order.
        for (const failing of ["a", "b", "c"]) {
          const f = await passingFault(tree, "EIO", [{ method, path: `pkg/.agents/skills/${failing}` }]);
          const during = reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.ok(f.fired.count > 0, `${mode}: the fault fired`);
          for (const name of ["a", "b", "c"].filter((name) => name !== failing))
            assert.match(during, new RegExp(`SKILL-${name}`), `${mode}: ${name} arrives while ${failing} fails`);
          f.active.on = false;
          assert.match(reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "", /SKILL-/, mode);
          // The skill the model now holds, unreadable again after a change in its tree: it stays.
          f.active.on = true;
          utimesSync(tree.abs("pkg/.agents/skills"), 2_000_000_000, 2_000_000_000);
          const held = reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.doesNotMatch(held, /is gone/, `${mode}: unknown, not gone`);
          assert.ok(
            !f.h.notifications.includes(FAILURE_WARNING),
            `${mode}: an I/O error is not the extension's failure`,
          );
        }
      },
    ));
}

test("a file refused for what it is still lets the next name apply", () =>
  withTree({ ...files, "a/b/AGENTS.override.md": Buffer.from([0xff, 0xfe, 0x41]) }, async (tree) => {
    const h = await loadRunner(tree, { factories: [createLazyAgents({ spawnGit: noGit })] });
    const reminder = reminderOf((await h.call("read", { path: "a/b/x.ts" })).content) ?? "";
    assert.match(reminder, /B-RULES/);
    assert.match(reminder, /a\/b\/AGENTS.override.md was not loaded: not valid UTF-8/);
  }));

test("an I/O error on an imported file keeps the import the model holds", () =>
  withTree(
    { ...files, "a/b/AGENTS.md": "B-RULES, see @rules.md\n", "a/b/rules.md": "IMPORTED-RULES\n" },
    async (tree) => {
      const f = await passingFault(tree, "EIO", [{ method: "open", path: "a/b/rules.md" }]);
      f.active.on = false;
      assert.match(reminderOf((await f.h.call("read", { path: "a/b/x.ts" })).content) ?? "", /IMPORTED-RULES/);
      utimesSync(tree.abs("a/b/rules.md"), 2_000_000_000, 2_000_000_000);
      f.active.on = true;
      const during = await f.h.call("read", { path: "a/b/x.ts" });
      assert.ok(f.fired.count > 0, "the fault fired");
      assertIntact(during);
      assert.doesNotMatch(reminderOf(during.content) ?? "", /no longer applies/, "the import is not withdrawn");
      f.active.on = false;
      const after = await f.h.call("read", { path: "a/b/x.ts" });
      assert.doesNotMatch(reminderOf(after.content) ?? "", /IMPORTED-RULES/, "nor sent again once it clears");
    },
  ));

for (const method of ["open", "lstat"] as const) {
  test(`an I/O error on the ${method} of one file of an imported folder costs only that file: the folder's other files still arrive`, () =>
    twoTrees(
      {
        "pkg/AGENTS.md": "PKG-RULES, see @docs",
        "pkg/docs/a.md": "IMPORTED-A",
        "pkg/docs/b.md": "IMPORTED-B",
        "pkg/x.ts": "x",
      },
      async (tree, mode) => {
        const f = await passingFault(tree, "EIO", [{ method, path: "pkg/docs/a.md" }]);
        const during = await f.h.call("read", { path: "pkg/x.ts" });
        assert.ok(f.fired.count > 0, `${mode}: the fault fired`);
        assertIntact(during);
        const reminder = reminderOf(during.content) ?? "";
        assert.match(reminder, /IMPORTED-B/, `${mode}: the other file of the folder arrives`);
        assert.match(reminder, /an import in pkg\/AGENTS\.md was not loaded: could not be read/, mode);
        assert.ok(!f.h.notifications.includes(FAILURE_WARNING), `${mode}: an I/O error is not the extension's failure`);
        f.active.on = false;
        assert.match(reminderOf((await f.h.call("read", { path: "pkg/x.ts" })).content) ?? "", /IMPORTED-A/, mode);
      },
    ));
}

test("the first failure of a session warns, even when it is the only one", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a\n" }, async (tree) => {
    const broken = createLazyAgents({
      onEngine: (engine) => {
        engine.onToolResult = () => {
          throw new Error("BOOM");
        };
      },
    });
    const h = await loadRunner(tree, { hasUI: true, factories: [broken] });
    const result = await h.call("read", { path: "pkg/a.ts" });
    assert.deepEqual(result.content, result.original);
    assert.deepEqual(h.notifications, [FAILURE_WARNING]);
  }));

test("an I/O error on a rule folder costs only its own rules: the model keeps those it holds, the instruction files and other rules still arrive, and the rest once it clears", () =>
  twoTrees(
    {
      "pkg/AGENTS.md": "PKG-RULES",
      "pkg/x.ts": "x",
      ".claude/rules/r.md": "CLAUDE-RULE",
      ".claude/rules/sub/s.md": "SUB-RULE",
      ".claude/rules/late/l.md": "LATE-RULE",
      "pkg/.cursor/rules/n.mdc": "---\nalwaysApply: true\n---\nNESTED-RULE",
    },
    async (tree, mode) => {
      const failing = new Set<string>();
      const fs = interceptFileSystem((call, proceed) => {
        if (failing.has(`${call.method} ${call.path}`)) throw fsError("EIO", call.method, call.path);
        return proceed();
      }, nodeFileSystem);
      const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs })] });
      failing.add(`readdir ${tree.abs(".claude/rules/late")}`);
      const during = await h.call("read", { path: "pkg/x.ts" });
      assertIntact(during);
      const reminder = reminderOf(during.content) ?? "";
      for (const text of ["PKG-RULES", "CLAUDE-RULE", "SUB-RULE", "NESTED-RULE"])
        assert.match(reminder, new RegExp(text), mode);
      assert.doesNotMatch(reminder, /LATE-RULE/, mode);
      assert.ok(!h.notifications.includes(FAILURE_WARNING), `${mode}: an I/O error is not the extension's failure`);
      // A folder the model holds rules of, unreadable when it changed: its rules stay.
      failing.add(`readdir ${tree.abs(".claude/rules/sub")}`);
      utimesSync(tree.abs(".claude/rules/sub"), 2_000_000_000, 2_000_000_000);
      const held = await h.call("read", { path: "pkg/x.ts" });
      assert.doesNotMatch(reminderOf(held.content) ?? "", /no longer applies/, `${mode}: unknown, not gone`);
      failing.clear();
      const after = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
      assert.match(after, /LATE-RULE/, `${mode}: picked up once it clears`);
      assert.doesNotMatch(after, /SUB-RULE|no longer applies/, mode);
    },
  ));

test("an I/O error on the lstat of a source home in a folder read name by name costs only what that home holds", () => {
  const homes: Record<string, string> = {
    ".claude": "CLAUDE-RULE",
    ".cursor": "CURSOR-RULE",
    ".github": "COPILOT-RULE",
    "pkg/.agents": "SKILL-s",
    "pkg/.cursor": "NESTED-RULE",
  };
  return twoTrees(
    {
      // A name that differs from an instruction file's only in case: the folder is probed name by name.
      "claude.md": "folded",
      "pkg/agents.md": "folded",
      "pkg/AGENTS.md": "PKG-RULES",
      "pkg/x.ts": "x",
      ".claude/rules/c.md": "CLAUDE-RULE",
      ".cursor/rules/r.mdc": "---\nalwaysApply: true\n---\nCURSOR-RULE",
      ".github/instructions/g.instructions.md": '---\napplyTo: "**"\n---\nCOPILOT-RULE',
      "pkg/.agents/skills/s/SKILL.md": "---\nname: s\ndescription: SKILL-s\n---\n",
      "pkg/.cursor/rules/n.mdc": "---\nalwaysApply: true\n---\nNESTED-RULE",
    },
    async (tree, mode) => {
      for (const failing of Object.keys(homes)) {
        const f = await passingFault(tree, "EIO", [{ method: "lstat", path: failing }]);
        const during = await f.h.call("read", { path: "pkg/x.ts" });
        assert.ok(f.fired.count > 0, `${mode}: the fault fired`);
        assertIntact(during);
        const reminder = reminderOf(during.content) ?? "";
        assert.match(reminder, /PKG-RULES/, `${mode}: the instruction file arrives while ${failing} fails`);
        for (const [home, text] of Object.entries(homes))
          if (home !== failing) assert.match(reminder, new RegExp(text), `${mode}: ${home} while ${failing} fails`);
        assert.ok(!f.h.notifications.includes(FAILURE_WARNING), `${mode}: an I/O error is not the extension's failure`);
      }
    },
  );
});

for (const method of ["lstat", "realpath"] as const) {
  test(`an I/O error on the ${method} of a linked rule home costs only its rules: the model keeps those it holds, the instruction files and other rules still arrive`, () =>
    twoTrees(
      {
        "pkg/AGENTS.md": "PKG-RULES",
        "pkg/x.ts": "x",
        "other/AGENTS.md": "OTHER-RULES",
        "other/y.ts": "y",
        "real-claude/rules/r.md": "CLAUDE-RULE",
        ".claude": { link: "real-claude" },
        ".github/instructions/g.instructions.md": '---\napplyTo: "**"\n---\nCOPILOT-RULE',
      },
      async (tree, mode) => {
        const failing = { on: true };
        const fs = interceptFileSystem((call, proceed) => {
          if (failing.on && call.method === method && call.path === tree.abs(".claude"))
            throw fsError("EIO", call.method, call.path);
          return proceed();
        }, nodeFileSystem);
        const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs })] });
        const during = await h.call("read", { path: "pkg/x.ts" });
        assertIntact(during);
        const first = reminderOf(during.content) ?? "";
        assert.match(first, /PKG-RULES/, mode);
        assert.match(first, /COPILOT-RULE/, mode);
        assert.doesNotMatch(first, /CLAUDE-RULE/, mode);
        failing.on = false;
        assert.match(reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "", /CLAUDE-RULE/, mode);
        // The home the model holds a rule of, unreadable again: its rule stays.
        failing.on = true;
        const held = reminderOf((await h.call("read", { path: "other/y.ts" })).content) ?? "";
        assert.match(held, /OTHER-RULES/, mode);
        assert.doesNotMatch(held, /no longer applies/, `${mode}: unknown, not gone`);
        failing.on = false;
        const after = reminderOf((await h.call("read", { path: "other/y.ts" })).content) ?? "";
        assert.doesNotMatch(after, /CLAUDE-RULE|no longer applies/, `${mode}: the held rule is not sent again`);
        assert.ok(!h.notifications.includes(FAILURE_WARNING), `${mode}: an I/O error is not the extension's failure`);
      },
    ));
}

for (const method of ["open", "lstat"] as const) {
  test(`a rule file an I/O error on its ${method} makes unreadable is unknown, not gone: a held rule stays, the instruction files and other rules still arrive, and a new one arrives once the error clears`, () =>
    twoTrees(
      {
        "pkg/x.ts": "x",
        "pkg/AGENTS.md": "PKG-RULES",
        ".claude/rules/held.md": "HELD-RULE",
        ".claude/rules/later.md": "LATER-RULE",
        ".cursor/rules/later.mdc": "---\nalwaysApply: true\n---\nLATER-CURSOR",
        ".github/instructions/later.instructions.md": '---\napplyTo: "**"\n---\nLATER-COPILOT',
      },
      async (tree, mode) => {
        const later = [
          ".claude/rules/later.md",
          ".cursor/rules/later.mdc",
          ".github/instructions/later.instructions.md",
        ];
        const failing = new Set(later.map((path) => `${method} ${tree.abs(path)}`));
        const fs = interceptFileSystem((call, proceed) => {
          if (failing.has(`${call.method} ${call.path}`)) throw fsError("EIO", call.method, call.path);
          return proceed();
        }, nodeFileSystem);
        const h = await loadRunner(tree, { hasUI: true, factories: [createLazyAgents({ fs })] });
        const first = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
        assert.match(first, /HELD-RULE/, mode);
        assert.match(first, /PKG-RULES/, mode);
        for (const path of later)
          assert.match(first, new RegExp(`${path.replace(/\./g, "\\.")} was not loaded: could not be read`), mode);
        // The held rule's file changes and cannot be read: the model keeps what it holds.
        failing.add(`${method} ${tree.abs(".claude/rules/held.md")}`);
        utimesSync(tree.abs(".claude/rules/held.md"), 2_000_000_000, 2_000_000_000);
        for (let i = 0; i < 2; i++) {
          const during = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
          assert.doesNotMatch(during, /no longer applies/, `${mode}: unknown, not gone`);
        }
        assert.ok(!h.notifications.includes(FAILURE_WARNING), `${mode}: an I/O error is not the extension's failure`);
        failing.clear();
        const after = reminderOf((await h.call("read", { path: "pkg/x.ts" })).content) ?? "";
        for (const text of ["LATER-RULE", "LATER-CURSOR", "LATER-COPILOT"])
          assert.match(after, new RegExp(text), `${mode}: read again once the error clears`);
        assert.doesNotMatch(after, /HELD-RULE|no longer applies/, `${mode}: the held rule is not sent again`);
      },
    ));
}

test("a settings change that drops the folder caches between a read's call and its result fails nothing", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/x.ts": "x" }, async (tree) => {
    let engine: import("../index.ts").LazyAgents | undefined;
    const h = await loadRunner(tree, {
      factories: [createLazyAgents({ spawnGit: noGit, onEngine: (e) => (engine = e) })],
    });
    const input = { path: "pkg/AGENTS.md" };
    const content = [{ type: "text" as const, text: "PKG-RULES" }];
    await h.runner.emitToolCall({ type: "tool_call", toolName: "read", toolCallId: "r1", input } as never);
    // A /reload that changes how folders are read: the discovery starts over while the read runs.
    engine!.configure({ ...engine!.options, maxFileBytes: engine!.options.maxFileBytes - 1 });
    const event = {
      type: "tool_result",
      toolName: "read",
      toolCallId: "r1",
      input,
      content,
      details: {},
      isError: false,
    };
    await h.runner.emitToolResult(event as never);
    assert.deepEqual([...engine!.failures], []);
  }));
