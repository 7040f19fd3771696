// The bash replay: commands drawn from a fixed corpus of realistic agent commands, filled with the
// paths of the main replay (so they keep its locality and its cold/warm split), timed through Pi's
// runner against the bare runner like every other call. The command's own run is not timed: the
// hooks see a fixed output, as they see the read tool's.

import { readShellCommand } from "../index.ts";
import { rng } from "../tests/rng.ts";
import { installFsCounter, installSpawnCounter } from "./probes.ts";
import { countReplay, timeLanes, type CountSample, type Sample } from "./replay.ts";
import { loadRunner, OURS_PATH, type ToolCallSpec } from "./runner.ts";
import { pick } from "./tree.ts";
import type { ReplayCall } from "./workload.ts";

/** What an agent types, by frequency in real sessions: reads, searches, test runs, shell writes. */
const CORPUS: Array<{
  weight: number;
  command: (file: string, dir: string, serial: number) => string;
  fails?: boolean;
}> = [
  { weight: 6, command: (file) => `cat ${file}` },
  { weight: 5, command: (file) => `sed -n '1,120p' ${file}` },
  { weight: 4, command: (_, dir) => `rg -n "export" ${dir}` },
  { weight: 4, command: (_, dir) => `cd ${dir} && npm test 2>&1 | tail -40`, fails: true },
  { weight: 3, command: (_, dir) => `ls -la ${dir}` },
  { weight: 2, command: (_, dir) => `git -C ${dir} diff --stat` },
  { weight: 2, command: (_, dir) => `grep -rn "TODO" ${dir} --include=*.ts | head -20` },
  { weight: 2, command: (_, dir) => `find ${dir} -name '*.ts' | xargs wc -l` },
  { weight: 2, command: (file) => `sed -i 's/= 0;/= 1;/' ${file} && git diff --stat` },
  {
    weight: 2,
    command: (_, dir, serial) => `cat > ${dir}/new-${serial}.ts <<'EOF'\nexport const created = true;\nEOF`,
  },
  { weight: 1, command: (_, dir) => `for f in ${dir}/*.ts; do wc -l "$f"; done` },
  { weight: 1, command: (_, dir) => `bash -c 'cd ${dir} && ls'` },
  { weight: 1, command: (file, dir) => `npx tsc --noEmit ${file} > ${dir}/tsc.log 2>&1; echo $?` },
  { weight: 1, command: (file) => `head -50 ${file} && wc -l ${file}` },
];

/** One bash command per replayed call, in its folder; the same seed gives the same commands. */
export function bashSpecs(calls: ReplayCall[], seed: number): ToolCallSpec[] {
  const random = rng(seed);
  const total = CORPUS.reduce((sum, entry) => sum + entry.weight, 0);
  return calls.map((call, index) => {
    let roll = random() * total;
    const entry = CORPUS.find((candidate) => (roll -= candidate.weight) < 0) ?? CORPUS[0]!;
    const file = call.toolName === "write" ? `${call.dir.rel}/${pick(random, call.dir.files)}` : call.path;
    const command = entry.command(file, call.dir.rel, index);
    const text = entry.fails ? "FAIL src/x.test.ts\n\nCommand exited with code 1" : "ok\n";
    return {
      toolCallId: `bash-${index}`,
      toolName: "bash",
      input: { command },
      content: [{ type: "text", text }],
      details: undefined,
      isError: entry.fails === true,
    };
  });
}

/** µs to read one command of the corpus into simple commands and path words (no filesystem). */
export function parseMicros(specs: ToolCallSpec[], rounds = 5): number {
  const commands = specs.map((spec) => spec.input.command as string);
  for (const command of commands) readShellCommand(command);
  const start = performance.now();
  for (let round = 0; round < rounds; round++) for (const command of commands) readShellCommand(command);
  return ((performance.now() - start) * 1000) / (rounds * commands.length);
}

/** The tool's stand-in while timing: a turn of the event loop, as for writes. */
export function bashExecutions(specs: ToolCallSpec[]): Array<() => Promise<unknown>> {
  return specs.map(() => () => new Promise((resolve) => setImmediate(resolve)));
}

export interface BashReplay {
  samples: Sample[];
  /** Filesystem calls and spawns per call, counted in a separate pass. */
  counted: CountSample[];
  parseUs: number;
}

/** Times the bash commands (ours against the bare runner, alternated), then counts their fs calls. */
export async function bashReplay(
  tree: { cwd: string; agentDir: string },
  calls: ReplayCall[],
  options: { seed: number; warmup: number; probe: () => void },
): Promise<BashReplay> {
  const specs = bashSpecs(calls, options.seed);
  const parseUs = parseMicros(specs);
  const ext = await loadRunner("ours", [OURS_PATH], tree.cwd, tree.agentDir);
  const base = await loadRunner("base", [], tree.cwd, tree.agentDir);
  let samples: Sample[];
  try {
    const lane = { ext, base, calls, specs, tools: bashExecutions(specs) };
    [samples] = (await timeLanes([lane], { warmup: options.warmup, probe: options.probe })) as [Sample[]];
  } finally {
    await ext.runner.emit({ type: "session_shutdown" } as never);
  }
  const fs = installFsCounter();
  const spawns = installSpawnCounter();
  try {
    const counting = await loadRunner("ours", [OURS_PATH], tree.cwd, tree.agentDir);
    const counted = await countReplay(counting, calls, specs, { fs, spawns });
    await counting.runner.emit({ type: "session_shutdown" } as never);
    return { samples, counted, parseUs };
  } finally {
    fs.uninstall();
    spawns.uninstall();
  }
}
