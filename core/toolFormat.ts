// The raw format gate (docs/design.md, "The recipe, rule by rule" items 1-2): it judges the text/tokens
// the model actually produced, before any parser. A model turn is
//
//   <optional reasoning><tool_call>{"name": ..., "arguments": {...}}</tool_call><EOS>
//
// with strict RFC 8259 JSON, exact lower-case tags, nothing after </tool_call>, and the
// reasoning free of tool_call tags. Anything else is rejected with one named reason; there
// is no repair. Pure module (no Node APIs, no I/O): workflow code imports it.
//
// Check order (first failure wins; FORMAT_REASONS lists the reasons in this order):
//   1. finish      the turn ended by EOS: finishReason "stop" and, when token ids and the
//                  EOS id are given, EOS is the last token.
//   2. encoding    the text is well-formed Unicode; raw bytes, when given, are strict
//                  UTF-8 and decode to exactly the text.
//   3. special     no special token id among the tokens (EOS only as the last one) and no
//                  special token's text inside the text.
//   4. tags        tag case, tag shape, nesting, count, closure, presence, code fences,
//                  then nothing after </tool_call>.
//   5. json        strict RFC 8259 parse of what lies between the tags (no duplicate keys).
//   6. schema      {"name", "arguments"} against the tool registry (core/tools.ts).
// Earlier stages are the ones that make later ones meaningless: a truncated turn has no
// well-defined tail, bytes that are not UTF-8 have no text to scan, and a special token
// would change the token sequence a re-tokenization of the text produces.

import {
  type JsonValue,
  type ToolCall,
  type ToolSchemaReason,
  validateToolCall,
} from './tools.js';

export const FORMAT_REASONS = [
  { reason: 'truncated', stage: 'finish', description: 'generation hit the token limit or ended without EOS' },
  { reason: 'aborted', stage: 'finish', description: 'generation ended for a reason other than EOS or the token limit (e.g. engine abort)' },
  { reason: 'invalid_utf8', stage: 'encoding', description: 'raw bytes are not strict UTF-8, or the text holds a lone surrogate or a U+FFFD from lossy decoding' },
  { reason: 'bytes_text_mismatch', stage: 'encoding', description: 'the raw bytes decode to something other than the reported text' },
  { reason: 'special_token_in_text', stage: 'special', description: 'a special token (id or its text, or EOS before the end) appears inside the output' },
  { reason: 'wrong_tag_case', stage: 'tags', description: 'a tool_call tag is not written in exact lower case' },
  { reason: 'malformed_tag', stage: 'tags', description: 'a tag starts with <tool_call or </tool_call but is not exactly <tool_call> or </tool_call>' },
  { reason: 'nested_tags', stage: 'tags', description: 'a <tool_call> opens inside another <tool_call>' },
  { reason: 'unmatched_close_tag', stage: 'tags', description: 'a </tool_call> has no <tool_call> to close' },
  { reason: 'multiple_tool_calls', stage: 'tags', description: 'more than one <tool_call> in one turn' },
  { reason: 'unclosed_tag', stage: 'tags', description: '<tool_call> is never closed by </tool_call>' },
  { reason: 'missing_tool_call', stage: 'tags', description: 'the turn has no <tool_call> at all' },
  { reason: 'markdown_fence', stage: 'tags', description: 'the call or its JSON is wrapped in a ``` code fence' },
  { reason: 'trailing_text', stage: 'tags', description: 'something (even a newline) follows </tool_call>' },
  { reason: 'invalid_json', stage: 'json', description: 'the call body is not strict RFC 8259 JSON (quotes, commas, comments, keys, literals, duplicate keys...)' },
  { reason: 'not_an_object', stage: 'schema', description: 'the JSON is not an object' },
  { reason: 'missing_key', stage: 'schema', description: 'the object lacks "name" or "arguments"' },
  { reason: 'extra_key', stage: 'schema', description: 'the object has a top-level key other than "name" and "arguments"' },
  { reason: 'unknown_tool', stage: 'schema', description: '"name" is not a string naming a registered tool' },
  { reason: 'arguments_not_object', stage: 'schema', description: '"arguments" is not a JSON object (e.g. a JSON-encoded string)' },
  { reason: 'missing_argument', stage: 'schema', description: 'a required argument of the tool is absent' },
  { reason: 'extra_argument', stage: 'schema', description: 'an argument the tool does not declare is present' },
  { reason: 'wrong_argument_type', stage: 'schema', description: 'an argument has the wrong JSON type' },
  { reason: 'empty_argument', stage: 'schema', description: 'a non-empty string argument is empty or only whitespace' },
  { reason: 'argument_too_long', stage: 'schema', description: 'a string argument exceeds its length limit' },
] as const;

