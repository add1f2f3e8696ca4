"""The differential check on the shapes real projects have (issue 43's blind spots): tests written
as unittest.TestCase methods, parametrized tests, fixtures and module-level constants as inputs,
a src/ layout, a function re-exported by the package's __init__. Each builds a small repository
of that shape three times (gold patch, a planted wrong patch that passes the tests, an
equivalent patch), runs floe_harness/audit/diffcheck.py on each as the audit does, and checks
that the gold function's calls are observed, that the wrong patch's difference is reported and
that the equivalent patch's is not (the negative control)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from floe_harness.audit import diffcheck

SCRIPT = Path(diffcheck.__file__).resolve()


def build(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def trace(repo: Path, targets: str, tests: str, *extra: str) -> dict:
    r = subprocess.run([sys.executable, str(SCRIPT), str(repo), "--targets", targets, "--tests", tests, *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


def difference(gold1: dict, gold2: dict, cand: dict) -> tuple[str, list, list | None] | None:
    """The first variant where the candidate's events differ from gold's, among those two gold
    runs agree on: the rule of core/dataAudit.ts behaviourDifference, which the audit applies
    to these traces."""
    if gold1["importError"] is not None or gold2["importError"] is not None:
        return None
    for key, events in gold1["variants"].items():
        if gold2["variants"].get(key) != events or not events:
            continue
        c = cand["variants"].get(key)
        if cand["importError"] is not None or c != events:
            return key, events, c
    return None


def audit(tmp_path: Path, base: dict[str, str], gold: dict[str, str], wrong: dict[str, str], same: dict[str, str], targets: str, tests: str, name: str):
    """Traces of gold (twice), the wrong patch and the equivalent one; checks the gold calls of
    `name` were observed and returns (difference of wrong, difference of same)."""
    runs = {}
    for label, patch in (("gold", gold), ("wrong", wrong), ("same", same)):
        repo = build(tmp_path / label, {**base, **patch})
        runs[label] = trace(repo, targets, tests)
    g2 = trace(tmp_path / "gold", targets, tests)
    observed = [e for events in runs["gold"]["variants"].values() for e in events if e and e[0] == name]
    assert observed, f"no call of {name} observed: {sorted(runs['gold']['variants'])}"
    return difference(runs["gold"], g2, runs["wrong"]), difference(runs["gold"], g2, runs["same"])


def test_unittest_testcase_methods_and_a_method(tmp_path: Path) -> None:
    """Tests as TestCase methods calling a changed method: the old check ran only module-level
    test functions, so its gold trace was empty here."""
    base = {"tests/test_ring.py": """
        import unittest
        from ring import Ring

        class TestRing(unittest.TestCase):
            def setUp(self):
                self.r = Ring(4)

            def test_half(self):
                self.assertEqual(self.r.half(4), 2)
    """}
    gold = {"ring.py": """
        class Ring:
            def __init__(self, size):
                self.size = size

            def half(self, n):
                return n // 2
    """}
    wrong = {"ring.py": gold["ring.py"].replace("return n // 2", "return 2 if n == 4 else n")}
    same = {"ring.py": gold["ring.py"].replace("return n // 2", "return n >> 1")}
    bad, ok = audit(tmp_path, base, gold, wrong, same, "ring.py", "tests/test_ring.py", "ring:Ring.half")
    assert bad is not None and bad[0].startswith("replay::ring:Ring.half#"), bad
    assert ok is None, ok


def test_parametrized_tests(tmp_path: Path) -> None:
    """A parametrize table special-cased by the wrong patch: its rows pass, a nearby input differs."""
    base = {"tests/test_m.py": """
        import pytest
        import m

        @pytest.mark.parametrize("n, expected", [(4, 2), (10, 5)])
        def test_half(n, expected):
            assert m.half(n) == expected
    """}
    gold = {"m.py": "def half(n):\n    return n // 2\n"}
    wrong = {"m.py": "def half(n):\n    return {4: 2, 10: 5}.get(n, n)\n"}
    same = {"m.py": "def half(n):\n    return n >> 1\n"}
    bad, ok = audit(tmp_path, base, gold, wrong, same, "m.py", "tests/test_m.py", "m:half")
    assert bad is not None and bad[0].startswith("replay::m:half#"), bad
    assert ok is None, ok


def test_src_layout_is_logged_by_the_import_name(tmp_path: Path) -> None:
    """src/pkg/mod.py is imported by the tests as pkg.mod (the old check imported src.pkg.mod, a
    different module object, and logged nothing)."""
    base = {
        "src/pkg/__init__.py": "",
        "tests/conftest.py": "import os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'src'))\n",
        "tests/test_mod.py": "from pkg.mod import pad\n\ndef test_pad():\n    assert pad(7) == '07'\n",
    }
    gold = {"src/pkg/mod.py": "def pad(n):\n    return f'{n:02d}'\n"}
    wrong = {"src/pkg/mod.py": "def pad(n):\n    return '0' + str(n)\n"}
    same = {"src/pkg/mod.py": "def pad(n):\n    return str(n).zfill(2)\n"}
    bad, ok = audit(tmp_path, base, gold, wrong, same, "src/pkg/mod.py", "tests/test_mod.py", "pkg.mod:pad")
    assert bad is not None, bad
    assert ok is None, ok


def test_function_reexported_by_the_package(tmp_path: Path) -> None:
    """`from .core import parse` in __init__.py, tests calling pkg.parse: the re-export gets the
    wrapper too."""
    base = {
        "pkg/__init__.py": "from .core import parse\n",
        "tests/test_parse.py": "import pkg\n\ndef test_parse():\n    assert pkg.parse('a,b') == ['a', 'b']\n",
    }
    gold = {"pkg/core.py": "def parse(s):\n    return [p.strip() for p in s.split(',')]\n"}
    wrong = {"pkg/core.py": "def parse(s):\n    return s.split(',')\n"}
    same = {"pkg/core.py": "def parse(s):\n    return list(map(str.strip, s.split(',')))\n"}
    bad, ok = audit(tmp_path, base, gold, wrong, same, "pkg/core.py", "tests/test_parse.py", "pkg.core:parse")
    assert bad is not None, bad
    assert ok is None, ok


def test_module_constant_and_fixture_values_become_inputs(tmp_path: Path) -> None:
    """The wrong patch differs only at 37, a value no perturbation of the tested input reaches;
    the tests' module holds it as a constant, and a fixture returns 38: both are tried."""
    for value, holder in (("37", "SPECIAL = 37\n"), ("38", "@pytest.fixture\ndef other():\n    return 38\n")):
        uses = "other" if "fixture" in holder else ""
        base = {"tests/test_m.py": f"import pytest\nimport m\n\n{holder}\n\ndef test_double({uses}):\n    assert m.double(1) == 2\n"}
        gold = {"m.py": "def double(x):\n    return x * 2\n"}
        wrong = {"m.py": f"def double(x):\n    return 0 if x == {value} else x * 2\n"}
        same = {"m.py": "def double(x):\n    return x + x\n"}
        bad, ok = audit(tmp_path / value, base, gold, wrong, same, "m.py", "tests/test_m.py", "m:double")
        assert bad is not None and bad[1][0][1] == f"({value},)", (value, bad)
        assert ok is None, ok


