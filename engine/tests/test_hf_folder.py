"""Published version folders: an hf: policy publishes a Hugging Face model folder (config.json,
generation_config.json, tokenizer files, HF-named safetensors shards + index) that transformers
loads as is; checkpoint.json lists every file's xxh3-128 digest; load / verify_folder / the verify
CLI name the file that does not match; old floe-checkpoint-1 folders still load (sha256 ones:
test_publish.py)."""
import json
import os
import subprocess
import sys

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import torch  # noqa: E402
import xxhash  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine.model import TinyConfig  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from floe_engine.tiny_policy import TinyPolicy  # noqa: E402

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QWEN3_CPU = os.path.join(os.path.dirname(ENGINE_DIR), "configs", "models", "qwen3-cpu.json")  # tied embeddings
SPEC = "hf:" + QWEN3_CPU
TEXT = "def parse(self): return value x7 = y + 14\n"


def weight_bytes(pol) -> int:
    return sum(v.numel() * v.element_size() for v in ckpt._dedupe(pol.state_dict()).values())


def publish_sharded(pol, root, version):
    """Publish with a shard size that forces at least two shards."""
    path = ckpt.publish_policy(pol, str(root), version, max_shard_bytes=weight_bytes(pol) // 2 + 1)
    assert path == os.path.join(str(root), f"v{version}")  # sharded: the publish answers the folder
    return path, path


def flip_byte(path: str, frac: float = 0.6) -> None:
    with open(path, "r+b") as f:
        f.seek(int(os.path.getsize(path) * frac))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))


def verify_cli(folder):
    p = subprocess.run([sys.executable, "-m", "floe_engine.checkpoint", "verify", str(folder)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ENGINE_DIR), timeout=120)
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, p.stdout + p.stderr
    return p.returncode, json.loads(lines[0])


@pytest.fixture(scope="module")
def hf_pol(bpe_dir):
    pol, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32", seed=7)
    return pol


