/** Weight versions, owned by floe (docs/design.md "4. Cache rebuild after every weight update";
 *  docs/guides/engines.md "floe owns weight versions").
 *
 *  vLLM and SGLang know nothing of floe's versions (at most a label string floe sets when it
 *  loads weights). floe keeps, per engine, the version it serves and an update epoch: a weight update bumps the epoch when it begins
 *  (before it pauses the engine, which aborts every request in flight) and again when it
 *  ends (after the load and the cache flush, before resume). A request reads the state
 *  before it is sent and the epoch after it is answered; these rules decide which tokens can
 *  be attributed to a version, and how an aborted request is resubmitted from its exact
 *  token prefix so every token after an update comes from the new weights. Engines that
 *  rebuild their caches in place and report a version per token (the reference engine)
 *  need none of this. */

export type WeightState = 'serving' | 'updating' | 'unknown' | 'resyncing';

export interface EngineWeights {
  version: number;
  epoch: number;
  state: WeightState;
  /** The published folder of `version` ('' for the launch weights, version 0). */
  path: string;
}

export type Finish = 'stop' | 'length' | 'abort';

export type Attribution =
  | { keep: true; version: number }
  | { keep: false; reason: 'ambiguous' | 'spanned_updates' | 'label_mismatch' | 'not_frozen' };

/** Which version produced the ids of one answered request, sent while the engine served
 *  `sentAt.version` at epoch `sentAt.epoch` and answered when the epoch was `answeredEpoch`.
 *  - No update began meanwhile: the version it was sent under.
 *  - Aborted, with at most one update begun and ended meanwhile: the abort came from that
 *    update's pause, before its load, so the ids are the old version's.
 *  - Finished (stop / length) while one update had begun but not ended: it finished before
 *    the pause (a request that reached the paused engine waits for resume), old version.
 *  - Anything else cannot be told apart (finished before the pause, or queued through it and
 *    served by the new weights; or aborted by a later update): the ids are dropped and the
 *    request is sent again from the same prefix. */
export function attribute(sentAt: Pick<EngineWeights, 'version' | 'epoch'>, answeredEpoch: number, finish: Finish): Attribution {
  const updates = answeredEpoch - sentAt.epoch;
  if (updates < 0) throw new Error(`epoch went backwards (${sentAt.epoch} → ${answeredEpoch}); engine_weights rows are only ever incremented`);
  if (updates === 0) return { keep: true, version: sentAt.version };
  if (finish === 'abort') return updates <= 2 ? { keep: true, version: sentAt.version } : { keep: false, reason: 'spanned_updates' };
  return updates === 1 ? { keep: true, version: sentAt.version } : { keep: false, reason: 'ambiguous' };
}

/** Whether an answer is the abort of a weight update's pause, to be resubmitted from its
 *  prefix: aborted while an update began. An abort with no update meanwhile (an operator's
 *  abort, a server shutting down) is the turn's own ending, which the format gate judges. */
export const abortedByUpdate = (sentEpoch: number, answeredEpoch: number, finish: Finish): boolean =>
  finish === 'abort' && answeredEpoch > sentEpoch;

/** Whether the weight-version labels a server reports for an answer (vLLM's and SGLang's
 *  weight_versions) agree with the version floe attributed it to. floe labels every version it
 *  loads String(version); the launch weights (version 0) carry whatever label the server was
 *  started with. A disagreement means the server serves weights floe did not load into it (it
 *  restarted with its launch weights unnoticed): its ids are dropped and it is loaded again. */
export function labelsAgree(version: number, labels: readonly string[] | null | undefined): boolean {
  if (!labels || labels.length === 0 || version === 0) return true;
  return labels.every((l) => l === String(version));
}

/** The ids of one turn so far, across its aborted and resubmitted requests. */
export interface TurnSoFar { ids: number[]; logprobs: number[]; versions: number[] }

export const emptyTurn = (): TurnSoFar => ({ ids: [], logprobs: [], versions: [] });

/** Append an answer's ids, each stamped with `version` (or with the engine's own per-token
 *  versions when it reports them). */
export function extendTurn(t: TurnSoFar, ids: readonly number[], logprobs: readonly number[], versions: number | readonly number[]): TurnSoFar {
  if (logprobs.length !== ids.length) throw new Error(`the engine returned ${ids.length} ids and ${logprobs.length} log-probs; floe needs one log-prob per generated id`);
  const v = typeof versions === 'number' ? ids.map(() => versions) : [...versions];
  if (v.length !== ids.length) throw new Error(`the engine returned ${ids.length} ids and ${v.length} weight versions`);
  return { ids: [...t.ids, ...ids], logprobs: [...t.logprobs, ...logprobs], versions: [...t.versions, ...v] };
}

/** The next request of a turn: the turn's prompt followed by the ids kept so far, asking for
 *  what is left of the turn's token budget (0: the turn is over, at its length limit). */
export function resubmission(prompt: readonly number[], soFar: TurnSoFar, maxTokens: number): { promptIds: number[]; maxTokens: number } {
  return { promptIds: [...prompt, ...soFar.ids], maxTokens: Math.max(0, maxTokens - soFar.ids.length) };
}

/** Requests one turn may send before floe gives up on it (each resubmission follows an update). */
export const MAX_REQUESTS_PER_TURN = 8;

/** Whether a request may be placed on an engine in this state now. */
export const servable = (s: WeightState): boolean => s === 'serving';

/** One span of a server's weight-version report (vLLM's WeightVersionSpan, SGLang's
 *  meta_info.weight_versions): generated ids [start, end) were sampled by the weights labelled
 *  `label`. */
export interface LabelSpan { label: string; start: number; end: number }

/** The version a weight-version label names: floe labels every version it loads String(version);
 *  any other label is the server's launch label ("default" unless --weight-version says), the
 *  launch weights, version 0. */
export const labelVersion = (label: string): number => (/^\d+$/.test(label) ? Number(label) : 0);

/** Per-token versions from a server's spans, for an answer of `n` ids to a request sent while
 *  floe recorded `sentVersion` for the engine. With engines.updateMode 'keep' a request runs
 *  through an update and its ids carry two versions; the spans say exactly where the switch is.
 *  null when the spans cannot be trusted: they do not cover the ids [0, n) end to end, or name a
 *  version before `sentVersion` (the server serves weights floe did not load into it: it
 *  restarted with its launch weights), or a version goes backwards. */
export function spanVersions(spans: readonly LabelSpan[], n: number, sentVersion: number): number[] | null {
  if (n === 0) return [];
  const out: number[] = [];
  let prev = sentVersion;
  for (const s of spans) {
    if (s.start !== out.length || s.end < s.start || s.end > n) return null;
    const v = labelVersion(s.label);
    if (v < prev) return null;
    prev = v;
    for (let i = s.start; i < s.end; i++) out.push(v);
  }
  return out.length === n ? out : null;
}

/** Where the version changes inside one answer (indices of the first id of each later version):
 *  a turn that spans a weight update records them. */
export function switchPoints(versions: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 1; i < versions.length; i++) if (versions[i] !== versions[i - 1]) out.push(i);
  return out;
}
