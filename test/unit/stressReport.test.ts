import { describe, expect, it } from 'vitest';
import { formatLayerTable, layerConfig, layersFlag, stressResult, type StressRun } from '../../cli/stress.js';
import { UsageError } from '../../cli/args.js';
import { loadRunConfig } from '../../cli/config.js';
import { parseRunConfig } from '../../core/config.js';
import { renderReportHtml } from '../../report/html.js';
import { NO_DIFFERENCE, lastThirdMean, layerDifferences, stressLayerRow, timeBreakdown } from '../../report/stats.js';
import type { RunSummary, StressLayerRow, UpdateRow } from '../../report/types.js';
import { repoRoot } from '../../infra/settings.js';
import path from 'node:path';

/** `floe stress`'s layer comparison as pure functions over fixture summaries: the rows, the
 *  "no measurable difference" sentences, the rendered figure, the per-layer configs and the
 *  --layers flag. No run, no Postgres (a whole demo run per layer takes half an hour). */

function update(k: number, o: Partial<UpdateRow> = {}): UpdateRow {
  return {
    version: k, createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, 10 * k)).toISOString(), secondsSinceStart: 10 * k, secondsPerUpdate: 10,
    batchRollouts: 32, meanReward: 0.5, discardedStale: 0, updateMs: 4000, trainMs: 3000, publishMs: 200, loadMs: { e0: 500, e1: 700 },
    metrics: null, pool: null, runReward: 0.5, runRollouts: 32, formatValidity: 0.9, turns: 64, ...o,
  };
}

function summary(id: string, rewards: (number | null)[], o: { discarded?: number[]; seconds?: number[]; validity?: number[]; start?: number | null; end?: number | null } = {}): RunSummary {
  const updates = rewards.map((r, i) => update(i + 1, {
    meanReward: r, runReward: r === null ? null : r - 0.01, discardedStale: o.discarded?.[i] ?? 0, secondsPerUpdate: o.seconds?.[i] ?? 10, formatValidity: o.validity?.[i] ?? 0.9,
  }));
  const evaluations: RunSummary['evaluations'] = [];
  if (o.start !== undefined) evaluations.push({ label: 'start', version: 0, k: 4, tasks: 4, poolTasks: 3, pass1: 0.3, passK: 0.6, poolPass1: o.start });
  if (o.end !== undefined) evaluations.push({ label: 'end', version: rewards.length, k: 4, tasks: 4, poolTasks: 3, pass1: 0.7, passK: 0.9, poolPass1: o.end });
  return {
    generatedAt: '2026-01-01T01:00:00.000Z',
    run: { id, name: `stress-${id}`, status: 'completed', config: {}, startedAt: '2026-01-01T00:00:00.000Z', endedAt: '2026-01-01T00:30:00.000Z', durationSeconds: 1800 },
    updates, smoothedReward: rewards, smoothingAlpha: 0.2, staleness: { batch: {}, discarded: {} }, engines: [], inFlight: { updateMode: 'abort', updates: 0, droppedTokensPerUpdate: null, recomputedTokensPerUpdate: null, spanningTurnsPerUpdate: null, stallSecondsPerLoad: null }, gates: [], evictions: [], poolReward: null,
    evaluations,
    evaluationTasks: [],
    epochs: 20,
    timeBreakdown: timeBreakdown({ rollouts: 10, wallMs: 5000, genMs: 2000, toolMs: 1000, gradeMs: 500, graded: 8 }, updates),
    keyNumbers: { updates: rewards.length, finalReward: null, finalRewardSmoothed: null, peakRewardSmoothed: null, peakVersion: null, lastFifthMinSmoothed: null, totalDiscarded: 0, meanSecondsPerUpdate: 10 },
  };
}

const naive = summary('naive', [0.2, 0.25, 0.3, 0.3, 0.35, 0.4], { discarded: [3, 4, 2, 5, 3, 4], seconds: [30, 31, 29, 33, 30, 32], validity: [0.5, 0.5, 0.55, 0.6, 0.6, 0.6], start: 0.3, end: 0.4 });
const gate = summary('gate', [0.3, 0.5, 0.7, 0.8, 0.9, 0.9], { start: 0.3, end: 0.85 });
const raw = summary('raw', [0.3, 0.5, 0.7, 0.8, 0.9, 0.91], { start: 0.31, end: 0.86 });
const full = summary('full', [0.3, 0.6, 0.8, 0.9, 0.95, null], { seconds: [20, 20, 20, 20, 20, 20] });

