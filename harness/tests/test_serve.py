"""``python -m floe_harness serve``: one long-lived process answers many requests, one JSON line
each, in order, with the request's id; a bad request is answered with an error, never fatal."""
import io
import json
import subprocess
import sys
from pathlib import Path

from floe_harness import cli
from floe_harness.grading.serve import serve

HARNESS_DIR = Path(__file__).resolve().parents[1]

TASK = {"instanceId": "t", "layout": "toy", "failToPass": ["tests/test_a.py::test_x"], "passToPass": [], "testPatch": ""}


def test_serve_answers_each_line_in_order():
    reqs = [
        {"id": 1, "cmd": "which", "req": {"task": TASK}},
        {"id": 2, "cmd": "plan", "req": {"task": TASK, "baseCommit": "abc", "repoDir": "/work/repo", "stageDir": "/tmp/floe-grade"}},
        {"id": 3, "cmd": "nope", "req": {}},
        {"id": 4, "cmd": "parse", "req": {"task": TASK, "harness": "pytest", "log": ""}},
    ]
    out = io.StringIO()
    assert serve(cli.COMMANDS, io.StringIO("".join(json.dumps(r) + "\n" for r in reqs) + "\n"), out) == 0
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    assert replies[0] == {"id": 1, "ok": True, "out": {"harness": "pytest"}}
    assert replies[1]["ok"] and replies[1]["out"]["harness"] == "pytest" and "pytest" in replies[1]["out"]["script"]
    assert replies[2]["ok"] is False and "unknown command" in replies[2]["error"]
    assert replies[3]["ok"] and replies[3]["out"]["resolved"] is False and replies[3]["out"]["logComplete"] is False


def test_serve_matches_the_one_shot_commands():
    req = {"task": TASK, "baseCommit": "abc", "repoDir": "/work/repo", "stageDir": "/tmp/floe-grade"}
    one_shot = subprocess.run([sys.executable, "-m", "floe_harness", "plan"], input=json.dumps(req), capture_output=True, text=True, cwd=HARNESS_DIR, check=True)
    served = subprocess.run([sys.executable, "-m", "floe_harness", "serve"], input=json.dumps({"id": 7, "cmd": "plan", "req": req}) + "\n", capture_output=True, text=True, cwd=HARNESS_DIR, check=True)
    assert json.loads(served.stdout) == {"id": 7, "ok": True, "out": json.loads(one_shot.stdout)}
