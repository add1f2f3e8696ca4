#!/usr/bin/env python3
"""Build the realistic development set from tasks/real/specs.py.

For every spec: download the old and the new release's sdist from PyPI with pip (into
$FLOE_HOME/cache/sdists, default .floe/cache/sdists; each checked against its sha256 in
specs.SDISTS), unpack the old one as tasks/real/<id>/repo/ (ignored by git: made here, never
committed), make the gold, test and wrong patches by applying the spec's edits to a copy and
diffing, check that every line the gold patch and the tests add is in the new release's sdist
(the fix is the real one), run the tests at base and at gold to find FAIL_TO_PASS and
PASS_TO_PASS, and write tasks/real/<id>/task.json (committed).

The environment each package's tests need, done as `pip install -e .` would (the sandbox
has python3 and pytest, no network): a src/ layout gets a conftest.py that puts src/ on
sys.path and, where the package reads its version from its metadata, a .dist-info made from
the sdist's PKG-INFO; pytest options that need plugins the sandbox lacks (pytest-cov) are
dropped. These edits are part of the base and listed in task.json's floe.environment.

Usage: python3 tasks/real/build.py [NAME ...]     then: python3 tasks/real/validate.py
The tests run under the sandbox's pytest (7.2.1: its parametrized tests' ids differ from newer
versions'), from a venv made once under $FLOE_HOME/cache/ (FLOE_TASK_PYTHON to use another).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import specs  # noqa: E402

ZERO_SHA = "0" * 40
# the sandbox's environment where it touches tests: the shell floe gives the agent and the grader
# sets TERM=dumb (activities/sandbox/exec.ts, AGENT_ENV) and the pytest runner NO_COLOR=1 and
# PY_COLORS=0 (harness/floe_harness/grading/pytest_runner.py); the labels hold only if the tests
# are run the way the grader runs them
SANDBOX_ENV = {"TERM": "dumb", "NO_COLOR": "1", "PY_COLORS": "0", "LANG": "C.UTF-8"}
ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONHASHSEED="0", **SANDBOX_ENV)
# the Python whose pytest runs the tests: the sandbox's is pytest 7.2.1 (Debian bookworm), and
# pytest's ids of parametrized tests differ between versions (a long string is its own id in
# 7.2, `expected20` in 9), so the FAIL_TO_PASS and PASS_TO_PASS ids must come from that version
SANDBOX_PYTEST = "7.2.1"
PYTHON = os.environ.get("FLOE_TASK_PYTHON") or str(Path(os.environ.get("FLOE_HOME", ROOT / ".floe")) / "cache" / f"pytest-{SANDBOX_PYTEST}" / "bin" / "python")


def ensure_python() -> None:
    """The default PYTHON: a venv with the sandbox's pytest, made once (pip, from PyPI)."""
    if os.environ.get("FLOE_TASK_PYTHON") or Path(PYTHON).exists():
        return
    venv = Path(PYTHON).parents[1]
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"pytest=={SANDBOX_PYTEST}"], check=True)


def pytest_version() -> str:
    r = subprocess.run([PYTHON, "-c", "import pytest; print(pytest.__version__)"], capture_output=True, text=True)
    return r.stdout.strip() or "none"


def cache_dir() -> Path:
    home = Path(os.environ.get("FLOE_HOME", ROOT / ".floe"))
    d = home / "cache" / "sdists"
    d.mkdir(parents=True, exist_ok=True)
    return d


def sdist(package: str, version: str) -> Path:
    key = f"{package}-{version}"
    if key not in specs.SDISTS:
        raise SystemExit(f"{key}: no sha256 pin in specs.SDISTS; add it (pip download --no-deps --no-binary :all: {package}=={version}, then sha256sum)")
    path = cache_dir() / f"{key}.tar.gz"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", f"{package}=={version}", "-d", str(cache_dir())], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != specs.SDISTS[key]:
        raise SystemExit(f"{path}: sha256 {digest}, pinned {specs.SDISTS[key]}: delete the file and build again")
    return path


