import fs from 'node:fs';
import path from 'node:path';
import { parseRunConfig, type RunConfig } from '../core/config.js';
import { LAYER_NAMES, parseLayerList, withLayer, type LayerName } from '../core/recipeLayers.js';
import { repoRoot, type Settings } from '../infra/settings.js';
import { renderReportHtml } from '../report/html.js';
import { layerDifferences, stressLayerRow } from '../report/stats.js';
import { buildRunSummary } from '../report/summary.js';
import type { RunSummary, StressLayerRow } from '../report/types.js';
import { writeReport } from '../report/write.js';
import { listEvaluations } from '../store/evaluations.js';
import { closeDbPool, dbPool } from '../store/pool.js';
import { UsageError } from './args.js';

/** `floe stress [CONFIG.yaml] [--layers naive,gate,raw,full] [--set k=v]…`: the published
 *  ablation on this machine. Each layer (core/recipeLayers.ts) runs as one whole demo run
 *  (cli/demo.ts runDemo), one after the other, from the same config: same seed, same rollout
 *  budget (training.updates, groups, G unchanged), named `stress-<layer>`. Then every layer's
 *  series go into every run's report (`layers`), and runs/stress-<timestamp>/ gets stress.json
 *  (rows, last-third means, minutes per layer, the command) and a combined report.html.
 *
 *  The same pool: the candidates, the seed and so the warm start (cached by content) are the
 *  same for every layer. With evaluation.poolFromStart the pool is picked by the run's own
 *  starting evaluation, which runs under the layer's recipe and samples: so the layers after the
 *  first train on exactly the first layer's pool from its starting checkpoint (tasks.include =
 *  that pool, policy.checkpoint = that checkpoint, poolFromStart off; their start evaluation
 *  still runs, on that pool). */

export const DEFAULT_LAYERS: readonly LayerName[] = LAYER_NAMES;

/** What the layers after the first are pinned to (null: nothing to pin). */
export interface StressPin { checkpoint: string; pool: string[] }

/** One layer's run config: the base with the layer's preset applied, named stress-<layer>;
 *  with a pin, the first layer's pool and starting checkpoint. Validated like any config. */
export function layerConfig(base: RunConfig, layer: LayerName, pin: StressPin | null = null): RunConfig {
  const raw = withLayer({ ...(base as unknown as Record<string, unknown>), name: `stress-${layer}` }, layer);
  if (pin) {
    raw.policy = { ...base.policy, checkpoint: pin.checkpoint };
    raw.tasks = { ...base.tasks, include: pin.pool };
    raw.evaluation = { ...base.evaluation, poolFromStart: false };
  }
  return parseRunConfig(raw, `stress layer ${layer}`);
}

/** `--layers` → the layers, or a UsageError naming the valid ones. */
export function layersFlag(value: string | undefined): LayerName[] {
  if (value === undefined) return [...DEFAULT_LAYERS];
  try {
    return parseLayerList(value);
  } catch (err) {
    const m = (err as Error).message;
    throw new UsageError(`--layers: ${m}${m.includes(LAYER_NAMES.join(', ')) ? '' : ` (the layers are ${LAYER_NAMES.join(', ')})`}`);
  }
}

export interface StressRun { label: LayerName; runId: string; dir: string; ok: boolean; minutes: number }

/** The stress.json of a finished comparison. */
export function stressResult(input: { command: string; configFile: string; sets: string[]; startedAt: string; runs: StressRun[]; rows: StressLayerRow[]; summaries: RunSummary[]; pin: StressPin | null; report: string }) {
  return {
    stress: 'layers',
    command: input.command,
    config: input.configFile,
    sets: input.sets,
    startedAt: input.startedAt,
    layers: input.runs.map((r) => r.label),
    runs: input.runs.map((r, i) => ({
      label: r.label, runId: r.runId, status: input.summaries[i]?.run.status ?? null, verdictPass: r.ok, minutes: r.minutes,
      report: path.relative(repoRoot, path.join(r.dir, 'report.html')),
    })),
    lastThirdMeans: Object.fromEntries(input.rows.map((r) => [r.label, r.lastThirdMean])),
    minutesPerLayer: Object.fromEntries(input.runs.map((r) => [r.label, r.minutes])),
    differences: layerDifferences(input.rows),
    pinned: input.pin,
    rows: input.rows,
    report: input.report,
  };
}

/** The final table, as printed. */
export function formatLayerTable(rows: StressLayerRow[], runs: StressRun[]): string {
  const p = (v: number | null) => (v === null ? '  –  ' : v.toFixed(3));
  const avg = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
  const lines = [`  ${'layer'.padEnd(6)} ${'updates'.padStart(7)} ${'last-third'.padStart(10)} ${'pass@1 start'.padStart(12)} ${'pass@1 end'.padStart(10)} ${'stale/upd'.padStart(9)} ${'s/upd'.padStart(7)} ${'min'.padStart(6)}  run`];
  rows.forEach((r, i) => {
    const sec = avg(r.secondsPerUpdate);
    const stale = avg(r.discarded);
    lines.push(`  ${r.label.padEnd(6)} ${String(r.rewards.length).padStart(7)} ${p(r.lastThirdMean).padStart(10)} ${p(r.startPass1).padStart(12)} ${p(r.endPass1).padStart(10)} ${(stale === null ? '–' : stale.toFixed(1)).padStart(9)} ${(sec === null ? '–' : sec.toFixed(1)).padStart(7)} ${(runs[i] ? runs[i].minutes.toFixed(1) : '–').padStart(6)}  ${r.runId}`);
  });
  for (const d of layerDifferences(rows)) lines.push(`  ${d.sentence}`);
  return lines.join('\n');
}

