import { z } from 'zod';
import { SYSTEM_PROMPT } from './harness.js';
import { redactUrlsIn, urlCredentialsProblem } from './exposure.js';

/** One schema for a run's config. Defaults fit the embedded setup (one machine, tiny CPU
 *  policy, toy tasks). Validated at start-up by `floe run start`; an invalid field is named
 *  with its path before anything runs. */

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const fraction = z.number().min(0).max(1);
/** A server URL without user:secret@ (core/exposure.ts): the config is stored in Postgres and
 *  in Temporal's history, and floe's HTTP client would refuse the URL anyway. */
const withoutCredentials = (u: string, ctx: z.RefinementCtx) => {
  const problem = urlCredentialsProblem(u);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
};

export const EngineSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'lower-case letters, digits, - and _'),
  url: z.url().superRefine(withoutCredentials),
  /** Task queue of the gpu worker on the node this engine runs on. */
  node: z.string().min(1).default('local'),
  /** The server at `url`: floe's reference engine, or an unmodified vLLM or SGLang server
   *  (docs/guides/engines.md has their flags; `floe engine probe <url>` checks one). */
  kind: z.enum(['reference', 'vllm', 'sglang']).default('reference'),
});

export const RunConfigSchema = z.strictObject({
  name: z.string().min(1).max(100).default('stress-test'),
  seed: nonNegInt.default(0),
  tasks: z.strictObject({
    /** 'toy' = the suite under tasks/toy, or a path to a JSONL file of SWE-bench-style rows. */
    source: z.string().min(1).default('toy'),
    /** The published layout of the rows (names each row's image, picks its harness): 'auto'
     *  tells R2E-Gym and SWE-rebench rows by their columns and reads the rest as SWE-bench;
     *  SWE-Gym rows look like SWE-bench's, so name them. */
    layout: z.enum(['auto', 'swe-bench', 'swe-gym', 'swe-rebench', 'r2e-gym']).default('auto'),
    /** Restrict to these instance ids (empty = all). */
    include: z.array(z.string()).default([]),
    /** Use at most this many tasks (0 = all). */
    limit: nonNegInt.default(0),
    /** Drop tasks whose tests are known to accept a wrong patch (data audit / metadata). */
    excludeLooseTests: z.boolean().default(true),
    onBadRow: z.enum(['skip', 'fail']).default('fail'),
    /** Train on a data audit's version of the dataset (`floe audit`, table task_audits):
     *  'original', 'curated' (only the tasks that passed) or 'strengthened' (those plus the
     *  tasks that accepted a wrong patch, with the audit's stronger tests). Absent: no audit. */
    audit: z.strictObject({ id: z.string().min(1), use: z.enum(['original', 'curated', 'strengthened']) }).optional(),
  }).prefault({}),
  policy: z.strictObject({
    /** 'tiny' (the byte-level policy), or 'hf:<config.json | model folder | model_type:k=v,…>'. */
    model: z.string().min(1).default('tiny'),
    /** The model's tokenizer: 'byte' (tiny), a Hugging Face tokenizer folder, or builtin:NAME
     *  (FLOE_HOME/tokenizers/NAME, built offline by `floe up`: builtin:qwen3.6). */
    tokenizer: z.string().min(1).default('byte'),
    /** A .jinja chat template; '' = the tokenizer folder's own (the byte tokenizer has none:
     *  configs/templates/plain.jinja). Shared by rollouts and the warm start. */
    chatTemplate: z.string().default(''),
    /** Longest token sequence (a whole rollout) the model takes. */
    contextTokens: positiveInt.default(1024),
    /** Starting checkpoint; empty = the SFT warm start on the pool's gold trajectories
     *  (built by `floe demo`, cached by content). */
    checkpoint: z.string().default(''),
    warmStartSteps: positiveInt.max(100000).default(300),
    warmStartLr: z.number().positive().max(1).default(1e-3),
    temperature: z.number().positive().max(5).default(1),
    topP: z.number().gt(0).max(1).default(1),
    maxTokensPerTurn: positiveInt.max(32768).default(160),
  }).prefault({}),
  engines: z.strictObject({
    /** Embedded engines floe starts itself (0 when `endpoints` lists external ones). */
    count: nonNegInt.max(16).default(2),
    endpoints: z.array(EngineSchema).default([]),
    router: z.enum(['least-loaded', 'sticky', 'round-robin']).default('least-loaded'),
    /** Consecutive failures before an engine is taken out of rotation until healthy. */
    unhealthyAfter: positiveInt.default(2),
  }).prefault({}),
  trainer: z.strictObject({
    url: z.string().superRefine(withoutCredentials).default(''),
    node: z.string().min(1).default('local'),
    lr: z.number().positive().max(1).default(3e-4),
    /** The lr over the run (core/lrSchedule.ts): constant, or decaying from `lr` at the first
     *  update to `lr × lrFinal` at the last (training.updates), linearly or on a half cosine. */
    lrSchedule: z.enum(['constant', 'linear', 'cosine']).default('constant'),
    lrFinal: fraction.default(0.1),
    clipLow: fraction.default(0.2),
    clipHigh: z.number().min(0).max(10).default(0.28),
    /** group: reward − group mean; group-std: also ÷ group std; reward: the reward itself (learn
     *  only from successes — with 0/1 rewards, failed attempts get no gradient). */
    advantage: z.enum(['group', 'group-std', 'reward']).default('group-std'),
    /** Negative advantages are multiplied by this (0 = failed attempts push nothing down). */
    negativeScale: fraction.default(1),
    /** Passes over each batch, and optimizer steps per pass (whole groups per step). */
    epochs: positiveInt.max(16).default(1),
    minibatches: positiveInt.max(64).default(1),
  }).prefault({}),
  rollout: z.strictObject({
    /** The system message of every conversation (the issue is the user message). */
    systemPrompt: z.string().min(1).default(SYSTEM_PROMPT),
    /** G: attempts per task in a group (advantages are relative within a group). */
    groupSize: positiveInt.max(64).default(8),
    /** Rollouts in flight at once. */
    maxInFlight: positiveInt.max(4096).default(16),
    maxTurns: positiveInt.max(200).default(4),
    maxTotalTokens: positiveInt.default(2048),
    maxWallSeconds: positiveInt.default(120),
    /** Observation text shown to the model is truncated to this many characters. */
    maxObservationChars: positiveInt.default(400),
  }).prefault({}),
  training: z.strictObject({
    /** Groups per weight update. */
    groupsPerUpdate: positiveInt.default(4),
    /** Updates to run (the stop condition of the main job). */
    updates: positiveInt.max(100000).default(60),
    /** A rollout is stale, and discarded, when the policy advanced more than this many
     *  versions since its first token. */
    maxOffPolicySteps: nonNegInt.default(2),
    /** Continue-as-new after this many workflow history events (Temporal limits at 50k). */
    historyEventLimit: positiveInt.default(8000),
  }).prefault({}),
  /** Frozen-weight evaluations of the pool (workflows/evaluation.ts; table evaluations):
   *  `attempts` (k) tries per task with the engines' current weights and no update meanwhile,
   *  scored pass@1 and pass@k. */
  evaluation: z.strictObject({
    attempts: positiveInt.max(64).default(4),
    /** Before the first rollout of training, with the starting weights. */
    atStart: z.boolean().default(false),
    /** After the last update landed, with the final weights. */
    atEnd: z.boolean().default(false),
    /** Train only on the tasks the starting policy solves at least once in `attempts` (the
     *  published stress-pool rule; needs atStart). */
    poolFromStart: z.boolean().default(false),
    /** Every this many updates (0: never), a frozen-weight evaluation inside the run: the
     *  `heldOut` tasks (label 'periodic'), and the tasks eviction has retired so far (label
     *  'retired': the forgetting check). The loop starts no update meanwhile. */
    every: nonNegInt.default(0),
    /** Task ids training never sees, scored by the periodic evaluation (from tasks.source). */
    heldOut: z.array(z.string().min(1)).default([]),
  }).prefault({}),
  eviction: z.strictObject({
    enabled: z.boolean().default(true),
    /** Retire as mastered when all of the last k attempts were solved. */
    masteredK: positiveInt.default(16),
    /** Retire as hopeless when none of the last m attempts was solved. */
    hopelessM: positiveInt.default(32),
    /** Re-score retired tasks every R updates with the current weights. */
    recheckEvery: positiveInt.default(10),
    recheckAttempts: positiveInt.default(4),
    /** Revive a mastered task when its recheck success rate falls below this. */
    reviveBelow: fraction.default(0.75),
  }).prefault({}),
  /** The recipe's layers (docs/design.md "The recipe, rule by rule" and "The recipe as
   *  switches"), each a switch, all on by default. A layer switched off behaves as the public harnesses do, with no extra tuning.
   *  Layers switched elsewhere: placement = engines.router, the staleness bound =
   *  training.maxOffPolicySteps, the advantage estimator = trainer.advantage, eviction =
   *  eviction.enabled. Presets for the published ablation: core/recipeLayers.ts. */
  recipe: z.strictObject({
    /** true: a malformed or duplicate turn, or an exhausted budget, ends the rollout with reward
     *  0 and a reason. false (hint-and-continue): such a turn gets an error observation, counts
     *  against rollout.maxTurns, and the rollout goes on; when the budget runs out the final
     *  state of the repository is graded (its diff extracted, as SWE-agent / OpenHands-style
     *  harnesses grade whatever the repository holds). */
    rewardGate: z.boolean().default(true),
    /** true: core/toolFormat.ts checks the raw output (ids → text, before any parser) and only
     *  a turn it accepts runs. false: a Hermes-style parser (core/hermesParser.ts, as vLLM's,
     *  SGLang's and verl's) decides what runs: every <tool_call> whose body is standard JSON
     *  runs, text around it is ignored, a cut-off call that parses is accepted. The raw verdict
     *  is recorded for every turn either way (turns.format_ok). */
    rawFormatCheck: z.boolean().default(true),
    /** true: only a `submit` call reaches grading (a budget running out earns 0 under the gate).
     *  false: the rollout also ends and is graded when the model answers without a tool call
     *  or the budget runs out: the repository's final state is graded, as peer harnesses do. */
    explicitSubmit: z.boolean().default(true),
    /** true: after loading new weights every engine rebuilds its caches (prefix/KV cache reset;
     *  the reference engine recomputes running sequences under the new weights). false: the
     *  engine loads the weights and keeps its caches (K/V computed by the old weights). */
    cacheRebuild: z.boolean().default(true),
    /** true: retired tasks are re-scored every eviction.recheckEvery updates and revived if they
     *  regress. false: retired tasks stay retired. */
    recheck: z.boolean().default(true),
  }).prefault({}),
  sandbox: z.strictObject({
    cpus: z.number().positive().max(64).default(1),
    memoryMb: positiveInt.min(32).default(256),
    pidsLimit: positiveInt.min(8).default(64),
    commandTimeoutSeconds: positiveInt.max(3600).default(20),
    maxOutputBytes: positiveInt.default(64 * 1024),
    diskMb: positiveInt.default(256),
    gradeTimeoutSeconds: positiveInt.default(60),
    /** Ablation and tests only: false keeps a task image's git history in the agent's sandbox
     *  (its future commits, the fix among them), the door the recipe locks. */
    removeHistory: z.boolean().default(true),
    /** Task queue of the sandbox worker (one per container host). */
    host: z.string().min(1).default('local'),
  }).prefault({}),
});