def unpack(archive: Path, dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
        [top] = os.listdir(tmp)
        shutil.copytree(Path(tmp) / top, dest)


def environment(repo: Path, package: str, version: str) -> list[str]:
    """What installing the package would do, done in the tree; returns what was done."""
    done = []
    if (repo / "src").is_dir():
        (repo / "conftest.py").write_text('import os\nimport sys\n\n# what `pip install -e .` does for a src/ layout\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))\n')
        done.append("conftest.py puts src/ on sys.path")
        has_meta = any(p.suffix in (".egg-info", ".dist-info") for p in (repo / "src").iterdir())
        pkg_info = repo / "PKG-INFO"
        if not has_meta and pkg_info.exists() and "importlib.metadata" in "".join(p.read_text(errors="ignore") for p in (repo / "src").rglob("__init__.py")):
            dist = repo / "src" / f"{package}-{version}.dist-info"
            dist.mkdir()
            (dist / "METADATA").write_text(pkg_info.read_text())
            done.append(f"src/{dist.name}/METADATA from PKG-INFO (the package reads its version from its metadata)")
    for cfg in ("setup.cfg", "pyproject.toml", "tox.ini", "pytest.ini"):
        p = repo / cfg
        if p.exists():
            text = p.read_text()
            new = re.sub(r"^\s*--(no-)?cov[^\n]*\n", "", text, flags=re.M)
            if new != text:
                p.write_text(new)
                done.append(f"{cfg}: pytest-cov options dropped (no pytest-cov in the sandbox)")
                text = new
            # a warning filter naming coverage's warning class: pytest imports the class to
            # parse the filter, and fails when coverage is not installed
            new = re.sub(r"^[^\n]*:coverage\.exceptions\.\w+[^\n]*\n", "", text, flags=re.M)
            if new != text:
                p.write_text(new)
                done.append(f"{cfg}: the warning filter naming coverage.exceptions dropped (no coverage in the sandbox)")
    if not (repo / "conftest.py").exists():
        (repo / "conftest.py").write_text("# puts the repository root on sys.path for pytest (rootdir conftest)\n")
        done.append("empty conftest.py at the root (puts the root on sys.path)")
    # a package that asks the terminal's type (termcolor: no colour when TERM is "dumb") is tested
    # by its release's CI in a terminal that is not dumb; its tests fake a tty but leave TERM alone,
    # and floe's sandbox sets TERM=dumb, so the conftest unsets it as the CI's environment has it
    if any('"TERM"' in p.read_text(errors="ignore") for p in repo.rglob("*.py") if "tests" not in p.parts and p.name != "conftest.py"):
        with (repo / "conftest.py").open("a") as f:
            f.write('\n# the package reads TERM; its tests expect a terminal that is not "dumb", as in its CI\nimport os  # noqa: E402\n\nos.environ.pop("TERM", None)\n')
        done.append("conftest.py unsets TERM (the package reads it; the sandbox sets TERM=dumb; the release's tests expect a colour terminal, as their CI has)")
    return done


def read_tree(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            try:
                out[str(p.relative_to(root))] = p.read_text()
            except UnicodeDecodeError:
                pass
    return out


def apply_edits(files: dict[str, str], edits, what: str, new_tree: dict[str, str] | None = None) -> dict[str, str]:
    """(path, old, new) replaces old by new; (path, None, None) takes the new release's file."""
    out = dict(files)
    for path, old, new in edits:
        if old is None:
            if new_tree is None or path not in new_tree:
                raise SystemExit(f"{what}: {path} is not in the new release")
            out[path] = new_tree[path]
            continue
        text = out.get(path)
        if text is None:
            raise SystemExit(f"{what}: {path} is not in the tree")
        n = text.count(old)
        if n != 1:
            raise SystemExit(f"{what}: the text to replace occurs {n} times in {path} (must be once):\n{old}")
        out[path] = text.replace(old, new)
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> str:
    chunks = []
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel, ""), after.get(rel, "")
        if a == b:
            continue
        # a file made or removed says so as git does (`new file mode`, /dev/null): the grader
        # applies patches with `git apply`, which refuses a new file given as `--- a/<path>`
        head = f"diff --git a/{rel} b/{rel}\n"
        src, dst = f"a/{rel}", f"b/{rel}"
        if rel not in before:
            head, src = head + "new file mode 100644\n", "/dev/null"
        elif rel not in after:
            head, dst = head + "deleted file mode 100644\n", "/dev/null"
        body = list(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), src, dst, n=3))
        chunks.append(head + "".join(body))
    return "".join(chunks)


def added_lines(patch: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            cur = line[6:]
        elif line.startswith("+") and not line.startswith("+++") and cur:
            out.setdefault(cur, []).append(line[1:])
    return out


def check_real(patch: str, new_tree: dict[str, str], what: str) -> None:
    for rel, lines in added_lines(patch).items():
        have = {l.rstrip() for l in new_tree.get(rel, "").splitlines()}
        missing = [l for l in lines if l.strip() and l.rstrip() not in have]
        if missing:
            raise SystemExit(f"{what}: lines not in the new release's {rel}: {missing[:3]}")


def write_tree(root: Path, files: dict[str, str], base: Path) -> None:
    shutil.copytree(base, root)
    for rel, text in files.items():
        p = root / rel
        if not p.exists() or p.read_text(errors="ignore") != text:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)


