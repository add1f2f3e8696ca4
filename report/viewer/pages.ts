import { FORMAT_REASON_DESCRIPTIONS, type FormatReason } from '../../core/toolFormat.js';
import type { ViewRolloutRow, ViewRollout, ViewRun, ViewTaskHistory, ViewTurnTokens } from '../../store/rolloutView.js';
import { PALETTE, esc, fmtNum, lineChart, type Series } from '../svg.js';

/** The rollout viewer's pages as HTML, from plain data: the run's rollout list, one rollout,
 *  one task across the run, and one turn's tokens. Pure (no Node API, no I/O: eslint.config.js
 *  refuses one here), so test/unit/viewerPages.test.ts checks the markup without a server;
 *  report/viewer/server.ts serves these pages and the static export embeds them.
 *
 *  Large rollouts: a page carries no token of any turn. A turn's tokens are rendered by
 *  renderTurnTokens and put in the page when its turn is opened, fetched from the server
 *  (`/rollout/<id>/turn/<n>`) or, in a static export, read from the JSON embedded in the file;
 *  only the first turn is opened on load. */

/** How a page reaches a turn's tokens: from the server, or from data embedded in the file. */
export type TokenSource = { kind: 'server' } | { kind: 'embedded'; turns: Record<number, string> };

/** Links out of a page: the Temporal Web UI of a workflow (null: not known). */
export interface ViewLinks { workflow: (workflowId: string) => string | null }

// ---------- tokens

/** A Hugging Face tokenizer's pieces (tokenizer.json: the model's vocabulary and the added
 *  tokens), read by the server from the run's tokenizer folder; byteLevel: pieces are written in
 *  GPT-2's byte-to-unicode alphabet (the ByteLevel decoder: 'Ġ' is a space, 'Ċ' a newline). */
export interface TokenPieces { byId: ReadonlyMap<number, string>; byteLevel: boolean; special: ReadonlySet<number> }

/** Text of one token id for people. The byte tokenizer (the tiny policy's, engine/floe_engine/
 *  tokenizer.py: ids 0–255 are bytes, 256 EOS, 257 BOS, 258 PAD) is decoded here; another
 *  tokenizer's ids through its pieces when the server could read them, else as `#id` (the
 *  turn's text is shown above them). */
export function tokenText(id: number, tokenizer: string, pieces: TokenPieces | null = null): string {
  if (tokenizer !== 'byte') {
    const piece = pieces?.byId.get(id);
    if (piece === undefined) return `#${id}`;
    if (!pieces!.byteLevel || pieces!.special.has(id)) return piece;
    return visible(byteLevelBytes(piece));
  }
  if (id === 256) return '<|eos|>';
  if (id === 257) return '<|bos|>';
  if (id === 258) return '<|pad|>';
  return visible([id]);
}

/** Bytes as text: strict UTF-8 where it decodes (a token may hold part of a character: then
 *  each byte shows as \xNN), newline as ↵ and a line break, tab as →, control bytes as \xNN. */
function visible(bytes: number[]): string {
  let text: string;
  try { text = new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes)); } catch { return bytes.map(hex).join(''); }
  return [...text].map((c) => {
    const k = c.codePointAt(0)!;
    return c === '\n' ? '↵\n' : c === '\t' ? '→' : k < 32 || k === 127 ? hex(k) : c;
  }).join('');
}
const hex = (b: number) => `\\x${b.toString(16).padStart(2, '0')}`;

/** GPT-2's bytes_to_unicode, inverted: the byte each character of a ByteLevel piece stands for
 *  (printable Latin-1 stands for itself; the other 68 bytes were moved to U+0100 and up). */
const BYTE_OF: ReadonlyMap<string, number> = (() => {
  const keep: number[] = [];
  for (let b = 33; b <= 126; b++) keep.push(b);
  for (let b = 161; b <= 172; b++) keep.push(b);
  for (let b = 174; b <= 255; b++) keep.push(b);
  const m = new Map<string, number>();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (keep.includes(b)) m.set(String.fromCharCode(b), b);
    else m.set(String.fromCharCode(256 + n++), b);
  }
  return m;
})();

export function byteLevelBytes(piece: string): number[] {
  return [...piece].flatMap((c) => { const b = BYTE_OF.get(c); return b === undefined ? [...new TextEncoder().encode(c)] : [b]; });
}

/** Background of a weight version: one light shade per version, repeating every 10. */
export function versionShade(v: number): string {
  return v < 0 ? "#e8e8e8" : `${PALETTE[v % PALETTE.length]}55`;
}

/** Indices of the generated tokens whose weight version differs from the token before them
 *  (the first token compares with `previous`, the last version of the turn before). */
export function versionBoundaries(versions: readonly number[], previous: number | null = null): number[] {
  const out: number[] = [];
  let prev = previous;
  versions.forEach((v, i) => {
    if (prev !== null && v !== prev) out.push(i);
    prev = v;
  });
  return out;
}

