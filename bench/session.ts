// Prompt economy: one scripted Pi session (createAgentSession, the faux model, the real read, edit
// and write tools), played once with pi-lazy-agents and once with the peer on identical trees.
// ~300 tool calls across ~40 folders, in turns of one to three parallel calls, with external edits,
// deletions and a creation of instruction files between turns, and one manual compaction.

import { readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  createAgentSession,
  DefaultResourceLoader,
  SessionManager,
  SettingsManager,
} from "@earendil-works/pi-coding-agent";
import {
  fauxAssistantMessage,
  fauxToolCall,
  type AssistantMessage,
  type FauxResponseStep,
  type JsonObject,
} from "@earendil-works/pi-ai";
import { REMINDER_OPEN } from "../index.ts";
import { scriptedModel } from "../tests/harness.ts";
import { rng } from "../tests/rng.ts";
import { generateTree, instructionText, removeTree, type DirNode, type SyntheticTree } from "./tree.ts";
import { buildWorkload, type ReplayCall } from "./workload.ts";

export const PEER_MESSAGE_PREFIX = "[context-breadcrumbs]";
/** Every instruction file version starts with one unique header line: its marker. */
const MARKER = /# Rules for [^\n]*? \([^,\n]+, v\d+\)/g;
const SUMMARY_PROMPT_START = "You are a context summarization assistant";

export interface SessionPlanOptions {
  seed: number;
  toolCalls: number;
  files: number;
}

/** An external change to one instruction file: `rel` is its folder, `name` its file name. */
interface Mutation {
  kind: "edit" | "delete" | "create";
  rel: string;
  name: string;
}

interface Turn {
  calls: ReplayCall[];
  /** External changes made while the model "thinks" before this turn. */
  mutations: Mutation[];
}

export interface SessionPlan {
  prompts: Turn[][];
  /** Compaction runs after this many prompts. */
  compactAfter: number;
  scopes: number;
  toolCalls: number;
  mutations: number;
}

export interface EconomyResult {
  name: string;
  requests: number;
  toolCalls: number;
  /** Bytes of text the extension added to the conversation (reminders or custom messages). */
  reminderBytes: number;
  /** Of those, bytes of instruction text and skill names and descriptions; the rest is wrapper. */
  contentBytes: number;
  deliveries: number;
  /** Deliveries of a file version that the model still had in its context. */
  duplicates: number;
  /** Requests that do not extend the previous one byte for byte, outside the compaction. */
  prefixBreaks: number;
  seconds: number;
}

/** The tree the session runs on, generated again (same seed) for each extension. */
export function sessionTree(options: SessionPlanOptions): SyntheticTree {
  return generateTree({ files: options.files, seed: options.seed, git: false });
}

/**
 * The script: the replay workload cut into turns of one to three calls touching distinct files,
 * four prompts, the compaction after the second, and the external changes placed in folders the
 * agent has visited and is about to revisit, so that each change is met by a later call.
 */
export function planSession(tree: SyntheticTree, options: SessionPlanOptions): SessionPlan {
  const random = rng(options.seed + 7);
  const calls = buildWorkload(tree, {
    calls: options.toolCalls,
    seed: options.seed,
    depth8Share: 0.2,
    newScopeRate: 0.13,
  });
  const turns: Turn[] = [];
  for (let index = 0; index < calls.length;) {
    const size = Math.min(calls.length - index, random() < 0.5 ? 1 : random() < 0.6 ? 2 : 3);
    const group: ReplayCall[] = [];
    for (const call of calls.slice(index, index + size)) {
      if (!group.some((other) => other.path === call.path)) group.push(call);
    }
    turns.push({ calls: group, mutations: [] });
    index += size;
  }
  const mutations = placeMutations(tree, turns);
  const perPrompt = Math.ceil(turns.length / 4);
  const prompts = [0, 1, 2, 3].map((part) => turns.slice(part * perPrompt, (part + 1) * perPrompt));
  const scopes = new Set(calls.filter((call) => !call.dir.ignored).map((call) => call.dir.rel)).size;
  return { prompts, compactAfter: 2, scopes, toolCalls: calls.length, mutations };
}

/** Chain of folders strictly below cwd down to `dir`, as DirNodes. */
function chainOf(tree: SyntheticTree, dir: DirNode): DirNode[] {
  const parts = dir.rel.split("/");
  return parts.map((_, index) => tree.byRel.get(parts.slice(0, index + 1).join("/"))!);
}

