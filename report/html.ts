import { reportFigures, type Figure } from './figures.js';
import { esc, fmtNum } from './svg.js';
import type { RunSummary } from './types.js';

/** The run report as one static HTML file: inline CSS and SVG, no script, no network, so
 *  it can be mailed, archived next to summary.json, or opened from a CI artifact. */
export function renderReportHtml(summary: RunSummary): string {
  const s = summary;
  const figures = reportFigures(s);
  const title = `floe report — ${s.run.name}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title><style>${CSS}</style></head>
<body><main>
${header(s)}
${keyNumbers(s)}
${s.updates.length ? '' : '<p class="notice">no updates yet: the plots below fill in as the run trains.</p>'}
<section class="grid">${figures.map(figure).join('\n')}</section>
${evictions(s)}
<footer>generated ${esc(s.generatedAt)} from the floe audit history (Postgres); the same data is in <code>summary.json</code>.</footer>
</main></body></html>
`;
}

function header(s: RunSummary): string {
  const r = s.run;
  return `<header>
<h1>${esc(r.name)} <span class="status status-${esc(r.status)}">${esc(r.status)}</span></h1>
<p class="meta">run <code>${esc(r.id)}</code> · started ${esc(fmtTime(r.startedAt))}${r.endedAt ? ` · ended ${esc(fmtTime(r.endedAt))}` : ''} · ${r.endedAt ? 'took' : 'running for'} ${esc(fmtDuration(r.durationSeconds))}</p>
<details><summary>run config</summary><pre>${esc(JSON.stringify(r.config, null, 2))}</pre></details>
</header>`;
}

function keyNumbers(s: RunSummary): string {
  const k = s.keyNumbers;
  const rew = (v: number | null) => (v === null ? '–' : v.toFixed(3));
  // "Holds its peak" is the stress test's question: the worst of the last fifth vs the peak.
  const drop = k.peakRewardSmoothed !== null && k.lastFifthMinSmoothed !== null ? k.lastFifthMinSmoothed - k.peakRewardSmoothed : null;
  const cards: [string, string, string][] = [
    ['updates', String(k.updates), 'weight updates (policy versions ≥ 1)'],
    ['final reward', rew(k.finalRewardSmoothed), `EMA; last batch ${rew(k.finalReward)}`],
    ['peak reward', rew(k.peakRewardSmoothed), k.peakVersion === null ? 'EMA' : `EMA, at version ${k.peakVersion}`],
    ['last-fifth min', rew(k.lastFifthMinSmoothed), drop === null ? 'lowest EMA over the last fifth' : `lowest EMA over the last fifth; ${drop < 0 ? '−' : '+'}${Math.abs(drop).toFixed(3)} vs peak`],
    ['discarded', String(k.totalDiscarded), 'stale rollouts, all updates'],
    ['s / update', k.meanSecondsPerUpdate === null ? '–' : fmtNum(k.meanSecondsPerUpdate), 'mean wall time between updates'],
  ];
  const start = s.evaluations?.find((e) => e.label === 'start');
  const end = s.evaluations?.find((e) => e.label === 'end');
  const pool1 = (e: typeof start) => (e ? (e.poolTasks > 0 ? e.poolPass1 : e.pass1) : null);
  if (start || end) {
    cards.push(['pass@1 frozen', `${rew(pool1(start))} → ${rew(pool1(end))}`, `pool mean, k = ${(start ?? end)?.k ?? '–'}, start → end weights`]);
  }
  if (s.epochs !== null && s.epochs !== undefined) cards.push(['epochs', fmtNum(s.epochs), 'train groups started per pool task']);
  return `<section class="kpis">${cards.map(([label, value, hint]) =>
    `<div class="kpi"><div class="label">${esc(label)}</div><div class="value">${esc(value)}</div><div class="hint">${esc(hint)}</div></div>`).join('')}</section>`;
}

function figure(f: Figure): string {
  return `<figure class="plot${f.wide ? ' wide' : ''}" id="fig-${esc(f.id)}"><h2>${esc(f.title)}</h2>${f.body}<figcaption>${esc(f.caption)}</figcaption></figure>`;
}

