"""The wire contract of ``POST /train_step``: the fields of a training sample and of a step's
config, with their types. The validators read these tables (``trainer.normalize_sample`` checks
every sample against ``SAMPLE``; ``trainer.StepConfig.from_dict`` checks every config against
``STEP_CONFIG``, and ``trainer.StepConfig``'s dataclass fields must be exactly its fields), so
what this module prints is what the trainer accepts::

    python -m floe_engine.contract
    # {"sample": {"rollout_id": "string", ...}, "step_config": {"lr": "number", ...}}

A type is "string", "number" (a finite int or float), "int", "number[]", "int[]", or the list of
the strings allowed. floe's TypeScript side (the sample rows of activities/gpu.ts, the trainer
section of core/config.ts) is tested against this output. Standard library only: no torch.
"""
from __future__ import annotations

import json
import math
import sys
from typing import Any, Dict, Tuple, Union

RATIO_MODES = ("clip", "truncate")
LOSS_AGGS = ("token-mean", "seq-mean-token-mean")

Kind = Union[str, Tuple[str, ...]]

# One rollout, one masked sequence: the prompt, every generated turn and the tool outputs
# between them (``ids``), the loss on the generated tokens only (``loss_mask`` 1). The per-token
# arrays have one entry per id; behaviour_logprobs and token_versions are read only where the
# mask is 1 (token_versions is -1 elsewhere).
SAMPLE: Dict[str, Kind] = {
    "rollout_id": "string",
    "group_id": "string",
    "reward": "number",
    "advantage": "number",            # floe computes it (core/advantages.ts); the trainer takes it as given
    "ids": "int[]",
    "loss_mask": "int[]",             # 0/1
    "behaviour_logprobs": "number[]",  # the engine's log-probs of the sampled tokens
    "token_versions": "int[]",        # the weight version that sampled each token
}

# Every field is required: the values come from the run config's `trainer` section (core/config.ts
# holds the one default of each), never from the trainer process.
STEP_CONFIG: Dict[str, Kind] = {
    "lr": "number",
    "weight_decay": "number",
    "clip_low": "number",
    "clip_high": "number",
    "ratio_mode": RATIO_MODES,         # 'clip': asymmetric clipped surrogate; 'truncate': truncated IS weight
    "truncate_cap": "number",
    "loss_agg": LOSS_AGGS,
    "epochs": "int",                   # passes over the batch
    "minibatches": "int",              # optimizer steps per pass (whole groups per minibatch)
    "grad_clip": "number",             # global grad-norm clip
    "micro_batch_tokens": "int",       # gradient-accumulation bound
}


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def fits(kind: Kind, value: Any) -> bool:
    """Whether ``value`` has type ``kind``; for a list kind only that it is a list (what its
    entries must be depends on the loss mask, which the sample validator knows)."""
    if isinstance(kind, tuple):
        return value in kind
    if kind.endswith("[]"):
        return isinstance(value, list)
    return {"string": lambda v: isinstance(v, str), "number": is_number, "int": is_int}[kind](value)


def words(kind: Kind) -> str:
    """A scalar ``kind`` for an error message: "a finite number", "one of ['clip', 'truncate']", ..."""
    if isinstance(kind, tuple):
        return f"one of {list(kind)}"
    return {"string": "a string", "number": "a finite number", "int": "an integer"}[kind]


def describe(kind: Kind) -> Any:
    """``kind`` as the printed contract has it."""
    return list(kind) if isinstance(kind, tuple) else kind


def contract() -> dict:
    return {"sample": {k: describe(v) for k, v in SAMPLE.items()},
            "step_config": {k: describe(v) for k, v in STEP_CONFIG.items()}}


if __name__ == "__main__":
    json.dump(contract(), sys.stdout)
    sys.stdout.write("\n")
