"""Continuous batching: one scheduler thread owns the model and all caches.

HTTP handler threads only enqueue work (``submit``) or commands (weight
update, abort, prefix-cache reset) and wait on events. Each scheduler step:
  1. runs queued commands (so they happen between steps, also while paused);
  2. admits waiting sequences up to ``max_batch``: prefill, then the first
     token is sampled from the prefill's logits;
  3. runs one batched decode step for every active sequence.
A weight update swaps the weights and recomputes the cache of every active
sequence under them before the next token, so every token records the
weight version that actually produced it.

Tokens are the policy's tokenizer's (``policy.tokenizer``): a sequence stops on
any of its ``stop_token_ids`` (unless ``ignore_eos``), the returned text is its
``decode`` of the generated ids (less a final stop token; special tokens kept as
their text) and ``logprobs.tokens`` are its ``token_text``. Stop strings are
matched on text decoded incrementally (a window of recent tokens, re-decoded until
it no longer ends in an incomplete UTF-8 character), so their cost does not grow
with the length of the output.
"""
from __future__ import annotations

import collections
import random
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Sequence

import torch

from . import tokenizer
from .policy import Policy
from .sampling import SamplingParams, sample


@dataclass
class Seq:
    key: str
    request: "Request"
    index: int
    prompt: List[int]
    params: SamplingParams
    rng: random.Random
    out: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    versions: List[int] = field(default_factory=list)
    text: str = ""  # incrementally decoded text (kept only when the request has stop strings)
    prefix_off: int = 0  # out[prefix_off:read_off] is the decoded window text[-len(window):] came from
    read_off: int = 0
    text_end: Optional[int] = None  # where the returned text stops (before a stop string)
    stop_token_end: bool = False  # the last token is a tokenizer stop token (left out of the text)
    finish_reason: Optional[str] = None
    stop_reason: object = None
    abort: bool = False


@dataclass
class Request:
    id: str
    prompt: List[int]
    params: SamplingParams
    n: int
    created: float
    seqs: List[Seq] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    remaining: int = 0
    error: Optional[str] = None


