import { EngineHttpError, reportedContextLength, type EngineKind, type LabelSpan, type ProbeVerdict, type UpdateMode } from './adapter.js';
import { VllmAdapter, verdictOf, type CompletionChoice } from './vllm.js';

/** floe's reference engine (engine/floe_engine/inference_server.py): vLLM's completion
 *  surface (the same /v1/completions body and choice), with floe's extensions: it swaps
 *  weights in place under running requests (POST /update_weights {path, version}), rebuilds
 *  their caches itself, and reports the version that produced each id (`weight_versions`).
 *  Its own routes: /pause and /resume (no mode: a pause stops scheduling and keeps requests
 *  queued), /abort_requests {request_ids?}, /reset_prefix_cache → {ok}, /health → JSON. */
export class ReferenceAdapter extends VllmAdapter {
  override readonly kind: EngineKind = 'reference';
  override readonly inPlaceUpdates: boolean = true;

  /** The reference engine tracks a request by the request_id it was sent. */
  protected override engineRequestId(requestId: string): string {
    return requestId;
  }

  /** `weight_versions`: one integer per generated id. */
  protected override versionsOf(choice: CompletionChoice, n: number): number[] | null {
    const v = choice.weight_versions;
    return Array.isArray(v) && v.length === n && v.every((x) => typeof x === 'number' && Number.isInteger(x)) ? (v as number[]) : null;
  }

  /** Its weight_versions are per-token integers, not labelled spans. */
  protected override labelsOf(): string[] | null {
    return null;
  }

  /** No labelled spans: its per-token versions are exact already. */
  protected override spansOf(): LabelSpan[] | null {
    return null;
  }

  /** GET /health → max_model_len (the policy's context). */
  override async contextLength(): Promise<number | null> {
    return reportedContextLength(this.endpoint, async () => {
      const h = await this.json<{ max_model_len?: unknown } | null>('/health', { timeoutMs: 10_000 });
      return typeof h?.max_model_len === 'number' && Number.isInteger(h.max_model_len) && h.max_model_len > 0 ? h.max_model_len : null;
    });
  }

  /** A paused reference engine queues new requests; it never refuses them for a pause. */
  protected override isPausedRejection(): boolean {
    return false;
  }

  /** POST /update_weights {path, version[, keep_cache: true]} → {ok, version, load_ms, rebuilt_sequences, timings}.
   *  keep_cache (recipe.cacheRebuild off): running sequences keep the K/V the old weights
   *  computed and the prefix cache keeps its entries. */
  override async loadWeights(folder: string, version: number, opts?: { keepCache?: boolean; verified?: boolean }): Promise<{ loadMs: number }> {
    const started = Date.now();
    const body = opts?.keepCache === true ? { path: folder, version, keep_cache: true } : { path: folder, version };
    const r = await this.json<{ ok?: boolean; version?: number; load_ms?: number } | null>('/update_weights', { body, timeoutMs: 30 * 60_000 });
    if (r?.ok !== true || r.version !== version) {
      throw new EngineHttpError(this.endpoint.id, 200, '/update_weights', `asked to load ${folder} as version ${version}; the engine answered ${JSON.stringify(r).slice(0, 200)}`);
    }
    return { loadMs: typeof r.load_ms === 'number' ? r.load_ms : Date.now() - started };
  }

  /** The adapter's pause aborts what is in flight: the reference engine's /pause only stops
   *  scheduling (requests stay queued), so /abort_requests {} (all) follows it; the aborted
   *  requests answer finish_reason "abort" with the ids generated so far. Mode 'keep': the pause
   *  alone (the engine rebuilds kept requests' caches when it loads). */
  override async pause(mode: UpdateMode = 'abort'): Promise<void> {
    await this.http('/pause', { body: {}, timeoutMs: 120_000 });
    if (mode === 'abort') await this.http('/abort_requests', { body: {}, timeoutMs: 60_000 });
  }

  override async resume(): Promise<void> {
    await this.http('/resume', { body: {}, timeoutMs: 60_000 });
  }

  /** An empty list aborts nothing (the engine reads an absent list as all). */
  override async abort(requestIds?: string[]): Promise<void> {
    if (requestIds && requestIds.length === 0) return;
    await this.http('/abort_requests', { body: requestIds ? { request_ids: requestIds } : {}, timeoutMs: 60_000 });
  }

  protected override async resetPrefixCacheOnce(): Promise<boolean> {
    const r = await this.json<{ ok?: boolean } | null>('/reset_prefix_cache', { body: {}, timeoutMs: 60_000 });
    return r?.ok === true;
  }

  /** GET /health says `paused`. */
  protected override async isPaused(): Promise<boolean | null> {
    const r = await this.json<{ paused?: boolean } | null>('/health', { timeoutMs: 10_000 });
    return typeof r?.paused === 'boolean' ? r.paused : null;
  }

  /** Without loading anything: POST /update_weights with no path is a 400 naming the field,
   *  which shows the route is there. */
  protected override async probeLoadWeights(): Promise<ProbeVerdict> {
    try {
      await this.http('/update_weights', { body: {}, timeoutMs: 30_000 });
      return { capability: 'load_weights', ok: false, detail: 'POST /update_weights with no path answered 2xx (expected a 400 naming the missing path)' };
    } catch (err) {
      if (err instanceof EngineHttpError && err.status === 400 && /path/.test(err.message)) {
        return { capability: 'load_weights', ok: true, detail: 'POST /update_weights is there (a body without a path is a 400 naming it)' };
      }
      return verdictOf('load_weights', err);
    }
  }

  protected override weightVersionsVerdict(choice: CompletionChoice | undefined, n: number): ProbeVerdict {
    const v = choice ? this.versionsOf(choice, n) : null;
    // not optional here: an engine that updates in place must say which version made each id
    if (v) return { capability: 'weight_versions', ok: true, detail: `weight_versions: one per id (${v.join(', ')})` };
    return { capability: 'weight_versions', ok: false, detail: `no per-token weight_versions in the choice (${JSON.stringify(choice?.weight_versions ?? null).slice(0, 80)})`, fix: 'set engines.endpoints[].kind to the server it is (vllm | sglang): floe stamps versions itself for those' };
  }
}
