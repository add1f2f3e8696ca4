"""Stronger tests for a task whose tests accept a wrong patch, derived from the gold patch's
behaviour: every call the task's own tests make into the changed code, on the perturbed
variants diffcheck.py ran (where two runs of the gold patch agreed), becomes an assertion on
what the gold patch returned. The tests go into a new file, added to the task's test patch as a
new-file diff; their ids join FAIL_TO_PASS. The caller checks them in the task's container:
they must pass on the gold patch and fail on every wrong patch the audit found.

Only calls it can write down are kept: arguments that ``ast.literal_eval`` reads back, and a
module-level function (or a run of one object's methods, started by its constructor). Results
are compared by repr, with the same normalisation diffcheck.py applies (no memory addresses,
32.0 as 32, in containers too), so what the test checks is exactly what the audit saw.
"""
from __future__ import annotations

import ast
import inspect
import json
import re
from typing import Any

from floe_harness.audit import diffcheck

TEST_FILE = "tests/test_floe_strengthened.py"
MAX_CHECKS = 60

# The written file normalises results with diffcheck.py's own functions (copied in by source,
# so the file stands alone in the task's repository): what it checks is what the audit logged.
HEADER = "\n\n".join([
    '"""Written by floe\'s data audit (floe_harness/audit/strengthen.py): what the gold patch does on\n'
    'inputs near the ones the task\'s own tests use."""\nimport importlib\nimport re\n\n'
    f"ADDR = re.compile(r{diffcheck.ADDR.pattern!r})\nMAX_REPR = {diffcheck.MAX_REPR}",
    *(inspect.getsource(f).rstrip() for f in (diffcheck._plain, diffcheck._repr, diffcheck._state)),
    '''def _outcome(fn, *args, **kwargs):
    try:
        return ("return", _repr(fn(*args, **kwargs)))
    except Exception as err:  # noqa: BLE001 - the exception's type is the behaviour checked
        return ("raise", type(err).__name__)''',
]) + "\n"


def _literal(text: str) -> Any:
    return ast.literal_eval(text)


def _readable(args_repr: str, kwargs_repr: str) -> bool:
    try:
        a, k = _literal(args_repr), _literal(kwargs_repr)
        return isinstance(a, tuple) and isinstance(k, dict) and repr(a) == args_repr and repr(k) == kwargs_repr
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def _call(fn: str, args_repr: str, kwargs_repr: str) -> str:
    a = args_repr[1:-1].rstrip(",") if args_repr != "()" else ""
    k = f"**{kwargs_repr}" if kwargs_repr != "{}" else ""
    return f"_outcome({fn}{', ' + a if a else ''}{', ' + k if k else ''})"


def _checks(events: list[list[Any]]) -> list[str] | None:
    """Lines that replay one variant's calls with the gold results, or None when they cannot be
    written down (unreadable arguments, several objects, a call the trace cannot name)."""
    if not events or any(e[0] != "statement" and len(e) != 6 for e in events):
        return None
    calls = [e for e in events if len(e) == 6]
    if not calls:
        return None
    lines: list[str] = []
    obj_class: str | None = None
    for name, args, kwargs, kind, result, state in calls:
        if not _readable(args, kwargs) or ":" not in name:
            return None
        module, qual = name.split(":", 1)
        expected = json.dumps([kind, result])
        if "." not in qual:
            lines.append(f"assert list({_call(f'importlib.import_module({module!r}).{qual}', args, kwargs)}) == {expected}")
            continue
        cls, method = qual.split(".", 1)
        if method == "__init__":
            if obj_class is not None or kind != "return":
                return None
            obj_class = cls
            lines.append(f"obj = importlib.import_module({module!r}).{cls}{_literal_call(args, kwargs)}")
        elif obj_class == cls and state is not None:
            lines.append(f"assert list({_call(f'obj.{method}', args, kwargs)}) == {expected}")
        else:
            return None
        if state is not None:
            lines.append(f"assert _state(obj) == {json.dumps(state)}")
    return lines


def _literal_call(args_repr: str, kwargs_repr: str) -> str:
    a = args_repr[1:-1].rstrip(",") if args_repr != "()" else ""
    k = f"**{kwargs_repr}" if kwargs_repr != "{}" else ""
    return f"({', '.join(x for x in (a, k) if x)})"


def strengthen(gold1: dict[str, Any], gold2: dict[str, Any], test_patch: str, max_checks: int = MAX_CHECKS, first: list[str] | None = None) -> dict[str, Any]:
    """{"testPatch": the task's test patch plus the new file, "tests": the new test ids,
    "checks": how many assertions} — or {"testPatch": null, "reason": why not}. ``first``: the
    variants where a wrong patch was seen to differ, checked before the others (up to
    ``max_checks`` assertions in all)."""
    per_test: dict[str, list[list[str]]] = {}
    seen: set[str] = set()
    n = 0
    variants = gold1.get("variants", {})
    order = [k for k in dict.fromkeys(first or []) if k in variants] + [k for k in variants if k not in set(first or [])]
    for key in order:
        events = variants[key]
        if gold2.get("variants", {}).get(key) != events or "::" not in key:
            continue
        lines = _checks(events)
        if not lines:
            continue
        body = "\n".join(lines)
        if body in seen:
            continue
        seen.add(body)
        # a Python name from the variant's test (`TestA::test_b[1-2]`, `m:half` of a replay)
        test = re.sub(r"\W+", "_", key.split("::", 1)[1].rsplit("#", 1)[0]).strip("_") or "call"
        per_test.setdefault(test, []).append(lines)
        n += sum(1 for ln in lines if ln.startswith("assert"))
        if n >= max_checks:
            break
    if not per_test:
        return {"testPatch": None, "reason": "no call of the tests into the changed code could be written down as a check"}
    parts = [HEADER]
    ids: list[str] = []
    for test, blocks in per_test.items():
        for i, lines in enumerate(blocks):
            name = f"test_floe_{test.removeprefix('test_')}_{i}"
            ids.append(f"{TEST_FILE}::{name}")
            parts.append(f"\n\ndef {name}():\n" + "\n".join(f"    {ln}" for ln in lines) + "\n")
    source = "".join(parts)
    added = source.splitlines()
    diff = (f"diff --git a/{TEST_FILE} b/{TEST_FILE}\nnew file mode 100644\n--- /dev/null\n+++ b/{TEST_FILE}\n"
            f"@@ -0,0 +1,{len(added)} @@\n" + "".join(f"+{ln}\n" for ln in added))
    sep = "" if not test_patch or test_patch.endswith("\n") else "\n"
    return {"testPatch": f"{test_patch}{sep}{diff}", "tests": ids, "checks": n}