export type RunConfig = z.infer<typeof RunConfigSchema>;

export class ConfigError extends Error {
  constructor(public readonly issues: { path: string; message: string }[], source: string) {
    // masked: the source quotes the --set overrides, which may hold a URL with credentials
    super(redactUrlsIn(`invalid run config (${source}):\n${issues.map((i) => `  ${i.path || '(root)'}: ${i.message}`).join('\n')}`));
    this.name = 'ConfigError';
  }
}

export function parseRunConfig(input: unknown, source = 'config'): RunConfig {
  const r = RunConfigSchema.safeParse(input ?? {});
  if (r.success) {
    const { model, tokenizer } = r.data.policy;
    const tiny = model === 'tiny' || model.startsWith('tiny:');
    if (tiny && tokenizer !== 'byte') throw new ConfigError([{ path: 'policy.tokenizer', message: `the tiny policy reads bytes: use tokenizer 'byte' (got ${JSON.stringify(tokenizer)}), or an hf: model for a real tokenizer` }], source);
    if (!tiny && !model.startsWith('hf:')) throw new ConfigError([{ path: 'policy.model', message: `unknown model ${JSON.stringify(model)}: use 'tiny', 'tiny:k=v,…' or 'hf:<config.json | model folder | model_type:k=v,…>'` }], source);
    if (r.data.evaluation.poolFromStart && !r.data.evaluation.atStart) throw new ConfigError([{ path: 'evaluation.poolFromStart', message: 'picking the pool by the starting policy needs its evaluation: set evaluation.atStart: true' }], source);
    const { every, heldOut } = r.data.evaluation;
    const trained = new Set(r.data.tasks.include);
    const overlap = heldOut.filter((id) => trained.has(id));
    if (overlap.length) throw new ConfigError([{ path: 'evaluation.heldOut', message: `held-out tasks must not be trained on, but tasks.include lists ${overlap.join(', ')}: take them out of one list` }], source);
    if (heldOut.length && every === 0) throw new ConfigError([{ path: 'evaluation.every', message: 'evaluation.heldOut is scored by the periodic evaluation: set evaluation.every to N (updates)' }], source);
    return r.data;
  }
  throw new ConfigError(r.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.code === 'unrecognized_keys' ? `${i.message}${unknownKeyHint(i.path, i.keys)}` : i.message })), source);
}

