"""The fallback pytest runner against a real pytest run: a repository whose configuration
forces colour and quiet mode, with parametrize ids holding spaces, brackets and unicode."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from floe_harness.grading import pytest_runner

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "floe_harness" / "grading"

IDS_PASS = [
    "tests/test_odd.py::test_f[a b]",
    "tests/test_odd.py::test_f[x[1]]",
    "tests/test_odd.py::test_f[\u00e9 \u00fc]",
    "tests/test_odd.py::test_f[\\xe9 \\xfc]",  # the same test as pytest prints it
    "tests/test_odd.py::test_xfail",
]
IDS_FAIL = ["tests/test_odd.py::test_bug"]


def _repo(tmp: Path, fixed: bool) -> Path:
    (tmp / "tests").mkdir()
    (tmp / "pytest.ini").write_text("[pytest]\naddopts = --color=yes -q -x -p no:randomly\n")
    (tmp / "tests" / "test_odd.py").write_text(textwrap.dedent(f"""
        import pytest

        @pytest.mark.parametrize("v", ["a b", "x[1]", "\u00e9 \u00fc"])
        def test_f(v):
            print("PASSED not-a-result", v)
            assert v

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False

        def test_bug():
            assert {fixed!r}
    """))
    return tmp


def _run(repo: Path) -> str:
    env = dict(os.environ, FLOE_PYTEST_REPORT=str(repo / "r.jsonl"), PYTHONPATH=str(PLUGIN_DIR))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "floe_pytest_report", "-p", "no:cacheprovider", "--maxfail=2147483647", "tests/test_odd.py"],
                       cwd=repo, env=env, capture_output=True, text=True)
    report = (repo / "r.jsonl").read_text(encoding="utf-8") if (repo / "r.jsonl").exists() else ""
    assert "\x1b[" in r.stdout, "the repository's addopts must really force colour for this test to mean anything"
    return f"{r.stdout}\n{pytest_runner.REPORT_START}\n{report}\n{pytest_runner.REPORT_END}\n"


def _task():
    return {"failToPass": IDS_FAIL, "passToPass": IDS_PASS, "testPatch": ""}


def test_fixed_repository_reads_as_resolved(tmp_path):
    out = pytest_runner.parse(_task(), _run(_repo(tmp_path, fixed=True)))
    assert [t["outcome"] for t in out["tests"]] == ["passed"] * 6, out
    assert out["resolved"] is True


def test_a_failing_test_is_not_resolved_even_after_an_early_exit_option(tmp_path):
    out = pytest_runner.parse(_task(), _run(_repo(tmp_path, fixed=False)))
    by_id = {t["id"]: t["outcome"] for t in out["tests"]}
    assert by_id["tests/test_odd.py::test_bug"] == "failed"
    # -x in addopts is overridden: the tests after the failure still ran
    assert all(by_id[i] == "passed" for i in IDS_PASS)
    assert out["resolved"] is False


def test_no_report_means_missing_never_passed():
    out = pytest_runner.parse(_task(), "PASSED tests/test_odd.py::test_bug\n")
    assert {t["outcome"] for t in out["tests"]} == {"missing"}
    assert out["resolved"] is False


def test_collection_error_marks_the_file():
    log = f'{pytest_runner.REPORT_START}\n{{"nodeid": "tests/test_odd.py", "when": "collect", "outcome": "failed", "xfail": false}}\n{pytest_runner.REPORT_END}\n'
    out = pytest_runner.parse(_task(), log)
    assert {t["outcome"] for t in out["tests"]} == {"error"}


def test_plan_quotes_odd_paths():
    task = {"failToPass": ["tests/a b.py::t"], "passToPass": [], "testPatch": "diff --git a/tests/a b.py b/tests/a b.py\n"}
    script = pytest_runner.plan(task, "/tmp/floe-grade", "/testbed")["script"]
    assert "'tests/a b.py'" in script
