import { describe, expect, it } from 'vitest';
import { behaviourDifference, differingCall, discardReason, discardedNote, type BehaviourTrace } from '../../core/dataAudit.js';

/** The audit report's evidence (issue 43): a flag names the call and inputs where the wrong
 *  patch parts from gold; a discarded test-passing candidate says why. Traces are written as
 *  floe_harness/audit/diffcheck.py prints them: [function, args, kwargs, outcome, result, state]. */

const trace = (variants: Record<string, unknown[]>, importError: string | null = null): BehaviourTrace => ({ variants, importError });
const call = (args: string, result: string) => ['m:half', args, '{}', 'return', result, null];

describe('evidence of a flag', () => {
  it('names the first call where gold and the candidate disagree, with its inputs and both outcomes', () => {
    const gold = trace({ 't#pytest': [call('(4,)', '2')], 'replay::m:half#a': [call('(3,)', '1')] });
    const wrong = trace({ 't#pytest': [call('(4,)', '2')], 'replay::m:half#a': [call('(3,)', '3')] });
    const d = behaviourDifference(gold, gold, wrong);
    expect(d?.variant).toBe('replay::m:half#a');
    expect(d?.call).toEqual({ function: 'm:half', args: '(3,)', kwargs: '{}', gold: 'return 1', candidate: 'return 3' });
    // negative control: the same trace differs nowhere
    expect(behaviourDifference(gold, gold, gold)).toBeNull();
  });

  it('a test of thousands of calls keeps the 50 events around the first difference (a history stays small), the call named from all', () => {
    const many = (k: number) => Array.from({ length: 3000 }, (_, i) => call(`(${i},)`, i === 2000 ? String(k) : '0'));
    const d = behaviourDifference(trace({ t: many(1) }), trace({ t: many(1) }), trace({ t: many(2) }))!;
    expect(d.gold).toHaveLength(50);
    expect(d.gold[5]).toEqual(call('(2000,)', '1'));
    expect(d.candidate![5]).toEqual(call('(2000,)', '2'));
    expect(d.call).toEqual({ function: 'm:half', args: '(2000,)', kwargs: '{}', gold: 'return 1', candidate: 'return 2' });
  });

  it('a replayed call the candidate lacks is no evidence (cut by its time budget); a test variant it lacks is', () => {
    const gold = trace({ 't#pytest': [call('(4,)', '2')], 'replay::m:half#a': [call('(3,)', '1')] });
    expect(behaviourDifference(gold, gold, trace({ 't#pytest': [call('(4,)', '2')] }))).toBeNull();
    expect(behaviourDifference(gold, gold, trace({ 'replay::m:half#a': [call('(3,)', '1')] }))?.variant).toBe('t#pytest');
  });

  it('shows a call only one tree made, and a method object state', () => {
    expect(differingCall([call('(1,)', '0')], [])).toEqual({ function: 'm:half', args: '(1,)', kwargs: '{}', gold: 'return 0', candidate: 'no such call' });
    const m = (r: string) => ['m:Box.take', '(3,)', '{}', 'return', r, "[('n', 2)]"];
    expect(differingCall([m('0')], [m('-1')])?.candidate).toBe("return -1 (state [('n', 2)])");
    expect(differingCall([['timeout']], [['timeout']])).toBeNull();
  });
});

describe('why a test-passing candidate was discarded', () => {
  it('equivalent on every observed call, counting only variants where two gold runs agree', () => {
    const g1 = trace({ a: [call('(4,)', '2'), call('(6,)', '3')], b: [call('(8,)', '4')], flaky: [call('(1,)', '0')] });
    const g2 = trace({ a: [call('(4,)', '2'), call('(6,)', '3')], b: [call('(8,)', '4')], flaky: [call('(1,)', '9')] });
    expect(discardReason([g1, g2], null)).toBe('equivalent on every observed call (3 calls in 2 variants where two gold runs agree)');
  });

  it('no call observed: nothing traced, an import error, tests that never call the changed code', () => {
    expect(discardReason(null, 'the gold patch changes no Python file outside the tests')).toBe('no call observed: the gold patch changes no Python file outside the tests');
    expect(discardReason(null, null)).toBe('no call observed: the gold patch could not be traced');
    const broken = trace({}, 'ImportError: no module named pkg');
    expect(discardReason([broken, broken], null)).toMatch(/^no call observed: importing the changed code failed/);
    const empty = trace({ 't#pytest': [], 'u#0': [['statement', 0, 'AssertionError']] });
    expect(discardReason([empty, empty], null)).toBe('no call observed: the tests made no call into the functions the gold patch changes');
  });

  it('the note lists each discarded candidate with its reason, and nothing when none was', () => {
    expect(discardedNote([
      { id: 'c001', kind: 'mutation', discarded: 'equivalent on every observed call (3 calls in 2 variants where two gold runs agree)' },
      { id: 'c002', kind: 'mutation', discarded: null },
      { id: 'c003', kind: 'format_spec', discarded: 'no call observed: the gold patch could not be traced' },
    ])).toBe('test-passing candidates discarded (2): c001 [mutation] equivalent on every observed call (3 calls in 2 variants where two gold runs agree); c003 [format_spec] no call observed: the gold patch could not be traced');
    expect(discardedNote([{ id: 'c002', kind: 'mutation' }])).toBeNull();
  });
});
