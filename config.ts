// Constants and defaults of pi-lazy-agents. The rule of this file: every tunable constant and every
// fixed sentence the model or the user reads (the reminder's preamble and headers, notices, reasons,
// warnings, the gate's texts, the report's words) lives here, so reviewing wording means reading this
// file. It is in named sections; settings may override the defaults of the first, everything else is fixed
// by design.

// ---------------------------------------------------------------------------------------------
// Defaults that settings override: each is the value of a setting while it is not set.
// ---------------------------------------------------------------------------------------------

/** Per-directory instruction file names, in Pi's own order of preference. Default. */
export const INSTRUCTION_FILE_NAMES: readonly string[] = [
  "AGENTS.override.md",
  "AGENTS.md",
  "AGENTS.MD",
  "CLAUDE.md",
  "CLAUDE.MD",
];

/** Tools whose `path` argument activates the instruction chain. Default. */
export const TRIGGER_TOOLS: readonly string[] = ["read", "edit", "write", "bash"];

/** Largest instruction, import or SKILL.md file accepted, in bytes. Default. */
export const MAX_FILE_BYTES = 64 * 1024;

/** Byte budget of one whole reminder: tags, paths, texts, skills and notices. Default. */
export const REMINDER_BUDGET_BYTES = 48 * 1024;

/** Directory names that never speak to the model, wherever they appear below cwd. Default. */
export const IGNORED_DIR_NAMES: readonly string[] = [
  ".git",
  "node_modules",
  "dist",
  "build",
  "target",
  ".venv",
  "venv",
  "__pycache__",
];

/** Rule sources, in the order their rules are listed. Default: all. */
export const RULE_SOURCES = ["claude", "cursor", "copilot"] as const;

export type RuleSource = (typeof RULE_SOURCES)[number];

/** The options while no setting is set: the defaults above, shaped as the code reads them. */
export function defaultOptions() {
  return {
    enabled: true,
    fileNames: INSTRUCTION_FILE_NAMES,
    triggers: new Set(TRIGGER_TOOLS) as ReadonlySet<string>,
    ignoredDirs: new Set(IGNORED_DIR_NAMES) as ReadonlySet<string>,
    maxFileBytes: MAX_FILE_BYTES,
    budgetBytes: REMINDER_BUDGET_BYTES,
    skills: true,
    imports: true,
    gateWrites: false,
    rules: true,
    ruleSources: new Set(RULE_SOURCES) as ReadonlySet<RuleSource>,
    checks: true,
  };
}

// ---------------------------------------------------------------------------------------------
// Limits: the bounds that keep every read, scan, parse, match and reminder small, fixed by design (the
// settings themselves are bounded by MAX_SETTING_BYTES and MIN_SETTING_BUDGET_BYTES).
// ---------------------------------------------------------------------------------------------

/** Upper bound a setting may give to a file size or a budget, so reads stay bounded. */
export const MAX_SETTING_BYTES = 1024 * 1024;

/** Instruction files (and imports) one reminder carries at most; the rest follow with later accesses. */
export const MAX_REMINDER_FILES = 32;

/** Deliveries awaiting their turn's end; a host that never ends turns keeps only the latest this many. */
export const MAX_UNCONFIRMED_RESULTS = 1024;

/** Fewest bytes of a file's text worth sending cut; a file with less room left waits, whole, for a later access. */
export const MIN_CUT_BYTES = 512;

/** Entries read from one directory of a skills tree before the scan stops there. */
export const MAX_SKILL_DIR_ENTRIES = 256;

/**
 * A folder whose size (as its stat reports it) is at most this is listed once instead of probed
 * name by name: one block on ext4, about 200 entries on tmpfs. Larger folders keep the probes.
 */
export const LISTED_DIR_MAX_BYTES = 4096;

/** A folder listed with more entries than this is probed name by name when it changes. */
export const LISTED_DIR_MAX_ENTRIES = 48;

/** How deep below `.agents/skills` a skill folder may sit; deeper folders are announced, not searched. */
export const MAX_SKILL_DEPTH = 8;

/** How many `@import` hops an instruction file may follow. */
export const MAX_IMPORT_DEPTH = 5;

/** Files taken from one imported directory. */
export const MAX_IMPORT_DIR_FILES = 32;

/** Brace alternatives one glob may expand to; beyond it the rule is refused. */
export const MAX_GLOB_EXPANSIONS = 64;

/** Characters of a rule's globs, braces expanded (or of one ignore line); beyond it the rule is refused unread. */
export const MAX_GLOB_CHARS = 4096;

/** Characters of a content hash kept as the version id. */
export const VERSION_ID_LENGTH = 16;

/** Left-out files a reminder names, so that the model can read them itself. */
export const MAX_LEFT_OUT_NAMES = 8;

/** Touched paths a reminder's opening tag names; a bash command that touches more adds a count. */
export const SHOWN_TOUCHED_PATHS = 3;

/** How long a git ignore answer may take before git is given up for the session. */
export const GIT_ANSWER_TIMEOUT_MS = 2000;

/** Smallest reminder budget a setting may give, in bytes. */
export const MIN_SETTING_BUDGET_BYTES = 1024;

