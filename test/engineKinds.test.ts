import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRunConfig } from '../core/config.js';
import { getRunStatus, runWorkflowId, startRun } from '../client/runs.js';
import { selectTasks } from '../tasks/loaders.js';
import { buildWarmStart } from '../infra/warmstart.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../infra/engines.js';
import { repoRoot } from '../infra/settings.js';
import { buildRunSummary } from '../report/summary.js';
import type { EngineKind, UpdateMode } from '../activities/engines/adapter.js';
import { switchPoints } from '../core/weightVersions.js';
import { settings, withWorkers, type Platform } from './helpers/platform.js';
import { startVllmDouble } from './helpers/vllmDouble.js';
import { startSglangDouble } from './helpers/sglangDouble.js';
import { eventually } from './helpers/wait.js';
import { listTrainedSequences } from '../store/batches.js';
import { listEngineEvents, listEngineRequests, listEngineWeights, listResubmittedTurns, listTurnRequests } from '../store/engines.js';
import { countRollouts, listRollouts, listTurnTokens } from '../store/rollouts.js';

/** "Bring your own engine": the whole training loop (Temporal, Postgres, podman sandboxes,
 *  the reference trainer) through each adapter, against doubles of vLLM and SGLang
 *  (test/helpers/vllmDouble.ts, sglangDouble.ts: they answer as each pinned server's source
 *  defines, an empty /health body and no per-token versions included, generating with a real
 *  reference engine behind them at a fixed token rate), with one engine restarted mid-run. */

const TASKS = ['toy__caesar_wrap', 'toy__hex_pad'];
/** A double generates at this rate, as a real server does, so weight updates land on requests in flight. */
const TOKENS_PER_SECOND = 40;
let db: pg.Pool;
let checkpoint: string;
let platform: Platform;

interface Pool { gpu: EmbeddedGpu; endpoints: { id: string; url: string; node: string; kind: EngineKind }[]; restart(id: string): Promise<void>; close(): Promise<void> }

