"""floe's vLLM worker extension: load floe's published model folders into a running vLLM.

    VLLM_SERVER_DEV_MODE=1 vllm serve <published folder> --worker-extension-cls floe_vllm.FloeWorkerExtension

then ``POST /collective_rpc {"method": "floe_load_folder", "args": ["<folder>"], "kwargs": {"version": 3}}``
(between ``POST /pause`` and ``POST /resume``, followed by ``POST /reset_prefix_cache``) loads
the folder's weights in place on every worker, after checking each file's sha256 against the
folder's ``checkpoint.json``. ``{"method": "floe_ping"}`` answers ``{"floe_vllm": <version>}``.

This package runs inside vLLM's Python environment: importing it imports nothing beyond the
standard library (torch and safetensors are imported when weights are loaded), and it never
imports floe_engine.
"""
__version__ = "0.1.0"

from .worker import FloeWorkerExtension, read_folder, verify_folder, iter_weights  # noqa: E402

__all__ = ["FloeWorkerExtension", "read_folder", "verify_folder", "iter_weights", "__version__"]
