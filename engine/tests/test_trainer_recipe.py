"""The recipe knobs of a train step: given advantages, epochs and minibatches."""
import pytest
import torch

from floe_engine.model import TinyConfig
from floe_engine.tiny_policy import TinyPolicy
from floe_engine.trainer import StepConfig, Trainer


def make_trainer(tmp_path, lr=1e-2):
    pol = TinyPolicy(TinyConfig(d_model=16, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=0)
    return Trainer(pol, 0, str(tmp_path), lr=lr)


def weights(tr):
    return torch.cat([p.detach().flatten().clone() for p in tr.policy.module.parameters()])


def batch(advs):
    return [{"group_id": i, "prompt_ids": [1, 2, 3], "completion_ids": [4, 5, 6 + i], "advantage": a}
            for i, a in enumerate(advs)]


def test_zero_advantages_learn_nothing(tmp_path):
    # success-only training with 0/1 rewards sends failures with advantage 0 (core/advantages.ts)
    tr = make_trainer(tmp_path)
    before = weights(tr)
    tr.train_step(batch([0.0, 0.0]), {"advantage": "given"})
    assert torch.equal(before, weights(tr))  # no gradient at all: AdamW leaves every weight alone
    tr.train_step(batch([-1.0, 0.0]), {"advantage": "given"})
    assert not torch.equal(before, weights(tr))


def test_epochs_and_minibatches_count_optimizer_steps(tmp_path):
    tr = make_trainer(tmp_path)
    m = tr.train_step(batch([1.0, -1.0, 0.5, -0.5]), {"advantage": "given", "epochs": 2, "minibatches": 2})["metrics"]
    assert m["optimizer_steps"] == 4
    assert tr.version == 1  # one published version per train step, however many optimizer steps
    # minibatches keep whole groups: more minibatches than groups gives one step per group
    m = tr.train_step(batch([1.0, -1.0]), {"advantage": "given", "minibatches": 8})["metrics"]
    assert m["optimizer_steps"] == 2


@pytest.mark.parametrize("bad", [{"negative_scale": 0.5}, {"advantage": "reward"}, {"epochs": 0}, {"minibatches": 0}])
def test_bad_recipe_fields_are_named(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        StepConfig.from_dict(bad)