async function enginePool(kinds: EngineKind[], tag: string): Promise<Pool> {
  const gpu = await startEmbeddedGpu(settings, { count: kinds.length, checkpoint, publishDir: path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-${tag}`) });
  const doubles = new Map<string, { url: string; restart(o?: { downMs?: number }): Promise<void>; close(): Promise<void> }>();
  const endpoints = [];
  for (const [i, kind] of kinds.entries()) {
    const id = `${kind}-${i}`;
    const backend = gpu.engines[i].url;
    const opts = { backend, launchCheckpoint: checkpoint, tokensPerSecond: TOKENS_PER_SECOND };
    const d = kind === 'vllm' ? await startVllmDouble(opts) : kind === 'sglang' ? await startSglangDouble({ ...opts, returnOriginalLogprob: true }) : null;
    if (d) doubles.set(id, d);
    endpoints.push({ id, url: d?.url ?? backend, node: 'local', kind });
  }
  return {
    gpu, endpoints,
    restart: async (id) => { await doubles.get(id)!.restart({ downMs: 3000 }); },
    close: async () => { await Promise.all([...doubles.values()].map((d) => d.close())); await gpu.stop(); },
  };
}

function config(p: Pool, name: string, updateMode: UpdateMode) {
  return parseRunConfig({
    name,
    tasks: { source: 'toy', include: TASKS },
    engines: { endpoints: p.endpoints, router: 'least-loaded', updateMode },
    trainer: { url: p.gpu.trainer!.url, lr: 1e-3 },
    rollout: { groupSize: 2, maxInFlight: 4, maxTurns: 2 },
    training: { groupsPerUpdate: 1, updates: 2 },
    eviction: { enabled: false },
  });
}

/** Run 2 weight updates on `kinds`, restarting `restartId` after its first load. */
async function trainThrough(kinds: EngineKind[], tag: string, restartId: string | null, updateMode: UpdateMode = 'abort') {
  const p = await enginePool(kinds, tag);
  let restartedAt: Date | null = null;
  try {
    const { runId } = await startRun(platform.client, config(p, `engines-${tag}`, updateMode));
    if (restartId) {
      await eventually(`${restartId} to load version 1`, () => listEngineEvents(db, runId, { engineId: restartId, events: ['weights_loaded'] }), (r) => r.length > 0, 300_000);
      restartedAt = new Date();
      await p.restart(restartId);
    }
    const final = await platform.client.workflow.getHandle(runWorkflowId(runId)).result();
    expect(final).toMatchObject({ state: 'completed', policyVersion: 2, updatesDone: 2 });
    await eventually('rollouts to settle', () => countRollouts(db, runId, { status: 'running' }), (n) => n === 0, 120_000);

    // every rollout that generated has a start version; every trained token's version is recorded
    const finished = await listRollouts(db, runId, { status: 'finished' });
    expect(finished.filter((r) => (r.completionTokens ?? 0) > 0 && r.versionStart === null).map((r) => r.rolloutId)).toEqual([]);
    const trained = await listTrainedSequences(db, runId);
    expect(trained.length).toBeGreaterThanOrEqual(2);
    for (const t of trained) expect(t.tokenVersions.filter((v, i) => t.lossMask[i] === 1 && !(v >= 0 && v <= 2))).toEqual([]);
    // floe's record of what each engine serves, and the engines (the backends behind the doubles) agree
    const served = await listEngineWeights(db, runId);
    expect(served.map((r) => [r.engineId, r.version, r.state])).toEqual(p.endpoints.map((e) => [e.id, 2, 'serving']).sort());
    for (const e of p.gpu.engines) expect(((await (await fetch(`${e.url}/health`)).json()) as { version: number }).version).toBe(2);
    return { runId, pool: p, restartedAt };
  } catch (err) {
    await p.close();
    throw err;
  }
}

/** Turns whose requests spanned a weight update: a request aborted by the update's pause
 *  (its kept ids stamped with the old version), then one resubmitted from the exact prefix
 *  (the turn's prompt plus every id kept so far) whose ids carry the new version. */
async function spannedUpdates(runId: string) {
  const turns = await listResubmittedTurns(db, runId);
  const spans = turns.filter((t) => t.outcomes.includes('aborted') && t.outcomes[t.outcomes.length - 1] === 'answered');
  for (const s of spans) {
    const reqs = await listTurnRequests(db, s.rolloutId, s.turnIndex);
    const tok = (await listTurnTokens(db, s.rolloutId)).filter((t) => t.turnIndex === s.turnIndex);
    const stamped: number[] = [];
    let kept = 0;
    for (const r of reqs) {
      // each request is sent from the first one's prefix plus exactly the ids kept before it
      expect(r.keptBefore).toBe(kept);
      expect(r.prefixTokens).toBe(reqs[0].prefixTokens + kept);
      if (r.outcome === 'aborted' || r.outcome === 'answered') {
        stamped.push(...new Array<number>(r.generated ?? 0).fill(r.version!));
        kept += r.generated ?? 0;
      }
    }
    // the turn's recorded per-token versions are the kept requests' versions, in order
    expect(tok[0].tokenVersions).toEqual(stamped);
  }
  return spans.filter((s) => {
    const v = s.versions.filter((x): x is number => x !== null);
    return v[v.length - 1] > v[0];
  });
}

beforeAll(async () => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
  const tasks = selectTasks({ source: 'toy', include: TASKS, limit: 0, excludeLooseTests: true, onBadRow: 'fail' }).tasks;
  checkpoint = await buildWarmStart(settings, tasks, { steps: 20, lr: 3e-3, model: 'tiny', seed: 0 });
  platform = await withWorkers(['control', 'sandbox', 'gpu']);
}, 600_000);

afterAll(async () => {
  await platform?.close();
  await db?.end();
});

describe('the training loop through each adapter', () => {
  for (const kind of ['vllm', 'sglang'] as const) {
    it(`${kind}: 2 engines, 2 weight updates, one engine restarted mid-run`, async () => {
      const { runId, pool, restartedAt } = await trainThrough([kind, kind], kind, `${kind}-1`);
      try {
        const spans = await spannedUpdates(runId);
        expect(spans.length).toBeGreaterThanOrEqual(1);
        // the restarted engine came back with its launch weights: floe loaded a version of the run
        // into it (a resync, or the next update) before any of its answers was kept again, and
        // requests it dropped when it went away were placed again
        const restarted = `${kind}-1`;
        const reload = (await listEngineEvents(db, runId, { engineId: restarted, events: ['resynced', 'weights_loaded'] })).find((e) => e.at > restartedAt!);
        expect(reload).toBeDefined();
        const keptBefore = (await listEngineRequests(db, runId, { engineId: restarted }))
          .filter((r) => (r.outcome === 'answered' || r.outcome === 'aborted') && r.sentAt > restartedAt! && r.answeredAt !== null && r.answeredAt < reload!.at);
        expect(keptBefore.map((r) => r.requestId)).toEqual([]);
      } finally {
        await pool.close();
      }
    }, 900_000);
  }

  for (const kind of ['vllm', 'sglang'] as const) {
    for (const mode of ['abort', 'keep'] as const) {
      it(`${kind}: engines.updateMode ${mode}, 2 engines, 2 weight updates: ${mode === 'keep' ? 'nothing aborted, a turn that runs through an update records where its ids switch version' : 'turns that span an update are aborted and resubmitted from their exact prefix'}`, async () => {
        const { runId, pool } = await trainThrough([kind, kind], `${kind}-${mode}`, null, mode);
        try {
          const reqs = await listEngineRequests(db, runId);
          const switched = reqs.filter((r) => r.detail !== null && typeof r.detail === 'object' && 'switchAt' in r.detail);
          if (mode === 'keep') {
            // the engines kept what they were generating: no request was aborted by an update
            expect(reqs.filter((r) => r.outcome === 'aborted').map((r) => r.requestId)).toEqual([]);
            expect(switched.length).toBeGreaterThanOrEqual(1);
            for (const r of switched) {
              const at = (r.detail as { switchAt: number[] }).switchAt;
              const turn = (await listTurnTokens(db, r.rolloutId)).find((t) => t.turnIndex === r.turnIndex)!;
              const ids = turn.tokenVersions.slice(r.keptBefore, r.keptBefore + r.generated!);
              // the turn's recorded per-token versions switch exactly where the server's spans said, to a later version
              expect(switchPoints(ids)).toEqual(at);
              for (const i of at) expect(ids[i]).toBeGreaterThan(ids[i - 1]);
            }
          } else {
            // negative control: in mode abort no answer holds two versions; the update's pause aborted them
            expect(switched.map((r) => r.requestId)).toEqual([]);
            expect((await spannedUpdates(runId)).length).toBeGreaterThanOrEqual(1);
          }
          const reader = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
          const s = await buildRunSummary(reader, runId).finally(() => reader.end());
          expect(s.inFlight).toMatchObject({ updateMode: mode, updates: 2 });
          expect(s.inFlight.spanningTurnsPerUpdate).toBeGreaterThan(0);
          if (mode === 'keep') expect(s.inFlight.droppedTokensPerUpdate).toBe(0);
          console.log(`[update modes] ${kind} ${mode}: ${JSON.stringify(s.inFlight)}`);
        } finally {
          await pool.close();
        }
      }, 900_000);
    }
  }

  it('a mixed pool (reference, vLLM-shaped, SGLang-shaped) trains under least-loaded placement, placements per engine in the report', async () => {
    const { runId, pool } = await trainThrough(['reference', 'vllm', 'sglang'], 'mixed', null);
    try {
      const reader = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
      const s = await buildRunSummary(reader, runId).finally(() => reader.end());
      expect(s.engines.map((e) => [e.engineId, e.kind])).toEqual([['reference-0', 'reference'], ['sglang-2', 'sglang'], ['vllm-1', 'vllm']]);
      for (const e of s.engines) expect(e.placements).toBeGreaterThan(0);
      // the reference engine rebuilt in place: it was never paused, so none of its requests was resubmitted
      expect(s.engines.find((e) => e.kind === 'reference')!.resubmitted).toBe(0);
      const st = await getRunStatus(platform.client, runId);
      expect(st.updatesDone).toBe(2);
    } finally {
      await pool.close();
    }
  }, 900_000);
});
