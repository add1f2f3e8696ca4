import type { RunConfig } from '../core/config.js';
import type { Settings } from '../infra/settings.js';
import { ROLES, createWorker } from '../workers/worker.js';
import { temporalClient } from '../workers/connect.js';
import { getRunStatus, startRun, stop, webUiLink } from '../client/runs.js';

/** The main job on the embedded default: all workers in this process, one run. */
export async function runDemo(s: Settings, config: RunConfig): Promise<number> {
  const workers = (await Promise.all(ROLES.map((r) => createWorker(s, r)))).filter((w) => w !== null);
  const running = Promise.all(workers.map((w) => w.run()));
  const client = await temporalClient(s);
  try {
    const { runId, workflowId } = await startRun(client, config);
    console.log(`run ${runId}\n  Web UI ${webUiLink(s, workflowId)}`);
    let st = await getRunStatus(client, runId);
    for (let i = 0; i < 120 && st.pool.active === 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      st = await getRunStatus(client, runId);
    }
    console.log(`  pool: ${st.pool.active} tasks active; state ${st.state}`);
    st = await stop(client, runId, 'demo finished');
    console.log(`  ${st.state}`);
    return 0;
  } finally {
    await client.connection.close();
    workers.forEach((w) => w.shutdown());
    await running;
  }
}
