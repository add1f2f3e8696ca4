import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { Settings } from './settings.js';
import { repoRoot } from './settings.js';
import { resolveModel, resolveTokenizer } from '../activities/renderer.js';

/** The embedded default's GPU side, on this machine's CPU: reference inference engines and
 *  a trainer (engine/, Python) started as child processes of the worker that binds to them.
 *  Each server prints one JSON line {"event":"ready","port":…} when it listens. */

export interface PythonServer {
  name: string; url: string; port: number; module: string;
  /** The live process: a supervised server's is replaced when it is restarted. */
  process: ChildProcess;
  /** How many times the supervisor restarted it. */
  restarts: number;
  stop(): Promise<void>;
}

export const ENGINE_MODULE = 'floe_engine.inference_server';
export const TRAINER_MODULE = 'floe_engine.trainer_server';

function startServer(s: Settings, name: string, module: string, args: string[], logFile: string, port = 0): Promise<PythonServer> {
  if (!fs.existsSync(s.python.bin)) throw new Error(`${name}: ${s.python.bin} is missing; run \`floe up\` (it builds the engine environment)`);
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  // SIGINT ignored (inherited through exec; Python then installs no KeyboardInterrupt
  // handler): a terminal's Ctrl-C reaches the whole process group, and the servers must not
  // exit under the supervisor, which would restart them while the demo shuts down. The demo
  // stops them itself; a kill of the demo's process group (SIGKILL, SIGTERM) still ends them.
  const child = spawn('/bin/sh', ['-c', 'trap "" INT; exec "$0" "$@"', s.python.bin, '-m', module, '--port', String(port), ...args], {
    cwd: repoRoot,
    env: { ...process.env, PYTHONUNBUFFERED: '1', OMP_NUM_THREADS: '1', FLOE_ENGINE_THREADS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.pipe(log);
  // a server never outlives the process that started it, however that process ends
  const killOnExit = () => { child.kill('SIGKILL'); };
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${name} did not start within 120 s; see ${logFile}`)); }, 120_000);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited with ${code} before it was ready${port ? ` (is port ${port} taken? \`ss -ltnp 'sport = :${port}'\` names the process holding it)` : ''}; see ${logFile}`)); });
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      log.write(`${line}\n`);
      let msg: { event?: string; port?: number };
      try { msg = JSON.parse(line) as typeof msg; } catch { return; }
      if (msg.event !== 'ready' || !msg.port) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      const port = msg.port;
      resolve({
        name,
        port,
        module,
        url: `http://127.0.0.1:${port}`,
        process: child,
        restarts: 0,
        stop: () => new Promise<void>((done) => {
          if (child.exitCode !== null) return done();
          child.once('exit', () => done());
          child.kill('SIGTERM');
          setTimeout(() => child.kill('SIGKILL'), 5000).unref();
        }),
      });
    });
  });
}

export interface EmbeddedGpu { engines: PythonServer[]; trainer: PythonServer | null; publishDir: string; stop(): Promise<void> }

/** The newest version folder <publishDir>/v<N> the trainer published, or null. A folder is
 *  complete once it has its name (engine/floe_engine/checkpoint.py writes a temporary folder
 *  and renames it), so a trainer killed mid-publish leaves no v<N> half-written. */
export function newestPublished(publishDir: string): { version: number; path: string } | null {
  let best: number | null = null;
  try {
    for (const name of fs.readdirSync(publishDir)) {
      const m = /^v(\d+)$/.exec(name);
      if (m && (best === null || Number(m[1]) > best)) best = Number(m[1]);
    }
  } catch { /* no folder yet */ }
  return best === null ? null : { version: best, path: path.join(publishDir, `v${best}`) };
}

/** What the supervisor reports when a server died and it started another in its place. */
export interface RestartEvent { server: PythonServer; exit: { code: number | null; signal: string | null }; checkpoint: string; gaveUp?: string }

