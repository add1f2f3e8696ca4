import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { loadSettings, repoRoot } from '../../infra/settings.js';
import { readPid } from '../../infra/proc.js';
import { dockerFromSettings } from '../../infra/docker.js';
import { startEmbeddedGpu, type EmbeddedGpu } from '../../infra/engines.js';
import { temporalBin } from '../../infra/components/temporal.js';
import { chaosCase } from '../helpers/chaos.js';
import { floe, floeBin, killGroup } from '../helpers/cli.js';
import { eventually } from '../helpers/wait.js';
import { describeListeners, isLoopback, listenersOf, ownerOf, tcpListeners, type Listener } from '../helpers/listeners.js';

/** Chaos, exposure (issue 17): what floe opens to the network and where its secrets go.
 *  - Temporal (frontend, Web UI and its other ports) and Postgres listen on loopback only, read
 *    from the kernel's socket tables (a socket this test opens on 0.0.0.0 is flagged: the
 *    checker can fail);
 *  - podman's Docker API is a unix socket, no TCP port, and another user cannot connect to it
 *    (a world-writable socket in the same folder accepts that user: the probe can fail);
 *  - the engine and trainer servers floe starts listen on 127.0.0.1, their own default;
 *  - a password in FLOE_DATABASE_URL and an HF_TOKEN reach none of the log files floe writes,
 *    the CLI's and the workers' output, the run's report folder, Postgres or Temporal's history,
 *    through a real run on a real engine; an engine URL with credentials is refused before it
 *    is stored;
 *  - a Postgres beyond loopback with neither a password nor TLS is refused, naming the fix (the
 *    same host with a password, or with sslmode=require, is not);
 *  - the operations guide's "Running the parts across hosts" (docs/guides/operations.md) names
 *    only settings floe reads.
 *  Every case is recorded in the chaos summary (test/helpers/chaos.ts). */

const settings = loadSettings();
const SECRET = `floe-exposure-${crypto.randomBytes(8).toString('hex')}`;
const HF_SECRET = `hf_${crypto.randomBytes(12).toString('hex')}`;
const t0 = Date.now();
const publishDir = path.join(repoRoot, '.floe', 'test-weights', `${process.pid}-exposure`);
const children: ChildProcess[] = [];
const runIds: string[] = [];
let gpu: EmbeddedGpu | null = null;

/** The engine and trainer start with HF_TOKEN in their environment (as a user with gated
 *  Hugging Face models has it); case 4 looks for it everywhere they write. */
beforeAll(async () => {
  const before = process.env.HF_TOKEN;
  process.env.HF_TOKEN = HF_SECRET;
  try {
    gpu = await startEmbeddedGpu(settings, { count: 1, checkpoint: '', publishDir, trainer: true });
  } finally {
    if (before === undefined) delete process.env.HF_TOKEN;
    else process.env.HF_TOKEN = before;
  }
}, 180_000);

afterAll(async () => {
  for (const c of children) killGroup(c, 'SIGKILL');
  const docker = dockerFromSettings(settings);
  for (const runId of runIds) {
    const left = await docker.listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    fs.rmSync(path.join(repoRoot, 'runs', runId), { recursive: true, force: true });
  }
  await gpu?.stop();
  fs.rmSync(publishDir, { recursive: true, force: true });
}, 60_000);

/** Open a TCP server of this process on `host`, port chosen by the kernel. */
function listenOn(host: string): Promise<net.Server & { port: number }> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => resolve(Object.assign(srv, { port: (srv.address() as net.AddressInfo).port })));
  });
}
const closeServer = (srv: net.Server) => new Promise<void>((r) => srv.close(() => r()));
const exposed = (ls: Listener[]) => ls.filter((l) => !isLoopback(l.address));

/** Try to connect to a unix socket as user nobody: 'connected' or the error code. */
function connectAsNobody(socket: string): string {
  const js = `require('net').connect(${JSON.stringify(socket)}).on('connect',()=>{console.log('connected');process.exit(0)}).on('error',(e)=>{console.log(e.code);process.exit(0)})`;
  const r = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, '-e', js], { encoding: 'utf8', timeout: 20_000 });
  return (r.stdout.trim() || r.stderr.trim()).split('\n').pop() ?? '';
}

/** Every file under `dir` written since this file started, with the ones holding `needles`. */
function filesSince(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((d) => d.isFile())
    .map((d) => path.join(d.parentPath, d.name))
    .filter((f) => { try { return fs.statSync(f).mtimeMs >= t0 - 1000; } catch { return false; } });
}
const holding = (files: string[], needles: string[]) => files.filter((f) => { const text = fs.readFileSync(f, 'latin1'); return needles.some((n) => text.includes(n)); });

