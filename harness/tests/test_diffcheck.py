"""floe_harness/audit/diffcheck.py, the differential check of the data audit, run as the script the
audit runs in a task's container: tiny repositories (a module and tests/test_m.py) are built in
tmp_path and the script's one JSON object on stdout is checked."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from floe_harness.audit import diffcheck

SCRIPT = Path(diffcheck.__file__).resolve()
TEST = "tests/test_m.py"


def make_repo(root: Path, module: str, tests: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "m.py").write_text(textwrap.dedent(module).lstrip("\n"))
    (root / "tests" / "test_m.py").write_text(textwrap.dedent(tests).lstrip("\n"))
    return root


def run_raw(repo: Path | str, cwd: Path | None = None, timeout: float = 20, targets: str = "m.py", extra: tuple = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(repo), "--targets", targets, "--tests", TEST, *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


def check(repo: Path, timeout: float = 20, targets: str = "m.py", extra: tuple = ()) -> dict:
    r = run_raw(repo, timeout=timeout, targets=targets, extra=extra)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout  # one JSON object, nothing the code under test printed
    return json.loads(lines[0])


def variant0(out: dict, test: str) -> list:
    return out["variants"][f"{TEST}::{test}#0"]


def calls(events: list, name: str) -> list:
    return [e for e in events if e[0] == name]


ADD = """
    def add(a, b):
        return a + b
