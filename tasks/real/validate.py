#!/usr/bin/env python3
"""Prove the realistic development set's labels by running the tests (python3 + pytest).

For each tasks/real/<id>/ (built by build.py), in fresh copies of repo/ with the test patch:
  base:  every FAIL_TO_PASS fails, every PASS_TO_PASS passes
  gold:  every FAIL_TO_PASS and PASS_TO_PASS passes
  wrong: loose tasks: every test passes with floe.wrong_patch, and floe.probe prints something
         else in the wrong tree than in the gold tree (the patch is wrong, and the tests do not
         see it); sound tasks: some test (FAIL_TO_PASS or PASS_TO_PASS: the grader
         runs both) fails with it and with each of floe.tried_wrong_patches
  real:  the recorded sdists' hashes are the pinned ones (specs.SDISTS)

Every run is the grader's, step for step: the tree is a git repository with one commit (as the
sandbox makes it), the gold or wrong patch goes in with `git apply`, and the tests run by the
script floe's pytest runner writes (harness/floe_harness/grading/pytest_runner.py: test files
restored, the test patch applied with `git apply -v`, pytest on the test ids' files with the
floe_pytest_report plugin, NO_COLOR=1 PY_COLORS=0) in the sandbox's shell environment (TERM=dumb,
build.SANDBOX_ENV), read by the runner's own parser; `python3` is the venv with the sandbox's pytest.

Usage: python3 tasks/real/validate.py [--json OUT] [--root DIR] [TASK ...]     exit 0 only when all pass
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import specs  # noqa: E402
from build import ENV, PYTHON, ensure_python  # noqa: E402


GRADING = HERE.parents[1] / "harness" / "floe_harness" / "grading"
sys.path.insert(0, str(GRADING.parents[1]))
from floe_harness.grading import pytest_runner  # noqa: E402

GIT_ENV = dict(ENV, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_AUTHOR_NAME="agent", GIT_AUTHOR_EMAIL="agent@floe.invalid",
               GIT_COMMITTER_NAME="agent", GIT_COMMITTER_EMAIL="agent@floe.invalid", GIT_AUTHOR_DATE="2000-01-01T00:00:00Z", GIT_COMMITTER_DATE="2000-01-01T00:00:00Z")


def git(tree: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=tree, env=GIT_ENV, input=stdin, text=True, capture_output=True)


def tree_with(repo: Path, dest: Path, patch: str) -> Path:
    """The sandbox's repository (one commit of repo/), with the patch applied as the grader applies it."""
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".git"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "core.hooksPath=/dev/null", "commit", "-q", "--no-verify", "--allow-empty", "-m", "initial"]):
        r = git(dest, *args)
        if r.returncode:
            raise RuntimeError(f"git {args[0]} in {dest}: {r.stderr}")
    if patch:
        r = git(dest, "apply", "--whitespace=nowarn", "-", stdin=patch)
        if r.returncode:
            raise RuntimeError(f"the patch does not apply with git apply in {dest.name}: {r.stderr}")
    return dest


