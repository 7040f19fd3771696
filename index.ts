// pi-lazy-agents: delivers the AGENTS.md files, skills and glob rules of folders strictly below cwd,
// once per content version, at the end of the tool result that first touches their scope.
//
// The delivery rules, each decided in one place:
//  1. A scope activates when a trigger tool's call touches a path inside it and the call succeeds
//     (edit, write and bash activate even when they fail): `activates`.
//  2. A folder offers the first name of the fileNames setting (INSTRUCTION_FILE_NAMES) it holds
//     that is accepted; the names after it are overridden. A file refused for what it is lets the
//     next name apply; an I/O error lets none: `viewDirectory`.
//  3. A file, import, rule or skill is sent once per content version: the same version the model holds is not
//     sent again, and a whole read or a write of it counts as its delivery: `takes`.
//  4. A new version supersedes the one the model holds, under the same scope; when a call of the
//     batch writes the file, that call's result carries it and the others leave it alone: `planFile`.
//  5. What the model holds and its folder no longer offers is withdrawn; an import only once no file
//     the model holds still imports it: `planRetraction`.
//  6. After compaction, resume, /tree or a context edit the ledger is rebuilt from what the model
//     still sees; what it no longer sees is sent again at the next access: `recordsInContext`.
//  7. The reminder fits REMINDER_BUDGET_BYTES and MAX_REMINDER_FILES: the deepest files whole first,
//     broader ones cut, the rest announced as left out: `fitPlanToBudget`.
//  8. With gateWrites on, the first write or edit into a scope whose instructions the model lacks
//     is held back once, the instructions in its reason: `LazyAgents.onToolCall`.
//  9. A bash command is read, never run: a word names a path to activate when `shellWordUse` says so.
// 10. A glob rule of .claude/.cursor/.github applies when a touched path matches it: `ruleApplies`.
// 11. The preamble and each part of a reminder (files, skills, rules, rule listings) come in full while
//     the model cannot see them; after that, no preamble, a list with a one-line header, files and
//     rules with their tags alone: `explainedIn`.
// 12. A hookify rule of a `.claude` on the call's path blocks, asks or warns on a bash, edit, write
//     or read call, a prompt or a stop; block wins over ask over warn: `checkVerdict`.
// 13. Every file read for the model (instruction files, imports, rules, skills) and every folder a
//     link leads to passes one source policy, on its path as written and as it resolves:
//     `sourceRefusal`. The folders of a `.agents/skills` tree are skill content, not scopes: `viewChain`.
//
// Sections, in the order a tool call travels: 1 Pi adapter; 2 per-call lifecycle; 2b checks (hookify rules:
// block, ask or warn); 3 the ledger: what the model holds; 4 reminder text and budget; 5 discovery; 6 caches and
// the filesystem seam; 7 git; 8 settings; 9 the /lazy-agents report; 10 pure helpers (paths and text, the
// shell-word reader, the glob matcher). A section uses only what later sections define, but for three knowing
// exceptions: reminder text formats the ledger's plan, settings read through the filesystem seam, and the
// report describes everything above it.

