# Records what Python's re makes of seeded hookify-style patterns, for tests/hookify-regexes.json:
# each case is [pattern, [[text, whether re.search finds it, case-insensitive], ...]], or [pattern, null]
# when Python refuses the pattern (hookify then never fires the rule).
#   python3 scripts/regex-cases.py [seed] [count] > tests/hookify-regexes.json && ./dev bun fmt
# Left out, as docs/checks.md says they are not translated: possessive quantifiers, a
# reference to a group defined later; \B on an empty text, which Python 3.14 changed; and texts beyond the
# BMP, where JavaScript tries \B between the halves of a surrogate pair.
import json, random, re, sys

rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
count = int(sys.argv[2]) if len(sys.argv) > 2 else 300
ATOMS = ["a", "b", "A", "é", "É", "ß", "k", "s", ".", "\\w", "\\W", "\\d", "\\D", "\\s", "\\S", "\\b", "\\B",
         "[a-c]", "[^a]", "[\\w]", "[\\s]", "[é-ê]", "(?:", "(", ")", "|", "*", "+", "?", "{2}", "{1,2}", "{,2}", "^",
         "$", "\\A", "\\Z", "\\.", "\\$", "[$]", "(?P<n>a)", "(?P=n)", "\\n", "\\t", "\\x41", "\\u00e9", "\\012",
         "\\1", "-", "_", "1", " ", "[]a]", "[^]a]", "(?i)", "(?s)", "(?m)", "(?x)", "\\\\", "#", "\\-", "\\:", "\n"]
# Case folding, digits and whitespace beyond ASCII, and the line ends Python and JavaScript disagree on.
CHARS = ["a", "A", "b", "B", "é", "É", "ß", "SS", "ss", "k", "K", "\u212a", "\u017f", "s", "S", "1", "\u0663", " ",
         "\n", "_", "-", ".", "$", "\\", "i", "I", "\u0130", "\u0131", "\u00b5", "\u03bc", "\x1c", "\x1f", "\x85",
         "\ufeff", "\u2028", "\r", "\xa0", ":"]

cases = []
while len(cases) < count:
    pattern = "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 5)))
    if re.search(r"[*+?}]\+", pattern):
        continue
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        if "group" in str(error) and "(?P<n>" in pattern:
            continue
        cases.append([pattern, None])
        continue
    texts = ["".join(rng.choice(CHARS) for _ in range(rng.randint(1, 6))) for _ in range(6)]
    cases.append([pattern, [[text, bool(compiled.search(text))] for text in texts]])
json.dump(cases, sys.stdout, ensure_ascii=True)
sys.stdout.write("\n")