/** One turn's tokens: the ids the renderer added before the turn (greyed: the prompt side),
 *  then each generated token shaded by the version that produced it; a token where the version
 *  changed is marked as an update boundary. `badToken`: a token the format gate named (a special
 *  id inside the turn). Each token is a bare <i> (a 64k-token rollout stays a few MB); its id,
 *  version and engine log-prob are comma lists on the container, which the page's hover reads
 *  (TOKEN_HOVER) to title the token under the pointer. */
export function renderTurnTokens(t: ViewTurnTokens, opts: { tokenizer: string; pieces?: TokenPieces | null; previousVersion?: number | null; badToken?: number | null }): string {
  const parts: string[] = [];
  parts.push(`<div class="tok-in" title="ids the renderer added before this turn (not generated: no version, no log-prob)">`);
  for (const id of t.inputIds) parts.push(esc(tokenText(id, opts.tokenizer, opts.pieces)));
  const lp = t.completionIds.map((_, i) => (t.logprobs[i] === undefined ? '' : String(Math.round(t.logprobs[i] * 1e4) / 1e4)));
  const vs = t.completionIds.map((_, i) => t.tokenVersions[i] ?? -1);
  parts.push(`</div><div class="tok-gen" data-ids="${t.completionIds.join(',')}" data-vs="${vs.join(',')}" data-lp="${lp.join(',')}">`);
  const bounds = new Set(versionBoundaries(vs, opts.previousVersion ?? null));
  let prev = opts.previousVersion ?? null;
  t.completionIds.forEach((id, i) => {
    const v = vs[i];
    if (bounds.has(i)) parts.push(`<span class="bnd" title="weight update: tokens before were made by v${prev}, from here by v${v}">v${prev}→v${v}</span>`);
    const cls = `v${v >= 0 ? v % PALETTE.length : 'x'}${bounds.has(i) ? ' b' : ''}${opts.badToken === i ? ' bad' : ''}`;
    parts.push(`<i class="${cls}">${esc(tokenText(id, opts.tokenizer, opts.pieces))}</i>`);
    prev = v;
  });
  parts.push('</div>');
  return parts.join('');
}

/** Titles the token under the pointer with its index, id, version and the engine's log-prob,
 *  from its container's lists (built once per container, on the first hover). */
const TOKEN_HOVER = `
document.addEventListener('mouseover',function(e){var el=e.target;if(!el||el.tagName!=='I'||el.title)return;var box=el.closest('.tok-gen');if(!box)return;
  if(!box._idx){box._idx=new Map();[].forEach.call(box.getElementsByTagName('i'),function(x,i){box._idx.set(x,i);});
    box._ids=box.dataset.ids.split(',');box._vs=box.dataset.vs.split(',');box._lp=box.dataset.lp.split(',');}
  var i=box._idx.get(el);if(i===undefined)return;
  el.title='token '+i+' · id '+box._ids[i]+' · v'+box._vs[i]+' · engine log-prob '+(box._lp[i]===''?'–':box._lp[i]);});`;

// ---------- the format gate's offending span

/** Where in a refused turn's raw text the format gate found the problem, from the gate's
 *  detail (core/toolFormat.ts writes "at offset N" / "at UTF-16 offset N" / "at token K of N"):
 *  a text span, a token, or null when the reason concerns the whole turn (missing_tool_call,
 *  truncated …). The gate records the offset only inside its detail text, so it is read back
 *  from there. */
export function offendingSpan(text: string, detail: string): { start: number; end: number } | { token: number } | null {
  const tok = /at token (\d+) of \d+/.exec(detail);
  if (tok) return { token: Number(tok[1]) };
  // "at offsets 2, 58" (more than one call): the first call past the one a turn may make
  const many = /at offsets (\d+(?:, \d+)+)/.exec(detail);
  const m = many ? null : /at (?:UTF-16 )?offset (\d+)/.exec(detail);
  if (!m && !many) return null;
  const start = many ? Number(many[1].split(', ')[1]) : Number(m![1]);
  if (start > text.length) return null;
  // a quoted excerpt in the detail that stands at the offset gives the span's length
  for (const q of detail.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    let s: string;
    try { s = JSON.parse(`"${q[1]}"`) as string; } catch { continue; }
    if (s && text.startsWith(s, start)) return { start, end: start + s.length };
  }
  // else a tag (up to its '>') or one word
  const rest = text.slice(start);
  const tag = rest.startsWith('<') ? rest.indexOf('>') : -1;
  const len = tag >= 0 && tag < 80 ? tag + 1 : Math.max(1, Math.min(80, (/^\S+/.exec(rest)?.[0].length ?? 1)));
  return { start, end: Math.min(text.length, start + len) };
}

