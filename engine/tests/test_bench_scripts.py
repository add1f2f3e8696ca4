"""The GPU benchmarks under bench/engine still run: each one's ``--smoke`` (a two-layer Qwen3 with
the real vocabulary, on CPU, gloo) writes its JSON with every section measured and no error, so a
change to the trainer or the checkpoint format cannot leave them broken until the next GPU
session finds out."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ENGINE_DIR

BENCH = os.path.join(os.path.dirname(ENGINE_DIR), "bench", "engine")


MODELS = ["qwen3-4b", "qwen3.5-4b"]  # bench_record.MODELS: the second has linear-attention layers


def run_smoke(script, model, tmp_path, *extra):
    out = tmp_path / f"{script}.json"
    p = subprocess.run([sys.executable, os.path.join(BENCH, script), "--model", model, "--smoke", "--out", str(out),
                        *extra],
                       env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    res = json.loads(out.read_text())
    assert res["command"].startswith(f"python3 bench/engine/{script} --model {model} --smoke")
    assert ("qwen3_5_text" in res["model"]["spec"]) == (model == "qwen3.5-4b")
    assert "finished_unix" in res
    return res


@pytest.mark.parametrize("model", MODELS)
def test_fsdp_step_bench_smoke(model, tmp_path):
    res = run_smoke("fsdp_step_bench.py", model, tmp_path, "--steps", "1", "--profile")
    # the two default paths side by side; a model with linear-attention layers cannot pack
    tail = ":gdn-floe" if model == "qwen3.5-4b" else ""
    assert set(res["sections"]) == {"padded:2x256" + tail, "packed:2x256" + tail}
    assert res["sections"]["packed:2x256" + tail]["packing"] is res["model"]["packable"]
    for sec in res["sections"].values():
        steps = sec["steps"]
        assert len(steps) == 2 and "error" not in sec and steps[1]["profiled"]
        # the profiled step's phases: each named range was seen and took time (host time on the CPU)
        ph = steps[1]["phases_s"]
        assert ph["clock"] == "cpu_ranges" and set(ph["ranges_seen"]) >= {"floe.forward", "floe.recompute",
                                                                          "floe.head", "floe.optimizer"}
        assert min(ph["forward"], ph["recompute"], ph["head"], ph["optimizer"], ph["backward"]) > 0
        assert ph["forward"] + ph["recompute"] + ph["optimizer"] < ph["step_wall"]
        assert all(s["tokens_per_s"] > 0 and s["publish_ms"] > 0 for s in steps)
        # executed FLOPs: more than 6·N·tokens (attention, head, recompute), per token
        fl = steps[0]["executed_flops"]
        assert fl["tokens"] == 2 * 255 and fl["attention_forward"] + fl["linear_attention_forward"] > 0
        assert fl["recompute"] > 0 and fl["total"] > 3 * fl["linear_forward"]
    assert res["load"]["tensors"] > 0


@pytest.mark.parametrize("model", MODELS)
def test_publish_bench_smoke(model, tmp_path):
    res = run_smoke("publish_bench.py", model, tmp_path)
    assert [r["version"] for r in res["old"] + res["new"]] == [1, 2, 3, 4]
    for row in res["old"] + res["new"]:
        assert "error" not in row, row.get("error")
        assert row["engine_max_abs_diff_vs_trainer"] == 0.0  # the engine holds exactly the trainer's weights
    assert [r["checksum"] for r in res["old"] + res["new"]] == ["sha256", "xxh3-128", "xxh3-128", "xxh3-128"]
    assert "error" not in res["refit_local"] and res["refit_local"]["engine_max_abs_diff_vs_trainer"] == 0.0



def test_cpu_speed_bench_smoke(tmp_path):
    """bench/engine/cpu_speed.py with this tree as its own baseline: each kind of case measured for both
    trees, and the train step's metrics equal between them (the figure that shows a change kept
    the numerics)."""
    out = tmp_path / "cpu_speed.json"
    p = subprocess.run([sys.executable, os.path.join(BENCH, "cpu_speed.py"), "--smoke", "--baseline", ENGINE_DIR,
                        "--baseline-label", "this tree", "--out", str(out)],
                       env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    res = json.loads(out.read_text())
    assert set(res["summary"]) == {"train_success0.5", "tiny_decode_b8", "hf_decode_b8"}  # --smoke: one of each
    assert res["summary"]["train_success0.5"]["max_rel_diff_metrics"] < 1e-6
    assert res["runs"]["train_success0.5"]["after"][0]["successes"] == 4  # half of 2 groups × 4
    assert all(r["tokens_per_s"] > 0 for r in res["runs"]["hf_decode_b8"]["before"])
    assert ENGINE_DIR not in json.dumps({k: res[k] for k in ("trees", "runs")})  # no path of this machine