/** How deep below its rule folder a rule file may sit. */
export const MAX_RULE_DEPTH = 4;

/** Characters of one bash command the shell-word reader looks at; the rest is not read. */
export const MAX_SHELL_COMMAND_CHARS = 16 * 1024;

/** Words of one bash command (nested scripts included) the shell-word reader looks at. */
export const MAX_SHELL_WORDS = 1024;

/** How deep subshells, `$( )` and `bash -c` scripts nest before the reader stops descending. */
export const MAX_SHELL_NESTING = 16;

/** Words whose kind (file, folder, nothing) is remembered against their folder's stat signature. */
export const MAX_SHELL_WORD_CACHE = 4096;

/** Touched paths whose applying rules a rule folder keeps, before it starts over. */
export const MAX_RULE_MATCH_CACHE = 4096;

/** Longest tool path argument, in UTF-8 bytes, that is resolved at all (the usual PATH_MAX). */
export const MAX_PATH_BYTES = 4096;

/** Paths one notification names; a turn that loaded more adds a count. */
export const MAX_NOTICE_PATHS = 8;

/** Time bound of the regex matches of one call, in ms: a runaway pattern is cut there. */
export const CHECK_MATCH_TIMEOUT_MS = 50;

/**
 * Time the bounded matches of one call may take, in ms: past it, the rules not run yet let the call through and the
 * next call starts with them. A test started before it may still take two bounds (together, then alone).
 */
export const CHECK_CALL_BUDGET_MS = 4 * CHECK_MATCH_TIMEOUT_MS;