export type FormatReason = (typeof FORMAT_REASONS)[number]['reason'];
export type FormatStage = (typeof FORMAT_REASONS)[number]['stage'];

// Every schema reason of core/tools.ts must be a FormatReason.
const schemaReasonsAreFormatReasons: readonly FormatReason[] = [] as readonly ToolSchemaReason[];
void schemaReasonsAreFormatReasons;

export const FORMAT_REASON_DESCRIPTIONS: Readonly<Record<FormatReason, string>> = Object.fromEntries(
  FORMAT_REASONS.map((r) => [r.reason, r.description]),
) as Record<FormatReason, string>;

export interface RawOutput {
  /** The generated text, without the EOS token. */
  text: string;
  /** Generated token ids; with eosTokenId, the last one must be EOS. */
  tokenIds?: readonly number[];
  /** Raw generated bytes if the engine is byte-level (EOS excluded): ground truth for text. */
  bytes?: readonly number[];
  finishReason: 'stop' | 'length' | 'abort' | (string & Record<never, never>);
  /** Ids that must never appear among the tokens (BOS, PAD, chat markers...). EOS may be listed: it is allowed as the last token only. */
  specialTokenIds?: readonly number[];
  eosTokenId?: number;
  /** Texts of special tokens that must not appear in text; DEFAULT_SPECIAL_TOKEN_TEXTS when absent, [] disables. */
  specialTokenTexts?: readonly string[];
}

export type FormatVerdict =
  | { ok: true; call: ToolCall; reasoning: string }
  | { ok: false; reason: FormatReason; detail: string };

/**
 * Special token texts of common chat templates. Written as text they would re-tokenize
 * into a special token (or be a model imitating one): either way the turn is not what the
 * trainer will score. Only the unambiguous `<|...|>` forms; `<s>`/`</s>` are too common
 * in code to ban by default — pass specialTokenTexts for such tokenizers.
 */
export const DEFAULT_SPECIAL_TOKEN_TEXTS: readonly string[] = [
  '<|endoftext|>',
  '<|im_start|>',
  '<|im_end|>',
  '<|im_sep|>',
  '<|begin_of_text|>',
  '<|end_of_text|>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '<|eot_id|>',
  '<|eom_id|>',
  '<|pad|>',
  '<|fim_prefix|>',
  '<|fim_middle|>',
  '<|fim_suffix|>',
  '<|fim_pad|>',
  '<|repo_name|>',
  '<|file_sep|>',
  '<|vision_start|>',
  '<|vision_end|>',
  '<|endofprompt|>',
];

export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

// ---------------------------------------------------------------------------------------
// Small helpers

/** A short, quoted, escaped excerpt of s around index i, for details. */
function excerpt(s: string, i: number, radius = 20): string {
  const start = Math.max(0, i - radius);
  const end = Math.min(s.length, i + radius);
  return `${start > 0 ? '…' : ''}${JSON.stringify(s.slice(start, end))}${end < s.length ? '…' : ''}`;
}

function quoteShort(s: string, max = 60): string {
  return s.length <= max ? JSON.stringify(s) : `${JSON.stringify(s.slice(0, max))}… (${s.length} chars)`;
}

function fail(reason: FormatReason, detail: string): FormatVerdict {
  return { ok: false, reason, detail };
}

