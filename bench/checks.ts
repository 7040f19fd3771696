// Checks: the added cost of a `write` when 20 hookify rules are in `.claude`, against the same
// extension with the checks setting off, timed in lockstep through Pi's runner in one run.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { discoverAndLoadExtensions } from "@earendil-works/pi-coding-agent";
import { hostRunner } from "../tests/harness.ts";
import { OURS_PATH } from "./runner.ts";
import { percentile } from "./stats.ts";

export interface ChecksMeasured {
  plainP50Us: number;
  checksP50Us: number;
  rules: number;
  calls: number;
}

/** 20 rules of the kinds hookify's examples show: simple patterns and condition lists, none matching. */
function ruleFiles(count: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (let index = 0; index < count; index++) {
    const fields =
      index % 2 === 0
        ? `event: file\npattern: forbidden${index}\\(|debugger${index};`
        : `event: file\nconditions:\n  - field: file_path\n    operator: regex_match\n    pattern: \\.env${index}$|secrets${index}\n  - field: new_text\n    operator: contains\n    pattern: KEY${index}`;
    files[`.claude/hookify.rule-${index}.local.md`] =
      `---\nname: rule-${index}\nenabled: true\n${fields}\naction: block\n---\nMESSAGE ${index}\n`;
  }
  return files;
}

async function writeRunner(cwd: string, agentDir: string, checks: boolean) {
  const loaded = await discoverAndLoadExtensions([OURS_PATH], cwd, agentDir);
  const settings = { lazyAgents: { checks } };
  const { runner } = await hostRunner(loaded, cwd, { trusted: true, getSettings: () => settings });
  await runner.emit({ type: "session_start", reason: "startup" } as never);
  return async (index: number): Promise<number> => {
    const toolCallId = `w-${checks}-${index}`;
    const input = {
      path: `src/pkg${index % 10}/file${index % 50}.ts`,
      content: `export const v${index} = ${index};\n`,
    };
    const content = [{ type: "text", text: `Successfully wrote to ${input.path}` }];
    const start = performance.now();
    await runner.emitToolCall({ type: "tool_call", toolName: "write", toolCallId, input } as never);
    await runner.emitToolResult({
      type: "tool_result",
      toolName: "write",
      toolCallId,
      input,
      content,
      details: undefined,
      isError: false,
    } as never);
    await runner.emit({
      type: "tool_execution_end",
      toolCallId,
      toolName: "write",
      result: { content },
      isError: false,
    } as never);
    return (performance.now() - start) * 1000;
  };
}

export async function measureChecks(calls: number, warmup: number): Promise<ChecksMeasured> {
  const root = mkdtempSync(join(tmpdir(), "lazy-agents-checks-"));
  try {
    const cwd = join(root, "repo");
    const agentDir = join(root, "agent");
    mkdirSync(agentDir, { recursive: true });
    const rules = 20;
    for (const [path, text] of Object.entries({ ...ruleFiles(rules), "src/pkg0/AGENTS.md": "RULES\n" })) {
      mkdirSync(join(cwd, path, ".."), { recursive: true });
      writeFileSync(join(cwd, path), text);
    }
    const plain = await writeRunner(cwd, agentDir, false);
    const checked = await writeRunner(cwd, agentDir, true);
    const plainUs: number[] = [];
    const checksUs: number[] = [];
    // Alternating which goes first, so that neither always finds the caches the other warmed.
    for (let index = 0; index < warmup + calls; index++) {
      let plainTime: number;
      let checksTime: number;
      if (index % 2 === 0) {
        plainTime = await plain(index);
        checksTime = await checked(index);
      } else {
        checksTime = await checked(index);
        plainTime = await plain(index);
      }
      if (index < warmup) continue;
      plainUs.push(plainTime);
      checksUs.push(checksTime);
    }
    return { plainP50Us: percentile(plainUs, 50), checksP50Us: percentile(checksUs, 50), rules, calls };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