/** Text length × pattern length up to which a pattern that cannot backtrack runs without the bound. */
export const CHECK_UNBOUNDED_MATCH_STEPS = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Names: the files and folders the extension reads (rule files that other agents read: Claude Code, Cursor,
// GitHub Copilot; Claude Code's hookify rules), and the keys, names and errno codes it deals with.
// ---------------------------------------------------------------------------------------------

/** Tools that may be added as triggers; their `path` may name a directory. */
export const OPTIONAL_TRIGGER_TOOLS: readonly string[] = ["ls", "grep", "find"];

/** Folder names no source is ever read from, whatever `ignoreDirs` says: git's own store holds remotes and tokens. */
export const NEVER_IMPORTED_DIR_NAMES: readonly string[] = [".git"];

/** Where skills live inside a directory, as in Pi. */
export const SKILLS_DIR_SEGMENTS: readonly string[] = [".agents", "skills"];
export const SKILL_FILE_NAME = "SKILL.md";

/** Ignore files Pi honours inside a skills tree, each applying to its folder and below. */
export const SKILL_IGNORE_FILES: readonly string[] = [".gitignore", ".ignore", ".fdignore"];

/** Custom session entry that keeps a record whose result's `details` another extension replaced. */
export const RESCUED_RECORD_ENTRY = "lazy-agents-record";

/** Key of this extension's record in a tool result's `details`. */
export const DETAILS_KEY = "lazyAgents";

/** Version of the record stored under DETAILS_KEY. */
export const LEDGER_VERSION = 1;

/** The parts of a reminder that each open with an explanation, in the order the reminder shows them. */
export const REMINDER_SECTIONS = ["files", "rules", "ruleListings", "skills"] as const;

/** What a reminder may explain, as its record lists it: the preamble, said before all sections, and each section. */
export const EXPLAINED_PARTS = ["preamble", ...REMINDER_SECTIONS] as const;

/** Settings key in Pi's settings.json files. */
export const SETTINGS_KEY = "lazyAgents";

/** CLI flag that turns the extension off for one run. */
export const DISABLE_FLAG = "no-lazy-agents";

/** Command that reports what the extension loaded and why. */
export const COMMAND_NAME = "lazy-agents";

/** Status-bar key. */
export const STATUS_KEY = "lazy-agents";

/**
 * Errors that say what a path is: nothing there, a broken or looping link, a name too long. Any
 * other error (EIO, EACCES, EMFILE …) is passing: it leaves the path unknown, never absent.
 */
export const SETTLED_ERROR_CODES: ReadonlySet<string> = new Set(["ENOENT", "ENOTDIR", "ELOOP", "ENAMETOOLONG"]);

/** Where each source keeps its rules, below the folder that holds them. */
export const RULE_DIRS: Record<RuleSource, readonly [string, string]> = {
  claude: [".claude", "rules"],
  cursor: [".cursor", "rules"],
  copilot: [".github", "instructions"],
};

/** The dot folders sources live in, each with the one child that is the source (`.claude/rules` …). */
export const SOURCE_HOMES: ReadonlyMap<string, string> = new Map(
  [...Object.values(RULE_DIRS), SKILLS_DIR_SEGMENTS].map(([home, child]) => [home!, child!]),
);

/**
 * Dot folders where teams keep guidance that each tool's own home links to or imports (Cratis/Chronicle's
 * `.claude/rules/x.md -> ../../.ai/rules/x.md`): a Markdown file or a folder there may be a source. Anything else in
 * them, and every other dot name (`.aws/notes.md`), is a dotfile.
 */
export const GUIDANCE_DOT_FOLDERS: ReadonlySet<string> = new Set(
  ".agents .ai .claude .clinerules .codex .continue .cursor .gemini .github .junie .kiro .roo .ruler .rules .windsurf".split(
    " ",
  ),
);
export const GUIDANCE_FILE = /\.mdc?$/i;

/** The frontmatter key that holds a rule's globs, in each source. */
export const RULE_GLOB_KEYS: Record<RuleSource, string> = { claude: "paths", cursor: "globs", copilot: "applyTo" };

/** File names each source reads as rules. */
export const RULE_FILE_SUFFIXES: Record<RuleSource, readonly string[]> = {
  claude: [".md"],
  cursor: [".mdc", ".md"],
  copilot: [".instructions.md"],
};

/**
 * Git runs no program a repository names (docs/safety.md). An empty `core.fsmonitor` on the command
 * line outranks every config file and is off in every git version ("false" is a hook path before
 * 2.36); no lazy fetch and an empty GIT_ALLOW_PROTOCOL keep a partial clone from reaching any remote
 * (`ext::`, `core.sshCommand`); no optional locks. The user's global and system config stay, for
 * `core.excludesFile`.
 */
export const GIT_ARGS = ["-c", "core.fsmonitor=", "check-ignore", "--stdin", "-z", "--verbose", "--non-matching"];
export const GIT_ENV = {
  GIT_FLUSH: "1",
  GIT_OPTIONAL_LOCKS: "0",
  GIT_NO_LAZY_FETCH: "1",
  GIT_ALLOW_PROTOCOL: "",
  GIT_TERMINAL_PROMPT: "0",
};

/** Words of a bash command line: shell keywords, wrappers that run the tool after them, shells that take a script. */
export const SHELL_KEYWORDS = new Set("if then elif else fi do done while until ! { } time esac coproc".split(" "));
export const SHELL_WRAPPERS = new Set(
  "env command builtin exec nohup time sudo nice ionice timeout xargs stdbuf".split(" "),
);
/** Tools that move the directory of the commands after them in the same shell. */
export const SHELL_DIRECTORY_TOOLS: ReadonlySet<string> = new Set(["cd", "pushd", "popd"]);
export const SHELLS_WITH_SCRIPT = new Set(["bash", "sh", "zsh"]);
/** Options of common tools that name the folder they work in; groups 1 and 2, a value joined to the option. */
export const TOOL_DIRECTORY_OPTION = new RegExp(
  "^(?:(?:git|make|pnpm|env) -C|make --directory|npm --prefix|pnpm --dir|yarn --cwd|cargo --manifest-path" +
    "|env --chdir)" +
    "(?:$|(?<=C)(.+)|=(.+))",
);

/** The argument of `/lazy-agents` that adds each file's version to the report. */
export const VERBOSE_ARGUMENT = "--verbose";

/** The rule file names hookify reads (its glob `hookify.*.local.md`), in each folder's `.claude`. */
export const CHECK_FILE_NAME = /^hookify\..*\.local\.md$/;
export const CHECK_DIR_NAME = ".claude";

/** The custom message type of a stop that a check sent back. */
export const CHECK_MESSAGE_TYPE = "pi-lazy-agents-check";

/** The field a rule's bare `pattern` tests, by its event, as hookify's `Rule.from_dict` maps it; other events test content. */
export const CHECK_PATTERN_FIELDS: ReadonlyMap<string, string> = new Map([
  ["bash", "command"],
  ["file", "new_text"],
  ["prompt", "prompt"],
]);

// Python's `$` (without re.M) also matches before a newline that ends the text.
export const PYTHON_REGEX_TOKENS: Record<string, string> = {
  "\\A": "(?<![\\s\\S])",
  "\\Z": "(?![\\s\\S])",
  "(?P<": "(?<",
  $: "(?=\\n?(?![\\s\\S]))",
};

// Python's \w, \d and \b are Unicode (a str pattern), JavaScript's ASCII: read under the `u` flag, outside a class
// and in one.
const WORD = "\\p{L}\\p{N}_";
// Python's whitespace (str.isspace, and \s): \x1c-\x1f and \x85 are, a BOM is not, unlike JavaScript's.
const SPACE = "\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
/** Python's whitespace at a string's start, as hookify's str.strip() and lstrip() take it. */
export const PYTHON_SPACE_START = new RegExp(`^[${SPACE}]+`, "u");
const [IS_WORD, NOT_WORD] = [`(?<=[${WORD}])`, `(?<![${WORD}])`];
export const PYTHON_UNICODE_TOKENS: Record<string, string> = {
  "\\w": `[${WORD}]`,
  "\\W": `[^${WORD}]`,
  "\\d": "[\\p{Nd}]",
  "\\D": "[^\\p{Nd}]",
  "\\s": `[${SPACE}]`,
  "\\S": `[^${SPACE}]`,
  // Lookaheads, so that a quantifier after them does not compile, as in Python ("nothing to repeat").
  "\\b": `(?=${IS_WORD}(?![${WORD}])|${NOT_WORD}(?=[${WORD}]))`,
  "\\B": `(?=${IS_WORD}(?=[${WORD}])|${NOT_WORD}(?![${WORD}]))`,
};
export const PYTHON_UNICODE_IN_CLASS: Record<string, string> = {
  "\\w": WORD,
  "\\d": "\\p{Nd}",
  "\\D": "\\P{Nd}",
  "\\s": SPACE,
};

// What the translation of a pattern that cannot backtrack looks like: plain atoms, classes, Python's `$` and a
// top-level `|`, with no quantifier, group or backreference. A test then costs at most text × pattern steps, so a
// small one needs no watchdog (bench: checks_write_added_us 1196 → 306).
export const BACKTRACK_FREE = /^(?:\(\?=\\n\?\(\?!\[\\s\\S\]\)\)|[^\\()[\]{}*+?]|\\[^1-9k]|\[(?:[^\\\]]|\\.)*\])*$/;

