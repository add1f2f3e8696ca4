/** Advantages over rollouts — computed here and nowhere else (the trainer takes them as given).
 *  Group-relative: each rollout's reward minus its group's mean, optionally divided by the
 *  group's standard deviation (groups where every attempt got the same reward teach nothing).
 *  'reward': the reward itself, so with 0/1 rewards only successes are reinforced (failed
 *  attempts get no gradient). Negative advantages are then multiplied by `negativeScale`
 *  (0 = failed attempts push nothing down). Every turn of a rollout shares its advantage. */

export interface Scored { rolloutId: string; groupId: string; reward: number }

/** The recipe's scale of negative advantages (1 = as computed, 0 = failures push nothing down). */
export const scaleNegative = (a: number, negativeScale: number): number => (a < 0 ? a * negativeScale : a);

export type AdvantageMode = 'group' | 'group-std' | 'reward';

export function groupAdvantages(rollouts: readonly Scored[], mode: AdvantageMode, opts: { negativeScale?: number; eps?: number } = {}): Map<string, number> {
  const eps = opts.eps ?? 1e-6;
  const negativeScale = opts.negativeScale ?? 1;
  const groups = new Map<string, Scored[]>();
  for (const r of rollouts) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  const out = new Map<string, number>();
  for (const members of groups.values()) {
    const mean = members.reduce((a, r) => a + r.reward, 0) / members.length;
    const std = Math.sqrt(members.reduce((a, r) => a + (r.reward - mean) ** 2, 0) / members.length);
    for (const r of members) {
      const a = mode === 'reward' ? r.reward : mode === 'group-std' ? (r.reward - mean) / (std + eps) : r.reward - mean;
      out.set(r.rolloutId, scaleNegative(a, negativeScale));
    }
  }
  return out;
}
