"""A child that must not outlive its launcher (lifetime.exit_with_parent; the SFT's --parent-pid).

Each case starts a launcher process that starts the child and then waits; the test kills the
launcher with SIGKILL (what a `kill -9` of the demo does to the node process that runs the SFT
warm start) and watches the child. The negative control is the same child without the request:
it outlives the launcher."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ENGINE_DIR

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# Starts argv[1:] ("{ppid}" replaced by its own pid), prints the child's pid, waits.
LAUNCHER = ("import os, subprocess, sys, time\n"
            "p = subprocess.Popen([a.replace('{ppid}', str(os.getpid())) for a in sys.argv[1:]])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(300)\n")

# The children print to stderr: the launcher's stdout carries only the child's pid.
ARMED = ("import sys, time\n"
         "from floe_engine.lifetime import exit_with_parent\n"
         "assert exit_with_parent(int(sys.argv[1]))\n"
         "print('armed', file=sys.stderr, flush=True)\n"
         "time.sleep(300)\n")

UNARMED = "import sys, time\nprint('armed', file=sys.stderr, flush=True)\ntime.sleep(300)\n"


def env():
    return dict(os.environ, PYTHONPATH=ENGINE_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting for whoever adopted it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def launch(child_argv, ready_marker: str, tmp_path, timeout_s: float = 120.0):
    """Start the launcher with the child; wait until the child's output has ready_marker.
    Returns (launcher, child pid, child output file)."""
    out = tmp_path / "child.out"
    with open(out, "w") as f:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, *child_argv], stdout=subprocess.PIPE,
                                    stderr=f, env=env(), text=True)
    child = int(launcher.stdout.readline())
    deadline = time.monotonic() + timeout_s
    while ready_marker not in out.read_text():
        assert alive(child), f"the child ended before it was ready: {out.read_text()[-2000:]}"
        assert time.monotonic() < deadline, f"the child was not ready within {timeout_s} s: {out.read_text()[-2000:]}"
        time.sleep(0.05)
    return launcher, child, out


def kill_launcher(launcher: subprocess.Popen) -> None:
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(timeout=10)


def cleanup(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_child(code: str, tmp_path):
    return launch([sys.executable, "-c", code, "{ppid}"], "armed", tmp_path)


def test_an_armed_child_ends_with_its_launcher(tmp_path):
    launcher, child, _ = run_child(ARMED, tmp_path)
    try:
        kill_launcher(launcher)
        assert gone_within(child, 5), "the child outlived its launcher"
    finally:
        cleanup(child)


def test_negative_control_an_unarmed_child_outlives_its_launcher(tmp_path):
    launcher, child, _ = run_child(UNARMED, tmp_path)
    try:
        kill_launcher(launcher)
        assert not gone_within(child, 1.5), "the control child ended with its launcher: the test could not fail"
    finally:
        cleanup(child)


def test_a_child_already_orphaned_ends_at_once():
    # the parent it names is not its parent: it was reparented before the request took effect
    r = subprocess.run([sys.executable, "-c", "import os\nfrom floe_engine.lifetime import exit_with_parent\n"
                        "exit_with_parent(os.getppid() + 1_000_000)\nprint('still here')"],
                       env=env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL and "still here" not in r.stdout


def test_the_sft_warm_start_ends_with_its_launcher(tmp_path):
    """What infra/warmstart.ts runs (python -m floe_engine.sft … --parent-pid <its pid>), with a
    launcher killed mid-training: the SFT is gone, and wrote no version folder."""
    data = tmp_path / "gold.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"Issue {i}: fix f{i}\n", "completion": f'{{"tool":"edit","path":"m{i}.py"}}'})
                              for i in range(4)))
    argv = [sys.executable, "-m", "floe_engine.sft", "--data", str(data), "--out", str(tmp_path / "pub"),
            "--steps", "1000000", "--lr", "1e-3", "--batch-size", "2", "--model", "tiny:d_model=16,n_layers=1,n_heads=2,context=64",
            "--log-every", "1", "--parent-pid", "{ppid}"]
    # the SFT logs to stdout: send it to the child's output file through a shell redirect
    launcher, child, out = launch(["/bin/sh", "-c", 'exec "$@" 1>&2', "sh", *argv], "[sft] step 2/", tmp_path)
    try:
        kill_launcher(launcher)
        assert gone_within(child, 5), f"the SFT outlived its launcher: {out.read_text()[-500:]}"
        assert not (tmp_path / "pub" / "v0").exists()
    finally:
        cleanup(child)
