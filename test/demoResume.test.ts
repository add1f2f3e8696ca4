import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings, repoRoot } from '../infra/settings.js';
import { dockerFromSettings } from '../infra/docker.js';
import { isServerProcess, stopLeftoverServers, type ServerRecord } from '../infra/engines.js';
import { temporalClient } from '../workers/connect.js';
import { runWorkflowId } from '../client/runs.js';
import { floeBin } from './helpers/cli.js';

/** Issue 12, deliverable 6: `floe demo` killed with kill -9 after its first weight update (the
 *  node process only: its engines and trainer become orphans, its sandboxes stay behind) and
 *  run again resumes the same run to completion, with every rollout and every update recorded
 *  once and nothing left behind. The demo runs as a user runs it, as a child process. */

const CONFIG = 'configs/demo-resume-test.yaml';
const settings = loadSettings();
let db: pg.Pool;

interface Demo { child: ChildProcess; out: string[]; exited: Promise<number | null> }

function startDemo(name: string): Demo {
  // as `npm run demo` runs it (package.json): bin/floe, one node process
  const child = spawn(floeBin, ['demo', CONFIG], {
    cwd: repoRoot, env: process.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true, // its own process group, like a terminal's job
  });
  const out: string[] = [];
  child.stdout!.on('data', (d: Buffer) => out.push(d.toString()));
  child.stderr!.on('data', (d: Buffer) => out.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => {
    fs.mkdirSync(path.join(repoRoot, 'test', 'out'), { recursive: true });
    fs.writeFileSync(path.join(repoRoot, 'test', 'out', `demoResume-${name}.log`), out.join(''));
    resolve(code);
  }));
  return { child, out, exited };
}

const text = (d: Demo) => d.out.join('');

