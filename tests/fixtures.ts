// Fixtures that several test files share: small trees, the session reads they script, and the extension
// built with a test seam.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionFactory } from "@earendil-works/pi-coding-agent";
import { createLazyAgents, type LazyAgents } from "../index.ts";
import { noGit } from "./fuzz-lib.ts";
import { git, reminderOf, toolTurn, type Tree } from "./harness.ts";

export const chain = {
  "AGENTS.md": "ROOT-RULES",
  "src/AGENTS.md": "SRC-RULES",
  "src/components/AGENTS.md": "COMPONENT-RULES",
  "src/components/button.ts": "export const button = 1;\n",
};

export const tree = {
  "AGENTS.md": "ROOT-RULES",
  "packages/AGENTS.md": "PACKAGES-RULES",
  "packages/api/AGENTS.md": "API-RULES",
  "packages/api/server.ts": "export const server = 1;\n",
  "packages/api/routes.ts": "export const routes = 2;\n",
  "packages/api/data.json": '{"answer":42}\n',
  "packages/web/AGENTS.md": "WEB-RULES",
  "packages/web/page.ts": "export const page = 3;\n",
  "packages/web/.agents/skills/ui/SKILL.md":
    "---\nname: ui-review\ndescription: Review UI changes\n---\nUI-SKILL-BODY\n",
};

export const files = {
  "pkg/AGENTS.md": "PKG-RULES",
  "pkg/a.ts": "a\n",
  "other/AGENTS.md": "OTHER-RULES",
  "other/b.ts": "b\n",
};

/** Folders that decide between one listing of a folder and probing it name by name. */
export const probedFolders = {
  small: { "a/AGENTS.md": "A-RULES\n", "a/x.ts": "x\n" },
  large: {
    "a/AGENTS.md": "A-RULES\n",
    "a/x.ts": "x\n",
    ...Object.fromEntries(Array.from({ length: 400 }, (_, index) => [`a/generated-source-file-${index}.ts`, "y\n"])),
  },
  caseOnly: { "a/agents.md": "lower\n", "a/x.ts": "x\n" },
};

const skill = (name: string, description: string) => `---\nname: ${name}\ndescription: ${description}\n---\nBODY\n`;

/** A folder with an import and two skills folders, one of them grouped, to change between calls. */
export const skillFolders = {
  "pkg/AGENTS.md": "Rules: @rules",
  "pkg/rules/a.md": "RULE-A",
  "pkg/.agents/skills/group/deploy/SKILL.md": skill("deploy", "Deploy it"),
  "pkg/.agents/skills/lint/SKILL.md": skill("lint", "Lint it"),
  "pkg/a.ts": "a",
  "pkg/b.ts": "b",
};

export const readA = toolTurn(["read", { path: "pkg/a.ts" }]);

/** Every reminder text in the current session file, oldest first. */
export function remindersIn(sessionFile: string): string[] {
  const reminders: string[] = [];
  for (const line of readFileSync(sessionFile, "utf8").trim().split("\n")) {
    const entry = JSON.parse(line);
    if (entry.type !== "message" || entry.message.role !== "toolResult") continue;
    const reminder = reminderOf(entry.message.content);
    if (reminder) reminders.push(reminder);
  }
  return reminders;
}

/** The extension built with a test seam, handing its engine out; without git unless asked. */
export function lazyAgents(options: { git?: boolean } = {}): { factory: ExtensionFactory; engine: () => LazyAgents } {
  let engine: LazyAgents | undefined;
  const factory = createLazyAgents({
    ...(options.git ? {} : { spawnGit: noGit }),
    onEngine: (e) => (engine = e),
  });
  return { factory, engine: () => engine! };
}

export const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);

/** A repository beside cwd with one commit (`src/AGENTS.md` says LIB-RULES), to add as a submodule. */
export function makeLibrary(tree: Tree): string {
  const lib = join(tree.root, "lib");
  tree.write("../lib/src/AGENTS.md", "LIB-RULES");
  tree.write("../lib/src/a.ts", "a\n");
  git(lib, "init", "-q");
  git(lib, "add", ".");
  git(lib, "commit", "-qm", "lib");
  return lib;
}
