// The real `pi` TUI in a detached tmux session, with the scripted model of tests/scripted-provider.ts:
// no API key, no network. Shared by tests/tui.test.ts and scripts/screenshot.ts.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const PI_CLI = join(ROOT, "node_modules", "@earendil-works", "pi-coding-agent", "dist", "bundle", "cli.js");

export interface TuiOptions {
  /** A scratch folder of the caller's: the extension's copy, the agent folder and tmux's config go there. */
  work: string;
  cwd: string;
  /** The scripted model's tool calls: one array of [tool, args] per assistant turn. */
  script: Array<Array<[string, Record<string, unknown>]>>;
  cols?: number;
  rows?: number;
}

export interface Tui {
  /** The visible screen as text; `colours` keeps the ANSI codes. */
  screen(colours?: boolean): string;
  /** Types the text and presses Enter until the editor has taken it. */
  submit(text: string): Promise<void>;
  /** Resolves when every text is on the screen; rejects with the screen after the timeout. */
  waitFor(texts: readonly string[], timeoutMs?: number): Promise<string>;
  close(): void;
}

/** The prompt editor: the lines between the last two horizontal rules of Pi's screen. */
function editorText(screen: string): string {
  const lines = screen.split("\n");
  const rules = lines.flatMap((line, index) => (/^─{10,}/.test(line.trim()) ? [index] : []));
  return rules.length < 2 ? "" : lines.slice(rules.at(-2)! + 1, rules.at(-1)).join("\n");
}

/** True when a tmux binary is on PATH. */
export function hasTmux(): boolean {
  return spawnSync("sh", ["-c", "command -v tmux"]).status === 0;
}

/** Starts pi in tmux with pi-lazy-agents loaded as an installed package would be, so Pi lists it by name. */
export async function startTui(options: TuiOptions): Promise<Tui> {
  const { work, cwd, cols = 112, rows = 44 } = options;
  const agentDir = join(work, "agent");
  const extension = join(work, "pi-lazy-agents");
  mkdirSync(agentDir, { recursive: true });
  mkdirSync(extension, { recursive: true });
  for (const file of ["index.ts", "config.ts", "package.json"]) cpSync(join(ROOT, file), join(extension, file));
  writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ quietStartup: "header" }));
  writeFileSync(
    join(work, "tmux.conf"),
    'set -g extended-keys on\nset -g default-terminal tmux-256color\nset -as terminal-features ",*:RGB"\n',
  );
  const socket = `pi-lazy-agents-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const tmux = (...args: string[]) => execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" });
  const env = {
    PI_CODING_AGENT_DIR: agentDir,
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    COLORTERM: "truecolor",
    LAZY_AGENTS_SCRIPT: JSON.stringify(options.script),
    // The scripted model ends with one short sentence instead of quoting the reminders it got.
    LAZY_AGENTS_ANSWER: "Done.",
  };
  const pi = [process.execPath, PI_CLI, "--tools", "read,edit,write,bash", "-e", extension];
  pi.push("-e", join(ROOT, "tests", "scripted-provider.ts"), "--provider", "scripted", "--model", "scripted-model");
  const size = ["-x", String(cols), "-y", String(rows)];
  const envArgs = Object.entries(env).flatMap(([key, value]) => ["-e", `${key}=${value}`]);
  tmux("-f", join(work, "tmux.conf"), "new-session", "-d", "-s", "pi", ...size, "-c", cwd, ...envArgs, ...pi);
  const screen = (colours = false) => tmux("capture-pane", "-p", ...(colours ? ["-e"] : []), "-t", "pi");
  const tui: Tui = {
    screen,
    async submit(text) {
      tmux("send-keys", "-t", "pi", "-l", text);
      tmux("send-keys", "-t", "pi", "Enter");
      // An argument completion menu takes the first Enter; the second submits what it completed.
      await new Promise((done) => setTimeout(done, 500));
      if (editorText(screen()).includes(text.trim())) tmux("send-keys", "-t", "pi", "Enter");
    },
    async waitFor(texts, timeoutMs = 60_000) {
      const start = Date.now();
      for (;;) {
        const shown = screen();
        if (texts.every((text) => shown.includes(text))) return shown;
        if (Date.now() - start > timeoutMs) throw new Error(`pi never showed ${JSON.stringify(texts)}:\n${shown}`);
        await new Promise((done) => setTimeout(done, 200));
      }
    },
    close() {
      spawnSync("tmux", ["-L", socket, "kill-server"]);
    },
  };
  try {
    await tui.waitFor(["scripted-model"]);
  } catch (error) {
    tui.close();
    throw error;
  }
  return tui;
}
