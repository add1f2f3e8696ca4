"""The sharded (FSDP2) trainer on CPU ranks (gloo): world size 2 gives the one-process step, and
a trainer killed and restarted from its own state gives the uninterrupted next step.

Each trainer is a real process tree (``python -m torch.distributed.run`` for world size 2,
``--fsdp`` for one process) talking HTTP, killed with SIGKILL where the test says so."""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

from conftest import ENGINE_DIR, post_json, step_config

PROMPT_A = list(b"Issue: parser crashes on empty input.\n")
PROMPT_B = list(b"Fix the failing test in utils.py, then reply DONE.\n")


def _row(prompt, completion, adv, group, blp_shift=0.0):
    """Behaviour log-probs around -5.5 (about the random model's), ``blp_shift`` apart: ratios != 1,
    some clipped."""
    ids = prompt + completion
    mask = [0] * len(prompt) + [1] * len(completion)
    return {"rollout_id": f"{group}-{len(completion)}", "ids": ids, "loss_mask": mask, "advantage": adv,
            "group_id": group, "reward": float(adv > 0),
            "behaviour_logprobs": [0.0] * len(prompt) + [-5.5 + blp_shift * ((j % 5) - 2) for j in range(len(completion))],
            "token_versions": [-1] * len(prompt) + [0] * len(completion)}


def batches():
    """Three batches of different shapes: uneven lengths, two groups, mixed advantages."""
    b1 = [_row(PROMPT_A, list(b'{"tool":"edit","path":"parser.py"}'), 1.0, "a", 0.3),
          _row(PROMPT_A, list(b'{"tool":"shell","cmd":"ls"}'), -1.0, "a", 0.2),
          _row(PROMPT_A, list(b"I give up."), -0.5, "a"),
          _row(PROMPT_B, list(b'{"tool":"test"} DONE'), 0.7, "b", 0.1),
          _row(PROMPT_B, list(b"DONE"), -0.7, "b")]
    b2 = [_row(PROMPT_B, list(b"run pytest -q then DONE"), 1.2, "c", 0.25),
          _row(PROMPT_B, list(b"DONE DONE"), -1.2, "c"),
          _row(PROMPT_A, list(b"open parser.py and read it"), 0.4, "d", 0.15)]
    b3 = [_row(PROMPT_A, list(b"check len(tokens) == 0 first"), 0.9, "e", 0.2),
          _row(PROMPT_A, list(b"rm -rf /"), -0.9, "e", 0.05),
          _row(PROMPT_B, list(b"patch utils.py; DONE"), 0.3, "f")]
    return [b1, b2, b3]


SGD_LR = 0.05
CFG1 = step_config(lr=SGD_LR)
CFG2 = step_config(lr=SGD_LR, minibatches=2, epochs=2, micro_batch_tokens=100)  # several optimizer steps and micro-batches


class Trainer:
    """A trainer_server process tree: the launcher and, under torchrun, its ranks."""

    def __init__(self, world: int, args, log_path: str):
        # CPU ranks over gloo on any machine (on a GPU machine the ranks would otherwise share its GPU)
        env = dict(os.environ, PYTHONPATH=ENGINE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world)]
                  if world > 1 else [sys.executable])
        cmd = launch + ["-m", "floe_engine.trainer_server"] + (["--fsdp"] if world == 1 else [])
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd + ["--port", "0", *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=self.log, env=env, text=True)
        lines: "queue.Queue[str]" = queue.Queue()
        def read():
            for line in self.proc.stdout:
                lines.put(line)
            lines.put("")  # EOF: the process is gone
        threading.Thread(target=read, daemon=True).start()
        try:
            while True:
                line = lines.get(timeout=90)
                if not line or line.startswith("{"):
                    break
            if not line:
                raise queue.Empty
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"trainer did not start; see {log_path}")
        self.ready = json.loads(line)
        self.url = f"http://127.0.0.1:{self.ready['port']}"

    def post(self, path, body, expect=200):
        return post_json(self.url, path, body, expect)

    def descendants(self):
        """Every process under the launcher (torchrun puts each rank in its own session)."""
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
        return out

    def kill(self, sig=signal.SIGKILL, ranks_too=True):
        """``sig`` to the launcher (torchrun forwards SIGTERM to its ranks); with SIGKILL also to
        every rank by its id (``ranks_too``), as a crash of the machine's job would. Then wait
        until no process of the job is left (ranks left alone must die with their launcher)."""
        if self.proc.poll() is None:
            pids = self.descendants()
            os.kill(self.proc.pid, sig)
            if sig == signal.SIGKILL and ranks_too:
                for pid in pids:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            self.proc.wait(timeout=30)
            deadline = time.time() + 30
            while [p for p in pids if alive(p)] and time.time() < deadline:
                time.sleep(0.1)
            left = [p for p in pids if alive(p)]
            for p in left:  # never leak a rank, even when the assertion below fails
                os.kill(p, signal.SIGKILL)
            assert not left, f"ranks {left} outlived their launcher"
        if not self.log.closed:
            self.log.close()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