function placeMutations(tree: SyntheticTree, turns: Turn[]): number {
  // Instruction files as they stand during the script: folder → file name (and the AGENTS.md
  // that an override hides).
  const current = new Map<string, string>();
  const hidden = new Set<string>();
  for (const dir of tree.dirs) {
    if (dir.ignored || !dir.instruction) continue;
    current.set(dir.rel, dir.instruction);
    if (dir.instruction === "AGENTS.override.md") hidden.add(dir.rel);
  }
  const visited = new Set<string>();
  const plan: Array<[number, Mutation["kind"]]> = [
    [0.15, "edit"],
    [0.3, "delete"],
    [0.42, "edit"],
    [0.6, "delete"],
    [0.7, "create"],
    [0.85, "edit"],
  ];
  let placed = 0;
  let next = 0;
  for (const [index, turn] of turns.entries()) {
    while (next < plan.length && index >= plan[next]![0] * turns.length) {
      const kind = plan[next++]![1];
      const upcoming = turns.slice(index, index + 12).flatMap((t) => t.calls.filter((call) => !call.dir.ignored));
      const chains = upcoming.flatMap((call) => chainOf(tree, call.dir)).filter((dir) => visited.has(dir.rel));
      const mutation = chooseMutation(kind, chains, current, hidden);
      if (!mutation) continue;
      turn.mutations.push(mutation);
      placed++;
    }
    for (const call of turn.calls)
      for (const dir of call.dir.ignored ? [] : chainOf(tree, call.dir)) visited.add(dir.rel);
  }
  return placed;
}

function chooseMutation(
  kind: Mutation["kind"],
  chains: DirNode[],
  current: Map<string, string>,
  hidden: Set<string>,
): Mutation | undefined {
  if (kind === "create") {
    const dir = chains.find((candidate) => !current.has(candidate.rel));
    if (!dir) return undefined;
    current.set(dir.rel, "AGENTS.md");
    return { kind, rel: dir.rel, name: "AGENTS.md" };
  }
  // Prefer an override for the first deletion: the file under it must take over.
  const withFile = chains.filter((candidate) => current.has(candidate.rel));
  const dir =
    kind === "delete" ? (withFile.find((candidate) => hidden.has(candidate.rel)) ?? withFile.at(-1)) : withFile.at(-1);
  if (!dir) return undefined;
  const name = current.get(dir.rel)!;
  if (kind === "delete") {
    if (hidden.delete(dir.rel)) current.set(dir.rel, "AGENTS.md");
    else current.delete(dir.rel);
  }
  return { kind, rel: dir.rel, name };
}

/** Applies one external change to the tree on disk; versions count up per file. */
function applyMutation(tree: SyntheticTree, mutation: Mutation, versions: Map<string, number>): void {
  const path = join(tree.cwd, mutation.rel, mutation.name);
  const key = `${mutation.rel}/${mutation.name}`;
  if (mutation.kind === "delete") {
    unlinkSync(path);
    return;
  }
  const version = mutation.kind === "edit" ? (versions.get(key) ?? 0) + 1 : 0;
  versions.set(key, version);
  writeFileSync(path, instructionText(mutation.rel, mutation.name, rng(version + key.length), version));
}

/** The tool call the model makes for one planned call; edits change one real line of the file. */
function toolCallFor(tree: SyntheticTree, call: ReplayCall, serial: number): [string, JsonObject] {
  if (call.toolName === "write")
    return ["write", { path: call.path, content: `export const created${serial} = true;\n` }];
  if (call.toolName === "edit") {
    const text = readFileSync(join(tree.cwd, call.path), "utf8");
    const line = text.split("\n").find((candidate) => /^export const value\d+ = \d+;/.test(candidate));
    if (line) {
      const newText = line.replace(/= (\d+);/, (_, value: string) => `= ${Number(value) + 1};`);
      return ["edit", { path: call.path, edits: [{ oldText: line, newText }] }];
    }
  }
  return ["read", { path: call.path }];
}

interface RecordedRequest {
  messages: unknown[];
  afterCompaction: boolean;
}

