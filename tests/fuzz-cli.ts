// `bun run fuzz -- --cases N --seed S [--strict] [--steps K] [--replay case.json]`
//
// Runs N differential cases from seed S on (default: 1000 cases from a seed taken from the clock,
// printed first). On the first failure it shrinks the case and prints the seed, the divergence and
// a minimal reproduction as JSON, then exits with 1. `--replay` plays a saved reproduction.
// By default the model mirrors the known bugs that index.ts still has (see KNOWN_BUG_PROBES in
// tests/fuzz-lib.ts), so that the run looks for new ones; `--strict` turns the mirrors off.

import { parseArgs } from "node:util";
import {
  asciiJson,
  describeFailure,
  fuzz,
  loadCase,
  presentKnownBugs,
  runCase,
  shrink,
  type Stats,
} from "./fuzz-lib.ts";

const { values } = parseArgs({
  options: {
    cases: { type: "string", default: "1000" },
    seed: { type: "string" },
    steps: { type: "string" },
    strict: { type: "boolean", default: false },
    replay: { type: "string" },
    parallel: { type: "string", default: "3" },
  },
  allowPositionals: false,
});

const compat = values.strict ? new Set<never>() : await presentKnownBugs();
const mirrored = [...compat];
console.log(`known bugs mirrored by the model: ${mirrored.length > 0 ? mirrored.join(", ") : "none (strict)"}`);

if (values.replay !== undefined) {
  const c = loadCase(values.replay);
  const failure = await runCase(c, { compat });
  if (!failure) {
    console.log("the case passes");
    process.exit(0);
  }
  console.log(describeFailure(failure, await shrink(c, failure, { compat })));
  process.exit(1);
}

const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 1_000_000_000;
const cases = Number(values.cases);
if (!Number.isInteger(seed) || !Number.isInteger(cases) || cases < 1) {
  console.error("usage: bun run fuzz -- --cases N --seed S [--strict] [--steps K] [--replay case.json]");
  process.exit(2);
}
console.log(`fuzzing ${cases} case(s) from seed ${seed}`);
const stats: Stats = {};
const started = performance.now();
let done = 0;
const report = await fuzz(seed, cases, {
  compat,
  stats,
  parallel: Number(values.parallel),
  ...(values.steps !== undefined ? { steps: Number(values.steps) } : {}),
  onCase: () => {
    done++;
    if (done % 500 === 0) console.log(`  ${done} cases, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  },
});
const seconds = ((performance.now() - started) / 1000).toFixed(1);
if (report !== undefined) {
  console.log(report);
  process.exit(1);
}
console.log(`${cases} case(s) agree with the reference model (${seconds} s)`);
console.log(`exercised: ${asciiJson(stats)}`);