/** A floe worker process with its own environment; resolves once it polls Temporal. */
function startWorker(role: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(floeBin, ['worker', role], { env: { ...process.env, ...env }, detached: true });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`floe worker ${role} did not start within 90 s:\n${out}`)), 90_000);
    const check = () => { if (out.includes('[floe] workers running on')) { clearTimeout(timer); resolve({ child, output: () => out }); } };
    child.stderr!.on('data', check);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`floe worker ${role} exited with ${code}:\n${out}`)); });
  });
}
const stopWorker = (w: { child: ChildProcess }) => new Promise<void>((r) => {
  if (w.child.exitCode !== null || w.child.signalCode !== null) return r();
  const kill = setTimeout(() => killGroup(w.child, 'SIGKILL'), 15_000);
  w.child.once('exit', () => { clearTimeout(kill); r(); });
  killGroup(w.child, 'SIGTERM');
});

describe('exposure', () => {
  chaosCase('exposure', 'Temporal (frontend, Web UI) and Postgres listen on loopback only', async () => {
    // negative control: a socket of this process on every interface is flagged
    const open = await listenOn('0.0.0.0');
    const flagged = exposed(listenersOf(process.pid)).filter((l) => l.port === open.port);
    await closeServer(open);
    expect(flagged.map((l) => l.address)).toEqual(['0.0.0.0']);

    expect(settings.temporal.external, 'this case checks the embedded Temporal; FLOE_TEMPORAL_ADDRESS is set').toBe(false);
    expect(settings.postgres.external, 'this case checks the embedded Postgres; FLOE_DATABASE_URL is set').toBe(false);
    const owner = (port: number) => {
      const l = tcpListeners().find((x) => x.port === port);
      expect(l, `nothing listens on port ${port}: run \`floe up --test\``).toBeDefined();
      const pid = ownerOf(l!.inode);
      expect(pid, `no process holds the socket on port ${port}`).not.toBeNull();
      return pid!;
    };
    const temporalPid = owner(settings.temporal.port);
    expect(owner(settings.temporal.uiPort)).toBe(temporalPid);
    expect(temporalPid).toBe(readPid(path.join(settings.runDir, 'temporal.pid')));
    const pgPid = owner(settings.postgres.port);
    const temporal = listenersOf(temporalPid);
    const postgres = listenersOf(pgPid);
    expect(temporal.map((l) => l.port)).toEqual(expect.arrayContaining([settings.temporal.port, settings.temporal.uiPort]));
    expect(postgres.map((l) => l.port)).toContain(settings.postgres.port);
    expect(exposed(temporal), 'Temporal listens beyond loopback').toEqual([]);
    expect(exposed(postgres), 'Postgres listens beyond loopback').toEqual([]);
    // whoever holds them: every socket on floe's ports is loopback
    const floePorts = [settings.temporal.port, settings.temporal.uiPort, settings.postgres.port];
    expect(exposed(tcpListeners().filter((l) => floePorts.includes(l.port)))).toEqual([]);
    return {
      detail: `temporal (pid ${temporalPid}) listens on ${describeListeners(temporal)}; postgres (pid ${pgPid}) on ${describeListeners(postgres)}; nothing beyond loopback (control: this test's 0.0.0.0:${open.port} flagged)`,
      facts: { temporal: temporal.map((l) => `${l.address}:${l.port}`), postgres: postgres.map((l) => `${l.address}:${l.port}`) },
    };
  });

  chaosCase('exposure', "the container engine's API is a unix socket only its owner can connect to", async () => {
    expect(settings.docker.host).toBe(`unix://${settings.docker.socket}`);
    const st = fs.statSync(settings.docker.socket);
    expect(st.isSocket()).toBe(true);
    const mode = st.mode & 0o777;
    expect(st.uid).toBe(process.getuid!());
    expect(mode & 0o077, `${settings.docker.socket} has mode ${mode.toString(8)}: group or others can reach it`).toBe(0);
    const podmanPid = readPid(path.join(settings.runDir, 'podman.pid'));
    expect(podmanPid, 'podman is not running: run `floe up --test`').not.toBeNull();
    expect(listenersOf(podmanPid!), 'podman listens on TCP').toEqual([]);
    expect(tcpListeners().filter((l) => [2375, 2376].includes(l.port)), 'a Docker API port is open').toEqual([]);
    await dockerFromSettings(settings).ping(); // the socket is the API
    let probe = 'not probed (not root: runuser needs it)';
    if (process.getuid!() === 0) {
      // control: a world-writable socket in the same folder lets nobody in, so the path is open to them
      const control = path.join(settings.runDir, `exposure-control-${process.pid}.sock`);
      fs.rmSync(control, { force: true });
      const srv = net.createServer((c) => c.end());
      await new Promise<void>((r) => srv.listen(control, () => r()));
      try {
        fs.chmodSync(control, 0o777);
        const other = connectAsNobody(control);
        expect(other, 'the probe cannot reach a world-writable socket beside podman\'s').toBe('connected');
        const theirs = connectAsNobody(settings.docker.socket);
        expect(theirs).toBe('EACCES');
        probe = `user nobody: connect ${theirs} (control: a mode-777 socket beside it: ${other})`;
      } finally {
        await closeServer(srv);
        fs.rmSync(control, { force: true });
      }
    }
    return {
      detail: `${settings.docker.socket}: unix socket, mode ${mode.toString(8)}, owner uid ${st.uid}; podman (pid ${podmanPid}) holds no TCP listener, nothing on 2375/2376; ${probe}`,
      facts: { socket: settings.docker.socket, mode: mode.toString(8), podmanPid },
    };
  });

  chaosCase('exposure', 'engine and trainer servers listen on 127.0.0.1 by default', async () => {
    const servers = [...gpu!.engines, gpu!.trainer!];
    const seen: string[] = [];
    for (const srv of servers) {
      const pid = srv.process.pid!;
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      expect(argv, `${srv.name} was started with --host`).not.toContain('--host');
      const ls = listenersOf(pid);
      expect(ls.map((l) => l.port)).toContain(srv.port);
      expect(exposed(ls), `${srv.name} listens beyond loopback`).toEqual([]);
      expect(new URL(srv.url).hostname).toBe('127.0.0.1');
      seen.push(`${srv.name} ${describeListeners(ls)}`);
    }
    // every Python server's own --host default (engine/floe_engine), not only the ones started here
    const sources = fs.readdirSync(path.join(repoRoot, 'engine', 'floe_engine')).filter((f) => f.endsWith('.py'));
    const defaults: string[] = [];
    for (const f of sources) {
      const text = fs.readFileSync(path.join(repoRoot, 'engine', 'floe_engine', f), 'utf8');
      for (const m of text.matchAll(/add_argument\(\s*"--host"([^)]*)\)/g)) {
        const d = /default\s*=\s*"([^"]*)"/.exec(m[1])?.[1] ?? '(none)';
        expect(isLoopback(d), `engine/floe_engine/${f}: --host defaults to ${d}`).toBe(true);
        defaults.push(`${f} ${d}`);
      }
    }
    expect(defaults.length).toBeGreaterThanOrEqual(2);
    return { detail: `started without --host: ${seen.join('; ')}; --host defaults: ${defaults.join(', ')}`, facts: { servers: seen, defaults } };
  });

  chaosCase('exposure', 'a database password and HF_TOKEN reach no log, output, Postgres row or Temporal history', async () => {
    const secretUrl = `postgres://${settings.postgres.user}:${SECRET}@127.0.0.1:${settings.postgres.port}/${settings.postgres.database}`;
    const env = { FLOE_DATABASE_URL: secretUrl, HF_TOKEN: HF_SECRET, FLOE_LOG_LEVEL: 'INFO' };
    const needles = [SECRET, HF_SECRET];
    const outputs: Record<string, string> = {};
    const cli = async (name: string, args: string[], timeoutMs?: number) => {
      const r = await floe(args, env, timeoutMs);
      outputs[name] = r.stdout + r.stderr;
      return r;
    };

    // the commands that print the database URL: masked
    const up = await cli('floe up --only postgres', ['up', '--only', 'postgres']);
    expect(up.code, outputs['floe up --only postgres']).toBe(0);
    expect(up.stderr).toContain(`${settings.postgres.user}:***@`);
    const doctor = await cli('floe doctor', ['doctor']);
    expect(doctor.stdout).toMatch(/ok {3}postgres\s+postgres:\/\/\w+:\*\*\*@/);

    // an engine URL carrying the secret is refused before anything stores it
    const refused = await cli('floe run start (credentials in an engine URL)', ['run', 'start', '--set', `engines.endpoints=[{"id":"ref","url":"http://floe:${SECRET}@127.0.0.1:9"}]`]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/engines\.endpoints\.0\.url: http:\/\/\*\*\*:\*\*\*@127\.0\.0\.1:9\/ carries credentials/);

    // a real run: its workers reach Postgres through the URL with the password
    const control = await startWorker('control', env);
    const sandbox = await startWorker('sandbox', env);
    const engine = gpu!.engines[0];
    const start = await cli('floe run start', ['run', 'start', '--set', 'name=exposure', '--set', 'tasks.source=toy', '--set', 'tasks.include=["toy__c_to_f"]',
      '--set', 'tasks.excludeLooseTests=false', '--set', `engines.endpoints=[{"id":"ref","url":"${engine.url}","node":"local"}]`, '--set', `trainer.url=${gpu!.trainer!.url}`,
      '--set', 'rollout.groupSize=2', '--set', 'rollout.maxInFlight=2', '--set', 'rollout.maxTurns=1', '--set', 'training.groupsPerUpdate=1000']);
    expect(start.code, outputs['floe run start']).toBe(0);
    const runId = /started run (\S+)/.exec(start.stdout)![1];
    runIds.push(runId);
    const db = new pg.Pool({ connectionString: secretUrl, max: 2 });
    try {
      const ended = await eventually('a rollout of the run to end', async () => (await db.query<{ n: number }>("select count(*)::int as n from rollouts where run_id = $1 and status <> 'running'", [runId])).rows[0].n, (n) => n >= 1, 90_000);
      const stop = await cli('floe run stop', ['run', 'stop', runId]);
      expect(stop.code, outputs['floe run stop']).toBe(0);
      await eventually('the run to stop', async () => (JSON.parse((await floe(['run', 'status', runId, '--json'], env)).stdout) as { state: string }).state, (s) => s === 'stopped', 60_000);
      const docker = dockerFromSettings(settings);
      await eventually('the run\'s sandboxes to go', () => docker.listContainers({ all: true, filters: { label: [`floe.run=${runId}`] } }), (l) => l.length === 0, 30_000);
      await stopWorker(control);
      await stopWorker(sandbox);
      outputs['worker control'] = control.output();
      outputs['worker sandbox'] = sandbox.output();
      const report = await cli('floe report', ['report', runId]);
      expect(report.code, outputs['floe report']).toBe(0);

      // where the secrets could land
      const leakedOutputs = Object.entries(outputs).filter(([, text]) => needles.some((n) => text.includes(n))).map(([k]) => k);
      const logFiles = filesSince(settings.logDir);
      const runFiles = filesSince(path.join(repoRoot, 'runs', runId));
      expect(runFiles.length, 'floe report wrote nothing under runs/<id>').toBeGreaterThan(0);
      const engineLogs = logFiles.filter((f) => f.includes(`${path.sep}engines${path.sep}`));
      expect(engineLogs.length, 'the engine and trainer wrote no log').toBeGreaterThan(0);
      const leakedFiles = holding([...logFiles, ...runFiles], needles);
      const tables = (await db.query<{ t: string }>("select table_name as t from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'")).rows.map((r) => r.t);
      const leakedTables: string[] = [];
      for (const t of tables) {
        const q = `select count(*)::int as n from "${t.replace(/"/g, '""')}" x where strpos(x::text, $1) > 0 or strpos(x::text, $2) > 0`;
        if ((await db.query<{ n: number }>(q, needles)).rows[0].n > 0) leakedTables.push(t);
      }
      const runRow = (await db.query<{ config: unknown }>('select config from runs where run_id = $1', [runId])).rows[0];
      expect(JSON.stringify(runRow.config)).toContain(engine.url); // the config is there, and is what was searched
      const history = spawnSync(temporalBin(settings), ['workflow', 'show', '--workflow-id', `floe-run-${runId}`, '--address', settings.temporal.address, '--namespace', settings.temporal.namespace, '--output', 'json'], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
      expect(history.status, history.stderr).toBe(0);
      const historyLeak = needles.some((n) => history.stdout.includes(n));

      expect(leakedOutputs, 'a secret in command or worker output').toEqual([]);
      expect(leakedFiles.map((f) => path.relative(repoRoot, f)), 'a secret in a file floe wrote').toEqual([]);
      expect(leakedTables, 'a secret in Postgres').toEqual([]);
      expect(historyLeak, 'a secret in the run\'s Temporal history').toBe(false);
      return {
        detail: `run ${runId} (${ended} rollout(s) ended) with a password in FLOE_DATABASE_URL and HF_TOKEN set: neither in ${Object.keys(outputs).length} command/worker outputs, ${logFiles.length} log files (${engineLogs.length} engine/trainer), ${runFiles.length} report files, ${tables.length} Postgres tables or the run's Temporal history (${history.stdout.length} bytes); floe up/doctor print the URL as ${settings.postgres.user}:***@; an engine URL with credentials refused (exit 2)`,
        facts: { runId, outputs: Object.keys(outputs), logFiles: logFiles.map((f) => path.relative(repoRoot, f)), tables: tables.length },
      };
    } finally {
      await db.end();
    }
  }, 240_000);

  chaosCase('exposure', 'a Postgres beyond loopback with neither a password nor TLS is refused', async () => {
    const far = '192.0.2.10:5432'; // TEST-NET-1: never routed
    const noPassword = { PGPASSWORD: '', PGSSLMODE: '', PGPASSFILE: path.join(repoRoot, '.floe', 'no-such-pgpass') };
    const [refused, worker, embedded, withPassword, withTls] = await Promise.all([
      floe(['doctor'], { ...noPassword, FLOE_DATABASE_URL: `postgres://floe@${far}/floe` }),
      floe(['worker', 'control'], { ...noPassword, FLOE_DATABASE_URL: `postgres://floe@${far}/floe?sslmode=prefer` }, 60_000),
      floe(['doctor'], { ...noPassword, FLOE_PG_HOST: '0.0.0.0' }),
      // controls: a password, or TLS, passes the check (doctor then finds nothing answering there)
      floe(['doctor'], { ...noPassword, FLOE_DATABASE_URL: `postgres://floe:pw@${far}/floe` }),
      floe(['doctor'], { ...noPassword, FLOE_DATABASE_URL: `postgres://floe@${far}/floe?sslmode=require` }),
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('(from FLOE_DATABASE_URL) reaches Postgres on 192.0.2.10 with neither a password nor TLS');
    expect(refused.stderr).toContain('sslmode=verify-full');
    expect(worker.code, 'a worker started against it').toBe(2);
    expect(worker.stderr).toContain('neither a password nor TLS');
    expect(embedded.code).toBe(2);
    expect(embedded.stderr).toContain('(from FLOE_PG_HOST) reaches Postgres on 0.0.0.0');
    expect(withPassword.stderr).not.toContain('neither a password nor TLS');
    expect(withPassword.stdout).toMatch(/FAIL postgres\s+postgres:\/\/floe:\*\*\*@192\.0\.2\.10:5432\/floe does not answer/);
    expect(withTls.stderr).not.toContain('neither a password nor TLS');
    expect(withTls.stdout).toMatch(/FAIL postgres\s+postgres:\/\/floe@192\.0\.2\.10:5432\/floe\?sslmode=require does not answer/);
    return {
      detail: `refused (exit 2): postgres://floe@${far}/floe (floe doctor), ?sslmode=prefer (floe worker control), FLOE_PG_HOST=0.0.0.0; accepted by the check: the same host with a password, or sslmode=require. Message: ${refused.stderr.trim().replace(/^floe: /, '').slice(0, 160)}…`,
      facts: { refused: refused.stderr.trim() },
    };
  }, 120_000);

  chaosCase('exposure', 'docs/guides/operations.md "Running the parts across hosts" names only settings floe reads', async () => {
    const guide = fs.readFileSync(path.join(repoRoot, 'docs', 'guides', 'operations.md'), 'utf8');
    const start = guide.indexOf('\n## Running the parts across hosts\n');
    expect(start, 'docs/guides/operations.md has no "Running the parts across hosts" section').toBeGreaterThanOrEqual(0);
    // up to the next heading of the same or a higher level (its code blocks hold no headings)
    const next = guide.slice(start + 1).search(/\n#{1,2} /);
    const section = next < 0 ? guide.slice(start) : guide.slice(start, start + 1 + next);
    const code = ['infra/settings.ts', 'infra/components/postgres.ts', 'core/exposure.ts', 'core/config.ts']
      .map((f) => fs.readFileSync(path.join(repoRoot, f), 'utf8')).join('\n');
    const vars = [...new Set(section.match(/\b(FLOE_[A-Z_]+|DOCKER_HOST|PG[A-Z]+)\b/g) ?? [])];
    const unknown = vars.filter((v) => !code.includes(v));
    expect(unknown, 'variables the section names that floe does not read').toEqual([]);
    for (const must of ['127.0.0.1', 'sslmode', 'mTLS', 'SSH', 'unix socket', 'FLOE_DATABASE_URL', 'FLOE_TEMPORAL_ADDRESS', 'DOCKER_HOST']) expect(section).toContain(must);
    return { detail: `section present (${section.split('\n').length} lines); names ${vars.join(', ')}: each read by floe`, facts: { vars } };
  });
});