class Engine:
    def __init__(self, policy: Policy, version: int = 0, max_batch: int = 8, seed: int = 0,
                 model_name: str = "floe-tiny"):
        self.policy = policy
        self.version = version
        self.max_batch = max_batch
        self.seed = seed
        self.model_name = model_name
        self.tokenizer = policy.tokenizer
        self.stop_ids = frozenset(int(t) for t in self.tokenizer.stop_token_ids)
        self.backend = policy.make_backend(max_batch)
        self.cv = threading.Condition()
        self.waiting: Deque[Seq] = collections.deque()
        self.active: List[Seq] = []
        self.admitting: List[Seq] = []  # popped from waiting, being prefilled
        self.requests: Dict[str, Request] = {}
        self.commands: List[Callable[[], None]] = []
        self.paused = False
        self.in_step = False
        self.stopping = False
        self.request_counter = 0
        self.counters = collections.Counter()
        self.thread = threading.Thread(target=self._loop, name="floe-scheduler", daemon=True)

    # ------------------------------------------------------------------ client API
    def start(self) -> "Engine":
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.thread.join(timeout=5)

    def submit(self, prompt, params: SamplingParams, n: int = 1,
               request_id: Optional[str] = None) -> Request:
        """``prompt``: token ids (validated against the model's vocabulary) or a string (encoded
        with the tokenizer). An empty prompt becomes [BOS] (an error if the tokenizer has none)."""
        params.validate()
        if isinstance(prompt, str):
            prompt = self.tokenizer.encode(prompt)
        prompt = list(prompt)
        if not prompt:
            if self.tokenizer.bos_token_id is None:
                raise ValueError(f"the prompt is empty and tokenizer {self.tokenizer.name!r} has no BOS token "
                                 "to start from; send at least one token")
            prompt = [self.tokenizer.bos_token_id]
        tokenizer.validate_ids(prompt, self.policy.vocab_size)
        tokenizer.validate_ids(params.stop_token_ids, self.policy.vocab_size)
        if len(prompt) > self.policy.context:
            raise ValueError(f"prompt has {len(prompt)} tokens; the model context is {self.policy.context}")
        if n < 1:
            raise ValueError("n must be >= 1")
        with self.cv:
            self.request_counter += 1
            rid = request_id or f"cmpl-{uuid.uuid4().hex[:24]}"
            if rid in self.requests:
                raise ValueError(f"request id {rid!r} is already running")
            base_seed = params.seed if params.seed is not None else (self.seed * 1_000_003 + self.request_counter)
            req = Request(rid, prompt, params, n, time.time(), remaining=n)
            for i in range(n):
                req.seqs.append(Seq(f"{rid}/{i}", req, i, prompt, params, random.Random(base_seed + i)))
            self.requests[rid] = req
            self.waiting.extend(req.seqs)
            self.counters["prompt_tokens"] += len(prompt) * n
            self.cv.notify_all()
        return req

    def abort(self, request_ids: Optional[Sequence[str]] = None) -> int:
        """Finish matching requests with finish_reason 'abort' (all when ids is None)."""
        with self.cv:
            wanted = None if request_ids is None else set(request_ids)
            hit = 0
            for s in list(self.waiting):
                if wanted is None or s.request.id in wanted:
                    self.waiting.remove(s)
                    self._finish(s, "abort")
                    hit += 1
            for s in self.active + self.admitting:
                if (wanted is None or s.request.id in wanted) and s.finish_reason is None:
                    s.abort = True
                    hit += 1
        self._run_command(self._reap_aborted)
        return hit

    def pause(self) -> None:
        """Stop scheduling steps; returns once the step in progress (if any) has ended."""
        with self.cv:
            self.paused = True
            while self.in_step:
                self.cv.wait()

    def resume(self) -> None:
        with self.cv:
            self.paused = False
            self.cv.notify_all()

    def update_weights(self, state_dict: Dict[str, torch.Tensor], version: int,
                       timings: Optional[dict] = None, keep_cache: bool = False) -> int:
        """Swap weights between steps and rebuild every active sequence's cache; returns how many.
        ``keep_cache`` (floe's recipe.cacheRebuild off): swap only; running sequences go on from
        the K/V the old weights computed and the prefix cache keeps its entries (returns 0)."""
        result = {}

        def swap():
            t0 = time.perf_counter()
            self.policy.load_state_dict(state_dict)
            self.version = int(version)
            t1 = time.perf_counter()
            live = {} if keep_cache else {s.key: (s.prompt + s.out)[:-1] for s in self.active}
            if not keep_cache:
                self.backend.rebuild(live)
            if self.policy.device.type == "cuda":
                torch.cuda.synchronize()
            if timings is not None:
                timings.update(swap_ms=round((t1 - t0) * 1e3, 1),
                               rebuild_ms=round((time.perf_counter() - t1) * 1e3, 1))
            result["rebuilt"] = len(live)
            self.counters["weight_updates"] += 1
            self.counters["rebuilt_sequences"] += len(live)

        self._run_command(swap)
        return result.get("rebuilt", 0)

    def reset_prefix_cache(self) -> int:
        result = {}
        self._run_command(lambda: result.__setitem__("n", self.backend.reset_prefix_cache()))
        return result.get("n", 0)

    def stats(self) -> dict:
        with self.cv:
            return {"running": len(self.active), "waiting": len(self.waiting), "paused": self.paused,
                    "version": self.version, **self.counters}

    # ------------------------------------------------------------------ scheduler
    def _run_command(self, fn: Callable[[], None]) -> None:
        done = threading.Event()
        err: List[BaseException] = []

        def wrapped():
            try:
                fn()
            except BaseException as e:  # surfaced to the caller
                err.append(e)
            finally:
                done.set()

        with self.cv:
            if threading.current_thread() is self.thread:
                wrapped()
            else:
                self.commands.append(wrapped)
                self.cv.notify_all()
        done.wait()
        if err:
            raise err[0]

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.stopping and not self.commands and (
                        self.paused or (not self.active and not self.waiting)):
                    self.cv.wait()
                if self.stopping:
                    return
                commands, self.commands = self.commands, []
                self.in_step = True
            try:
                for c in commands:
                    c()
                if not self.paused:
                    self._step()
            except Exception as e:  # keep serving: fail what was in flight, log why
                traceback.print_exc(file=sys.stderr)
                with self.cv:
                    for s in list(self.active) + list(self.admitting):
                        s.request.error = f"{type(e).__name__}: {e}"
                        self._finish(s, "abort")
                    self.admitting.clear()
            finally:
                with self.cv:
                    self.in_step = False
                    self.cv.notify_all()

    def _step(self) -> None:
        with self.cv:
            while self.waiting and len(self.active) + len(self.admitting) < self.max_batch:
                self.admitting.append(self.waiting.popleft())
            admit = list(self.admitting)
        for s in admit:
            logits = self.backend.add(s.key, s.prompt)
            with self.cv:
                self.active.append(s)
                self.admitting.remove(s)
            tok, lp = sample(logits[None], [s.params.temperature], [s.params.top_p], [s.rng])
            self._append(s, tok[0], lp[0])
        seqs = [s for s in self.active if s.finish_reason is None]
        if not seqs:
            return
        logits = self.backend.step([s.key for s in seqs], [s.out[-1] for s in seqs])
        toks, lps = sample(logits, [s.params.temperature for s in seqs], [s.params.top_p for s in seqs],
                           [s.rng for s in seqs])
        self.counters["decode_steps"] += 1
        for s, t, lp in zip(seqs, toks, lps):
            self._append(s, t, lp)

    def _detok(self, s: Seq) -> int:
        """Extend ``s.text`` with the newly decodable text; return its length before."""
        before = len(s.text)
        window = self.tokenizer.decode(s.out[s.prefix_off:s.read_off])
        full = self.tokenizer.decode(s.out[s.prefix_off:])
        # hold back while the text ends in an incomplete UTF-8 character, but not for more than
        # 4 tokens (no character needs more: what is still U+FFFD then is invalid for good)
        if len(full) > len(window) and (not full.endswith("\ufffd") or len(s.out) - s.read_off >= 4):
            s.text += full[len(window):]
            s.prefix_off, s.read_off = s.read_off, len(s.out)
        return before

    def _append(self, s: Seq, tok: int, lp: float) -> None:
        p = s.params
        s.out.append(tok)
        s.logprobs.append(lp)
        s.versions.append(self.version)
        self.counters["generation_tokens"] += 1
        reason = stop_reason = None
        if tok in self.stop_ids and not p.ignore_eos:
            reason, s.stop_token_end = "stop", True
        elif tok in p.stop_token_ids:
            reason, stop_reason = "stop", tok
        elif p.stop:
            before = self._detok(s)
            hits = []
            for st in p.stop:  # earliest stop string that the new text completes
                k = s.text.find(st, max(0, before - len(st) + 1))
                if k >= 0:
                    hits.append((k, st))
            if hits:
                k, st = min(hits)
                reason, stop_reason = "stop", st
                s.text_end = k + len(st) if p.include_stop_str_in_output else k
        if reason is None and (len(s.out) >= p.max_tokens or len(s.prompt) + len(s.out) > self.policy.context):
            reason = "length"
        if reason is not None:
            s.stop_reason = stop_reason
            with self.cv:
                self._finish(s, reason)

    def _finish(self, s: Seq, reason: str) -> None:
        """Caller holds self.cv (or is the scheduler thread with no contention on these fields)."""
        if s.finish_reason is not None:
            return
        s.finish_reason = reason
        if s in self.active:
            self.active.remove(s)
            self.backend.remove(s.key)
        req = s.request
        req.remaining -= 1
        self.counters[f"finished_{reason}"] += 1
        if req.remaining == 0:
            self.requests.pop(req.id, None)
            self.counters["requests"] += 1
            req.done.set()

    def _reap_aborted(self) -> None:
        with self.cv:
            for s in [s for s in self.active if s.abort]:
                self._finish(s, "abort")


