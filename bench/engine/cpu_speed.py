"""CPU decode and train-step speed of floe's reference engine: this tree against another, side by side.

    git archive <parent commit> engine | tar -x -C /tmp/floe-base
    python3 bench/engine/cpu_speed.py --baseline /tmp/floe-base/engine --baseline-label "engine/ of <commit>" \
        --out bench/results/cpu_speed.json

Every measurement runs in a fresh child process (one thread, as floe's servers run), with the
baseline's ``engine`` folder or this tree's first on PYTHONPATH; the two alternate within each
repeat, so load from other work on the machine falls on both. Measured:

  * ``train``: the tiny byte policy's (347k parameters) ``Trainer.train_step`` as the main job runs it
    (configs/stress-test.yaml: 64 trajectories in 16 groups of 4, 6 epochs, 16 minibatches): each
    group one 500-byte prompt, then up to 3 generated turns of 60-120 tokens with 20-80 bytes of
    tool output between them; the share of successful attempts (advantage 1, the rest 0, as
    ``trainer.advantage: reward`` sends them) is 0.5 (the main job's start) or 1.0 (its end). The
    step's own ``train_ms`` and its loss / grad norm / entropy, which must agree between the trees;
  * ``tiny_decode``: the tiny policy's engine backend, batch 1 and 8, 500-byte prompts, 100 decode steps;
  * ``hf_decode``: a random-init Llama of SmolLM2-135M's shape (30 layers, hidden 576, 9 heads /
    3 KV heads, MLP 1536, vocabulary 49,152; transformers' LlamaConfig; fp32 as the engine runs it
    on CPU), batch 1 and 8, 256-token prompts, 32 decode steps.

Decode speed is generated tokens per second of the decode steps (prefill apart). Each figure is
given by wall clock and by the child's own CPU time (``time.process_time``): on a machine whose
cores are shared with other work, the CPU-time ratio is the one that measures the code.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

SMOLLM2_SHAPE = ("hf:llama:hidden_size=576,num_hidden_layers=30,num_attention_heads=9,num_key_value_heads=3,"
                 "intermediate_size=1536,vocab_size=49152,max_position_embeddings=8192,rms_norm_eps=1e-5,"
                 "rope_theta=100000,tie_word_embeddings=true")
SMOKE_SHAPE = ("hf:llama:hidden_size=64,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,"
               "intermediate_size=128,vocab_size=512,max_position_embeddings=1024,tie_word_embeddings=true")
SUCCESS_SHARES = (0.5, 1.0)


# ----------------------------------------------------------------------------- child: one measurement
def main_job_batch(success: float, groups: int = 16, g: int = 4, seed: int = 0) -> list:
    rng = random.Random(seed)
    out = []
    for gi in range(groups):
        prompt = [rng.randrange(1, 256) for _ in range(500)]
        for a in range(g):
            ids, mask = list(prompt), [0] * len(prompt)
            for turn in range(3):
                n = rng.randrange(60, 120)
                ids += [rng.randrange(1, 256) for _ in range(n)]
                mask += [1] * n
                if turn == 2 or len(ids) > 900:
                    break
                o = rng.randrange(20, 80)
                ids += [rng.randrange(1, 256) for _ in range(o)]
                mask += [0] * o
            ids, mask = ids[:1025], mask[:1025]
            adv = 1.0 if a < round(success * g) else 0.0  # the first attempts of each group succeed
            out.append({"rollout_id": f"{gi}-{a}", "group_id": str(gi), "reward": adv, "advantage": adv,
                        "ids": ids, "loss_mask": mask, "behaviour_logprobs": [-5.5 if m else 0.0 for m in mask],
                        "token_versions": [0 if m else -1 for m in mask]})
    return out


def child(a) -> dict:
    import tempfile

    import torch

    from floe_engine.policies import build_policy
    torch.set_num_threads(1)
    res = {"engine": os.path.dirname(__import__("floe_engine").__file__)}
    if a.what == "train":
        from floe_engine.trainer import Trainer
        samples = main_job_batch(a.success, groups=2 if a.smoke else 16)
        pol, version = build_policy("tiny", None, seed=0, device="cpu", for_training=True)
        tr = Trainer(pol, version, tempfile.mkdtemp(prefix="floe-cpu-speed-"))
        c0 = time.process_time()
        m = tr.train_step(samples, json.loads(a.step_config))["metrics"]
        res["train_cpu_s"] = time.process_time() - c0  # with the publish of 347k parameters (~ms)
        res.update({k: m[k] for k in ("train_ms", "loss", "grad_norm", "entropy", "clip_fraction",
                                      "mismatch_mean_abs_logprob", "optimizer_steps")},
                   samples=len(samples), successes=sum(s["advantage"] > 0 for s in samples),
                   sequence_tokens=sum(len(s["ids"]) for s in samples),
                   masked_tokens=sum(sum(s["loss_mask"]) for s in samples))
        return res
    spec = "tiny" if a.what == "tiny_decode" else (SMOKE_SHAPE if a.smoke else SMOLLM2_SHAPE)
    plen, steps = (500, 100) if a.what == "tiny_decode" else (256, 32)
    if a.smoke:
        plen, steps = 40, 3
    pol, _ = build_policy(spec, None, seed=0, device="cpu")
    rng = random.Random(1)
    be = pol.make_backend(a.batch)
    keys = [f"s{i}" for i in range(a.batch)]
    with torch.no_grad():
        t0 = time.perf_counter()
        for k in keys:
            be.add(k, [rng.randrange(1, 256) for _ in range(plen)])
        t1, c1 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            be.step(keys, [rng.randrange(1, 256) for _ in keys])
        t2, c2 = time.perf_counter(), time.process_time()
    res.update(batch=a.batch, prompt_tokens=plen, decode_steps=steps, prefill_s=t1 - t0, decode_s=t2 - t1,
               tokens_per_s=a.batch * steps / (t2 - t1), decode_cpu_s=c2 - c1,
               tokens_per_cpu_s=a.batch * steps / (c2 - c1), parameters=pol.num_parameters())
    return res


# ----------------------------------------------------------------------------- parent: both trees, alternating
def run_child(engine_dir: str, args: list) -> dict:
    env = dict(os.environ, PYTHONPATH=engine_dir, FLOE_ENGINE_THREADS="1", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args], env=env,
                       capture_output=True, text=True, cwd="/")
    if p.returncode != 0:
        raise RuntimeError(f"child {args} with {engine_dir} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="the engine/ folder of the tree to compare against (git archive, see above)")
    ap.add_argument("--baseline-label", default="baseline",
                    help="what the baseline is, for the JSON (e.g. 'engine/ of 397c623'); no path is recorded")
    ap.add_argument("--out", help="results JSON")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], choices=["train", "tiny_decode", "hf_decode"])
    ap.add_argument("--smoke", action="store_true",
                    help="small shapes, one repeat: checks the script (engine/tests/test_bench_scripts.py)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--what", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--success", type=float, default=1.0, help=argparse.SUPPRESS)
    ap.add_argument("--step-config", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a)))
        return
    if not a.baseline or not a.out:
        ap.error("--baseline and --out are required")
    sys.path.insert(0, HERE)
    from bench_record import Record, step_config  # this tree's floe_engine, in the parent only

    # the main job's step (configs/stress-test.yaml's trainer section)
    cfg = step_config(lr=1e-4, epochs=1 if a.smoke else 6, minibatches=2 if a.smoke else 16, clip_low=0.2, clip_high=0.28)
    smoke = ["--smoke"] if a.smoke else []
    trees = {"before": os.path.abspath(a.baseline), "after": os.path.join(REPO, "engine")}
    cases = []
    if "train" not in a.skip:
        cases += [(f"train_success{s}", ["--what", "train", "--success", str(s), "--step-config", json.dumps(cfg)])
                  for s in (SUCCESS_SHARES[:1] if a.smoke else SUCCESS_SHARES)]
    for what in ("tiny_decode", "hf_decode"):
        if what not in a.skip:
            cases += [(f"{what}_b{b}", ["--what", what, "--batch", str(b)]) for b in ((8,) if a.smoke else (1, 8))]
    rec = Record(a.out, smoke=a.smoke, threads=1, trees={"before": a.baseline_label, "after": "engine/ of this tree"}, step_config=cfg, smollm2_shape=SMOLLM2_SHAPE, runs={}, summary={})
    rec["cpu_count"] = os.cpu_count()
    for r in range(1 if a.smoke else a.repeats):
        for name, args in cases:
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for tree in order:
                out = run_child(trees[tree], args + smoke)
                out.pop("engine")  # a path on this machine; the tree is the key it is filed under
                rec["runs"].setdefault(name, {}).setdefault(tree, []).append(out)
                keys = ("train_ms", "train_cpu_s") if name.startswith("train") else ("tokens_per_s", "tokens_per_cpu_s")
                print(f"repeat {r + 1}/{a.repeats} {name} {tree}: " + ", ".join(f"{k} {out[k]:.2f}" for k in keys), flush=True)
                rec.save()
    for name, by_tree in rec["runs"].items():
        train = name.startswith("train")
        s = {}
        # wall time, and the process's own CPU time: the one thread's work, less sensitive to other
        # work on the cores (the wall-clock ratio moves with the machine's load between children)
        for key in (("train_ms", "train_cpu_s") if train else ("tokens_per_s", "tokens_per_cpu_s")):
            med = {t: statistics.median(x[key] for x in runs) for t, runs in by_tree.items()}
            s[f"{key}_before"], s[f"{key}_after"] = med["before"], med["after"]
            s[f"speedup_{key}"] = (med["before"] / med["after"]) if train else (med["after"] / med["before"])
        if train:  # the same step: metrics of the first repeat of each tree
            b, f = by_tree["before"][0], by_tree["after"][0]
            s["max_rel_diff_metrics"] = max(abs(b[k] - f[k]) / max(abs(b[k]), 1e-12)
                                            for k in ("loss", "grad_norm", "entropy", "clip_fraction"))
        rec["summary"][name] = s
    rec.finish()
    print(json.dumps(rec["summary"], indent=1))


if __name__ == "__main__":
    main()
