# Records what hookify's own frontmatter parser makes of seeded, hostile rule-file texts, for
# tests/hookify-parses.json. hookify's code is not part of this repository: pass the path of its
# plugins/hookify/core/config_loader.py (Claude Code's repository) to run it.
#   python3 scripts/hookify-cases.py <config_loader.py> [seed] [count] > tests/hookify-parses.json && bun fmt
# Each case is [text, frontmatter, message], with `text` already read as hookify reads a file
# (universal newlines), since extract_frontmatter is given what Python's text mode returned.
import importlib.util, json, random, sys

spec = importlib.util.spec_from_file_location("config_loader", sys.argv[1])
loader = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loader)
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
count = int(sys.argv[3]) if len(sys.argv) > 3 else 400

# Keys and values hookify knows, YAML-looking punctuation, and whitespace that Python and JavaScript disagree on.
TOKENS = ["name", "event", "pattern", "enabled", "action", "conditions", "field", "operator", ":", ": ", " ",
          "  ", "    ", "\t", "-", "- ", "\n", "\n", '"', "'", ",", "#", "true", "True", "false", "x", "rm -rf",
          "\\.env$", "---", "\x1c", "\x1f", "\x85", "\xa0", "\ufeff", "\u2028", "a:b", "k: v, o: w", "é", "\x0b"]
HEADS = ["---\n"] * 6 + ["---", "", " ---\n"]
TAILS = ["\n---\n"] * 4 + ["---", "\n---", "\n--- body\n  m ", ""]

cases = []
while len(cases) < count:
    lines = ["".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 8))]
    text = rng.choice(HEADS) + "\n".join(lines) + rng.choice(TAILS) + rng.choice(["", "msg", "  msg \n"])
    frontmatter, message = loader.extract_frontmatter(text)
    cases.append([text, frontmatter, message])
json.dump(cases, sys.stdout, ensure_ascii=True, indent=0)
sys.stdout.write("\n")
