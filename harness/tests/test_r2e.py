"""floe_harness.grading.r2e: R2E-Gym's log parser and reward, on real and R2E-Gym-shaped logs.

The real logs are the fixture row's execution_result_content (test/fixtures/r2e): pytest 8.3.3
run by the image's run_tests.sh at the fix commit and at its parent, as R2E-Gym records them."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from floe_harness.grading import r2e

ROW_FILE = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "r2e" / "rows" / "r2e-gym.jsonl"
ROW = json.loads(ROW_FILE.read_text())
RESULT = json.loads(ROW["execution_result_content"])
LOG_AT_FIX = RESULT["new_commit_res_stdout"]
LOG_AT_BASE = RESULT["old_commit_res_stdout"]
EXPECTED = json.loads(ROW["expected_output_json"])
F2P = ["test_format_bytes[1048576-1.0 MiB]", "test_format_bytes_unit_boundaries"]


def task(expected: dict[str, str] | None = None, f2p: list[str] | None = None, **extra: object) -> dict:
    exp = EXPECTED if expected is None else expected
    names = list(r2e.normalize(exp))
    f = F2P if f2p is None else f2p
    return {
        "instanceId": f"tinyfmt_{ROW['commit_hash']}", "repo": "tinyfmt", "layout": "r2e-gym",
        "failToPass": f, "passToPass": [n for n in names if n not in f], "expectedOutputs": exp, **extra,
    }


def summary(*lines: str, head: str = "") -> str:
    return (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.9.21, pytest-8.3.4, pluggy-1.5.0\nrootdir: /testbed\n"
        f"{head}"
        "=========================== short test summary info ============================\n"
        + "\n".join(lines)
        + "\n========================= 1 failed, 3 passed in 0.51s ==========================\n"
    )


# ---------------------------------------------------------------------- the fixture's logs

def test_parse_log_pytest_reads_the_summary_of_a_real_run():
    got = r2e.parse_log_pytest(LOG_AT_FIX)
    assert got == EXPECTED  # expected_output_json is this very parse (repo_testextract)
    assert got["TestParse.test_roundtrip"] == "PASSED"  # file dropped, class.method
    assert got["test_format_bytes[1024-1.0 KiB]"] == "PASSED"  # parametrized ids kept
    assert got["test_format_bytes_locale"] == "FAILED"  # cut at " - ": no error text


def test_the_fix_is_resolved():
    out = r2e.parse(task(), LOG_AT_FIX)
    assert out["resolved"] is True
    assert out["logComplete"] is True
    assert out["statuses"] == r2e.normalize(EXPECTED)
    assert len(out["tests"]) == 12
    assert all(t["outcome"] == "passed" for t in out["tests"])
    assert sorted(t["id"] for t in out["tests"] if t["group"] == "FAIL_TO_PASS") == F2P


def test_the_base_is_not():
    out = r2e.parse(task(), LOG_AT_BASE)
    assert out["resolved"] is False
    by_id = {t["id"]: t for t in out["tests"]}
    for name in F2P:
        assert by_id[name] == {"id": name, "group": "FAIL_TO_PASS", "outcome": "failed"}
    # expected FAILED and FAILED again: that test's expectation is met
    assert by_id["test_format_bytes_locale"] == {"id": "test_format_bytes_locale", "group": "PASS_TO_PASS", "outcome": "passed"}


def test_a_test_expected_to_fail_must_fail():
    # an environment where Babel is installed makes the locale test pass: R2E-Gym gives 0
    log = LOG_AT_FIX.replace("FAILED r2e_tests/test_1.py::test_format_bytes_locale - ModuleNotFoundError: N...",
                             "PASSED r2e_tests/test_1.py::test_format_bytes_locale")
    assert log != LOG_AT_FIX
    out = r2e.parse(task(), log)
    assert out["resolved"] is False
    assert [t for t in out["tests"] if t["outcome"] != "passed"] == [{"id": "test_format_bytes_locale", "group": "PASS_TO_PASS", "outcome": "failed"}]


def test_colour_and_carriage_returns_are_removed_from_the_log():
    log = LOG_AT_FIX.replace("PASSED r2e_tests", "\x1b[32mPASSED\x1b[0m r2e_tests").replace("\n", "\r\n")
    assert r2e.parse(task(), log)["resolved"] is True


# ------------------------------------------------------------------------ the reward's rules

def test_an_extra_test_breaks_the_length_check():
    exp = {"test_a": "PASSED", "test_b": "PASSED"}
    out = r2e.parse(task(exp, []), summary("PASSED r2e_tests/test_1.py::test_a", "PASSED r2e_tests/test_1.py::test_b",
                                           "PASSED r2e_tests/test_1.py::test_new_by_agent"))
    assert out["resolved"] is False
    assert all(t["outcome"] == "passed" for t in out["tests"])  # each expected test matched


def test_a_missing_test():
    exp = {"test_a": "PASSED", "test_b": "PASSED"}
    out = r2e.parse(task(exp, ["test_b"]), summary("PASSED r2e_tests/test_1.py::test_a"))
    assert out["resolved"] is False
    assert out["tests"] == [{"id": "test_a", "group": "PASS_TO_PASS", "outcome": "passed"},
                            {"id": "test_b", "group": "FAIL_TO_PASS", "outcome": "missing"}]


def test_error_status_and_error_outcome():
    exp = {"TestFrame.test_round": "PASSED", "test_fixture": "ERROR"}
    log = summary("ERROR r2e_tests/test_1.py::TestFrame::test_round - TypeError: round() got an unexpected keyword",
                  "ERROR r2e_tests/test_1.py::test_fixture - fixture 'frame_or_series' not found")
    out = r2e.parse(task(exp, ["TestFrame.test_round"]), log)
    assert out["statuses"] == {"TestFrame.test_round": "ERROR", "test_fixture": "ERROR"}
    assert [t["outcome"] for t in out["tests"]] == ["error", "passed"]
    assert out["resolved"] is False


def test_an_error_line_without_a_test_id_gives_the_empty_key_which_the_reward_skips():
    # R2E-Gym (eaa9f6c) skips an empty observed key but still counts it in the length check
    exp = {"test_a": "PASSED", "test_b": "PASSED"}
    log = summary("PASSED r2e_tests/test_1.py::test_a", "ERROR r2e_tests/test_2.py - ModuleNotFoundError: No module named 'x'")
    out = r2e.parse(task(exp, []), log)
    assert out["statuses"] == {"": "ERROR", "test_a": "PASSED"}
    assert out["resolved"] is True
    assert r2e.reward({"": "ERROR", "test_a": "PASSED"}, exp) == 1.0


def test_names_are_cut_at_dash_on_both_sides():
    # pandas-style ids with " - " in a parameter: PASSED lines keep them, the reward cuts both maps
    exp = {"test_sub[a - b]": "PASSED", "test_sub[c - d]": "PASSED"}
    log = summary("PASSED r2e_tests/test_1.py::test_sub[a - b]", "PASSED r2e_tests/test_1.py::test_sub[c - d]")
    assert r2e.parse_log_pytest(log) == {"test_sub[a - b]": "PASSED", "test_sub[c - d]": "PASSED"}
    out = r2e.parse(task(exp, []), log)
    assert out["statuses"] == {"test_sub[a": "PASSED", "test_sub[c": "PASSED"}
    assert out["resolved"] is True


def test_colour_codes_in_expected_keys_are_removed():
    # pillow rows publish keys such as "\x1b[1mtest_sanity\x1b[0m"
    exp = {"\x1b[1mTestImage.test_sanity\x1b[0m": "PASSED"}
    log = "\n==================== short test summary info ====================\nPASSED test_1::TestImage::test_sanity\n"
    out = r2e.parse(task(exp, []), log)
    assert out["tests"] == [{"id": "TestImage.test_sanity", "group": "PASS_TO_PASS", "outcome": "passed"}]
    assert out["resolved"] is True


def test_unittest_custom_runner_output():
    log = (
        "============================= test session starts =============================\n"
        "platform linux -- Python 3.9.21\nrootdir: /testbed\n....\ncollected 2 items\n\n"
        "==================== short test summary info ====================\n"
        "PASSED test_1::TestFileTiff::test_sanity\nSKIPPED test_1::TestFileTiff::test_bigtiff\n"
        "=================== 1 passed, 1 skipped in 0.20s ===================\n"
    )
    assert r2e.parse_log_pytest(log) == {"TestFileTiff.test_sanity": "PASSED"}


def test_a_line_is_read_by_the_first_status_word_it_contains():
    # "PASSED" is looked for first anywhere in the line, as R2E-Gym does
    assert r2e.parse_log_pytest(summary("FAILED r2e_tests/test_1.py::test_PASSED_flag - assert 0")) == {"test_PASSED_flag - assert 0": "PASSED"}
    assert r2e.parse_log_pytest(summary("SKIPPED [2] r2e_tests/test_1.py:12: no scipy", "XFAIL r2e_tests/test_1.py::test_x - why")) == {}


def test_no_summary_and_timeout():
    exp = {"test_a": "PASSED"}
    crashed = "ImportError while loading conftest '/testbed/r2e_tests/conftest.py'.\n"
    out = r2e.parse(task(exp, []), crashed)
    assert (out["resolved"], out["logComplete"], out["statuses"]) == (False, False, {})
    timed = summary("PASSED r2e_tests/test_1.py::test_a") + "\n" + r2e.TIMEOUT_OUTPUT + "\n"
    out = r2e.parse(task(exp, []), timed)
    assert (out["resolved"], out["logComplete"], out["statuses"]) == (False, False, {})
    assert [t["outcome"] for t in out["tests"]] == ["missing"]


def test_expected_outputs_are_required():
    with pytest.raises(ValueError, match="expectedOutputs"):
        r2e.parse({"instanceId": "x"}, LOG_AT_FIX)
    with pytest.raises(ValueError, match="expectedOutputs"):
        r2e.plan({"expectedOutputs": {"t": 1}}, "/testbed")


# ---------------------------------------------------------------------------------- plan

def test_plan_runs_the_images_run_tests_sh_from_the_repository():
    p = r2e.plan(task(), "/work/repo")
    assert (p["harness"], p["parser"], p["testCommand"]) == ("r2e-gym", "parse_log_pytest", "bash /testbed/run_tests.sh")
    s = p["script"]
    subprocess.run(["bash", "-n"], input=s, text=True, check=True)
    assert "repo=/work/repo\n" in s
    assert "for d in /r2e_tests /root/r2e_tests; do" in s
    assert "cp -R \"$src\" r2e_tests" in s
    assert "for f in /root/run_tests.sh /testbed/run_tests.sh \"$repo/run_tests.sh\"; do" in s
    assert 'export PATH="$venv/bin":/root/.local/bin:/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' in s
    assert 'timeout 300 bash "$rt" 2>&1' in s


def test_plan_with_the_run_tests_text_from_the_task():
    cmd = "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' .venv/bin/python -W ignore -m pytest -rA r2e_tests"
    p = r2e.plan(task(runTestsSh=cmd), "/testbed")
    assert p["testCommand"] == cmd
    subprocess.run(["bash", "-n"], input=p["script"], text=True, check=True)
    assert "printf '%s' 'PYTHONWARNINGS='\"'\"'ignore::UserWarning" in p["script"]


def test_plan_script_stops_without_the_image(tmp_path):
    # outside an R2E-Gym image: no hidden tests to bring in -> exit 12 with a reason
    p = r2e.plan(task(), str(tmp_path))
    r = subprocess.run(["bash", "-c", p["script"]], capture_output=True, text=True)
    if Path("/r2e_tests").is_dir() or Path("/root/r2e_tests").is_dir():
        pytest.skip("this machine has R2E-Gym hidden tests")
    assert r.returncode == 12
    assert "hidden tests are not readable" in r.stdout