import * as nodeFs from "node:fs";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { hash } from "node:crypto";
import { homedir } from "node:os";
import * as nodePath from "node:path";
import { fileURLToPath } from "node:url";
import { createContext, Script, type Context } from "node:vm";
import {
  CONFIG_DIR_NAME,
  type AgentBeforeSettleEvent,
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
import * as config from "./config.ts";
import type { CheckSkip, Counts, FailureLabel, Reason, RuleSource, Setting, ShellWordReason } from "./config.ts";

// Pi loads an extension through jiti, which hands it every module as a Proxy: a name read from one is a trap at each
// use. The names the warm path uses are read once, here (A/B, warm depth-8 reads, no git: config 0.94, path and fs 0.92).
const C = { ...config };
const { basename, dirname, isAbsolute, join, posix, relative, resolve, sep } = nodePath;
const { closeSync, fstatSync, lstatSync, openSync, readdirSync, readSync, realpathSync, statSync } = nodeFs;

// =============================================================================================
// 1. Pi adapter. The only code that knows Pi's events: it turns them into engine calls and decides
// when a handler waits, so that everything below stays testable through Pi's real runner.

interface CreateOptions {
  fs?: FileSystem;
  spawnGit?: SpawnGit;
  /** Receives the engine, so tests can read its state. */
  onEngine?: (engine: LazyAgents) => void;
}

// The UI is decoration: one that fails must not cost the model anything.
function tell(ctx: ExtensionContext, message: string, level: "info" | "warning"): void {
  try {
    if (ctx.hasUI) ctx.ui.notify(message, level);
    else if (level === "warning") process.stderr.write(`${message}\n`);
  } catch {}
}

// Every hook runs fail-open: a failure costs only what the extension would have added. It is
// counted under a fixed label for `/lazy-agents`, and the user is warned once per session.
function guardFor(engine: LazyAgents) {
  return <T>(ctx: ExtensionContext, label: FailureLabel, run: () => T | Promise<T>, fallback?: () => T) => {
    const failed = () => {
      if (engine.noteFailure(label)) tell(ctx, C.FAILURE_WARNING, "warning");
      return fallback?.();
    };
    try {
      const result = run();
      return result instanceof Promise ? result.catch(failed) : result;
    } catch {
      return failed();
    }
  };
}

export function createLazyAgents(create: CreateOptions = {}): (pi: ExtensionAPI) => void {
  return (pi: ExtensionAPI) => {
    const engine = new LazyAgents(create.fs, create.spawnGit);
    create.onEngine?.(engine);
    pi.registerFlag(C.DISABLE_FLAG, { description: C.DISABLE_FLAG_DESCRIPTION, type: "boolean", default: false });

    const showStatus = (ctx: ExtensionContext): void => {
      try {
        if (ctx.hasUI)
          ctx.ui.setStatus(C.STATUS_KEY, engine.options.enabled ? C.statusText(heldCounts(engine.ledger)) : undefined);
      } catch {}
    };

    const guarded = guardFor(engine);
    registerChecks(pi, engine);

    // A held-back call has no tool_result: its delivery is recorded on the error result Pi persists.
    // The hook runs for every message, so it is registered only while the gate is on.
    const recordGateDelivery: ExtensionHandler<MessageEndEvent, MessageEndEventResult> = ({ message }) => {
      if (message.role !== "toolResult") return undefined;
      const record = engine.gate?.records.get(message.toolCallId);
      if (!record) return undefined;
      engine.gate!.records.delete(message.toolCallId);
      return { message: { ...message, details: withRecord(message.details, record) as typeof message.details } };
    };
    let stopGateHook: (() => void) | undefined;

    const loadSettings = (ctx: ExtensionContext): void => {
      const raw = (pi.getSettings() as Record<string, unknown>)[C.SETTINGS_KEY];
      const origin = settingsOrigin(engine.fs, ctx.cwd, ctx.isProjectTrusted());
      const { options, warnings } = optionsFromSettings(raw, origin);
      if (pi.getFlag(C.DISABLE_FLAG) === true) options.enabled = false;
      engine.configure(options);
      if (options.enabled && options.gateWrites) stopGateHook ??= pi.on("message_end", recordGateDelivery);
      else {
        stopGateHook?.();
        stopGateHook = undefined;
      }
      for (const warning of warnings) tell(ctx, warning, "warning");
    };

    const rebuild = (ctx: ExtensionContext): void => {
      const fromSession = () => {
        engine.discoveryFor(ctx.cwd);
        if (engine.options.enabled) engine.git?.start();
        const records = recordsInContext(ctx.sessionManager);
        engine.ledger.rebuild(records);
        // A reason still in context left its instructions in the ledger; one gone must hold the next write again.
        const shown = new Set(records.map((record) => record.reminder));
        for (const [target, reason] of engine.gate?.retries ?? [])
          if (!shown.has(reason)) engine.gate!.retries.delete(target);
        engine.contextMark = ctx.sessionManager.getLeafId();
      };
      // A session we cannot read leaves the ledger empty: at worst a file is sent again.
      guarded(ctx, "rebuild", fromSession, () => engine.ledger.rebuild([]));
      showStatus(ctx);
    };

    // Pi's TUI replaces an info notification with the next one, so parallel calls would each hide
    // the last: what a turn loads is gathered here and told once, when the turn ends.
    const turnLoaded: LedgerRecord[] = [];
    const answer = <R>(ctx: ExtensionContext, outcome: Outcome<R> | undefined): R | undefined => {
      if (outcome && ctx.hasUI) {
        turnLoaded.push(outcome.record);
        // A file Pi already loaded is no fault: the model hears why it is not sent again, the user nothing.
        for (const skip of outcome.record.skipped)
          if (skip.reason !== "startupContext") tell(ctx, refusalWarning(skip), "warning");
        showStatus(ctx);
      }
      return outcome?.answer;
    };
    const endTurn = (ctx: ExtensionContext): void => {
      engine.endTurn();
      const notice = turnNotice(turnLoaded.splice(0));
      if (notice !== undefined) tell(ctx, notice, "info");
    };

    pi.on("session_start", (_event, ctx) => {
      guarded(ctx, "settings", () => loadSettings(ctx));
      rebuild(ctx);
    });
    pi.on("before_agent_start", (event, ctx) => {
      guarded(ctx, "startup", () => engine.learnStartup(ctx.cwd, event.systemPromptOptions));
    });
    pi.on("session_tree", (_event, ctx) => rebuild(ctx));
    pi.on("session_compact", (_event, ctx) => rebuild(ctx));
    // Context edits come between turns: the ledger follows before the turn's first call.
    pi.on("turn_start", (_event, ctx) => {
      const edited = () => contextEditedSince(ctx.sessionManager, engine.contextMark);
      if (guarded(ctx, "rebuild", edited, () => true)) rebuild(ctx);
      else engine.contextMark = ctx.sessionManager.getLeafId();
    });

    // Never block a tool by accident: a failed discovery only means nothing is appended. Only a
    // call that entered new folders or imports waits, for git; the plan-and-apply never follows an await.
    const env = (ctx: ExtensionContext): CallEnvironment => ({ cwd: ctx.cwd, trusted: ctx.isProjectTrusted() });
    pi.on("tool_call", (event, ctx) =>
      guarded(ctx, "toolCall", () => then(engine.onToolCall(event, env(ctx)), (held) => answer(ctx, held))),
    );
    pi.on("tool_result", (event, ctx) => {
      const warn = (text: string) => tell(ctx, text, "warning");
      return guarded(ctx, "toolResult", () => then(engine.onToolResult(event, warn), (done) => answer(ctx, done)));
    });

    // A call that a later extension blocked, or that was aborted, has no result: it writes nothing for its
    // siblings to leave alone. Pi ends every call so, right after its result, and a blocked one before any tool runs.
    pi.on("tool_execution_end", (event, ctx) => guarded(ctx, "toolResult", () => engine.endCall(event.toolCallId)));

    // Per-call state ends with each result; what a call's end did not clear ends with its turn.
    pi.on("turn_end", (event, ctx) => {
      const confirm = () => {
        const { lost, rescued } = engine.confirmTurn(event.toolResults);
        for (const entry of rescued) pi.appendEntry(C.RESCUED_RECORD_ENTRY, entry);
        // What never reached the model was not loaded.
        turnLoaded.splice(0, Infinity, ...turnLoaded.filter((record) => !lost.has(record)));
        return lost.size > 0;
      };
      if (guarded(ctx, "rebuild", confirm, () => false) === true) rebuild(ctx);
      endTurn(ctx);
    });
    pi.on("agent_end", (_event, ctx) => endTurn(ctx));
    pi.on("session_shutdown", () => engine.shutdown());

    pi.registerCommand(C.COMMAND_NAME, {
      description: C.COMMAND_DESCRIPTION,
      getArgumentCompletions: (prefix) => commandCompletions(engine, prefix),
      handler: async (args, ctx) => {
        // A report that fails is a failure like a hook's: counted, warned once, and a fixed line in its place.
        const report = (await guarded(ctx, "report", () => commandReport(engine, args, env(ctx)))) ?? C.REPORT_FAILED;
        // Without a UI the report goes to stderr: Pi keeps stdout for the answer (print) or events (json).
        if (ctx.hasUI) ctx.ui.notify(report, "info");
        else process.stderr.write(`${report}\n`);
      },
    });
  };
}

async function commandReport(engine: LazyAgents, args: string, env: CallEnvironment): Promise<string> {
  const words = args.trim();
  if (words.startsWith("why ")) {
    // An argument wrapped in quotes is a bash command; a bare one is a path (which may hold spaces).
    const quoted = /^(["'])(.*)\1$/s.exec(words.slice(4).trim())?.[2];
    if (quoted !== undefined) return await explainCommand(engine, quoted, env);
    const why = await explainPath(engine, words.slice(4), env);
    return [why, ...checkWhy(engine, env, words.slice(4).trim())].join("\n");
  }
  if (words !== "" && words !== C.VERBOSE_ARGUMENT) return C.REPORT_USAGE;
  engine.discoveryFor(env.cwd);
  return [formatInspection(engine, words === C.VERBOSE_ARGUMENT), ...checkReport(engine, env)].join("\n");
}

export default createLazyAgents();

// =============================================================================================
// 2. Per-call lifecycle. A tool call is located when it starts (git's questions go out then); its
// result awaits git until no question is left, then views, plans and applies in one synchronous
// step; turn_end confirms what Pi persisted. What a call touches is its tool path or its bash words.

/**
 * A tool's `path` argument resolved as Pi's built-in tools do (unicode spaces, a leading `@`, `~`, `file://`), or
 * undefined for input no tool could open. With `exists`, a path that is not there falls back as Pi's read tool
 * (`resolveReadPath`) does, to the first of its other spellings that is: a macOS screenshot name (narrow no-break
 * space before AM/PM), the NFD form, curly apostrophes, then NFD with curly apostrophes. A path with no other
 * spelling costs no filesystem call. Exported for tests.
 */
export function resolveToolPath(raw: unknown, cwd: string, exists?: (path: string) => boolean): string | undefined {
  if (typeof raw !== "string" || raw.trim() === "" || raw.includes("\0")) return undefined;
  if (Buffer.byteLength(raw) > C.MAX_PATH_BYTES) return undefined;
  let path = raw.replace(/[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g, " ");
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
  // A plain relative path below a plain cwd needs no normalizing (A/B, warm depth-8 reads: 0.98).
  const plain = sep === "/" && !UNNORMALIZED.test(`/${path}`) && cwd.startsWith("/") && !UNNORMALIZED.test(cwd);
  const resolved = plain ? `${cwd}/${path}` : resolve(cwd, path);
  // ASCII with no apostrophe and no AM/PM has no other spelling (profile: building them was 6% of a warm read).
  if (exists === undefined || !/[^\x00-\x7F]|'| (?:AM|PM)\./i.test(resolved)) return resolved;
  const nfd = resolved.normalize("NFD");
  const curly = (text: string) => text.replace(/'/g, "\u2019");
  const screenshot = resolved.replace(/ (AM|PM)\./gi, "\u202F$1.");
  const variants = [screenshot, nfd, curly(resolved), curly(nfd)].filter((variant) => variant !== resolved);
  if (variants.length === 0 || exists(resolved)) return resolved;
  return variants.find(exists) ?? resolved;
}

// Bash activation: the paths a command's words name, located like the targets of read and write.

/**
 * Locates what the words name (each word's chain, or why not; its path when it names something inside cwd), and the
 * distinct chains they activate, one per deepest folder. Each distinct path costs one lstat, and only once its
 * folders are known to be real.
 */
function locateShellWords(discovery: Discovery, commands: ShellCommand[], cwd: string) {
  const byPath = new Map<string, Located | ShellWordReason>();
  const folders = new Map<string, FolderWalk>();
  const chains = new Map<string, Located>();
  const outcomes = commands.flatMap(({ uses }) =>
    uses.map((use) => {
      if (use.role === "skip") return { use, reason: use.reason };
      const key = `${use.role}\0${use.path}`;
      const path = expandHome(use.path) ?? resolve(cwd, use.path);
      let found = byPath.get(key);
      if (found === undefined) byPath.set(key, (found = locateShellPath(discovery, use.role, path, folders)));
      if (typeof found === "string")
        return found === "cwdItself" ? { use, reason: found, path } : { use, reason: found };
      chains.set(found.links.at(-1)!.scope, found);
      return { use, located: found, path };
    }),
  );
  return { outcomes, chains: [...chains.values()] };
}

/** A written word's folder, which the command may create; a read word's existing file (its folder) or folder. */
function locateShellPath(
  discovery: Discovery,
  role: "read" | "write",
  path: string,
  folders: Map<string, FolderWalk>,
): Located | ShellWordReason {
  if (path.includes("\0") || Buffer.byteLength(path) > C.MAX_PATH_BYTES) return "missing";
  if (!mayBeInside(discovery, path)) return "outside";
  const below = (located?: Located) => (!located ? "outside" : located.links.length === 0 ? "cwdItself" : located);
  if (role === "write") return below(locateChain(discovery, path, false));
  const folder = dirname(path);
  // Only cwd itself has its folder outside: nothing above it is ever looked at.
  if (folder === path || !mayBeInside(discovery, folder)) return "cwdItself";
  let parent = folders.get(folder);
  if (parent === undefined) folders.set(folder, (parent = walkFolder(discovery, folder)));
  if (parent === "missing") return "missing";
  // Only a folder whose every step below cwd is a real folder lets the word be looked at as written.
  if (parent !== "resolve") {
    const kind = wordKind(discovery, path, parent.stats!.at(-1));
    if (kind === "missing") return "missing";
    if (typeof kind === "object")
      return below({ links: chainFor(discovery, relative(discovery.cwdReal, path)), stats: [...parent.stats!, kind] });
    if (kind === "file") return below(parent);
  }
  const target = discovery.realpathOrUndefined(path);
  if (target === undefined) return "missing";
  if (relativeInside(discovery.cwdReal, target) === undefined) return "outside";
  const stats = fsOr("missing" as const, () => discovery.fs.stat(target));
  return stats === "missing" ? stats : below(locateChain(discovery, target, stats?.isDirectory() === true));
}

/**
 * What a word names: a folder (with its fresh stats, which its views need), a file, nothing, or
 * "link" to look at through its real path (a link, or an lstat that failed). A file or nothing is
 * remembered against its folder's signature, which any entry added, removed or replaced there
 * changes: a known word in an unchanged folder costs no call at all (bench/bash.ts measures it).
 */
function wordKind(discovery: Discovery, path: string, folder: nodeFs.Stats | undefined): ShellWordKind | nodeFs.Stats {
  let known = shellWordKinds.get(discovery);
  if (!known) shellWordKinds.set(discovery, (known = new Map()));
  const cached = folder && known.get(path);
  if (cached && sameSignature(cached.folder, folder)) return cached.kind;
  const stats = fsOr("link" as const, () => discovery.fs.lstat(path));
  if (stats === "link" || stats?.isDirectory()) return stats;
  const kind = !stats ? "missing" : stats.isSymbolicLink() ? "link" : "file";
  if (folder && kind !== "link") {
    if (known.size >= C.MAX_SHELL_WORD_CACHE) known.clear();
    known.set(path, { folder: signatureOf(folder), kind });
  }
  return kind;
}

type ShellWordKind = "missing" | "file" | "link";

const shellWordKinds = new WeakMap<Discovery, Map<string, { folder: Signature; kind: ShellWordKind }>>();

interface CallEnvironment {
  cwd: string;
  trusted: boolean;
}

/** What a hook hands Pi for a call (a block, a patch), with the record of what it sends, which the user is told of. */
interface Outcome<R> {
  answer: R;
  record: LedgerRecord;
}

type GateOutcome = Outcome<{ block: true; reason: string }>;
type ResultOutcome = Outcome<ToolResultEventResult>;

/** What a tool call located when it started; its views are taken once, at its result. */
interface PendingCall {
  toolName: string;
  /** The tool's resolved target ("" for bash). */
  target: string;
  /** Its target's chain, or those its bash words activate. */
  chains: Located[];
  withSkills: boolean;
  /** cwd-relative paths the call touched, for rule globs. */
  touched: string[];
  /** A bash call's commands, located again after it ran when they name an instruction file. */
  commands?: ShellCommand[];
  /** Real paths of the instruction files this call writes (a command's: its redirect and tee targets): the batch's
   * other results leave them alone. */
  writes?: string[];
  /** An edit or write of a file named otherwise, which may reach one through a link: see `writesOf`. */
  mayLink?: boolean;
  /** An edit or write of an instruction file, or into folders not all there at the call: located again at its result. */
  relocate?: boolean;
  /** Git's answers for the chains' new folders, asked at tool_call, awaited at the result. */
  gitAnswer?: Promise<void>;
}

type Shown = Pick<PlanInput, "shownWhole" | "shownInPart">;

// Exported for tests: they read the engine's state through onEngine.
export class LazyAgents {
  readonly fs: FileSystem;
  options: Options = defaultOptions();
  readonly ledger = new Ledger();
  discovery?: Discovery;
  gate?: WriteGate;
  readonly inspection = new Inspection();
  /** The session entry the ledger was last checked against, for context edits appended since. */
  contextMark?: string | null;
  /** Failures the hooks caught, by label, for `/lazy-agents`. */
  readonly failures = new Map<FailureLabel, number>();
  readonly checks = new CheckState();
  git?: GitIgnoreOracle;
  startupSkills = new Map<string, string>();
  /** Paths of the context files Pi loaded at start-up, as Pi gives them. */
  private startupFiles: readonly string[] = [];
  private readonly spawner: SpawnGit;
  private boundCwd?: string;
  private sweepScheduled = false;
  // Per-call state: calls between tool_call and result; nested calls that activated, waiting for their
  // outermost call's result; the outermost call (a codemode script's) of each nested one; records this
  // turn's results carry, until turn_end shows what Pi persisted.
  private readonly pending = new Map<string, PendingCall>();
  private readonly nested = new Map<string, PendingCall[]>();
  private readonly rootOf = new Map<string, string>();
  private readonly unconfirmed = new Map<string, LedgerRecord>();
  /** What could not be read that the user alone hears of (a folder on the way, a skill), by path: each reason once. */
  private readonly toldUser = new Map<string, Reason>();

  constructor(fs: FileSystem = nodeFileSystem, spawner: SpawnGit = spawnGit) {
    this.fs = fs;
    this.spawner = spawner;
  }

  /** Counts a failure a hook caught; true for the session's first, which the user hears about. */
  noteFailure(label: FailureLabel): boolean {
    const first = this.failures.size === 0;
    this.failures.set(label, (this.failures.get(label) ?? 0) + 1);
    return first;
  }

  /** The discovery of cwd, made once per cwd: its real path is the boundary every candidate is checked against. */
  discoveryFor(cwd: string): Discovery | undefined {
    // The warm path: cwd does not move within a session, so its real path is resolved once.
    if (this.boundCwd !== cwd || !this.discovery) {
      const cwdReal = fsOr(undefined, () => this.fs.realpath(resolve(cwd)));
      if (cwdReal === undefined) return undefined;
      this.boundCwd = cwd;
      if (this.git?.cwdReal !== cwdReal) {
        this.git?.stop();
        this.git = new GitIgnoreOracle(cwdReal, this.spawner);
      }
      if (this.discovery?.cwdReal !== cwdReal) {
        this.discovery = new Discovery(this.fs, cwdReal, this.options, () => this.git?.off === false);
        this.discovery.logicalCwd = resolve(cwd);
        this.discovery.learnStartupFiles(this.startupFiles);
      }
    }
    this.discovery.options = this.options;
    return this.discovery;
  }

  shutdown(): void {
    this.git?.stop();
    this.git = undefined;
    this.discovery = undefined;
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
   * Before the tool runs: locates what the call touches and asks git about new folders, so that the answers
   * overlap the tool's run. Only the write gate views and plans here, for outermost writes and edits.
   */
  onToolCall(event: ToolCallEvent, env: CallEnvironment): GateOutcome | undefined | Promise<GateOutcome | undefined> {
    const parent = event.parentToolCallId;
    if (parent !== undefined) this.rootOf.set(event.toolCallId, this.rootOf.get(parent) ?? parent);
    if (!this.options.enabled || !this.options.triggers.has(event.toolName)) return undefined;
    const discovery = this.discoveryFor(env.cwd);
    if (!discovery) return undefined;
    this.sweepSoon(discovery);
    const call = this.locate(discovery, event, env);
    if (!call) return undefined;
    call.gitAnswer = askGit(discovery, this.git, () => chainQuestions(discovery, [call]));
    this.pending.set(event.toolCallId, call);
    const gate = this.gate;
    if (!gate || parent !== undefined || (event.toolName !== "write" && event.toolName !== "edit")) return undefined;
    // Held back when the plan carries instructions (or a sibling's do). A retry goes through even when the budget
    // left files out of the reason: its own result carries them.
    return this.settle([call], call.gitAnswer, (views, plan): GateOutcome | undefined => {
      this.inspection.record(views);
      // A retry comes in a later message: one target twice in a message gated for its scope is held twice; a target
      // a rule alone held goes through when it is tried again.
      const gatedScope = views.some((view) => gate.scopes.has(view.scope));
      if (!gatedScope && gate.retries.delete(call.target)) return undefined;
      const carries = () => plan.files.length > 0 || (plan.rules?.length ?? 0) > 0;
      if (carries()) fitPlanToBudget(plan, this.options.budgetBytes);
      const folders = () => ruleFoldersFor(discovery, views, this.options.ruleSources);
      const ruled = () => applyingRules(discovery, folders(), call.touched).some((rule) => gate.rules.has(rule.path));
      const sibling = !carries() && (gatedScope || (gate.rules.size > 0 && ruled()));
      if (!carries() && !sibling) return undefined;
      this.pending.delete(event.toolCallId);
      // A held call has no result: a warning the checks gave it comes with the reason, not after the retry.
      const warning = this.checks.pending.get(event.toolCallId);
      this.checks.pending.delete(event.toolCallId);
      const held = (reason: string) => ({ block: true as const, reason: warning ? `${reason}\n\n${warning}` : reason });
      if (sibling) return { answer: held(C.GATE_SIBLING_TEXT), record: emptyRecord() };
      const text = formatReminder(plan);
      plan.record.reminder = versionOf(text);
      this.ledger.apply(plan.record);
      gate.records.set(event.toolCallId, plan.record);
      if (gate.retries.size >= C.MAX_UNCONFIRMED_RESULTS) gate.retries.delete(gate.retries.keys().next().value!);
      gate.retries.set(call.target, plan.record.reminder);
      for (const entry of plan.files) gate.scopes.add(entry.scope);
      for (const entry of plan.rules ?? []) gate.rules.add(entry.record.path);
      return { answer: held(`${text}\n${C.GATE_RETRY_TEXT}`), record: plan.record };
    });
  }

  /** What a call touches, located; undefined for a call that touches nothing we deliver for. */
  private locate(discovery: Discovery, event: ToolCallEvent, env: CallEnvironment): PendingCall | undefined {
    const base = { toolName: event.toolName, withSkills: env.trusted && this.options.skills };
    if (isToolCallEventType("bash", event)) {
      if (typeof event.input.command !== "string") return undefined;
      const commands = readShellCommand(event.input.command);
      const { outcomes, chains } = locateShellWords(discovery, commands, env.cwd);
      // Rules touch point: the cwd-relative paths the command names, for rule globs (cwd itself aside).
      const rels = this.options.rules ? outcomes.map(({ path }) => path && touchedPath(discovery, path, env.cwd)) : [];
      const touched = [...new Set(rels.filter((rel): rel is string => !!rel))];
      if (chains.length === 0 && touched.length === 0) return undefined;
      // A file it only names (`cat`) is no write: a sibling still carries it (a write the gate holds, the reason).
      const named = outcomes.flatMap(({ use, path }) =>
        use.role === "write" && path && this.options.fileNames.includes(basename(path)) ? [path] : [],
      );
      const writes = named.length > 0 ? named.map((path) => discovery.realpathOrUndefined(path) ?? path) : undefined;
      return { ...base, target: "", chains, touched, commands, writes };
    }
    // Search tools and other triggers name a folder, cwd when they name none (as Pi's do).
    const targetIsDirectory = !["read", "edit", "write"].includes(event.toolName);
    const raw = (event.input as { path?: unknown }).path ?? (targetIsDirectory ? "." : undefined);
    // The target and chain the checks located for this call, taken once instead of locating them again.
    const checked = this.checks.located?.id === event.toolCallId ? this.checks.located : undefined;
    this.checks.located = undefined;
    const fallback = event.toolName === "read" ? discovery.readFallback : undefined;
    const target = checked?.target ?? resolveToolPath(raw, env.cwd, fallback);
    if (target === undefined) return undefined;
    const located = checked?.located ?? locateChain(discovery, target, targetIsDirectory);
    if (located === undefined) return undefined;
    const edits = event.toolName === "edit" || event.toolName === "write";
    const named = edits && this.options.fileNames.includes(basename(target));
    const writes = named ? [discovery.realpathOrUndefined(target) ?? target] : undefined;
    // An edit or write is kept even in cwd itself: it may create an instruction file in folders that do not
    // exist yet, or change one through a link, and the batch must know.
    if (located.links.length === 0 && !edits && !this.options.rules) return undefined;
    const touched = !this.options.rules ? undefined : checked ? checked.rel : touchedPath(discovery, target, env.cwd);
    // Only the fast path, which found every folder there, takes stats.
    const relocate = edits && (named || located.stats === undefined);
    const rest = { touched: touched === undefined ? [] : [touched], writes, mayLink: edits && !named, relocate };
    return { ...base, target, chains: [located], ...rest };
  }

  /**
   * The instruction file a call writes. A target named otherwise may reach one through a link inside
   * cwd: its real path is looked at only once that matters, so that a plain edit costs no call.
   */
  private writesOf(call: PendingCall): string[] | undefined {
    const discovery = this.discovery;
    if (call.mayLink && discovery) {
      const real = this.realTarget(call);
      // A link that leads nowhere yet (or nothing yet) may lead to a file once the write has run: looked at again then.
      call.mayLink = real === undefined;
      const inside = real !== undefined && isPathInside(discovery.cwdReal, real);
      if (inside && this.options.fileNames.includes(basename(real))) call.writes = [real];
    }
    return call.writes;
  }

  /**
   * A call's target by its real path. Below real folders spelled as on disk only the target itself can be a link:
   * an lstat tells, cheaper than a realpath, which walks every folder again (bench: a cold read's realpath).
   */
  private realTarget(call: PendingCall): string | undefined {
    // Settings that change how folders are read drop the discovery, even while a call runs.
    const discovery = this.discovery;
    if (!discovery) return undefined;
    const plain = call.chains[0]?.stats !== undefined && discovery.folds === false;
    const stats = plain ? fsOr(null, () => discovery.fs.lstat(call.target)) : null;
    // Nothing there: no realpath to fail with ENOENT (bench: a warm write of a new file cost twice a read).
    if (stats === undefined) return undefined;
    return stats && !stats.isSymbolicLink() ? call.target : discovery.realpathOrUndefined(call.target);
  }

  /**
   * Awaits git until the views and plan of these calls leave no question open (imports of
   * imports, folder imports, rule folders and their imports: at most C.MAX_IMPORT_DEPTH + 1
   * rounds, each bounded by git's timeout), then views, plans and finishes in one synchronous step.
   */
  private settle<T>(
    calls: PendingCall[],
    wait: Promise<void> | undefined,
    finish: (views: DirectoryView[], plan: DeliveryPlan, unviewed: Unviewed) => T,
    shown: (views: DirectoryView[], folders: RuleFolder[]) => Shown = () => ({}),
    round = 0,
  ): T | Promise<T> {
    if (wait) {
      const again = () => this.settle(calls, undefined, finish, shown, round + 1);
      return wait.then(again, again);
    }
    const discovery = this.discovery;
    // Cleared once before all the calls' views, so that each call's questions reach git, not only the last one's.
    discovery?.gitAnswers.wanted.clear();
    const unviewed: Unviewed = new Map();
    const views = discovery ? mergeViews(calls.map((call) => this.viewsOf(discovery, call, unviewed))) : [];
    const withRules = this.options.rules ? discovery : undefined;
    const folders = withRules ? ruleFoldersFor(withRules, views, this.options.ruleSources) : [];
    const seen = shown(views, folders);
    const plan = planDelivery(this.ledger, {
      views,
      ...seen,
      leaveAlone: this.leftAloneBy(calls),
      startupSkills: this.startupSkills,
      cwdReal: discovery?.cwdReal,
    });
    const touched = calls.flatMap((call) => call.touched);
    if (withRules)
      planRules(this.ledger, plan, { discovery: withRules, folders, touched, options: this.options, ...seen });
    if (!discovery || round > C.MAX_IMPORT_DEPTH) return finish(views, plan, unviewed);
    // What the views and plan just built left open (imports, rule folders).
    const open = () => [...discovery.gitAnswers.wanted, ...chainQuestions(discovery, calls)];
    const answers = askGit(discovery, this.git, open);
    return answers ? this.settle(calls, answers, finish, shown, round) : finish(views, plan, unviewed);
  }

  /** Resolves once git has answered all that views of these chains ask (`/lazy-agents why` waits so too). */
  async settled(chains: Located[], withSkills: boolean): Promise<void> {
    await this.settle([{ toolName: "ls", target: "", chains, withSkills, touched: [] }], undefined, () => undefined);
  }

  /** A call's views, its chains located again when the tool may have made their folders or instruction files. */
  private viewsOf(discovery: Discovery, call: PendingCall, unviewed: Unviewed): DirectoryView[] {
    // A command may create or change a word named like an instruction file (`>`, `tee`, `sed -i`).
    const names = (use: ShellWordUse) =>
      use.role !== "skip" && this.options.fileNames.includes(posix.basename(use.path));
    // A write named otherwise into a folder that holds a link may have made an instruction file there through it
    // (`NOTES.md -> AGENTS.md`): looked at only where the folder's listing holds a link; a plain write costs nothing.
    const folder = call.chains[0]?.links.at(-1)?.dir ?? discovery.cwdReal;
    const throughLink = () => discovery.directories.peek(folder)?.links !== false && this.writesOf(call) !== undefined;
    if (call.commands?.some(({ uses }) => uses.some(names))) {
      call.chains = locateShellWords(discovery, call.commands, this.boundCwd ?? discovery.cwdReal).chains;
    } else if (call.relocate || (call.toolName === "write" && call.mayLink && throughLink())) {
      const located = locateChain(discovery, call.target, false);
      call.chains = located ? [located] : [];
    }
    return mergeViews(call.chains.map((located) => viewChain(discovery, located, call.withSkills, unviewed)));
  }

  /**
   * Instruction files that sibling calls still write: these calls' plans leave them to the writer's result. Of two
   * calls that name one file (an edit and a command showing it), the later result carries it, viewed after both ran.
   */
  private leftAloneBy(calls: PendingCall[]): ReadonlySet<string> {
    const others = [...this.pending.values()].filter((call) => !calls.includes(call));
    return new Set(others.flatMap((call) => this.writesOf(call) ?? []));
  }

  /** Runs a due cache sweep after the current call, so no tool call pays for it. */
  private sweepSoon(discovery: Discovery): void {
    if (this.sweepScheduled || !discovery.wantsSweep()) return;
    this.sweepScheduled = true;
    setImmediate(() => {
      this.sweepScheduled = false;
      try {
        if (discovery === this.discovery && discovery.sweep())
          this.inspection.prune((scope) => discovery.exists(join(discovery.cwdReal, scope)));
      } catch {
        // Outside any hook: counted as a hook's failure is. The caches stay as they were: correct, only larger.
        this.noteFailure("sweep");
      }
    });
  }

  /**
   * Activation, after the tool ran: the patch for this result, or undefined to leave it alone.
   * A nested call's activation waits for its outermost call's result, which views them all.
   */
  onToolResult(
    event: ToolResultEvent,
    warn: (text: string) => void,
  ): ResultOutcome | undefined | Promise<ResultOutcome | undefined> {
    const call = this.pending.get(event.toolCallId);
    const rootId = this.rootOf.get(event.toolCallId);
    this.endCall(event.toolCallId);
    const own = call !== undefined && activates(call.toolName, event.isError) ? call : undefined;
    if (own && rootId !== undefined) {
      this.nested.set(rootId, [...(this.nested.get(rootId) ?? []), own]);
      return undefined;
    }
    const calls = [...(this.nested.get(event.toolCallId) ?? []), ...(own ? [own] : [])];
    this.nested.delete(event.toolCallId);
    if (calls.length === 0) return undefined;
    // A command's output is never counted as showing a file: its reminder carries what its words activate.
    const shown = (views: DirectoryView[], folders: RuleFolder[]) =>
      own && !own.commands ? this.shownByTool(own, event, views, folders) : {};
    // A file tool's reminder is for the path its call names; a command's or a script's names the paths it touched.
    const named = calls.length > (own ? 1 : 0) || own?.commands !== undefined;
    const finish = (views: DirectoryView[], plan: DeliveryPlan, unviewed: Unviewed) => {
      this.inspection.record(views);
      if (named) plan.touched = calls.flatMap((c) => c.touched);
      // Only the user hears of a folder or skill that could not be read: the model is told of no refused skill, and
      // of a folder, which mostly holds no instruction file, a notice would mostly be noise. A folder named like an
      // instruction file is refused as one too: the user hears that line once, with the reminder's.
      for (const { path, reason } of plan.record.skipped) this.toldUser.set(path, reason);
      for (const [path, reason] of unviewed)
        if (reason === "unreadable") warnOnce(this.toldUser, { path, reason }, warn);
      for (const view of views)
        for (const { path, reason, kind } of view.rejected)
          if (kind === "skill" && reason === "unreadable") warnOnce(this.toldUser, { path, reason }, warn);
      return this.deliver(event, plan);
    };
    return this.settle(calls, joinAnswers(...calls.map((c) => c.gitAnswer)), finish, shown);
  }

  /** What of an instruction file, a rule or an import the tool's own output already shows the model. */
  private shownByTool(call: PendingCall, event: ToolResultEvent, views: DirectoryView[], folders: RuleFolder[]): Shown {
    // A write, when a view offers an instruction file, is judged also by where it leads.
    const writes = call.toolName === "write" && views.some((view) => view.file) ? this.writesOf(call) : call.writes;
    const named = writes !== undefined || this.options.fileNames.includes(basename(call.target));
    // A read named otherwise may show one through a link (`NOTES.md -> AGENTS.md`) or be an import: its target is
    // resolved only when the chain imports something or offers a file the model lacks (and the target is inside cwd
    // by its text, where a name lookup stays), so a warm read costs no call.
    const lacks = (file?: InstructionFile) => !!file && this.ledger.get("file", file.path)?.version !== file.version;
    const inside = () => this.discovery !== undefined && mayBeInside(this.discovery, call.target);
    const look =
      !named && call.toolName === "read" && views.some((v) => v.imports.length > 0 || (lacks(v.file) && inside()));
    // A read or write by a name a rule file is listed or resolves by, or a rule imports, may show that file: only
    // then is its target resolved, so that a read of another file costs no call.
    const ruleNamed = () => folders.some((folder) => ruleNames(this.discovery!, folder).has(basename(call.target)));
    const ruled = !named && (call.toolName === "read" || call.toolName === "write") && ruleNamed() && inside();
    const target = named || look || ruled ? this.realTarget(call) : undefined;
    const shows = ruled || (look && viewedFiles(views).some((file) => file.realPath === target));
    if (target === undefined || !(named || shows)) return {};
    // A failed write showed nothing: the file on disk is still the one the model lacks.
    if (call.toolName === "write") return event.isError ? {} : { shownWhole: target };
    if (!isReadToolResult(event)) return {};
    const partial = event.input.offset !== undefined || event.input.limit !== undefined;
    return partial || event.details?.truncation?.truncated === true ? { shownInPart: target } : { shownWhole: target };
  }

  private deliver(event: ToolResultEvent, plan: DeliveryPlan): ResultOutcome | undefined {
    const empty = () =>
      plan.record.files.length + (plan.record.rules?.length ?? 0) === 0 && !recordShowsText(plan.record);
    if (empty()) return undefined;
    fitPlanToBudget(plan, this.options.budgetBytes);
    // A budget that leaves out everything still names what it left out, so the model can read it.
    if (empty() && !plan.leftOut) return undefined;
    // Planned and applied with no await in between: a sibling's result plans against this delivery.
    const text = recordShowsText(plan.record) || plan.leftOut ? formatReminder(plan) : undefined;
    const patch: ToolResultEventResult = { details: withRecord(event.details, plan.record) };
    // The model's own read of the file shows it: that text, as the tool left it, confirms it.
    if (text === undefined) plan.record.reminder = shownDigest(event);
    else {
      plan.record.reminder = versionOf(text);
      patch.content = [...event.content, { type: "text", text }];
      if (event.structuredContent !== undefined) patch.structuredContent = event.structuredContent;
    }
    if (this.unconfirmed.size >= C.MAX_UNCONFIRMED_RESULTS)
      this.unconfirmed.delete(this.unconfirmed.keys().next().value!);
    this.unconfirmed.set(event.toolCallId, plan.record);
    this.ledger.apply(plan.record);
    return { answer: patch, record: plan.record };
  }

  /**
   * Checks this turn's deliveries against the tool results Pi persisted. An extension that runs
   * after this one may replace a result (an image alone), cut or redact the reminder: that
   * delivery never reached the model, so the ledger must be rebuilt from what the session holds,
   * and the next access in its scope sends it again. One that replaced `details` only left the
   * reminder whole: its record is rescued into an entry of its own (`recordsInContext` reads it).
   */
  confirmTurn(toolResults: TurnEndEvent["toolResults"]): { lost: Set<LedgerRecord>; rescued: RescuedRecord[] } {
    const rescued: RescuedRecord[] = [];
    const lost = new Set<LedgerRecord>();
    for (const message of toolResults) {
      const record = this.unconfirmed.get(message.toolCallId);
      if (!record) continue;
      if (!projectionShows([message], record)) lost.add(record);
      else if (readRecord(message.details) === undefined) rescued.push({ toolCallId: message.toolCallId, record });
    }
    this.unconfirmed.clear();
    return { lost, rescued };
  }

  /** Applies new options; the folder caches start over when an option they depend on changes. */
  configure(options: Options): void {
    const discovered = (o: Options) =>
      JSON.stringify([o.fileNames, [...o.ignoredDirs].sort(), o.maxFileBytes, o.imports]);
    if (discovered(this.options) !== discovered(options)) {
      this.discovery = undefined;
      this.inspection.clear();
    }
    this.options = options;
    this.gate = options.gateWrites
      ? (this.gate ?? { records: new Map(), scopes: new Set(), rules: new Set(), retries: new Map() })
      : undefined;
  }

  /** Forgets a call that ended without a result (blocked after our tool_call, or aborted). */
  endCall(toolCallId: string): void {
    this.pending.delete(toolCallId);
    this.rootOf.delete(toolCallId);
  }

  /** Forgets what calls that never reached their result left behind; all calls of the turn are done. */
  endTurn(): void {
    const gate = this.gate ? [this.gate.records, this.gate.scopes, this.gate.rules] : [];
    for (const map of [this.pending, this.nested, this.rootOf, this.unconfirmed, this.checks.pending, ...gate])
      map.clear();
  }

  /** For tests and the soak run. */
  stateSizes(): Record<string, number> {
    return {
      pending: this.pending.size,
      nested: this.nested.size,
      parentOf: this.rootOf.size,
      unconfirmed: this.unconfirmed.size,
      gateRecords: this.gate?.records.size ?? 0,
      gatedScopes: (this.gate?.scopes.size ?? 0) + (this.gate?.rules.size ?? 0),
      gateRetries: this.gate?.retries.size ?? 0,
      inspectedScopes: this.inspection.size,
      ledgerFiles: this.ledger.held.file.size,
      ledgerRules: this.ledger.held.rule.size,
      ledgerScopes: Object.values(this.ledger.byScope).reduce((sum, scopes) => sum + scopes.size, 0),
      ledgerImports: this.ledger.importsByScope.size,
      ledgerSkills: this.ledger.held.skill.size,
      ledgerWithdrawn: Object.values(this.ledger.withdrawn).reduce((sum, paths) => sum + paths.size, 0),
      ledgerSkipped: this.ledger.skipped.size,
      ledgerAlsoGoverns: this.ledger.alsoGoverns.size,
      ...this.discovery?.cacheSizes(),
    };
  }
}

/**
 * The write gate's state, present only while `gateWrites` is on. Pi persists a held call's reason as its error
 * result, which `records` waits for. Pi runs every sibling's tool_call before any result reaches the model, so a
 * sibling write into a scope held for in this turn (`scopes`), or where a rule held for applies (`rules`), is held
 * too. A target held once (`retries`, with the digest of its reason) goes through when it is tried again, as the
 * reason promises, while the model can still see that reason.
 */
interface WriteGate {
  records: Map<string, LedgerRecord>;
  scopes: Set<string>;
  rules: Set<string>;
  retries: Map<string, string>;
}

function activates(toolName: string, isError: boolean): boolean {
  // A failing bash command (a test run) is exactly when a scope's rules matter.
  return toolName === "edit" || toolName === "write" || toolName === "bash" || !isError;
}

/** Lists of views (a call's, a chain's) as one view per scope, parent first; a later view of a scope is the fresher. */
function mergeViews(lists: DirectoryView[][]): DirectoryView[] {
  // One list is merged already: one call's, or one chain's, parent first (A/B, warm depth-8 reads: 0.98; bench: 3% of
  // a warm call, peer_over_ours_nogit).
  if (lists.length === 1) return lists[0]!;
  const views = lists.flat();
  // Chains that nest are still parent first, each inside the last (profile: sorting them was 5% of a warm call).
  const below = (view: DirectoryView, i: number) => {
    const up = views[i - 1]?.scope;
    return up === undefined || (view.scope.startsWith(up) && view.scope[up.length] === "/");
  };
  if (views.every(below)) return views;
  const byScope = new Map(views.map((view) => [view.scope, view]));
  // Depths once, not per comparison (profile: splitting scopes in the comparator was a tenth of a warm read).
  const depths = new Map([...byScope.values()].map((view) => [view, view.scope.split("/").length]));
  return [...depths.keys()].sort((a, b) => depths.get(a)! - depths.get(b)! || a.scope.localeCompare(b.scope));
}

function withRecord(details: unknown, record: LedgerRecord): Record<string, unknown> {
  return { ...(isObject(details) ? details : {}), [C.DETAILS_KEY]: record };
}

/** cwd-relative path of a tool's target with forward slashes, for rule globs; undefined outside cwd. */
function touchedPath(discovery: Discovery, target: string, cwd: string): string | undefined {
  const rel = relativeInside(discovery.cwdReal, target) ?? relativeInside(resolve(cwd), target);
  return rel === undefined || sep === "/" ? rel : rel.split(sep).join("/");
}

// =============================================================================================
// 2b. Checks (hookify). Claude Code's hookify rules (`.claude/hookify.<name>.local.md`), read with hookify's own parser
// and applied with its fields, operators and precedence in Pi's events: tool_call of bash, edit, write and read
// (hookify's PreToolUse meets every tool; a read offers its path); input (prompt); agent_before_settle (stop). A
// folder's `.claude` governs the paths inside it. A warm call stats cwd's `.claude`, each rule folder and rule file,
// and reads nothing: an edit, write or read locates its chain for delivery too, and the chain's folder entries tell
// which folders hold a `.claude`. Regexes that could run away share one time bound in `node:vm`.

type CheckCondition = { field: string; operator: string; pattern: string; regex?: RegExp };

/** A rule and the version of its file it was compiled from. */
type Check = ReturnType<typeof hookifyRule> & { loaded: InstructionFile; skipKey: string };

/**
 * What a call offers the rules: the event, the tool, each field's values (file_path has two), its path's chain. The
 * fields are made only when a rule asks for them: a stop's transcript is the whole session's text.
 */
interface CheckInput {
  event: "bash" | "file" | "prompt" | "stop";
  toolName?: string;
  fields: () => Record<string, string[]>;
  located?: Located;
}

/** A folder whose `.claude` governs a call, with its stats when the call's chain took them. */
type CheckBase = Pick<ChainLink, "dir" | "scope"> & { stats?: nodeFs.Stats };

export class CheckState {
  /** The scopes whose `.claude` was last found a folder, for the report. */
  readonly scopes = new Set<string>();
  readonly compiled = new WeakMap<InstructionFile, Check>();
  /** Rule versions skipped for the session, by path and version. */
  readonly skipped = new Map<string, CheckSkip>();
  /** Rule files refused (a link out of cwd, too large), by path: each reason is told once. */
  readonly refused = new Map<string, Reason>();
  readonly fired = new Map<string, number>();
  /** Warnings waiting for their call's result. */
  readonly pending = new Map<string, string>();
  /** Whether a stop was sent back since the last prompt. */
  continued = false;
  /** The rule a call's budget stopped at: the next call's bounded matches start with it. */
  late?: Check;
  /** The last edit, write or read the checks located, for delivery to take instead of locating it again. */
  located?: { id: string; located: Located; target: string; rel?: string };
}

/** Python's `str.strip()`, as hookify strips: its whitespace is not JavaScript's. */
function strip(text: string): string {
  const rest = text.replace(C.PYTHON_SPACE_START, "");
  // The end is walked, not matched: a `\s+$` regex is quadratic on a long run of spaces inside a text.
  const end = trailingRun(rest, (char) => C.PYTHON_SPACE_START.test(char));
  return rest.slice(0, end);
}

/** hookify's value cleaning: whitespace, then every `"` and then every `'` at both ends; backslashes stay. */
function hookifyValue(text: string): string {
  let value = strip(text);
  for (const quote of ['"', "'"]) {
    const end = trailingRun(value, (char) => char === quote);
    value = value.slice(0, end).replace(new RegExp(`^${quote}+`), "");
  }
  return value;
}

/** `key: value` pairs, split at their first colon, as hookify's list items are. */
function hookifyPairs(parts: string[]): Record<string, string> {
  return Object.fromEntries(
    parts.map((part) => [strip(part.split(":", 1)[0]!), hookifyValue(part.slice(part.indexOf(":") + 1))]),
  );
}

// Exported for tests: the table of hookify's own examples.
/** hookify's `extract_frontmatter`, line for line: not YAML (no inline comments, no escapes). */
export function hookifyFrontmatter(content: string): { frontmatter: Record<string, unknown>; message: string } {
  const second = content.startsWith("---") ? content.indexOf("---", 3) : -1;
  if (second === -1) return { frontmatter: {}, message: content };
  const frontmatter: Record<string, unknown> = Object.create(null);
  let key = "";
  let list: unknown[] | undefined;
  let dict: Record<string, string> | undefined;
  const save = () => {
    if (list === undefined || key === "") return;
    if (dict) list.push(dict);
    frontmatter[key] = list;
    list = dict = undefined;
  };
  for (const line of content.slice(3, second).split("\n")) {
    const stripped = strip(line);
    if (stripped === "" || stripped.startsWith("#")) continue;
    const indent = line.length - line.replace(C.PYTHON_SPACE_START, "").length;
    if (indent === 0 && line.includes(":") && !stripped.startsWith("-")) {
      save();
      const at = line.indexOf(":");
      const value = hookifyValue(line.slice(at + 1));
      const lower = value.toLowerCase();
      if (strip(line.slice(at + 1)) === "") [key, list] = [strip(line.slice(0, at)), []];
      else frontmatter[strip(line.slice(0, at))] = lower === "true" ? true : lower === "false" ? false : value;
    } else if (stripped.startsWith("-") && list) {
      if (dict) list.push(dict);
      dict = undefined;
      const item = strip(stripped.slice(1));
      if (!item.includes(":")) list.push(hookifyValue(item));
      else if (item.includes(",")) list.push(hookifyPairs(item.split(",").filter((part) => part.includes(":"))));
      else dict = hookifyPairs([item]);
    } else if (indent > 2 && dict && line.includes(":")) Object.assign(dict, hookifyPairs([stripped]));
  }
  save();
  return { frontmatter, message: strip(content.slice(second + 3)) };
}

/** Python's truth of a parsed value: a non-empty string or list, or true. */
function pythonTruth(value: unknown): boolean {
  return value === true || (typeof value === "string" && value !== "") || (Array.isArray(value) && value.length > 0);
}

/** Python's `str()` of a parsed scalar. */
function pythonText(value: unknown, fallback: string): string {
  return value === true ? "True" : value === false ? "False" : typeof value === "string" ? value : fallback;
}

/** Under `u`, what Python escapes as itself (`\-`, `\:`) or by its `octal` code (`\012`) is written by its code. */
function unicodeEscape(escape: string, octal?: string): string {
  if (octal === undefined && /^\\[\p{L}\p{N}^$\\.*+?()[\]{}|/]$/u.test(escape)) return escape;
  const code = octal === undefined ? escape.codePointAt(1)! : Number.parseInt(octal, 8);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`;
}

// Escapes, classes and quantifiers are tokens of their own, so a `$` or `{` in them stays what it is. A class that
// never closes runs to the end, as one token that does not compile: looking for its `]` from each `[` took quadratic
// time. Outside a class, Python's octal escape is `\0` and up to two digits more, or three digits up to `\377`; any
// other `\1`… is a backreference. Verbose (re.X) also reads whitespace and `#` comments, which it drops.
const PYTHON_TOKEN = String.raw`\\(0[0-7]{0,2}|[0-3][0-7]{2})|\\[^]|\[\^?\]?(?:\\[^]|[^\\\]])*\]?|\(\?P<|\(\?P=(\w+)\)|\{(?:\d+(?:,\d*)?|,\d+)\}|[$^.{}\]]`;
const PYTHON_TOKENS = {
  plain: new RegExp(PYTHON_TOKEN, "gu"),
  verbose: new RegExp(`${PYTHON_TOKEN}|#[^\\n]*|[\\t-\\r ]`, "gu"),
};

/** A Python pattern's body as a JavaScript source for the `u` flag, which reads code points as Python does. */
function pythonSource(body: string, flags: string): string {
  const tokens = PYTHON_TOKENS[flags.includes("x") ? "verbose" : "plain"];
  return body.replace(tokens, (found, octal?: string, name?: string) => {
    if (octal !== undefined) return unicodeEscape(found, octal);
    if (name !== undefined) return `\\k<${name}>`;
    if (/^[#\t-\r ]/.test(found)) return "";
    // Python reads a `]` that opens a class as a member; JavaScript as the end of an empty class.
    const token = found.replace(/^\[(\^?)\]/, "[$1\\]");
    // Python's `.` stops only at a newline; JavaScript's also at `\r`, U+2028 and U+2029.
    if (token === ".") return flags.includes("s") ? token : "[^\\n]";
    // Python's `{,n}` is `{0,n}`; a brace or bracket that closes nothing is itself.
    if (token.length > 2 && token.startsWith("{")) return token.replace("{,", "{0,");
    // With re.M, `^` and `$` are at a newline, where JavaScript's are at \r, U+2028 and U+2029 too.
    if (token === "^") return flags.includes("m") ? "(?<![^\\n])" : token;
    if (token === "$" && flags.includes("m")) return "(?![^\\n])";
    if (token.length === 1 && token !== "$" && token !== "[") return `\\${token}`;
    // In a class, every escaped run of octal digits is a code, as in Python.
    if (token.startsWith("["))
      return token.replace(/\\([0-7]{1,3})|\\[^]/gu, (escape, code?: string) =>
        code === undefined ? (C.PYTHON_UNICODE_IN_CLASS[escape] ?? unicodeEscape(escape)) : unicodeEscape(escape, code),
      );
    return C.PYTHON_REGEX_TOKENS[token] ?? C.PYTHON_UNICODE_TOKENS[token] ?? unicodeEscape(token);
  });
}

// Exported for tests: Python-only regex syntax, translated.
/**
 * A hookify (Python) pattern as a JavaScript regex, case-insensitive, under `u`; undefined when it does not
 * compile. Python takes global flags only at its start, in one group or several.
 */
export function hookifyRegex(pattern: string): RegExp | undefined {
  const inline = /^(?:\(\?[imsx]+\))+/.exec(pattern)?.[0] ?? "";
  const flags = `i${[...new Set(inline.replace(/[^msx]/g, ""))].join("")}`;
  try {
    return new RegExp(pythonSource(pattern.slice(inline.length), flags), `${flags.replace("x", "")}u`);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

// Exported for tests: the field mapping and the examples' rules.
/** hookify's `Rule.from_dict` over its parser's output, and whether the rule can be used at all. */
export function hookifyRule(text: string) {
  const { frontmatter, message } = hookifyFrontmatter(text);
  // No frontmatter, a condition that is not a mapping, or a pattern that does not compile.
  let invalid = Object.keys(frontmatter).length === 0;
  // A list is kept as its text, which no event equals: hookify loads such a rule for no event.
  const event =
    frontmatter.event === undefined ? "all" : pythonText(frontmatter.event, JSON.stringify(frontmatter.event));
  const conditionList = Array.isArray(frontmatter.conditions) ? frontmatter.conditions : [];
  const items = conditionList as Array<string | Record<string, string | undefined>>;
  if (items.some((item) => typeof item === "string")) invalid = true;
  const conditions: CheckCondition[] = items
    .filter((item) => typeof item !== "string")
    .map(({ field = "", operator = "regex_match", pattern = "" }) => ({ field, operator, pattern }));
  const simple = frontmatter.pattern;
  if (pythonTruth(simple) && conditions.length === 0) {
    if (typeof simple !== "string") invalid = true;
    const field = C.CHECK_PATTERN_FIELDS.get(event) ?? "content";
    conditions.push({ field, operator: "regex_match", pattern: String(simple) });
  }
  for (const condition of conditions.filter(({ operator }) => operator === "regex_match"))
    if ((condition.regex = hookifyRegex(condition.pattern)) === undefined) invalid = true;
  // hookify splits a truthy matcher as text: a list or `true` raises there, so the rule applies to no call.
  const matcher = frontmatter.tool_matcher;
  if (pythonTruth(matcher) && typeof matcher !== "string") invalid = true;
  return {
    name: pythonText(frontmatter.name, "unnamed"),
    enabled: frontmatter.enabled === undefined || pythonTruth(frontmatter.enabled),
    event,
    action: pythonText(frontmatter.action, "warn"),
    toolMatcher: typeof matcher === "string" ? matcher : undefined,
    conditions,
    message,
    invalid,
  };
}

/** cwd, then the folders of a located chain down to the first ignored one: the folders whose `.claude` governs it. */
function checkBases(discovery: Discovery, located: Located | undefined): CheckBase[] {
  const bases: CheckBase[] = [{ dir: discovery.cwdReal, scope: "" }];
  for (const [index, link] of (located?.links ?? []).entries()) {
    if (discovery.options.ignoredDirs.has(link.name)) break;
    bases.push({ dir: link.dir, scope: link.scope, stats: located!.stats?.[index] });
  }
  return bases;
}

/** The rule files of these folders, compiled once per version: a folder's listing, then a stat per file. */
function checksIn(discovery: Discovery, state: CheckState, bases: CheckBase[], warn = (_: string) => {}): Check[] {
  const checks: Check[] = [];
  const warnRefused = (written: string, reason: Reason | "skip" | "held") => {
    if (reason !== "skip" && reason !== "held")
      warnOnce(state.refused, { path: toDisplayPath(discovery.cwdReal, written), reason }, warn);
  };
  for (const { dir, scope, stats } of bases) {
    // Most folders hold no `.claude`: the folder's entry, kept while its signature stands, says so for no call.
    const holds = stats === undefined || discovery.directoryEntry(dir, stats)?.homes.get(C.CHECK_DIR_NAME) !== "none";
    // A folder without one only leaves the scopes: no path joined (bench: peer_over_ours_nogit, a warm call's chain).
    if (!holds) {
      state.scopes.delete(scope);
      continue;
    }
    const home = entryPath(dir, C.CHECK_DIR_NAME);
    // One that cannot be listed now (EIO) hides its rules: the call runs, and the user hears that they did not.
    const listed = fsOr(null, () => discovery.listedAt(home));
    if (listed === null) warnRefused(home, "unreadable");
    const { folder, listing } = listed ?? {};
    if (listing) state.scopes.add(scope);
    else state.scopes.delete(scope);
    for (const { name, kind } of listing ? sortedNames(listing) : []) {
      if ((kind !== "file" && kind !== "link") || !C.CHECK_FILE_NAME.test(name)) continue;
      const file = discovery.sourceFileOrUnknown(entryPath(folder!, name), scope);
      if ("reason" in file) {
        warnRefused(entryPath(home, name), file.reason);
        continue;
      }
      let check = state.compiled.get(file);
      const skipKey = `${file.path}\0${file.version}`;
      // hookify reads a rule in Python's text mode, which keeps a BOM: its text then has no frontmatter.
      const text = file.bom ? `\uFEFF${file.text}` : file.text;
      if (!check) state.compiled.set(file, (check = { ...hookifyRule(text), loaded: file, skipKey }));
      checks.push(check);
    }
  }
  return checks;
}

function skipCheck(state: CheckState, check: Check, why: CheckSkip, warn: (text: string) => void): void {
  state.skipped.set(check.skipKey, why);
  warn(C.checkSkippedWarning(oneLine(check.name), why));
}

function checkStateOf(state: CheckState, check: Check, trusted: boolean): string {
  const skipped = check.invalid ? "invalid" : state.skipped.get(check.skipKey);
  return C.CHECK_STATES[!trusted ? "untrusted" : (skipped ?? (check.enabled ? "active" : "disabled"))];
}

/** One regex test of a call for a rule, and what it found: a match or not, or that it ran out of time twice. */
type RegexTest = { regex: RegExp; text: string; of: Check; matched?: boolean; timedOut?: true };

// One sandbox for every bounded match: its script keeps which test runs, so that the watchdog's
// interrupt names the runaway regex.
let checkSandbox: { context: Context; script: Script } | undefined;

/**
 * Runs each rule's tests, under C.CHECK_MATCH_TIMEOUT_MS together unless they cannot run away: a rule
 * of many patterns, each quick, must not cost a call more. The rule whose test times out runs once more
 * alone, so that a busy machine pausing the process does not condemn plain patterns; timing out twice marks it.
 * Past C.CHECK_CALL_BUDGET_MS the rest are not run (they match nothing): returns the rule they start with.
 */
function boundedMatches(tests: RegexTest[], late?: Check): Check | undefined {
  const slow = tests.filter((test) => {
    const small = test.text.length * test.regex.source.length <= C.CHECK_UNBOUNDED_MATCH_STEPS;
    if (small && C.BACKTRACK_FREE.test(test.regex.source)) test.matched = test.regex.test(test.text);
    return test.matched === undefined;
  });
  if (slow.length === 0) return undefined;
  // The rule the last call's budget stopped at goes first: each call marks a runaway rule, none is starved.
  const first = slow.findIndex((test) => test.of === late);
  if (first > 0) slow.unshift(...slow.splice(first));
  const started = performance.now();
  const { context, script } = (checkSandbox ??= {
    context: createContext({}),
    script: new Script("for (; i < until; i++) tests[i].matched = tests[i].regex.test(tests[i].text);"),
  });
  const run = (from: number, until: number): boolean => {
    Object.assign(context, { tests: slow, i: from, until });
    try {
      script.runInContext(context, { timeout: C.CHECK_MATCH_TIMEOUT_MS });
      return true;
    } catch (error) {
      if (errorCode(error) !== "ERR_SCRIPT_EXECUTION_TIMEOUT") throw error;
      return false;
    } finally {
      context.tests = undefined;
    }
  };
  for (let from = 0; from < slow.length && !run(from, slow.length);) {
    // The interrupt may land after the last test, before the run returns.
    const at = context.i as number;
    if (at >= slow.length) break;
    let [start, end] = [at, at + 1];
    while (start > from && slow[start - 1]!.of === slow[at]!.of) start--;
    while (end < slow.length && slow[end]!.of === slow[at]!.of) end++;
    if (!run(start, end)) slow[at]!.timedOut = true;
    from = end;
    if (from < slow.length && performance.now() - started >= C.CHECK_CALL_BUDGET_MS) return slow[from]!.of;
  }
  return undefined;
}

function operatorHolds(operator: string, pattern: string, value: string): boolean {
  if (operator === "contains") return value.includes(pattern);
  if (operator === "equals") return value === pattern;
  if (operator === "not_contains") return !value.includes(pattern);
  if (operator === "starts_with") return value.startsWith(pattern);
  return operator === "ends_with" && value.endsWith(pattern);
}

function toolMatches(matcher: string | undefined, toolName: string | undefined): boolean {
  if (matcher === undefined || matcher === "" || matcher === "*") return true;
  const name = toolName === "edit" ? ["edit", "multiedit"] : [toolName ?? ""];
  return matcher.split("|").some((part) => name.includes(part.trim().toLowerCase()));
}

/** The checks that match this input; an invalid or timed-out rule is skipped for the session, warned once. */
function matchingChecks(state: CheckState, checks: Check[], input: CheckInput, warn: (text: string) => void): Check[] {
  const plans: Array<{ check: Check; conditions: Array<boolean | RegexTest[]> }> = [];
  let fields: Record<string, string[]> | undefined;
  for (const check of checks) {
    if (check.enabled && check.invalid && !state.skipped.has(check.skipKey)) skipCheck(state, check, "invalid", warn);
    if (!check.enabled || state.skipped.has(check.skipKey)) continue;
    if ((check.event !== "all" && check.event !== input.event) || check.conditions.length === 0) continue;
    if (!toolMatches(check.toolMatcher, input.toolName)) continue;
    const conditions = check.conditions.map(({ field, operator, pattern, regex }) => {
      fields ??= input.fields();
      const values = Object.hasOwn(fields, field) ? fields[field]! : [];
      // A path has two values (as given, from cwd): not_contains holds when neither has the pattern.
      const holds = (value: string) => operatorHolds(operator, pattern, value);
      if (!regex) return operator === "not_contains" ? values.length > 0 && values.every(holds) : values.some(holds);
      return values.map((text) => ({ regex, text, of: check }));
    });
    plans.push({ check, conditions });
  }
  const tests = plans.flatMap(({ conditions }) => conditions.flatMap((c) => (Array.isArray(c) ? c : [])));
  const late = boundedMatches(tests, state.late);
  if (late && !state.late) warn(C.CHECKS_LATE_WARNING);
  state.late = late ?? state.late;
  const matched: Check[] = [];
  for (const { check, conditions } of plans) {
    if (conditions.some((c) => Array.isArray(c) && c.some((test) => test.timedOut)))
      skipCheck(state, check, "timedOut", warn);
    else if (conditions.every((c) => (Array.isArray(c) ? c.some((test) => test.matched) : c))) matched.push(check);
  }
  return matched;
}

/** hookify's precedence: block over ask (tool calls only) over warn; the winning rules' messages joined. */
function checkVerdict(state: CheckState, matched: Check[], toolCall: boolean) {
  const bucket = (check: Check) =>
    check.action === "block" ? "block" : check.action === "ask" && toolCall ? "ask" : "warn";
  const action = (["block", "ask", "warn"] as const).find((a) => matched.some((check) => bucket(check) === a));
  if (!action) return undefined;
  const checks = matched.filter((check) => bucket(check) === action);
  for (const check of checks) state.fired.set(check.loaded.path, (state.fired.get(check.loaded.path) ?? 0) + 1);
  const files = [...new Set(checks.map((check) => reminderField(check.loaded.path)))];
  const body = checks.map((check) => `**[${check.name}]**\n${check.message}`).join("\n\n");
  const inner = neutralizeClosingTags(`${C.checksIntro(files)}\n${body}`);
  const names = checks.map((check) => oneLine(check.name));
  return { action, names, text: `${C.CHECKS_OPEN}\n${inner}\n${C.CHECKS_CLOSE}` };
}

// Exported for tests: the table of the field mapping.
/** The fields hookify names, from a bash, edit, write or read call's input (`rel`: its path from cwd). */
export function checkFields(toolName: string, input: Record<string, unknown>, rel?: string): Record<string, string[]> {
  const text = (value: unknown) => (typeof value === "string" ? value : "");
  if (toolName === "bash") return { command: [text(input.command)] };
  const given = text(input.path);
  const file_path = rel === undefined || rel === given ? [given] : [given, rel];
  // hookify's Read has no new_string or old_string: a rule on them meets no read.
  if (toolName === "read") return { file_path };
  const edits = Array.isArray(input.edits) ? (input.edits as unknown[]) : [input];
  const joined = (key: string) => edits.map((edit) => text((edit as Record<string, unknown> | null)?.[key])).join(" ");
  const added = [toolName === "write" ? text(input.content) : joined("newText")];
  const removed = [toolName === "write" ? "" : joined("oldText")];
  return { file_path, new_text: added, new_string: added, content: added, old_text: removed, old_string: removed };
}

/** The session's text so far, as a stop check reads it: messages, tool calls and their results. */
function transcriptOf(messages: AgentBeforeSettleEvent["context"]["llmMessages"]): string {
  const parts: string[] = [];
  for (const { content } of messages) {
    for (const block of typeof content === "string" ? [{ type: "text" as const, text: content }] : content) {
      if (block.type === "text") parts.push(block.text);
      else if (block.type === "toolCall") parts.push(`${block.name} ${JSON.stringify(block.arguments)}`);
    }
  }
  return parts.join("\n");
}

/** The checks' hooks. Registered before delivery's, so a warning sits right after the tool's own text. */
function registerChecks(pi: ExtensionAPI, engine: LazyAgents): void {
  const state = engine.checks;
  const guarded = guardFor(engine);
  /** Answers with the rules' verdict on what a call offers, if any; the user hears which rules spoke, unless asked. */
  const withVerdict = <R>(
    ctx: ExtensionContext,
    offered: (discovery: Discovery) => CheckInput,
    answer: (verdict: NonNullable<ReturnType<typeof checkVerdict>>) => R | Promise<R>,
  ) =>
    guarded(ctx, "checks", () => {
      if (!engine.options.enabled || !engine.options.checks || !ctx.isProjectTrusted()) return undefined;
      const discovery = engine.discoveryFor(ctx.cwd);
      if (!discovery) return undefined;
      const input = offered(discovery);
      const warn = (text: string) => tell(ctx, text, "warning");
      const bases = checkBases(discovery, input.located);
      const judge = (checks: Check[]) => {
        // Most calls meet no rule: no plans, no verdict to build (A/B, warm depth-8 calls: p50 −2 µs of about 7).
        if (checks.length === 0) return undefined;
        const verdict = checkVerdict(state, matchingChecks(state, checks, input, warn), input.toolName !== undefined);
        if (!verdict) return undefined;
        if (verdict.action !== "ask" || !ctx.hasUI) {
          const warned = verdict.action === "warn";
          tell(ctx, C.checkNotice(warned ? "warned" : "blocked", verdict.names), warned ? "info" : "warning");
        }
        return answer(verdict);
      };
      discovery.gitAnswers.wanted.clear();
      const checks = checksIn(discovery, state, bases, warn);
      // A linked `.claude` is read once git has said whether it ignores where the link leads.
      const answers = askGit(discovery, engine.git, () => [...discovery.gitAnswers.wanted]);
      return answers ? answers.then(() => judge(checksIn(discovery, state, bases, warn))) : judge(checks);
    });

  pi.on("tool_call", (event, ctx) => {
    const { toolName, toolCallId } = event;
    if (!["bash", "edit", "write", "read"].includes(toolName)) return undefined;
    const offered = (discovery: Discovery): CheckInput => {
      const input = event.input as Record<string, unknown>;
      // A read's path as delivery resolves it, so that delivery can take the chain located here.
      const fallback = toolName === "read" ? discovery.readFallback : undefined;
      const target = toolName === "bash" ? undefined : resolveToolPath(input.path, ctx.cwd, fallback);
      const located = target === undefined ? undefined : locateChain(discovery, target, false);
      const rel = target === undefined ? undefined : touchedPath(discovery, target, ctx.cwd);
      if (located) state.located = { id: toolCallId, located, target: target!, rel };
      // hookify's `_extract_field`: a field of the tool's input itself first, then the event's mapping.
      const text = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value));
      const own = (): Record<string, string[]> =>
        Object.fromEntries(Object.entries(input).map(([key, value]) => [key, [text(value)]]));
      const fields = () => ({ ...checkFields(toolName, input, rel), ...own() });
      return { event: toolName === "bash" ? "bash" : "file", toolName, fields, located };
    };
    return withVerdict(ctx, offered, (verdict) => {
      if (verdict.action === "warn") return void state.pending.set(toolCallId, verdict.text);
      const blocked = { block: true as const, reason: verdict.text };
      if (verdict.action === "block" || !ctx.hasUI) return blocked;
      // The user may take a while: delivery locates the call again once they answer.
      state.located = undefined;
      const question = C.checkNotice("asked", verdict.names);
      return ctx.ui.confirm(C.CHECK_CONFIRM_TITLE, question).then((allowed) => (allowed ? undefined : blocked));
    });
  });

  pi.on("tool_result", (event, ctx) =>
    guarded(ctx, "checks", () => {
      const text = state.pending.get(event.toolCallId);
      if (text === undefined) return undefined;
      state.pending.delete(event.toolCallId);
      const content = [...event.content, { type: "text" as const, text }];
      return { content, structuredContent: event.structuredContent } satisfies ToolResultEventResult;
    }),
  );

  pi.on("input", (event, ctx) => {
    state.continued = false;
    const fields = () => ({ prompt: [event.text], user_prompt: [event.text] });
    const offered = (): CheckInput => ({ event: "prompt", fields });
    return withVerdict(ctx, offered, (verdict) => {
      if (verdict.action === "block") return { action: "handled" as const };
      // Pi reads a `/skill:` command's name up to the first space: the message follows one, as the skill's arguments.
      const gap = event.text.startsWith("/skill:") && !event.text.includes(" ") ? " \n\n" : "\n\n";
      return { action: "transform" as const, text: `${event.text}${gap}${verdict.text}`, images: event.images };
    });
  });

  // A blocked stop sends the model back once per prompt, never in a loop.
  pi.on("agent_before_settle", (event, ctx) => {
    if (state.continued || event.outcome !== "completed") return undefined;
    const fields = () => ({ transcript: [transcriptOf(event.context.llmMessages)], reason: [""] });
    const offered = (): CheckInput => ({ event: "stop", fields });
    return withVerdict(ctx, offered, (verdict) => {
      if (verdict.action !== "block" || state.continued) return undefined;
      state.continued = true;
      const message = { type: "custom_message" as const, customType: C.CHECK_MESSAGE_TYPE, display: true };
      return { entries: [...event.entries, { ...message, content: verdict.text }], continue: true };
    });
  });
}

/** The checks part of `/lazy-agents`: every rule of cwd's and the seen folders' `.claude`, with state and count. */
function checkReport(engine: LazyAgents, env: CallEnvironment): string[] {
  // With the extension off no rule runs: none may be listed as active.
  if (!engine.options.enabled) return ["", C.CHECK_REPORT.offWithExtension];
  if (!engine.options.checks) return ["", C.CHECK_REPORT.off];
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return [];
  const state = engine.checks;
  const scopes = [...new Set(["", ...state.scopes])];
  // A nested `.claude` governs the paths inside it: a command, a prompt or a stop has none, so its rules there never run.
  const rows = scopes.flatMap((scope) =>
    checksIn(discovery, state, [{ scope, dir: join(discovery.cwdReal, scope) }]).map((check) => {
      const pathless = scope !== "" && ["bash", "prompt", "stop"].includes(check.event);
      const shown = pathless ? C.CHECK_STATES.cwdOnly : checkStateOf(state, check, env.trusted);
      const fired = `fired ${state.fired.get(check.loaded.path) ?? 0}`;
      return [check.name, check.loaded.path, check.event, check.action, shown, fired].map(oneLine);
    }),
  );
  return reportSection(C.CHECK_REPORT.heading, rows);
}

/** The checks part of `/lazy-agents why <path>`: the file rules a write there meets, and its path conditions. */
function checkWhy(engine: LazyAgents, env: CallEnvironment, shown: string): string[] {
  const discovery = engine.discoveryFor(env.cwd);
  const target = resolveToolPath(shown, env.cwd);
  if (!engine.options.enabled || !engine.options.checks || !discovery || target === undefined) return [];
  const state = engine.checks;
  const bases = checkBases(discovery, locateChain(discovery, target, false));
  const checks = checksIn(discovery, state, bases).filter((c) => c.event === "file" || c.event === "all");
  if (checks.length === 0) return [C.CHECK_REPORT.whyNone];
  const { file_path } = checkFields("write", { path: shown }, touchedPath(discovery, target, env.cwd));
  const input: CheckInput = { event: "file", toolName: "write", fields: () => ({ file_path: file_path! }) };
  const lines = checks.map((check) => {
    const paths = check.conditions.filter((condition) => condition.field === "file_path");
    const pathOnly = { ...check, enabled: true, event: "file", toolMatcher: undefined, conditions: paths };
    const matches = matchingChecks({ ...state, skipped: new Map() }, [pathOnly], input, () => {}).length > 0;
    const verdict = paths.length === 0 ? "noPathCondition" : matches ? "pathMatches" : "pathNoMatch";
    const about = `${check.loaded.path}, ${check.action}, ${checkStateOf(state, check, env.trusted)}`;
    return `    check ${check.name} (${about}): ${C.CHECK_REPORT[verdict]}`;
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

/**
 * The stored record, read field by field (config.ts lists each kind's): session files outlive versions of this
 * extension, so an entry that does not fit its kind's fields is dropped alone. A field is a typeof name, one of a
 * set of values, or a list. A name ending in `?` is optional, kept only when stored (a flag: when true), so older
 * records read back as written.
 */
type Field = "string" | "number" | "boolean" | ReadonlySet<unknown> | { list: Field | Spec };

type Spec = Readonly<Record<string, Field>>;

type Scalars = { string: string; number: number; boolean: boolean };

type Value<F> = F extends keyof Scalars
  ? Scalars[F]
  : F extends ReadonlySet<infer V>
    ? V
    : F extends { list: infer L }
      ? Array<L extends Field ? Value<L> : Entry<L>>
      : never;

type Entry<S> = { -readonly [K in keyof S as K extends `${string}?` ? never : K]: Value<S[K]> } & {
  -readonly [K in keyof S as K extends `${infer N}?` ? N : never]?: Value<S[K]>;
};

type Section = (typeof C.REMINDER_SECTIONS)[number];

type Explained = (typeof C.EXPLAINED_PARTS)[number];

type LeftOutCounts = config.LeftOutCounts;

type FileRecord = Entry<typeof C.FILE_FIELDS>;

type SkillRecord = Entry<typeof C.SKILL_FIELDS>;

type RuleRecord = Entry<typeof C.RULE_FIELDS>;

type Skip = Entry<typeof C.SKIP_FIELDS> & { counts?: { taken: number; total: number } };

// Exported for tests, as is readRecord: they read the records stored in details.
export type LedgerRecord = Omit<Entry<typeof C.RECORD_FIELDS>, "skipped"> & { skipped: Skip[] };

export function readRecord(details: unknown): LedgerRecord | undefined {
  return readField(isObject(details) ? details[C.DETAILS_KEY] : undefined, C.RECORD_FIELDS) as LedgerRecord | undefined;
}

/** A stored value as its field reads it, or undefined when it does not fit. */
function readField(value: unknown, type: Field | Spec): unknown {
  if (type instanceof Set) return type.has(value) ? value : undefined;
  if (typeof type === "string") return typeof value === type ? value : undefined;
  if ("list" in type)
    return Array.isArray(value) ? value.flatMap((item) => readField(item, type.list) ?? []) : undefined;
  if (!isObject(value)) return undefined;
  const fields: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(type as Spec)) {
    const key = name.endsWith("?") ? name.slice(0, -1) : name;
    if (key !== name && (value[key] === undefined || value[key] === false)) continue;
    const read = readField(value[key], field);
    if (read !== undefined) fields[key] = read;
    else if (typeof field !== "object" || !("list" in field)) return undefined;
    else if (key === name) fields[key] = [];
  }
  return fields;
}

function skipKey(skip: Skip): string {
  if (C.CAP_REASONS.has(skip.reason)) return `${skip.reason}\0${skip.path}`;
  // One file may hold several refused imports: the model hears of each reason once.
  return skip.inImport ? `import\0${skip.path}\0${skip.reason}` : skip.path;
}

function emptyRecord(): LedgerRecord {
  return { v: C.LEDGER_VERSION, files: [], skills: [], retracted: [], retractedSkills: [], skipped: [] };
}

/** Whether a delivery puts text in front of the model (a read of the file itself puts none). */
function recordShowsText(r: LedgerRecord): boolean {
  const notices = NOTICE_KINDS.some((kind) => (r[kind]?.length ?? 0) > 0);
  const appended = [...r.files, ...(r.rules ?? [])].some((entry) => entry.via !== "read");
  return notices || appended || r.skills.length > 0;
}

/** What the model can hold: an instruction file or an import of one, a skill, a rule or a rule's import. */
type HeldRecords = { file: FileRecord; skill: SkillRecord; rule: RuleRecord };

type Kind = keyof HeldRecords;

class Ledger {
  /** What the model holds, by path; a record's scope is `scope` (a rule's: its rule folder, `dir`). */
  readonly held: { [K in Kind]: Map<string, HeldRecords[K]> } = { file: new Map(), skill: new Map(), rule: new Map() };
  /** Paths sent for each scope (a rule's: its rule folder), some since withdrawn or moved: what a view may withdraw. */
  readonly byScope: Record<Kind, Map<string, Set<string>>> = { file: new Map(), skill: new Map(), rule: new Map() };
  /** Paths whose withdrawal notice the model holds. */
  readonly withdrawn: Record<Kind, Set<string>> = { file: new Set(), skill: new Set(), rule: new Set() };
  /** What the instruction file held for each scope imports: an import stays while one still does. */
  readonly importsByScope = new Map<string, Set<string>>();
  /** Skip notices the model holds, by skipKey → reason. */
  readonly skipped = new Map<string, Reason>();
  /** Further scopes the model was told a held file governs: path → scopes. */
  readonly alsoGoverns = new Map<string, Set<string>>();
  /** Parts (the preamble, sections) whose full explanation the model can still see. */
  readonly explained = new Set<Explained>();

  get<K extends Kind>(kind: K, path: string): HeldRecords[K] | undefined {
    return this.held[kind].get(path);
  }

  all<K extends Kind>(kind: K): Array<HeldRecords[K]> {
    return [...this.held[kind].values()];
  }

  /** Replays the records of the entries still in the model's context, oldest first. */
  rebuild(records: Iterable<LedgerRecord>): void {
    Object.assign(this, new Ledger());
    for (const record of records) this.apply(record);
  }

  /** Withdrawals first: a record that withdraws and sends one path ends holding it. */
  apply(record: LedgerRecord): void {
    for (const { path, scope } of record.retracted) {
      if (this.get("file", path)?.importedBy === undefined) this.importsByScope.delete(scope);
      else this.importsByScope.get(scope)?.delete(path);
      this.alsoGoverns.delete(path);
    }
    for (const file of record.files) {
      if (this.get("file", file.path)?.version !== file.version) this.alsoGoverns.delete(file.path);
      this.skipped.delete(file.path);
      if (file.importedBy !== undefined) this.importsByScope.get(file.scope)?.add(file.path);
      else if (file.imports) this.importsByScope.set(file.scope, new Set(file.imports));
      else this.importsByScope.delete(file.scope);
    }
    const gone = { file: record.retracted, skill: record.retractedSkills, rule: record.retractedRules ?? [] };
    const sent = { file: record.files, skill: record.skills, rule: record.rules ?? [] };
    for (const kind of ["file", "skill", "rule"] as const) {
      const held = this.held[kind] as Map<string, HeldRecords[Kind]>;
      for (const { path } of gone[kind]) {
        held.delete(path);
        this.withdrawn[kind].add(path);
      }
      for (const entry of sent[kind]) {
        held.set(entry.path, entry);
        const scope = "dir" in entry ? entry.dir : entry.scope;
        this.byScope[kind].set(scope, (this.byScope[kind].get(scope) ?? new Set()).add(entry.path));
        this.withdrawn[kind].delete(entry.path);
      }
    }
    for (const skip of record.skipped) this.skipped.set(skipKey(skip), skip.reason);
    for (const { path, scope } of record.alsoGoverns ?? []) {
      this.alsoGoverns.set(path, (this.alsoGoverns.get(path) ?? new Set()).add(scope));
    }
    for (const section of record.explained ?? []) this.explained.add(section);
  }
}

// Planning one delivery: what of the viewed chain the model lacks. Each planned entry holds the
// record it adds, so the budget drops both together.

interface PlannedFile {
  file: InstructionFile;
  scope: string;
  record: FileRecord | RuleRecord;
  supersedes: boolean;
  /** Set when the budget cut the text. */
  cutText?: string;
  /** The scope as shown, when it is not the folder's (a rule's globs). */
  scopeText?: string;
}

/** A skill or a described rule: one line of a list. */
type PlannedLine = { record: SkillRecord | RuleRecord; line: string };

interface DeliveryPlan {
  record: LedgerRecord;
  /** Files to append, parent first, each import right after the file that imports it. */
  files: PlannedFile[];
  rules?: PlannedFile[];
  ruleListings?: PlannedLine[];
  skills: PlannedLine[];
  /** What the budget left out of this reminder, announced in one line. */
  leftOut?: { counts: LeftOutCounts; names: string[] };
  /** Parts whose explanation the model can still see: the ledger's own, as a plan is formatted before applied. */
  explainedEarlier: ReadonlySet<Explained>;
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
  const plan: DeliveryPlan = { record: emptyRecord(), files: [], skills: [], explainedEarlier: ledger.explained };
  // A loop, with no array per view (bench: with settle's single-call views, 3% of a warm call; peer_over_ours_nogit).
  const offered = new Set<string>();
  for (const { file, imports } of input.views) {
    if (file) offered.add(file.path);
    for (const imported of imports) offered.add(imported.file.path);
  }
  const planFile = (file: InstructionFile, scope: string, importedBy?: string): void => {
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
      if (via === "reminder") plan.files.push({ file, scope, record, supersedes: held !== undefined });
    } else if (importedBy === undefined && sentWith !== undefined && sentWith !== scope) {
      if (!ledger.alsoGoverns.get(file.path)?.has(scope))
        (plan.record.alsoGoverns ??= []).push({ path: file.path, scope });
    }
  };
  for (const view of input.views) {
    const { scope } = view;
    // An I/O error hid part of what the folder offers: what the model holds of it then stands.
    const unknown = (skills: boolean) =>
      view.pending === true || view.rejected.some((r) => r.reason === "unreadable" && (r.kind === "skill") === skills);
    // A held file that did not change still names its imports: one its view no longer offers is gone for all.
    const same = view.file && ledger.get("file", view.file.path)?.version === view.file.version;
    if (!unknown(false)) planRetraction(ledger, plan, "file", scope, offered, same ? view.file!.path : undefined);
    if (ledger.byScope.skill.has(scope) && !unknown(true))
      planRetraction(ledger, plan, "skill", scope, new Set(view.skills.map((s) => s.path)));
    planSkips(ledger, plan, view.rejected);
    if (view.file) planFile(view.file, scope);
    const root = plan.record.files.at(-1);
    if (root?.path === view.file?.path && view.imports.length > 0) root!.imports = view.imports.map((i) => i.file.path);
    for (const { file, importedBy } of view.imports) planFile(file, scope, importedBy);
    for (const skill of view.skills) {
      const startup = input.startupSkills?.get(skill.name);
      const cwd = input.cwdReal;
      if (startup !== undefined && cwd !== undefined && resolve(cwd, skill.path) === resolve(startup)) continue;
      const record = { path: skill.path, name: skill.name, scope, version: skill.version };
      if (takes(ledger, plan, "skill", record)) plan.skills.push({ record, line: skillLine(skill, scope, startup) });
    }
  }
  return plan;
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
  offered: ReadonlySet<unknown>,
  unchangedRoot?: string,
) {
  const scoped = ledger.byScope[kind].get(scope);
  if (scoped === undefined) return;
  const paths = [...scoped];
  // A warm view offers all its scope was sent: nothing to look up (profile: 4% of a warm call).
  if (paths.every((path) => offered.has(path))) return;
  const sent = paths.flatMap((path) => ledger.get(kind, path) ?? []);
  const held = sent.filter((record) => ("dir" in record ? record.dir : record.scope) === scope);
  for (const { path, importedBy } of held as Array<Partial<RuleRecord> & { path: string }>) {
    if (offered.has(path)) continue;
    const elsewhere = () => [...ledger.importsByScope].some(([other, paths]) => other !== scope && paths.has(path));
    const gone = importedBy === unchangedRoot && ledger.importsByScope.get(scope)?.has(path) === true;
    if (importedBy !== undefined && (kind === "rule" || (!gone && elsewhere()))) continue;
    if (kind !== "rule") plan.record[kind === "file" ? "retracted" : "retractedSkills"].push({ path, scope });
    else {
      // A rule goes with its imports, and theirs.
      const gone = new Set([path, ...heldImportsOf(ledger, scope, path).map((below) => below.path)]);
      for (const rule of held as RuleRecord[])
        if (gone.has(rule.path)) (plan.record.retractedRules ??= []).push({ path: rule.path, dir: scope });
    }
  }
}

/** The imports of `root` the model holds in rule folder `dir`, and theirs, each with the file that brought it in. */
function heldImportsOf(ledger: Ledger, dir: string, root: string): Array<{ path: string; by: string }> {
  const below: Array<{ path: string; by: string }> = [];
  const reached = new Set([root]);
  for (let size = 0; size !== reached.size;) {
    size = reached.size;
    for (const path of ledger.byScope.rule.get(dir) ?? []) {
      const record = ledger.get("rule", path);
      const by = record?.dir === dir ? record.importedBy : undefined;
      if (by === undefined || !reached.has(by) || reached.has(path)) continue;
      reached.add(path);
      below.push({ path, by });
    }
  }
  return below;
}

/** Instruction files that exist but were refused: the model hears of each once per reason. */
function planSkips(ledger: Ledger, plan: DeliveryPlan, rejected: readonly Rejection[]): void {
  for (const { path, reason, kind, counts } of rejected) {
    if (kind !== "instruction" && kind !== "import" && kind !== "cap") continue;
    // A file the model holds stays as it is while it cannot be read: nothing to tell.
    if (reason === "unreadable" && ledger.get("file", path) !== undefined) continue;
    const skip: Skip = { path, reason, ...(kind === "import" && { inImport: true }), ...(counts && { counts }) };
    const key = skipKey(skip);
    const told = (other: Skip) => skipKey(other) === key && other.reason === reason;
    if (ledger.skipped.get(key) !== reason && !plan.record.skipped.some(told)) plan.record.skipped.push(skip);
  }
}

type RuleInput = Shown & { discovery: Discovery; folders: RuleFolder[]; touched: readonly string[]; options: Options };

/** Adds to a plan the rules the model lacks for these paths, and withdraws rules that are gone. */
function planRules(ledger: Ledger, plan: DeliveryPlan, input: RuleInput): void {
  const { discovery, folders, touched, options, shownWhole, shownInPart } = input;
  for (const folder of folders) {
    folder.offered ??= new Set(folder.rules.filter((rule) => rule.meta.kind !== "manual").map((rule) => rule.path));
    planRetraction(ledger, plan, "rule", folder.place.display, folder.offered);
    planSkips(ledger, plan, folder.rejected);
  }
  if (touched.length === 0) return;
  for (const rule of applyingRules(discovery, folders, touched, shownWhole)) {
    const { name, description, kind } = rule.meta;
    if (kind === "described") {
      const record: RuleRecord = { path: rule.path, dir: rule.dir, version: rule.listingVersion, as: "listing" };
      const fields = [name, shownRuleScope(rule.scope), description, rule.path].map(reminderField);
      const line = `- ${fields[0]} (scope ${fields[1]}): ${fields[2]} [${fields[3]}]`;
      if (takes(ledger, plan, "rule", record)) (plan.ruleListings ??= []).push({ record, line });
      continue;
    }
    const entries: Array<{ file: InstructionFile; importedBy?: string }> = [{ file: rule.body }];
    if (rule.source === "claude" && options.imports) {
      const [rejected, held]: [Rejection[], number] = [[], discovery.held];
      entries.push(...importsOf(discovery, rule.loaded, rule.base, rejected));
      planSkips(ledger, plan, rejected);
      // Of this rule's imports the model holds, one its unchanged importer no longer imports is gone for every
      // importer, and its own imports with it; not while git has yet to answer or a file could not be read.
      if (discovery.held === held && !rejected.some(({ reason }) => reason === "unreadable")) {
        const offered = new Map(entries.map(({ file }) => [file.path, file.version]));
        const gone = new Set<string>();
        for (const { path, by } of heldImportsOf(ledger, rule.dir, rule.path)) {
          const unchanged = offered.get(by) === ledger.get("rule", by)?.version;
          if (!offered.has(path) && (gone.has(by) || unchanged)) gone.add(path);
        }
        const told = new Set(plan.record.retractedRules?.map(({ path }) => path));
        for (const path of gone) if (!told.has(path)) (plan.record.retractedRules ??= []).push({ path, dir: rule.dir });
      }
    }
    for (const { file, importedBy } of entries) {
      // As an instruction file's: what the tool shows in part is not appended now, nor counted; whole, it is held.
      if (file.realPath === shownInPart) continue;
      const { path, version, bytes } = file;
      const supersedes = ledger.get("rule", path) !== undefined;
      const read = file.realPath === shownWhole;
      const record: RuleRecord = { path, dir: rule.dir, version, as: "text", bytes, ...(importedBy && { importedBy }) };
      if (read) record.via = "read";
      if (takes(ledger, plan, "rule", record, read) && !read)
        (plan.rules ??= []).push({ file, scope: rule.base, record, scopeText: shownRuleScope(rule.scope), supersedes });
    }
  }
}

// The session projection: which records the model still sees after compaction and context edits.

/** A record whose result's `details` another extension replaced, kept in a session entry of its own. */
type RescuedRecord = { toolCallId: string; record: LedgerRecord };

/**
 * Whether a context edit or a compaction entered the branch since `mark`, the leaf the ledger last saw: Pi appends
 * the drafts of another extension's turn_end or agent_before_settle (and its own recovery's edits) between turns,
 * with no event of their own. Walks back only over the entries appended since; a mark that left the branch counts.
 */
function contextEditedSince(session: ExtensionContext["sessionManager"], mark: string | null | undefined): boolean {
  if (mark === undefined) return false;
  let id = session.getLeafId();
  while (id !== null && id !== mark) {
    const entry = session.getEntry(id);
    if (!entry || entry.type === "context_edit" || entry.type === "compaction") return true;
    id = entry.parentId;
  }
  return id !== mark;
}

/** The records of the entries the model still sees (compaction and context edits applied), whose reminder is whole. */
function recordsInContext(sessionManager: ExtensionContext["sessionManager"]): LedgerRecord[] {
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

/** The text blocks of a message's content. */
function textsOf(message: unknown): string[] {
  const content = (message as { content?: unknown } | undefined)?.content;
  const blocks = Array.isArray(content) ? (content as Array<{ text?: unknown } | null>) : [];
  return blocks.flatMap((block) => (typeof block?.text === "string" ? [block.text] : []));
}

/** The digest of a result's own text. */
function shownDigest(message: unknown): string {
  return versionOf(textsOf(message).join("\n"));
}

/**
 * Whether these messages show a record's reminder whole: the text of its digest (older records: its opening). A
 * record with no reminder text (the model's own read of the file) needs its result's text as the tool left it.
 */
function projectionShows(messages: readonly unknown[], record: LedgerRecord): boolean {
  const shown = (message: unknown) => shownDigest(message) === record.reminder;
  if (!recordShowsText(record)) return messages.length > 0 && (record.reminder === undefined || messages.some(shown));
  return messages.flatMap(textsOf).some((text) => {
    for (let at = text.indexOf(REMINDER_OPEN); at !== -1; at = text.indexOf(REMINDER_OPEN, at + 1)) {
      if (record.reminder === undefined) return true;
      const end = text.indexOf(C.REMINDER_CLOSE, at);
      if (end === -1) return false;
      if (versionOf(text.slice(at, end + C.REMINDER_CLOSE.length)) === record.reminder) return true;
    }
    return false;
  });
}

// =============================================================================================
// 4. Reminder text and budget. The deepest files are kept whole first; broader ones are cut to the
// budget, and what does not fit is announced as left out.

function skipText(skip: Skip, field: (text: string) => string = reminderField): string {
  if (C.CAP_REASONS.has(skip.reason)) return C.cutShortNotice(field(skip.path), C.reasonText(skip.reason, skip.counts));
  return (skip.inImport ? C.importNotLoadedNotice : C.notLoadedNotice)(field(skip.path), C.REASONS[skip.reason]);
}

/** The user's one fixed line for a refusal: never contents, absolute paths or exceptions. */
function refusalWarning(skip: Skip): string {
  return `${C.USER_PREFIX}${skipText(skip, oneLine)}`;
}

/** Warns the user of a refusal the model is not told of, once per path and reason. */
function warnOnce(told: Map<string, Reason>, skip: Skip, warn: (text: string) => void): void {
  if (told.get(skip.path) === skip.reason) return;
  told.set(skip.path, skip.reason);
  warn(refusalWarning(skip));
}

/** A one-line field or attribute value inside the reminder, escaped as Pi escapes its own skill listing. */
function reminderField(text: string): string {
  return oneLine(text).replace(/[&<>"']/g, (char) => C.XML_ESCAPES[char]!);
}

/** Text as the reminder carries it: byte for byte, but what reads as a wrapper's closing tag loses its `<`. */
function neutralizeClosingTags(text: string): string {
  return text.replace(C.WRAPPER_CLOSING_TAG, "&lt;");
}

// Exported for tests: they and the bench find the reminder in a result by this prefix of its opening tag.
export const REMINDER_OPEN = "<nested-instructions";

const NOTICE_LINES = {
  retracted: (notice: { path: string }) => `- ${C.withdrawnNotice(reminderField(notice.path))}`,
  retractedSkills: (notice: { path: string }) => `- ${C.skillGoneNotice(reminderField(notice.path))}`,
  retractedRules: (notice: { path: string }) => `- ${C.withdrawnNotice(reminderField(notice.path))}`,
  skipped: (skip: Skip) => `- ${skipText(skip)}.`,
  alsoGoverns: (told: { path: string; scope: string }) =>
    `- ${C.alsoGovernsNotice(reminderField(told.path), reminderField(scopeGlob(told.scope)))}`,
};

const NOTICE_KINDS = Object.keys(NOTICE_LINES) as Array<keyof typeof NOTICE_LINES>;

function noticeLines(record: LedgerRecord): string[] {
  return NOTICE_KINDS.flatMap((kind) => (record[kind] ?? []).map((notice) => NOTICE_LINES[kind](notice as never)));
}

/** Bytes a line adds to the reminder, with the newline before it. */
function lineBytes(line: string): number {
  return Buffer.byteLength(`\n${line}`);
}

/**
 * Fits the whole reminder (tags, texts, lines, notices and the left-out line) into the byte budget and at most
 * C.MAX_REMINDER_FILES files. Notices go first, then files in `budgetOrder`, whole while they fit; the first that
 * does not is cut on a UTF-8 boundary; listings and skills take what is left. What does not fit leaves the plan
 * and its record, so it stays pending for a later access, and is counted in one line.
 */
function fitPlanToBudget(plan: DeliveryPlan, budgetBytes: number): void {
  const { record } = plan;
  const itemLines = [...sectionItems(plan).flatMap(([, lines]) => lines), ...noticeLines(record)];
  const frame = Buffer.byteLength(formatReminder(plan)) - itemLines.reduce((sum, line) => sum + lineBytes(line), 0);
  const longest = [...plan.files, ...(plan.rules ?? []), ...(plan.ruleListings ?? []), ...plan.skills]
    .map((entry) => reminderField(entry.record.path))
    .sort((a, b) => Buffer.byteLength(b) - Buffer.byteLength(a));
  const count = itemLines.length;
  const counts = (n: number): LeftOutCounts => ({ files: n, rules: n, ruleListings: n, skills: n, notices: n });
  let remaining = budgetBytes - frame - Buffer.byteLength(`\n\n${C.leftOutText(counts(count), longest)}`);
  const leftOut = { counts: counts(0), names: [] as string[] };
  const fits = (line: string): boolean => {
    if (lineBytes(line) > remaining) return false;
    remaining -= lineBytes(line);
    return true;
  };
  const gone = new Set<object>();
  const leave = (left: { path: string }, kind: keyof LeftOutCounts) => {
    gone.add(left);
    leftOut.counts[kind]++;
    if (kind !== "notices") leftOut.names.push(left.path);
  };
  // Notices that do not fit stay unsaid (and unrecorded) until a later access.
  for (const kind of NOTICE_KINDS) {
    for (const notice of record[kind] ?? []) if (!fits(NOTICE_LINES[kind](notice as never))) leave(notice, "notices");
  }
  let kept = 0;
  for (const entry of budgetOrder(plan)) {
    const room = remaining - lineBytes(formatFile({ ...entry, cutText: "" }));
    if (kept < C.MAX_REMINDER_FILES && fits(formatFile(entry))) {
      kept++;
    } else if (kept < C.MAX_REMINDER_FILES && room > 0 && (room >= C.MIN_CUT_BYTES || kept === 0)) {
      entry.cutText = cutUtf8(entry.file.text, room);
      entry.record.truncated = true;
      // Escaping can lengthen a cut text: it is cut again by what escaping added, until the entry fits.
      const over = () => lineBytes(formatFile(entry)) - remaining;
      while (over() > 0) entry.cutText = cutUtf8(entry.cutText, Buffer.byteLength(entry.cutText) - over());
      remaining -= lineBytes(formatFile(entry));
      kept++;
    } else leave(entry.record, "dir" in entry.record ? "rules" : "files");
  }
  for (const listing of plan.ruleListings ?? []) if (!fits(listing.line)) leave(listing.record, "ruleListings");
  for (const skill of plan.skills) if (!fits(skill.line)) leave(skill.record, "skills");
  const lists = plan as unknown as Record<Section, Array<{ record: object }> | undefined>;
  for (const section of C.REMINDER_SECTIONS) lists[section] = lists[section]?.filter((e) => !gone.has(e.record));
  const records = record as unknown as Record<string, object[] | undefined>;
  for (const list of ["files", "skills", "rules", ...NOTICE_KINDS])
    records[list] = records[list]?.filter((r) => !gone.has(r));
  if (gone.size > 0) plan.leftOut = leftOut;
  const explained = explainedIn(plan);
  if (explained.length > 0) record.explained = explained;
}

/** The budget's order: deepest scope first, a file before its imports, rule texts after the deepest folder's files. */
function budgetOrder(plan: DeliveryPlan): PlannedFile[] {
  const depth = (entry: PlannedFile) => entry.scope.split("/").length;
  const imported = (entry: PlannedFile) => Number(entry.record.importedBy !== undefined);
  const order = plan.files.toSorted((a, b) => depth(b) - depth(a) || imported(a) - imported(b));
  const at = order.findIndex((entry) => depth(entry) < depth(order[0]!));
  order.splice(at === -1 ? order.length : at, 0, ...(plan.rules ?? []));
  return order;
}

/** What a plan explains in full: the sections it fills, and the preamble with any, that the model cannot see. */
function explainedIn(plan: DeliveryPlan): Explained[] {
  const filled = C.REMINDER_SECTIONS.filter((section) => (plan[section]?.length ?? 0) > 0);
  const parts: Explained[] = filled.length > 0 ? ["preamble", ...filled] : [];
  return parts.filter((part) => !plan.explainedEarlier.has(part));
}

/** Each section's items as the reminder shows them. */
function sectionItems(plan: DeliveryPlan): Array<[Section, string[]]> {
  const line = (entry: PlannedFile | PlannedLine) => ("line" in entry ? entry.line : formatFile(entry));
  return C.REMINDER_SECTIONS.map((section) => [section, (plan[section] ?? []).map(line)]);
}

function formatReminder(plan: DeliveryPlan): string {
  const explained = explainedIn(plan);
  const blocks: string[] = [];
  for (const [section, items] of sectionItems(plan)) {
    const intro = C.SECTION_INTROS[section][explained.includes(section) ? 0 : 1];
    if (items.length > 0) blocks.push([...(intro === undefined ? [] : [intro]), ...items].join("\n"));
  }
  const notices = noticeLines(plan.record);
  if (notices.length > 0) blocks.push(notices.join("\n"));
  const left = plan.leftOut;
  if (left) blocks.push(C.leftOutText(left.counts, left.names.map(reminderField)));
  // The opening tag names the paths the tool touched, so a reminder says why it came.
  const touched = [...new Set(plan.touched ?? [])];
  const more = touched.length > C.SHOWN_TOUCHED_PATHS ? ` +${touched.length - C.SHOWN_TOUCHED_PATHS}` : "";
  const shown = touched.slice(0, C.SHOWN_TOUCHED_PATHS).map(reminderField).join(", ");
  const opening = touched.length === 0 ? `${REMINDER_OPEN}>` : `${REMINDER_OPEN} touched="${shown}${more}">`;
  const preamble = explained.includes("preamble") ? [C.REMINDER_PREAMBLE] : [];
  return [opening, ...preamble, blocks.join("\n\n"), C.REMINDER_CLOSE].join("\n");
}

// The budget measures each entry several times: it is formatted once per cut (profile: 15% of a cold call).
const formatted = new WeakMap<PlannedFile, { cutText?: string; text: string }>();

/** A file's or a rule's text in its tag: the scope is said only where it is not the file's own folder. */
function formatFile(entry: PlannedFile): string {
  const known = formatted.get(entry);
  if (known && known.cutText === entry.cutText) return known.text;
  const { file, scope, supersedes, cutText, record } = entry;
  const tag = "dir" in record ? "rule" : "file";
  const path = reminderField(file.path);
  const shownScope = entry.scopeText ?? (posix.dirname(file.path) === scope ? undefined : scopeGlob(scope));
  let head = `<${tag} path="${path}"`;
  if (shownScope !== undefined) head += ` scope="${reminderField(shownScope)}"`;
  if (record.importedBy !== undefined) head += ` imported-by="${reminderField(record.importedBy)}"`;
  if (supersedes) head += ` supersedes="${C.SUPERSEDES_MARKER}"`;
  const shown = cutText ?? file.text;
  const end = trailingRun(shown, (char) => char === "\n");
  const text = neutralizeClosingTags(shown.slice(0, end));
  const cut = cutText === undefined ? [] : [C.cutNotice(path)];
  const whole = [`${head}>`, text, ...cut, `</${tag}>`].join("\n");
  formatted.set(entry, { cutText, text: whole });
  return whole;
}

/** A skill's line; `startup`: where Pi listed a skill of this name at start-up. */
function skillLine(skill: Skill, scope: string, startup: string | undefined): string {
  const precedence = startup === undefined ? "" : C.SKILL_OVERRIDES_STARTUP;
  // A skill is for the folder that holds its .agents/skills: its scope is said only for one linked from elsewhere.
  const own = skill.path.startsWith(`${posix.join(scope, ...C.SKILLS_DIR_SEGMENTS)}/`);
  const shownScope = own ? "" : ` (scope ${reminderField(scopeGlob(scope))})`;
  return `- ${reminderField(skill.name)}${shownScope}: ${reminderField(skill.description)} [${reminderField(skill.path)}]${precedence}`;
}

/** A rule's scope as the model reads it: one that covers every path (`**`, or every file below it) is named repository-wide. */
function shownRuleScope(scope: string): string {
  return scope === "**" || scope === "**/*" ? C.REPOSITORY_WIDE_SCOPE : scope;
}

// =============================================================================================
// 5. Discovery: locate -> folder view -> instruction file -> imports -> skills -> rules. Directory
// listings and file contents are cached against their stat signature, so a warm call costs one
// stat per directory on the chain plus one per known file.

interface Rejection {
  path: string;
  reason: Reason;
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
  /** The file starts with a BOM, which `text` no longer holds. */
  bom?: true;
}

interface Skill {
  name: string;
  description: string;
  path: string;
  version: string;
}

interface DirectoryView {
  /** cwd-relative folder, with forward slashes. */
  scope: string;
  file?: InstructionFile;
  /** Files the instruction file imports, depth first, each once, with the file whose `@path` brought it in. */
  imports: Array<{ file: InstructionFile; importedBy: string }>;
  rejected: Rejection[];
  skills: Skill[];
  /** What the folder's `.cursor` is: a nested rule folder's parent. */
  cursor: ParentKind;
  /** A source here waits for git's answer: what the model holds of this folder stands until it comes. */
  pending?: true;
}

interface DirectoryEntry {
  /** Absolute paths of the instruction file names present (of any type), in preference order. */
  candidates: string[];
  /** What each of the sources' homes (`.agents`, `.claude`, `.cursor`, `.github`) is in this folder. */
  homes: Map<string, ParentKind>;
  /** Entries the folder held when it was last listed; undefined when it was probed name by name. */
  listed?: number;
  /** Whether its listing held a link; undefined when it was probed name by name. */
  links?: boolean;
  /** Its view while it offers nothing: no instruction file, no skills. */
  empty?: DirectoryView;
}

/** A source resolved and let through by the source policy, or why not ("skip": nothing is there). */
type ResolvedSource = { real: string; stats: nodeFs.Stats } | { reason: Reason | "skip" | "held" };

/** A source file, or why there is none; `real` names a file that is there but was refused as read. */
type SourceFile = InstructionFile | { reason: Reason | "skip" | "held"; real?: string };

interface FileEntry {
  loaded: Loaded;
  // Each built from the text once per content: the file as views show it, the absolute targets of its
  // `@path` tokens, and the skill it defines (named, as Pi names it, by the folder it is listed in).
  file?: InstructionFile;
  importTargets?: string[];
  skill?: ParsedSkill & { folder: string };
}

type ParsedSkill = { ok: true; skill: Skill; hidden: boolean } | { ok: false; reason: Reason };

interface ListingEntry {
  names: Array<{ name: string; kind: "file" | "dir" | "link" | "other" }>;
  /** Entries in the folder, before the cap. */
  total: number;
  /** Ignore files present, in the order Pi reads them. */
  ignoreFiles: readonly string[];
  sorted?: ListingEntry["names"];
  /** Its folders and links, sorted: what a rule folder's walk may go into (profile: 3% of a warm call). */
  folders?: ListingEntry["names"];
  hasSkillFile: boolean;
  /** The ignore rules in force here, from those above and its own ignore files read below `prefix`, while all stand. */
  ignores?: IgnoreSet & { inherited: IgnoreSet; prefix: string; files: InstructionFile[] };
}

/** One folder strictly below cwd on the way to a target; `scope` is cwd-relative, with forward slashes. */
interface ChainLink {
  dir: string;
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
function mayBeInside({ cwdReal, logicalCwd }: Discovery, path: string): boolean {
  const inside = (root: string) => relativeInside(root, path) !== undefined;
  return inside(cwdReal) || (logicalCwd !== undefined && inside(logicalCwd));
}

/** The folders strictly below cwd down to the cwd-relative `rel`, parent first; cached. */
function chainFor(ctx: Discovery, rel: string): ChainLink[] {
  let links = ctx.chains.get(rel);
  if (links) return links;
  links = [];
  for (const name of rel === "" ? [] : rel.split(sep)) {
    const parent = links.at(-1);
    links.push({
      dir: entryPath(parent?.dir ?? ctx.cwdReal, name),
      scope: parent ? `${parent.scope}/${name}` : name,
      name,
    });
  }
  ctx.chains.set(rel, links);
  return links;
}

/** A folder's chain of real folders, or a folder that does not exist, or one to resolve through real paths. */
type FolderWalk = Located | "missing" | "resolve";

/** A folder walked down from cwd, one lstat per step; a link, an error or another spelling resolves. */
function walkFolder(discovery: Discovery, folder: string): FolderWalk {
  const rel = relativeInside(discovery.cwdReal, folder);
  if (rel === "") return { links: [], stats: [] };
  if (rel === undefined) return "resolve";
  const fresh = !discovery.chains.has(rel);
  const links = chainFor(discovery, rel);
  const stats: nodeFs.Stats[] = [];
  for (const link of links) {
    const stat = fsOr("error" as const, () => discovery.fs.lstat(link.dir));
    if (stat === "error" || stat?.isSymbolicLink()) return "resolve";
    if (!stat?.isDirectory()) return "missing";
    stats.push(stat);
  }
  if (!fresh || spelledAsOnDisk(discovery, links, stats)) return { links, stats };
  // One folder, one identity: another spelling is looked at through its real path, every time.
  discovery.chains.delete(rel);
  return "resolve";
}

/**
 * The chain to a tool's target. The fast path takes the target's folder as written when every
 * folder on the way is a real folder (lstat, no links): then it is its own real path, and those
 * stats serve the views too. Otherwise the slow path resolves the real path of the folder, or of
 * its nearest existing ancestor for a target that does not exist yet; undefined outside cwd.
 */
function locateChain(ctx: Discovery, target: string, targetIsDirectory: boolean): Located | undefined {
  const dir = targetIsDirectory ? target : dirname(target);
  // A step that is missing, not a real folder or fails (ENAMETOOLONG, EACCES …) takes the slow path.
  const walked = walkFolder(ctx, dir);
  if (typeof walked === "object") return walked;
  // Outside cwd by its text, a path may still lead into it through a link (`/tmp` to
  // `/private/tmp`): only its own folder's real path, a name lookup, can tell.
  const viaLink = !mayBeInside(ctx, dir);
  for (let up = dir; viaLink || mayBeInside(ctx, up); up = dirname(up)) {
    const real = ctx.realpathOrUndefined(up);
    if (real === undefined && dirname(up) === up) return undefined;
    if (real === undefined) continue;
    if (relativeInside(ctx.cwdReal, real) === undefined) return undefined;
    // A directory target may name a file (grep, find): its folder is the scope.
    // A stat that fails (EIO) leaves it unknown: its folder, which holds it either way, is the scope.
    const isFolder = () => fsOr(undefined, () => ctx.fs.stat(real))?.isDirectory() === true;
    const folder = targetIsDirectory && up === target && !isFolder() ? dirname(real) : real;
    return { links: chainFor(ctx, relative(ctx.cwdReal, folder)) };
  }
  return undefined;
}

/** Whether a new chain is spelled as on disk: only a filesystem that folds names finds `PKG` for `pkg`. */
function spelledAsOnDisk(ctx: Discovery, links: ChainLink[], stats: nodeFs.Stats[]): boolean {
  if (ctx.folds === undefined) {
    // Asked of the first name with letters: a chain of names without any (`2024/…`) has no other spelling.
    const swap = (name: string) =>
      [...name].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join("");
    const at = links.findIndex(({ name }) => swap(name) !== name);
    if (at === -1) return true;
    const other = fsOr(undefined, () => ctx.fs.lstat(entryPath(dirname(links[at]!.dir), swap(links[at]!.name))));
    ctx.folds = other !== undefined && other.ino === stats[at]!.ino && other.dev === stats[at]!.dev;
  }
  const last = links.at(-1)!.dir;
  return !ctx.folds || ctx.realpathOrUndefined(last) === last;
}

// The folder view: what each folder on a chain offers, parent first, up to the first ignored one.

/** Questions for git about the calls' folders it has not answered for, each chain down to its first ignored one. */
function chainQuestions(ctx: Discovery, calls: Array<{ chains: Located[] }>): string[] {
  const questions: string[] = [];
  for (const { links } of calls.flatMap((call) => call.chains))
    for (const link of links) {
      if (ignoredReasonOf(ctx, link) !== undefined) break;
      if (!ctx.gitAnswers.folders.has(link.scope)) questions.push(`${link.scope}/`);
    }
  return questions;
}

/** The one way to ask git: questions as `setGitAnswer` takes them; undefined when none. */
function askGit(ctx: Discovery, git: GitIgnoreOracle | undefined, ask: () => string[]): Promise<void> | undefined {
  // A git that is off is not asked: its questions are not even gathered (A/B, warm depth-8 reads, no git: 0.95).
  const questions = git?.off === false ? ask() : [];
  if (!git || questions.length === 0) return undefined;
  return git.ask(questions).then((answers) => {
    questions.forEach((question, index) => setGitAnswer(ctx.gitAnswers, question, answers[index]!));
  });
}

function joinAnswers(...answers: Array<Promise<void> | undefined>): Promise<void> | undefined {
  const pending = answers.filter((answer) => answer !== undefined);
  return pending.length <= 1 ? pending[0] : Promise.all(pending).then(() => undefined);
}

/** Why a folder of a chain has no view: where the chain stopped (ignored, a skills tree), or it could not be read. */
type Unviewed = Map<string, Reason>;

function viewChain(ctx: Discovery, located: Located, withSkills: boolean, unviewed?: Unviewed): DirectoryView[] {
  const views: DirectoryView[] = [];
  for (const [index, link] of located.links.entries()) {
    // A skills tree holds skill content, read when a skill applies: its folders are not scopes.
    const skillsTree =
      link.name === C.SKILLS_DIR_SEGMENTS[1] && located.links[index - 1]?.name === C.SKILLS_DIR_SEGMENTS[0];
    const ignored = skillsTree ? undefined : ignoredReasonOf(ctx, link);
    if (ignored) ctx.ignoredSeen.set(link.scope, ignored);
    if (skillsTree || ignored) {
      unviewed?.set(link.scope, ignored ?? "skillsTree");
      break;
    }
    // A folder that cannot be examined now (EIO, EACCES) is left out; the others still count.
    const view = fsOr(undefined, () => viewDirectory(ctx, link, withSkills, located.stats?.[index]));
    if (view) views.push(view);
    else unviewed?.set(link.scope, "unreadable");
  }
  return views;
}

function ignoredReasonOf(ctx: Discovery, link: ChainLink): Reason | undefined {
  if (ctx.options.ignoredDirs.has(link.name)) return "ignoredDir";
  return ctx.gitAnswers.folders.get(link.scope) === true ? "gitIgnored" : undefined;
}

function viewDirectory(ctx: Discovery, link: ChainLink, withSkills: boolean, stats?: nodeFs.Stats): DirectoryView {
  const entry = ctx.directoryEntry(link.dir, stats);
  const cursor = entry?.homes.get(C.RULE_DIRS.cursor[0]) ?? "none";
  const empty = (): DirectoryView => ({ scope: link.scope, imports: [], rejected: [], skills: [], cursor });
  if (!entry) return empty();
  // Most folders offer nothing call after call: their view is made once per version of the folder.
  const skills = withSkills && entry.homes.get(C.SKILLS_DIR_SEGMENTS[0]!) !== "none";
  if (entry.candidates.length === 0 && !skills) return (entry.empty ??= empty());
  const view = empty();
  const held = ctx.held;
  for (const [index, candidate] of entry.candidates.entries()) {
    const result = ctx.sourceFileOrUnknown(candidate, link.scope);
    if (!("reason" in result)) {
      view.file = result;
      for (const later of entry.candidates.slice(index + 1))
        view.rejected.push({ path: `${link.scope}/${basename(later)}`, reason: "overridden", kind: "overridden" });
      break;
    }
    // A file that waits for git, or cannot be read now, may be the one that applies: the names after it wait.
    refuse(view.rejected, toDisplayPath(ctx.cwdReal, candidate), result.reason, "instruction");
    if (result.reason === "held" || result.reason === "unreadable") break;
  }
  if (view.file && ctx.options.imports) view.imports = importsOf(ctx, view.file, view.scope, view.rejected);
  if (skills) view.skills = skillsOf(ctx, link, entry, view.rejected);
  if (ctx.held !== held) view.pending = true;
  return view;
}

class Discovery {
  readonly fs: FileSystem;
  readonly cwdReal: string;
  options: Options;
  // The bench's warm numbers rest on these three: a warm call stats a folder or file and reads nothing.
  readonly directories = new SignatureCache<DirectoryEntry>();
  readonly files = new SignatureCache<FileEntry>();
  readonly listings = new SignatureCache<ListingEntry>();
  // Cut by folder so the warm fast path joins no paths (bench: warm call ~23 stats of time, floor 10.5 fs calls).
  readonly chains = new Map<string, ChainLink[]>();
  /** cwd as Pi gives it, which may lead to cwdReal through a link. */
  logicalCwd?: string;
  /** Whether cwd's filesystem folds case (and, on macOS, Unicode normalization); asked once. */
  folds?: boolean;
  readonly gitAnswers: GitAnswers;
  /** Folders whose subtree was skipped, for the inspection command. */
  readonly ignoredSeen = new Map<string, Reason>();
  /** Real paths of the context files Pi loaded at start-up (inside cwd): never sent again. */
  startupContext: ReadonlySet<string> = new Set();
  /** Sources held back for git so far; a view that saw it grow is pending. */
  held = 0;
  // Rules (see the Rules part below): folders read this session by cwd-relative folder, the nested
  // `.cursor/rules` places by the viewed folder holding one, cwd's by source (made once: A/B, warm
  // depth-8 reads: 0.95), and each rule compiled once per version.
  readonly ruleFolders = new Map<string, RuleFolder>();
  readonly rulePlaces = new Map<string, RulePlace>();
  readonly cwdRulePlaces: Partial<Record<RuleSource, RulePlace>> = {};
  readonly compiledRules = new Map<string, Rule>();
  private sweepAt = 256;
  /** Every cache, by the name the soak test and the inspection command show. */
  private readonly caches: Readonly<Record<string, { readonly size: number }>>;
  /** The caches keyed by cwd-relative scope, which a sweep checks path by path. */
  private readonly scoped: Readonly<Record<string, Map<string, unknown>>>;

  constructor(fs: FileSystem, cwdReal: string, options: Options, gitMayAnswer: () => boolean) {
    this.fs = fs;
    this.cwdReal = cwdReal;
    this.options = options;
    this.gitAnswers = { folders: new Map(), files: new Map(), wanted: new Set(), mayAnswer: gitMayAnswer };
    const { folders: gitAnswers, files: gitFileAnswers } = this.gitAnswers;
    const { directories, files, listings, chains, ignoredSeen, ruleFolders, rulePlaces, compiledRules } = this;
    this.scoped = { chains, gitAnswers, gitFileAnswers, ignoredSeen, ruleFolders, rulePlaces };
    this.caches = { directories, files, listings, ...this.scoped, compiledRules };
  }

  /** For the soak test and the inspection command. */
  cacheSizes(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.caches).map(([name, cache]) => [name, cache.size]));
  }

  /** Drops entries of paths that are gone once the caches doubled: bounded by the tree, not by the session. */
  sweep(): boolean {
    if (!this.wantsSweep()) return false;
    // Most folders are in several caches: each path is looked at once (bench: bash_fs_calls_warm 20.6 → 19.7).
    const seen = new Map<string, boolean>();
    const exists = (path: string) => {
      let there = seen.get(path);
      if (there === undefined) seen.set(path, (there = this.exists(path)));
      return there;
    };
    for (const cache of [this.directories, this.files, this.listings, this.compiledRules])
      for (const path of cache.keys()) if (!exists(path)) cache.delete(path);
    for (const map of Object.values(this.scoped))
      for (const scope of map.keys()) if (!exists(join(this.cwdReal, scope))) map.delete(scope);
    this.sweepAt = Math.max(256, 2 * this.cachedEntries());
    return true;
  }

  wantsSweep(): boolean {
    return this.cachedEntries() >= this.sweepAt;
  }

  // Asked at every call: a sum over the caches, no object built (profile: building the sizes was 2.6% of a warm call).
  private cachedEntries(): number {
    return Object.values(this.caches).reduce((sum, cache) => sum + cache.size, 0);
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

  /**
   * A folder's instruction files and the sources' homes, from its listing, or by one lstat each without one (too
   * large, unreadable) or when it holds a name that matches one only in case: on a case-insensitive filesystem the
   * probes find such a file, so they answer for that folder.
   */
  directoryEntry(dir: string, known?: nodeFs.Stats): DirectoryEntry | undefined {
    return this.directories.folder(dir, known ?? this.fs.lstat(dir), (stats) => {
      const previous = this.directories.peek(dir);
      // One listing costs less than seven name probes in a small folder; a large one keeps the probes,
      // whose cost does not grow with the folder (bench: cold every-folder chain, 7 probes → 1 call per folder).
      const listable = stats.size <= C.LISTED_DIR_MAX_BYTES && (previous?.listed ?? 0) <= C.LISTED_DIR_MAX_ENTRIES;
      const listed = listable ? fsOr(undefined, () => this.fs.readdir(dir)) : undefined;
      const wanted = this.options.fileNames;
      const own = [...wanted, ...C.SOURCE_HOMES.keys()];
      const folded = new Set(own.map((name) => name.toLowerCase()));
      const usable = listed && !listed.some(({ name }) => !own.includes(name) && folded.has(name.toLowerCase()));
      const named = usable ? new Map(listed.map((dirent) => [dirent.name, dirent])) : undefined;
      // Probed where names fold, two spellings find one file (CLAUDE.md, CLAUDE.MD): it is one candidate.
      const probed = new Set<string>();
      const has = (name: string) => {
        if (named) return named.has(name);
        const stats = fsOr(null, () => this.fs.lstat(entryPath(dir, name)));
        const id = stats ? `${stats.dev}:${stats.ino}` : undefined;
        return stats === null || (id !== undefined && !probed.has(id) && !!probed.add(id));
      };
      // A home whose lstat fails is taken for a link: judged where it resolves, whose I/O error counts as unreadable.
      const kindOf = (name: string) =>
        named
          ? kindOfEntry(named.get(name))
          : fsOr("link" as const, () => kindOfEntry(this.fs.lstat(entryPath(dir, name))));
      return {
        candidates: wanted.filter(has).map((name) => entryPath(dir, name)),
        homes: new Map([...C.SOURCE_HOMES.keys()].map((name) => [name, kindOf(name)])),
        listed: named && listed!.length,
        links: named && listed!.some((dirent) => dirent.isSymbolicLink()),
      };
    });
  }

  learnStartupFiles(paths: readonly string[]): void {
    const real = paths.map((path) => (mayBeInside(this, path) ? this.realpathOrUndefined(path) : undefined));
    this.startupContext = new Set(real.filter((path) => path !== undefined));
  }

  /** A source through the source policy (`sourceRefusal`); `scope` is the folder the model reached it through. */
  resolveSource(written: string, scope: string, how: SourceNaming = "layout"): ResolvedSource {
    const named = how === "named";
    // Text first: a path outside cwd is refused before any filesystem call.
    if (named && !isPathInside(this.cwdReal, written)) return { reason: "outsideCwd" };
    const link = this.fs.lstat(written);
    if (!link) return { reason: "skip" };
    let real = written;
    // A named path may lead through a linked folder: only its real path tells where it is.
    if (link.isSymbolicLink() || named) {
      try {
        real = this.fs.realpath(written);
      } catch (error) {
        // Nothing resolves there; a passing I/O error reaches the caller.
        if (C.SETTLED_ERROR_CODES.has(errorCode(error))) return { reason: "skip" };
        throw error;
      }
    }
    // Stat only once the policy has the path inside cwd: nothing outside is ever opened.
    let stats = real === written ? link : undefined;
    const isDirectory = () => (stats ??= this.fs.stat(real))?.isDirectory() === true;
    const refusal = sourceRefusal(this, how, scope, written, real, isDirectory);
    if (refusal !== undefined) return { reason: refusal };
    stats ??= this.fs.stat(real);
    return stats ? { real, stats } : { reason: "skip" };
  }

  /** The one reader of a source file: instruction, rule, skill or ignore file, or an import. */
  sourceFileOrUnknown(written: string, scope: string, how: SourceNaming = "layout"): SourceFile {
    return fsOr({ reason: "unreadable" as const }, () => this.fileOf(this.resolveSource(written, scope, how)));
  }

  /** The file a source resolved to, read once per content; a folder is nothing, another kind not regular. */
  fileOf(resolved: ResolvedSource): SourceFile {
    if ("reason" in resolved) return resolved;
    const { real, stats } = resolved;
    if (!stats.isFile()) return { reason: stats.isDirectory() ? "skip" : "notRegular" };
    const max = this.options.maxFileBytes;
    const load = (): FileEntry => ({
      loaded: stats.size > max ? { ok: false, reason: "tooLarge" } : readBounded(this.fs, real, max, stats),
    });
    // A read that failed (EIO, EACCES, a race) may succeed next time without the file changing.
    const entry = this.files.current(real, stats, load, ({ loaded }) => loaded.ok || loaded.reason !== "unreadable");
    if (!entry.loaded.ok) return { reason: entry.loaded.reason, real };
    const { text, version, bytes, bom } = entry.loaded;
    return (entry.file ??= { path: toDisplayPath(this.cwdReal, real), realPath: real, text, version, bytes, bom });
  }

  sourceFolder(path: string, scope: string): string | undefined {
    const resolved = this.resolveSource(path, scope);
    return "reason" in resolved || !resolved.stats.isDirectory() ? undefined : resolved.real;
  }

  /**
   * A folder's entries in directory order (as Pi walks skills), re-read when its signature changes, and the folder it
   * was listed in: for a link, its target as the source policy judged it, where the files listed are then read, so
   * that a link moved meanwhile leads no read outside cwd.
   */
  listedAt(dir: string): { folder: string; listing: ListingEntry } | undefined {
    const stats = this.fs.lstat(dir);
    if (stats?.isSymbolicLink()) {
      const real = this.sourceFolder(dir, toDisplayPath(this.cwdReal, dirname(dir)));
      return real === undefined ? undefined : this.listedAt(real);
    }
    // A folder that cannot be listed now is unknown, not empty: the error reaches the caller.
    const listing = this.listings.folder(dir, stats, () => listingOf(this.fs.readdir(dir)));
    return listing && { folder: dir, listing };
  }
}

// Imports: `@relative/path` tokens in an instruction file, resolved against its folder, under the
// same rules as instruction files. Depth first, at most C.MAX_IMPORT_DEPTH hops the shortest way, cycles cut.

function importsOf(ctx: Discovery, root: InstructionFile, scope: string, rejected: Rejection[]) {
  // Most files import nothing: no walk (bench: the every-folder chain's warm calls, peer_over_ours_nogit).
  if (importTargetsOf(ctx, root).length === 0) return [];
  // Followed breadth first, so that a longer way that reaches a file first does not put its imports past the cap.
  const found = new Map<string, InstructionFile[]>();
  const seen = new Set([root.realPath]);
  let level = [root];
  for (let depth = 1; depth <= C.MAX_IMPORT_DEPTH; depth++) {
    level = level.flatMap((file) => {
      const files = importTargetsOf(ctx, file).flatMap((target) => {
        const named = fsOr(undefined, () => importedFiles(ctx, file, target, scope, rejected));
        if (!named) rejected.push({ path: file.path, reason: "unreadable", kind: "import" });
        return named ?? [];
      });
      found.set(file.realPath, files);
      return files.filter((imported) => !seen.has(imported.realPath) && seen.add(imported.realPath));
    });
  }
  // The last hop's imports are not followed: told when one names a file not already taken (a cycle takes nothing).
  for (const file of level)
    if (importTargetsOf(ctx, file).some((next) => !seen.has(next) && mayBeInside(ctx, next) && ctx.exists(next)))
      rejected.push({ path: file.path, reason: "importDepthCapped", kind: "cap" });
  const imports: DirectoryView["imports"] = [];
  const listed = new Set([root.realPath]);
  const visit = (file: InstructionFile): void => {
    for (const imported of found.get(file.realPath) ?? [])
      if (!listed.has(imported.realPath) && listed.add(imported.realPath)) {
        imports.push({ file: imported, importedBy: file.path });
        visit(imported);
      }
  };
  visit(root);
  return imports;
}

function importTargetsOf(ctx: Discovery, file: InstructionFile): string[] {
  const parse = () => importTokens(file.text).map((token) => resolve(dirname(file.realPath), token));
  // Kept on the entry of this very version: the file may have changed since this text was read.
  const entry = ctx.files.peek(file.realPath);
  return entry?.file === file ? (entry.importTargets ??= parse()) : parse();
}

/**
 * The files one target names: a file, or the files of a folder by name (one level, dot names
 * aside, up to the cap). Nothing for a token that names nothing (an npm scope, an email), nor
 * for a target git has yet to answer for. The token is file content: a rejection names only the
 * importing file.
 */
function importedFiles(ctx: Discovery, from: InstructionFile, target: string, scope: string, rejected: Rejection[]) {
  const files: InstructionFile[] = [];
  const add = (file: SourceFile) =>
    "reason" in file ? refuse(rejected, from.path, file.reason, "import") : files.push(file);
  const resolved = ctx.resolveSource(target, scope, "named");
  if ("reason" in resolved || !resolved.stats.isDirectory()) {
    add(ctx.fileOf(resolved));
    return files;
  }
  const listing = ctx.listedAt(resolved.real)?.listing;
  if (!listing) return files;
  for (const entry of sortedNames(listing)) {
    if (entry.name.startsWith(".") || (entry.kind !== "file" && entry.kind !== "link")) continue;
    const file = ctx.sourceFileOrUnknown(entryPath(resolved.real, entry.name), scope, "named");
    // The cap hides only a file that would be taken: those past it that are refused are told as refused.
    if (files.length >= C.MAX_IMPORT_DIR_FILES && !("reason" in file)) {
      const counts = { taken: files.length, total: listing.total };
      rejected.push({ path: from.path, reason: "importDirCapped", kind: "cap", counts });
      return files;
    }
    add(file);
  }
  // Its entries past the scan limit are not read: files may lie after the first entries by name.
  noteScanCap(from.path, listing, rejected, "importScanCapped");
  return files;
}

/**
 * Who names a source's path: the source's own layout, repository text (an import token, resolved
 * even when it is no link), or a reader of a file read only to decide and never sent (a skills
 * tree's ignore file: containment alone).
 */
type SourceNaming = "layout" | "named" | "control";

/**
 * The source policy. What the repository chooses, where a link leads and what an import names,
 * must lie inside cwd, not be a context file Pi put in its system prompt at start-up, hold no dot
 * name but the sources' own homes (credentials live in `.env`, `.git`, `.aws` whether or not git
 * ignores them), pass through no ignored folder, and not be ignored by git. A path the source's own
 * layout names (an AGENTS.md of a folder the model touched, a rule file in its rule folder) is the
 * folder view's to judge, as are the segments of `scope`, the folder the model reached. A file
 * read only to decide need only lie inside cwd. "held" while git has yet to answer.
 */
function sourceRefusal(
  ctx: Discovery,
  how: SourceNaming,
  scope: string,
  written: string,
  real: string,
  isDirectory: () => boolean,
): Reason | "held" | undefined {
  if (how === "control") return isPathInside(ctx.cwdReal, real) ? undefined : "symlinkEscape";
  if (ctx.startupContext.has(real)) return "startupContext";
  // The warm path: a file its source's layout names, and no link, is the folder view's to judge.
  if (how === "layout" && real === written) return undefined;
  for (const path of how === "named" ? [written, real] : [real]) {
    const rel = relativeInside(ctx.cwdReal, path);
    if (rel === undefined || rel === "") return path === written ? "outsideCwd" : "symlinkEscape";
    const prefix = `${scope.split("/").join(sep)}${sep}`;
    const segments = (scope !== "" && rel.startsWith(prefix) ? rel.slice(prefix.length) : rel).split(sep);
    for (const [index, name] of segments.entries()) {
      if (ctx.options.ignoredDirs.has(name) || C.NEVER_IMPORTED_DIR_NAMES.includes(name)) return "ignoredDir";
      if (!name.startsWith(".")) continue;
      const child = C.SOURCE_HOMES.get(name);
      const home = child !== undefined && (segments[index + 1] ?? (isDirectory() ? child : "")) === child;
      const markdown = () => index < segments.length - 1 && C.GUIDANCE_FILE.test(segments.at(-1)!);
      const guidance = C.GUIDANCE_DOT_FOLDERS.has(name) && (isDirectory() || markdown());
      if (!home && !guidance) return "dotfile";
    }
  }
  return gitRefusal(ctx, relativeInside(ctx.cwdReal, real)!.split(sep), isDirectory());
}

/** Whether git ignores a target (cwd-relative segments) or a folder above it; "held" when unknown. */
function gitRefusal(ctx: Discovery, segments: string[], isDirectory: boolean): Reason | "held" | undefined {
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
  const skills: Skill[] = [];
  // The names and files of every skill found so far in this tree, listed or hidden.
  const names = new Set<string>();
  const paths = new Set<string>();
  const reject = (path: string, reason: Reason | "skip" | "held", kind: Rejection["kind"] = "skill") =>
    refuse(rejected, path, reason, kind);
  /** Adds the skill a file in the folder `prefix` names defines; false when no regular file is there, as Pi takes it. */
  const addSkill = (candidate: string, declared: boolean, prefix: string): boolean => {
    const file = ctx.sourceFileOrUnknown(candidate, link.scope);
    if ("reason" in file) {
      reject(toDisplayPath(ctx.cwdReal, file.real ?? candidate), file.reason);
      return file.reason !== "skip" && file.reason !== "notRegular";
    }
    const entry = ctx.files.peek(file.realPath)!;
    // Pi names a skill without a name by its folder as walked, a linked one too: not by where the link leads.
    const folder = prefix === "" ? child : basename(prefix);
    if (entry.skill?.folder !== folder) entry.skill = { folder, ...skillOf(file, folder) };
    const parsed = entry.skill;
    if (!parsed.ok) {
      if (declared) reject(file.path, parsed.reason);
    } else if (!paths.has(file.path)) {
      // As Pi: the same file twice is one skill; another file of a name already found loses.
      if (names.has(parsed.skill.name)) reject(file.path, "skillCollision");
      else {
        names.add(parsed.skill.name);
        paths.add(file.path);
        if (parsed.hidden) reject(file.path, "skillHidden");
        else skills.push(parsed.skill);
      }
    }
    return true;
  };
  /** Scans one folder of the tree; `prefix` is its path below the root and a `/`, as Pi matches ignore rules. */
  const scan = (dir: string, prefix: string, depth: number, inherited: IgnoreSet): void => {
    const rulesOf = (listing: ListingEntry): IgnoreSet | undefined => {
      const read = listing.ignoreFiles.map((name) => ctx.sourceFileOrUnknown(entryPath(dir, name), "", "control"));
      // What an ignore file that cannot be read hides is unknown, and so is its folder: not listed as if it hid nothing.
      if (read.some((file) => "reason" in file && file.reason === "unreadable"))
        return void reject(toDisplayPath(ctx.cwdReal, dir), "unreadable");
      const files = read.flatMap((file) => ("reason" in file ? [] : [file]));
      if (files.length === 0) return inherited;
      const known = listing.ignores;
      const same = known?.inherited === inherited && known.prefix === prefix && known.files.length === files.length;
      if (same && files.every((file, i) => file === known.files[i])) return known;
      const rules = [...inherited.rules, ...files.flatMap((file) => ignoreRulesOf(file.text, prefix))];
      listing.ignores = { inherited, prefix, files, rules, decided: new Map() };
      return listing.ignores;
    };
    const isSkill = (rules: IgnoreSet) =>
      !isIgnored(rules, `${prefix}${C.SKILL_FILE_NAME}`, false) &&
      addSkill(entryPath(dir, C.SKILL_FILE_NAME), true, prefix);
    // A folder known to hold SKILL.md stays a skill while that file exists: nothing else there matters.
    const known = ctx.listings.peek(dir);
    const knownRules = known?.hasSkillFile ? rulesOf(known) : inherited;
    if (!knownRules || (known?.hasSkillFile && isSkill(knownRules))) return;
    const listing = ctx.listedAt(dir)?.listing;
    if (!listing) return;
    const rules = rulesOf(listing);
    // A skill's folder is read no further, so its entries past the cap are no loss; an unchanged one was tried above.
    if (!rules || (listing.hasSkillFile && listing !== known && isSkill(rules))) return;
    const scope = toDisplayPath(ctx.cwdReal, dir);
    noteScanCap(scope, listing, rejected);
    for (const { name, kind } of listing.names) {
      if (name.startsWith(".") || name === "node_modules" || kind === "other") continue;
      const path = entryPath(dir, name);
      const resolved = kind === "link" ? fsOr(null, () => ctx.resolveSource(path, scope)) : undefined;
      // A link that cannot be resolved now (EIO) is unknown, not gone: what the model holds of it stands.
      if (resolved === null) reject(toDisplayPath(ctx.cwdReal, path), "unreadable");
      if (resolved === null || (resolved && "reason" in resolved)) continue;
      const folder = resolved ? resolved.stats.isDirectory() && resolved.real : kind === "dir" && path;
      if (isIgnored(rules, `${prefix}${name}`, folder !== false)) continue;
      if (folder === false) {
        if (depth > 0 && name.endsWith(".md")) addSkill(path, false, prefix);
      } else if (depth < C.MAX_SKILL_DEPTH) scan(folder, `${prefix}${name}/`, depth + 1, rules);
      else reject(toDisplayPath(ctx.cwdReal, folder), "skillDepthCapped", "cap");
    }
  };
  // A linked `.agents` is judged where it leads; a linked `skills` below it, by the listing.
  const written = entryPath(link.dir, home);
  const scanned = fsOr(false, () => {
    const agents = entry.homes.get(home) === "link" ? ctx.sourceFolder(written, link.scope) : written;
    if (agents !== undefined) scan(entryPath(agents, child), "", 0, NO_IGNORES);
    return true;
  });
  // The skills found so far stand; the rest are unknown until the next access.
  if (!scanned) reject(toDisplayPath(ctx.cwdReal, entryPath(written, child)), "unreadable");
  return skills;
}

function skillOf({ text, path }: InstructionFile, folder: string): ParsedSkill {
  const frontmatter = yamlFrontmatter(text)?.frontmatter as Record<string, unknown> | undefined;
  if (!frontmatter) return { ok: false, reason: "skillInvalid" };
  const described = frontmatter.description;
  if (typeof described !== "string" || described.trim() === "") return { ok: false, reason: "skillNoDescription" };
  const given = frontmatter.name;
  const name = typeof given === "string" && given !== "" ? given : folder;
  const description = described.trim();
  const skill = { name, description, path, version: versionOf(`${name}\n${description}\n${path}`) };
  return { ok: true, hidden: frontmatter["disable-model-invocation"] === true, skill };
}

function noteScanCap(path: string, listing: ListingEntry, rejected: Rejection[], reason: Reason = "scanCapped") {
  const counts = { taken: listing.names.length, total: listing.total };
  if (counts.taken < counts.total) rejected.push({ path, reason, kind: "cap", counts });
}

/** Records a refusal; nothing for a source that is not there ("skip") or waits for git ("held"). */
function refuse(rejected: Rejection[], path: string, reason: Reason | "skip" | "held", kind: Rejection["kind"]) {
  if (reason !== "skip" && reason !== "held") rejected.push({ path, reason, kind });
}

/** A folder's entries as discovery keeps them: past the cap, the first entries by name. */
function listingOf(dirents: nodeFs.Dirent[]): ListingEntry {
  const capped = dirents.length > C.MAX_SKILL_DIR_ENTRIES;
  const kept = capped ? dirents.toSorted(byName).slice(0, C.MAX_SKILL_DIR_ENTRIES) : dirents;
  const names = kept.map((d) => ({ name: d.name, kind: direntKind(d) }));
  const has = (name: string) => names.some((entry) => entry.name === name);
  const ignoreFiles = C.SKILL_IGNORE_FILES.filter(has);
  return { names, total: dirents.length, ignoreFiles, hasSkillFile: has(C.SKILL_FILE_NAME) };
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** A listing's names sorted, for imports and rules, whose order is by name; built once per listing. */
function sortedNames(listing: ListingEntry): ListingEntry["names"] {
  return (listing.sorted ??= listing.names.toSorted(byName));
}

function direntKind(dirent: nodeFs.Dirent): "file" | "dir" | "link" | "other" {
  return dirent.isSymbolicLink() ? "link" : dirent.isDirectory() ? "dir" : dirent.isFile() ? "file" : "other";
}

type ParentKind = "none" | "dir" | "link";

function kindOfEntry(entry: nodeFs.Stats | nodeFs.Dirent | undefined): ParentKind {
  return !entry ? "none" : entry.isSymbolicLink() ? "link" : entry.isDirectory() ? "dir" : "none";
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

/** Rules and what they decided, by path: a warm scan of a large tree under a long ignore file decides nothing again. */
type IgnoreSet = { rules: readonly IgnoreRule[]; decided: Map<string, boolean> };

const NO_IGNORES: IgnoreSet = { rules: [], decided: new Map() };

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

function isIgnored({ rules, decided }: IgnoreSet, path: string, isDirectory: boolean): boolean {
  if (rules.length === 0) return false;
  const key = isDirectory ? `${path}/` : path;
  let ignored = decided.get(key);
  if (ignored !== undefined) return ignored;
  ignored = false;
  for (const rule of rules) if ((!rule.dirOnly || isDirectory) && rule.matches(path)) ignored = !rule.negate;
  decided.set(key, ignored);
  return ignored;
}

// Rules: `.claude/rules`, `.cursor/rules` and `.github/instructions`, the path-scoped rule files other
// agents read; each source reads a rule's frontmatter into one of four kinds. Matchers are compiled
// once per rule version. A warm call lstats cwd and the rule folders (their listings are cached),
// passes once over the compiled rules in scope, and stat-checks again only the rules that apply,
// before it delivers them.

// Exported for tests: they table the kinds a rule source reads.
export type RuleKind = keyof typeof C.RULE_KIND_NAMES;

interface RuleMeta {
  kind: RuleKind;
  globs: string[];
  description: string;
  name: string;
}

// Exported for tests: a table test of rule frontmatter.
/**
 * Kind, globs, description, name and body of a rule file's text, as its source reads them. Claude:
 * `paths:`, else always. Cursor: `alwaysApply: true`, else `globs:`, else `description:`. Copilot:
 * `applyTo:`, else a description offers it, as VS Code does; manual with `excludeAgent: coding-agent`. Globs are a
 * list, or a comma list.
 */
export function readRuleMeta(source: RuleSource, text: string, fileName: string): RuleMeta & { body: string } {
  // Pi's parser; hand-written rules often hold frontmatter that is not valid YAML (`globs: *.ts`
  // reads as an alias), which is then read as the tools themselves read it.
  const { frontmatter, body } = yamlFrontmatter(text) ?? looseFrontmatter(text);
  const field = frontmatter as Record<string, unknown>;
  const string = (value: unknown) => (typeof value === "string" ? value.trim() : "");
  const values = [field[C.RULE_GLOB_KEYS[source]]].flat();
  const globs = values.flatMap((item) => (typeof item === "string" ? splitGlobList(item).map(unquoted) : []));
  const description = source === "claude" ? "" : string(field.description);
  const suffix = C.RULE_FILE_SUFFIXES[source].find((candidate) => fileName.endsWith(candidate)) ?? "";
  const name = (source === "copilot" && string(field.name)) || fileName.slice(0, fileName.length - suffix.length);
  const always = source === "claude" ? globs.length === 0 : source === "cursor" && field.alwaysApply === true;
  // Copilot's `excludeAgent: coding-agent` keeps a file for code review: Pi is a coding agent.
  const excluded = source === "copilot" && string(field.excludeAgent) === "coding-agent";
  const kind = always ? "always" : globs.length > 0 ? "glob" : description ? "described" : "manual";
  return { kind: excluded ? "manual" : kind, globs, description, name, body };
}

/** A value without the quotes around it; `"*.ts", "*.tsx"` is a list of two, as Cursor reads it. */
const unquoted = (value: string) => value.trim().replace(/^(["'])((?:(?!\1\s*,)[^])*)\1$/, "$2");

/** Plain `key: value` lines and `- item` lists, of frontmatter that Pi's parser found but could not read. */
function looseFrontmatter(text: string): { frontmatter: Record<string, unknown>; body: string } {
  const end = text.indexOf("\n---", 3);
  const frontmatter: Record<string, unknown> = {};
  let list: string[] | undefined;
  for (const line of text.slice(4, end).split("\n")) {
    const item = /^\s*-\s+(.*)$/.exec(line);
    const pair = /^([A-Za-z_][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (item && list) list.push(unquoted(item[1]!));
    else if (pair) {
      const value = pair[2]!.trim();
      list = value === "" ? [] : undefined;
      // `[a, b]` is a list, as it is in YAML: what is left is cut at its commas like any glob list.
      const flow = value.replace(/^\[(.*)\]$/, "$1");
      frontmatter[pair[1]!] = list ?? (value === "true" ? true : value === "false" ? false : unquoted(flow));
    }
  }
  return { frontmatter, body: text.slice(end + 4).trim() };
}

// Exported for tests: a table test of glob lists.
export function splitGlobList(value: string): string[] {
  const parts = [""];
  let depth = 0;
  // An escape, a `[…]` class (to its end when it is not closed), or one character.
  for (const token of value.match(/\\.?|\[(?:\\.|[^\]])*\]?|[\s\S]/g) ?? []) {
    if (token === "," && depth === 0) parts.push("");
    else parts[parts.length - 1] += token;
    if (token === "{") depth++;
    else if (token === "}" && depth > 0) depth--;
  }
  return parts.map((part) => part.trim()).filter((part) => part !== "");
}

// Exported for tests: a table test of each source's glob semantics.
/** Whether a source's glob matches a path relative to the folder holding the rule folder. */
export function globMatches(source: RuleSource, glob: string, path: string): boolean {
  const compiled = ruleGlob([glob], source);
  return compiled.ok && compiled.matches(path);
}

/**
 * A rule's globs as one matcher: a Claude glob without a slash matches only at the base, a Cursor one at any
 * depth, a Copilot one as VS Code reads it. `!` exclusions are in none of the three tools' syntax: they match nothing.
 */
function ruleGlob(globs: readonly string[], source: RuleSource): ReturnType<typeof compileGlob> {
  const usable = globs.map((glob) => sourceGlob(glob, source)).filter((glob) => !glob.startsWith("!"));
  // VS Code matches an applyTo glob whatever the case.
  return compileGlob(usable, { braces: true, floating: source === "cursor", ignoreCase: source === "copilot" });
}

// A glob as its source reads it, `./` dropped: VS Code puts `**/` before an applyTo glob not led by `/` or `**/`.
function sourceGlob(glob: string, source: RuleSource): string {
  const read = glob.trim().replace(/^\.\//, "");
  return source === "copilot" && !/^(!|\/|\*\*(\/|$))/.test(read) ? `**/${read}` : read;
}

/** The globs as the model is shown them, from cwd; a rule without globs covers its base. */
function ruleScope(meta: RuleMeta, source: RuleSource, base: string): string {
  const prefix = base === "" ? "" : `${base}/`;
  if (meta.kind !== "glob") return `${prefix}**`;
  // One reading for all three sources, a Claude glob's, of each as `ruleGlob` reads it: a Cursor glob without a
  // slash says its `**/`, as a Copilot glob's reading does.
  const fromBase = (glob: string) => {
    const not = glob.startsWith("!") ? "!" : "";
    const bare = sourceGlob(glob.slice(not.length), source);
    const plain = bare.replace(/^\.?\/+/, "");
    const floating = source === "cursor" && !bare.startsWith("/") && !plain.includes("/") && plain !== "**";
    return `${not}${prefix}${floating ? "**/" : ""}${plain}`;
  };
  return meta.globs.map(fromBase).join(", ");
}

interface Rule {
  source: RuleSource;
  /** cwd-relative path of the file's real location: its identity in the ledger. */
  path: string;
  /** Absolute path as listed; stat-checked again before the rule is delivered. */
  candidate: string;
  /** cwd-relative folder its globs are relative to ("" for cwd), and its rule folder. */
  base: string;
  dir: string;
  meta: RuleMeta;
  scope: string;
  /** Its globs' matcher; a rule whose globs do not compile is refused with the reason. */
  glob?: ReturnType<typeof compileGlob>;
  loaded: InstructionFile;
  /** What is delivered: the text without its frontmatter. */
  body: InstructionFile;
  /** Version of a description-only rule's listing. */
  listingVersion: string;
}

interface RulePlace {
  source: RuleSource;
  base: string;
  /** cwd-relative rule folder's parent (`.cursor` …), and its segments and absolute path. */
  parentScope: string;
  parentSegments: string[];
  parentDir: string;
  /** cwd-relative rule folder. */
  display: string;
}

interface RuleFolder {
  place: RulePlace;
  /** Listings the rules were read from; the folder is read again when one changes, or when there are none. */
  listings?: ListingEntry[];
  rules: Rule[];
  rejected: Rejection[];
  /** Paths of its rules that are not manual, built once per version of the folder's rules. */
  offered?: Set<string>;
  /** Its rules that apply to the touched paths, by those paths, built once per version of the folder's rules. */
  applying?: Map<string, Rule[]>;
  /** The names of its rule files and their imports: `ruleNames`. */
  names?: Set<string>;
}

/** The names a call must use to show one of a folder's rule files or their imports, built once per version. */
function ruleNames(ctx: Discovery, folder: RuleFolder): Set<string> {
  const named = (rule: Rule) => [rule.candidate, rule.loaded.realPath, ...importTargetsOf(ctx, rule.loaded)];
  return (folder.names ??= new Set(folder.rules.flatMap(named).map((path) => basename(path))));
}

function ruleMatches(rule: Rule, path: string): boolean {
  const { glob, base } = rule;
  if (!glob?.ok || path === "") return false;
  if (base === "") return glob.matches(path);
  return path[base.length] === "/" && path.startsWith(base) && glob.matches(path.slice(base.length + 1));
}

function ruleApplies(rule: Rule, touched: readonly string[]): boolean {
  const { kind } = rule.meta;
  return kind !== "manual" && (kind !== "glob" || touched.some((path) => ruleMatches(rule, path)));
}

function rulePlace(ctx: Discovery, source: RuleSource, base: string): RulePlace {
  const [parent, child] = C.RULE_DIRS[source];
  const parentScope = base === "" ? parent : `${base}/${parent}`;
  const [parentSegments, parentDir] = [parentScope.split("/"), join(ctx.cwdReal, parentScope)];
  return { source, base, parentScope, parentSegments, parentDir, display: `${parentScope}/${child}` };
}

/**
 * The rule folders that govern these views: cwd's, then the `.cursor/rules` of each viewed folder
 * that holds or held one. Folders git has not answered for yet wait. Git is asked about the rule
 * folder's parent (`.cursor`, `.claude`, `.github`), never below it: git gives up beyond a link.
 */
function ruleFoldersFor(ctx: Discovery, views: DirectoryView[], sources: ReadonlySet<RuleSource>): RuleFolder[] {
  // cwd's entry, as a folder view's: one lstat of cwd while it stands. One that fails takes each home for a link,
  // judged where it resolves, as a folder read name by name does.
  const entry = fsOr(null, () => ctx.directoryEntry(ctx.cwdReal));
  const places = C.RULE_SOURCES.filter((source) => sources.has(source)).map((source) => ({
    place: (ctx.cwdRulePlaces[source] ??= rulePlace(ctx, source, "")),
    kind: entry === null ? "link" : (entry?.homes.get(C.RULE_DIRS[source][0]) ?? "none"),
  }));
  for (const view of sources.has("cursor") ? views : []) {
    let place = ctx.rulePlaces.get(view.scope);
    if (!place && view.cursor !== "none")
      ctx.rulePlaces.set(view.scope, (place = rulePlace(ctx, "cursor", view.scope)));
    if (place) places.push({ place, kind: view.cursor });
  }
  const folders: RuleFolder[] = [];
  for (const { place, kind } of places) {
    const ignored = C.RULE_DIRS[place.source].some((name) => ctx.options.ignoredDirs.has(name))
      ? "ignoredDir"
      : gitRefusal(ctx, place.parentSegments, true);
    if (ignored === undefined) folders.push(ruleFolder(ctx, place, kind));
    else if (ignored !== "held") ctx.ignoredSeen.set(place.display, ignored);
  }
  return folders;
}

/** A place's rules, read again when a listing of its folders (down to MAX_RULE_DEPTH) changes. */
function ruleFolder(ctx: Discovery, place: RulePlace, parentKind: ParentKind): RuleFolder {
  // A parent that is a link must resolve inside cwd before anything below it is listed.
  const written = place.parentDir;
  const linked = parentKind === "link" ? fsOr(null, () => ctx.resolveSource(written, place.base)) : undefined;
  // One that cannot be resolved now (EIO) is unknown, not gone: the rules the model may hold from it stay offered.
  if (linked === null) {
    const rejected = [{ path: place.display, reason: "unreadable" as const, kind: "instruction" as const }];
    return { place, rules: ctx.ruleFolders.get(place.display)?.rules ?? [], rejected };
  }
  const parentDir = !linked ? written : "reason" in linked || !linked.stats.isDirectory() ? undefined : linked.real;
  // The report says why a linked parent is refused; not while git has yet to answer, nor for a link to nothing.
  const refused = linked && "reason" in linked && linked.reason !== "held" ? linked.reason : "skip";
  if (refused !== "skip") ctx.ignoredSeen.set(place.display, refused);
  else if (linked) ctx.ignoredSeen.delete(place.display);
  const found = new Map<ListingEntry, string>();
  // A folder that cannot be listed now (EIO, EACCES) is unknown, not empty: the rest is read, and it again next time.
  const unreadable: string[] = [];
  const suffixes = C.RULE_FILE_SUFFIXES[place.source];
  const isRuleName = (name: string) => suffixes.some((suffix) => name.endsWith(suffix) && name.length > suffix.length);
  const walk = (written: string, depth: number): void => {
    const listed = fsOr(null, () => ctx.listedAt(written));
    if (listed === null) unreadable.push(ctx.realpathOrUndefined(written) ?? written);
    // A folder reached again through a link (a loop, a second link) is read once; its files where it was judged.
    if (!listed || found.has(listed.listing)) return;
    const { folder: dir, listing } = listed;
    found.set(listing, dir);
    listing.folders ??= sortedNames(listing).filter(({ kind }) => kind === "dir" || kind === "link");
    for (const { name, kind } of depth < C.MAX_RULE_DEPTH ? listing.folders : []) {
      // A link not named as a rule file is searched as a folder, as Claude Code follows links there, once the
      // source policy lets it through.
      const folder = kind === "dir" || (kind === "link" && !isRuleName(name));
      if (folder && !name.startsWith(".") && !ctx.options.ignoredDirs.has(name)) walk(entryPath(dir, name), depth + 1);
    }
  };
  // No parent, or a refused one, lists nothing: the folder holds no rules, as an empty one does.
  if (parentKind !== "none" && parentDir !== undefined) walk(entryPath(parentDir, C.RULE_DIRS[place.source][1]), 0);
  const known = ctx.ruleFolders.get(place.display);
  const read = [...found.keys()];
  const same = known?.listings?.length === read.length && read.every((listing, i) => listing === known.listings![i]);
  if (same && unreadable.length === 0) return known!;
  const listings = unreadable.length === 0 ? read : undefined;
  const folder: RuleFolder = { place, listings, rules: [], rejected: [] };
  for (const dir of unreadable) {
    // The rules the model may hold from it stay offered, so that none is withdrawn.
    folder.rules.push(...(known?.rules ?? []).filter((rule) => isPathInside(dir, rule.candidate)));
    folder.rejected.push({ path: toDisplayPath(ctx.cwdReal, dir), reason: "unreadable", kind: "instruction" });
  }
  for (const [listing, dir] of found) {
    noteScanCap(toDisplayPath(ctx.cwdReal, dir), listing, folder.rejected);
    for (const { name, kind } of sortedNames(listing)) {
      if (kind === "dir" || kind === "other" || name.startsWith(".") || !isRuleName(name)) continue;
      const candidate = entryPath(dir, name);
      const rule = ruleAt(ctx, place, candidate);
      if (!("reason" in rule)) {
        folder.rules.push(rule);
        continue;
      }
      // A rule that waits for git, or cannot be read now: the folder is read again at the next call. One
      // read before is unknown, not gone: it stays offered as it was, and nothing is told of it.
      const earlier = rule.reason === "unreadable" ? ctx.compiledRules.get(candidate) : undefined;
      if (rule.reason === "held" || rule.reason === "unreadable") folder.listings = undefined;
      if (earlier) folder.rules.push(earlier);
      else refuse(folder.rejected, toDisplayPath(ctx.cwdReal, candidate), rule.reason, "instruction");
    }
  }
  ctx.ruleFolders.set(place.display, folder);
  return folder;
}

/** The rule a rule file defines as it is now, compiled once per version; why not, for a file refused or gone. */
function ruleAt(ctx: Discovery, place: RulePlace, candidate: string): Rule | { reason: Reason | "skip" | "held" } {
  const file = ctx.sourceFileOrUnknown(candidate, place.base);
  if ("reason" in file) return file;
  let rule = ctx.compiledRules.get(candidate);
  if (rule?.loaded !== file || rule.dir !== place.display) {
    const { source, base, display: dir } = place;
    const { body, ...meta } = readRuleMeta(source, file.text, basename(candidate));
    rule = {
      source,
      path: file.path,
      candidate,
      base,
      dir,
      meta,
      scope: ruleScope(meta, source, base),
      ...(meta.kind === "glob" && { glob: ruleGlob(meta.globs, source) }),
      loaded: file,
      body: { ...file, text: body, bytes: Buffer.byteLength(body) },
      listingVersion: versionOf(`${meta.name}\n${meta.description}\n${file.path}`),
    };
    ctx.compiledRules.set(candidate, rule);
  }
  return rule.glob?.ok === false ? { reason: rule.glob.reason } : rule;
}

/** The rules that apply to these paths, and a glob rule whose file the call shows whole, each stat-checked again. */
function applyingRules(ctx: Discovery, folders: RuleFolder[], touched: readonly string[], shown?: string): Rule[] {
  const applies = (rule: Rule) =>
    ruleApplies(rule, touched) || (rule.meta.kind === "glob" && rule.loaded.realPath === shown);
  const rules: Rule[] = [];
  const key = [shown, ...touched].join("\0");
  for (const folder of folders) {
    // Paths touched again match no glob again (profile: matching 50 globs was 6% of a warm call).
    let applying = folder.applying?.get(key);
    if (!applying) {
      applying = folder.rules.filter(applies);
      if ((folder.applying ??= new Map()).size >= C.MAX_RULE_MATCH_CACHE) folder.applying.clear();
      folder.applying.set(key, applying);
    }
    for (const rule of applying) {
      const fresh = ruleAt(ctx, folder.place, rule.candidate);
      if ("reason" in fresh) {
        // Gone or refused since the folder was read: read the folder again at the next call.
        folder.listings = undefined;
        continue;
      }
      if (fresh !== rule) {
        folder.rules[folder.rules.indexOf(rule)] = fresh;
        folder.offered = folder.applying = folder.names = undefined;
      }
      if (fresh === rule || applies(fresh)) rules.push(fresh);
    }
  }
  return rules;
}

// =============================================================================================
// 6. Caches and the filesystem seam. Every byte the extension touches goes through one of these
// calls, so tests can inject faults and record paths. Synchronous on purpose: the files are small
// and capped, and a handler without awaits cannot interleave with its siblings.

const OPEN_FLAGS = nodeFs.constants.O_RDONLY | (nodeFs.constants.O_NOFOLLOW ?? 0) | (nodeFs.constants.O_NONBLOCK ?? 0);

// Exported for tests: the fault-injecting seam of tests wraps it. stat and lstat give undefined
// when nothing is there.
export const nodeFileSystem = {
  stat: (path: string) => statSync(path, { throwIfNoEntry: false }),
  lstat: (path: string) => lstatSync(path, { throwIfNoEntry: false }),
  realpath: (path: string) => realpathSync.native(path),
  open: (path: string) => openSync(path, OPEN_FLAGS),
  fstat: (fd: number) => fstatSync(fd),
  read: (fd: number, buffer: Uint8Array, offset: number, length: number, position: number) =>
    readSync(fd, buffer, offset, length, position),
  close: (fd: number) => closeSync(fd),
  readdir: (path: string) => readdirSync(path, { withFileTypes: true }),
};

export type FileSystem = typeof nodeFileSystem;

type Loaded = { ok: true; text: string; version: string; bytes: number; bom?: true } | { ok: false; reason: Reason };

type Signature = Pick<nodeFs.Stats, "dev" | "ino" | "size" | "mtimeMs" | "ctimeMs">;

function signatureOf({ dev, ino, size, mtimeMs, ctimeMs }: Signature): Signature {
  return { dev, ino, size, mtimeMs, ctimeMs };
}

function sameSignature(a: Signature, b: Signature): boolean {
  return a.ino === b.ino && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs && a.size === b.size && a.dev === b.dev;
}

/** What was built from a path, kept while its stat signature stands: a warm look costs only the caller's stat. */
class SignatureCache<T> extends Map<string, { signature: Signature; value: T }> {
  /** The value for `path` as `stats` shows it; `keep` false leaves a build out (a failure that may pass). */
  current(path: string, stats: nodeFs.Stats, build: () => T, keep: (value: T) => boolean = () => true): T {
    const cached = this.get(path);
    if (cached && sameSignature(cached.signature, stats)) return cached.value;
    const value = build();
    if (keep(value)) this.set(path, { signature: signatureOf(stats), value });
    else this.delete(path);
    return value;
  }

  /** As `current`, for a folder: nothing, and nothing kept, when `stats` shows none there. */
  folder(path: string, stats: nodeFs.Stats | undefined, build: (stats: nodeFs.Stats) => T): T | undefined {
    if (stats?.isDirectory()) return this.current(path, stats, () => build(stats));
    this.delete(path);
    return undefined;
  }

  /** The value last built for `path`, without a stat: for hints only. */
  peek(path: string): T | undefined {
    return this.get(path)?.value;
  }
}

/**
 * Reads at most `maxBytes` of a regular file, strictly decoded; the file may change between stat and read.
 * O_NOFOLLOW guards only the last name: a folder on the way swapped for a link since `judged` was taken
 * opens another file, which is refused as unreadable, so the next access judges the path again.
 */
function readBounded(fs: FileSystem, realPath: string, maxBytes: number, judged?: Signature): Loaded {
  let fd: number | undefined;
  try {
    fd = fs.open(realPath);
    const stats = fs.fstat(fd);
    if (!stats.isFile()) return { ok: false, reason: "notRegular" };
    if (judged && (stats.ino !== judged.ino || stats.dev !== judged.dev)) return { ok: false, reason: "unreadable" };
    if (stats.size > maxBytes) return { ok: false, reason: "tooLarge" };
    // Sized by the stat, so that one read that stops short past the stat's size is the end; a file
    // that grew since fills it, and the read goes on into a buffer of the cap (bench: 2 reads → 1).
    let buffer = new Uint8Array(stats.size + 1);
    let length = 0;
    while (length <= maxBytes) {
      if (length === buffer.length) buffer = Buffer.concat([buffer], maxBytes + 1);
      const count = fs.read(fd, buffer, length, buffer.length - length, length);
      if (count <= 0) break;
      length += count;
      if (length < buffer.length && length >= stats.size) break;
    }
    if (length > maxBytes) return { ok: false, reason: "tooLarge" };
    const text = decodeInstructionText(buffer.subarray(0, length));
    if (text === undefined) return { ok: false, reason: "notUtf8" };
    const bom = buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? { bom: true as const } : {};
    return { ok: true, text, version: versionOf(text), bytes: length, ...bom };
  } catch (error) {
    errorCode(error);
    return { ok: false, reason: "unreadable" };
  } finally {
    // A failed close loses nothing we read.
    if (fd !== undefined) fsOr(undefined, () => fs.close(fd!));
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
 * Git's answers for one discovery, by cwd-relative path: the folders it ignores (their subtrees too)
 * and import targets; the questions views raised that git was not asked yet (`scope/` for a folder,
 * a file's path); whether git may still answer (while it may, an unanswered import is held back).
 */
type GitAnswers = {
  readonly folders: Map<string, boolean>;
  readonly files: Map<string, boolean>;
  readonly wanted: Set<string>;
  readonly mayAnswer: () => boolean;
};

function setGitAnswer(answers: GitAnswers, question: string, ignored: boolean): void {
  answers[question.endsWith("/") ? "folders" : "files"].set(withoutSlash(question), ignored);
}

const withoutSlash = (path: string) => (path.endsWith("/") ? path.slice(0, -1) : path);

// Exported for tests: they hand the engine a git that is slow, absent or dying.
export type SpawnGit = (cwd: string) => ChildProcessWithoutNullStreams;

// Started in the runtime's own folder with `-C`: Windows, and a PATH with an empty or relative entry, look
// for the program in the folder it starts in first, and a repository may hold a `git` of its own.
const spawnGit: SpawnGit = (cwd) =>
  spawn("git", ["-C", cwd, ...C.GIT_ARGS], {
    cwd: dirname(process.execPath),
    env: { ...process.env, ...C.GIT_ENV },
    stdio: ["pipe", "pipe", "pipe"],
  });

/** A question (cwd-relative, "" for cwd, a folder's ends in `/`) and who waits for the rule that matched. */
type GitWaiter = { path: string; answer: (rule: string | undefined) => void };

class GitIgnoreOracle {
  readonly cwdReal: string;
  private readonly spawnGit: SpawnGit;
  private child?: ChildProcessWithoutNullStreams;
  /** True once git is gone for the session (absent, no repository, timed out): nothing is asked again. */
  off = false;
  /** The rule that ignores cwd itself, and so tells nothing ("" for none); undefined until git works here. */
  private cwdRule?: string;
  private buffer = "";
  private answered = false;
  private waiters: GitWaiter[] = [];
  /** Scopes git failed on, each ending in `/`: their subtrees are not asked again. */
  private readonly failed = new Set<string>();

  constructor(cwdReal: string, spawner: SpawnGit) {
    this.cwdReal = cwdReal;
    this.spawnGit = spawner;
  }

  start(): void {
    if (this.child || this.off) return;
    try {
      const child = (this.child = this.spawnGit(this.cwdReal));
      // The helper must never keep Pi (or a print-mode run) alive on its own.
      for (const handle of [child, child.stdin, child.stdout, child.stderr] as Array<{ unref?: () => void }>) {
        handle.unref?.();
      }
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (chunk: string) => this.onData(chunk));
      child.stderr.resume();
      // 'close' follows every end, a failed spawn included, once stdout has been read to its end.
      child.on("error", () => {});
      child.on("close", () => this.onClose(child));
      child.stdin.on("error", () => {});
    } catch (error) {
      errorCode(error); // git cannot be started: no answers, nothing ignored by git
      return this.stop();
    }
    if (this.cwdRule === undefined) this.send({ path: "", answer: (rule) => void (this.cwdRule = rule ?? "") });
  }

  /** Whether git ignores each cwd-relative path (a folder's ends in `/`); false for all without git. */
  async ask(paths: string[]): Promise<boolean[]> {
    this.start();
    // Off, it answers false for all: no timer, no waiters (bench: cold_nogit_peer_over_ours, asked at each cold call).
    if (this.off) return paths.map(() => false);
    const rules = paths.map((path) => new Promise<string | undefined>((answer) => this.send({ path, answer })));
    const timer = setTimeout(() => this.stop(), C.GIT_ANSWER_TIMEOUT_MS);
    try {
      // Only a rule about the path itself counts, not the one that ignores cwd and all below.
      return (await Promise.all(rules)).map((rule) => !!rule && rule !== this.cwdRule);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * `./` keeps a name that starts with `:` from being read as pathspec magic (check-ignore refuses both
   * `:(literal)` and GIT_LITERAL_PATHSPECS). Without the slash git stats the folder itself: `generated/*`
   * then does not match `generated`, and a `!generated/keep/` re-include is reported as the negation it is.
   */
  private send(waiter: GitWaiter): void {
    const path = withoutSlash(waiter.path);
    // A helper that cannot start again answers nothing; one that died answers its waiters when it closes.
    if (this.off || [...this.failed].some((scope) => `${path}/`.startsWith(scope))) return waiter.answer(undefined);
    this.waiters.push(waiter);
    this.child?.stdin.write(`./${path}\0`);
  }

  /** Records are four NUL-terminated fields: source, line, pattern, path; a negated pattern or none ignores nothing. */
  private onData(chunk: string): void {
    const fields = (this.buffer + chunk).split("\0");
    const whole = fields.length - 1 - ((fields.length - 1) % 4);
    this.buffer = fields.slice(whole).join("\0");
    for (let at = 0; at < whole; at += 4) {
      this.answered = true;
      const pattern = fields[at + 2]!;
      const rule = pattern === "" || pattern.startsWith("!") ? "" : fields.slice(at, at + 3).join("\0");
      this.waiters.shift()?.answer(rule);
    }
  }

  /** Before git answered for cwd it does not work here; after, it died on the first unanswered path. */
  private onClose(child: ChildProcessWithoutNullStreams): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.buffer = "";
    if (this.cwdRule === undefined || this.off) return this.stop();
    const [culprit, ...rest] = this.waiters.splice(0);
    if (!culprit) return;
    this.failed.add(`${withoutSlash(culprit.path)}/`);
    culprit.answer(undefined);
    if (rest.length > 0) this.start();
    for (const waiter of rest) this.send(waiter);
  }

  /** Whether git answered here and then stopped (timed out, or could not start again): worth telling. */
  get stopped(): boolean {
    return this.off && this.answered;
  }

  stop(): void {
    this.off = true;
    for (const waiter of this.waiters.splice(0)) waiter.answer(undefined);
    this.child?.stdin.end();
    this.child?.kill();
    this.child = undefined;
  }
}

// =============================================================================================
// 8. Settings: the defaults of config.ts, which `lazyAgents` in Pi's settings.json files may override,
// as `pi.getSettings()` merges them (project over global, key by key; Pi leaves an untrusted
// project's settings out). Every value is checked; a bad one keeps its default and earns one fixed
// warning that names only our own key.

// Exported for tests: they compare settings with the defaults, and build settings from them.
export type Options = ReturnType<typeof C.defaultOptions>;
export const defaultOptions = C.defaultOptions;

/**
 * A setting's value, shaped as its option's default (a list or a set); undefined for a value it does not take.
 * A name is at most 255 characters, not `.` or `..`, without `/`, `\` or NUL; a list holds at most 64.
 */
function settingValue(setting: Setting, value: unknown, shape: unknown): unknown {
  const { type, min = 0, from } = setting;
  if (type === "boolean") return typeof value === "boolean" ? value : undefined;
  if (type === "bytes") {
    const good = typeof value === "number" && Number.isInteger(value) && value >= min && value <= C.MAX_SETTING_BYTES;
    return good ? value : undefined;
  }
  const allowed = (name: unknown) =>
    from ? from.includes(name as string) : typeof name === "string" && /^(?!\.\.?$)[^/\\\0]{1,255}$/.test(name);
  const good =
    Array.isArray(value) &&
    value.length >= min &&
    (from !== undefined || value.length <= 64) &&
    value.every(allowed) &&
    (setting.repeats || new Set(value).size === value.length);
  return !good ? undefined : shape instanceof Set ? new Set(value) : value;
}

/** Exported for the test that holds schema.json to the same keys. */
export const SETTING_KEYS = Object.keys(C.SETTINGS) as Array<keyof typeof C.SETTINGS>;

/** Names the settings file a `lazyAgents` key came from (the whole object when `key` is undefined). */
type SettingsOrigin = (key?: string) => string;

/**
 * Exported for tests: the `lazyAgents` settings object over the defaults of config.ts. Each warning
 * names the key, the file it came from and the allowed values; never a value from the file.
 */
export function optionsFromSettings(
  raw: unknown,
  origin: SettingsOrigin = () => C.GLOBAL_SETTINGS_LABEL,
): { options: Options; warnings: string[] } {
  const options = defaultOptions();
  if (raw === undefined) return { options, warnings: [] };
  if (!isObject(raw)) return { options, warnings: [C.SETTINGS_WARNINGS.notObject(origin())] };
  const unknown = Object.keys(raw).filter((key) => !Object.hasOwn(C.SETTINGS, key));
  const warnings = unknown
    .slice(0, C.MAX_UNKNOWN_KEY_WARNINGS)
    .map((key) =>
      C.SHOWN_KEY_PATTERN.test(key)
        ? C.SETTINGS_WARNINGS.unknownKey(key, origin(key), nearestSettingKey(key))
        : C.SETTINGS_WARNINGS.unnamedKey(origin(key)),
    );
  const more = unknown.slice(C.MAX_UNKNOWN_KEY_WARNINGS).map((key) => origin(key));
  for (const where of new Set(more))
    warnings.push(C.SETTINGS_WARNINGS.moreKeys(more.filter((other) => other === where).length, where));
  for (const key of SETTING_KEYS) {
    if (raw[key] === undefined) continue;
    const setting: Setting = C.SETTINGS[key];
    const option = (setting.option ?? key) as keyof Options;
    const value = settingValue(setting, raw[key], options[option]);
    if (value === undefined) warnings.push(C.SETTINGS_WARNINGS.badValue(key, origin(key), C.settingExpected(setting)));
    else (options as Record<string, unknown>)[option] = value;
  }
  return { options, warnings };
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
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current.push(Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    }
    previous = current;
  }
  return previous[b.length]!;
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
  if (!trusted) return () => globalLabel;
  const unparsed = () => C.eitherSettingsLabel(globalLabel);
  // The project's `lazyAgents` value; undefined when the project has no such file or key.
  let project: unknown;
  try {
    const cwdReal = fs.realpath(cwd);
    const real = fs.realpath(join(cwdReal, CONFIG_DIR_NAME, "settings.json"));
    const loaded = isPathInside(cwdReal, real) ? readBounded(fs, real, C.MAX_SETTING_BYTES) : undefined;
    if (!loaded?.ok) return unparsed;
    // Pi reads an empty file as no settings.
    if (loaded.text.trim() !== "")
      project = (JSON.parse(loaded.text) as Record<string, unknown> | null)?.[C.SETTINGS_KEY];
  } catch (error) {
    if (error instanceof SyntaxError || !C.SETTLED_ERROR_CODES.has(errorCode(error))) return unparsed;
  }
  const sets = (key?: string) => key === undefined || (isObject(project) && Object.hasOwn(project, key));
  return (key) => (project !== undefined && sets(key) ? C.PROJECT_SETTINGS_LABEL : globalLabel);
}

// =============================================================================================
// 9. The /lazy-agents report: what the session has seen, kept per scope and replaced at each view,
// and `why <path>` / `why "<command>"`. Never file contents.

/** What the session has seen: the latest view of each folder a call looked at, so bounded by the folders visited. */
class Inspection extends Map<string, DirectoryView> {
  record(views: DirectoryView[]): void {
    for (const view of views) this.set(view.scope, view);
  }

  prune(keep: (scope: string) => boolean): void {
    for (const scope of this.keys()) if (!keep(scope)) this.delete(scope);
  }
}

/** The instruction files and imports of these views, each under the scope of the folder that offers it. */
function viewedFiles(views: Iterable<DirectoryView>): Array<InstructionFile & { scope: string; importedBy?: string }> {
  return [...views].flatMap(({ scope, file, imports }) => {
    const offered = [...(file ? [{ file, importedBy: undefined }] : []), ...imports];
    return offered.map(({ file, importedBy }) => ({ ...file, scope, importedBy }));
  });
}

/** Views the chains as a call would, once git has answered, and records them; a folder looks alike on every chain. */
async function viewForReport(engine: LazyAgents, discovery: Discovery, chains: Located[], env: CallEnvironment) {
  const withSkills = env.trusted && engine.options.skills;
  await engine.settled(chains, withSkills);
  const unviewed: Unviewed = new Map();
  const views = chains.flatMap((located) => viewChain(discovery, located, withSkills, unviewed));
  engine.inspection.record(views);
  return { views, unviewed };
}

/** Both `why` answers walk a chain so: each folder with its view or why it has none, down to where the view stopped. */
function* chainFolders(located: Located, views: DirectoryView[], unviewed: Unviewed) {
  for (const { scope } of located.links) {
    const view = views.find((candidate) => candidate.scope === scope);
    const why = view ? undefined : unviewed.get(scope);
    if (!view && !why) return;
    yield { scope, view, why };
  }
}

/** `/lazy-agents why "<command>"`: which words activated which scopes, and why the others did not. */
async function explainCommand(engine: LazyAgents, command: string, env: CallEnvironment): Promise<string> {
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return C.REPORT_NO_CWD;
  const commands = readShellCommand(command);
  const { outcomes, chains } = locateShellWords(discovery, commands, env.cwd);
  const { views, unviewed } = await viewForReport(engine, discovery, chains, env);
  // One line per activated scope, naming the words that activate it; one line for every word ignored.
  const activated = new Map<string, { label: string; words: Set<string> }>();
  const ignored: string[] = [];
  for (const { use, located, reason } of outcomes) {
    if (!located) {
      ignored.push(`${use.word} (${C.SHELL_WORD_REASONS[reason ?? "missing"]})`);
      continue;
    }
    const role = use.role === "write" ? C.REPORT_TEXT.writtenActivates : C.REPORT_TEXT.activates;
    for (const { scope, view, why } of chainFolders(located, views, unviewed)) {
      if (why) ignored.push(`${use.word} (${scope}/: ${C.REASONS[why]})`);
      if (!view) continue;
      const { file } = view;
      // A folder whose only candidate was refused says which and why, as `why <path>` does.
      const refused = view.rejected.find(({ kind }) => kind === "instruction");
      const none = refused ? C.REPORT_TEXT.refusedFile(refused.path, refused.reason) : C.REPORT_TEXT.noInstructionFile;
      const held = file ? `${file.path}, ${fileState(engine.ledger, file)}` : none;
      if (!activated.has(scope)) activated.set(scope, { label: `${scopeGlob(scope)} (${held})`, words: new Set() });
      activated.get(scope)!.words.add(`${use.word} ${role}`);
    }
  }
  const lines = [`${C.USER_PREFIX}why ${JSON.stringify(command)}`];
  if (commands.length === 0) lines.push(C.REPORT_TEXT.noCommandWords);
  for (const { label, words } of activated.values()) lines.push(`  ${label}: ${[...words].join(", ")}`);
  if (ignored.length > 0) lines.push(`  ${C.REPORT_TEXT.ignoredWords} ${ignored.join(", ")}`);
  if (!engine.options.triggers.has("bash")) lines.push(C.REPORT_TEXT.bashNotTrigger);
  return lines.map(oneLine).join("\n");
}

/** The state of a file (or a rule's text) the ledger may hold, against the version on disk. */
function fileState(ledger: Ledger, file: Pick<InstructionFile, "path" | "version">, kind: "file" | "rule" = "file") {
  const held: { version: string; truncated?: boolean; via?: string } | undefined = ledger.get(kind, file.path);
  if (!held) return ledger.withdrawn[kind].has(file.path) ? C.REPORT_STATES.retracted : C.REPORT_STATES.pending;
  if (held.version !== file.version) return C.REPORT_STATES.changed;
  if (held.truncated) return C.REPORT_STATES.truncated;
  return held.via === "read" ? C.REPORT_STATES.readByModel : C.REPORT_STATES.delivered;
}

function ruleState(ledger: Ledger, rule: Rule): string {
  if (rule.meta.kind === "manual") return C.REPORT_STATES.manual;
  if (rule.meta.kind !== "described") return fileState(ledger, rule.body, "rule");
  return ledger.get("rule", rule.path)?.version === rule.listingVersion
    ? C.REPORT_STATES.listed
    : C.REPORT_STATES.pending;
}

/** What this run looked at, then what the ledger holds that it has not (delivered before a resume). */
function seenThenHeld<S extends { path: string }, H extends { path: string }>(seen: S[], held: H[]): Array<S | H> {
  const seenPaths = new Set(seen.map((item) => item.path));
  return [...seen, ...held.filter((item) => !seenPaths.has(item.path))];
}

/** Rows, then one for each path withdrawn since that no row names: the path, `blanks` empty cells, its state. */
function withWithdrawn(rows: string[][], withdrawn: Iterable<string>, blanks: number): string[][] {
  const listed = new Set(rows.map(([path]) => path));
  const gone = [...withdrawn].filter((path) => !listed.has(path));
  return [...rows, ...gone.map((path) => [path, ...Array<string>(blanks).fill(""), C.REPORT_STATES.retracted])];
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
  const { ledger, inspection, options, discovery } = engine;
  const version = (id: string) => (verbose ? [`version ${id.slice(0, C.REPORT_VERSION_LENGTH)}`] : []);
  const views = [...inspection.values()];
  const fileRows = seenThenHeld(viewedFiles(views), ledger.all("file")).map((file) => [
    file.path,
    `scope ${scopeGlob(file.scope)}${file.importedBy ? `, imported by ${file.importedBy}` : ""}`,
    file.bytes < 1024 ? `${file.bytes} B` : `${(file.bytes / 1024).toFixed(1)} KiB`,
    fileState(ledger, file),
    ...version(file.version),
  ]);
  // Rules: cwd's rule folders and every nested one seen; refused rule files go to "not used".
  const withRules = options.rules && discovery !== undefined;
  if (withRules) ruleFoldersFor(discovery, [], options.ruleSources);
  const ruleFolders = withRules ? [...discovery.ruleFolders.values()] : [];
  const folders = ruleFolders.filter((folder) => options.ruleSources.has(folder.place.source));
  const rules = folders.flatMap((folder) => folder.rules);
  const ruleRows = rules.map((rule) => {
    const globs = rule.meta.kind === "glob" ? `globs ${rule.meta.globs.join(", ")}` : "no globs";
    return [rule.path, rule.source, C.RULE_KIND_NAMES[rule.meta.kind], globs, ruleState(ledger, rule)];
  });
  const seenSkills = views.flatMap((view) => view.skills.map((skill) => ({ ...skill, scope: view.scope })));
  const skillRows = seenThenHeld(seenSkills, ledger.all("skill")).map((skill) => [
    skill.name,
    `scope ${scopeGlob(skill.scope)}`,
    skill.path,
    ledger.get("skill", skill.path)?.version === skill.version ? C.REPORT_STATES.listed : C.REPORT_STATES.pending,
    ...version(skill.version),
  ]);
  const shadowed = seenSkills.filter((outer) =>
    seenSkills.some((inner) => inner.name === outer.name && isPathInside(`/${outer.scope}`, `/${inner.scope}`)),
  );
  const notUsed = [
    ...[...(discovery?.ignoredSeen ?? [])].map(([path, reason]) => ({ path, reason })),
    ...views.flatMap((view) => view.rejected),
    ...shadowed.map(({ path }) => ({ path, reason: "skillShadowed" as const })),
    ...folders.flatMap((folder) => folder.rejected),
  ].map((item: Pick<Rejection, "path" | "reason" | "counts">) => [item.path, C.reasonText(item.reason, item.counts)]);
  const sections = [
    ...reportSection(C.REPORT_TEXT.filesHeading, withWithdrawn(fileRows, ledger.withdrawn.file, 2)),
    ...reportSection(C.REPORT_TEXT.rulesHeading, withWithdrawn(ruleRows, withRules ? ledger.withdrawn.rule : [], 3)),
    ...reportSection(C.REPORT_TEXT.skillsHeading, skillRows),
    ...reportSection(C.REPORT_TEXT.notUsedHeading, notUsed),
  ];
  const failures = [...engine.failures].map(([label, count]) => `  ${C.FAILURE_LABELS[label]}: ${count}`);
  const head = [
    "pi-lazy-agents",
    ...(options.enabled ? [] : [C.REPORT_TEXT.off]),
    ...(engine.git?.stopped ? [C.REPORT_TEXT.gitStopped] : []),
  ];
  if (sections.length + failures.length === 0)
    return [...(head.length > 1 ? head : []), C.REPORT_NOTHING_SEEN].join("\n");
  const failed = failures.length > 0 ? ["", C.REPORT_TEXT.failuresHeading, ...failures] : [];
  return [...head, ...sections, ...failed, "", C.REPORT_TEXT.deliveredCount(heldCounts(ledger))]
    .map(oneLine)
    .join("\n");
}

/** `/lazy-agents why <path>`: what governs one path, then its chain folder by folder. */
async function explainPath(engine: LazyAgents, rawPath: string, env: CallEnvironment): Promise<string> {
  const shown = rawPath.trim();
  const target = resolveToolPath(shown, env.cwd);
  if (target === undefined) return oneLine(C.REPORT_TEXT.unusablePath(shown));
  const discovery = engine.discoveryFor(env.cwd);
  if (!discovery) return C.REPORT_NO_CWD;
  // A path below a file, or a link that loops, is no folder: it is explained as a path, not a failure. A link is
  // stat-checked only where it leads inside cwd.
  const real = mayBeInside(discovery, target) ? discovery.realpathOrUndefined(target) : undefined;
  const inside = real !== undefined && relativeInside(discovery.cwdReal, real) !== undefined;
  const isDirectory = inside && fsOr(undefined, () => discovery.fs.stat(real))?.isDirectory() === true;
  const located = locateChain(discovery, target, isDirectory);
  if (located === undefined) return oneLine(C.REPORT_TEXT.outsideCwd(shown));
  const { views, unviewed } = await viewForReport(engine, discovery, [located], env);
  const { ledger, options } = engine;
  // The answer first: what governs the path; then only the folders that add something, and why.
  const governing = viewedFiles(views).map((file) => [file.path, fileState(ledger, file)]);
  const ruleLines: string[] = [];
  const touched = touchedPath(discovery, target, env.cwd);
  const rulesOf = options.rules && touched !== undefined ? engine.discovery : undefined;
  const inScope = new Set(rulesOf ? ruleFoldersFor(rulesOf, views, options.ruleSources) : []);
  for (const folder of rulesOf?.ruleFolders.values() ?? []) {
    for (const rule of folder.rules) {
      const applies = rule.meta.kind !== "glob" ? rule.meta.kind : ruleMatches(rule, touched!) ? "matches" : "noMatch";
      const why = !options.ruleSources.has(rule.source) ? "sourceOff" : inScope.has(folder) ? applies : "otherFolder";
      ruleLines.push(`    rule ${rule.path} (${rule.source}, scope ${rule.scope}): ${C.RULE_WHY[why]}`);
      if (why === "matches" || why === "always")
        governing.push([rule.path, `${C.REPORT_TEXT.ruleState} ${ruleState(ledger, rule)}`]);
    }
  }
  const lines = [`${C.USER_PREFIX}why ${shown}`];
  // Directly in cwd no folder adds files: what governs the path there is rules alone.
  const inCwd = governing.length > 0 ? C.REPORT_TEXT.directlyInCwdWithRules : C.REPORT_TEXT.directlyInCwd;
  if (located.links.length === 0) lines.push(inCwd);
  lines.push(governing.length > 0 ? C.REPORT_TEXT.governedBy : C.REPORT_TEXT.governedByNothing);
  lines.push(...aligned(governing).map((line) => `  ${line}`));
  const folderLines: string[] = [];
  for (const { scope, view, why } of chainFolders(located, views, unviewed)) {
    if (!view) folderLines.push(`    ${scope}/  ${C.REPORT_TEXT.unusedFolder(why!)}`);
    if (!view || (!view.file && view.imports.length + view.skills.length + view.rejected.length === 0)) continue;
    const file = view.file ? `${view.file.path} (${fileState(ledger, view.file)})` : C.REPORT_TEXT.noInstructionFile;
    folderLines.push(
      `    ${scope}/  scope ${scopeGlob(scope)}: ${file}`,
      ...view.imports.map(({ file }) => `      imports ${file.path} (${fileState(ledger, file)})`),
      ...view.skills.map((skill) => `      skill ${skill.name} at ${skill.path}`),
      ...view.rejected.map((item) => `      not used: ${item.path}: ${C.reasonText(item.reason, item.counts)}`),
    );
  }
  if (folderLines.length > 0) lines.push(C.REPORT_TEXT.foldersHeading, ...folderLines);
  if (ruleLines.length > 0) lines.push(`  ${C.REPORT_TEXT.rulesHeading}:`, ...ruleLines);
  if (!env.trusted) lines.push(C.REPORT_TEXT.skillsUntrusted);
  return lines.map(oneLine).join("\n");
}

/** Completions for `/lazy-agents`: the `why` word, then paths this session has seen. */
function commandCompletions(engine: LazyAgents, prefix: string): Array<{ value: string; label: string }> | null {
  const scopes = [...engine.inspection.keys()].map((scope) => `${scope}/`);
  // A name that would reach the terminal escaped is not offered: the value is inserted as it is.
  const seen = [...viewedFiles(engine.inspection.values()).map((file) => file.path), ...scopes];
  const paths = seen.filter((path) => oneLine(path) === path);
  const words = prefix.startsWith("why ") ? paths.map((path) => `why ${path}`) : ["why ", "help", C.VERBOSE_ARGUMENT];
  const items = [...new Set(words)]
    .filter((word) => word.startsWith(prefix))
    .map((word) => ({ value: word, label: word }));
  return items.length > 0 ? items : null;
}

/** What the model holds, counted for the status line and the report; a turn's notice counts its own records. */
function heldCounts(ledger: Ledger): Counts {
  const rules = ledger.all("rule").filter((rule) => rule.as === "text").length;
  return { files: ledger.all("file").length, rules, skills: ledger.all("skill").length };
}

/** The notification of what one turn's reminders loaded, counted by kind as the status line counts; none for nothing. */
function turnNotice(records: LedgerRecord[]): string | undefined {
  // In path order: the order results are answered in depends on git's timing, and a list should not.
  const pathsOf = (items: Array<{ path: string }>) => new Set(items.map((item) => item.path).sort());
  const files = pathsOf(records.flatMap((record) => record.files.filter((file) => file.via === "reminder")));
  const rules = pathsOf(records.flatMap((r) => (r.rules ?? []).filter((rule) => rule.as === "text" && !rule.via)));
  const skills = pathsOf(records.flatMap((record) => record.skills));
  const paths = [...files, ...rules, ...skills].map(oneLine);
  const counts = { files: files.size, rules: rules.size, skills: skills.size };
  return paths.length === 0 ? undefined : C.loadedNotice(counts, paths);
}

// =============================================================================================
// 10. Pure path and text helpers. Containment is `path.relative` plus an exact `..` test on real paths.

/** `next` of a value that may still be on its way: synchronous when it is already there. */
function then<T, R>(value: T | Promise<T>, next: (value: T) => R): R | Promise<Awaited<R>> {
  return value instanceof Promise ? (value.then(next) as Promise<Awaited<R>>) : next(value);
}

/** A JSON object: what settings, records and details must be before their keys are read. */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// Exported for tests: a table test of containment.
/** True when `child` lies strictly inside `parent`. Both must already be absolute and resolved. */
export function isPathInside(parent: string, child: string): boolean {
  return !!relativeInside(parent, child);
}

/** An empty, `.` or `..` segment, or a trailing slash: a path `path.relative` would normalize first. */
const UNNORMALIZED = /\/(?:\.\.?)?(?:\/|$)/;

/** The one containment test: `child` relative to `parent` ("" for itself), undefined when it lies outside. */
function relativeInside(parent: string, child: string): string | undefined {
  // Normalized absolute paths, one below the other, are their own answer (profile: path.relative was 4% of a warm call).
  if (sep === "/" && parent.startsWith("/") && child.startsWith(parent) && !UNNORMALIZED.test(child)) {
    if (child.length === parent.length) return "";
    if (child[parent.length] === "/") return child.slice(parent.length + 1);
  }
  const rel = relative(parent, child);
  return rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel) ? undefined : rel;
}

/** A folder's entry: `path.join` normalizes, which a name from a listing never needs (A/B, warm depth-8 reads: 0.96). */
function entryPath(dir: string, name: string): string {
  return dir.endsWith(sep) ? `${dir}${name}` : `${dir}${sep}${name}`;
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

// A decoder strips exactly one BOM, as Pi does; a second one is text.
const UTF8 = new TextDecoder("utf-8", { fatal: true });

// Exported for tests: a table test of decoding.
/** Decodes strict UTF-8, drops a BOM and turns CRLF and lone CR into LF; undefined if invalid. */
export function decodeInstructionText(bytes: Uint8Array): string | undefined {
  try {
    const text = UTF8.decode(bytes);
    return text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text;
  } catch (error) {
    if (errorCode(error) !== "ERR_ENCODING_INVALID_ENCODED_DATA") throw error;
    return undefined;
  }
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

/**
 * Where the run of characters that `inRun` takes at the end of `text` starts. Repository text is trimmed with
 * this loop, never a RegExp like `\n+$`, which takes quadratic time on such a run that does not end the text.
 */
function trailingRun(text: string, inRun: (char: string) => boolean): number {
  let start = text.length;
  while (start > 0 && inRun(text[start - 1]!)) start--;
  return start;
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})/;
const IMPORT_TOKEN = /(?:^|[\s([])@((?:\.{1,2}\/|[\w-])[^\s)\]`'"<>,;]*)/g;

// Exported for tests: a table test of `@path` tokens.
/** The `@path` tokens of an instruction file, outside fenced blocks and code spans, in order. */
export function importTokens(text: string): string[] {
  // Most instruction files import nothing: no line needs splitting then (bench: 7% of a cold call).
  if (!text.includes("@")) return [];
  const tokens = new Set<string>();
  let fence: string | undefined;
  for (const line of text.split("\n")) {
    const marker = FENCE.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || (marker[0] === fence[0] && marker.length >= fence.length))) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    for (const match of withoutCodeSpans(line).matchAll(IMPORT_TOKEN)) {
      const token = match[1]!;
      const end = trailingRun(token, (char) => ".:!?".includes(char));
      if (end > 0) tokens.add(token.slice(0, end));
    }
  }
  return [...tokens];
}

/**
 * A line with its code spans as spaces. As in CommonMark, a span opens with a run of backticks and
 * closes with the next run of the same length; an opener with none is text. Linear: each run's
 * closer is found in one pass from the end.
 */
function withoutCodeSpans(line: string): string {
  if (!line.includes("`")) return line;
  const runs = [...line.matchAll(/`+/g)].map((run) => ({ at: run.index, length: run[0].length, close: -1 }));
  const last = new Map<number, number>();
  for (let i = runs.length - 1; i >= 0; i--) {
    runs[i]!.close = last.get(runs[i]!.length) ?? -1;
    last.set(runs[i]!.length, i);
  }
  let text = "";
  let from = 0;
  for (let open = 0; open < runs.length; open++) {
    const { at, length, close } = runs[open]!;
    if (close < 0) continue;
    text += `${line.slice(from, at)} `;
    from = runs[close]!.at + length;
    open = close;
  }
  return text + line.slice(from);
}

function versionOf(text: string): string {
  // One-shot hashing: the same digest without a Hash object per file (bench: a sixth of a cold call).
  return hash("sha256", text, "hex").slice(0, C.VERSION_ID_LENGTH);
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
// 10b. Shell words. A `bash` call is read, never run: this reader splits its command line into simple commands and says
// which words name paths, and relative to which directory. A path built when the command runs (`cat $(cat list.txt)`)
// is not seen and not claimed.

/** What one word of a bash command is to the extension: a path to activate, or why not. */
type ShellWordUse =
  { word: string; role: "read" | "write"; path: string } | { word: string; role: "skip"; reason: ShellWordReason };

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
}

/** A list of commands being read: its shell's directory and `pushd` stack, what closes it, how deep it is. */
interface ShellFrame {
  cwd: string | undefined;
  dirs: Array<string | undefined>;
  close?: string;
  level: number;
}

/** A redirect (its operator in group 1, after an optional descriptor) or a control operator; `<(` is a word. */
const SHELL_OPERATOR = /(?![<>]\()(?:(?:\d+|&)?(<<<|<<-|<<|<&|<>|>>|>\||>&|<|>)|&&|\|\||;;|\|&|[;&|()])/y;
/** Blanks, escaped newlines and comments between words. */
const SHELL_BLANKS = /(?:[ \t\r]|\\\n|#[^\n]*)*/y;
/** A run of characters that mean nothing special inside a word. */
const PLAIN_RUN = /[^\s;&|<>()\\'"$`*?[{]+/y;
/** `$'…'` (its body in group 1, where a backslash escapes) or `'…'` (group 2). */
const SINGLE_QUOTED = /\$'((?:[^'\\]|\\[^]?)*)'?|'([^']*)'?/y;
const SHELL_VARIABLE = /\$(?:[A-Za-z_]\w*|[\d@*#?$!-])/y;
/** A word that opens with an unquoted `NAME=` or `NAME+=` is an assignment. */
const ASSIGNMENT = /[A-Za-z_]\w*\+?=/y;
const WORD_BREAK = " \t\n;&|<>()";

// Exported for tests: a table test of the shell-word reader (and the bench).
/** The simple commands of a bash command line, each with its directory and what its words name. A child
 * shell's script (`bash -c`) is read into the same commands from its own frame, within one word budget. */
export function readShellCommand(
  script: string,
  top: ShellFrame = { cwd: ".", dirs: [], level: 1 },
  shared = { words: 0, commands: [] as ShellCommand[] },
): ShellCommand[] {
  const src = script.slice(0, C.MAX_SHELL_COMMAND_CHARS);
  let pos = 0;
  const heredocs: Array<{ delimiter: string; stripTabs: boolean }> = [];
  list(top);
  return shared.commands;

  /** Reads simple commands until the frame's `close` (`)` or a backtick) or the end. */
  function list(frame: ShellFrame): void {
    let words: ShellWord[] = [];
    let redirects: ShellWordUse[] = [];
    let pipedIn = false;
    let token = next(frame);
    for (;;) {
      if (typeof token !== "string") words.push(token);
      else if (token[0] === "<" || token[0] === ">") {
        // A redirect's target, relative to the shell's directory; heredocs, here-strings and descriptor
        // copies name no path. Without a target, the operator after it is the next token.
        const target = next(frame);
        if (typeof target === "string") {
          token = target;
          continue;
        }
        if (token === "<<" || token === "<<-") heredocs.push({ delimiter: target.text, stripTabs: token === "<<-" });
        else if (token !== "<<<" && !token.endsWith("&"))
          redirects.push(shellWordUse(target, token === "<" ? "read" : "write", frame.cwd));
      } else if (token === "(") nested(")", frame);
      else {
        const pipedOut = token === "|" || token === "|&";
        finish(words, redirects, frame, pipedIn || pipedOut || token === "&");
        if (token === "eof" || token === frame.close) return;
        [words, redirects, pipedIn] = [[], [], pipedOut];
      }
      token = next(frame);
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
      // A `(` opens a level inside `( )`; inside `${ }` a nested `${` does (bash counts no bare `{`).
      else if (close === ")" ? char === "(" : close === "}" && char === "$" && src[pos] === "{") open++;
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
        let line: string;
        do {
          const end = src.includes("\n", pos) ? src.indexOf("\n", pos) : src.length;
          line = src.slice(pos, end);
          pos = end + 1;
        } while (pos < src.length && (stripTabs ? line.replace(/^\t+/, "") : line) !== delimiter);
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

  /** A word; "eof" for one that reaches the length limit, as it may be cut: nothing follows it. */
  function word(frame: ShellFrame): ShellWord | "eof" {
    shared.words++;
    const start = pos;
    const word: ShellWord = { text: "", dynamic: false, glob: -1, tilde: src[pos] === "~", assignment: false };
    for (let double = false; pos < src.length;) {
      const char = src[pos]!;
      // `<(…)` and `>(…)` open a word, as a substitution.
      const substitution = pos === start && (char === "<" || char === ">") && src[pos + 1] === "(";
      if (!double && !substitution && (WORD_BREAK.includes(char) || (char === "`" && frame.close === "`"))) break;
      PLAIN_RUN.lastIndex = pos;
      const plain = double ? null : PLAIN_RUN.exec(src);
      if (plain) {
        word.text += plain[0];
        pos += plain[0].length;
      } else if (char === '"') {
        pos++;
        double = !double;
      } else if (char === "\\") {
        // Within double quotes a backslash escapes only `$`, a backtick, `"` and itself.
        const escaped = src[pos + 1] ?? "";
        if (escaped !== "\n") word.text += double && !'$`"\\'.includes(escaped) ? `\\${escaped}` : escaped;
        pos += 2;
      } else if (!double && (char === "'" || (char === "$" && src[pos + 1] === "'"))) {
        SINGLE_QUOTED.lastIndex = pos;
        const [all, ansi, raw] = SINGLE_QUOTED.exec(src)!;
        pos += all.length;
        // `$'…'`: backslash escapes as C writes them, the common ones only.
        word.text += raw ?? ansi!.replace(/\\([^]?)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
      } else if (char === "$" || char === "`" || substitution) expansion(word, frame);
      else {
        if (!double && word.glob === -1 && "*?[{".includes(char)) word.glob = word.text.length;
        word.text += char;
        pos++;
      }
    }
    ASSIGNMENT.lastIndex = start;
    word.assignment = word.text.includes("=") && ASSIGNMENT.test(src);
    return pos >= src.length && src.length >= C.MAX_SHELL_COMMAND_CHARS ? "eof" : word;
  }

  /** `$name`, `${…}`, `$(( ))`, `$( )`, `<( )` or backticks: kept as written, and the word becomes dynamic. */
  function expansion(word: ShellWord, frame: ShellFrame): void {
    const start = pos;
    SHELL_VARIABLE.lastIndex = pos;
    if (src.startsWith("$((", pos) || src.startsWith("${", pos)) {
      pos += 2;
      skipTo(src[pos - 1] === "{" ? "}" : ")"); // `$((`: its second `(` is counted, so it ends after `))`.
    } else if (src[pos] === "`" || src[pos + 1] === "(") {
      pos += src[pos] === "`" ? 1 : 2;
      nested(src[start] === "`" ? "`" : ")", frame);
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
  function finish(all: ShellWord[], redirects: ShellWordUse[], frame: ShellFrame, inPipeline: boolean): void {
    const { words, toolAt } = commandParts(all);
    if (words.length === 0 && redirects.length === 0) return;
    const uses: ShellWordUse[] = [];
    shared.commands.push({ cwd: frame.cwd, uses });
    const tool = posix.basename(words[toolAt]?.text ?? "");
    let base = frame.cwd;
    let afterDashes = false;
    let owner = ""; // The wrapper whose options come before the tool (`env -C dir`).
    const skip = (word: ShellWord, reason: ShellWordReason) => uses.push({ word: word.text, role: "skip", reason });
    const use = (word: ShellWord, role: "read" | "write") => uses.push(shellWordUse(word, role, base));
    for (let index = 0; index < words.length; index++) {
      const word = words[index]!;
      if (index < toolAt && !word.text.startsWith("-")) {
        skip(word, "commandName");
        owner = posix.basename(word.text);
      } else if (index === toolAt) {
        afterDashes = false; // A wrapper's `--` (`sudo -- ls -la`) ends the wrapper's options, not the tool's.
        if (word.text.includes("/") || word.dynamic) use(word, "read");
        else skip(word, "commandName");
      } else if (!afterDashes && word.text.startsWith("-") && !word.dynamic) {
        skip(word, "option");
        afterDashes = word.text === "--";
        // A tool's option that names the folder it works in: alone (the next word) or joined (`-Cdir`, `--dir=x`).
        const option = C.TOOL_DIRECTORY_OPTION.exec(`${index > toolAt ? tool : owner} ${word.text}`);
        const joined = option?.[1] ?? option?.[2];
        const directory = joined ? { ...word, text: joined, glob: -1, tilde: false } : option && words[index + 1];
        const script = index > toolAt && C.SHELLS_WITH_SCRIPT.has(tool) && /^-[a-zA-Z]*c[a-zA-Z]*$/.test(word.text);
        if (directory) {
          if (directory === words[index + 1]) index++;
          use(directory, "read");
          if (tool !== "cargo" && !directory.dynamic) base = joinShellPath(base, directory);
        } else if (script && index + 1 < words.length) {
          skip(words[++index]!, "script");
          if (frame.level <= C.MAX_SHELL_NESTING)
            readShellCommand(words[index]!.text, { cwd: base, dirs: [], level: frame.level + 2 }, shared);
        }
      } else use(word, tool === "tee" && index > toolAt ? "write" : "read");
    }
    uses.push(...redirects);
    // `cd`, `pushd` and `popd` move the directory of the commands that follow in the same shell.
    if (inPipeline || !C.SHELL_DIRECTORY_TOOLS.has(tool)) return;
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
    if (!word.assignment && !(plain && C.SHELL_KEYWORDS.has(word.text))) break;
  }
  const rest = words.slice(start);
  let toolAt = 0;
  const wrapper = ({ text, assignment }: ShellWord) =>
    C.SHELL_WRAPPERS.has(text) || text.startsWith("-") || assignment || /^\d+[smhd]?$/.test(text);
  for (let owner = ""; toolAt < rest.length && wrapper(rest[toolAt]!); toolAt++) {
    const { text } = rest[toolAt]!;
    const option = C.TOOL_DIRECTORY_OPTION.exec(`${owner} ${text}`);
    // A wrapper's directory option alone (`env -C dir`) takes the next word: the folder, not the tool.
    if (option && option[1] === undefined && option[2] === undefined) toolAt++;
    else if (!text.startsWith("-")) owner = posix.basename(text);
  }
  return { words: rest, toolAt };
}

/** How a word names a path: relative to the command's directory; a glob by the folder before it. */
function shellWordUse(word: ShellWord, role: "read" | "write", base: string | undefined): ShellWordUse {
  const text = role === "read" && word.glob !== -1 ? posix.dirname(`${word.text.slice(0, word.glob)}_`) : word.text;
  const path = joinShellPath(base, { ...word, text });
  if (path !== undefined) return { word: word.text, role, path };
  return { word: word.text, role: "skip", reason: word.dynamic ? "dynamic" : "unknownDirectory" };
}

/** A word's path against a directory; undefined when neither is known before the command runs. */
function joinShellPath(base: string | undefined, word: ShellWord): string | undefined {
  if (word.dynamic) return undefined;
  if (word.tilde || posix.isAbsolute(word.text)) return word.text;
  return base === undefined ? undefined : posix.join(base, word.text);
}

// =============================================================================================
// 10c. Globs: one bounded matcher for rule globs and ignore files.

// A glob is cut at `/` into segments and matched segment by segment: `*`, `?` and `[…]` stay within a segment, a `**`
// segment spans any number of them (a trailing one at least one: a folder is not a file under it), `\` escapes. Both
// levels run the two-pointer wildcard match, which backtracks only to its last star, so one match costs at most path
// length × pattern length steps: no glob can make it backtrack exponentially, as a RegExp (or `path.matchesGlob`) can.
// Braces are expanded first, within MAX_GLOB_EXPANSIONS, and globs past MAX_GLOB_CHARS are refused before they are
// read. Options: `braces`, `{a,b}` are alternatives (rules) or characters (ignore files); `floating`, a glob without a
// slash matches at any depth (Cursor, ignore files); `ignoreCase`, glob and path are compared lowercased (Copilot).

/** One character of a segment's pattern: itself, `*`, or a test (`?`, a `[…]` class). */
type GlobChar = string | typeof ANY_RUN | ((char: string) => boolean);

const ANY_RUN = Symbol("*");
const ANY_DEPTH = Symbol("**");
/** `[…]`, whose first member may be `]`, `!` or `^` after a negation; `\x`; any character. */
const GLOB_TOKEN = /\[(?:[!^](?<negated>[^][^\]]*)|(?<members>[^!^][^\]]*))\]|\\(?<escaped>[^])|[^]/gy;
/** The same past a segment's last `]`, where a `[` closes no class. */
const GLOB_TAIL_TOKEN = /\\(?<escaped>[^])|[^]/gy;

let globSteps = 0;

// Exported for tests: the steps every glob match so far has taken, to bound their work.
export function globWork(): number {
  return globSteps;
}

/** One matcher for a list of globs (a path matches when one of them does), or why it cannot be had. */
function compileGlob(
  globs: string | readonly string[],
  options: { braces: boolean; floating: boolean; ignoreCase?: boolean },
): { ok: true; matches: (path: string) => boolean } | { ok: false; reason: Reason } {
  type Segments = Array<GlobChar[] | typeof ANY_DEPTH>;
  type Alternative = { segments: Segments; prefix: string; suffix: string; inner: string; innerAtSlash: string };
  const alternatives: Alternative[] = [];
  let chars = 0;
  for (let glob of typeof globs === "string" ? [globs] : globs) {
    if (glob.length > C.MAX_GLOB_CHARS) return { ok: false, reason: "globTooLong" };
    if (options.ignoreCase) glob = glob.toLowerCase();
    const anchored = glob.startsWith("/");
    glob = glob.replace(/^\/+/, "").replace(/\/$/, "/**");
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
      const prefix = floating ? "" : /^[^*?[\\]*/.exec(pattern)![0];
      const suffix = pattern.slice(trailingRun(pattern, (char) => !"/*?[]\\".includes(char)));
      // A glob led by `**/` (every Copilot glob) still names the folders after it: a path that holds none is turned
      // away as by the prefix (A/B, replay: 0.98).
      const inner = (pattern.startsWith("**/") && /^[^*?[\\]*\//.exec(pattern.slice(3))?.[0]) || "";
      alternatives.push({ segments, prefix, suffix, inner, innerAtSlash: `/${inner}` });
    }
  }
  return {
    ok: true,
    matches: (text) => {
      const path = options.ignoreCase ? text.toLowerCase() : text;
      let parts: string[] | undefined;
      return alternatives.some(({ segments, prefix, suffix, inner, innerAtSlash }) => {
        globSteps++;
        if (!path.startsWith(prefix) || !path.endsWith(suffix)) return false;
        if (inner !== "" && !path.startsWith(inner) && !path.includes(innerAtSlash)) return false;
        parts ??= path.split("/");
        return wildcardMatch(segments, ANY_DEPTH, parts.length, (segment, i) => {
          const text = parts![i]!;
          const at = (c: GlobChar, k: number) => (typeof c === "string" ? c === text[k] : c !== ANY_RUN && c(text[k]!));
          return segment !== ANY_DEPTH && wildcardMatch(segment, ANY_RUN, text.length, at);
        });
      });
    },
  };
}

/** A segment's characters; undefined when a class holds a range out of order. */
function segmentChars(part: string): GlobChar[] | undefined {
  const chars: GlobChar[] = [];
  // Looking for a `]` from each `[` past the last one took quadratic time: that tail has no classes.
  const closes = part.lastIndexOf("]") + 1;
  const tokens = [...part.slice(0, closes).matchAll(GLOB_TOKEN), ...part.slice(closes).matchAll(GLOB_TAIL_TOKEN)];
  for (const { 0: token, groups } of tokens) {
    const { negated: negatedMembers, members = negatedMembers, escaped } = groups!;
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
  let p = 0;
  let resumeAt = -1;
  let resumeFrom = 0;
  for (let i = 0; i < length; globSteps++) {
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
