import { histogramKeys, layerDifferences } from './stats.js';
import { PALETTE, barChart, esc, fmtNum, hBarChart, lineChart, stackedAreaChart, stackedHBarChart, type Point } from './svg.js';
import type { RunSummary, StressLayerRow, UpdateRow } from './types.js';
import { SHORTCUT_FLAGS, type ShortcutFlag } from '../core/shortcuts.js';

/** One plot of the report: a chart plus the one line that says what it shows. */
export interface Figure {
  id: string;
  title: string;
  body: string;
  caption: string;
  wide?: boolean;
}

/** Drawing width of a full-width chart: the page's content width, so it is not scaled. */
const WIDE = 1170;

const series = (updates: UpdateRow[], pick: (u: UpdateRow) => number | null | undefined): Point[] =>
  updates.map((u) => [u.version, pick(u) ?? null]);

/** Every plot of the page, in reading order. Paired so the two-column grid stays even:
 *  a plot without a partner, and the tables, take the full width. */
export function reportFigures(s: RunSummary): Figure[] {
  const figs = [...(s.updates.length ? updateFigures(s) : []), timeBreakdownFigure(s), ...runFigures(s), engineFigure(s)];
  if (s.evaluationTasks?.some((e) => e.label === 'start' || e.label === 'end') || s.evaluations?.some((e) => e.label === 'start' || e.label === 'end')) figs.push(evaluationFigure(s));
  if (s.evaluations?.some((e) => e.label === 'periodic' || e.label === 'retired')) figs.push(periodicFigure(s));
  if (s.layers?.length) figs.push(layersFigure(s.layers));
  if (s.comparison?.length) figs.push(comparisonFigure(s));
  return figs;
}

