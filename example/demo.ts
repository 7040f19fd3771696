// The demo: a real Pi session (the `pi` CLI from node_modules) over a copy of example/tree, with
// a scripted model and no API key. The model's last answer quotes every reminder it received.
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

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

const work = mkdtempSync(join(tmpdir(), "pi-lazy-agents-demo-"));
try {
  const cwd = join(work, "tree");
  const agentDir = join(work, "agent");
  cpSync(join(ROOT, "example", "tree"), cwd, { recursive: true });
  mkdirSync(agentDir);
  console.log("pi-lazy-agents demo: a real Pi session over example/tree with a scripted model\n");
  console.log("The scripted model makes these tool calls, one line per assistant turn:");
  for (const turn of script)
    console.log(`  ${turn.map(([tool, args]) => `${tool} ${(args as { path: string }).path}`).join(", ")}`);
  console.log("\nIts final answer quotes what reached it:\n");
  const output = execFileSync(
    process.execPath,
    [
      PI_CLI,
      "--print",
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
      env: { ...process.env, PI_CODING_AGENT_DIR: agentDir, LAZY_AGENTS_SCRIPT: JSON.stringify(script) },
      encoding: "utf8",
    },
  );
  console.log(output);
} finally {
  rmSync(work, { recursive: true, force: true });
}
