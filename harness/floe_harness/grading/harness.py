"""Which harness grades a task, and its plan and parse.

R2E-Gym rows by R2E-Gym's rules; floe's toy suite by the pytest runner; SWE-bench-family rows
by the swebench package when its tables cover the repository and version, else by the pytest
runner.

plan  {"task": <floe Task>, "baseCommit": sha, "repoDir": path, "stageDir": path}
      -> {"harness": "swebench"|"r2e-gym"|"pytest", "script": bash, "parser": name, "testCommand": str}
parse {"task": <floe Task>, "harness": name, "log": text}
      -> {"statuses": {test: status}, "tests": [{"id", "group", "outcome"}], "resolved": bool, "logComplete": bool}
which {"task": <floe Task>} -> {"harness": name}

swebench_rules and r2e are imported when a task needs them: importing the swebench package
costs seconds, which a toy-suite grading never pays.
"""
from __future__ import annotations

from typing import Any, Callable

from floe_harness.grading import pytest_runner


def harness_for(task: dict[str, Any]) -> str:
    layout = task.get("layout", "")
    if layout == "r2e-gym":
        return "r2e-gym"
    if layout == "toy":
        return "pytest"
    from floe_harness.grading import swebench_rules

    return "swebench" if swebench_rules.covers(task) else "pytest"


def plan(req: dict[str, Any]) -> dict[str, Any]:
    task = req["task"]
    h = harness_for(task)
    if h == "swebench":
        from floe_harness.grading import swebench_rules

        return swebench_rules.plan(task, req["baseCommit"], req["repoDir"])
    if h == "r2e-gym":
        from floe_harness.grading import r2e

        return r2e.plan(task, req["repoDir"])
    return pytest_runner.plan(task, req["stageDir"], req["repoDir"])


def parse(req: dict[str, Any]) -> dict[str, Any]:
    task, h = req["task"], req["harness"]
    if h == "swebench":
        from floe_harness.grading import swebench_rules

        return swebench_rules.parse(task, req["log"])
    if h == "r2e-gym":
        from floe_harness.grading import r2e

        return r2e.parse(task, req["log"])
    if h == "pytest":
        return pytest_runner.parse(task, req["log"])
    raise ValueError(f"unknown harness {h!r} (swebench, r2e-gym, pytest)")


COMMANDS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "which": lambda req: {"harness": harness_for(req["task"])},
    "plan": plan,
    "parse": parse,
}
