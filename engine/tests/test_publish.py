"""Weight publishing for async RL: the sharded trainer's ranks write their own safetensors files
(checksummed with xxh3-128 as they are written), engines verify with one read, old sha256 folders
still verify, and the broadcast path delivers the same tensors with the version.

The world-size-2 and broadcast cases are real process groups (gloo on CPU), started as
subprocesses (``publish_ranks.py``)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import ENGINE_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
RANKS = os.path.join(HERE, "publish_ranks.py")


def _env(**kw):
    # CPU ranks over gloo on any machine (on a GPU machine the ranks would otherwise share its GPU)
    return dict(os.environ, PYTHONPATH=ENGINE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
                PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **kw)


def run_ranks(world, *args, timeout=240):
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world)]
              if world > 1 else [sys.executable])
    p = subprocess.run(launch + [RANKS, *map(str, args)], env=_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    lines = [x for x in p.stdout.splitlines() if "Warning" not in x and "warn(" not in x]
    assert p.returncode == 0, "\n".join(lines)[-8000:]


def tensors(folder):
    from floe_engine import checkpoint as ckpt
    meta, sd = ckpt.load(str(folder))
    return meta, sd


def flip_byte(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The same Qwen3-shaped model (tied embeddings) published by world size 1 (new path), world
    size 2 (new path) and world size 2 through the old full gather on rank 0."""
    root = tmp_path_factory.mktemp("pub")
    out = {}
    for name, world, mode in (("ws1", 1, "sharded"), ("ws2", 2, "sharded"), ("ws2old", 2, "gathered")):
        d = root / name
        d.mkdir()
        run_ranks(world, "publish", d, mode)
        out[name] = (d / "v3", json.loads((d / f"result-{mode}.json").read_text()))
    return out


def test_world_size_2_writes_one_file_per_rank_and_loads_as_world_size_1(published):
    from floe_engine import checkpoint as ckpt
    (f1, r1), (f2, r2), (fo, _) = published["ws1"], published["ws2"], published["ws2old"]
    m1, sd1 = tensors(f1)
    m2, sd2 = tensors(f2)
    _, sdo = tensors(fo)
    assert sd1.keys() == sd2.keys() == sdo.keys() and len(sd1) > 10
    assert "lm_head.weight" not in sd2 and "model.embed_tokens.weight" in sd2  # tied: saved once, as transformers does
    for k in sd1:  # exactly the same bf16 tensors, and the same as the old rank-0 gather
        assert sd2[k].dtype == torch.bfloat16 and torch.equal(sd1[k], sd2[k]) and torch.equal(sdo[k], sd2[k]), k
    # world size 1: one model.safetensors; world size 2: one shard per rank + the index
    assert m1["weights"] == [ckpt.WEIGHTS] and m1["writers"] == {ckpt.WEIGHTS: 0}
    shards = [n for n in m2["weights"] if n.endswith(".safetensors")]
    assert m2["weights"][0] == ckpt.INDEX and len(shards) == 2
    assert m2["writers"] == {shards[0]: 0, shards[1]: 1} and m2["world_size"] == 2
    assert m2["format"] == "floe-checkpoint-3" and m2["checksum"] == "xxh3-128"
    for n, rec in m2["files"].items():
        assert set(rec) == {"xxh3_128", "bytes"} and rec["bytes"] == os.path.getsize(f2 / n)
    # balanced by bytes: neither rank writes more than ~2/3 of the weights
    sizes = [m2["files"][n]["bytes"] for n in shards]
    assert max(sizes) < 0.67 * sum(sizes), sizes
    # every phase is timed
    tm = r2["timings"]
    for key in ("plan_ms", "gather_loop_ms", "write_tail_ms", "write_checksum_ms", "collect_ms", "index_ms",
                "sidecar_ms", "rename_ms"):
        assert isinstance(tm[key], (int, float)), key
    assert [p["files"] for p in tm["per_rank"]] == [[shards[0]], [shards[1]]]
    assert not [n for n in os.listdir(f2.parent) if ".tmp-" in n]  # the temporary folder was renamed away
    # the digests are of the files as written (what `xxh128sum FILE` prints)
    import xxhash
    for n in shards:
        assert m2["files"][n]["xxh3_128"] == xxhash.xxh3_128((f2 / n).read_bytes()).hexdigest()


