import { histogramKeys } from './stats.js';
import { PALETTE, barChart, esc, fmtNum, hBarChart, lineChart, stackedAreaChart, type Point } from './svg.js';
import type { RunSummary, UpdateRow } from './types.js';

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
  const figs = [...(s.updates.length ? updateFigures(s) : []), ...runFigures(s), engineFigure(s)];
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
      ],
    }),
    caption: `Mean reward of the rollouts each update trained on (faint) and its exponential moving average (bold, α = ${s.smoothingAlpha}). Retired tasks are not in these batches.`,
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
      label: 'engine vs trainer logprob mismatch', xLabel: 'policy version', yLabel: 'log scale', yScale: 'log', integerX: true,
      emptyText: 'no mismatch measured',
      lines: [
        { name: 'mean |Δ logprob|', points: series(u, (x) => num(x.metrics?.mismatch_mean_abs_logprob)), color: PALETTE[6] },
        { name: 'KL(engine ‖ trainer)', points: series(u, (x) => num(x.metrics?.mismatch_kl)), color: PALETTE[9] },
      ],
    }),
    caption: 'Gap between the token log-probabilities the engines sampled with and the trainer recomputes, measured every update (lower is better; log scale).',
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
  });
  return figs;
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
    body: `<div class="split">${chart}${engineTable(s)}</div>`,
    caption: u.length
      ? 'Generation requests the router placed on each engine between consecutive updates; under least-loaded placement the lines stay close together.'
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