/** The raw text with [start, end) marked. */
export function markSpan(text: string, span: { start: number; end: number } | null): string {
  if (!span) return esc(text);
  return `${esc(text.slice(0, span.start))}<mark class="span" title="the format gate stopped here">${esc(text.slice(span.start, span.end)) || '&#8203;'}</mark>${esc(text.slice(span.end))}`;
}

/** The format detail of a refused turn: the gate decision's (it names the turn), if any. */
function refusalDetail(r: ViewRollout, turnIndex: number): string | null {
  const d = r.gateDecision?.detail as { turn?: number; detail?: unknown } | null | undefined;
  if (r.gateDecision?.gate === 'format' && d && d.turn === turnIndex && typeof d.detail === 'string') return d.detail;
  return null;
}

/** The token a refused turn's detail names (a special id inside the turn), for renderTurnTokens. */
export function badTokenOf(r: ViewRollout, turnIndex: number): number | null {
  const d = refusalDetail(r, turnIndex);
  const s = d === null ? null : offendingSpan('', d);
  return s && 'token' in s ? s.token : null;
}

// ---------- shared frame

const fmtReward = (v: number | null) => (v === null ? '–' : fmtNum(v));
const fmtWhen = (d: Date) => d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');

function page(title: string, body: string, script = ''): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><!-- no favicon request: a page fetches nothing but its turns -->
<title>${esc(title)}</title><style>${CSS}</style></head>
<body><main>
${body}
</main>${script ? `<script>${script}</script>` : ''}</body></html>
`;
}

const versionRange = (r: ViewRolloutRow) => (r.versionStart === null ? '–' : r.versionEnd !== null && r.versionEnd !== r.versionStart ? `v${r.versionStart}→v${r.versionEnd}` : `v${r.versionStart}`);

/** What became of a rollout: trained (in which batch), discarded (why), or neither. */
export function fate(r: ViewRolloutRow): string {
  if (r.batchVersion !== null) return `trained in the batch of v${r.batchVersion}`;
  if (r.status === 'discarded') return `discarded: ${r.discardReason ?? 'no reason recorded'}${r.staleness !== null ? ` (staleness ${r.staleness})` : ''}`;
  if (r.status === 'running') return 'running';
  if (r.status === 'failed') return 'failed (infrastructure)';
  return r.purpose === 'train' ? 'not trained (yet)' : `not trained (${r.purpose})`;
}

/** The gate filter's value of a rollout: its gate, and for a format refusal its reason. */
export const gateKey = (r: ViewRolloutRow): string => (r.gate === 'format' && r.formatReason ? `format:${r.formatReason}` : r.gate ?? 'none');

// ---------- the run's rollout list

export function renderListPage(d: { run: ViewRun; rollouts: ViewRolloutRow[]; links: ViewLinks }): string {
  const rs = d.rollouts;
  const uniq = <T,>(xs: T[]) => [...new Set(xs)].sort();
  const sel = (id: string, label: string, values: string[]) =>
    `<label>${esc(label)} <select id="f-${id}" data-f="${id}"><option value="">all</option>${values.map((v) => `<option value="${esc(v)}">${esc(v)}</option>`).join('')}</select></label>`;
  const gates = uniq(rs.flatMap((r) => (r.gate === 'format' ? ['format', gateKey(r)] : [gateKey(r)])));
  const filters = `<section class="filters">
${sel('task', 'task', uniq(rs.map((r) => r.taskId)))}
${sel('purpose', 'purpose', uniq(rs.map((r) => r.purpose)))}
${sel('update', 'version (first token)', uniq(rs.map((r) => (r.versionStart === null ? '–' : String(r.versionStart)))).sort((a, b) => Number(a) - Number(b)))}
${sel('gate', 'gate reason', gates)}
${sel('reward', 'reward', uniq(rs.map((r) => (r.reward === null ? '–' : String(r.reward)))))}
${sel('staleness', 'staleness', uniq(rs.map((r) => (r.staleness === null ? '–' : String(r.staleness)))))}
${sel('engine', 'engine', uniq(rs.flatMap((r) => r.engines)))}
${sel('flag', 'shortcut flag', ['none', ...uniq(rs.flatMap((r) => r.shortcutFlags))])}
${sel('fate', 'fate', ['trained', 'discarded', 'not trained'])}
<span id="shown">${rs.length} of ${rs.length}</span></section>`;
  const rows = rs.map((r) => {
    const wf = r.workflowId ? d.links.workflow(r.workflowId) : null;
    const fateKey = r.batchVersion !== null ? 'trained' : r.status === 'discarded' ? 'discarded' : 'not trained';
    return `<tr data-task="${esc(r.taskId)}" data-purpose="${esc(r.purpose)}" data-update="${r.versionStart ?? '–'}" data-gate="${esc(gateKey(r))}" data-reward="${r.reward ?? '–'}" data-staleness="${r.staleness ?? '–'}" data-engine="${esc(r.engines.join(' '))}" data-flag="${esc(r.shortcutFlags.length ? r.shortcutFlags.join(' ') : 'none')}" data-fate="${fateKey}">