def test_sharded_folder_is_a_hugging_face_folder(published):
    """transformers loads the world-size-2 folder as is, with the same config.json as the old path."""
    from transformers import AutoModelForCausalLM
    from safetensors import safe_open
    f2, fo = published["ws2"][0], published["ws2old"][0]
    assert sorted(os.listdir(f2)) == sorted(set(os.listdir(fo)) - {"model.safetensors"}
                                            | {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors"})
    c2, co = (json.loads((f / "config.json").read_text()) for f in (f2, fo))
    assert c2 == co
    m = AutoModelForCausalLM.from_pretrained(str(f2), local_files_only=True)
    _, sd = tensors(fo)
    own = m.state_dict()
    for k, v in sd.items():
        assert torch.equal(own[k], v), k
    assert torch.equal(own["lm_head.weight"], sd["model.embed_tokens.weight"])
    with safe_open(str(f2 / "model-00002-of-00002.safetensors"), framework="pt") as f:  # plain safetensors reads it
        assert f.metadata() == {"format": "pt"} and len(list(f.keys())) > 0


class ReusedBuffers:
    """weights_io.PinnedBuffers' contract on CPU (pinning needs CUDA): one buffer per file name,
    kept between loads, a larger one made when a file grows."""

    def __init__(self):
        self.bufs = {}
        self.made = 0

    def get(self, key, size):
        if key not in self.bufs or self.bufs[key].numel() < size:
            self.bufs[key] = torch.empty(size, dtype=torch.uint8)
            self.made += 1
        return self.bufs[key][:size]


def test_loads_into_kept_buffers_give_each_versions_tensors(published):
    """The engine reads every update into the same buffers (pinned on a GPU): a second load of
    another folder with the same file names reuses them and holds that folder's tensors."""
    from floe_engine import checkpoint as ckpt
    bufs = ReusedBuffers()
    (f1, _), (f2, _) = published["ws1"], published["ws2"]
    _, want1 = tensors(f1)
    _, sd1 = ckpt.load(str(f1), buffers=bufs)
    assert bufs.made == 1 and all(torch.equal(sd1[k], want1[k]) for k in want1)
    ptr = bufs.bufs[ckpt.WEIGHTS].data_ptr()
    copies = {k: v.clone() for k, v in sd1.items()}
    # the same file name again (a later version): the buffer is reused, nothing new is made
    some = next(k for k, v in copies.items() if v.numel() > 100)
    _, again = ckpt.load(str(f1), buffers=bufs)
    assert bufs.made == 1 and bufs.bufs[ckpt.WEIGHTS].data_ptr() == ptr
    assert torch.equal(again[some], copies[some])
    # the sharded folder's files have other names: buffers of their own, the right tensors
    _, sd2 = ckpt.load(str(f2), buffers=bufs)
    assert bufs.made == 1 + len([n for n in os.listdir(f2) if n.endswith(".safetensors")])
    assert all(torch.equal(sd2[k], want1[k]) for k in want1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked memory needs CUDA")
def test_pinned_buffers_are_page_locked_and_kept():
    from floe_engine import weights_io
    b = weights_io.PinnedBuffers()
    x = b.get("a.safetensors", 1000)
    assert x.is_pinned() and x.numel() == 1000
    assert b.get("a.safetensors", 500).data_ptr() == x.data_ptr() and b.nbytes == 1000
    assert b.get("a.safetensors", 2000).numel() == 2000 and b.nbytes == 2000


def test_a_flipped_byte_is_caught_by_the_new_checksum(published, tmp_path):
    import shutil

    from floe_engine import checkpoint as ckpt
    from floe_vllm import verify_folder as vllm_verify
    folder = tmp_path / "v3"
    shutil.copytree(published["ws2"][0], folder)
    shard = folder / "model-00002-of-00002.safetensors"
    at = os.path.getsize(shard) - 1000  # in the tensor data, not the header
    flip_byte(shard, at)
    with pytest.raises(ValueError, match=f"{shard}: xxh3-128 .* does not match checkpoint.json"):
        ckpt.load(str(folder))
    with pytest.raises(ValueError, match="xxh3-128 .* does not match"):
        ckpt.verify_folder(str(folder))
    with pytest.raises(ValueError, match="xxh3-128 .* does not match"):
        vllm_verify(str(folder))
    ckpt.load(str(folder), verify=False)  # the bytes still parse: only the checksum saw the change
    flip_byte(shard, at)  # restored: everything loads again (the test could pass only on a real match)
    _, sd = ckpt.load(str(folder))
    assert vllm_verify(str(folder))[0] == len(ckpt.read_meta(str(folder))["files"]) == 5
    # a flipped byte in a small file (config.json) is caught too
    flip_byte(folder / "config.json", 10)
    with pytest.raises(ValueError, match="config.json: xxh3-128"):
        ckpt.load(str(folder))


def test_old_sha256_folders_still_verify(tmp_path, monkeypatch):
    """floe-checkpoint-2 folders (sha256 records, no `checksum`) and sha256 ones written with
    FLOE_CHECKSUM=sha256 verify and load; a flipped byte is named with sha256."""
    from floe_engine import checkpoint as ckpt
    from floe_engine.policies import build_policy
    from floe_vllm import verify_folder as vllm_verify
    pol, _ = build_policy("tiny:d_model=32,n_layers=1,n_heads=2,context=64", None, seed=0, device="cpu")
    monkeypatch.setenv("FLOE_CHECKSUM", "sha256")
    path = ckpt.publish_policy(pol, str(tmp_path), 2)
    folder = ckpt.folder_of(path)
    meta = ckpt.read_meta(folder)
    assert meta["checksum"] == "sha256" and set(meta["files"][ckpt.WEIGHTS]) == {"sha256", "bytes"}
    assert meta["sha256"] == meta["files"][ckpt.WEIGHTS]["sha256"]  # floe-checkpoint-1 readers' field
    # as floe-checkpoint-2 wrote it
    del meta["checksum"]
    meta["format"] = "floe-checkpoint-2"
    with open(os.path.join(folder, ckpt.SIDECAR), "w") as f:
        json.dump(meta, f)
    monkeypatch.delenv("FLOE_CHECKSUM")
    _, sd = ckpt.load(folder)
    assert all(torch.equal(sd[k], v) for k, v in pol.state_dict().items())
    assert ckpt.verify_folder(folder)["files"] == 1 and vllm_verify(folder)[0] == 1
    flip_byte(os.path.join(folder, ckpt.WEIGHTS), os.path.getsize(os.path.join(folder, ckpt.WEIGHTS)) - 5)
    with pytest.raises(ValueError, match="model.safetensors: sha256 .* does not match"):
        ckpt.load(folder)
    with pytest.raises(ValueError, match="sha256 .* does not match"):
        vllm_verify(folder)


def test_without_xxhash_the_reader_says_what_to_install(published, monkeypatch):
    from floe_engine import checkpoint as ckpt
    from floe_engine import checksum
    monkeypatch.setitem(sys.modules, "xxhash", None)  # `import xxhash` now raises ImportError
    assert checksum.default_algorithm() == "sha256"  # writers fall back
    with pytest.raises(ValueError, match="pip install xxhash"):
        ckpt.load(str(published["ws1"][0]))
    ckpt.load(str(published["ws1"][0]), verify=False)


def test_writer_checks_order_dtype_and_shape(tmp_path):
    from floe_engine import weights_io
    specs = [("a", torch.float32, (2, 3)), ("b", torch.bfloat16, (4,))]
    w = weights_io.SafetensorsWriter(str(tmp_path / "x.safetensors"), specs, "xxh3-128")
    with pytest.raises(ValueError, match="expected a"):
        w.write("b", torch.zeros(4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="expected a .* got a torch.float16"):
        w.write("a", torch.zeros(2, 3, dtype=torch.float16))
    w.write("a", torch.arange(6.0).view(2, 3))
    w.write("b", torch.ones(4, dtype=torch.bfloat16))
    n, digest = w.close()
    from safetensors.torch import load_file
    got = load_file(str(tmp_path / "x.safetensors"))
    assert torch.equal(got["a"], torch.arange(6.0).view(2, 3)) and got["b"].dtype == torch.bfloat16
    assert n == os.path.getsize(tmp_path / "x.safetensors")
    sd = weights_io.read_file(str(tmp_path / "x.safetensors"), "xxh3-128", digest)
    assert torch.equal(sd["a"], got["a"]) and torch.equal(sd["b"], got["b"])
    with pytest.raises(ValueError, match="does not match"):
        weights_io.read_file(str(tmp_path / "x.safetensors"), "xxh3-128", "0" * 32)
    # read in small pieces by a thread pool: the same tensors and digest
    from concurrent.futures import ThreadPoolExecutor
    import floe_engine.weights_io as wio
    old, wio.READ_CHUNK = wio.READ_CHUNK, 7
    try:
        with ThreadPoolExecutor(3) as pool:
            sd2 = weights_io.read_file(str(tmp_path / "x.safetensors"), "xxh3-128", digest, pool=pool)
    finally:
        wio.READ_CHUNK = old
    assert torch.equal(sd2["a"], got["a"]) and torch.equal(sd2["b"], got["b"])


def test_plan_balances_whole_tensors_by_bytes():
    from floe_engine.weights_io import plan_files
    entries = [("emb", 1000), ("l0", 300), ("l1", 300), ("l2", 300), ("n", 1)]
    files = plan_files(entries, world=2, max_shard_bytes=10 ** 9)
    assert sorted(sum(files, [])) == sorted(n for n, _ in entries) and len(files) == 2
    load = [sum(dict(entries)[n] for n in f) for f in files]
    assert max(load) <= 1001
    assert plan_files(entries, world=1, max_shard_bytes=700) == [["emb"], ["l0", "l1", "n"], ["l2"]] or \
        len(plan_files(entries, world=1, max_shard_bytes=700)) == 3  # ceil(1901 / 700) files


def _broadcast(tmp_path, roles):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, RANKS, "broadcast", str(tmp_path), role],
                              env=_env(RANK=str(r), WORLD_SIZE=str(len(roles)), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r, role in enumerate(roles)]
    logs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(logs)[-4000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(len(roles))], \
        [torch.load(tmp_path / f"rank{r}.pt") for r in range(len(roles))]


def test_broadcast_delivers_identical_tensors_with_the_version(tmp_path):
    res, sds = _broadcast(tmp_path, ["send", "recv", "recv"])
    assert all(r["ok"] for r in res), res
    assert res[1]["result"]["version"] == 7 == res[2]["result"]["version"]
    assert res[0]["timings"]["buckets"] > 1
    for k in sds[0]:
        assert torch.equal(sds[0][k], sds[1][k]) and torch.equal(sds[0][k], sds[2][k]), k
    # the receivers started from other weights (seed 2): the update did change them
    from floe_engine.model import TinyConfig
    from floe_engine.tiny_policy import TinyPolicy
    before = TinyPolicy(TinyConfig(d_model=32, n_layers=2, n_heads=2, context=64), torch.device("cpu"), seed=2)
    assert any(not torch.equal(v, sds[1][k]) for k, v in before.module.state_dict().items())


def test_broadcast_refused_by_one_receiver_fails_everywhere(tmp_path):
    res, sds = _broadcast(tmp_path, ["send", "recv", "recv-wrong"])
    assert not res[0]["ok"] and "receivers reported" in res[0]["error"]
    assert not res[1]["ok"] and "another receiver failed" in res[1]["error"]
    assert not res[2]["ok"] and "shape" in res[2]["error"]
