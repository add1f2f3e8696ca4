"""One rank of the publish / broadcast tests (test_publish.py starts it, alone or under torchrun).

    publish_ranks.py publish OUT_DIR MODE [SPEC]   MODE: sharded | gathered; every rank of the job
    publish_ranks.py broadcast OUT_DIR ROLE        ROLE: send | recv | recv-wrong (RANK/WORLD_SIZE/MASTER_* set)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

QWEN3_CPU = "hf:" + os.path.join(os.path.dirname(os.path.dirname(HERE)), "configs", "models", "qwen3-cpu.json")


def done() -> None:
    """Leave together: a gloo rank whose peer has already closed its sockets can abort at exit."""
    dist.barrier()
    dist.destroy_process_group()


def publish(out_dir: str, mode: str, spec: str) -> None:
    from floe_engine.distributed import init_distributed
    from floe_engine.fsdp_trainer import FSDPTrainer
    from floe_engine.policies import build_policy

    ctx = init_distributed("cpu")
    pol, _ = build_policy(spec, None, seed=0, device="cpu", dtype="fp32", for_training=True)
    # bf16 publish from fp32 masters, as on a GPU trainer
    tr = FSDPTrainer(pol, 3, out_dir, ctx, state_every=0, publish_dtype=torch.bfloat16)
    tm: dict = {}
    path = tr.publish(tm) if mode == "sharded" else tr.publish_gathered(tm)
    if ctx.is_main:
        with open(os.path.join(out_dir, f"result-{mode}.json"), "w") as f:
            json.dump({"path": path, "timings": tm, "world_size": ctx.world_size}, f)
    done()


def broadcast(out_dir: str, role: str) -> None:
    from floe_engine import weight_broadcast as wb
    from floe_engine.model import TinyConfig
    from floe_engine.tiny_policy import TinyPolicy

    dist.init_process_group("gloo")
    cfg = TinyConfig(d_model=32 if role != "recv-wrong" else 48, n_layers=2, n_heads=2, context=64)
    pol = TinyPolicy(cfg, torch.device("cpu"), seed=1 if role == "send" else 2)
    out = {"role": role}
    try:
        if role == "send":
            named = [(n, t) for n, t in pol.module.state_dict().items()]
            out["timings"] = wb.send(named, 7, src=0, bucket_bytes=20000)  # several buckets
        else:
            apply, expect = wb.copy_into(pol.module)
            out["result"] = wb.receive(apply, src=0, expect=expect)
        out["ok"] = True
    except Exception as e:
        out.update(ok=False, error=f"{type(e).__name__}: {e}")
    rank = dist.get_rank()
    torch.save({k: v.clone() for k, v in pol.module.state_dict().items()}, os.path.join(out_dir, f"rank{rank}.pt"))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    done()


if __name__ == "__main__":
    if sys.argv[1] == "publish":
        publish(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else QWEN3_CPU)
    else:
        broadcast(sys.argv[2], sys.argv[3])
