"""The recipe knobs of a train step: given advantages, epochs and minibatches; a step's config
has every field and nothing else."""
import pytest
import torch

from conftest import step_config
from floe_engine.model import TinyConfig
from floe_engine.tiny_policy import TinyPolicy
from floe_engine.trainer import StepConfig, Trainer


def make_trainer(tmp_path):
    pol = TinyPolicy(TinyConfig(d_model=16, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=0)
    return Trainer(pol, 0, str(tmp_path))


def weights(tr):
    return torch.cat([p.detach().flatten().clone() for p in tr.policy.module.parameters()])


def batch(advs):
    return [{"rollout_id": f"r{i}", "group_id": f"g{i}", "reward": float(a > 0), "advantage": a,
             "ids": [1, 2, 3, 4, 5, 6 + i], "loss_mask": [0, 0, 0, 1, 1, 1], "behaviour_logprobs": [0.0, 0.0, 0.0, -5.5, -5.5, -5.5],
             "token_versions": [-1, -1, -1, 0, 0, 0]} for i, a in enumerate(advs)]


def test_zero_advantages_learn_nothing(tmp_path):
    # success-only training with 0/1 rewards sends failures with advantage 0 (core/advantages.ts)
    tr = make_trainer(tmp_path)
    before = weights(tr)
    tr.train_step(batch([0.0, 0.0]), step_config(lr=1e-2))
    assert torch.equal(before, weights(tr))  # no gradient at all: AdamW leaves every weight alone
    tr.train_step(batch([-1.0, 0.0]), step_config(lr=1e-2))
    assert not torch.equal(before, weights(tr))


def test_epochs_and_minibatches_count_optimizer_steps(tmp_path):
    tr = make_trainer(tmp_path)
    r = tr.train_step(batch([1.0, -1.0, 0.5, -0.5]), step_config(lr=1e-2, epochs=2, minibatches=2))
    assert r["metrics"]["optimizer_steps"] == 4
    assert r["config"] == step_config(lr=1e-2, epochs=2, minibatches=2)  # the settings as applied
    assert tr.version == 1  # one published version per train step, however many optimizer steps
    # minibatches keep whole groups: more minibatches than groups gives one step per group
    m = tr.train_step(batch([1.0, -1.0]), step_config(lr=1e-2, minibatches=8))["metrics"]
    assert m["optimizer_steps"] == 2


def test_weight_decay_comes_from_the_step(tmp_path):
    """AdamW's decoupled decay: with zero advantages (no gradient) a step moves every weight by
    exactly -lr * weight_decay * w, and the next step's config sets it back to 0."""
    tr = make_trainer(tmp_path)
    w0 = weights(tr)
    tr.train_step(batch([0.0, 0.0]), step_config(lr=1e-2, weight_decay=0.5))
    assert torch.allclose(weights(tr), w0 * (1 - 1e-2 * 0.5), rtol=0, atol=1e-7)
    w1 = weights(tr)
    r = tr.train_step(batch([0.0, 0.0]), step_config(lr=1e-2))
    assert torch.equal(weights(tr), w1) and r["config"]["weight_decay"] == 0.0
    assert all(g["weight_decay"] == 0.0 and g["lr"] == 1e-2 for g in tr.opt.param_groups)


def test_config_names_every_missing_and_unknown_field():
    cfg = step_config()
    for k in ("grad_clip", "loss_agg"):
        del cfg[k]
    with pytest.raises(ValueError) as e:
        StepConfig.from_dict(dict(cfg, advantage="given", mode="clip"))
    msg = str(e.value)
    assert "missing field(s) ['loss_agg', 'grad_clip']" in msg and "unknown field(s) ['advantage', 'mode']" in msg
    assert "run config's `trainer` section" in msg
    with pytest.raises(ValueError, match="needs a config object"):
        StepConfig.from_dict(None)


@pytest.mark.parametrize("bad,msg", [
    ({"ratio_mode": "ppo"}, r"ratio_mode = 'ppo' is not one of \['clip', 'truncate'\]"),
    ({"loss_agg": "sum"}, "loss_agg = 'sum' is not one of"),
    ({"lr": "3e-4"}, "lr = '3e-4' is not a finite number"),
    ({"epochs": 1.5}, "epochs = 1.5 is not an integer"),
    ({"epochs": 0}, "epochs, minibatches and micro_batch_tokens must be >= 1"),
    ({"minibatches": 0}, "epochs, minibatches and micro_batch_tokens must be >= 1"),
    ({"clip_low": -0.1}, "clip_low and clip_high must be >= 0"),
    ({"weight_decay": -1.0}, "lr and weight_decay must be >= 0"),
])
def test_bad_recipe_fields_are_named(bad, msg):
    with pytest.raises(ValueError, match=msg):
        StepConfig.from_dict(step_config(**bad))
