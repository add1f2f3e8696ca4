import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { temporalClient } from '../../workers/connect.js';
import { loadRunConfig } from '../../cli/config.js';
import { preflightRun } from '../../cli/preflight.js';
import { renderToolCall } from '../../core/tools.js';
import { settings } from '../helpers/platform.js';
import { floe } from '../helpers/cli.js';
import { startScriptedEngine, type ScriptedEngine } from '../helpers/scriptedEngine.js';
import { closedPort, startTrainerDouble, type TrainerDouble } from '../helpers/trainerDouble.js';
import { chaosCase, type ChaosOutcome } from '../helpers/chaos.js';

/** Chaos, bad input (issue 17): `floe run start`, as a user types it, with an invalid config
 *  (unknown key, wrong type, bad value), a dataset with a malformed row, an unknown task id, a
 *  task whose image is not on the sandbox host, an engine or a trainer nobody listens on, and a
 *  trainer at another weight version than a new run starts from. Each is refused with exit code 2
 *  and a message naming the problem and its fix, and nothing is half-written: no runs row in
 *  Postgres, no trainingRun workflow in Temporal. The same command with none of the faults
 *  passes every check (so each refusal is the fault's). */

const tag = `${process.pid}-${Date.now().toString(36)}`;
const datasets = path.join(import.meta.dirname, '..', 'fixtures', 'datasets');
let engine: ScriptedEngine;
let trainer: TrainerDouble;
let staleTrainer: TrainerDouble;
let client: Client;
let db: pg.Pool;
const since = new Date();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'floe-chaos-bad-input-'));

beforeAll(async () => {
  engine = await startScriptedEngine({ fallback: { text: renderToolCall({ name: 'submit', arguments: {} }) } });
  trainer = await startTrainerDouble({ version: 0 });
  staleTrainer = await startTrainerDouble({ version: 3 });
  client = await temporalClient(settings);
  db = new pg.Pool({ connectionString: settings.postgres.url, max: 2 });
});

afterAll(async () => {
  // a run a broken check let through would still be there: end it (the case has failed already)
  for (const id of await runWorkflows().catch(() => [])) await client.workflow.getHandle(id).terminate('chaos bad-input clean-up').catch(() => undefined);
  await db?.end();
  await client?.connection.close();
  await engine?.close();
  await trainer?.close();
  await staleTrainer?.close();
});

/** The name of a case's run: its runs row and its workflow id (floe-run-<name>-…) carry it. */
const runName = (kind: string) => `chaos-bad-input-${kind}-${tag}`;

/** A run start with none of the faults: one toy task, the scripted engine, a trainer at v0. */
const goodArgs = (kind: string): string[] => [
  '--set', `name=${runName(kind)}`, '--set', 'tasks.source=toy', '--set', 'tasks.include=["toy__c_to_f"]', '--set', 'tasks.excludeLooseTests=false',
  '--set', `engines.endpoints=[{"id":"scripted","url":"${engine.url}","node":"local"}]`, '--set', `trainer.url=${trainer.url}`,
  '--set', 'rollout.groupSize=2', '--set', 'training.groupsPerUpdate=1000',
];