<td><a href="rollout/${encodeURIComponent(r.rolloutId)}"><code>${esc(r.rolloutId)}</code></a></td><td><a href="task/${encodeURIComponent(r.taskId)}">${esc(r.taskId)}</a></td>
<td>${esc(r.purpose)}</td><td>${esc(versionRange(r))}</td><td class="num">${fmtReward(r.reward)}</td><td><span class="gate g-${esc(r.gate ?? 'none')}">${esc(gateKey(r))}</span></td>
<td class="num">${r.staleness ?? '–'}</td><td>${esc(r.engines.join(', ') || '–')}</td><td>${esc(r.shortcutFlags.join(', ') || '–')}</td><td>${esc(fate(r))}</td>
<td class="num">${r.nTurns ?? '–'}</td><td class="num">${r.completionTokens ?? '–'}</td><td>${wf ? `<a href="${esc(wf)}" rel="noreferrer">workflow</a>` : '–'}</td></tr>`;
  }).join('\n');
  const body = `<header><h1>${esc(d.run.name)} <span class="status">${esc(d.run.status)}</span></h1>
<p class="meta">run <code>${esc(d.run.runId)}</code> · started ${esc(fmtWhen(d.run.startedAt))} · ${rs.length} rollouts · <a href="${esc(d.links.workflow(d.run.workflowId) ?? '#')}" rel="noreferrer">run workflow</a></p></header>
${filters}
<table class="list"><thead><tr><th>rollout</th><th>task</th><th>purpose</th><th>versions</th><th class="num">reward</th><th>gate</th><th class="num">stale</th><th>engines</th><th>shortcuts</th><th>fate</th><th class="num">turns</th><th class="num">tokens</th><th>Temporal</th></tr></thead>
<tbody>${rows}</tbody></table>
<footer>floe view · read-only on the audit history (Postgres) · filters also read from the address, e.g. <code>?gate=format</code></footer>`;
  return page(`floe view — ${d.run.name}`, body, LIST_SCRIPT);
}

/** Filters the list's rows by the selects; the address's query sets them on load. A row
 *  matches a select when its attribute holds the value (engines and flags are lists; the gate
 *  'format' matches every format reason). */
const LIST_SCRIPT = `
(function(){
  var sels=[].slice.call(document.querySelectorAll('select[data-f]'));
  var rows=[].slice.call(document.querySelectorAll('table.list tbody tr'));
  var q=new URLSearchParams(location.search);
  sels.forEach(function(s){var v=q.get(s.dataset.f);if(v!==null)s.value=v;s.addEventListener('change',apply);});
  function match(row,f,v){var a=row.getAttribute('data-'+f)||'';
    if(f==='gate')return a===v||a.indexOf(v+':')===0;
    if(f==='engine'||f==='flag')return a.split(' ').indexOf(v)>=0;
    return a===v;}
  function apply(){var n=0;rows.forEach(function(r){var ok=sels.every(function(s){return !s.value||match(r,s.dataset.f,s.value);});r.hidden=!ok;if(ok)n++;});
    document.getElementById('shown').textContent=n+' of '+rows.length;}
  apply();
})();`;

// ---------- one rollout

/** `base`: the run's address in the viewer (links to the list and the task page), null in a
 *  static export (a single file links nowhere: names stay plain text). */
export function renderRolloutPage(r: ViewRollout, o: { links: ViewLinks; tokens: TokenSource; base: string | null }): string {
  const row = r.row;
  const to = (path: string, html: string) => (o.base === null ? html : `<a href="${esc(o.base + path)}">${html}</a>`);
  const wf = row.workflowId ? o.links.workflow(row.workflowId) : null;
  const versions = [...new Set(r.turns.flatMap((t) => t.weightVersions ?? []))].sort((a, b) => a - b);
  const legend = versions.map((v) => `<span class="lg v${v % PALETTE.length}">v${v}</span>`).join(' ');
  const facts: [string, string][] = [
    ['task', to(`task/${encodeURIComponent(row.taskId)}`, esc(row.taskId))],
    ['purpose · attempt', `${esc(row.purpose)} · ${row.attempt} (group <code>${esc(row.groupId)}</code>)`],
    ['weight versions', versions.length ? versions.map((v) => `v${v}`).join(', ') : '–'],
    ['reward', fmtReward(row.reward)],
    ['gate', esc(gateKey(row))],
    ['staleness', row.staleness === null ? '–' : String(row.staleness)],
    ['engines', esc(row.engines.join(', ') || '–')],
    ['shortcut flags', esc(row.shortcutFlags.join(', ') || 'none')],
    ['fate', `<span id="fate">${esc(fate(row))}</span>`],
    ['Temporal', wf ? `<a href="${esc(wf)}" rel="noreferrer">rollout workflow</a>` : '–'],
  ];
  const head = `<header><p class="crumbs">${to('', esc(r.run.name))} › rollout</p>
