"""floe_harness.audit.candidates: the wrong-patch candidates of the data audit.

Every candidate is checked the way the audit uses it: its diff is applied with `git apply` to a
scratch git repository holding the base files, and the result must be valid Python that is
neither the base nor the gold text."""
from __future__ import annotations

import ast
import difflib
import subprocess
import textwrap
from pathlib import Path

import pytest

from floe_harness.audit import candidates as ac


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# A gold patch with a bit of everything the mutator looks at: comparisons, arithmetic, method
# calls from a family, self attributes, a multi-line expression, a new function next to an old
# one, and a second file whose texts lack a trailing newline.
MODEL_BASE = src("""
    import math


    class Box:
        def __init__(self, w, h):
            self.w = w
            self.h = h

        def area(self):
            return self.w * self.h

        def label(self, name):
            return name.lower()


    def clamp(x, lo, hi):
        if x < lo:
            return lo
        return x


    def old_name(items):
        return [i for i in items if i]
""")
MODEL_GOLD = src("""
    import math


    class Box:
        def __init__(self, w, h):
            self.w = w
            self.h = h

        def area(self):
            return max(self.w * self.h, 0)

        def label(self, name):
            return name.strip().upper()


    def clamp(x, lo, hi):
        if x <= lo:
            return lo
        if x > hi and not math.isnan(hi):
            return hi
        return x


    def old_name(items):
        return [i for i in items if i]


    def new_name(items, limit=3):
        total = sum(
            len(i) for i in items
        )
        return total if total <= limit else math.floor(total / 2)
""")
UTIL_BASE = "SCALE = 2\n\ndef scale(v):\n    return v * SCALE"
UTIL_GOLD = "SCALE = 2\n\ndef scale(v):\n    return (v + 1) * SCALE"

SCENARIOS = {
    "one-file": {"pkg/model.py": {"base": MODEL_BASE, "gold": MODEL_GOLD}},
    "two-files": {"pkg/model.py": {"base": MODEL_BASE, "gold": MODEL_GOLD},
                  "pkg/util.py": {"base": UTIL_BASE, "gold": UTIL_GOLD}},
    "no-trailing-newline": {"pkg/util.py": {"base": UTIL_BASE, "gold": UTIL_GOLD}},
    "newline-added": {"pkg/util.py": {"base": UTIL_BASE, "gold": UTIL_GOLD + "\n"}},
    "newline-removed": {"pkg/util.py": {"base": UTIL_BASE + "\n", "gold": UTIL_GOLD}},
}


class Scratch:
    """A git repository holding the base files; `apply` returns the patched texts."""

    def __init__(self, root: Path, files: dict[str, dict[str, str]]) -> None:
        self.root, self.files = root, files
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        self.reset()

    def reset(self) -> None:
        for path, t in self.files.items():
            p = self.root / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(t["base"].encode("utf-8"))

    def apply(self, diff: str) -> dict[str, str]:
        self.reset()
        r = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=self.root, input=diff.encode("utf-8"), capture_output=True)
        assert r.returncode == 0, f"git apply failed: {r.stderr.decode()}\n{diff}"
        return {path: (self.root / path).read_bytes().decode("utf-8") for path in self.files}


def applied(tmp_path: Path, files: dict[str, dict[str, str]], cands: list[dict]) -> list[tuple[dict, dict[str, str]]]:
    repo = Scratch(tmp_path / "repo", files)
    return [(c, repo.apply(c["diff"])) for c in cands]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_candidate_applies_and_parses(tmp_path: Path, name: str) -> None:
    """Each diff applies with git apply to the base tree and leaves valid Python in every file."""
    files = SCENARIOS[name]
    cands = ac.candidates(files)
    assert cands, "the scenario must produce candidates"
    for c, result in applied(tmp_path, files, cands):
        for path, text in result.items():
            try:
                ast.parse(text)
            except SyntaxError as err:  # pragma: no cover - the failure message is the point
                pytest.fail(f"{c['id']} ({c['description']}) leaves {path} unparsable: {err}")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_no_candidate_is_the_base_or_the_gold(tmp_path: Path, name: str) -> None:
    """A candidate that is the unpatched tree or the gold patch itself is not a wrong patch."""
    files = SCENARIOS[name]
    base = {p: t["base"] for p, t in files.items()}
    gold = {p: t["gold"] for p, t in files.items()}
    for c, result in applied(tmp_path, files, ac.candidates(files)):
        assert result != base, c
        assert result != gold, c


