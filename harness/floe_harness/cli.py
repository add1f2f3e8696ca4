"""``python -m floe_harness plan|parse``: JSON on stdin, JSON on stdout.

plan  {"task": <floe Task>, "baseCommit": sha, "repoDir": path, "stageDir": path}
      -> {"harness": "swebench"|"r2e-gym"|"pytest", "script": bash, "parser": name, "testCommand": str}
parse {"task": <floe Task>, "harness": name, "log": text}
      -> {"statuses": {test: status}, "tests": [{"id", "group", "outcome"}], "resolved": bool, "logComplete": bool}
candidates {"files": {path: {"base": text, "gold": text}}, "limit": n}
      -> {"candidates": [{"id", "kind", "description", "path", "diff"}], "seeds": [constants]}:
      the data audit's plausible wrong patches (audit_candidates.py)
strengthen {"gold1": trace, "gold2": trace, "testPatch": diff, "first": [variant keys]}
      -> {"testPatch": diff|null, "tests": [ids], "checks": n, "reason"?}: stronger tests from the
      gold patch's behaviour (strengthen.py)

Which harness grades a task: R2E-Gym rows by R2E-Gym's rules; floe's toy suite by the pytest
runner; SWE-bench-family rows by the swebench package when its tables cover the repository and
version, else by the pytest runner. A failure is one line on stderr and exit 2.

serve  one long-lived process for many requests (floe's grader keeps one per worker): one JSON
      object a line on stdin, {"id": n, "cmd": "plan"|"parse"|"which", "req": {...}}; one line
      on stdout per request, in order, {"id": n, "ok": true, "out": {...}} or
      {"id": n, "ok": false, "error": "one line"}. It ends when stdin closes.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from floe_harness import pytest_runner


def harness_for(task: dict[str, Any]) -> str:
    layout = task.get("layout", "")
    if layout == "r2e-gym":
        return "r2e-gym"
    if layout == "toy":
        return "pytest"
    from floe_harness import swebench_rules

    return "swebench" if swebench_rules.covers(task) else "pytest"


def plan(req: dict[str, Any]) -> dict[str, Any]:
    task = req["task"]
    h = harness_for(task)
    if h == "swebench":
        from floe_harness import swebench_rules

        return swebench_rules.plan(task, req["baseCommit"], req["repoDir"])
    if h == "r2e-gym":
        from floe_harness import r2e

        return r2e.plan(task, req["repoDir"])
    return pytest_runner.plan(task, req["stageDir"], req["repoDir"])


def parse(req: dict[str, Any]) -> dict[str, Any]:
    task, h = req["task"], req["harness"]
    if h == "swebench":
        from floe_harness import swebench_rules

        return swebench_rules.parse(task, req["log"])
    if h == "r2e-gym":
        from floe_harness import r2e

        return r2e.parse(task, req["log"])
    if h == "pytest":
        return pytest_runner.parse(task, req["log"])
    raise ValueError(f"unknown harness {h!r} (swebench, r2e-gym, pytest)")


def answer(cmd: str, req: dict[str, Any]) -> Any:
    if cmd == "which":
        return {"harness": harness_for(req["task"])}
    if cmd == "plan":
        return plan(req)
    if cmd == "parse":
        return parse(req)
    if cmd == "candidates":
        from floe_harness.audit_candidates import candidates, seeds

        return {"candidates": candidates(req["files"], int(req.get("limit", 200))), "seeds": seeds(req["files"])}
    if cmd == "strengthen":
        from floe_harness.strengthen import strengthen

        return strengthen(req["gold1"], req["gold2"], req["testPatch"], first=req.get("first"))
    raise ValueError(f"unknown command {cmd!r} (plan, parse, which, candidates, strengthen)")


def serve(stdin: Any = None, stdout: Any = None) -> int:
    """One request a line, one answer a line; a failed request is answered, never fatal."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    for line in stdin:
        if not line.strip():
            continue
        rid: Any = None
        try:
            msg = json.loads(line)
            rid = msg.get("id")
            reply: dict[str, Any] = {"id": rid, "ok": True, "out": answer(msg["cmd"], msg["req"])}
        except Exception as err:  # one line the TypeScript side shows as is
            reply = {"id": rid, "ok": False, "error": f"floe_harness: {type(err).__name__}: {err}".replace("\n", " ")}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["serve"]:
        return serve()
    if len(args) != 1 or args[0] not in ("plan", "parse", "which"):
        print("usage: python -m floe_harness plan|parse|which < request.json, or serve", file=sys.stderr)
        return 2
    try:
        req = json.load(sys.stdin)
        out: Any = answer(args[0], req)
    except Exception as err:  # one line the TypeScript side shows as is
        print(f"floe_harness {args[0]}: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout)
    return 0