"""


def test_variant0_logs_call_args_and_result(tmp_path: Path) -> None:
    """The unperturbed test logs [name, args repr, kwargs repr, 'return', result repr, None]."""
    repo = make_repo(tmp_path, ADD, """
        import m

        def test_add():
            assert m.add(5, b=2) == 7
    """)
    out = check(repo)
    assert out["importError"] is None
    assert variant0(out, "test_add") == [["m:add", "(5,)", "{'b': 2}", "return", "7", None]]


def test_from_import_is_instrumented_and_print_does_not_leak(tmp_path: Path) -> None:
    """`from m import add` in the test sees the wrapper; what the code under test prints goes to
    stderr, so stdout is the JSON alone (what the audit parses)."""
    repo = make_repo(tmp_path, """
        import sys

        def add(a, b):
            print("noise")
            return a + b
    """, """
        from m import add

        def test_add():
            assert add(1, 2) == 3
    """)
    r = run_raw(repo)
    assert r.returncode == 0, r.stderr
    assert "noise" in r.stderr and "noise" not in r.stdout
    out = json.loads(r.stdout)
    assert variant0(out, "test_add") == [["m:add", "(1, 2)", "{}", "return", "3", None]]


def test_perturbed_variants_exist(tmp_path: Path) -> None:
    """An int literal 5 in the test yields a variant calling with 6 (and 4, 0, ...)."""
    repo = make_repo(tmp_path, ADD, """
        import m

        def test_add():
            m.add(5, 2)
    """)
    out = check(repo)
    keys = [k for k in out["variants"] if k.startswith(f"{TEST}::test_add#") and not k.endswith("#pytest")]
    assert len(keys) > 1
    args = {e[1]: e[4] for events in out["variants"].values() for e in calls(events, "m:add")}
    assert args["(6, 2)"] == "8"
    assert args["(4, 2)"] == "6"
    assert args["(5, 3)"] == "8"
    # variant 0 is the unperturbed call, and no other variant repeats it exactly
    assert variant0(out, "test_add") == [["m:add", "(5, 2)", "{}", "return", "7", None]]
    others = [out["variants"][k] for k in keys if not k.endswith("#0")]
    assert all(events != variant0(out, "test_add") for events in others)


def test_string_and_list_literals_are_perturbed(tmp_path: Path) -> None:
    """A string literal gets e.g. its upper-case variant, a list its reversed one."""
    repo = make_repo(tmp_path, """
        def join(parts, sep):
            return sep.join(parts)
    """, """
        import m

        def test_join():
            m.join(["a", "b"], ",")
    """)
    out = check(repo)
    seen = {(e[1], e[4]) for events in out["variants"].values() for e in calls(events, "m:join")}
    assert ("(['A', 'b'], ',')", "'A,b'") in seen
    assert ("(['b', 'a'], ',')", "'b,a'") in seen
    assert ("(['a', 'b'], '')", "'ab'") in seen


def test_seeds_become_test_inputs(tmp_path: Path) -> None:
    """--seeds puts the gold patch's constants into the inputs: a string literal is tried with a
    seed appended, prepended and alone; an int literal as the seed and its neighbours."""
    repo = make_repo(tmp_path, "def plural(w, n):\n    return w + 's' * n\n", """
        import m

        def test_plural():
            m.plural("cat", 1)
    """)
    plain = check(repo)
    seeded = check(repo, extra=("--seeds", '["sh", 40, true]'))
    args = {e[1] for events in seeded["variants"].values() for e in calls(events, "m:plural")}
    assert {"('catsh', 1)", "('shcat', 1)", "('sh', 1)"} <= args
    assert {"('cat', 40)", "('cat', 39)", "('cat', 41)"} <= args
    plain_args = {e[1] for events in plain["variants"].values() for e in calls(events, "m:plural")}
    assert not any("sh" in a or "40" in a for a in plain_args)
    assert len(seeded["variants"]) > len(plain["variants"])


def test_different_behaviour_shows_and_same_tree_is_deterministic(tmp_path: Path) -> None:
    """`a - b` and `abs(a - b)` agree on the test's own input but differ on a perturbed one;
    the same tree run twice prints byte-identical output."""
    test = """
        import m

        def test_dist():
            assert m.dist(5, 2) == 3
    """
    gold = make_repo(tmp_path / "gold", "def dist(a, b):\n    return abs(a - b)\n", test)
    cand = make_repo(tmp_path / "cand", "def dist(a, b):\n    return a - b\n", test)
    first, second = run_raw(gold), run_raw(gold)
    assert first.returncode == 0 and first.stdout == second.stdout
    g, c = json.loads(first.stdout), check(cand)
    assert g["variants"].keys() == c["variants"].keys()
    assert variant0(g, "test_dist") == variant0(c, "test_dist")
    differ = [k for k in g["variants"] if g["variants"][k] != c["variants"][k]]
    assert differ
    assert any(e[1] == "(0, 2)" and e[4] == "2" for k in differ for e in g["variants"][k])
    assert any(e[1] == "(0, 2)" and e[4] == "-2" for k in differ for e in c["variants"][k])


def test_method_logs_object_state(tmp_path: Path) -> None:
    """A method call logs the object's attributes after the call; __init__ is logged too."""
    repo = make_repo(tmp_path, """
        class Counter:
            def __init__(self):
                self.n = 0

            def bump(self, k):
                self.n += k
                return self.n

            @staticmethod
            def twice(x):
                return 2 * x
    """, """
        import m

        def test_counter():
            c = m.Counter()
            c.bump(5)
            m.Counter.twice(21)
    """)
    out = check(repo)
    assert variant0(out, "test_counter") == [
        ["m:Counter.__init__", "()", "{}", "return", "None", "[('n', 0)]"],
        ["m:Counter.bump", "(5,)", "{}", "return", "5", "[('n', 5)]"],
        ["m:Counter.twice", "(21,)", "{}", "return", "42", None],
    ]
    states = {e[5] for events in out["variants"].values() for e in calls(events, "m:Counter.bump")}
    assert "[('n', 6)]" in states


def test_only_calls_from_test_code_are_logged(tmp_path: Path) -> None:
    """A target function called by another target function is not logged a second time."""
    repo = make_repo(tmp_path, """
        def inner(x):
            return x + 1

        def outer(x):
            return inner(x) * 2
    """, """
        import m

        def test_outer():
            m.outer(1)
    """)
    out = check(repo)
    assert variant0(out, "test_outer") == [["m:outer", "(1,)", "{}", "return", "4", None]]


def test_same_name_in_two_targets_is_told_apart(tmp_path: Path) -> None:
    """Events name the module (dotted for a package) so `f` of two targets do not collide."""
    repo = make_repo(tmp_path, "def f(x):\n    return x\n", """
        import m
        from pkg import util

        def test_both():
            m.f(1)
            util.f(1)
    """)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "util.py").write_text("def f(x):\n    return -x\n")
    out = check(repo, targets="m.py,pkg/util.py")
    assert variant0(out, "test_both") == [
        ["m:f", "(1,)", "{}", "return", "1", None],
        ["pkg.util:f", "(1,)", "{}", "return", "-1", None],
    ]


