/** Router comparison: the same run with the router set to `sticky` and to `least-loaded`,
 *  on two or more engines. Writes bench/out/router_comparison.json (discarded rollouts and
 *  time per update of both, side by side, with their ratio) and adds the comparison to both
 *  runs' reports.
 *
 *    npx tsx bench/router_comparison.ts [CONFIG.yaml] [--set key=value]…
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { up } from '../infra/up.js';
import { loadRunConfig } from '../cli/config.js';
import { parseArgs } from '../cli/args.js';
import { runDemo } from '../cli/demo.js';
import { dbPool, closeDbPool } from '../store/pool.js';
import { buildRunSummary } from '../report/summary.js';
import { summarizeForComparison } from '../report/stats.js';
import { writeReport } from '../report/write.js';

const p = parseArgs(process.argv.slice(2), { set: 'multi' });
const base = loadRunConfig(p.positional[0] ?? path.join(repoRoot, 'configs', 'router-comparison.yaml'), p.flags.get('set') ?? []);
if (base.engines.count < 2 && base.engines.endpoints.length < 2) throw new Error('the comparison needs two or more engines (engines.count)');
const s = loadSettings();
await up(s);
const runs: { label: string; runId: string; dir: string }[] = [];
for (const router of ['sticky', 'least-loaded'] as const) {
  const r = await runDemo(s, { ...base, name: `router-${router}`, engines: { ...base.engines, router } }, { label: router });
  runs.push({ label: router, runId: r.runId, dir: r.dir });
}
const pool = dbPool(s.postgres.url);
const rows = await Promise.all(runs.map(async (r) => summarizeForComparison(await buildRunSummary(pool, r.runId), r.label)));
for (const r of runs) await writeReport(pool, r.runId, r.dir, (summary) => ({ ...summary, comparison: rows }));
const [sticky, least] = rows;
const result = {
  bench: 'router_comparison',
  config: { engines: base.engines.count, groupSize: base.rollout.groupSize, maxInFlight: base.rollout.maxInFlight, updates: base.training.updates, maxOffPolicySteps: base.training.maxOffPolicySteps },
  rows,
  ratios: {
    secondsPerUpdate_sticky_over_leastLoaded: least.secondsPerUpdate ? sticky.secondsPerUpdate / least.secondsPerUpdate : null,
    discardedPerUpdate_sticky_minus_leastLoaded: sticky.discardedPerUpdate - least.discardedPerUpdate,
  },
  reports: runs.map((r) => path.relative(repoRoot, path.join(r.dir, 'report.html'))),
};
fs.mkdirSync(path.join(repoRoot, 'bench', 'out'), { recursive: true });
fs.writeFileSync(path.join(repoRoot, 'bench', 'out', 'router_comparison.json'), `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result, null, 2));
await closeDbPool();
