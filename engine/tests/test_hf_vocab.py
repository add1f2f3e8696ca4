"""hf: policies on a real (here: small, trained-in-the-test BPE) vocabulary: ids are the
tokenizer's, the head covers the model's whole output layer, the engine stops on the
tokenizer's end-of-turn token, checkpoints record the tokenizer. Skipped without transformers."""
import json
import math

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import torch  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine import sft  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.tokenizer import load_tokenizer  # noqa: E402

SPEC = ("hf:qwen3:hidden_size=64,num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,head_dim=32,"
        "intermediate_size=128,max_position_embeddings=1024")


def turns(tok):
    """A two-turn trajectory: prompt, model turn, tool output, model turn (each turn ends with <|im_end|>)."""
    e = tok.eos_token_id
    prompt = tok.encode("<|im_start|>user\nfix the parser in file x1<|im_end|>\n<|im_start|>assistant\n")
    gen1 = tok.encode("call edit path parser") + [e]
    tool = tok.encode("\n<|im_start|>user\nresult ok<|im_end|>\n<|im_start|>assistant\n")
    gen2 = tok.encode("done") + [e]
    return prompt, gen1, tool, gen2


def test_hf_policy_vocab_and_special_ids_come_from_the_tokenizer(bpe_dir):
    tok = load_tokenizer(bpe_dir)
    assert tok.kind == "hf" and 1000 < tok.vocab_size < 5000 and tok.eos_token_id == 2
    pol, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32")
    assert pol.tokenizer is tok
    assert pol.vocab_size == -(-tok.vocab_size // 64) * 64 and pol.vocab_size % 64 == 0
    c = pol.module.config
    assert (c.eos_token_id, c.pad_token_id, c.bos_token_id) == (tok.eos_token_id, tok.pad_token_id, None)
    d = pol.config_dict()
    assert d["hf_config"]["vocab_size"] == pol.vocab_size and d["tokenizer"] == tok.describe()
    be = pol.make_backend(2)
    assert be.add("a", [1, 300, 400]).shape == (pol.vocab_size,)  # the full output layer, no cut to 259
    # vocab_size below the tokenizer's is refused, naming both numbers
    with pytest.raises(ValueError, match=f"vocab_size 1000 .*{tok.vocab_size}"):
        build_policy(SPEC + ",vocab_size=1000", tokenizer=bpe_dir)
    # the byte tokenizer still works for hf specs: 259 ids padded to 320
    byte_pol, _ = build_policy(SPEC, dtype="fp32")
    assert byte_pol.vocab_size == 320 and byte_pol.module.config.eos_token_id == 256
    # the tiny model runs the byte tokenizer only
    with pytest.raises(ValueError, match="byte tokenizer"):
        build_policy("tiny", tokenizer=bpe_dir)


def test_checkpoint_records_the_tokenizer_and_a_mismatch_is_refused(bpe_dir, tmp_path):
    tok = load_tokenizer(bpe_dir)
    pol, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32", seed=4)
    path = ckpt.publish(pol.state_dict(), str(tmp_path), 0, pol.config_dict())
    assert ckpt.read_meta(path)["config"]["tokenizer"]["name"] == tok.name
    again, _ = build_policy(SPEC, str(tmp_path / "v0"), tokenizer=bpe_dir, dtype="fp32")
    assert again.weights_digest() == pol.weights_digest() and again.vocab_size == pol.vocab_size
    with pytest.raises(ValueError, match=f"{tok.name}.*{tok.vocab_size}.*'byte'.*259"):
        build_policy(SPEC, str(tmp_path / "v0"), dtype="fp32")  # started with the byte tokenizer


def test_head_runs_only_on_scored_positions_and_chunks_agree(bpe_dir):
    pol, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32", seed=1)
    rows_seen = []
    head = pol._head

    def spy(h):
        rows_seen.append(h.shape[0])
        return head(h)

    pol._head = spy
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, 1200, (60,), generator=g).tolist()
    comp = torch.randint(3, 1200, (7,), generator=g).tolist()
    full = pol.token_logprobs([(prompt, comp)])[0][0]
    assert rows_seen == [7]  # not 67 (the whole sequence)
    rows_seen.clear()
    ids = prompt + comp
    mask = [0] * 60 + [1, 0, 1, 1, 0, 0, 1]
    lp = pol.masked_logprobs([(ids, mask)])[0][0]
    assert rows_seen == [4] and torch.allclose(lp, full[[0, 2, 3, 6]], atol=1e-6)
    # chunked head (checkpointed under grad) == one chunk, values and gradients
    pol._head = head

    def run(chunk):
        pol.head_chunk_elements = chunk
        pol.module.zero_grad()
        lp, ent = pol.masked_logprobs([(ids, [0] * 60 + [1] * 7)], grad=True, entropy=True)[0]
        lp.sum().backward()
        return lp.detach(), ent, pol.head.weight.grad.clone()

    a, b = run(1 << 25), run(pol.vocab_size * 2)  # 2 rows per chunk
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-5)


