"""floe_harness.audit.agent_mistakes: wrong patches of the kinds agents write (format specs,
the same edit at one of several sites, one branch of the gold change, off by one and rounding). Each family is run: the candidate's code is executed and
behaves as its description says; a gold patch without the shape gets none of that family."""
from __future__ import annotations

import ast
import textwrap
from typing import Any

from floe_harness.audit import agent_mistakes as am
from floe_harness.audit import candidates as ac


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def load(text: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(text, "<candidate>", "exec"), ns)  # noqa: S102 - the candidate is the code under test
    return ns


def kinds(cands: list, kind: str) -> list:
    return [c for c in cands if c.kind == kind]


def test_format_spec_variants() -> None:
    base = 'def order_id(n):\n    return f"ORD-{n:05d}"\n'
    gold = 'def order_id(n):\n    return f"ORD-{n:06d}"\n'
    got = {load(c.text)["order_id"](42) for c in kinds(am.agent_mistakes("ids.py", base, gold), "format_spec")}
    assert {"ORD-42", "ORD-00042", "ORD-0000042", "ORD-    42"} <= got
    assert "ORD-000042" not in got  # the gold behaviour is no candidate
    # negative control: a gold change outside any format spec gives none of this family
    assert not kinds(am.agent_mistakes("ids.py", 'def f(n):\n    return f"{n}"\n', 'def f(n):\n    return f"{n + 1}"\n'), "format_spec")


def test_precision_variants() -> None:
    gold = 'def money(x):\n    return f"{x:.2f}"\n'
    got = {load(c.text)["money"](1.005) for c in am.format_specs("m.py", 'def money(x):\n    return str(x)\n', gold)}
    assert got == {"1.005", "1.0", "1.005000"}  # no spec, precision 1 and 3, no precision (gold: "1.00")


def test_call_site_one_of_several() -> None:
    base = src("""
        def render(a, b, c):
            x = fmt(a)
            y = fmt(b)
            z = fmt(c)
            return x + y + z


        def fmt(v, strict=False):
            return str(v) if strict else repr(v)
    """)
    gold = base.replace("fmt(a)", "fmt(a, strict=True)").replace("fmt(b)", "fmt(b, strict=True)").replace("fmt(c)", "fmt(c, strict=True)")
    cands = am.call_sites("r.py", base, gold)
    assert len(cands) == 6  # each of 3 sites alone, and every site but each one
    outs = sorted(load(c.text)["render"]("a", "b", "c") for c in cands)
    assert outs == sorted(["a'b''c'", "'a'b'c'", "'a''b'c", "'a'bc", "a'b'c", "ab'c'"])
    # negative control: one site changed, or different edits, give none
    assert not am.call_sites("r.py", base, base.replace("fmt(a)", "fmt(a, strict=True)"))
    assert not am.call_sites("r.py", base, base.replace("fmt(a)", "fmt(a, strict=True)").replace("fmt(b)", "fmt(b, 1)"))


def test_branch_drop_partial_fixes() -> None:
    base = src("""
        def sign(x):
            return 1
    """)
    gold = src("""
        def sign(x):
            if x > 0:
                return 1
            elif x < 0:
                return -1
            else:
                return 0
    """)
    cands = am.branch_drops("s.py", base, gold)
    table = {c.description.split("with ", 1)[1]: tuple(load(c.text)["sign"](v) for v in (5, -5, 0)) for c in cands}
    assert table["its branch `elif x < 0` left out"] == (1, 0, 0)
    assert table["its `else` left out"] == (1, -1, None)
    assert table["its first branch (`if x > 0`) left out"] == (0, -1, 0)
    assert table["the new `if` left out"] == (None, None, None)
    # negative control: a gold patch that writes no `if` gives none
    assert not am.branch_drops("s.py", base, "def sign(x):\n    return (x > 0) - (x < 0)\n")


def test_off_by_one_and_rounding() -> None:
    base = "def per_page(n, k):\n    return n\n"
    gold = "def per_page(n, k):\n    return n / k\n"
    got = {c.description.split("`")[3]: load(c.text)["per_page"](7, 2) for c in am.off_by_ones("p.py", base, gold)}
    assert got == {"n / k + 1": 4.5, "n / k - 1": 2.5, "round(n / k)": 4, "int(n / k)": 3, "n // k": 3}
    assert not am.off_by_ones("p.py", base, "def per_page(n, k):\n    return max(n, k)\n")


def test_every_family_goes_through_candidates_as_a_diff() -> None:
    """Through candidates.candidates(more=...): every diff is unique and leaves valid Python."""
    base = 'def order_id(n):\n    return f"ORD-{n:05d}"\n'
    gold = 'def order_id(n):\n    return f"ORD-{n:06d}"\n'
    files = {"ids.py": {"base": base, "gold": gold}}
    out = ac.candidates(files, more=am.agent_mistakes)
    got = {c["kind"] for c in out}
    assert "format_spec" in got
    assert len({c["diff"] for c in out}) == len(out)
    for c in out:
        assert c["diff"].startswith("diff --git a/ids.py b/ids.py\n")
        new = "".join(ln[1:] + "\n" for ln in c["diff"].splitlines() if ln.startswith(("+", " ")) and not ln.startswith("+++"))
        ast.parse(new)


