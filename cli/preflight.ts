import type { RunConfig } from '../core/config.js';
import type { Settings } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { imageLoadHint } from '../core/taskLayouts.js';
import { selectTasks, type PoolSelection } from '../tasks/loaders.js';
import { preflightImages } from '../activities/sandbox/images.js';
import { adapterFor } from '../activities/engines/index.js';

/** `floe run start`'s checks before a run exists (issue 17, bad input): the engines and the
 *  trainer answer and hold the run's starting weights (version 0: a new run's first update makes
 *  v1), the task pool loads (no bad row under onBadRow 'fail', every tasks.include and
 *  evaluation.heldOut id is there, something is left), and every task image is on this
 *  machine's container host when the run's sandboxes are local (pulled when a registry answers,
 *  as the run's own preflight would). Each problem names what is wrong and the fix. Nothing is
 *  written: no runs row, no workflow. The training run checks the pool and images again itself
 *  (workflows/trainingRun.ts), for runs started by other clients. */

export interface Problem { what: string; fix: string }

/** The version every new run starts from (core/runLoop.ts newLoopState). */
export const STARTING_VERSION = 0;

export class PreflightError extends Error {
  constructor(readonly problems: Problem[]) {
    super(`the run was not started; nothing was written (no run, no workflow). ${problems.length} problem(s):\n${problems.map((p) => `  ${p.what.replace(/\n\s*/g, '\n      ')}\n    fix: ${p.fix}`).join('\n')}`);
    this.name = 'PreflightError';
  }
}

const HEALTH_TIMEOUT_MS = 5000;

export async function preflightRun(s: Settings, c: RunConfig): Promise<Problem[]> {
  const found = await Promise.all([engines(c), trainer(c), pool(s, c)]);
  return found.flat();
}

async function engines(c: RunConfig): Promise<Problem[]> {
  if (!c.engines.endpoints.length) return [{ what: 'engines.endpoints lists no engine', fix: 'list the inference servers the run generates with (engines.endpoints: [{id, url, kind}]); `floe demo` starts embedded ones itself' }];
  return (await Promise.all(c.engines.endpoints.map(async (e, i): Promise<Problem[]> => {
    const where = `engines.endpoints[${i}] (${e.id}, ${e.kind}) at ${e.url}`;
    const probe = `\`floe engine probe ${e.url}${e.kind === 'reference' ? '' : ` --kind ${e.kind}`}\` checks what it serves`;
    try {
      await withTimeout((await adapterFor(e)).health(), `no answer within ${HEALTH_TIMEOUT_MS / 1000} s`);
    } catch (err) {
      return [{ what: `${where} does not answer its health check (${oneLine(err).replace(/ \(fix: .*\)$/, '')})`, fix: `start the server, or correct its url in the run config; ${probe}` }];
    }
    // floe's reference engine says which weights it holds; a new run's engines hold version 0
    const held = e.kind === 'reference' ? (await healthJson(e.url).catch(() => ({ version: undefined }))).version : undefined;
    if (typeof held === 'number' && held !== STARTING_VERSION) {
      return [{ what: `${where} serves weight version ${held}, and a new run starts at version ${STARTING_VERSION}`, fix: 'start the engine again from the run\'s starting weights (the checkpoint the trainer starts from, version 0)' }];
    }
    return [];
  }))).flat();
}

async function trainer(c: RunConfig): Promise<Problem[]> {
  const url = c.trainer.url;
  if (!url) return [{ what: 'trainer.url is empty', fix: 'give the url of the trainer server (python -m floe_engine.trainer_server); `floe demo` starts an embedded one itself' }];
  let health: { version?: unknown };
  try {
    health = await healthJson(url);
  } catch (err) {
    return [{ what: `trainer.url ${url} does not answer GET /health (${oneLine(err)})`, fix: 'start the trainer (python -m floe_engine.trainer_server --checkpoint <the starting weights> --publish-dir <dir>), or correct trainer.url' }];
  }
  if (typeof health.version !== 'number') {
    return [{ what: `trainer.url ${url} answers /health without a weight version (${JSON.stringify(health).slice(0, 120)}): it is not floe's trainer`, fix: 'point trainer.url at floe\'s trainer server (python -m floe_engine.trainer_server)' }];
  }
  if (health.version !== STARTING_VERSION) {
    return [{ what: `the trainer at ${url} is at weight version ${health.version}, and a new run starts at version ${STARTING_VERSION} (its first update makes v1)`, fix: 'start the trainer again from the run\'s starting weights (the version-0 checkpoint the engines serve) with an empty --publish-dir: `floe run start` always begins a new run at version 0' }];
  }
  return [];
}

