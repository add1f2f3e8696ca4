"""SFT warm start on synthetic (prompt, completion) pairs writes a loadable version 0."""
import json

from floe_engine import sft
from floe_engine.policies import build_policy
from floe_engine.scoring import logprobs


def test_sft_writes_v0_and_learns(tmp_path):
    data = tmp_path / "gold.jsonl"
    rows = [{"prompt": f"Issue {i}: fix f{i} in m{i}.py\n", "completion": f'{{"tool":"edit","path":"m{i}.py"}}'}
            for i in range(4)]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    summary = sft.main(["--data", str(data), "--out", str(tmp_path / "pub"), "--steps", "150", "--batch-size", "8",
                        "--lr", "3e-3", "--model", "tiny:d_model=48,n_layers=1,n_heads=2,context=128",
                        "--eval", "4", "--log-every", "100"])
    assert summary["path"].endswith("v0/model.safetensors")
    assert summary["loss_curve"][-1] < 0.5 * summary["loss_curve"][0]
    assert json.loads((tmp_path / "pub" / "sft_summary.json").read_text())["steps"] == 150
    pol, version = build_policy("tiny", str(tmp_path / "pub" / "v0"))
    assert version == 0 and pol.cfg.d_model == 48
    lp = logprobs(pol, list(rows[0]["prompt"].encode()), list(rows[0]["completion"].encode()) + [256])
    assert sum(lp) / len(lp) > -2.0  # well above uniform (-5.56)
