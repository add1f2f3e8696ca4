import { z } from 'zod';
import { ENGINE_KINDS, LOSS_AGGS, RATIO_MODES, UPDATE_MODES, WEIGHT_TRANSFERS } from './contracts.js';
import { SYSTEM_PROMPT } from './harness.js';
import { redactUrlsIn, urlCredentialsProblem } from './exposure.js';
import { ROUTER_POLICIES } from './router.js';

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();
const fraction = z.number().min(0).max(1);
/** A server URL without user:secret@ (core/exposure.ts): the config is stored in Postgres and
 *  in Temporal's history, and floe's HTTP client would refuse the URL anyway. */
const withoutCredentials = (u: string, ctx: z.RefinementCtx) => {
  const problem = urlCredentialsProblem(u);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
};

// Every field and section carries its meaning as `.meta({ description })`, the metadata zod's
// registry and z.toJSONSchema read; core/configDoc.ts renders them into docs/configuration.md
// and refuses a field without one.

export const EngineSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'lower-case letters, digits, - and _').meta({
    description: 'Name of the engine in the router, the metrics and the audit history (lower-case letters, digits, - and _); one per engine.',
  }),
  url: z.url().superRefine(withoutCredentials).meta({
    description: 'Base URL of the inference server, as the control workers reach it. No user:password@ in it: floe sends no credentials, and the config is kept in Postgres and in Temporal\'s history.',
  }),
  node: z.string().min(1).default('local').meta({
    description: 'The node this engine runs on: its gpu worker (task queue floe-gpu@NODE, started by `floe worker gpu --node NODE`) loads each new weight version into the engine.',
  }),
  kind: z.enum(ENGINE_KINDS).default('reference').meta({
    description: 'The server at `url`: floe\'s reference engine, or an unmodified vLLM or SGLang server (docs/guides/engines.md has their flags; `floe engine probe <url>` checks one).',
  }),
}).meta({ description: 'An inference server the run generates with.' });

