#!/usr/bin/env python3
"""Generate the toy task suite from the specs in tasks/toy/specs.py.

For every spec this writes tasks/toy/<instance_id>/repo/ (the base state) and
tasks/toy/<instance_id>/task.json. The gold patch is produced by actually running
the spec's `fix` sed command on a copy of the repo and diffing, so the patch and
the gold trajectory can never disagree. Likewise for the wrong patch.

Usage: python3 tasks/toy/build.py            # rebuild every task
       python3 tasks/toy/build.py NAME...    # rebuild only these (short names or ids)
Then:  python3 tasks/toy/validate.py
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import specs  # noqa: E402

ZERO_SHA = "0" * 40
MAX_CMD = 60


def clean(text):
    text = textwrap.dedent(text).lstrip("\n")
    return text if text.endswith("\n") else text + "\n"


def read_tree(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def file_diff(rel, old, new):
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    body = list(difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", n=3))
    if not body:
        return ""
    return f"diff --git a/{rel} b/{rel}\n" + "".join(body)


def new_file_diff(rel, text):
    lines = text.splitlines(keepends=True)
    body = list(difflib.unified_diff([], lines, "x", "y", n=3))[2:]
    return (f"diff --git a/{rel} b/{rel}\nnew file mode 100644\n"
            f"--- /dev/null\n+++ b/{rel}\n" + "".join(body))


def tree_diff(before, after):
    assert set(before) == set(after), "edits must not add or remove files"
    return "".join(file_diff(rel, before[rel], after[rel]) for rel in sorted(before))


def changed_lines(patch):
    minus = [l for l in patch.splitlines() if l.startswith("-") and not l.startswith("--- ")]
    plus = [l for l in patch.splitlines() if l.startswith("+") and not l.startswith("+++ ")]
    return minus, plus


def apply_edit(root, edit):
    """An edit is a shell command (run with bash in root) or (path, old, new) text replacement."""
    if isinstance(edit, str):
        subprocess.run(["bash", "-c", edit], cwd=root, check=True)
    else:
        path, old, new = edit
        full = os.path.join(root, path)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
        with open(full, "w", encoding="utf-8") as f:
            f.write(text.replace(old, new))


def edited_diff(repo, edit):
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "r")
        shutil.copytree(repo, copy)
        before = read_tree(copy)
        apply_edit(copy, edit)
        return tree_diff(before, read_tree(copy))


def test_names(text):
    return re.findall(r"^def (test_\w+)\(", text, flags=re.M)


def build(spec):
    iid = f"toy__{spec['name']}"
    tdir = os.path.join(HERE, iid)
    if os.path.isdir(tdir):
        shutil.rmtree(tdir)
    repo = os.path.join(tdir, "repo")

    files = {rel: clean(text) for rel, text in spec["files"].items()}
    files.setdefault("conftest.py", "")
    files["tests/test_visible.py"] = clean(spec["visible"])
    stdlib = set(sys.stdlib_module_names)
    for rel in files:
        top = rel.split("/")[0].removesuffix(".py")
        assert top not in stdlib, f"{iid}: {rel} would shadow the stdlib module {top}"
    for rel, text in files.items():
        path = os.path.join(repo, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    hidden = clean(spec["hidden"])
    fix = spec["fix"]
    assert len(fix) <= MAX_CMD, f"{iid}: fix command is {len(fix)} chars: {fix}"
    patch = edited_diff(repo, fix)
    minus, plus = changed_lines(patch)
    assert len(minus) == 1 and len(plus) == 1, f"{iid}: gold fix must change one line:\n{patch}"
    wrong_patch = edited_diff(repo, spec["wrong"])
    assert wrong_patch and wrong_patch != patch, f"{iid}: wrong edit changed nothing or equals gold"

    solution = []
    if spec.get("read"):
        assert len(spec["read"]) <= MAX_CMD
        solution.append({"name": "bash", "arguments": {"command": spec["read"]}})
    solution.append({"name": "bash", "arguments": {"command": fix}})
    solution.append({"name": "submit", "arguments": {}})

    task = {
        "instance_id": iid,
        "repo": f"floe-toy/{spec['repo']}",
        "base_commit": ZERO_SHA,
        "problem_statement": " ".join(spec["statement"].split()),
        "hints_text": "",
        "patch": patch,
        "test_patch": new_file_diff("tests/test_hidden.py", hidden),
        "FAIL_TO_PASS": [f"tests/test_hidden.py::{n}" for n in test_names(hidden)],
        "PASS_TO_PASS": [f"tests/test_visible.py::{n}" for n in test_names(files["tests/test_visible.py"])],
        "version": "0.1",
        "environment_setup_commit": ZERO_SHA,
        "floe": {
            "bug_class": spec["cls"],
            "loose_tests": spec["loose"],
            "wrong_patch": wrong_patch,
            "solution": solution,
        },
    }
    assert task["FAIL_TO_PASS"] and task["PASS_TO_PASS"], iid
    with open(os.path.join(tdir, "task.json"), "w", encoding="utf-8") as f:
        json.dump(task, f, indent=2)
        f.write("\n")
    return iid


def main(argv):
    wanted = {a.removeprefix("toy__") for a in argv}
    names = [s["name"] for s in specs.TASKS]
    dupes = {n for n in names if names.count(n) > 1}
    assert not dupes, f"duplicate task names: {dupes}"
    unknown = wanted - set(names)
    assert not unknown, f"no spec named {sorted(unknown)}"
    built = [build(s) for s in specs.TASKS if not wanted or s["name"] in wanted]
    print(f"built {len(built)} task(s) under {HERE}")


if __name__ == "__main__":
    main(sys.argv[1:])
