"""The trainer's HTTP surface: a train step moves log-probs the way the
advantages say, publishes a loadable version, and matches the engine."""
import json

from conftest import step_config

PROMPT = list(b"Issue: parser crashes on empty input. Reply with one tool call.\n")
GOOD = list(b'{"tool":"edit","path":"parser.py"}') + [256]
BAD = list(b'{"tool":"shell","cmd":"rm -rf"}') + [256]


def total(lp):
    return sum(lp)


def sample(completion, blp, rollout_id, advantage, group="g"):
    """One rollout: PROMPT then ``completion`` (trained on), its behaviour log-probs ``blp``."""
    return {"rollout_id": rollout_id, "group_id": group, "reward": float(advantage > 0), "advantage": advantage,
            "ids": PROMPT + completion, "loss_mask": [0] * len(PROMPT) + [1] * len(completion),
            "behaviour_logprobs": [0.0] * len(PROMPT) + blp, "token_versions": [-1] * len(PROMPT) + [0] * len(completion)}


def test_train_step_raises_positive_lowers_negative(start_server, ckpt_dir, tmp_path):
    tr = start_server("floe_engine.trainer_server", "--checkpoint", ckpt_dir / "pub" / "v0",
                      "--publish-dir", tmp_path / "pub")
    assert tr.ready["version"] == 0 and tr.get("/health")["version"] == 0
    pairs = [{"prompt_ids": PROMPT, "completion_ids": GOOD}, {"prompt_ids": PROMPT, "completion_ids": BAD}]
    before = tr.post("/logprobs", {"samples": pairs})["logprobs"]
    samples = [sample(GOOD, before[0], "r0", 0.5), sample(BAD, before[1], "r1", -0.5)]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join(json.dumps(s) for s in samples))
    cfg = step_config(lr=3e-3)
    r = tr.post("/train_step", {"batch_path": str(batch), "config": cfg})
    assert r["version"] == 1 and r["path"].endswith("v1/model.safetensors")
    assert r["config"] == cfg and r["metrics"]["lr"] == 3e-3  # the settings the step applied
    m = r["metrics"]
    assert m["samples"] == 2 and m["tokens"] == len(GOOD) + len(BAD)
    assert m["mismatch_mean_abs_logprob"] < 1e-5 and abs(m["mismatch_kl"]) < 1e-6  # on-policy batch
    assert m["clip_fraction"] == 0 and m["grad_norm"] > 0 and m["entropy"] > 0
    assert m["train_ms"] > 0 and m["publish_ms"] > 0
    after = tr.post("/logprobs", {"samples": pairs})["logprobs"]
    assert total(after[0]) > total(before[0]) + 0.5  # positive advantage: more likely
    assert total(after[1]) < total(before[1]) - 0.5  # negative advantage: less likely
    assert tr.get("/health")["version"] == 1
    assert "floe_trainer_steps_total 1" in tr.get("/metrics", raw=True)

    # an inline batch with an explicit negative advantage, truncated-IS mode, stale behaviour log-probs
    r2 = tr.post("/train_step", {"samples": [dict(samples[0], advantage=-1.0)],
                                 "config": step_config(lr=3e-3, ratio_mode="truncate", truncate_cap=2.0)})
    assert r2["version"] == 2 and r2["metrics"]["mismatch_mean_abs_logprob"] > 1e-3
    after2 = tr.post("/logprobs", {"samples": pairs[:1]})["logprobs"]
    assert total(after2[0]) < total(after[0])

    # engines load what the trainer published and score it the same way
    eng = start_server("floe_engine.inference_server", "--checkpoint", ckpt_dir / "pub" / "v0")
    up = eng.post("/update_weights", {"path": r2["path"], "version": 2})
    assert up["version"] == 2
    e = eng.post("/logprobs", {"samples": pairs})
    assert e["version"] == 2
    t = tr.post("/logprobs", {"samples": pairs})["logprobs"]
    assert max(abs(a - b) for x, y in zip(e["logprobs"], t) for a, b in zip(x, y)) < 1e-5
    # and the engine's sampled-token log-probs (cached decode) match the trainer's full forward
    c = eng.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 40, "seed": 1, "ignore_eos": True})["choices"][0]
    t = tr.post("/logprobs", {"samples": [{"prompt_ids": PROMPT, "completion_ids": c["token_ids"]}]})["logprobs"][0]
    assert max(abs(a - b) for a, b in zip(c["logprobs"]["token_logprobs"], t)) < 1e-4

    # one rollout per row: {ids, loss_mask, behaviour_logprobs, token_versions} from a .jsonl batch
    ids = PROMPT + c["token_ids"]
    mask = [0] * len(PROMPT) + [1] * len(c["token_ids"])
    row = {"rollout_id": "r2", "group_id": "h", "reward": 1.0, "advantage": 1.0, "ids": ids, "loss_mask": mask,
           "behaviour_logprobs": [0.0] * len(PROMPT) + c["logprobs"]["token_logprobs"],
           "token_versions": [-1] * len(PROMPT) + c["weight_versions"]}
    assert tr.post("/logprobs", {"samples": [{"ids": ids, "loss_mask": mask}]})["logprobs"][0] == t
    batch.write_text(json.dumps(row) + "\n")
    r3 = tr.post("/train_step", {"batch_path": str(batch), "config": cfg})
    m = r3["metrics"]
    assert r3["version"] == 3 and m["masked_tokens"] == 40 and m["sequence_tokens"] == len(ids)
    assert m["staleness_mean"] == m["staleness_max"] == 0 and m["mismatch_mean_abs_logprob"] < 1e-4