def test_string_number_bounds_in_a_regex_the_gold_wrote() -> None:
    base = 'import re\nFRACTION = "[0-9]{6}"\n'
    gold = 'import re\nFRACTION = "[0-9]{1,6}"\n'
    got = {load(c.text)["FRACTION"] for c in kinds(am.agent_mistakes("p.py", base, gold), "string_number")}
    assert {"[0-9]{0,6}", "[0-9]{2,6}", "[0-9]{1,5}", "[0-9]{1,7}", "[0-9]+"} <= got
    assert "[0-9]{1,6}" not in got
    # negative controls: a string without digits, and a string the base already had, give none
    assert not kinds(am.agent_mistakes("p.py", 'X = "a"\n', 'X = "b"\n'), "string_number")
    assert not kinds(am.agent_mistakes("p.py", 'X = "[0-9]{6}"\nY = 1\n', 'X = "[0-9]{6}"\nY = 2\n'), "string_number")


def test_guard_made_a_length_test_and_bounds_moved() -> None:
    base = "def tail(xs):\n    rest = xs[1:]\n    return [rest]\n"
    gold = "def tail(xs):\n    rest = xs[1:]\n    if rest:\n        return [rest]\n    return []\n"
    [c] = kinds(am.agent_mistakes("t.py", base, gold), "guard")
    f = load(c.text)["tail"]
    assert f([1, 2, 3]) == [[2, 3]] and f([1, 2]) == []  # one item left: dropped, gold keeps it
    bounds = kinds(am.guards("t.py", "def f(n):\n    return n\n", "def f(n):\n    if n > 3:\n        return 0\n    return n\n"), "guard")
    assert sorted(load(c.text)["f"](4) for c in bounds) == [0, 4]  # n > 4 and n > 2
    # negative control: a gold change with no new `if` gives none
    assert not kinds(am.agent_mistakes("t.py", "def f(n):\n    return n\n", "def f(n):\n    return n + 1\n"), "guard")


def test_unused_parameter_passed_on() -> None:
    base = "def key(*args):\n    return args\n"
    gold = base + "\n\ndef method_key(self, *args):\n    return key(*args)\n"
    [c] = kinds(am.agent_mistakes("k.py", base, gold), "unused_parameter")
    assert load(c.text)["method_key"]("s", 1) == ("s", 1)  # gold: (1,)
    # negative control: every parameter used
    assert not kinds(am.agent_mistakes("k.py", base, base + "\n\ndef g(a):\n    return key(a)\n"), "unused_parameter")


HELPER_BASE = src('''
    def _check(op):
        def wrapper(self, other):
            if not isinstance(other, Num):
                return NotImplemented
            return op(self, other)
        return wrapper


    class Num:
        def __init__(self, n):
            self.n = n

        @_check
        def __eq__(self, other):
            return self.n == other.n

        @_check
        def __lt__(self, other):
            return self.n < other.n
''')
HELPER_GOLD = HELPER_BASE.replace("isinstance(other, Num)", "isinstance(other, type(self))")


def test_shared_helper_fixed_at_one_user_only() -> None:
    """The gold patch changes a decorator two methods use: one candidate per user with the fix
    at that user only (the others on the old decorator), one with it everywhere but there. Run:
    `__eq__`-only refuses a subclass at `==` and still compares it at `<`."""
    got = kinds(am.agent_mistakes("num.py", HELPER_BASE, HELPER_GOLD), "shared_helper")
    assert len(got) == 4, [c.description for c in got]
    only_eq = next(c for c in got if "`Num.__eq__` only" in c.description)
    ns = load(only_eq.text)
    sub = type("Sub", (ns["Num"],), {})
    assert sub(1).__eq__(ns["Num"](1)) is NotImplemented  # fixed here
    assert sub(1).__lt__(ns["Num"](2)) is True  # the old check at the sibling
    gold = load(HELPER_GOLD)
    assert type("Sub", (gold["Num"],), {})(1).__lt__(gold["Num"](2)) is NotImplemented
    assert am.siblings({"num.py": {"base": HELPER_BASE, "gold": HELPER_GOLD}}) == {"num.py": [["Num.__eq__", "Num.__lt__"]]}
    # negative control: a change inside a method, no shared helper changed: none of this family
    inside = HELPER_BASE.replace("return self.n < other.n", "return self.n <= other.n - 1")
    assert not kinds(am.agent_mistakes("num.py", HELPER_BASE, inside), "shared_helper")
    assert am.siblings({"num.py": {"base": HELPER_BASE, "gold": inside}}) == {}


def test_hash_shortcut_for_a_groupby_equality_answer() -> None:
    """An "all equal?" answer from groupby's runs, computed from a set of the items (of their
    keys): the same on hashable items, a TypeError on lists."""
    base = "from itertools import groupby, islice\n\n\ndef all_equal(it):\n    g = groupby(it)\n    return next(g, True) and not next(g, False)\n"
    gold = "from itertools import groupby, islice\n\n\ndef all_equal(it, key=None):\n    return len(list(islice(groupby(it, key), 2))) <= 1\n"
    got = kinds(am.agent_mistakes("r.py", base, gold), "hash_shortcut")
    assert len(got) == 1, [c.description for c in got]
    f = load(got[0].text)["all_equal"]
    assert f("aaa") and not f("ab") and f("Aa", key=str.lower) and not f("Ab", key=str.lower)
    try:
        f([[1], [1]])
        raise AssertionError("a set of lists should not be made")
    except TypeError:
        pass
    assert load(gold)["all_equal"]([[1], [1]])
    # negative control: a gold change without groupby gives none
    assert not kinds(am.agent_mistakes("r.py", "def f(x):\n    return x > 1\n", "def f(x):\n    return x >= 1\n"), "hash_shortcut")
