"""floe_vllm.FloeWorkerExtension without vLLM: a stand-in worker whose ``model_runner.model`` is
a transformers model behind vLLM's ``load_weights(weights: Iterable[(name, tensor)])`` signature,
with the extension mixed in the way vLLM's WorkerWrapperBase.init_worker does it."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

import torch  # noqa: E402

import floe_vllm  # noqa: E402
from floe_vllm import FloeWorkerExtension  # noqa: E402
from floe_engine import checkpoint as ckpt  # noqa: E402
from floe_engine.policies import build_policy  # noqa: E402
from test_hf_folder import SPEC, flip_byte, publish_sharded, write_v1  # noqa: E402

ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class VllmLikeModel(torch.nn.Module):
    """``load_weights`` as vLLM's models have it: consumes (name, tensor) pairs lazily and copies
    each into the parameter of that name; unknown names fail, like vLLM's KeyError."""

    def __init__(self, module):
        super().__init__()
        self.inner = module
        self.calls = 0
        self.seen = []
        self.processed = 0  # post-load processing runs (vLLM's reload path only)

    def process_weights_after_loading(self):
        self.processed += 1

    def load_weights(self, weights):
        self.calls += 1
        own = self.inner.state_dict()  # views of the parameters: copy_ writes through
        loaded = set()
        for name, tensor in weights:
            assert isinstance(name, str) and isinstance(tensor, torch.Tensor)
            if name not in own:
                raise KeyError(name)
            own[name].copy_(tensor.to(own[name].dtype))
            loaded.add(name)
            self.seen.append(name)
        return loaded


class WorkerBase:  # stand-ins for vllm.v1.worker: the extension is appended to the bases
    def execute_model(self, *a):
        raise AssertionError("not used")


def make_worker(model, reload=True):
    class GPUWorker(WorkerBase):
        def __init__(self, model_runner):
            self.model_runner = model_runner

        def load_model(self):
            raise AssertionError("not used")

    if reload:
        # vllm 0.34.0, vllm/v1/worker/gpu_worker.py Worker.reload_weights -> v1/worker/gpu/model_runner.py
        # -> model_executor/model_loader/reload/inplace.py reload_weights: load the checkpoint-format
        # tensors, then the post-load processing (repacking, quantization) runs again
        def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
            assert weights_iterator is not None and weights_path is None
            m = self.model_runner.model
            m.load_weights(weights_iterator)
            if is_checkpoint_format:
                m.process_weights_after_loading()

        GPUWorker.reload_weights = reload_weights

    ext = FloeWorkerExtension
    for attr in dir(ext):  # vLLM's conflict check, then its dynamic inheritance
        if not attr.startswith("__"):
            assert not hasattr(GPUWorker, attr), attr
    GPUWorker.__bases__ = GPUWorker.__bases__ + (ext,)
    return GPUWorker(SimpleNamespace(model=model))


def rpc(worker, method, *args, **kwargs):  # vLLM's run_method
    return getattr(worker, method)(*args, **kwargs)


@pytest.fixture(scope="module")
def published(bpe_dir, tmp_path_factory):
    pol, _ = build_policy(SPEC, tokenizer=bpe_dir, dtype="fp32", seed=11)
    root = tmp_path_factory.mktemp("pub")
    _, folder = publish_sharded(pol, root, 4)
    return pol, folder


def fresh_model(pol, seed=99):
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(pol.module.config).eval()


def test_extension_is_a_clean_mixin_and_pings():
    names = [a for a in dir(FloeWorkerExtension) if not a.startswith("__")]
    assert names == ["floe_load_folder", "floe_ping"]  # nothing that could clash with vLLM's worker
    w = make_worker(VllmLikeModel(torch.nn.Linear(2, 2)))
    assert rpc(w, "floe_ping") == {"floe_vllm": floe_vllm.__version__}
    assert isinstance(floe_vllm.__version__, str) and floe_vllm.__version__


def test_a_worker_without_reload_weights_is_refused_not_loaded_behind_its_back(published):
    pol, folder = published
    model = VllmLikeModel(fresh_model(pol))
    w = make_worker(model, reload=False)
    with pytest.raises(RuntimeError, match="no reload_weights.*vllm==0.34.0"):
        rpc(w, "floe_load_folder", folder)
    assert model.calls == 0  # nothing written past vLLM's post-load processing


