import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate } from '../db/migrate.js';
import { settings } from './helpers/platform.js';
import { parseRunConfig } from '../core/config.js';
import { insertRun } from '../store/runs.js';
import { getRolloutSequence, insertRollout, insertTurn, listTurnHistory, listTurns, upsertTurnTokens, type TurnRow } from '../store/rollouts.js';

/** Migrations against a scratch database on the real Postgres. */
const dbName = `floe_migrate_test_${process.pid}`;
const admin = new pg.Client({ connectionString: settings.postgres.url });
const url = settings.postgres.url.replace(/\/[^/]+$/, `/${dbName}`);

beforeAll(async () => {
  await admin.connect();
  await admin.query(`drop database if exists ${dbName}`);
  await admin.query(`create database ${dbName}`);
});
afterAll(async () => {
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
});

describe('db migrations', () => {
  it('applies each migration once, in order, and is idempotent', async () => {
    const all = listMigrations().map((m) => m.version);
    expect(await migrate(url)).toEqual(all);
    expect(await migrate(url)).toEqual([]);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      const tables = (await c.query(`select table_name from information_schema.tables where table_schema = 'public'`)).rows.map((r) => r.table_name);
      for (const t of ['runs', 'policy_versions', 'rollouts', 'turns', 'turn_tokens', 'gate_decisions', 'batch_members', 'evictions', 'task_stats', 'engine_events', 'tasks', 'engine_weights', 'engine_requests']) expect(tables).toContain(t);
      for (const v of ['v_run_updates', 'v_gate_reasons', 'v_task_outcomes', 'v_engine_load', 'v_shortcuts', 'v_resubmitted_turns', 'v_engine_requests', 'v_test_outcomes']) expect(tables).toContain(v);
      // a rollout can be in at most one training batch
      await c.query(`insert into runs (run_id, workflow_id, name, config) values ('r', 'w', 'n', '{}')`);
      await c.query(`insert into rollouts (rollout_id, run_id, task_id, group_id, attempt) values ('x', 'r', 't', 'g', 0)`);
      await c.query(`insert into batch_members (rollout_id, run_id, version) values ('x', 'r', 1)`);
      await expect(c.query(`insert into batch_members (rollout_id, run_id, version) values ('x', 'r', 2)`)).rejects.toThrow(/duplicate key/);
    } finally {
      await c.end();
    }
  });

  it('005: a turn\'s ids come before its row, which is written once', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await insertRun(pool, { runId: 'r5', workflowId: 'w5', name: 'n', config: parseRunConfig({}) });
      await insertRollout(pool, { runId: 'r5', rolloutId: 'x5', taskId: 't', groupId: 'g', attempt: 0, purpose: 'test', workflowId: 'w5-x5' });
      const ids = { inputIds: [1, 2], promptLen: 2, completionIds: [3, 256], logprobs: [-0.5, -0.1], tokenVersions: [0, 0], renderDrift: null };
      await upsertTurnTokens(pool, { rolloutId: 'x5', turnIndex: 0, ...ids });
      await expect(upsertTurnTokens(pool, { rolloutId: 'no-such-rollout', turnIndex: 0, ...ids })).rejects.toThrow(/foreign key/);
      expect(await listTurnHistory(pool, 'x5', 1)).toEqual([]); // no turn until its row is written
      const turn: TurnRow = {
        rolloutId: 'x5', turnIndex: 0, engineId: 'e', rawText: 'a\u0000b', promptTokens: 2, completionTokens: 2, finishReason: 'stop', weightVersions: [0],
        formatOk: true, formatReason: null, toolName: 'bash', toolArgs: { command: 'ls' }, observation: 'exit code 0\n', exitCode: 0, shortcutFlags: [], genMs: 5, toolMs: 7,
      };
      await insertTurn(pool, turn);
      await insertTurn(pool, { ...turn, observation: 'a retry' }); // a retried activity: the row stays as written
      expect(await listTurns(pool, 'x5')).toEqual([{ ...turn, rawText: 'a\uFFFDb' }]);
      expect(await listTurnHistory(pool, 'x5', 1)).toMatchObject([{ turnIndex: 0, rawText: 'a\uFFFDb', observation: 'exit code 0\n', completionIds: [3, 256] }]);
      expect(await getRolloutSequence(pool, 'x5')).toMatchObject({ ids: [1, 2, 3, 256], lossMask: [0, 0, 1, 1], generatedTokens: 2, sequenceTokens: 4 });
    } finally {
      await pool.end();
    }
  });

  it('012: a rollout\'s sequence (v_rollout_sequences) in linear time: a huge turn, and per-token arrays of unequal length', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await insertRun(pool, { runId: 'r12', workflowId: 'w12', name: 'n', config: parseRunConfig({}) });
      // a 1 MB tool call of a byte-level model is a turn of ~10^6 ids (test/chaos/modelOutput.test.ts);
      // 003's view read log-probs by subscript, O(n²): > 90 s for 10^6 ids, minutes for these
      const n = 400_000;
      const big = Array.from({ length: n }, (_, i) => i % 250);
      await insertRollout(pool, { runId: 'r12', rolloutId: 'x12', taskId: 't', groupId: 'g', attempt: 0, purpose: 'test', workflowId: 'w12-x12' });
      await upsertTurnTokens(pool, { rolloutId: 'x12', turnIndex: 0, inputIds: [7, 8], promptLen: 2, completionIds: big, logprobs: big.map(() => -0.25), tokenVersions: big.map(() => 3), renderDrift: null });
      // arrays of unequal length: log-probs short (the rest read 0), versions long (the extra dropped)
      await upsertTurnTokens(pool, { rolloutId: 'x12', turnIndex: 1, inputIds: [9], promptLen: 1, completionIds: [4, 5, 6], logprobs: [-1], tokenVersions: [4, 4, 4, 4, 4], renderDrift: null });
      const s = (await getRolloutSequence(pool, 'x12'))!;
      expect([s.sequenceTokens, s.generatedTokens]).toEqual([n + 6, n + 3]);
      expect(s.ids.slice(0, 4)).toEqual([7, 8, 0, 1]);
      expect(s.ids.slice(-4)).toEqual([9, 4, 5, 6]);
      expect(s.lossMask.slice(-5)).toEqual([1, 0, 1, 1, 1]);
      expect(s.logprobs.slice(-4)).toEqual([0, -1, 0, 0]);
      expect(s.tokenVersions.slice(-5)).toEqual([3, -1, 4, 4, 4]);
      expect(s.logprobs.slice(2, n + 2).every((x) => x === -0.25)).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it('rolls back a failing migration and names it', async () => {
    const fs = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-mig-'));
    fs.writeFileSync(path.join(dir, '001_ok.sql'), 'create table mig_ok (x int);');
    fs.writeFileSync(path.join(dir, '002_broken.sql'), 'create table mig_half (x int); select * from no_such_table;');
    const scratch = `${dbName}_b`;
    await admin.query(`drop database if exists ${scratch}`);
    await admin.query(`create database ${scratch}`);
    const u = url.replace(/\/[^/]+$/, `/${scratch}`);
    try {
      await expect(migrate(u, dir)).rejects.toThrow(/migration 2_broken failed and was rolled back/);
      const c = new pg.Client({ connectionString: u });
      await c.connect();
      const t = (await c.query(`select to_regclass('mig_half') as half, to_regclass('mig_ok') as ok`)).rows[0];
      const v = (await c.query('select version from floe_schema_migrations')).rows.map((r) => r.version);
      await c.end();
      expect(t.half).toBeNull();
      expect(t.ok).not.toBeNull();
      expect(v).toEqual([1]);
    } finally {
      await admin.query(`drop database if exists ${scratch} with (force)`);
    }
  });
});
