// The reference model of the delivery rules: small, slow and obviously correct. It keeps no cache
// and shares no code with index.ts: every question is answered from the disk at the moment it is
// asked, with plain node:fs calls, and what the model (the LLM) holds is a fold over the records
// of the tool results still in its context.
//
// Covered: per-directory file choice (first valid name wins, refused names are told once, folders
// and broken links skipped silently, a file a passing I/O error hides keeps what the LLM holds of
// its scope and lets no later name apply), scopes (none inside a `.agents/skills` tree), the cwd
// boundary, symlinks (a link leads to no ignored folder and no dot name but a source's home), the size and UTF-8
// rules, text normalization, ignored folders, activation (reads only on success), once per
// version, changes (supersedes), deletions (one withdrawal), reading or writing the file itself
// (a write that failed shows nothing of it; a read through a link named otherwise: `readThrough`), skills (name, description, location; withdrawal) and
// the compaction rule (rebuild from the records still in context), and explanations (each of the
// two sections, files and skills, is explained in full while no explanation of it is in context,
// and the preamble comes with either while no preamble is in context).
//
// Bash calls: each word of a generated command is a path to read (it must exist: a folder
// activates itself, a file its folder), a folder before a glob, or a redirect target (like
// write: the nearest existing folder); heredoc bodies name nothing; a `cd` makes the next word
// relative to it. The scopes of all words arrive in one record, parent first, whatever the exit
// status; a command naming a file named like an instruction file is looked at after it ran.
//
// Not covered, on purpose: `@imports` and the 48 KiB reminder budget (the fuzzer keeps files
// small and free of `@` tokens), git-ignored folders (the fuzzer runs without git), and Pi's
// start-up skill list (empty in the runner harness).

import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync, type Stats } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { parseFrontmatter } from "@earendil-works/pi-coding-agent";

export const NAMES = ["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"];
export const IGNORED = new Set([".git", "node_modules", "dist", "build", "target", ".venv", "venv", "__pycache__"]);
export const CAP_BYTES = 64 * 1024;
const SKILL_MAX_DEPTH = 8;

export type ModelReason =
  "symlinkEscape" | "notRegular" | "tooLarge" | "notUtf8" | "unreadable" | "ignoredDir" | "dotfile";

/** The dot folders the sources live in, with the one child that is the source. */
const HOMES: Record<string, string> = {
  ".agents": "skills",
  ".claude": "rules",
  ".cursor": "rules",
  ".github": "instructions",
};

/**
 * Where a link may lead: below the folder it was found in (or anywhere in cwd, when outside that
 * folder), no ignored folder and no dot name but a source's home followed by its child, or a dot folder of shared
 * guidance above a Markdown file or leading to a folder.
 */
/** Dot folders of shared agent guidance: a Markdown file in one may be linked to. */
const GUIDANCE = new Set(
  ".agents .ai .claude .clinerules .codex .continue .cursor .gemini .github .junie .kiro .roo .ruler .rules .windsurf".split(
    " ",
  ),
);

function linkRefusal(cwd: string, folder: string, real: string): ModelReason | undefined {
  const rel = relative(cwd, real);
  const base = relative(cwd, folder);
  const parts = (base !== "" && rel.startsWith(base + sep) ? rel.slice(base.length + 1) : rel).split(sep);
  for (let i = 0; i < parts.length; i++) {
    if (IGNORED.has(parts[i]!)) return "ignoredDir";
    const markdown = i < parts.length - 1 && /\.mdc?$/i.test(parts.at(-1)!);
    const guidance = GUIDANCE.has(parts[i]!) && (markdown || tryStat(real)?.isDirectory() === true);
    if (parts[i]!.startsWith(".") && HOMES[parts[i]!] !== parts[i + 1] && !guidance) return "dotfile";
  }
  return undefined;
}

export interface ModelFile {
  /** cwd-relative path of the real file, forward slashes. */
  path: string;
  real: string;
  text: string;
  version: string;
  bytes: number;
}

export interface ModelSkill {
  path: string;
  name: string;
  description: string;
  /** What makes a listing stale: name and description. */
  key: string;
}

