"""The /train_step wire contract (``python -m floe_engine.contract``, what floe's TypeScript side
is tested against) is what the trainer validates: StepConfig's dataclass fields, and a sample
missing any field of the table is refused."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from conftest import ENGINE_DIR
from floe_engine import contract
from floe_engine.trainer import StepConfig, normalize_sample

EXPECTED = {
    "sample": {"rollout_id": "string", "group_id": "string", "reward": "number", "advantage": "number",
               "ids": "int[]", "loss_mask": "int[]", "behaviour_logprobs": "number[]", "token_versions": "int[]"},
    "step_config": {"lr": "number", "weight_decay": "number", "clip_low": "number", "clip_high": "number",
                    "ratio_mode": ["clip", "truncate"], "truncate_cap": "number",
                    "loss_agg": ["token-mean", "seq-mean-token-mean"], "epochs": "int", "minibatches": "int",
                    "grad_clip": "number", "micro_batch_tokens": "int"},
}


def printed():
    env = dict(os.environ, PYTHONPATH=ENGINE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "floe_engine.contract"], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def test_printed_contract():
    assert printed() == EXPECTED


def test_step_config_fields_are_the_contracts():
    step = printed()["step_config"]
    fields = dataclasses.fields(StepConfig)
    assert [f.name for f in fields] == list(step)
    kinds = {"float": "number", "int": "int"}
    for f in fields:
        want = step[f.name]
        assert (isinstance(want, list) and f.type == "str") or kinds.get(f.type) == want, (f.name, f.type, want)
    # a config of the printed fields is accepted, as applied
    values = {"number": 0.5, "int": 3}
    cfg = {k: (v[-1] if isinstance(v, list) else values[v]) for k, v in step.items()}
    assert dataclasses.asdict(StepConfig.from_dict(cfg)) == cfg


def sample():
    return {"rollout_id": "r0", "group_id": "g0", "reward": 1.0, "advantage": 0.5, "ids": [1, 2, 3, 4],
            "loss_mask": [0, 0, 1, 1], "behaviour_logprobs": [0.0, 0.0, -1.0, -2.0], "token_versions": [-1, -1, 3, 3]}


def test_a_full_sample_is_accepted():
    assert list(printed()["sample"]) == list(contract.SAMPLE)
    row = normalize_sample(0, sample(), 259)
    assert row["_masked"] == [2, 3] and row["_blp"] == [-1.0, -2.0] and row["_ver"] == [3, 3]


@pytest.mark.parametrize("field", list(EXPECTED["sample"]))
def test_a_sample_missing_a_field_is_refused(field):
    s = sample()
    del s[field]
    with pytest.raises(ValueError, match=rf"sample 0: missing \['{field}'\]"):
        normalize_sample(0, s, 259)
    with pytest.raises(ValueError, match=rf"sample 0: missing \['{field}'\]"):
        normalize_sample(0, dict(sample(), **{field: None}), 259)


@pytest.mark.parametrize("field,value,msg", [
    ("rollout_id", 7, "rollout_id = 7 is not a string"),
    ("group_id", 3, "group_id = 3 is not a string"),
    ("reward", "1", "reward = '1' is not a finite number"),
    ("advantage", float("nan"), "advantage = nan is not a finite number"),
    ("token_versions", [-1, -1, 3, 3.5], r"token_versions\[3\] = 3.5 is not an integer \(loss_mask is 1 there\)"),
])
def test_a_field_of_the_wrong_type_is_named(field, value, msg):
    with pytest.raises(ValueError, match="sample 0: " + msg):
        normalize_sample(0, dict(sample(), **{field: value}), 259)


def test_an_old_prompt_completion_row_gets_a_clear_error():
    old = {"group_id": "g", "reward": 1.0, "advantage": 1.0, "prompt_ids": [1, 2], "completion_ids": [3, 4],
           "behaviour_logprobs": [-1.0, -1.0]}
    with pytest.raises(ValueError, match=r"sample 0: prompt_ids/completion_ids rows are not read: a sample is one "
                                         r"rollout, \{rollout_id, group_id, reward, advantage, ids, loss_mask"):
        normalize_sample(0, old, 259)