describe('stress layer rows', () => {
  it('takes each layer\'s series and its last-third mean, start and end pass@1', () => {
    const row = stressLayerRow(naive, 'naive');
    expect(row).toMatchObject({ label: 'naive', runId: 'naive', startPass1: 0.3, endPass1: 0.4 });
    expect(row.rewards).toEqual([0.2, 0.25, 0.3, 0.3, 0.35, 0.4]);
    expect(row.runRewards[0]).toBeCloseTo(0.19, 12);
    expect(row.formatValidity).toEqual([0.5, 0.5, 0.55, 0.6, 0.6, 0.6]);
    expect(row.discarded).toEqual([3, 4, 2, 5, 3, 4]);
    expect(row.secondsPerUpdate).toEqual([30, 31, 29, 33, 30, 32]);
    expect(row.lastThirdMean).toBeCloseTo(0.375, 12);
    // a missing update reward is skipped, not counted as 0; no evaluation → null
    const f = stressLayerRow(full, 'full');
    expect(f.lastThirdMean).toBeCloseTo(0.95, 12);
    expect(f.startPass1).toBeNull();
    expect(f.endPass1).toBeNull();
    expect(lastThirdMean([])).toBeNull();
    expect(lastThirdMean([1, 0, 0, 0])).toBe(0); // ceil(4 / 3) = 2 last values
    expect(lastThirdMean([0.5])).toBe(0.5);
  });

  it('says when a layer makes no measurable difference, and what it changes otherwise', () => {
    const rows = [stressLayerRow(naive, 'naive'), stressLayerRow(gate, 'gate'), stressLayerRow(raw, 'raw'), stressLayerRow(full, 'full')];
    const d = layerDifferences(rows);
    expect(d.map((x) => [x.from, x.to, x.measurable])).toEqual([['naive', 'gate', true], ['gate', 'raw', false], ['raw', 'full', true]]);
    expect(d[0].delta).toBeCloseTo(0.9 - 0.375, 12);
    expect(d[0].sentence).toBe('layer gate raises the last-third mean reward over naive: 0.375 → 0.900 (+0.525)');
    expect(d[1].sentence).toBe(`layer raw makes no measurable difference on this policy: 0.900 vs 0.905 (last-third mean reward, gate vs raw; |Δ| < ${NO_DIFFERENCE})`);
    expect(layerDifferences([rows[2], rows[0]])[0].sentence).toMatch(/^layer naive lowers the last-third mean reward over raw: 0\.905 → 0\.375 \(−0\.530\)$/);
    expect(layerDifferences([rows[0]])).toEqual([]);
    const none: StressLayerRow = { ...rows[0], label: 'empty', rewards: [], lastThirdMean: null };
    expect(layerDifferences([rows[0], none])[0]).toMatchObject({ measurable: false, delta: null });
    expect(layerDifferences([rows[0], none])[0].sentence).toMatch(/not comparable/);
  });

  it('renders one figure with four charts, one line per layer, a table and the sentences', () => {
    const rows = [stressLayerRow(naive, 'naive'), stressLayerRow(gate, 'gate'), stressLayerRow(raw, 'raw'), stressLayerRow(full, 'full')];
    const html = renderReportHtml({ ...naive, layers: rows });
    const fig = html.match(/<figure class="plot wide" id="fig-layers">([\s\S]*?)<\/figure>/)?.[1] ?? '';
    expect(fig).toContain('Recipe layers side by side');
    const charts = fig.match(/<svg [\s\S]*?<\/svg>/g) ?? [];
    expect(charts).toHaveLength(4);
    for (const [c, label] of charts.map((c, i) => [c, ['batch reward per update', 'raw-format validity per update', 'discarded rollouts per update', 'seconds per update'][i]] as const)) {
      expect(c).toContain(`aria-label="${label}"`);
      // one path per layer (legend entries name them)
      expect((c.match(/<path /g) ?? []).length).toBe(4);
      for (const l of ['naive', 'gate', 'raw', 'full']) expect(c).toContain(`>${l}</text>`);
    }
    const table = fig.match(/<table>([\s\S]*?)<\/table>/)?.[1] ?? '';
    expect((table.match(/<tr>/g) ?? []).length).toBe(5);
    expect(table).toContain('<td>naive</td><td><code>naive</code></td><td class="num">6</td><td class="num">0.375</td><td class="num">0.300</td><td class="num">0.400</td>');
    expect(table).toContain('<td>full</td><td><code>full</code></td><td class="num">6</td><td class="num">0.950</td><td class="num">–</td><td class="num">–</td>');
    expect(fig).toContain('layer raw makes no measurable difference on this policy: 0.900 vs 0.905');
    expect(fig).toContain('<figcaption>');
    // without layers, no such figure
    expect(renderReportHtml(naive)).not.toContain('fig-layers');
  });

  it('draws the time breakdown as a stacked bar of measured parts and the remainder', () => {
    const html = renderReportHtml(naive);
    const fig = html.match(/<figure class="plot[^"]*" id="fig-time-breakdown">([\s\S]*?)<\/figure>/)?.[1] ?? '';
    expect(fig).toContain('train rollout (mean of 10)');
    expect(fig).toContain('weight update (mean of 6)');
    expect(fig).toContain('sandbox preparation, diff, Temporal and Postgres waits (not measured apart)');
    expect(fig).toMatch(/train rollout \(mean of 10\) — generation: 2 s/);
    expect(fig).toMatch(/— sandbox prep, diff, Temporal\/Postgres waits: 1\.5 s/);
    expect(fig).toMatch(/weight update \(mean of 6\) — weight load \(slowest engine\): 0\.7 s/);
    expect(naive.timeBreakdown).toMatchObject({ wallSeconds: 5, generationSeconds: 2, toolSeconds: 1, gradingSeconds: 0.5, otherSeconds: 1.5, meanTrainSeconds: 3, meanWeightLoadSeconds: 0.6 });
    // no grading duration recorded → null, not 0
    expect(timeBreakdown({ rollouts: 3, wallMs: 1000, genMs: 400, toolMs: 100, gradeMs: 0, graded: 0 }, []).gradingSeconds).toBeNull();
    expect(timeBreakdown({ rollouts: 3, wallMs: 1000, genMs: 400, toolMs: 100, gradeMs: 0, graded: 0 }, []).otherSeconds).toBeCloseTo(0.5, 12);
  });
});