def test_engine_real_vocab_stops_on_im_end_and_matches_trainer(bpe_dir, tmp_path, start_server):
    tok = load_tokenizer(bpe_dir)
    prompt, gen1, tool, gen2 = turns(tok)
    ids = prompt + gen1 + tool + gen2
    mask = [0] * len(prompt) + [1] * len(gen1) + [0] * len(tool) + [1] * len(gen2)
    data = tmp_path / "gold.jsonl"
    data.write_text(json.dumps({"ids": ids, "loss_mask": mask}) + "\n")
    summary = sft.main(["--data", str(data), "--out", str(tmp_path / "w"), "--steps", "40", "--batch-size", "4",
                        "--lr", "1e-2", "--warmup", "5", "--model", SPEC, "--tokenizer", bpe_dir, "--dtype", "fp32",
                        "--log-every", "100"])
    assert summary["masked_rows"] == 1 and summary["greedy_exact_match"] is None and "skipped" in summary["eval"]
    assert summary["loss_curve"][-1] < 0.2 * summary["loss_curve"][0]
    v0 = tmp_path / "w" / "v0"
    eng = start_server("floe_engine.inference_server", "--model", SPEC, "--tokenizer", bpe_dir, "--checkpoint", v0,
                       "--dtype", "fp32", "--max-batch", 4)
    h = eng.get("/health")
    assert h["tokenizer"]["kind"] == "hf" and h["tokenizer"]["name"] == tok.name
    assert h["tokenizer"]["eos_token_id"] == 2 and h["tokenizer"]["stop_token_ids"] == [2]
    assert h["tokenizer"]["special_token_ids"] == [0, 1] and h["tokenizer"]["max_model_len"] == 1024

    # greedy after the trained prompt: the trained turn, stopped by <|im_end|> (kept in token_ids, not in text)
    c = eng.post("/v1/completions", {"prompt": prompt, "max_tokens": 30, "temperature": 0})["choices"][0]
    assert c["token_ids"] == gen1 and c["finish_reason"] == "stop" and c["stop_reason"] is None
    assert c["text"] == "call edit path parser" and c["logprobs"]["tokens"] == [tok.token_text(t) for t in gen1]
    assert max(gen1) >= 259  # real BPE ids, not bytes
    # the same prompt as text is encoded with the tokenizer
    text_prompt = tok.decode(prompt)
    c2 = eng.post("/v1/completions", {"prompt": text_prompt, "max_tokens": 30, "temperature": 0,
                                      "return_token_ids": True})["choices"][0]
    assert c2["prompt_token_ids"] == prompt and c2["token_ids"] == gen1
    t = eng.post("/tokenize", {"prompt": text_prompt})
    assert t["tokens"] == prompt and eng.post("/detokenize", {"tokens": gen1})["prompt"] == tok.decode(gen1)

    # sampling over the whole vocabulary; the trainer's full forward reproduces the behaviour log-probs
    r = eng.post("/v1/completions", {"prompt": prompt + gen1 + tool, "max_tokens": 24, "n": 3, "seed": 7,
                                     "temperature": 1.5, "ignore_eos": True})
    outs = [ch["token_ids"] for ch in r["choices"]]
    assert all(len(o) == 24 for o in outs) and max(max(o) for o in outs) >= 259
    assert all(0 <= t < 1216 for o in outs for t in o)
    trainer_pol, _ = build_policy(SPEC, str(v0), tokenizer=bpe_dir, dtype="fp32", for_training=True)
    head = prompt + gen1 + tool
    for ch in r["choices"]:
        lp = trainer_pol.masked_logprobs([(head + ch["token_ids"], [0] * len(head) + [1] * 24)])[0][0].tolist()
        assert max(abs(a - b) for a, b in zip(lp, ch["logprobs"]["token_logprobs"])) < 1e-4
    # the engine's /logprobs takes masked rows too
    e = eng.post("/logprobs", {"samples": [{"ids": ids, "loss_mask": mask}]})["logprobs"][0]
    want = trainer_pol.masked_logprobs([(ids, mask)])[0][0].tolist()
    assert len(e) == sum(mask) and max(abs(a - b) for a, b in zip(e, want)) < 1e-5
    assert all(math.isfinite(x) for x in e)

    # weights written for another tokenizer are refused, naming both
    byte_pol, _ = build_policy(SPEC, dtype="fp32")
    bad = ckpt.publish(byte_pol.state_dict(), str(tmp_path / "byte"), 1, byte_pol.config_dict())
    err = eng.post("/update_weights", {"path": bad}, expect=400)["error"]["message"]
    assert "'byte' (259 ids)" in err and f"{tok.name!r} ({tok.vocab_size} ids)" in err
    assert eng.get("/health")["version"] == 0
