// A deliberately lenient tool-call parser, of the kind many RL harnesses run on model
// output. floe never executes what it returns: it exists to measure what the raw format
// gate (core/toolFormat.ts) beats — every malformed turn this parser "repairs" would have
// been executed (and possibly rewarded) by a lenient harness, reinforcing the malformation.
// Pure module (no Node APIs, no I/O).
//
// What it forgives: tags in any case, spaced or hyphenated; an unclosed tag; no tags at
// all (bare JSON); extra calls (takes the first); nested tags; text before and after the
// call; ``` fences; single quotes; unquoted keys and words; trailing, missing or doubled
// commas; // /* */ # comments; True/False/None/NaN; bad escapes and raw control characters
// in strings; JSON cut off mid-way (auto-closed); duplicate keys (last wins); "parameters"
// or "args" for "arguments"; arguments given as a JSON string; extra top-level keys;
// extra arguments (dropped); scalar or list arguments where a string is expected. It does
// not see finish reasons, tokens or bytes at all.

import { type JsonValue, type ToolCall, type ArgSpec, TOOLS, isToolName } from './tools.js';

export interface LenientResult {
  /** The call a lenient harness would run, or null if even it gives up. */
  call: ToolCall | null;
  /** What it had to forgive (or, when call is null, why it gave up), in order. */
  repairs: string[];
}

type Note = (repair: string) => void;

class GiveUp {
  constructor(readonly why: string) {}
}

/** Parses JSON-ish text starting at `start`; never throws except GiveUp. */
class LooseJson {
  i: number;
  constructor(
    private readonly s: string,
    start: number,
    private readonly note: Note,
  ) {
    this.i = start;
  }

  private eof(): boolean {
    return this.i >= this.s.length;
  }

  private ch(): string {
    return this.s.charAt(this.i);
  }

  skipSpaceAndComments(): void {
    for (;;) {
      while (!this.eof() && /\s/.test(this.ch())) this.i++;
      const two = this.s.slice(this.i, this.i + 2);
      if (two === '//' || this.ch() === '#') {
        this.note('removed_comments');
        const nl = this.s.indexOf('\n', this.i);
        this.i = nl < 0 ? this.s.length : nl + 1;
      } else if (two === '/*') {
        this.note('removed_comments');
        const end = this.s.indexOf('*/', this.i + 2);
        this.i = end < 0 ? this.s.length : end + 2;
      } else {
        return;
      }
    }
  }

  value(depth: number): JsonValue {
    if (depth > 64) throw new GiveUp('nesting too deep');
    this.skipSpaceAndComments();
    if (this.eof()) {
      this.note('closed_truncated_json');
      return null;
    }
    const c = this.ch();
    if (c === '{') return this.object(depth + 1);
    if (c === '[') return this.array(depth + 1);
    if (c === '"' || c === "'") return this.string();
    const num = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(this.s.slice(this.i));
    if (num) {
      this.i += num[0].length;
      if (!/^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/.test(num[0])) this.note('loose_number');
      return Number(num[0]);
    }
    const word = /^[A-Za-z_$][\w$.-]*/.exec(this.s.slice(this.i));
    if (word) {
      this.i += word[0].length;
      const literals: Record<string, [JsonValue, string | null]> = {
        true: [true, null],
        false: [false, null],
        null: [null, null],
        True: [true, 'python_literals'],
        False: [false, 'python_literals'],
        None: [null, 'python_literals'],
        undefined: [null, 'undefined_literal'],
        NaN: [Number.NaN, 'nan_literal'],
        Infinity: [Number.POSITIVE_INFINITY, 'nan_literal'],
      };
      const lit = Object.prototype.hasOwnProperty.call(literals, word[0]) ? literals[word[0]] : undefined;
      if (lit) {
        if (lit[1] !== null) this.note(lit[1]);
        return lit[0];
      }
      this.note('unquoted_string');
      return word[0];
    }
    throw new GiveUp(`cannot read a value at ${JSON.stringify(this.s.slice(this.i, this.i + 10))}`);
  }