/** Keep `srv` running: when its process exits without stop() (killed, crashed), start it again
 *  on the same port — engines from their launch weights (floe's router finds an engine whose
 *  labels disagree with its record and loads the run's version into it: activities/generate.ts
 *  resync), the trainer from the newest version it published (its weights; the optimizer's
 *  moments start afresh). More than 5 exits within a minute is a crash loop: it stops trying
 *  and says so. */
function supervise(srv: PythonServer, relaunch: () => Promise<{ server: PythonServer; checkpoint: string }>, onRestart?: (e: RestartEvent) => void): void {
  let stopping = false;
  let stopCurrent = srv.stop;
  const exits: number[] = [];
  const watch = (child: ChildProcess) => child.once('exit', (code, signal) => { if (!stopping) void restart({ code, signal }); });
  async function restart(exit: RestartEvent['exit']): Promise<void> {
    const now = Date.now();
    exits.push(now);
    while (exits.length && exits[0] < now - 60_000) exits.shift();
    if (exits.length > 5) {
      onRestart?.({ server: srv, exit, checkpoint: '', gaveUp: `${srv.name} exited ${exits.length} times within a minute: not restarted again; see its log under .floe/logs/engines` });
      return;
    }
    for (let attempt = 1; !stopping; attempt++) {
      try {
        const next = await relaunch();
        if (stopping) { await next.server.stop(); return; }
        srv.process = next.server.process;
        srv.restarts++;
        stopCurrent = next.server.stop;
        watch(srv.process);
        onRestart?.({ server: srv, exit, checkpoint: next.checkpoint });
        return;
      } catch (err) {
        if (attempt >= 5) { onRestart?.({ server: srv, exit, checkpoint: '', gaveUp: `${srv.name} did not come back after ${attempt} tries: ${(err as Error).message}` }); return; }
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }
  watch(srv.process);
  srv.stop = async () => { stopping = true; await stopCurrent(); };
}

/** Start `count` inference engines (and optionally the trainer) serving `checkpoint`.
 *  Each server's version is the one its checkpoint's sidecar records (engine/floe_engine/
 *  checkpoint.py), so a published folder <publishDir>/v<N> starts it at version N: that is
 *  how a resumed demo brings the engines and the trainer back at the run's version.
 *  `trainerCheckpoint` (default `checkpoint`): where the trainer starts, when it may be ahead
 *  of the engines (it published a version the run has not recorded yet). `ports` (default:
 *  free ports) pins each server's port: a resumed run's config names the engines and the
 *  trainer by URL, so they must come back where they were. `supervise` (default true): a
 *  server that dies is started again on its port (see supervise above); `onRestart` hears of it. */
export async function startEmbeddedGpu(s: Settings, opts: { count: number; checkpoint: string; trainerCheckpoint?: string; publishDir: string; model?: string; tokenizer?: string; trainer?: boolean; maxBatch?: number; seed?: number; ports?: { engines: number[]; trainer: number | null }; supervise?: boolean; onRestart?: (e: RestartEvent) => void }): Promise<EmbeddedGpu> {
  const logs = path.join(s.logDir, 'engines');
  const common = ['--model', resolveModel(opts.model ?? 'tiny', s), '--tokenizer', resolveTokenizer(opts.tokenizer ?? 'byte', { home: s.home, repoRoot })];
  if (opts.ports && opts.ports.engines.length !== opts.count) throw new Error(`startEmbeddedGpu: ${opts.ports.engines.length} engine port(s) given for ${opts.count} engine(s); give one port per engine`);
  const engineArgs = (i: number) => [...common, '--checkpoint', opts.checkpoint, '--seed', String((opts.seed ?? 0) * 100 + i), '--max-batch', String(opts.maxBatch ?? 16)];
  // every train setting (lr included) comes with each /train_step from the run config, not from the process
  const trainerArgs = (checkpoint: string) => [...common, '--checkpoint', checkpoint, '--publish-dir', opts.publishDir];
  const startEngine = (i: number, port: number) => startServer(s, `engine-${i}`, ENGINE_MODULE, engineArgs(i), path.join(logs, `engine-${i}.log`), port);
  const startTrainer = (checkpoint: string, port: number) => startServer(s, 'trainer', TRAINER_MODULE, trainerArgs(checkpoint), path.join(logs, 'trainer.log'), port);
  const started: PythonServer[] = [];
  try {
    const engines = await Promise.all(Array.from({ length: opts.count }, (_, i) =>
      startEngine(i, opts.ports?.engines[i] ?? 0).then((e) => (started.push(e), e))));
    const trainer = opts.trainer === false ? null : await startTrainer(opts.trainerCheckpoint ?? opts.checkpoint, opts.ports?.trainer ?? 0);
    if (trainer) started.push(trainer);
    if (opts.supervise !== false) {
      engines.forEach((e, i) => supervise(e, async () => ({ server: await startEngine(i, e.port), checkpoint: opts.checkpoint }), opts.onRestart));
      if (trainer) {
        supervise(trainer, async () => {
          const checkpoint = newestPublished(opts.publishDir)?.path ?? opts.trainerCheckpoint ?? opts.checkpoint;
          return { server: await startTrainer(checkpoint, trainer.port), checkpoint };
        }, opts.onRestart);
      }
    }
    return { engines, trainer, publishDir: opts.publishDir, stop: async () => { await Promise.all(started.map((p) => p.stop())); } };
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()));
    throw err;
  }
}