/** What an unknown key was probably meant to be, and the keys its section takes. */
function unknownKeyHint(at: readonly PropertyKey[], keys: readonly string[]): string {
  const known = keysAt(at);
  if (!known.length) return '';
  const near = keys.map((k) => [k, closest(k, known)] as const).filter(([, c]) => c !== null).map(([k, c]) => (keys.length === 1 ? c : `${c} for ${k}`));
  return ` (${near.length ? `did you mean ${near.join(', ')}? ` : ''}${at.length ? at.map(String).join('.') : 'the top level'} takes ${known.join(', ')})`;
}

/** The keys of the object the schema has at `path` ([] where there is none). */
function keysAt(path: readonly PropertyKey[]): string[] {
  const unwrap = (t: z.core.$ZodType | undefined): z.core.$ZodType | undefined => {
    let d = t?._zod.def as { innerType?: z.core.$ZodType; element?: z.core.$ZodType } | undefined;
    while (t && d?.innerType) { t = d.innerType; d = t._zod.def as typeof d; }
    return t;
  };
  let node = unwrap(RunConfigSchema);
  for (const k of path) {
    if (node instanceof z.ZodArray) node = unwrap(node.element);
    else if (node instanceof z.ZodObject) node = unwrap(node.shape[String(k)] as z.core.$ZodType | undefined);
    else return [];
  }
  return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
}