const MAX_EVICTION_ROWS = 200;

function evictions(s: RunSummary): string {
  const rows = s.evictions.slice(-MAX_EVICTION_ROWS);
  const more = s.evictions.length - rows.length;
  const body = rows.length
    ? `<table><thead><tr><th class="num">version</th><th>task</th><th>decision</th><th>evidence</th></tr></thead><tbody>${rows.map((e) =>
      `<tr><td class="num">${e.atVersion}</td><td><code>${esc(e.taskId)}</code></td><td><span class="decision d-${esc(e.decision)}">${esc(e.decision.replace(/_/g, ' '))}</span></td><td><code class="evidence">${esc(clip(JSON.stringify(e.evidence), 160))}</code></td></tr>`).join('')}</tbody></table>`
    : '<p class="empty">no eviction decisions yet.</p>';
  return `<section class="evictions" id="evictions"><h2>Evictions</h2>
<p class="caption">Retire / recheck / revive decisions of the eviction pass, with the rewards each was taken on${more > 0 ? ` (latest ${rows.length}; ${more} earlier in summary.json)` : ''}.</p>${body}</section>`;
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

function fmtTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function fmtDuration(sec: number): string {
  const t = Math.max(0, Math.round(sec));
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const x = t % 60;
  return h ? `${h} h ${String(m).padStart(2, '0')} min` : m ? `${m} min ${String(x).padStart(2, '0')} s` : `${x} s`;
}

const CSS = `
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:#222;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1240px;margin:0 auto;padding:24px 20px 40px}
h1{font-size:24px;margin:0 0 4px;font-weight:600}
h2{font-size:15px;margin:0 0 8px;font-weight:600}
code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.meta{color:#666;margin:0 0 8px}
details{margin:4px 0 0}
summary{cursor:pointer;color:#4e79a7}
pre{background:#fff;border:1px solid #e3e5e8;border-radius:6px;padding:10px;max-height:360px;overflow:auto;font-size:12px}
.status{font-size:12px;font-weight:500;padding:2px 8px;border-radius:10px;vertical-align:middle;background:#e8e8e8;color:#444}
.status-running{background:#dbe8f6;color:#2f5b8a}.status-completed{background:#dcefd8;color:#2f6b28}
.status-failed{background:#f7dada;color:#8a2525}.status-stopped,.status-paused,.status-stopping{background:#f5ecd2;color:#7a5b12}
.kpis{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;margin:18px 0}
.kpi{background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:10px 14px}
.kpi .label{color:#666;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.kpi .value{font-size:24px;font-weight:600;margin:2px 0}.kpi .value small{font-size:13px;font-weight:400;color:#666}
.kpi .hint{color:#888;font-size:12px}
.notice{background:#fff8e1;border:1px solid #f0e0a8;border-radius:8px;padding:10px 14px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:16px}
figure.plot{margin:0;background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:14px 16px 12px}
figure.wide{grid-column:1/-1}
figure svg{display:block;width:100%;height:auto;max-width:100%}
.split{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px;align-items:start}
.split table{margin-top:14px}
figcaption,.caption{color:#666;font-size:12.5px;margin-top:6px}
.row3{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px;margin-top:10px}
.row4{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px;margin-top:10px}
.findings{margin:10px 0 0;padding-left:20px}.findings li{margin:2px 0}
table{border-collapse:collapse;width:100%;margin-top:8px;font-size:13px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eceef1;vertical-align:top}
th{color:#666;font-weight:500;font-size:12px}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.bad{color:#b52b2b;font-weight:600}
table.compact{font-size:12px}
.evictions{background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:14px 16px;margin-top:16px}
.evidence{color:#555;word-break:break-all}
.decision{font-size:12px;padding:1px 7px;border-radius:9px;background:#eee;white-space:nowrap}
.d-retire_mastered{background:#dcefd8}.d-retire_hopeless{background:#e8e8e8}.d-revive{background:#f7dada}.d-recheck_keep_retired{background:#dbe8f6}
.empty{color:#888}
footer{color:#888;font-size:12px;margin-top:20px}
`;