/** A server process as a demo file remembers it (pid, its start time, module, port): enough
 *  to find it again after the process that started it died, and to be sure a pid is still
 *  that server and not a later process that reused the pid. */
export interface ServerRecord { name: string; pid: number; module: string; port: number; startTicks: string | null }

/** A process's start time in clock ticks since boot (/proc/<pid>/stat field 22); null when gone. */
function startTicks(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null; // fields after "(comm)" start at field 3
  } catch {
    return null;
  }
}

export const serverRecords = (g: EmbeddedGpu): ServerRecord[] => [...g.engines, ...(g.trainer ? [g.trainer] : [])].map(serverRecord);
export const serverRecord = (p: PythonServer): ServerRecord => ({ name: p.name, pid: p.process.pid ?? -1, module: p.module, port: p.port, startTicks: startTicks(p.process.pid ?? -1) });

/** Is `pid` still the server `rec` names? The same process (start time), running rec.module
 *  with `--port rec.port` (or `--port 0`: it picked rec.port itself). Linux /proc. */
export function isServerProcess(rec: ServerRecord): boolean {
  let argv: string[];
  try {
    argv = fs.readFileSync(`/proc/${rec.pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return false; // gone
  }
  if (rec.startTicks !== null && startTicks(rec.pid) !== rec.startTicks) return false;
  const m = argv.indexOf('-m');
  const p = argv.indexOf('--port');
  return m >= 0 && argv[m + 1] === rec.module && p >= 0 && (argv[p + 1] === String(rec.port) || argv[p + 1] === '0');
}

/** Stop servers left behind by a process that died without stopping them (kill -9 of a demo:
 *  its children are reparented to init and keep their ports). Only a pid whose command line
 *  is still that server is signalled (SIGTERM, then SIGKILL after 5 s); resolves when each is
 *  gone. Returns the records it stopped. */
export async function stopLeftoverServers(recs: ServerRecord[]): Promise<ServerRecord[]> {
  const live = recs.filter(isServerProcess);
  const signal = (pid: number, sig: NodeJS.Signals) => { try { process.kill(pid, sig); } catch { /* already gone */ } };
  for (const r of live) signal(r.pid, 'SIGTERM');
  const deadline = Date.now() + 15_000;
  for (let t = 0; live.some(isServerProcess); t += 200) {
    if (t === 5000) for (const r of live) if (isServerProcess(r)) signal(r.pid, 'SIGKILL');
    if (Date.now() > deadline) {
      const stuck = live.filter(isServerProcess).map((r) => `${r.name} (pid ${r.pid})`).join(', ');
      throw new Error(`could not stop the left-over ${stuck}: kill them by pid (\`kill -9 PID\`) and rerun`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return live;
}