<h1><code>${esc(row.rolloutId)}</code> <span class="status">${esc(row.status)}</span></h1>
<dl class="facts">${facts.map(([k, v]) => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`).join('')}</dl></header>`;
  const problem = r.problemStatement === null ? '' : `<section class="box"><h2>The issue the model was given</h2><pre class="text">${esc(r.problemStatement)}</pre></section>`;
  const turns = r.turns.map((t, i) => {
    const refused = !t.formatOk;
    const detail = refused ? refusalDetail(r, t.turnIndex) : null;
    const span = detail === null ? null : offendingSpan(t.rawText, detail);
    const textSpan = span && 'start' in span ? span : null;
    const vs = t.weightVersions ?? [];
    const crossed = vs.length > 1;
    const summary = `turn ${t.turnIndex} · ${esc(t.engineId ?? 'engine –')} · ${vs.map((v) => `v${v}`).join('→') || 'v–'}${crossed ? ' <span class="pill cross">crossed a weight update</span>' : ''}`
      + ` · ${t.generatedTokens ?? '–'} tokens${refused ? ` · <span class="pill refused">refused: ${esc(t.formatReason ?? '?')}</span>` : t.toolName ? ` · ${esc(t.toolName)}` : ''}`;
    const reason = refused ? `<p class="refusal"><b>The format gate refused this turn:</b> <code>${esc(t.formatReason ?? '?')}</code> — ${esc(FORMAT_REASON_DESCRIPTIONS[t.formatReason as FormatReason] ?? '')}${detail ? `<br><span class="detail">${esc(detail)}</span>` : ''}</p>` : '';
    const tool = t.toolName ? `<div class="tool"><h3>tool call</h3><pre class="text">${esc(t.toolName)} ${esc(JSON.stringify(t.toolArgs, null, 2) ?? '')}</pre>${t.exitCode !== null ? `<p class="meta">exit code ${t.exitCode}${t.toolMs !== null ? ` · ${t.toolMs} ms` : ''}</p>` : ''}</div>` : '';
    const obs = t.observation !== null ? `<div class="obs"><h3>observation (what the model saw next)</h3><pre class="text">${esc(t.observation)}</pre></div>` : '';
    return `<details class="turn${refused ? ' refused' : ''}" data-turn="${t.turnIndex}" data-prev="${i > 0 ? (r.turns[i - 1].weightVersions ?? []).at(-1) ?? '' : ''}"${i === 0 ? ' open' : ''}>
<summary>${summary}</summary>
${reason}<div class="raw"><h3>raw output${textSpan ? ' (the offending span marked)' : ''}</h3><pre class="text">${markSpan(t.rawText, textSpan)}</pre></div>
<div class="tokens" data-turn="${t.turnIndex}"><p class="loading">tokens load when the turn is opened…</p></div>
${tool}${obs}</details>`;
  }).join('\n');
  const mismatch = `<section class="box" id="mismatch"><h2>Engine vs trainer log-probs</h2>
<p>Hovering a generated token gives the <b>engine's</b> log-prob (the behaviour policy's, <code>turn_tokens.logprobs</code>). The trainer's log-prob of each token is <b>not stored</b> in Postgres: the trainer reports only batch means per weight update (<code>policy_versions.metrics</code>), so no per-token trainer column can be shown.</p>
${r.batch?.metrics ? `<table class="compact"><tbody>${['mismatch_mean_abs_logprob', 'mismatch_kl', 'mismatch_current_mean_abs_logprob', 'offpolicy_mean_abs_logprob'].filter((k) => r.batch!.metrics![k] !== undefined && r.batch!.metrics![k] >= 0)
    .map((k) => `<tr><td><code>${k}</code></td><td class="num">${fmtNum(r.batch!.metrics![k])}</td></tr>`).join('')}</tbody></table><p class="caption">Means over the whole batch of v${r.batch.version} (${r.batch.batchRollouts ?? '?'} rollouts), this rollout among them.</p>` : '<p class="caption">This rollout was not trained, so no trainer scored it.</p>'}</section>`;
  const grade = gradeSection(r);
  const training = `<section class="box" id="training"><h2>Training</h2><p>${esc(fate(row))}${r.batch ? ` · advantage ${r.batch.advantage === null ? '–' : fmtNum(r.batch.advantage)}` : ''}</p>
${r.gateDecision ? `<p>gate decision <code>${esc(r.gateDecision.gate)}</code>, reward ${fmtReward(r.gateDecision.reward)}</p><pre class="text small">${esc(JSON.stringify(r.gateDecision.detail, null, 2) ?? '')}</pre>` : '<p>no gate decision recorded</p>'}</section>`;
  const body = `${head}
<section class="box"><h2>Conversation</h2><p class="caption">Turns as the model saw them: the renderer's ids before each turn (grey), then the generated tokens shaded by the weight version that produced them: ${legend || 'no versions recorded'}. A <span class="bnd">v→v</span> mark stands where an update landed mid-turn. Hover a token for its index, id, version and the engine's log-prob.</p>
${problem}
${turns || '<p class="empty">no turns recorded</p>'}</section>
${grade}
${training}
${mismatch}
<footer>floe view · rollout <code>${esc(row.rolloutId)}</code> of run <code>${esc(r.run.runId)}</code>${o.tokens.kind === 'embedded' ? ' · static export: every turn embedded, nothing fetched' : ''}</footer>`;
  const data = o.tokens.kind === 'embedded'
    ? Object.entries(o.tokens.turns).map(([n, html]) => `<script type="application/json" id="turn-data-${n}">${jsonForScript({ html })}</script>`).join('\n')
    : '';
  return page(`floe view — ${row.rolloutId}`, `${body}\n${data}`, turnScript(o.tokens.kind, o.base ?? '', row.rolloutId) + TOKEN_HOVER);
}

/** JSON safe inside a <script> element: no "</script>" or "<!--" can end it early. */
export function jsonForScript(v: unknown): string {
  return JSON.stringify(v).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** Loads a turn's tokens when it is opened (and the first turn at once): from the server's
 *  JSON route, or from the JSON embedded in a static export. Errors show in the turn. */
function turnScript(kind: TokenSource['kind'], base: string, rolloutId: string): string {
  return `
(function(){
  function load(d){var n=d.getAttribute('data-turn');var box=d.querySelector('.tokens');if(box.dataset.loaded)return;box.dataset.loaded='1';
    function put(html){box.innerHTML=html;box.dataset.ready='1';}
    ${kind === 'embedded'
    ? "var el=document.getElementById('turn-data-'+n);put(el?JSON.parse(el.textContent).html:'<p class=\"empty\">no token ids recorded for this turn</p>');"
    : `fetch(${JSON.stringify(`${base}rollout/${encodeURIComponent(rolloutId)}/turn/`)}+n).then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);return r.json();}).then(function(j){put(j.html);},function(e){put('<p class="empty">could not load the tokens: '+String(e.message).replace(/</g,'&lt;')+'</p>');});`}
  }
  [].forEach.call(document.querySelectorAll('details.turn'),function(d){d.addEventListener('toggle',function(){if(d.open)load(d);});if(d.open)load(d);});
})();`;
}

