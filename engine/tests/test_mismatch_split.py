"""The trainer reports the engine-vs-trainer mismatch on tokens of the version it holds
(numerics alone) apart from the off-policy gap of older tokens (issue 12: one mixed figure
read 0.094 against 0.006 only because the batch was one version old)."""
import torch

from conftest import step_config
from floe_engine.model import TinyConfig
from floe_engine.tiny_policy import TinyPolicy
from floe_engine.trainer import Trainer

P, C = [1, 2, 3, 4], [5, 6, 7, 8, 9]


def row(rid, version, lps, adv):
    return {"rollout_id": rid, "group_id": rid, "reward": 1.0, "advantage": adv, "ids": P + C,
            "loss_mask": [0] * len(P) + [1] * len(C), "behaviour_logprobs": [0.0] * len(P) + lps,
            "token_versions": [-1] * len(P) + [version] * len(C)}


def test_current_version_numerics_apart_from_the_off_policy_gap(tmp_path):
    pol = TinyPolicy(TinyConfig(d_model=16, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=0)
    tr = Trainer(pol, 0, str(tmp_path))
    v0 = tr.logprobs([(P, C)])[0]
    tr.train_step([row("a", 0, v0, 1.0)], step_config(lr=5e-2))  # the trainer now holds v1
    v1 = tr.logprobs([(P, C)])[0]
    m = tr.train_step([row("old", 0, v0, 1.0), row("cur", 1, v1, 1.0)], step_config(lr=5e-2))["metrics"]
    assert m["mismatch_current_tokens"] == len(C) and m["offpolicy_tokens"] == len(C)
    assert m["mismatch_current_mean_abs_logprob"] < 1e-5      # same weights, same fp32 kernels
    assert m["offpolicy_mean_abs_logprob"] > 1e-3             # one version old
    # the mixed figure sits between them: it is not a numerics measurement
    assert m["mismatch_current_mean_abs_logprob"] < m["mismatch_mean_abs_logprob"] < m["offpolicy_mean_abs_logprob"]
