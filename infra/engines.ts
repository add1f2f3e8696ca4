import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { Settings } from './settings.js';
import { repoRoot } from './settings.js';
import { resolveTokenizer } from '../activities/renderer.js';

/** The embedded default's GPU side, on this machine's CPU: reference inference engines and
 *  a trainer (engine/, Python) started as child processes of the worker that binds to them.
 *  Each server prints one JSON line {"event":"ready","port":…} when it listens. */

export interface PythonServer { name: string; url: string; port: number; process: ChildProcess; stop(): Promise<void> }

function startServer(s: Settings, name: string, module: string, args: string[], logFile: string): Promise<PythonServer> {
  if (!fs.existsSync(s.python.bin)) throw new Error(`${name}: ${s.python.bin} is missing; run \`floe up\` (it builds the engine environment)`);
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  const child = spawn(s.python.bin, ['-m', module, '--port', '0', ...args], {
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
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited with ${code} before it was ready; see ${logFile}`)); });
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
        url: `http://127.0.0.1:${port}`,
        process: child,
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

/** Start `count` inference engines (and optionally the trainer) serving `checkpoint`. */
export async function startEmbeddedGpu(s: Settings, opts: { count: number; checkpoint: string; publishDir: string; model?: string; tokenizer?: string; lr?: number; trainer?: boolean; maxBatch?: number; seed?: number }): Promise<EmbeddedGpu> {
  const logs = path.join(s.logDir, 'engines');
  const common = ['--model', opts.model ?? 'tiny', '--tokenizer', resolveTokenizer(opts.tokenizer ?? 'byte', { home: s.home, repoRoot }), '--checkpoint', opts.checkpoint];
  const started: PythonServer[] = [];
  try {
    const engines = await Promise.all(Array.from({ length: opts.count }, (_, i) =>
      startServer(s, `engine-${i}`, 'floe_engine.inference_server', [...common, '--seed', String((opts.seed ?? 0) * 100 + i), '--max-batch', String(opts.maxBatch ?? 16)], path.join(logs, `engine-${i}.log`)).then((e) => (started.push(e), e))));
    const trainer = opts.trainer === false ? null : await startServer(s, 'trainer', 'floe_engine.trainer_server', [...common, '--publish-dir', opts.publishDir, '--lr', String(opts.lr ?? 3e-4)], path.join(logs, 'trainer.log'));
    if (trainer) started.push(trainer);
    return { engines, trainer, publishDir: opts.publishDir, stop: async () => { await Promise.all(started.map((p) => p.stop())); } };
  } catch (err) {
    await Promise.all(started.map((p) => p.stop()));
    throw err;
  }
}
