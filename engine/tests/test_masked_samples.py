"""Training samples are whole rollouts: one masked sequence (prompt, model turns, tool
outputs) with the loss on the masked (generated) tokens only. Tiny-model checks run
everywhere; the hf ones (a small qwen3 on a BPE vocabulary) need transformers."""
import copy
import json
import math

import pytest
import torch

from conftest import step_config
from floe_engine import sft
from floe_engine.model import TinyConfig
from floe_engine.policies import build_policy
from floe_engine.tiny_policy import TinyPolicy
from floe_engine.trainer import Trainer, normalize_samples

HF_SPEC = ("hf:qwen3:hidden_size=64,num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,head_dim=32,"
           "intermediate_size=128,max_position_embeddings=1024")
# measured, not computed: they differ between two runs of the same step
TIMING = ("train_ms", "publish_ms", "publish_breakdown", "tokens_per_s", "peak_memory_bytes",
          "peak_memory_bytes_per_rank", "mfu")


LR = 1e-2


def tiny_trainer(tmp_path, name="t", seed=0):
    pol = TinyPolicy(TinyConfig(d_model=32, n_layers=1, n_heads=2, context=128, init_std=0.1), torch.device("cpu"),
                     seed=seed)
    return Trainer(pol, 0, str(tmp_path / name))


def weights(tr):
    return torch.cat([p.detach().flatten().clone() for p in tr.policy.module.parameters()])


def rollout(prompt, gen1, tool, gen2, **kw):
    """A full sample; behaviour log-probs -5.5 (about the random model's) and version 0 on the
    generated tokens unless ``kw`` says otherwise."""
    ids = prompt + gen1 + tool + gen2
    mask = [0] * len(prompt) + [1] * len(gen1) + [0] * len(tool) + [1] * len(gen2)
    row = {"rollout_id": "r", "group_id": "g", "reward": 0.0, "advantage": 0.0, "ids": ids, "loss_mask": mask,
           "behaviour_logprobs": [-5.5 if m else 0.0 for m in mask], "token_versions": [0 if m else -1 for m in mask]}
    return {**row, **kw}


P = list(b"Issue: fix parser.py\n")
G1 = list(b'{"tool":"edit"}') + [256]
TOOL = list(b"\nresult: ok\n")
G2 = list(b"done") + [256]


def metrics_wo_timing(m):
    return {k: v for k, v in m.items() if k not in TIMING}


# --------------------------------------------------------------------------- tiny model
def test_masked_logprobs_equal_per_turn_scoring(tmp_path):
    pol = tiny_trainer(tmp_path).policy
    row = rollout(P, G1, TOOL, G2)
    lp = pol.masked_logprobs([(row["ids"], row["loss_mask"])])[0][0].tolist()
    t1 = pol.token_logprobs([(P, G1)])[0][0].tolist()
    t2 = pol.token_logprobs([(P + G1 + TOOL, G2)])[0][0].tolist()
    assert len(lp) == len(G1) + len(G2)
    assert max(abs(a - b) for a, b in zip(lp, t1 + t2)) < 1e-5
    # rollouts of a group share their first prompt: scored together == scored alone
    rows = [rollout(P, G1, TOOL, G2), rollout(P, G2, TOOL, G1), rollout(P[:5], G1, [], G2)]
    together = pol.masked_logprobs([(r["ids"], r["loss_mask"]) for r in rows])
    for r, (x, _) in zip(rows, together):
        alone = pol.masked_logprobs([(r["ids"], r["loss_mask"])])[0][0]
        assert torch.allclose(x, alone, atol=1e-5)