def test_exceptions_are_logged_and_later_statements_still_run(tmp_path: Path) -> None:
    """A raising call logs 'raise' and its type; a failing assert does not stop the test."""
    repo = make_repo(tmp_path, """
        def parse(s):
            return int(s)
    """, """
        import m

        def test_parse():
            m.parse("x")
            assert m.parse("1") == 2
            m.parse("3")
    """)
    out = check(repo)
    assert variant0(out, "test_parse") == [
        ["m:parse", "('x',)", "{}", "raise", "ValueError", None],
        ["statement", 0, "ValueError"],
        ["m:parse", "('1',)", "{}", "return", "1", None],
        ["m:parse", "('3',)", "{}", "return", "3", None],
    ]


def test_import_error_is_reported(tmp_path: Path) -> None:
    """A target that fails to import gives importError and no variants."""
    repo = make_repo(tmp_path, """
        import no_such_module_for_floe
    """, """
        import m

        def test_x():
            m.f(1)
    """)
    out = check(repo)
    assert out["variants"] == {}
    assert "ModuleNotFoundError" in out["importError"]
    assert "no_such_module_for_floe" in out["importError"]


def test_import_error_from_code(tmp_path: Path) -> None:
    """An exception raised while importing is reported with its type and message."""
    repo = make_repo(tmp_path, "raise RuntimeError('boom at import')\n", "def test_x():\n    pass\n")
    out = check(repo)
    assert out["variants"] == {}
    assert out["importError"].startswith("RuntimeError: ")
    assert "boom at import" in out["importError"]


def test_infinite_loop_is_cut_and_script_finishes(tmp_path: Path) -> None:
    """A hanging call is stopped by the 2-second alarm; the run finishes, the variant ends there
    (no statement runs on after its time is up) and says so with a ["timeout"] event."""
    repo = make_repo(tmp_path, """
        def spin():
            while True:
                pass

        def ping():
            return "pong"
    """, """
        import m

        def test_spin():
            m.spin()
            m.ping()
    """)
    started = time.monotonic()
    out = check(repo, timeout=10)
    assert time.monotonic() - started >= 1.9  # cut by the 2-second alarm, not sooner
    events = variant0(out, "test_spin")
    assert list(out["variants"]) == [f"{TEST}::test_spin#0"]
    assert events[-1] == ["timeout"], events
    assert not any(e[0] == "m:ping" for e in events)


def test_memory_addresses_are_removed(tmp_path: Path) -> None:
    """Reprs like `<object object at 0x7f...>` lose the address, so two runs can agree."""
    repo = make_repo(tmp_path, """
        class Thing:
            pass

        def make():
            return Thing()

        def plain():
            return object()
    """, """
        import m

        def test_make():
            m.make()
            m.plain()
    """)
    r = run_raw(repo)
    assert r.returncode == 0, r.stderr
    assert "0x" not in r.stdout
    events = variant0(json.loads(r.stdout), "test_make")
    assert [e[4] for e in events] == ["<m.Thing object>", "<object object>"]
    assert diffcheck._repr(object()) == "<object object>"


def test_float_with_integer_value_reprs_as_int(tmp_path: Path) -> None:
    """32.0 and 32 give the same repr (and trees returning them the same output); 32.5 does not."""
    assert diffcheck._repr(32.0) == diffcheck._repr(32) == "32"
    assert diffcheck._repr(-0.0) == "0"
    assert diffcheck._repr(32.5) == "32.5"
    assert diffcheck._repr(float("inf")) == "inf"
    assert diffcheck._repr(float("nan")) == "nan"
    assert diffcheck._repr(True) == "True"
    test = "import m\n\ndef test_size():\n    m.size()\n"
    as_float = run_raw(make_repo(tmp_path / "f", "def size():\n    return 64 / 2\n", test))
    as_int = run_raw(make_repo(tmp_path / "i", "def size():\n    return 64 // 2\n", test))
    assert as_float.returncode == as_int.returncode == 0
    assert as_float.stdout == as_int.stdout
    assert variant0(json.loads(as_int.stdout), "test_size")[0][4] == "32"