@pytest.fixture
def launch(tmp_path):
    started = []

    def start(world, *args):
        t = Trainer(world, args, str(tmp_path / f"trainer-{len(started)}.log"))
        started.append(t)
        return t

    yield start
    for t in started:
        t.kill()


def weights(version_dir):
    from floe_engine import checkpoint as ckpt
    _, sd = ckpt.load(str(version_dir))
    return {k: v.float() for k, v in sd.items()}


def max_rel_diff(a, b):
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max() / (b[k].abs().max() + 1e-12)) for k in a)


def max_abs_diff(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def close(x, y, rel=1e-5):
    return abs(x - y) <= rel * max(abs(x), abs(y), 1e-8)


STEP_KEYS = ("loss", "grad_norm", "grad_norm_max", "entropy", "clip_fraction", "mismatch_mean_abs_logprob",
             "ratio_max")


def reference_steps(ckpt_v0, publish_dir, steps, optimizer="sgd"):
    """The one-process trainer (trainer.Trainer, no torch.distributed), in this process."""
    from floe_engine.policies import build_policy
    from floe_engine.trainer import Trainer as PlainTrainer
    torch.manual_seed(0)
    pol, version = build_policy("tiny", str(ckpt_v0), seed=0, device="cpu")
    tr = PlainTrainer(pol, version, str(publish_dir), optimizer=optimizer)
    return [tr.train_step(b, c) for b, c in steps]


def update_diff(got, want, start):
    """max over tensors of |update_got - update_want| / max |update_want| (tensors that moved)."""
    out = 0.0
    for k in want:
        dw, dg = want[k] - start[k], got[k] - start[k]
        if float(dw.abs().max()) > 1e-6:
            out = max(out, float((dg - dw).abs().max() / dw.abs().max()))
    return out


def test_world_size_2_step_equals_world_size_1(launch, ckpt_dir, tmp_path):
    """SGD (momentum 0.9) here: its update is linear in the gradient, so the weights check the
    gradient itself. AdamW's g / sqrt(v) turns float noise on gradients that are zero in exact
    arithmetic (the tiny model's key biases: softmax ignores a constant added to every key) into
    lr-sized steps, so AdamW weights cannot agree across summation orders (two ranks, or the
    one-process trainer's shared-prompt forward); the resume test checks AdamW, at one order."""
    v0 = ckpt_dir / "pub" / "v0"
    b1, b2, _ = batches()
    steps = [(b1, CFG1), (b2, CFG2)]
    ref = reference_steps(v0, tmp_path / "ref", steps)
    runs = {}
    # --pack: unpadded token-budget bins; --offload-optimizer: shards, gradients and optimizer in host memory
    setups = {"ws2": (2, []), "ws2pack": (2, ["--pack"]), "ws2offload": (2, ["--offload-optimizer"])}
    for name, (world, extra) in setups.items():
        pub = tmp_path / name
        t = launch(world, "--checkpoint", v0, "--publish-dir", pub, "--optimizer", "sgd", "--state-every", "0",
                   *extra)
        assert t.ready["world_size"] == world and t.ready["version"] == 0
        # /logprobs goes through the sharded forward too, and must not disturb the step after it
        lp = t.post("/logprobs", {"samples": [{"ids": b1[0]["ids"], "loss_mask": b1[0]["loss_mask"]}]})["logprobs"][0]
        assert len(lp) == sum(b1[0]["loss_mask"])
        runs[name] = [t.post("/train_step", {"samples": b, "config": c}) for b, c in steps]
        t.kill(signal.SIGTERM)
    for k, (b, c) in enumerate(steps):
        want = ref[k]["metrics"]
        for name, (world, _) in setups.items():
            got = runs[name][k]["metrics"]
            assert runs[name][k]["version"] == k + 1
            assert got["world_size"] == world and len(got["peak_memory_bytes_per_rank"]) == world
            assert got["tokens_per_s"] > 0 and got["peak_memory_bytes"] > 0
            assert got["samples"] == want["samples"] and got["tokens"] == want["tokens"]
            assert got["optimizer_steps"] == want["optimizer_steps"]
            for key in STEP_KEYS:
                assert close(got[key], want[key]), (name, k, key, got[key], want[key])
        assert want["clip_fraction"] > 0 and want["optimizer_steps"] == (1 if c is CFG1 else 4)
        ref_w, start = weights(tmp_path / "ref" / f"v{k + 1}"), weights(v0 if k == 0 else tmp_path / "ref" / f"v{k}")
        for name in setups:
            got = weights(tmp_path / name / f"v{k + 1}")
            print(name, k, max_rel_diff(got, ref_w), update_diff(got, ref_w, start))
            assert max_rel_diff(got, ref_w) < 1e-5, (name, k)
            assert update_diff(got, ref_w, start) < 1e-3, (name, k)
    # negative control: another batch does not give these weights
    other = reference_steps(v0, tmp_path / "other", [(b2, CFG1)])
    assert update_diff(weights(tmp_path / "other" / "v1"), weights(tmp_path / "ws2" / "v1"), weights(v0)) > 0.1
    assert other[0]["metrics"]["loss"] != pytest.approx(ref[0]["metrics"]["loss"], rel=1e-3)
    assert max_abs_diff(weights(tmp_path / "other" / "v1"), weights(tmp_path / "ws2" / "v1")) > 1e-3


@pytest.mark.parametrize("world", [1, 2])
def test_kill_and_resume_gives_the_uninterrupted_step(launch, ckpt_dir, tmp_path, world):
    v0 = ckpt_dir / "pub" / "v0"
    b = batches()
    # AdamW; the second step has several optimizer steps and micro-batches, the third another weight decay
    cfgs = [step_config(lr=3e-3), step_config(lr=3e-3, minibatches=2, epochs=2, micro_batch_tokens=100),
            step_config(lr=2e-3, weight_decay=0.1)]
    # uninterrupted: steps 1, 2, 3
    a = launch(world, "--checkpoint", v0, "--publish-dir", tmp_path / "a")
    run_a = [a.post("/train_step", {"samples": b[k], "config": cfgs[k]}) for k in range(3)]
    a.kill(signal.SIGTERM)
    assert run_a[2]["version"] == 3 and run_a[2]["metrics"]["state_save_ms"] > 0
    # its first step is the one-process trainer's (loss and gradient norm do not depend on the optimizer)
    ref = reference_steps(v0, tmp_path / "ref", [(b[0], cfgs[0])], optimizer="adamw")[0]["metrics"]
    for key in STEP_KEYS:
        assert close(run_a[0]["metrics"][key], ref[key]), (key, run_a[0]["metrics"][key], ref[key])

    # steps 1, 2, then SIGKILL (every process of the job) and a restart on the same publish dir,
    # from the newest published version as floe's supervisor does
    pub = tmp_path / "b"
    t = launch(world, "--checkpoint", v0, "--publish-dir", pub)
    for k in range(2):
        t.post("/train_step", {"samples": b[k], "config": cfgs[k]})
    # world 2: SIGKILL to the torchrun agent alone; its ranks must die with it (kill checks)
    t.kill(signal.SIGKILL, ranks_too=(world == 1))
    half = pub / "trainer_state" / "v9.tmp"  # a save cut short: newer, but must be ignored
    half.mkdir()
    (half / "junk").write_text("x")
    t = launch(world, "--checkpoint", pub / "v2", "--publish-dir", pub)
    assert t.ready["version"] == 2 and t.ready["resumed_from"].endswith(os.path.join("trainer_state", "v2"))
    r3 = t.post("/train_step", {"samples": b[2], "config": cfgs[2]})
    assert r3["version"] == 3
    for key in STEP_KEYS:
        assert close(r3["metrics"][key], run_a[2]["metrics"][key]), (key, r3["metrics"][key], run_a[2]["metrics"][key])
    w_a = weights(tmp_path / "a" / "v3")
    assert max_rel_diff(weights(pub / "v3"), w_a) < 1e-5
    assert sorted(os.listdir(pub / "trainer_state")) == ["v3"]  # the half-written one and v2 are gone

    # negative control: the same weights (v2) with fresh optimizer moments, as floe restarts a
    # trainer today, give the same loss but measurably different step-3 weights (one world size
    # is enough to show the comparison can fail)
    if world != 1:
        return
    c = launch(world, "--checkpoint", pub / "v2", "--publish-dir", tmp_path / "c", "--no-resume")
    assert c.ready["version"] == 2 and c.ready["resumed_from"] is None
    r3c = c.post("/train_step", {"samples": b[2], "config": cfgs[2]})
    assert close(r3c["metrics"]["loss"], run_a[2]["metrics"]["loss"])
    assert max_abs_diff(weights(tmp_path / "c" / "v3"), w_a) > 100 * max(max_abs_diff(weights(pub / "v3"), w_a), 1e-7)
    assert max_abs_diff(weights(tmp_path / "c" / "v3"), w_a) > 1e-4


def test_activation_checkpointing_recomputes_blocks_and_keeps_gradients():
    """checkpoint_activations: same loss and gradients, and each block's forward runs again in
    the backward pass (its activations were not kept)."""
    from floe_engine.model import TinyConfig
    from floe_engine.scoring import full_sequence_logprobs
    from floe_engine.sharding import checkpoint_activations
    from floe_engine.tiny_policy import TinyPolicy

    rows = [(s["ids"], s["loss_mask"]) for s in batches()[0]]
    cfg = TinyConfig(d_model=32, n_layers=2, n_heads=2, context=256)
    grads, calls = [], []
    for ac in (False, True):
        pol = TinyPolicy(cfg, torch.device("cpu"), seed=3)
        n = [0]
        for blk in pol.module.blocks:
            heads = blk._heads

            def counted(x, heads=heads):
                n[0] += 1
                return heads(x)
            blk._heads = counted
            if ac:
                checkpoint_activations(blk)
        loss = sum((lp * (k + 1)).sum() for k, (lp, _) in enumerate(full_sequence_logprobs(pol, rows)))
        forward_calls = n[0]
        loss.backward()
        calls.append((forward_calls, n[0]))
        grads.append({k: p.grad.clone() for k, p in pol.module.named_parameters()})
    assert calls[0] == (2, 2)  # no recomputation
    assert calls[1] == (2, 4)  # each of the two blocks ran again in the backward
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], rtol=1e-5, atol=1e-7), k


