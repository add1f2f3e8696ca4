import fs from 'node:fs';
import path from 'node:path';
import { it } from 'vitest';
import { repoRoot } from '../../infra/settings.js';

/** The chaos suite's record (issue 17): every case of test/chaos/*.test.ts appends one JSON
 *  line to .floe/chaos/cases.jsonl when it ends, passed or not; `npm run chaos` (bench/chaos.ts)
 *  clears the file, runs the suite and folds the lines into bench/results/chaos.json. */

export type ChaosSuite = 'crash' | 'hostile-sandbox' | 'model-output' | 'bad-input' | 'exposure';

export interface ChaosOutcome {
  /** What happened, in a line: the limit, timeout, profile rule or message that stopped it. */
  detail: string;
  /** Rollouts lost / counted in two batches, for the cases that run rollouts (checked in Postgres). */
  rolloutsLost?: number;
  countedTwice?: number;
  /** Anything measured worth keeping (seconds to recover, the rollout record's gate, …). */
  facts?: Record<string, unknown>;
}

export interface ChaosCase extends ChaosOutcome { suite: ChaosSuite; name: string; survived: boolean; ms: number; at: string }

export const chaosFile = (): string => process.env.FLOE_CHAOS_CASES ?? path.join(repoRoot, '.floe', 'chaos', 'cases.jsonl');

export function recordChaosCase(c: ChaosCase): void {
  fs.mkdirSync(path.dirname(chaosFile()), { recursive: true });
  fs.appendFileSync(chaosFile(), `${JSON.stringify(c)}\n`);
}

/** A vitest case that records itself: survived when `body` resolves (its assertions held),
 *  not survived, with the error, when it throws; the error still fails the test. */
export function chaosCase(suite: ChaosSuite, name: string, body: () => Promise<ChaosOutcome>, timeoutMs?: number): void {
  it(name, async () => {
    const t0 = Date.now();
    try {
      const out = await body();
      recordChaosCase({ suite, name, survived: true, ms: Date.now() - t0, at: new Date().toISOString(), ...out });
    } catch (err) {
      recordChaosCase({ suite, name, survived: false, ms: Date.now() - t0, at: new Date().toISOString(), detail: (err as Error).message.slice(0, 2000) });
      throw err;
    }
  }, timeoutMs);
}

export function readChaosCases(file = chaosFile()): ChaosCase[] {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as ChaosCase);
}
