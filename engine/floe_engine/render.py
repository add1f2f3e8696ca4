"""Chat rendering for floe's workers: messages -> the token ids a policy sees.

Rollouts are token-exact: the ids the model generated are kept as they are, and only the
text between model turns (tool results, the next assistant header) is rendered and
appended. ``continuation`` computes that bridge from two renderings of the chat template,
so a template that is prefix-stable gives the same ids as rendering the whole chat again
(``full``), which callers compare to detect drift.

Rendering mirrors transformers' ``apply_chat_template`` (same Jinja environment, filters,
globals and variables) so a tokenizer folder's template renders here as it does there, but
without importing transformers: the render server starts once per worker and must start fast.
"""
from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime
from typing import Dict, List, Optional

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .tokenizer import BYTE_SPECIAL_TEXTS, load_tokenizer

# The named special tokens transformers passes to every template (its SPECIAL_TOKENS_ATTRIBUTES).
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class _Generation(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}`` renders its body, as in transformers when no
    assistant mask is asked for; without it such templates would not even parse."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


class _Namespace(jinja2.utils.Namespace):
    """transformers' namespace: no underscore attributes, so templates cannot reach internals."""

    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}.")


class _Dict:
    """``dict(...)`` in templates without handing them the type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes <, >, & and ' for HTML, which would change what the model sees.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def compile_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=lambda fmt: datetime.now().strftime(fmt),
                       dict=_Dict(), namespace=_Namespace)
    return env.from_string(source)


def _messages(messages: List[dict]) -> List[dict]:
    """What apply_chat_template hands the template: None-valued keys dropped (APIs send
    ``content: null``), and reasoning under each name templates read it by."""
    out = []
    for m in messages:
        if not isinstance(m, dict):
            raise ValueError(f"a message must be an object with role and content, got {m!r}")
        m = {k: v for k, v in m.items() if v is not None}
        reasoning = next((m[k] for k in REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def _special_token_texts(tok) -> Dict[str, str]:
    if tok.kind == "byte":
        names = {v: k for k, v in BYTE_SPECIAL_TEXTS.items()}
        return {"eos_token": names[tok.eos_token_id], "bos_token": names[tok.bos_token_id],
                "pad_token": names[tok.pad_token_id]}
    out = {}
    for name in SPECIAL_TOKEN_NAMES:
        t = tok.config.get(name)
        t = t.get("content") if isinstance(t, dict) else t
        if isinstance(t, str):
            out[name] = t
    return out


class Renderer:
    """One tokenizer and one chat template, kept together: the ids are only right for the
    pair the policy was trained with, so the template's hash is part of ``info()``."""

    def __init__(self, tokenizer_spec: str, chat_template: Optional[str] = None):
        self.tokenizer = load_tokenizer(tokenizer_spec)
        if chat_template:
            with open(chat_template, encoding="utf-8") as f:
                source = f.read()
            self.template_name = os.path.abspath(chat_template)
        else:
            source = self.tokenizer.chat_template
            self.template_name = "tokenizer"
            if not source:
                raise ValueError(f"tokenizer {tokenizer_spec or 'byte'!r} has no chat template; pass one "
                                 "(policy.chat_template / --chat-template), e.g. configs/templates/plain.jinja "
                                 "for the byte tokenizer or configs/templates/qwen3.jinja for Qwen")
        self.template_sha256 = hashlib.sha256(source.encode("utf-8")).hexdigest()
        self.template = compile_template(source)
        self.variables = _special_token_texts(self.tokenizer)
        self.eos_token = self.tokenizer.eos_token

    def info(self) -> dict:
        return {**self.tokenizer.describe(), "template": self.template_name, "template_sha256": self.template_sha256}

    def render(self, messages: List[dict], tools: Optional[List[dict]] = None,
               add_generation_prompt: bool = False) -> str:
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
            raise ValueError("tools must be a list of JSON schemas (objects)")
        return self.template.render(messages=_messages(messages), tools=tools, documents=None,
                                    add_generation_prompt=add_generation_prompt, **self.variables)

    def _encoded(self, text: str) -> dict:
        return {"ids": self.tokenizer.encode(text), "text": text}

    def start(self, messages: List[dict], tools: Optional[List[dict]] = None) -> dict:
        return self._encoded(self.render(messages, tools, add_generation_prompt=True))

    def full(self, messages: List[dict], tools: Optional[List[dict]] = None) -> dict:
        """The whole chat rendered at once: what the token concatenation must equal (the same
        text as ``start``; a separate name because callers use it for a different question)."""
        return self.start(messages, tools)

    def continuation(self, messages: List[dict], tools: Optional[List[dict]] = None) -> dict:
        """The ids after the model's last turn (which ended with EOS) up to and including the
        next assistant header: what the model did not write but must see next.

        The messages after the last assistant turn (normally its tool results) are the new
        ones. The bridge is the tail of the assistant turn's rendering after its EOS text plus
        whatever the new messages add, so it holds exactly when the template is prefix-stable.
        """
        if not isinstance(messages, list):
            raise ValueError("messages must be a list")
        last = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
                   default=None)
        if last is None or last == len(messages) - 1:
            raise ValueError("continuation needs an assistant turn followed by new messages (its tool results)")
        if self.eos_token is None:
            raise ValueError("the tokenizer has no eos_token text to find the end of the assistant turn")
        head = self.render(messages[:last], tools, add_generation_prompt=True) if last else ""
        a = self.render(messages[:last + 1], tools)
        b = self.render(messages, tools, add_generation_prompt=True)
        if not a.startswith(head) or not b.startswith(a):
            raise ValueError("the template is not prefix-stable for this conversation: rendering it with the new "
                             "messages changes text already rendered, so the model's tokens cannot be extended")
        end = a.rfind(self.eos_token, len(head))
        if end < 0:
            raise ValueError(f"the template does not end the assistant turn with {self.eos_token!r}, the token "
                             "the model stops on")
        return self._encoded(a[end + len(self.eos_token):] + b[len(a):])

    def assistant_ids(self, text: str) -> List[int]:
        """A gold completion as the model would have produced it: its text, then EOS."""
        if not isinstance(text, str):
            raise ValueError("text must be a string")
        return self.tokenizer.encode(text) + [self.tokenizer.eos_token_id]

    def decode(self, ids: List[int]) -> str:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ValueError("ids must be a list of integers")
        return self.tokenizer.decode(ids)
