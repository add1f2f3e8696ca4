// The tool registry: which tools a model may call, and the exact shape of their
// arguments. Pure module (no Node APIs, no I/O): workflow code imports it.
//
// To add a tool, add an entry to TOOLS. Every declared argument is required unless it
// says `optional: true`; undeclared arguments are always rejected (the gate never drops
// them silently, see docs/design.md "2. Raw format check").

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type ArgSpec =
  | {
      readonly type: 'string';
      readonly description: string;
      /** Reject "" and whitespace-only strings. */
      readonly nonEmpty?: boolean;
      /** Maximum length in Unicode code points (not UTF-16 units, not bytes). */
      readonly maxLength?: number;
      readonly optional?: true;
    }
  | { readonly type: 'integer'; readonly description: string; readonly optional?: true }
  | { readonly type: 'boolean'; readonly description: string; readonly optional?: true };

export interface ToolSpec {
  readonly description: string;
  readonly args: Readonly<Record<string, ArgSpec>>;
}

export const BASH_COMMAND_MAX_CHARS = 4096;

export const TOOLS = {
  bash: {
    description: 'Run one shell command in the sandbox and return its output and exit code.',
    args: {
      command: {
        type: 'string',
        description: 'The command line, run by bash in the repository root.',
        nonEmpty: true,
        maxLength: BASH_COMMAND_MAX_CHARS,
      },
    },
  },
  submit: {
    description: 'Submit the repository as it is now as the final answer; ends the rollout.',
    args: {},
  },
} as const satisfies Record<string, ToolSpec>;

export type ToolName = keyof typeof TOOLS;

type ArgValue<S extends ArgSpec> = S extends { type: 'string' }
  ? string
  : S extends { type: 'integer' }
    ? number
    : boolean;
type Simplify<T> = { [K in keyof T]: T[K] };
type ArgsOf<A extends Readonly<Record<string, ArgSpec>>> = [keyof A] extends [never]
  ? Record<string, never>
  : Simplify<
      { -readonly [K in keyof A as A[K] extends { optional: true } ? never : K]: ArgValue<A[K]> } & {
        -readonly [K in keyof A as A[K] extends { optional: true } ? K : never]?: ArgValue<A[K]>;
      }
    >;

/** A call of one specific tool, e.g. ToolCallOf<'bash'>. */
export type ToolCallOf<N extends ToolName> = { name: N; arguments: ArgsOf<(typeof TOOLS)[N]['args']> };
/** A validated tool call: a discriminated union over the registry. */
export type ToolCall = { [N in ToolName]: ToolCallOf<N> }[ToolName];

export function isToolName(name: string): name is ToolName {
  return Object.prototype.hasOwnProperty.call(TOOLS, name);
}

// ---------------------------------------------------------------------------------------
// Schema validation of a parsed call. The reasons are a subset of FormatReason
// (core/toolFormat.ts), which checks that statically.

export const TOOL_SCHEMA_REASONS = [
  'not_an_object',
  'missing_key',
  'extra_key',
  'unknown_tool',
  'arguments_not_object',
  'missing_argument',
  'extra_argument',
  'wrong_argument_type',
  'empty_argument',
  'argument_too_long',
] as const;
export type ToolSchemaReason = (typeof TOOL_SCHEMA_REASONS)[number];

export type SchemaVerdict<C> = { ok: true; call: C } | { ok: false; reason: ToolSchemaReason; detail: string };

type JsonObject = { [key: string]: JsonValue };

function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describeJsonType(v: JsonValue): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `a ${typeof v}`;
}

function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

const own = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

/**
 * Validate a parsed JSON value against a registry. Check order: top-level shape
 * (object, keys "name" and "arguments" present, no other key), tool name, arguments
 * object, then per argument: missing, extra, type, empty, length.
 * Exported with a registry parameter so extensions (and tests) can exercise every
 * argument type; use validateToolCall for the real registry.
 */
