"""vLLM's RL routes on the reference engine: /pause?mode=abort|wait|keep, /resume, /is_paused,
/abort_requests, /reset_prefix_cache, /collective_rpc (floe_load_folder, floe_ping); and query
strings reaching the handlers that take them (httpserve)."""
import json
import threading
import urllib.request

import pytest

import floe_vllm
from conftest import wait_for
from floe_engine.httpserve import make_server

LONG = {"prompt": "task: fix the bug", "max_tokens": 1000, "ignore_eos": True, "seed": 3}


def start(engine, body, out, key):
    t = threading.Thread(target=lambda: out.__setitem__(key, engine.post("/v1/completions", body)))
    t.start()
    return t


def test_pause_resume_is_paused_shapes(engine_v0):
    assert engine_v0.get("/is_paused") == {"is_paused": False}
    r = engine_v0.post("/pause?mode=keep")
    assert r["status"] == "paused" and r["paused"] and r["mode"] == "keep"
    assert engine_v0.get("/is_paused") == {"is_paused": True}
    assert engine_v0.get("/health")["paused"] is True
    r = engine_v0.post("/resume")
    assert r["status"] == "resumed" and r["paused"] is False
    assert engine_v0.get("/is_paused") == {"is_paused": False}
    err = engine_v0.post("/pause?mode=later", expect=400)
    assert "abort, wait, keep" in err["error"]["message"]
    assert engine_v0.get("/is_paused") == {"is_paused": False}


def test_pause_without_mode_keeps_requests(engine_v0):
    """floe's default (its in-place update flow carries running requests across a pause)."""
    out = {}
    t = start(engine_v0, {**LONG, "max_tokens": 300}, out, "a")
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 1)
    r = engine_v0.post("/pause")
    assert r["mode"] == "keep" and "aborted" not in r
    assert engine_v0.metric("vllm:num_requests_running") == 1 and "a" not in out
    engine_v0.post("/resume")
    t.join(timeout=60)
    c = out["a"]["choices"][0]
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == 300


def test_pause_abort_aborts_everything_then_pauses(engine_v0):
    out = {}
    threads = [start(engine_v0, {**LONG, "seed": i}, out, i) for i in range(2)]
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 2)
    r = engine_v0.post("/pause?mode=abort")
    assert r["status"] == "paused" and r["mode"] == "abort" and r["aborted"] == 2
    for t in threads:
        t.join(timeout=30)
    for i in range(2):
        c = out[i]["choices"][0]
        assert c["finish_reason"] == "abort" and len(c["token_ids"]) < 1000
    assert engine_v0.get("/is_paused") == {"is_paused": True}
    # a request sent while paused waits, and runs after /resume
    t = start(engine_v0, {**LONG, "max_tokens": 20}, out, "later")
    wait_for(lambda: engine_v0.metric("vllm:num_requests_waiting") == 1)
    assert "later" not in out
    engine_v0.post("/resume")
    t.join(timeout=30)
    assert out["later"]["choices"][0]["finish_reason"] == "length"


def test_pause_wait_lets_inflight_finish_and_holds_new_ones(engine_v0):
    out = {}
    t = start(engine_v0, {**LONG, "max_tokens": 400}, out, "inflight")
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 1)
    paused = {}
    p = threading.Thread(target=lambda: paused.update(engine_v0.post("/pause?mode=wait")))
    p.start()
    wait_for(lambda: engine_v0.get("/is_paused")["is_paused"])  # true from the start of the drain
    t2 = start(engine_v0, {**LONG, "max_tokens": 10}, out, "new")
    p.join(timeout=60)
    t.join(timeout=60)
    assert paused["status"] == "paused" and paused["mode"] == "wait" and paused["waited_requests"] == 1
    c = out["inflight"]["choices"][0]
    assert c["finish_reason"] == "length" and len(c["token_ids"]) == 400  # not aborted
    wait_for(lambda: engine_v0.metric("vllm:num_requests_waiting") == 1)  # the new one waits for /resume
    assert "new" not in out and engine_v0.get("/is_paused") == {"is_paused": True}
    engine_v0.post("/resume")
    t2.join(timeout=30)
    assert out["new"]["choices"][0]["finish_reason"] == "length"
    # mode=wait on an engine paused with requests kept cannot drain them: refused, nothing changes
    t3 = start(engine_v0, {**LONG, "max_tokens": 200}, out, "kept")
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 1)
    engine_v0.post("/pause")
    err = engine_v0.post("/pause?mode=wait", expect=409)
    assert "already paused" in err["error"]["message"]
    engine_v0.post("/resume")
    t3.join(timeout=60)
    assert out["kept"]["choices"][0]["finish_reason"] == "length"


