import { describe, expect, it } from 'vitest';
import {
  badTokenOf, fate, gateKey, jsonForScript, markSpan, offendingSpan, renderListPage, renderRolloutPage, renderTaskPage, renderTurnTokens, tokenText, versionBoundaries,
} from '../../report/viewer/pages.js';
import { checkRawOutput } from '../../core/toolFormat.js';
import type { ViewRollout, ViewRolloutRow, ViewRun, ViewTurn } from '../../store/rolloutView.js';

/** The rollout viewer's pure rendering (report/viewer/pages.ts) from plain data: token shading
 *  and version boundaries, the format gate's span, the list's filter keys, lazy turns, the
 *  static export's embedding. test/viewer.test.ts drives the same pages in Chromium. */

const run: ViewRun = { runId: 'run-1', name: 'unit <run>', workflowId: 'floe-run-run-1', status: 'completed', startedAt: new Date('2026-01-01T00:00:00Z'), endedAt: null, tokenizer: 'byte' };
const links = { workflow: (id: string) => `http://ui/wf/${id}` };
const row = (over: Partial<ViewRolloutRow>): ViewRolloutRow => ({
  rolloutId: 'r1', taskId: 'tA', groupId: 'g1', attempt: 0, purpose: 'train', status: 'finished', workflowId: 'wf-r1', versionStart: 2, versionEnd: 3, reward: 1, gate: 'passed',
  staleness: 0, shortcutFlags: [], discardReason: null, nTurns: 2, completionTokens: 10, engines: ['e0'], batchVersion: 4, formatReason: null, startedAt: new Date(0), ...over,
});
const turn = (over: Partial<ViewTurn>): ViewTurn => ({
  turnIndex: 0, engineId: 'e0', rawText: 'hi', finishReason: 'stop', weightVersions: [2], formatOk: true, formatReason: null, toolName: 'bash', toolArgs: { command: 'ls' },
  observation: 'a.py', exitCode: 0, shortcutFlags: [], genMs: 10, toolMs: 5, inputTokens: 3, generatedTokens: 2, ...over,
});
const bytes = (s: string) => [...Buffer.from(s)];

