"""The engine's HTTP surface: tokenize, finish reasons, abort, batching, metrics."""
import threading

from conftest import wait_for


def complete(engine, **body):
    body.setdefault("prompt", "Fix the off-by-one in utils.py")
    return engine.post("/v1/completions", body)


def test_tokenize_detokenize_round_trip(engine_v0):
    text = "patch: x = y + 1  # ✓ ünïcødé"
    t = engine_v0.post("/tokenize", {"prompt": text})
    assert t["count"] == len(text.encode()) and t["tokens"] == list(text.encode())
    assert engine_v0.post("/detokenize", {"tokens": t["tokens"]})["prompt"] == text
    h = engine_v0.get("/health")
    assert h["ok"] is True and h["max_model_len"] == 1024
    tok = h["tokenizer"]  # the byte tokenizer's describe(), keys clients read kept as before
    assert (tok["kind"], tok["name"], tok["vocab_size"], tok["eos_token_id"]) == ("byte", "byte", 259, 256)
    assert tok["special_token_ids"] == [257, 258] and tok["stop_token_ids"] == [256]
    assert tok["max_model_len"] == 1024


def test_completion_shape_and_length_finish(engine_v0):
    r = complete(engine_v0, max_tokens=7, ignore_eos=True, seed=3, n=2, return_token_ids=True)
    assert r["object"] == "text_completion" and len(r["choices"]) == 2
    for c in r["choices"]:
        assert c["finish_reason"] == "length" and c["stop_reason"] is None
        assert len(c["token_ids"]) == 7 == len(c["logprobs"]["token_logprobs"]) == len(c["weight_versions"])
        assert all(lp <= 0 for lp in c["logprobs"]["token_logprobs"])
        assert c["weight_versions"] == [0] * 7
        assert c["prompt_token_ids"] == list(b"Fix the off-by-one in utils.py")
    assert r["usage"] == {"prompt_tokens": 30, "completion_tokens": 14, "total_tokens": 44}
    assert r["choices"][0]["token_ids"] != r["choices"][1]["token_ids"]
    # same seed, same prompt, same weights: same tokens
    again = complete(engine_v0, max_tokens=7, ignore_eos=True, seed=3, n=2)
    assert [c["token_ids"] for c in again["choices"]] == [c["token_ids"] for c in r["choices"]]
    # token ids as prompt give the same result as the text
    ids = complete(engine_v0, prompt=list(b"Fix the off-by-one in utils.py"), max_tokens=7, ignore_eos=True,
                   seed=3, n=2)
    assert [c["token_ids"] for c in ids["choices"]] == [c["token_ids"] for c in r["choices"]]


def test_stop_string_finish(engine_v0):
    greedy = complete(engine_v0, max_tokens=40, temperature=0, ignore_eos=True)["choices"][0]
    text = greedy["text"]
    # a stop string taken from the middle of the greedy output (printable ASCII for safety)
    start = next(i for i in range(5, len(text) - 3) if all(32 < ord(ch) < 127 for ch in text[i:i + 2]))
    stop = text[start:start + 2]
    first = text.index(stop)
    r = complete(engine_v0, max_tokens=40, temperature=0, ignore_eos=True, stop=[stop])["choices"][0]
    assert r["finish_reason"] == "stop" and r["stop_reason"] == stop
    assert r["text"] == text[:first]
    assert r["token_ids"] == greedy["token_ids"][: len(r["token_ids"])]  # ids include the stop string's bytes


def test_eos_finish(start_server, ckpt_dir):
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "eos" / "v0")
    c = eng.post("/v1/completions", {"prompt": "anything", "max_tokens": 10})["choices"][0]
    assert c["finish_reason"] == "stop" and c["stop_reason"] is None
    assert c["token_ids"] == [256] and c["text"] == ""
    c = eng.post("/v1/completions", {"prompt": "anything", "max_tokens": 3, "ignore_eos": True})["choices"][0]
    assert c["finish_reason"] == "length" and c["token_ids"] == [256, 256, 256]


def test_abort_one_and_all(engine_v0):
    results = {}

    def run(rid):
        results[rid] = complete(engine_v0, max_tokens=1000, ignore_eos=True, request_id=rid)

    threads = [threading.Thread(target=run, args=(rid,)) for rid in ("keep-a", "kill-b")]
    for t in threads:
        t.start()
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 2)
    assert engine_v0.post("/abort_requests", {"request_ids": ["kill-b"]})["aborted"] == 1
    threads[1].join(timeout=30)
    b = results["kill-b"]["choices"][0]
    assert b["finish_reason"] == "abort" and 0 < len(b["token_ids"]) < 1000
    assert engine_v0.post("/abort_requests", {})["aborted"] == 1  # all
    threads[0].join(timeout=30)
    assert results["keep-a"]["choices"][0]["finish_reason"] == "abort"
    assert engine_v0.metric("vllm:num_requests_running") == 0


def test_eight_concurrent_requests_batch_and_gauges_move(engine_v0):
    """max-batch is 4: with 8 requests, 4 run and 4 wait, then all finish."""
    engine_v0.post("/pause")
    results = {}

    def run(i):
        results[i] = complete(engine_v0, prompt=f"task {i}: fix it", max_tokens=60 + i, ignore_eos=True, seed=i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: engine_v0.metric("vllm:num_requests_waiting") == 8)
        assert engine_v0.metric("vllm:num_requests_running") == 0
    finally:
        engine_v0.post("/resume")
    seen = set()

    def observe():
        seen.add((engine_v0.metric("vllm:num_requests_running"), engine_v0.metric("vllm:num_requests_waiting")))
        return len(results) == 8

    wait_for(observe, timeout=60, interval=0.002)
    for t in threads:
        t.join()
    assert any(r == 4 for r, _ in seen), seen  # the batch filled up
    assert (4, 4) in seen or any(w > 0 and r > 0 for r, w in seen), seen
    for i, r in results.items():
        c = r["choices"][0]
        assert c["finish_reason"] == "length" and len(c["token_ids"]) == 60 + i
    assert engine_v0.metric("vllm:num_requests_running") == 0
    assert engine_v0.metric("vllm:num_requests_waiting") == 0
    assert engine_v0.metric("floe_engine_requests_total") >= 8


def test_bad_requests_are_400(engine_v0):
    err = engine_v0.post("/v1/completions", {"prompt": [1, 2, 999]}, expect=400)
    assert "outside the vocabulary" in err["error"]["message"]
    engine_v0.post("/v1/completions", {"max_tokens": 3}, expect=400)
    engine_v0.post("/update_weights", {"path": "/nonexistent/v9"}, expect=400)