def test_hf_model_sharded_with_activation_checkpointing(launch, tmp_path):
    """A Qwen3-shaped HF model (tied embeddings) over two ranks with activation checkpointing:
    the one-process step, and the same published HF folder."""
    from floe_engine import checkpoint as ckpt
    from floe_engine.policies import build_policy
    from floe_engine.trainer import Trainer as PlainTrainer

    spec = "hf:" + os.path.join(os.path.dirname(ENGINE_DIR), "configs", "models", "qwen3-cpu.json")
    b1 = batches()[0]
    torch.manual_seed(0)
    pol, _ = build_policy(spec, None, seed=0, device="cpu", for_training=True)
    ref = PlainTrainer(pol, 0, str(tmp_path / "ref"), optimizer="sgd")
    ref.ensure_published()
    want = ref.train_step(b1, CFG1)["metrics"]
    t = launch(2, "--model", spec, "--publish-dir", tmp_path / "ws2", "--optimizer", "sgd",
               "--activation-checkpointing", "--state-every", "0")
    got = t.post("/train_step", {"samples": b1, "config": CFG1})["metrics"]
    for key in STEP_KEYS:
        assert close(got[key], want[key]), (key, got[key], want[key])
    assert max_rel_diff(weights(tmp_path / "ws2" / "v0"), weights(tmp_path / "ref" / "v0")) == 0  # same init
    w = weights(tmp_path / "ws2" / "v1")
    assert max_rel_diff(w, weights(tmp_path / "ref" / "v1")) < 1e-5
    assert update_diff(w, weights(tmp_path / "ref" / "v1"), weights(tmp_path / "ref" / "v0")) < 1e-3
    # each rank wrote one of the two shards; the other files are the one-process trainer's
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    names = lambda d: set(os.listdir(d))  # noqa: E731
    assert names(tmp_path / "ws2" / "v1") == names(tmp_path / "ref" / "v1") - {ckpt.WEIGHTS} | {ckpt.INDEX, *shards}
    meta = ckpt.read_meta(str(tmp_path / "ws2" / "v1"))
    assert meta["weights"] == [ckpt.INDEX, *shards] and meta["writers"] == {shards[0]: 0, shards[1]: 1}