def test_train_step_rejects_bad_batches(start_server, ckpt_dir, tmp_path):
    tr = start_server("floe_engine.trainer_server", "--checkpoint", ckpt_dir / "pub" / "v0",
                      "--publish-dir", tmp_path / "pub")
    row, cfg = sample(GOOD, [-5.5] * len(GOOD), "r0", 1.0), step_config()
    err = tr.post("/train_step", {"samples": [dict(row, behaviour_logprobs=[0.0])], "config": cfg}, expect=400)
    assert "behaviour_logprobs" in err["error"]["message"]
    old = {"prompt_ids": PROMPT, "completion_ids": GOOD, "behaviour_logprobs": [0.0] * len(GOOD), "reward": 1}
    err = tr.post("/train_step", {"samples": [old], "config": cfg}, expect=400)
    assert "prompt_ids/completion_ids rows are not read" in err["error"]["message"]
    # the config comes whole from the run config: no field missing, none unknown
    err = tr.post("/train_step", {"samples": [row], "config": dict(cfg, nope=1)}, expect=400)
    assert "unknown field(s) ['nope']" in err["error"]["message"]
    no_lr = {k: v for k, v in cfg.items() if k != "lr"}
    err = tr.post("/train_step", {"samples": [row], "config": no_lr}, expect=400)
    assert "missing field(s) ['lr']" in err["error"]["message"]
    err = tr.post("/train_step", {"samples": [row]}, expect=400)
    assert "config" in err["error"]["message"]
    tr.post("/train_step", {}, expect=400)
    err = tr.post("/train_step", {"samples": [row, dict(row, loss_mask=row["loss_mask"][:-1])], "config": cfg},
                  expect=400)
    assert "sample 1: loss_mask has" in err["error"]["message"]
    long = dict(row, ids=[9] * 2000, loss_mask=[0] + [1] * 1999, behaviour_logprobs=[0.0] * 2000,
                token_versions=[0] * 2000)
    err = tr.post("/train_step", {"samples": [long], "config": cfg}, expect=400)
    assert "2000 tokens" in err["error"]["message"] and "context 1024" in err["error"]["message"]
    h = tr.get("/health")
    assert h["version"] == 0 and h["tokenizer"]["name"] == "byte" and h["vocab_size"] == 259
