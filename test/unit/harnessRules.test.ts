import { describe, expect, it } from 'vitest';
import { budgetGate, gateTurn, type Budgets, type RolloutState } from '../../core/gates.js';
import { conversation, renderObservation, SYSTEM_PROMPT, toolSchemas, truncateMiddle } from '../../core/harness.js';
import { endsTurn, nextPrompt, renderDrift, rolloutSequence } from '../../core/tokenPath.js';
import { detectShortcuts } from '../../core/shortcuts.js';
import { checkRawOutput } from '../../core/toolFormat.js';
import { renderToolCall } from '../../core/tools.js';
import { newRouterState, pickEngine, releaseRollout, type EngineLoad } from '../../core/router.js';
import { groupAdvantages } from '../../core/advantages.js';
import { movingAverage, stressVerdict } from '../../core/stress.js';

const budgets: Budgets = { maxTurns: 3, maxTotalTokens: 1000, maxWallSeconds: 60 };
const fresh = (): RolloutState => ({ turns: 1, tokens: 0, startedAtMs: 0, seenCalls: [] });
const verdictOf = (text: string) => checkRawOutput({ text, finishReason: 'stop' });

describe('gates', () => {
  it('end at an exhausted budget: turns, tokens, wall time', () => {
    expect(budgetGate({ ...fresh(), turns: 3 }, budgets, 0)?.gate).toBe('budget_turns');
    expect(budgetGate({ ...fresh(), tokens: 1000 }, budgets, 0)?.gate).toBe('budget_tokens');
    expect(budgetGate(fresh(), budgets, 61_000)?.gate).toBe('budget_time');
    expect(budgetGate(fresh(), budgets, 1000)).toBeNull();
  });

  it('end at the first invalid format with its reason; no hint, no continue', () => {
    const d = gateTurn(fresh(), verdictOf('<tool_call>{"name": "bash"}</tool_call>'), budgets);
    expect(d).toMatchObject({ action: 'end', ended: { gate: 'format', detail: { reason: 'missing_key' } } });
  });

  it('end at the first duplicate call, whatever the key order or spacing', () => {
    const first = gateTurn(fresh(), verdictOf(renderToolCall({ name: 'bash', arguments: { command: 'ls' } })), budgets);
    expect(first.action).toBe('execute');
    const s = { ...fresh(), turns: 2, seenCalls: [first.action === 'execute' ? first.key : ''] };
    const again = gateTurn(s, verdictOf('<tool_call>{ "arguments": {"command": "ls"}, "name": "bash" }</tool_call>'), budgets);
    expect(again).toMatchObject({ action: 'end', ended: { gate: 'duplicate_call' } });
    expect(gateTurn(s, verdictOf(renderToolCall({ name: 'bash', arguments: { command: 'ls -a' } })), budgets).action).toBe('execute');
  });

  it('only submit reaches grading', () => {
    expect(gateTurn(fresh(), verdictOf(renderToolCall({ name: 'submit', arguments: {} })), budgets)).toEqual({ action: 'submit' });
  });
});

describe('harness', () => {
  it('builds every conversation from the issue and the turns, in one place', () => {
    expect(conversation(SYSTEM_PROMPT, '  It breaks.\n', [{ rawText: 'A', observation: 'exit code 0\nok' }, { rawText: 'B', observation: null }])).toEqual([
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: 'It breaks.' },
      { role: 'assistant', content: 'A' },
      { role: 'tool', content: 'exit code 0\nok' },
      { role: 'assistant', content: 'B' },
    ]);
  });

  it('describes the tool registry as JSON schemas for chat templates', () => {
    const [bash, submit] = toolSchemas();
    expect(bash).toMatchObject({ type: 'function', function: { name: 'bash', parameters: { type: 'object', required: ['command'], properties: { command: { type: 'string' } } } } });
    expect(submit.function).toMatchObject({ name: 'submit', parameters: { properties: {}, required: [] } });
  });

  it('truncates long output in the middle and says so', () => {
    const t = truncateMiddle('a'.repeat(500) + 'b'.repeat(500), 100);
    expect(t.length).toBeLessThanOrEqual(100);
    expect(t.startsWith('a')).toBe(true);
    expect(t.endsWith('b')).toBe(true);
    expect(t).toContain('chars omitted');
  });

  it('reports timeouts and kills in the observation', () => {
    const o = renderObservation({ exitCode: 137, output: '', outputBytes: 0, truncated: false, timedOut: true, killedReason: 'timeout', durationMs: 1 }, 100, 20);
    expect(o).toBe('exit code 137 (killed: no result within 20 s)\n(no output)');
  });
});