function gradeSection(r: ViewRollout): string {
  const g = r.submission?.grade as { passed?: boolean; harness?: string; tests?: { id: string; group: string; outcome: string }[]; applyError?: string | null; timedOut?: boolean } | null | undefined;
  if (!r.submission) return '<section class="box" id="grade"><h2>Grading</h2><p class="empty">no submission: the rollout ended before it submitted a diff.</p></section>';
  const tests = g?.tests ?? [];
  const table = tests.length
    ? `<table class="compact tests"><thead><tr><th>group</th><th>test</th><th>outcome</th></tr></thead><tbody>${tests.map((t) =>
      `<tr class="o-${esc(t.outcome)}"><td>${esc(t.group)}</td><td><code>${esc(t.id)}</code></td><td><span class="outcome o-${esc(t.outcome)}">${esc(t.outcome)}</span></td></tr>`).join('')}</tbody></table>`
    : '<p class="empty">no per-test outcomes recorded</p>';
  return `<section class="box" id="grade"><h2>Grading</h2>
<p>${g ? `${g.passed ? 'resolved' : 'not resolved'} by the ${esc(g.harness ?? '?')} harness${g.applyError ? ` · apply error: ${esc(g.applyError)}` : ''}${g.timedOut ? ' · timed out' : ''}` : 'submitted, not graded'}</p>
${table}
<details><summary>the submitted diff${r.submission.truncated ? ' (truncated)' : ''}</summary><pre class="text">${esc(r.submission.diff)}</pre></details></section>`;
}

// ---------- one task across the run