/** Plots that need at least one update; the page says "no updates yet" instead. */
function updateFigures(s: RunSummary): Figure[] {
  const u = s.updates;
  const smoothed: Point[] = u.map((x, i) => [x.version, s.smoothedReward[i]]);
  const alone = !s.poolReward?.some((p) => p.reward !== null);
  const figs: Figure[] = [{
    id: 'reward',
    title: 'Training reward per update',
    body: lineChart({
      label: 'training reward per update', xLabel: 'policy version', yLabel: 'mean batch reward', y: [0, 1], integerX: true,
      // Full-width when it has no partner: drawn wider, not scaled up (text keeps its size).
      width: alone ? WIDE : undefined, height: alone ? 300 : undefined,
      lines: [
        { name: 'batch mean (raw)', points: series(u, (x) => x.meanReward), style: 'faint', color: PALETTE[0] },
        { name: `EMA (α = ${s.smoothingAlpha})`, points: smoothed, style: 'bold', color: PALETTE[0] },
        { name: 'all rollouts run in the window', points: series(u, (x) => x.runReward), style: 'dashed', color: PALETTE[1] },
      ],
    }),
    caption: `Mean reward of the rollouts each update trained on (faint) and its exponential moving average (bold, α = ${s.smoothingAlpha}); dashed: mean reward of every train rollout that ended since the previous update, trained on or discarded as stale (infrastructure failures left out) — the training reward over the rollouts actually run. Retired tasks are not in these batches.`,
    wide: alone,
  }];

  if (s.poolReward?.some((p) => p.reward !== null)) {
    figs.push({
      id: 'pool-reward',
      title: 'Pool-wide reward',
      body: lineChart({
        label: 'pool-wide reward per update', xLabel: 'policy version', yLabel: 'mean task score', y: [0, 1], integerX: true,
        lines: [
          { name: 'pool-wide (retired tasks by latest recheck)', points: s.poolReward.map((p) => [p.version, p.reward]), style: 'bold', color: PALETTE[4] },
          { name: 'training reward EMA', points: smoothed, style: 'dashed', color: PALETTE[0] },
        ],
      }),
      caption: 'Mean over the task pool of each task\'s score after the update: active tasks by their last 8 trained attempts, retired tasks by their latest recheck; tasks not yet attempted or rechecked are left out, never counted as solved.',
    });
  }

  figs.push({
    id: 'discarded',
    title: 'Discarded rollouts per update',
    body: barChart({
      label: 'discarded rollouts per update', xLabel: 'policy version', yLabel: 'rollouts discarded',
      categories: u.map((x) => String(x.version)),
      series: [{ name: 'discarded as stale', values: u.map((x) => x.discardedStale ?? 0), color: PALETTE[2] }],
    }),
    caption: 'Rollouts thrown away as older than the off-policy bound since the previous update: generation spent that training never used.',
  }, {
    id: 'time',
    title: 'Time per update',
    body: lineChart({
      label: 'time per update', xLabel: 'policy version', yLabel: 'seconds', integerX: true,
      lines: [
        { name: 'wall time between updates', points: series(u, (x) => x.secondsPerUpdate), style: 'bold', color: PALETTE[0] },
        { name: 'weight update (train → engines serving)', points: series(u, (x) => (x.updateMs === null ? null : x.updateMs / 1000)), color: PALETTE[1] },
        { name: 'train step', points: series(u, (x) => (x.trainMs === null ? null : x.trainMs / 1000)), style: 'dashed', color: PALETTE[3] },
      ],
    }),
    caption: 'Seconds from one update to the next, against the time the weight update itself took; a gap between them is time spent waiting for a full batch.',
  }, {
    id: 'mismatch',
    title: 'Engine vs trainer mismatch',
    body: lineChart({
      label: 'engine vs trainer logprob mismatch', xLabel: 'policy version', yLabel: 'mean |Δ logprob| (log scale)', yScale: 'log', integerX: true,
      emptyText: 'no mismatch measured',
      lines: [
        { name: 'numerics: tokens of the trainer\'s own version', points: series(u, (x) => measured(x.metrics?.mismatch_current_mean_abs_logprob)), style: 'bold', color: PALETTE[6] },
        { name: 'off-policy gap: tokens of older versions', points: series(u, (x) => measured(x.metrics?.offpolicy_mean_abs_logprob)), style: 'dashed', color: PALETTE[1] },
        { name: 'all trained tokens (mixed)', points: series(u, (x) => num(x.metrics?.mismatch_mean_abs_logprob)), style: 'faint', color: PALETTE[9] },
        { name: 'KL(engine ‖ trainer), mixed', points: series(u, (x) => num(x.metrics?.mismatch_kl)), color: PALETTE[8] },
      ],
    }),
    caption: 'Mean |Δ logprob| between what the engines sampled with and what the trainer recomputes, each update (log scale). Numerics alone is measured on tokens generated by the version the trainer holds; the off-policy gap, on tokens of older versions, is the staleness the run allows, not a numerics error. Updates with no such tokens have no point.',
  }, {
    id: 'pool-sizes',
    title: 'Task pool',
    body: stackedAreaChart({
      label: 'task pool sizes per update', xLabel: 'policy version', yLabel: 'tasks', integerX: true,
      emptyText: 'no pool sizes recorded',
      stacked: [
        { name: 'active', points: series(u, (x) => x.pool?.active), color: PALETTE[0] },
        { name: 'retired mastered', points: series(u, (x) => x.pool?.retired_mastered), color: PALETTE[4] },
        { name: 'retired hopeless', points: series(u, (x) => x.pool?.retired_hopeless), color: PALETTE[9] },
      ],
      lines: [{ name: 'revived', points: series(u, (x) => x.pool?.revived), color: PALETTE[2], style: 'bold' }],
    }),
    caption: 'Tasks in training (active) and retired as mastered or hopeless after each update\'s eviction pass, stacked; the line counts revived tasks (rechecks that regressed).',
  }, {
    id: 'format-validity',
    title: 'Raw-format validity of turns',
    body: lineChart({
      label: 'raw-format validity per update', xLabel: 'policy version', yLabel: 'share of turns', y: [0, 1], integerX: true,
      emptyText: 'no turns recorded',
      lines: [{ name: 'turns passing the raw-format check', points: series(u, (x) => x.formatValidity), style: 'bold', color: PALETTE[3] }],
    }),
    caption: 'Share of the train turns written since the previous update whose raw output passed the raw-format check (turns.format_ok; recorded for every turn, also when the check does not decide what runs).',
  }, {
    id: 'shortcuts',
    title: 'Shortcut attempts per update',
    body: lineChart({
      label: 'shortcut share per update', xLabel: 'policy version', yLabel: 'share of rollouts', y: [0, 1], integerX: true,
      emptyText: 'no train rollout ended',
      lines: SHORTCUT_FLAGS.map((f, i) => ({ name: SHORTCUT_NAMES[f], points: series(u, (x) => x.shortcutShare?.[f] ?? null), style: i === 0 ? 'bold' as const : undefined, color: PALETTE[[1, 2, 6][i]] })),
    }),
    caption: 'Share of the train rollouts that ended since the previous update with at least one command of each kind of shortcut (core/shortcuts.ts). The sandboxes are locked, so an attempt finds nothing (test/lockedDoors.test.ts); a rising line is a policy learning to look for the answer instead of writing the fix (the published 9B run without history pruning went from about 5% to 99% digging into history within 200 steps).',
  });
  return figs;
}