describe('shortcut detection', () => {
  it.each([
    ['git log --all --oneline', ['git_history']],
    ['git reflog', ['git_history']],
    ['git fsck --lost-found', ['git_history']],
    ['git show 3f2a1bc', ['git_history']],
    ['ls .git/objects/pack', ['git_history']],
    ['curl -s https://example.org/patch', ['network']],
    ['pip install requests', ['network']],
    ['git clone https://github.com/x/y', ['network']],
    ['find / -name "test_hidden*"', ['hidden_tests']],
    ['cat /grade/tests/test_hidden.py', ['hidden_tests']],
  ])('%s → %j', (cmd, flags) => expect(detectShortcuts(cmd)).toEqual(flags));

  it.each(['git status', 'git diff', 'git log -1', 'sed -i s/a/b/ x.py', 'python3 -m pytest -q', 'grep -rn def .'])('%s is not a shortcut', (cmd) => {
    expect(detectShortcuts(cmd)).toEqual([]);
  });
});

describe('router policy', () => {
  const load = (id: string, running: number, waiting = 0, inflight = 0, healthy = true): EngineLoad => ({ id, running, waiting, inflight, healthy });

  it('least-loaded picks the engine with the least outstanding work, skipping unhealthy ones', () => {
    const s = newRouterState();
    expect(pickEngine('least-loaded', [load('a', 5), load('b', 1, 1), load('c', 0, 0, 3)], { rolloutId: 'r' }, s)).toBe('b');
    expect(pickEngine('least-loaded', [load('a', 5), load('b', 0, 0, 0, false)], { rolloutId: 'r' }, s)).toBe('a');
    expect(pickEngine('least-loaded', [load('a', 0, 0, 0, false)], { rolloutId: 'r' }, s)).toBeNull();
    expect(pickEngine('least-loaded', [load('a', 0), load('b', 9)], { rolloutId: 'r', exclude: ['a'] }, s)).toBe('b');
  });

  it('pins stay bounded: the least recently placed rollouts are forgotten, a rollout still placing keeps its engine', () => {
    const s = newRouterState(3);
    const engines = [load('a', 0), load('b', 0), load('c', 0)];
    const first = pickEngine('sticky', engines, { rolloutId: 'r0' }, s);
    for (const r of ['r1', 'r2']) pickEngine('sticky', engines, { rolloutId: r }, s);
    pickEngine('sticky', engines, { rolloutId: 'r0' }, s); // r0 places again: most recent now
    pickEngine('sticky', engines, { rolloutId: 'r3' }, s); // over the cap: r1, the least recent, goes
    expect([...s.pins.keys()].sort()).toEqual(['r0', 'r2', 'r3']);
    expect(s.pins.get('r0')).toBe(first);
    // negative control: without the cap every pin stays
    const unbounded = newRouterState(100);
    for (const r of ['r0', 'r1', 'r2', 'r3']) pickEngine('cache-aware', engines, { rolloutId: r }, unbounded);
    expect(unbounded.pins.size).toBe(4);
  });

  it('least-loaded rotates among equally loaded engines', () => {
    const s = newRouterState();
    const idle = [load('a', 0), load('b', 0), load('c', 5)];
    expect([0, 1, 2, 3].map(() => pickEngine('least-loaded', idle, { rolloutId: 'r' }, s))).toEqual(['a', 'b', 'a', 'b']);
  });

  it('sticky sends a group (shared prefix) to one engine, however loaded', () => {
    const s = newRouterState();
    const engines = [load('a', 0), load('b', 0), load('c', 0)];
    const picks = ['r1', 'r2', 'r3', 'r4'].map((r) => pickEngine('sticky', engines, { rolloutId: r, affinityKey: 'group-7' }, s));
    expect(new Set(picks).size).toBe(1);
    expect(pickEngine('least-loaded', engines.map((e) => (e.id === picks[0] ? { ...e, running: 9 } : e)), { rolloutId: 'r5', affinityKey: 'group-7' }, s)).not.toBe(picks[0]);
  });

  it('sticky keeps a rollout on its engine however loaded, and moves it only when that engine fails', () => {
    const s = newRouterState();
    const first = pickEngine('sticky', [load('a', 0), load('b', 0)], { rolloutId: 'r1' }, s);
    expect(pickEngine('sticky', [load('a', 100), load('b', 100)].map((e) => (e.id === first ? { ...e, running: 500 } : e)), { rolloutId: 'r1' }, s)).toBe(first);
    const other = first === 'a' ? 'b' : 'a';
    expect(pickEngine('sticky', [load('a', 0), load('b', 0)].map((e) => (e.id === first ? { ...e, healthy: false } : e)), { rolloutId: 'r1' }, s)).toBe(other);
  });

  it('cache-aware places a first turn least-loaded, then keeps the rollout where its prefix is cached within the slack', () => {
    const s = newRouterState();
    const first = pickEngine('cache-aware', [load('a', 6), load('b', 2), load('c', 4)], { rolloutId: 'r1' }, s, 4);
    expect(first).toBe('b');
    // its home is now 4 above the least loaded engine: within the slack, it stays
    expect(pickEngine('cache-aware', [load('a', 1), load('b', 5), load('c', 9)], { rolloutId: 'r1' }, s, 4)).toBe('b');
    // negative control: the same loads under least-loaded move it
    expect(pickEngine('least-loaded', [load('a', 1), load('b', 5), load('c', 9)], { rolloutId: 'r1' }, newRouterState())).toBe('a');
  });

  it('cache-aware moves a rollout whose home is more than the slack above the least loaded, and the new engine becomes home', () => {
    const s = newRouterState();
    expect(pickEngine('cache-aware', [load('a', 0), load('b', 3)], { rolloutId: 'r1' }, s, 4)).toBe('a');
    expect(pickEngine('cache-aware', [load('a', 2, 3, 1), load('b', 0)], { rolloutId: 'r1' }, s, 4)).toBe('b'); // a: 6 > 0 + 4
    expect(pickEngine('cache-aware', [load('a', 0), load('b', 4)], { rolloutId: 'r1' }, s, 4)).toBe('b'); // home moved to b, 4 ≤ 0 + 4
    // an unhealthy or excluded home is left, whatever the slack
    expect(pickEngine('cache-aware', [load('a', 9), load('b', 0, 0, 0, false)], { rolloutId: 'r1' }, s, 100)).toBe('a');
    expect(pickEngine('cache-aware', [load('a', 9), load('b', 0)], { rolloutId: 'r1', exclude: ['a'] }, s, 100)).toBe('b');
    expect(pickEngine('cache-aware', [load('a', 9), load('b', 0)], { rolloutId: 'r1', exclude: ['a', 'b'] }, s)).toBeNull();
  });

  it('cache-aware with slack 0 is least-loaded that prefers home on a tie; releasing a rollout forgets its home', () => {
    const s = newRouterState();
    expect(pickEngine('cache-aware', [load('a', 1), load('b', 1)], { rolloutId: 'r1' }, s, 0)).toBe('a');
    expect([0, 1, 2].map(() => pickEngine('cache-aware', [load('a', 1), load('b', 1)], { rolloutId: 'r1' }, s, 0))).toEqual(['a', 'a', 'a']);
    expect(pickEngine('cache-aware', [load('a', 2), load('b', 1)], { rolloutId: 'r1' }, s, 0)).toBe('b');
    releaseRollout(s, 'r1');
    expect(s.pins.has('r1')).toBe(false);
  });

  it('round-robin cycles blind to load', () => {
    const s = newRouterState();
    const engines = [load('a', 100), load('b', 0)];
    expect([0, 1, 2, 3].map(() => pickEngine('round-robin', engines, { rolloutId: 'r' }, s))).toEqual(['a', 'b', 'a', 'b']);
  });
});

