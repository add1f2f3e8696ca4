"""Fixtures: servers run as subprocesses on free ports and are always killed."""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Optional

import pytest

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ENGINE_DIR)


def step_config(**over) -> dict:
    """A full /train_step config with test values (the trainer has no defaults: floe sends every
    field from its run config); ``over`` replaces some."""
    cfg = {"lr": 1e-3, "weight_decay": 0.0, "clip_low": 0.2, "clip_high": 0.28, "ratio_mode": "clip",
           "truncate_cap": 2.0, "loss_agg": "token-mean", "epochs": 1, "minibatches": 1, "grad_clip": 1.0,
           "micro_batch_tokens": 16384}
    unknown = set(over) - set(cfg)
    assert not unknown, f"not step config fields: {sorted(unknown)}"
    return {**cfg, **over}


def post_json(url: str, path: str, body: Optional[dict] = None, expect: int = 200):
    """POST ``body`` as JSON to ``url + path``; the reply's JSON, asserting its HTTP status."""
    req = urllib.request.Request(url + path, data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, data = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, data = e.code, e.read().decode()
    assert status == expect, f"{path}: HTTP {status}: {data}"
    return json.loads(data)


class Server:
    def __init__(self, module: str, args, log_path: str):
        env = dict(os.environ, PYTHONPATH=ENGINE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONUNBUFFERED="1")
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--port", "0", *map(str, args)],
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, text=True)
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in self.proc.stdout], daemon=True).start()
        try:
            first = lines.get(timeout=60)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"{module} did not start; see {log_path}")
        self.ready = json.loads(first)
        self.url = f"http://127.0.0.1:{self.ready['port']}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def get(self, path: str, raw: bool = False):
        with urllib.request.urlopen(self.url + path, timeout=120) as r:
            body = r.read().decode()
        return body if raw else json.loads(body)

    def post(self, path: str, body: Optional[dict] = None, expect: int = 200):
        return post_json(self.url, path, body, expect)

    def metric(self, name: str) -> float:
        for line in self.get("/metrics", raw=True).splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        raise KeyError(name)


@pytest.fixture(scope="session")
def ckpt_dir(tmp_path_factory):
    """Published tiny checkpoints v0, v1, v2 (different random weights) + an 'always EOS' model."""
    import torch
    from floe_engine import checkpoint as ckpt
    from floe_engine.model import TinyConfig
    from floe_engine.tiny_policy import TinyPolicy
    from floe_engine import tokenizer

    d = tmp_path_factory.mktemp("ckpt")
    cfg = TinyConfig(d_model=64, n_layers=2, n_heads=4, context=1024, init_std=0.2)
    for v in range(3):
        pol = TinyPolicy(cfg, torch.device("cpu"), seed=100 + v)
        ckpt.publish(pol.state_dict(), str(d / "pub"), v, pol.config_dict())
    pol = TinyPolicy(cfg, torch.device("cpu"), seed=5)
    with torch.no_grad():  # logits = u . E[v] with u = E[EOS] large: EOS wins by a mile
        u = torch.randn(cfg.d_model) * 3
        pol.module.tok.weight[tokenizer.EOS_ID] = u
        pol.module.ln_f.weight.zero_()
        pol.module.ln_f.bias.copy_(u)
    ckpt.publish(pol.state_dict(), str(d / "eos"), 0, pol.config_dict())
    return d


@pytest.fixture
def start_server(tmp_path):
    servers = []

    def start(module: str, *args) -> Server:
        s = Server(module, args, str(tmp_path / f"{module.rsplit('.', 1)[-1]}-{len(servers)}.log"))
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.kill()


def wait_for(cond, timeout=30.0, interval=0.01):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return True
        time.sleep(interval)
    raise AssertionError("condition not met within %.0fs" % timeout)


@pytest.fixture(scope="module")
def engine_v0(ckpt_dir, tmp_path_factory):
    """One engine on checkpoint v0 shared by a test module (max batch 4)."""
    s = Server("floe_engine.inference_server",
               ["--checkpoint", ckpt_dir / "pub" / "v0", "--seed", 1, "--max-batch", 4],
               str(tmp_path_factory.mktemp("logs") / "engine.log"))
    yield s
    s.kill()


def build_bpe_tokenizer(folder: str, vocab_size: int = 1200) -> str:
    """A small byte-level BPE tokenizer folder (tokenizer.json + tokenizer_config.json) trained
    here with the `tokenizers` library: Qwen-style specials, eos_token <|im_end|>."""
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    rng = random.Random(0)
    words = ("def return import class self print value parser fix issue test file edit tool path line error "
             "the a to in for if else while json call result diff patch assistant user system").split()
    texts = [" ".join(rng.choice(words) for _ in range(12)) + f" x{i} = y + {i * 7}\n" for i in range(400)]
    tok.train_from_iterator(texts, trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}, f)
    return folder


@pytest.fixture(scope="session")
def bpe_dir(tmp_path_factory):
    """Path of a small BPE tokenizer folder (~1.2k ids; specials 0..2, <|im_end|> = 2 is the EOS)."""
    pytest.importorskip("tokenizers")
    return build_bpe_tokenizer(str(tmp_path_factory.mktemp("tok") / "mini-bpe"))


def span_update(eng, ckpt_dir, body, keep_cache=False):
    """Run a long request; after >= 25 tokens, pause, load v1 (keeping the caches when asked),
    resume. Returns the /update_weights answer and the request's choice."""
    import threading
    out = {}
    t = threading.Thread(target=lambda: out.update(eng.post("/v1/completions", body)))
    base = eng.metric("floe_engine_generation_tokens_total")
    t.start()
    wait_for(lambda: eng.metric("floe_engine_generation_tokens_total") - base >= 25, interval=0.001)
    eng.post("/pause")
    req = {"path": str(ckpt_dir / "pub" / "v1"), "version": 1}
    if keep_cache:
        req["keep_cache"] = True
    r = eng.post("/update_weights", req)
    eng.post("/resume")
    t.join(timeout=60)
    return r, out["choices"][0]
