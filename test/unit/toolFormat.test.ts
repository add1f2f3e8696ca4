// The raw format gate against a corpus of real-looking malformed turns, and against the
// lenient parser it exists to beat (docs/design.md, "The recipe, rule by rule" items 1-2).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { lenientParse } from '../../core/lenientParser.js';
import {
  FORMAT_REASONS,
  type FormatReason,
  checkRawOutput,
  decodeUtf8Strict,
  parseStrictJson,
} from '../../core/toolFormat.js';
import {
  type ToolCall,
  type ToolSpec,
  TOOLS,
  canonicalCallKey,
  renderToolCall,
  validateAgainstRegistry,
} from '../../core/tools.js';
import { rng } from '../helpers/rng.js';

const reasons = FORMAT_REASONS.map((r) => r.reason) as [FormatReason, ...FormatReason[]];

const Entry = z.strictObject({
  id: z.string(),
  note: z.string(),
  text: z.string(),
  finishReason: z.string(),
  tokenIds: z.array(z.number().int()).optional(),
  bytes: z.array(z.number().int()).optional(),
  specialTokenIds: z.array(z.number().int()).optional(),
  eosTokenId: z.number().int().optional(),
  expect: z.union([z.literal('valid'), z.enum(reasons)]),
});
type Entry = z.infer<typeof Entry>;

const corpusUrl = new URL('../fixtures/malformed-outputs.json', import.meta.url);
const corpus: Entry[] = z.array(Entry).parse(JSON.parse(readFileSync(corpusUrl, 'utf8')));

function check(e: Entry) {
  const { id: _id, note: _note, expect: _expect, ...raw } = e;
  return checkRawOutput(raw);
}

describe('corpus', () => {
  it('is big enough and covers the required classes', () => {
    const malformed = corpus.filter((e) => e.expect !== 'valid');
    expect(corpus.length).toBeGreaterThanOrEqual(30);
    expect(malformed.length).toBeGreaterThanOrEqual(24);
    expect(corpus.length - malformed.length).toBeGreaterThanOrEqual(6);
    expect(new Set(corpus.map((e) => e.id)).size).toBe(corpus.length);
    // Every reason of the list is exercised by at least one entry.
    const seen = new Set(malformed.map((e) => e.expect));
    expect(reasons.filter((r) => !seen.has(r))).toEqual([]);
  });

  it.each(corpus.map((e) => [e.id, e] as const))('%s', (_id, e) => {
    const v = check(e);
    if (e.expect === 'valid') {
      expect(v, JSON.stringify(v)).toMatchObject({ ok: true });
    } else {
      expect(v.ok ? 'valid' : `${v.reason}: ${v.detail}`).toMatch(new RegExp(`^${e.expect}: `));
    }
  });

  it('the reasoning of a valid turn is the text before <tool_call>', () => {
    const e = corpus.find((x) => x.id === 'valid_bash_with_reasoning');
    const v = e && check(e);
    expect(v?.ok && v.reasoning).toBe('The failing test is in tests/test_parser.py; let me run it first.\n\n');
    expect(v?.ok && v.call).toEqual({ name: 'bash', arguments: { command: 'python -m pytest -x tests/test_parser.py' } });
  });
});

describe('renderToolCall', () => {
  const calls: ToolCall[] = [
    { name: 'bash', arguments: { command: 'ls' } },
    { name: 'submit', arguments: {} },
    { name: 'bash', arguments: { command: 'printf "a\\tb\\n" | grep -v \'x\' && echo ünï ✓ 🚀' } },
    { name: 'bash', arguments: { command: "grep -rn '</tool_call>' . ; echo '<TOOL_CALL>' '<|endoftext|>'" } },
    { name: 'bash', arguments: { command: 'cat <<EOF > a.txt\nline\u0000\u001f\u2028\nEOF' } },
  ];

  it('has the canonical form', () => {
    expect(renderToolCall({ name: 'bash', arguments: { command: 'ls' } })).toBe(
      '<tool_call>{"name":"bash","arguments":{"command":"ls"}}</tool_call>',
    );
    expect(renderToolCall({ name: 'submit', arguments: {} })).toBe('<tool_call>{"name":"submit","arguments":{}}</tool_call>');
  });

  it.each(calls.map((c) => [c.name, c] as const))('round-trips %s through checkRawOutput', (_n, c) => {
    const v = checkRawOutput({ text: `Reasoning first.\n${renderToolCall(c)}`, finishReason: 'stop' });
    expect(v).toEqual({ ok: true, call: c, reasoning: 'Reasoning first.\n' });
  });

  it('refuses to render an invalid call', () => {
    expect(() => renderToolCall({ name: 'bash', arguments: { command: '' } })).toThrow(/empty_argument/);
    expect(() => renderToolCall({ name: 'bash', arguments: { command: 'x', extra: 1 } } as unknown as ToolCall)).toThrow(
      /extra_argument/,
    );
  });

  it('random commands round-trip', () => {
    const r = rng(7);
    const pool = ['a', ' ', '"', "'", '\\', '\n', '\t', '<', '>', '/', '|', '{', '}', '`', 'é', '世', '🚀', '\u0000', 'tool_call', '<tool_call>', '</tool_call>', '<|im_end|>'];
    for (let n = 0; n < 500; n++) {
      let command = 'x';
      const len = 1 + Math.floor(r() * 30);
      for (let k = 0; k < len; k++) command += pool[Math.floor(r() * pool.length)];
      const call: ToolCall = { name: 'bash', arguments: { command } };
      const v = checkRawOutput({ text: renderToolCall(call), finishReason: 'stop' });
      expect(v, JSON.stringify(command)).toEqual({ ok: true, call, reasoning: '' });
    }
  });
});

