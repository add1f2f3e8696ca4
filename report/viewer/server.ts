import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { resolveTokenizer } from '../../activities/renderer.js';
import type { Queryable } from '../../store/pool.js';
import {
  getViewRollout, getViewRun, getViewTaskHistory, getViewTurnTokens, listTaskRollouts, listViewRollouts, listViewRuns, listViewTurnTokens,
  type ViewRollout,
} from '../../store/rolloutView.js';
import { badTokenOf, type TokenPieces, renderListPage, renderNotFound, renderRolloutPage, renderRunsPage, renderTaskPage, renderTurnTokens, type ViewLinks } from './pages.js';

/** `floe view`: an HTTP server on 127.0.0.1 that renders the pages of report/viewer/pages.ts
 *  from Postgres. It reads through the pool it is given, which the CLI opens read-only
 *  (store/rolloutView.ts readOnlyPool); it answers GET only.
 *
 *  /                                    the run given on the command line (else every run)
 *  /run/<run>/                          the run's rollouts, filterable
 *  /run/<run>/rollout/<id>              one rollout, turns collapsed
 *  /run/<run>/rollout/<id>/turn/<n>     one turn's tokens: {html, tokens} (loaded on demand)
 *  /run/<run>/task/<task>               one task across the run */

/** Loopback only: the viewer shows prompts, model output and diffs; it is never exposed. */
export const VIEWER_HOST = '127.0.0.1';

export interface Viewer { url: string; close(): Promise<void> }

/** Where a run's tokenizer folder is found (a policy.tokenizer of builtin:NAME lies under
 *  FLOE_HOME/tokenizers, a relative path under the repository). */
export interface TokenizerPaths { home: string; repoRoot: string }

const piecesCache = new Map<string, TokenPieces | null>();

/** A Hugging Face tokenizer's pieces by id, from its folder's tokenizer.json (null: the byte
 *  tokenizer, or no readable tokenizer.json there: tokens then show as ids). */
export function loadTokenPieces(spec: string, paths: TokenizerPaths | undefined): TokenPieces | null {
  if (spec === 'byte' || !paths) return null;
  if (piecesCache.has(spec)) return piecesCache.get(spec)!;
  let pieces: TokenPieces | null = null;
  try {
    const j = JSON.parse(fs.readFileSync(path.join(resolveTokenizer(spec, paths), 'tokenizer.json'), 'utf8')) as {
      model?: { vocab?: Record<string, number> | [string, number][] }; added_tokens?: { id: number; content: string; special?: boolean }[]; decoder?: { type?: string; decoders?: { type?: string }[] } | null };
    const byId = new Map<number, string>();
    const vocab = j.model?.vocab;
    if (vocab && !Array.isArray(vocab)) for (const [piece, id] of Object.entries(vocab)) byId.set(id, piece);
    else if (Array.isArray(vocab)) vocab.forEach(([piece], id) => byId.set(id, piece)); // Unigram: [piece, score] by id
    const special = new Set<number>();
    for (const t of j.added_tokens ?? []) { byId.set(t.id, t.content); special.add(t.id); }
    const decoders = [j.decoder?.type, ...(j.decoder?.decoders ?? []).map((d) => d.type)];
    pieces = { byId, special, byteLevel: decoders.includes('ByteLevel') };
  } catch (e) {
    process.stderr.write(`[floe view] tokenizer ${spec}: ${(e as Error).message}; tokens show as ids\n`);
  }
  piecesCache.set(spec, pieces);
  return pieces;
}

