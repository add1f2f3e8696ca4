"""The pytest runner for tasks outside the harness tables (and floe's toy suite).

The script restores every test file that counts to its base version (those the test patch
touches and those the test ids name: the agent's edits to them never count), applies the test
patch, activates the image's environment the way its eval script would (conda ``testbed``,
else a ``.venv`` in the repository), and runs pytest on the test ids' files with the
floe_pytest_report plugin. Outcomes come from the plugin's records, never from pytest's text.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

REPORT_START = ">>>>> floe pytest report"
REPORT_END = ">>>>> end of floe pytest report"
TESTS_START = ">>>>> Start Test Output"
TESTS_END = ">>>>> End Test Output"


def test_files(ids: list[str]) -> list[str]:
    return sorted({i.split("::", 1)[0] for i in ids})


def changed_files(diff: str) -> list[str]:
    out = []
    for line in diff.split("\n"):
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            if len(parts) == 2:
                out.append(parts[1].strip().strip('"'))
    return out


# one activation rule for the agent's shell and this runner
ACTIVATE = (Path(__file__).with_name("activate.sh")).read_text(encoding="utf-8")


def plan(task: dict[str, Any], stage_dir: str, repo_dir: str) -> dict[str, Any]:
    ids = list(task["failToPass"]) + list(task["passToPass"])
    restore = sorted(set(changed_files(task["testPatch"])) | set(test_files(ids)))
    files = " ".join(shlex.quote(f) for f in test_files(ids))
    report = f"{stage_dir}/pytest-report.jsonl"
    script = f"""#!/bin/bash
set -uo pipefail
cd {shlex.quote(repo_dir)}
for f in {" ".join(shlex.quote(f) for f in restore)}; do
  if git cat-file -e "HEAD:$f" 2>/dev/null; then git checkout -q HEAD -- "$f"; else rm -rf -- "$f"; fi
done
if [ -s {stage_dir}/test.diff ]; then
  git apply -v --whitespace=nowarn {stage_dir}/test.diff || {{ echo "floe: the test patch does not apply"; exit 11; }}
fi
{ACTIVATE}
rm -f {report}
export FLOE_PYTEST_REPORT={report} PYTHONPATH={stage_dir}${{PYTHONPATH:+:$PYTHONPATH}} PY_COLORS=0 NO_COLOR=1
echo '{TESTS_START}'
python3 -m pytest -p floe_pytest_report -p no:cacheprovider -rA --maxfail=2147483647 {files}
echo '{TESTS_END}'
echo '{REPORT_START}'
cat {report} 2>/dev/null
echo '{REPORT_END}'
"""
    return {"harness": "pytest", "script": script, "parser": "floe_pytest_report", "testCommand": "python3 -m pytest -p floe_pytest_report"}


_RANK = {"missing": 0, "skipped": 1, "passed": 2, "failed": 3, "error": 4}


def statuses(log: str) -> dict[str, str]:
    """Per node id: PASSED, FAILED, ERROR, SKIPPED or XFAIL (swebench's status names)."""
    start, end = log.rfind(REPORT_START), log.rfind(REPORT_END)
    if start < 0 or end < start:
        return {}
    worst: dict[str, str] = {}
    for line in log[start + len(REPORT_START):end].split("\n"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        when, outcome = r.get("when"), r.get("outcome")
        if when == "call":
            o = "passed" if outcome == "passed" else "skipped" if outcome == "skipped" else "failed"
        elif when == "collect":
            o = "error"
        else:  # setup / teardown: only failures count (a skip in setup is a skip)
            o = "error" if outcome == "failed" else "skipped" if outcome == "skipped" else None
        if o is None:
            continue
        if r.get("xfail") and o in ("skipped", "passed"):
            o = "passed"  # xfail / xpass, as swebench reads XFAIL
        node = r.get("nodeid", "")
        if _RANK[o] > _RANK.get(worst.get(node, "missing"), 0):
            worst[node] = o
    return {k: {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}[v] for k, v in worst.items()}


def _escaped(test_id: str) -> str:
    """pytest's default form of a non-ASCII parametrize id (``_ascii_escaped_by_config``):
    a row may list the id as written in the source or as pytest printed it."""
    head, sep, params = test_id.partition("[")
    return head + sep + params.encode("unicode_escape").decode("ascii") if sep else test_id


def parse(task: dict[str, Any], log: str) -> dict[str, Any]:
    st = statuses(log)
    # a collection error of a whole file (its node id is the file) marks its unreported tests
    file_errors = {k for k, v in st.items() if v == "ERROR" and "::" not in k}
    tests = []
    for group, ids in (("FAIL_TO_PASS", task["failToPass"]), ("PASS_TO_PASS", task["passToPass"])):
        for i in ids:
            s = st.get(i, st.get(_escaped(i)))
            if s is None:
                o = "error" if i.split("::", 1)[0] in file_errors else "missing"
            else:
                o = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}[s]
            tests.append({"id": i, "group": group, "outcome": o})
    resolved = REPORT_END in log and len(tests) > 0 and all(t["outcome"] == "passed" for t in tests)
    return {"statuses": st, "tests": tests, "resolved": resolved, "logComplete": REPORT_END in log}
