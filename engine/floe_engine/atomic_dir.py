"""A built folder put in place whole: readers see the old folder or the new one, never half of either."""
from __future__ import annotations

import os
import shutil
import tempfile


def replace_dir(tmp: str, out: str) -> None:
    """Move the finished folder ``tmp`` to ``out`` (same filesystem). A stale ``out`` is moved aside
    first, so the swap is two renames, and removed after."""
    if os.path.exists(out):
        trash = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.old.", dir=os.path.dirname(os.path.abspath(out)))
        os.rename(out, os.path.join(trash, "old"))
        os.rename(tmp, out)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, out)