def test_multi_turn_sample_trains_masked_positions_only(tmp_path):
    a, b = tiny_trainer(tmp_path, "a"), tiny_trainer(tmp_path, "b")
    assert torch.equal(weights(a), weights(b))
    base = rollout(P, G1, TOOL, G2, group_id="g", reward=1.0, advantage=1.0, rollout_id="r0")
    lp = a.policy.masked_logprobs([(base["ids"], base["loss_mask"])])[0][0].tolist()
    blp = [0.0] * len(base["ids"])
    for j, x in zip([j for j, m in enumerate(base["loss_mask"]) if m], lp):
        blp[j] = x - 0.05  # slightly off-policy
    versions = [-1 if m == 0 else 0 for m in base["loss_mask"]]
    s1 = dict(base, behaviour_logprobs=blp, token_versions=versions)
    s2 = copy.deepcopy(s1)
    for j, m in enumerate(s2["loss_mask"]):  # garbage where the mask is 0: must change nothing
        if not m:
            s2["behaviour_logprobs"][j] = -123.0 if j % 2 else None
            s2["token_versions"][j] = 99
    w0 = weights(a)
    m1 = a.train_step([s1], step_config(lr=LR))["metrics"]
    m2 = b.train_step([s2], step_config(lr=LR))["metrics"]
    assert math.isfinite(m1["loss"]) and m1["grad_norm"] > 0
    assert not torch.equal(w0, weights(a))
    assert torch.equal(weights(a), weights(b))
    assert metrics_wo_timing(m1) == metrics_wo_timing(m2)
    assert m1["masked_tokens"] == m1["tokens"] == len(G1) + len(G2)
    assert m1["sequence_tokens"] == len(base["ids"])
    assert abs(m1["mismatch_mean_abs_logprob"] - 0.05) < 1e-4
    # a positive advantage makes the rollout's masked tokens more likely
    after = a.policy.masked_logprobs([(base["ids"], base["loss_mask"])])[0][0]
    assert after.sum() > sum(lp)


def test_staleness_metrics(tmp_path):
    tr = tiny_trainer(tmp_path)
    tr.version = 5
    mask = [0] * len(P) + [1] * len(G1) + [0] * len(TOOL) + [1] * len(G2)
    vers = [-1] * len(P) + [3] * len(G1) + [-1] * len(TOOL) + [5] * (len(G2) - 1) + [-1]
    s = rollout(P, G1, TOOL, G2, token_versions=vers, reward=1.0, advantage=1.0)
    unversioned = dict(s, advantage=-1.0, token_versions=[-1] * len(s["ids"]))
    m = tr.train_step([s, unversioned], step_config(lr=LR))["metrics"]
    n3, n5 = len(G1), len(G2) - 1  # a -1 at a masked position has no version: not counted
    assert m["staleness_max"] == 2
    assert abs(m["staleness_mean"] - (2 * n3) / (n3 + n5)) < 1e-9
    assert m["version_before"] == 5 and tr.version == 6 and len(mask) == len(s["ids"])


