import { z } from 'zod';
import { ConfigError, parseRunConfig } from './config.js';

/** docs/configuration.md, rendered from the run config's schema: one table per section with
 *  every field's path, type, default and meaning, the meaning being the field's own
 *  description in core/config.ts. The schema goes through z.toJSONSchema, which reads the
 *  same registry `.meta({ description })` writes, so the document cannot know more than the
 *  schema says. Pure (core/ is bundled into workflows): `floe config docs --write` writes the
 *  file, and test/unit/configDoc.test.ts keeps the committed copy equal to this output. */

export const CONFIG_DOC_FILE = 'docs/configuration.md';
export const CONFIG_DOC_COMMAND = 'bin/floe config docs --write';

type Schema = z.core.JSONSchema.JSONSchema;
interface Row { path: string; type: string; default: string; meaning: string }

/** Defaults longer than this are cut (the system prompt), with a note of their full length. */
const LONGEST_DEFAULT = 48;

/** An example run config; rendering checks that it parses, so the document never shows a
 *  config the schema refuses. */
const EXAMPLE = {
  name: 'my-run',
  tasks: { source: 'swe-bench-verified.jsonl', layout: 'swe-bench' },
  policy: { model: 'hf:/models/Qwen3-8B', tokenizer: '/models/Qwen3-8B', contextTokens: 65536, maxTokensPerTurn: 4096 },
  engines: { count: 0, endpoints: [{ id: 'vllm-0', url: 'http://127.0.0.1:8000', kind: 'vllm' }] },
  trainer: { url: 'http://127.0.0.1:8100', lr: 0.000001, lrSchedule: 'cosine' },
  rollout: { groupSize: 8, maxTurns: 100, maxTotalTokens: 65536 },
};
const EXAMPLE_SETS = ['training.updates=40', 'tasks.include=["django__django-11099","sympy__sympy-20590"]'];
/** A config with two invalid fields, for the error the CLI prints. */
const BAD_EXAMPLE = { engines: { router: 'random' }, rollout: { groupSize: 0 } };

/** The markdown reference of a run config schema (RunConfigSchema). Throws, naming the path,
 *  when a field or section has no description. */
export function renderConfigDoc(schema: z.ZodType): string {
  const root = z.toJSONSchema(schema, { io: 'input' });
  const about = describedAt(root, '(the schema itself)');
  const props = fields(root, '');
  const top = props.filter(([, s]) => !isObject(s));
  const sections = props.filter(([, s]) => isObject(s));
  return [
    `<!-- Generated from the run config's schema (core/config.ts) by \`${CONFIG_DOC_COMMAND}\`: edit the descriptions there, not this file. -->`,
    '',
    '# Run configuration',
    '',
    about,
    '',
    ...intro(),
    `Sections: ${['top level', ...sections.map(([k]) => k)].map((k) => `[${k}](#${k.replace(' ', '-')})`).join(', ')}.`,
    '',
    ...table('Top level', 'Fields outside any section.', rowsOf(top, root.required ?? [], '')),
    ...sections.flatMap(([k, s]) => table(k, describedAt(s, k), rowsOf(fields(s, `${k}.`), s.required ?? [], `${k}.`))),
  ].join('\n');
}

/** How a config is given and checked, with an example (checked against the parser). */
function intro(): string[] {
  parseRunConfig(EXAMPLE, `the example of ${CONFIG_DOC_FILE}`);
  return [
    '## Giving a config',
    '',
    'A run config is a YAML (or JSON) file of the sections below; a field left out takes its default. For example `my-run.yaml`, for servers of your own (complete configs: `configs/`):',
    '',
    '```yaml',
    ...yamlLines(EXAMPLE, ''),
    '```',
    '',
    '```',
    'floe run start my-run.yaml',
    `floe run start my-run.yaml ${EXAMPLE_SETS.map((s) => `--set ${shellWord(s)}`).join(' ')}`,
    '```',
    '',
    '`--set a.b=value` sets one field by its dotted path, over the file (repeat it for more); the value is read as JSON where it parses as JSON, else as a string. `floe demo`, `floe stress` and `floe eval --config` take the same file and overrides; `floe demo` starts its own engines and trainer where `engines.endpoints` and `trainer.url` are empty.',
    '',
    'The config is validated when the run starts, before anything runs: an unknown key (with the key it was probably meant to be) or an invalid value is refused, each named by its path. For this `bad.yaml`:',
    '',
    '```yaml',
    ...yamlLines(BAD_EXAMPLE, ''),
    '```',
    '',
    '```',
    '$ floe run start bad.yaml',
    `floe: ${refusal(BAD_EXAMPLE, 'bad.yaml')}`,
    '```',
    '',
  ];
}

/** The message parseRunConfig refuses `input` with. */
function refusal(input: unknown, source: string): string {
  try {
    parseRunConfig(input, source);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error(`the bad example of ${CONFIG_DOC_FILE} parses: make it invalid again`);
}

function table(title: string, about: string, rows: Row[]): string[] {
  return [
    `## ${title}`,
    '',
    about,
    '',
    '| Field | Type | Default | Meaning |',
    '| --- | --- | --- | --- |',
    ...rows.map((r) => `| ${[`\`${r.path}\``, r.type, r.default, r.meaning].map(cell).join(' | ')} |`),
    '',
  ];
}

/** Rows of `entries` and, after an object or a list of objects, of their fields. */
function rowsOf(entries: readonly (readonly [string, Schema])[], required: readonly string[], prefix: string): Row[] {
  return entries.flatMap(([key, s]) => {
    const path = `${prefix}${key}`;
    const row: Row = { path, type: typeOf(s, path), default: defaultOf(s, required.includes(key)), meaning: describedAt(s, path) };
    const item = itemOf(s, path);
    if (isObject(s)) return [row, ...rowsOf(fields(s, `${path}.`), s.required ?? [], `${path}.`)];
    if (item && isObject(item)) return [row, ...rowsOf(fields(item, `${path}[].`), item.required ?? [], `${path}[].`)];
    return [row];
  });
}

function describedAt(s: Schema, path: string): string {
  if (!s.description?.trim()) throw new Error(`${path} has no description: give it one in core/config.ts (.meta({ description: '…' }))`);
  return s.description;
}

const isObject = (s: Schema): boolean => s.type === 'object';
const fields = (s: Schema, prefix: string) => Object.entries(s.properties ?? {}).map(([k, f]) => [k, asSchema(f, `${prefix}${k}`)] as const);

/** The element schema of a list (null for anything else). */
function itemOf(s: Schema, path: string): Schema | null {
  if (s.type !== 'array' || s.items === undefined) return null;
  if (Array.isArray(s.items)) throw new Error(`${path}: a tuple; the reference renders lists of one element type`);
  return asSchema(s.items, `${path}[]`);
}

function asSchema(s: z.core.JSONSchema._JSONSchema, path: string): Schema {
  if (typeof s === 'boolean') throw new Error(`${path}: the schema admits anything here (${s}); give it a type`);
  return s;
}

const PLURAL: Record<string, string> = { string: 'strings', integer: 'integers', number: 'numbers', boolean: 'booleans', object: 'objects' };

/** The type as a reader needs it: enum values, list element type, bounds, format. */
function typeOf(s: Schema, path: string, plural = false): string {
  if (s.enum) return `one of ${s.enum.map((v) => `\`${String(v)}\``).join(', ')}`;
  const item = itemOf(s, path);
  if (item) return `list of ${typeOf(item, `${path}[]`, true)}`;
  const base = String(s.type);
  if (s.format === 'uri') return plural ? 'URLs' : 'URL';
  const limits = [...bounds(s), ...(s.pattern ? [`matching \`${s.pattern}\``] : [])];
  return `${plural ? PLURAL[base] ?? base : base}${limits.length ? ` (${limits.join(', ')})` : ''}`;
}

