"""floe's reference inference engine and trainer.

Thread counts: BLAS/OpenMP pools are sized from FLOE_ENGINE_THREADS (default
1) unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS are already set; this has to
happen before torch is imported, hence here. On a 2-core machine that also
runs the control plane, one thread per server is fastest (measured: two
threads made batched decoding several times slower).

Memory: glibc's mmap threshold is raised here too (``allocator``), before torch allocates
anything, so the per-token tensors of a CPU decode step come warm from the heap instead of as
fresh zero-filled pages (``FLOE_ENGINE_MALLOC=default`` leaves glibc's settings alone).
"""
import os as _os

_threads = _os.environ.get("FLOE_ENGINE_THREADS", "1")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, _threads)

from . import allocator as _allocator  # noqa: E402

_allocator.tune()

__version__ = "0.1.0"