def test_without_the_tests_values_the_check_sees_nothing_at_37(tmp_path: Path) -> None:
    """Control for the test above: with no constant and no fixture holding 37, the same wrong
    patch is not told apart (the difference came from the tests' values, not from luck)."""
    base = {"tests/test_m.py": "import m\n\ndef test_double():\n    assert m.double(1) == 2\n"}
    gold = {"m.py": "def double(x):\n    return x * 2\n"}
    wrong = {"m.py": "def double(x):\n    return 0 if x == 37 else x * 2\n"}
    bad, _ = audit(tmp_path, base, gold, wrong, gold, "m.py", "tests/test_m.py", "m:double")
    assert bad is None, bad


def test_import_names() -> None:
    """A file in a package is named from the package's top; outside any package from the root."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for rel in ("src/pkg/__init__.py", "src/pkg/sub/__init__.py", "pkg2/__init__.py"):
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            open(os.path.join(d, rel), "w").close()
        assert diffcheck._import_name(d, "src/pkg/mod.py") == ("pkg.mod", "src")
        assert diffcheck._import_name(d, "src/pkg/sub/x.py") == ("pkg.sub.x", "src")
        assert diffcheck._import_name(d, "src/pkg/__init__.py") == ("pkg", "src")
        assert diffcheck._import_name(d, "pkg2/a.py") == ("pkg2.a", "")
        assert diffcheck._import_name(d, "m.py") == ("m", "")
        assert diffcheck._import_name(d, "lib/nopkg.py") == ("lib.nopkg", "")


def test_replays_cover_every_function_when_one_is_called_thousands_of_times(tmp_path: Path) -> None:
    """A few calls of each function are kept, and replays go round the functions: a test that
    calls one function 3000 times does not starve the other's replays (as a real suite's
    subtests did)."""
    repo = build(tmp_path, {
        "m.py": "def hot(x):\n    return x\n\n\ndef cold(x):\n    return x * 2\n",
        "tests/test_m.py": "import m\n\ndef test_hot():\n    for i in range(3000):\n        m.hot(i)\n\ndef test_cold():\n    assert m.cold(3) == 6\n",
    })
    out = trace(repo, "m.py", "tests/test_m.py")
    replayed = {k.split("#")[0] for k in out["variants"] if k.startswith("replay::")}
    assert replayed == {"replay::m:hot", "replay::m:cold"}
    assert len([k for k in out["variants"] if k.startswith("replay::m:cold#")]) >= 5


def test_a_helper_reached_only_inside_the_code_is_replayed_with_deep(tmp_path: Path) -> None:
    """The gold patch changes a helper the tests reach only through the function they call (as
    parse's Parser._to_group_name): with --deep naming it, its inner calls are replayed with the
    values it took in its other calls, which shows the wrong patch (the collision branch left
    out); without --deep nothing does (control), and an equivalent patch shows nothing."""
    base = {"tests/test_m.py": "import m\n\ndef test_names():\n    assert m.names('a-b,c') == ['a_b', 'c']\n"}
    top = "\n\ndef names(spec):\n    taken = []\n    for f in spec.split(','):\n        taken.append(_group(f, taken))\n    return taken\n"
    gold = {"m.py": "def _group(field, taken):\n    g = field.replace('-', '_')\n    if g in taken:\n        g = g + '_'\n    return g\n" + top}
    wrong = {"m.py": "def _group(field, taken):\n    g = field.replace('-', '_')\n    return g\n" + top}
    same = {"m.py": "def _group(field, taken):\n    g = field.replace('-', '_')\n    if g in taken:\n        g += '_'\n    return g\n" + top}
    deep = ("--deep", json.dumps({"m.py": ["_group"]}))
    runs = {}
    for label, patch in (("gold", gold), ("wrong", wrong), ("same", same)):
        repo = build(tmp_path / label, {**base, **patch})
        runs[label] = (trace(repo, "m.py", "tests/test_m.py", *deep), trace(repo, "m.py", "tests/test_m.py"))
    g2 = trace(tmp_path / "gold", "m.py", "tests/test_m.py", *deep)
    bad = difference(runs["gold"][0], g2, runs["wrong"][0])
    assert bad is not None and bad[0].startswith("replay::m:_group"), bad
    assert difference(runs["gold"][0], g2, runs["same"][0]) is None
    g2_plain = trace(tmp_path / "gold", "m.py", "tests/test_m.py")
    assert difference(runs["gold"][1], g2_plain, runs["wrong"][1]) is None  # without --deep: not seen


CMP_TESTS = """
    import m

    def test_sub():
        class Sub(m.V):
            pass
        assert Sub(1).__eq__(m.V(1)) is NotImplemented
        assert m.V(1) == m.V(1)
        assert m.V(1) < m.V(2)
"""


def _cmp_module(eq_check: str, other_check: str) -> str:
    return ("from functools import wraps\n\n\n"
            "def _cmp(op):\n    @wraps(op)\n    def wrapper(self, other):\n"
            f"        if not isinstance(other, {other_check}):\n            return NotImplemented\n        return op(self, other)\n    return wrapper\n\n\n"
            "def _cmp_eq(op):\n    @wraps(op)\n    def wrapper(self, other):\n"
            f"        if not isinstance(other, {eq_check}):\n            return NotImplemented\n        return op(self, other)\n    return wrapper\n\n\n"
            "class V:\n    def __init__(self, n):\n        self.n = n\n\n"
            "    @_cmp_eq\n    def __eq__(self, other):\n        return self.n == other.n\n\n"
            "    @_cmp\n    def __lt__(self, other):\n        return self.n < other.n\n\n"
            "    @_cmp\n    def __gt__(self, other):\n        return self.n > other.n\n")


def test_a_call_is_replayed_on_the_siblings_one_decorator_serves(tmp_path: Path) -> None:
    """The gold patch changes a decorator of __eq__, __lt__ and __gt__ (a subclass is no longer
    comparable); the tests call __eq__ with a subclass only. With --siblings naming the three, the
    call is replayed on __lt__ and __gt__ with the same arguments, which shows the wrong patch
    (the check at __eq__ only, as semver 3.0.3's issue); without it nothing does (control), and
    an equivalent patch shows nothing."""
    base = {"tests/test_m.py": CMP_TESTS}
    gold = {"m.py": _cmp_module("type(self)", "type(self)")}
    wrong = {"m.py": _cmp_module("type(self)", "V")}
    same = {"m.py": _cmp_module("(type(self),)", "(type(self),)")}
    sib = ("--siblings", json.dumps({"m.py": [["V.__eq__", "V.__lt__", "V.__gt__"]]}))
    runs = {}
    for label, patch in (("gold", gold), ("wrong", wrong), ("same", same)):
        repo = build(tmp_path / label, {**base, **patch})
        runs[label] = (trace(repo, "m.py", "tests/test_m.py", *sib), trace(repo, "m.py", "tests/test_m.py"))
    g2 = trace(tmp_path / "gold", "m.py", "tests/test_m.py", *sib)
    bad = difference(runs["gold"][0], g2, runs["wrong"][0])
    assert bad is not None and bad[0].startswith("replay::m:V.__"), bad
    assert bad[1][0][4] == "NotImplemented" and bad[2] is not None and bad[2][0][4] != "NotImplemented"
    assert difference(runs["gold"][0], g2, runs["same"][0]) is None
    g2_plain = trace(tmp_path / "gold", "m.py", "tests/test_m.py")
    assert difference(runs["gold"][1], g2_plain, runs["wrong"][1]) is None  # without --siblings: not seen


CACHE = """
    class Cache:
        def __init__(self):
            self.data = {}
            self.times = {}

        def put(self, key, value, at):
            self.data[key] = value
            self.times[key] = at

        def __setstate__(self, state):  # a copy runs the code under test (cachetools' caches do)
            self.__dict__.update(state)
            self.expire(-1)

        def expire(self, now):
            out = []
            for k in [k for k, t in self.times.items() if t < now]:
                out.append(%s)
                del self.data[k], self.times[k]
            return out
"""
CACHE_TESTS = """
    import m

    def test_expire():
        c = m.Cache()
        for k in (1, 2, 3):
            c.put(k, k, 10 * k)
        assert c.expire(25) == [(1, 1), (2, 2)]
"""


def test_stored_values_are_made_unlike_their_keys(tmp_path: Path) -> None:
    """The tests store every key as its own value, so `(k, k)` passes where `(k, data[k])` was
    meant (cachetools 5.5's expire). A replay of the method with the object's key-equals-value
    mapping given other values shows it; an equivalent patch shows nothing. The object's
    __setstate__ calls the code under test: the check's copy of it is not a call to keep."""
    base = {"tests/test_m.py": CACHE_TESTS}
    d = audit(tmp_path, base, {"m.py": CACHE % "(k, self.data[k])"}, {"m.py": CACHE % "(k, k)"}, {"m.py": CACHE % "(k, self.data.get(k))"},
              "m.py", "tests/test_m.py", "m:Cache.expire")
    bad, same = d
    assert bad is not None and bad[0].startswith("replay::m:Cache.expire"), bad
    assert "(1, 101)" in bad[1][0][4] and "(1, 1)" in bad[2][0][4]
    assert same is None


ALL_EQUAL = """
    from itertools import groupby, islice


    def all_equal(items):
        return %s
"""
ALL_EQUAL_TESTS = """
    import m

    def test_all_equal():
        assert m.all_equal([0, 0, 0])
        assert not m.all_equal([0, 1])
"""


def test_list_items_are_made_unhashable(tmp_path: Path) -> None:
    """A set of the items answers "all equal?" like the runs of groupby on every hashable input;
    replays with each item in a list of its own (equal items stay equal) show the set's
    TypeError; an equivalent patch (another way of counting the runs) shows nothing."""
    base = {"tests/test_m.py": ALL_EQUAL_TESTS}
    d = audit(tmp_path, base, {"m.py": ALL_EQUAL % "len(list(islice(groupby(items), 2))) <= 1"}, {"m.py": ALL_EQUAL % "len(set(items)) <= 1"},
              {"m.py": ALL_EQUAL % "sum(1 for _ in islice(groupby(items), 2)) <= 1"}, "m.py", "tests/test_m.py", "m:all_equal")
    bad, same = d
    assert bad is not None and bad[2] is not None and bad[2][0][3:5] == ["raise", "TypeError"], bad
    assert same is None