def token_str(t: int) -> str:
    """One byte-tokenizer token as text (kept for callers; the engine uses ``tokenizer.token_text``)."""
    return tokenizer.ByteTokenizer().token_text(t)


def choice_text(s: Seq, tok) -> str:
    """The returned text: up to a stop string, else the decoded ids less a final stop token."""
    if s.text_end is not None:
        return s.text[: s.text_end]
    ids = s.out[:-1] if s.stop_token_end else s.out
    return tok.decode(ids)


def completion_response(req: Request, model: str, return_token_ids: bool = False, tok=None) -> dict:
    tok = tok if tok is not None else tokenizer.ByteTokenizer()
    choices = []
    n_out = 0
    for s in req.seqs:
        n_out += len(s.out)
        choice = {
            "index": s.index,
            "text": choice_text(s, tok),
            "finish_reason": s.finish_reason,
            "stop_reason": s.stop_reason,
            "logprobs": {"tokens": [tok.token_text(t) for t in s.out], "token_logprobs": s.logprobs},
            "token_ids": s.out,
            "weight_versions": s.versions,
        }
        if return_token_ids:
            choice["prompt_token_ids"] = req.prompt
        choices.append(choice)
    return {
        "id": req.id, "object": "text_completion", "created": int(req.created), "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": len(req.prompt), "completion_tokens": n_out,
                  "total_tokens": len(req.prompt) + n_out},
    }