async function until<T>(what: string, d: Demo, ms: number, fn: () => Promise<T | null | undefined> | T | null | undefined): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== null && v !== undefined) return v;
    if (d.child.exitCode !== null) throw new Error(`the demo exited (${d.child.exitCode}) while waiting for ${what}:\n${text(d).slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`timed out after ${ms / 1000} s waiting for ${what}:\n${text(d).slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

interface DemoFile { runId: string; demoPid: number; servers: ServerRecord[]; resumes: number }
const demoFile = (runId: string): DemoFile => JSON.parse(fs.readFileSync(path.join(repoRoot, 'runs', runId, 'demo.json'), 'utf8')) as DemoFile;

const demos: Demo[] = [];
const testRunIds: string[] = [];

/** After a failure: nothing of this test's run may keep running (its workflows would be driven
 *  by the next test's workers; its servers hold ports; its containers fail the suite). */
async function cleanUp(runId: string): Promise<void> {
  const client = await temporalClient(settings);
  try {
    // by id: every workflow of the run's, whether or not it set its search attributes
    for await (const wf of client.workflow.list({ query: `ExecutionStatus = 'Running'` }) as AsyncIterable<WorkflowExecutionInfo>) {
      if (wf.workflowId.startsWith(runWorkflowId(runId))) await client.workflow.getHandle(wf.workflowId, wf.runId).terminate('demoResume.test cleanup').catch(() => undefined);
    }
  } finally {
    await client.connection.close();
  }
  try { await stopLeftoverServers(demoFile(runId).servers); } catch { /* no demo file */ }
  const docker = dockerFromSettings(settings);
  for (const c of await docker.listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
}

beforeAll(() => {
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
});

afterAll(async () => {
  for (const d of demos) if (d.child.exitCode === null && d.child.pid) { try { process.kill(-d.child.pid, 'SIGKILL'); } catch { /* gone */ } }
  for (const id of testRunIds) await cleanUp(id);
  await db?.end();
});

describe('floe demo, killed and run again', () => {
  it('resumes the same run to completion: every rollout and update once, no orphan process or container', async () => {
    // ---- first demo: until the first weight update is recorded, then kill -9 its node process
    const first = startDemo('first');
    demos.push(first);
    const runId = await until('the run to start', first, 240_000, () => /^run (\S+)$/m.exec(text(first))?.[1]);
    testRunIds.push(runId);
    expect(text(first)).not.toContain('resuming run'); // a fresh run (an earlier attempt's is ended by its cleanup)
    // the runs row is written by the run workflow's first activity, after the demo prints the id:
    // wait for it (a fallback of "now" once made the later query miss the row by its own start)
    const firstStart = await until('the runs row', first, 120_000, async () =>
      (await db.query<{ started_at: Date }>('select started_at from runs where run_id = $1', [runId])).rows[0]?.started_at);
    await until('the first weight update', first, 180_000, async () => {
      const r = await db.query<{ n: number }>('select count(*)::int as n from policy_versions where run_id = $1 and version >= 1', [runId]);
      return r.rows[0].n >= 1 ? true : null;
    });
    const before = demoFile(runId);
    const cmdline = fs.readFileSync(`/proc/${before.demoPid}/cmdline`, 'utf8');
    expect(cmdline).toContain('floe.ts');
    process.kill(before.demoPid, 'SIGKILL');
    await first.exited;
    // as in the report: the engines and the trainer outlive it
    expect(before.servers.map((r) => r.name).sort()).toEqual(['engine-0', 'engine-1', 'trainer']);
    expect(before.servers.filter(isServerProcess).length).toBeGreaterThan(0);

    // ---- second demo: resumes it
    const second = startDemo('second');
    demos.push(second);
    const code = await Promise.race([second.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 240_000))]);
    const out = text(second);
    expect(code, out.slice(-3000)).not.toBe('timeout');
    expect(out).toContain(`resuming run ${runId}`);
    expect(out).toMatch(/(PASS|FAIL) stress test/); // the verdict of a 3-update run does not matter here
    expect([0, 1], out.slice(-3000)).toContain(code as number);

    // the same run completed, and no other run was started
    const client = await temporalClient(settings);
    try {
      expect((await client.workflow.getHandle(runWorkflowId(runId)).describe()).status.name).toBe('COMPLETED');
      const runs = await db.query<{ run_id: string; status: string }>(`select run_id, status from runs where name = 'demo-resume-test' and started_at >= $1`, [firstStart]);
      expect(runs.rows).toEqual([{ run_id: runId, status: 'completed' }]);

      // every rollout workflow of the run: closed, with exactly one rollouts row in a final state
      const wfs: WorkflowExecutionInfo[] = [];
      for await (const wf of client.workflow.list({ query: `FloeRunId = '${runId}' AND FloeKind = 'rollout'` }) as AsyncIterable<WorkflowExecutionInfo>) wfs.push(wf);
      expect(wfs.length).toBeGreaterThanOrEqual(3 * 8);
      expect(wfs.filter((w) => w.status.name === 'RUNNING').map((w) => w.workflowId)).toEqual([]);
      const rows = await db.query<{ workflow_id: string; n: number; statuses: string[] }>(
        `select workflow_id, count(*)::int as n, array_agg(status) as statuses from rollouts where run_id = $1 group by workflow_id`, [runId]);
      const byWf = new Map(rows.rows.map((r) => [r.workflow_id, r]));
      for (const w of wfs) {
        const r = byWf.get(w.workflowId);
        expect(r, `rollout workflow ${w.workflowId} (${w.status.name}) has no rollouts row`).toBeDefined();
        expect(r!.n, `rollout workflow ${w.workflowId} has ${r!.n} rollouts rows`).toBe(1);
        expect(['finished', 'discarded', 'failed'], `rollout workflow ${w.workflowId} ended ${w.status.name} with row status ${r!.statuses[0]}`).toContain(r!.statuses[0]);
      }
      expect(rows.rows.length).toBe(wfs.length);
    } finally {
      await client.connection.close();
    }

    // versions 1..3 once each; a rollout in one batch at most; turn rows once
    const versions = await db.query<{ version: number }>('select version from policy_versions where run_id = $1 and version >= 1 order by version', [runId]);
    expect(versions.rows.map((r) => r.version)).toEqual([1, 2, 3]);
    const members = await db.query<{ version: number; n: number }>('select version, count(*)::int as n from batch_members where run_id = $1 group by version order by version', [runId]);
    expect(members.rows.map((r) => r.version)).toEqual([1, 2, 3]);
    const twice = await db.query('select rollout_id from batch_members where run_id = $1 group by rollout_id having count(distinct version) > 1', [runId]);
    expect(twice.rows).toEqual([]);
    const turnsTwice = await db.query(`select t.rollout_id, t.turn_index from turns t join rollouts r using (rollout_id) where r.run_id = $1 group by 1, 2 having count(*) > 1`, [runId]);
    expect(turnsTwice.rows).toEqual([]);
    // the trainer stepped once per version: its log has one row per version, 1..3
    const steps = fs.readFileSync(path.join(repoRoot, 'runs', runId, 'weights', 'train_steps.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { version: number }).version);
    expect(steps).toEqual([1, 2, 3]);

    // nothing left behind: no engine or trainer of either demo, no sandbox or grader container
    const after = demoFile(runId);
    expect(after.resumes).toBe(1);
    expect([...before.servers, ...after.servers].filter(isServerProcess)).toEqual([]);
    const left = await dockerFromSettings(settings).listContainers({ all: true, filters: { label: ['floe.sandbox=1'] } });
    expect(left.map((c) => c.Labels)).toEqual([]);
  }, 600_000);

  it('Ctrl-C ends the run it hosts: the workflow and its rollouts terminated, its runs row stopped, its engines, trainer and containers gone', async () => {
    const demo = startDemo('interrupted');
    demos.push(demo);
    const runId = await until('the run to start', demo, 240_000, () => /^run (\S+)$/m.exec(text(demo))?.[1]);
    testRunIds.push(runId);
    await until('a first rollout', demo, 180_000, async () => {
      const r = await db.query<{ n: number }>(`select count(*)::int as n from rollouts where run_id = $1`, [runId]);
      return r.rows[0].n >= 1 ? true : null;
    });
    const servers = demoFile(runId).servers;
    process.kill(-demo.child.pid!, 'SIGINT'); // as a terminal's Ctrl-C: the whole process group
    const code = await Promise.race([demo.exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 120_000))]);
    expect(code, text(demo).slice(-3000)).not.toBe('timeout');
    expect(text(demo)).toContain('interrupted');
    const client = await temporalClient(settings);
    try {
      expect((await client.workflow.getHandle(runWorkflowId(runId)).describe()).status.name).toBe('TERMINATED');
      // its abandoned rollouts ended with it (else the next worker on the control queue drives
      // them against engines that are gone: the suite's later files once hung on exactly that)
      const open: string[] = [];
      // (by id, not by FloeRunId: this checks that the demo found them all)
      for await (const wf of client.workflow.list({ query: `ExecutionStatus = 'Running'` }) as AsyncIterable<WorkflowExecutionInfo>) if (wf.workflowId.startsWith(runWorkflowId(runId))) open.push(wf.workflowId);
      expect(open).toEqual([]);
    } finally {
      await client.connection.close();
    }
    const row = await db.query<{ status: string; ended: boolean }>('select status, ended_at is not null as ended from runs where run_id = $1', [runId]);
    expect(row.rows).toEqual([{ status: 'stopped', ended: true }]);
    expect(servers.filter(isServerProcess)).toEqual([]);
    const left = await dockerFromSettings(settings).listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } });
    expect(left.map((c) => c.Labels)).toEqual([]);
  }, 600_000);
});