// ---------------------------------------------------------------------------------------------
// Text for the model: the reminder's fixed sentences, notices and reasons. Paths and scopes come in
// already made safe for one line. Each section of a reminder is explained in full once while the model can
// still see that explanation; later reminders name a list (skills, rule listings) in one line that stands on its
// own, and files and rules by their tags alone.
// ---------------------------------------------------------------------------------------------

/** Fixed reasons: the only words a warning or report may add to a cwd-relative path. */
export const REASONS = {
  outsideCwd: "outside the working directory",
  symlinkEscape: "a link that leads outside the working directory",
  notRegular: "not a regular file",
  tooLarge: "larger than the size limit",
  notUtf8: "not valid UTF-8",
  unreadable: "could not be read",
  skillsTree: "a skills tree, whose folders are skill content, not scopes",
  ignoredDir: "inside an ignored directory",
  dotfile: "a dotfile, which may hold credentials",
  gitIgnored: "ignored by git",
  startupContext: "the file Pi loaded at start-up, already in the system prompt",
  overridden: "overridden by a preferred file in the same directory",
  skillNoDescription: "skill without a description",
  skillHidden: "skill hidden from the model (disable-model-invocation)",
  skillShadowed: "skill shadowed by a more specific skill of the same name",
  skillCollision: "skill name collision: an earlier skill of the same name in this skills folder is kept",
  skillInvalid: "skill file could not be parsed",
  scanCapped: "directory has more entries than the scan limit",
  importDirCapped: `a folder it imports has more files than the import limit (${MAX_IMPORT_DIR_FILES})`,
  importScanCapped: `a folder it imports has more entries than the scan limit (${MAX_SKILL_DIR_ENTRIES})`,
  skillDepthCapped: `folder below the skills depth limit (${MAX_SKILL_DEPTH}), not searched`,
  importDepthCapped: `its imports lie beyond the import depth limit (${MAX_IMPORT_DEPTH}), not followed`,
  globRange: "a glob with a class range out of order (its end before its start)",
  globTooLong: `globs longer than the glob limit (${MAX_GLOB_CHARS} characters, braces expanded)`,
  globExpansions: `a glob whose braces expand to more patterns than the limit (${MAX_GLOB_EXPANSIONS})`,
} as const;

export type Reason = keyof typeof REASONS;

/** Reasons that say a cap hid part of what was there, rather than that a file was refused. */
export const CAP_REASONS: ReadonlySet<Reason> = new Set([
  "scanCapped",
  "importDirCapped",
  "importScanCapped",
  "skillDepthCapped",
  "importDepthCapped",
]);

/** A reason, with how much of a capped folder was taken when known. */
export function reasonText(reason: Reason, counts?: { taken: number; total: number }): string {
  return counts ? `${REASONS[reason]}; ${counts.taken} of ${counts.total} entries taken` : REASONS[reason];
}

/** What the budget can leave out of a reminder, each kind as the left-out line counts it: one, many. */
export const LEFT_OUT_KINDS = {
  files: ["instruction file", "instruction files"],
  rules: ["rule", "rules"],
  ruleListings: ["rule listed by description", "rules listed by description"],
  skills: ["skill", "skills"],
  notices: ["notice", "notices"],
} as const;

export type LeftOutCounts = Record<keyof typeof LEFT_OUT_KINDS, number>;

/** The one line that counts what the budget left out of a reminder, by kind, and names the first of them. */
export function leftOutText(counts: Readonly<LeftOutCounts>, names: readonly string[]): string {
  const parts = Object.entries(LEFT_OUT_KINDS).flatMap(([kind, [one, many]]) => {
    const count = counts[kind as keyof LeftOutCounts];
    return count > 0 ? [`${count} ${count === 1 ? one : many}`] : [];
  });
  const shown = names.slice(0, MAX_LEFT_OUT_NAMES);
  const more = names.length > shown.length ? ` and ${names.length - shown.length} more` : "";
  const read = shown.length > 0 ? `, or read them yourself: ${shown.join(", ")}${more}` : "";
  return `To stay within its size and file limits, this reminder left out ${parts.join(", ")}; they follow with later accesses in their scope${read}.`;
}

/** The notice that a file the model holds also governs another folder (one file linked into several). */
export function alsoGovernsNotice(path: string, scopeGlob: string): string {
  return `${path} also governs ${scopeGlob}: it is the same file, linked there, and its text was sent earlier.`;
}

/** Appended to the reminder that a held-back write or edit carries as its block reason. */
export const GATE_RETRY_TEXT =
  "pi-lazy-agents held this call back once so that these instructions arrive before the first change in their scope. " +
  "Apply them, then retry the same call: it will go through.";