describe('tokens', () => {
  it('shows byte-tokenizer ids as their text and other tokenizers\' ids as ids', () => {
    expect(bytes('a<').map((i) => tokenText(i, 'byte'))).toEqual(['a', '<']);
    expect([10, 256, 0xc3].map((i) => tokenText(i, 'byte'))).toEqual(['↵\n', '<|eos|>', '\\xc3']);
    expect(tokenText(97, 'builtin:qwen3')).toBe('#97');
  });

  it('shows a byte-level BPE tokenizer\'s ids as their pieces\' text', () => {
    const pieces = { byId: new Map([[1, 'Ġhello'], [2, 'Ċ'], [3, 'Ã©'], [4, '<|im_end|>'], [5, 'Ã'], [6, 'ĠĠ']]), special: new Set([4]), byteLevel: true };
    expect([1, 2, 3, 4, 5, 6, 7].map((i) => tokenText(i, 'builtin:qwen3.6', pieces))).toEqual([' hello', '↵\n', 'é', '<|im_end|>', '\\xc3', '  ', '#7']);
    // the control: pieces of a tokenizer without the ByteLevel decoder are shown as they are
    expect(tokenText(1, 'some/folder', { ...pieces, byteLevel: false })).toBe('Ġhello');
  });

  it('finds where the weight version changes, within a turn and from the turn before', () => {
    expect(versionBoundaries([2, 2, 3, 3, 4])).toEqual([2, 4]);
    expect(versionBoundaries([3, 3], 2)).toEqual([0]);
    expect(versionBoundaries([3, 3], 3)).toEqual([]);
    expect(versionBoundaries([])).toEqual([]);
  });

  it('shades each generated token by its version and marks the boundary token', () => {
    const html = renderTurnTokens({ turnIndex: 0, inputIds: bytes('Q:'), completionIds: bytes('ab<'), logprobs: [-0.5, -0.25, -1], tokenVersions: [2, 3, 3] }, { tokenizer: 'byte' });
    expect(html).toContain('<div class="tok-in"');
    expect(html).toContain('Q:');
    expect(html.match(/<i class="[^"]*">/g)).toEqual(['<i class="v2">', '<i class="v3 b">', '<i class="v3">']);
    expect(html).toContain('>v2→v3</span>');
    expect(html).toContain('data-ids="97,98,60" data-vs="2,3,3" data-lp="-0.5,-0.25,-1"');
    expect(html).toContain('&lt;</i>'); // token text is escaped
    // the control: one version, no boundary
    const one = renderTurnTokens({ turnIndex: 0, inputIds: [], completionIds: bytes('ab'), logprobs: [0, 0], tokenVersions: [2, 2] }, { tokenizer: 'byte' });
    expect(one).not.toContain('class="bnd"');
    expect(renderTurnTokens({ turnIndex: 1, inputIds: [], completionIds: bytes('ab'), logprobs: [0, 0], tokenVersions: [3, 3] }, { tokenizer: 'byte', previousVersion: 2 })).toContain('>v2→v3</span>');
    // a special id the format gate named is marked among the tokens
    const bad = renderTurnTokens({ turnIndex: 0, inputIds: [], completionIds: [97, 257, 98], logprobs: [0, 0, 0], tokenVersions: [1, 1, 1] }, { tokenizer: 'byte', badToken: 1 });
    expect(bad.match(/<i class="[^"]*">[^<]*<\/i>/g)).toEqual(['<i class="v1">a</i>', '<i class="v1 bad">&lt;|bos|&gt;</i>', '<i class="v1">b</i>']);
  });
});

describe('the format gate\'s span', () => {
  it('reads the offset the gate wrote and marks the span it names', () => {
    const text = 'ok <tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\ntrailing';
    for (const [t, expected] of [
      ['x <TOOL_CALL>{}</TOOL_CALL>', '<TOOL_CALL>'],
      ['x <tool_call>{"name": "bash", "arguments": {}}</tool_call><tool_call>', '<tool_call>'],
      ['hello <|im_end|> <tool_call>{"name": "submit", "arguments": {}}</tool_call>', '<|im_end|>'],
      [text, null],
    ] as const) {
      const v = checkRawOutput({ text: t, finishReason: 'stop' });
      expect(v.ok, t).toBe(false);
      if (v.ok) continue;
      const span = offendingSpan(t, v.detail);
      if (expected === null) continue;
      expect(span && 'start' in span ? t.slice(span.start, span.end) : span, `${v.reason}: ${v.detail}`).toBe(expected);
    }
    expect(offendingSpan('abc', 'special token id 7 at token 2 of 3')).toEqual({ token: 2 });
    // the control: a reason about the whole turn names no offset
    expect(offendingSpan('abc', 'the turn has no <tool_call> at all')).toBeNull();
    expect(offendingSpan('abc', 'x at offset 99')).toBeNull();
  });

  it('marks the span with the text around it escaped', () => {
    expect(markSpan('a<b>c', { start: 1, end: 4 })).toBe('a<mark class="span" title="the format gate stopped here">&lt;b&gt;</mark>c');
    expect(markSpan('a<b', null)).toBe('a&lt;b');
  });
});

describe('pages', () => {
  const refused = turn({ turnIndex: 1, rawText: 'x <TOOL_CALL>{}</TOOL_CALL>', formatOk: false, formatReason: 'wrong_tag_case', toolName: null, observation: null, weightVersions: [3] });
  const rollout: ViewRollout = {
    row: row({ gate: 'format', formatReason: 'wrong_tag_case', reward: 0, batchVersion: null, status: 'discarded', discardReason: 'stale', staleness: 3 }),
    run, problemStatement: 'Fix <the> bug',
    turns: [turn({ weightVersions: [2, 3] }), refused],
    gateDecision: { gate: 'format', reward: 0, detail: { reason: 'wrong_tag_case', turn: 1, detail: checkRawOutput({ text: refused.rawText, finishReason: 'stop' }).ok ? '' : (checkRawOutput({ text: refused.rawText, finishReason: 'stop' }) as { detail: string }).detail } },
    submission: { diff: '+x', truncated: false, grade: { passed: false, harness: 'pytest', tests: [{ id: 'test_a', group: 'FAIL_TO_PASS', outcome: 'passed' }, { id: 'test_b', group: 'PASS_TO_PASS', outcome: 'failed' }] } },
    batch: null,
  };

  it('keys the list\'s gate filter by gate and format reason, and says what became of each rollout', () => {
    expect(gateKey(row({ gate: 'format', formatReason: 'trailing_text' }))).toBe('format:trailing_text');
    expect(gateKey(row({ gate: null }))).toBe('none');
    expect(fate(row({}))).toBe('trained in the batch of v4');
    expect(fate(row({ batchVersion: null, status: 'discarded', discardReason: 'stale', staleness: 3 }))).toBe('discarded: stale (staleness 3)');
    const html = renderListPage({ run, rollouts: [row({}), row({ rolloutId: 'r2', gate: 'format', formatReason: 'trailing_text', shortcutFlags: ['git_history'] })], links });
    expect(html).toContain('data-gate="format:trailing_text"');
    expect(html).toContain('<option value="format">format</option>');
    expect(html).toContain('href="http://ui/wf/wf-r1"');
    expect(html).toContain('unit &lt;run&gt;');
    expect(html).not.toMatch(/(src|href)=["']?https?:\/\/(?!ui\/)/);
  });

  it('shows a rollout with its turns collapsed but the first, no token inline, the refusal with its span, the tests and its fate', () => {
    const html = renderRolloutPage(rollout, { links, tokens: { kind: 'server' }, base: '/run/run-1/' });
    expect(html.match(/<details class="turn[^"]*" data-turn="\d+"[^>]*>/g)).toEqual(['<details class="turn" data-turn="0" data-prev="" open>', '<details class="turn refused" data-turn="1" data-prev="3">']);
    expect(html).not.toContain('class="tok-gen"'); // tokens come on demand
    expect(html).toContain('<span class="lg v2">v2</span> <span class="lg v3">v3</span>');
    expect(html).toContain("fetch(\"/run/run-1/rollout/r1/turn/\"+n)");
    expect(html).toContain('crossed a weight update');
    expect(html).toMatch(/<mark class="span"[^>]*>&lt;TOOL_CALL&gt;<\/mark>/);
    expect(html).toContain('refused: wrong_tag_case');
    expect(html).toMatch(/<span class="outcome o-failed">failed<\/span>/);
    expect(html).toContain('<code>test_a</code>');
    expect(html).toContain('discarded: stale (staleness 3)');
    expect(html).toContain('Fix &lt;the&gt; bug');
    expect(html).toContain('is <b>not stored</b> in Postgres');
    expect(badTokenOf(rollout, 1)).toBeNull();
  });

  it('exports a rollout with its turns embedded, safe inside a script element, and fetches nothing', () => {
    const evil = renderTurnTokens({ turnIndex: 0, inputIds: [], completionIds: bytes('</script><b>'), logprobs: [], tokenVersions: [] }, { tokenizer: 'byte' });
    const html = renderRolloutPage(rollout, { links, tokens: { kind: 'embedded', turns: { 0: evil } }, base: null });
    expect(html).toContain('<script type="application/json" id="turn-data-0">');
    expect(html.match(/<\/script>/g)).toHaveLength(2); // the data element's and the loader's: the token text cannot close one
    expect(html).not.toContain('fetch(');
    expect(html).not.toMatch(/href="\/run\//);
    expect(JSON.parse(jsonForScript({ a: '</script>\u2028' })).a).toBe('</script>\u2028');
  });

  it('shows a task by version with its retire and revive decisions', () => {
    const rs = [row({ rolloutId: 'a', versionStart: 1, reward: 0 }), row({ rolloutId: 'b', versionStart: 1, reward: 1 }), row({ rolloutId: 'c', versionStart: 5, reward: 1, purpose: 'recheck' })];
    const html = renderTaskPage({ run, taskId: 'tA', rollouts: rs, base: '/run/run-1/', history: {
      evictions: [{ atVersion: 1, decision: 'retire_mastered', evidence: [1, 1] }, { atVersion: 5, decision: 'revive', evidence: [0] }],
      evaluations: [{ label: 'start', version: 0, k: 4, solved: 2, attempts: 4, pass1: 0.5 }], state: 'active' } });
    expect(html.match(/<tr data-version="\d+">/g)).toEqual(['<tr data-version="1">', '<tr data-version="5">']);
    expect(renderTaskPage({ run, taskId: 'tA', rollouts: rs.slice(0, 1), base: '', history: { evictions: [{ atVersion: 3, decision: 'retire_hopeless', evidence: [] }], evaluations: [], state: null } }).match(/<tr data-version="\d+">/g))
      .toEqual(['<tr data-version="1">', '<tr data-version="3">']);
    expect(html).toMatch(/<tr data-version="1">[\s\S]*?0\.5<\/td><td><span class="decision d-retire_mastered">/);
    expect(html).toContain('d-revive');
    expect(html).toContain('<svg');
    expect(html).toContain('href="/run/run-1/rollout/c"');
  });
});