describe('advantages', () => {
  const group = [
    { rolloutId: 'a', groupId: 'g', reward: 1 }, { rolloutId: 'b', groupId: 'g', reward: 0 },
    { rolloutId: 'c', groupId: 'g', reward: 0 }, { rolloutId: 'd', groupId: 'g', reward: 1 },
    { rolloutId: 'e', groupId: 'h', reward: 1 }, { rolloutId: 'f', groupId: 'h', reward: 1 },
  ];
  it('group-relative: reward minus the group mean (÷ std), zero for a uniform group', () => {
    const g = groupAdvantages(group, 'group');
    expect([g.get('a'), g.get('b'), g.get('e')]).toEqual([0.5, -0.5, 0]);
    expect(groupAdvantages(group, 'group-std').get('a')).toBeCloseTo(1, 5);
  });
  it("'reward' reinforces every success, uniform groups too, and gives failures nothing", () => {
    const r = groupAdvantages(group, 'reward');
    expect(['a', 'b', 'e', 'f'].map((id) => r.get(id))).toEqual([1, 0, 1, 1]);
  });
});

describe('stress verdict', () => {
  const ok = { startPass1: 0.5, endPass1: 0.93, epochs: 24, minutes: 28 };
  it('passes a weak start that climbs to 0.9 and holds its 3-update average within 0.05 of the peak', () => {
    const v = stressVerdict({ rewards: [0.4, 0.6, 0.8, 0.9, 0.93, 0.95, 0.92, 0.94, 0.93], ...ok });
    expect(v).toMatchObject({ pass: true, reason: 'every rule holds', updates: 9 });
    expect(v.peakAvg3).toBeCloseTo((0.95 + 0.92 + 0.94) / 3, 12);
    expect(movingAverage([1, 2, 3, 4])).toEqual([1, 1.5, 2, 3]);
  });
  it('names every rule that fails, with its value', () => {
    expect(stressVerdict({ rewards: [0.7, 0.8, 0.85, 0.88, 0.86], ...ok }).reason).toMatch(/reaches ≥ 0.9: 0.880/);
    expect(stressVerdict({ rewards: [0.5, 1, 1, 1, 0.9, 0.8], ...ok }).reason).toMatch(/within 0.05 of its peak: 0.900/);
    const v = stressVerdict({ rewards: [0.5, 0.95, 0.95], startPass1: 0.92, endPass1: null, epochs: 5, minutes: 31 });
    expect(v.checks.filter((c) => !c.ok).map((c) => c.rule)).toEqual(['starting pass@1 (frozen) ≤ 0.6', '≥ 20 epochs over the pool', 'final pass@1 (frozen) ≥ 0.9', 'within 30 minutes']);
    expect(v.reason).toMatch(/final pass@1 \(frozen\) ≥ 0.9: not measured/);
    expect(stressVerdict({ rewards: [], ...ok }).pass).toBe(false);
  });
});

