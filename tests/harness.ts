// Test harness: temporary trees, Pi's real extension runner, and whole Pi sessions driven by the
// scripted faux provider. Nothing here re-implements the extension's hooks.

import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import {
  createAgentSession,
  createAgentSessionFromServices,
  createAgentSessionRuntime,
  createAgentSessionServices,
  createBashTool,
  createCodemodeExtension,
  createEditTool,
  createFindTool,
  createGrepTool,
  createLsTool,
  createReadTool,
  createWriteTool,
  DefaultResourceLoader,
  discoverAndLoadExtensions,
  ExtensionRunner,
  ModelRegistry,
  ModelRuntime,
  SessionManager,
  SettingsManager,
  type AgentSession,
  type AgentSessionRuntime,
  type ExtensionFactory,
  type ExtensionUIContext,
  type LoadExtensionsResult,
} from "@earendil-works/pi-coding-agent";
import {
  fauxAssistantMessage,
  fauxProvider,
  fauxToolCall,
  InMemoryCredentialStore,
  type AssistantMessage,
  type FauxResponseStep,
  type JsonObject,
} from "@earendil-works/pi-ai";
import { REMINDER_OPEN } from "../index.ts";

export const EXTENSION_PATH = resolve(import.meta.dirname, "..", "index.ts");

// ---------------------------------------------------------------------------------------------
// Trees.

export type TreeSpec = Record<string, string | Uint8Array | { link: string }>;

export interface Tree {
  /** Temporary root; cwd is `root/repo` so that siblings outside cwd can be made. */
  root: string;
  cwd: string;
  agentDir: string;
  write(path: string, content: string | Uint8Array): void;
  link(path: string, target: string): void;
  abs(path: string): string;
}

export function makeTree(spec: TreeSpec = {}): Tree {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "lazy-agents-")));
  const cwd = join(root, "repo");
  const agentDir = join(root, "agent");
  mkdirSync(cwd, { recursive: true });
  mkdirSync(agentDir, { recursive: true });
  const abs = (path: string) => resolve(cwd, path);
  const write = (path: string, content: string | Uint8Array) => {
    mkdirSync(dirname(abs(path)), { recursive: true });
    writeFileSync(abs(path), content);
  };
  const link = (path: string, target: string) => {
    mkdirSync(dirname(abs(path)), { recursive: true });
    symlinkSync(target, abs(path));
  };
  for (const [path, content] of Object.entries(spec)) {
    if (typeof content === "object" && "link" in content) link(path, content.link);
    else write(path, content);
  }
  return { root, cwd, agentDir, write, link, abs };
}

/** Runs git in `cwd` with a fixed identity, for tests that build repositories. */
export function git(cwd: string, ...args: string[]): Buffer {
  return execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], { cwd, stdio: "pipe" });
}

/** The same tree, with cwd moved to one of its folders. */
export function withCwdAt(tree: Tree, folder: string): Tree {
  const cwd = tree.abs(folder);
  return { ...tree, cwd, abs: (path) => resolve(cwd, path) };
}

/** Where users work: every real-session test of imports, rules, skills or ignores runs in both. */
export type RepositoryKind = "plain folder" | "git repository";

/**
 * `withTree` twice, as users work: in a plain folder, then in a fresh `git init` of the same spec (which must
 * succeed). A failure names the kind of tree it failed in.
 */
export async function twoTrees(
  spec: TreeSpec,
  fn: (tree: Tree, kind: RepositoryKind) => Promise<unknown> | unknown,
): Promise<void> {
  for (const kind of ["plain folder", "git repository"] as const) {
    try {
      await withTree(spec, (tree) => {
        if (kind === "git repository") git(tree.cwd, "init", "-q");
        return fn(tree, kind);
      });
    } catch (error) {
      if (error instanceof Error) {
        error.message = `(${kind}) ${error.message}`;
        error.stack = `(${kind}) ${error.stack}`;
      }
      throw error;
    }
  }
}

