import type pg from 'pg';
import { rolloutSamples, type GpuActivities, type LoadWeightsInput, type LoadWeightsResult, type TrainStepInput, type TrainStepResult } from '../../activities/gpu.js';
import { insertEngineEvent, setEngineServing } from '../../store/engines.js';
import type { ScriptedEngine } from './scriptedEngine.js';

/** TEST DOUBLE. A GPU node's activities as the weightUpdate workflow calls them
 *  (activities/gpu.ts createGpuActivities: trainStep, loadWeights), with no trainer and no
 *  model: a train step reads its batch's samples from Postgres as the real one does
 *  (rolloutSamples: the whole token path of every rollout), takes `trainMs`, and publishes
 *  nothing; a load takes `loadMs`, makes the scripted engine report the new version and records
 *  it in Postgres as the real load does (setEngineServing, a weights_loaded event). For driving
 *  a whole training run on the control plane alone (bench/scale_run.ts). Lives in test/ only. */

export interface GpuDoubleTimes { trainMs: number; loadMs: number }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createGpuDouble(pool: pg.Pool, engines: Record<string, ScriptedEngine>, t: GpuDoubleTimes): Pick<GpuActivities, 'trainStep' | 'loadWeights'> & { steps: { version: number; samples: number; tokens: number }[] } {
  const steps: { version: number; samples: number; tokens: number }[] = [];
  return {
    steps,
    async trainStep(input: TrainStepInput): Promise<TrainStepResult> {
      const started = Date.now();
      const samples = await rolloutSamples(pool, Object.keys(input.advantages), input.advantages);
      if (samples.length === 0) throw new Error(`no tokens recorded for the ${Object.keys(input.advantages).length} rollouts of batch v${input.version}`);
      const tokens = samples.reduce((n, s) => n + s.ids.length, 0);
      steps.push({ version: input.version, samples: samples.length, tokens });
      await sleep(t.trainMs);
      return { version: input.version, path: `/gpu-double/${input.runId}/v${input.version}`, metrics: { samples: samples.length, tokens }, samples: samples.length, trainMs: Date.now() - started };
    },
    async loadWeights(input: LoadWeightsInput): Promise<LoadWeightsResult> {
      const started = Date.now();
      const engine = engines[input.engine.id];
      if (!engine) throw new Error(`the GPU double has no scripted engine ${input.engine.id}`);
      await sleep(t.loadMs);
      engine.setVersion(input.version);
      await setEngineServing(pool, input.runId, input.engine, input.version, input.path);
      await insertEngineEvent(pool, { runId: input.runId, engineId: input.engine.id, event: 'weights_loaded', version: input.version, detail: { kind: 'gpu-double', folder: input.path } });
      return { engineId: input.engine.id, loadMs: Date.now() - started };
    },
  };
}