def test_abort_requests_and_reset_prefix_cache_answer_vllm_fields(engine_v0):
    out = {}
    t = start(engine_v0, LONG, out, "x")
    wait_for(lambda: engine_v0.metric("vllm:num_requests_running") == 1)
    r = engine_v0.post("/abort_requests", {})
    assert r == {"status": "aborted", "ok": True, "aborted": 1}
    t.join(timeout=30)
    assert engine_v0.post("/abort_requests", {"request_ids": []})["aborted"] == 0
    r = engine_v0.post("/reset_prefix_cache?reset_running_requests=false")
    assert r["success"] is True and r["ok"] is True and "dropped_entries" in r


def test_collective_rpc(engine_v0, ckpt_dir):
    r = engine_v0.post("/collective_rpc", {"method": "floe_ping"})
    assert r == {"results": [{"floe_vllm": floe_vllm.__version__, "engine": "floe-reference"}]}
    err = engine_v0.post("/collective_rpc", {"method": "floe_nope", "args": []}, expect=501)
    assert err["error"]["message"] == "Method 'floe_nope' is not implemented."
    assert err["error"]["type"] == "NotImplementedError"
    assert "method" in engine_v0.post("/collective_rpc", {}, expect=400)["error"]["message"]
    body = {"prompt": "x", "max_tokens": 3, "temperature": 0}
    try:
        r = engine_v0.post("/collective_rpc", {"method": "floe_load_folder", "args": [str(ckpt_dir / "pub" / "v1")],
                                               "timeout": 60})
        (res,) = r["results"]
        assert res["version"] == 1 and res["files"] == 1 and res["bytes"] > 0 and res["load_ms"] > 0
        assert engine_v0.post("/v1/completions", body)["choices"][0]["weight_versions"] == [1] * 3
        # the version in kwargs must match the folder's sidecar; a string is accepted (vLLM sends strings)
        engine_v0.post("/collective_rpc", {"method": "floe_load_folder", "args": [str(ckpt_dir / "pub" / "v2")],
                                           "kwargs": {"version": 7}}, expect=400)
        r = engine_v0.post("/collective_rpc", {"method": "floe_load_folder", "args": [str(ckpt_dir / "pub" / "v2")],
                                               "kwargs": {"version": "2"}})
        assert r["results"][0]["version"] == 2 and engine_v0.get("/health")["version"] == 2
        err = engine_v0.post("/collective_rpc", {"method": "floe_load_folder", "args": []}, expect=400)
        assert "folder" in err["error"]["message"]
    finally:
        engine_v0.post("/update_weights", {"path": str(ckpt_dir / "pub" / "v0")})
    assert engine_v0.get("/health")["version"] == 0


def test_query_strings_reach_routes_that_take_them():
    seen = []

    def old_style(body, headers):
        seen.append(("old", body))
        return {"ok": True}

    def with_query(body, headers, query=None):
        seen.append(("new", query))
        return {"query": query}

    httpd = make_server("127.0.0.1", 0, {("POST", "/a"): old_style, ("GET", "/b"): with_query})
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        req = urllib.request.Request(url + "/a?mode=x", data=b'{"k": 1}', method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read()) == {"ok": True}
        with urllib.request.urlopen(url + "/b/?mode=abort&clear_cache=false&mode=wait&e=", timeout=10) as r:
            assert json.loads(r.read()) == {"query": {"mode": "wait", "clear_cache": "false", "e": ""}}
        with urllib.request.urlopen(url + "/b", timeout=10) as r:
            assert json.loads(r.read()) == {"query": {}}
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert seen[0] == ("old", {"k": 1})


@pytest.mark.parametrize("path", ["/health?x=1", "/v1/models?"])
def test_existing_routes_ignore_a_query(engine_v0, path):
    assert engine_v0.get(path)


def test_unknown_route_reads_its_body_so_the_connection_stays_usable(engine_v0):
    """A 404 to a POST with a body, then another request on the same kept-alive connection:
    the unread body used to be parsed as the next request line."""
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(engine_v0.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request("POST", "/collective_rpc_missing", body=json.dumps({"method": "x"}), headers={"content-type": "application/json"})
        r = conn.getresponse()
        assert r.status == 404 and "no route" in json.loads(r.read())["error"]["message"]
        conn.request("GET", "/is_paused")
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read()) == {"is_paused": False}
    finally:
        conn.close()


def test_weight_version_label_routes(engine_v0):
    """vLLM's /update_weight_version and /weight_info: the label floe sets after each load."""
    assert engine_v0.get("/weight_info") == {"weight_version": "default"}
    assert engine_v0.post("/update_weight_version", {"new_version": "3"}) == {"success": True, "new_version": "3"}
    assert engine_v0.get("/weight_info") == {"weight_version": "3"}
    err = engine_v0.post("/update_weight_version", {"new_version": 3}, expect=400)
    assert "new_version" in err["error"]["message"]
    engine_v0.post("/update_weight_version", {"new_version": "default"})
