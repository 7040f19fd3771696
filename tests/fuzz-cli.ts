// `bun run fuzz -- --cases N --seed S [--steps K] [--git] [--replay case.json]`
//
// Runs N differential cases from seed S on (default: 1000 cases from a seed taken from the clock,
// printed first). On the first failure it shrinks the case and prints the seed, the divergence and
// a minimal reproduction as JSON, then exits with 1. `--git` runs every case under `git init`. `--replay` plays a
// saved reproduction.

import { parseArgs } from "node:util";
import { asciiJson, describeFailure, fuzz, loadCase, runCase, shrink, type Stats } from "./fuzz-lib.ts";

const { values } = parseArgs({
  options: {
    cases: { type: "string", default: "1000" },
    seed: { type: "string" },
    steps: { type: "string" },
    replay: { type: "string" },
    git: { type: "boolean", default: false },
    parallel: { type: "string", default: "3" },
  },
  allowPositionals: false,
});

if (values.replay !== undefined) {
  const c = loadCase(values.replay);
  const failure = await runCase(c, { git: values.git });
  if (!failure) {
    console.log("the case passes");
    process.exit(0);
  }
  console.log(describeFailure(failure, await shrink(c, failure, { git: values.git }), values.git));
  process.exit(1);
}

const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 1_000_000_000;
const cases = Number(values.cases);
if (!Number.isInteger(seed) || !Number.isInteger(cases) || cases < 1) {
  console.error("usage: bun run fuzz -- --cases N --seed S [--steps K] [--git] [--replay case.json]");
  process.exit(2);
}
console.log(`fuzzing ${cases} case(s) from seed ${seed}${values.git ? " under git init" : ""}`);
const stats: Stats = {};
const started = performance.now();
let done = 0;
const report = await fuzz(seed, cases, {
  stats,
  git: values.git,
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