  private string(): string {
    const q = this.ch();
    if (q === "'") this.note('single_quotes');
    this.i++;
    let out = '';
    for (;;) {
      if (this.eof()) {
        this.note('closed_truncated_json');
        return out;
      }
      const c = this.ch();
      if (c === q) {
        this.i++;
        return out;
      }
      if (c === '\\') {
        const e = this.s.charAt(this.i + 1);
        const simple: Record<string, string> = {
          '"': '"',
          "'": "'",
          '\\': '\\',
          '/': '/',
          b: '\b',
          f: '\f',
          n: '\n',
          r: '\r',
          t: '\t',
        };
        if (e === "'" && q === '"') this.note('invalid_escape');
        if (Object.prototype.hasOwnProperty.call(simple, e)) {
          out += simple[e] as string;
          this.i += 2;
        } else if (e === 'u' && /^[0-9A-Fa-f]{4}$/.test(this.s.slice(this.i + 2, this.i + 6))) {
          out += String.fromCharCode(parseInt(this.s.slice(this.i + 2, this.i + 6), 16));
          this.i += 6;
        } else {
          this.note('invalid_escape');
          out += e === '' ? '\\' : '\\' + e;
          this.i += 2;
        }
        continue;
      }
      if (c.charCodeAt(0) < 0x20) this.note('raw_control_chars');
      out += c;
      this.i++;
    }
  }