/** Block reason of a write held back because a sibling call of the same turn carries its scope's instructions. */
export const GATE_SIBLING_TEXT =
  "pi-lazy-agents held this call back: the instructions for its folder arrive with another call of this turn. " +
  "Apply them, then retry the same call: it will go through.";

/** The full explanation of the rule texts a reminder carries, with how a rule ranks against a folder's file. */
export const RULES_INTRO =
  "Rules (.claude/rules, .cursor/rules, .github/instructions) whose scope matches it. Where a rule and an instruction file " +
  "disagree, the deepest folder's file wins over the rule, and the rule over the files of folders above that one.";

export const RULE_LISTING_INTRO =
  "Rules that apply when a task matches their description. Read a rule's file when its description fits the task.";

/** Opens the first reminder with files, rules or skills that the model can see: said once while it sees it. */
export const REMINDER_PREAMBLE =
  "Project guidance from the repository for the path this tool touched, not a message from the user.";

/** The full explanation of the instruction files a reminder carries. */
export const INSTRUCTIONS_INTRO =
  "Instruction files of the folders on the way to it: each governs its folder and below; where two disagree, the deeper folder's wins.";

/** The full explanation of the skills a reminder lists. */
export const SKILLS_INTRO =
  "Skills, each for the folder holding its .agents/skills: read a skill's file when a task matches its description; " +
  "a deeper folder's skill wins over one of the same name.";

/** The one line that names the skills once the model holds their explanation. */
export const SKILLS_HEADER = "More skills:";

/** The one line that names rule listings once the model holds RULE_LISTING_INTRO. */
export const RULE_LISTING_HEADER = "More rules listed by description:";

/** Each section's full explanation, and its one-line header once the model holds that; tags name files and rules. */
export const SECTION_INTROS: Record<(typeof REMINDER_SECTIONS)[number], readonly [string, string?]> = {
  files: [INSTRUCTIONS_INTRO],
  skills: [SKILLS_INTRO, SKILLS_HEADER],
  rules: [RULES_INTRO],
  ruleListings: [RULE_LISTING_INTRO, RULE_LISTING_HEADER],
};

/** How a one-line field or attribute value inside the reminder is escaped, as Pi escapes its own skill listing. */
export const XML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

/** A rule's scope when it applies to every path (alwaysApply, `applyTo: "**"` or every file below it) in cwd's rule folders. */
export const REPOSITORY_WIDE_SCOPE = "repository-wide";

/** The marker of a new version of a file the model holds, as the value of its `supersedes` attribute. */
export const SUPERSEDES_MARKER = "earlier version";

/** Ends the line of a nested skill that shadows a skill Pi listed at start-up. */
export const SKILL_OVERRIDES_STARTUP =
  " Inside this scope it takes precedence over the skill of the same name listed at start-up.";

/** The notice that a file or rule the model holds no longer applies. */
export function withdrawnNotice(path: string): string {
  return `${path} no longer applies: its earlier instructions are withdrawn.`;
}

/** The notice that a nested skill the model was told of is gone. */
export function skillGoneNotice(path: string): string {
  return `The skill at ${path} is gone: do not use it.`;
}

/** The notice of a file loaded only in part: a cap (imports, skills, entries) stopped it. */
export function cutShortNotice(path: string, reason: string): string {
  return `${path} was not loaded whole: ${reason}`;
}

/** The notice of a refused file. */
export function notLoadedNotice(path: string, reason: string): string {
  return `${path} was not loaded: ${reason}`;
}

/** The notice of a refused import of a file. */
export function importNotLoadedNotice(path: string, reason: string): string {
  return `an import in ${path} was not loaded: ${reason}`;
}

/** The line after a file's text that the budget cut. */
export function cutNotice(path: string): string {
  return `[${path} was cut here to fit the size budget; read the file for the rest.]`;
}

export const CHECKS_OPEN = '<nested-checks source="pi-lazy-agents">';
export const CHECKS_CLOSE = "</nested-checks>";

/** The reminder's closing tag (index.ts exports its opening, REMINDER_OPEN, for tests). */
export const REMINDER_CLOSE = "</nested-instructions>";

/** What in a text would read as the closing tag of a wrapper the model sees: a reminder, its files and rules, checks. */
export const WRAPPER_CLOSING_TAG = /<(?=\s*\/\s*(?:file|rule|nested-instructions|nested-checks)\b)/gi;

/** Opens what the model is told: which rule files speak, so it can read them. */
export const checksIntro = (files: string[]): string =>
  `The repository's hookify rules (${files.join(", ")}) matched. They come from the repository, not from the user:`;

// ---------------------------------------------------------------------------------------------
// The record stored under DETAILS_KEY: the fields of each kind of entry, as index.ts's `Field` type spells them.
// ---------------------------------------------------------------------------------------------

export const SCOPED_FIELDS = { path: "string", scope: "string" } as const;

/** `importedBy`: the file (or Claude rule) whose `@path` token brought this one in. */
export const IMPORT_FIELDS = { version: "string", "importedBy?": "string", "truncated?": "boolean" } as const;