@pytest.mark.parametrize("patch,msg", [
    ({"loss_mask": [0, 1]}, r"sample 0: loss_mask has 2 entries for \d+ ids"),
    ({"loss_mask": "all"}, "sample 0: loss_mask must be a list"),
    ({"set_mask": (5, 2)}, r"sample 0: loss_mask\[5\] = 2 is not 0 or 1"),
    ({"set_id": (3, 259)}, r"sample 0: ids\[3\] = 259 is outside the model's vocabulary \[0, 259\)"),
    ({"set_id": (3, -1)}, r"sample 0: ids\[3\] = -1"),
    ({"no_mask": True}, "sample 0: loss_mask has no 1"),
    ({"set_mask": (0, 1)}, r"sample 0: loss_mask\[0\] is 1"),
    ({"behaviour_logprobs": [0.0]}, r"sample 0: behaviour_logprobs has 1 entries for \d+ ids"),
    ({"token_versions": [0, 1]}, r"sample 0: token_versions has 2 entries"),
    ({"bad_blp_masked": True}, r"sample 0: behaviour_logprobs\[\d+\] = None is not a finite number"),
    ({"too_long": True}, r"sample 0: ids has 400 tokens, longer than the model context 128"),
    ({"neither": True}, r"sample 0: missing \['rollout_id', 'group_id', 'advantage', 'ids', 'loss_mask', "
                        r"'behaviour_logprobs', 'token_versions'\]"),
])
def test_sample_validation_names_sample_and_field(tmp_path, patch, msg):
    tr = tiny_trainer(tmp_path)
    s = rollout(P, G1, TOOL, G2, reward=1.0)
    if "set_mask" in patch:
        j, v = patch.pop("set_mask")
        s["loss_mask"][j] = v
    if "set_id" in patch:
        j, v = patch.pop("set_id")
        s["ids"][j] = v
    if patch.pop("no_mask", False):
        s["loss_mask"] = [0] * len(s["ids"])
    if patch.pop("bad_blp_masked", False):
        s["behaviour_logprobs"] = [None] * len(s["ids"])
    if patch.pop("too_long", False):
        s["ids"] = (s["ids"] * 20)[:400]
        s["loss_mask"] = (s["loss_mask"] * 20)[:400]
    if patch.pop("neither", False):
        s = {"reward": 1.0}
    s.update(patch)
    good = rollout(P, G1, TOOL, G2, reward=0.0)
    with pytest.raises(ValueError, match=msg):
        tr.train_step([s, good], step_config(lr=LR))
    with pytest.raises(ValueError, match=msg.replace("sample 0", "sample 1")):
        normalize_samples([good, s], 259, 128)
    assert tr.version == 0


def test_sft_on_masked_rows_tiny(tmp_path):
    data = tmp_path / "gold.jsonl"
    rows = [rollout(list(f"Issue {i}: fix m{i}.py\n".encode()), list(f"edit m{i}.py".encode()) + [256],
                    list(b"\nok\n"), list(b"done") + [256]) for i in range(3)]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    summary = sft.main(["--data", str(data), "--out", str(tmp_path / "pub"), "--steps", "60", "--batch-size", "4",
                        "--lr", "3e-3", "--model", "tiny:d_model=32,n_layers=1,n_heads=2,context=128",
                        "--log-every", "100"])
    assert summary["masked_rows"] == 3 and summary["pairs"] == 0 and summary["greedy_exact_match"] is None
    assert summary["eval"].startswith("skipped")
    assert summary["loss_curve"][-1] < 0.6 * summary["loss_curve"][0]
    pol, _ = build_policy("tiny", str(tmp_path / "pub" / "v0"))
    assert pol.config_dict()["tokenizer"]["name"] == "byte"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"ids": [1, 2, 3], "loss_mask": [0, 1]}))
    with pytest.raises(ValueError, match="bad.jsonl:1: loss_mask has 2 entries for 3 ids"):
        sft.main(["--data", str(bad), "--out", str(tmp_path / "x"), "--steps", "1", "--lr", "1e-3",
                  "--model", "tiny:d_model=32,n_layers=1,n_heads=2,context=128"])


