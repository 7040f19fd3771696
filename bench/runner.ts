// Pi's real extension runner, loaded as `pi -e <path>` loads an extension: through
// discoverAndLoadExtensions, which also maps the old `@mariozechner/*` import names to Pi 1.6.

import { resolve } from "node:path";
import { discoverAndLoadExtensions, type ExtensionRunner } from "@earendil-works/pi-coding-agent";
import { hostRunner } from "../tests/harness.ts";

export const OURS_PATH = process.env.BENCH_OURS ?? resolve(import.meta.dirname, "..", "index.ts");
/**
 * The peer is loaded by its package folder: Pi reads its `pi.extensions` manifest (./src/index.ts).
 * It is the bench's own dependency (bench/package.json), installed by `./dev bench`.
 */
export const PEER_PATH = resolve(import.meta.dirname, "node_modules", "pi-context-breadcrumbs");

export interface ToolCallSpec {
  toolCallId: string;
  toolName: string;
  input: Record<string, unknown>;
  content: Array<{ type: "text"; text: string }>;
  details: unknown;
  isError: boolean;
}

export interface HookTiming {
  /** µs spent in the hooks, without the tool's own execution between them. */
  us: number;
  patched: unknown;
}

export interface BenchRunner {
  name: string;
  runner: ExtensionRunner;
  /**
   * tool_call, then the tool (`between`), then tool_result and tool_execution_end: the hooks
   * around one tool execution, timed without the tool.
   */
  hooks(call: ToolCallSpec, between?: () => Promise<unknown>): Promise<HookTiming>;
}

export async function loadRunner(
  name: string,
  extensionPaths: string[],
  cwd: string,
  agentDir: string,
): Promise<BenchRunner> {
  const loaded = await discoverAndLoadExtensions(extensionPaths, cwd, agentDir);
  if (loaded.errors.length > 0) throw new Error(`${name}: extension errors: ${JSON.stringify(loaded.errors)}`);
  const { runner } = await hostRunner(loaded, cwd, { trusted: true, getSettings: () => ({}) });
  await runner.emit({ type: "session_start", reason: "startup" } as never);

  const hooks = async (call: ToolCallSpec, between?: () => Promise<unknown>): Promise<HookTiming> => {
    const { toolCallId, toolName, input } = call;
    const start = performance.now();
    await runner.emitToolCall({ type: "tool_call", toolName, toolCallId, input } as never);
    const called = performance.now();
    // The tool runs here, outside the timed window, as it does in Pi: work the extension leaves
    // running in the background (a git answer, say) may finish meanwhile.
    if (between) await between();
    const resumed = performance.now();
    const patched = await runner.emitToolResult({
      type: "tool_result",
      toolName,
      toolCallId,
      input,
      content: call.content,
      details: call.details,
      isError: call.isError,
    } as never);
    await runner.emit({
      type: "tool_execution_end",
      toolCallId,
      toolName,
      result: patched ?? { content: call.content, details: call.details },
      isError: call.isError,
    } as never);
    return { us: (called - start + performance.now() - resumed) * 1000, patched };
  };
  return { name, runner, hooks };
}
