/** Off-policy bound: a rollout is stale, and discarded, when the policy has advanced more
 *  than `maxOffPolicySteps` versions since the rollout's first token. */
export function staleness(currentVersion: number, versionStart: number | null): number {
  return versionStart === null ? 0 : currentVersion - versionStart;
}

export const isStale = (currentVersion: number, versionStart: number | null, maxOffPolicySteps: number): boolean =>
  staleness(currentVersion, versionStart) > maxOffPolicySteps;