const SHORTCUT_NAMES: Record<ShortcutFlag, string> = { git_history: 'git history', network: 'network', hidden_tests: 'hidden tests' };

/** Where a train rollout's wall time goes, and the weight update's stages. */
function timeBreakdownFigure(s: RunSummary): Figure {
  const t = s.timeBreakdown;
  const f = (v: number) => `${fmtNum(v)} s`;
  const rows: { label: string; values: (number | null)[]; note?: string }[] = [];
  if (t && t.rollouts > 0) rows.push({ label: `train rollout (mean of ${t.rollouts})`, values: [t.generationSeconds, t.toolSeconds, t.gradingSeconds, t.otherSeconds, null, null, null] });
  const upd = t?.perUpdate.filter((p) => p.updateSeconds !== null || p.trainSeconds !== null) ?? [];
  if (t && upd.length) {
    const slowest = mean0(upd.map((p) => p.slowestLoadSeconds));
    const train = t.meanTrainSeconds;
    const update = mean0(upd.map((p) => p.updateSeconds));
    const rest = update === null ? null : update - (train ?? 0) - (slowest ?? 0);
    rows.push({ label: `weight update (mean of ${upd.length})`, values: [null, null, null, null, train, slowest, rest] });
  }
  const grading = t?.gradingSeconds === null ? 'grading: no duration recorded' : `grading (${t?.graded ?? 0} graded)`;
  const body = stackedHBarChart({
    label: 'time breakdown', valueLabel: 'seconds (mean)', format: f, width: WIDE / 2 - 40, emptyText: 'no finished train rollout yet',
    segments: [
      { name: 'generation', color: PALETTE[0] },
      { name: 'tool execution', color: PALETTE[3] },
      { name: grading, color: PALETTE[4] },
      { name: 'sandbox prep, diff, Temporal/Postgres waits', color: PALETTE[9] },
      { name: 'train step (incl. publish)', color: PALETTE[1] },
      { name: 'weight load (slowest engine)', color: PALETTE[6] },
      { name: 'claim, scheduling (not measured apart)', color: PALETTE[5] },
    ],
    rows,
  });
  const n = (v: number | null | undefined) => (v === null || v === undefined ? '–' : fmtNum(v));
  const table = t ? `<table class="compact"><thead><tr><th>part</th><th class="num">mean s</th></tr></thead><tbody>${
    ([
      ['train rollout wall time (ended − started)', t.wallSeconds],
      ['generation (sum of gen_ms)', t.generationSeconds],
      ['tool execution (sum of tool_ms)', t.toolSeconds],
      [`grading (grader durationMs; 0 when not graded)`, t.gradingSeconds],
      [t.otherLabel, t.otherSeconds],
      ['train step per update', t.meanTrainSeconds],
      ['weight load per update (mean over engines)', t.meanWeightLoadSeconds],
      ['weight update per update (train step → every engine serving)', t.meanUpdateSeconds],
    ] as [string, number | null][]).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${esc(n(v))}</td></tr>`).join('')
  }</tbody></table>` : '';
  return {
    id: 'time-breakdown',
    title: 'Where the time goes',
    wide: !s.updates.length,
    body: body + table,
    caption: `Mean seconds of a finished train rollout: generation and tool execution as the turns recorded them, grading as the grader timed it, and the rest of its wall time — ${t?.otherLabel ?? 'not measured apart'} — as one remainder; below, the weight update's train step and slowest engine load. Measured figures only.`,
  };
}