export function validateAgainstRegistry(
  value: JsonValue,
  registry: Readonly<Record<string, ToolSpec>>,
): SchemaVerdict<{ name: string; arguments: JsonObject }> {
  if (!isJsonObject(value)) {
    return {
      ok: false,
      reason: 'not_an_object',
      detail: `the tool call JSON is ${describeJsonType(value)}; it must be an object {"name": ..., "arguments": {...}}`,
    };
  }
  const keys = Object.keys(value);
  const extras = keys.filter((k) => k !== 'name' && k !== 'arguments');
  for (const required of ['name', 'arguments'] as const) {
    if (!own(value, required)) {
      const hint = extras.length > 0 ? ` (found ${extras.map((k) => JSON.stringify(k)).join(', ')} instead)` : '';
      return {
        ok: false,
        reason: 'missing_key',
        detail: `the tool call has no "${required}" key${hint}; it must have exactly "name" and "arguments"`,
      };
    }
  }
  if (extras.length > 0) {
    return {
      ok: false,
      reason: 'extra_key',
      detail: `unexpected top-level key(s) ${extras.map((k) => JSON.stringify(k)).join(', ')}; only "name" and "arguments" are allowed`,
    };
  }
  const name = value['name'];
  const args = value['arguments'];
  const known = Object.keys(registry)
    .map((n) => JSON.stringify(n))
    .join(', ');
  if (typeof name !== 'string') {
    return {
      ok: false,
      reason: 'unknown_tool',
      detail: `"name" is ${describeJsonType(name ?? null)}, not a tool name; known tools: ${known}`,
    };
  }
  if (!own(registry, name)) {
    return { ok: false, reason: 'unknown_tool', detail: `unknown tool ${JSON.stringify(name)}; known tools: ${known}` };
  }
  const spec = registry[name] as ToolSpec;
  if (!isJsonObject(args)) {
    const detail =
      typeof args === 'string'
        ? `"arguments" is a string (a JSON-encoded object?); it must be a JSON object, not a string`
        : `"arguments" is ${describeJsonType(args ?? null)}; it must be a JSON object`;
    return { ok: false, reason: 'arguments_not_object', detail };
  }
  const declared = Object.keys(spec.args);
  const given = Object.keys(args);
  for (const argName of declared) {
    const argSpec = spec.args[argName] as ArgSpec;
    if (!own(args, argName) && argSpec.optional !== true) {
      const unexpected = given.filter((g) => !own(spec.args, g));
      const hint =
        unexpected.length > 0 ? ` (found ${unexpected.map((g) => JSON.stringify(g)).join(', ')} instead)` : '';
      return {
        ok: false,
        reason: 'missing_argument',
        detail: `${name} needs argument "${argName}"${hint}`,
      };
    }
  }
  const extraArgs = given.filter((g) => !own(spec.args, g));
  if (extraArgs.length > 0) {
    const allowed = declared.length > 0 ? declared.map((d) => JSON.stringify(d)).join(', ') : 'none';
    return {
      ok: false,
      reason: 'extra_argument',
      detail: `${name} does not take argument(s) ${extraArgs.map((g) => JSON.stringify(g)).join(', ')}; allowed: ${allowed}`,
    };
  }
  for (const argName of declared) {
    if (!own(args, argName)) continue; // optional and absent
    const argSpec = spec.args[argName] as ArgSpec;
    const v = args[argName] as JsonValue;
    const typeOk =
      argSpec.type === 'string'
        ? typeof v === 'string'
        : argSpec.type === 'integer'
          ? typeof v === 'number' && Number.isSafeInteger(v)
          : typeof v === 'boolean';
    if (!typeOk) {
      return {
        ok: false,
        reason: 'wrong_argument_type',
        detail: `${name}.${argName} must be ${argSpec.type === 'integer' ? 'an integer' : `a ${argSpec.type}`}, got ${describeJsonType(v)}`,
      };
    }
    if (argSpec.type === 'string' && typeof v === 'string') {
      if (argSpec.nonEmpty === true && v.trim() === '') {
        return {
          ok: false,
          reason: 'empty_argument',
          detail: `${name}.${argName} is empty${v === '' ? '' : ' (only whitespace)'}`,
        };
      }
      if (argSpec.maxLength !== undefined) {
        const len = codePointLength(v);
        if (len > argSpec.maxLength) {
          return {
            ok: false,
            reason: 'argument_too_long',
            detail: `${name}.${argName} has ${len} characters; the limit is ${argSpec.maxLength}`,
          };
        }
      }
    }
  }
  return { ok: true, call: { name, arguments: args } };
}

/** Validate a parsed JSON value as a call of a tool in TOOLS. */
export function validateToolCall(value: JsonValue): SchemaVerdict<ToolCall> {
  const v = validateAgainstRegistry(value, TOOLS);
  // Sound: validateAgainstRegistry checked the name and every argument against TOOLS.
  return v.ok ? { ok: true, call: v.call as unknown as ToolCall } : v;
}

// ---------------------------------------------------------------------------------------
// Canonical rendering and identity.

/** A `<` that starts `<tool_call`, `</tool_call` (any case) or `<|`: it would read as a tag or a special token. */
const RAW_TEXT_HAZARD = /<(?=\/?tool_call|\|)/gi;

/**
 * The canonical text of a call, as gold trajectories render it:
 * `<tool_call>{"name":"bash","arguments":{"command":"ls"}}</tool_call>`.
 * Compact JSON, keys "name" then "arguments", arguments in registry order. A `<` that
 * would start a tag (`<tool_call`, `</tool_call`, any case) or a `<|...|>` special
 * token inside a string is written as the JSON escape \u003c, so checkRawOutput accepts
 * every rendering. Throws if the call does not satisfy its schema.
 */
export function renderToolCall(call: ToolCall): string {
  const verdict = validateToolCall(call as unknown as JsonValue);
  if (!verdict.ok) {
    throw new Error(`renderToolCall: invalid call (${verdict.reason}): ${verdict.detail}`);
  }
  const spec: ToolSpec = TOOLS[call.name];
  const args = call.arguments as Record<string, JsonValue>;
  const ordered: Record<string, JsonValue> = {};
  for (const k of Object.keys(spec.args)) {
    if (own(args, k)) ordered[k] = args[k] as JsonValue;
  }
  const json = JSON.stringify({ name: call.name, arguments: ordered }).replace(RAW_TEXT_HAZARD, '\\u003c');
  return `<tool_call>${json}</tool_call>`;
}

function sortKeysDeep(v: JsonValue): JsonValue {
  if (Array.isArray(v)) return v.map(sortKeysDeep);
  if (isJsonObject(v)) {
    const out: JsonObject = {};
    for (const k of Object.keys(v).sort()) {
      Object.defineProperty(out, k, { value: sortKeysDeep(v[k] as JsonValue), enumerable: true, writable: true });
    }
    return out;
  }
  return v;
}

/**
 * A stable identity for duplicate-call detection: same tool and same argument values
 * give the same key, whatever the key order or JSON whitespace of the original text.
 * String values are compared exactly ("ls" and "ls " are different calls).
 */
export function canonicalCallKey(call: ToolCall): string {
  return JSON.stringify([call.name, sortKeysDeep(call.arguments as unknown as JsonValue)]);
}
