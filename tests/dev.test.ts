// The ./dev entry point on a fresh machine: what a new contributor sees when the registry is away.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";

const DEV = resolve(import.meta.dirname, "..", "dev");

test("./dev says in one line which registry it could not reach, without npm's output", () => {
  const dir = mkdtempSync(join(tmpdir(), "lazy-agents-dev-"));
  try {
    copyFileSync(DEV, join(dir, "dev"));
    writeFileSync(join(dir, "package.json"), "{}");
    // Only the machine's own node and npm, as on a fresh clone: no .tools of this checkout.
    const path = (process.env.PATH ?? "")
      .split(delimiter)
      .filter((entry) => !entry.includes(".tools"))
      .join(delimiter);
    const run = spawnSync("bash", ["./dev", "true"], {
      cwd: dir,
      env: { ...process.env, PATH: path, npm_config_registry: "http://127.0.0.1:9/", npm_config_fetch_retries: "0" },
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(run.status, 1);
    const lines = run.stderr.trim().split("\n");
    assert.equal(lines.length, 2, run.stderr);
    assert.match(lines[0] ?? "", /^dev: installing bun@[\d.]+ and node@\d+ from npm into \.tools\/$/);
    assert.match(
      lines[1] ?? "",
      /^dev: npm install bun@[\d.]+ node@\d+ could not reach http:\/\/127\.0\.0\.1:9\/; check the network or proxy .* and run \.\/dev again \(details: \S+\)$/,
    );
    const log = /\(details: (\S+)\)$/.exec(lines[1] ?? "")?.[1] ?? "";
    assert.ok(existsSync(log), "the log keeps npm's own output");
    rmSync(log, { force: true });
    assert.equal(run.stdout, "");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
