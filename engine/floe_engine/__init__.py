"""floe's reference inference engine and trainer.

Thread counts: BLAS/OpenMP pools are sized from FLOE_ENGINE_THREADS (default
1) unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS are already set; this has to
happen before torch is imported, hence here. On a 2-core machine that also
runs the control plane, one thread per server is fastest (measured: two
threads made batched decoding several times slower).
"""
import os as _os

_threads = _os.environ.get("FLOE_ENGINE_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, _threads)

__version__ = "0.1.0"
