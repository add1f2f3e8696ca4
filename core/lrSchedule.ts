/** The trainer's learning rate over a run — computed here and nowhere else (the training run
 *  sends each weight update its lr; the trainer applies the lr it is given). 'constant': the
 *  configured lr at every update. 'linear' / 'cosine': from the configured lr at update 1 down to
 *  lr × `final` at the run's last update, on a straight line or a half cosine (the decays of
 *  the peers' schedulers: verl's and prime-rl's warmup-then-decay, without the warmup, since the
 *  policy starts from a trained checkpoint). An update past the planned last one keeps the final lr. */

export type LrScheduleKind = 'constant' | 'linear' | 'cosine';

/** The run config's trainer fields that set the schedule. */
export interface LrSchedule { lr: number; lrSchedule: LrScheduleKind; lrFinal: number }

/** The lr of the update that produces `version` (1-based) in a run of `updates` updates. */
export function lrAt(t: LrSchedule, version: number, updates: number): number {
  if (t.lrSchedule === 'constant' || updates <= 1) return t.lr;
  const final = t.lrFinal;
  const progress = Math.min(1, Math.max(0, (version - 1) / (updates - 1)));
  const left = t.lrSchedule === 'linear' ? 1 - progress : 0.5 * (1 + Math.cos(Math.PI * progress));
  return t.lr * (final + (1 - final) * left);
}
