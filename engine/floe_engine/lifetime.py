"""A child process that must not outlive the process that started it.

A launcher killed with SIGKILL runs no cleanup: its children are reparented and keep running
(a torchrun rank waits in a collective for days; the demo's SFT warm start trains on for
minutes and races the rerun's own). ``exit_with_parent`` asks the kernel to SIGKILL this process
when its parent ends (Linux ``PR_SET_PDEATHSIG``), and covers the race where the parent ended
before the request took effect.
"""
from __future__ import annotations

import os
import signal
import sys
from typing import Optional

PR_SET_PDEATHSIG = 1


def exit_with_parent(parent_pid: Optional[int] = None) -> bool:
    """SIGKILL this process when its parent ends. ``parent_pid``: the pid of the process that
    started this one; when this process's parent is no longer that pid (it was reparented before
    the request took effect), it ends now. Without it, a parent of pid 1 counts as gone. Returns
    False where the kernel offers no such request (not Linux): nothing is set up there."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            return False
    except (OSError, AttributeError):
        return False
    parent = os.getppid()
    if (parent != parent_pid) if parent_pid is not None else parent == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return True