/** Index of the first lone surrogate in s, or -1. */
export function findLoneSurrogate(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
      return i;
    }
    if (c >= 0xdc00 && c <= 0xdfff) return i;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------
// Strict UTF-8 (hand-written so the module needs no TextDecoder typing or runtime)

export type Utf8Result = { ok: true; text: string } | { ok: false; offset: number; error: string };

/**
 * Decode bytes as strict UTF-8 (Unicode Table 3-7 well-formed sequences only): no
 * overlong forms, no surrogates (ED A0..BF), nothing above U+10FFFF, no truncated
 * sequences, no stray continuation bytes. A leading BOM is kept as U+FEFF, not stripped.
 */
export function decodeUtf8Strict(bytes: ArrayLike<number>): Utf8Result {
  const n = bytes.length;
  const byteAt = (i: number): number => (i < n ? (bytes[i] as number) : -1);
  for (let i = 0; i < n; i++) {
    const b = bytes[i];
    if (typeof b !== 'number' || !Number.isInteger(b) || b < 0 || b > 255) {
      return { ok: false, offset: i, error: `element ${i} is ${String(b)}, not a byte` };
    }
  }
  const parts: string[] = [];
  let cps: number[] = [];
  const flush = (): void => {
    if (cps.length > 0) parts.push(String.fromCodePoint(...cps));
    cps = [];
  };
  let i = 0;
  while (i < n) {
    const b0 = byteAt(i);
    let need: number;
    let cp: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b0 < 0x80) {
      cps.push(b0);
      i++;
      if (cps.length >= 4096) flush();
      continue;
    } else if (b0 >= 0xc2 && b0 <= 0xdf) {
      need = 1;
      cp = b0 & 0x1f;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      need = 2;
      cp = b0 & 0x0f;
      if (b0 === 0xe0) lo = 0xa0; // overlong
      if (b0 === 0xed) hi = 0x9f; // surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      need = 3;
      cp = b0 & 0x07;
      if (b0 === 0xf0) lo = 0x90; // overlong
      if (b0 === 0xf4) hi = 0x8f; // above U+10FFFF
    } else {
      const what = b0 >= 0x80 && b0 <= 0xbf ? 'a continuation byte with no lead byte' : 'never valid in UTF-8';
      return { ok: false, offset: i, error: `byte 0x${b0.toString(16)} at offset ${i} is ${what}` };
    }
    for (let k = 1; k <= need; k++) {
      const b = byteAt(i + k);
      const min = k === 1 ? lo : 0x80;
      const max = k === 1 ? hi : 0xbf;
      if (b < min || b > max) {
        const what = b < 0 ? 'the bytes end' : `byte 0x${b.toString(16)} at offset ${i + k}`;
        return {
          ok: false,
          offset: i,
          error: `ill-formed sequence starting with 0x${b0.toString(16)} at offset ${i}: ${what}`,
        };
      }
      cp = (cp << 6) | (b & 0x3f);
    }
    cps.push(cp);
    i += need + 1;
    if (cps.length >= 4096) flush();
  }
  flush();
  return { ok: true, text: parts.join('') };
}

// ---------------------------------------------------------------------------------------
// Strict JSON (RFC 8259), hand-written: JSON.parse accepts duplicate keys and gives
// poor positions. Rejects: single quotes, trailing commas, comments, unquoted keys,
// NaN/Infinity/True/None, leading zeros, "+1", ".5", raw control characters in strings,
// bad escapes, lone surrogates (raw or escaped), numbers that overflow to Infinity,
// duplicate keys, non-JSON whitespace (BOM, NBSP), nesting deeper than maxDepth.

export type JsonParseResult = { ok: true; value: JsonValue } | { ok: false; offset: number; error: string };

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

class JsonSyntaxError {
  constructor(
    readonly offset: number,
    readonly error: string,
  ) {}
}