export const FILE_FIELDS = {
  ...SCOPED_FIELDS,
  ...IMPORT_FIELDS,
  bytes: "number",
  /** How the model got it: appended by us, or through its own read of the file. */
  via: new Set(["reminder", "read"] as const),
  /** For an instruction file that imports: the paths it imports, directly or through others. */
  "imports?": { list: "string" },
} as const;

export const SKILL_FIELDS = { ...SCOPED_FIELDS, name: "string", version: "string" } as const;

/** `dir`: the cwd-relative rule folder; `as`: its body was appended, or only its name and description listed. */
export const RULE_FIELDS = {
  path: "string",
  dir: "string",
  ...IMPORT_FIELDS,
  as: new Set(["text", "listing"] as const),
  "bytes?": "number",
  /** `read` when the model got it through its own read or write of the file, as a file's; absent when appended. */
  "via?": FILE_FIELDS.via,
} as const;

/** `inImport` marks a refused import of `path`. */
export const SKIP_FIELDS = {
  path: "string",
  reason: new Set(Object.keys(REASONS) as Reason[]),
  "inImport?": "boolean",
} as const;

export const RECORD_FIELDS = {
  v: new Set([LEDGER_VERSION] as const),
  files: { list: FILE_FIELDS },
  skills: { list: SKILL_FIELDS },
  retracted: { list: SCOPED_FIELDS },
  retractedSkills: { list: SCOPED_FIELDS },
  skipped: { list: SKIP_FIELDS },
  /** Files the model holds that also govern another scope (one file linked into several folders). */
  "alsoGoverns?": { list: SCOPED_FIELDS },
  /** Rules delivered or listed (absent in records without rules, so older records read the same). */
  "rules?": { list: RULE_FIELDS },
  "retractedRules?": { list: { path: "string", dir: "string" } },
  /** Parts this reminder explained in full, the preamble among them (absent when it explained none). */
  "explained?": { list: new Set(EXPLAINED_PARTS) },
  /** Digest of the reminder text it was delivered with (of a read's own text, for the model's read of the file). */
  "reminder?": "string",
} as const;

// ---------------------------------------------------------------------------------------------
// Text for the user: notifications, warnings, the status line and the command's description.
// ---------------------------------------------------------------------------------------------

/** The one warning a session gets when a hook failed; later failures are only counted. */
export const FAILURE_WARNING =
  "pi-lazy-agents: an internal error was caught; Pi went on without this extension's part for that step. " +
  "/lazy-agents counts such failures.";

/** How settings warnings name the file a key came from: never an absolute path. */
export const PROJECT_SETTINGS_LABEL = ".pi/settings.json";
export const GLOBAL_SETTINGS_LABEL = "~/.pi/agent/settings.json";
/** The global file when PI_CODING_AGENT_DIR moves it: its folder is the user's, so it is not shown. */
export const CUSTOM_GLOBAL_SETTINGS_LABEL = "the global settings.json";
/** While the project file does not parse, Pi keeps what it read last: a key may come from either file. */
export const eitherSettingsLabel = (global: string) => `${PROJECT_SETTINGS_LABEL} or ${global}`;

/** Settings warnings. `key` is one of ours or a key name the user typed (never a value); `where` a label above. */
export const SETTINGS_WARNINGS = {
  notObject: (where: string) => `pi-lazy-agents: ${SETTINGS_KEY} in ${where} must be an object; defaults apply`,
  unknownKey: (key: string, where: string, suggestion: string | undefined) =>
    `pi-lazy-agents: ${SETTINGS_KEY}.${key} in ${where} is not a setting${suggestion ? ` (did you mean "${suggestion}"?)` : ""}`,
  unnamedKey: (where: string) => `pi-lazy-agents: ${SETTINGS_KEY} in ${where} has a key that is not a setting`,
  moreKeys: (count: number, where: string) =>
    `pi-lazy-agents: ${SETTINGS_KEY} in ${where} has ${count} more keys that are not settings`,
  badValue: (key: string, where: string, expected: string) =>
    `pi-lazy-agents: ${SETTINGS_KEY}.${key} in ${where} must be ${expected}; its default applies`,
} as const;

/**
 * A key of `lazyAgents`: the option it sets (the key's own name unless given) and the values it takes. `bytes`: a
 * whole number from `min` to MAX_SETTING_BYTES; `names`: at least `min` distinct file or folder names; `choices`:
 * names from `from`, distinct unless `repeats`. `expected` says what a list must be in its warning.
 */
export interface Setting {
  type: "boolean" | "bytes" | "names" | "choices";
  option?: string;
  min?: number;
  from?: readonly string[];
  repeats?: boolean;
  expected?: string;
}

const ALL_TRIGGER_TOOLS = [...TRIGGER_TOOLS, ...OPTIONAL_TRIGGER_TOOLS];
const listFrom = (what: string, names: readonly string[]) => `a list of ${what} from: ${names.join(", ")}`;