export const RunConfigSchema = z.strictObject({
  name: z.string().min(1).max(100).default('stress-test').meta({
    description: 'Name of the run. The run id is its slug (lower-case, at most 40 characters) plus the start time and 4 random characters; reports and `floe run list` show it.',
  }),
  seed: nonNegInt.default(0).meta({
    description: 'Base of every sampling seed: each generation request\'s seed is derived from it and the group, attempt and turn, and evaluations derive theirs the same way. Also seeds the warm start and the engines and trainer that `floe demo` starts.',
  }),
  tasks: z.strictObject({
    source: z.string().min(1).default('toy').meta({
      description: '\'toy\' = the suite under tasks/toy, or a path to a JSONL file of SWE-bench-style rows (docs/guides/tasks.md).',
    }),
    layout: z.enum(['auto', 'swe-bench', 'swe-gym', 'swe-rebench', 'r2e-gym']).default('auto').meta({
      description: 'The published layout of the rows, which names each row\'s image and picks its harness: \'auto\' tells R2E-Gym and SWE-rebench rows by their columns and reads the rest as SWE-bench; SWE-Gym rows look like SWE-bench\'s, so name them. `floe tasks check` shows the layout of each row.',
    }),
    include: z.array(z.string()).default([]).meta({
      description: 'Train only on these instance ids (empty = all); an id the source does not hold refuses the run. Must not share an id with evaluation.heldOut.',
    }),
    limit: nonNegInt.default(0).meta({
      description: 'Use at most this many tasks (0 = all): the first ones of the source, after `include`, `excludeLooseTests` and the held-out tasks are taken out.',
    }),
    excludeLooseTests: z.boolean().default(true).meta({
      description: 'Leave out tasks whose tests are known to accept a wrong patch (marked by the data audit or in the row\'s metadata).',
    }),
    onBadRow: z.enum(['skip', 'fail']).default('fail').meta({
      description: 'A row that cannot be read as a task: \'fail\' refuses the run, naming every bad row; \'skip\' leaves such rows out.',
    }),
    audit: z.strictObject({
      id: z.string().min(1).meta({ description: 'The audit\'s id, as `floe audit` prints it.' }),
      use: z.enum(['original', 'curated', 'strengthened']).meta({
        description: '\'original\': the tasks as they are; \'curated\': only the tasks that passed the audit; \'strengthened\': those plus the tasks that accepted a wrong patch, with the audit\'s stronger tests.',
      }),
    }).optional().meta({
      description: 'Train on a data audit\'s version of the dataset (`floe audit`, table task_audits). Absent: no audit.',
    }),
  }).prefault({}).meta({ description: 'The task pool: where the tasks come from and which of them the run trains on.' }),
  policy: z.strictObject({
    model: z.string().min(1).default('tiny').meta({
      description: '\'tiny\' (the byte-level policy; `tiny:k=v,…` sets its shape), or `hf:<config.json | model folder | model_type:k=v,…>` for a Hugging Face model; `hf:model:NAME` = FLOE_HOME/models/NAME, a checkpoint `floe models` built or imported from a GGUF file (docs/guides/models.md).',
    }),
    tokenizer: z.string().min(1).default('byte').meta({
      description: 'The model\'s tokenizer: \'byte\' (required by, and only for, the tiny policy), a Hugging Face tokenizer folder, builtin:NAME (FLOE_HOME/tokenizers/NAME, built offline by `floe up`: builtin:qwen3.6), or model:NAME (the tokenizer inside FLOE_HOME/models/NAME, from `floe models`).',
    }),
    chatTemplate: z.string().default('').meta({
      description: 'A .jinja chat template (path from the repository root); \'\' = the tokenizer folder\'s own (the byte tokenizer has none: configs/templates/plain.jinja). Shared by rollouts and the warm start.',
    }),
    contextTokens: positiveInt.default(1024).meta({
      description: 'Longest token sequence the model takes: a whole rollout (system prompt, issue, every turn and observation). The warm start leaves out gold trajectories longer than this; keep rollout.maxTotalTokens within it.',
    }),
    checkpoint: z.string().default('').meta({
      description: 'Starting weights (a checkpoint folder) of the engines and trainer floe starts itself (`floe demo`, `floe stress`, `floe eval`); empty = the SFT warm start on the pool\'s gold trajectories (built by `floe demo`, cached by content). Servers you run yourself load their own weights.',
    }),
    warmStartSteps: positiveInt.max(100000).default(300).meta({
      description: 'Optimizer steps of the SFT warm start (used only when `checkpoint` is empty). Fewer steps give a weaker starting policy.',
    }),
    warmStartLr: z.number().positive().max(1).default(1e-3).meta({
      description: 'Learning rate of the SFT warm start (used only when `checkpoint` is empty).',
    }),
    temperature: z.number().positive().max(5).default(1).meta({
      description: 'Sampling temperature of every generation request (training rollouts and evaluations).',
    }),
    topP: z.number().gt(0).max(1).default(1).meta({
      description: 'Nucleus sampling: each token is drawn from the most likely tokens whose probabilities add up to this (1 = from all).',
    }),
    maxTokensPerTurn: positiveInt.max(32768).default(160).meta({
      description: 'Most tokens the model generates in one turn (each request\'s max new tokens). `floe demo` also leaves out tasks whose gold replies do not fit it.',
    }),
  }).prefault({}).meta({ description: 'The model being trained: its weights, tokenizer, chat template and sampling.' }),
  engines: z.strictObject({
    count: nonNegInt.max(16).default(2).meta({
      description: 'Reference engines that `floe demo`, `floe stress` and `floe eval` start on this machine, and `floe run start` when neither `endpoints` nor `trainer.url` is given (it then hosts the run in its own process, as `floe demo` does); 0 when `endpoints` lists servers of your own.',
    }),
    endpoints: z.array(EngineSchema).default([]).meta({
      description: 'The inference servers the run generates with. Empty: `floe demo` (and `floe run start`, when `trainer.url` is empty too) fills it with the embedded engines it starts; `floe run start` with a `trainer.url` needs at least one.',
    }),
    generateTimeoutSeconds: positiveInt.max(480).default(300).meta({
      description: 'How long floe waits for one generation request before it stops waiting, aborts it and tries another engine. A request that times out on a server that still answers its health route is a slow request on a loaded server, not a dead engine: the engine is not resynced. At most 480 (the generation activity itself ends after 10 minutes).',
    }),
    updateMode: z.enum(UPDATE_MODES).default('abort').meta({
      description: "What a weight update does to the requests a vLLM or SGLang server is generating (docs/guides/engines.md \"Requests in flight during an update\"). 'abort' = abort and resubmit: the server is paused with every request aborted (each answers the ids it made, stamped with the old version), loaded, flushed and resumed, and floe sends each aborted request again from its exact token prefix. 'keep' = the server keeps them: vLLM pauses in mode keep and, after the load, preempts the running requests so their K/V is recomputed under the new weights (/reset_prefix_cache?reset_running_requests=true); SGLang pauses in mode retract (requests go back to its waiting queue, K/V freed and recomputed after continue). A turn that spans the update then holds ids of both versions, each id stamped from the server's weight-version spans. The reference engine always swaps weights under running requests and rebuilds their caches itself, whatever this says.",
    }),
    weightTransfer: z.enum(WEIGHT_TRANSFERS).default('disk').meta({
      description: "How each new version reaches vLLM and SGLang servers (docs/guides/engines.md \"Weights over the servers' own transfer routes\"). 'disk' = every server loads the published version folder (vLLM through the worker extension's reload_weights, SGLang /update_weights_from_disk). 'broadcast' = the trainer broadcasts the tensors over a process group it hosts (NCCL between GPUs, gloo on CPU) into the servers' own routes: vLLM /init_weight_transfer_engine, /start_weight_update, /update_weights, /finish_weight_update (launched with --weight-transfer-config); SGLang /init_weights_update_group, /begin_weight_update, /update_weights_from_distributed, /end_weight_update. The published folder is still written: a restarted server loads it. The reference engine always loads from disk. Needs the one-process trainer.",
    }),
    router: z.enum(ROUTER_POLICIES).default('least-loaded').meta({
      description: 'Placement of generation requests (core/router.ts): \'least-loaded\' = the healthy engine with the least outstanding work, per request; \'sticky\' = a rollout stays on one engine, chosen by its group for prefix-cache reuse; \'round-robin\' = engines in turn, blind to load; \'cache-aware\' = a rollout\'s next turn goes back to the engine that holds its conversation as a cached prefix unless that engine carries more than core/router.ts CACHE_SLACK requests above the least loaded one, then to the least loaded. The placement layer of the recipe.',
    }),
  }).prefault({}).meta({ description: 'The inference engines: how many floe starts, which servers to use, and how requests are placed on them.' }),
  trainer: z.strictObject({
    url: z.string().superRefine(withoutCredentials).default('').meta({
      description: 'Base URL of the trainer server (python -m floe_engine.trainer_server), as the gpu worker on `node` reaches it (a loopback address works there). \'\' = none: `floe demo` starts one, as does `floe run start` when `engines.endpoints` is empty too (otherwise it refuses the run). No user:password@ in it.',
    }),
    node: z.string().min(1).default('local').meta({
      description: 'The node the trainer runs on: its gpu worker (task queue floe-gpu@NODE, `floe worker gpu --node NODE`) sends each weight update to the trainer.',
    }),
    lr: z.number().positive().max(1).default(3e-4).meta({
      description: 'Learning rate of AdamW at the first update; lrSchedule sets it for the later ones. `floe demo` also starts its trainer with it.',
    }),
    lrSchedule: z.enum(['constant', 'linear', 'cosine']).default('constant').meta({
      description: 'The lr over the run (core/lrSchedule.ts): constant, or decaying from `lr` at the first update to `lr × lrFinal` at the last (training.updates), linearly or on a half cosine.',
    }),
    lrFinal: fraction.default(0.1).meta({
      description: 'The lr at the last update, as a fraction of `lr` (linear and cosine schedules only).',
    }),
    weightDecay: z.number().nonnegative().default(0).meta({
      description: 'AdamW\'s decoupled weight decay, applied at every optimizer step (each weight shrinks by lr × weightDecay of itself); 0 = none.',
    }),
    ratioMode: z.enum(RATIO_MODES).default('clip').meta({
      description: 'How each token\'s importance ratio (its probability under the trainer\'s weights over its probability when it was sampled) enters the loss: \'clip\' = the PPO-style clipped surrogate, the ratio kept within [1 − clipLow, 1 + clipHigh]; \'truncate\' = the policy gradient weighted by the ratio capped at truncateCap (clipLow and clipHigh unused).',
    }),
    clipLow: fraction.default(0.2).meta({
      description: 'How far below 1 the importance ratio may go before it is clipped: the lower bound is 1 − clipLow (ratioMode \'clip\' only).',
    }),
    clipHigh: z.number().min(0).max(10).default(0.28).meta({
      description: 'How far above 1 the importance ratio may go before it is clipped: the upper bound is 1 + clipHigh (ratioMode \'clip\' only). With clipHigh above clipLow (asymmetric clipping) a token\'s probability may rise further in one update than it may fall.',
    }),
    truncateCap: z.number().positive().default(2.0).meta({
      description: 'The cap of the importance weight when ratioMode is \'truncate\' (ignored under \'clip\').',
    }),
    lossAgg: z.enum(LOSS_AGGS).default('token-mean').meta({
      description: 'How token losses become the loss of an optimizer step: \'token-mean\' = the mean over every trained token of the minibatch (a long rollout weighs more); \'seq-mean-token-mean\' = each rollout\'s mean over its own tokens, then the mean over rollouts (every rollout weighs the same).',
    }),
    advantage: z.enum(['group', 'group-std', 'reward']).default('group-std').meta({
      description: 'The advantage estimator (core/advantages.ts): \'group\' = reward − group mean; \'group-std\' = that ÷ the group\'s standard deviation; \'reward\' = the reward itself (learn only from successes: with 0/1 rewards, failed attempts get no gradient). Every token of a rollout shares its advantage.',
    }),
    negativeScale: fraction.default(1).meta({
      description: 'Negative advantages are multiplied by this (0 = failed attempts push nothing down).',
    }),
    epochs: positiveInt.max(16).default(1).meta({
      description: 'Passes over each update\'s batch.',
    }),
    minibatches: positiveInt.max(64).default(1).meta({
      description: 'Optimizer steps per pass: the batch is split into this many minibatches of whole groups (at most one step per group). An update takes epochs × minibatches steps.',
    }),
    gradClip: z.number().positive().default(1.0).meta({
      description: 'Global gradient-norm clip: before each optimizer step, gradients whose combined L2 norm exceeds this are scaled down to it.',
    }),
    microBatchTokens: positiveInt.default(16384).meta({
      description: 'Token budget of a micro-batch: the samples of each optimizer step are packed into micro-batches of about this many tokens, run one after another with gradients accumulated (on the sharded trainer with packing, one packed sequence each). Bounds the trainer\'s memory; the gradient does not depend on it.',
    }),
  }).prefault({}).meta({ description: 'The trainer, and how each weight update trains. The settings it applies at a step have their one default here: the Python trainer requires them in every step and has none of its own. The advantages are computed by floe (core/advantages.ts) and sent with the batch.' }),
  rollout: z.strictObject({
    systemPrompt: z.string().min(1).default(SYSTEM_PROMPT).meta({
      description: 'The system message of every conversation (the issue is the user message). Default: SYSTEM_PROMPT in core/harness.ts, which spells out the tool-call format.',
    }),
    groupSize: positiveInt.max(64).default(8).meta({
      description: 'G: attempts per task in a group (advantages are relative within a group).',
    }),
    maxInFlight: positiveInt.max(4096).default(16).meta({
      description: 'Rollouts in flight at once (also the concurrency of evaluations). Groups start whole, so a training run refuses a value below groupSize at start.',
    }),
    maxTurns: positiveInt.max(200).default(4).meta({
      description: 'Model turns per rollout at most; the rollout then ends as out of budget (what that earns: recipe.rewardGate and recipe.explicitSubmit).',
    }),
    maxTotalTokens: positiveInt.default(2048).meta({
      description: 'Conversation length at most, in tokens (prompt and completion of the latest turn); checked before and after each turn, a longer one ends as out of budget. Keep it within policy.contextTokens.',
    }),
    maxWallSeconds: positiveInt.default(120).meta({
      description: 'Wall-clock seconds per rollout, from its start; checked before each turn, past it the rollout ends as out of budget. Grading is not counted.',
    }),
    maxObservationChars: positiveInt.default(400).meta({
      description: 'Observation text shown to the model is cut to this many characters (its head and tail kept).',
    }),
  }).prefault({}).meta({ description: 'One rollout: the conversation, its group and its budgets.' }),
  training: z.strictObject({
    groupsPerUpdate: positiveInt.default(4).meta({
      description: 'Groups per weight update: each update trains on the oldest this-many finished groups (groupsPerUpdate × rollout.groupSize rollouts, fewer where stale ones were dropped).',
    }),
    updates: positiveInt.max(100000).default(60).meta({
      description: 'Updates to run (the stop condition of the main job, and the length of trainer.lrSchedule).',
    }),
    maxOffPolicySteps: nonNegInt.default(2).meta({
      description: 'A rollout is stale, and discarded, when the policy advanced more than this many versions since its first token (0 = on-policy only); a group left with fewer than two rollouts is dropped whole.',
    }),
  }).prefault({}).meta({ description: 'The training loop: how many updates, how big each is, and how stale a rollout may be.' }),
  evaluation: z.strictObject({
    attempts: positiveInt.max(64).default(4).meta({
      description: 'k: attempts per task of every evaluation, scored pass@1 and pass@k.',
    }),
    atStart: z.boolean().default(false).meta({
      description: 'Evaluate before the first rollout of training, with the starting weights.',
    }),
    atEnd: z.boolean().default(false).meta({
      description: 'Evaluate after the last update landed, with the final weights.',
    }),
    poolFromStart: z.boolean().default(false).meta({
      description: 'Train only on the tasks the starting policy solves at least once in `attempts` (the published stress-pool rule; needs atStart).',
    }),
    every: nonNegInt.default(0).meta({
      description: 'Every this many updates (0: never), an evaluation inside the run: the `heldOut` tasks (label \'periodic\'), and the tasks eviction has retired so far (label \'retired\': the forgetting check). The loop starts no update meanwhile.',
    }),
    heldOut: z.array(z.string().min(1)).default([]).meta({
      description: 'Task ids (from tasks.source) training never sees, scored by the periodic evaluation: needs `every` > 0, and none may be in tasks.include.',
    }),
  }).prefault({}).meta({
    description: 'Frozen-weight evaluations of the pool (workflows/evaluation.ts; table evaluations): `attempts` (k) tries per task with the engines\' current weights and no update meanwhile, scored pass@1 and pass@k.',
  }),
  eviction: z.strictObject({
    enabled: z.boolean().default(true).meta({
      description: 'Retire tasks by the rules below (the eviction layer of the recipe); false: every task stays in the pool.',
    }),
    masteredK: positiveInt.default(16).meta({
      description: 'Retire a task as mastered when all of its last masteredK training attempts were solved.',
    }),
    hopelessM: positiveInt.default(32).meta({
      description: 'Retire a task as hopeless when none of its last hopelessM training attempts was solved.',
    }),
    recheckEvery: positiveInt.default(10).meta({
      description: 'Re-score a retired task every this many updates with the current weights (with recipe.recheck on).',
    }),
    recheckAttempts: positiveInt.default(4).meta({
      description: 'Attempts per task in each recheck.',
    }),
    reviveBelow: fraction.default(0.75).meta({
      description: 'Revive a mastered task when its recheck success rate falls below this (a hopeless one is revived when any recheck attempt succeeds).',
    }),
  }).prefault({}).meta({
    description: 'Retiring tasks that no longer teach (solved every time, or never), so the budget goes where it still does; rechecks revive those that regress. At least one task always stays active.',
  }),
  recipe: z.strictObject({
    rewardGate: z.boolean().default(true).meta({
      description: 'true: a malformed or duplicate turn, or an exhausted budget, ends the rollout with reward 0 and a reason. false (hint-and-continue): such a turn gets an error observation, counts against rollout.maxTurns, and the rollout goes on; when the budget runs out the final state of the repository is graded (its diff extracted, as SWE-agent / OpenHands-style harnesses grade whatever the repository holds).',
    }),
    rawFormatCheck: z.boolean().default(true).meta({
      description: 'true: core/toolFormat.ts checks the raw output (ids → text, before any parser) and only a turn it accepts runs. false: a Hermes-style parser (core/hermesParser.ts, as vLLM\'s, SGLang\'s and verl\'s) decides what runs: every `<tool_call>` whose body is standard JSON runs, text around it is ignored, a cut-off call that parses is accepted. The raw verdict is recorded for every turn either way (turns.format_ok).',
    }),
    explicitSubmit: z.boolean().default(true).meta({
      description: 'true: only a `submit` call reaches grading (a budget running out earns 0 under the gate). false: the rollout also ends and is graded when the model answers without a tool call or the budget runs out: the repository\'s final state is graded, as peer harnesses do.',
    }),
    cacheRebuild: z.boolean().default(true).meta({
      description: 'true: after loading new weights every engine rebuilds its caches (prefix/KV cache reset; the reference engine recomputes running sequences under the new weights). false: the engine loads the weights and keeps its caches (K/V computed by the old weights).',
    }),
    recheck: z.boolean().default(true).meta({
      description: 'true: retired tasks are re-scored every eviction.recheckEvery updates and revived if they regress. false: retired tasks stay retired.',
    }),
  }).prefault({}).meta({
    description: 'The recipe\'s layers (docs/design.md, "The recipe"), each a switch, all on by default. A layer switched off behaves as the public harnesses do, with no extra tuning. Layers switched elsewhere: placement = engines.router, the staleness bound = training.maxOffPolicySteps, the advantage estimator = trainer.advantage, eviction = eviction.enabled. Presets for the published ablation (`floe stress --layers`): core/recipeLayers.ts.',
  }),
  sandbox: z.strictObject({
    cpus: z.number().positive().max(64).default(1).meta({
      description: 'CPU cores of each sandbox (a CPU quota: 0.5 = half a core).',
    }),
    memoryMb: positiveInt.min(32).default(256).meta({
      description: 'Memory of the sandbox\'s processes, in MiB. The container\'s limit adds the sizes of its tmpfs mounts (diskMb and scratch) on top, so a full disk leaves the processes their memory; there is no swap.',
    }),
    pidsLimit: positiveInt.min(8).default(64).meta({
      description: 'Most processes and threads alive in a sandbox at once; a fork beyond it fails.',
    }),
    commandTimeoutSeconds: positiveInt.max(3600).default(20).meta({
      description: 'Wall-clock limit of one agent command, in seconds; a command still running is killed and the observation says so.',
    }),
    maxOutputBytes: positiveInt.default(64 * 1024).meta({
      description: 'Output kept per command (stdout and stderr together), in bytes; the rest is dropped and the result marked truncated, and a command that writes more than 8 times this (at least 1 MiB) is killed. rollout.maxObservationChars then cuts what the model sees.',
    }),
    diskMb: positiveInt.default(256).meta({
      description: 'Writable space of the agent, in MiB: the size of the tmpfs holding the repository (/work, or /testbed for image-based tasks); /tmp gets a quarter of it (16 to 256 MiB) and the root filesystem is read-only.',
    }),
    gradeTimeoutSeconds: positiveInt.default(60).meta({
      description: 'Wall-clock limit of a grading test run, in seconds (also of the data audit\'s test runs); a run that exceeds it does not pass.',
    }),
    removeHistory: z.boolean().default(true).meta({
      description: 'Ablation and tests only: false keeps a task image\'s git history in the agent\'s sandbox (its future commits, the fix among them), the door the recipe locks.',
    }),
    host: z.string().min(1).default('local').meta({
      description: 'The container host: its sandbox worker (task queue floe-sandbox@HOST, `floe worker sandbox --node HOST`) runs every sandbox and grading container of the run (docs/guides/operations.md).',
    }),
  }).prefault({}).meta({ description: 'The sandbox containers in which the agent\'s commands and the grading run: their limits and their host.' }),
}).meta({
  description: 'The configuration of a training run: one schema, shared by every command that takes a run config. Defaults fit the embedded setup (one machine, tiny CPU policy, toy tasks). Validated when a run starts: an invalid field is named with its path before anything runs.',
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