/** Frozen-weight pass@1 per task at the start and at the end, with the pool means. */
function evaluationFigure(s: RunSummary): Figure {
  const tasks = [...new Set(s.evaluationTasks.filter((e) => e.label === 'start' || e.label === 'end').map((e) => e.taskId))];
  const byLabel = (label: 'start' | 'end') => new Map(s.evaluationTasks.filter((e) => e.label === label).map((e) => [e.taskId, e]));
  const start = byLabel('start');
  const end = byLabel('end');
  const chart = barChart({
    label: 'frozen-weight pass@1 per task', xLabel: 'task', yLabel: 'pass@1', emptyText: 'no per-task evaluation rows',
    categories: tasks.map((t, i) => String(i + 1)),
    series: [
      { name: 'start', values: tasks.map((t) => start.get(t)?.pass1 ?? 0), color: PALETTE[9] },
      { name: 'end', values: tasks.map((t) => end.get(t)?.pass1 ?? 0), color: PALETTE[4] },
    ],
  });
  const p = (v: number | null | undefined) => (v === null || v === undefined ? '–' : v.toFixed(3));
  const means = `<table class="compact"><thead><tr><th>evaluation</th><th class="num">version</th><th class="num">k</th><th class="num">tasks</th><th class="num">pool tasks</th><th class="num">pass@1</th><th class="num">pass@k</th><th class="num">pool pass@1</th></tr></thead><tbody>${
    s.evaluations.map((e) => `<tr><td>${esc(e.label)}</td><td class="num">${e.version}</td><td class="num">${e.k}</td><td class="num">${e.tasks}</td><td class="num">${e.poolTasks}</td><td class="num">${p(e.pass1)}</td><td class="num">${p(e.passK)}</td><td class="num">${p(e.poolPass1)}</td></tr>`).join('')
  }</tbody></table>`;
  const perTask = `<table class="compact"><thead><tr><th class="num">#</th><th>task</th><th>in pool</th><th class="num">start pass@1</th><th class="num">end pass@1</th><th class="num">Δ</th></tr></thead><tbody>${
    tasks.map((t, i) => {
      const a = start.get(t);
      const b = end.get(t);
      const d = a && b ? b.pass1 - a.pass1 : null;
      return `<tr><td class="num">${i + 1}</td><td><code>${esc(t)}</code></td><td>${(a ?? b)?.inPool ? 'yes' : 'no'}</td><td class="num">${p(a?.pass1)}</td><td class="num">${p(b?.pass1)}</td><td class="num">${d === null ? '–' : `${d < 0 ? '−' : '+'}${Math.abs(d).toFixed(3)}`}</td></tr>`;
    }).join('')
  }</tbody></table>`;
  const k = s.evaluations[0]?.k;
  return {
    id: 'evaluation',
    title: 'Pass@1 with frozen weights: start vs end',
    wide: true,
    body: `<div class="split"><div>${chart}${means}</div>${perTask}</div>`,
    caption: `Each task attempted ${k ?? 'k'} times with the weights frozen (no update in between), with the starting and with the final policy; pass@1 and pass@k are the unbiased estimators, attempts lost to infrastructure left out. Pool pass@1 averages the tasks the run trained on.`,
  };
}

/** Periodic frozen-weight evaluations inside the run (evaluation.every): held-out tasks, and the
 *  tasks retired as mastered so far (the forgetting check), beside the training reward. */
function periodicFigure(s: RunSummary): Figure {
  const at = (label: string): Point[] => s.evaluations.filter((e) => e.label === label).map((e) => [e.version, e.pass1]);
  const smoothed: Point[] = s.updates.map((x, i) => [x.version, s.smoothedReward[i]]);
  return {
    id: 'periodic-evaluation',
    title: 'Held-out and retired tasks, frozen weights, during training',
    body: lineChart({
      label: 'periodic frozen-weight evaluations', xLabel: 'policy version', yLabel: 'pass@1 / reward', y: [0, 1], integerX: true,
      lines: [
        { name: 'training reward (EMA)', points: smoothed, style: 'dashed', color: PALETTE[0] },
        { name: 'held-out tasks, pass@1', points: at('periodic'), style: 'bold', color: PALETTE[2] },
        { name: 'tasks ever retired as mastered, pass@1', points: at('retired'), style: 'bold', color: PALETTE[4] },
      ],
    }),
    caption: `Every evaluation.every updates the loop stops starting updates and scores, with the weights just landed (k = ${s.evaluations.find((e) => e.label === 'periodic' || e.label === 'retired')?.k ?? 'k'} attempts each), the held-out tasks training never sees and every task eviction has retired as mastered so far (revived ones included). Training reward counts only the tasks still trained on; a falling retired line is forgetting that reward hides.`,
  };
}