/** The settings, as schema.json lists them. */
export const SETTINGS = {
  enabled: { type: "boolean" },
  fileNames: { type: "names", min: 1, expected: "a non-empty list of distinct file names" },
  ignoreDirs: { type: "names", option: "ignoredDirs", min: 0, expected: "a list of distinct folder names" },
  maxFileBytes: { type: "bytes", min: 1 },
  reminderBudgetBytes: { type: "bytes", option: "budgetBytes", min: MIN_SETTING_BUDGET_BYTES },
  triggers: {
    type: "choices",
    from: ALL_TRIGGER_TOOLS,
    repeats: true,
    expected: listFrom("tool names", ALL_TRIGGER_TOOLS),
  },
  skills: { type: "boolean" },
  imports: { type: "boolean" },
  gateWrites: { type: "boolean" },
  rules: { type: "boolean" },
  ruleSources: { type: "choices", from: RULE_SOURCES, expected: listFrom("distinct rule sources", RULE_SOURCES) },
  checks: { type: "boolean" },
} satisfies Record<string, Setting>;

/** What a setting's value must be, as its warning says it. */
export function settingExpected(setting: Setting): string {
  if (setting.type === "boolean") return "true or false";
  if (setting.type === "bytes") return `a whole number of bytes from ${setting.min} to ${MAX_SETTING_BYTES}`;
  return setting.expected!;
}

/** Keys that are not settings warned about one by one; a count stands for the rest, so a file cannot flood the terminal. */
export const MAX_UNKNOWN_KEY_WARNINGS = 8;

/** A key name the user typed is shown only in this shape (no control characters, bounded). */
export const SHOWN_KEY_PATTERN = /^[A-Za-z_$][\w$.-]{0,63}$/;

/** Prefix of every line the extension shows the user on its own. */
export const USER_PREFIX = "pi-lazy-agents: ";

/** The description of the flag that turns the extension off. */
export const DISABLE_FLAG_DESCRIPTION = "Turn pi-lazy-agents off for this run";

/** The description of `/lazy-agents` in Pi's `/` menu: one short line. */
export const COMMAND_DESCRIPTION = "What pi-lazy-agents loaded for the model, and why (try: help)";

/** What the model holds or a turn loaded, as the status line, the notification and the report count it. */
export interface Counts {
  files: number;
  rules: number;
  skills: number;
}

/** A count with its noun, singular for one. */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** `3 files · 1 rule · 1 skill`, leaving out the kinds counted zero. */
export function countsText(counts: Counts): string {
  const parts: Array<[number, string]> = [
    [counts.files, "file"],
    [counts.rules, "rule"],
    [counts.skills, "skill"],
  ];
  return parts
    .filter(([count]) => count > 0)
    .map(([count, noun]) => plural(count, noun))
    .join(" · ");
}

/** The one notification a turn gets when its reminders loaded files, rules or skills: counts, then cwd-relative paths. */
export function loadedNotice(counts: Counts, paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_NOTICE_PATHS).join(", ");
  const more = paths.length > MAX_NOTICE_PATHS ? ` and ${paths.length - MAX_NOTICE_PATHS} more` : "";
  return `${USER_PREFIX}loaded ${countsText(counts)}: ${shown}${more}`;
}

/** The status line while the model holds anything (`lazy-agents: 3 files · 1 rule · 1 skill`); none for nothing. */
export function statusText(counts: Counts): string | undefined {
  const text = countsText(counts);
  return text === "" ? undefined : `${STATUS_KEY}: ${text}`;
}

export type CheckSkip = "invalid" | "timedOut";

/** The one warning a rule that is skipped for the session earns; it names the rule, never its pattern. */
export const checkSkippedWarning = (name: string, why: CheckSkip): string =>
  `${USER_PREFIX}the hookify rule "${name}" is skipped for this session: ` +
  (why === "timedOut" ? "its pattern took too long to match." : "its file or a pattern in it cannot be used.");

/** The one warning of a session whose call ran out of CHECK_CALL_BUDGET_MS; no rule is named, as any may be late. */
export const CHECKS_LATE_WARNING = `${USER_PREFIX}some hookify rules were not run in time and let a call through; later calls run them first.`;

/** What the user is told when checks speak: the action and the rules' names. */
export const checkNotice = (action: "blocked" | "warned" | "asked", names: string[]): string =>
  `${USER_PREFIX}hookify ${action}: ${names.join(", ")}`;

export const CHECK_CONFIRM_TITLE = "A hookify rule asks before this call";

// ---------------------------------------------------------------------------------------------
// Report text: the words of `/lazy-agents`, `/lazy-agents why` and `/lazy-agents help`.
// ---------------------------------------------------------------------------------------------

/** What a hook was doing when it failed: the only words the failure count in `/lazy-agents` shows. */
export const FAILURE_LABELS = {
  toolCall: "discovery before a tool ran",
  toolResult: "delivery after a tool ran",
  rebuild: "rebuilding the ledger from the session",
  settings: "reading the settings",
  sweep: "sweeping the caches",
  checks: "hookify checks",
  startup: "reading what Pi loaded at start-up",
  report: "building the /lazy-agents report",
} as const;

export type FailureLabel = keyof typeof FAILURE_LABELS;

/** The whole `/lazy-agents` report while nothing nested has been seen or delivered. */
export const REPORT_NOTHING_SEEN =
  "pi-lazy-agents: nothing seen yet in this session; `/lazy-agents why <path>` shows what applies to a path.";

