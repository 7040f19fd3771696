// The demo: a real Pi session (the `pi` CLI from node_modules) over a copy of example/tree, with
// a scripted model and no API key. It prints one line per tool call saying what pi-lazy-agents added
// to its result, or why it added nothing, then the first reminder as the model received it.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { IGNORED_DIR_NAMES } from "../config.ts";
import { REMINDER_OPEN } from "../index.ts";

const ROOT = resolve(import.meta.dirname, "..");
const PI_CLI = join(ROOT, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js");

const script = [
  [["read", { path: "packages/api/src/server.ts" }]],
  [
    ["read", { path: "packages/web/src/components/button.tsx" }],
    ["read", { path: "packages/web/src/components/button.tsx" }],
    ["read", { path: "node_modules/left-pad/index.js" }],
  ],
  [["write", { path: "packages/api/src/routes/health.ts", content: "export const health = () => 'ok';\n" }]],
  [["read", { path: "packages/api/src/server.ts" }]],
];

interface ToolEvent {
  type: string;
  toolCallId: string;
  toolName: string;
  args?: { path?: string };
  result?: { content?: Array<{ type: string; text?: string }>; details?: { lazyAgents?: Delivered } };
}

interface Delivered {
  files?: Array<{ path: string; via: string }>;
  skills?: Array<{ name: string }>;
  rules?: Array<{ path: string; as: string }>;
}

/** What one call's result carried, or why it carried nothing. */
function outcome(path: string, delivered: Delivered | undefined): string {
  const added = [
    ...(delivered?.files ?? []).filter((file) => file.via === "reminder").map((file) => file.path),
    ...(delivered?.rules ?? []).map((rule) => rule.path),
    ...(delivered?.skills ?? []).map((skill) => `skill ${skill.name}`),
  ];
  if (added.length > 0) return `added ${added.join(", ")}`;
  const vendored = path.split("/").find((segment) => IGNORED_DIR_NAMES.includes(segment));
  if (vendored) return `nothing: a vendored folder (${vendored}/), whose AGENTS.md never applies`;
  return "nothing new: the model already holds every instruction file on its way";
}

const work = mkdtempSync(join(tmpdir(), "pi-lazy-agents-demo-"));
try {
  const cwd = join(work, "tree");
  const agentDir = join(work, "agent");
  cpSync(join(ROOT, "example", "tree"), cwd, { recursive: true });
  mkdirSync(agentDir);
  console.log("pi-lazy-agents demo: a real Pi session over example/tree with a scripted model\n");
  const events = execFileSync(
    process.execPath,
    [
      PI_CLI,
      "--mode",
      "json",
      "--extension",
      join(ROOT, "index.ts"),
      "--extension",
      join(ROOT, "tests", "scripted-provider.ts"),
      "--provider",
      "scripted",
      "--model",
      "scripted-model",
      "Add a health route to the API and review the button.",
    ],
    {
      cwd,
      env: {
        ...process.env,
        PI_CODING_AGENT_DIR: agentDir,
        LAZY_AGENTS_SCRIPT: JSON.stringify(script),
        LAZY_AGENTS_ANSWER: "Done.",
      },
      encoding: "utf8",
    },
  )
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as ToolEvent);
  const paths = new Map<string, string>();
  let first: string | undefined;
  console.log("Each tool call of the scripted model, and what pi-lazy-agents added to its result:");
  for (const event of events) {
    if (event.type === "tool_execution_start") paths.set(event.toolCallId, event.args?.path ?? "");
    if (event.type !== "tool_execution_end") continue;
    const path = paths.get(event.toolCallId) ?? "";
    console.log(`  ${event.toolName} ${path}: ${outcome(path, event.result?.details?.lazyAgents)}`);
    first ??= event.result?.content?.find((block) => block.text?.startsWith(REMINDER_OPEN))?.text;
  }
  console.log("\nThe first reminder, as the model received it at the end of that read's result:\n");
  console.log(first ?? "(none)");
} finally {
  rmSync(work, { recursive: true, force: true });
}
