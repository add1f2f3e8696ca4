/** The recipe's layers as named presets: the published ablation (its Figure 2, "our fixes on
 *  the 160-task pool, one layer at a time") as run-config overrides, for
 *  `floe stress --layers naive,gate,raw,full`. Pure functions; docs/design.md "The ablation" has the
 *  table. Each preset sets every switch of the ladder, so the order of presets does not matter
 *  and a preset applied to any config yields that layer:
 *
 *    naive  the public recipes (the Prime-RL SWE and SkyRL Mini-SWE examples, as adapted in the
 *           published comparison): hint-and-continue, a Hermes-style parser decides what runs,
 *           no explicit submission (the final state is graded), caches kept across weight
 *           updates, each rollout pinned to one engine (sticky placement, to reuse its cache).
 *    gate   naive + gated reward: the first invalid format, duplicate call or exhausted budget
 *           ends the rollout with 0, and only an explicit submit can earn reward. The gate
 *           checks each call after the parser has read it.
 *    raw    gate + the raw-format check: the raw output is checked before any parser.
 *    full   raw + the system fixes: cache rebuild after every weight update and least-loaded
 *           placement (matched numerics is not a switch: the reference engine and trainer run
 *           the same fp32 kernels). Equal to the defaults.
 *
 *  Not part of the ladder (the published layers share them; each stays as the config says):
 *  the staleness bound (training.maxOffPolicySteps), the advantage estimator
 *  (trainer.advantage), eviction and recheck (eviction.enabled, recipe.recheck: the paper adds
 *  eviction only on the full data set, not on the stress-test pool). */

export const LAYER_NAMES = ['naive', 'gate', 'raw', 'full'] as const;
export type LayerName = (typeof LAYER_NAMES)[number];

export interface LayerOverrides {
  recipe: { rewardGate: boolean; rawFormatCheck: boolean; explicitSubmit: boolean; cacheRebuild: boolean };
  engines: { router: 'sticky' | 'least-loaded' };
}

const NAIVE: LayerOverrides = {
  recipe: { rewardGate: false, rawFormatCheck: false, explicitSubmit: false, cacheRebuild: false },
  engines: { router: 'sticky' },
};

/** The overrides of one layer (a fresh object). */
export function layerOverrides(name: LayerName): LayerOverrides {
  const o: LayerOverrides = { recipe: { ...NAIVE.recipe }, engines: { ...NAIVE.engines } };
  const rank = LAYER_NAMES.indexOf(name);
  if (rank >= 1) { o.recipe.rewardGate = true; o.recipe.explicitSubmit = true; }
  if (rank >= 2) o.recipe.rawFormatCheck = true;
  if (rank >= 3) { o.recipe.cacheRebuild = true; o.engines.router = 'least-loaded'; }
  return o;
}

export function isLayerName(s: string): s is LayerName {
  return (LAYER_NAMES as readonly string[]).includes(s);
}

/** `naive,gate,raw,full` → the layers, in the order given; an unknown or repeated name throws,
 *  naming the known ones. */
export function parseLayerList(list: string): LayerName[] {
  const names = list.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 0) throw new Error(`no layers given; name some of ${LAYER_NAMES.join(', ')}`);
  const out: LayerName[] = [];
  for (const n of names) {
    if (!isLayerName(n)) throw new Error(`unknown layer ${JSON.stringify(n)}; the layers are ${LAYER_NAMES.join(', ')}`);
    if (out.includes(n)) throw new Error(`layer ${n} is named twice`);
    out.push(n);
  }
  return out;
}

/** A raw (unparsed) run config with one layer's overrides applied; the rest is kept. Parse the
 *  result with parseRunConfig. */
export function withLayer(base: Record<string, unknown>, name: LayerName): Record<string, unknown> {
  const o = layerOverrides(name);
  const section = (k: string): Record<string, unknown> => {
    const v = base[k];
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  };
  return { ...base, recipe: { ...section('recipe'), ...o.recipe }, engines: { ...section('engines'), ...o.engines } };
}