  private key(): string {
    const c = this.ch();
    if (c === '"' || c === "'") return this.string();
    const bare = /^[^\s:,{}[\]"']+/.exec(this.s.slice(this.i));
    if (!bare) throw new GiveUp(`cannot read a key at ${JSON.stringify(this.s.slice(this.i, this.i + 10))}`);
    this.note('unquoted_keys');
    this.i += bare[0].length;
    return bare[0];
  }

  private object(depth: number): JsonValue {
    this.i++; // '{'
    const obj: { [k: string]: JsonValue } = {};
    let first = true;
    for (;;) {
      this.skipSpaceAndComments();
      if (this.eof()) {
        this.note('closed_truncated_json');
        return obj;
      }
      if (this.ch() === '}') {
        this.i++;
        return obj;
      }
      if (this.ch() === ',') {
        this.note(first ? 'extra_comma' : 'trailing_comma');
        this.i++;
        continue;
      }
      const k = this.key();
      this.skipSpaceAndComments();
      if (this.ch() === ':' || this.ch() === '=') {
        if (this.ch() === '=') this.note('equals_for_colon');
        this.i++;
      } else {
        throw new GiveUp(`no ":" after key ${JSON.stringify(k)}`);
      }
      const v = this.value(depth);
      if (Object.prototype.hasOwnProperty.call(obj, k)) this.note('duplicate_keys_last_wins');
      Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
      first = false;
      this.skipSpaceAndComments();
      if (this.ch() === ',') {
        this.i++;
        this.skipSpaceAndComments();
        if (this.ch() === '}') this.note('trailing_comma');
      } else if (this.ch() !== '}' && !this.eof()) {
        this.note('missing_comma');
      }
    }
  }

  private array(depth: number): JsonValue {
    this.i++; // '['
    const arr: JsonValue[] = [];
    for (;;) {
      this.skipSpaceAndComments();
      if (this.eof()) {
        this.note('closed_truncated_json');
        return arr;
      }
      if (this.ch() === ']') {
        this.i++;
        return arr;
      }
      if (this.ch() === ',') {
        this.note('extra_comma');
        this.i++;
        continue;
      }
      arr.push(this.value(depth));
      this.skipSpaceAndComments();
      if (this.ch() === ',') {
        this.i++;
        this.skipSpaceAndComments();
        if (this.ch() === ']') this.note('trailing_comma');
      } else if (this.ch() !== ']' && !this.eof()) {
        this.note('missing_comma');
      }
    }
  }
}

const OPEN_TAG = /<\s*tool[_-]?call\s*>/gi;
const CLOSE_TAG = /<\s*\/\s*tool[_-]?call\s*>/gi;

/** Reads the first JSON-ish object in s; notes what it had to forgive. */
function looseObjectIn(s: string, note: Note): JsonValue | undefined {
  const start = s.indexOf('{');
  if (start < 0) return undefined;
  if (s.slice(0, start).trim() !== '') note('ignored_text_before_json');
  const p = new LooseJson(s, start, note);
  const v = p.value(0);
  p.skipSpaceAndComments();
  if (p.i < s.length) note('ignored_text_after_json');
  return v;
}

function isObject(v: JsonValue | undefined): v is { [k: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function coerce(spec: ArgSpec, v: JsonValue, note: Note): JsonValue | undefined {
  if (spec.type === 'string') {
    if (typeof v === 'string') return v;
    if (typeof v === 'number' || typeof v === 'boolean') {
      note('coerced_argument_type');
      return String(v);
    }
    if (Array.isArray(v) && v.every((x) => typeof x === 'string' || typeof x === 'number')) {
      note('coerced_argument_type');
      return v.join(' ');
    }
    return undefined;
  }
  if (spec.type === 'integer') {
    if (typeof v === 'number' && Number.isInteger(v)) return v;
    if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) {
      note('coerced_argument_type');
      return Number(v.trim());
    }
    if (typeof v === 'number' && Number.isFinite(v)) {
      note('coerced_argument_type');
      return Math.trunc(v);
    }
    return undefined;
  }
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === 'false') {
    note('coerced_argument_type');
    return v === 'true';
  }
  return undefined;
}

export function lenientParse(text: string): LenientResult {
  const repairs: string[] = [];
  const note: Note = (r) => {
    if (!repairs.includes(r)) repairs.push(r);
  };
  const giveUp = (why: string): LenientResult => {
    note(`gave_up: ${why}`);
    return { call: null, repairs };
  };

  try {
    // 1. Find the call block.
    const opens = [...text.matchAll(OPEN_TAG)];
    const closes = [...text.matchAll(CLOSE_TAG)];
    let body: string;
    const firstOpen = opens[0];
    if (firstOpen !== undefined) {
      if (firstOpen[0] !== '<tool_call>') note('case_insensitive_tag');
      const start = firstOpen.index + firstOpen[0].length;
      const close = closes.find((m) => m.index >= start);
      if (close === undefined) {
        note('accepted_unclosed_tag');
        body = text.slice(start);
      } else {
        if (close[0] !== '</tool_call>') note('case_insensitive_tag');
        body = text.slice(start, close.index);
        const rest = text.slice(close.index + close[0].length);
        if (/<\s*tool[_-]?call\s*>/i.test(rest)) note('ignored_extra_calls');
        if (rest !== '') note('ignored_trailing_text');
      }
      if (/<\s*\/?\s*tool[_-]?call\s*>/i.test(body)) {
        note('stripped_nested_tag');
        body = body.replace(OPEN_TAG, '').replace(CLOSE_TAG, '');
      }
    } else if (closes[0] !== undefined) {
      note('missing_open_tag');
      body = text.slice(0, closes[0].index);
    } else {
      note('no_tags_bare_json');
      body = text;
    }

    // 2. Strip code fences.
    if (body.includes('```')) {
      note('stripped_markdown_fence');
      body = body.replace(/```[\w-]*/g, '');
    }

    // 3. Parse the object.
    let value = looseObjectIn(body, note);
    if (value === undefined) return giveUp('no JSON object found');
    if (Array.isArray(value) && value.length === 1 && isObject(value[0])) {
      note('unwrapped_array');
      value = value[0];
    }
    if (!isObject(value)) return giveUp('not an object');
    if (isObject(value['function'])) {
      note('unwrapped_function_object');
      value = value['function'];
    }

    // 4. Name and arguments.
    const rawName = value['name'] ?? value['tool'] ?? value['tool_name'];
    if (typeof rawName !== 'string') return giveUp('no tool name');
    const name = rawName.trim().toLowerCase();
    if (name !== rawName) note('normalized_name');
    const argKeys = ['arguments', 'parameters', 'args', 'input'] as const;
    const argKey = argKeys.find((k) => Object.prototype.hasOwnProperty.call(value, k));
    if (argKey !== undefined && argKey !== 'arguments') note(`read_${argKey}_as_arguments`);
    const extraTop = Object.keys(value).filter(
      (k) => !(argKeys as readonly string[]).includes(k) && !['name', 'tool', 'tool_name'].includes(k),
    );
    if (extraTop.length > 0) note('ignored_extra_keys');
    let args: JsonValue | undefined = argKey === undefined ? undefined : value[argKey];
    if (args === undefined || args === null) {
      note('defaulted_arguments');
      args = {};
    }
    if (typeof args === 'string') {
      note('decoded_string_arguments');
      const inner = looseObjectIn(args, note);
      if (inner === undefined) return giveUp('arguments string holds no object');
      args = inner;
    }
    if (!isObject(args)) return giveUp('arguments not an object');

    if (!isToolName(name)) return giveUp(`unknown tool ${JSON.stringify(name)}`);
    const specArgs: Readonly<Record<string, ArgSpec>> = TOOLS[name].args;
    const out: { [k: string]: JsonValue } = {};
    for (const [argName, spec] of Object.entries(specArgs)) {
      if (!Object.prototype.hasOwnProperty.call(args, argName)) {
        if (spec.optional === true) continue;
        return giveUp(`missing argument ${argName}`);
      }
      const v = coerce(spec, args[argName] as JsonValue, note);
      if (v === undefined) return giveUp(`argument ${argName} cannot be coerced`);
      out[argName] = v;
    }
    if (Object.keys(args).some((k) => !Object.prototype.hasOwnProperty.call(specArgs, k))) {
      note('dropped_extra_arguments');
    }
    // Lenient on purpose: no emptiness or length check, as such harnesses do not make one.
    return { call: { name, arguments: out } as unknown as ToolCall, repairs };
  } catch (e) {
    if (e instanceof GiveUp) return giveUp(e.why);
    throw e;
  }
}