/** Runs `fn` on a fresh tree and always removes it. */
export async function withTree<T>(spec: TreeSpec, fn: (tree: Tree) => Promise<T> | T): Promise<T> {
  const tree = makeTree(spec);
  try {
    return await fn(tree);
  } finally {
    rmSync(tree.root, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The real extension runner, as `pi -e ./index.ts` loads it.

export interface RunnerHarness {
  runner: ExtensionRunner;
  sessionManager: SessionManager;
  /** The settings Pi gives the extension; `reload()` it after rewriting the settings files. */
  settingsManager: SettingsManager;
  /** The loaded extension instances, to host them in a second runner. */
  loaded: LoadExtensionsResult;
  notifications: string[];
  statuses: Map<string, string | undefined>;
  /** Runs one tool call through tool_call, the real tool, tool_result and tool_execution_end. */
  call(toolName: string, input: Record<string, unknown>, options?: CallOptions): Promise<CallResult>;
  callWithOutput(toolName: string, input: Record<string, unknown>, output: CallResult["content"]): Promise<CallResult>;
  /** Runs a registered slash command's handler with the runner's command context. */
  command(name: string, args: string): Promise<void>;
  emitSessionStart(reason?: "startup" | "reload" | "new" | "resume" | "fork"): Promise<void>;
  /** Ends the turn as Pi does after its tool results: the turn's one "loaded" notification comes here. */
  endTurn(): Promise<void>;
}

export interface CallOptions {
  id?: string;
  parentToolCallId?: string;
}

export interface CallResult {
  blocked: boolean;
  reason?: string;
  content: Array<{ type: string; text?: string }>;
  details: unknown;
  isError: boolean;
  /** The tool's own content, before any tool_result handler ran. */
  original: Array<{ type: string; text?: string }>;
}

export interface RunnerOptions {
  trusted?: boolean;
  hasUI?: boolean;
  /** Written to the agent dir's settings.json (global settings) before loading. */
  settings?: Record<string, unknown>;
  /** Written to cwd/.pi/settings.json (project settings) before loading. */
  projectSettings?: Record<string, unknown>;
  /** Load these factories (the extension built with a test seam) instead of index.ts from disk. */
  factories?: ExtensionFactory[];
  flags?: Record<string, boolean | string>;
  /** Host these already loaded extension instances (another runner's) instead of loading new ones. */
  loaded?: LoadExtensionsResult;
}

let callCounter = 0;

export async function loadRunner(tree: Tree, options: RunnerOptions = {}): Promise<RunnerHarness> {
  const loaded = options.loaded ?? (await loadExtensions(tree, options.factories));
  if (loaded.errors.length > 0) throw new Error(`extension errors: ${JSON.stringify(loaded.errors)}`);
  if (options.settings) writeFileSync(join(tree.agentDir, "settings.json"), JSON.stringify(options.settings));
  if (options.projectSettings) tree.write(".pi/settings.json", JSON.stringify(options.projectSettings));
  const trusted = options.trusted ?? true;
  const settingsManager = SettingsManager.create(tree.cwd, tree.agentDir, { projectTrusted: trusted });
  const { runner, sessionManager } = await hostRunner(loaded, tree.cwd, {
    trusted,
    getSettings: () => settingsManager.getSettings(),
  });
  for (const [name, value] of Object.entries(options.flags ?? {})) runner.setFlagValue(name, value);
  const notifications: string[] = [];
  const statuses = new Map<string, string | undefined>();
  if (options.hasUI) runner.setUIContext(recordingUI(notifications, statuses), "rpc");

  const tools = {
    read: createReadTool(tree.cwd),
    edit: createEditTool(tree.cwd),
    write: createWriteTool(tree.cwd),
    ls: createLsTool(tree.cwd),
    grep: createGrepTool(tree.cwd),
    find: createFindTool(tree.cwd),
    bash: createBashTool(tree.cwd),
  } as Record<
    string,
    { execute: (...args: unknown[]) => Promise<{ content: CallResult["content"]; details: unknown }> }
  >;

  const call = (toolName: string, input: Record<string, unknown>, callOptions: CallOptions = {}): Promise<CallResult> =>
    callThrough(toolName, input, callOptions, async (toolCallId) => {
      const tool = tools[toolName];
      if (!tool) throw new Error(`no tool ${toolName}`);
      return tool.execute(toolCallId, input, undefined, undefined);
    });

  /** Like `call`, but with a given tool output: for tools whose binary (ripgrep, fd) this machine lacks. */
  const callWithOutput = (toolName: string, input: Record<string, unknown>, output: CallResult["content"]) =>
    callThrough(toolName, input, {}, async () => ({ content: output, details: undefined }));

  async function callThrough(
    toolName: string,
    input: Record<string, unknown>,
    callOptions: CallOptions,
    execute: (toolCallId: string) => Promise<{ content: CallResult["content"]; details: unknown }>,
  ): Promise<CallResult> {
    const toolCallId = callOptions.id ?? `call-${++callCounter}`;
    const parent = callOptions.parentToolCallId ? { parentToolCallId: callOptions.parentToolCallId } : {};
    const gate = await runner.emitToolCall({ type: "tool_call", toolName, toolCallId, input, ...parent } as never);
    if (gate?.block) {
      await runner.emit({
        type: "tool_execution_end",
        toolCallId,
        toolName,
        result: {},
        isError: true,
        ...parent,
      } as never);
      return { blocked: true, reason: gate.reason, content: [], details: undefined, isError: true, original: [] };
    }
    let content: CallResult["content"];
    let details: unknown;
    let isError = false;
    try {
      const result = await execute(toolCallId);
      content = result.content;
      details = result.details;
      isError = (result as { isError?: boolean }).isError === true;
    } catch (error) {
      content = [{ type: "text", text: error instanceof Error ? error.message : String(error) }];
      details = {};
      isError = true;
    }
    const original = structuredClone(content);
    const patched = await runner.emitToolResult({
      type: "tool_result",
      toolName,
      toolCallId,
      input,
      content,
      details,
      isError,
      ...parent,
    } as never);
    const final = {
      blocked: false,
      content: (patched?.content ?? content) as CallResult["content"],
      details: patched?.details ?? details,
      isError: patched?.isError ?? isError,
      original,
    };
    await runner.emit({
      type: "tool_execution_end",
      toolCallId,
      toolName,
      result: final,
      isError: final.isError,
      ...parent,
    } as never);
    return final;
  }

  const emitSessionStart = async (reason: "startup" | "reload" | "new" | "resume" | "fork" = "startup") => {
    await runner.emit({ type: "session_start", reason } as never);
  };
  const command = async (name: string, args: string): Promise<void> => {
    const registered = runner.getCommand(name);
    if (!registered) throw new Error(`no command ${name}`);
    await registered.handler(args, runner.createCommandContext());
  };
  const endTurn = async (): Promise<void> => {
    await runner.emit({ type: "turn_end", turnIndex: 0, toolResults: [] } as never);
  };
  await emitSessionStart();
  return {
    endTurn,
    runner,
    sessionManager,
    settingsManager,
    loaded,
    notifications,
    statuses,
    call,
    callWithOutput,
    command,
    emitSessionStart,
  };
}

/**
 * Pi's ExtensionRunner for loaded extensions, bound to a host whose actions do nothing: the role
 * the interactive app plays for `pi -e`. Shared by the tests and the benchmark.
 */
export async function hostRunner(
  loaded: LoadExtensionsResult,
  cwd: string,
  host: { trusted: boolean; getSettings: () => unknown },
): Promise<{ runner: ExtensionRunner; sessionManager: SessionManager }> {
  const modelRuntime = await offlineModelRuntime();
  const sessionManager = SessionManager.inMemory(cwd);
  const runner = new ExtensionRunner(
    loaded.extensions,
    loaded.runtime,
    cwd,
    sessionManager,
    new ModelRegistry(modelRuntime),
  );
  runner.bindCore(
    {
      sendMessage: () => {},
      sendUserMessage: () => {},
      appendEntry: () => {},
      setSessionName: () => {},
      getSessionName: () => undefined,
      setLabel: () => {},
      getActiveTools: () => ["read", "edit", "write"],
      getAllTools: () => [],
      getSettings: () => host.getSettings() as never,
      setActiveTools: () => {},
      refreshTools: () => {},
      getCommands: () => [],
      setModel: async () => false,
      getThinkingLevel: () => "off",
      setThinkingLevel: () => {},
    },
    {
      getModel: () => undefined,
      getScopedModels: () => [],
      isIdle: () => true,
      isProjectTrusted: () => host.trusted,
      getSignal: () => undefined,
      abort: () => {},
      hasPendingMessages: () => false,
      shutdown: () => {},
      getContextUsage: () => undefined,
      compact: () => {},
      getSystemPrompt: () => "",
    },
  );
  return { runner, sessionManager };
}

async function loadExtensions(tree: Tree, factories?: ExtensionFactory[]): Promise<LoadExtensionsResult> {
  if (!factories) return discoverAndLoadExtensions([EXTENSION_PATH], tree.cwd, tree.agentDir);
  const loader = new DefaultResourceLoader({
    cwd: tree.cwd,
    agentDir: tree.agentDir,
    settingsManager: SettingsManager.inMemory({}, { projectTrusted: true }),
    extensionFactories: factories,
    noSkills: true,
    noPromptTemplates: true,
    noThemes: true,
    noContextFiles: true,
  });
  await loader.reload();
  return loader.getExtensions();
}

function recordingUI(
  notifications: string[],
  statuses: Map<string, string | undefined>,
  confirm?: boolean,
): ExtensionUIContext {
  const ui = {
    notify: (message: string) => notifications.push(message),
    setStatus: (key: string, value: string | undefined) => statuses.set(key, value),
    confirm: async () => confirm === true,
  };
  return new Proxy(ui, {
    get: (target, property) => (property in target ? target[property as keyof typeof target] : () => undefined),
  }) as unknown as ExtensionUIContext;
}

// ---------------------------------------------------------------------------------------------
// Whole sessions with the scripted model.

export interface SessionHarness {
  session: AgentSession;
  sessionManager: SessionManager;
  /** Serialized messages of every provider request, in order. */
  requests: string[];
  /** Raw message arrays of every provider request. */
  requestMessages: unknown[][];
  faux: ReturnType<typeof fauxProvider>;
  dispose(): void;
}

export interface SessionOptions {
  trusted?: boolean;
  codemode?: boolean;
  /** Open this session file instead of creating a new one (as `pi --continue` does). */
  sessionFile?: string;
  sessionDir?: string;
  settings?: Record<string, unknown>;
  extensionPaths?: string[];
  factories?: ExtensionFactory[];
  tools?: string[];
  /** Binds a UI that records each notification here (the session then has a UI, as in the TUI). */
  notifications?: string[];
  /** With `notifications`: what the UI answers to `ctx.ui.confirm` (no answer, false, when unset). */
  confirm?: boolean;
}

/** A model runtime with no stored credentials, no catalog files and no network. */
function offlineModelRuntime(): Promise<ModelRuntime> {
  return ModelRuntime.create({
    credentials: new InMemoryCredentialStore(),
    modelsPath: null,
    refreshOnCreate: false,
    allowModelNetwork: false,
  });
}

/** The scripted faux model, registered in an offline model runtime. Shared with the benchmark. */
export async function scriptedModel(): Promise<{ faux: ReturnType<typeof fauxProvider>; modelRuntime: ModelRuntime }> {
  // No streaming rate: with one, every chunk of a few characters waits a timer of at least 1 ms, and a 40 KB
  // write took 2.5 s to stream (the checks suite spent 18 s in one test).
  const faux = fauxProvider();
  const modelRuntime = await offlineModelRuntime();
  modelRuntime.registerNativeProvider(faux.provider);
  return { faux, modelRuntime };
}

export async function startSession(
  tree: Tree,
  steps: FauxResponseStep[],
  options: SessionOptions = {},
): Promise<SessionHarness> {
  const { faux, modelRuntime } = await scriptedModel();
  const requests: string[] = [];
  const requestMessages: unknown[][] = [];
  faux.setResponses(steps.map((step) => recordStep(step, requests, requestMessages)));
  const settingsManager = SettingsManager.inMemory(
    { compaction: { enabled: false }, retry: { enabled: false }, ...options.settings } as never,
    { projectTrusted: options.trusted ?? true },
  );
  const factories: ExtensionFactory[] = [...(options.factories ?? [])];
  if (options.codemode) factories.push(createCodemodeExtension());
  const loader = new DefaultResourceLoader({
    cwd: tree.cwd,
    agentDir: tree.agentDir,
    settingsManager,
    additionalExtensionPaths: options.factories
      ? (options.extensionPaths ?? [])
      : [EXTENSION_PATH, ...(options.extensionPaths ?? [])],
    extensionFactories: factories,
    noPromptTemplates: true,
    noThemes: true,
  });
  await loader.reload();
  const errors = loader.getExtensions().errors;
  if (errors.length > 0) throw new Error(`extension errors: ${JSON.stringify(errors)}`);
  const sessionDir = options.sessionDir ?? join(tree.root, "sessions");
  const sessionManager = options.sessionFile
    ? SessionManager.open(options.sessionFile, sessionDir)
    : SessionManager.create(tree.cwd, sessionDir);
  const tools = options.tools ?? ["read", "edit", "write", ...(options.codemode ? ["codemode"] : [])];
  const { session } = await createAgentSession({
    cwd: tree.cwd,
    agentDir: tree.agentDir,
    modelRuntime,
    model: faux.getModel(),
    thinkingLevel: "off",
    resourceLoader: loader,
    sessionManager,
    settingsManager,
    tools,
  });
  const uiContext = options.notifications ? recordingUI(options.notifications, new Map(), options.confirm) : undefined;
  await session.bindExtensions(uiContext ? { uiContext } : {});
  return { session, sessionManager, requests, requestMessages, faux, dispose: () => session.dispose() };
}

const SUMMARY_STEP = Symbol("summary step");

/** The faux model's answer to a compaction's summary request; not counted as a conversation request. */
export function summaryTurn(text = "Summary of the earlier work."): FauxResponseStep {
  return Object.assign(() => fauxAssistantMessage(text), { [SUMMARY_STEP]: true });
}

function recordStep(step: FauxResponseStep, requests: string[], requestMessages: unknown[][]): FauxResponseStep {
  if (typeof step === "function" && SUMMARY_STEP in step) return step;
  return (context, options, state, model) => {
    requests.push(JSON.stringify(context.messages));
    requestMessages.push(structuredClone(context.messages) as unknown[]);
    return typeof step === "function" ? step(context, options, state, model) : step;
  };
}

export interface RuntimeHarness {
  runtime: AgentSessionRuntime;
  readonly session: AgentSession;
  requests: string[];
  requestMessages: unknown[][];
  faux: ReturnType<typeof fauxProvider>;
  /** Queues more scripted turns. */
  script(steps: FauxResponseStep[]): void;
  /** Binds extensions of the current session (after creation or a replacement). */
  bind(): Promise<void>;
  dispose(): Promise<void>;
}

/** A session runtime, as the CLI builds it, for /resume, /fork and /new flows. */
export async function startRuntime(
  tree: Tree,
  options: SessionOptions & { sessionManager?: SessionManager } = {},
): Promise<RuntimeHarness> {
  const { faux, modelRuntime } = await scriptedModel();
  const requests: string[] = [];
  const requestMessages: unknown[][] = [];
  const settings = { compaction: { enabled: false }, retry: { enabled: false }, ...options.settings } as never;
  const runtime = await createAgentSessionRuntime(
    async ({ cwd, agentDir, sessionManager, sessionStartEvent }) => {
      const settingsManager = SettingsManager.inMemory(settings, { projectTrusted: options.trusted ?? true });
      const services = await createAgentSessionServices({
        cwd,
        agentDir,
        settingsManager,
        modelRuntime,
        resourceLoaderOptions: {
          additionalExtensionPaths: [EXTENSION_PATH, ...(options.extensionPaths ?? [])],
          extensionFactories: options.factories ?? [],
          noPromptTemplates: true,
          noThemes: true,
        },
      });
      const created = await createAgentSessionFromServices({
        services,
        sessionManager,
        sessionStartEvent,
        model: faux.getModel(),
        thinkingLevel: "off",
        tools: options.tools ?? ["read", "edit", "write"],
      });
      return { ...created, services, diagnostics: services.diagnostics };
    },
    {
      cwd: tree.cwd,
      agentDir: tree.agentDir,
      sessionManager:
        options.sessionManager ?? SessionManager.create(tree.cwd, options.sessionDir ?? join(tree.root, "sessions")),
    },
  );
  const harness: RuntimeHarness = {
    runtime,
    get session() {
      return runtime.session;
    },
    requests,
    requestMessages,
    faux,
    script: (steps) => faux.appendResponses(steps.map((step) => recordStep(step, requests, requestMessages))),
    bind: () => runtime.session.bindExtensions({}),
    dispose: () => runtime.dispose(),
  };
  await harness.bind();
  return harness;
}

/** An assistant turn that calls the given tools in parallel. */
export function toolTurn(...calls: Array<[string, JsonObject]>): AssistantMessage {
  return fauxAssistantMessage(
    calls.map(([name, args]) => fauxToolCall(name, args)),
    { stopReason: "toolUse" },
  );
}

export function finalTurn(text = "done"): AssistantMessage {
  return fauxAssistantMessage(text);
}

// ---------------------------------------------------------------------------------------------
// Assertions on what reached the model.

/** What the extension writes to stderr while `run` runs. */
export async function stderrOf(run: () => Promise<unknown>): Promise<string> {
  const chunks: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    await run();
  } finally {
    process.stderr.write = write;
  }
  return chunks.join("");
}

export function textOf(content: Array<{ type: string; text?: string }>): string {
  return content.map((block) => (block.type === "text" ? (block.text ?? "") : `[${block.type}]`)).join("\n");
}

export function reminderOf(content: Array<{ type: string; text?: string }>): string | undefined {
  const last = content.at(-1);
  return last?.type === "text" && last.text?.startsWith(REMINDER_OPEN) ? last.text : undefined;
}

/**
 * How many times `hostile` costs what `benign` does: each run `rounds` times, interleaved, and their medians
 * compared. A guard against a super-linear scan is this ratio against the same work on harmless input of the same
 * size, measured in the same run, never a time: a loaded machine slows both sides alike. Each run times what it
 * returns (ms), so that setting up a fresh runner stays out of the measure.
 */
export async function costRatio(
  hostile: () => Promise<number>,
  benign: () => Promise<number>,
  rounds = 3,
): Promise<number> {
  const [bad, good]: [number[], number[]] = [[], []];
  for (let round = 0; round < rounds; round++) {
    bad.push(await hostile());
    good.push(await benign());
  }
  const median = (xs: number[]) => xs.toSorted((a, b) => a - b)[xs.length >> 1]!;
  // Below 50 ms a call is quick whatever its input: noise must not read as a scan.
  return median(bad) / Math.max(median(good), 50);
}

/**
 * For `costRatio`: each run a fresh runner's first read of `path` (in `at`, the tree by default), timed; the
 * reminder each path got is kept in `reminders`.
 */
export function firstReads(tree: Tree, options: RunnerOptions = {}) {
  const reminders: Record<string, string> = {};
  const read =
    (path: string, at: Tree = tree, key = path) =>
    async () => {
      const h = await loadRunner(at, options);
      return timed(async () => (reminders[key] = reminderOf((await h.call("read", { path })).content) ?? ""));
    };
  return { reminders, read };
}

/** The time `run` takes, in ms. */
export async function timed(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

export function countOccurrences(haystack: string, needle: string): number {
  let count = 0;
  for (let index = haystack.indexOf(needle); index !== -1; index = haystack.indexOf(needle, index + needle.length))
    count++;
  return count;
}

/** True when every request's messages start with the previous request's messages, byte for byte. */
export function prefixBreaks(requestMessages: unknown[][]): number[] {
  const breaks: number[] = [];
  for (let index = 1; index < requestMessages.length; index++) {
    const previous = requestMessages[index - 1]!;
    const current = requestMessages[index]!;
    const extends_ =
      current.length >= previous.length &&
      previous.every((message, i) => JSON.stringify(message) === JSON.stringify(current[i]));
    if (!extends_) breaks.push(index);
  }
  return breaks;
}

/** Persisted tool results of a session file, in file order. */
export function persistedToolResults(
  sessionManager: SessionManager,
): Array<{ toolName: string; content: CallResult["content"]; details: unknown; isError: boolean }> {
  return sessionManager
    .getEntries()
    .filter((entry) => entry.type === "message" && entry.message.role === "toolResult")
    .map(
      (entry) =>
        (entry as { message: { toolName: string; content: CallResult["content"]; details: unknown; isError: boolean } })
          .message,
    );
}

// ---------------------------------------------------------------------------------------------
// Files that refuse writes.

/**
 * Makes an existing file refuse writes, as a read-only or immutable file does: read-only mode for
 * a normal user, the immutable attribute for root (which ignores modes). Returns the undo, or
 * undefined when this machine cannot lock a file (then the caller skips).
 */
export function lockFile(path: string): (() => void) | undefined {
  const asRoot = process.getuid?.() === 0;
  const unlock = () => {
    if (asRoot) spawnSync("chattr", ["-i", path]);
    else chmodSync(path, 0o644);
  };
  if (asRoot) spawnSync("chattr", ["+i", path]);
  else chmodSync(path, 0o444);
  try {
    closeSync(openSync(path, "r+"));
  } catch {
    return unlock;
  }
  unlock();
  return undefined;
}

/** Whether this machine can make a file refuse writes (see lockFile). */
export function canLockFiles(): boolean {
  const dir = mkdtempSync(join(tmpdir(), "lazy-agents-lock-"));
  try {
    writeFileSync(join(dir, "probe"), "");
    const unlock = lockFile(join(dir, "probe"));
    unlock?.();
    return unlock !== undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
