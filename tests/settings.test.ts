// README "Settings": merging, warnings, the JSON Schema, bounds, triggers and turning the extension off.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Value } from "typebox/value";
import { optionsFromSettings, SETTING_KEYS, defaultOptions, type Options } from "../index.ts";
import { MAX_SETTING_BYTES } from "../config.ts";
import { loadRunner, reminderOf, stderrOf, withTree } from "./harness.ts";

const files = { "src/AGENTS.md": "RULES", "src/x.ts": "x" };

const schema = JSON.parse(readFileSync(resolve(import.meta.dirname, "..", "schema.json"), "utf8")) as {
  properties: Record<string, { default: unknown }>;
};

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

test("an untrusted project's settings are not applied", () =>
  withTree({ "src/RULES.md": "CUSTOM-NAME", "src/AGENTS.md": "DEFAULT-NAME", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { projectSettings: { lazyAgents: { fileNames: ["RULES.md"] } }, trusted: false });
    const reminder = reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "";
    assert.match(reminder, /DEFAULT-NAME/);
  }));

test("a bad settings value gives one fixed warning and keeps the default", () =>
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

test("a broken settings file never stops Pi", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    tree.write(".pi/settings.json", "{ this is not json");
    const h = await loadRunner(tree);
    assert.match(reminderOf((await h.call("read", { path: "src/x.ts" })).content) ?? "", /RULES/);
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

test("a failed grep activates nothing", () =>
  withTree({ "pkg/AGENTS.md": "PKG-RULES", "pkg/a.ts": "a" }, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { triggers: ["grep"] } } });
    const failed = await h.call("grep", { pattern: "x", path: "pkg" });
    assert.equal(failed.isError, true, "ripgrep is missing, so the real grep fails");
    assert.deepEqual(failed.content, failed.original);
  }));

test("enabled: false in settings turns it off", () =>
  withTree({ "src/AGENTS.md": "RULES", "src/x.ts": "x" }, async (tree) => {
    const h = await loadRunner(tree, { settings: { lazyAgents: { enabled: false } } });
    const result = await h.call("read", { path: "src/x.ts" });
    assert.deepEqual(result.content, result.original);
  }));

test("a settings typo is named with its file and the setting it most likely meant", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, {
      hasUI: true,
      settings: { lazyAgents: { maxFileBytes: 0, Skills: false } },
      projectSettings: { lazyAgents: { trigger: ["read", "ls"], reminderBudgetBytes: 10 } },
    });
    assert.deepEqual(h.notifications.toSorted(), [
      'pi-lazy-agents: lazyAgents.Skills in ~/.pi/agent/settings.json is not a setting (did you mean "skills"?)',
      "pi-lazy-agents: lazyAgents.maxFileBytes in ~/.pi/agent/settings.json must be a whole number of bytes from 1 to 1048576; its default applies",
      "pi-lazy-agents: lazyAgents.reminderBudgetBytes in .pi/settings.json must be a whole number of bytes from 1024 to 1048576; its default applies",
      'pi-lazy-agents: lazyAgents.trigger in .pi/settings.json is not a setting (did you mean "triggers"?)',
    ]);
  }));

test("a project key that overrides a global one is blamed on the project file", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, {
      hasUI: true,
      settings: { lazyAgents: { gateWrites: true } },
      projectSettings: { lazyAgents: { gateWrites: "yes" } },
    });
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents.gateWrites in .pi/settings.json must be true or false; its default applies",
    ]);
  }));

test("settings warnings show a key name only when it is plain, and never a value", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, {
      hasUI: true,
      settings: { lazyAgents: { "\u001b[31mred\nline": 1, budget: "SECRET-VALUE", zzz: "SECRET-VALUE" } },
    });
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents in ~/.pi/agent/settings.json has a key that is not a setting",
      'pi-lazy-agents: lazyAgents.budget in ~/.pi/agent/settings.json is not a setting (did you mean "reminderBudgetBytes"?)',
      "pi-lazy-agents: lazyAgents.zzz in ~/.pi/agent/settings.json is not a setting",
    ]);
  }));

test("a settings object of thousands of keys that are not settings warns about eight, and counts the rest in one line", () =>
  withTree(files, async (tree) => {
    const lazyAgents = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, 0]));
    const h = await loadRunner(tree, { hasUI: true, projectSettings: { lazyAgents } });
    assert.deepEqual(h.notifications, [
      ...Array.from({ length: 8 }, (_, i) => `pi-lazy-agents: lazyAgents.k${i} in .pi/settings.json is not a setting`),
      "pi-lazy-agents: lazyAgents in .pi/settings.json has 4992 more keys that are not settings",
    ]);
  }));

test("after a reload with a broken project settings file, no warning blames the global file for the project's keys", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true, projectSettings: { lazyAgents: { maxFileBytes: 0 } } });
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents.maxFileBytes in .pi/settings.json must be a whole number of bytes from 1 to 1048576; its default applies",
    ]);
    h.notifications.length = 0;
    // Pi keeps the project's last good settings when its file no longer parses.
    tree.write(".pi/settings.json", '{ "lazyAgents": { "maxFileBytes": 0 ');
    await h.settingsManager.reload();
    await h.emitSessionStart("reload");
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents.maxFileBytes in .pi/settings.json or ~/.pi/agent/settings.json must be a whole number of bytes from 1 to 1048576; its default applies",
    ]);
  }));

