// Settings: warnings that name the key and its file, and the JSON Schema that ships with the package.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Value } from "typebox/value";
import { SETTING_KEYS, defaultOptions, optionsFromSettings } from "../index.ts";
import { loadRunner, withTree } from "./harness.ts";

const files = { "src/AGENTS.md": "RULES", "src/x.ts": "x" };

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

const schema = JSON.parse(readFileSync(resolve(import.meta.dirname, "..", "schema.json"), "utf8")) as {
  properties: Record<string, { default: unknown }>;
};

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