export function renderTaskPage(d: { run: ViewRun; taskId: string; rollouts: ViewRolloutRow[]; history: ViewTaskHistory; base: string }): string {
  const byVersion = new Map<number, ViewRolloutRow[]>();
  for (const r of d.rollouts) {
    const v = r.versionStart ?? -1;
    byVersion.set(v, [...(byVersion.get(v) ?? []), r]);
  }
  const mean = (rs: ViewRolloutRow[]) => { const xs = rs.map((r) => r.reward).filter((x): x is number => x !== null); return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null; };
  const decisions = new Map<number, string[]>();
  for (const e of d.history.evictions) decisions.set(e.atVersion, [...(decisions.get(e.atVersion) ?? []), e.decision]);
  // a version with a decision but no rollout (a task retired there) keeps its row
  const versions = [...new Set([...byVersion.keys(), ...decisions.keys()])].sort((a, b) => a - b);
  const ofPurpose = (p: string) => versions.map((v): [number, number | null] => [v, mean((byVersion.get(v) ?? []).filter((r) => r.purpose === p))]).filter((x) => x[1] !== null);
  const chart = lineChart({
    label: `${d.taskId}: mean reward by version`, xLabel: 'policy version (of the first token)', yLabel: 'mean reward', y: [0, 1], integerX: true, height: 240,
    lines: ([{ name: 'train', points: ofPurpose('train'), color: PALETTE[0] }, { name: 'recheck', points: ofPurpose('recheck'), color: PALETTE[2], style: 'dashed' },
      { name: 'eval', points: ofPurpose('eval'), color: PALETTE[4], style: 'dashed' }] as Series[]).filter((s) => s.points.length),
  });
  const rows = versions.map((v) => {
    const rs = byVersion.get(v) ?? [];
    const m = mean(rs);
    return `<tr data-version="${v}"><td class="num">${v < 0 ? '–' : `v${v}`}</td><td>${rs.map((r) => `<a class="chip r-${r.reward === null ? 'none' : r.reward >= 1 ? 'ok' : 'fail'}" href="${d.base}rollout/${encodeURIComponent(r.rolloutId)}" title="${esc(`${r.purpose} · ${gateKey(r)} · ${fate(r)}`)}">${esc(r.purpose[0])}${r.reward === null ? '·' : fmtNum(r.reward)}</a>`).join(' ')}</td>
<td class="num">${m === null ? '–' : fmtNum(m)}</td><td>${(decisions.get(v) ?? []).map((x) => `<span class="decision d-${esc(x)}">${esc(x.replace(/_/g, ' '))}</span>`).join(' ')}</td></tr>`;
  }).join('\n');
  const evals = d.history.evaluations.length
    ? `<table class="compact"><thead><tr><th>evaluation</th><th class="num">version</th><th class="num">solved</th><th class="num">pass@1</th></tr></thead><tbody>${d.history.evaluations.map((e) =>
      `<tr><td>${esc(e.label)}</td><td class="num">v${e.version}</td><td class="num">${e.solved}/${e.attempts}</td><td class="num">${fmtNum(e.pass1)}</td></tr>`).join('')}</tbody></table>`
    : '<p class="empty">no frozen-weight evaluation of this task</p>';
  const retire = d.history.evictions.length
    ? `<ol class="timeline">${d.history.evictions.map((e) => `<li><b>v${e.atVersion}</b> <span class="decision d-${esc(e.decision)}">${esc(e.decision.replace(/_/g, ' '))}</span> <code>${esc(JSON.stringify(e.evidence))}</code></li>`).join('')}</ol>`
    : '<p class="empty">never retired</p>';
  const body = `<header><p class="crumbs"><a href="${d.base}">${esc(d.run.name)}</a> › task</p><h1>${esc(d.taskId)} ${d.history.state ? `<span class="status">${esc(d.history.state.replace(/_/g, ' '))}</span>` : ''}</h1>
<p class="meta">${d.rollouts.length} rollouts in run <code>${esc(d.run.runId)}</code>: learned, retired, rechecked, revived or forgotten, version by version.</p></header>
<section class="box"><h2>Mean reward by version</h2>${chart}</section>
<section class="box"><h2>Retire / recheck / revive</h2>${retire}</section>
<section class="box"><h2>Rollouts by version</h2><p class="caption">Each chip is a rollout (t train, r recheck, e eval) with its reward; green solved, red not.</p>
<table class="byversion"><thead><tr><th class="num">version</th><th>rollouts</th><th class="num">mean</th><th>decisions</th></tr></thead><tbody>${rows}</tbody></table></section>
<section class="box"><h2>Frozen-weight evaluations</h2>${evals}</section>`;
  return page(`floe view — ${d.taskId}`, body);
}

/** A page for a request the viewer cannot answer (unknown run, rollout or task). */
export function renderNotFound(what: string, base: string): string {
  return page('floe view — not found', `<h1>not found</h1><p>${esc(what)}</p><p><a href="${base}">back to the run</a></p>`);
}

/** Every run, newest first (floe view without a run id). */
export function renderRunsPage(runs: ViewRun[]): string {
  const rows = runs.map((r) => `<tr><td><a href="run/${encodeURIComponent(r.runId)}/"><code>${esc(r.runId)}</code></a></td><td>${esc(r.name)}</td><td>${esc(r.status)}</td><td>${esc(fmtWhen(r.startedAt))}</td></tr>`).join('');
  return page('floe view — runs', `<h1>Runs</h1><table><thead><tr><th>run</th><th>name</th><th>status</th><th>started</th></tr></thead><tbody>${rows}</tbody></table>${runs.length ? '' : '<p class="empty">no runs in this database yet</p>'}`);
}

