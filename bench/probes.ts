// Counting probes for `node:fs` and `node:child_process`, in the bench process only. They patch the
// CommonJS module objects, then `syncBuiltinESMExports()` makes ESM namespace imports and named
// imports (`import { statSync } from "node:fs"`) see the same wrappers. Installed only around the
// counting passes, never while timing.

import { createRequire, syncBuiltinESMExports } from "node:module";

const require = createRequire(import.meta.url);
const fsModule = require("node:fs") as Record<string, unknown>;
const childProcessModule = require("node:child_process") as Record<string, unknown>;

/** Every public fs entry that touches the filesystem and that an extension could plausibly call. */
const FS_SYNC = [
  "statSync",
  "lstatSync",
  "fstatSync",
  "realpathSync",
  "openSync",
  "readSync",
  "closeSync",
  "readdirSync",
  "readFileSync",
  "existsSync",
  "accessSync",
  "opendirSync",
  "readlinkSync",
  "statfsSync",
] as const;
const FS_ASYNC = ["stat", "lstat", "fstat", "realpath", "open", "read", "close", "readdir", "readFile", "access"];
const FS_PROMISES = ["stat", "lstat", "realpath", "open", "readdir", "readFile", "access", "opendir", "readlink"];
const SPAWNS = ["spawn", "spawnSync", "exec", "execSync", "execFile", "execFileSync", "fork"];

type Restore = () => void;

export class CallCounter {
  /** Calls per function name while `enabled`. */
  readonly counts = new Map<string, number>();
  enabled = false;
  private restores: Restore[] = [];

  total(): number {
    let sum = 0;
    for (const count of this.counts.values()) sum += count;
    return sum;
  }

  reset(): void {
    this.counts.clear();
  }

  /** Patches `target[name]` with a counting wrapper; keeps properties such as realpathSync.native. */
  wrap(target: Record<string, unknown>, name: string, label = name): void {
    const original = target[name];
    if (typeof original !== "function") return;
    const count = () => {
      if (this.enabled) this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
    };
    // A plain function, not an arrow: the original must see the caller's `this`.
    const wrapper = function (this: unknown, ...args: unknown[]) {
      count();
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    };
    for (const key of Object.keys(original)) {
      (wrapper as unknown as Record<string, unknown>)[key] = (original as unknown as Record<string, unknown>)[key];
    }
    target[name] = wrapper;
    this.restores.push(() => {
      target[name] = original;
    });
  }

  uninstall(): void {
    for (const restore of this.restores.reverse()) restore();
    this.restores = [];
    syncBuiltinESMExports();
  }
}

/** Counts fs calls: sync, callback and promise forms, and `realpathSync.native`. */
export function installFsCounter(): CallCounter {
  const counter = new CallCounter();
  for (const name of FS_SYNC) counter.wrap(fsModule, name);
  for (const name of FS_ASYNC) counter.wrap(fsModule, name);
  const realpathSync = fsModule.realpathSync as unknown as Record<string, unknown>;
  counter.wrap(realpathSync, "native", "realpathSync.native");
  const realpath = fsModule.realpath as unknown as Record<string, unknown>;
  counter.wrap(realpath, "native", "realpath.native");
  const promises = fsModule.promises as Record<string, unknown>;
  for (const name of FS_PROMISES) counter.wrap(promises, name, `promises.${name}`);
  syncBuiltinESMExports();
  return counter;
}

/** Counts child processes started through node:child_process. */
export function installSpawnCounter(): CallCounter {
  const counter = new CallCounter();
  for (const name of SPAWNS) counter.wrap(childProcessModule, name);
  syncBuiltinESMExports();
  return counter;
}