def test_unified_is_git_style_and_empty_for_no_change() -> None:
    """`unified` writes git's headers, and nothing at all when the texts are equal."""
    base, gold = MODEL_BASE, MODEL_GOLD
    muts = ac.mutations("m.py", gold, ac.changed_gold_lines(base, gold))
    assert muts
    diff = ac.unified("m.py", base, muts[0].text)
    assert diff.startswith("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ ")
    assert ac.unified("m.py", base, base) == ""


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_ids_unique_and_kinds_known(name: str) -> None:
    """Ids are unique, and every candidate has a known kind and names a file of the patch."""
    files = SCENARIOS[name]
    cands = ac.candidates(files)
    ids = [c["id"] for c in cands]
    assert len(set(ids)) == len(ids)
    assert len({c["diff"] for c in cands}) == len(cands)
    for c in cands:
        assert c["kind"] in {"hunk_subset", "symbol_only", "mutation"}  # without agent_mistakes.py (more=None)
        assert c["path"] in files
        assert c["description"]


def test_all_three_kinds_occur() -> None:
    """The model scenario exercises every family (so the other tests are not vacuous)."""
    kinds = {c["kind"] for c in ac.candidates(SCENARIOS["two-files"])}
    assert kinds == {"hunk_subset", "symbol_only", "mutation"}


@pytest.mark.parametrize("name", ["one-file", "two-files", "no-trailing-newline"])
def test_mutations_only_touch_lines_the_gold_patch_wrote(tmp_path: Path, name: str) -> None:
    """Comparing a mutant with the gold text, every differing gold line is one gold changed."""
    files = SCENARIOS[name]
    muts = [c for c in ac.candidates(files) if c["kind"] == "mutation"]
    assert len(muts) > 10
    for c, result in applied(tmp_path, files, muts):
        for path, t in files.items():
            gold_lines = t["gold"].splitlines()
            got_lines = result[path].splitlines()
            if path != c["path"]:
                assert got_lines == gold_lines, f"{c['id']} changed another file {path}"
                continue
            allowed = ac.changed_gold_lines(t["base"], t["gold"])
            ops = difflib.SequenceMatcher(a=gold_lines, b=got_lines, autojunk=False).get_opcodes()
            touched = [(i1, i2) for tag, i1, i2, _j1, _j2 in ops if tag != "equal"]
            assert touched, f"{c['id']} is the gold text"
            for i1, i2 in touched:
                assert i2 > i1, f"{c['id']} inserts lines: {c['description']}"
                assert set(range(i1 + 1, i2 + 1)) <= allowed, f"{c['id']} touches gold lines {i1 + 1}-{i2} outside {sorted(allowed)}: {c['description']}"


def test_mutations_leave_unchanged_lines_alone_even_when_they_are_mutable() -> None:
    """Lines the gold patch kept (here a comparison and arithmetic) yield no mutants."""
    base = "def f(x):\n    if x < 10:\n        return x * 2\n    return x\n"
    gold = "def f(x):\n    if x < 10:\n        return x * 2\n    return x + 1\n"
    muts = ac.mutations("m.py", gold, ac.changed_gold_lines(base, gold))
    assert muts
    for m in muts:
        lines = m.text.splitlines()
        assert lines[:3] == gold.splitlines()[:3], m.description


def test_comparison_on_changed_line_yields_comparison_mutants(tmp_path: Path) -> None:
    """`x <= 0` written by the gold patch becomes `==`, `<`, `>`, `>=`, `!=` mutants."""
    base = "def sign(x):\n    if x:\n        return -1\n    return 1\n"
    gold = "def sign(x):\n    if x <= 0:\n        return -1\n    return 1\n"
    files = {"s.py": {"base": base, "gold": gold}}
    cands = [c for c in ac.candidates(files) if c["kind"] == "mutation"]
    got = set()
    for _c, r in applied(tmp_path, files, cands):
        test = ast.parse(r["s.py"]).body[0].body[0].test  # the `if` of sign()
        if isinstance(test, ast.Compare) and ast.unparse(test.left) == "x" and ast.unparse(test.comparators[0]) == "0":
            got.add(type(test.ops[0]))
    assert got == {ast.Eq, ast.Lt, ast.Gt, ast.GtE, ast.NotEq}  # every order but the gold's `<=`


