// pi-lazy-agents: delivers the AGENTS.md files, skills and glob rules of folders strictly below cwd,
// once per content version, at the end of the tool result that first touches their scope.
//
// The delivery rules, each decided in one place:
//  1. A scope activates when a trigger tool's call touches a path inside it and the call succeeds
//     (edit, write and bash activate even when they fail): `activates`.
//  2. A folder offers the first name of the fileNames setting (INSTRUCTION_FILE_NAMES) it holds
//     that is accepted; the names after it are overridden. A file refused for what it is lets the
//     next name apply; an I/O error lets none: `viewDirectory`.
//  3. A file is sent once per content version: the same version the model holds is not sent again: `planFile`.
//  4. A new version supersedes the one the model holds, under the same scope; when a call of the
//     batch writes the file, that call's result carries it and the others leave it alone: `planFile`.
//  5. What the model holds and its folder no longer offers is withdrawn; an import only once no file
//     the model holds still imports it: `planRetraction`.
//  6. After compaction, resume, /tree or a context edit the ledger is rebuilt from what the model
//     still sees; what it no longer sees is sent again at the next access: `recordsInContext`.
//  7. The reminder fits REMINDER_BUDGET_BYTES and MAX_REMINDER_FILES: the deepest files whole first,
//     broader ones cut, the rest announced as left out: `fitPlanToBudget`.
//  8. With gateWrites on, the first write or edit into a scope whose instructions the model lacks
//     is held back once, the instructions in its reason: `WriteGate.hold`.
//  9. A bash command is read, never run: a word names a path to activate when `shellWordUse` says so.
// 10. A glob rule of .claude/.cursor/.github applies when a touched path matches it: `ruleApplies`.
// 11. Each part of a reminder (files, skills, rules, rule listings) opens with its full explanation
//     while the model cannot see one; after that, a list with a one-line header, files and rules
//     with their tags alone: `explains`.
// 12. A hookify rule of a `.claude` on the call's path blocks, asks or warns on a bash, edit or
//     write call, a prompt or a stop; block wins over ask over warn: `checkVerdict`.
// 13. Every file read for the model (instruction files, imports, rules, skills) and every folder a
//     link leads to passes one source policy, on its path as written and as it resolves:
//     `sourceRefusal`. The folders of a `.agents/skills` tree are skill content, not scopes: `viewChain`.
//
// Sections, in the order a tool call travels: 1 Pi adapter; 2 per-call lifecycle; 2b checks
// (hookify rules: block, ask or warn); 3 the ledger:
// what the model holds; 4 reminder text and budget; 5 discovery; 6 caches and the
// filesystem seam; 7 git; 8 settings; 9 the /lazy-agents report; 10 pure helpers (paths and text,
// the shell-word reader, the glob matcher). A section uses only what later sections define, but
// for three knowing exceptions: reminder text formats the ledger's plan, settings read through the
// filesystem seam, and the report describes everything above it.

import * as nodeFs from "node:fs";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { hash } from "node:crypto";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, posix, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { createContext, Script, type Context } from "node:vm";
import {
  CONFIG_DIR_NAME,
  type BuildSystemPromptOptions,
  getAgentDir,
  isReadToolResult,
  isToolCallEventType,
  parseFrontmatter,
  type ExtensionAPI,
  type ExtensionContext,
  type ExtensionHandler,
  type MessageEndEvent,
  type MessageEndEventResult,
  type ToolCallEvent,
  type ToolResultEvent,
  type ToolResultEventResult,
  type TurnEndEvent,
} from "@earendil-works/pi-coding-agent";
import * as C from "./config.ts";

// =============================================================================================
// 1. Pi adapter. The only code that knows Pi's events: it turns them into engine calls and decides
// when a handler waits, so that everything below stays testable through Pi's real runner.

/** One fixed line per refused file, for the user; never contents, absolute paths or exceptions. */
function warningText(skip: Skip): string {
  return `${C.USER_PREFIX}${skipText(skip, oneLine)}`;
}

interface CreateOptions {
  fs?: FileSystem;
  spawnGit?: SpawnGit;
  /** Receives the engine, so tests can read its state. */
  onEngine?: (engine: LazyAgents) => void;
}

export function createLazyAgents(create: CreateOptions = {}): (pi: ExtensionAPI) => void {
  return (pi: ExtensionAPI) => {
    const engine = new LazyAgents(create.fs ?? nodeFileSystem, create.spawnGit ?? spawnGit);
    create.onEngine?.(engine);

    pi.registerFlag(C.DISABLE_FLAG, {
      description: C.DISABLE_FLAG_DESCRIPTION,
      type: "boolean",
      default: false,
    });

    const tell = (ctx: ExtensionContext, message: string, level: "info" | "warning"): void => {
      try {
        if (ctx.hasUI) ctx.ui.notify(message, level);
        else if (level === "warning") process.stderr.write(`${message}\n`);
      } catch {
        // A UI that fails must not cost the model anything.
      }
    };

    const showStatus = (ctx: ExtensionContext): void => {
      try {
        if (ctx.hasUI) ctx.ui.setStatus(C.STATUS_KEY, engine.options.enabled ? statusText(engine.ledger) : undefined);
      } catch {
        // The status line is decoration.
      }
    };

    // A held-back call has no tool_result: its delivery is recorded on the error result Pi persists.
    // The hook runs for every message, so it is registered only while the gate is on.
    // Every hook runs fail-open: a failure costs only what the extension would have added. It is
    // counted under a fixed label for `/lazy-agents`, and the user is warned once per session.
    const failed = <T>(ctx: ExtensionContext, label: C.FailureLabel, fallback: () => T): T => {
      if (engine.noteFailure(label)) tell(ctx, C.FAILURE_WARNING, "warning");
      return fallback();
    };
    const guarded = <T>(
      ctx: ExtensionContext,
      label: C.FailureLabel,
      run: () => T | Promise<T>,
      fallback: () => T,
    ): T | Promise<T> => {
      try {
        const result = run();
        return result instanceof Promise ? result.catch(() => failed(ctx, label, fallback)) : result;
      } catch {
        return failed(ctx, label, fallback);
      }
    };
    const nothing = () => undefined;
    registerChecks(pi, engine, guarded, tell);

    const recordGateDelivery: ExtensionHandler<MessageEndEvent, MessageEndEventResult> = (event, ctx) =>
      guarded(
        ctx,
        "gateRecord",
        () => {
          const message = event.message;
          if (message.role !== "toolResult") return undefined;
          const record = engine.gate?.takeRecord(message.toolCallId);
          if (!record) return undefined;
          const details = withRecord(message.details, record);
          return { message: { ...message, details: details as typeof message.details } };
        },
        nothing,
      );
    let stopGateHook: (() => void) | undefined;
    const syncGateHook = (): void => {
      const wanted = engine.options.enabled && engine.options.gateWrites;
      if (wanted && !stopGateHook) stopGateHook = pi.on("message_end", recordGateDelivery);
      if (!wanted && stopGateHook) {
        stopGateHook();
        stopGateHook = undefined;
      }
    };

    const loadSettings = (ctx: ExtensionContext): void => {
      const raw = (pi.getSettings() as Record<string, unknown>)[C.SETTINGS_KEY];
      const origin = settingsOrigin(engine.fs, ctx.cwd, ctx.isProjectTrusted());
      const { options, warnings } = optionsFromSettings(raw, origin);
      if (pi.getFlag(C.DISABLE_FLAG) === true) options.enabled = false;
      engine.configure(options);
      syncGateHook();
      for (const warning of warnings) tell(ctx, warning, "warning");
    };

    const rebuild = (ctx: ExtensionContext): void => {
      guarded(
        ctx,
        "rebuild",
        () => {
          engine.discoveryFor(ctx.cwd);
          if (engine.options.enabled) engine.git?.start();
          engine.ledger.rebuild(recordsInContext(ctx.sessionManager));
          engine.contextMark = sessionMark(ctx.sessionManager);
        },
        // A session we cannot read leaves the ledger empty: at worst a file is sent again.
        () => engine.ledger.clear(),
      );
      showStatus(ctx);
    };

    // Pi's TUI replaces an info notification with the next one, so parallel calls would each hide
    // the last: what a turn loads is gathered here and told once, when the turn ends.
    let turnLoaded: TurnLoaded = emptyLoaded();
    const announce = (ctx: ExtensionContext, plan: DeliveryPlan): void => {
      if (!ctx.hasUI) return;
      addLoaded(turnLoaded, plan.record);
      for (const skip of plan.record.skipped) tell(ctx, warningText(skip), "warning");
      showStatus(ctx);
    };
    const tellLoaded = (ctx: ExtensionContext): void => {
      const loaded = turnLoaded;
      turnLoaded = emptyLoaded();
      if (loaded.files.size + loaded.rules.size + loaded.skills.size === 0) return;
      const paths = [...loaded.files, ...loaded.rules, ...loaded.skills].map(oneLine);
      tell(ctx, C.loadedNotice(countsOf(loaded), paths), "info");
    };

    pi.on("session_start", (_event, ctx) => {
      guarded(ctx, "settings", () => loadSettings(ctx), nothing);
      rebuild(ctx);
    });
    pi.on("before_agent_start", (event, ctx) => {
      guarded(ctx, "startup", () => engine.learnStartup(ctx.cwd, event.systemPromptOptions), nothing);
    });
    pi.on("session_tree", (_event, ctx) => rebuild(ctx));
    pi.on("session_compact", (_event, ctx) => rebuild(ctx));
    // Context edits come between turns: the ledger follows before the turn's first call.
    pi.on("turn_start", (_event, ctx) => {
      const check = () => {
        if (contextEditedSince(ctx.sessionManager, engine.contextMark)) return true;
        engine.contextMark = sessionMark(ctx.sessionManager);
        return false;
      };
      if (guarded(ctx, "rebuild", check, () => true)) rebuild(ctx);
    });

    const block = (ctx: ExtensionContext, gate: GateOutcome | undefined) => {
      if (gate) announce(ctx, gate.plan);
      return gate && { block: true as const, reason: gate.reason };
    };
    // Never block a tool by accident: a failed discovery only means nothing is appended.
    pi.on("tool_call", (event, ctx) =>
      guarded(
        ctx,
        "toolCall",
        () =>
          then(engine.onToolCall(event, { cwd: ctx.cwd, trusted: ctx.isProjectTrusted() }), (held) => block(ctx, held)),
        nothing,
      ),
    );

    const patch = (ctx: ExtensionContext, outcome: ResultOutcome | undefined) => {
      if (outcome) announce(ctx, outcome.plan);
      return outcome?.patch;
    };
    // Only a call that entered new folders or imports waits, for git; the plan-and-apply never follows an await.
    pi.on("tool_result", (event, ctx) =>
      guarded(ctx, "toolResult", () => then(engine.onToolResult(event), (done) => patch(ctx, done)), nothing),
    );

    // Per-call state ends with each result; what calls without a result (blocked, aborted) leave
    // ends with their turn. No per-call hook is spent on it: every hook costs Pi a context object.
    pi.on("turn_end", (event, ctx) => {
      // A reminder that a later extension replaced, cut or dropped never reached the model: the ledger follows the session.
      const confirm = () => {
        const { lost, rescued } = engine.calls.confirmTurn(event.toolResults);
        for (const entry of rescued) pi.appendEntry(C.RESCUED_RECORD_ENTRY, entry);
        return lost;
      };
      if (guarded(ctx, "rebuild", confirm, () => false) === true) rebuild(ctx);
      engine.endTurn();
      tellLoaded(ctx);
    });
    pi.on("agent_end", (_event, ctx) => {
      engine.endTurn();
      tellLoaded(ctx);
    });

    pi.on("session_shutdown", () => {
      engine.shutdown();
    });

    pi.registerCommand(C.COMMAND_NAME, {
      description: C.COMMAND_DESCRIPTION,
      getArgumentCompletions: (prefix) => commandCompletions(engine, prefix),
      handler: async (args, ctx) => {
        const report = await commandReport(engine, args, { cwd: ctx.cwd, trusted: ctx.isProjectTrusted() });
        // Without a UI the report goes to stderr: Pi keeps stdout for the answer (print) or events (json).
        if (ctx.hasUI) ctx.ui.notify(report, "info");
        else process.stderr.write(`${report}\n`);
      },
    });
  };
}

/** `next` of a value that may still be on its way: synchronous when it is already there. */
function then<T, R>(value: T | Promise<T>, next: (value: T) => R): R | Promise<R> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** The text `/lazy-agents [why <path>]` shows. */
async function commandReport(engine: LazyAgents, args: string, env: CallEnvironment): Promise<string> {
  try {
    const words = args.trim();
    if (words === "help") return C.REPORT_USAGE;
    if (words.startsWith("why ")) {
      const quoted = quotedCommand(words.slice(4));
      if (quoted !== undefined) return await explainCommand(engine, quoted, env);
      const why = await explainPath(engine, words.slice(4), env);
      return [why, ...checkWhy(engine, env, words.slice(4).trim())].join("\n");
    }
    engine.discoveryFor(env.cwd);
    if (words !== "" && words !== C.VERBOSE_ARGUMENT) return C.REPORT_USAGE;
    return [formatInspection(engine, words === C.VERBOSE_ARGUMENT), ...checkReport(engine, env)].join("\n");
  } catch {
    return C.REPORT_FAILED;
  }
}

export default createLazyAgents();

// =============================================================================================
// 2. Per-call lifecycle. A tool call is located when it starts (git's questions go out then); its
// result awaits git until no question is left, then views, plans and applies in one synchronous
// step; turn_end confirms what Pi persisted. What a call touches is its tool path or its bash words.

