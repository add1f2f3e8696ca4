import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../db/migrate.js';
import { parseRunConfig } from '../core/config.js';
import { claimBatch, listBatchMembers } from '../store/batches.js';
import { discardRollouts, finishRollout, insertRollout, listRollouts, setRolloutStaleness } from '../store/rollouts.js';
import { insertRun } from '../store/runs.js';
import { settings } from './helpers/platform.js';

/** The store's set-based writes against a scratch database on the real Postgres. */
const dbName = `floe_store_test_${process.pid}`;
const admin = new pg.Client({ connectionString: settings.postgres.url });
const url = settings.postgres.url.replace(/\/[^/]+$/, `/${dbName}`);
let db: pg.Pool;

beforeAll(async () => {
  await admin.connect();
  await admin.query(`drop database if exists ${dbName}`);
  await admin.query(`create database ${dbName}`);
  await migrate(url);
  db = new pg.Pool({ connectionString: url, max: 2 });
  await insertRun(db, { runId: 'run', workflowId: 'wf', name: 'store-test', config: parseRunConfig({}) });
  for (const id of ['a', 'b', 'c', 'd']) await insertRollout(db, { runId: 'run', rolloutId: id, taskId: 't', groupId: 'g', attempt: 0, purpose: 'train', workflowId: `wf-${id}` });
});
afterAll(async () => {
  await db?.end();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
});

describe('store', () => {
  it('claimBatch: a rollout is claimed by one batch; a retry returns the same claim', async () => {
    expect((await claimBatch(db, { runId: 'run', version: 1, advantages: { a: 0.5, b: -0.5 } })).sort()).toEqual(['a', 'b']);
    expect((await claimBatch(db, { runId: 'run', version: 1, advantages: { a: 0.5, b: -0.5 } })).sort()).toEqual(['a', 'b']);
    expect((await claimBatch(db, { runId: 'run', version: 2, advantages: { b: 1, c: 1 } })).sort()).toEqual(['c']);
    expect(await listBatchMembers(db, 'run')).toEqual([
      { rolloutId: 'a', version: 1, advantage: 0.5 }, { rolloutId: 'b', version: 1, advantage: -0.5 }, { rolloutId: 'c', version: 2, advantage: 1 },
    ]);
  });

  it('discardRollouts discards once, finishRollout keeps a discard, setRolloutStaleness sets each', async () => {
    await discardRollouts(db, { rolloutIds: ['c', 'd'], reason: 'stale', staleness: { c: 3 } });
    await discardRollouts(db, { rolloutIds: ['d'], reason: 'again', staleness: { d: 9 } });
    await finishRollout(db, { rolloutId: 'd', reward: 1, gate: 'passed', nTurns: 2, promptTokens: 10, completionTokens: 4, versionStart: 0, versionEnd: 0, shortcutFlags: [], status: 'finished' });
    await setRolloutStaleness(db, { a: 1, b: 0 });
    const byId = Object.fromEntries((await listRollouts(db, 'run')).map((r) => [r.rolloutId, r]));
    expect(byId.c).toMatchObject({ status: 'discarded', discardReason: 'stale', staleness: 3 });
    expect(byId.d).toMatchObject({ status: 'discarded', discardReason: 'stale', staleness: null, reward: 1, nTurns: 2 });
    expect(byId.a).toMatchObject({ status: 'running', staleness: 1 });
    expect(byId.b).toMatchObject({ status: 'running', staleness: 0 });
  });
});
