// The pure path helpers: containment as a table, and tool paths resolved the way Pi's tools do.
import { test } from "node:test";
import assert from "node:assert/strict";
import { homedir } from "node:os";
import { cutUtf8, decodeInstructionText, isPathInside, resolveToolPath } from "../index.ts";

test("containment: path.relative with an exact .. test", () => {
  const table: Array<[string, string, boolean]> = [
    ["/work/repo", "/work/repo/src", true],
    ["/work/repo", "/work/repo/src/deep/x.ts", true],
    ["/work/repo", "/work/repo/..cache", true],
    ["/work/repo", "/work/repo/..cache/x", true],
    ["/work/repo", "/work/repo/.../x", true],
    ["/work/repo", "/work/repo", false],
    ["/work/repo", "/work/repo/", false],
    ["/work/repo", "/work/repo-evil", false],
    ["/work/repo", "/work/repo-evil/src", false],
    ["/work/repo", "/work/rep", false],
    ["/work/repo", "/work", false],
    ["/work/repo", "/work/repo/../repo-evil", false],
    ["/work/repo", "/work/repo/src/../../etc", false],
    ["/work/repo", "/etc/passwd", false],
    ["/", "/etc", true],
  ];
  for (const [parent, child, inside] of table)
    assert.equal(isPathInside(parent, child), inside, `${parent} ⊃ ${child}`);
});

test("tool paths resolve like Pi's tools: relative, absolute, @, ~, file:// and unicode spaces", () => {
  const cwd = "/work/repo";
  const table: Array<[unknown, string | undefined]> = [
    ["src/a.ts", "/work/repo/src/a.ts"],
    ["./src//a.ts", "/work/repo/src/a.ts"],
    ["/work/repo/src/a.ts", "/work/repo/src/a.ts"],
    ["@src/a.ts", "/work/repo/src/a.ts"],
    ["~", homedir()],
    ["~/x", `${homedir()}/x`],
    ["file:///work/repo/a.ts", "/work/repo/a.ts"],
    ["src/a\u00A0b.ts", "/work/repo/src/a b.ts"],
    ["../elsewhere", "/work/elsewhere"],
    ["", undefined],
    ["   ", undefined],
    ["a\0b", undefined],
    [42, undefined],
    [undefined, undefined],
    ["x".repeat(4097), undefined],
  ];
  for (const [raw, expected] of table) assert.equal(resolveToolPath(raw, cwd), expected, String(raw).slice(0, 30));
});

test("UTF-8 cuts never split a character", () => {
  assert.equal(cutUtf8("aé", 2), "a");
  assert.equal(cutUtf8("aé", 3), "aé");
  assert.equal(cutUtf8("😀x", 3), "");
  assert.equal(cutUtf8("😀x", 4), "😀");
  assert.equal(cutUtf8("abc", 0), "");
});

test("decoding: strict UTF-8, one BOM stripped, CRLF and lone CR become LF", () => {
  const bytes = (text: string) => new TextEncoder().encode(text);
  assert.equal(decodeInstructionText(bytes("\uFEFFa\r\nb\rc")), "a\nb\nc");
  assert.equal(decodeInstructionText(bytes("\uFEFF\uFEFFx")), "\uFEFFx");
  assert.equal(decodeInstructionText(new Uint8Array([0x61, 0xc3])), undefined);
  assert.equal(decodeInstructionText(new Uint8Array([0xed, 0xa0, 0x80])), undefined, "no lone surrogates");
});