const UNICODE_SPACES = /[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g;

const NARROW_NO_BREAK_SPACE = "\u202F";

const RIGHT_SINGLE_QUOTE = "\u2019";

// Exported for tests: a table test of tool path resolution.
/**
 * Resolves a tool's `path` argument the way Pi's built-in tools do (unicode spaces, a leading `@`,
 * `~`, `file://`), or undefined for input no tool could open. With `exists`, a path that is not
 * there falls back as Pi's read tool does, to the first of its other spellings that exists.
 */
export function resolveToolPath(raw: unknown, cwd: string, exists?: (path: string) => boolean): string | undefined {
  if (typeof raw !== "string" || raw.trim() === "" || raw.includes("\0")) return undefined;
  if (Buffer.byteLength(raw) > C.MAX_PATH_BYTES) return undefined;
  let path = raw.replace(UNICODE_SPACES, " ");
  if (path.startsWith("@")) path = path.slice(1);
  const home = expandHome(path);
  if (home !== undefined) path = home;
  else if (path.startsWith("file://")) {
    try {
      path = fileURLToPath(path);
    } catch (error) {
      if (!errorCode(error).startsWith("ERR_INVALID")) throw error;
      return undefined;
    }
  }
  const resolved = isAbsolute(path) ? resolve(path) : resolve(cwd, path);
  return exists === undefined ? resolved : readPathFallback(resolved, exists);
}

/**
 * Pi's read tool (`resolveReadPath`) opens, when a path is not there, the first of these that is:
 * a macOS screenshot name (narrow no-break space before AM/PM), the NFD form, curly apostrophes,
 * then NFD with curly apostrophes. A path with no other spelling costs no filesystem call.
 */
function readPathFallback(resolved: string, exists: (path: string) => boolean): string {
  // ASCII with no apostrophe and no AM/PM has no other spelling (profile: building them was 6% of a warm read).
  if (!/[^\x00-\x7F]|'| (?:AM|PM)\./i.test(resolved)) return resolved;
  const nfd = resolved.normalize("NFD");
  const variants = [
    resolved.replace(/ (AM|PM)\./gi, `${NARROW_NO_BREAK_SPACE}$1.`),
    nfd,
    resolved.replace(/'/g, RIGHT_SINGLE_QUOTE),
    nfd.replace(/'/g, RIGHT_SINGLE_QUOTE),
  ].filter((variant) => variant !== resolved);
  if (variants.length === 0 || exists(resolved)) return resolved;
  return variants.find(exists) ?? resolved;
}

// Bash activation: the paths a command's words name, located like the targets of read and write.

/** One word's outcome: the chain it activates, or why it activates nothing. */
interface ShellWordOutcome {
  use: ShellWordUse;
  located?: Located;
  reason?: C.ShellWordReason;
  /** Absolute path of a word that names something inside cwd (what it activates, or cwd's own entries). */
  path?: string;
}

/** Locates what the words name. Each distinct path costs one lstat, and only once its folders are known to be real. */
function locateShellWords(discovery: Discovery, commands: ShellCommand[], cwd: string): ShellWordOutcome[] {
  const byPath = new Map<string, Located | C.ShellWordReason>();
  const folders = new Map<string, Located | "missing" | "resolve">();
  const outcomes: ShellWordOutcome[] = [];
  for (const { uses } of commands) {
    for (const use of uses) {
      if (use.role === "skip") {
        outcomes.push({ use, reason: use.reason });
        continue;
      }
      const key = `${use.role}\0${use.path}`;
      const path = absoluteShellPath(use.path, cwd);
      let found = byPath.get(key);
      if (found === undefined) {
        found = locateShellPath(discovery, use.role, path, folders);
        byPath.set(key, found);
      }
      if (typeof found !== "string") outcomes.push({ use, located: found, path });
      else outcomes.push(found === "cwdItself" ? { use, reason: found, path } : { use, reason: found });
    }
  }
  return outcomes;
}

/** The cwd-relative paths a command names, as rule globs see them (cwd itself aside). */
function shellTouched(discovery: Discovery, outcomes: ShellWordOutcome[], cwd: string): string[] {
  const touched = new Set<string>();
  for (const { path } of outcomes) {
    const rel = path === undefined ? undefined : touchedPath(discovery, path, cwd);
    if (rel) touched.add(rel);
  }
  return [...touched];
}

/** The distinct chains the outcomes activate, one per deepest folder. */
function shellChains(outcomes: ShellWordOutcome[]): Located[] {
  const chains = new Map<string, Located>();
  for (const { located } of outcomes) if (located) chains.set(located.links.at(-1)!.scope, located);
  return [...chains.values()];
}

function absoluteShellPath(path: string, cwd: string): string {
  return expandHome(path) ?? resolve(cwd, path);
}

function locateShellPath(
  discovery: Discovery,
  role: "read" | "write",
  path: string,
  folders: Map<string, Located | "missing" | "resolve">,
): Located | C.ShellWordReason {
  if (path.includes("\0") || Buffer.byteLength(path) > C.MAX_PATH_BYTES) return "missing";
  if (!mayBeInside(discovery, path)) return "outside";
  const located = role === "write" ? locateChain(discovery, path, false) : locateExisting(discovery, path, folders);
  if (located === undefined) return "outside";
  if (typeof located === "string") return located;
  return located.links.length === 0 ? "cwdItself" : located;
}

/** An existing file (its folder) or folder (itself); nothing for a word that names nothing. */
function locateExisting(
  discovery: Discovery,
  path: string,
  folders: Map<string, Located | "missing" | "resolve">,
): Located | C.ShellWordReason | undefined {
  const folder = dirname(path);
  // Only cwd itself has its folder outside: nothing above it is ever looked at.
  if (folder === path || !mayBeInside(discovery, folder)) return "cwdItself";
  let parent = folders.get(folder);
  if (parent === undefined) folders.set(folder, (parent = shellFolder(discovery, folder)));
  if (parent === "missing") return "missing";
  // Only a folder whose every step below cwd is a real folder lets the word be looked at as written.
  if (parent !== "resolve") {
    const kind = wordKind(discovery, path, parent.stats?.at(-1));
    if (kind === "missing") return "missing";
    if (typeof kind === "object")
      return { links: chainFor(discovery, relative(discovery.cwdReal, path)), stats: [...parent.stats!, kind] };
    if (kind === "file") return parent;
  }
  const target = discovery.realpathOrUndefined(path);
  if (target === undefined) return "missing";
  if (!isPathInsideOrSame(discovery.cwdReal, target)) return "outside";
  let isDirectory: boolean;
  try {
    isDirectory = discovery.fs.stat(target)?.isDirectory() === true;
  } catch (error) {
    errorCode(error);
    return "missing";
  }
  return locateChain(discovery, target, isDirectory);
}

/**
 * A word's folder walked down from cwd, one lstat per step: real folders (with their stats), a
 * step that is not there (so the word names nothing, with no further call), or one to resolve
 * through real paths (a link on the way, an error, a path that reaches cwd through a link).
 */
function shellFolder(discovery: Discovery, folder: string): Located | "missing" | "resolve" {
  const rel = relativeInside(discovery.cwdReal, folder);
  if (rel === "") return { links: [], stats: [] };
  if (rel === undefined) return "resolve";
  const fresh = !discovery.chains.has(rel);
  const links = chainFor(discovery, rel);
  const { stats, stop } = lstatChain(discovery.fs, links);
  if (stop === "error") return "resolve";
  if (stop === "missing") return "missing";
  if (stop !== undefined) return stop.isSymbolicLink() ? "resolve" : "missing";
  if (fresh && !spelledAsOnDisk(discovery, links, stats)) {
    // One folder, one identity: another spelling is looked at through its real path, every time.
    discovery.chains.delete(rel);
    return "resolve";
  }
  return { links, stats };
}

/**
 * What a word names: a folder (with its fresh stats, which its views need), a file, nothing, or
 * "link" when it must be looked at through its real path (a link, or an lstat that failed). A file or nothing is remembered against its folder's signature, which any entry added,
 * removed or replaced there changes: a known word in an unchanged folder costs no call at all.
 */
function wordKind(discovery: Discovery, path: string, folder: nodeFs.Stats | undefined): ShellWordKind | nodeFs.Stats {
  let known = shellWordKinds.get(discovery);
  if (!known) shellWordKinds.set(discovery, (known = new Map()));
  const cached = folder && known.get(path);
  if (cached && sameSignature(cached.folder, folder)) return cached.kind;
  let stats: nodeFs.Stats | undefined;
  try {
    stats = discovery.fs.lstat(path);
  } catch (error) {
    errorCode(error);
    return "link"; // EIO, EACCES …: the word is looked at through its real path instead.
  }
  if (stats?.isDirectory()) return stats;
  const kind = !stats ? "missing" : stats.isSymbolicLink() ? "link" : "file";
  if (folder && kind !== "link") {
    if (known.size >= C.MAX_SHELL_WORD_CACHE) known.clear();
    known.set(path, { folder: signatureOf(folder), kind });
  }
  return kind;
}

type ShellWordKind = "missing" | "file" | "link";

// Keyed by the word's folder signature, not its own, so a known word costs no call (bench/bash.ts measures it).
const shellWordKinds = new WeakMap<Discovery, Map<string, { folder: Signature; kind: ShellWordKind }>>();

/** Words named like instruction files: the command may create or change one (`>`, `tee`, `sed -i`). */
function shellNamesInstruction(commands: ShellCommand[], fileNames: readonly string[]): boolean {
  return commands.some(({ uses }) =>
    uses.some((use) => use.role !== "skip" && fileNames.includes(posix.basename(use.path))),
  );
}

const FILE_TOOLS: ReadonlySet<string> = new Set(["read", "edit", "write"]);

interface GateOutcome {
  reason: string;
  plan: DeliveryPlan;
}

interface CallEnvironment {
  cwd: string;
  trusted: boolean;
}

/** What a tool call located when it started; its views are taken once, at its result. */
interface PendingCall {
  toolName: string;
  rootId: string;
  nested: boolean;
  /** The tool's resolved target ("" for bash). */
  target: string;
  /** The chains it touches: its target's, or those its bash words activate. */
  chains: Located[];
  withSkills: boolean;
  partial: boolean;
  /** cwd-relative paths the call touched, for rule globs (rules touch point). */
  touched: string[];
  /** A bash call's commands, located again after it ran when they name an instruction file. */
  commands?: ShellCommand[];
  /** Real path of an instruction file this call writes: the batch's other results leave it alone. */
  writes?: string;
  /** Git's answers for the chains' new folders, asked at tool_call, awaited at the result. */
  gitAnswer?: Promise<void>;
}

interface ResultOutcome {
  patch: ToolResultEventResult;
  plan: DeliveryPlan;
}

type Shown = Pick<PlanInput, "shownWhole" | "shownInPart">;

// Exported for tests: they read the engine's state through onEngine.
export class LazyAgents {
  readonly fs: FileSystem;
  options: Options = defaultOptions();
  readonly ledger = new Ledger();
  discovery?: Discovery;
  /** What this turn's calls leave between their tool_call, their result and the turn's end. */
  readonly calls = new CallTracker();
  /** The write gate, only while `gateWrites` is on. */
  gate?: WriteGate;
  readonly inspection = new Inspection();
  /** The session entry the ledger was last checked against, for context edits appended since. */
  contextMark?: string | null;
  /** Failures the hooks caught, by fixed label, for `/lazy-agents`. */
  readonly failures = new Map<C.FailureLabel, number>();
  /** hookify rules of cwd and the folders seen (see the Checks section). */
  readonly checks: CheckState = newCheckState();
  git?: GitIgnoreOracle;
  private readonly spawner: SpawnGit;
  private boundCwd?: string;
  startupSkills = new Map<string, string>();
  /** Paths of the context files Pi loaded at start-up, as Pi gives them. */
  private startupFiles: readonly string[] = [];

  constructor(fs: FileSystem = nodeFileSystem, spawner: SpawnGit = spawnGit) {
    this.fs = fs;
    this.spawner = spawner;
  }

  /** Counts a failure a hook caught; true for the session's first, which the user hears about. */
  noteFailure(label: C.FailureLabel): boolean {
    const first = this.failures.size === 0;
    this.failures.set(label, (this.failures.get(label) ?? 0) + 1);
    return first;
  }

  /** The discovery of cwd, made once per cwd: its real path is the boundary every candidate is checked against. */
  discoveryFor(cwd: string): Discovery | undefined {
    // The warm path: cwd does not move within a session, so its real path is resolved once.
    if (this.discovery && this.boundCwd === cwd) {
      this.discovery.options = this.options;
      return this.discovery;
    }
    this.boundCwd = cwd;
    let cwdReal: string;
    try {
      cwdReal = this.fs.realpath(resolve(cwd));
    } catch (error) {
      errorCode(error);
      return undefined;
    }
    if (this.discovery?.cwdReal === cwdReal) {
      this.discovery.options = this.options;
      return this.discovery;
    }
    if (this.git?.cwdReal !== cwdReal) {
      this.git?.stop();
      this.git = new GitIgnoreOracle(cwdReal, this.spawner);
    }
    this.discovery = new Discovery(this.fs, cwdReal, this.options, () => this.git?.available === true);
    this.discovery.logicalCwd = resolve(cwd);
    this.discovery.learnStartupFiles(this.startupFiles);
    return this.discovery;
  }

  shutdown(): void {
    this.git?.stop();
    this.git = undefined;
    this.discovery = undefined;
  }

  /** Asks git what the views and plan just built left open (imports, rule folders); undefined when nothing. */
  private learnOpenQuestions(discovery: Discovery, calls: PendingCall[]): Promise<void> | undefined {
    const chains = calls.flatMap((call) => call.chains.flatMap((located) => chainQuestions(discovery, located.links)));
    return askGit(discovery, this.git, [...discovery.gitAnswers.takeWanted(), ...chains]);
  }

  /**
   * What Pi put in its system prompt at start-up, as `before_agent_start` gives it: the skills it
   * lists (name -> location), and its context files, which the source policy never sends again.
   */
  learnStartup(cwd: string, options: Pick<BuildSystemPromptOptions, "contextFiles" | "skills">): void {
    const listed = (options.skills ?? []).filter((skill) => !skill.disableModelInvocation);
    this.startupSkills = new Map(listed.map((skill) => [skill.name, skill.filePath]));
    this.startupFiles = (options.contextFiles ?? []).map((file) => file.path);
    this.discoveryFor(cwd)?.learnStartupFiles(this.startupFiles);
  }

  /**
   * Before the tool runs: locates what the call touches and asks git about new folders, so that
   * the answers overlap the tool's run. Only the write gate views and plans here.
   */
  onToolCall(event: ToolCallEvent, env: CallEnvironment): GateOutcome | undefined | Promise<GateOutcome | undefined> {
    if (event.parentToolCallId !== undefined) this.calls.parentOf.set(event.toolCallId, event.parentToolCallId);
    if (!this.options.enabled || !this.options.triggers.has(event.toolName)) return undefined;
    const discovery = this.discoveryFor(env.cwd);
    if (!discovery) return undefined;
    const call = this.locate(discovery, event, env);
    if (!call) return undefined;
    if (call.writes !== undefined) this.calls.written.add(call.writes);
    const questions = call.chains.flatMap((located) => chainQuestions(discovery, located.links));
    call.gitAnswer = askGit(discovery, this.git, questions);
    // The gate looks at outermost writes and edits: it views and plans before the tool runs, once git has answered.
    const gate = this.gate;
    if (!gate || event.parentToolCallId !== undefined || (event.toolName !== "write" && event.toolName !== "edit")) {
      this.calls.pending.set(event.toolCallId, call);
      return undefined;
    }
    return this.settle([call], {}, call.gitAnswer, 0, (views, plan) => {
      this.inspection.record(views);
      const held = gate.hold(event.toolCallId, call.target, plan, views, this.ledger, this.options.budgetBytes);
      if (held) this.calls.written.delete(call.writes!);
      else this.calls.pending.set(event.toolCallId, call);
      return held;
    });
  }

  /** What a call touches, located; undefined for a call that touches nothing we deliver for. */
  private locate(discovery: Discovery, event: ToolCallEvent, env: CallEnvironment): PendingCall | undefined {
    const read = isToolCallEventType("read", event) ? event.input : undefined;
    const base = {
      toolName: event.toolName,
      rootId: this.calls.rootOf(event.toolCallId),
      nested: event.parentToolCallId !== undefined,
      withSkills: env.trusted && this.options.skills,
      partial: read !== undefined && (read.offset !== undefined || read.limit !== undefined),
    };
    if (isToolCallEventType("bash", event)) {
      if (typeof event.input.command !== "string") return undefined;
      this.sweepSoon(discovery);
      const commands = readShellCommand(event.input.command);
      const outcomes = locateShellWords(discovery, commands, env.cwd);
      const chains = shellChains(outcomes);
      // Rules touch point: the paths the command names, for rule globs.
      const touched = this.options.rules ? shellTouched(discovery, outcomes, env.cwd) : [];
      if (chains.length === 0 && touched.length === 0) return undefined;
      return { ...base, target: "", chains, touched, commands };
    }
    const targetIsDirectory = !FILE_TOOLS.has(event.toolName);
    // Search tools and other triggers name a folder, cwd when they name none (as Pi's do).
    const raw = (event.input as { path?: unknown }).path ?? (targetIsDirectory ? "." : undefined);
    const target = resolveToolPath(raw, env.cwd, read ? discovery.readFallback : undefined);
    if (target === undefined) return undefined;
    this.sweepSoon(discovery);
    const located = locateChain(discovery, target, targetIsDirectory);
    if (located === undefined) return undefined;
    const writes =
      (event.toolName === "edit" || event.toolName === "write") && this.options.fileNames.includes(basename(target))
        ? (discovery.realpathOrUndefined(target) ?? target)
        : undefined;
    // A write may create an instruction file in folders that do not exist yet: the call is kept,
    // so that its result counts the file as delivered.
    if (located.links.length === 0 && writes === undefined && !this.options.rules) return undefined;
    const touched = this.options.rules ? touchedPath(discovery, target, env.cwd) : undefined;
    return { ...base, target, chains: [located], touched: touched === undefined ? [] : [touched], writes };
  }

  /**
   * Awaits git until the views and plan of these calls leave no question open (imports of
   * imports, folder imports, rule folders and their imports: at most C.MAX_IMPORT_DEPTH + 1
   * rounds, each bounded by git's timeout), then views, plans and finishes in one synchronous step.
   */
  private settle<T>(
    calls: PendingCall[],
    shown: Shown | ((views: DirectoryView[]) => Shown),
    wait: Promise<void> | undefined,
    round: number,
    finish: (views: DirectoryView[], plan: DeliveryPlan) => T,
  ): T | Promise<T> {
    const again = () => this.settle(calls, shown, undefined, round + 1, finish);
    if (wait) return wait.then(again, again);
    const discovery = this.discovery;
    const views = discovery ? mergeViews(calls.flatMap((call) => this.viewsOf(discovery, call))) : [];
    const plan = this.planFor(
      views,
      typeof shown === "function" ? shown(views) : shown,
      calls.flatMap((call) => call.touched),
      this.calls.leftAloneBy(calls),
    );
    const open = discovery && round <= C.MAX_IMPORT_DEPTH ? this.learnOpenQuestions(discovery, calls) : undefined;
    return open ? this.settle(calls, shown, open, round, finish) : finish(views, plan);
  }

  /** Resolves once git has answered all that views of these chains ask (`/lazy-agents why` waits so too). */
  async settled(chains: Located[], withSkills: boolean): Promise<void> {
    const look = { toolName: "ls", rootId: "", nested: false, target: "", chains, withSkills, partial: false };
    await this.settle([{ ...look, touched: [] }], {}, undefined, 0, () => undefined);
  }

  /** A call's views: its chains located again when the tool wrote an instruction file into them. */
  private viewsOf(discovery: Discovery, call: PendingCall): DirectoryView[] {
    discovery.gitAnswers.takeWanted();
    if (call.commands && shellNamesInstruction(call.commands, this.options.fileNames)) {
      const cwd = this.boundCwd ?? discovery.cwdReal;
      call.chains = shellChains(locateShellWords(discovery, call.commands, cwd));
    } else if (call.writes !== undefined) {
      // A write may have made the folders of the instruction file it wrote: locate them again.
      const located = locateChain(discovery, call.target, false);
      call.chains = located ? [located] : [];
    }
    return mergeViews(call.chains.flatMap((located) => viewChain(discovery, located, call.withSkills)));
  }

  private sweepScheduled = false;

  /** Runs a due cache sweep after the current call, so no tool call pays for it. */
  private sweepSoon(discovery: Discovery): void {
    if (this.sweepScheduled || !discovery.wantsSweep()) return;
    this.sweepScheduled = true;
    setImmediate(() => {
      this.sweepScheduled = false;
      try {
        if (discovery === this.discovery && discovery.sweep()) {
          this.inspection.prune((scope) => discovery.exists(join(discovery.cwdReal, scope)));
        }
      } catch {
        // Outside any hook: counted as a hook's failure is. The caches stay as they were: correct, only larger.
        this.noteFailure("sweep");
      }
    });
  }

  private planFor(
    views: DirectoryView[],
    shown: Shown,
    touched: readonly string[] = [],
    leaveAlone?: ReadonlySet<string>,
  ): DeliveryPlan {
    const plan = planDelivery(this.ledger, {
      views,
      ...shown,
      leaveAlone,
      startupSkills: this.startupSkills,
      cwdReal: this.discovery?.cwdReal,
    });
    // Rules touch point: rules contribute planned entries alongside the views.
    if (this.options.rules && this.discovery) {
      planRules(this.ledger, plan, {
        discovery: this.discovery,
        views,
        touched,
        options: this.options,
      });
    }
    return plan;
  }

  /**
   * Activation, after the tool ran: the patch for this result, or undefined to leave it alone.
   * A nested call's activation waits for its outermost call's result, which views them all.
   */
  onToolResult(event: ToolResultEvent): ResultOutcome | undefined | Promise<ResultOutcome | undefined> {
    const call = this.calls.finish(event.toolCallId);
    const own = call !== undefined && activates(call.toolName, event.isError) ? call : undefined;
    if (own?.nested) {
      this.calls.nested.set(own.rootId, [...(this.calls.nested.get(own.rootId) ?? []), own]);
      return undefined;
    }
    const calls = [...(this.calls.nested.get(event.toolCallId) ?? []), ...(own ? [own] : [])];
    this.calls.nested.delete(event.toolCallId);
    if (calls.length === 0) return undefined;
    const shown = (views: DirectoryView[]) => (own ? this.shownByTool(own, event, views) : {});
    const wait = joinAnswers(...calls.map((c) => c.gitAnswer));
    // A file tool's reminder is for the path its call names; a command's or a script's names the paths it touched.
    const named = calls.length > (own ? 1 : 0) || own?.commands !== undefined;
    return this.settle(calls, shown, wait, 0, (views, plan) => {
      this.inspection.record(views);
      const touched = calls.flatMap((call) => call.touched);
      if (named && touched.length > 0) plan.touched = touched;
      return this.deliver(event, plan);
    });
  }

  /** What of an instruction file or an import the tool's own output already shows the model. */
  private shownByTool(call: PendingCall, event: ToolResultEvent, views: DirectoryView[]): Shown {
    const named = this.options.fileNames.includes(basename(call.target));
    const target = named ? this.discovery?.realpathOrUndefined(call.target) : this.importTarget(call, views);
    if (target === undefined) return {};
    // A failed write showed nothing: the file on disk is still the one the model lacks.
    if (call.toolName === "write") return event.isError ? {} : { shownWhole: target };
    if (call.toolName !== "read") return {};
    const whole = !call.partial && !(isReadToolResult(event) && event.details?.truncation?.truncated === true);
    return whole ? { shownWhole: target } : { shownInPart: target };
  }

  /** Real path of a read's target when the chain imports it; resolved only when the chain imports. */
  private importTarget(call: PendingCall, views: DirectoryView[]): string | undefined {
    if (call.toolName !== "read" || !views.some((view) => view.imports.length > 0)) return undefined;
    const real = this.discovery?.realpathOrUndefined(call.target);
    return views.some((view) => view.imports.some(({ file }) => file.realPath === real)) ? real : undefined;
  }

  private deliver(event: ToolResultEvent, plan: DeliveryPlan): ResultOutcome | undefined {
    if (isRecordEmpty(plan.record)) return undefined;
    fitPlanToBudget(plan, this.options.budgetBytes);
    if (isRecordEmpty(plan.record)) return undefined;
    // Planned and applied with no await in between: a sibling's result plans against this delivery.
    const text = recordShowsText(plan.record) ? formatReminder(plan) : undefined;
    if (text !== undefined) plan.record.reminder = versionOf(text);
    const patch: ToolResultEventResult = { details: withRecord(event.details, plan.record) };
    if (text !== undefined) {
      patch.content = [...event.content, { type: "text", text }];
      if (event.structuredContent !== undefined) patch.structuredContent = event.structuredContent;
    }
    this.ledger.apply(plan.record);
    if (patch.content) this.calls.awaitConfirmation(event.toolCallId, plan.record);
    return { patch, plan };
  }

  /** Applies new options; caches that depend on them start over. */
  configure(options: Options): void {
    if (discoveryChanged(this.options, options)) {
      this.discovery = undefined;
      this.inspection.clear();
    }
    this.options = options;
    this.gate = options.gateWrites ? (this.gate ?? new WriteGate()) : undefined;
  }

  /** Forgets what calls that never reached their result left behind; all calls of the turn are done. */
  endTurn(): void {
    this.calls.endTurn();
    this.gate?.endTurn();
  }

  /** Sizes of every map, for tests and the soak run. */
  stateSizes(): Record<string, number> {
    return {
      ...this.calls.sizes(),
      gateRecords: this.gate?.records.size ?? 0,
      gatedScopes: this.gate?.scopes.size ?? 0,
      gateRetries: this.gate?.retries.size ?? 0,
      ...this.inspection.sizes(),
      ledgerFiles: this.ledger.all("file").length,
      ledgerScopes: this.ledger.byScope.size,
      ledgerImports: this.ledger.importsByScope.size,
      ledgerSkills: this.ledger.all("skill").length,
      ledgerWithdrawn: this.ledger.withdrawn.size,
      ledgerSkipped: this.ledger.skipped.size,
      ledgerAlsoGoverns: this.ledger.alsoGoverns.size,
      ...this.discovery?.cacheSizes(),
    };
  }
}

/** What the calls of one turn leave behind between their tool_call, their result and the turn's end. */
class CallTracker {
  /** Per-call state between tool_call and tool_result. */
  readonly pending = new Map<string, PendingCall>();
  /** Nested calls that activated, waiting for the outermost call's result. */
  readonly nested = new Map<string, PendingCall[]>();
  readonly parentOf = new Map<string, string>();
  /** Instruction files this turn's calls write, until their result: the other results leave them alone. */
  readonly written = new Set<string>();
  /** Records this turn's results carry, until the turn's end shows what Pi persisted of them. */
  readonly unconfirmed = new Map<string, LedgerRecord>();

  /** The outermost call a nested call (a codemode script's) belongs to. */
  rootOf(toolCallId: string): string {
    let id = toolCallId;
    for (let hops = 0; hops < 64; hops++) {
      const parent = this.parentOf.get(id);
      if (parent === undefined) return id;
      id = parent;
    }
    return id;
  }

  /** The call whose result came; the file it wrote is now on disk for every sibling to see. */
  finish(toolCallId: string): PendingCall | undefined {
    const call = this.pending.get(toolCallId);
    this.pending.delete(toolCallId);
    this.parentOf.delete(toolCallId);
    if (call?.writes !== undefined) this.written.delete(call.writes);
    return call;
  }

  /** Files that sibling calls still write: these calls' plans leave them to the writer's result. */
  leftAloneBy(calls: PendingCall[]): ReadonlySet<string> | undefined {
    if (this.written.size === 0) return undefined;
    const others = new Set(this.written);
    for (const call of calls) if (call.writes !== undefined) others.delete(call.writes);
    return others;
  }

  awaitConfirmation(toolCallId: string, record: LedgerRecord): void {
    if (this.unconfirmed.size >= C.MAX_UNCONFIRMED_RESULTS) {
      this.unconfirmed.delete(this.unconfirmed.keys().next().value!);
    }
    this.unconfirmed.set(toolCallId, record);
  }

  /**
   * Checks this turn's deliveries against the tool results Pi persisted. An extension that runs
   * after this one may replace a result (an image alone), cut or redact the reminder: that
   * delivery never reached the model, so the ledger must be rebuilt from what the session holds,
   * and the next access in its scope sends it again. One that replaced `details` only left the
   * reminder whole: its record is rescued into an entry of its own (`recordsInContext` reads it).
   */
  confirmTurn(toolResults: TurnEndEvent["toolResults"]): { lost: boolean; rescued: RescuedRecord[] } {
    const rescued: RescuedRecord[] = [];
    let lost = false;
    for (const message of toolResults) {
      const record = this.unconfirmed.get(message.toolCallId);
      if (!record) continue;
      if (!projectionShows([message], record)) lost = true;
      else if (readRecord(message.details) === undefined) rescued.push({ toolCallId: message.toolCallId, record });
    }
    this.unconfirmed.clear();
    return { lost, rescued };
  }

  endTurn(): void {
    this.unconfirmed.clear();
    this.pending.clear();
    this.nested.clear();
    this.written.clear();
    this.parentOf.clear();
  }

  sizes(): Record<string, number> {
    return {
      pending: this.pending.size,
      nested: this.nested.size,
      written: this.written.size,
      parentOf: this.parentOf.size,
      unconfirmed: this.unconfirmed.size,
    };
  }
}

/**
 * The write gate, present only while `gateWrites` is on. It holds back the first write or edit into
 * a scope whose instructions the model lacks: the block reason carries them, the ledger counts them
 * delivered, and the retry goes through. Pi persists the reason as the call's error result;
 * `records` waits for that message to record it.
 */
class WriteGate {
  /** Deliveries made through a held-back write, waiting for Pi's error result message. */
  readonly records = new Map<string, LedgerRecord>();
  /**
   * Scopes whose instructions the gate held back a call for in this turn. Pi runs every sibling's
   * tool_call before any result reaches the model, so a sibling write into them is held too.
   */
  readonly scopes = new Set<string>();
  /** Targets held back once, whose next write or edit goes through (the retry the reason asks for). */
  readonly retries = new Set<string>();

  /**
   * Holds the call back when the plan carries instructions (or a sibling's do); undefined lets it
   * run. A target held once goes through when it is tried again, as the reason promises, even when
   * the budget left files out of that reason: the retry's own result carries them.
   */
  hold(
    toolCallId: string,
    target: string,
    plan: DeliveryPlan,
    views: DirectoryView[],
    ledger: Ledger,
    budgetBytes: number,
  ): GateOutcome | undefined {
    if (this.retries.delete(target)) return undefined;
    if (plan.files.length === 0 && !plan.rules?.length) return this.holdSibling(views);
    fitPlanToBudget(plan, budgetBytes);
    if (plan.files.length === 0 && !plan.rules?.length) return this.holdSibling(views);
    const text = formatReminder(plan);
    plan.record.reminder = versionOf(text);
    ledger.apply(plan.record);
    this.records.set(toolCallId, plan.record);
    if (this.retries.size >= C.MAX_UNCONFIRMED_RESULTS) this.retries.delete(this.retries.values().next().value!);
    this.retries.add(target);
    for (const entry of plan.files) this.scopes.add(entry.scope);
    return { reason: `${text}\n${C.GATE_RETRY_TEXT}`, plan };
  }

  /** Holds a write into a scope gated in this turn: its instructions reach the model only after it. */
  private holdSibling(views: DirectoryView[]): GateOutcome | undefined {
    if (this.scopes.size === 0 || !views.some((view) => this.scopes.has(view.scope))) return undefined;
    return { reason: C.GATE_SIBLING_TEXT, plan: { record: emptyRecord(), files: [], skills: [] } };
  }

  /** The gate's ledger record for the error result Pi persists for a held-back call. */
  takeRecord(toolCallId: string): LedgerRecord | undefined {
    const record = this.records.get(toolCallId);
    this.records.delete(toolCallId);
    return record;
  }

  endTurn(): void {
    this.records.clear();
    this.scopes.clear();
  }
}

function activates(toolName: string, isError: boolean): boolean {
  // A failing bash command (a test run) is exactly when a scope's rules matter.
  return toolName === "edit" || toolName === "write" || toolName === "bash" || !isError;
}

/** One view per scope, parent first; a later view of the same scope is the fresher one. */
function mergeViews(views: DirectoryView[]): DirectoryView[] {
  const byScope = new Map<string, DirectoryView>();
  for (const view of views) byScope.set(view.scope, view);
  // Depths once, not per comparison (profile: splitting scopes in the comparator was a tenth of a warm read).
  const depths = new Map([...byScope.values()].map((view) => [view, depthOf(view.scope)]));
  return [...depths.keys()].sort((a, b) => depths.get(a)! - depths.get(b)! || a.scope.localeCompare(b.scope));
}

function withRecord(details: unknown, record: LedgerRecord): Record<string, unknown> {
  const base =
    typeof details === "object" && details !== null && !Array.isArray(details)
      ? (details as Record<string, unknown>)
      : {};
  return { ...base, [C.DETAILS_KEY]: record };
}

/** cwd-relative path of a tool's target with forward slashes, for rule globs; undefined outside cwd. */
function touchedPath(discovery: Discovery, target: string, cwd: string): string | undefined {
  const inside = (root: string) => {
    const rel = relativeInside(root, target);
    return rel === undefined || sep === "/" ? rel : rel.split(sep).join("/");
  };
  return inside(discovery.cwdReal) ?? inside(resolve(cwd));
}

// =============================================================================================
// 2b. Checks (hookify). Claude Code's hookify rules (`.claude/hookify.<name>.local.md`), read with
// hookify's own frontmatter parser and applied with its fields, operators and precedence in Pi's
// events: tool_call of bash, edit and write; input (prompt); agent_before_settle (stop). A folder's
// `.claude` governs the paths inside that folder. A warm call stats each rule folder and rule file
// on its path and reads nothing; the regexes of a call that could run away share one time bound
// in `node:vm`.

interface CheckCondition {
  field: string;
  operator: string;
  pattern: string;
  regex?: RegExp;
}

/** A rule as hookify's `Rule.from_dict` builds it, plus whether it can be used at all. */
interface CheckRule {
  name: string;
  enabled: boolean;
  event: string;
  action: string;
  toolMatcher?: string;
  conditions: CheckCondition[];
  message: string;
  /** No frontmatter, a condition that is not a mapping, or a pattern that does not compile. */
  invalid: boolean;
}

interface Check extends CheckRule {
  /** cwd-relative path of the rule file, and the folder whose paths it governs ("" for cwd). */
  path: string;
  base: string;
  loaded: InstructionFile;
}

/** What a call offers the rules: the event, the tool, and each field's values (file_path has two). */
interface CheckInput {
  event: "bash" | "file" | "prompt" | "stop";
  toolName?: string;
  input: Record<string, unknown>;
  fields: Record<string, string[]>;
}

/** The winning action, its rules' names, and what the model is told in the checks' wrapper. */
interface CheckVerdict {
  action: "block" | "ask" | "warn";
  names: string[];
  text: string;
}

export type CheckState = ReturnType<typeof newCheckState>;

function newCheckState() {
  return {
    /** Rule files of each folder's `.claude`, kept while its listing stands. */
    folders: new Map<string, { listing: ListingEntry; candidates: string[] }>(),
    compiled: new Map<string, Check>(),
    /** Rule versions skipped for the session, by path and version. */
    skipped: new Map<string, C.CheckSkip>(),
    fired: new Map<string, number>(),
    /** Warnings waiting for their call's result. */
    pending: new Map<string, string>(),
    /** Whether a stop was sent back since the last prompt. */
    continued: false,
  };
}

const CHECK_TOOLS: ReadonlySet<string> = new Set(["bash", "edit", "write"]);

/** hookify's value cleaning: whitespace, then every `"` and then every `'` at both ends; backslashes stay. */
function hookifyValue(text: string): string {
  const unquoted = text.trim().replace(/^"+|"+$/g, "");
  return unquoted.replace(/^'+|'+$/g, "");
}

function splitOnce(text: string): [string, string] {
  const at = text.indexOf(":");
  return [text.slice(0, at).trim(), text.slice(at + 1)];
}

// Exported for tests: the table of hookify's own examples.
/** hookify's `extract_frontmatter`, line for line: not YAML (no inline comments, no escapes). */
export function hookifyFrontmatter(content: string): { frontmatter: Record<string, unknown>; message: string } {
  const second = content.startsWith("---") ? content.indexOf("---", 3) : -1;
  if (second === -1) return { frontmatter: {}, message: content };
  const frontmatter: Record<string, unknown> = Object.create(null);
  let key = "";
  let list: unknown[] = [];
  let dict: Record<string, string> = Object.create(null);
  let inList = false;
  let inDict = false;
  const flushDict = () => {
    if (inDict && Object.keys(dict).length > 0) list.push(dict);
    dict = Object.create(null);
  };
  for (const line of content.slice(3, second).split("\n")) {
    const stripped = line.trim();
    if (stripped === "" || stripped.startsWith("#")) continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0 && line.includes(":") && !stripped.startsWith("-")) {
      if (inList && key !== "") {
        flushDict();
        frontmatter[key] = list;
        inList = inDict = false;
        list = [];
      }
      const [name, raw] = splitOnce(line);
      if (raw.trim() === "") {
        key = name;
        inList = true;
        list = [];
        continue;
      }
      const value = hookifyValue(raw);
      const lower = value.toLowerCase();
      frontmatter[name] = lower === "true" ? true : lower === "false" ? false : value;
    } else if (stripped.startsWith("-") && inList) {
      flushDict();
      const item = stripped.slice(1).trim();
      if (item.includes(":") && item.includes(",")) {
        const inline: Record<string, string> = Object.create(null);
        for (const part of item.split(",")) {
          if (!part.includes(":")) continue;
          const [name, raw] = splitOnce(part);
          inline[name] = hookifyValue(raw);
        }
        list.push(inline);
        inDict = false;
      } else if (item.includes(":")) {
        const [name, raw] = splitOnce(item);
        inDict = true;
        dict[name] = hookifyValue(raw);
      } else {
        list.push(hookifyValue(item));
        inDict = false;
      }
    } else if (indent > 2 && inDict && line.includes(":")) {
      const [name, raw] = splitOnce(stripped);
      dict[name] = hookifyValue(raw);
    }
  }
  if (inList && key !== "") {
    flushDict();
    frontmatter[key] = list;
  }
  return { frontmatter, message: content.slice(second + 3).trim() };
}

/** Python's truth of a parsed value: a non-empty string or list, or true. */
function pythonTruth(value: unknown): boolean {
  return value === true || (typeof value === "string" && value !== "") || (Array.isArray(value) && value.length > 0);
}

/** Python's `str()` of a parsed scalar. */
function pythonText(value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  return value === true ? "True" : value === false ? "False" : typeof value === "string" ? value : fallback;
}

// Exported for tests: Python-only regex syntax, translated.
/** A hookify (Python) pattern as a JavaScript regex, case-insensitive; undefined when it does not compile. */
export function hookifyRegex(pattern: string): RegExp | undefined {
  let flags = "i";
  let rest = pattern;
  const inline = /^\(\?([ims]+)\)/.exec(rest);
  if (inline) {
    for (const flag of new Set(inline[1]!)) if (flag !== "i") flags += flag;
    rest = rest.slice(inline[0].length);
  }
  let source = "";
  for (let index = 0; index < rest.length; index++) {
    const char = rest[index]!;
    if (char === "\\" && index + 1 < rest.length) {
      const next = rest[++index]!;
      source += next === "A" ? "(?<![\\s\\S])" : next === "Z" ? "(?![\\s\\S])" : `\\${next}`;
    } else if (rest.startsWith("(?P<", index)) {
      source += "(?<";
      index += 3;
    } else if (rest.startsWith("(?P=", index) && /^\(\?P=(\w+)\)/.test(rest.slice(index))) {
      const name = /^\(\?P=(\w+)\)/.exec(rest.slice(index))![1]!;
      source += `\\k<${name}>`;
      index += name.length + 4;
    } else source += char;
  }
  try {
    return new RegExp(source, flags);
  } catch {
    return undefined;
  }
}

// Exported for tests: the field mapping and the examples' rules.
/** hookify's `Rule.from_dict` over its parser's output. */
export function hookifyRule(text: string): CheckRule {
  const { frontmatter, message } = hookifyFrontmatter(text);
  let invalid = Object.keys(frontmatter).length === 0;
  const event = pythonText(frontmatter.event, "all");
  const conditions: CheckCondition[] = [];
  if (Array.isArray(frontmatter.conditions)) {
    for (const item of frontmatter.conditions) {
      if (typeof item !== "object" || item === null) invalid = true;
      else {
        const { field, operator, pattern } = item as Record<string, string | undefined>;
        conditions.push({ field: field ?? "", operator: operator ?? "regex_match", pattern: pattern ?? "" });
      }
    }
  }
  const simple = frontmatter.pattern;
  if (pythonTruth(simple) && conditions.length === 0) {
    if (typeof simple !== "string") invalid = true;
    const field =
      event === "bash" ? "command" : event === "file" ? "new_text" : event === "prompt" ? "prompt" : "content";
    conditions.push({ field, operator: "regex_match", pattern: String(simple) });
  }
  for (const condition of conditions) {
    if (condition.operator !== "regex_match") continue;
    condition.regex = hookifyRegex(condition.pattern);
    if (!condition.regex) invalid = true;
  }
  return {
    name: pythonText(frontmatter.name, "unnamed"),
    enabled: frontmatter.enabled === undefined || pythonTruth(frontmatter.enabled),
    event,
    action: pythonText(frontmatter.action, "warn"),
    toolMatcher: frontmatter.tool_matcher === undefined ? undefined : pythonText(frontmatter.tool_matcher, ""),
    conditions,
    message,
    invalid,
  };
}

/** cwd and each folder on the way to a cwd-relative path: the folders whose `.claude` governs it. */
function checkBases(discovery: Discovery, rel: string | undefined): string[] {
  const bases = [""];
  const segments = rel === undefined || rel === "" ? [] : rel.split("/").slice(0, -1);
  for (let index = 0; index < segments.length; index++) {
    if (discovery.options.ignoredDirs.has(segments[index]!)) break;
    bases.push(segments.slice(0, index + 1).join("/"));
  }
  return bases;
}

/** The rule files of these folders, compiled once per version: a folder's listing, then a stat per file. */
function checksIn(discovery: Discovery, state: CheckState, bases: string[]): Check[] {
  const checks: Check[] = [];
  for (const base of bases) {
    const dir = join(discovery.cwdReal, base, C.CHECK_DIR_NAME);
    let listing: ListingEntry | undefined;
    try {
      listing = discovery.listing(dir);
    } catch (error) {
      errorCode(error);
    }
    if (!listing) {
      if (base !== "") state.folders.delete(base);
      continue;
    }
    let folder = state.folders.get(base);
    if (folder?.listing !== listing) {
      const names = sortedNames(listing).filter(
        (entry) => (entry.kind === "file" || entry.kind === "link") && C.CHECK_FILE_NAME.test(entry.name),
      );
      folder = { listing, candidates: names.map((entry) => join(dir, entry.name)) };
      state.folders.set(base, folder);
    }
    for (const candidate of folder.candidates) {
      const file = discovery.sourceFileOrUnknown(candidate, base);
      if ("reason" in file) continue;
      let check = state.compiled.get(candidate);
      if (check?.loaded !== file || check.base !== base) {
        check = { ...hookifyRule(file.text), path: file.path, base, loaded: file };
        state.compiled.set(candidate, check);
      }
      checks.push(check);
    }
  }
  return checks;
}

function skipKeyOf(check: Check): string {
  return `${check.path}\0${check.loaded.version}`;
}

function checkStateOf(state: CheckState, check: Check, trusted: boolean): string {
  if (!trusted) return C.CHECK_STATES.untrusted;
  const skipped = check.invalid ? "invalid" : state.skipped.get(skipKeyOf(check));
  if (skipped) return C.CHECK_STATES[skipped];
  return check.enabled ? C.CHECK_STATES.active : C.CHECK_STATES.disabled;
}

// One sandbox for every bounded match: its `run` reads one job and writes which test runs, so that
// the watchdog's interrupt names the runaway regex.
let checkSandbox: { context: Context; call: Script } | undefined;

// Plain atoms, classes and a top-level `|`, with no quantifier, group or backreference, cannot
// backtrack: a test costs at most text × pattern steps, so a small one needs no watchdog (bench:
// checks_write_added_us 1196 → 306).
const BACKTRACK_FREE = /^(?:[^\\()[\]{}*+?]|\\[^1-9k]|\[(?:[^\\\]]|\\.)*\])*$/;

/**
 * Each test's `regex.test(text)`, under C.CHECK_MATCH_TIMEOUT_MS per run unless it cannot run away.
 * A test that times out runs once more alone, so that a busy machine pausing the process does not
 * condemn a plain pattern; timing out twice names it.
 */
function boundedMatches(tests: Array<[RegExp, string]>): { results: boolean[]; timedOut: Set<number> } {
  const results = tests.map(() => false);
  const bounded: number[] = [];
  tests.forEach(([regex, text], index) => {
    const small = text.length * regex.source.length <= C.CHECK_UNBOUNDED_MATCH_STEPS;
    if (small && BACKTRACK_FREE.test(regex.source)) results[index] = regex.test(text);
    else bounded.push(index);
  });
  const timedOut = new Set<number>();
  if (bounded.length === 0) return { results, timedOut };
  if (!checkSandbox) {
    const context = createContext({});
    new Script(
      "globalThis.run = function (job) { for (; job.i < job.until; job.i++) job.results[job.i] = job.tests[job.i][0].test(job.tests[job.i][1]); };",
    ).runInContext(context);
    checkSandbox = { context, call: new Script("run(job)") };
  }
  const { context, call } = checkSandbox;
  const job = { tests: bounded.map((index) => tests[index]!), results: [] as boolean[], i: 0, until: 0 };
  const run = (from: number, until: number): boolean => {
    Object.assign(job, { i: from, until });
    context.job = job;
    try {
      call.runInContext(context, { timeout: C.CHECK_MATCH_TIMEOUT_MS });
      return true;
    } catch (error) {
      if (errorCode(error) !== "ERR_SCRIPT_EXECUTION_TIMEOUT") throw error;
      return false;
    } finally {
      context.job = undefined;
    }
  };
  for (let from = 0; from < bounded.length;) {
    if (run(from, bounded.length)) break;
    // The interrupt may land after the last test, before the run returns.
    const at = job.i;
    if (at >= bounded.length) break;
    if (!run(at, at + 1)) timedOut.add(bounded[at]!);
    from = at + 1;
  }
  bounded.forEach((index, at) => (results[index] = job.results[at] === true));
  return { results, timedOut };
}

/** hookify's `_extract_field`: a field of the tool's input itself first, then the event's mapping. */
function fieldValues(input: CheckInput, field: string): string[] | undefined {
  if (Object.hasOwn(input.input, field)) {
    const value = input.input[field];
    return [typeof value === "string" ? value : JSON.stringify(value)];
  }
  return Object.hasOwn(input.fields, field) ? input.fields[field] : undefined;
}

function operatorHolds(operator: string, pattern: string, value: string): boolean {
  if (operator === "contains") return value.includes(pattern);
  if (operator === "equals") return value === pattern;
  if (operator === "not_contains") return !value.includes(pattern);
  if (operator === "starts_with") return value.startsWith(pattern);
  if (operator === "ends_with") return value.endsWith(pattern);
  return false;
}

function toolMatches(matcher: string | undefined, toolName: string | undefined): boolean {
  if (matcher === undefined || matcher === "" || matcher === "*") return true;
  const name = toolName === "edit" ? ["edit", "multiedit"] : [toolName ?? ""];
  return matcher.split("|").some((part) => name.includes(part.trim().toLowerCase()));
}

/** The checks that match this input; a rule whose regex timed out is skipped for the session, once warned. */
function matchingChecks(state: CheckState, checks: Check[], input: CheckInput, warn: (text: string) => void): Check[] {
  const tests: Array<[RegExp, string]> = [];
  const plans: Array<{ check: Check; conditions: Array<boolean | number[]> }> = [];
  for (const check of checks) {
    if (!check.enabled || check.invalid || state.skipped.has(skipKeyOf(check))) continue;
    if ((check.event !== "all" && check.event !== input.event) || check.conditions.length === 0) continue;
    if (!toolMatches(check.toolMatcher, input.toolName)) continue;
    const conditions = check.conditions.map((condition): boolean | number[] => {
      const values = fieldValues(input, condition.field);
      if (values === undefined) return false;
      if (!condition.regex) return values.some((value) => operatorHolds(condition.operator, condition.pattern, value));
      return values.map((value) => tests.push([condition.regex!, value]) - 1);
    });
    plans.push({ check, conditions });
  }
  const { results, timedOut } = boundedMatches(tests);
  const matched: Check[] = [];
  for (const { check, conditions } of plans) {
    if (conditions.some((c) => Array.isArray(c) && c.some((index) => timedOut.has(index)))) {
      skipCheck(state, check, "timedOut", warn);
      continue;
    }
    if (conditions.every((c) => (Array.isArray(c) ? c.some((index) => results[index]) : c))) matched.push(check);
  }
  return matched;
}

/** hookify's precedence: block over ask (tool calls only) over warn; the winning rules' messages joined. */
function checkVerdict(state: CheckState, matched: Check[], toolCall: boolean): CheckVerdict | undefined {
  const bucket = (check: Check): CheckVerdict["action"] =>
    check.action === "block" ? "block" : check.action === "ask" && toolCall ? "ask" : "warn";
  const action = (["block", "ask", "warn"] as const).find((a) => matched.some((check) => bucket(check) === a));
  if (!action) return undefined;
  const checks = matched.filter((check) => bucket(check) === action);
  for (const check of checks) state.fired.set(check.path, (state.fired.get(check.path) ?? 0) + 1);
  const files = [...new Set(checks.map((check) => reminderField(check.path)))];
  const body = checks.map((check) => `**[${check.name}]**\n${check.message}`).join("\n\n");
  const inner = neutralizeClosingTags(`${C.checksIntro(files)}\n${body}`);
  const names = checks.map((check) => oneLine(check.name));
  return { action, names, text: `${C.CHECKS_OPEN}\n${inner}\n${C.CHECKS_CLOSE}` };
}

/** A rule version is skipped for the session, with one warning. */
function skipCheck(state: CheckState, check: Check, why: C.CheckSkip, warn: (text: string) => void): void {
  state.skipped.set(skipKeyOf(check), why);
  warn(C.checkSkippedWarning(oneLine(check.name), why));
}

/** The input a bash, edit or write call offers; file_path as given and from cwd. */
function toolCheckInput(discovery: Discovery, event: ToolCallEvent, cwd: string): { input: CheckInput; rel?: string } {
  const input = event.input as Record<string, unknown>;
  const bash = event.toolName === "bash";
  const target = bash ? undefined : resolveToolPath(input.path, cwd);
  const rel = target === undefined ? undefined : touchedPath(discovery, target, cwd);
  const fields = checkFields(event.toolName, input, rel);
  return { input: { event: bash ? "bash" : "file", toolName: event.toolName, input, fields }, rel };
}

// Exported for tests: the table of the field mapping.
/** The fields hookify names, from a bash, edit or write call's input (`rel`: its path from cwd). */
export function checkFields(toolName: string, input: Record<string, unknown>, rel?: string): Record<string, string[]> {
  const text = (value: unknown) => (typeof value === "string" ? value : "");
  if (toolName === "bash") return { command: [text(input.command)] };
  const given = text(input.path);
  const edits = Array.isArray(input.edits) ? (input.edits as unknown[]) : [input];
  const joined = (key: string) => edits.map((edit) => text((edit as Record<string, unknown> | null)?.[key])).join(" ");
  const content = toolName === "write" ? text(input.content) : joined("newText");
  const oldText = toolName === "write" ? "" : joined("oldText");
  return {
    file_path: rel === undefined || rel === given ? [given] : [given, rel],
    new_text: [content],
    new_string: [content],
    content: [content],
    old_text: [oldText],
    old_string: [oldText],
  };
}

/** The session's text so far, as a stop check reads it: messages, tool calls and their results. */
function transcriptOf(messages: readonly unknown[]): string {
  const parts: string[] = [];
  for (const message of messages) {
    const content = (message as { content?: unknown }).content;
    if (typeof content === "string") parts.push(content);
    if (!Array.isArray(content)) continue;
    for (const block of content as Array<{ type?: string; text?: unknown; name?: unknown; arguments?: unknown }>) {
      if (block?.type === "text" && typeof block.text === "string") parts.push(block.text);
      else if (block?.type === "toolCall") parts.push(`${String(block.name)} ${JSON.stringify(block.arguments)}`);
    }
  }
  return parts.join("\n");
}

type Guarded = <T>(
  ctx: ExtensionContext,
  label: C.FailureLabel,
  run: () => T | Promise<T>,
  fallback: () => T,
) => T | Promise<T>;
type Tell = (ctx: ExtensionContext, message: string, level: "info" | "warning") => void;

/** The checks' hooks. Registered before delivery's, so a warning sits right after the tool's own text. */
function registerChecks(pi: ExtensionAPI, engine: LazyAgents, guarded: Guarded, tell: Tell): void {
  const state = engine.checks;
  const safely = <T>(ctx: ExtensionContext, run: () => T | Promise<T>) =>
    guarded<T | undefined>(ctx, "checks", run, () => undefined);
  const verdictFor = (ctx: ExtensionContext, input: CheckInput, bases: string[], toolCall: boolean) => {
    if (!engine.options.enabled || !engine.options.checks || !ctx.isProjectTrusted()) return undefined;
    const discovery = engine.discoveryFor(ctx.cwd);
    if (!discovery) return undefined;
    const warn = (text: string) => tell(ctx, text, "warning");
    const checks = checksIn(discovery, state, bases);
    for (const check of checks)
      if (check.invalid && !state.skipped.has(skipKeyOf(check))) skipCheck(state, check, "invalid", warn);
    return checkVerdict(state, matchingChecks(state, checks, input, warn), toolCall);
  };
  const notify = (ctx: ExtensionContext, verdict: CheckVerdict, what: "warned" | "blocked") =>
    tell(ctx, C.checkNotice(what, verdict.names), what === "warned" ? "info" : "warning");

  pi.on("tool_call", (event, ctx) =>
    safely(ctx, () => {
      if (!CHECK_TOOLS.has(event.toolName) || !engine.options.checks) return undefined;
      const discovery = engine.discoveryFor(ctx.cwd);
      if (!discovery) return undefined;
      const { input, rel } = toolCheckInput(discovery, event, ctx.cwd);
      const verdict = verdictFor(ctx, input, checkBases(discovery, rel), true);
      if (!verdict) return undefined;
      if (verdict.action === "warn") {
        state.pending.set(event.toolCallId, verdict.text);
        notify(ctx, verdict, "warned");
        return undefined;
      }
      const blocked = { block: true as const, reason: verdict.text };
      if (verdict.action === "ask" && ctx.hasUI) {
        const question = C.checkNotice("asked", verdict.names);
        return ctx.ui.confirm(C.CHECK_CONFIRM_TITLE, question).then((allowed) => (allowed ? undefined : blocked));
      }
      notify(ctx, verdict, "blocked");
      return blocked;
    }),
  );

  pi.on("tool_result", (event, ctx) =>
    safely(ctx, () => {
      const text = state.pending.get(event.toolCallId);
      if (text === undefined) return undefined;
      state.pending.delete(event.toolCallId);
      const patch: ToolResultEventResult = { content: [...event.content, { type: "text", text }] };
      if (event.structuredContent !== undefined) patch.structuredContent = event.structuredContent;
      return patch;
    }),
  );
  pi.on("turn_end", () => state.pending.clear());

  pi.on("input", (event, ctx) =>
    safely(ctx, () => {
      state.continued = false;
      const fields = { prompt: [event.text], user_prompt: [event.text] };
      const verdict = verdictFor(ctx, { event: "prompt", input: {}, fields }, [""], false);
      if (!verdict) return undefined;
      if (verdict.action === "block") {
        notify(ctx, verdict, "blocked");
        return { action: "handled" as const };
      }
      notify(ctx, verdict, "warned");
      return { action: "transform" as const, text: `${event.text}\n\n${verdict.text}`, images: event.images };
    }),
  );

  // A blocked stop sends the model back once per prompt, never in a loop.
  pi.on("agent_before_settle", (event, ctx) =>
    safely(ctx, () => {
      if (state.continued || event.outcome !== "completed") return undefined;
      const fields = { transcript: [transcriptOf(event.context.llmMessages)], reason: [""] };
      const verdict = verdictFor(ctx, { event: "stop", input: {}, fields }, [""], false);
      if (!verdict) return undefined;
      if (verdict.action === "warn") {
        notify(ctx, verdict, "warned");
        return undefined;
      }
      state.continued = true;
      notify(ctx, verdict, "blocked");
      const message = {
        type: "custom_message" as const,
        customType: C.CHECK_MESSAGE_TYPE,
        content: verdict.text,
        display: true,
      };
      return { entries: [...event.entries, message], continue: true };
    }),
  );
}

/** The checks part of `/lazy-agents`: every rule of cwd's and the seen folders' `.claude`, with state and count. */
function checkReport(engine: LazyAgents, env: CallEnvironment): string[] {
  if (!engine.options.checks) return ["", C.CHECK_REPORT.off];
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return [];
  const state = engine.checks;
  const checks = checksIn(discovery, state, ["", ...[...state.folders.keys()].filter((base) => base !== "")]);
  if (checks.length === 0) return [];
  const rows = checks.map((check) =>
    [check.name, check.path, check.event, check.action, checkStateOf(state, check, env.trusted)]
      .map(oneLine)
      .concat(`fired ${state.fired.get(check.path) ?? 0}`),
  );
  return reportSection(C.CHECK_REPORT.heading, rows);
}

/** The checks part of `/lazy-agents why <path>`: the file rules a write there meets, and its path conditions. */
function checkWhy(engine: LazyAgents, env: CallEnvironment, shown: string): string[] {
  const discovery = engine.discoveryFor(env.cwd);
  const target = resolveToolPath(shown, env.cwd);
  if (!engine.options.checks || !discovery || target === undefined) return [];
  const rel = touchedPath(discovery, target, env.cwd);
  const state = engine.checks;
  const checks = checksIn(discovery, state, checkBases(discovery, rel)).filter(
    (c) => c.event === "file" || c.event === "all",
  );
  if (checks.length === 0) return [C.CHECK_REPORT.whyNone];
  const fields = { file_path: checkFields("write", { path: shown }, rel).file_path! };
  const input: CheckInput = { event: "file", toolName: "write", input: {}, fields };
  const lines = checks.map((check) => {
    const paths = check.conditions.filter((condition) => condition.field === "file_path");
    const pathOnly = { ...check, enabled: true, event: "file", toolMatcher: undefined, conditions: paths };
    const verdict =
      paths.length === 0
        ? C.CHECK_REPORT.noPathCondition
        : matchingChecks({ ...state, skipped: new Map() }, [pathOnly], input, () => {}).length > 0
          ? C.CHECK_REPORT.pathMatches
          : C.CHECK_REPORT.pathNoMatch;
    return `    check ${check.name} (${check.path}, ${check.action}, ${checkStateOf(state, check, env.trusted)}): ${verdict}`;
  });
  return [C.CHECK_REPORT.whyHeading, ...lines].map(oneLine);
}

// =============================================================================================
// 3. What the model holds, and when we send again. The ledger is rebuilt from the records the
// model still sees (the session projection), and planning compares it with what folders offer:
//
//   same version as the model holds      -> nothing
//   another version                      -> supersede
//   no longer offered by its folder      -> withdraw
//   not in the model's context any more  -> send at the next access

// The record format and the ledger: what the model has in context right now, rebuilt from the
// session's own tool results.

interface FileRecord {
  path: string;
  scope: string;
  version: string;
  bytes: number;
  /** How the model got it: appended by us, or through its own read of the file. */
  via: "reminder" | "read";
  /** Set for an import: the file whose `@path` token brought it in. */
  importedBy?: string;
  /** Set for an instruction file that imports: the paths it imports, directly or through others. */
  imports?: string[];
  truncated?: boolean;
}

interface SkillRecord {
  path: string;
  name: string;
  scope: string;
  version: string;
}

// Exported for tests: they read the records stored in details.
export interface LedgerRecord {
  v: number;
  files: FileRecord[];
  skills: SkillRecord[];
  retracted: Array<{ path: string; scope: string }>;
  retractedSkills: Array<{ path: string; scope: string }>;
  /** Refused files the model was told about; `inImport` marks a refused import of `path`. */
  skipped: Skip[];
  /** Files the model holds that also govern another scope (one file linked into several folders). */
  alsoGoverns?: Array<{ path: string; scope: string }>;
  /** Rules delivered or listed (absent in records without rules, so older records read the same). */
  rules?: RuleRecord[];
  retractedRules?: Array<{ path: string; dir: string }>;
  /** Sections this reminder explained in full (absent when it explained none, as in older records). */
  explained?: Section[];
  /** Digest of the reminder text it was delivered with: only that text, whole, confirms it. */
  reminder?: string;
}

/** The parts of a reminder that each open with an explanation. */
const SECTIONS = ["files", "skills", "rules", "ruleListings"] as const;

type Section = (typeof SECTIONS)[number];

interface Skip {
  path: string;
  reason: C.Reason;
  inImport?: boolean;
  counts?: { taken: number; total: number };
}

function skipKey(skip: Skip): string {
  if (C.CAP_REASONS.has(skip.reason)) return `${skip.reason}\0${skip.path}`;
  // One file may hold several refused imports: the model hears of each reason once.
  return skip.inImport ? `import\0${skip.path}\0${skip.reason}` : skip.path;
}

function emptyRecord(): LedgerRecord {
  return { v: C.LEDGER_VERSION, files: [], skills: [], retracted: [], retractedSkills: [], skipped: [] };
}

function isRecordEmpty(record: LedgerRecord): boolean {
  return record.files.length === 0 && !recordShowsText(record);
}

// Exported for tests: they read the records stored in details.
/**
 * The ledger record in a tool result's details. Session files outlive versions of this extension:
 * each entry is checked on its own against its kind's fields, and one that does not fit is dropped alone.
 */
export function readRecord(details: unknown): LedgerRecord | undefined {
  const stored = isObject(details) ? details[C.DETAILS_KEY] : undefined;
  if (!isObject(stored) || stored.v !== C.LEDGER_VERSION) return undefined;
  const record = { ...fieldsOf(stored, RECORD_FIELDS), v: C.LEDGER_VERSION } as unknown as LedgerRecord;
  if (typeof stored.reminder === "string") record.reminder = stored.reminder;
  return record;
}

/**
 * A field's type: a typeof name, a list of strings, one of a set of values, or a list of entries of a
 * spec. A name ending in `?` is optional; an optional list is kept only when stored, an optional
 * flag only when true, so that records without them read back with the shape they were written in.
 */
type Field = "string" | "number" | "boolean" | "strings" | ReadonlySet<unknown> | { list: Spec | ReadonlySet<unknown> };

type Spec = Readonly<Record<string, Field>>;

const SCOPED_FIELDS: Spec = { path: "string", scope: "string" };

const IMPORT_FIELDS: Spec = { version: "string", "importedBy?": "string", "truncated?": "boolean" };

const RECORD_FIELDS: Spec = {
  files: {
    list: {
      ...SCOPED_FIELDS,
      ...IMPORT_FIELDS,
      bytes: "number",
      via: new Set(["reminder", "read"]),
      "imports?": "strings",
    },
  },
  skills: { list: { ...SCOPED_FIELDS, name: "string", version: "string" } },
  retracted: { list: SCOPED_FIELDS },
  retractedSkills: { list: SCOPED_FIELDS },
  skipped: { list: { path: "string", reason: new Set(Object.keys(C.REASONS)), "inImport?": "boolean" } },
  "alsoGoverns?": { list: SCOPED_FIELDS },
  "rules?": {
    list: { path: "string", dir: "string", ...IMPORT_FIELDS, as: new Set(["text", "listing"]), "bytes?": "number" },
  },
  "retractedRules?": { list: { path: "string", dir: "string" } },
  "explained?": { list: new Set(SECTIONS) },
};

function fieldsOf(entry: Record<string, unknown>, spec: Spec): Record<string, unknown> | undefined {
  const fields: Record<string, unknown> = {};
  for (const [name, type] of Object.entries(spec)) {
    const key = name.endsWith("?") ? name.slice(0, -1) : name;
    const value = entry[key];
    if (typeof type === "object" && "list" in type) {
      if (Array.isArray(value)) fields[key] = value.flatMap((item) => entryOf(item, type.list) ?? []);
      else if (key === name) fields[key] = [];
    } else if (key === name || (value !== undefined && value !== false)) {
      if (!fits(value, type)) return undefined;
      fields[key] = value;
    }
  }
  return fields;
}

function entryOf(entry: unknown, type: Spec | ReadonlySet<unknown>): unknown {
  if (type instanceof Set) return type.has(entry) ? entry : undefined;
  return isObject(entry) ? fieldsOf(entry, type as Spec) : undefined;
}

function fits(value: unknown, type: Exclude<Field, { list: unknown }>): boolean {
  if (type instanceof Set) return type.has(value);
  if (type === "strings") return Array.isArray(value) && value.every((item) => typeof item === "string");
  return typeof value === type;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The set a map holds under a key, made when it holds none yet. */
function setIn<K, V>(map: Map<K, Set<V>>, key: K): Set<V> {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  return set;
}

/** What the model can hold: an instruction file or an import of one, a skill, a rule or a rule's import. */
type Kind = "file" | "skill" | "rule";

interface HeldRecords {
  file: FileRecord;
  skill: SkillRecord;
  rule: RuleRecord;
}

/** One thing the model holds, for its scope (a rule's scope is its rule folder). */
interface Held {
  kind: Kind;
  scope: string;
  record: HeldRecords[Kind];
}

function keyOf(kind: Kind, path: string): string {
  return `${kind}\0${path}`;
}

class Ledger {
  /** What the model holds, by kind and path (`keyOf`). */
  readonly held = new Map<string, Held>();
  /** Keys held for each scope: what a view of that scope may withdraw. */
  readonly byScope = new Map<string, Set<string>>();
  /** Keys whose withdrawal notice the model holds. */
  readonly withdrawn = new Set<string>();
  /** What the instruction file the model holds for each scope imports: an import stays while one still does. */
  readonly importsByScope = new Map<string, Set<string>>();
  /** Skip notices the model holds, by skipKey → reason. */
  readonly skipped = new Map<string, C.Reason>();
  /** Further scopes the model was told a held file governs: path → scopes. */
  readonly alsoGoverns = new Map<string, Set<string>>();
  /** Sections whose full explanation the model can still see. */
  readonly explained = new Set<Section>();

  get<K extends Kind>(kind: K, path: string): HeldRecords[K] | undefined {
    return this.held.get(keyOf(kind, path))?.record as HeldRecords[K] | undefined;
  }

  all<K extends Kind>(kind: K): Array<HeldRecords[K]> {
    return [...this.held.values()].filter((held) => held.kind === kind).map((held) => held.record as HeldRecords[K]);
  }

  wasWithdrawn(kind: Kind, path: string): boolean {
    return this.withdrawn.has(keyOf(kind, path));
  }

  withdrawnPaths(kind: Kind): string[] {
    const prefix = keyOf(kind, "");
    return [...this.withdrawn].filter((key) => key.startsWith(prefix)).map((key) => key.slice(prefix.length));
  }

  clear(): void {
    for (const map of [this.held, this.byScope, this.withdrawn, this.importsByScope, this.skipped, this.alsoGoverns])
      map.clear();
    this.explained.clear();
  }

  /** Withdrawals first: a record that withdraws and sends one path ends holding it. */
  apply(record: LedgerRecord): void {
    for (const { path, scope } of record.retracted) this.withdraw("file", scope, path);
    for (const { path, scope } of record.retractedSkills) this.withdraw("skill", scope, path);
    for (const { path, dir } of record.retractedRules ?? []) this.withdraw("rule", dir, path);
    for (const file of record.files) this.hold("file", file.scope, file);
    for (const skill of record.skills) this.hold("skill", skill.scope, skill);
    for (const rule of record.rules ?? []) this.hold("rule", rule.dir, rule);
    for (const skip of record.skipped) this.skipped.set(skipKey(skip), skip.reason);
    for (const { path, scope } of record.alsoGoverns ?? []) setIn(this.alsoGoverns, path).add(scope);
    for (const section of record.explained ?? []) this.explained.add(section);
  }

  private withdraw(kind: Kind, scope: string, path: string): void {
    const key = keyOf(kind, path);
    if (kind === "file") {
      if (this.get("file", path)?.importedBy === undefined) this.importsByScope.delete(scope);
      else this.importsByScope.get(scope)?.delete(path);
      this.alsoGoverns.delete(path);
    }
    this.held.delete(key);
    this.byScope.get(scope)?.delete(key);
    this.withdrawn.add(key);
  }

  private hold(kind: Kind, scope: string, record: HeldRecords[Kind]): void {
    const { path } = record;
    const key = keyOf(kind, path);
    const earlier = this.held.get(key);
    if (earlier && earlier.scope !== scope) this.byScope.get(earlier.scope)?.delete(key);
    this.held.set(key, { kind, scope, record });
    setIn(this.byScope, scope).add(key);
    this.withdrawn.delete(key);
    if (kind !== "file") return;
    const file = record as FileRecord;
    if (earlier?.record.version !== file.version) this.alsoGoverns.delete(path);
    this.skipped.delete(path);
    if (file.importedBy !== undefined) this.importsByScope.get(scope)?.add(path);
    else if (file.imports) this.importsByScope.set(scope, new Set(file.imports));
    else this.importsByScope.delete(scope);
  }

  /** Whether the file the model holds for a scope other than `scope` imports this path. */
  importedElsewhere(path: string, scope: string): boolean {
    for (const [other, imports] of this.importsByScope) if (other !== scope && imports.has(path)) return true;
    return false;
  }

  /** Replays the records of the entries still in the model's context, oldest first. */
  rebuild(records: Iterable<LedgerRecord>): void {
    this.clear();
    for (const record of records) this.apply(record);
  }
}

// Planning one delivery: what of the viewed chain the model lacks.

interface PlannedFile {
  file: InstructionFile;
  scope: string;
  /** The model holds an earlier version of this path. */
  supersedes: boolean;
  importedBy?: string;
  /** Set when the budget cut the text. */
  cutText?: string;
  /** The scope as shown, when it is not the folder's (a rule's globs). */
  scopeText?: string;
}

interface PlannedSkill extends Skill {
  scope: string;
  /** Pi listed a skill of this name at start-up, from another location. */
  overridesStartup: boolean;
}

interface DeliveryPlan {
  record: LedgerRecord;
  /** Files to append, parent first, each import right after the file that imports it. */
  files: PlannedFile[];
  skills: PlannedSkill[];
  /** Rule texts (and their imports) and description-only rules, planned by the Rules section. */
  rules?: PlannedFile[];
  ruleListings?: RuleListing[];
  /** What the budget left out of this reminder, announced in one line. */
  leftOut?: { files: number; skills: number; notices: number; names: string[] };
  /** Sections whose explanation the model can still see: this reminder names them in one line. */
  explainedEarlier?: ReadonlySet<Section>;
  /** cwd-relative paths the call touched, which the reminder names. */
  touched?: readonly string[];
}

interface PlanInput {
  views: DirectoryView[];
  /** Real path of an instruction file the tool result itself shows whole (a plain read of it). */
  shownWhole?: string;
  /** Real path of a file the tool shows only in part: not appended now, not counted as delivered. */
  shownInPart?: string;
  /** Real paths of instruction files a sibling call writes: its result carries them, this one leaves them alone. */
  leaveAlone?: ReadonlySet<string>;
  /** Skills Pi listed in its system prompt at start-up: name → location. */
  startupSkills?: ReadonlyMap<string, string>;
  /** Real path of cwd, to compare skill locations with Pi's. */
  cwdReal?: string;
}

function planDelivery(ledger: Ledger, input: PlanInput): DeliveryPlan {
  const plan: DeliveryPlan = { record: emptyRecord(), files: [], skills: [] };
  // A copy: the gate applies its record before it formats the reminder.
  if (ledger.explained.size > 0) plan.explainedEarlier = new Set(ledger.explained);
  const offered = offeredPaths(input.views);
  for (const view of input.views) {
    if (!isUnknown(view, false)) planRetraction(ledger, plan, "file", view.scope, (path) => offered.has(path));
    if (!isUnknown(view, true))
      planRetraction(ledger, plan, "skill", view.scope, (path) => view.skills.some((skill) => skill.path === path));
    planSkips(ledger, view, plan);
    if (view.file) planFile(ledger, input, plan, { file: view.file, scope: view.scope });
    const root = plan.record.files.at(-1);
    if (root?.path === view.file?.path && view.imports.length > 0) root!.imports = view.imports.map((i) => i.file.path);
    for (const { file, importedBy } of view.imports)
      planFile(ledger, input, plan, { file, scope: view.scope, importedBy });
    for (const skill of view.skills) planSkill(ledger, input, plan, skill, view.scope);
  }
  return plan;
}

function planFile(
  ledger: Ledger,
  input: PlanInput,
  plan: DeliveryPlan,
  entry: { file: InstructionFile; scope: string; importedBy?: string },
): void {
  const { file, scope, importedBy } = entry;
  if (file.realPath === input.shownInPart || input.leaveAlone?.has(file.realPath)) return;
  const held = ledger.get("file", file.path);
  // One file linked into several folders: the model, holding its text, learns the other scopes.
  const sentWith = plan.record.files.find((record) => record.path === file.path)?.scope ?? held?.scope;
  const via = file.realPath === input.shownWhole ? "read" : "reminder";
  const record: FileRecord = { path: file.path, scope, version: file.version, bytes: file.bytes, via };
  if (importedBy !== undefined) record.importedBy = importedBy;
  // A whole read is recorded even when the model already held the file: if a compaction later
  // drops the earlier delivery but keeps this read, the ledger must still see the file.
  if (takes(ledger, plan, "file", record, via === "read")) {
    if (via === "reminder") plan.files.push({ file, scope, supersedes: held !== undefined, importedBy });
  } else if (importedBy === undefined && sentWith !== undefined)
    planAlsoGoverns(ledger, plan, file.path, sentWith, scope);
}

/**
 * Whether the plan takes this record into its own: the model lacks this version (or `always`, for
 * a whole read of a file it holds) and the plan has no entry of that path yet (a file two rules import).
 */
function takes<K extends Kind>(ledger: Ledger, plan: DeliveryPlan, kind: K, record: HeldRecords[K], always = false) {
  const held: Partial<RuleRecord> | undefined = ledger.get(kind, record.path);
  if (!always && held?.version === record.version && held.as === (record as Partial<RuleRecord>).as) return false;
  const taken: Array<HeldRecords[Kind]> =
    kind === "file" ? plan.record.files : kind === "skill" ? plan.record.skills : (plan.record.rules ??= []);
  if (taken.some((entry) => entry.path === record.path)) return false;
  taken.push(record);
  return true;
}

function planAlsoGoverns(ledger: Ledger, plan: DeliveryPlan, path: string, sentWith: string, scope: string): void {
  if (sentWith === scope || ledger.alsoGoverns.get(path)?.has(scope)) return;
  const told = (plan.record.alsoGoverns ??= []);
  if (!told.some((entry) => entry.path === path && entry.scope === scope)) told.push({ path, scope });
}

function planSkill(ledger: Ledger, input: PlanInput, plan: DeliveryPlan, skill: Skill, scope: string): void {
  const startup = input.startupSkills?.get(skill.name);
  if (startup !== undefined && input.cwdReal !== undefined && resolve(input.cwdReal, skill.path) === resolve(startup))
    return;
  if (takes(ledger, plan, "skill", { path: skill.path, name: skill.name, scope, version: skill.version }))
    plan.skills.push({ ...skill, scope, overridesStartup: startup !== undefined });
}

/** Every path the chain offers: instruction files and their imports, in any of its folders. */
function offeredPaths(views: DirectoryView[]): Set<string> {
  const offered = new Set<string>();
  for (const view of views) {
    if (view.file) offered.add(view.file.path);
    for (const { file } of view.imports) offered.add(file.path);
  }
  return offered;
}

/** Whether an I/O error hid part of what the folder offers: what the model holds of it then stands. */
function isUnknown(view: DirectoryView, skills: boolean): boolean {
  return (
    view.pending === true || view.rejected.some((r) => r.reason === "unreadable" && (r.kind === "skill") === skills)
  );
}

/**
 * What the model holds of a kind for a scope (a rule's: its rule folder) that the scope no longer
 * offers is withdrawn. An import stays while another file the model holds still imports it; a
 * rule's imports go with their rule.
 */
function planRetraction(
  ledger: Ledger,
  plan: DeliveryPlan,
  kind: Kind,
  scope: string,
  offers: (path: string) => boolean,
) {
  const keys = ledger.byScope.get(scope);
  for (const key of keys ?? []) {
    const held = ledger.held.get(key);
    if (held?.kind !== kind || held.scope !== scope || offers(held.record.path)) continue;
    const { path } = held.record;
    const importedBy = kind === "skill" ? undefined : (held.record as FileRecord | RuleRecord).importedBy;
    if (importedBy !== undefined && (kind === "rule" || ledger.importedElsewhere(path, scope))) continue;
    if (kind === "file") plan.record.retracted.push({ path, scope });
    else if (kind === "skill") plan.record.retractedSkills.push({ path, scope });
    else
      for (const other of keys!) {
        const rule = ledger.held.get(other);
        if (rule?.kind === "rule" && (other === key || (rule.record as RuleRecord).importedBy === path))
          (plan.record.retractedRules ??= []).push({ path: rule.record.path, dir: scope });
      }
  }
}

/** Instruction files that exist but were refused: the model hears of each once per reason. */
function planSkips(ledger: Ledger, view: DirectoryView, plan: DeliveryPlan): void {
  for (const rejection of view.rejected) {
    if (rejection.kind !== "instruction" && rejection.kind !== "import" && rejection.kind !== "cap") continue;
    // A file the model holds stays as it is while it cannot be read: nothing to tell.
    if (rejection.reason === "unreadable" && ledger.get("file", rejection.path) !== undefined) continue;
    const skip: Skip =
      rejection.kind === "import"
        ? { path: rejection.path, reason: rejection.reason, inImport: true }
        : { path: rejection.path, reason: rejection.reason };
    if (rejection.counts) skip.counts = rejection.counts;
    if (ledger.skipped.get(skipKey(skip)) === skip.reason) continue;
    if (plan.record.skipped.some((s) => skipKey(s) === skipKey(skip) && s.reason === skip.reason)) continue;
    plan.record.skipped.push(skip);
  }
}

/** Whether a delivery puts text in front of the model (a read of the file itself puts none). */
function recordShowsText(r: LedgerRecord): boolean {
  const appended = r.files.some((file) => file.via === "reminder");
  const notices = r.retracted.length + r.retractedSkills.length + r.skipped.length + (r.alsoGoverns?.length ?? 0);
  const rules = (r.rules?.length ?? 0) + (r.retractedRules?.length ?? 0);
  return appended || r.skills.length + notices + rules > 0;
}

// Rules in the ledger and in planning.

interface RuleRecord {
  path: string;
  /** cwd-relative rule folder it came from. */
  dir: string;
  version: string;
  /** "text": the body was appended; "listing": only its name and description were listed. */
  as: "text" | "listing";
  bytes?: number;
  /** Set for an import of a Claude rule: the rule whose `@path` token brought it in. */
  importedBy?: string;
  truncated?: boolean;
}

interface RuleListing {
  name: string;
  description: string;
  path: string;
  scope: string;
}

interface RulePlanInput {
  discovery: Discovery;
  views: DirectoryView[];
  touched: readonly string[];
  options: Options;
}

/** Adds to a plan the rules the model lacks for these paths, and withdraws rules that are gone. */
function planRules(ledger: Ledger, plan: DeliveryPlan, input: RulePlanInput): void {
  const folders = ruleFoldersFor(input.discovery, input.views, input.options.ruleSources);
  for (const folder of folders) {
    folder.offered ??= new Set(folder.rules.filter((rule) => rule.meta.kind !== "manual").map((rule) => rule.path));
    const offered = folder.offered;
    planRetraction(ledger, plan, "rule", folder.place.display, (path) => offered.has(path));
    if (folder.rejected.length > 0)
      planSkips(ledger, { ...emptyView(folder.place.display), rejected: folder.rejected }, plan);
  }
  if (input.touched.length === 0) return;
  for (const rule of applyingRules(input.discovery, folders, input.touched)) {
    if (rule.meta.kind === "described") planRuleListing(ledger, plan, input, rule);
    else planRuleText(ledger, plan, input, rule);
  }
}

function planRuleText(ledger: Ledger, plan: DeliveryPlan, input: RulePlanInput, rule: Rule): void {
  const entries: Array<{ file: InstructionFile; importedBy?: string }> = [{ file: rule.body }];
  if (rule.source === "claude" && input.options.imports) {
    const rejected: Rejection[] = [];
    entries.push(...importsOf(input.discovery, rule.loaded, rule.base, rejected));
    if (rejected.length > 0) planSkips(ledger, { ...emptyView(rule.dir), rejected }, plan);
  }
  for (const { file, importedBy } of entries) {
    const supersedes = ledger.get("rule", file.path) !== undefined;
    const record: RuleRecord = { path: file.path, dir: rule.dir, version: file.version, as: "text", bytes: file.bytes };
    if (importedBy !== undefined) record.importedBy = importedBy;
    if (!takes(ledger, plan, "rule", record)) continue;
    (plan.rules ??= []).push({ file, scope: rule.base, scopeText: shownRuleScope(rule.scope), supersedes, importedBy });
  }
}

function planRuleListing(ledger: Ledger, plan: DeliveryPlan, input: RulePlanInput, rule: Rule): void {
  if (!takes(ledger, plan, "rule", { path: rule.path, dir: rule.dir, version: rule.listingVersion, as: "listing" }))
    return;
  const { name, description } = rule.meta;
  (plan.ruleListings ??= []).push({ name, description, path: rule.path, scope: rule.scope });
}

// The session projection: which records the model still sees after compaction and context edits.

type ReadonlySessionManager = ExtensionContext["sessionManager"];

/** A record whose result's `details` another extension replaced, kept in a session entry of its own. */
interface RescuedRecord {
  toolCallId: string;
  record: LedgerRecord;
}

/** The entry the ledger last saw the session at, to find what was appended since. */
function sessionMark(sessionManager: ReadonlySessionManager): string | null {
  return sessionManager.getLeafId();
}

/**
 * Whether a context edit entered the branch since `mark`. Pi appends them between turns (another
 * extension's turn_end or agent_before_settle, or its own recovery), with no event of their own.
 * Walks back only over the entries appended since; a mark that left the branch counts as an edit.
 */
function contextEditedSince(sessionManager: ReadonlySessionManager, mark: string | null | undefined): boolean {
  if (mark === undefined) return false;
  let id = sessionMark(sessionManager);
  while (id !== null && id !== mark) {
    const entry = sessionManager.getEntry(id);
    if (!entry || entry.type === "context_edit") return true;
    id = entry.parentId;
  }
  return id !== mark;
}

/**
 * The ledger records of the entries the model still sees: the active branch with compaction and
 * context edits applied. A record whose reminder an edit removed or cut no longer counts.
 */
function recordsInContext(sessionManager: ReadonlySessionManager): LedgerRecord[] {
  const rescued = new Map<string, LedgerRecord>();
  for (const entry of sessionManager.getBranch()) {
    if (entry.type !== "custom" || entry.customType !== C.RESCUED_RECORD_ENTRY) continue;
    const data = entry.data as Partial<RescuedRecord> | undefined;
    const record = readRecord({ [C.DETAILS_KEY]: data?.record });
    if (typeof data?.toolCallId === "string" && record) rescued.set(data.toolCallId, record);
  }
  const records: LedgerRecord[] = [];
  for (const { sourceEntry, messages } of sessionManager.buildSessionProjection().entries) {
    if (sourceEntry.type !== "message" || sourceEntry.message.role !== "toolResult") continue;
    const record = readRecord(sourceEntry.message.details) ?? rescued.get(sourceEntry.message.toolCallId);
    if (record && projectionShows(messages, record)) records.push(record);
  }
  return records;
}

/** Whether these messages show a record's reminder whole: the text of its digest (older records: its opening). */
function projectionShows(messages: readonly unknown[], record: LedgerRecord): boolean {
  if (messages.length === 0) return false;
  if (!recordShowsText(record)) return true;
  return messages.some((message) => {
    const content = (message as { content?: unknown }).content;
    if (!Array.isArray(content)) return false;
    return content.some((block) => typeof block?.text === "string" && holdsReminder(block.text, record.reminder));
  });
}

function holdsReminder(text: string, digest: string | undefined): boolean {
  for (let at = text.indexOf(REMINDER_OPEN); at !== -1; at = text.indexOf(REMINDER_OPEN, at + 1)) {
    if (digest === undefined) return true;
    const end = text.indexOf(REMINDER_CLOSE, at);
    if (end === -1) return false;
    if (versionOf(text.slice(at, end + REMINDER_CLOSE.length)) === digest) return true;
  }
  return false;
}

// =============================================================================================
// 4. Reminder text and budget. The deepest files are kept whole first; broader ones are cut to the
// budget, and what does not fit is announced as left out.

function skipText(skip: Skip, field: (text: string) => string = reminderField): string {
  if (C.CAP_REASONS.has(skip.reason)) return C.cutShortNotice(field(skip.path), C.reasonText(skip.reason, skip.counts));
  return skip.inImport
    ? C.importNotLoadedNotice(field(skip.path), C.REASONS[skip.reason])
    : C.notLoadedNotice(field(skip.path), C.REASONS[skip.reason]);
}

/** Escapes text as Pi escapes its own skill listing. */
function escapeXml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

/** A one-line field or attribute value inside the reminder: it can neither break a line nor a tag. */
function reminderField(text: string): string {
  return escapeXml(oneLine(text));
}

const WRAPPER_CLOSING_TAG = /<(?=\s*\/\s*(?:file|rule|nested-instructions|nested-checks)\b)/gi;

/**
 * Instruction text as the reminder carries it: byte for byte, except that anything that reads as
 * one of the wrapper's own closing tags loses its `<`, so the block ends only where we end it.
 */
function neutralizeClosingTags(text: string): string {
  return text.replace(WRAPPER_CLOSING_TAG, "&lt;");
}

// Exported for tests: they and the bench find the reminder in a result by this prefix of its opening tag.
export const REMINDER_OPEN = "<nested-instructions";

const REMINDER_CLOSE = "</nested-instructions>";

/** Touched paths the opening tag names; a bash command that touches more adds a count. */
const SHOWN_TOUCHED_PATHS = 3;

/** A section's full explanation, and its one-line header once the model holds that; tags name files and rules. */
const INTROS: Record<Section, readonly [string, string?]> = {
  files: [C.INSTRUCTIONS_INTRO],
  skills: [C.SKILLS_INTRO, C.SKILLS_HEADER],
  rules: [C.RULES_INTRO],
  ruleListings: [C.RULE_LISTING_INTRO, C.RULE_LISTING_HEADER],
};

/** Each notice a record carries, as its line. */
const NOTICE_LINES = {
  retracted: (notice: { path: string }) => `- ${C.withdrawnNotice(reminderField(notice.path))}`,
  retractedSkills: (notice: { path: string }) => `- ${C.skillGoneNotice(reminderField(notice.path))}`,
  retractedRules: (notice: { path: string }) => `- ${C.withdrawnNotice(reminderField(notice.path))}`,
  skipped: (skip: Skip) => `- ${skipText(skip)}.`,
  alsoGoverns: (told: { path: string; scope: string }) =>
    `- ${C.alsoGovernsNotice(reminderField(told.path), reminderField(scopeGlob(told.scope)))}`,
};

type NoticeKind = keyof typeof NOTICE_LINES;

const NOTICE_KINDS = Object.keys(NOTICE_LINES) as NoticeKind[];

function noticeLines(record: LedgerRecord): string[] {
  const notices = record as Record<NoticeKind, unknown[] | undefined>;
  return NOTICE_KINDS.flatMap((kind) => (notices[kind] ?? []).map((notice) => NOTICE_LINES[kind](notice as never)));
}

/** Bytes a line adds to the reminder, with the newline before it. */
function lineBytes(line: string): number {
  return byteLength(`\n${line}`);
}

/**
 * Fits the whole reminder (tags, paths, texts, skills, notices and the left-out line) into the byte
 * budget and at most C.MAX_REMINDER_FILES files. Notices go first; then the deepest scope's files,
 * an instruction file before its imports, whole while they fit; the first that does not is cut on
 * a UTF-8 boundary; skills take what is left. Whatever does not fit leaves the plan and its record,
 * so it stays pending for a later access, and is counted in one line.
 */
function fitPlanToBudget(plan: DeliveryPlan, budgetBytes: number): void {
  const { record } = plan;
  const entries = [...plan.files, ...(plan.rules ?? [])];
  const itemLines = [...sectionItems(plan).flatMap(([, lines]) => lines), ...noticeLines(record)];
  const frame = byteLength(formatReminder(plan)) - itemLines.reduce((sum, line) => sum + lineBytes(line), 0);
  const longest = [...entries.map((entry) => entry.file.path), ...plan.skills.map((skill) => skill.path)]
    .map(reminderField)
    .sort((a, b) => byteLength(b) - byteLength(a));
  const count = itemLines.length;
  let remaining = budgetBytes - frame - byteLength(`\n\n${C.leftOutText(count, count, count, longest)}`);
  const leftOut = { files: 0, skills: 0, notices: 0, names: [] as string[] };
  const keep = (line: string, drop: () => void): boolean => {
    if (lineBytes(line) <= remaining) {
      remaining -= lineBytes(line);
      return true;
    }
    drop();
    return false;
  };
  // Notices that do not fit stay unsaid (and unrecorded) until a later access.
  const notices = record as Record<NoticeKind, unknown[] | undefined>;
  for (const kind of NOTICE_KINDS) {
    notices[kind] = notices[kind]?.filter((notice) =>
      keep(NOTICE_LINES[kind](notice as never), () => leftOut.notices++),
    );
  }
  const left = new Set<PlannedFile>();
  let kept = 0;
  for (const index of budgetOrder(plan)) {
    const entry = entries[index]!;
    const isRule = index >= plan.files.length;
    const room = remaining - lineBytes(formatFile({ ...entry, cutText: "" }, isRule));
    if (kept < C.MAX_REMINDER_FILES && keep(formatFile(entry, isRule), () => {})) {
      kept++;
    } else if (kept < C.MAX_REMINDER_FILES && room > 0 && (room >= C.MIN_CUT_BYTES || kept === 0)) {
      entry.cutText = cutUtf8(entry.file.text, room);
      const recorded = isRule
        ? record.rules?.find((rule) => rule.path === entry.file.path)
        : record.files.find((file) => file.path === entry.file.path && file.via === "reminder");
      if (recorded) recorded.truncated = true;
      remaining -= lineBytes(formatFile(entry, isRule));
      kept++;
    } else {
      left.add(entry);
      leftOut.files++;
      leftOut.names.push(entry.file.path);
      if (isRule) record.rules = record.rules?.filter((rule) => rule.path !== entry.file.path);
      else record.files = record.files.filter((file) => file.path !== entry.file.path || file.via !== "reminder");
    }
  }
  plan.files = plan.files.filter((entry) => !left.has(entry));
  plan.rules = plan.rules?.filter((entry) => !left.has(entry));
  plan.ruleListings = plan.ruleListings?.filter((listing) =>
    keep(ruleListingLine(listing), () => {
      record.rules = record.rules?.filter((rule) => rule.path !== listing.path);
      leftOut.files++;
      leftOut.names.push(listing.path);
    }),
  );
  plan.skills = plan.skills.filter((skill) =>
    keep(skillLine(skill), () => {
      record.skills = record.skills.filter((recorded) => recorded.path !== skill.path);
      leftOut.skills++;
      leftOut.names.push(skill.path);
    }),
  );
  if (leftOut.files + leftOut.skills + leftOut.notices > 0) plan.leftOut = leftOut;
  const explained = sectionsIn(plan).filter((section) => explains(plan, section));
  if (explained.length > 0) record.explained = explained;
  else delete record.explained;
}

/**
 * Indexes of the plan's files, then its rule texts, in the order they claim the budget: deepest
 * scope first, a file before its imports; rule texts after the deepest folder's files.
 */
function budgetOrder(plan: DeliveryPlan): number[] {
  const depth = (index: number) => depthOf(plan.files[index]!.scope);
  const imported = (index: number) => Number(plan.files[index]!.importedBy !== undefined);
  const files = plan.files
    .map((_, index) => index)
    .sort((a, b) => depth(b) - depth(a) || imported(a) - imported(b) || a - b);
  const rules = (plan.rules ?? []).map((_, index) => plan.files.length + index);
  const deepest = Math.max(0, ...files.map(depth));
  const at = files.findIndex((index) => depth(index) < deepest);
  return at === -1 ? [...files, ...rules] : [...files.slice(0, at), ...rules, ...files.slice(at)];
}

/** Which sections are in a plan: each opens with its explanation or its one-line header. */
function sectionsIn(plan: DeliveryPlan): Section[] {
  const counts: Record<Section, number> = {
    files: plan.files.length,
    skills: plan.skills.length,
    rules: plan.rules?.length ?? 0,
    ruleListings: plan.ruleListings?.length ?? 0,
  };
  return SECTIONS.filter((section) => counts[section] > 0);
}

function explains(plan: DeliveryPlan, section: Section): boolean {
  return !plan.explainedEarlier?.has(section);
}

/** Each section's items as the reminder shows them, in the order it shows them. */
function sectionItems(plan: DeliveryPlan): Array<[Section, string[]]> {
  return [
    ["files", plan.files.map((entry) => formatFile(entry, false))],
    ["rules", (plan.rules ?? []).map((entry) => formatFile(entry, true))],
    ["ruleListings", (plan.ruleListings ?? []).map(ruleListingLine)],
    ["skills", plan.skills.map(skillLine)],
  ];
}

/** The opening tag: it names the paths the tool touched, so a reminder says why it came. */
function reminderOpening(touched: readonly string[] | undefined): string {
  const paths = [...new Set(touched ?? [])];
  if (paths.length === 0) return `${REMINDER_OPEN}>`;
  const more = paths.length > SHOWN_TOUCHED_PATHS ? ` +${paths.length - SHOWN_TOUCHED_PATHS}` : "";
  return `${REMINDER_OPEN} touched="${paths.slice(0, SHOWN_TOUCHED_PATHS).map(reminderField).join(", ")}${more}">`;
}

function formatReminder(plan: DeliveryPlan): string {
  const blocks: string[] = [];
  for (const [section, items] of sectionItems(plan)) {
    const intro = INTROS[section][explains(plan, section) ? 0 : 1];
    if (items.length > 0) blocks.push([...(intro === undefined ? [] : [intro]), ...items].join("\n"));
  }
  const notices = noticeLines(plan.record);
  if (notices.length > 0) blocks.push(notices.join("\n"));
  const { leftOut } = plan;
  if (leftOut) {
    blocks.push(C.leftOutText(leftOut.files, leftOut.skills, leftOut.notices, leftOut.names.map(reminderField)));
  }
  const preamble = sectionsIn(plan).some((section) => explains(plan, section)) ? [C.REMINDER_PREAMBLE] : [];
  return [reminderOpening(plan.touched), ...preamble, blocks.join("\n\n"), REMINDER_CLOSE].join("\n");
}

/** A file's or a rule's text in its tag: the scope is said only where it is not the file's own folder. */
function formatFile(entry: PlannedFile, isRule: boolean): string {
  const { file, scope, supersedes, importedBy, cutText } = entry;
  const tag = isRule ? "rule" : "file";
  const path = reminderField(file.path);
  const shownScope = entry.scopeText ?? (posix.dirname(file.path) === scope ? undefined : scopeGlob(scope));
  const attributes = [
    `path="${path}"`,
    ...(shownScope === undefined ? [] : [`scope="${reminderField(shownScope)}"`]),
    ...(importedBy === undefined ? [] : [`imported-by="${reminderField(importedBy)}"`]),
    ...(supersedes ? [`supersedes="${C.SUPERSEDES_MARKER}"`] : []),
  ];
  const text = neutralizeClosingTags((cutText ?? file.text).replace(/\n+$/, ""));
  const cut = cutText === undefined ? [] : [C.cutNotice(path)];
  return [`<${tag} ${attributes.join(" ")}>`, text, ...cut, `</${tag}>`].join("\n");
}

function skillLine(skill: PlannedSkill): string {
  const precedence = skill.overridesStartup ? C.SKILL_OVERRIDES_STARTUP : "";
  // A skill is for the folder that holds its .agents/skills: its scope is said only for one linked from elsewhere.
  const own = skill.path.startsWith(`${posix.join(skill.scope, ...C.SKILLS_DIR_SEGMENTS)}/`);
  const scope = own ? "" : ` (scope ${reminderField(scopeGlob(skill.scope))})`;
  return `- ${reminderField(skill.name)}${scope}: ${reminderField(skill.description)} [${reminderField(skill.path)}]${precedence}`;
}

/** A rule's scope as the model reads it: one that covers every path is named repository-wide, not `**`. */
function shownRuleScope(scope: string): string {
  return scope === "**" ? C.REPOSITORY_WIDE_SCOPE : scope;
}

function ruleListingLine({ name, description, path, scope }: RuleListing): string {
  const fields = [name, shownRuleScope(scope), description, path].map(reminderField);
  return `- ${fields[0]} (scope ${fields[1]}): ${fields[2]} [${fields[3]}]`;
}

// =============================================================================================
// 5. Discovery: locate -> folder view -> instruction file -> imports -> skills -> rules. Directory
// listings and file contents are cached against their stat signature, so a warm call costs one
// stat per directory on the chain plus one per known file.

interface Rejection {
  path: string;
  reason: C.Reason;
  /** Instruction-file, import and cap rejections are told to the model; the others only to the user. */
  kind: "instruction" | "import" | "skill" | "overridden" | "cap";
  /** For a capped folder: how many of its entries were taken. */
  counts?: { taken: number; total: number };
}

interface InstructionFile {
  /** cwd-relative path of the file's real location: its identity in the ledger. */
  path: string;
  realPath: string;
  text: string;
  version: string;
  bytes: number;
}

interface Skill {
  name: string;
  description: string;
  /** cwd-relative path of its SKILL.md (or skill .md file). */
  path: string;
  version: string;
}

interface ImportedFile {
  file: InstructionFile;
  /** cwd-relative path of the file whose `@path` token brought it in. */
  importedBy: string;
}

interface DirectoryView {
  /** cwd-relative directory, the scope of what it holds. */
  scope: string;
  file?: InstructionFile;
  /** Files the instruction file imports, depth first, each once. */
  imports: ImportedFile[];
  rejected: Rejection[];
  skills: Skill[];
  /** A source here waits for git's answer: what the model holds of this folder stands until it comes. */
  pending?: true;
}

interface DirectoryEntry {
  /** Instruction file names present (of any type), in preference order. */
  present: string[];
  /** Their absolute paths, joined once. */
  candidates: string[];
  /** What `.agents` is in this folder: absent, a folder, or a link to resolve. */
  agents: "none" | "dir" | "link";
  /** What the folder's `.cursor` is, the parent of a nested rule folder (rules touch point). */
  ruleParent: ParentKind;
  /** The folder's last view, when it depends on nothing but the folder and its first file. */
  plainView?: DirectoryView;
  /** Entries the folder held when it was last listed; undefined when it was probed name by name. */
  listed?: number;
}

type FolderNames = Pick<DirectoryEntry, "present" | "agents" | "ruleParent" | "listed">;

/** A source file, or why there is none; `real` names a file that is there but was refused as read. */
type SourceFile = InstructionFile | { reason: C.Reason | "skip" | "held"; real?: string };

interface FileEntry {
  loaded: Loaded;
  /** The loaded file as views show it, built once per content. */
  file?: InstructionFile;
  /** Absolute targets of its `@path` tokens, parsed once per content. */
  importTargets?: string[];
  skill?: { ok: true; skill: Skill; hidden: boolean } | { ok: false; reason: C.Reason };
  /** Its rules when it is an ignore file in a skills tree, compiled for the folder's prefix. */
  ignore?: { prefix: string; rules: IgnoreRule[] };
}

interface ListingEntry {
  names: Array<{ name: string; kind: "file" | "dir" | "link" | "other" }>;
  capped: boolean;
  /** Entries in the folder, before the cap. */
  total: number;
  /** Ignore files present, in the order Pi reads them. */
  ignoreFiles: readonly string[];
  /** The same names sorted, for folder imports; built on first use. */
  sorted?: ListingEntry["names"];
  hasSkillFile: boolean;
}

const NO_IMPORTS: ImportedFile[] = [];

function emptyView(scope: string): DirectoryView {
  return { scope, imports: [], rejected: [], skills: [] };
}

/** One folder strictly below cwd on the way to a target. */
interface ChainLink {
  dir: string;
  /** cwd-relative, with forward slashes: the folder's scope. */
  scope: string;
  name: string;
}

/** Where a tool call lands: the folders below cwd down to it, with the stats the fast path took. */
interface Located {
  links: ChainLink[];
  stats?: nodeFs.Stats[];
}

/** What a filesystem call gives, or `fallback` when it fails with an errno code; other errors propagate. */
function fsOr<T, F>(fallback: F, call: () => T): T | F {
  try {
    return call();
  } catch (error) {
    errorCode(error);
    return fallback;
  }
}

/** True when `path` is inside cwd by its real or its logical (possibly linked) form. */
function mayBeInside(ctx: Discovery, path: string): boolean {
  return (
    isPathInsideOrSame(ctx.cwdReal, path) || (ctx.logicalCwd !== undefined && isPathInsideOrSame(ctx.logicalCwd, path))
  );
}

/** The folders strictly below cwd down to the cwd-relative `rel`, parent first; cached. */
function chainFor(ctx: Discovery, rel: string): ChainLink[] {
  const cached = ctx.chains.get(rel);
  if (cached) return cached;
  const links: ChainLink[] = [];
  if (rel !== "") {
    let dir = ctx.cwdReal;
    let scope = "";
    for (const name of rel.split(sep)) {
      dir = join(dir, name);
      scope = scope === "" ? name : `${scope}/${name}`;
      links.push({ dir, scope, name });
    }
  }
  ctx.chains.set(rel, links);
  return links;
}

/**
 * The chain to a tool's target. The fast path takes the target's folder as written when every
 * folder on the way is a real folder (lstat, no links): then it is its own real path, and those
 * stats serve the views too. Otherwise the slow path resolves real paths, walking up to the
 * nearest existing folder for targets that do not exist yet. Paths outside cwd by their text are
 * refused before any filesystem call.
 */
function locateChain(ctx: Discovery, target: string, targetIsDirectory: boolean): Located | undefined {
  const dir = targetIsDirectory ? target : dirname(target);
  const rel = relativeInside(ctx.cwdReal, dir);
  if (rel === "") return { links: [] };
  if (rel !== undefined) {
    const fresh = !ctx.chains.has(rel);
    const links = chainFor(ctx, rel);
    // A step that is missing, not a real folder or fails (ENAMETOOLONG, EACCES …) leaves the chain
    // to the slow path, which walks up to a folder that can be resolved.
    const { stats, stop } = lstatChain(ctx.fs, links);
    if (stop === undefined) {
      if (!fresh || spelledAsOnDisk(ctx, links, stats)) return { links, stats };
      // One folder, one identity: the chain as typed now leads to the folder's own spelling.
      const real = ctx.realpathOrUndefined(dir);
      if (real !== undefined && isPathInside(ctx.cwdReal, real)) {
        const respelled = chainFor(ctx, relative(ctx.cwdReal, real));
        ctx.chains.set(rel, respelled);
        return { links: respelled };
      }
    }
  }
  const real = targetDirectory(ctx, target, targetIsDirectory);
  return real === undefined ? undefined : { links: chainFor(ctx, relative(ctx.cwdReal, real)) };
}

/** lstat of each folder on a chain, parent first, up to the first step that is not a real folder. */
function lstatChain(
  fs: FileSystem,
  links: ChainLink[],
): { stats: nodeFs.Stats[]; stop?: nodeFs.Stats | "missing" | "error" } {
  const stats: nodeFs.Stats[] = [];
  for (const link of links) {
    const stat = fsOr("error" as const, () => fs.lstat(link.dir));
    if (stat === "error") return { stats, stop: stat };
    if (!stat) return { stats, stop: "missing" };
    if (!stat.isDirectory()) return { stats, stop: stat };
    stats.push(stat);
  }
  return { stats };
}

/**
 * Whether a new chain, whose folders lstat found as typed, is spelled as on disk. Only a
 * filesystem that folds names can find `PKG` for `pkg`; there one realpath per new chain tells.
 */
function spelledAsOnDisk(ctx: Discovery, links: ChainLink[], stats: nodeFs.Stats[]): boolean {
  const first = links[0]!;
  if (ctx.folds === undefined) {
    const swapped = swapCase(first.name);
    if (swapped === first.name) return true;
    const other = fsOr(undefined, () => ctx.fs.lstat(join(ctx.cwdReal, swapped)));
    ctx.folds = other !== undefined && other.ino === stats[0]!.ino && other.dev === stats[0]!.dev;
  }
  if (!ctx.folds) return true;
  const last = links.at(-1)!.dir;
  return ctx.realpathOrUndefined(last) === last;
}

/** Real folder of a target, or of its nearest existing ancestor; undefined outside cwd. */
function targetDirectory(ctx: Discovery, target: string, targetIsDirectory: boolean): string | undefined {
  let dir = targetIsDirectory ? target : dirname(target);
  // Outside cwd by its text, a path may still lead into it through a link (`/tmp` to
  // `/private/tmp`): only its own folder's real path, a name lookup, can tell.
  const viaLink = !mayBeInside(ctx, dir);
  while (viaLink || mayBeInside(ctx, dir)) {
    const real = ctx.realpathOrUndefined(dir);
    if (real !== undefined) {
      if (!isPathInsideOrSame(ctx.cwdReal, real)) return undefined;
      // A directory target may name a file (grep, find): its folder is the scope.
      if (targetIsDirectory && dir === target && !ctx.fs.stat(real)?.isDirectory()) return dirname(real);
      return real;
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
  return undefined;
}

// The folder view: what each folder on a chain offers, parent first, up to the first ignored one.

/** Questions for git about the chain's folders it has not answered for, down to the first ignored one. */
function chainQuestions(ctx: Discovery, links: ChainLink[]): string[] {
  const questions: string[] = [];
  for (const link of links) {
    if (ignoredReasonOf(ctx, link) !== undefined) break;
    if (!ctx.gitAnswers.folders.has(link.scope)) questions.push(`${link.scope}/`);
  }
  return questions;
}

/** The one way to ask git: questions as `GitAnswers.setAnswer` takes them; undefined when none. */
function askGit(ctx: Discovery, git: GitIgnoreOracle | undefined, questions: string[]): Promise<void> | undefined {
  if (!git || questions.length === 0) return undefined;
  return git.ask(questions).then((answers) => {
    questions.forEach((question, index) => ctx.gitAnswers.setAnswer(question, answers[index]!));
  });
}

/** One promise for the git answers a call waits on; undefined when it waits on none. */
function joinAnswers(...answers: Array<Promise<void> | undefined>): Promise<void> | undefined {
  const pending = answers.filter((answer) => answer !== undefined);
  return pending.length <= 1 ? pending[0] : Promise.all(pending).then(() => undefined);
}

/** Views of the chain's folders, parent first, up to the first ignored one. */
function viewChain(ctx: Discovery, located: Located, withSkills: boolean): DirectoryView[] {
  const views: DirectoryView[] = [];
  for (let index = 0; index < located.links.length; index++) {
    const link = located.links[index]!;
    // A skills tree holds skill content, read when a skill applies: its folders are not scopes.
    if (link.name === C.SKILLS_DIR_SEGMENTS[1] && located.links[index - 1]?.name === C.SKILLS_DIR_SEGMENTS[0]) break;
    const ignored = ignoredReasonOf(ctx, link);
    if (ignored) {
      ctx.ignoredSeen.set(link.scope, ignored);
      break;
    }
    // A folder that cannot be examined now (EIO, EACCES) is left out; the others still count.
    const view = fsOr(undefined, () => viewDirectory(ctx, link, withSkills, located.stats?.[index]));
    if (view) views.push(view);
  }
  return views;
}

function ignoredReasonOf(ctx: Discovery, link: ChainLink): C.Reason | undefined {
  if (ctx.options.ignoredDirs.has(link.name)) return "ignoredDir";
  return ctx.gitAnswers.folders.get(link.scope) === true ? "gitIgnored" : undefined;
}

function viewDirectory(ctx: Discovery, link: ChainLink, withSkills: boolean, stats?: nodeFs.Stats): DirectoryView {
  const entry = ctx.directoryEntry(link.dir, stats);
  if (!entry) return emptyView(link.scope);
  const skillsToo = withSkills && entry.agents !== "none";
  // Most folders look the same call after call: reuse their view instead of building it again.
  if (entry.candidates.length === 0 && !skillsToo) return (entry.plainView ??= emptyView(link.scope));
  const held = ctx.held;
  const first = entry.candidates.length > 0 ? ctx.sourceFileOrUnknown(entry.candidates[0]!, link.scope) : undefined;
  if (!skillsToo && first !== undefined && entry.plainView?.file === first) return entry.plainView;
  const view = emptyView(link.scope);
  for (const [index, candidate] of entry.candidates.entries()) {
    const result = index === 0 ? first! : ctx.sourceFileOrUnknown(candidate, link.scope);
    if (!("reason" in result)) {
      view.file = result;
      for (const later of entry.present.slice(index + 1))
        view.rejected.push({ path: `${link.scope}/${later}`, reason: "overridden", kind: "overridden" });
      break;
    }
    // A file that waits for git, or cannot be read now, may be the one that applies: the names after it wait.
    if (result.reason === "held") break;
    if (result.reason !== "skip")
      view.rejected.push({ path: toDisplayPath(ctx.cwdReal, candidate), reason: result.reason, kind: "instruction" });
    if (result.reason === "unreadable") break;
  }
  if (view.file && ctx.options.imports) view.imports = importsOf(ctx, view.file, view.scope, view.rejected);
  if (skillsToo) view.skills = skillsOf(ctx, link, entry, view.rejected);
  if (ctx.held !== held) view.pending = true;
  // A view that depends on nothing but its folder and its first file can be reused while both stand.
  // A file with `@path` tokens depends on their targets too, which may appear or change at any time.
  const reusable =
    !skillsToo &&
    view.file === first &&
    (view.file === undefined || !ctx.options.imports || importTargetsOf(ctx, view.file).length === 0) &&
    view.rejected.every((rejection) => rejection.kind === "overridden") &&
    !view.pending;
  entry.plainView = reusable ? view : undefined;
  return view;
}

class Discovery {
  readonly fs: FileSystem;
  readonly cwdReal: string;
  options: Options;
  // The bench's warm numbers rest on these three: a warm call stats a folder or file and builds nothing.
  readonly directories = new SignatureCache<DirectoryEntry>();
  readonly files = new SignatureCache<FileEntry>();
  readonly listings = new SignatureCache<ListingEntry>();
  // Cut by folder so the warm fast path joins no paths (bench: warm call ~23 stats of time, floor 10.5 fs calls).
  readonly chains = new Map<string, ChainLink[]>();
  /** cwd as Pi gives it, which may lead to cwdReal through a link. */
  logicalCwd?: string;
  /** Whether cwd's filesystem folds case (and, on macOS, Unicode normalization); asked once. */
  folds?: boolean;
  /** What git said about this discovery's folders and imports (see the Git section). */
  readonly gitAnswers: GitAnswers;
  /** Folders whose subtree was skipped, for the inspection command. */
  readonly ignoredSeen = new Map<string, C.Reason>();
  /** Real paths of the context files Pi loaded at start-up (inside cwd): never sent again. */
  startupContext: ReadonlySet<string> = new Set();
  /** Sources held back for git so far; a view that saw it grow is pending. */
  held = 0;
  // Rules (see the Rules part below): folders read this session by cwd-relative folder, the nested
  // `.cursor/rules` places by the viewed folder holding one, and each rule compiled once per version.
  readonly ruleFolders = new Map<string, RuleFolder>();
  readonly rulePlaces = new Map<string, RulePlace>();
  readonly compiledRules = new Map<string, Rule>();
  readonly rootRulePlaces: RulePlace[];
  /** What `.claude`, `.cursor` and `.github` are in cwd, by cwd's signature. */
  readonly rootRuleParents = new SignatureCache<Map<C.RuleSource, ParentKind>>();

  constructor(fs: FileSystem, cwdReal: string, options: Options, gitMayAnswer: () => boolean) {
    this.fs = fs;
    this.cwdReal = cwdReal;
    this.options = options;
    this.gitAnswers = new GitAnswers(gitMayAnswer);
    this.rootRulePlaces = C.RULE_SOURCES.map((source) => rulePlace(this, source, ""));
  }

  /** Sizes of the internal caches, for the soak test and the inspection command. */
  cacheSizes(): Record<string, number> {
    return {
      directories: this.directories.size,
      files: this.files.size,
      listings: this.listings.size,
      chains: this.chains.size,
      gitAnswers: this.gitAnswers.folders.size,
      gitFileAnswers: this.gitAnswers.files.size,
      ignoredSeen: this.ignoredSeen.size,
      ruleFolders: this.ruleFolders.size,
      rulePlaces: this.rulePlaces.size,
      compiledRules: this.compiledRules.size,
    };
  }

  /** Cache size at which the next sweep runs. */
  sweepAt = 256;

  /**
   * Drops cache entries of paths that are gone, once the caches have doubled since the last sweep:
   * they stay bounded by the tree on disk, not by every path a long session has seen. Returns
   * whether it swept.
   */
  sweep(): boolean {
    if (!this.wantsSweep()) return false;
    const byPath = [this.directories, this.files, this.listings];
    for (const cache of byPath) cache.sweep((path) => this.exists(path));
    for (const path of this.compiledRules.keys()) if (!this.exists(path)) this.compiledRules.delete(path);
    const { chains, gitAnswers, ignoredSeen, ruleFolders, rulePlaces } = this;
    const byScope = [chains, gitAnswers.folders, gitAnswers.files, ignoredSeen, ruleFolders, rulePlaces];
    for (const map of byScope as Array<Map<string, unknown>>) {
      for (const scope of map.keys()) if (!this.exists(join(this.cwdReal, scope))) map.delete(scope);
    }
    this.sweepAt = Math.max(256, 2 * this.cachedEntries());
    return true;
  }

  /** Whether the caches have doubled since the last sweep. */
  wantsSweep(): boolean {
    return this.cachedEntries() >= this.sweepAt;
  }

  /** Entries of the caches whose growth schedules a sweep; the rule maps are swept along with them. */
  private cachedEntries(): number {
    const { directories, files, listings, chains, gitAnswers, ignoredSeen } = this;
    const sizes = [directories, files, listings, chains, gitAnswers.folders, gitAnswers.files, ignoredSeen];
    return sizes.reduce((sum, cache) => sum + cache.size, 0);
  }

  exists(path: string): boolean {
    return fsOr(true, () => this.fs.lstat(path) !== undefined);
  }

  /** Whether a spelling Pi's read tool falls back to is there; only asked inside cwd. */
  readonly readFallback = (path: string): boolean =>
    mayBeInside(this, path) && fsOr(false, () => this.fs.stat(path) !== undefined);

  realpathOrUndefined(path: string): string | undefined {
    return fsOr(undefined, () => this.fs.realpath(path));
  }

  /** Real path, or undefined when nothing resolves there; a passing I/O error is thrown. */
  realpathIfThere(path: string): string | undefined {
    try {
      return this.fs.realpath(path);
    } catch (error) {
      if (C.SETTLED_ERROR_CODES.has(errorCode(error))) return undefined;
      throw error;
    }
  }

  /** What a viewed folder's `.cursor` is (rules touch point): from its cached entry, no fs call. */
  ruleParentKind(scope: string): ParentKind {
    // A scope is a normalized path below cwd: on POSIX it needs no join (bench: join made this a tenth of a warm call).
    const direct = sep === "/" && scope !== "" && this.cwdReal !== "/";
    return this.directories.peek(direct ? `${this.cwdReal}/${scope}` : join(this.cwdReal, scope))?.ruleParent ?? "none";
  }

  directoryEntry(dir: string, known?: nodeFs.Stats): DirectoryEntry | undefined {
    const stats = known ?? this.fs.lstat(dir);
    if (!stats?.isDirectory()) {
      this.directories.delete(dir);
      return undefined;
    }
    const previous = this.directories.peek(dir);
    return this.directories.get(dir, stats, () => {
      // One listing costs less than seven name probes in a small folder; a large one keeps the probes,
      // whose cost does not grow with the folder (bench: cold every-folder chain, 7 probes → 1 call per folder).
      const listable = stats.size <= C.LISTED_DIR_MAX_BYTES && (previous?.listed ?? 0) <= C.LISTED_DIR_MAX_ENTRIES;
      const names = (listable ? this.namesByListing(dir) : undefined) ?? this.namesByProbing(dir);
      return {
        present: names.present,
        candidates: names.present.map((name) => join(dir, name)),
        agents: names.agents,
        ruleParent: names.ruleParent,
        listed: names.listed,
      };
    });
  }

  /** Instruction file names, `.agents` and `.cursor` by one lstat each. */
  private namesByProbing(dir: string): FolderNames {
    const present = this.options.fileNames.filter((name) => this.exists(join(dir, name)));
    return {
      present,
      agents: kindOfEntry(this.fs.lstat(join(dir, C.SKILLS_DIR_SEGMENTS[0]!))),
      ruleParent: kindOfEntry(this.fs.lstat(join(dir, C.RULE_DIRS.cursor[0]))),
    };
  }

  /**
   * The same from one listing. Undefined when the folder cannot be listed (read permission, a
   * fault), or holds a name that matches a wanted one only in case: on a case-insensitive
   * filesystem the probes find such a file, so they answer for that folder.
   */
  private namesByListing(dir: string): FolderNames | undefined {
    const dirents = fsOr(undefined, () => this.fs.readdir(dir));
    if (!dirents) return undefined;
    const wanted = this.options.fileNames;
    const found = new Set<string>();
    let agents: ParentKind = "none";
    let ruleParent: ParentKind = "none";
    for (const dirent of dirents) {
      const name = dirent.name;
      if (name === C.SKILLS_DIR_SEGMENTS[0]) agents = kindOfEntry(dirent);
      else if (name === C.RULE_DIRS.cursor[0]) ruleParent = kindOfEntry(dirent);
      else if (wanted.includes(name)) found.add(name);
      else if (this.foldedNames().has(name.toLowerCase())) return undefined;
    }
    return { present: wanted.filter((name) => found.has(name)), agents, ruleParent, listed: dirents.length };
  }

  private folded?: { names: readonly string[]; set: Set<string> };

  /** Lower-cased wanted names, to spot a name that differs from one only in case. */
  private foldedNames(): Set<string> {
    const names = this.options.fileNames;
    if (this.folded?.names !== names) {
      const set = new Set(
        [...names, C.SKILLS_DIR_SEGMENTS[0]!, C.RULE_DIRS.cursor[0]].map((name) => name.toLowerCase()),
      );
      this.folded = { names, set };
    }
    return this.folded.set;
  }

  /** Real paths of Pi's start-up context files; only those inside cwd by their text are looked up. */
  learnStartupFiles(paths: readonly string[]): void {
    const real = new Set<string>();
    for (const path of paths) {
      const resolved = mayBeInside(this, path) ? this.realpathOrUndefined(path) : undefined;
      if (resolved !== undefined) real.add(resolved);
    }
    this.startupContext = real;
  }

  // Sources: instruction files, imports, rule files, skill files and the folders links lead to.

  /**
   * Resolves a source and applies the source policy (`sourceRefusal`) to it: its real file or
   * folder, or why it is refused ("skip" when nothing is there, "held" while git has to answer).
   * `scope` is the folder the model reached it through; `how` says who named the path: the
   * source's own layout, repository text (an import token, resolved even when it is no link), or
   * a file read only to decide and never sent (a skills tree's ignore file: containment alone).
   */
  resolveSource(
    written: string,
    scope: string,
    how: "layout" | "named" | "control" = "layout",
  ): { real: string; stats: nodeFs.Stats } | { reason: C.Reason | "skip" | "held" } {
    const named = how === "named";
    // Text first: a path outside cwd is refused before any filesystem call.
    if (named && !isPathInside(this.cwdReal, written)) return { reason: "outsideCwd" };
    const link = this.fs.lstat(written);
    if (!link) return { reason: "skip" };
    // A named path may lead through a linked folder: only its real path tells where it is.
    const real = link.isSymbolicLink() || named ? this.realpathIfThere(written) : written;
    if (real === undefined) return { reason: "skip" };
    // Stat only once the policy has the path inside cwd: nothing outside is ever opened.
    let stats = real === written && !link.isSymbolicLink() ? link : undefined;
    const statOnce = () => (stats ??= this.fs.stat(real));
    const isDirectory = () => statOnce()?.isDirectory() === true;
    const refusal =
      how === "control"
        ? isPathInside(this.cwdReal, real)
          ? undefined
          : "symlinkEscape"
        : sourceRefusal(this, { written, real, scope, named, isDirectory });
    if (refusal !== undefined) return { reason: refusal };
    const found = statOnce();
    return found ? { real, stats: found } : { reason: "skip" };
  }

  /**
   * The one reader of a source file (instruction, rule, skill or ignore file) found by its source's
   * layout, or, `how` "control", read only to decide. Folders are nothing, other kinds not regular.
   */
  sourceFile(written: string, scope: string, how: "layout" | "control" = "layout"): SourceFile {
    const resolved = this.resolveSource(written, scope, how);
    if ("reason" in resolved) return resolved;
    if (resolved.stats.isFile()) return this.fileAt(resolved.real, resolved.stats);
    return { reason: resolved.stats.isDirectory() ? "skip" : "notRegular" };
  }

  /** As sourceFile, with a passing I/O error reported as "unreadable": the file is unknown. */
  sourceFileOrUnknown(written: string, scope: string): SourceFile {
    return fsOr({ reason: "unreadable" as const }, () => this.sourceFile(written, scope));
  }

  /** The file at a real path, read once per content (its cache entry under `files`). */
  fileAt(real: string, stats: nodeFs.Stats): InstructionFile | { reason: C.Reason; real: string } {
    const load = (): FileEntry => ({
      loaded:
        stats.size > this.options.maxFileBytes
          ? { ok: false, reason: "tooLarge" }
          : readBounded(this.fs, real, this.options.maxFileBytes),
    });
    // A read that failed (EIO, EACCES, a race) may succeed next time without the file changing.
    const entry = this.files.get(real, stats, load, ({ loaded }) => loaded.ok || loaded.reason !== "unreadable");
    if (!entry.loaded.ok) return { reason: entry.loaded.reason, real };
    const { text, version, bytes } = entry.loaded;
    return (entry.file ??= { path: toDisplayPath(this.cwdReal, real), realPath: real, text, version, bytes });
  }

  /** Real path of a linked source folder that passes the source policy; undefined otherwise. */
  sourceFolder(path: string, scope: string): string | undefined {
    const resolved = this.resolveSource(path, scope);
    return "reason" in resolved || !resolved.stats.isDirectory() ? undefined : resolved.real;
  }

  /**
   * The entries of a real folder in directory order (the order Pi walks skills in), re-read only
   * when its signature changes. Past the cap, the first entries by name are kept.
   */
  listing(dir: string): ListingEntry | undefined {
    const stats = this.fs.lstat(dir);
    if (stats?.isSymbolicLink()) {
      const real = this.sourceFolder(dir, toDisplayPath(this.cwdReal, dirname(dir)));
      return real === undefined ? undefined : this.listing(real);
    }
    if (!stats?.isDirectory()) {
      this.listings.delete(dir);
      return undefined;
    }
    // A folder that cannot be listed now is unknown, not empty: the error reaches the caller.
    return this.listings.get(dir, stats, () => listingOf(this.fs.readdir(dir)));
  }
}

// Imports: `@relative/path` tokens in an instruction file, resolved against its folder, under the
// same rules as instruction files. Depth first, at most C.MAX_IMPORT_DEPTH hops, cycles cut.

function importsOf(ctx: Discovery, root: InstructionFile, scope: string, rejected: Rejection[]): ImportedFile[] {
  if (importTargetsOf(ctx, root).length === 0) return NO_IMPORTS;
  const imports: ImportedFile[] = [];
  const seen = new Set([root.realPath]);
  const visit = (file: InstructionFile, depth: number): void => {
    for (const target of importTargetsOf(ctx, file)) {
      const found = fsOr(undefined, () => importedFiles(ctx, file, target, scope, rejected, true));
      if (!found) rejected.push({ path: file.path, reason: "unreadable", kind: "import" });
      for (const imported of found ?? []) {
        if (seen.has(imported.realPath)) continue;
        seen.add(imported.realPath);
        imports.push({ file: imported, importedBy: file.path });
        if (depth < C.MAX_IMPORT_DEPTH) visit(imported, depth + 1);
        else if (importTargetsOf(ctx, imported).some((next) => mayBeInside(ctx, next) && ctx.exists(next)))
          rejected.push({ path: imported.path, reason: "importDepthCapped", kind: "cap" });
      }
    }
  };
  visit(root, 1);
  return imports;
}

function importTargetsOf(ctx: Discovery, file: InstructionFile): string[] {
  const parse = () => importTokens(file.text).map((token) => resolve(dirname(file.realPath), token));
  const entry = ctx.files.peek(file.realPath);
  return entry ? (entry.importTargets ??= parse()) : parse();
}

/**
 * The files one target names: a file, or the files of a folder by name (one level, dot names
 * aside, up to the cap). Nothing for a token that names nothing (an npm scope, an email), nor
 * for a target git has yet to answer for.
 */
function importedFiles(
  ctx: Discovery,
  from: InstructionFile,
  target: string,
  scope: string,
  rejected: Rejection[],
  folderToo: boolean,
): InstructionFile[] {
  // The token itself is file content: a rejection names only the importing file.
  const reject = (reason: C.Reason): InstructionFile[] => {
    rejected.push({ path: from.path, reason, kind: "import" });
    return [];
  };
  const resolved = ctx.resolveSource(target, scope, "named");
  if ("reason" in resolved)
    return resolved.reason === "skip" || resolved.reason === "held" ? [] : reject(resolved.reason);
  const { real, stats } = resolved;
  if (stats.isFile()) {
    const file = ctx.fileAt(real, stats);
    return "reason" in file ? reject(file.reason) : [file];
  }
  if (!stats.isDirectory()) return reject("notRegular");
  const listing = folderToo ? ctx.listing(real) : undefined;
  if (!listing) return [];
  const files: InstructionFile[] = [];
  for (const entry of sortedNames(listing)) {
    if (entry.name.startsWith(".") || (entry.kind !== "file" && entry.kind !== "link")) continue;
    if (files.length >= C.MAX_IMPORT_DIR_FILES) {
      const counts = { taken: files.length, total: listing.total };
      rejected.push({ path: from.path, reason: "importDirCapped", kind: "cap", counts });
      break;
    }
    files.push(...importedFiles(ctx, from, join(real, entry.name), scope, rejected, false));
  }
  return files;
}

// The source policy. Every file the extension reads for the model (instruction files, imports,
// rule files, skill files), and every folder a link leads it into, passes `sourceRefusal`.

/** The dot folders sources live in, each with the one child that is the source (`.claude/rules` …). */
const SOURCE_HOMES: ReadonlyMap<string, string> = new Map(
  [...Object.values(C.RULE_DIRS), C.SKILLS_DIR_SEGMENTS].map(([home, child]) => [home!, child!]),
);

interface SourcePath {
  /** Absolute path as the source's layout or an import token names it. */
  written: string;
  /** Absolute real path it resolves to. */
  real: string;
  /** cwd-relative folder the model reached: the folder view has checked its segments already. */
  scope: string;
  /** Whether repository text (an import token) chose the written path. */
  named: boolean;
  isDirectory: () => boolean;
}

/**
 * The source policy. What the repository chooses, where a link leads and what an import names,
 * must lie inside cwd, not be a context file Pi put in its system prompt at start-up, hold no dot
 * name but the sources' own homes (credentials live in `.env`, `.git`, `.aws` whether or not git
 * ignores them), pass through no ignored folder, and not be ignored by git. A path the source's own
 * layout names (an AGENTS.md of a folder the model touched, a rule file in its rule folder) is the
 * folder view's to judge. "held" while git has yet to answer.
 */
function sourceRefusal(ctx: Discovery, source: SourcePath): C.Reason | "held" | undefined {
  const { written, real } = source;
  if (ctx.startupContext.has(real)) return "startupContext";
  // The warm path: a file its source's layout names, and no link, is the folder view's to judge.
  if (!source.named && real === written) return undefined;
  const checked = source.named ? [written, real] : [real];
  for (const path of checked) {
    const rel = relativeInside(ctx.cwdReal, path);
    if (rel === undefined || rel === "") return path === written ? "outsideCwd" : "symlinkEscape";
    const segments = segmentsBelow(rel, source.scope);
    for (const [index, name] of segments.entries()) {
      if (ctx.options.ignoredDirs.has(name) || C.NEVER_IMPORTED_DIR_NAMES.includes(name)) return "ignoredDir";
      if (!name.startsWith(".")) continue;
      const child = SOURCE_HOMES.get(name);
      const home = child !== undefined && (segments[index + 1] ?? (source.isDirectory() ? child : "")) === child;
      if (!home) return "dotfile";
    }
  }
  return gitRefusal(ctx, relativeInside(ctx.cwdReal, real)!.split(sep), source.isDirectory());
}

/** The segments of a cwd-relative path below `scope` (cwd-relative, with `/`), or all of them. */
function segmentsBelow(rel: string, scope: string): string[] {
  const prefix = sep === "/" ? scope : scope.split("/").join(sep);
  const below = prefix !== "" && rel.startsWith(`${prefix}${sep}`) ? rel.slice(prefix.length + 1) : rel;
  return below.split(sep);
}

/** Whether git ignores a target (cwd-relative segments) or a folder above it; "held" when unknown. */
function gitRefusal(ctx: Discovery, segments: string[], isDirectory: boolean): C.Reason | "held" | undefined {
  const questions: string[] = [];
  let scope = "";
  for (const [index, name] of segments.entries()) {
    scope = scope === "" ? name : `${scope}/${name}`;
    const folder = isDirectory || index < segments.length - 1;
    const answer = folder ? ctx.gitAnswers.folders.get(scope) : ctx.gitAnswers.files.get(scope);
    if (answer === true) return "gitIgnored";
    if (answer === undefined) questions.push(folder ? `${scope}/` : scope);
  }
  if (questions.length === 0 || !ctx.gitAnswers.mayAnswer()) return undefined;
  for (const question of questions) ctx.gitAnswers.wanted.add(question);
  ctx.held++;
  return "held";
}

// Skills, by Pi's rules for `.agents/skills`: a directory holding SKILL.md is one skill and is not
// searched further; other `.md` files count only below the root; dot names and node_modules are
// skipped; `.gitignore`, `.ignore` and `.fdignore` files inside the tree hide what they match;
// of two skills with one name, the first found (in directory order, as Pi walks) is kept. A
// known skill folder costs one lstat of its SKILL.md; other folders one of themselves.

function skillsOf(ctx: Discovery, link: ChainLink, entry: DirectoryEntry, rejected: Rejection[]): Skill[] {
  const [home, child] = C.SKILLS_DIR_SEGMENTS as [string, string];
  const root = join(link.dir, home, child);
  const scan: SkillScan = { skills: [], rejected, names: new Map(), scope: link.scope };
  try {
    // A linked `.agents` is judged where it leads; a linked `skills` below it, by the listing.
    const agents = entry.agents === "link" ? ctx.sourceFolder(join(link.dir, home), link.scope) : undefined;
    const resolved = entry.agents === "link" ? (agents === undefined ? undefined : join(agents, child)) : root;
    if (resolved !== undefined) scanSkillDirectory(ctx, resolved, "", 0, scan, []);
  } catch (error) {
    errorCode(error);
    // The skills found so far stand; the rest are unknown until the next access.
    rejected.push({ path: toDisplayPath(ctx.cwdReal, root), reason: "unreadable", kind: "skill" });
  }
  return scan.skills;
}

/** Scans one folder of a skills tree; `rel` is its path below the tree's root, as Pi matches ignore rules. */
function scanSkillDirectory(
  ctx: Discovery,
  dir: string,
  rel: string,
  depth: number,
  scan: SkillScan,
  inherited: IgnoreRule[],
): void {
  const below = (name: string) => (rel === "" ? name : `${rel}/${name}`);
  const isSkill = (rules: IgnoreRule[]) =>
    !isIgnored(rules, below(C.SKILL_FILE_NAME), false) && addSkill(ctx, join(dir, C.SKILL_FILE_NAME), true, scan);
  // A folder known to hold SKILL.md stays a skill while that file exists: nothing else there matters.
  const known = ctx.listings.peek(dir);
  if (known?.hasSkillFile && isSkill(ignoreRules(ctx, dir, rel, known, inherited))) return;
  const listing = ctx.listing(dir);
  if (!listing) return;
  const rules = ignoreRules(ctx, dir, rel, listing, inherited);
  if (listing.capped) scan.rejected.push(scanCap(ctx, dir, listing));
  if (listing.hasSkillFile && isSkill(rules)) return;
  for (const entry of listing.names) {
    if (entry.name.startsWith(".") || entry.name === "node_modules" || entry.kind === "other") continue;
    const path = join(dir, entry.name);
    let subdirectory = entry.kind === "dir" ? path : undefined;
    if (entry.kind === "link") {
      const resolved = ctx.resolveSource(path, toDisplayPath(ctx.cwdReal, dir));
      if ("reason" in resolved) continue;
      if (resolved.stats.isDirectory()) subdirectory = resolved.real;
    }
    if (isIgnored(rules, below(entry.name), subdirectory !== undefined)) continue;
    if (subdirectory !== undefined) {
      if (depth < C.MAX_SKILL_DEPTH) scanSkillDirectory(ctx, subdirectory, below(entry.name), depth + 1, scan, rules);
      else
        scan.rejected.push({
          path: toDisplayPath(ctx.cwdReal, subdirectory),
          reason: "skillDepthCapped",
          kind: "cap",
        });
      continue;
    }
    if (depth > 0 && entry.name.endsWith(".md")) addSkill(ctx, path, false, scan);
  }
}

/** The ignore rules in force in a skills folder: its parents' and those of its own ignore files. */
function ignoreRules(
  ctx: Discovery,
  dir: string,
  rel: string,
  listing: ListingEntry,
  inherited: IgnoreRule[],
): IgnoreRule[] {
  let rules = inherited;
  for (const name of listing.ignoreFiles) {
    const file = ctx.sourceFile(join(dir, name), "", "control");
    if ("reason" in file) continue;
    const entry = ctx.files.peek(file.realPath)!;
    const prefix = rel === "" ? "" : `${rel}/`;
    if (entry.ignore?.prefix !== prefix) entry.ignore = { prefix, rules: ignoreRulesOf(file.text, prefix) };
    if (entry.ignore.rules.length > 0) rules = [...rules, ...entry.ignore.rules];
  }
  return rules;
}

/** The cap notice of a folder listed only in part. */
function scanCap(ctx: Discovery, dir: string, listing: ListingEntry): Rejection {
  const counts = { taken: listing.names.length, total: listing.total };
  return { path: toDisplayPath(ctx.cwdReal, dir), reason: "scanCapped", kind: "cap", counts };
}

/** Adds the skill a file defines; false when the file is not there. */
function addSkill(ctx: Discovery, candidate: string, declared: boolean, scan: SkillScan): boolean {
  const { skills, rejected } = scan;
  const file = ctx.sourceFile(candidate, scan.scope);
  if ("reason" in file) {
    if (file.reason === "skip") return false;
    if (file.reason === "held") return true;
    rejected.push({ path: toDisplayPath(ctx.cwdReal, file.real ?? candidate), reason: file.reason, kind: "skill" });
    return true;
  }
  const { path } = file;
  const entry = ctx.files.peek(file.realPath)!;
  entry.skill ??= skillOf(file.text, basename(dirname(file.realPath)), path);
  const parsed = entry.skill;
  if (!parsed.ok) {
    if (declared) rejected.push({ path, reason: parsed.reason, kind: "skill" });
    return true;
  }
  // As Pi: the same file twice is one skill; another file of a name already found loses.
  const first = scan.names.get(parsed.skill.name);
  if (first !== undefined) {
    if (first !== path) rejected.push({ path, reason: "skillCollision", kind: "skill" });
    return true;
  }
  scan.names.set(parsed.skill.name, path);
  if (parsed.hidden) {
    rejected.push({ path, reason: "skillHidden", kind: "skill" });
  } else {
    skills.push(parsed.skill);
  }
  return true;
}

interface SkillScan {
  skills: Skill[];
  rejected: Rejection[];
  /** Name → path of every skill found so far in this tree, listed or hidden. */
  names: Map<string, string>;
  /** The scope whose skills these are. */
  scope: string;
}

/** A folder's entries as discovery keeps them: past the cap, the first entries by name. */
function listingOf(dirents: nodeFs.Dirent[]): ListingEntry {
  const kept =
    dirents.length > C.MAX_SKILL_DIR_ENTRIES ? [...dirents].sort(byName).slice(0, C.MAX_SKILL_DIR_ENTRIES) : dirents;
  const names = kept.map((d) => ({ name: d.name, kind: direntKind(d) }));
  return {
    names,
    capped: dirents.length > C.MAX_SKILL_DIR_ENTRIES,
    total: dirents.length,
    ignoreFiles: C.SKILL_IGNORE_FILES.filter((name) => names.some((entry) => entry.name === name)),
    hasSkillFile: names.some((name) => name.name === C.SKILL_FILE_NAME),
  };
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** A listing's names sorted, for imports and rules, whose order is by name; built once per listing. */
function sortedNames(listing: ListingEntry): ListingEntry["names"] {
  return (listing.sorted ??= [...listing.names].sort(byName));
}

// Ignore files, with the gitignore rules Pi applies to skills trees: blank lines and `#` comments
// are skipped; `!` negates; the last matching rule wins; a pattern is prefixed with its folder's
// path below the root (after a leading `/` is dropped), and one that then holds a `/` is anchored
// there, while one without matches at any depth; a trailing `/` matches folders only; `*`, `?`
// and `[…]` stay within one segment and `**` spans any number.

interface IgnoreRule {
  matches: (path: string) => boolean;
  negate: boolean;
  dirOnly: boolean;
}

function ignoreRulesOf(text: string, prefix: string): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  for (const line of text.split(/\r?\n/)) {
    const trimmed = line.trim();
    if (trimmed === "" || (trimmed.startsWith("#") && !trimmed.startsWith("\\#"))) continue;
    const negate = line.startsWith("!");
    let pattern = negate || line.startsWith("\\!") ? line.slice(1) : line;
    pattern = `${prefix}${pattern.startsWith("/") ? pattern.slice(1) : pattern}`;
    // Trailing whitespace goes unless escaped; a loop, as `\s+$` takes quadratic time on a line of spaces.
    let end = pattern.length;
    while (end > 0 && /\s/.test(pattern[end - 1]!) && pattern[end - 2] !== "\\") end--;
    const dirOnly = pattern[end - 1] === "/";
    pattern = pattern.slice(0, dirOnly ? end - 1 : end);
    // A line that matches nothing or does not compile is skipped.
    const glob = pattern === "" ? undefined : compileGlob(pattern, { braces: false, floating: true });
    if (glob?.ok) rules.push({ matches: glob.matches, negate, dirOnly });
  }
  return rules;
}

/** Whether the rules hide `path` (relative to the skills root); the last matching rule wins. */
function isIgnored(rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean {
  let ignored = false;
  for (const rule of rules) {
    if ((!rule.dirOnly || isDirectory) && rule.matches(path)) ignored = !rule.negate;
  }
  return ignored;
}

/** The skill a file defines, through Pi's own frontmatter parser; `path` is the file's cwd-relative path. */
function skillOf(
  text: string,
  directoryName: string,
  path: string,
): { ok: true; skill: Skill; hidden: boolean } | { ok: false; reason: C.Reason } {
  const frontmatter = yamlFrontmatter(text)?.frontmatter as Record<string, unknown> | undefined;
  if (!frontmatter) return { ok: false, reason: "skillInvalid" };
  const described = frontmatter.description;
  if (typeof described !== "string" || described.trim() === "") return { ok: false, reason: "skillNoDescription" };
  const name = typeof frontmatter.name === "string" && frontmatter.name !== "" ? frontmatter.name : directoryName;
  const description = described.trim();
  const version = versionOf(`${name}\n${description}\n${path}`);
  return {
    ok: true,
    hidden: frontmatter["disable-model-invocation"] === true,
    skill: { name, description, path, version },
  };
}

function direntKind(dirent: nodeFs.Dirent): "file" | "dir" | "link" | "other" {
  if (dirent.isSymbolicLink()) return "link";
  if (dirent.isDirectory()) return "dir";
  return dirent.isFile() ? "file" : "other";
}

// Rules: `.claude/rules`, `.cursor/rules` and `.github/instructions`, the path-scoped rule files other
// agents read. Each source is an adapter that turns a rule's frontmatter into one of four kinds.
// Matchers are compiled once per rule version. A warm call lstats cwd and the rule folders (their
// listings are cached), passes once over the compiled rules in scope, and stat-checks again only the
// rules that apply, before it delivers them.

// Exported for tests: they table the kinds a rule source reads.
export type RuleKind = keyof typeof C.RULE_KIND_NAMES;

interface RuleMeta {
  kind: RuleKind;
  globs: string[];
  description: string;
  name: string;
}

interface RuleAdapter {
  /** Whether a pattern without a slash matches at any depth (Cursor, Copilot) or only at the base (Claude). */
  floating: boolean;
  read(frontmatter: Record<string, unknown>, fileName: string): RuleMeta;
}

const RULE_ADAPTERS: Record<C.RuleSource, RuleAdapter> = {
  // Claude Code: `paths:`, a list or one string; a rule without it applies everywhere.
  claude: {
    floating: false,
    read: (fm, file) => {
      const globs = globList(fm.paths);
      return { kind: globs.length > 0 ? "glob" : "always", globs, description: "", name: ruleName(file, "claude") };
    },
  },
  // Cursor: `alwaysApply: true`, else `globs:` (a comma-separated string or a list), else `description:`.
  cursor: {
    floating: true,
    read: (fm, file) => {
      const globs = globList(fm.globs);
      const description = stringField(fm.description);
      const kind =
        fm.alwaysApply === true ? "always" : globs.length > 0 ? "glob" : description ? "described" : "manual";
      return { kind, globs, description, name: ruleName(file, "cursor") };
    },
  },
  // Copilot: `applyTo:` (comma-separated); without it a description offers the file, as VS Code does.
  copilot: {
    floating: true,
    read: (fm, file) => {
      const globs = globList(fm.applyTo);
      const description = stringField(fm.description);
      const kind = globs.length > 0 ? "glob" : description ? "described" : "manual";
      return { kind, globs, description, name: stringField(fm.name) || ruleName(file, "copilot") };
    },
  },
};

// Exported for tests: a table test of rule frontmatter.
/** Kind, globs, description and name of a rule file's text, as its source reads them. */
export function readRuleMeta(source: C.RuleSource, text: string, fileName: string): RuleMeta {
  return RULE_ADAPTERS[source].read(ruleFrontmatter(text).frontmatter, fileName);
}

// Exported for tests: a table test of each source's glob semantics.
/** Whether a source's glob matches a path relative to the folder holding the rule folder. */
export function globMatches(source: C.RuleSource, glob: string, path: string): boolean {
  const compiled = ruleGlob([glob], RULE_ADAPTERS[source].floating);
  return compiled.ok && compiled.matches(path);
}

/** A rule's globs as one matcher. `!` exclusions are in none of the three tools' syntax: they match nothing. */
function ruleGlob(globs: readonly string[], floating: boolean): ReturnType<typeof compileGlob> {
  const usable = globs.map((glob) => glob.trim().replace(/^\.\//, "")).filter((glob) => !glob.startsWith("!"));
  return compileGlob(usable, { braces: true, floating });
}

type ParentKind = "none" | "dir" | "link";

/** What an lstat, or a listing's entry (which carries what lstat says of its type), finds. */
function kindOfEntry(entry: nodeFs.Stats | nodeFs.Dirent | undefined): ParentKind {
  if (!entry) return "none";
  return entry.isSymbolicLink() ? "link" : entry.isDirectory() ? "dir" : "none";
}

function ruleName(fileName: string, source: C.RuleSource): string {
  const suffix = C.RULE_FILE_SUFFIXES[source].find((candidate) => fileName.endsWith(candidate)) ?? "";
  return fileName.slice(0, fileName.length - suffix.length);
}

function isRuleFileName(name: string, source: C.RuleSource): boolean {
  return !name.startsWith(".") && C.RULE_FILE_SUFFIXES[source].some((s) => name.endsWith(s) && name.length > s.length);
}

function stringField(value: unknown): string {
  return typeof value === "string" ? value.trim() : "";
}

/** A frontmatter glob value: a list, or one string cut at commas outside braces and brackets. */
function globList(value: unknown): string[] {
  const items = Array.isArray(value) ? value : [value];
  return items.flatMap((item) => (typeof item === "string" ? splitGlobList(item) : []));
}

// Exported for tests: a table test of glob lists.
export function splitGlobList(value: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let inClass = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (c === "\\") i++;
    else if (inClass) inClass = c !== "]";
    else if (c === "[") inClass = true;
    else if (c === "{") depth++;
    else if (c === "}" && depth > 0) depth--;
    else if (c === "," && depth === 0) {
      parts.push(value.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(value.slice(start));
  return parts.map((part) => part.trim()).filter((part) => part !== "");
}

/**
 * A rule's frontmatter, by Pi's parser. Hand-written rule files often hold frontmatter that is not
 * valid YAML (`globs: *.ts` reads as an alias), so then plain `key: value` lines and `- item` lists
 * are read instead, as the tools themselves do.
 */
function ruleFrontmatter(text: string): { frontmatter: Record<string, unknown>; body: string } {
  const parsed = yamlFrontmatter(text);
  if (!parsed) return looseFrontmatter(text);
  const { frontmatter, body } = parsed;
  const plain = typeof frontmatter === "object" && frontmatter !== null && !Array.isArray(frontmatter);
  return { frontmatter: plain ? (frontmatter as Record<string, unknown>) : {}, body };
}

function looseFrontmatter(text: string): { frontmatter: Record<string, unknown>; body: string } {
  const end = text.startsWith("---") ? text.indexOf("\n---", 3) : -1;
  if (end === -1) return { frontmatter: {}, body: text };
  const frontmatter: Record<string, unknown> = {};
  let list: string[] | undefined;
  for (const line of text.slice(4, end).split("\n")) {
    const item = /^\s*-\s+(.*)$/.exec(line);
    if (item && list) {
      list.push(unquote(item[1]!));
      continue;
    }
    const pair = /^([A-Za-z_][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (!pair) continue;
    const value = pair[2]!.trim();
    list = value === "" ? [] : undefined;
    frontmatter[pair[1]!] = list ?? (value === "true" ? true : value === "false" ? false : unquote(value));
  }
  return { frontmatter, body: text.slice(end + 4).trim() };
}

function unquote(value: string): string {
  const text = value.trim();
  return /^(["']).*\1$/.test(text) ? text.slice(1, -1) : text;
}

/** The globs as the model is shown them, from cwd; a rule without globs covers its base. */
function ruleScope(meta: RuleMeta, base: string, floating: boolean): string {
  if (meta.kind !== "glob") return base === "" ? "**" : `${base}/**`;
  if (base === "") return meta.globs.join(", ");
  const fromBase = (glob: string) => {
    const plain = glob.replace(/^\.?\/+/, "");
    return floating && !glob.startsWith("/") && !plain.includes("/") ? `${base}/**/${plain}` : `${base}/${plain}`;
  };
  return meta.globs.map(fromBase).join(", ");
}

interface Rule {
  source: C.RuleSource;
  /** cwd-relative path of the file's real location: its identity in the ledger. */
  path: string;
  /** Absolute path as listed; stat-checked again before the rule is delivered. */
  candidate: string;
  /** cwd-relative folder its globs are relative to ("" for cwd). */
  base: string;
  /** cwd-relative rule folder. */
  dir: string;
  meta: RuleMeta;
  /** The scope the model is shown. */
  scope: string;
  matches?: (path: string) => boolean;
  /** Why its globs do not compile: the rule is refused with this reason. */
  refused?: C.Reason;
  loaded: InstructionFile;
  /** What is delivered: the text without its frontmatter. */
  body: InstructionFile;
  /** Version of a description-only rule's listing. */
  listingVersion: string;
}

interface RulePlace {
  source: C.RuleSource;
  base: string;
  /** Absolute paths of the rule folder's parent (`.cursor`) and of the rule folder, as written. */
  parentDir: string;
  ruleDir: string;
  parentScope: string;
  /** cwd-relative rule folder. */
  display: string;
  /** A folder with no rules, for a place whose folder is gone. */
  empty: RuleFolder;
}

interface RuleFolder {
  place: RulePlace;
  /** Listings the rules were read from; the folder is read again when one of them changes. */
  listings: ListingEntry[];
  rules: Rule[];
  rejected: Rejection[];
  /** Paths of its rules that are not manual, built once per version of the folder's rules. */
  offered?: Set<string>;
}

function ruleMatches(rule: Rule, path: string): boolean {
  if (rule.matches === undefined || path === "") return false;
  if (rule.base === "") return rule.matches(path);
  const below = path.length > rule.base.length && path.startsWith(rule.base) && path[rule.base.length] === "/";
  return below && rule.matches(path.slice(rule.base.length + 1));
}

function ruleApplies(rule: Rule, touched: readonly string[]): boolean {
  if (rule.meta.kind === "manual") return false;
  return rule.meta.kind !== "glob" || touched.some((path) => ruleMatches(rule, path));
}

function rulePlace(ctx: Discovery, source: C.RuleSource, base: string): RulePlace {
  const [parent, child] = C.RULE_DIRS[source];
  const parentScope = base === "" ? parent : `${base}/${parent}`;
  const display = `${parentScope}/${child}`;
  const parentDir = join(ctx.cwdReal, parentScope);
  const ruleDir = join(parentDir, child);
  const place: RulePlace = { source, base, parentDir, ruleDir, parentScope, display, empty: undefined as never };
  place.empty = { place, listings: [], rules: [], rejected: [] };
  return place;
}

/** cwd's places, then the `.cursor/rules` of each viewed folder that holds or held one. */
function rulePlaces(ctx: Discovery, views: DirectoryView[], sources: ReadonlySet<C.RuleSource>): RulePlace[] {
  const places = ctx.rootRulePlaces.filter((place) => sources.has(place.source));
  if (!sources.has("cursor")) return places;
  for (const view of views) {
    let place = ctx.rulePlaces.get(view.scope);
    if (!place && ctx.ruleParentKind(view.scope) !== "none") {
      ctx.rulePlaces.set(view.scope, (place = rulePlace(ctx, "cursor", view.scope)));
    }
    if (place) places.push(place);
  }
  return places;
}

/** The rule folders that govern these views; folders git has not answered for yet wait. */
function ruleFoldersFor(ctx: Discovery, views: DirectoryView[], sources: ReadonlySet<C.RuleSource>): RuleFolder[] {
  const folders: RuleFolder[] = [];
  const rootKinds = rootRuleParentKinds(ctx);
  for (const place of rulePlaces(ctx, views, sources)) {
    const ignored = ruleFolderRefusal(ctx, place);
    if (ignored === "held") continue;
    if (ignored !== undefined) {
      ctx.ignoredSeen.set(place.display, ignored);
      continue;
    }
    const kind = place.base === "" ? rootKinds.get(place.source)! : ctx.ruleParentKind(place.base);
    folders.push(ruleFolder(ctx, place, kind));
  }
  return folders;
}

/** Why a rule folder is not read; "held" while git has to answer for it. */
function ruleFolderRefusal(ctx: Discovery, place: RulePlace): C.Reason | "held" | undefined {
  const [parent, child] = C.RULE_DIRS[place.source];
  if (ctx.options.ignoredDirs.has(parent) || ctx.options.ignoredDirs.has(child)) return "ignoredDir";
  // Git is asked about the folder's parent (`.cursor`, `.claude`, `.github`), never below it:
  // git gives up on a path beyond a link.
  return gitRefusal(ctx, place.parentScope.split("/"), true);
}

/** What `.claude`, `.cursor` and `.github` are in cwd: one lstat of cwd while it stands. */
function rootRuleParentKinds(ctx: Discovery): Map<C.RuleSource, ParentKind> {
  const stats = ctx.fs.lstat(ctx.cwdReal);
  const build = () => {
    const kinds = new Map<C.RuleSource, ParentKind>();
    for (const source of C.RULE_SOURCES)
      kinds.set(source, kindOfEntry(ctx.fs.lstat(join(ctx.cwdReal, C.RULE_DIRS[source][0]))));
    return kinds;
  };
  return stats ? ctx.rootRuleParents.get(ctx.cwdReal, stats, build) : build();
}

function ruleFolder(ctx: Discovery, place: RulePlace, parentKind: ParentKind): RuleFolder {
  // A parent that is a link must resolve inside cwd before anything below it is listed.
  let ruleDir: string | undefined = place.ruleDir;
  if (parentKind === "link") {
    const parentDir = ctx.sourceFolder(place.parentDir, place.base);
    if (parentDir === undefined) ctx.ignoredSeen.set(place.display, "symlinkEscape");
    ruleDir = parentDir === undefined ? undefined : join(parentDir, C.RULE_DIRS[place.source][1]);
  }
  if (parentKind === "none" || ruleDir === undefined) {
    ctx.ruleFolders.delete(place.display);
    return place.empty;
  }
  const found: Array<{ dir: string; listing: ListingEntry }> = [];
  walkRuleFolder(ctx, ruleDir, 0, found);
  const known = ctx.ruleFolders.get(place.display);
  const same =
    known !== undefined &&
    known.listings.length === found.length &&
    found.every((entry, index) => entry.listing === known.listings[index]);
  if (same) return known;
  const folder = readRuleFolder(ctx, place, found);
  ctx.ruleFolders.set(place.display, folder);
  return folder;
}

function walkRuleFolder(
  ctx: Discovery,
  dir: string,
  depth: number,
  found: Array<{ dir: string; listing: ListingEntry }>,
): void {
  const listing = ctx.listing(dir);
  if (!listing) return;
  found.push({ dir, listing });
  if (depth >= C.MAX_RULE_DEPTH) return;
  for (const entry of sortedNames(listing)) {
    if (entry.kind !== "dir" || entry.name.startsWith(".") || ctx.options.ignoredDirs.has(entry.name)) continue;
    walkRuleFolder(ctx, join(dir, entry.name), depth + 1, found);
  }
}

function readRuleFolder(
  ctx: Discovery,
  place: RulePlace,
  found: Array<{ dir: string; listing: ListingEntry }>,
): RuleFolder {
  const folder: RuleFolder = { place, listings: found.map((entry) => entry.listing), rules: [], rejected: [] };
  for (const { dir, listing } of found) {
    if (listing.capped) folder.rejected.push(scanCap(ctx, dir, listing));
    for (const entry of sortedNames(listing)) {
      if ((entry.kind !== "file" && entry.kind !== "link") || !isRuleFileName(entry.name, place.source)) continue;
      const candidate = join(dir, entry.name);
      const file = ctx.sourceFile(candidate, place.base);
      const rule = "reason" in file ? undefined : compileRule(ctx, place, candidate, file);
      const reason = "reason" in file ? file.reason : rule?.refused;
      if (rule && reason === undefined) folder.rules.push(rule);
      // A rule that waits for git: the folder is read again at the next call.
      else if (reason === "held") folder.listings = [];
      else if (reason !== undefined && reason !== "skip") {
        folder.rejected.push({ path: toDisplayPath(ctx.cwdReal, candidate), reason, kind: "instruction" });
      }
    }
  }
  return folder;
}

/** The rule a file version defines, compiled once per version. */
function compileRule(ctx: Discovery, place: RulePlace, candidate: string, file: InstructionFile): Rule {
  const cached = ctx.compiledRules.get(candidate);
  if (cached && cached.loaded === file && cached.dir === place.display) return cached;
  const adapter = RULE_ADAPTERS[place.source];
  const { frontmatter, body } = ruleFrontmatter(file.text);
  const meta = adapter.read(frontmatter, basename(candidate));
  const glob = meta.kind === "glob" ? ruleGlob(meta.globs, adapter.floating) : undefined;
  const rule: Rule = {
    source: place.source,
    path: file.path,
    candidate,
    base: place.base,
    dir: place.display,
    meta,
    scope: ruleScope(meta, place.base, adapter.floating),
    ...(glob?.ok === true && { matches: glob.matches }),
    ...(glob?.ok === false && { refused: glob.reason }),
    loaded: file,
    body: { ...file, text: body, bytes: Buffer.byteLength(body) },
    listingVersion: versionOf(`${meta.name}\n${meta.description}\n${file.path}`),
  };
  ctx.compiledRules.set(candidate, rule);
  return rule;
}

/** The rules that apply to these paths, each stat-checked again: one pass over the compiled rules. */
function applyingRules(ctx: Discovery, folders: RuleFolder[], touched: readonly string[]): Rule[] {
  const rules: Rule[] = [];
  for (const folder of folders) {
    for (let index = 0; index < folder.rules.length; index++) {
      if (!ruleApplies(folder.rules[index]!, touched)) continue;
      const fresh = refreshRule(ctx, folder, index);
      if (fresh && ruleApplies(fresh, touched)) rules.push(fresh);
    }
  }
  return rules;
}

function refreshRule(ctx: Discovery, folder: RuleFolder, index: number): Rule | undefined {
  const rule = folder.rules[index]!;
  const file = ctx.sourceFile(rule.candidate, folder.place.base);
  if (!("reason" in file) && file === rule.loaded) return rule;
  const fresh = "reason" in file ? undefined : compileRule(ctx, folder.place, rule.candidate, file);
  if (!fresh || fresh.refused) {
    // Gone or refused since the folder was read: read the folder again at the next call.
    folder.listings = [];
    return undefined;
  }
  folder.rules[index] = fresh;
  folder.offered = undefined;
  return fresh;
}

// =============================================================================================
// 6. Caches and the filesystem seam. Every byte the extension touches goes through one of these
// calls, so tests can inject faults and record paths. Synchronous on purpose: the files are small
// and capped, and a handler without awaits cannot interleave with its siblings.

const OPEN_FLAGS = nodeFs.constants.O_RDONLY | (nodeFs.constants.O_NOFOLLOW ?? 0) | (nodeFs.constants.O_NONBLOCK ?? 0);

// Exported for tests: the fault-injecting seam of tests wraps it. stat and lstat give undefined
// when nothing is there.
export const nodeFileSystem = {
  stat: (path: string) => nodeFs.statSync(path, { throwIfNoEntry: false }),
  lstat: (path: string) => nodeFs.lstatSync(path, { throwIfNoEntry: false }),
  realpath: (path: string) => nodeFs.realpathSync.native(path),
  open: (path: string) => nodeFs.openSync(path, OPEN_FLAGS),
  fstat: (fd: number) => nodeFs.fstatSync(fd),
  read: (fd: number, buffer: Uint8Array, offset: number, length: number, position: number) =>
    nodeFs.readSync(fd, buffer, offset, length, position),
  close: (fd: number) => nodeFs.closeSync(fd),
  readdir: (path: string) => nodeFs.readdirSync(path, { withFileTypes: true }),
};

export type FileSystem = typeof nodeFileSystem;

// Reading one file: stat first, bounded read, strict decoding.

type Loaded = { ok: true; text: string; version: string; bytes: number } | { ok: false; reason: C.Reason };

interface Signature {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

function signatureOf(stats: nodeFs.Stats): Signature {
  return { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs };
}

function sameSignature(a: Signature, b: Signature | nodeFs.Stats): boolean {
  return a.ino === b.ino && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs && a.size === b.size && a.dev === b.dev;
}

/**
 * What was built from a path (a folder's names, a file's text), kept while the path's stat
 * signature stands: a warm look costs the stat the caller took anyway, and nothing else.
 */
class SignatureCache<T> {
  private readonly entries = new Map<string, { signature: Signature; value: T }>();

  get size(): number {
    return this.entries.size;
  }

  /** The value for `path` as `stats` shows it; `keep` false leaves a build out (a failure that may pass). */
  get(path: string, stats: nodeFs.Stats, build: () => T, keep: (value: T) => boolean = () => true): T {
    const cached = this.entries.get(path);
    if (cached && sameSignature(cached.signature, stats)) return cached.value;
    const value = build();
    if (keep(value)) this.entries.set(path, { signature: signatureOf(stats), value });
    else this.entries.delete(path);
    return value;
  }

  /** The value last built for `path`, without a stat: for hints only. */
  peek(path: string): T | undefined {
    return this.entries.get(path)?.value;
  }

  delete(path: string): void {
    this.entries.delete(path);
  }

  /** Drops the entries of paths that are gone, so the cache stays bounded by the tree on disk. */
  sweep(exists: (path: string) => boolean): void {
    for (const path of this.entries.keys()) if (!exists(path)) this.entries.delete(path);
  }
}

/** Reads at most `maxBytes` of a regular file; the file may change between stat and read. */
function readBounded(fs: FileSystem, realPath: string, maxBytes: number): Loaded {
  let fd: number;
  try {
    fd = fs.open(realPath);
  } catch (error) {
    errorCode(error);
    return { ok: false, reason: "unreadable" };
  }
  try {
    const stats = fs.fstat(fd);
    if (!stats.isFile()) return { ok: false, reason: "notRegular" };
    if (stats.size > maxBytes) return { ok: false, reason: "tooLarge" };
    // Sized by the stat, so that one read that stops short past the stat's size is the end; a file
    // that grew since fills it, and the read goes on into a buffer of the cap (bench: 2 reads → 1).
    let buffer = new Uint8Array(stats.size + 1);
    let length = 0;
    for (;;) {
      const count = fs.read(fd, buffer, length, buffer.length - length, length);
      if (count <= 0) break;
      length += count;
      if (length < buffer.length) {
        if (length >= stats.size) break;
        continue;
      }
      if (buffer.length > maxBytes) break;
      const larger = new Uint8Array(maxBytes + 1);
      larger.set(buffer);
      buffer = larger;
    }
    if (length > maxBytes) return { ok: false, reason: "tooLarge" };
    const text = decodeInstructionText(buffer.subarray(0, length));
    if (text === undefined) return { ok: false, reason: "notUtf8" };
    return { ok: true, text, version: versionOf(text), bytes: length };
  } catch (error) {
    errorCode(error);
    return { ok: false, reason: "unreadable" };
  } finally {
    try {
      fs.close(fd);
    } catch (error) {
      errorCode(error); // a failed close loses nothing we read
    }
  }
}

// =============================================================================================
// 7. Git: one long-lived `git check-ignore --stdin` per session answers which folders git ignores.
// It starts with the session, so no tool call ever waits for a spawn, and its answers are cached
// per folder, so a warm call never waits on it at all. Its first question is cwd itself: until
// that is answered git may be absent or cwd outside a work tree; once it is, a helper that dies
// died on the path it was asked (a submodule's inside), which alone stays unknown. It is run so
// that no setting of the repository can start a program: `spawnGit`.

/**
 * Git's answers for one discovery: which folders and import targets git ignores, and the questions
 * its views raised that git has not been asked yet. They start over with the discovery.
 */
class GitAnswers {
  /** Scopes that git ignores (filled by the engine from its git helper); their subtrees too. */
  readonly folders = new Map<string, boolean>();
  /** Import targets that git ignores, by cwd-relative path (filled like `folders`). */
  readonly files = new Map<string, boolean>();
  /** Whether git may still answer; while it may, an import it has not answered for is held back. */
  readonly mayAnswer: () => boolean;
  /** Questions for git that imports raised while views were built: `scope/` for a folder, a file's path. */
  readonly wanted = new Set<string>();

  constructor(mayAnswer: () => boolean) {
    this.mayAnswer = mayAnswer;
  }

  takeWanted(): string[] {
    const wanted = [...this.wanted];
    this.wanted.clear();
    return wanted;
  }

  setAnswer(question: string, ignored: boolean): void {
    if (question.endsWith("/")) this.folders.set(question.slice(0, -1), ignored);
    else this.files.set(question, ignored);
  }
}

// Exported for tests: they hand the engine a git that is slow, absent or dying.
export type SpawnGit = (cwd: string) => ChildProcessWithoutNullStreams;

/**
 * Git runs no program a repository names. check-ignore runs no hooks, filters or pager, but its
 * index read runs `core.fsmonitor`: a command-line setting outranks every config file (the
 * repository's, what it includes, the user's), and empty is off in every git version ("false" is
 * a hook path before 2.36). A partial clone's missing `.gitignore` blob would be fetched through
 * the repository's remote (an `ext::` command, `core.sshCommand`): no lazy fetch, and an empty
 * GIT_ALLOW_PROTOCOL forbids every transport whatever `protocol.*.allow` says. No optional locks:
 * git never writes the index. The user's global and system config stay, for `core.excludesFile`.
 */
const GIT_ARGS = ["-c", "core.fsmonitor=", "check-ignore", "--stdin", "-z", "--verbose", "--non-matching"];
const GIT_ENV = {
  GIT_FLUSH: "1",
  GIT_OPTIONAL_LOCKS: "0",
  GIT_NO_LAZY_FETCH: "1",
  GIT_ALLOW_PROTOCOL: "",
  GIT_TERMINAL_PROMPT: "0",
};

const spawnGit: SpawnGit = (cwd) =>
  spawn("git", GIT_ARGS, {
    cwd,
    env: { ...process.env, ...GIT_ENV },
    stdio: ["pipe", "pipe", "pipe"],
  });

/**
 * A cwd-relative question for git ("" is cwd; a folder's ends in `/`). `./` keeps a name that starts
 * with `:` from being read as pathspec magic (check-ignore refuses both `:(literal)` and
 * GIT_LITERAL_PATHSPECS). The slash is dropped so that git stats the folder itself: `generated/*`
 * then does not match `generated`, and a `!generated/keep/` re-include is reported as the negation it is.
 */
function gitQuestion(path: string): string {
  return `./${withoutSlash(path)}\0`;
}

function withoutSlash(path: string): string {
  return path.endsWith("/") ? path.slice(0, -1) : path;
}

interface GitWaiter {
  path: string;
  /** The rule that matched (source, line, pattern), "" for none, undefined when git could not say. */
  answer: (rule: string | undefined) => void;
}

class GitIgnoreOracle {
  private child?: ChildProcessWithoutNullStreams;
  private off = false;
  /** Git answered for cwd itself: it works here. */
  private usable = false;
  /** The rule that ignores cwd itself: it ignores everything below, so it tells nothing. */
  private cwdRule?: string;
  private buffer = "";
  private waiters: GitWaiter[] = [];
  /** Scopes git failed on; their subtrees are not asked again. */
  private readonly failed = new Set<string>();
  readonly cwdReal: string;
  private readonly spawnGit: SpawnGit;

  constructor(cwdReal: string, spawner: SpawnGit = spawnGit) {
    this.cwdReal = cwdReal;
    this.spawnGit = spawner;
  }

  /** Whether git may still answer: false once it is gone for the session (absent, no repository). */
  get available(): boolean {
    return !this.off;
  }

  start(): void {
    if (this.child || this.off) return;
    try {
      const child = this.spawnGit(this.cwdReal);
      this.child = child;
      // The helper must never keep Pi (or a print-mode run) alive on its own.
      child.unref();
      for (const stream of [child.stdin, child.stdout, child.stderr] as Array<{ unref?: () => void }>) stream.unref?.();
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (chunk: string) => this.onData(chunk));
      child.stderr.resume();
      // 'close' follows every end, a failed spawn included, once stdout has been read to its end.
      child.on("error", () => {});
      child.on("close", () => this.onClose(child));
      child.stdin.on("error", () => {});
    } catch (error) {
      errorCode(error); // git cannot be started: no answers, nothing ignored by git
      this.stop();
      return;
    }
    if (!this.usable) this.send({ path: "", answer: (rule) => this.learnCwd(rule) });
  }

  /** Whether git ignores each cwd-relative path (a folder's ends in `/`); false for all without git. */
  async ask(paths: string[]): Promise<boolean[]> {
    this.start();
    if (this.off) return paths.map(() => false);
    const answers = paths.map((path) =>
      this.failedAt(path)
        ? false
        : new Promise<boolean>((resolve) => this.send({ path, answer: (rule) => resolve(this.ignores(rule)) })),
    );
    const timer = setTimeout(() => this.stop(), C.GIT_ANSWER_TIMEOUT_MS);
    try {
      return await Promise.all(answers);
    } finally {
      clearTimeout(timer);
    }
  }

  private send(waiter: GitWaiter): void {
    this.waiters.push(waiter);
    try {
      this.child?.stdin.write(gitQuestion(waiter.path));
    } catch (error) {
      errorCode(error);
      // A helper that cannot take the question has died: its close answers the waiters.
    }
  }

  private learnCwd(rule: string | undefined): void {
    this.usable = true;
    if (rule) this.cwdRule = rule;
  }

  /** Only a rule about the folder itself counts, not the one that ignores cwd and all below. */
  private ignores(rule: string | undefined): boolean {
    return rule !== undefined && rule !== "" && rule !== this.cwdRule;
  }

  private failedAt(path: string): boolean {
    if (this.failed.size === 0) return false;
    for (let at = withoutSlash(path); at !== ""; at = at.slice(0, Math.max(0, at.lastIndexOf("/")))) {
      if (this.failed.has(at)) return true;
    }
    return false;
  }

  /** Records are four NUL-terminated fields: source, line, pattern, path. */
  private onData(chunk: string): void {
    this.buffer += chunk;
    for (;;) {
      const fields: string[] = [];
      let start = 0;
      for (let i = 0; i < 4; i++) {
        const end = this.buffer.indexOf("\0", start);
        if (end === -1) return;
        fields.push(this.buffer.slice(start, end));
        start = end + 1;
      }
      this.buffer = this.buffer.slice(start);
      const [source, line, pattern] = fields as [string, string, string];
      const rule = pattern === "" || pattern.startsWith("!") ? "" : `${source}\0${line}\0${pattern}`;
      this.waiters.shift()?.answer(rule);
    }
  }

  /**
   * The helper ended. Before it answered for cwd, git does not work here: off for the session.
   * After, the first unanswered path is the one it died on: unknown (counted as not ignored),
   * and a new helper takes the questions after it.
   */
  private onClose(child: ChildProcessWithoutNullStreams): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.buffer = "";
    if (!this.usable || this.off) {
      this.stop();
      return;
    }
    const [culprit, ...rest] = this.waiters.splice(0);
    if (!culprit) return;
    this.failed.add(withoutSlash(culprit.path));
    culprit.answer(undefined);
    if (rest.length === 0) return;
    this.start();
    for (const waiter of rest) {
      if (this.failedAt(waiter.path)) waiter.answer(undefined);
      else this.send(waiter);
    }
  }

  stop(): void {
    this.off = true;
    for (const waiter of this.waiters.splice(0)) waiter.answer(undefined);
    const child = this.child;
    this.child = undefined;
    if (!child) return;
    try {
      child.stdin.end();
      child.kill();
    } catch (error) {
      errorCode(error);
      // Already gone.
    }
  }
}

// =============================================================================================
// 8. Settings: the defaults of config.ts, which settings may override.

// Exported for tests: they compare settings with the defaults, and build settings from them.
export type Options = ReturnType<typeof defaultOptions>;

export function defaultOptions() {
  return {
    enabled: true,
    fileNames: C.INSTRUCTION_FILE_NAMES,
    triggers: new Set(C.TRIGGER_TOOLS) as ReadonlySet<string>,
    ignoredDirs: new Set(C.IGNORED_DIR_NAMES) as ReadonlySet<string>,
    maxFileBytes: C.MAX_FILE_BYTES,
    budgetBytes: C.REMINDER_BUDGET_BYTES,
    skills: true,
    imports: true,
    gateWrites: false,
    rules: true,
    ruleSources: new Set(C.RULE_SOURCES) as ReadonlySet<C.RuleSource>,
    checks: true,
  };
}

// Settings: `lazyAgents` in Pi's settings.json files, as `pi.getSettings()` merges them (project
// over global, key by key; Pi leaves an untrusted project's settings out). Every value is checked;
// a bad one keeps its default and earns one fixed warning that names only our own key.

/** Exported for the test that holds schema.json to the same keys. */
export const SETTING_KEYS = [
  "enabled",
  "fileNames",
  "ignoreDirs",
  "maxFileBytes",
  "reminderBudgetBytes",
  "triggers",
  "skills",
  "imports",
  "gateWrites",
  "rules",
  "ruleSources",
  "checks",
] as const;

type SettingKey = (typeof SETTING_KEYS)[number];

const ALL_TRIGGERS: ReadonlySet<string> = new Set([...C.TRIGGER_TOOLS, ...C.OPTIONAL_TRIGGER_TOOLS]);

function isPlainName(value: unknown): value is string {
  return (
    typeof value === "string" &&
    value !== "" &&
    value !== "." &&
    value !== ".." &&
    value.length <= 255 &&
    !/[/\\\0]/.test(value)
  );
}

function isNameList(value: unknown, allowEmpty: boolean): value is string[] {
  return (
    Array.isArray(value) &&
    (allowEmpty || value.length > 0) &&
    value.length <= 64 &&
    value.every(isPlainName) &&
    new Set(value).size === value.length
  );
}

function isByteCount(value: unknown, min: number, max: number): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
}

/** Names the settings file a `lazyAgents` key came from (the whole object when `key` is undefined). */
type SettingsOrigin = (key?: string) => string;

// Exported for tests: a table test of settings validation.
/**
 * Applies the `lazyAgents` settings object over the defaults of config.ts. Each warning names the
 * key and the file it came from, and the allowed values; never a value from the file.
 */
export function optionsFromSettings(
  raw: unknown,
  origin: SettingsOrigin = () => C.GLOBAL_SETTINGS_LABEL,
): { options: Options; warnings: string[] } {
  const options = defaultOptions();
  const warnings: string[] = [];
  if (raw === undefined) return { options, warnings };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { options, warnings: [C.SETTINGS_WARNINGS.notObject(origin())] };
  }
  const bad = (key: SettingKey, expected: string) =>
    warnings.push(C.SETTINGS_WARNINGS.badValue(key, origin(key), expected));
  const settings = raw as Record<string, unknown>;
  for (const key of Object.keys(settings)) {
    if (!(SETTING_KEYS as readonly string[]).includes(key)) warnings.push(unknownKeyWarning(key, origin(key)));
  }
  for (const key of ["enabled", "skills", "imports", "gateWrites", "rules", "checks"] as const) {
    if (settings[key] === undefined) continue;
    if (typeof settings[key] === "boolean") options[key] = settings[key];
    else bad(key, C.SETTING_EXPECTED.boolean);
  }
  if (settings.fileNames !== undefined) {
    if (isNameList(settings.fileNames, false)) options.fileNames = settings.fileNames;
    else bad("fileNames", C.SETTING_EXPECTED.fileNames);
  }
  if (settings.ignoreDirs !== undefined) {
    if (isNameList(settings.ignoreDirs, true)) options.ignoredDirs = new Set(settings.ignoreDirs);
    else bad("ignoreDirs", C.SETTING_EXPECTED.ignoreDirs);
  }
  if (settings.maxFileBytes !== undefined) {
    if (isByteCount(settings.maxFileBytes, 1, C.MAX_SETTING_BYTES)) options.maxFileBytes = settings.maxFileBytes;
    else bad("maxFileBytes", C.SETTING_EXPECTED.bytes(1, C.MAX_SETTING_BYTES));
  }
  if (settings.reminderBudgetBytes !== undefined) {
    if (isByteCount(settings.reminderBudgetBytes, C.MIN_SETTING_BUDGET_BYTES, C.MAX_SETTING_BYTES))
      options.budgetBytes = settings.reminderBudgetBytes;
    else bad("reminderBudgetBytes", C.SETTING_EXPECTED.bytes(C.MIN_SETTING_BUDGET_BYTES, C.MAX_SETTING_BYTES));
  }
  if (settings.triggers !== undefined) {
    const triggers = settings.triggers;
    if (Array.isArray(triggers) && triggers.every((t) => typeof t === "string" && ALL_TRIGGERS.has(t))) {
      options.triggers = new Set(triggers as string[]);
    } else {
      bad("triggers", C.SETTING_EXPECTED.triggers([...ALL_TRIGGERS]));
    }
  }
  if (settings.ruleSources !== undefined) {
    const sources = ruleSourcesOf(settings.ruleSources);
    if (sources) options.ruleSources = sources;
    else bad("ruleSources", C.SETTING_EXPECTED.ruleSources(C.RULE_SOURCES));
  }
  return { options, warnings };
}

function unknownKeyWarning(key: string, where: string): string {
  if (!C.SHOWN_KEY_PATTERN.test(key)) return C.SETTINGS_WARNINGS.unnamedKey(where);
  return C.SETTINGS_WARNINGS.unknownKey(key, where, nearestSettingKey(key));
}

/** The setting a typo most likely meant: same letters in another case, a close spelling, or a part of its name. */
function nearestSettingKey(typed: string): string | undefined {
  const lower = typed.toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const key of SETTING_KEYS) {
    const candidate = key.toLowerCase();
    const distance =
      candidate === lower ? 0 : lower.length >= 4 && candidate.includes(lower) ? 1 : editDistance(lower, candidate);
    if (distance <= Math.max(2, Math.floor(candidate.length / 4)) && (!best || distance < best.distance)) {
      best = { key, distance };
    }
  }
  return best?.key;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * Which file each `lazyAgents` key came from. Pi gives an extension only the merged settings, so
 * the project's own `.pi/settings.json` (inside cwd, read like any other file) is asked which keys
 * it sets; Pi lets the project win key by key, so every other key is the global file's. A project
 * file that is there but does not parse leaves it open: Pi keeps the settings it read last.
 */
function settingsOrigin(fs: FileSystem, cwd: string, trusted: boolean): SettingsOrigin {
  const globalLabel =
    resolve(getAgentDir()) === join(homedir(), CONFIG_DIR_NAME, "agent")
      ? C.GLOBAL_SETTINGS_LABEL
      : C.CUSTOM_GLOBAL_SETTINGS_LABEL;
  const project = trusted ? projectSettingsSection(fs, cwd) : undefined;
  if (project === UNPARSED) return () => C.eitherSettingsLabel(globalLabel);
  const sets = (key?: string) =>
    key === undefined || (typeof project === "object" && project !== null && Object.hasOwn(project, key));
  return (key) => (project !== undefined && sets(key) ? C.PROJECT_SETTINGS_LABEL : globalLabel);
}

const UNPARSED = Symbol("unparsed");

/** The project's `lazyAgents` value: undefined when the project has no such file or key, UNPARSED when it cannot tell. */
function projectSettingsSection(fs: FileSystem, cwd: string): unknown {
  let loaded: Loaded;
  try {
    const cwdReal = fs.realpath(cwd);
    const real = fs.realpath(join(cwdReal, CONFIG_DIR_NAME, "settings.json"));
    if (!isPathInside(cwdReal, real)) return UNPARSED;
    loaded = readBounded(fs, real, C.MAX_SETTING_BYTES);
  } catch (error) {
    return C.SETTLED_ERROR_CODES.has(errorCode(error)) ? undefined : UNPARSED;
  }
  if (!loaded.ok) return UNPARSED;
  // Pi reads an empty file as no settings.
  if (loaded.text.trim() === "") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(loaded.text);
  } catch (error) {
    if (error instanceof SyntaxError) return UNPARSED;
    throw error;
  }
  return typeof parsed === "object" && parsed !== null
    ? (parsed as Record<string, unknown>)[C.SETTINGS_KEY]
    : undefined;
}

/** True when two option sets would discover differently (the caches depend on these). */
function discoveryChanged(a: Options, b: Options): boolean {
  return (
    a.fileNames.join("\0") !== b.fileNames.join("\0") ||
    [...a.ignoredDirs].sort().join("\0") !== [...b.ignoredDirs].sort().join("\0") ||
    a.maxFileBytes !== b.maxFileBytes ||
    a.imports !== b.imports
  );
}

// =============================================================================================
// 9. The /lazy-agents report: what the session has seen, kept per scope and replaced at each view,
// and `why <path>` / `why "<command>"`. Never file contents.

/** A `why` argument wrapped in quotes is a bash command; a bare one is a path (which may hold spaces). */
function quotedCommand(argument: string): string | undefined {
  const text = argument.trim();
  const quote = text[0];
  if ((quote !== '"' && quote !== "'") || text.length < 2 || text.at(-1) !== quote) return undefined;
  return text.slice(1, -1);
}

/** `/lazy-agents why "<command>"`: which words activated which scopes, and why the others did not. */
async function explainCommand(engine: LazyAgents, command: string, env: CallEnvironment): Promise<string> {
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return C.REPORT_NO_CWD;
  const commands = readShellCommand(command);
  const outcomes = locateShellWords(discovery, commands, env.cwd);
  const chains = shellChains(outcomes);
  const withSkills = env.trusted && engine.options.skills;
  await engine.settled(chains, withSkills);
  const viewed = new Map<string, DirectoryView[]>();
  for (const located of chains) {
    const views = viewChain(discovery, located, withSkills);
    engine.inspection.record(views);
    viewed.set(located.links.at(-1)!.scope, views);
  }
  // One line per activated scope, naming the words that activate it; one line for every word ignored.
  const activated = new Map<string, { label: string; words: string[] }>();
  const ignored: string[] = [];
  for (const outcome of outcomes) {
    const word = outcome.use.word;
    if (!outcome.located) {
      ignored.push(`${word} (${C.SHELL_WORD_REASONS[outcome.reason ?? "missing"]})`);
      continue;
    }
    const links = outcome.located.links;
    const views = viewed.get(links.at(-1)!.scope) ?? [];
    if (views.length < links.length)
      ignored.push(`${word} (${links[views.length]!.scope}/: ${C.SHELL_WORD_REASONS.ignored})`);
    const role = outcome.use.role === "write" ? C.REPORT_TEXT.writtenActivates : C.REPORT_TEXT.activates;
    for (const link of links.slice(0, views.length)) {
      const view = views.find((candidate) => candidate.scope === link.scope);
      const file = view?.file
        ? `${view.file.path}, ${fileState(engine.ledger, view.file)}`
        : C.REPORT_TEXT.noInstructionFile;
      const entry = activated.get(link.scope) ?? { label: `${scopeGlob(link.scope)} (${file})`, words: [] };
      entry.words.push(`${word} ${role}`);
      activated.set(link.scope, entry);
    }
  }
  const lines = [`pi-lazy-agents: why ${JSON.stringify(command)}`];
  if (commands.length === 0) lines.push(C.REPORT_TEXT.noCommandWords);
  for (const { label, words } of activated.values()) lines.push(`  ${label}: ${[...new Set(words)].join(", ")}`);
  if (ignored.length > 0) lines.push(`  ${C.REPORT_TEXT.ignoredWords} ${ignored.join(", ")}`);
  if (!engine.options.triggers.has("bash")) lines.push(C.REPORT_TEXT.bashNotTrigger);
  return lines.map(oneLine).join("\n");
}

// Inspection: what the session has seen. Kept per scope and replaced at each view, so it is bounded
// by the folders visited and always shows their latest state.

type SeenFile = Pick<FileRecord, "path" | "scope" | "bytes" | "version" | "importedBy">;

class Inspection {
  /** The latest view of each folder a call looked at; reports are built from it on demand. */
  readonly views = new Map<string, DirectoryView>();

  record(views: DirectoryView[]): void {
    for (const view of views) this.views.set(view.scope, view);
  }

  /** Forgets folders that `keep` rejects. */
  prune(keep: (scope: string) => boolean): void {
    for (const scope of this.views.keys()) if (!keep(scope)) this.views.delete(scope);
  }

  clear(): void {
    this.views.clear();
  }

  sizes(): Record<string, number> {
    return { inspectedScopes: this.views.size };
  }

  files(): SeenFile[] {
    const seen = ({ path, bytes, version }: InstructionFile, scope: string) => ({ path, scope, bytes, version });
    return [...this.views.values()].flatMap((view) => [
      ...(view.file ? [seen(view.file, view.scope)] : []),
      ...view.imports.map(({ file, importedBy }) => ({ ...seen(file, view.scope), importedBy })),
    ]);
  }

  skills(): Array<Skill & { scope: string }> {
    return [...this.views.values()].flatMap((view) => view.skills.map((skill) => ({ ...skill, scope: view.scope })));
  }

  /** Refused candidates, plus skills that a deeper folder redefines. */
  notUsed(): Rejection[] {
    const skills = this.skills();
    const shadowed = skills
      .filter((outer) =>
        skills.some((inner) => inner.name === outer.name && isPathInside(`/${outer.scope}`, `/${inner.scope}`)),
      )
      .map((skill): Rejection => ({ path: skill.path, reason: "skillShadowed", kind: "skill" }));
    return [...[...this.views.values()].flatMap((view) => view.rejected), ...shadowed];
  }
}

/** The state of a file or rule text the ledger may hold, against the version on disk. */
function heldState(
  held: { version: string; truncated?: boolean; via?: string } | undefined,
  retracted: boolean,
  version: string,
): string {
  if (!held) return retracted ? C.REPORT_STATES.retracted : C.REPORT_STATES.pending;
  if (held.version !== version) return C.REPORT_STATES.changed;
  if (held.truncated) return C.REPORT_STATES.truncated;
  return held.via === "read" ? C.REPORT_STATES.readByModel : C.REPORT_STATES.delivered;
}

function fileState(ledger: Ledger, file: { path: string; version: string }): string {
  return heldState(ledger.get("file", file.path), ledger.wasWithdrawn("file", file.path), file.version);
}

function formatBytes(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/**
 * What the report lists: what this run looked at, then what the ledger holds that it has not looked
 * at yet (delivered before a resume), so the list and the closing count agree.
 */
function seenThenHeld<T extends { path: string }>(seen: T[], held: Iterable<T>): T[] {
  const seenPaths = new Set(seen.map((item) => item.path));
  return [...seen, ...[...held].filter((item) => !seenPaths.has(item.path))];
}

/** Rows as columns: each cell padded to its column's widest, two spaces apart, indented by two. */
function aligned(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, index) => (widths[index] = Math.max(widths[index] ?? 0, cell.length)));
  return rows.map((row) =>
    `  ${row.map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index]!))).join("  ")}`.trimEnd(),
  );
}

/** A heading with its count and its aligned rows; nothing at all for no rows. */
function reportSection(heading: string, rows: string[][]): string[] {
  return rows.length === 0 ? [] : ["", `${heading} (${rows.length}):`, ...aligned(rows)];
}

/** The `/lazy-agents` report: paths, scopes, sizes, states and reasons (versions when verbose); never file contents. */
function formatInspection(engine: LazyAgents, verbose = false): string {
  const { ledger, inspection } = engine;
  const files: SeenFile[] = seenThenHeld(inspection.files(), ledger.all("file"));
  const seenPaths = new Set(files.map((file) => file.path));
  const skills = seenThenHeld<Pick<Skill, "name" | "path" | "version"> & { scope: string }>(
    inspection.skills(),
    ledger.all("skill"),
  );
  const rules = reportedRules(engine);
  const notUsed: Array<Pick<Rejection, "path" | "reason" | "counts">> = [
    ...[...(engine.discovery?.ignoredSeen ?? new Map<string, C.Reason>())].map(([path, reason]) => ({ path, reason })),
    ...inspection.notUsed(),
    ...rules.rejected,
  ];
  const version = (id: string) => (verbose ? [`version ${id.slice(0, C.REPORT_VERSION_LENGTH)}`] : []);
  const fileRows = files.map((file) => [
    file.path,
    `scope ${scopeGlob(file.scope)}${file.importedBy ? `, imported by ${file.importedBy}` : ""}`,
    formatBytes(file.bytes),
    fileState(ledger, file),
    ...version(file.version),
  ]);
  for (const path of ledger.withdrawnPaths("file"))
    if (!seenPaths.has(path)) fileRows.push([path, "", "", C.REPORT_STATES.retracted]);
  const skillRows = skills.map((skill) => [
    skill.name,
    `scope ${scopeGlob(skill.scope)}`,
    skill.path,
    ledger.get("skill", skill.path)?.version === skill.version ? C.REPORT_STATES.listed : C.REPORT_STATES.pending,
    ...version(skill.version),
  ]);
  const sections = [
    ...reportSection(C.REPORT_TEXT.filesHeading, fileRows),
    ...reportSection(C.REPORT_TEXT.rulesHeading, rules.rows),
    ...reportSection(C.REPORT_TEXT.skillsHeading, skillRows),
    ...reportSection(
      C.REPORT_TEXT.notUsedHeading,
      notUsed.map(({ path, reason, counts }) => [path, C.reasonText(reason, counts)]),
    ),
  ];
  const lines = ["pi-lazy-agents", ...(engine.options.enabled ? [] : [C.REPORT_TEXT.off])];
  if (sections.length + engine.failures.size === 0) {
    return engine.options.enabled ? C.REPORT_NOTHING_SEEN : [...lines, C.REPORT_NOTHING_SEEN].join("\n");
  }
  lines.push(...sections);
  if (engine.failures.size > 0) {
    lines.push("", C.REPORT_TEXT.failuresHeading);
    for (const [label, count] of engine.failures) lines.push(`  ${C.FAILURE_LABELS[label]}: ${count}`);
  }
  lines.push("", C.REPORT_TEXT.deliveredCount(heldCounts(ledger)));
  return lines.map(oneLine).join("\n");
}

/** `/lazy-agents why <path>`: the chain of one path, folder by folder. */
async function explainPath(engine: LazyAgents, rawPath: string, env: CallEnvironment): Promise<string> {
  const shown = rawPath.trim();
  const target = resolveToolPath(shown, env.cwd);
  if (target === undefined) return oneLine(C.REPORT_TEXT.unusablePath(shown));
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return C.REPORT_NO_CWD;
  const isDirectory = mayBeInside(discovery, target) && discovery.fs.stat(target)?.isDirectory() === true;
  const located = locateChain(discovery, target, isDirectory);
  if (located === undefined) return oneLine(C.REPORT_TEXT.outsideCwd(shown));
  await engine.settled([located], env.trusted && engine.options.skills);
  const views = viewChain(discovery, located, env.trusted && engine.options.skills);
  engine.inspection.record(views);
  const rules = explainRules(engine, views, touchedPath(discovery, target, env.cwd));
  // The answer first: what governs the path; then only the folders that add something, and why.
  const governing: string[][] = [];
  for (const view of views) {
    if (view.file) governing.push([view.file.path, fileState(engine.ledger, view.file)]);
    for (const { file } of view.imports) governing.push([file.path, fileState(engine.ledger, file)]);
  }
  governing.push(...rules.governing);
  const lines = [`pi-lazy-agents: why ${shown}`];
  if (located.links.length === 0) lines.push(C.REPORT_TEXT.directlyInCwd);
  lines.push(governing.length > 0 ? C.REPORT_TEXT.governedBy : C.REPORT_TEXT.governedByNothing);
  lines.push(...aligned(governing).map((line) => `  ${line}`));
  const folderLines: string[] = [];
  for (const { scope } of located.links) {
    const view = views.find((candidate) => candidate.scope === scope);
    if (!view) {
      const reason = discovery.ignoredSeen.get(scope);
      folderLines.push(
        `    ${scope}/  ${reason ? C.REASONS[reason] : C.REPORT_TEXT.notReached}: nothing below it is used`,
      );
      if (reason) break;
      continue;
    }
    if (!view.file && view.imports.length + view.skills.length + view.rejected.length === 0) continue;
    const file = view.file
      ? `${view.file.path} (${fileState(engine.ledger, view.file)})`
      : C.REPORT_TEXT.noInstructionFile;
    folderLines.push(`    ${scope}/  scope ${scopeGlob(scope)}: ${file}`);
    for (const { file: imported } of view.imports) {
      folderLines.push(`      imports ${imported.path} (${fileState(engine.ledger, imported)})`);
    }
    for (const skill of view.skills) folderLines.push(`      skill ${skill.name} at ${skill.path}`);
    for (const rejection of view.rejected)
      folderLines.push(`      not used: ${rejection.path}: ${C.reasonText(rejection.reason, rejection.counts)}`);
  }
  if (folderLines.length > 0) lines.push(C.REPORT_TEXT.foldersHeading, ...folderLines);
  lines.push(...rules.lines);
  if (!env.trusted) lines.push(C.REPORT_TEXT.skillsUntrusted);
  return lines.map(oneLine).join("\n");
}

/** Completions for `/lazy-agents`: the `why` word, then paths this session has seen. */
function commandCompletions(engine: LazyAgents, prefix: string): Array<{ value: string; label: string }> | null {
  const words = ["why ", "help", C.VERBOSE_ARGUMENT];
  const paths = [
    ...engine.inspection.files().map((file) => file.path),
    ...[...engine.inspection.views.keys()].map((scope) => `${scope}/`),
  ];
  const candidates = prefix.startsWith("why ") ? paths.map((path) => `why ${path}`) : words;
  const items = [...new Set(candidates)]
    .filter((value) => value.startsWith(prefix))
    .map((value) => ({ value, label: value }));
  return items.length > 0 ? items : null;
}

/** What the model holds, counted one way for the status line, the notification and the report. */
function heldCounts(ledger: Ledger): C.Counts {
  const rules = ledger.all("rule").filter((rule) => rule.as === "text").length;
  return { files: ledger.all("file").length, rules, skills: ledger.all("skill").length };
}

function statusText(ledger: Ledger): string | undefined {
  const counts = heldCounts(ledger);
  return counts.files + counts.rules + counts.skills === 0 ? undefined : C.statusText(counts);
}

/** The paths one turn's reminders loaded, kept apart by kind so the notification counts them as the status does. */
type TurnLoaded = Record<keyof C.Counts, Set<string>>;

function emptyLoaded(): TurnLoaded {
  return { files: new Set(), rules: new Set(), skills: new Set() };
}

function addLoaded(loaded: TurnLoaded, record: LedgerRecord): void {
  for (const file of record.files) if (file.via === "reminder") loaded.files.add(file.path);
  for (const rule of record.rules ?? []) if (rule.as === "text") loaded.rules.add(rule.path);
  for (const skill of record.skills) loaded.skills.add(skill.path);
}

function countsOf(loaded: TurnLoaded): C.Counts {
  return { files: loaded.files.size, rules: loaded.rules.size, skills: loaded.skills.size };
}

function ruleSourcesOf(value: unknown): Set<C.RuleSource> | undefined {
  if (!Array.isArray(value) || new Set(value).size !== value.length) return undefined;
  const known = value.every((source) => (C.RULE_SOURCES as readonly unknown[]).includes(source));
  return known ? new Set(value as C.RuleSource[]) : undefined;
}

function ruleState(ledger: Ledger, rule: Rule): string {
  if (rule.meta.kind === "manual") return C.REPORT_STATES.manual;
  const held = ledger.get("rule", rule.path);
  if (rule.meta.kind === "described")
    return held?.version === rule.listingVersion ? C.REPORT_STATES.listed : C.REPORT_STATES.pending;
  return heldState(held, ledger.wasWithdrawn("rule", rule.path), rule.loaded.version);
}

function ruleRow(ledger: Ledger, rule: Rule): string[] {
  const globs = rule.meta.kind === "glob" ? `globs ${rule.meta.globs.join(", ")}` : "no globs";
  return [rule.path, rule.source, C.RULE_KIND_NAMES[rule.meta.kind], globs, ruleState(ledger, rule)];
}

/** The rules part of `/lazy-agents`: cwd's rule folders and every nested one seen, with states; refused rule files apart. */
function reportedRules(engine: LazyAgents): { rows: string[][]; rejected: Rejection[] } {
  const discovery = engine.discovery;
  if (!engine.options.rules || !discovery) return { rows: [], rejected: [] };
  ruleFoldersFor(discovery, [], engine.options.ruleSources);
  const folders = [...discovery.ruleFolders.values()].filter((folder) =>
    engine.options.ruleSources.has(folder.place.source),
  );
  const rules = folders.flatMap((folder) => folder.rules);
  const rows = rules.map((rule) => ruleRow(engine.ledger, rule));
  const listed = new Set(rules.map((rule) => rule.path));
  for (const path of engine.ledger.withdrawnPaths("rule"))
    if (!listed.has(path)) rows.push([path, "", "", "", C.REPORT_STATES.retracted]);
  return { rows, rejected: folders.flatMap((folder) => folder.rejected) };
}

/** The rules part of `/lazy-agents why <path>`: each rule, and whether and why it applies there. */
function explainRules(
  engine: LazyAgents,
  views: DirectoryView[],
  touched: string | undefined,
): { governing: string[][]; lines: string[] } {
  const discovery = engine.discovery;
  if (!engine.options.rules || !discovery || touched === undefined) return { governing: [], lines: [] };
  const inScope = new Set(ruleFoldersFor(discovery, views, engine.options.ruleSources));
  const lines: string[] = [];
  const governing: string[][] = [];
  for (const folder of discovery.ruleFolders.values()) {
    for (const rule of folder.rules) {
      const why = !engine.options.ruleSources.has(rule.source)
        ? C.RULE_WHY.sourceOff
        : !inScope.has(folder)
          ? C.RULE_WHY.otherFolder
          : rule.meta.kind === "glob"
            ? ruleMatches(rule, touched)
              ? C.RULE_WHY.matches
              : C.RULE_WHY.noMatch
            : C.RULE_WHY[rule.meta.kind];
      lines.push(`  rule ${rule.path} (${rule.source}, scope ${rule.scope}): ${why}`);
      if (why === C.RULE_WHY.matches || why === C.RULE_WHY.always)
        governing.push([rule.path, `${C.REPORT_TEXT.ruleState} ${ruleState(engine.ledger, rule)}`]);
    }
  }
  return { governing, lines: lines.length > 0 ? ["  Rules:", ...lines.map((line) => `  ${line}`)] : lines };
}

// =============================================================================================
// 10. Pure path and text helpers. Containment is `path.relative` plus an exact `..` test on real paths.

// Exported for tests: a table test of containment.
/** True when `child` lies strictly inside `parent`. Both must already be absolute and resolved. */
export function isPathInside(parent: string, child: string): boolean {
  const rel = relativeInside(parent, child);
  return rel !== undefined && rel !== "";
}

function isPathInsideOrSame(parent: string, child: string): boolean {
  return relativeInside(parent, child) !== undefined;
}

/** The one containment test: `child` relative to `parent` ("" for itself), undefined when it lies outside. */
function relativeInside(parent: string, child: string): string | undefined {
  const rel = relative(parent, child);
  return rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel) ? undefined : rel;
}

/** `~` and `~/…` as the tools and the shell expand them; undefined for any other path. */
function expandHome(path: string): string | undefined {
  if (path === "~") return homedir();
  return path.startsWith("~/") ? join(homedir(), path.slice(2)) : undefined;
}

/** cwd-relative path with forward slashes, as shown to the model. */
function toDisplayPath(cwdReal: string, absolute: string): string {
  return relative(cwdReal, absolute).split(sep).join("/");
}

function scopeGlob(scope: string): string {
  return `${scope}/**`;
}

// ignoreBOM keeps a BOM as text, so exactly one is stripped below, as Pi does.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

// Exported for tests: a table test of decoding.
/** Decodes strict UTF-8, drops a BOM and turns CRLF and lone CR into LF; undefined if invalid. */
export function decodeInstructionText(bytes: Uint8Array): string | undefined {
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch (error) {
    if (errorCode(error) !== "ERR_ENCODING_INVALID_ENCODED_DATA") throw error;
    return undefined;
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
}

// Exported for tests: a table test of cuts at character boundaries.
/** The longest prefix of `text` that fits in `maxBytes` of UTF-8, never splitting a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return text;
  let end = Math.max(0, maxBytes);
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString("utf8");
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;

const INLINE_CODE = /(`+)[^`]*?\1/g;

const IMPORT_TOKEN = /(?:^|[\s([])@((?:\.{1,2}\/|[\w-])[^\s)\]`'"<>,;]*)/g;

// Exported for tests: a table test of `@path` tokens.
/** The `@path` tokens of an instruction file, outside fenced blocks and code spans, in order. */
export function importTokens(text: string): string[] {
  // Most instruction files import nothing: no line needs splitting then (bench: 7% of a cold call).
  if (!text.includes("@")) return [];
  const tokens: string[] = [];
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const marker = FENCE.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || (marker[0] === fence[0] && marker.length >= fence.length))) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    for (const match of line.replace(INLINE_CODE, " ").matchAll(IMPORT_TOKEN)) {
      const token = match[1]!.replace(/[.:!?]+$/, "");
      if (token !== "" && !tokens.includes(token)) tokens.push(token);
    }
  }
  return tokens;
}

function versionOf(text: string): string {
  // One-shot hashing: the same digest without a Hash object per file (bench: a sixth of a cold call).
  return hash("sha256", text, "hex").slice(0, C.VERSION_ID_LENGTH);
}

function swapCase(name: string): string {
  return [...name].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join("");
}

function depthOf(scope: string): number {
  return scope.split("/").length;
}

function byteLength(text: string): number {
  return Buffer.byteLength(text);
}

const CONTROL_NAMES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * The one escaping of every name shown to the model or the user: kept on one line, and controls
 * (C0, DEL, C1) and format characters (bidi overrides and isolates, zero widths, BOM) shown as
 * escapes, so that a terminal obeys none of them and no name displays reversed.
 */
function oneLine(text: string): string {
  return text.replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, (char) => {
    const code = char.codePointAt(0)!;
    return (
      CONTROL_NAMES[char] ?? (code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`)
    );
  });
}

/** Pi's frontmatter parser; undefined for frontmatter that is not valid YAML (a YAML error, an unresolved alias). */
function yamlFrontmatter(text: string): { frontmatter: unknown; body: string } | undefined {
  try {
    return parseFrontmatter(text);
  } catch (error) {
    if (error instanceof ReferenceError || (error instanceof Error && error.name.startsWith("YAML"))) return undefined;
    throw error;
  }
}

/**
 * The code of an error Node raised: a filesystem errno (ENOENT, EIO …), the one kind of error
 * discovery expects, or an ERR_ code of a parse Node refused. Anything else (a TypeError, a bug)
 * is rethrown, so that the hook guard counts it instead of a file looking broken.
 */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  if (typeof code !== "string") throw error;
  return code;
}

// =============================================================================================
// 10b. Shell words. A `bash` call is read, never run: this reader splits its command line into simple
// commands and says which words name paths, and relative to which directory. A path built when the
// command runs (`cat $(cat list.txt)`) is not seen and not claimed.

/** What one word of a bash command is to the extension: a path to activate, or why not. */
type ShellWordUse =
  { word: string; role: "read" | "write"; path: string } | { word: string; role: "skip"; reason: C.ShellWordReason };

interface ShellCommand {
  /** The command's directory, relative to cwd or absolute; undefined after a `cd` known only at run time. */
  cwd: string | undefined;
  uses: ShellWordUse[];
}

interface ShellWord {
  text: string;
  dynamic: boolean; // Holds an expansion (`$x`, `$( )`, backticks): its value exists only when the command runs.
  glob: number; // Index in `text` of the first unquoted glob character, or -1.
  tilde: boolean; // Starts with an unquoted `~`.
  assignment: boolean; // A leading `NAME=value`.
  cut: boolean; // Reached the reader's length limit: possibly cut, so not used.
}

/** A list of commands being read: its shell's directory and `pushd` stack, what closes it, how deep it is. */
interface ShellFrame {
  cwd: string | undefined;
  dirs: Array<string | undefined>;
  close?: string;
  level: number;
}

type ShellRedirect = { op: "read" | "write"; word: ShellWord };

const SHELL_KEYWORDS = new Set("if then elif else fi do done while until ! { } time esac coproc".split(" "));
const SHELL_WRAPPERS = new Set("env command builtin exec nohup time sudo nice ionice timeout xargs stdbuf".split(" "));
const SHELLS_WITH_SCRIPT = new Set(["bash", "sh", "zsh"]);
/** Options of common tools that name the folder they work in (the next word, or after `=`). */
const TOOL_DIRECTORY_OPTIONS: ReadonlyMap<string, readonly string[]> = new Map([
  ["git", ["-C"]],
  ["make", ["-C", "--directory"]],
  ["npm", ["--prefix"]],
  ["pnpm", ["-C", "--dir"]],
  ["yarn", ["--cwd"]],
  ["cargo", ["--manifest-path"]],
]);
/** A redirect (its operator in group 1, after an optional descriptor) or a control operator; `<(` is a word. */
const SHELL_OPERATOR = /(?![<>]\()(?:(?:\d+|&)?(<<<|<<-|<<|<&|<>|>>|>\||>&|<|>)|&&|\|\||;;|\|&|[;&|()])/y;
/** Blanks, escaped newlines and comments between words. */
const SHELL_BLANKS = /(?:[ \t\r]|\\\n|#[^\n]*)*/y;
/** A run of characters that mean nothing special inside a word. */
const PLAIN_RUN = /[^\s;&|<>()\\'"$`*?[{~=]+/y;
/** `$'…'` (its body in group 1, where a backslash escapes) or `'…'` (group 2). */
const SINGLE_QUOTED = /\$'((?:[^'\\]|\\[^]?)*)'?|'([^']*)'?/y;
const SHELL_VARIABLE = /\$(?:[A-Za-z_]\w*|[\d@*#?$!-])/y;
const WORD_BREAK = " \t\n;&|<>()";
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?$/;

// Exported for tests: a table test of the shell-word reader (and the bench).
/** The simple commands of a bash command line, each with its directory and what its words name. */
export function readShellCommand(command: string): ShellCommand[] {
  const shared = { words: 0, commands: [] as ShellCommand[] };
  readShellScript(command.slice(0, C.MAX_SHELL_COMMAND_CHARS), { cwd: ".", dirs: [], level: 1 }, shared);
  return shared.commands;
}

/** Reads a script (a child shell's, for `bash -c`) into the shared commands, within one shared word budget. */
function readShellScript(src: string, top: ShellFrame, shared: { words: number; commands: ShellCommand[] }): void {
  let pos = 0;
  const heredocs: Array<{ delimiter: string; stripTabs: boolean }> = [];
  list(top);

  /** Reads commands until the frame's `close` (`)` or a backtick) or the end. */
  function list(frame: ShellFrame): void {
    let op = "";
    do op = command(frame, op === "|" || op === "|&");
    while (op !== "eof" && op !== frame.close);
  }

  /** Reads one simple command; returns the operator that ended it. */
  function command(frame: ShellFrame, pipedIn: boolean): string {
    const words: ShellWord[] = [];
    const redirects: ShellRedirect[] = [];
    for (;;) {
      const token = next(frame);
      if (typeof token !== "string") {
        shared.words++;
        words.push(token);
      } else if (token[0] === "<" || token[0] === ">") {
        // A redirect's target; heredocs, here-strings and descriptor copies name no path.
        const target = next(frame);
        if (typeof target === "string") continue;
        shared.words++;
        if (token === "<<" || token === "<<-") heredocs.push({ delimiter: target.text, stripTabs: token === "<<-" });
        else if (token === "<") redirects.push({ op: "read", word: target });
        else if (token !== "<<<" && !token.endsWith("&")) redirects.push({ op: "write", word: target });
      } else if (token === "(") nested(")", frame);
      else {
        finish(words, redirects, frame, pipedIn || token === "|" || token === "|&" || token === "&");
        return token;
      }
    }
  }

  /** A subshell or substitution: its own directory, starting from the current one. */
  function nested(close: string, frame: ShellFrame): void {
    if (frame.level > C.MAX_SHELL_NESTING) skipTo(close);
    else list({ cwd: frame.cwd, dirs: [], close, level: frame.level + 1 });
  }

  /** Skips past the matching `close` without reading commands (too deep to descend). */
  function skipTo(close: string): void {
    for (let open = 1; pos < src.length;) {
      const char = src[pos++]!;
      if (char === "\\") pos++;
      else if (char === "(" && close === ")") open++;
      else if (char === close && --open === 0) return;
    }
  }

  /** The next word, or an operator (a redirect's starts with `<` or `>`), or "eof". */
  function next(frame: ShellFrame): ShellWord | string {
    SHELL_BLANKS.lastIndex = pos;
    if (SHELL_BLANKS.test(src)) pos = SHELL_BLANKS.lastIndex;
    if (pos >= src.length || shared.words >= C.MAX_SHELL_WORDS) return "eof";
    const char = src[pos]!;
    if ((char === "`" && frame.close === "`") || char === "\n") {
      pos++;
      // Heredoc bodies are data: skipped, line by line, up to their delimiter.
      for (const { delimiter, stripTabs } of char === "\n" ? heredocs.splice(0) : []) {
        while (pos < src.length) {
          const end = src.includes("\n", pos) ? src.indexOf("\n", pos) : src.length;
          const line = src.slice(pos, end);
          pos = end + 1;
          if ((stripTabs ? line.replace(/^\t+/, "") : line) === delimiter) break;
        }
      }
      return char;
    }
    SHELL_OPERATOR.lastIndex = pos;
    const match = SHELL_OPERATOR.exec(src);
    if (!match) return word(frame);
    pos = SHELL_OPERATOR.lastIndex;
    const [op, redirect] = match;
    // `>&file` (no descriptor number) sends both streams to a file.
    if (redirect === ">&" && !/^\s*(\d+|-)(?![^\s;&|<>()])/.test(src.slice(pos, pos + 24))) return ">";
    return redirect ?? (op === ";;" || (op === ")" && frame.close !== ")") ? ";" : op);
  }

  function word(frame: ShellFrame): ShellWord {
    const word: ShellWord = { text: "", dynamic: false, glob: -1, tilde: false, assignment: false, cut: false };
    let quoted = false;
    for (let double = false; pos < src.length;) {
      const char = src[pos]!;
      // `<(…)` and `>(…)` open a word, as a substitution.
      const substitution =
        !double && !quoted && word.text === "" && (char === "<" || char === ">") && src[pos + 1] === "(";
      if (!double && !substitution && (WORD_BREAK.includes(char) || (char === "`" && frame.close === "`"))) break;
      PLAIN_RUN.lastIndex = pos;
      const plain = double ? null : PLAIN_RUN.exec(src);
      if (plain) {
        word.text += plain[0];
        pos += plain[0].length;
      } else if (char === '"') {
        pos++;
        double = !double;
        quoted = true;
      } else if (char === "\\") {
        // Within double quotes a backslash escapes only `$`, a backtick, `"` and itself.
        const escaped = src[pos + 1] ?? "";
        if (escaped !== "\n") word.text += double && !'$`"\\'.includes(escaped) ? `\\${escaped}` : escaped;
        pos += 2;
        quoted = true;
      } else if (!double && (char === "'" || (char === "$" && src[pos + 1] === "'"))) {
        SINGLE_QUOTED.lastIndex = pos;
        const [all, ansi, raw] = SINGLE_QUOTED.exec(src)!;
        pos += all.length;
        // `$'…'`: backslash escapes as C writes them, the common ones only.
        word.text += raw ?? ansi!.replace(/\\([^]?)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
        quoted = true;
      } else if (char === "$" || char === "`" || substitution) expansion(word, frame);
      else if (double) {
        word.text += char;
        pos++;
      } else {
        if (!quoted && word.text === "" && char === "~") word.tilde = true;
        if ("*?[{".includes(char) && word.glob === -1) word.glob = word.text.length;
        if (!quoted && char === "=" && !word.assignment && ASSIGNMENT.test(word.text) && !word.dynamic)
          word.assignment = true;
        word.text += char;
        pos++;
      }
    }
    if (pos >= src.length && src.length >= C.MAX_SHELL_COMMAND_CHARS) word.cut = true;
    return word;
  }

  /** `$name`, `${…}`, `$(( ))`, `$( )`, `<( )` or backticks: kept as written, and the word becomes dynamic. */
  function expansion(word: ShellWord, frame: ShellFrame): void {
    const start = pos;
    SHELL_VARIABLE.lastIndex = pos;
    if (src[pos] === "`") {
      pos++;
      nested("`", frame);
    } else if (src.startsWith("$((", pos)) {
      pos += 3;
      skipTo(")");
      if (src[pos] === ")") pos++;
    } else if (src[pos + 1] === "(") {
      pos += 2;
      nested(")", frame);
    } else if (src.startsWith("${", pos)) {
      pos += 2;
      skipTo("}");
    } else if (SHELL_VARIABLE.test(src)) pos = SHELL_VARIABLE.lastIndex;
    else {
      pos++;
      word.text += "$";
      return;
    }
    word.text += src.slice(start, pos);
    word.dynamic = true;
  }

  /** One simple command is complete: its words, its effect on the directory, and what they name. */
  function finish(all: ShellWord[], redirects: ShellRedirect[], frame: ShellFrame, inPipeline: boolean): void {
    const { words, toolAt } = commandParts(all.filter((word) => !word.cut));
    if (words.length === 0 && redirects.length === 0) return;
    const uses: ShellWordUse[] = [];
    shared.commands.push({ cwd: frame.cwd, uses });
    const tool = posix.basename(words[toolAt]?.text ?? "");
    let base = frame.cwd;
    let afterDashes = false;
    const skip = (word: ShellWord, reason: C.ShellWordReason) => uses.push({ word: word.text, role: "skip", reason });
    const use = (word: ShellWord, role: "read" | "write") => uses.push(shellWordUse(word, role, base));
    for (let index = 0; index < words.length; index++) {
      const word = words[index]!;
      if (index < toolAt && !word.text.startsWith("-")) skip(word, "commandName");
      else if (index === toolAt) {
        if (word.text.includes("/") && !word.dynamic) use(word, "read");
        else skip(word, word.dynamic ? "dynamic" : "commandName");
      } else if (!afterDashes && word.text.startsWith("-") && !word.dynamic) {
        skip(word, "option");
        afterDashes = word.text === "--";
        const directory = index > toolAt ? directoryOption(tool, words, index) : undefined;
        const script = index > toolAt && SHELLS_WITH_SCRIPT.has(tool) && /^-[a-zA-Z]*c[a-zA-Z]*$/.test(word.text);
        if (directory) {
          if (directory === words[index + 1]) index++;
          use(directory, "read");
          if (tool !== "cargo" && !directory.dynamic) base = joinShellPath(base, directory);
        } else if (script && index + 1 < words.length) {
          skip(words[++index]!, "script");
          const child = { cwd: base, dirs: [], level: frame.level + 2 };
          if (frame.level <= C.MAX_SHELL_NESTING) readShellScript(words[index]!.text, child, shared);
        }
      } else use(word, tool === "tee" && index > toolAt ? "write" : "read");
    }
    for (const redirect of redirects) if (!redirect.word.cut) use(redirect.word, redirect.op);
    // `cd`, `pushd` and `popd` move the directory of the commands that follow in the same shell.
    if (inPipeline || !["cd", "pushd", "popd"].includes(tool)) return;
    const target = words.slice(toolAt + 1).find((word) => !word.text.startsWith("-") || word.text === "-");
    if (tool === "pushd") frame.dirs.push(frame.cwd);
    if (tool === "popd") frame.cwd = frame.dirs.pop();
    else
      frame.cwd = target === undefined || target.text === "-" || target.tilde ? undefined : joinShellPath(base, target);
  }
}

/** Drops leading keywords and `NAME=value` assignments, then finds the tool after its wrappers (`env`,
 * `sudo`, `xargs` …), their options and arguments; after `for NAME in` the words are a list, without a tool. */
function commandParts(words: ShellWord[]): { words: ShellWord[]; toolAt: number } {
  let start = 0;
  for (; start < words.length; start++) {
    const word = words[start]!;
    const plain = !word.dynamic && (word.glob === -1 || word.text === "{");
    if (plain && (word.text === "for" || word.text === "select"))
      return { words: words.slice(start + (words[start + 2]?.text === "in" ? 3 : 2)), toolAt: -1 };
    if (!word.assignment && !(plain && SHELL_KEYWORDS.has(word.text))) break;
  }
  const rest = words.slice(start);
  let toolAt = 0;
  const wrapper = ({ text, assignment }: ShellWord) =>
    SHELL_WRAPPERS.has(text) || text.startsWith("-") || assignment || /^\d+[smhd]?$/.test(text);
  while (toolAt < rest.length && wrapper(rest[toolAt]!)) toolAt++;
  return { words: rest, toolAt };
}

/** The word naming the folder of a tool's directory option at `index`: the next word, or the option's own value. */
function directoryOption(tool: string, words: ShellWord[], index: number): ShellWord | undefined {
  const word = words[index]!;
  for (const option of TOOL_DIRECTORY_OPTIONS.get(tool) ?? []) {
    if (word.text === option && words[index + 1]) return words[index + 1];
    const joined = option.startsWith("--") ? `${option}=` : option;
    if (word.text.startsWith(joined) && word.text.length > joined.length)
      return { ...word, text: word.text.slice(joined.length), glob: -1, tilde: false };
  }
  return undefined;
}

/** How a word names a path: relative to the command's directory; a glob by the folder before it. */
function shellWordUse(word: ShellWord, role: "read" | "write", base: string | undefined): ShellWordUse {
  if (word.dynamic) return { word: word.text, role: "skip", reason: "dynamic" };
  // A glob names the folder before its first glob character.
  const before = word.text.slice(0, word.glob);
  const folder = before.includes("/") ? before.slice(0, before.lastIndexOf("/")) || "/" : ".";
  const path = joinShellPath(base, role === "read" && word.glob !== -1 ? { ...word, text: folder } : word);
  return path === undefined
    ? { word: word.text, role: "skip", reason: "unknownDirectory" }
    : { word: word.text, role, path };
}

/** A word's path against a directory; undefined when neither is known before the command runs. */
function joinShellPath(base: string | undefined, word: ShellWord): string | undefined {
  if (word.dynamic) return undefined;
  if (word.tilde || posix.isAbsolute(word.text)) return word.text;
  return base === undefined ? undefined : posix.join(base, word.text);
}

// =============================================================================================
// 10c. Globs: one bounded matcher for rule globs and ignore files.

// A glob is cut at `/` into segments and matched segment by segment: `*`, `?` and `[…]` stay within
// a segment, a `**` segment spans any number of them (a trailing one at least one: a folder is not a
// file under it), `\` escapes. Both levels run the two-pointer wildcard match, which backtracks only
// to its last star, so one match costs at most path length × pattern length steps: no glob can make
// it backtrack exponentially, as a RegExp (or `path.matchesGlob`) can. Braces are expanded first,
// within MAX_GLOB_EXPANSIONS, and globs past MAX_GLOB_CHARS are refused before they are read.
// Options: `braces`, `{a,b}` are alternatives (rules) or characters (ignore files); `floating`, a glob
// without a slash matches at any depth (Cursor, Copilot, ignore files).

/** One character of a segment's pattern: itself, `*`, or a test (`?`, a `[…]` class). */
type GlobChar = string | typeof ANY_RUN | ((char: string) => boolean);

const ANY_RUN = Symbol("*");
const ANY_DEPTH = Symbol("**");
/** `[…]`, whose first member may be `]`, `!` or `^` after a negation (groups 1 and 2); `\x`; any character. */
const GLOB_TOKEN = /\[(?:[!^]([^][^\]]*)|([^!^][^\]]*))\]|\\([^])|[^]/gy;

let globSteps = 0;

// Exported for tests: the steps every glob match so far has taken, to bound their work.
export function globWork(): number {
  return globSteps;
}

/** One matcher for a list of globs (a path matches when one of them does), or why it cannot be had. */
function compileGlob(
  globs: string | readonly string[],
  options: { braces: boolean; floating: boolean },
): { ok: true; matches: (path: string) => boolean } | { ok: false; reason: C.Reason } {
  const alternatives: Array<{ segments: Array<GlobChar[] | typeof ANY_DEPTH>; prefix: string; suffix: string }> = [];
  let chars = 0;
  for (let glob of typeof globs === "string" ? [globs] : globs) {
    if (glob.length > C.MAX_GLOB_CHARS) return { ok: false, reason: "globTooLong" };
    const anchored = glob.startsWith("/");
    glob = glob.replace(/^\/+/, "");
    if (glob.endsWith("/")) glob += "**";
    if (glob === "") continue;
    const expanded = options.braces ? expandBraces(glob) : [glob];
    if (expanded === undefined) return { ok: false, reason: "globExpansions" };
    for (const pattern of expanded) {
      chars += pattern.length;
      if (chars > C.MAX_GLOB_CHARS) return { ok: false, reason: "globTooLong" };
      const floating = options.floating && !anchored && !pattern.includes("/");
      const segments: Array<GlobChar[] | typeof ANY_DEPTH> = floating ? [ANY_DEPTH] : [];
      for (const part of pattern.split("/")) {
        const chars = part === "**" ? ANY_DEPTH : segmentChars(part);
        if (chars === undefined) return { ok: false, reason: "globRange" };
        if (chars !== ANY_DEPTH || segments.at(-1) !== ANY_DEPTH) segments.push(chars);
      }
      if (segments.at(-1) === ANY_DEPTH) segments.splice(-1, 0, [ANY_RUN]);
      // The literal text every match starts and ends with turns most paths away before the matcher runs.
      // Bench --quick, same code without it: warm_over_stat 63/63 -> 47/61, peer_over_ours_nogit 2.7/4.1 -> 3.6/4.0.
      const wild = pattern.search(/[*?[\\]/);
      let cut = pattern.length;
      while (cut > 0 && !"/*?[]\\".includes(pattern[cut - 1]!)) cut--;
      const prefix = floating ? "" : wild === -1 ? pattern : pattern.slice(0, wild);
      alternatives.push({ segments, prefix, suffix: pattern.slice(cut) });
    }
  }
  return {
    ok: true,
    matches: (path) => {
      let parts: string[] | undefined;
      return alternatives.some(({ segments, prefix, suffix }) => {
        globSteps++;
        if (!path.startsWith(prefix) || !path.endsWith(suffix)) return false;
        parts ??= path.split("/");
        return wildcardMatch(segments, ANY_DEPTH, parts.length, (segment, i) => segmentMatches(segment, parts![i]!));
      });
    },
  };
}

function segmentMatches(segment: GlobChar[] | typeof ANY_DEPTH, text: string): boolean {
  const at = (c: GlobChar, i: number) => (typeof c === "string" ? c === text[i] : c !== ANY_RUN && c(text[i]!));
  return segment !== ANY_DEPTH && wildcardMatch(segment, ANY_RUN, text.length, at);
}

/** A segment's characters; undefined when a class holds a range out of order. */
function segmentChars(part: string): GlobChar[] | undefined {
  const chars: GlobChar[] = [];
  for (const [token, negatedMembers, members = negatedMembers, escaped] of part.matchAll(GLOB_TOKEN)) {
    if (members === undefined) chars.push(token === "*" ? ANY_RUN : token === "?" ? () => true : (escaped ?? token));
    else {
      const ranges = [...members.matchAll(/([^])(?:-([^]))?/g)].map(([, low, high = low]) => [low!, high!] as const);
      if (ranges.some(([low, high]) => high < low)) return undefined;
      const negated = negatedMembers !== undefined;
      chars.push((char) => ranges.some(([low, high]) => low <= char && char <= high) !== negated);
    }
  }
  return chars;
}

/** The two-pointer wildcard match of `length` items: `star` matches any run of them, each other item one.
 * On a mismatch only the last star takes one more item, so each (item, pattern item) pair is tried once. */
function wildcardMatch<T>(pattern: readonly T[], star: T, length: number, at: (x: T, i: number) => boolean): boolean {
  let i = 0;
  let p = 0;
  let resumeAt = -1;
  let resumeFrom = 0;
  while (i < length) {
    globSteps++;
    if (pattern[p] === star) {
      resumeAt = ++p;
      resumeFrom = i;
    } else if (p < pattern.length && at(pattern[p]!, i)) {
      p++;
      i++;
    } else if (resumeAt < 0) return false;
    else {
      p = resumeAt;
      i = ++resumeFrom;
    }
  }
  while (pattern[p] === star) p++;
  return p === pattern.length;
}

/** Every brace alternative of a pattern, undefined past C.MAX_GLOB_EXPANSIONS: the first unescaped `{…}`
 * holding a top-level comma is expanded; a group without one stays literal, as in the shell. */
function expandBraces(pattern: string): string[] | undefined {
  for (let open = 0; open < pattern.length; open += pattern[open] === "\\" ? 2 : 1) {
    if (pattern[open] !== "{") continue;
    const cuts = [open];
    for (let i = open, depth = 0; i < pattern.length; i++) {
      const c = pattern[i];
      if (c === "\\") i++;
      else if (c === "{") depth++;
      else if (c === "," && depth === 1) cuts.push(i);
      else if (c === "}" && --depth === 0) {
        if (cuts.length === 1) break;
        const expanded: string[] = [];
        for (const [k, cut] of [...cuts.slice(1), i].entries()) {
          const more = expandBraces(pattern.slice(0, open) + pattern.slice(cuts[k]! + 1, cut) + pattern.slice(i + 1));
          if (more === undefined || expanded.push(...more) > C.MAX_GLOB_EXPANSIONS) return undefined;
        }
        return expanded;
      }
    }
  }
  return [pattern];
}