@pytest.mark.parametrize("model", ["tiny", "hf"])
def test_packed_micro_batch_gives_the_unpacked_loss_and_gradients(model):
    """Samples packed into one unpadded sequence (positions restart, block-diagonal mask): the
    same log-probs, loss and gradients as the padded batch; concatenating them without the mask
    and positions does not give those log-probs (what the test would miss if packing leaked)."""
    from floe_engine.model import TinyConfig
    from floe_engine.scoring import full_sequence_logprobs
    from floe_engine.policies import build_policy
    from floe_engine.tiny_policy import TinyPolicy

    rows = [(s["ids"], s["loss_mask"]) for s in batches()[0]]

    def make():
        if model == "tiny":
            return TinyPolicy(TinyConfig(d_model=32, n_layers=2, n_heads=2, context=512), torch.device("cpu"), seed=3)
        spec = "hf:" + os.path.join(os.path.dirname(ENGINE_DIR), "configs", "models", "qwen3-cpu.json")
        return build_policy(spec, None, seed=3, device="cpu", for_training=True)[0]

    out = {}
    for packed in (False, True):
        pol = make()
        res = full_sequence_logprobs(pol, rows, entropy=True, packed=packed)
        loss = sum((lp * (k - 2)).sum() for k, (lp, _) in enumerate(res)) / 7
        loss.backward()
        out[packed] = ([lp.detach() for lp, _ in res], float(loss.detach()),
                       {k: p.grad.clone() for k, p in pol.module.named_parameters() if p.grad is not None})
    (lp0, l0, g0), (lp1, l1, g1) = out[False], out[True]
    assert len(lp1) == len(rows) and all(a.shape == b.shape for a, b in zip(lp0, lp1))
    assert max(float((a - b).abs().max()) for a, b in zip(lp0, lp1)) < 1e-5
    assert close(l0, l1, 1e-5)
    assert g0.keys() == g1.keys() and len(g0) > 0
    for k in g0:
        assert torch.allclose(g0[k], g1[k], rtol=1e-4, atol=1e-6), (k, float((g0[k] - g1[k]).abs().max()))
    # the one-process trainer's scoring agrees too
    ref = make().masked_logprobs(rows)
    assert max(float((a - b.detach()).abs().max()) for a, (b, _) in zip(lp1, ref)) < 1e-5
    # negative control: the same tokens concatenated with plain causal attention and running positions
    pol = make()
    cat = [t for ids, _ in rows for t in ids[:-1]]
    with torch.no_grad():
        inp = torch.tensor([cat])
        if model == "tiny":
            logits = pol.module(inp)[0]
        else:
            h, _ = pol.forward_hidden(inp, use_cache=False)
            logits = pol._head(h[0])
        lsm = torch.log_softmax(logits.float(), -1)
    ids1, mask1 = rows[1]
    start = len(rows[0][0]) - 1
    naive = torch.stack([lsm[start + j - 1, ids1[j]] for j, m in enumerate(mask1) if m])
    assert float((naive - lp1[1]).abs().max()) > 1e-2