/** The known key nearest to `k` (case aside, or at most a third of its letters off), if any. */
function closest(k: string, known: readonly string[]): string | null {
  const dist = (a: string, b: string): number => {
    const d = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let prev = d[0];
      d[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const cur = d[j];
        d[j] = Math.min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = cur;
      }
    }
    return d[b.length];
  };
  const scored = known.map((c) => ({ c, d: c.toLowerCase() === k.toLowerCase() ? 0 : dist(k, c) })).sort((x, y) => x.d - y.d);
  return scored.length && scored[0].d <= Math.max(1, Math.floor(k.length / 3)) ? scored[0].c : null;
}

/** Apply `--set a.b.c=value` overrides (values parsed as JSON when they parse, else strings). */
export function applyOverrides(base: Record<string, unknown>, overrides: string[]): Record<string, unknown> {
  const out = JSON.parse(JSON.stringify(base)) as Record<string, unknown>;
  for (const o of overrides) {
    const eq = o.indexOf('=');
    if (eq <= 0) throw new ConfigError([{ path: o, message: 'override must look like key.path=value' }], '--set');
    const keys = o.slice(0, eq).split('.');
    const raw = o.slice(eq + 1);
    let value: unknown;
    try { value = JSON.parse(raw); } catch { value = raw; }
    let node = out as Record<string, unknown>;
    for (const k of keys.slice(0, -1)) {
      if (typeof node[k] !== 'object' || node[k] === null) node[k] = {};
      node = node[k] as Record<string, unknown>;
    }
    node[keys[keys.length - 1]] = value;
  }
  return out;
}