describe('canonicalCallKey', () => {
  it('ignores key order and JSON whitespace, not argument values', () => {
    const a = checkRawOutput({ text: '<tool_call>{"name":"bash","arguments":{"command":"ls"}}</tool_call>', finishReason: 'stop' });
    const b = checkRawOutput({
      text: '<tool_call>\n{ "arguments" : {\n "command":"ls" },\n "name" : "bash" }\n</tool_call>',
      finishReason: 'stop',
    });
    if (!a.ok || !b.ok) throw new Error('fixture calls should be valid');
    expect(canonicalCallKey(a.call)).toBe(canonicalCallKey(b.call));
    expect(canonicalCallKey(a.call)).not.toBe(canonicalCallKey({ name: 'bash', arguments: { command: 'ls ' } }));
    expect(canonicalCallKey({ name: 'submit', arguments: {} })).not.toBe(canonicalCallKey(a.call));
  });
});

describe('properties', () => {
  const valid = renderToolCall({ name: 'bash', arguments: { command: 'ls -la' } });

  it('random printable reasoning + a valid call is accepted', () => {
    const r = rng(42);
    // Printable ASCII except backtick (a ``` line would open a code fence), plus newlines,
    // tabs and some non-ASCII letters and emoji.
    const alphabet = [...Array.from({ length: 95 }, (_, k) => String.fromCharCode(32 + k)).filter((c) => c !== '`'), '\n', '\t', 'é', 'ß', 'Ж', '中', '😀'];
    for (let n = 0; n < 1000; n++) {
      let reasoning = '';
      const len = Math.floor(r() * 200);
      for (let k = 0; k < len; k++) reasoning += alphabet[Math.floor(r() * alphabet.length)];
      const v = checkRawOutput({ text: reasoning + valid, finishReason: 'stop' });
      expect(v, JSON.stringify(reasoning)).toEqual({
        ok: true,
        call: { name: 'bash', arguments: { command: 'ls -la' } },
        reasoning,
      });
    }
  });

  it('appending any single character after </tool_call> is trailing_text', () => {
    const failures: string[] = [];
    const tryChar = (c: string): void => {
      const v = checkRawOutput({ text: valid + c, finishReason: 'stop' });
      if (v.ok || v.reason !== 'trailing_text') failures.push(`U+${c.codePointAt(0)?.toString(16)}: ${JSON.stringify(v)}`);
    };
    // Every BMP scalar value except the surrogates (not characters) and U+FFFD, which
    // without raw bytes is rejected earlier as invalid_utf8 (a lossy decode).
    for (let cp = 0; cp <= 0xffff; cp++) {
      if ((cp >= 0xd800 && cp <= 0xdfff) || cp === 0xfffd) continue;
      tryChar(String.fromCharCode(cp));
    }
    for (const cp of [0x10000, 0x1f600, 0x1f680, 0xe0001, 0x10ffff]) tryChar(String.fromCodePoint(cp));
    expect(failures.slice(0, 5)).toEqual([]);
  });

  it('appending a lone surrogate or U+FFFD is an encoding failure', () => {
    for (const c of ['\ud800', '\udfff', '\ufffd']) {
      expect(checkRawOutput({ text: valid + c, finishReason: 'stop' })).toMatchObject({ ok: false, reason: 'invalid_utf8' });
    }
  });
});