/** The recipe ablation (floe stress): every layer's curves side by side, and what each adds. */
function layersFigure(rows: StressLayerRow[]): Figure {
  const small = (label: string, yLabel: string, pick: (r: StressLayerRow) => (number | null)[], y?: [number, number]) => lineChart({
    label, xLabel: 'update', yLabel, integerX: true, width: 360, height: 240, y,
    lines: rows.map((r, i) => ({ name: r.label, points: pick(r).map((v, k): Point => [k + 1, v]), style: 'bold' as const, color: PALETTE[i % PALETTE.length] })),
  });
  const p = (v: number | null) => (v === null ? '–' : v.toFixed(3));
  const table = `<table><thead><tr><th>layer</th><th>run</th><th class="num">updates</th><th class="num">last-third mean reward</th><th class="num">pass@1 start</th><th class="num">pass@1 end</th><th class="num">discarded / update</th><th class="num">s / update</th></tr></thead><tbody>${
    rows.map((r) => `<tr><td>${esc(r.label)}</td><td><code>${esc(r.runId)}</code></td><td class="num">${r.rewards.length}</td><td class="num">${p(r.lastThirdMean)}</td><td class="num">${p(r.startPass1)}</td><td class="num">${p(r.endPass1)}</td><td class="num">${esc(r.discarded.length ? fmtNum(r.discarded.reduce((a, b) => a + b, 0) / r.discarded.length) : '–')}</td><td class="num">${esc(r.secondsPerUpdate.length ? fmtNum(r.secondsPerUpdate.reduce((a, b) => a + b, 0) / r.secondsPerUpdate.length) : '–')}</td></tr>`).join('')
  }</tbody></table>`;
  const diffs = layerDifferences(rows);
  const sentences = diffs.length ? `<ul class="findings">${diffs.map((d) => `<li>${esc(d.sentence)}</li>`).join('')}</ul>` : '';
  return {
    id: 'layers',
    title: 'Recipe layers side by side',
    wide: true,
    body: `${table}${sentences}<div class="row4">${
      small('batch reward per update', 'mean batch reward', (r) => r.rewards, [0, 1])}${
      small('raw-format validity per update', 'share of turns', (r) => r.formatValidity, [0, 1])}${
      small('discarded rollouts per update', 'rollouts discarded', (r) => r.discarded)}${
      small('seconds per update', 'seconds', (r) => r.secondsPerUpdate)}</div>`,
    caption: 'The same pool, seed and rollout budget under each layer of the recipe, one run after the other: batch reward, the share of turns whose raw output passes the format check, stale rollouts discarded and wall time, per update. Last-third mean: the mean batch reward over the last ceil(n/3) updates.',
  };
}

/** Plots that make sense before the first update too. */
function runFigures(s: RunSummary): Figure[] {
  const keys = histogramKeys(s.staleness.batch, s.staleness.discarded);
  const total = s.gates.reduce((a, g) => a + g.rollouts, 0);
  const figs: Figure[] = [{
    id: 'staleness',
    title: 'Staleness distribution',
    body: barChart({
      label: 'rollout staleness histogram', xLabel: 'staleness (policy versions behind)', yLabel: 'rollouts', categories: keys,
      series: [
        { name: 'trained on', values: keys.map((k) => s.staleness.batch[k] ?? 0), color: PALETTE[0] },
        { name: 'discarded', values: keys.map((k) => s.staleness.discarded[k] ?? 0), color: PALETTE[2] },
      ],
    }),
    caption: 'How many policy versions old each rollout was when collected, for rollouts that went into a batch and for those discarded as stale.',
  }, {
    id: 'gates',
    title: 'Reward gate reasons',
    body: hBarChart({
      label: 'reward gate decisions by reason', valueLabel: 'train rollouts',
      rows: s.gates.map((g) => ({ label: g.gate, value: g.rollouts, color: gateColor(g.gate), note: total ? `(${((100 * g.rollouts) / total).toFixed(1)}%)` : undefined })),
    }),
    caption: 'How the reward gate ended each train rollout: passed, failing hidden tests, or cut off by format, duplicate call, budget or missing submit.',
  }];
  return figs;
}