function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, '').replace('T', '-');
}

/** The starting checkpoint a demo run recorded (runs/<id>/demo.json), or null. */
function demoCheckpoint(dir: string): string | null {
  try {
    const df = JSON.parse(fs.readFileSync(path.join(dir, 'demo.json'), 'utf8')) as { checkpoint?: unknown };
    return typeof df.checkpoint === 'string' && df.checkpoint ? df.checkpoint : null;
  } catch {
    return null;
  }
}

export async function runStress(s: Settings, opts: { base: RunConfig; configFile: string; sets: string[]; layers: LayerName[]; command: string }): Promise<number> {
  const { runDemo } = await import('./demo.js');
  const say = (m: string) => process.stdout.write(`${m}\n`);
  const startedAt = new Date();
  const outDir = path.join(repoRoot, 'runs', `stress-${stamp(startedAt)}`);
  const runs: StressRun[] = [];
  let pin: StressPin | null = null;
  let failure: unknown = null;
  say(`floe stress: layers ${opts.layers.join(', ')} on ${path.relative(process.cwd(), opts.configFile) || opts.configFile} (seed ${opts.base.seed}, ${opts.base.training.updates} updates of ${opts.base.training.groupsPerUpdate} groups × G=${opts.base.rollout.groupSize} each)`);
  for (const [i, layer] of opts.layers.entries()) {
    const cfg = layerConfig(opts.base, layer, pin);
    say(`\n=== layer ${i + 1}/${opts.layers.length}: ${layer} (run name ${cfg.name}; rewardGate ${cfg.recipe.rewardGate}, explicitSubmit ${cfg.recipe.explicitSubmit}, rawFormatCheck ${cfg.recipe.rawFormatCheck}, cacheRebuild ${cfg.recipe.cacheRebuild}, router ${cfg.engines.router})${pin ? `; pinned to ${pin.pool.length} pool tasks and ${path.relative(repoRoot, pin.checkpoint)}` : ''}`);
    const t0 = Date.now();
    try {
      const r = await runDemo(s, cfg, { label: layer, startedAtMs: t0 });
      runs.push({ label: layer, runId: r.runId, dir: r.dir, ok: r.ok, minutes: (Date.now() - t0) / 60000 });
    } catch (err) {
      failure = err;
      say(`layer ${layer} failed: ${(err as Error).message ?? String(err)}; writing the comparison of the layers that ran`);
      break;
    }
    const done = runs[runs.length - 1];
    const db = dbPool(s.postgres.url);
    const row = stressLayerRow(await buildRunSummary(db, done.runId), layer);
    say(`layer ${layer}: run ${done.runId}, ${row.rewards.length} updates, last-third mean reward ${row.lastThirdMean?.toFixed(3) ?? '–'}, pass@1 ${row.startPass1?.toFixed(3) ?? '–'} → ${row.endPass1?.toFixed(3) ?? '–'}, ${done.minutes.toFixed(1)} min`);
    if (i === 0 && opts.layers.length > 1 && opts.base.evaluation.poolFromStart) {
      const pool = (await listEvaluations(db, done.runId)).filter((e) => e.label === 'start' && e.inPool).map((e) => e.taskId);
      const checkpoint = opts.base.policy.checkpoint || demoCheckpoint(done.dir);
      if (pool.length && checkpoint) pin = { checkpoint, pool };
      else say(`  (the next layers cannot be pinned to this pool: ${pool.length ? 'no starting checkpoint recorded' : 'no start evaluation in the pool'}; each picks its own)`);
    }
  }
  if (!runs.length) {
    await closeDbPool();
    throw failure instanceof Error ? failure : new Error('no layer ran');
  }

  const db = dbPool(s.postgres.url);
  try {
    const summaries = await Promise.all(runs.map((r) => buildRunSummary(db, r.runId)));
    const rows = summaries.map((sum, i) => stressLayerRow(sum, runs[i].label));
    for (const r of runs) await writeReport(db, r.runId, r.dir, (sum) => ({ ...sum, layers: rows }));
    fs.mkdirSync(outDir, { recursive: true });
    const combined: RunSummary = { ...summaries[0], run: { ...summaries[0].run, name: `floe stress ${runs.map((r) => r.label).join(', ')} (plots: layer ${runs[0].label})` }, layers: rows };
    const html = path.join(outDir, 'report.html');
    fs.writeFileSync(html, renderReportHtml(combined));
    const result = stressResult({ command: opts.command, configFile: opts.configFile, sets: opts.sets, startedAt: startedAt.toISOString(), runs, rows, summaries, pin, report: path.relative(repoRoot, html) });
    fs.writeFileSync(path.join(outDir, 'stress.json'), `${JSON.stringify(result, null, 2)}\n`);
    say(`\nfloe stress: ${runs.length}/${opts.layers.length} layer(s)\n${formatLayerTable(rows, runs)}\n  report  ${path.relative(process.cwd(), html)}\n  result  ${path.relative(process.cwd(), path.join(outDir, 'stress.json'))}`);
    if (failure) throw failure;
    return summaries.every((x) => x.run.status === 'completed') && runs.length === opts.layers.length ? 0 : 1;
  } finally {
    await closeDbPool();
  }
}