describe('check order', () => {
  it('truncation beats everything, encoding beats tags, tags beat JSON, JSON beats schema', () => {
    const broken = "<TOOL_CALL>{'name': 'python'}";
    expect(checkRawOutput({ text: broken, finishReason: 'length' })).toMatchObject({ reason: 'truncated' });
    expect(checkRawOutput({ text: broken + '\ud800', finishReason: 'stop' })).toMatchObject({ reason: 'invalid_utf8' });
    expect(checkRawOutput({ text: broken + '<|im_end|>', finishReason: 'stop' })).toMatchObject({ reason: 'special_token_in_text' });
    expect(checkRawOutput({ text: broken, finishReason: 'stop' })).toMatchObject({ reason: 'wrong_tag_case' });
    expect(checkRawOutput({ text: "<tool_call>{'name': 'python'}</tool_call>", finishReason: 'stop' })).toMatchObject({
      reason: 'invalid_json',
    });
    expect(checkRawOutput({ text: '<tool_call>{"name": "python"}</tool_call>', finishReason: 'stop' })).toMatchObject({
      reason: 'missing_key',
    });
  });

  it('special token texts can be replaced or disabled', () => {
    const text = `${renderToolCall({ name: 'bash', arguments: { command: 'ls' } })}`;
    expect(checkRawOutput({ text: `</s>${text}`, finishReason: 'stop', specialTokenTexts: ['</s>'] })).toMatchObject({
      reason: 'special_token_in_text',
    });
    expect(checkRawOutput({ text: `<|im_end|>${text}`, finishReason: 'stop', specialTokenTexts: [] })).toMatchObject({
      ok: true,
    });
  });
});

describe('code fences', () => {
  const call = renderToolCall({ name: 'bash', arguments: { command: 'ls' } });
  it.each([
    ['an open fence before the call', 'Run:\n```bash\n', 'markdown_fence'],
    ['an indented open fence', 'Run:\n   ```\n', 'markdown_fence'],
    ['a closed fence before the call', '```\ncode\n```\n', 'valid'],
    ['inline triple backticks at line start', '```ls``` lists files.\n', 'valid'],
    ['a fence indented by 4 (code, not a fence)', 'x\n    ```\n', 'valid'],
  ])('%s', (_what, reasoning, want) => {
    const v = checkRawOutput({ text: reasoning + call, finishReason: 'stop' });
    expect(v.ok ? 'valid' : v.reason).toBe(want);
  });
});

describe('details', () => {
  it('name the first special token text in the output', () => {
    const v = checkRawOutput({ text: 'a<|im_end|>b<|im_start|>', finishReason: 'stop' });
    expect(v).toMatchObject({ reason: 'special_token_in_text', detail: expect.stringContaining('"<|im_end|>" at offset 1') });
  });
  it('give the offset of a JSON error in the output text', () => {
    const v = checkRawOutput({ text: 'ab<tool_call>{"name":"bash",}</tool_call>', finishReason: 'stop' });
    expect(v).toMatchObject({ reason: 'invalid_json', detail: expect.stringContaining('at offset 28') });
  });
  it('every reason has a one-line description', () => {
    for (const r of FORMAT_REASONS) expect(r.description).toMatch(/^[^\n]{10,}$/);
  });
});

describe('strict JSON parser', () => {
  const bad = [
    "{'a': 1}", '{"a": 1,}', '[1,]', '{"a": 1 // c\n}', '{a: 1}', '{"a": NaN}', '{"a": Infinity}', '{"a": 01}',
    '{"a": +1}', '{"a": .5}', '{"a": 1.}', '{"a": 1e}', '{"a": "\t"}', '{"a": "\\x41"}', '{"a": "\\u12"}',
    '{"a": "\\ud800"}', '{"a": "\\udc00\\ud800"}', '{"a": 1, "a": 2}', '\uFEFF{}', '{}\u00a0', '{"a": 1e400}',
    '{"a": True}', '{} {}', '', '"unterminated', '[' .repeat(65) + ']'.repeat(65), '{"__proto__": 1, "__proto__": 2}',
  ];
  it.each(bad)('rejects %j', (src) => {
    expect(parseStrictJson(src).ok).toBe(false);
  });

  const good = ['{}', '[]', ' {"a" : [1, -0.5e-3, true, false, null, "x\\u00e9\\ud83d\\ude80\\/"]}\n', '"s"', '0', '{"__proto__": {"x": 1}}', '[' .repeat(64) + ']'.repeat(64)];
  it.each(good)('agrees with JSON.parse on %j', (src) => {
    const v = parseStrictJson(src);
    expect(v).toEqual({ ok: true, value: JSON.parse(src) });
  });

  it('keeps "__proto__" as an own key', () => {
    const v = parseStrictJson('{"__proto__": {"polluted": true}}');
    expect(v.ok && Object.keys(v.value as object)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });
});

describe('strict UTF-8 decoder', () => {
  it('agrees with a fatal TextDecoder on random and edge-case byte strings', () => {
    const td = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    const reference = (b: number[]): string | null => {
      try {
        return td.decode(new Uint8Array(b));
      } catch {
        return null;
      }
    };
    const r = rng(3);
    const interesting = [0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xed, 0xee, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0xa0, 0x9f, 0x90, 0x8f, 0x41];
    const cases: number[][] = [[], [0xef, 0xbb, 0xbf, 0x41], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe0, 0x80, 0xaf]];
    for (let n = 0; n < 20000; n++) {
      const len = Math.floor(r() * 6);
      cases.push(Array.from({ length: len }, () => (r() < 0.7 ? interesting[Math.floor(r() * interesting.length)] : Math.floor(r() * 256)) as number));
    }
    for (const b of cases) {
      const mine = decodeUtf8Strict(b);
      expect(mine.ok ? mine.text : null, JSON.stringify(b)).toBe(reference(b));
    }
    expect(decodeUtf8Strict([0x41, 256]).ok).toBe(false);
  });
});

