// The lenient path of the recipe's raw-format layer (`recipe.rawFormatCheck: false`,
// docs/design.md "The recipe as switches"): what runs is decided the way the Hermes-style tool
// parsers of the public serving and RL stacks decide it on a complete output, not by
// core/toolFormat.ts. It is the
// baseline the raw check is measured against, so it is exactly as forgiving as they are and no
// more: not a repairer (core/lenientParser.ts is the stronger one, for the malformed-call
// probe). Pure module (no Node APIs, no I/O): workflow code imports it.
//
// The rule, over the decoded text of one output (EOS excluded):
//   1. No "<tool_call>" anywhere: plain content, no call.
//   2. Every match of  <tool_call>(.*?)</tool_call>|<tool_call>(.*)  (dot matches newlines,
//      left to right, non-overlapping) is one candidate; its body is the captured text. The
//      second alternative takes an unclosed last call up to the end: an output cut off at the
//      token limit is accepted when that body parses.
//   3. Each body, trimmed, is decoded with standard JSON (JSON.parse: duplicate keys last-wins,
//      any nesting); a body that does not decode, or is not an object with a string "name" and
//      an "arguments" key, is dropped. Other top-level keys are ignored.
//   4. Every call that survives is returned, in order. Text before, between and after the tags
//      is ignored (it is content). When none survives the output is plain content: no call.
// What the harness does with the calls (each runs in order, one observation per call; a
// `submit` ends the rollout where it stands; schema and duplicate rules) is core/gates.ts's
// planTurn.
//
// Sources read (not copied), and where they differ from this rule:
//   - vllm-project/vllm, vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py @
//     00854322d23051d43e752a81b3a72247d8604294 and its move to vllm/tool_parsers/
//     hermes_tool_parser.py @ 02bb669bf661df8b946121215ecb213468247b22:
//     Hermes2ProToolParser.extract_tool_calls — the regex above (re.DOTALL), json.loads of each
//     match, name and arguments read by key, content = the text before the first tag. Differs:
//     one body that fails json.loads (or lacks a key) makes vLLM return the whole output as
//     content with no call at all; here only that call is dropped (as verl does). Python's
//     json.loads also takes NaN / Infinity, JSON.parse does not.
//   - volcengine/verl, verl/experimental/agent_loop/tool_parser.py @
//     08cccdec073142777c0decc408ee582c37bafccf: HermesToolParser (adapted from vLLM v0.9.1) —
//     closed tags only (<tool_call>(.*?)</tool_call>, both tags required), json.loads per match
//     in its own try, a failing call dropped and logged, every other call returned. Differs: an
//     unclosed (cut-off) last call is never a call in verl.
//   - sgl-project/sglang, python/sglang/srt/function_call/qwen25_detector.py @
//     0813438c032112acef251f02fc8911044c68ba06 (closed-tag regex, json.loads per match),
//     hermes_detector.py @ 0a0c6dae19c4eeaeee2750d6f6f905051f2424ba (raw_decode of one JSON
//     value after each <tool_call>, stops at the first that fails), base_format_detector.py @
//     00a35ca8a7d4045776246e1b6002c17526e196c1 (parse_base_json: a name not among the tools is
//     dropped, "parameters" read as arguments, arguments default {}). Differs: SGLang drops
//     unknown tool names in the parser; here the harness rejects them (gates.ts) — the call is
//     found, and fails when it runs, as an unknown tool fails in verl's and vLLM-served loops.
// Duplicates and `submit` among several calls: none of the parsers dedupes or orders calls; the
// agent loops (verl's ToolAgentLoop, SkyRL / mini-swe-agent style) execute the parsed list in
// order, and an episode ends when its finishing tool runs. planTurn does the same.

import type { JsonValue } from './tools.js';

export const HERMES_OPEN = '<tool_call>';
export const HERMES_CLOSE = '</tool_call>';

/** The two alternatives of the Hermes regex; `[\s\S]` is Python's DOTALL `.`. */
const HERMES_CALL = /<tool_call>([\s\S]*?)<\/tool_call>|<tool_call>([\s\S]*)/g;

/** A call the parser found: its name and arguments as the model wrote them (not yet checked
 *  against the tool registry). */
export interface HermesCall {
  name: string;
  arguments: JsonValue;
  /** Position of its match among all matches (0-based). */
  match: number;
  /** The match was the unclosed last one (the output was cut off inside it). */
  unclosed: boolean;
}

/** A match whose body did not decode to a call. */
export interface HermesDropped {
  match: number;
  unclosed: boolean;
  error: string;
  /** The body's first characters, for audit details. */
  excerpt: string;
}

export interface HermesResult {
  calls: HermesCall[];
  dropped: HermesDropped[];
  /** Text outside the tags (what an OpenAI-style server returns as `content` when there are
   *  calls: here everything outside them, for audit only). The whole text when no call parsed. */
  content: string;
}

const EXCERPT = 80;

function isObject(v: unknown): v is Record<string, JsonValue> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parse one decoded output as the Hermes-style parsers do (module header). */
export function parseHermes(text: string): HermesResult {
  if (!text.includes(HERMES_OPEN)) return { calls: [], dropped: [], content: text };
  const calls: HermesCall[] = [];
  const dropped: HermesDropped[] = [];
  const outside: string[] = [];
  let last = 0;
  let n = 0;
  for (const m of text.matchAll(HERMES_CALL)) {
    outside.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    const unclosed = m[1] === undefined;
    const body = (unclosed ? m[2] : m[1]) ?? '';
    const match = n++;
    const drop = (error: string): void => { dropped.push({ match, unclosed, error, excerpt: body.trim().slice(0, EXCERPT) }); };
    let value: unknown;
    try {
      value = JSON.parse(body.trim());
    } catch (e) {
      drop(`not JSON: ${(e as Error).message}`);
      continue;
    }
    if (!isObject(value)) { drop('the JSON is not an object'); continue; }
    const name = value['name'];
    if (typeof name !== 'string') { drop('no string "name"'); continue; }
    if (!Object.prototype.hasOwnProperty.call(value, 'arguments')) { drop('no "arguments"'); continue; }
    calls.push({ name, arguments: value['arguments'], match, unclosed });
  }
  outside.push(text.slice(last));
  return { calls, dropped, content: calls.length ? outside.join('') : text };
}
