"""floe_harness.audit.strengthen: stronger tests from the gold patch's traced behaviour. The tests it
writes must pass on the gold code and fail on code that behaves differently on a traced input."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from floe_harness.audit import strengthen as st

DIFFCHECK = Path(__file__).resolve().parents[1] / "floe_harness" / "audit" / "diffcheck.py"
TEST = "tests/test_m.py"
GOLD = "def scale(x, k=2):\n    return x * k\n\n\nclass Tally:\n    def __init__(self):\n        self.n = 0\n\n    def add(self, d):\n        self.n += d\n        return self.n\n"
TESTS = textwrap.dedent("""
    import m


    def test_scale():
        assert m.scale(3) == 6


    def test_tally():
        t = m.Tally()
        assert t.add(2) == 2
""").lstrip()


def repo(root: Path, code: str, extra_tests: str = "") -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "m.py").write_text(code)
    (root / TEST).write_text(TESTS)
    if extra_tests:
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        r = subprocess.run(["git", "apply", "-"], cwd=root, input=extra_tests.encode(), capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
    return root


def trace(root: Path) -> dict:
    r = subprocess.run([sys.executable, str(DIFFCHECK), str(root), "--targets", "m.py", "--tests", TEST], capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout)


def pytest_ok(root: Path) -> bool:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", st.TEST_FILE], cwd=root, capture_output=True, text=True, timeout=60)
    return r.returncode == 0


def test_stronger_tests_pass_on_gold_and_fail_on_a_different_behaviour(tmp_path: Path) -> None:
    """Checks written from the gold trace pass on the gold code; code that agrees with the
    original tests but not on the perturbed inputs (k=2 hard-wired) fails them."""
    g = trace(repo(tmp_path / "g", GOLD))
    out = st.strengthen(g, g, "")
    assert out["testPatch"] and out["checks"] > 2
    assert all(t.startswith(f"{st.TEST_FILE}::test_floe_") for t in out["tests"])
    assert pytest_ok(repo(tmp_path / "gold", GOLD, out["testPatch"]))
    # agrees with the original test (scale(3) == 6) but not on a nearby input (scale(6))
    wrong = GOLD.replace("return x * k", "return x * k + (x > 5)")
    assert not pytest_ok(repo(tmp_path / "wrong2", wrong, out["testPatch"]))


def test_object_runs_are_replayed_with_their_state(tmp_path: Path) -> None:
    """A run of one object's methods becomes a constructor call, each method's result and the
    object's state after it."""
    g = trace(repo(tmp_path / "g", GOLD))
    out = st.strengthen(g, g, "")
    body = out["testPatch"]
    assert "obj = importlib.import_module('m').Tally()" in body
    assert "assert _state(obj) ==" in body
    off_by_one = GOLD.replace("self.n += d", "self.n += d + (d > 3)")
    assert not pytest_ok(repo(tmp_path / "w", off_by_one, body))


def test_first_variants_come_first_and_the_cap_holds() -> None:
    """The variants where a wrong patch differed are checked before the rest, within max_checks."""
    ev = lambda v: [["m:f", f"({v},)", "{}", "return", str(v), None]]  # noqa: E731
    g = {"variants": {f"{TEST}::test_f#{i}": ev(i) for i in range(30)}}
    out = st.strengthen(g, g, "", max_checks=3, first=[f"{TEST}::test_f#25"])
    assert out["checks"] == 3
    assert ".f, 25))" in out["testPatch"].split("def test_floe_f_0")[1].split("def ")[0]


def test_untraceable_calls_give_no_tests_and_say_why() -> None:
    """Arguments that cannot be written back as literals are not turned into checks."""
    g = {"variants": {f"{TEST}::test_f#0": [["m:f", "(<object>,)", "{}", "return", "1", None]]}}
    out = st.strengthen(g, g, "")
    assert out["testPatch"] is None and "written down" in out["reason"]


def test_disagreeing_gold_runs_are_left_out() -> None:
    """A variant whose two gold runs differ (time, randomness) yields no check."""
    a = {"variants": {f"{TEST}::test_f#0": [["m:f", "()", "{}", "return", "1", None]]}}
    b = {"variants": {f"{TEST}::test_f#0": [["m:f", "()", "{}", "return", "2", None]]}}
    assert st.strengthen(a, b, "")["testPatch"] is None


def test_generated_repr_matches_diffcheck() -> None:
    """The written tests normalise results exactly as diffcheck.py logged them (else a gold patch
    returning [16.0] would fail its own stronger tests)."""
    from floe_harness.audit import diffcheck

    ns: dict = {}
    exec(st.HEADER, ns)  # noqa: S102 - the header is this module's own code
    for v in ([16.0], (1.0, 2.5), {"a": 3.0}, {2.0}, 32.0, "x", [[1.0]], None, object()):
        assert ns["_repr"](v) == diffcheck._repr(v), v


def test_pytest_and_replay_variants_become_valid_tests(tmp_path: Path) -> None:
    """Variants of TestCase methods (`TestA::test_b#pytest`) and replays (`replay::m:scale#…`)
    give Python names; the written tests pass on gold and fail on a patch that differs only on
    a replayed input."""
    cls_tests = textwrap.dedent("""
        import unittest
        import m


        class TestScale(unittest.TestCase):
            def test_three(self):
                self.assertEqual(m.scale(3), 6)
    """).lstrip()
    def make(root: Path, code: str, patch: str = "") -> Path:
        r = repo(root, code, patch)
        (r / TEST).write_text(cls_tests)
        return r
    g = trace(make(tmp_path / "g", GOLD))
    keys = list(g["variants"])
    assert any(k.endswith("TestScale::test_three#pytest") for k in keys) and any(k.startswith("replay::m:scale#") for k in keys)
    out = st.strengthen(g, g, "")
    assert out["testPatch"], out
    assert all(t.split("::")[1].isidentifier() for t in out["tests"]), out["tests"]
    assert pytest_ok(make(tmp_path / "gold", GOLD, out["testPatch"]))
    # scale(3) is still 6; scale(4) is not 8
    assert not pytest_ok(make(tmp_path / "wrong", GOLD.replace("return x * k", "return x * k if x == 3 else x"), out["testPatch"]))
