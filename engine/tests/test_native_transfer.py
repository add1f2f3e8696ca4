"""The unpacked wire of vLLM's and SGLang's native weight transfer, both ends, over gloo."""
import threading

import pytest
import torch

from floe_engine import native_transfer as nt


def _entries():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(4, 3, generator=g)
    return [("a.weight", w, torch.bfloat16, (4, 3)), ("b.bias", torch.arange(5.0), torch.float32, (5,)),
            ("steps", torch.tensor([7]), torch.int64, (1,))]


def test_metadata_names_dtypes_as_the_servers_read_them():
    m = nt.metadata(_entries())
    assert m == {"names": ["a.weight", "b.bias", "steps"], "dtype_names": ["bfloat16", "float32", "int64"], "shapes": [[4, 3], [5], [1]]}
    assert all(nt.dtype_of(d) == getattr(torch, d) for d in m["dtype_names"])
    with pytest.raises(ValueError, match="unknown dtype name"):
        nt.dtype_of("floaty")


@pytest.mark.parametrize("receivers", [1, 2])
def test_every_worker_receives_the_broadcast_in_order(receivers):
    entries = _entries()
    m = nt.metadata(entries)
    s = nt.Sender("gloo", "127.0.0.1", 1 + receivers)
    got = {}

    def worker(rank):
        g = nt.join("gloo", "127.0.0.1", s.port, rank, 1 + receivers)
        got[rank] = nt.receive(g, m["names"], m["dtype_names"], m["shapes"], src=0)

    ts = [threading.Thread(target=worker, args=(r,)) for r in range(1, 1 + receivers)]
    for t in ts:
        t.start()
    info = s.send(entries, timeout_s=60)
    for t in ts:
        t.join(60)
    assert info["tensors"] == 3 and info["bytes"] == 4 * 3 * 2 + 5 * 4 + 8
    for rank in range(1, 1 + receivers):
        names = [n for n, _ in got[rank]]
        assert names == m["names"]
        for (_, sent, dt, _), (_, recv) in zip(entries, got[rank]):
            assert recv.dtype == dt and torch.equal(recv, sent.to(dt))


def test_a_sender_nobody_joins_times_out_naming_the_routes():
    s = nt.Sender("gloo", "127.0.0.1", 2)
    with pytest.raises(TimeoutError, match="init_weight_transfer_engine"):
        s.send(_entries(), timeout_s=0.5)