def test_load_folder_puts_the_published_weights_in_the_model(published):
    pol, folder = published
    hf = fresh_model(pol)
    want = pol.module.state_dict()
    assert not all(torch.equal(v, want[k]) for k, v in hf.state_dict().items())
    model = VllmLikeModel(hf)
    w = make_worker(model)
    res = rpc(w, "floe_load_folder", folder)
    meta = ckpt.read_meta(folder)
    with open(os.path.join(folder, ckpt.INDEX)) as f:
        weight_map = json.load(f)["weight_map"]
    assert res["version"] == 4 and res["files"] == len(meta["files"])
    assert res["bytes"] == sum(r["bytes"] for r in meta["files"].values())
    assert res["tensors"] == len(weight_map) and sorted(model.seen) == sorted(weight_map) and model.calls == 1
    assert model.processed == 1  # through vLLM's reload_weights: the post-load processing ran again
    assert res["load_ms"] >= res["verify_ms"] >= 0
    for k, v in hf.state_dict().items():  # lm_head included: it is the tied embedding
        assert torch.equal(v, want[k]), k
    ids = torch.tensor([[1, 40, 300, 7, 9]])
    with torch.no_grad():
        assert torch.equal(hf(ids).logits, pol.module(ids).logits)
    # the version may come from kwargs (as a string over HTTP) and must match the sidecar
    assert rpc(w, "floe_load_folder", folder, version="4")["version"] == 4
    with pytest.raises(ValueError, match="asked for version 5 but .* holds version 4"):
        rpc(w, "floe_load_folder", folder, version=5)


def test_a_bad_checksum_refuses_to_load_and_names_the_file(published, tmp_path):
    pol, good = published
    _, folder = publish_sharded(pol, tmp_path, 4)
    shard = sorted(n for n in os.listdir(folder) if n.endswith(".safetensors"))[1]
    flip_byte(os.path.join(folder, shard))
    hf = fresh_model(pol)
    before = {k: v.clone() for k, v in hf.state_dict().items()}
    model = VllmLikeModel(hf)
    w = make_worker(model)
    with pytest.raises(ValueError, match=f"{shard}: xxh3-128 .* does not match checkpoint.json"):
        rpc(w, "floe_load_folder", folder)
    assert model.calls == 0 and all(torch.equal(v, before[k]) for k, v in hf.state_dict().items())
    with pytest.raises(ValueError, match=shard):
        floe_vllm.verify_folder(folder)
    # a weights file the sidecar does not list is refused too; a folder without a sidecar is not floe's
    meta = ckpt.read_meta(good)
    meta["files"].pop(shard)
    os.makedirs(tmp_path / "unlisted")
    for n in os.listdir(good):
        with open(os.path.join(good, n), "rb") as a, open(tmp_path / "unlisted" / n, "wb") as b:
            b.write(a.read())
    with open(tmp_path / "unlisted" / ckpt.SIDECAR, "w") as f:
        json.dump(meta, f)
    with pytest.raises(ValueError, match=f"{shard}: not listed in checkpoint.json"):
        rpc(w, "floe_load_folder", str(tmp_path / "unlisted"))
    os.remove(tmp_path / "unlisted" / ckpt.SIDECAR)
    with pytest.raises(FileNotFoundError, match="checkpoint.json is missing"):
        rpc(w, "floe_load_folder", str(tmp_path / "unlisted"))
    assert model.calls == 0
    # verify=False loads what is there (the caller's choice)
    res = rpc(w, "floe_load_folder", folder, verify=False)
    assert res["version"] == 4 and model.calls == 1


def test_old_format_folder(published, tmp_path):
    """floe-checkpoint-1 folders (model.safetensors + its sha256) load (which model object takes the
    tensors is vLLM's reload_weights' business, CUDA-graph wrappers included)."""
    pol, _ = published
    old = write_v1(pol, str(tmp_path / "v9"), 9)
    assert floe_vllm.verify_folder(old) == (1, os.path.getsize(os.path.join(old, ckpt.WEIGHTS)))
    hf = fresh_model(pol)
    w = make_worker(VllmLikeModel(hf))
    assert rpc(w, "floe_load_folder", old)["version"] == 9
    want = pol.module.state_dict()
    assert all(torch.equal(v, want[k]) for k, v in hf.state_dict().items())


def test_importing_floe_vllm_is_light():
    code = ("import sys, floe_vllm; heavy = [m for m in ('torch', 'safetensors', 'floe_engine', 'transformers') "
            "if m in sys.modules]; print(heavy); assert not heavy; "
            "assert floe_vllm.FloeWorkerExtension.__module__ == 'floe_vllm.worker'")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ENGINE_DIR), timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
