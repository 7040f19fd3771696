// Makes docs/screenshot.png: what a user sees. The real `pi` TUI in tmux (tests/tmux.ts: the scripted
// model, no API key, no network) reads two files in nested folders of example/tree; the screen then
// shows the turn's one notification, the status line and the `/lazy-agents` report. The captured
// screen, with its colours, becomes HTML that headless Chromium renders. Needs tmux and chromium.
//   node scripts/screenshot.ts [out.png]
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startTui } from "../tests/tmux.ts";

const ROOT = resolve(import.meta.dirname, "..");
const OUT = resolve(process.argv[2] ?? join(ROOT, "docs", "screenshot.png"));
const COLS = 112;
const ROWS = 40;
const PROMPT = "Review the button component and the API server";
const READS = ["packages/web/src/components/button.tsx", "packages/api/src/server.ts"];

async function main(): Promise<void> {
  for (const tool of ["tmux", "chromium"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0) {
      console.error(`screenshot: ${tool} is missing; on Debian: apt-get install -y tmux chromium`);
      process.exit(1);
    }
  }

  const work = mkdtempSync(join(tmpdir(), "pi-lazy-agents-shot-"));
  const cwd = join(work, "acme");
  cpSync(join(ROOT, "example", "tree"), cwd, { recursive: true });
  const tui = await startTui({ work, cwd, script: [READS.map((path) => ["read", { path }])], cols: COLS, rows: ROWS });
  try {
    await tui.submit(PROMPT);
    await tui.waitFor(["Done.", "lazy-agents: 3 files · 1 skill"]);
    await tui.submit("/lazy-agents");
    await tui.waitFor(["Delivered in this context"]);
    const screen = tui.screen(true);
    const html = join(work, "screen.html");
    writeFileSync(html, page(ansiToHtml(screen.replace(work, "/tmp"))));
    mkdirSync(resolve(OUT, ".."), { recursive: true });
    execFileSync(
      "chromium",
      [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        `--window-size=${Math.ceil(COLS * CELL_WIDTH + 2 * PADDING)},${ROWS * LINE_HEIGHT + 2 * PADDING}`,
        `--screenshot=${OUT}`,
        `file://${html}`,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    console.log(`screenshot: ${OUT}`);
  } finally {
    tui.close();
    rmSync(work, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// ANSI (SGR) to HTML, for what tmux's capture-pane -e writes: bold, dim, italic, underline,
// reverse, 16, 256 and 24-bit colours.

const FONT_SIZE = 14;
const CELL_WIDTH = 8.43;
const LINE_HEIGHT = 18;
const PADDING = 16;
const BACKGROUND = "#1d1f21";
const FOREGROUND = "#d7dae0";
const BASIC = [
  "#1d1f21",
  "#cc6666",
  "#b5bd68",
  "#f0c674",
  "#81a2be",
  "#b294bb",
  "#8abeb7",
  "#c5c8c6",
  "#666666",
  "#d54e53",
  "#b9ca4a",
  "#e7c547",
  "#7aa6da",
  "#c397d8",
  "#70c0b1",
  "#eaeaea",
];

interface Style {
  fg?: string;
  bg?: string;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
  reverse?: boolean;
}

function color256(n: number): string {
  if (n < 16) return BASIC[n] ?? FOREGROUND;
  if (n >= 232) {
    const level = 8 + (n - 232) * 10;
    return `rgb(${level},${level},${level})`;
  }
  const index = n - 16;
  const steps = [0, 95, 135, 175, 215, 255];
  return `rgb(${steps[Math.floor(index / 36)]},${steps[Math.floor(index / 6) % 6]},${steps[index % 6]})`;
}

function applySgr(style: Style, codes: number[]): Style {
  const next = { ...style };
  for (let i = 0; i < codes.length; i++) {
    const code = codes[i] ?? 0;
    if (code === 0) for (const key of Object.keys(next)) delete next[key as keyof Style];
    else if (code === 1) next.bold = true;
    else if (code === 2) next.dim = true;
    else if (code === 3) next.italic = true;
    else if (code === 4) next.underline = true;
    else if (code === 7) next.reverse = true;
    else if (code === 22) next.bold = next.dim = false;
    else if (code === 23) next.italic = false;
    else if (code === 24) next.underline = false;
    else if (code === 27) next.reverse = false;
    else if (code >= 30 && code <= 37) next.fg = BASIC[code - 30];
    else if (code >= 90 && code <= 97) next.fg = BASIC[code - 90 + 8];
    else if (code >= 40 && code <= 47) next.bg = BASIC[code - 40];
    else if (code >= 100 && code <= 107) next.bg = BASIC[code - 100 + 8];
    else if (code === 39) delete next.fg;
    else if (code === 49) delete next.bg;
    else if (code === 38 || code === 48) {
      const [value, used] = extendedColor(codes, i + 1);
      if (value) next[code === 38 ? "fg" : "bg"] = value;
      i += used;
    }
  }
  return next;
}

function extendedColor(codes: number[], at: number): [string | undefined, number] {
  if (codes[at] === 5) return [color256(codes[at + 1] ?? 0), 2];
  if (codes[at] === 2) return [`rgb(${codes[at + 1] ?? 0},${codes[at + 2] ?? 0},${codes[at + 3] ?? 0})`, 4];
  return [undefined, 0];
}

function css(style: Style): string {
  let fg = style.fg ?? FOREGROUND;
  let bg = style.bg;
  if (style.reverse) [fg, bg] = [bg ?? BACKGROUND, fg];
  const rules = [`color:${fg}`];
  if (bg) rules.push(`background:${bg}`);
  if (style.bold) rules.push("font-weight:bold");
  if (style.dim) rules.push("opacity:0.6");
  if (style.italic) rules.push("font-style:italic");
  if (style.underline) rules.push("text-decoration:underline");
  return rules.join(";");
}

const escapeHtml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

const ESC = String.fromCharCode(27);
const SGR = new RegExp(`(${ESC}\\[[0-9;:]*m)`);
const SGR_CODES = new RegExp(`^${ESC}\\[([0-9;:]*)m$`);
const OTHER_ESCAPES = new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]`, "g");

export function ansiToHtml(screen: string): string {
  let style: Style = {};
  let html = "";
  for (const part of screen.split(SGR)) {
    const sgr = SGR_CODES.exec(part);
    if (sgr) {
      style = applySgr(style, (sgr[1] || "0").split(/[;:]/).map(Number));
    } else if (part) {
      html += `<span style="${css(style)}">${escapeHtml(part.replace(OTHER_ESCAPES, ""))}</span>`;
    }
  }
  return html;
}

function page(body: string): string {
  return `<!doctype html><meta charset="utf-8"><style>
html,body{margin:0;background:${BACKGROUND}}
pre{margin:0;padding:${PADDING}px;font:${FONT_SIZE}px/${LINE_HEIGHT}px "DejaVu Sans Mono",monospace;white-space:pre}
</style><pre>${body}</pre>`;
}

await main();
