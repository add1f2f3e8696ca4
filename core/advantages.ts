/** Advantages over rollouts. Group-relative: each rollout's reward minus its group's mean,
 *  optionally divided by the group's standard deviation (groups where every attempt got the same
 *  reward teach nothing). 'reward': the reward itself, so with 0/1 rewards only successes are
 *  reinforced (failed attempts get no gradient). Every turn of a rollout shares its advantage. */

export interface Scored { rolloutId: string; groupId: string; reward: number }

export function groupAdvantages(rollouts: readonly Scored[], mode: 'group' | 'group-std' | 'reward', eps = 1e-6): Map<string, number> {
  const groups = new Map<string, Scored[]>();
  for (const r of rollouts) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  const out = new Map<string, number>();
  for (const members of groups.values()) {
    const mean = members.reduce((a, r) => a + r.reward, 0) / members.length;
    const std = Math.sqrt(members.reduce((a, r) => a + (r.reward - mean) ** 2, 0) / members.length);
    for (const r of members) out.set(r.rolloutId, mode === 'reward' ? r.reward : mode === 'group-std' ? (r.reward - mean) / (std + eps) : r.reward - mean);
  }
  return out;
}
