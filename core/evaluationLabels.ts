/** What an evaluation is for, and how often one happens.
 *  'start' / 'end': a training run's own evaluations, once a run; 'periodic' / 'retired': its
 *  evaluations every evaluation.every updates (held-out tasks; tasks retired as mastered, the
 *  forgetting check), once per version; 'checkpoint': `floe eval`'s, once per run it makes. */
export type EvaluationLabel = 'start' | 'end' | 'checkpoint' | 'periodic' | 'retired';

/** The part of an evaluation's workflow and rollout-group ids that names it: the label, and the
 *  version for the labels that happen once per version. Ids built on it are stable across
 *  retries and replays, so a repeated evaluation of the same version is the same workflow. */
export function evaluationKey(label: EvaluationLabel, version: number): string {
  return label === 'periodic' || label === 'retired' ? `${label}-v${version}` : label;
}