const CSS = `
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:#222;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1280px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 6px;font-weight:600}h2{font-size:15px;margin:0 0 8px}h3{font-size:12px;color:#666;margin:10px 0 4px;font-weight:500;text-transform:uppercase;letter-spacing:.04em}
a{color:#2f5b8a}code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.meta,.crumbs,.caption{color:#666;font-size:12.5px;margin:4px 0}
.status{font-size:12px;font-weight:500;padding:2px 8px;border-radius:10px;background:#e8e8e8;color:#444;vertical-align:middle}
.box{background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:12px 16px;margin-top:14px}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;background:#fff;border:1px solid #e3e5e8;border-radius:8px;padding:10px 14px;margin:12px 0}
.filters label{font-size:12px;color:#555}#shown{margin-left:auto;color:#666;font-size:12px}
table{border-collapse:collapse;width:100%;font-size:13px;background:#fff}
th,td{text-align:left;padding:4px 7px;border-bottom:1px solid #eceef1;vertical-align:top}th{color:#666;font-weight:500;font-size:12px}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}table.compact{font-size:12px;width:auto;min-width:50%}
.gate{font-size:12px;padding:1px 6px;border-radius:8px;background:#eee;white-space:nowrap}.g-passed{background:#dcefd8}.g-format{background:#f7dada}.g-tests_failed{background:#f5ecd2}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:6px 14px;margin:10px 0 0}.facts div{background:#fff;border:1px solid #e3e5e8;border-radius:6px;padding:6px 10px}
dt{color:#666;font-size:11px;text-transform:uppercase;letter-spacing:.04em}dd{margin:2px 0 0}
details.turn{border:1px solid #e3e5e8;border-radius:6px;margin:8px 0;background:#fcfcfd}details.turn>summary{padding:6px 10px;cursor:pointer}details.turn[open]>summary{border-bottom:1px solid #e3e5e8}
details.turn>*:not(summary){margin-left:10px;margin-right:10px}details.turn.refused{border-color:#e6a3a3}
.pill{font-size:11px;padding:1px 7px;border-radius:8px}.pill.cross{background:#fff1c9;color:#7a5b12}.pill.refused{background:#f7dada;color:#8a2525}
pre.text{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #eceef1;border-radius:4px;padding:8px;margin:4px 0;max-height:420px;overflow:auto;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre.small{max-height:200px}
mark.span{background:#ffb3b3;outline:2px solid #c0392b;border-radius:2px}
.refusal{background:#fdf0f0;border:1px solid #f0c4c4;border-radius:6px;padding:6px 10px}.refusal .detail{font-family:ui-monospace,monospace;font-size:12px;color:#8a2525}
.tokens{font:12px/1.6 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-all;margin:6px 0 10px}
.tok-in{color:#999;border-left:3px solid #ddd;padding-left:6px;margin-bottom:4px;max-height:160px;overflow:auto}
.tok-gen{border-left:3px solid #9ab;padding-left:6px;max-height:560px;overflow:auto}
.tok-gen i{font-style:normal;border-radius:2px}.lg{border-radius:2px;padding:0 4px}${PALETTE.map((_, i) => `.v${i}{background:${versionShade(i)}}`).join('')}.vx{background:#e8e8e8}
.tok-gen i.b{outline:2px solid #c0392b}.tok-gen i.bad{background:#ffb3b3;outline:2px solid #c0392b}
.bnd{display:inline-block;font:bold 10px/1.2 system-ui,sans-serif;color:#fff;background:#c0392b;border-radius:3px;padding:0 4px;margin:0 2px}
.outcome{font-size:12px;padding:1px 6px;border-radius:8px}.o-passed .outcome,.outcome.o-passed{background:#dcefd8}.outcome.o-failed,.outcome.o-error{background:#f7dada}.outcome.o-missing,.outcome.o-skipped{background:#eee}
.chip{display:inline-block;font:11px ui-monospace,monospace;padding:1px 5px;border-radius:6px;margin:1px;text-decoration:none;color:#222}.r-ok{background:#dcefd8}.r-fail{background:#f7dada}.r-none{background:#eee}
.decision{font-size:12px;padding:1px 7px;border-radius:9px;background:#eee;white-space:nowrap}.d-retire_mastered{background:#dcefd8}.d-revive{background:#f7dada}.d-recheck_keep_retired{background:#dbe8f6}
.timeline{margin:0;padding-left:20px}.empty,.loading{color:#888}
svg{max-width:100%;height:auto}
footer{color:#888;font-size:12px;margin-top:18px}
`;