async function pool(s: Settings, c: RunConfig): Promise<Problem[]> {
  const { source } = c.tasks;
  const heldOut = c.evaluation.heldOut;
  const sel: PoolSelection = { source, layout: c.tasks.layout, include: c.tasks.include, limit: c.tasks.limit, excludeLooseTests: c.tasks.excludeLooseTests, onBadRow: c.tasks.onBadRow, ...(heldOut.length ? { exclude: heldOut } : {}) };
  let images: string[];
  try {
    const tasks = selectTasks(sel).tasks;
    const held = heldOut.length ? selectTasks({ ...sel, include: heldOut, exclude: [], limit: 0, excludeLooseTests: false }).tasks : [];
    // a data audit's version of the pool is applied from Postgres by the run itself
    if (!tasks.length && !c.tasks.audit) return [{ what: `the task pool is empty (tasks.source ${source}${c.tasks.include.length ? `, tasks.include ${c.tasks.include.length} id(s)` : ''}, limit ${c.tasks.limit}${c.tasks.excludeLooseTests ? ', excludeLooseTests on' : ''})`, fix: `\`floe tasks check ${source}\` shows what the source holds; widen tasks.include / tasks.limit, or set tasks.excludeLooseTests: false` }];
    images = [...new Set([...tasks, ...held].flatMap((t) => (t.source.kind === 'image' ? [t.source.image] : [])))].sort();
  } catch (err) {
    return [poolProblem(source, err as Error)];
  }
  // sandboxes on another host: the run's own preflight checks its images there
  if (!images.length || c.sandbox.host !== 'local') return [];
  try {
    const { missing } = await preflightImages(dockerFromSettings(s), images);
    return missing.map((m) => ({ what: `task image ${m.image} is not on the sandbox host (${s.docker.host}), and pulling it failed: ${m.pullError}`, fix: imageLoadHint(m.image) }));
  } catch (err) {
    return [{ what: `the task images cannot be checked: ${oneLine(err)}`, fix: 'start the container engine (`floe up`, or point DOCKER_HOST at yours) and start the run again' }];
  }
}

/** A pool that does not load: the loader's message names the problem; the fix by its kind. */
function poolProblem(source: string, err: Error): Problem {
  const m = err.message;
  const check = `\`floe tasks check ${source}\``;
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { what: `tasks.source ${source}: no such file`, fix: 'give a JSONL file of dataset rows (SWE-bench, SWE-Gym, SWE-rebench or R2E-Gym layout), or toy' };
  if (m.startsWith('tasks.include names unknown task ids')) return { what: m, fix: `take them out of tasks.include, or correct them: ${check} --json lists the ids ${source} holds` };
  if (m.startsWith('evaluation.heldOut names unknown task ids')) return { what: m, fix: `take them out of evaluation.heldOut, or correct them: ${check} --json lists the ids ${source} holds` };
  if (/bad task row/.test(m)) return { what: m.split('\nFix the rows')[0], fix: `correct the rows (${check} names each by line and field), or set tasks.onBadRow: skip to leave them out` };
  return { what: `the task pool does not load: ${m}`, fix: `${check} shows what is wrong with ${source}` };
}

async function healthJson(url: string): Promise<{ version?: unknown }> {
  const r = await fetch(new URL('/health', url), { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  const body = (await r.json().catch(() => null)) as unknown;
  return body !== null && typeof body === 'object' ? body : {};
}

function withTimeout<T>(p: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(message)), HEALTH_TIMEOUT_MS); })]).finally(() => clearTimeout(timer));
}

/** An error in a line, with its cause (fetch says only "fetch failed"; the cause says why). */
const oneLine = (err: unknown): string => {
  const e = err as Error & { cause?: { message?: string } };
  return `${e.message ?? String(err)}${e.cause?.message ? `: ${e.cause.message}` : ''}`.replace(/\s+/g, ' ').slice(0, 300);
};