/** Runs the plan in a real session with one extension and measures what reached the model. */
export async function runEconomy(
  name: string,
  extensionPath: string,
  options: SessionPlanOptions,
): Promise<{ result: EconomyResult; plan: SessionPlan }> {
  const started = performance.now();
  const tree = sessionTree(options);
  try {
    const plan = planSession(tree, options);
    const requests: RecordedRequest[] = [];
    const session = await startSession(tree, extensionPath);
    const faux = session.faux;
    const versions = new Map<string, number>();
    let queue: Array<() => AssistantMessage> = [];
    let compacted = false;
    let serial = 0;

    const dispatch: FauxResponseStep = (context) => {
      if (isSummaryRequest(context)) {
        return fauxAssistantMessage("## Goal\nBenchmark session.\n## Progress\nEarlier work was summarized.");
      }
      requests.push({ messages: structuredClone(context.messages) as unknown[], afterCompaction: compacted });
      compacted = false;
      const next = queue.shift();
      return next ? next() : fauxAssistantMessage("done");
    };

    for (const [index, turns] of plan.prompts.entries()) {
      queue = turns.map((turn) => () => {
        for (const mutation of turn.mutations) {
          applyMutation(tree, mutation, versions);
          debug(
            `${mutation.kind} ${mutation.rel}/${mutation.name} before entry ${session.sessionManager.getEntries().length}`,
          );
        }
        const calls = turn.calls.map((call) => toolCallFor(tree, call, serial++));
        return fauxAssistantMessage(
          calls.map(([tool, args]) => fauxToolCall(tool, args)),
          { stopReason: "toolUse" },
        );
      });
      queue.push(() => fauxAssistantMessage(`Finished part ${index + 1}.`));
      faux.setResponses(Array.from({ length: queue.length + 8 }, () => dispatch));
      await session.session.prompt(`Work on part ${index + 1} of the task.`);
      if (index + 1 === plan.compactAfter) {
        faux.setResponses(Array.from({ length: 4 }, () => dispatch));
        await session.session.compact();
        compacted = true;
      }
    }
    const entries = session.sessionManager.getEntries();
    session.session.dispose();
    const result = measure(name, requests, entries, plan.toolCalls);
    result.seconds = (performance.now() - started) / 1000;
    return { result, plan };
  } finally {
    removeTree(tree);
  }
}

async function startSession(tree: SyntheticTree, extensionPath: string) {
  const { faux, modelRuntime } = await scriptedModel();
  // Automatic compaction off: the one compaction happens where the script puts it. A small
  // keepRecentTokens makes it drop most of the earlier conversation, as a real one does.
  const settingsManager = SettingsManager.inMemory(
    { compaction: { enabled: false, keepRecentTokens: 6000 }, retry: { enabled: false } } as never,
    { projectTrusted: true },
  );
  const loader = new DefaultResourceLoader({
    cwd: tree.cwd,
    agentDir: tree.agentDir,
    settingsManager,
    additionalExtensionPaths: [extensionPath],
    noPromptTemplates: true,
    noThemes: true,
  });
  await loader.reload();
  const errors = loader.getExtensions().errors;
  if (errors.length > 0) throw new Error(`extension errors: ${JSON.stringify(errors)}`);
  const sessionManager = SessionManager.create(tree.cwd, join(tree.root, "sessions"));
  const { session } = await createAgentSession({
    cwd: tree.cwd,
    agentDir: tree.agentDir,
    modelRuntime,
    model: faux.getModel(),
    thinkingLevel: "off",
    resourceLoader: loader,
    sessionManager,
    settingsManager,
    tools: ["read", "edit", "write"],
  });
  await session.bindExtensions({});
  return { session, sessionManager, faux };
}

/** Compaction's summary requests carry Pi's summarization system prompt; they are not conversation. */
function isSummaryRequest(context: { systemPrompt?: string; messages: unknown[] }): boolean {
  if (context.systemPrompt?.startsWith(SUMMARY_PROMPT_START)) return true;
  const first = context.messages[0] as { role?: string; content?: unknown } | undefined;
  return (
    first?.role === "system" && typeof first.content === "string" && first.content.startsWith(SUMMARY_PROMPT_START)
  );
}

/** Text strings in a message (string content or text blocks), in order. */
function textsOf(message: unknown): string[] {
  const content = (message as { content?: unknown }).content;
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content
    .filter((block): block is { type: "text"; text: string } => (block as { type?: unknown }).type === "text")
    .map((block) => block.text);
}

function isExtensionText(text: string): boolean {
  return text.startsWith(REMINDER_OPEN) || text.startsWith(PEER_MESSAGE_PREFIX);
}

/**
 * What of a message a provider receives, serialized: Pi's bookkeeping (timestamps, usage, the
 * model that answered, tool-result details) never leaves the process, so a change there breaks no
 * prompt cache and is not counted as a prefix break.
 */
function providerView(message: unknown): string {
  return JSON.stringify(message, (key, value: unknown) => (LOCAL_FIELDS.has(key) ? undefined : value));
}

const LOCAL_FIELDS = new Set(["timestamp", "usage", "api", "provider", "model", "responseId", "details", "stopReason"]);