def test_long_reprs_are_cut() -> None:
    """A repr longer than MAX_REPR is cut, so one huge value cannot swamp the output."""
    r = diffcheck._repr("x" * 10_000)
    assert len(r) == diffcheck.MAX_REPR + 1 and r.endswith("\u2026")


def test_perturbations_are_deterministic_and_distinct() -> None:
    """Nearby values differ from the literal and from each other, and keep its type (an int
    stays an int); bools and None stay put."""
    assert diffcheck.perturbations(5) == [6, 4, 0, -5, 10, 15]
    assert diffcheck.perturbations(0) == [1, -1, 10]
    assert diffcheck.perturbations(True) == [] and diffcheck.perturbations(None) == []
    got = diffcheck.perturbations("ab")
    assert "" in got and "AB" in got and "ab" not in got
    assert len(got) == len(set(got))


def test_lists_are_perturbed_but_tuples_are_left_whole() -> None:
    """A list literal is a sequence to reorder or shorten; a tuple is a record, kept as is."""
    import ast

    fn = ast.parse("def test_x():\n    f((True, None), [True, None])\n").body[0]
    finder = diffcheck._Literals()
    for stmt in fn.body:
        finder.visit(stmt)
    assert [type(n).__name__ for n in finder.found] == ["List"]
    assert len(diffcheck.variants_of(fn)) == 1 + 3  # unperturbed, reversed, without the first, first repeated


# ---------- bugs found in review, fixed ----------

def test_relative_repo_path(tmp_path: Path) -> None:
    """`python3 diffcheck.py REPO` with a relative REPO works like an absolute one."""
    make_repo(tmp_path / "repo", ADD, "import m\n\ndef test_add():\n    m.add(1, 2)\n")
    r = run_raw("repo", cwd=tmp_path)
    out = json.loads(r.stdout)
    assert out["importError"] is None


def test_second_hang_in_the_same_test_is_cut(tmp_path: Path) -> None:
    """Two hanging statements in one test must both be cut, and the script must finish."""
    repo = make_repo(tmp_path, "def spin():\n    while True:\n        pass\n",
                     "import m\n\ndef test_spin():\n    m.spin()\n    m.spin()\n")
    # a hang never ends; 60 s tells it from a slow run on a busy machine (7 s timed out beside a
    # running demo once the check also ran the tests under pytest)
    try:
        check(repo, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("diffcheck hung on the second hanging statement")


def test_hang_inside_except_exception_loop_is_cut(tmp_path: Path) -> None:
    """A retry loop that swallows Exception must still be cut by the alarm."""
    repo = make_repo(tmp_path, """
        import time

        def retry():
            while True:
                try:
                    time.sleep(0.01)
                except Exception:
                    pass
    """, "import m\n\ndef test_retry():\n    m.retry()\n")
    try:
        check(repo, timeout=60)  # a hang never ends; 60 s tells it from a slow run on a busy machine
    except subprocess.TimeoutExpired:
        pytest.fail("diffcheck hung: the code under test swallowed the timeout")


def test_nested_float_reprs_as_int() -> None:
    """[32.0] == [32] in a test, so their reprs should agree as the scalars' do."""
    assert diffcheck._repr([32.0]) == diffcheck._repr([32])


def test_timeout_event_is_logged(tmp_path: Path) -> None:
    """A cut hang is recorded as the documented ["timeout"] event."""
    repo = make_repo(tmp_path, "def spin():\n    while True:\n        pass\n",
                     "import m\n\ndef test_spin():\n    m.spin()\n")
    assert ["timeout"] in variant0(check(repo, timeout=10), "test_spin")


def test_partial_line_written_by_code_does_not_corrupt_result(tmp_path: Path) -> None:
    """Code that writes `progress` without a newline must not spoil the last line's JSON."""
    repo = make_repo(tmp_path, """
        import sys

        def work():
            sys.stdout.write("progress")
            return 1
    """, "import m\n\ndef test_work():\n    m.work()\n")
    r = run_raw(repo)
    assert json.loads(r.stdout.splitlines()[-1])["importError"] is None
