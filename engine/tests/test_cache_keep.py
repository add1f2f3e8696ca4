"""recipe.cacheRebuild off: /update_weights {keep_cache: true} swaps the weights and keeps the
caches. A request spanning such an update goes on from the K/V its old-weight tokens left
(nothing is rebuilt), so its later tokens differ from what the same request gets when the
caches are rebuilt (tests/test_weight_updates.py); the default still rebuilds."""
from conftest import span_update

PROMPT = "Issue: tests fail in parser.py when the input is empty. Fix the bug.\n"


def test_keep_cache_swaps_weights_without_rebuilding(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0")
    body = {"prompt": PROMPT, "max_tokens": 400, "seed": 5, "ignore_eos": True}
    r, kept = span_update(eng, ckpt_dir, body, keep_cache=True)
    assert r["ok"] and r["version"] == 1 and r["kept_cache"] is True and r["rebuilt_sequences"] == 0
    assert eng.get("/health")["version"] == 1
    versions = kept["weight_versions"]
    assert len(versions) == 400 and sorted(set(versions)) == [0, 1]
    k = versions.index(1)
    assert versions == [0] * k + [1] * (400 - k)
    # an update without keep_cache still rebuilds the running sequence
    eng2 = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0")
    r2, _ = span_update(eng2, ckpt_dir, body)
    assert r2["rebuilt_sequences"] == 1 and r2["kept_cache"] is False


def test_keep_cache_keeps_the_prefix_cache(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0", "--seed", 0)
    body = {"prompt": PROMPT, "max_tokens": 8, "seed": 11, "ignore_eos": True}
    eng.post("/v1/completions", body)  # fills the prefix cache under v0
    kept = eng.post("/update_weights", {"path": str(ckpt_dir / "pub" / "v1"), "version": 1, "keep_cache": True})
    assert kept["kept_cache"] is True
    assert eng.post("/reset_prefix_cache")["dropped_entries"] >= 1  # the v0 entry survived the load
    eng.post("/update_weights", {"path": str(ckpt_dir / "pub" / "v2"), "version": 2})
    assert eng.post("/reset_prefix_cache")["dropped_entries"] == 0  # a default load clears it