test("an untrusted project's settings file is not read to name a key's origin", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, {
      hasUI: true,
      trusted: false,
      settings: { lazyAgents: "off" },
      projectSettings: { lazyAgents: { enabled: false } },
    });
    assert.deepEqual(h.notifications, [
      "pi-lazy-agents: lazyAgents in ~/.pi/agent/settings.json must be an object; defaults apply",
    ]);
  }));

test("schema.json lists exactly the settings the extension accepts, with the same defaults", () => {
  assert.deepEqual(Object.keys(schema.properties).toSorted(), [...SETTING_KEYS].toSorted());
  const defaults = Object.fromEntries(Object.entries(schema.properties).map(([key, value]) => [key, value.default]));
  assert.deepEqual(optionsFromSettings(defaults).options, defaultOptions());
  assert.equal(Value.Check(schema, defaults), true);
});

test("schema.json and the settings validator agree on good and bad values", () => {
  const cases: Array<[string, unknown, boolean]> = [
    ["enabled", false, true],
    ["enabled", "no", false],
    ["fileNames", ["RULES.md"], true],
    ["fileNames", [], false],
    ["fileNames", ["a/b.md"], false],
    ["fileNames", ["a\\b.md"], false],
    ["fileNames", [".."], false],
    ["fileNames", ["A.md", "A.md"], false],
    ["fileNames", ["x".repeat(256)], false],
    ["fileNames", Array.from({ length: 65 }, (_, i) => `f${i}.md`), false],
    ["ignoreDirs", [], true],
    ["ignoreDirs", [".cache", "vendor"], true],
    ["ignoreDirs", ["."], false],
    ["ignoreDirs", [""], false],
    ["maxFileBytes", 1, true],
    ["maxFileBytes", 1048576, true],
    ["maxFileBytes", 0, false],
    ["maxFileBytes", 1048577, false],
    ["maxFileBytes", 1.5, false],
    ["maxFileBytes", "64k", false],
    ["reminderBudgetBytes", 1024, true],
    ["reminderBudgetBytes", 1023, false],
    ["triggers", ["read", "ls", "grep", "find"], true],
    ["triggers", [], true],
    ["triggers", ["bash"], true],
    ["triggers", ["sh"], false],
    ["triggers", "read", false],
    ["skills", true, true],
    ["imports", 0, false],
    ["gateWrites", true, true],
    ["gateWrites", null, false],
    ["rules", false, true],
    ["rules", "off", false],
    ["ruleSources", ["cursor"], true],
    ["ruleSources", [], true],
    ["ruleSources", ["windsurf"], false],
    ["ruleSources", ["cursor", "cursor"], false],
    ["unknownKey", true, false],
  ];
  for (const [key, value, good] of cases) {
    const settings = { [key]: value };
    const label = JSON.stringify(settings).slice(0, 80);
    assert.equal(Value.Check(schema, settings), good, `schema: ${label}`);
    assert.equal(optionsFromSettings(settings).warnings.length, good ? 0 : 1, `validator: ${label}`);
  }
});

test("settings bounds: names up to 255 characters, lists up to 64, sizes and budgets at their exact limits", () => {
  const name255 = "a".repeat(255);
  const names = (count: number) => Array.from({ length: count }, (_, i) => `N${i}.md`);
  const cases: Array<[string, Record<string, unknown>, (options: Options) => unknown, unknown]> = [
    ["a 255-character name", { fileNames: [name255] }, (o) => o.fileNames, [name255]],
    ["a 256-character name", { fileNames: ["a".repeat(256)] }, (o) => o.fileNames.length, 5],
    ["64 file names", { fileNames: names(64) }, (o) => o.fileNames.length, 64],
    ["65 file names", { fileNames: names(65) }, (o) => o.fileNames.length, 5],
    ["64 ignored folders", { ignoreDirs: names(64) }, (o) => o.ignoredDirs.size, 64],
    ["65 ignored folders", { ignoreDirs: names(65) }, (o) => o.ignoredDirs.size, 8],
    ["no ignored folders", { ignoreDirs: [] }, (o) => o.ignoredDirs.size, 0],
    ["a budget of 1023", { reminderBudgetBytes: 1023 }, (o) => o.budgetBytes, 48 * 1024],
    ["a budget of 1024", { reminderBudgetBytes: 1024 }, (o) => o.budgetBytes, 1024],
    ["the largest budget", { reminderBudgetBytes: MAX_SETTING_BYTES }, (o) => o.budgetBytes, MAX_SETTING_BYTES],
    ["a budget over the bound", { reminderBudgetBytes: MAX_SETTING_BYTES + 1 }, (o) => o.budgetBytes, 48 * 1024],
    ["a file size of 1", { maxFileBytes: 1 }, (o) => o.maxFileBytes, 1],
    ["the largest file size", { maxFileBytes: MAX_SETTING_BYTES }, (o) => o.maxFileBytes, MAX_SETTING_BYTES],
    ["a file size over the bound", { maxFileBytes: MAX_SETTING_BYTES + 1 }, (o) => o.maxFileBytes, 64 * 1024],
  ];
  for (const [name, raw, pick, expected] of cases) {
    const { options, warnings } = optionsFromSettings(raw);
    assert.deepEqual(pick(options), expected, name);
    const accepted = JSON.stringify(pick(options)) !== JSON.stringify(pick(optionsFromSettings(undefined).options));
    assert.equal(warnings.length, accepted || name === "no ignored folders" ? 0 : 1, `${name}: warnings`);
  }
});

