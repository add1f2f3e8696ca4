// The Hermes-style parser of the lenient layer (recipe.rawFormatCheck off), case by case against
// the behaviour of the parsers it stands for (read, not copied; commits in core/hermesParser.ts):
//   vllm-project/vllm  vllm/tool_parsers/hermes_tool_parser.py @ 02bb669bf661df8b946121215ecb213468247b22
//                      (vllm/entrypoints/openai/tool_parsers/… @ 00854322d23051d43e752a81b3a72247d8604294)
//   sgl-project/sglang python/sglang/srt/function_call/qwen25_detector.py @ 0813438c032112acef251f02fc8911044c68ba06,
//                      hermes_detector.py @ 0a0c6dae19c4eeaeee2750d6f6f905051f2424ba
//   volcengine/verl    verl/experimental/agent_loop/tool_parser.py @ 08cccdec073142777c0decc408ee582c37bafccf
import { describe, expect, it } from 'vitest';
import { parseHermes } from '../../core/hermesParser.js';

const ls = '{"name": "bash", "arguments": {"command": "ls"}}';
const pwd = '{"name": "bash", "arguments": {"command": "pwd"}}';
const names = (text: string) => parseHermes(text).calls.map((c) => [c.name, c.arguments]);

describe('parseHermes', () => {
  it('no <tool_call> at all: plain content, no call (every parser: the sanity check)', () => {
    expect(parseHermes('I think the bug is in parser.py.')).toEqual({ calls: [], dropped: [], content: 'I think the bug is in parser.py.' });
    expect(parseHermes(ls).calls).toEqual([]); // bare JSON without tags is content, not a call
  });

  it('text around the call is ignored (vLLM: content is what precedes the first tag)', () => {
    const r = parseHermes(`Let me look.\n<tool_call>\n${ls}\n</tool_call>\nand then some trailing words`);
    expect(r.calls).toEqual([{ name: 'bash', arguments: { command: 'ls' }, match: 0, unclosed: false }]);
    expect(r.content).toBe('Let me look.\n\nand then some trailing words');
  });

  it('two calls: both returned, in order (findall over the whole output)', () => {
    expect(names(`<tool_call>${ls}</tool_call> then <tool_call>${pwd}</tool_call>`)).toEqual([['bash', { command: 'ls' }], ['bash', { command: 'pwd' }]]);
  });

  it('an unclosed final call is taken up to the end (the regex\'s second alternative)', () => {
    const r = parseHermes(`<tool_call>${ls}</tool_call><tool_call>${pwd}`);
    expect(r.calls.map((c) => [c.arguments, c.unclosed])).toEqual([[{ command: 'ls' }, false], [{ command: 'pwd' }, true]]);
  });

  it('an output cut off at max tokens is accepted when its call parses, dropped when it does not', () => {
    expect(names(`Reasoning first. <tool_call>${ls}`)).toEqual([['bash', { command: 'ls' }]]);
    const cut = parseHermes('<tool_call>{"name": "bash", "arguments": {"comm');
    expect(cut.calls).toEqual([]);
    expect(cut.dropped).toMatchObject([{ match: 0, unclosed: true }]);
    expect(cut.content).toBe('<tool_call>{"name": "bash", "arguments": {"comm');
  });

  it('a body that fails standard JSON decoding is dropped; the other calls stay', () => {
    const r = parseHermes(`<tool_call>{'name': 'bash', 'arguments': {'command': 'ls'}}</tool_call><tool_call>${pwd}</tool_call>`);
    expect(r.calls.map((c) => c.arguments)).toEqual([{ command: 'pwd' }]);
    expect(r.dropped).toMatchObject([{ match: 0, unclosed: false }]);
    expect(r.dropped[0].error).toMatch(/^not JSON/);
  });

  it('standard JSON, not a repairer: trailing commas, comments, fences and bare keys all fail', () => {
    for (const body of ['{"name": "bash", "arguments": {"command": "ls"},}', '{"name": "bash", /* c */ "arguments": {}}', '```json\n' + ls + '\n```', '{name: "bash", arguments: {}}']) {
      expect(parseHermes(`<tool_call>${body}</tool_call>`).calls).toEqual([]);
    }
  });

  it('what standard JSON allows passes: duplicate keys (last wins), whitespace around the body', () => {
    expect(names('<tool_call>\n  {"name": "bash", "arguments": {"command": "ls", "command": "pwd"}}  \n</tool_call>')).toEqual([['bash', { command: 'pwd' }]]);
  });

  it('name and arguments are read by key; other keys are ignored, a missing one drops the call', () => {
    expect(names('<tool_call>{"name": "bash", "arguments": {"command": "ls"}, "id": 3}</tool_call>')).toEqual([['bash', { command: 'ls' }]]);
    expect(parseHermes('<tool_call>{"name": "bash"}</tool_call>').calls).toEqual([]);
    expect(parseHermes('<tool_call>{"arguments": {}}</tool_call>').calls).toEqual([]);
    expect(parseHermes('<tool_call>[1, 2]</tool_call>').calls).toEqual([]);
    // arguments are whatever the model wrote: the harness checks them against the tools
    expect(names('<tool_call>{"name": "frobnicate", "arguments": "{\\"x\\": 1}"}</tool_call>')).toEqual([['frobnicate', '{"x": 1}']]);
  });

  it('tags are exact: another case is text; a call opened inside another swallows it (non-greedy to the first close)', () => {
    expect(parseHermes(`<TOOL_CALL>${ls}</TOOL_CALL>`).calls).toEqual([]);
    const nested = parseHermes(`<tool_call>oops <tool_call>${ls}</tool_call>`);
    expect(nested.calls).toEqual([]);
    expect(nested.dropped).toHaveLength(1);
  });

  it('an empty body is dropped, and a stray closing tag is content', () => {
    expect(parseHermes('<tool_call></tool_call>').calls).toEqual([]);
    expect(names(`</tool_call><tool_call>${ls}</tool_call>`)).toEqual([['bash', { command: 'ls' }]]);
  });
});