/** Bounds of numbers, or of string lengths; the safe-integer range every .int() carries is left out. */
function bounds(s: Schema): string[] {
  const pairs: [string, unknown][] = [['≥', s.minimum ?? s.minLength], ['>', s.exclusiveMinimum], ['≤', s.maximum ?? s.maxLength], ['<', s.exclusiveMaximum]];
  const out = pairs.filter(([, v]) => typeof v === 'number' && Math.abs(v) < Number.MAX_SAFE_INTEGER).map(([op, v]) => `${op} ${String(v)}`);
  return out.length && s.type === 'string' ? [`length ${out.join(', ')}`] : out;
}

/** The default as YAML or JSON writes it (JSON is YAML); a long string is cut, with a note. */
function defaultOf(s: Schema, required: boolean): string {
  if (!('default' in s)) return required ? 'required' : 'absent';
  const v = s.default;
  if (typeof v === 'string' && v.length > LONGEST_DEFAULT) return `\`${JSON.stringify(`${v.slice(0, LONGEST_DEFAULT)}…`)}\` (shortened; ${v.length} characters)`;
  return `\`${JSON.stringify(v)}\``;
}

/** `word` as a shell reads it back: quoted where it holds more than letters, digits and ._=/-. */
const shellWord = (word: string): string => (/^[\w.=/-]+$/.test(word) ? word : `'${word}'`);

/** A markdown table cell: pipes escaped, on one line. */
const cell = (text: string): string => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');

/** YAML of plain data (mappings, lists, scalars) in block style; strings YAML could read as
 *  something else are quoted. */
function yamlLines(v: unknown, indent: string): string[] {
  if (Array.isArray(v)) return v.flatMap((item: unknown) => {
    if (item === null || typeof item !== 'object') return [`${indent}- ${yamlScalar(item)}`];
    const [first, ...rest] = yamlLines(item, `${indent}  `);
    return [`${indent}- ${first.trimStart()}`, ...rest];
  });
  return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) =>
    x !== null && typeof x === 'object' && Object.keys(x).length ? [`${indent}${k}:`, ...yamlLines(x, `${indent}  `)] : [`${indent}${k}: ${yamlScalar(x)}`]);
}

function yamlScalar(x: unknown): string {
  if (typeof x !== 'string') return JSON.stringify(x);
  const plain = /^[A-Za-z/][\w./-]*$/.test(x) && !/^(true|false|null|yes|no|on|off|~)$/i.test(x);
  return plain ? x : JSON.stringify(x);
}
