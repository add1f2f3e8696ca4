import fs from 'node:fs/promises';
import path from 'node:path';
import type { Queryable } from '../store/pool.js';
import { renderReportHtml } from './html.js';
import { buildRunSummary } from './summary.js';
import type { RunSummary } from './types.js';

/** Writes `report.html` (for people) and `summary.json` (for scripts and CI) for one run
 *  into outDir; returns their paths. `extend` lets a caller add e.g. a router comparison
 *  before rendering, so both files carry it. */
export async function writeReport(
  pool: Queryable,
  runId: string,
  outDir: string,
  extend?: (summary: RunSummary) => RunSummary | Promise<RunSummary>,
): Promise<{ html: string; json: string }> {
  let summary = await buildRunSummary(pool, runId);
  if (extend) summary = await extend(summary);
  await fs.mkdir(outDir, { recursive: true });
  const html = path.join(outDir, 'report.html');
  const json = path.join(outDir, 'summary.json');
  await fs.writeFile(json, `${JSON.stringify(summary, null, 2)}\n`);
  await fs.writeFile(html, renderReportHtml(summary));
  return { html, json };
}
