"""A pytest plugin that records each test's outcome as JSON lines, by node id.

floe's grader puts this file next to the run and loads it with ``-p floe_pytest_report``. It
reads pytest's own report objects, so the repository's pytest configuration (colour forced on
by ``addopts``, ``-q``/``-v``, plugins, xdist workers) cannot change what is recorded, and node
ids with spaces, brackets or unicode arrive byte for byte. Python 3.6+, standard library only:
it runs inside the task's environment, whatever that is.

Each line of $FLOE_PYTEST_REPORT: {"nodeid": ..., "when": "setup"|"call"|"teardown"|"collect",
"outcome": "passed"|"failed"|"skipped", "xfail": bool}.
"""
import json
import os


def _write(record):
    path = os.environ.get("FLOE_PYTEST_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=True) + "\n")


def pytest_runtest_logreport(report):
    # under xdist the controller gets every worker's reports; workers must not write twice
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _write({"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "xfail": hasattr(report, "wasxfail")})


def pytest_collectreport(report):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if report.failed:
        _write({"nodeid": report.nodeid, "when": "collect", "outcome": "failed", "xfail": False})
