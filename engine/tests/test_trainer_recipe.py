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


def test_rows_without_advantage_are_skipped_without_changing_the_step(tmp_path):
    """The one-process trainer runs no backward for rows of advantage 0 (and no forward after the
    first epoch's metrics), and no token after a row's last masked one: weights and metrics must
    be those of the full computation. Groups share a prompt; one minibatch has only zero rows (its
    step still moves the weights by momentum); rows end in unmasked tool output. SGD with momentum:
    AdamW would scale the rounding noise of the key bias (whose true gradient is 0: softmax ignores
    a shift common to all keys) up to lr-sized steps in either computation."""
    def rows(advs):
        out = []
        for i, a in enumerate(advs):
            g = i // 2
            ids = [1, 2, 3 + g, 4] + [10 + (i * 7 + j) % 40 for j in range(6 + i)] + [50, 51, 52]
            mask = [0] * 4 + [1] * (6 + i) + [0] * 3
            out.append({"rollout_id": f"r{i}", "group_id": f"g{g}", "reward": float(a > 0), "advantage": a,
                        "ids": ids, "loss_mask": mask, "behaviour_logprobs": [-5.0 if m else 0.0 for m in mask],
                        "token_versions": [0 if m else -1 for m in mask]})
        return out

    def run(skip, advs, tmp):
        pol = TinyPolicy(TinyConfig(d_model=16, n_layers=1, n_heads=2, context=64), torch.device("cpu"), seed=0)
        tr = Trainer(pol, 0, str(tmp), optimizer="sgd")
        tr.skip_zero_advantage = skip
        ms = [tr.train_step(rows(advs), step_config(lr=0.1, epochs=3, minibatches=3))["metrics"] for _ in range(2)]
        return weights(tr), ms

    advs = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]  # groups g0 (one zero), g1 (all zero), g2 (one zero)
    w_skip, m_skip = run(True, advs, tmp_path / "skip")
    w_full, m_full = run(False, advs, tmp_path / "full")
    torch.testing.assert_close(w_skip, w_full, atol=1e-6, rtol=1e-5)
    for a, b in zip(m_skip, m_full):
        for k in ("loss", "grad_norm", "entropy", "clip_fraction", "mismatch_mean_abs_logprob", "ratio_max"):
            assert a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-7), k
    # negative control: a small advantage on one of those rows is a different step
    w_other, _ = run(True, [1.0, 0.0, 0.0, 0.1, 0.0, 1.0], tmp_path / "other")
    assert (w_other - w_full).abs().max() > 1e-5