export async function startViewer(db: Queryable, o: { runId?: string; port?: number; links: ViewLinks; tokenizers?: TokenizerPaths }): Promise<Viewer> {
  const server = http.createServer((req, res) => {
    route(db, o, req.method ?? 'GET', req.url ?? '/').then(
      (r) => { res.writeHead(r.status, { 'content-type': r.type, 'cache-control': 'no-store', ...(r.location ? { location: r.location } : {}) }); res.end(r.body); },
      (err: unknown) => { res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }); res.end(`floe view: ${(err as Error).message}`); },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => reject(e.code === 'EADDRINUSE' ? new Error(`port ${o.port} on ${VIEWER_HOST} is in use; pass another with --port N (0 picks a free one)`) : e));
    server.listen(o.port ?? 0, VIEWER_HOST, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${VIEWER_HOST}:${port}/`,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

interface Reply { status: number; type: string; body: string; location?: string }
const HTML = 'text/html; charset=utf-8';
const html = (body: string, status = 200): Reply => ({ status, type: HTML, body });

async function route(db: Queryable, o: { runId?: string; links: ViewLinks; tokenizers?: TokenizerPaths }, method: string, url: string): Promise<Reply> {
  if (method !== 'GET' && method !== 'HEAD') return { status: 405, type: 'text/plain', body: 'floe view is read-only: GET only' };
  const path = new URL(url, 'http://x').pathname;
  if (path === '/') {
    if (o.runId) return { status: 302, type: 'text/plain', body: '', location: `/run/${encodeURIComponent(o.runId)}/` };
    return html(renderRunsPage(await listViewRuns(db)));
  }
  const m = /^\/run\/([^/]+)\/(.*)$/.exec(path);
  if (!m) return html(renderNotFound(`no page at ${path}`, '/'), 404);
  const runId = decodeURIComponent(m[1]);
  const base = `/run/${encodeURIComponent(runId)}/`;
  const rest = m[2].split('/').map(decodeURIComponent);
  const run = await getViewRun(db, runId);
  if (!run) return html(renderNotFound(`no run ${runId} in this database (floe view with no run id lists them)`, '/'), 404);
  if (rest.length === 1 && rest[0] === '') return html(renderListPage({ run, rollouts: await listViewRollouts(db, runId), links: o.links }));
  if (rest[0] === 'rollout' && rest.length === 2) {
    const r = await getViewRollout(db, rest[1]);
    if (!r || r.run.runId !== runId) return html(renderNotFound(`no rollout ${rest[1]} in run ${runId}`, base), 404);
    return html(renderRolloutPage(r, { links: o.links, tokens: { kind: 'server' }, base }));
  }
  if (rest[0] === 'rollout' && rest[2] === 'turn' && rest.length === 4 && /^\d+$/.test(rest[3])) {
    const r = await getViewRollout(db, rest[1]);
    if (!r || r.run.runId !== runId) return { status: 404, type: 'application/json', body: JSON.stringify({ error: `no rollout ${rest[1]} in run ${runId}` }) };
    const n = Number(rest[3]);
    const t = await getViewTurnTokens(db, r.row.rolloutId, n);
    if (!t) return { status: 404, type: 'application/json', body: JSON.stringify({ error: `rollout ${rest[1]} has no token ids for turn ${n}` }) };
    return { status: 200, type: 'application/json', body: JSON.stringify({ tokens: t.completionIds.length, html: turnHtml(r, t, n, o.tokenizers) }) };
  }
  if (rest[0] === 'task' && rest.length === 2) {
    const rollouts = await listTaskRollouts(db, runId, rest[1]);
    if (!rollouts.length) return html(renderNotFound(`task ${rest[1]} has no rollouts in run ${runId}`, base), 404);
    return html(renderTaskPage({ run, taskId: rest[1], rollouts, history: await getViewTaskHistory(db, runId, rest[1]), base }));
  }
  return html(renderNotFound(`no page at ${path}`, base), 404);
}

/** A turn's tokens, continuing the version of the turn before it (a boundary between turns
 *  shows too). */
function turnHtml(r: ViewRollout, t: Parameters<typeof renderTurnTokens>[0], n: number, tokenizers: TokenizerPaths | undefined): string {
  const i = r.turns.findIndex((x) => x.turnIndex === n);
  const previousVersion = i > 0 ? (r.turns[i - 1].weightVersions ?? []).at(-1) ?? null : null;
  return renderTurnTokens(t, { tokenizer: r.run.tokenizer, pieces: loadTokenPieces(r.run.tokenizer, tokenizers), previousVersion, badToken: badTokenOf(r, n) });
}

/** One rollout as a single static HTML file: every turn's tokens embedded as JSON and rendered
 *  when its turn is opened, the same way as the server's page; nothing fetched. */
export async function exportRollout(db: Queryable, rolloutId: string, links: ViewLinks, tokenizers?: TokenizerPaths): Promise<string> {
  const r = await getViewRollout(db, rolloutId);
  if (!r) throw new Error(`no rollout ${rolloutId} in this database (the list page of floe view names them)`);
  const turns: Record<number, string> = {};
  for (const t of await listViewTurnTokens(db, rolloutId)) turns[t.turnIndex] = turnHtml(r, t, t.turnIndex, tokenizers);
  return renderRolloutPage(r, { links, tokens: { kind: 'embedded', turns }, base: null });
}
