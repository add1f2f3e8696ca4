import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { workflowsPath } from '../workers/worker.js';

/** Determinism guard: histories recorded from real runs (test/fixtures/histories, written by
 *  `FLOE_RECORD_HISTORIES=1 npx vitest run test/runLifecycle.test.ts` and the rollout tests)
 *  must replay with the current workflow code. A change that breaks one needs patching
 *  (workflow.patched) or a deliberate re-recording. floe-rollout-pre005-*: rollouts recorded
 *  with the workflow code before turns were written once (migration 005), against stub
 *  activities whose generate answers have no rawText: a tool result, a format failure and a
 *  sandbox failure, which the rollout workflow must still replay (its legacy branch). */
const dir = path.join(import.meta.dirname, 'fixtures', 'histories');

describe('workflow determinism', () => {
  it('replays every recorded history', async () => {
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    // file name = workflow id (child workflow ids derive from it)
    const histories = files.map((f) => ({ workflowId: f.replace(/\.json$/, ''), history: historyFromJSON(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))) }));
    let replayed = 0;
    for await (const r of Worker.runReplayHistories({ workflowsPath }, histories)) {
      expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
      replayed++;
    }
    expect(replayed).toBe(files.length);
  }, 120_000);
});