test("without a UI a settings warning goes to stderr; with one, to a notification and not to stderr", () =>
  withTree({}, async (tree) => {
    const settings = { lazyAgents: { maxFileBytes: 0 } };
    const headless = await stderrOf(() => loadRunner(tree, { settings }));
    assert.match(headless, /pi-lazy-agents: .*maxFileBytes/);
    let notifications: string[] = [];
    const withUI = await stderrOf(async () => {
      notifications = (await loadRunner(tree, { settings, hasUI: true })).notifications;
    });
    assert.doesNotMatch(withUI, /maxFileBytes/);
    assert.ok(notifications.some((n) => /pi-lazy-agents: .*maxFileBytes/.test(n)));
  }));

test("a settings change at a later session start applies to folders and files already seen", async () => {
  const cases: Array<[string, Record<string, unknown>, Record<string, unknown>, RegExp, RegExp]> = [
    ["fileNames", {}, { fileNames: ["RULES.md"] }, /AGENTS-RULES/, /RULES-FILE/],
    ["maxFileBytes", { maxFileBytes: 100 }, {}, /larger than the size limit/, /BIG-RULES/],
    ["imports", { imports: false }, {}, /AGENTS-RULES/, /IMPORTED-RULES/],
  ];
  for (const [name, before, after, first, second] of cases) {
    await withTree(
      {
        "a/AGENTS.md": `AGENTS-RULES @extra.md\n${"BIG-RULES ".repeat(20)}`,
        "a/RULES.md": "RULES-FILE",
        "a/extra.md": "IMPORTED-RULES",
        "a/x.ts": "x",
        "a/y.ts": "y",
      },
      async (tree) => {
        const h = await loadRunner(tree, { settings: { lazyAgents: before } });
        const earlier = reminderOf((await h.call("read", { path: "a/x.ts" })).content) ?? "";
        assert.match(earlier, first, `${name}: before`);
        assert.doesNotMatch(earlier, second, `${name}: before`);
        writeFileSync(join(tree.agentDir, "settings.json"), JSON.stringify({ lazyAgents: after }));
        await h.settingsManager.reload();
        await h.emitSessionStart("reload");
        assert.match(reminderOf((await h.call("read", { path: "a/y.ts" })).content) ?? "", second, `${name}: after`);
      },
    );
  }
});

test("a reload keeps what /lazy-agents has seen unless a setting changed how folders are read", async () => {
  const cases: Array<[string, Record<string, unknown>, boolean]> = [
    ["unchanged settings", {}, true],
    ["the same ignored folders in another order", { ignoreDirs: ["dist", ".git"] }, true],
    ["other file names", { fileNames: ["RULES.md"] }, false],
    ["other ignored folders", { ignoreDirs: ["node_modules"] }, false],
  ];
  for (const [name, after, kept] of cases) {
    await withTree({ "src/AGENTS.md": "S", "src/x.ts": "x" }, async (tree) => {
      const h = await loadRunner(tree, { hasUI: true, settings: { lazyAgents: { ignoreDirs: [".git", "dist"] } } });
      await h.call("read", { path: "src/x.ts" });
      writeFileSync(
        join(tree.agentDir, "settings.json"),
        JSON.stringify({ lazyAgents: { ignoreDirs: [".git", "dist"], ...after } }),
      );
      await h.settingsManager.reload();
      await h.emitSessionStart("reload");
      h.notifications.length = 0;
      await h.command("lazy-agents", "");
      const listed = /src\/AGENTS.md {2}scope src\/\*\*/.test(h.notifications.join("\n"));
      assert.equal(listed, kept, name);
    });
  }
});

test("a settings typo with two wrong letters, or a name cut short, is matched to the setting it meant", () =>
  withTree(files, async (tree) => {
    const h = await loadRunner(tree, { hasUI: true, settings: { lazyAgents: { maxFyleBites: 1, ruleSou: [] } } });
    assert.deepEqual(h.notifications.toSorted(), [
      'pi-lazy-agents: lazyAgents.maxFyleBites in ~/.pi/agent/settings.json is not a setting (did you mean "maxFileBytes"?)',
      'pi-lazy-agents: lazyAgents.ruleSou in ~/.pi/agent/settings.json is not a setting (did you mean "ruleSources"?)',
    ]);
  }));
