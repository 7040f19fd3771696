// Replays a workload through Pi's runner. Timing passes run an extension's runner and an
// extension-less runner on the identical call, alternating which goes first so that drift and
// cache effects fall on both; the cost the extension adds is the paired difference.

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createReadTool } from "@earendil-works/pi-coding-agent";
import type { BenchRunner, ToolCallSpec } from "./runner.ts";
import type { CallCounter } from "./probes.ts";
import type { ReplayCall } from "./workload.ts";

export interface Sample {
  call: ReplayCall;
  /** µs the extension adds: its runner's hooks minus the bare runner's, for the same call. */
  added: number;
  /** µs of the bare runner alone. */
  base: number;
}

export interface CountSample {
  call: ReplayCall;
  fs: number;
  spawns: number;
  byName: Map<string, number>;
}

/**
 * The tool results the hooks see. Reads get the real read tool's output (run once per path, before
 * any timing); edits and writes get the fixed text of a successful call, without touching the tree,
 * so that every runner sees the same unchanged files.
 */
export async function buildSpecs(cwd: string, calls: ReplayCall[]): Promise<ToolCallSpec[]> {
  const read = createReadTool(cwd) as unknown as {
    execute: (id: string, input: unknown) => Promise<{ content: ToolCallSpec["content"]; details: unknown }>;
  };
  const reads = new Map<string, { content: ToolCallSpec["content"]; details: unknown }>();
  const specs: ToolCallSpec[] = [];
  for (const [index, call] of calls.entries()) {
    const toolCallId = `bench-${index}`;
    if (call.toolName === "read") {
      let result = reads.get(call.path);
      if (!result) {
        result = await read.execute(toolCallId, { path: call.path });
        reads.set(call.path, result);
      }
      specs.push({ toolCallId, toolName: "read", input: { path: call.path }, ...result, isError: false });
    } else if (call.toolName === "edit") {
      const input = { path: call.path, edits: [{ oldText: "= 0;", newText: "= 1;" }] };
      const content = [{ type: "text" as const, text: `Successfully replaced 1 block(s) in ${call.path}.` }];
      specs.push({ toolCallId, toolName: "edit", input, content, details: { diff: "-0\n+1" }, isError: false });
    } else {
      const text = "export const created = true;\n";
      const content = [{ type: "text" as const, text: `Successfully wrote ${text.length} bytes to ${call.path}` }];
      specs.push({
        toolCallId,
        toolName: "write",
        input: { path: call.path, content: text },
        content,
        details: undefined,
        isError: false,
      });
    }
  }
  return specs;
}

/**
 * What runs between tool_call and tool_result while timing, standing in for the tool: an async
 * read of the file for reads and edits (an edit reads its file first), a turn of the event loop
 * for writes. Async, like the real tools, so background work can progress; cheaper than running
 * the read tool again, whose own cost is no part of the figures.
 */
export function toolExecutions(cwd: string, specs: ToolCallSpec[]): Array<() => Promise<unknown>> {
  return specs.map((spec) => {
    if (spec.toolName === "write") return () => new Promise((resolve) => setImmediate(resolve));
    const path = join(cwd, spec.input.path as string);
    return () => readFile(path);
  });
}

/** A turn of the event loop: lets background work the extension started finish inside the count. */
const yieldOnce = () => new Promise((resolve) => setImmediate(resolve));

/** Calls between two reference probes (a batch of bare stats). */
const PROBE_EVERY = 20;

export interface Lane {
  ext: BenchRunner;
  base: BenchRunner;
  calls: ReplayCall[];
  specs: ToolCallSpec[];
  /** What runs between each call's hooks; none for a call with no tool in between. */
  tools: Array<() => Promise<unknown>>;
}

/**
 * Times each lane's extension runner against its bare runner, call by call, and the lanes in
 * lockstep (call i of every lane before call i + 1 of any), so that drift of the machine falls
 * on all of them alike; which lane and which runner goes first alternates. Calls before `warmup`
 * run but are not recorded: each load evaluates the module afresh, so the JIT settles on these
 * very instances.
 */
export async function timeLanes(
  lanes: Lane[],
  options: { warmup: number; limit?: number; probe?: () => void },
): Promise<Sample[][]> {
  const samples: Sample[][] = lanes.map(() => []);
  const limit = Math.min(options.limit ?? Infinity, ...lanes.map((lane) => lane.calls.length));
  for (let index = 0; index < limit; index++) {
    // A reference measurement taken now and then during the replay, under the same conditions.
    if (options.probe && index >= options.warmup && index % PROBE_EVERY === 0) options.probe();
    for (let step = 0; step < lanes.length; step++) {
      const which = (index + step) % lanes.length;
      const lane = lanes[which]!;
      const spec = lane.specs[index]!;
      const tool = lane.tools[index];
      let extUs: number;
      let baseUs: number;
      if (index % 2 === 0) {
        extUs = (await lane.ext.hooks(spec, tool)).us;
        baseUs = (await lane.base.hooks(spec, tool)).us;
      } else {
        baseUs = (await lane.base.hooks(spec, tool)).us;
        extUs = (await lane.ext.hooks(spec, tool)).us;
      }
      if (index >= options.warmup)
        samples[which]!.push({ call: lane.calls[index]!, added: extUs - baseUs, base: baseUs });
    }
  }
  return samples;
}

/**
 * Counts fs calls and spawns from tool_call to the end of tool_execution_end for each call in
 * [0, limit). No tool runs in between (its own fs calls would be counted), only a turn of the
 * event loop, so that background work the extension starts is counted too.
 */
export async function countReplay(
  runner: BenchRunner,
  calls: ReplayCall[],
  specs: ToolCallSpec[],
  counters: { fs: CallCounter; spawns: CallCounter },
  limit = calls.length,
): Promise<CountSample[]> {
  const samples: CountSample[] = [];
  for (let index = 0; index < Math.min(limit, calls.length); index++) {
    counters.fs.reset();
    counters.spawns.reset();
    counters.fs.enabled = counters.spawns.enabled = true;
    try {
      await runner.hooks(specs[index]!, yieldOnce);
    } finally {
      counters.fs.enabled = counters.spawns.enabled = false;
    }
    samples.push({
      call: calls[index]!,
      fs: counters.fs.total(),
      spawns: counters.spawns.total(),
      byName: new Map(counters.fs.counts),
    });
  }
  return samples;
}