# --------------------------------------------------------------------------- hf model, BPE vocabulary
def test_hf_multi_turn_rollout_matches_engine_and_trains(bpe_dir, tmp_path):
    pytest.importorskip("transformers")
    from floe_engine.sampling import SamplingParams
    from floe_engine.scheduler import Engine
    from floe_engine.tokenizer import load_tokenizer

    tok = load_tokenizer(bpe_dir)
    gen_pol, _ = build_policy(HF_SPEC, tokenizer=bpe_dir, dtype="fp32", seed=3)
    eng = Engine(gen_pol, version=0, max_batch=4, seed=1).start()
    try:
        def generate(prompt, seed):
            req = eng.submit(prompt, SamplingParams(max_tokens=12, temperature=1.0, seed=seed, ignore_eos=True))
            req.done.wait(60)
            s = req.seqs[0]
            return list(s.out), list(s.logprobs), list(s.versions)

        prompt = tok.encode("<|im_start|>user\nfix the parser<|im_end|>\n<|im_start|>assistant\n")
        g1, l1, v1 = generate(prompt, 1)
        tool = [tok.eos_token_id] + tok.encode("\n<|im_start|>user\nresult ok<|im_end|>\n<|im_start|>assistant\n")
        g2, l2, v2 = generate(prompt + g1 + tool, 2)
    finally:
        eng.stop()
    assert max(g1 + g2) >= 259
    ids = prompt + g1 + tool + g2
    mask = [0] * len(prompt) + [1] * len(g1) + [0] * len(tool) + [1] * len(g2)
    blp = [0.0] * len(prompt) + l1 + [0.0] * len(tool) + l2
    vers = [-1] * len(prompt) + v1 + [-1] * len(tool) + v2
    sample = {"rollout_id": "r0", "group_id": "g", "reward": 1.0, "advantage": 1.0, "ids": ids, "loss_mask": mask,
              "behaviour_logprobs": blp, "token_versions": vers}

    def trainer(name):
        pol, _ = build_policy(HF_SPEC, tokenizer=bpe_dir, dtype="fp32", seed=3, for_training=True)
        return Trainer(pol, 0, str(tmp_path / name))

    a, b = trainer("a"), trainer("b")
    lp = a.policy.masked_logprobs([(ids, mask)])[0][0].tolist()
    assert max(abs(x - y) for x, y in zip(lp, l1 + l2)) < 1e-4  # engine (cached decode) vs trainer (full forward)
    w0 = weights(a)
    # a second rollout whose behaviour log-probs are the trainer's own (on-policy)
    o_ids = prompt + g2 + tool + g1
    o_mask = [0] * len(prompt) + [1] * len(g2) + [0] * len(tool) + [1] * len(g1)
    o_lp = iter(a.policy.masked_logprobs([(o_ids, o_mask)])[0][0].tolist())
    other = dict(sample, rollout_id="r1", reward=0.0, advantage=-1.0, ids=o_ids, loss_mask=o_mask,
                 behaviour_logprobs=[next(o_lp) if k else 0.0 for k in o_mask],
                 token_versions=[-1] * len(prompt) + v2 + [-1] * len(tool) + v1)
    cfg = step_config(lr=3e-3)
    m = a.train_step([sample, other], cfg)["metrics"]
    assert math.isfinite(m["loss"]) and not torch.equal(w0, weights(a))
    assert m["mismatch_mean_abs_logprob"] < 1e-4 and m["staleness_max"] == 0 and m["staleness_mean"] == 0
    assert m["masked_tokens"] == 2 * (len(g1) + len(g2)) and m["sequence_tokens"] == 2 * len(ids)
    # unmasked behaviour log-probs and versions are ignored
    s2 = dict(sample, behaviour_logprobs=[x if k else -50.0 for x, k in zip(blp, mask)],
              token_versions=[v if k else 7 for v, k in zip(vers, mask)])
    m2 = b.train_step([s2, other], cfg)["metrics"]
    assert torch.equal(weights(a), weights(b)) and metrics_wo_timing(m) == metrics_wo_timing(m2)
    # after the step the rewarded rollout's masked tokens are more likely
    assert sum(a.policy.masked_logprobs([(ids, mask)])[0][0].tolist()) > sum(lp)


def test_hf_ids_beyond_the_output_layer_are_named(bpe_dir, tmp_path):
    pytest.importorskip("transformers")
    pol, _ = build_policy(HF_SPEC, tokenizer=bpe_dir, dtype="fp32", seed=5, for_training=True)
    tr = Trainer(pol, 0, str(tmp_path / "a"))
    s = rollout([5, 6, 7], [8, 2], [], [])
    with pytest.raises(ValueError, match=r"sample 0: ids\[0\] = 1216 is outside the model's vocabulary \[0, 1216\)"):
        tr.train_step([dict(s, ids=[1216] + s["ids"][1:])], step_config())