/** trainingRun workflows of this file's runs (floe-run-chaos-bad-input-…) started since it began: none may exist. */
async function runWorkflows(): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowType = 'trainingRun' AND StartTime > '${since.toISOString()}'` })) {
    if (wf.workflowId.startsWith('floe-run-chaos-bad-input-')) ids.push(wf.workflowId);
  }
  return ids;
}

/** `floe run start` with `args`; it must be refused (exit 2, no run, no workflow), its message
 *  matching every pattern and saying the fix. Returns the problem's line. */
async function refused(kind: string, args: string[], ...patterns: RegExp[]): Promise<ChaosOutcome> {
  const name = runName(kind);
  const rowsBefore = await runRows(name);
  const r = await floe(['run', 'start', ...args]);
  expect(r.stdout).not.toMatch(/started run/);
  expect(r.code, r.stderr).toBe(2);
  for (const p of patterns) expect(r.stderr).toMatch(p);
  expect(r.stderr).toMatch(/fix: |did you mean|expected/);
  // nothing half-written: no runs row, no trainingRun workflow of this name
  expect(await runRows(name)).toBe(rowsBefore);
  expect(rowsBefore).toBe(0);
  expect(await runWorkflows()).toEqual([]);
  // the message shown, in a line: the problem (and its fix, where the preflight gives one)
  const detail = r.stderr.trim().split('\n').slice(1).map((l) => l.trim()).join(' ');
  return { detail: detail.slice(0, 600), facts: { exitCode: r.code, stderr: r.stderr.slice(0, 4000) } };
}

const runRows = async (name: string): Promise<number> => (await db.query<{ n: number }>('select count(*)::int as n from runs where name = $1', [name])).rows[0].n;

describe('chaos: bad input at `floe run start`', () => {
  it('the same start without a fault passes every check', async () => {
    expect(await preflightRun(settings, loadRunConfig(undefined, goodArgs('none').filter((a) => a !== '--set')))).toEqual([]);
  });

  chaosCase('bad-input', 'an invalid config: unknown key, wrong type, bad value', async () => {
    const unknown = await refused('config-key', [...goodArgs('config-key'), '--set', 'rollout.grouppSize=4'],
      /rollout: Unrecognized key: "grouppSize" \(did you mean groupSize\? rollout takes systemPrompt, groupSize, /);
    const type = await refused('config-type', [...goodArgs('config-type'), '--set', 'rollout.groupSize=four'],
      /rollout\.groupSize: Invalid input: expected number, received string/);
    const value = await refused('config-value', [...goodArgs('config-value'), '--set', 'engines.router=fastest'],
      /engines\.router: Invalid option: expected one of "least-loaded"\|"sticky"\|"round-robin"/);
    return { detail: [unknown, type, value].map((o) => o.detail).join(' | '), facts: { unknownKey: unknown.detail, wrongType: type.detail, badValue: value.detail } };
  }, 120_000);

  chaosCase('bad-input', 'a malformed dataset row', async () => {
    // a good SWE-bench row, then a row cut off mid-object
    const file = path.join(tmp, 'rows.jsonl');
    fs.writeFileSync(file, `${fs.readFileSync(path.join(datasets, 'swe-bench.jsonl'), 'utf8').split('\n')[0]}\n{"instance_id": "broken", "repo": "x/y"\n`);
    return refused('bad-row', [...goodArgs('bad-row'), '--set', `tasks.source=${file}`, '--set', 'tasks.include=[]'],
      /1 bad task row\(s\):\n {6}rows\.jsonl:2: .*not valid JSON/, /fix: correct the rows \(`floe tasks check .*rows\.jsonl` names each by line and field\), or set tasks\.onBadRow: skip/);
  }, 60_000);

  chaosCase('bad-input', 'an unknown task id', async () => refused('unknown-task', [...goodArgs('unknown-task'), '--set', 'tasks.include=["toy__c_to_f","toy__no_such_task"]'],
    /tasks\.include names unknown task ids: toy__no_such_task/, /fix: take them out of tasks\.include, or correct them: `floe tasks check toy` --json lists the ids/), 60_000);

  chaosCase('bad-input', 'a task image missing on the sandbox host', async () => {
    const file = path.join(datasets, 'swe-bench.jsonl');
    const image = 'docker.io/swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest';
    return refused('missing-image', [...goodArgs('missing-image'), '--set', `tasks.source=${file}`, '--set', 'tasks.include=["astropy__astropy-12907"]'],
      new RegExp(`task image ${image.replace(/\./g, '\\.')} is not on the sandbox host`), /fix: .*podman load -i swebench_sweb\.eval\.x86_64\.astropy_1776_astropy-12907_latest\.tar/);
  }, 120_000);

  chaosCase('bad-input', 'an engine unreachable at start', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    return refused('engine-down', [...goodArgs('engine-down'), '--set', `engines.endpoints=[{"id":"gone","url":"${url}","node":"local"}]`],
      new RegExp(`engines\\.endpoints\\[0\\] \\(gone, reference\\) at ${url} does not answer its health check \\(.*ECONNREFUSED`), new RegExp(`fix: start the server, or correct its url in the run config; \`floe engine probe ${url}\``));
  }, 60_000);

  chaosCase('bad-input', 'a trainer unreachable at start', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    return refused('trainer-down', [...goodArgs('trainer-down'), '--set', `trainer.url=${url}`],
      new RegExp(`trainer\\.url ${url} does not answer GET /health \\(fetch failed: .*ECONNREFUSED`), /fix: start the trainer \(python -m floe_engine\.trainer_server/);
  }, 60_000);

  chaosCase('bad-input', 'a trainer at the wrong version', async () => refused('trainer-version', [...goodArgs('trainer-version'), '--set', `trainer.url=${staleTrainer.url}`],
    new RegExp(`the trainer at ${staleTrainer.url} is at weight version 3, and a new run starts at version 0`), /fix: start the trainer again from the run's starting weights/), 60_000);
});