def run_tests(tree: Path, row: dict, stage: Path) -> dict[str, str]:
    """node id -> passed / failed / error / skipped / missing, for the row's FAIL_TO_PASS and
    PASS_TO_PASS, by the grader's script and parser."""
    stage.mkdir()
    (stage / "test.diff").write_text(row["test_patch"])
    shutil.copy(GRADING / "floe_pytest_report.py", stage)
    task = {"failToPass": row["FAIL_TO_PASS"], "passToPass": row["PASS_TO_PASS"], "testPatch": row["test_patch"]}
    script = pytest_runner.plan(task, str(stage), str(tree))["script"]
    # the sandbox's python3 has pytest 7.2.1: here, the venv build.py made
    env = dict(GIT_ENV, PATH=f"{Path(PYTHON).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600)
    if "floe: the test patch does not apply" in r.stdout:
        raise RuntimeError(f"the test patch does not apply with git apply in {tree.name}: {r.stdout[-1500:]}{r.stderr[-500:]}")
    return {t["id"]: t["outcome"] for t in pytest_runner.parse(task, r.stdout)["tests"]}


# a probe runs as a command in the agent's shell would (TERM=dumb), without the variables the pytest
# runner sets for its own run (NO_COLOR, PY_COLORS)
PROBE_ENV = {k: v for k, v in ENV.items() if k not in ("NO_COLOR", "PY_COLORS")}


def probe(tree: Path, code: str) -> str:
    r = subprocess.run([PYTHON, "-c", "import sys; sys.path[:0] = ['src', '.']\n" + code], cwd=tree, env=PROBE_ENV, capture_output=True, text=True, timeout=60)
    return (r.stdout + r.stderr).strip()


def check(task_dir: Path) -> dict:
    row = json.loads((task_dir / "task.json").read_text())
    f = row["floe"]
    repo = task_dir / "repo"
    if not repo.is_dir():
        return {"id": row["instance_id"], "ok": False, "problems": [f"{repo} is missing: run python3 tasks/real/build.py"]}
    problems = []
    for v, h in f["release"]["sdists"].items():
        if specs.SDISTS.get(f"{f['release']['package']}-{v}") != h:
            problems.append(f"sdist {v}: hash not the pinned one")
    ids = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
    f2p = set(row["FAIL_TO_PASS"])
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        base = run_tests(tree_with(repo, t / "base", ""), row, t / "base-stage")
        gold_tree = tree_with(repo, t / "gold", row["patch"])
        gold = run_tests(gold_tree, row, t / "gold-stage")
        wrong_tree = tree_with(repo, t / "wrong", f["wrong_patch"])
        wrong = run_tests(wrong_tree, row, t / "wrong-stage")
        if any(base.get(i) == "passed" for i in f2p):
            problems.append("base: a FAIL_TO_PASS test passes")
        if any(base.get(i) != "passed" for i in row["PASS_TO_PASS"]):
            problems.append(f"base: a PASS_TO_PASS test does not pass ({[(i, base.get(i)) for i in row['PASS_TO_PASS'] if base.get(i) != 'passed'][:3]})")
        if any(gold.get(i) != "passed" for i in ids):
            problems.append(f"gold: not every test passes ({[i for i in ids if gold.get(i) != 'passed'][:3]})")
        wrong_fails = sorted(i for i in ids if wrong.get(i) != "passed")
        res["wrongFails"] = wrong_fails
        if row["floe"]["loose_tests"]:
            if wrong_fails:
                problems.append(f"loose, but the wrong patch fails {wrong_fails[:3]}")
            pg, pw = probe(gold_tree, f["probe"]), probe(wrong_tree, f["probe"])
            res["probe"] = {"gold": pg, "wrong": pw}
            if pg == pw:
                problems.append(f"loose, but the probe prints the same with gold and wrong: {pg!r}")
        else:
            if not wrong_fails:
                problems.append("sound, but the wrong patch passes every test")
            for k, tp in enumerate(f["tried_wrong_patches"]):
                tr = run_tests(tree_with(repo, t / f"tried{k}", tp), row, t / f"tried{k}-stage")
                if all(tr.get(i) == "passed" for i in ids):
                    problems.append(f"sound, but tried wrong patch {k} passes every test")
    return {"id": row["instance_id"], "loose": row["floe"]["loose_tests"], "ok": not problems, "problems": problems, **res}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--root", default=str(HERE), help="the folder of task folders (default: this one)")
    ap.add_argument("tasks", nargs="*")
    a = ap.parse_args()
    ensure_python()
    dirs = sorted(d for d in Path(a.root).iterdir() if (d / "task.json").exists())
    if a.tasks:
        want = {x if x.startswith("real__") else f"real__{x}" for x in a.tasks}
        dirs = [d for d in dirs if d.name in want]
    started = time.monotonic()
    results = []
    for d in dirs:
        try:
            r = check(d)
        except RuntimeError as e:  # a patch git apply refuses: the grader would refuse it too
            loose = json.loads((d / "task.json").read_text())["floe"]["loose_tests"]
            r = {"id": d.name, "loose": loose, "ok": False, "problems": [str(e).strip()]}
        results.append(r)
        print(f"{'PASS' if r['ok'] else 'FAIL'} {r['id']} ({'loose' if r.get('loose') else 'sound'}){': ' + '; '.join(r['problems']) if r['problems'] else ''}")
    bad = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(bad)}/{len(results)} tasks valid; {sum(1 for r in results if r.get('loose'))} loose, {sum(1 for r in results if r.get('loose') is False)} sound; {time.monotonic() - started:.1f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"tasks": results}, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
