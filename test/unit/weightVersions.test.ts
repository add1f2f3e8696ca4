import { describe, expect, it } from 'vitest';
import { abortedByUpdate, attribute, emptyTurn, extendTurn, labelsAgree, labelVersion, resubmission, servable, spanVersions, switchPoints } from '../../core/weightVersions.js';

/** The pure rules of floe-owned weight versions (core/weightVersions.ts), without Temporal. */

describe('attribute: which version made an answered request\'s ids', () => {
  const sent = { version: 3, epoch: 6 };
  it('no update meanwhile: the version it was sent under, whatever the finish', () => {
    for (const f of ['stop', 'length', 'abort'] as const) expect(attribute(sent, 6, f)).toEqual({ keep: true, version: 3 });
  });
  it('aborted by one update (begun, or begun and ended): the old version', () => {
    expect(attribute(sent, 7, 'abort')).toEqual({ keep: true, version: 3 });
    expect(attribute(sent, 8, 'abort')).toEqual({ keep: true, version: 3 });
  });
  it('finished while an update had begun but not ended: it finished before the pause, old version', () => {
    expect(attribute(sent, 7, 'stop')).toEqual({ keep: true, version: 3 });
  });
  it('finished across a whole update: cannot tell old from new, dropped', () => {
    expect(attribute(sent, 8, 'stop')).toEqual({ keep: false, reason: 'ambiguous' });
    expect(attribute(sent, 8, 'length')).toEqual({ keep: false, reason: 'ambiguous' });
  });
  it('aborted after more than one update: dropped', () => {
    expect(attribute(sent, 9, 'abort')).toEqual({ keep: false, reason: 'spanned_updates' });
  });
  it('an epoch that went backwards is an error, not a guess', () => {
    expect(() => attribute(sent, 5, 'stop')).toThrow(/backwards/);
  });
});

describe('resubmission from the exact prefix', () => {
  it('sends the prompt plus every id kept so far, asking for what is left of the budget', () => {
    let t = extendTurn(emptyTurn(), [11, 12], [-0.5, -0.25], 3);
    expect(resubmission([1, 2, 3], t, 10)).toEqual({ promptIds: [1, 2, 3, 11, 12], maxTokens: 8 });
    t = extendTurn(t, [13], [-1], 4);
    expect(t).toEqual({ ids: [11, 12, 13], logprobs: [-0.5, -0.25, -1], versions: [3, 3, 4] });
    expect(resubmission([1], t, 3).maxTokens).toBe(0);
  });
  it('takes an engine\'s own per-token versions, and refuses mismatched lengths', () => {
    expect(extendTurn(emptyTurn(), [5, 6], [-1, -2], [1, 2]).versions).toEqual([1, 2]);
    expect(() => extendTurn(emptyTurn(), [5, 6], [-1], 1)).toThrow(/one log-prob per generated id/);
    expect(() => extendTurn(emptyTurn(), [5, 6], [-1, -2], [1])).toThrow(/weight versions/);
  });
  it('only a serving engine takes requests', () => {
    expect(['serving', 'updating', 'unknown', 'resyncing'].filter((s) => servable(s as never))).toEqual(['serving']);
  });
});

describe('labelsAgree: the server\'s own weight-version labels against floe\'s record', () => {
  it('a loaded version is labelled String(version); the launch weights carry any label', () => {
    expect(labelsAgree(3, ['3'])).toBe(true);
    expect(labelsAgree(3, null)).toBe(true);
    expect(labelsAgree(3, [])).toBe(true);
    expect(labelsAgree(0, ['default'])).toBe(true);
  });
  it('a restarted server answers with its launch label: disagreement', () => {
    expect(labelsAgree(3, ['default'])).toBe(false);
    expect(labelsAgree(3, ['3', '4'])).toBe(false);
  });
});

describe('abortedByUpdate: which aborts are resubmitted', () => {
  it('an abort while an update began is resubmitted; an abort with no update is the turn\'s ending', () => {
    expect(abortedByUpdate(4, 5, 'abort')).toBe(true);
    expect(abortedByUpdate(4, 6, 'abort')).toBe(true);
    expect(abortedByUpdate(4, 4, 'abort')).toBe(false);
    expect(abortedByUpdate(4, 5, 'stop')).toBe(false);
  });
});

describe('per-token versions from a server\'s weight-version spans (engines.updateMode keep)', () => {
  const span = (label: string, start: number, end: number) => ({ label, start, end });
  it('a label floe set is its version; any other label is the launch weights', () => {
    expect(labelVersion('3')).toBe(3);
    expect(labelVersion('default')).toBe(0);
    expect(labelVersion('v3')).toBe(0);
  });
  it('a request that ran through an update: the ids before the switch are the old version, after it the new one', () => {
    const v = spanVersions([span('1', 0, 3), span('2', 3, 5)], 5, 1);
    expect(v).toEqual([1, 1, 1, 2, 2]);
    expect(switchPoints(v!)).toEqual([3]);
  });
  it('a request queued through the update is all the new version', () => {
    expect(spanVersions([span('2', 0, 4)], 4, 1)).toEqual([2, 2, 2, 2]);
  });
  it('spans that do not cover the ids, go backwards, or name weights before the sent version are not trusted', () => {
    expect(spanVersions([span('1', 0, 3)], 5, 1)).toBeNull(); // short
    expect(spanVersions([span('1', 0, 2), span('1', 3, 5)], 5, 1)).toBeNull(); // a gap
    expect(spanVersions([span('2', 0, 2), span('1', 2, 5)], 5, 1)).toBeNull(); // backwards
    expect(spanVersions([span('default', 0, 5)], 5, 3)).toBeNull(); // a restarted server's launch label
    expect(spanVersions([span('default', 0, 5)], 5, 0)).toEqual([0, 0, 0, 0, 0]); // the launch weights are version 0
    expect(spanVersions([], 0, 2)).toEqual([]);
  });
  it('one version: no switch point', () => {
    expect(switchPoints([4, 4, 4])).toEqual([]);
    expect(switchPoints([])).toEqual([]);
  });
});
