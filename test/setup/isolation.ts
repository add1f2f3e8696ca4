import fs from 'node:fs';
import path from 'node:path';
import { afterAll, expect } from 'vitest';
import { temporalClient } from '../../workers/connect.js';
import { settings } from '../helpers/platform.js';

/** Each test file ends with nothing of its own still working, so it cannot take the next
 *  file's jobs: every file's workers poll the same task queues, and a worker process or run
 *  left behind by one file (a tsx wrapper killed without its child, a run a failed test never
 *  ended) would pick up the next file's workflow tasks and activities against engines that
 *  are gone. Loaded by vitest.config.ts (setupFiles) for every file; its afterAll runs after
 *  the file's own.
 *
 *  - floe processes the file started (workers, CLIs, demos, engine and trainer servers: they
 *    carry FLOE_TEST_OWNER in their environment) and that are still alive are killed, and the
 *    file fails naming them: a leak is a defect of the test or of floe's shutdown.
 *  - workflows still running are terminated and named on stderr (a run's rollouts may outlive
 *    it by design; a file that needs its workflows finished waits for them itself). */

const OWNER = `FLOE_TEST_OWNER=${process.pid}`;
process.env.FLOE_TEST_OWNER = String(process.pid);
/** Floe's own processes; the services (Temporal, Postgres, podman) a test restarted stay up.
 *  A renderer (floe_engine.render_server) is not one: it serves its parent's workers only and
 *  dies with that process (activities/renderer.ts), polling nothing meanwhile. */
const FLOE_PROCESS = /(cli\/floe\.ts|bin\/floe|floe_engine\.(?!render_server))/;

function leftProcesses(): { pid: number; cmd: string }[] {
  const left: { pid: number; cmd: string }[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const dir = path.join('/proc', entry);
      if (/^\d+ \(.*\) Z/.test(fs.readFileSync(path.join(dir, 'stat'), 'utf8'))) continue; // exited, not yet reaped
      const cmd = fs.readFileSync(path.join(dir, 'cmdline'), 'utf8').split('\0').join(' ').trim();
      if (!FLOE_PROCESS.test(cmd)) continue;
      if (fs.readFileSync(path.join(dir, 'environ'), 'utf8').split('\0').includes(OWNER)) left.push({ pid, cmd });
    } catch { /* gone meanwhile, or not ours to read */ }
  }
  return left;
}

async function terminateRunning(): Promise<string[]> {
  const client = await temporalClient(settings);
  const ended: string[] = [];
  try {
    for await (const w of client.workflow.list({ query: "ExecutionStatus = 'Running'" })) {
      await client.workflow.getHandle(w.workflowId, w.runId).terminate('left running when its test file ended').then(() => ended.push(w.workflowId), () => undefined);
    }
  } finally {
    await client.connection.close();
  }
  return ended;
}

afterAll(async () => {
  const file = path.relative(process.cwd(), expect.getState().testPath ?? '?');
  // a process on its way out after its file's own cleanup gets a moment
  let left = leftProcesses();
  for (let i = 0; i < 20 && left.length; i++) { await new Promise((r) => setTimeout(r, 250)); left = leftProcesses(); }
  for (const p of left) { try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ } }
  const ended = await terminateRunning().catch((err: unknown) => { process.stderr.write(`[test isolation] ${file}: could not list running workflows: ${String(err)}\n`); return []; });
  if (ended.length) process.stderr.write(`[test isolation] ${file}: terminated ${ended.length} workflow(s) still running at its end: ${ended.slice(0, 5).join(', ')}${ended.length > 5 ? ', …' : ''}\n`);
  if (left.length) throw new Error(`${file} left ${left.length} floe process(es) running (now killed):\n  ${left.map((p) => `${p.pid} ${p.cmd}`).join('\n  ')}`);
}, 60_000);