describe('token path', () => {
  const t0 = { inputIds: [1, 2, 3], completionIds: [10, 11, 99], logprobs: [-0.5, -0.25, -0.125], versions: [0, 0, 1] };
  const t1 = { inputIds: [4, 5], completionIds: [12, 99], logprobs: [-1, -2], versions: [1, 1] };

  it('extends the previous prompt by its completion exactly as generated, then the new input', () => {
    expect(nextPrompt([], [1, 2, 3])).toEqual([1, 2, 3]);
    expect(nextPrompt([t0], [4, 5])).toEqual([1, 2, 3, 10, 11, 99, 4, 5]);
    expect(nextPrompt([t0, t1], [6])).toEqual([1, 2, 3, 10, 11, 99, 4, 5, 12, 99, 6]);
  });

  it('makes one sequence per rollout, masked over the generated tokens only', () => {
    const seq = rolloutSequence([t0, t1]);
    expect(seq.ids).toEqual([1, 2, 3, 10, 11, 99, 4, 5, 12, 99]);
    expect(seq.lossMask).toEqual([0, 0, 0, 1, 1, 1, 0, 0, 1, 1]);
    expect(seq.logprobs).toEqual([0, 0, 0, -0.5, -0.25, -0.125, 0, 0, -1, -2]);
    expect(seq.versions).toEqual([-1, -1, -1, 0, 0, 1, -1, -1, 1, 1]);
    expect(() => rolloutSequence([{ ...t0, logprobs: [-1] }])).toThrow(/1 logprobs for 3 generated tokens/);
  });

  it('records where a full template rendering parts from the concatenation', () => {
    expect(renderDrift([1, 2, 3], [1, 2, 3])).toBeNull();
    expect(renderDrift([1, 2, 3], [1, 9, 3])).toEqual({ at: 1, concatenated: 3, template: 3 });
    expect(renderDrift([1, 2], [1, 2, 3])).toEqual({ at: 2, concatenated: 2, template: 3 });
  });

  it('continues only after an end-of-turn token', () => {
    expect(endsTurn([5, 99], [99])).toBe(true);
    expect(endsTurn([5, 6], [99])).toBe(false);
    expect(endsTurn([], [99])).toBe(false);
  });
});