export interface ModelView {
  scope: string;
  file?: ModelFile;
  rejected: Array<{ path: string; reason: ModelReason }>;
  skills: ModelSkill[];
  /** A passing I/O error hid the folder's file: what the LLM holds of this scope stands. */
  filesUnknown?: boolean;
  /** Skill files a passing I/O error hid (cwd-relative): while there are any, the skills the LLM holds here stand. */
  skillsUnknown?: string[];
}

export interface ExpectedFile {
  path: string;
  scope: string;
  version: string;
  bytes: number;
  via: "reminder" | "read";
  supersedes: boolean;
  text: string;
}

export interface ExpectedRecord {
  files: ExpectedFile[];
  skills: Array<ModelSkill & { scope: string }>;
  retracted: Array<{ path: string; scope: string }>;
  retractedSkills: Array<{ path: string; scope: string }>;
  skipped: Array<{ path: string; reason: ModelReason }>;
  /** A held file that also governs another scope (one file linked into several folders). */
  alsoGoverns: Array<{ path: string; scope: string }>;
  /** Parts this reminder explains in full: the sections it has and the preamble, of which the LLM holds none. */
  explained: ModelSection[];
  /** Skill files that could not be read, which the user alone is told of, once per path. */
  unreadable?: string[];
}

export type ModelSection = "preamble" | "files" | "skills";

export interface Shown {
  /** Real path of an instruction file the tool showed whole. */
  whole?: string;
  /** Real path of an instruction file the tool showed in part. */
  part?: string;
}

// ---------------------------------------------------------------------------------------------
// Paths.

/** `child` lies strictly inside `parent`: the relative path is non-empty and does not climb. */
export function strictlyInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel !== "" && !isAbsolute(rel) && rel.split(sep)[0] !== "..";
}

function insideOrSame(parent: string, child: string): boolean {
  return resolve(parent) === resolve(child) || strictlyInside(parent, child);
}

function display(cwd: string, absolute: string): string {
  return relative(cwd, absolute).split(sep).join("/");
}