def test_hf_policy_publishes_a_sharded_hugging_face_folder(hf_pol, bpe_dir, tmp_path):
    pol = hf_pol
    path, folder = publish_sharded(pol, tmp_path, 4)
    assert ckpt.published_path(folder) == folder
    names = sorted(os.listdir(folder))
    shards = [n for n in names if n.endswith(".safetensors")]
    assert len(shards) >= 2 and all(n.startswith("model-0000") and f"-of-{len(shards):05d}" in n for n in shards)
    assert ckpt.WEIGHTS not in names
    for n in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", ckpt.INDEX,
              ckpt.SIDECAR):
        assert n in names
    assert not [n for n in names if ".tmp-" in n]

    # the sidecar: floe-checkpoint-3, every other file listed with its xxh3-128 digest and size
    meta = ckpt.read_meta(folder)
    assert meta["format"] == "floe-checkpoint-3" and meta["version"] == 4 and meta["layout"] == "hf"
    assert meta["checksum"] == "xxh3-128"
    assert "sha256" not in meta  # only a single model.safetensors keeps the old top-level digest
    assert meta["config"] == pol.config_dict()
    assert sorted(meta["files"]) == sorted(n for n in names if n != ckpt.SIDECAR)
    for n, rec in meta["files"].items():
        with open(os.path.join(folder, n), "rb") as f:
            data = f.read()
        assert rec == {"xxh3_128": xxhash.xxh3_128(data).hexdigest(), "bytes": len(data)}
    assert meta["weights"] == [ckpt.INDEX] + shards
    assert meta["bytes"] == sum(meta["files"][s]["bytes"] for s in shards)
    assert ckpt.verify_folder(folder) == {"files": len(meta["files"]),
                                          "bytes": sum(r["bytes"] for r in meta["files"].values())}

    # parameter names: exactly the transformers module's state_dict names, tied output embedding
    # left out, the same set transformers' own save_pretrained writes
    with open(os.path.join(folder, ckpt.INDEX)) as f:
        weight_map = json.load(f)["weight_map"]
    own = set(pol.module.state_dict())
    assert pol.module.config.tie_word_embeddings and "lm_head.weight" in own
    assert set(weight_map) == own - {"lm_head.weight"}
    ref = tmp_path / "save_pretrained"
    pol.module.save_pretrained(str(ref))
    from safetensors import safe_open
    with safe_open(str(ref / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(weight_map)
    assert sorted(set(weight_map.values())) == shards

    # transformers loads the folder as is and computes the same logits
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.dtype == torch.float32
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied
    ids = torch.tensor([pol.tokenizer.encode(TEXT)])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, pol.module(ids).logits)
    # ... and the tokenizer
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    assert tok.encode(TEXT, add_special_tokens=False) == pol.tokenizer.encode(TEXT)
    assert tok.eos_token == "<|im_end|>" and tok.convert_tokens_to_ids("<|im_end|>") == pol.tokenizer.eos_token_id
    cfg = json.load(open(os.path.join(folder, "config.json")))
    assert cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["vocab_size"] == pol.vocab_size
    assert cfg["eos_token_id"] == pol.tokenizer.eos_token_id

    # floe reads it back: the state dict, and a policy (also from the index path or a shard path)
    meta2, sd = ckpt.load(folder)
    assert meta2 == meta and set(sd) == set(weight_map)
    for p in (folder, os.path.join(folder, ckpt.INDEX), os.path.join(folder, shards[-1])):
        again, version = build_policy(SPEC, p, tokenizer=bpe_dir, dtype="fp32")
        assert version == 4 and again.weights_digest() == pol.weights_digest()


def test_publish_dtype_single_shard_and_qwen_tokenizer_files(tmp_path, tmp_path_factory, request):
    """Under the shard size: one model.safetensors (+ the top-level sha256); the written dtype is the
    one config.json names; a Qwen tokenizer folder's files and stop ids come along."""
    from test_tokenizer_build import build_qwen_folder
    qwen_dir = str(build_qwen_folder(tmp_path_factory, request))
    pol, _ = build_policy("hf:qwen3:hidden_size=16,num_hidden_layers=1,num_attention_heads=2,num_key_value_heads=1,"
                          "head_dim=8,intermediate_size=32,max_position_embeddings=512,tie_word_embeddings=true",
                          tokenizer=qwen_dir, dtype="fp32", seed=1)
    path = ckpt.publish_policy(pol, str(tmp_path), 0, dtype=torch.bfloat16)
    folder = os.path.dirname(path)
    assert path.endswith(os.path.join("v0", ckpt.WEIGHTS))
    meta = ckpt.read_meta(folder)
    assert meta["weights"] == [ckpt.WEIGHTS] and "xxh3_128" in meta["files"][ckpt.WEIGHTS]
    assert "sha256" not in meta  # the floe-checkpoint-1 field is written only for a sha256 checksum
    for n in ("chat_template.jinja", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"):
        assert n in meta["files"]
        with open(os.path.join(qwen_dir, n), "rb") as a, open(os.path.join(folder, n), "rb") as b:
            assert a.read() == b.read()
    assert "floe_build.json" not in meta["files"]
    gen = json.load(open(os.path.join(folder, "generation_config.json")))
    assert gen["eos_token_id"] == pol.tokenizer.stop_token_ids and len(gen["eos_token_id"]) == 2
    assert not ({"temperature", "top_p", "top_k"} & set(gen))  # no sampling defaults for engines to apply
    assert json.load(open(os.path.join(folder, "config.json")))["dtype"] == "bfloat16"
    model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    assert model.dtype == torch.bfloat16
    ref = {k: v.to(torch.bfloat16) for k, v in pol.module.state_dict().items()}
    assert all(torch.equal(v, ref[k]) for k, v in model.state_dict().items())
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    assert tok.encode(TEXT, add_special_tokens=False) == pol.tokenizer.encode(TEXT)
    assert tok.chat_template == pol.tokenizer.chat_template


def test_a_flipped_byte_is_caught_naming_the_file(hf_pol, tmp_path):
    path, folder = publish_sharded(hf_pol, tmp_path, 1)
    shards = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))
    code, out = verify_cli(folder)
    assert code == 0 and out["ok"] and out["files"] == len(ckpt.read_meta(folder)["files"]) and out["version"] == 1
    bad = os.path.join(folder, shards[1])
    flip_byte(bad)
    for fn in (lambda: ckpt.load(folder), lambda: ckpt.load(os.path.join(folder, ckpt.INDEX)),
               lambda: ckpt.load(bad), lambda: ckpt.verify_folder(folder)):
        with pytest.raises(ValueError, match=f"{shards[1]}: xxh3-128 .* does not match checkpoint.json"):
            fn()
    code, out = verify_cli(folder)
    assert code == 1 and not out["ok"] and shards[1] in out["error"] and "xxh3-128" in out["error"]
    meta, sd = ckpt.load(folder, verify=False)  # asked not to check: reads what is there
    assert set(sd) == set(json.load(open(os.path.join(folder, ckpt.INDEX)))["weight_map"])

    # every listed file counts, not only the weights; a missing file or a truncated one is named too
    _, folder2 = publish_sharded(hf_pol, tmp_path / "b", 2)
    flip_byte(os.path.join(folder2, "tokenizer.json"), 0.5)
    with pytest.raises(ValueError, match="tokenizer.json: xxh3-128"):
        ckpt.load(folder2)
    _, folder3 = publish_sharded(hf_pol, tmp_path / "c", 3)
    os.remove(os.path.join(folder3, "config.json"))
    with pytest.raises(ValueError, match="config.json: listed in checkpoint.json but missing"):
        ckpt.verify_folder(folder3)
    _, folder4 = publish_sharded(hf_pol, tmp_path / "d", 4)
    with open(os.path.join(folder4, shards[0]), "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match=f"{shards[0]}: .* bytes but checkpoint.json says"):
        ckpt.load(folder4)


def test_tiny_policy_keeps_one_file_now_with_files(tmp_path):
    pol = TinyPolicy(TinyConfig(d_model=32, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=2)
    path = ckpt.publish_policy(pol, str(tmp_path), 5)
    folder = os.path.dirname(path)
    assert path.endswith(os.path.join("v5", ckpt.WEIGHTS)) and sorted(os.listdir(folder)) == [ckpt.SIDECAR,
                                                                                              ckpt.WEIGHTS]
    meta = ckpt.read_meta(path)
    assert meta["format"] == "floe-checkpoint-3" and meta["layout"] == "floe" and meta["checksum"] == "xxh3-128"
    assert list(meta["files"]) == [ckpt.WEIGHTS] and set(meta["files"][ckpt.WEIGHTS]) == {"xxh3_128", "bytes"}
    assert meta["bytes"] == os.path.getsize(path)
    assert ckpt.verify_folder(folder) == {"files": 1, "bytes": os.path.getsize(path)}
    loaded, v = build_policy("tiny", folder)
    assert v == 5 and loaded.weights_digest() == pol.weights_digest()


def write_v1(pol, folder, version) -> str:
    """A folder as floe wrote it before floe-checkpoint-2: model.safetensors + {sha256, bytes}."""
    os.makedirs(folder)
    weights = os.path.join(folder, "model.safetensors")
    save_file(ckpt._dedupe(pol.state_dict()), weights, metadata={"format": "pt", "floe_version": str(version)})
    with open(os.path.join(folder, "checkpoint.json"), "w") as f:
        json.dump({"format": "floe-checkpoint-1", "version": version, "config": pol.config_dict(),
                   "sha256": ckpt.sha256_file(weights), "bytes": os.path.getsize(weights), "created_unix": 0}, f)
    return folder


def test_old_format_checkpoints_still_load(hf_pol, bpe_dir, tmp_path):
    tiny = TinyPolicy(TinyConfig(d_model=32, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=3)
    old = write_v1(tiny, str(tmp_path / "tiny" / "v2"), 2)
    loaded, v = build_policy("tiny", old)
    assert v == 2 and loaded.weights_digest() == tiny.weights_digest()
    assert ckpt.verify_folder(old) == {"files": 1, "bytes": os.path.getsize(os.path.join(old, ckpt.WEIGHTS))}
    code, out = verify_cli(old)
    assert code == 0 and out["format"] == "floe-checkpoint-1" and out["files"] == 1
    old_hf = write_v1(hf_pol, str(tmp_path / "hf" / "v6"), 6)  # HF policies used the same one-file layout
    again, v = build_policy(SPEC, old_hf, tokenizer=bpe_dir, dtype="fp32")
    assert v == 6 and again.weights_digest() == hf_pol.weights_digest()
    flip_byte(os.path.join(old, ckpt.WEIGHTS))
    with pytest.raises(ValueError, match="model.safetensors: sha256"):
        ckpt.load(old)
    code, out = verify_cli(old)
    assert code == 1 and "model.safetensors" in out["error"]
    code, out = verify_cli(tmp_path)  # not a version folder
    assert code == 1 and "no checkpoint.json" in out["error"]


def test_engine_loads_sharded_and_old_folders(start_server, hf_pol, bpe_dir, tmp_path):
    """The reference engine starts from a sharded folder and swaps in others through /update_weights
    and /collective_rpc floe_load_folder; the per-token versions follow."""
    _, v0 = publish_sharded(hf_pol, tmp_path, 0)
    other, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32", seed=8)
    _, v1 = publish_sharded(other, tmp_path, 1)
    old = write_v1(hf_pol, str(tmp_path / "v2"), 2)
    eng = start_server("floe_engine.inference_server", "--model", SPEC, "--tokenizer", bpe_dir, "--checkpoint", v0,
                       "--dtype", "fp32")
    assert eng.ready["version"] == 0
    body = {"prompt": TEXT, "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    assert eng.post("/v1/completions", body)["choices"][0]["weight_versions"] == [0] * 5
    r = eng.post("/update_weights", {"path": v1})
    assert r["ok"] and r["version"] == 1
    assert eng.post("/v1/completions", body)["choices"][0]["weight_versions"] == [1] * 5
    r = eng.post("/collective_rpc", {"method": "floe_load_folder", "args": [old]})["results"][0]
    assert r["version"] == 2 and r["files"] == 1
    assert eng.post("/v1/completions", body)["choices"][0]["weight_versions"] == [2] * 5
    flip_byte(os.path.join(v1, sorted(n for n in os.listdir(v1) if n.endswith(".safetensors"))[0]))
    err = eng.post("/collective_rpc", {"method": "floe_load_folder", "args": [v1]}, expect=400)
    assert "model-00001-of-" in err["error"]["message"] and "xxh3-128" in err["error"]["message"]
    assert eng.get("/health")["version"] == 2  # the bad folder changed nothing
