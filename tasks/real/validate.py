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

Usage: python3 tasks/real/validate.py [--json OUT] [--root DIR] [TASK ...]     exit 0 only when all pass
"""
from __future__ import annotations

import argparse
import json
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
from build import ENV, PYTHON, ensure_python, run_tests  # noqa: E402


def tree_with(repo: Path, dest: Path, *patches: str) -> Path:
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    for p in patches:
        if p:
            r = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch"], input=p, cwd=dest, text=True, capture_output=True)
            if r.returncode:
                raise RuntimeError(f"patch does not apply in {dest.name}: {r.stdout}{r.stderr}")
    return dest


def probe(tree: Path, code: str) -> str:
    r = subprocess.run([PYTHON, "-c", "import sys; sys.path[:0] = ['src', '.']\n" + code], cwd=tree, env=ENV, capture_output=True, text=True, timeout=60)
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
        base = run_tests(tree_with(repo, t / "base", row["test_patch"]), [], ids)
        gold_tree = tree_with(repo, t / "gold", row["patch"], row["test_patch"])
        gold = run_tests(gold_tree, [], ids)
        wrong_tree = tree_with(repo, t / "wrong", f["wrong_patch"], row["test_patch"])
        wrong = run_tests(wrong_tree, [], ids)
        if any(base.get(i) == "passed" for i in f2p):
            problems.append("base: a FAIL_TO_PASS test passes")
        if any(base.get(i) != "passed" for i in row["PASS_TO_PASS"]):
            problems.append("base: a PASS_TO_PASS test does not pass")
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
                tr = run_tests(tree_with(repo, t / f"tried{k}", tp, row["test_patch"]), [], ids)
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
        r = check(d)
        results.append(r)
        print(f"{'PASS' if r['ok'] else 'FAIL'} {r['id']} ({'loose' if r.get('loose') else 'sound'}){': ' + '; '.join(r['problems']) if r['problems'] else ''}")
    bad = [r for r in results if not r["ok"]]
    print(f"{len(results) - len(bad)}/{len(results)} tasks valid; {sum(1 for r in results if r.get('loose'))} loose, {sum(1 for r in results if r.get('loose') is False)} sound; {time.monotonic() - started:.1f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"tasks": results}, indent=2) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