describe('floe stress configs and flags', () => {
  const base = loadRunConfig(path.join(repoRoot, 'configs', 'stress-test.yaml'));

  it('applies each preset and keeps the seed, the pool and the budget', () => {
    const cfgs = (['naive', 'gate', 'raw', 'full'] as const).map((l) => layerConfig(base, l));
    expect(cfgs.map((c) => c.name)).toEqual(['stress-naive', 'stress-gate', 'stress-raw', 'stress-full']);
    expect(cfgs.map((c) => [c.recipe.rewardGate, c.recipe.explicitSubmit, c.recipe.rawFormatCheck, c.recipe.cacheRebuild, c.engines.router])).toEqual([
      [false, false, false, false, 'sticky'], [true, true, false, false, 'sticky'], [true, true, true, false, 'sticky'], [true, true, true, true, 'least-loaded'],
    ]);
    for (const c of cfgs) {
      expect(c.seed).toBe(base.seed);
      expect(c.tasks).toEqual(base.tasks);
      expect(c.training).toEqual(base.training);
      expect(c.rollout).toEqual(base.rollout);
      expect(c.evaluation).toEqual(base.evaluation);
      expect(c.policy).toEqual(base.policy);
      expect(parseRunConfig(c)).toEqual(c);
    }
  });

  it('pins the later layers to the first layer\'s pool and starting checkpoint', () => {
    const c = layerConfig(base, 'gate', { checkpoint: '/x/warm.pt', pool: ['toy-a', 'toy-b'] });
    expect(c.tasks.include).toEqual(['toy-a', 'toy-b']);
    expect(c.policy.checkpoint).toBe('/x/warm.pt');
    expect(c.evaluation).toEqual({ ...base.evaluation, poolFromStart: false });
    expect(c.training).toEqual(base.training);
    expect(c.name).toBe('stress-gate');
  });

  it('parses --layers, naming the valid layers on a bad value', () => {
    expect(layersFlag(undefined)).toEqual(['naive', 'gate', 'raw', 'full']);
    expect(layersFlag('full,naive')).toEqual(['full', 'naive']);
    expect(() => layersFlag('naive,fast')).toThrow(UsageError);
    expect(() => layersFlag('naive,fast')).toThrow(/unknown layer "fast".*naive, gate, raw, full/);
    expect(() => layersFlag('gate,gate')).toThrow(/named twice \(the layers are naive, gate, raw, full\)/);
    expect(() => layersFlag('')).toThrow(/naive, gate, raw, full/);
  });

  it('writes stress.json rows, last-third means and minutes per layer, and prints the table', () => {
    const rows = [stressLayerRow(naive, 'naive'), stressLayerRow(gate, 'gate')];
    const runs: StressRun[] = [{ label: 'naive', runId: 'naive', dir: path.join(repoRoot, 'runs', 'naive'), ok: false, minutes: 28.5 }, { label: 'gate', runId: 'gate', dir: path.join(repoRoot, 'runs', 'gate'), ok: true, minutes: 27 }];
    const r = stressResult({ command: 'floe stress --layers naive,gate', configFile: 'configs/stress-test.yaml', sets: [], startedAt: '2026-01-01T00:00:00.000Z', runs, rows, summaries: [naive, gate], pin: null, report: 'runs/stress-x/report.html' });
    expect(r.command).toBe('floe stress --layers naive,gate');
    expect(r.layers).toEqual(['naive', 'gate']);
    expect(r.lastThirdMeans.naive).toBeCloseTo(0.375, 12);
    expect(r.lastThirdMeans.gate).toBeCloseTo(0.9, 12);
    expect(r.minutesPerLayer).toEqual({ naive: 28.5, gate: 27 });
    expect(r.runs[1]).toEqual({ label: 'gate', runId: 'gate', status: 'completed', verdictPass: true, minutes: 27, report: 'runs/gate/report.html' });
    expect(r.rows).toBe(rows);
    expect(r.differences[0].measurable).toBe(true);
    const table = formatLayerTable(rows, runs);
    expect(table.split('\n')).toHaveLength(4);
    expect(table).toMatch(/naive +6 +0\.375 +0\.300 +0\.400 +3\.5 +30\.8 +28\.5 +naive/);
    expect(table).toContain('layer gate raises the last-third mean reward over naive');
  });
});