export function parseStrictJson(src: string, maxDepth = 64): JsonParseResult {
  let i = 0;
  const err = (msg: string, at = i): JsonSyntaxError => new JsonSyntaxError(at, msg);
  const isWs = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
  const skipWs = (): void => {
    while (i < src.length && isWs(src.charCodeAt(i))) i++;
  };
  const describeUnexpected = (expected: string): JsonSyntaxError => {
    if (i >= src.length) return err(`unexpected end of input, expected ${expected}`);
    const ch = src.charAt(i);
    if (ch === "'") return err(`single-quoted string; JSON needs double quotes (expected ${expected})`);
    if (ch === '/' && (src.charAt(i + 1) === '/' || src.charAt(i + 1) === '*')) {
      return err(`comment; JSON has no comments (expected ${expected})`);
    }
    if (ch === '#') return err(`comment; JSON has no comments (expected ${expected})`);
    if (/[A-Za-z_$]/.test(ch)) {
      const word = /^[A-Za-z_$][A-Za-z0-9_$]*/.exec(src.slice(i))?.[0] ?? ch;
      return err(`unquoted word ${JSON.stringify(word)}; expected ${expected}`);
    }
    if (ch === '\uFEFF' || ch === '\u00A0' || /\s/.test(ch)) {
      return err(`non-JSON whitespace U+${ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}; expected ${expected}`);
    }
    return err(`unexpected ${JSON.stringify(ch)}, expected ${expected}`);
  };

  const parseString = (): string => {
    // at '"'
    const start = i;
    i++;
    let out = '';
    let runStart = i;
    for (;;) {
      if (i >= src.length) throw err('unterminated string', start);
      const c = src.charCodeAt(i);
      if (c === 0x22) {
        out += src.slice(runStart, i);
        i++;
        return out;
      }
      if (c < 0x20) {
        throw err(`raw control character U+${c.toString(16).toUpperCase().padStart(4, '0')} inside a string; escape it (e.g. \\n)`);
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < src.length ? src.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
          i += 2;
          continue;
        }
        throw err('lone surrogate inside a string');
      }
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += src.slice(runStart, i);
      const e = src.charAt(i + 1);
      if (Object.prototype.hasOwnProperty.call(SIMPLE_ESCAPES, e)) {
        out += SIMPLE_ESCAPES[e] as string;
        i += 2;
      } else if (e === 'u') {
        const unit = (at: number): number => {
          const hex = src.slice(at, at + 4);
          if (!/^[0-9A-Fa-f]{4}$/.test(hex)) throw err('\\u must be followed by 4 hex digits', at - 2);
          return parseInt(hex, 16);
        };
        const u = unit(i + 2);
        if (u >= 0xd800 && u <= 0xdbff) {
          if (src.slice(i + 6, i + 8) !== '\\u') throw err('escaped high surrogate not followed by a low surrogate escape');
          const v = unit(i + 8);
          if (v < 0xdc00 || v > 0xdfff) throw err('escaped high surrogate not followed by a low surrogate escape');
          out += String.fromCharCode(u, v);
          i += 12;
        } else if (u >= 0xdc00 && u <= 0xdfff) {
          throw err('escaped lone low surrogate');
        } else {
          out += String.fromCharCode(u);
          i += 6;
        }
      } else {
        throw err(`invalid escape ${JSON.stringify('\\' + e)}`);
      }
      runStart = i;
    }
  };

  const parseNumber = (): number => {
    const start = i;
    if (src.charAt(i) === '-') i++;
    const digit = (): boolean => {
      const c = src.charCodeAt(i);
      return c >= 0x30 && c <= 0x39;
    };
    if (src.charAt(i) === '0') {
      i++;
      if (digit()) throw err('leading zero in a number');
    } else if (digit()) {
      while (digit()) i++;
    } else {
      throw err('"-" must be followed by a digit');
    }
    if (src.charAt(i) === '.') {
      i++;
      if (!digit()) throw err('a digit must follow the decimal point');
      while (digit()) i++;
    }
    if (src.charAt(i) === 'e' || src.charAt(i) === 'E') {
      i++;
      if (src.charAt(i) === '+' || src.charAt(i) === '-') i++;
      if (!digit()) throw err('the exponent needs digits');
      while (digit()) i++;
    }
    const v = Number(src.slice(start, i));
    if (!Number.isFinite(v)) throw err('number out of range', start);
    return v;
  };

  const parseValue = (depth: number): JsonValue => {
    skipWs();
    const ch = src.charAt(i);
    if (ch === '{' || ch === '[') {
      if (depth >= maxDepth) throw err(`nesting deeper than ${maxDepth}`);
      return ch === '{' ? parseObject(depth + 1) : parseArray(depth + 1);
    }
    if (ch === '"') return parseString();
    if (ch === '-' || (ch >= '0' && ch <= '9')) return parseNumber();
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (src.startsWith(word, i) && !/[A-Za-z0-9_$]/.test(src.charAt(i + word.length))) {
        i += word.length;
        return value;
      }
    }
    throw describeUnexpected('a JSON value');
  };

  const parseObject = (depth: number): JsonValue => {
    i++; // '{'
    const obj: { [key: string]: JsonValue } = {};
    const seen = new Set<string>();
    skipWs();
    if (src.charAt(i) === '}') {
      i++;
      return obj;
    }
    for (;;) {
      skipWs();
      if (src.charAt(i) !== '"') {
        if (src.charAt(i) === '}') throw err('trailing comma before "}"');
        throw describeUnexpected('a double-quoted key');
      }
      const keyAt = i;
      const key = parseString();
      if (seen.has(key)) throw err(`duplicate key ${JSON.stringify(key)}`, keyAt);
      seen.add(key);
      skipWs();
      if (src.charAt(i) !== ':') throw describeUnexpected('":" after the key');
      i++;
      const value = parseValue(depth);
      // defineProperty: a key "__proto__" must become an own property, not a prototype.
      Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
      skipWs();
      const c = src.charAt(i);
      if (c === ',') {
        i++;
        continue;
      }
      if (c === '}') {
        i++;
        return obj;
      }
      throw describeUnexpected('"," or "}"');
    }
  };

  const parseArray = (depth: number): JsonValue => {
    i++; // '['
    const arr: JsonValue[] = [];
    skipWs();
    if (src.charAt(i) === ']') {
      i++;
      return arr;
    }
    for (;;) {
      skipWs();
      if (src.charAt(i) === ']') throw err('trailing comma before "]"');
      arr.push(parseValue(depth));
      skipWs();
      const c = src.charAt(i);
      if (c === ',') {
        i++;
        continue;
      }
      if (c === ']') {
        i++;
        return arr;
      }
      throw describeUnexpected('"," or "]"');
    }
  };

  try {
    const value = parseValue(0);
    skipWs();
    if (i < src.length) throw describeUnexpected('the end of the JSON text');
    return { ok: true, value };
  } catch (e) {
    if (e instanceof JsonSyntaxError) return { ok: false, offset: e.offset, error: e.error };
    throw e;
  }
}