def run_tests(tree: Path, test_files: list[str], ids: list[str] | None = None) -> dict[str, str]:
    """pytest node id -> passed / failed / skipped, for the given files (or ids)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "r.xml"
        subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", "-o", "junit_family=xunit1", *(ids or test_files)],
                       cwd=tree, env=ENV, capture_output=True, text=True, timeout=600)
        if not xml.exists():
            return {}
        out = {}
        for tc in ET.parse(xml).iter("testcase"):
            # the node id from the class name (``tests.test_ttl.TTLCacheTest``): the junit
            # ``file`` of a test a mixin defines is the mixin's file, not the test's
            name = tc.get("name") or ""
            parts = (tc.get("classname") or "").split(".")
            node = None
            for k in range(len(parts), 0, -1):
                rel = "/".join(parts[:k]) + ".py"
                if (tree / rel).is_file():
                    node = "::".join([rel, *parts[k:], name])
                    break
            if node is None:
                node = f"{tc.get('file') or ''}::{name}"
            status = "passed"
            if tc.find("failure") is not None or tc.find("error") is not None:
                status = "failed"
            elif tc.find("skipped") is not None:
                status = "skipped"
            out[node] = status
        return out


def build(spec: dict) -> dict:
    iid = f"real__{spec['name']}"
    out_dir = HERE / iid
    repo = out_dir / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    out_dir.mkdir(exist_ok=True)
    unpack(sdist(spec["package"], spec["old"]), repo)
    env_done = environment(repo, spec["package"], spec["old"])
    with tempfile.TemporaryDirectory() as tmp:
        newdir = Path(tmp) / "new"
        unpack(sdist(spec["package"], spec["new"]), newdir)
        new_tree = read_tree(newdir)
    base = read_tree(repo)
    gold = apply_edits(base, spec["gold"], f"{iid} gold")
    tested = apply_edits(base, spec["tests"], f"{iid} tests", new_tree)
    wrong = apply_edits(base, spec["wrong"], f"{iid} wrong")
    patch, test_patch, wrong_patch = diff(base, gold), diff(base, tested), diff(base, wrong)
    check_real(patch, new_tree, f"{iid} gold")
    check_real(test_patch, new_tree, f"{iid} tests")
    tried = [diff(base, apply_edits(base, t, f"{iid} tried")) for t in spec["tried"]]
    test_files = sorted({p for p, _, _ in spec["tests"]})
    with tempfile.TemporaryDirectory() as tmp:
        t_base, t_gold = Path(tmp) / "base", Path(tmp) / "gold"
        write_tree(t_base, {k: tested[k] for k in test_files}, repo)
        write_tree(t_gold, {**{k: gold[k] for k in gold if gold[k] != base[k]}, **{k: tested[k] for k in test_files}}, repo)
        at_base, at_gold = run_tests(t_base, test_files), run_tests(t_gold, test_files)
    if not at_gold:
        raise SystemExit(f"{iid}: no test ran at gold (collection error?)")
    broken = [k for k, v in at_gold.items() if v == "failed"]
    f2p = sorted(k for k, v in at_gold.items() if v == "passed" and at_base.get(k) != "passed")
    p2p = sorted(k for k, v in at_gold.items() if v == "passed" and at_base.get(k) == "passed")
    if not f2p:
        raise SystemExit(f"{iid}: no test fails at base and passes at gold")
    row = {
        "instance_id": iid,
        "repo": f"pypi/{spec['package']}",
        "base_commit": ZERO_SHA,
        "environment_setup_commit": ZERO_SHA,
        "problem_statement": spec["statement"],
        "hints_text": "",
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "version": spec["old"],
        "floe": {
            "loose_tests": spec["loose"],
            "wrong_patch": wrong_patch,
            "tried_wrong_patches": tried,
            "probe": spec["probe"],
            "layout": spec["layout"],
            "release": {"package": spec["package"], "old": spec["old"], "new": spec["new"],
                        "sdists": {v: specs.SDISTS[f"{spec['package']}-{v}"] for v in (spec["old"], spec["new"])}},
            "environment": env_done,
            "failing_at_gold": broken,
        },
    }
    (out_dir / "task.json").write_text(json.dumps(row, indent=2, ensure_ascii=False) + "\n")
    return row


def main(argv: list[str]) -> int:
    ensure_python()
    have = pytest_version()
    if have != SANDBOX_PYTEST:
        raise SystemExit(f"{PYTHON} has pytest {have}; the sandbox runs pytest {SANDBOX_PYTEST}, whose test ids the tasks must use. "
                         f"Make one: python3 -m venv .floe/pytest-{SANDBOX_PYTEST} && .floe/pytest-{SANDBOX_PYTEST}/bin/pip install pytest=={SANDBOX_PYTEST}, "
                         f"then FLOE_TASK_PYTHON=.floe/pytest-{SANDBOX_PYTEST}/bin/python python3 tasks/real/build.py")
    names = set(a.removeprefix("real__") for a in argv)
    for spec in specs.TASKS:
        if names and spec["name"] not in names:
            continue
        row = build(spec)
        print(f"{row['instance_id']}: {len(row['FAIL_TO_PASS'])} FAIL_TO_PASS, {len(row['PASS_TO_PASS'])} PASS_TO_PASS, loose={spec['loose']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