describe('registry extension', () => {
  const registry: Record<string, ToolSpec> = {
    view: {
      description: 'test tool',
      args: {
        path: { type: 'string', description: 'p', nonEmpty: true },
        line: { type: 'integer', description: 'l', optional: true },
        raw: { type: 'boolean', description: 'r', optional: true },
      },
    },
  };
  it('checks integer, boolean and optional arguments', () => {
    const ok = (args: object) => validateAgainstRegistry({ name: 'view', arguments: args as never }, registry);
    expect(ok({ path: 'a' })).toMatchObject({ ok: true });
    expect(ok({ path: 'a', line: 3, raw: true })).toMatchObject({ ok: true });
    expect(ok({ path: 'a', line: 3.5 })).toMatchObject({ reason: 'wrong_argument_type' });
    expect(ok({ path: 'a', raw: 'yes' })).toMatchObject({ reason: 'wrong_argument_type' });
    expect(ok({ line: 3 })).toMatchObject({ reason: 'missing_argument' });
  });
  it('the real registry has bash and submit', () => {
    expect(Object.keys(TOOLS).sort()).toEqual(['bash', 'submit']);
  });
});

describe('lenient parser vs the raw gate', () => {
  it('would have repaired and run many malformed turns that the gate rejects', () => {
    const rows = corpus
      .filter((e) => e.expect !== 'valid')
      .map((e) => {
        const v = check(e);
        const l = lenientParse(e.text);
        return {
          id: e.id,
          expected: e.expect,
          gate: v.ok ? 'valid' : v.reason,
          lenient: l.call === null ? 'rejected' : `ran ${l.call.name} ${JSON.stringify(l.call.arguments)}`,
          repairs: l.repairs,
        };
      });
    // A repaired call must still fail: the gate rejects every one of them.
    expect(rows.filter((x) => x.gate === 'valid')).toEqual([]);
    const ran = rows.filter((x) => x.lenient !== 'rejected');
    const summary = {
      malformed: rows.length,
      lenientRan: ran.length,
      // Ran after explicit repairs vs ran without noticing anything (truncation, special
      // tokens, bad bytes, empty arguments: a text-only parser cannot see them).
      lenientRanAfterRepairs: ran.filter((x) => x.repairs.length > 0).length,
      lenientRanUnnoticed: ran.filter((x) => x.repairs.length === 0).length,
      lenientRejected: rows.length - ran.length,
      byReason: Object.fromEntries(
        [...new Set(rows.map((x) => x.expected))].map((reason) => [
          reason,
          { total: rows.filter((x) => x.expected === reason).length, lenientRan: ran.filter((x) => x.expected === reason).length },
        ]),
      ),
    };
    const outDir = new URL('../out/', import.meta.url);
    mkdirSync(outDir, { recursive: true });
    writeFileSync(new URL('lenient-vs-raw.json', outDir), JSON.stringify({ summary, rows }, null, 2) + '\n');
    console.log(
      `lenient parser would have run ${ran.length}/${rows.length} malformed turns that the raw gate rejects (test/out/lenient-vs-raw.json)`,
    );
    expect(ran.length).toBeGreaterThanOrEqual(12);
  });

  it('parses every valid corpus turn to the same call as the gate', () => {
    for (const e of corpus.filter((x) => x.expect === 'valid')) {
      const v = check(e);
      const l = lenientParse(e.text);
      expect(v.ok && l.call, e.id).toEqual(v.ok ? v.call : null);
    }
  });

  it('repairs what it claims to', () => {
    const l = lenientParse("<TOOL_CALL>```json\n{name: 'bash', /* c */ 'arguments': '{\"command\": \"ls\", \"x\": 1,}',}\n```");
    expect(l.call).toEqual({ name: 'bash', arguments: { command: 'ls' } });
    expect(l.repairs).toEqual(
      expect.arrayContaining([
        'case_insensitive_tag',
        'accepted_unclosed_tag',
        'stripped_markdown_fence',
        'unquoted_keys',
        'single_quotes',
        'removed_comments',
        'trailing_comma',
        'decoded_string_arguments',
        'dropped_extra_arguments',
      ]),
    );
  });
});
