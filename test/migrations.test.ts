import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate } from '../db/migrate.js';
import { settings } from './helpers/platform.js';

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
      for (const v of ['v_run_updates', 'v_gate_reasons', 'v_task_outcomes', 'v_engine_load', 'v_shortcuts', 'v_resubmitted_turns', 'v_engine_requests']) expect(tables).toContain(v);
      // a rollout can be in at most one training batch
      await c.query(`insert into runs (run_id, workflow_id, name, config) values ('r', 'w', 'n', '{}')`);
      await c.query(`insert into rollouts (rollout_id, run_id, task_id, group_id, attempt) values ('x', 'r', 't', 'g', 0)`);
      await c.query(`insert into batch_members (rollout_id, run_id, version) values ('x', 'r', 1)`);
      await expect(c.query(`insert into batch_members (rollout_id, run_id, version) values ('x', 'r', 2)`)).rejects.toThrow(/duplicate key/);
    } finally {
      await c.end();
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