// ---------------------------------------------------------------------------------------
// Tag structure

type Tag = { kind: 'open' | 'close'; at: number; raw: string };

const TAG_PREFIX = /<\/?tool_call/gi;
/**
 * A backtick fence line (CommonMark): up to 3 spaces of indent, 3+ backticks, and no
 * further backtick on the line ("```ls``` at line start" is inline code, not a fence).
 */
const FENCE_LINE = /^ {0,3}`{3,}[^`\n]*$/gm;

function scanTags(text: string): Tag[] {
  const tags: Tag[] = [];
  for (const m of text.matchAll(TAG_PREFIX)) {
    const raw = m[0];
    tags.push({ kind: raw.charAt(1) === '/' ? 'close' : 'open', at: m.index, raw });
  }
  return tags;
}

type Structure =
  | { ok: true; reasoning: string; inner: string; innerAt: number; after: string }
  | { ok: false; reason: FormatReason; detail: string };

function checkStructure(text: string): Structure {
  const tags = scanTags(text);
  for (const t of tags) {
    const exact = t.kind === 'open' ? '<tool_call' : '</tool_call';
    if (t.raw !== exact) {
      return {
        ok: false,
        reason: 'wrong_tag_case',
        detail: `tag ${JSON.stringify(t.raw + text.charAt(t.at + t.raw.length))} at offset ${t.at}; tags are exactly ${TOOL_CALL_OPEN} and ${TOOL_CALL_CLOSE}`,
      };
    }
  }
  for (const t of tags) {
    if (text.charAt(t.at + t.raw.length) !== '>') {
      return {
        ok: false,
        reason: 'malformed_tag',
        detail: `${excerpt(text, t.at)} at offset ${t.at} is not exactly ${t.kind === 'open' ? TOOL_CALL_OPEN : TOOL_CALL_CLOSE}`,
      };
    }
  }
  if (tags.length === 0) {
    return {
      ok: false,
      reason: 'missing_tool_call',
      detail: `no ${TOOL_CALL_OPEN} in the output; end the turn with ${TOOL_CALL_OPEN}{"name": ..., "arguments": {...}}${TOOL_CALL_CLOSE}`,
    };
  }
  let openAt = -1;
  const pairs: { open: number; close: number }[] = [];
  for (const t of tags) {
    if (t.kind === 'open') {
      if (openAt >= 0) {
        return {
          ok: false,
          reason: 'nested_tags',
          detail: `${TOOL_CALL_OPEN} at offset ${t.at} opens inside the call opened at offset ${openAt}`,
        };
      }
      openAt = t.at;
    } else {
      if (openAt < 0) {
        return {
          ok: false,
          reason: 'unmatched_close_tag',
          detail: `${TOOL_CALL_CLOSE} at offset ${t.at} closes nothing${pairs.length > 0 ? ' (a call was already closed before it)' : ''}; a literal "</tool_call>" inside JSON must be escaped, e.g. "<\\/tool_call>"`,
        };
      }
      pairs.push({ open: openAt, close: t.at });
      openAt = -1;
    }
  }
  const callCount = pairs.length + (openAt >= 0 ? 1 : 0);
  if (callCount > 1) {
    return {
      ok: false,
      reason: 'multiple_tool_calls',
      detail: `${callCount} tool calls (at offsets ${[...pairs.map((p) => p.open), ...(openAt >= 0 ? [openAt] : [])].join(', ')}); a turn makes exactly one call, at its end`,
    };
  }
  if (openAt >= 0) {
    return {
      ok: false,
      reason: 'unclosed_tag',
      detail: `${TOOL_CALL_OPEN} at offset ${openAt} is never closed by ${TOOL_CALL_CLOSE}`,
    };
  }
  const pair = pairs[0] as { open: number; close: number };
  const reasoning = text.slice(0, pair.open);
  const innerAt = pair.open + TOOL_CALL_OPEN.length;
  const inner = text.slice(innerAt, pair.close);
  const after = text.slice(pair.close + TOOL_CALL_CLOSE.length);

  const innerTrim = inner.trim();
  if (innerTrim.startsWith('```') || innerTrim.endsWith('```')) {
    return { ok: false, reason: 'markdown_fence', detail: 'the JSON inside the tags is wrapped in a ``` code fence; write the bare JSON object' };
  }
  const fencesBefore = reasoning.match(FENCE_LINE)?.length ?? 0;
  if (fencesBefore % 2 === 1 || after.trimStart().startsWith('```')) {
    return {
      ok: false,
      reason: 'markdown_fence',
      detail: 'the tool call sits inside a ``` code fence; write the tags as plain text at the end of the turn',
    };
  }
  if (after !== '') {
    return {
      ok: false,
      reason: 'trailing_text',
      detail: `${quoteShort(after)} follows ${TOOL_CALL_CLOSE}; the call must end the turn (stop right after ${TOOL_CALL_CLOSE})`,
    };
  }
  return { ok: true, reasoning, inner, innerAt, after };
}