def test_changed_gold_lines() -> None:
    """Replaced and inserted lines are reported in gold numbering; a deletion marks its edges."""
    base = "a = 1\nb = 2\nc = 3\nd = 4\n"
    assert ac.changed_gold_lines(base, "a = 1\nb = 20\nc = 3\nd = 4\n") == {2}
    assert ac.changed_gold_lines(base, "a = 1\nb = 2\nx = 0\ny = 0\nc = 3\nd = 4\n") == {3, 4}
    assert ac.changed_gold_lines(base, "a = 1\nd = 4\n") == {1, 2}
    assert ac.changed_gold_lines(base, base) == set()


def test_two_block_gold_yields_one_block_hunk_subsets(tmp_path: Path) -> None:
    """A gold patch of two separate blocks yields hunk_subsets keeping exactly one of them."""
    base = src("""
        def first(x):
            return x


        def middle():
            pass


        def second(y):
            return y
    """)
    gold = base.replace("return x\n", "return x + 1\n").replace("return y\n", "return y * 2\n")
    files = {"two.py": {"base": base, "gold": gold}}
    subsets = [c for c in ac.candidates(files) if c["kind"] == "hunk_subset"]
    assert len(subsets) == 2
    kept = []
    for _c, result in applied(tmp_path, files, subsets):
        text = result["two.py"]
        has_first, has_second = "return x + 1" in text, "return y * 2" in text
        assert has_first != has_second, text
        # the block left out is exactly the base's text
        assert ("return y\n" in text) if has_first else ("return x\n" in text)
        kept.append("first" if has_first else "second")
    assert sorted(kept) == ["first", "second"]


def test_one_block_gold_has_no_hunk_subsets() -> None:
    """With a single change block there is no proper, non-empty subset to offer."""
    base = "def f(x):\n    return x\n"
    gold = "def f(x):\n    return x + 1\n"
    assert ac.hunk_subsets("f.py", base, gold) == []


def test_many_blocks_stay_within_the_subset_cap() -> None:
    """Past the cap, subsets are 'all but one' and 'only one' (2n), never all 2^n - 2."""
    n = 8
    base = "".join(f"v{i} = {i}\n\n\n\n" for i in range(n))
    gold = "".join(f"v{i} = {i + 100}\n\n\n\n" for i in range(n))
    subsets = ac.hunk_subsets("v.py", base, gold)
    assert len(subsets) == 2 * n
    assert len({s.text for s in subsets}) == 2 * n


def test_new_function_next_to_old_yields_alias(tmp_path: Path) -> None:
    """Gold adds `new_name` beside `old_name`: one candidate is the alias `new_name = old_name`."""
    base = "def old_name(x):\n    return x\n"
    gold = base + "\n\ndef new_name(x):\n    return [x]\n"
    files = {"names.py": {"base": base, "gold": gold}}
    symbols = [c for c in ac.candidates(files) if c["kind"] == "symbol_only"]
    results = {c["id"]: r["names.py"] for c, r in applied(tmp_path, files, symbols)}
    aliases = [cid for cid, text in results.items() if "new_name = old_name" in text.splitlines()]
    assert len(aliases) == 1
    ns: dict = {}
    exec(compile(results[aliases[0]], "names.py", "exec"), ns)
    assert ns["new_name"] is ns["old_name"]
    stubs = [text for text in results.values() if "def new_name(*args, **kwargs):" in text]
    assert len(stubs) == 1
    exec(compile(stubs[0], "names.py", "exec"), ns)
    assert ns["new_name"](1, k=2) is None


