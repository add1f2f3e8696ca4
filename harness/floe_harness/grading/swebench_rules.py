"""SWE-bench-family grading with the official swebench package (pinned 4.1.0).

Everything per repository comes from the package: the spec table
(``MAP_REPO_VERSION_TO_SPECS``: test command, eval commands, install step), the eval script
(``make_eval_script_list_py``: conda activation, test-file reset, test patch, start/end
markers), the log parser (``MAP_REPO_TO_PARSER``), the log reading (``get_logs_eval``) and the
resolution rule (``get_eval_tests_report`` + ``get_resolution_status``). floe changes one
input: ``base_commit`` is the sandbox's fresh single commit (floe replaces the history, and the
base commit's tree is that commit's tree), so the script's ``git checkout <base> <tests>``
and ``git diff <base>`` find it.
"""
from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace
from typing import Any

from swebench.harness.constants import (
    FAIL_ONLY_REPOS,
    FAIL_TO_PASS,
    MAP_REPO_VERSION_TO_SPECS,
    PASS_TO_PASS,
    EvalType,
    ResolvedStatus,
    TestStatus,
)
from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status
from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
from swebench.harness.test_spec.python import make_eval_script_list_py

ENV_NAME = "testbed"


def covers(task: dict[str, Any]) -> bool:
    """The package has a spec (test command) and a log parser for this repository and version."""
    repo, version = task.get("repo", ""), str(task.get("version", ""))
    return repo in MAP_REPO_VERSION_TO_SPECS and version in MAP_REPO_VERSION_TO_SPECS[repo] and repo in MAP_REPO_TO_PARSER


def _instance(task: dict[str, Any], base_commit: str) -> dict[str, Any]:
    return {
        "instance_id": task["instanceId"],
        "repo": task["repo"],
        "version": str(task["version"]),
        "base_commit": base_commit,
        "test_patch": task["testPatch"],
        "FAIL_TO_PASS": task["failToPass"],
        "PASS_TO_PASS": task["passToPass"],
    }


def plan(task: dict[str, Any], base_commit: str, repo_dir: str) -> dict[str, Any]:
    if repo_dir != "/" + ENV_NAME:
        raise ValueError(f"the swebench eval script runs the repository at /{ENV_NAME}, not {repo_dir}")
    instance = _instance(task, base_commit)
    specs = MAP_REPO_VERSION_TO_SPECS[instance["repo"]][instance["version"]]
    lines = make_eval_script_list_py(instance, specs, ENV_NAME, repo_dir, base_commit, instance["test_patch"])
    # TestSpec.eval_script's own header: no `-e`, so the test files are reset at the end
    script = "\n".join(["#!/bin/bash", "set -uxo pipefail", *lines]) + "\n"
    return {
        "harness": "swebench",
        "script": script,
        "parser": MAP_REPO_TO_PARSER[instance["repo"]].__name__,
        "testCommand": specs["test_cmd"],
    }


def _outcome(test_id: str, status_map: dict[str, str]) -> str:
    s = status_map.get(test_id)
    if s is None:
        return "missing"
    if s in (TestStatus.PASSED.value, TestStatus.XFAIL.value):
        return "passed"
    if s == TestStatus.ERROR.value:
        return "error"
    if s == TestStatus.SKIPPED.value:
        return "skipped"
    return "failed"


def parse(task: dict[str, Any], log: str) -> dict[str, Any]:
    spec = SimpleNamespace(repo=task["repo"], version=str(task["version"]), instance_id=task["instanceId"])
    fd, path = tempfile.mkstemp(prefix="floe-eval-", suffix=".log")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(log)
        status_map, found = get_logs_eval(spec, path)
    finally:
        os.unlink(path)
    gold = {FAIL_TO_PASS: list(task["failToPass"]), PASS_TO_PASS: list(task["passToPass"])}
    eval_type = EvalType.FAIL_ONLY if task["repo"] in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    report = get_eval_tests_report(status_map, gold, eval_type=eval_type)
    resolved = found and get_resolution_status(report) == ResolvedStatus.FULL.value
    tests = [{"id": t, "group": FAIL_TO_PASS, "outcome": _outcome(t, status_map)} for t in gold[FAIL_TO_PASS]]
    tests += [{"id": t, "group": PASS_TO_PASS, "outcome": _outcome(t, status_map)} for t in gold[PASS_TO_PASS]]
    return {"statuses": status_map, "tests": tests, "resolved": bool(resolved), "logComplete": bool(found)}