// ---------------------------------------------------------------------------------------
// The gate

export function checkRawOutput(out: RawOutput): FormatVerdict {
  const { text, tokenIds, bytes, finishReason, eosTokenId } = out;

  // 1. finish
  if (finishReason === 'length') {
    return fail('truncated', 'generation hit the token limit (finish_reason "length"); the turn never ended');
  }
  if (finishReason !== 'stop') {
    return fail('aborted', `finish_reason ${JSON.stringify(finishReason)}; only a turn ended by EOS ("stop") is judged`);
  }
  if (tokenIds !== undefined && eosTokenId !== undefined) {
    const last = tokenIds.length > 0 ? tokenIds[tokenIds.length - 1] : undefined;
    if (last !== eosTokenId) {
      return fail(
        'truncated',
        `the last token is ${last === undefined ? 'missing (no tokens)' : `id ${last}`}, not EOS (id ${eosTokenId}): the turn did not end by EOS (a stop string is not EOS)`,
      );
    }
  }

  // 2. encoding
  const lone = findLoneSurrogate(text);
  if (lone >= 0) {
    return fail('invalid_utf8', `the text has a lone UTF-16 surrogate at offset ${lone}; it cannot be encoded as UTF-8`);
  }
  if (bytes !== undefined) {
    const decoded = decodeUtf8Strict(bytes);
    if (!decoded.ok) return fail('invalid_utf8', `raw bytes are not UTF-8: ${decoded.error}`);
    if (decoded.text !== text) {
      let k = 0;
      while (k < text.length && k < decoded.text.length && text.charCodeAt(k) === decoded.text.charCodeAt(k)) k++;
      return fail(
        'bytes_text_mismatch',
        `raw bytes decode to ${excerpt(decoded.text, k)} but the text has ${excerpt(text, k)} (first difference at UTF-16 offset ${k})`,
      );
    }
  } else {
    // Without bytes, U+FFFD is what a lossy decoder makes of invalid bytes: the model's
    // real output is unknown, so it cannot be judged. Byte-level engines pass bytes.
    const r = text.indexOf('\uFFFD');
    if (r >= 0) {
      return fail(
        'invalid_utf8',
        `U+FFFD (replacement character) at offset ${r}: the engine decoded invalid bytes lossily; pass raw bytes to judge it`,
      );
    }
  }

  // 3. special tokens
  if (tokenIds !== undefined) {
    const special = new Set(out.specialTokenIds ?? []);
    const lastIdx = tokenIds.length - 1;
    for (let k = 0; k < tokenIds.length; k++) {
      const id = tokenIds[k] as number;
      const isFinalEos = k === lastIdx && eosTokenId !== undefined && id === eosTokenId;
      if (isFinalEos) continue;
      if (id === eosTokenId) {
        return fail('special_token_in_text', `EOS (id ${eosTokenId}) at token ${k} of ${tokenIds.length}; EOS may only end the turn`);
      }
      if (special.has(id)) {
        return fail('special_token_in_text', `special token id ${id} at token ${k} of ${tokenIds.length}`);
      }
    }
  }
  let first: { at: number; s: string } | undefined;
  for (const s of out.specialTokenTexts ?? DEFAULT_SPECIAL_TOKEN_TEXTS) {
    const at = s === '' ? -1 : text.indexOf(s);
    if (at >= 0 && (first === undefined || at < first.at)) first = { at, s };
  }
  if (first !== undefined) {
    return fail('special_token_in_text', `special token text ${JSON.stringify(first.s)} at offset ${first.at}`);
  }

  // 4. tags
  const st = checkStructure(text);
  if (!st.ok) return fail(st.reason, st.detail);

  // 5. json
  const parsed = parseStrictJson(st.inner);
  if (!parsed.ok) {
    return fail(
      'invalid_json',
      `${parsed.error} at offset ${st.innerAt + parsed.offset}: ${excerpt(st.inner, parsed.offset)}`,
    );
  }

  // 6. schema
  const v = validateToolCall(parsed.value);
  if (!v.ok) return fail(v.reason, v.detail);
  return { ok: true, call: v.call, reasoning: st.reasoning };
}