/**
 * Deliveries and duplicates, request by request: the messages of a request that the previous one
 * did not contain are what this step delivered; a version is a duplicate when its marker already
 * stood in the rest of the request (the context the model still had) or twice in the new part.
 */
function measure(name: string, requests: RecordedRequest[], entries: unknown[], toolCalls: number): EconomyResult {
  let deliveries = 0;
  let duplicates = 0;
  let prefixBreaks = 0;
  let previous: string[] = [];
  for (const [requestIndex, request] of requests.entries()) {
    const serialized = request.messages.map(providerView);
    const before = new Set(previous);
    const extendsPrevious =
      serialized.length >= previous.length && previous.every((message, index) => serialized[index] === message);
    if (!extendsPrevious && !request.afterCompaction) {
      prefixBreaks++;
      debug(`${name}: ${describeBreak(previous, serialized)}`);
    }
    const held = serialized.filter((message) => before.has(message)).join("\n");
    const seenNow = new Set<string>();
    request.messages.forEach((message, index) => {
      if (before.has(serialized[index]!)) return;
      for (const text of textsOf(message).filter(isExtensionText)) {
        for (const marker of text.match(MARKER) ?? []) {
          deliveries++;
          if (held.includes(marker) || seenNow.has(marker)) {
            duplicates++;
            debug(`${name}: duplicate "${marker}" in request ${requestIndex}, message ${index}`);
          }
          seenNow.add(marker);
        }
      }
    });
    previous = serialized;
  }
  return {
    name,
    requests: requests.length,
    toolCalls,
    ...deliveredBytes(entries),
    deliveries,
    duplicates,
    prefixBreaks,
    seconds: 0,
  };
}

/**
 * Bytes the extension added to the persisted conversation (our reminder blocks, the peer's
 * messages), and how many of them are content.
 */
function deliveredBytes(entries: unknown[]): { reminderBytes: number; contentBytes: number } {
  let reminderBytes = 0;
  let contentBytes = 0;
  for (const entry of entries) {
    const e = entry as { type?: string; message?: unknown; customType?: string; content?: unknown };
    const texts = e.type === "message" ? textsOf(e.message) : e.type === "custom_message" ? textsOf(e) : [];
    for (const text of texts) {
      if (!isExtensionText(text)) continue;
      reminderBytes += Buffer.byteLength(text);
      contentBytes += contentBytesOf(text);
    }
  }
  return { reminderBytes, contentBytes };
}

/**
 * Lines of content as the tree writes them: an instruction file's header and rules (see
 * instructionText), and a glob rule's two lines (see writeRules).
 */
const INSTRUCTION_LINE =
  /^(?:# Rules for .*\(.+, v\d+\)|- Rule \d+ for .*|# Rule \d+ \(.+\)|Keep .* consistent with its neighbours\.)$/;
/** A skill's name and description as the tree writes them, wherever a reminder puts them. */
const SKILL_FIELDS = /([\w.-]+-skill-\d+)\b[^\n]*?(How to work on [^\n]*? \(\d+\)\.)/g;

/**
 * The content in one delivered text, whatever wrapper surrounds it: the lines of instruction text
 * (with the blank line under each header) and each skill's name and description. The trees hold
 * no imports, so these are all the content there is.
 */
function contentBytesOf(text: string): number {
  let bytes = 0;
  const lines = text.split("\n");
  lines.forEach((line, index) => {
    if (!INSTRUCTION_LINE.test(line)) return;
    bytes += Buffer.byteLength(line) + 1;
    if (line.startsWith("# Rules for ") && lines[index + 1] === "") bytes += 1;
  });
  for (const match of text.matchAll(SKILL_FIELDS)) bytes += Buffer.byteLength(match[1]!) + Buffer.byteLength(match[2]!);
  return bytes;
}

/** BENCH_DEBUG=1 prints each external change, duplicate and prefix break to stderr. */
function debug(message: string): void {
  if (process.env.BENCH_DEBUG) process.stderr.write(`${message}\n`);
}

function describeBreak(previous: string[], current: string[]): string {
  const at = previous.findIndex((message, index) => current[index] !== message);
  const before = previous[at] ?? "";
  const after = current[at] ?? "";
  let char = 0;
  while (char < before.length && before[char] === after[char]) char++;
  const around = (text: string) => text.slice(Math.max(0, char - 80), char + 160);
  return `prefix break at message ${at} of ${previous.length}:\n  was: …${around(before)}\n  now: …${around(after)}`;
}