function tryRealpath(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function tryLstat(path: string): Stats | undefined {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function tryStat(path: string): Stats | undefined {
  try {
    return statSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** A tool's path argument as an absolute path, or undefined for one no tool could open. */
export function modelTarget(raw: unknown, cwd: string): string | undefined {
  if (typeof raw !== "string" || raw.trim() === "" || raw.includes("\0")) return undefined;
  if (Buffer.byteLength(raw) > 4096) return undefined;
  let path = raw;
  if (path === "~") path = homedir();
  else if (path.startsWith("~/")) path = join(homedir(), path.slice(2));
  return resolve(cwd, path);
}

// ---------------------------------------------------------------------------------------------
// Text.

export function modelVersion(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex").slice(0, 16);
}

/** Valid UTF-8 iff decoding and re-encoding gives the same bytes back. One BOM is dropped. */
export function modelDecode(bytes: Buffer): string | undefined {
  const text = bytes.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(bytes)) return undefined;
  const withoutBom = text.startsWith("\uFEFF") ? text.slice(1) : text;
  return withoutBom.split("\r\n").join("\n").split("\r").join("\n");
}

/** Pi's frontmatter parser, memoized by text (a pure function; the disk is never cached). */
const parsed = new Map<string, Record<string, unknown> | undefined>();
function frontmatterOf(text: string): Record<string, unknown> | undefined {
  if (!parsed.has(text)) {
    let frontmatter: Record<string, unknown> | undefined;
    try {
      frontmatter = parseFrontmatter(text).frontmatter;
    } catch {
      frontmatter = undefined;
    }
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(text, frontmatter);
  }
  return parsed.get(text);
}

// ---------------------------------------------------------------------------------------------
// The model.

export type Candidate = { file: ModelFile } | { reason: ModelReason } | { skip: true } | { unknown: true };

export class ReferenceModel {
  readonly cwd: string;
  /** What the LLM holds: instruction file path → version and the scope it was given for. */
  held = new Map<string, { version: string; scope: string }>();
  /** Skills the LLM holds: path → listing key and scope. */
  heldSkills = new Map<string, { key: string; scope: string }>();
  /** Refusal notices the LLM holds: path → reason. */
  told = new Map<string, string>();
  /** Further scopes the LLM was told a held file governs: "path\0scope". */
  toldAlso = new Set<string>();
  /** Parts (the preamble, sections) whose full explanation the LLM holds. */
  explained = new Set<ModelSection>();
  /** What the user was told could not be read, for the session: no compaction takes it back. */
  toldUser = new Set<string>();

  /** A file whose lstat fails with a passing I/O error (EIO) right now: it is unknown, not absent. */
  faulty?: string;

  constructor(cwdReal: string) {
    this.cwd = cwdReal;
  }

  /** The real folder whose chain a tool touching `target` activates, or undefined. */
  targetFolder(target: string): string | undefined {
    // A path outside cwd by its text is followed only through its own nearest existing folder.
    let dir = dirname(target);
    const viaLink = !insideOrSame(this.cwd, dir);
    while (viaLink || insideOrSame(this.cwd, dir)) {
      const real = tryRealpath(dir);
      if (real !== undefined) return insideOrSame(this.cwd, real) ? real : undefined;
      if (dirname(dir) === dir) return undefined;
      dir = dirname(dir);
    }
    return undefined;
  }

  /**
   * The real folder one bash word activates: a written path's nearest existing folder; a read path
   * only when it exists, inside cwd by its text and by its real path: a folder itself, a file its folder.
   */
  bashFolder(word: { role: "read" | "write"; path: string }): string | undefined {
    if (word.role === "write") return this.targetFolder(word.path);
    if (!insideOrSame(this.cwd, word.path)) return undefined;
    const real = tryRealpath(word.path);
    if (real === undefined || !insideOrSame(this.cwd, real)) return undefined;
    return tryStat(real)?.isDirectory() ? real : dirname(real);
  }

  /** The views of every word of a bash command, each scope once, parents before children. */
  bashViews(words: Array<{ role: "read" | "write"; path: string }>, withSkills: boolean): ModelView[] {
    const byScope = new Map<string, ModelView>();
    for (const word of words) {
      for (const view of this.views(this.bashFolder(word), withSkills)) byScope.set(view.scope, view);
    }
    const depth = (scope: string) => scope.split("/").length;
    return [...byScope.values()].sort((a, b) => depth(a.scope) - depth(b.scope) || a.scope.localeCompare(b.scope));
  }

  /** Every folder strictly below cwd down to `folder`, parent first, up to the first ignored one. */
  views(folder: string | undefined, withSkills: boolean): ModelView[] {
    if (folder === undefined || !strictlyInside(this.cwd, folder)) return [];
    const views: ModelView[] = [];
    const parts = relative(this.cwd, folder).split(sep);
    for (let i = 1; i <= parts.length; i++) {
      if (IGNORED.has(parts[i - 1]!)) break;
      // The folders of a skills tree are skill content, not scopes.
      if (parts[i - 1] === "skills" && parts[i - 2] === ".agents") break;
      const dir = join(this.cwd, ...parts.slice(0, i));
      views.push(this.view(dir, withSkills));
    }
    return views;
  }

  view(dir: string, withSkills: boolean): ModelView {
    const view: ModelView = { scope: display(this.cwd, dir), rejected: [], skills: [] };
    for (const name of NAMES) {
      const candidate = join(dir, name);
      const result = this.candidate(candidate);
      if ("skip" in result) continue;
      if ("unknown" in result) {
        // It may be the file that applies: the names after it wait for the next access.
        view.rejected.push({ path: display(this.cwd, candidate), reason: "unreadable" });
        view.filesUnknown = true;
        break;
      }
      if ("reason" in result) {
        view.rejected.push({ path: display(this.cwd, candidate), reason: result.reason });
        continue;
      }
      view.file = result.file;
      break;
    }
    if (withSkills) view.skillsUnknown = this.skillsIn(dir, view.skills);
    return view;
  }

  /** One candidate path: a loaded file, a refusal, or nothing at all. */
  candidate(path: string): Candidate {
    if (path === this.faulty && tryLstat(path)) return { unknown: true };
    const own = tryLstat(path);
    if (!own) return { skip: true };
    let real = path;
    let stats = own;
    if (own.isSymbolicLink()) {
      const resolved = tryRealpath(path);
      if (resolved === undefined) return { skip: true };
      if (!strictlyInside(this.cwd, resolved)) return { reason: "symlinkEscape" };
      const refusal = linkRefusal(this.cwd, dirname(path), resolved);
      if (refusal) return { reason: refusal };
      const target = tryStat(resolved);
      if (!target) return { skip: true };
      real = resolved;
      stats = target;
    }
    if (stats.isDirectory()) return { skip: true };
    if (!stats.isFile()) return { reason: "notRegular" };
    let bytes: Buffer;
    try {
      bytes = readFileSync(real);
    } catch {
      return { unknown: true };
    }
    if (bytes.length > CAP_BYTES) return { reason: "tooLarge" };
    const text = modelDecode(bytes);
    if (text === undefined) return { reason: "notUtf8" };
    return { file: { path: display(this.cwd, real), real, text, version: modelVersion(text), bytes: bytes.length } };
  }

  /**
   * Pi's rules for `.agents/skills`, answered from the disk; the files that could not be read. An unreadable file
   * costs only its own skill: the rest of the tree is still scanned, in whatever order.
   */
  skillsIn(dir: string, skills: ModelSkill[]): string[] {
    if (!tryLstat(join(dir, ".agents"))) return [];
    const root = tryRealpath(join(dir, ".agents", "skills"));
    if (root === undefined || !strictlyInside(this.cwd, root)) return [];
    const unknown: string[] = [];
    this.scanSkills(root, 0, skills, unknown);
    return unknown;
  }

  private scanSkills(dir: string, depth: number, out: ModelSkill[], unknown: string[]): void {
    if (!tryStat(dir)?.isDirectory()) return;
    let entries: Array<{ name: string; link: boolean; dir: boolean; file: boolean }>;
    try {
      entries = readdirSync(dir, { withFileTypes: true }).map((d) => ({
        name: d.name,
        link: d.isSymbolicLink(),
        dir: d.isDirectory(),
        file: d.isFile(),
      }));
    } catch {
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    if (entries.some((entry) => entry.name === "SKILL.md")) {
      this.addSkill(join(dir, "SKILL.md"), out, unknown);
      return;
    }
    for (const entry of entries) {
      if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
      if (!entry.link && !entry.dir && !entry.file) continue;
      const path = join(dir, entry.name);
      let subdirectory = entry.dir ? path : undefined;
      if (entry.link) {
        const real = tryRealpath(path);
        if (real === undefined || !strictlyInside(this.cwd, real)) continue;
        if (tryStat(real)?.isDirectory()) subdirectory = real;
      }
      if (subdirectory !== undefined) {
        if (depth < SKILL_MAX_DEPTH) this.scanSkills(subdirectory, depth + 1, out, unknown);
        continue;
      }
      if (depth > 0 && entry.name.endsWith(".md")) this.addSkill(path, out, unknown);
    }
  }

  private addSkill(path: string, out: ModelSkill[], unknown: string[]): void {
    const result = this.candidate(path);
    if ("unknown" in result) return void unknown.push(display(this.cwd, path));
    if (!("file" in result)) return;
    const frontmatter = frontmatterOf(result.file.text);
    if (frontmatter === undefined) return;
    const description = frontmatter.description;
    if (typeof description !== "string" || description.trim() === "") return;
    if (frontmatter["disable-model-invocation"] === true) return;
    const name =
      typeof frontmatter.name === "string" && frontmatter.name !== ""
        ? frontmatter.name
        : basename(dirname(result.file.real));
    const trimmed = description.trim();
    out.push({ path: result.file.path, name, description: trimmed, key: `${name}\n${trimmed}` });
  }

  /**
   * The real path of a target named like an instruction file, when it resolves. A written target
   * named otherwise writes one when it is a link to one inside cwd.
   */
  instructionTarget(target: string, written = false): string | undefined {
    if (NAMES.includes(basename(target))) return tryRealpath(target);
    const real = written ? tryRealpath(target) : undefined;
    const inside = real !== undefined && real !== this.cwd && insideOrSame(this.cwd, real);
    return inside && NAMES.includes(basename(real)) ? real : undefined;
  }

  /**
   * The real path of the file a view offers that a read named otherwise shows through a link (`NOTES.md ->
   * AGENTS.md`). Judged only while a view offers a file the LLM lacks and the target lies inside cwd by its text:
   * the extension's cost rule, so that a warm read costs no call.
   */
  readThrough(target: string, views: ModelView[]): string | undefined {
    if (NAMES.includes(basename(target)) || !insideOrSame(this.cwd, target)) return undefined;
    if (!views.some(({ file }) => file && this.held.get(file.path)?.version !== file.version)) return undefined;
    const real = tryRealpath(target);
    return views.some(({ file }) => file?.real === real) ? real : undefined;
  }

  /** What one activation should deliver, given what the LLM holds now. */
  plan(views: ModelView[], shown: Shown = {}): ExpectedRecord {
    const record = emptyExpected();
    // A file another folder on the chain still offers (one file linked into several) stays.
    const offered = new Set(views.flatMap((view) => (view.file ? [view.file.path] : [])));
    for (const view of views) {
      // What an I/O error hides is unknown, not gone: nothing of it is withdrawn.
      for (const [path, held] of view.filesUnknown ? [] : this.held) {
        if (held.scope === view.scope && !offered.has(path)) record.retracted.push({ path, scope: view.scope });
      }
      const present = new Set(view.skills.map((skill) => skill.path));
      for (const path of view.skillsUnknown ?? [])
        if (!this.toldUser.has(path) && !record.unreadable?.includes(path)) (record.unreadable ??= []).push(path);
      for (const [path, held] of view.skillsUnknown?.length ? [] : this.heldSkills) {
        if (held.scope === view.scope && !present.has(path)) record.retractedSkills.push({ path, scope: view.scope });
      }
      for (const refusal of view.rejected) {
        if (this.told.get(refusal.path) === refusal.reason) continue;
        // A file the LLM holds stays as it is while it cannot be read: nothing to tell.
        if (refusal.reason === "unreadable" && this.held.has(refusal.path)) continue;
        if (record.skipped.some((s) => s.path === refusal.path && s.reason === refusal.reason)) continue;
        record.skipped.push(refusal);
      }
      const file = view.file;
      const planned = file && record.files.find((f) => f.path === file.path);
      const held = file && this.held.get(file.path);
      // A whole read of the file is recorded even when the LLM held it: should a compaction drop
      // the earlier delivery and keep the read, the file is still held.
      if (
        file &&
        file.real !== shown.part &&
        !planned &&
        (file.real === shown.whole || held?.version !== file.version)
      ) {
        record.files.push({
          path: file.path,
          scope: view.scope,
          version: file.version,
          bytes: file.bytes,
          via: file.real === shown.whole ? "read" : "reminder",
          supersedes: this.held.has(file.path),
          text: file.text,
        });
      } else if (file && file.real !== shown.part) {
        // The LLM holds this very file for another scope: it is told, once, that it governs this one too.
        const sentWith = planned?.scope ?? held?.scope;
        const told = this.toldAlso.has(`${file.path}\0${view.scope}`);
        const again = record.alsoGoverns.some((a) => a.path === file.path && a.scope === view.scope);
        if (sentWith !== undefined && sentWith !== view.scope && !told && !again)
          record.alsoGoverns.push({ path: file.path, scope: view.scope });
      }
      for (const skill of view.skills) {
        if (this.heldSkills.get(skill.path)?.key === skill.key) continue;
        if (record.skills.some((s) => s.path === skill.path)) continue;
        record.skills.push({ ...skill, scope: view.scope });
      }
    }
    const has = { files: record.files.some((f) => f.via === "reminder"), skills: record.skills.length > 0 };
    const filled = (["files", "skills"] as const).filter((s) => has[s]);
    record.explained = (filled.length > 0 ? ["preamble" as const, ...filled] : []).filter(
      (s) => !this.explained.has(s),
    );
    return record;
  }

  /** What the LLM holds after a record reached it. */
  apply(record: ExpectedRecord): void {
    for (const { path } of record.retracted) {
      this.held.delete(path);
      this.forgetAlso(path);
    }
    for (const { path } of record.retractedSkills) this.heldSkills.delete(path);
    for (const file of record.files) {
      if (this.held.get(file.path)?.version !== file.version) this.forgetAlso(file.path);
      this.held.set(file.path, { version: file.version, scope: file.scope });
      this.told.delete(file.path);
    }
    for (const skill of record.skills) this.heldSkills.set(skill.path, { key: skill.key, scope: skill.scope });
    for (const skip of record.skipped) this.told.set(skip.path, skip.reason);
    for (const { path, scope } of record.alsoGoverns) this.toldAlso.add(`${path}\0${scope}`);
    for (const section of record.explained) this.explained.add(section);
    for (const path of record.unreadable ?? []) this.toldUser.add(path);
  }

  private forgetAlso(path: string): void {
    for (const key of this.toldAlso) if (key.startsWith(`${path}\0`)) this.toldAlso.delete(key);
  }

  /** The compaction rule: what the LLM holds is what the records still in context say. */
  rebuild(records: ExpectedRecord[]): void {
    this.held.clear();
    this.heldSkills.clear();
    this.told.clear();
    this.toldAlso.clear();
    this.explained.clear();
    for (const record of records) this.apply(record);
  }
}

export function emptyExpected(): ExpectedRecord {
  return { files: [], skills: [], retracted: [], retractedSkills: [], skipped: [], alsoGoverns: [], explained: [] };
}

/** One part of a generated bash command, as the fuzzer writes it. Paths are as given (may be absolute). */
export type BashPart =
  | { kind: "read"; path: string }
  | { kind: "glob"; dir: string }
  | { kind: "write"; path: string }
  | { kind: "cd"; dir: string; path: string }
  | { kind: "heredoc"; write: string; hidden: string }
  | { kind: "script"; path: string };

/** The words of a bash command that may activate a scope, by the rules above, as absolute paths. */
export function bashWords(parts: BashPart[], cwd: string): Array<{ role: "read" | "write"; path: string }> {
  return parts.flatMap((part): Array<{ role: "read" | "write"; path: string }> => {
    if (part.kind === "read" || part.kind === "script") return [{ role: "read", path: resolve(cwd, part.path) }];
    if (part.kind === "glob") return [{ role: "read", path: resolve(cwd, part.dir) }];
    if (part.kind === "write") return [{ role: "write", path: resolve(cwd, part.path) }];
    if (part.kind === "heredoc") return [{ role: "write", path: resolve(cwd, part.write) }];
    return [
      { role: "read", path: resolve(cwd, part.dir) },
      { role: "read", path: resolve(cwd, part.dir, part.path) },
    ];
  });
}

/** Whether a bash command names a file named like an instruction file (its views come after it ran). */
export function bashNamesInstruction(parts: BashPart[], cwd: string): boolean {
  return bashWords(parts, cwd).some((word) => NAMES.includes(basename(word.path)));
}

export function isEmptyRecord(record: ExpectedRecord): boolean {
  return record.files.length === 0 && record.skills.length === 0 && !showsNotices(record);
}

function showsNotices(record: ExpectedRecord): boolean {
  const notices = record.retracted.length + record.retractedSkills.length + record.skipped.length;
  return notices + record.alsoGoverns.length > 0;
}

/** Whether the record puts text in front of the LLM (a whole read of the file itself puts none). */
export function showsText(record: ExpectedRecord): boolean {
  return record.files.some((file) => file.via === "reminder") || record.skills.length > 0 || showsNotices(record);
}