def test_symbol_only_for_a_file_without_trailing_newline(tmp_path: Path) -> None:
    """The alias is appended on its own line even when the base ends without a newline."""
    base = "def old_name(x):\n    return x"
    gold = "def old_name(x):\n    return x\n\n\ndef new_name(x):\n    return [x]"
    files = {"names.py": {"base": base, "gold": gold}}
    symbols = [c for c in ac.candidates(files) if c["kind"] == "symbol_only"]
    assert symbols
    for c, r in applied(tmp_path, files, symbols):
        ns: dict = {}
        exec(compile(r["names.py"], "names.py", "exec"), ns)
        assert ns["old_name"](3) == 3, c
        assert "new_name" in ns, c


def test_existing_names_get_no_symbol_candidates() -> None:
    """A gold patch that only edits a body defines no new name, so no symbol_only candidate."""
    base = "def f(x):\n    return x\n"
    gold = "def f(x):\n    return x + 1\n"
    assert ac.symbol_only("f.py", base, gold) == []


@pytest.mark.parametrize("limit", [1, 3, 17])
def test_limit_is_honoured(limit: int) -> None:
    """No more than `limit` candidates, the first of the unlimited list, numbered from c000."""
    files = SCENARIOS["two-files"]
    everything = ac.candidates(files)
    assert len(everything) > 17
    some = ac.candidates(files, limit=limit)
    assert len(some) == limit
    assert some == everything[:limit]
    assert [c["id"] for c in some] == [f"c{i:03d}" for i in range(limit)]


def test_non_python_file_gets_no_mutants() -> None:
    """Mutations are for .py files only; other files still get hunk subsets."""
    base = "a: 1\n\n\n\nb: 2\n"
    gold = "a: 10\n\n\n\nb: 20\n"
    cands = ac.candidates({"conf.yaml": {"base": base, "gold": gold}})
    assert {c["kind"] for c in cands} == {"hunk_subset"}


def test_seeds_are_the_constants_the_gold_patch_wrote() -> None:
    """Seeds come from changed lines only, without bools or long strings, each value once."""
    base = "LIMIT = 99\n\ndef plural(w):\n    return w + 's'\n"
    gold = src("""
        LIMIT = 99

        def plural(w):
            if w.endswith("sh") and len(w) > 2 and True:
                return w + "es"
            if w.endswith("xx" * 2) or w == "a very long string that is not an input":
                return w + "es"
            return w + 's'
    """)
    got = ac.seeds({"p.py": {"base": base, "gold": gold}})
    assert sorted(map(repr, got)) == sorted(map(repr, ["sh", 2, "es", "xx"]))
    assert len(got) == 4  # `2` and "es" occur twice but are seeds once
    assert ac.seeds({"p.py": {"base": base, "gold": gold}}, limit=2) == got[:2]


# ---------- bugs found in review, fixed ----------

def test_form_feed_in_source(tmp_path: Path) -> None:
    """A form feed line (as in older sources) must not break the diffs or the line numbers."""
    base = "def f(x):\n    return x\n\x0c\ndef g(y):\n    return y\n"
    gold = "def f(x):\n    return x + 1\n\x0c\ndef g(y):\n    return y * 2\n"
    assert ac.changed_gold_lines(base, gold) == {2, 5}
    files = {"ff.py": {"base": base, "gold": gold}}
    cands = ac.candidates(files)
    for _c, r in applied(tmp_path, files, cands):
        ast.parse(r["ff.py"])


def test_new_file_candidates_apply(tmp_path: Path) -> None:
    """A gold patch that adds a module (base None: the file does not exist) still yields
    applicable candidates, as new-file diffs."""
    files = {"new.py": {"base": None, "gold": "def f(x):\n    return x + 1\n"}}
    cands = ac.candidates(files)
    assert cands
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for c in cands:
        (root / "new.py").unlink(missing_ok=True)
        r = subprocess.run(["git", "apply", "-"], cwd=root, input=c["diff"].encode(), capture_output=True)
        assert r.returncode == 0, r.stderr.decode()


def test_stub_identical_to_gold_is_not_a_candidate() -> None:
    """Gold that just appends `LIMIT = None` must not come back as a 'wrong' stub candidate."""
    base = "def f():\n    return 1\n"
    gold = base + "\nLIMIT = None\n"
    gold_diff = ac.unified("c.py", base, gold)
    assert all(c["diff"] != gold_diff for c in ac.candidates({"c.py": {"base": base, "gold": gold}}))