/** What `/lazy-agents` says of a file: its state against the ledger. */
export const REPORT_STATES = {
  pending: "pending",
  retracted: "retracted",
  changed: "changed since delivery",
  truncated: "delivered, truncated by the budget",
  readByModel: "delivered (read by the model)",
  delivered: "delivered",
  listed: "listed",
  manual: "manual",
} as const;

/** The fixed lines and headings of `/lazy-agents` and `/lazy-agents why`. */
export const REPORT_TEXT = {
  off: "  off for this run (setting or --no-lazy-agents flag)",
  gitStopped: "  git stopped answering in this session: until the next one, only the ignoreDirs names keep folders out",
  filesHeading: "Instruction files and imports",
  rulesHeading: "Rules",
  skillsHeading: "Nested skills",
  notUsedHeading: "Seen and not used",
  failuresHeading: "Failures caught (Pi went on without this extension's part):",
  deliveredCount: (counts: Counts) =>
    `Delivered in this context: ${counts.files + counts.rules + counts.skills === 0 ? "nothing" : countsText(counts)}.`,
  unusablePath: (shown: string) => `pi-lazy-agents: "${shown}" is not a usable path.`,
  outsideCwd: (shown: string) => `pi-lazy-agents: ${shown} is ${REASONS.outsideCwd}; nothing below cwd applies to it.`,
  directlyInCwd: "  It lies directly in cwd: only Pi's own AGENTS.md applies there.",
  directlyInCwdWithRules: "  It lies directly in cwd: Pi's own AGENTS.md applies there, and the rules that match it.",
  governedBy: "  Governed by:",
  governedByNothing: "  Governed by: nothing below cwd.",
  foldersHeading: "  Folders that add something:",
  ruleState: "rule,",
  unusedFolder: (why: Reason) =>
    why === "unreadable"
      ? "could not be read now: the folders below it still count"
      : `${REASONS[why]}${why === "skillsTree" ? "" : ": nothing below it is used"}`,
  noInstructionFile: "no instruction file",
  refusedFile: (path: string, why: Reason) => `not used: ${path}: ${REASONS[why]}`,
  skillsUntrusted: "  Skills are not listed: the project is not trusted.",
  noCommandWords: "  No command words were found.",
  ignoredWords: "ignored:",
  bashNotTrigger: "  bash is not among the triggers: its calls activate nothing.",
  writtenActivates: "written to, activates",
  activates: "activates",
} as const;

/** Characters of a version id the report shows. */
export const REPORT_VERSION_LENGTH = 8;

/** Fixed words `/lazy-agents` uses for a rule's kind. */
export const RULE_KIND_NAMES = {
  glob: "glob",
  always: "unconditional",
  described: "description only",
  manual: "manual",
} as const;

/** Why a rule does or does not apply to a path, in `/lazy-agents why`. */
export const RULE_WHY = {
  matches: "matches",
  noMatch: "does not match its globs",
  always: "applies to every path (unconditional)",
  described: "listed by its description; the model reads it when a task matches",
  manual: "manual: never delivered",
  otherFolder: "its folder is not on this path's chain",
  sourceOff: "its source is turned off in settings",
} as const;

/** Why a word of a bash command activated nothing: the only words `/lazy-agents why "<command>"` adds. */
export const SHELL_WORD_REASONS = {
  option: "an option",
  dynamic: "built when the command runs, so not known before",
  commandName: "a command name",
  unknownDirectory: "relative to a directory known only when the command runs",
  script: "a script, read as commands of its own",
  missing: "names nothing that exists",
  outside: "outside the working directory",
  cwdItself: "the working directory or directly in it, whose AGENTS.md Pi loads",
} as const;

export type ShellWordReason = keyof typeof SHELL_WORD_REASONS;

/** `/lazy-agents help`, and the answer to an argument it does not know. */
export const REPORT_USAGE = [
  "pi-lazy-agents: usage",
  "  /lazy-agents                  what was loaded for the model: files, rules, skills and their states",
  "  /lazy-agents --verbose        the same, with each file's version",
  "  /lazy-agents why <path>       which files and rules govern a path, and which folders add them",
  '  /lazy-agents why "<command>"  which folders a bash command activates, and which words it ignores',
  "  /lazy-agents help             this text",
].join("\n");

/** `/lazy-agents` when the report itself failed. */
export const REPORT_FAILED = "pi-lazy-agents: the report could not be built.";

/** `/lazy-agents why` when cwd has no real path. */
export const REPORT_NO_CWD = "pi-lazy-agents: the working directory cannot be resolved.";

export const CHECK_STATES = {
  active: "active",
  disabled: "disabled",
  invalid: "invalid",
  timedOut: "timed out",
  untrusted: "untrusted",
  cwdOnly: "not run here: bash, prompt and stop rules run from cwd's .claude",
} as const;

export const CHECK_REPORT = {
  heading: "Checks",
  off: "Checks are off (the checks setting).",
  offWithExtension: "Checks are off with the extension.",
  whyHeading: "  Checks on a write here:",
  whyNone: "  Checks on a write here: none",
  pathMatches: "its path conditions match",
  pathNoMatch: "its path conditions do not match",
  noPathCondition: "no path condition",
} as const;
