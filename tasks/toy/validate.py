#!/usr/bin/env python3
"""Validate the toy task suite (python3 stdlib + pytest only).

For each task dir under tasks/toy/ (or the ones named on the command line), in fresh
temporary copies of repo/:
  1. base:     with test_patch applied, every FAIL_TO_PASS fails, every PASS_TO_PASS passes
  2. gold:     patch + test_patch: every FAIL_TO_PASS and PASS_TO_PASS passes
  3. solution: the solution's bash commands produce exactly the gold-patched tree
  4. wrong:    wrong_patch + test_patch: loose tasks pass every test (the tests are fooled);
               sound tasks fail at least one FAIL_TO_PASS
  5. schema:   fields and types, instance_id == dir name, one-line gold patch,
               solution commands <= 60 chars, hidden tests absent from repo/

Usage: python3 tasks/toy/validate.py [--json OUT] [--jobs N] [TASK ...]
Exit status is 0 only if every task passes.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_CMD = 60
BUG_CLASSES = {"off-by-one", "wrong-operator", "missing-case", "bad-default", "formatting",
               "error-handling", "state", "boundary", "type", "logic"}
HIDDEN = "tests/test_hidden.py"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
ID_RE = re.compile(r"^toy__[a-z0-9_]+$")
ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
           PYTHONHASHSEED="0")
HAVE_GIT = shutil.which("git") is not None


class Invalid(Exception):
    pass


# ------------------------------------------------------------------------------- schema

def check_schema(task, dirname):
    def need(cond, msg):
        if not cond:
            raise Invalid(f"schema: {msg}")

    str_fields = ["instance_id", "repo", "base_commit", "problem_statement", "hints_text",
                  "patch", "test_patch", "version", "environment_setup_commit"]
    for f in str_fields:
        need(isinstance(task.get(f), str), f"{f} must be a string")
    need(task["instance_id"] == dirname, f"instance_id {task['instance_id']!r} != dir {dirname!r}")
    need(ID_RE.match(dirname), "instance_id must look like toy__<lower_snake>")
    need(re.match(r"^[\w.-]+/[\w.-]+$", task["repo"]), "repo must be owner/name")
    need(SHA_RE.match(task["base_commit"]), "base_commit must be a 40-hex sha")
    need(SHA_RE.match(task["environment_setup_commit"]), "environment_setup_commit must be a 40-hex sha")
    need(task["problem_statement"].strip(), "problem_statement is empty")
    for f in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        v = task.get(f)
        need(isinstance(v, list) and v and all(isinstance(x, str) and "::" in x for x in v),
             f"{f} must be a non-empty list of pytest node ids")
    need(all(x.startswith(HIDDEN + "::") for x in task["FAIL_TO_PASS"]), f"FAIL_TO_PASS must live in {HIDDEN}")
    need(not any(x.startswith(HIDDEN) for x in task["PASS_TO_PASS"]), "PASS_TO_PASS must not use hidden tests")

    floe = task.get("floe")
    need(isinstance(floe, dict), "floe must be an object")
    need(floe.get("bug_class") in BUG_CLASSES, f"floe.bug_class {floe.get('bug_class')!r} not in {sorted(BUG_CLASSES)}")
    need(isinstance(floe.get("loose_tests"), bool), "floe.loose_tests must be a bool")
    need(isinstance(floe.get("wrong_patch"), str) and floe["wrong_patch"].startswith("diff --git "),
         "floe.wrong_patch must be a unified diff")
    need(floe["wrong_patch"] != task["patch"], "floe.wrong_patch equals the gold patch")

    sol = floe.get("solution")
    need(isinstance(sol, list) and len(sol) >= 2, "floe.solution must list at least a command and submit")
    for i, step in enumerate(sol):
        need(isinstance(step, dict) and isinstance(step.get("arguments"), dict), f"solution[{i}] malformed")
        last = i == len(sol) - 1
        if last:
            need(step.get("name") == "submit", "solution must end with submit")
        else:
            need(step.get("name") == "bash", f"solution[{i}] must be a bash call")
            cmd = step["arguments"].get("command")
            need(isinstance(cmd, str) and cmd.strip(), f"solution[{i}] has no command")
            need(len(cmd) <= MAX_CMD, f"solution[{i}] command is {len(cmd)} chars (> {MAX_CMD})")

    need(task["patch"].startswith("diff --git "), "patch must be a git-style unified diff")
    minus = [l for l in task["patch"].splitlines() if l.startswith("-") and not l.startswith("--- ")]
    plus = [l for l in task["patch"].splitlines() if l.startswith("+") and not l.startswith("+++ ")]
    need(len(minus) == 1 and len(plus) == 1, f"gold patch must change exactly one line ({len(minus)}-/{len(plus)}+)")
    tp = task["test_patch"]
    need(tp.startswith(f"diff --git a/{HIDDEN} b/{HIDDEN}\nnew file mode 100644\n--- /dev/null\n+++ b/{HIDDEN}\n"),
         f"test_patch must only add {HIDDEN}")
    need(tp.count("diff --git ") == 1, "test_patch must touch one file")
    need(not task["hints_text"] or isinstance(task["hints_text"], str), "hints_text")
    need(task["patch"] not in task["problem_statement"], "problem_statement contains the patch")


# ------------------------------------------------------------------------------- helpers

def copy_repo(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dst


def apply_patch(cwd, text, what):
    path = os.path.join(os.path.dirname(cwd), f"{os.path.basename(cwd)}.{what}.diff")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    if HAVE_GIT:
        r = subprocess.run(["git", "apply", "--check", path], cwd=cwd, capture_output=True, text=True)
        if r.returncode != 0:
            raise Invalid(f"{what}: git apply --check failed: {r.stderr.strip()}")
    r = subprocess.run(["patch", "-p1", "--batch", "--forward", "-s", "--no-backup-if-mismatch", "-i", path],
                       cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise Invalid(f"{what}: patch -p1 failed: {(r.stdout + r.stderr).strip()}")


def read_tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".pytest_cache")]
        for name in filenames:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def run_pytest(cwd, nodeids, stage):
    """Run pytest once over the files of nodeids; return {nodeid: outcome}.

    outcome is 'passed', 'failed', 'error', 'skipped' or 'missing' (not collected: a wrong id,
    or a file that failed to import). Files, not ids, go on the command line: pytest aborts
    the whole run when a listed id cannot be collected, and a hidden test file that fails to
    import at base must not stop the visible tests from running.
    """
    xml = os.path.join(os.path.dirname(cwd), f"{os.path.basename(cwd)}.junit.xml")
    files = sorted({n.split("::", 1)[0] for n in nodeids})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           f"--junitxml={xml}", "-o", "junit_family=xunit1", *files]
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)
    if proc.returncode in (3, 4) or not os.path.exists(xml):
        tail = (proc.stdout + proc.stderr).strip()[-1500:]
        raise Invalid(f"{stage}: pytest could not run {files} (exit {proc.returncode})\n{tail}")
    outcomes = {n: "missing" for n in nodeids}
    for case in ET.parse(xml).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        nodeid = f"{cls.replace('.', '/')}.py::{name}"
        if nodeid not in outcomes:
            continue
        kinds = {child.tag for child in case}
        outcomes[nodeid] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                            else "skipped" if "skipped" in kinds else "passed")
    return outcomes, (proc.stdout + proc.stderr)[-1500:]


def not_passed(outcomes, ids):
    return {i: outcomes.get(i, "missing") for i in ids if outcomes.get(i) != "passed"}


# ------------------------------------------------------------------------------- checks

def validate(task_dir):
    dirname = os.path.basename(task_dir)
    with open(os.path.join(task_dir, "task.json"), encoding="utf-8") as f:
        task = json.load(f)
    check_schema(task, dirname)
    repo = os.path.join(task_dir, "repo")
    tree = read_tree(repo)
    if HIDDEN in tree:
        raise Invalid(f"repo/ must not contain {HIDDEN}")
    if any("__pycache__" in root for root, _, _ in os.walk(repo)):
        raise Invalid("repo/ contains __pycache__")
    if "tests/test_visible.py" not in tree:
        raise Invalid("repo/ has no tests/test_visible.py")

    f2p, p2p = task["FAIL_TO_PASS"], task["PASS_TO_PASS"]
    floe = task["floe"]
    loose = floe["loose_tests"]
    with tempfile.TemporaryDirectory(prefix=f"{dirname}.") as tmp:
        base = copy_repo(repo, os.path.join(tmp, "base"))
        gold = copy_repo(repo, os.path.join(tmp, "gold"))
        sol = copy_repo(repo, os.path.join(tmp, "sol"))
        wrong = copy_repo(repo, os.path.join(tmp, "wrong"))

        apply_patch(gold, task["patch"], "patch")
        apply_patch(wrong, floe["wrong_patch"], "wrong_patch")

        for step in floe["solution"][:-1]:
            r = subprocess.run(["bash", "-c", step["arguments"]["command"]], cwd=sol,
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                raise Invalid(f"solution: {step['arguments']['command']!r} exited {r.returncode}: {r.stderr.strip()}")
        got, want = read_tree(sol), read_tree(gold)
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            raise Invalid(f"solution: result differs from the gold patch in {diff}")
        if read_tree(wrong) == want:
            raise Invalid("wrong_patch: produces the gold tree")

        for d in (base, gold, wrong):
            apply_patch(d, task["test_patch"], "test_patch")

        ids = f2p + p2p
        out, log = run_pytest(base, ids, "base")
        bad = not_passed(out, p2p)
        if bad:
            raise Invalid(f"base: PASS_TO_PASS not passing: {bad}\n{log}")
        passing = [i for i in f2p if out[i] == "passed"]
        if passing:
            raise Invalid(f"base: FAIL_TO_PASS already passing: {passing}")

        out, log = run_pytest(gold, ids, "gold")
        bad = not_passed(out, ids)
        if bad:
            raise Invalid(f"gold: not passing: {bad}\n{log}")

        out, log = run_pytest(wrong, ids, "wrong_patch")
        failing = not_passed(out, ids)
        if loose and failing:
            raise Invalid(f"wrong_patch: loose task but the tests reject it: {failing}")
        if not loose and not not_passed(out, f2p):
            raise Invalid("wrong_patch: sound task but every FAIL_TO_PASS accepts the wrong patch")
    return task


def find_tasks(args):
    if not args:
        return sorted(os.path.join(HERE, d) for d in os.listdir(HERE)
                      if os.path.isfile(os.path.join(HERE, d, "task.json")))
    out = []
    for a in args:
        for cand in (a, os.path.join(HERE, a), os.path.join(HERE, f"toy__{a}")):
            if os.path.isfile(os.path.join(cand, "task.json")):
                out.append(os.path.abspath(cand))
                break
        else:
            sys.exit(f"validate.py: no task named {a!r} (looked for {a}/task.json under {HERE})")
    return out


def run_one(task_dir):
    t0 = time.monotonic()
    info = {"id": os.path.basename(task_dir), "ok": False, "reason": "", "loose": None,
            "bug_class": None, "solution_steps": None}
    try:
        task = validate(task_dir)
        info.update(ok=True, reason="ok")
    except Invalid as e:
        info["reason"] = str(e)
        task = None
    except Exception as e:  # a broken task must not hide the others
        info["reason"] = f"{type(e).__name__}: {e}"
        task = None
    if task is None:
        try:
            with open(os.path.join(task_dir, "task.json"), encoding="utf-8") as f:
                task = json.load(f)
        except Exception:
            task = {}
    floe = task.get("floe") or {}
    info["loose"] = floe.get("loose_tests")
    info["bug_class"] = floe.get("bug_class")
    sol = floe.get("solution")
    info["solution_steps"] = len(sol) - 1 if isinstance(sol, list) else None
    info["seconds"] = round(time.monotonic() - t0, 3)
    return info


def main():
    ap = argparse.ArgumentParser(description="Validate toy tasks (see tasks/toy/README.md).")
    ap.add_argument("tasks", nargs="*", help="task ids or dirs (default: every task under tasks/toy)")
    ap.add_argument("--json", metavar="OUT", help="also write a machine-readable summary here")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="tasks checked in parallel")
    args = ap.parse_args()

    for tool in ("patch", "bash"):
        if shutil.which(tool) is None:
            sys.exit(f"validate.py: `{tool}` is not on PATH; install it (Debian: apt-get install {tool})")
    r = subprocess.run([sys.executable, "-m", "pytest", "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"validate.py: pytest is missing for {sys.executable}; install it (pip install pytest)")

    dirs = find_tasks(args.tasks)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run_one, dirs))
    elapsed = time.monotonic() - t0

    for r in results:
        kind = "loose" if r["loose"] else "sound"
        reason = "" if r["ok"] else "  " + r["reason"].replace("\n", "\n    ")
        print(f"{'PASS' if r['ok'] else 'FAIL'} {r['id']} [{kind}, {r['bug_class']}] {r['seconds']:.2f}s{reason}")

    classes = {}
    for r in results:
        classes[r["bug_class"]] = classes.get(r["bug_class"], 0) + 1
    summary = {
        "tasks": len(results),
        "passed": sum(r["ok"] for r in results),
        "failed": sum(not r["ok"] for r in results),
        "loose": sum(bool(r["loose"]) for r in results),
        "sound": sum(r["loose"] is False for r in results),
        "multi_step": sum((r["solution_steps"] or 0) > 1 for r in results),
        "bug_classes": dict(sorted(classes.items(), key=lambda kv: str(kv[0]))),
        "seconds": round(elapsed, 2),
        "results": results,
    }
    print(f"{summary['passed']}/{summary['tasks']} tasks passed "
          f"({summary['loose']} loose, {summary['sound']} sound, {summary['multi_step']} multi-step) "
          f"in {elapsed:.1f}s")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    sys.exit(0 if results and summary["failed"] == 0 else 1)


if __name__ == "__main__":
    main()