/** Placements per update window per engine, or, before the first update, the totals. */
function engineFigure(s: RunSummary): Figure {
  const u = s.updates;
  const chart = u.length
    ? lineChart({
      label: 'placements per engine per update', xLabel: 'policy version', yLabel: 'generation requests placed', integerX: true,
      emptyText: 'no placements recorded',
      lines: s.engines.map((e, i) => ({ name: e.engineId, points: e.placementsPerUpdate.map((n, k): Point => [u[k].version, n]), color: PALETTE[i % PALETTE.length] })),
    })
    : barChart({
      label: 'placements per engine', xLabel: 'engine', yLabel: 'generation requests placed', emptyText: 'no placements recorded',
      categories: s.engines.map((e) => e.engineId), series: [{ name: 'placements', values: s.engines.map((e) => e.placements) }],
    });
  return {
    id: 'engine-load',
    title: 'Load per engine',
    wide: true,
    body: `<div class="split">${chart}${engineTable(s)}</div>${inFlightTable(s)}`,
    caption: u.length
      ? 'Generation requests the router placed on each engine between consecutive updates; under least-loaded placement the lines stay close together. Below: what the updates cost the requests in flight under the run\'s engines.updateMode (ids thrown away, ids whose K/V a server computed again, turns that ran through an update, how long a paused engine stood still per load).'
      : 'Generation requests the router placed on each engine so far.',
  };
}

function comparisonFigure(s: RunSummary): Figure {
  const rows = s.comparison ?? [];
  const chart = (label: string, pick: (r: (typeof rows)[number]) => number) =>
    hBarChart({ label, valueLabel: label, width: 360, rows: rows.map((r, i) => ({ label: r.label, value: pick(r), color: PALETTE[i % PALETTE.length] })) });
  const table = `<table><thead><tr><th>label</th><th>run</th><th class="num">discarded / update</th><th class="num">s / update</th><th class="num">mean reward</th></tr></thead><tbody>${
    rows.map((r) => `<tr><td>${esc(r.label)}</td><td><code>${esc(r.runId)}</code></td><td class="num">${esc(fmtNum(r.discardedPerUpdate))}</td><td class="num">${esc(fmtNum(r.secondsPerUpdate))}</td><td class="num">${esc(r.meanReward.toFixed(3))}</td></tr>`).join('')
  }</tbody></table>`;
  return {
    id: 'comparison',
    title: 'Router comparison',
    wide: true,
    body: `${table}<div class="row3">${chart('discarded rollouts per update', (r) => r.discardedPerUpdate)}${chart('seconds per update', (r) => r.secondsPerUpdate)}${chart('mean batch reward', (r) => r.meanReward)}</div>`,
    caption: 'The same recipe run under different placement policies: per-update means of discarded rollouts, wall time and batch reward.',
  };
}

/** What the run's weight updates cost the requests in flight (engines.updateMode). */
function inFlightTable(s: RunSummary): string {
  const f = s.inFlight;
  const n = (v: number | null, d = 1) => (v === null ? '–' : v.toFixed(d));
  return `<table class="compact"><thead><tr><th>update mode</th><th class="num">updates</th><th class="num">ids thrown away / update</th><th class="num">ids recomputed / update</th><th class="num">turns through an update / update</th><th class="num">engine stall / load (s)</th></tr></thead><tbody><tr><td><code>${esc(f.updateMode)}</code></td><td class="num">${f.updates}</td><td class="num">${n(f.droppedTokensPerUpdate)}</td><td class="num">${n(f.recomputedTokensPerUpdate)}</td><td class="num">${n(f.spanningTurnsPerUpdate)}</td><td class="num">${n(f.stallSecondsPerLoad, 2)}</td></tr></tbody></table>`;
}

function engineTable(s: RunSummary): string {
  if (!s.engines.length) return '<p class="empty">no engine events yet.</p>';
  const n = (v: number | null) => (v === null ? '–' : String(v));
  return `<table class="compact"><thead><tr><th>engine</th><th>kind</th><th class="num">placements</th><th class="num">resubmitted</th><th class="num">failures</th><th class="num">max running</th><th class="num">max waiting</th><th class="num">since last update</th></tr></thead><tbody>${
    s.engines.map((e) => `<tr><td><code>${esc(e.engineId)}</code></td><td>${esc(e.kind)}</td><td class="num">${e.placements}</td><td class="num">${e.resubmitted}</td><td class="num${e.failures ? ' bad' : ''}">${e.failures}</td><td class="num">${n(e.maxRunning)}</td><td class="num">${n(e.maxWaiting)}</td><td class="num">${e.placementsSinceLastUpdate}</td></tr>`).join('')
  }</tbody></table>`;
}

function gateColor(gate: string): string {
  if (gate === 'passed') return PALETTE[4];
  if (gate === 'tests_failed') return PALETTE[1];
  return gate.startsWith('budget') ? PALETTE[5] : PALETTE[2];
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** A trainer figure where -1 means "none measured". */
function measured(v: unknown): number | null {
  const x = num(v);
  return x === null || x < 0 ? null : x;
}

function mean0(xs: (number | null)[]): number | null {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
}
