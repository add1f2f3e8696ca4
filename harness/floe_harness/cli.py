"""``python -m floe_harness plan|parse|which``: JSON on stdin, JSON on stdout (see
grading/harness.py for the requests and answers). A failure is one line on stderr and exit 2.

``python -m floe_harness serve``: one long-lived process for many requests (floe's grader keeps
one per worker; the line protocol is grading/serve.py's). Besides grading's commands (plan,
parse, which) it answers the data audit's:

candidates {"files": {path: {"base": text, "gold": text}}, "limit": n}
      -> {"candidates": [{"id", "kind", "description", "path", "diff"}], "seeds": [constants],
          "changed": {path: [names]}, "siblings": {path: [[names one changed decorator serves]]}}:
      the audit's plausible wrong patches (audit/candidates.py, and audit/agent_mistakes.py's)
strengthen {"gold1": trace, "gold2": trace, "testPatch": diff, "first": [variant keys]}
      -> {"testPatch": diff|null, "tests": [ids], "checks": n, "reason"?}: stronger tests from the
      gold patch's behaviour (audit/strengthen.py)

This module is the one place that knows both grading and the audit.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from floe_harness.audit import agent_mistakes, candidates, strengthen
from floe_harness.grading import harness
from floe_harness.grading.serve import answer, serve

COMMANDS = {
    **harness.COMMANDS,
    "candidates": lambda req: {"candidates": candidates.candidates(req["files"], int(req.get("limit", 200)), more=agent_mistakes.agent_mistakes),
                               "seeds": candidates.seeds(req["files"]), "changed": candidates.changed_functions(req["files"]),
                               "siblings": agent_mistakes.siblings(req["files"])},
    "strengthen": lambda req: strengthen.strengthen(req["gold1"], req["gold2"], req["testPatch"], first=req.get("first")),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["serve"]:
        return serve(COMMANDS)
    if len(args) != 1 or args[0] not in harness.COMMANDS:
        print("usage: python -m floe_harness plan|parse|which < request.json, or serve", file=sys.stderr)
        return 2
    try:
        req = json.load(sys.stdin)
        out: Any = answer(harness.COMMANDS, args[0], req)
    except Exception as err:  # one line the TypeScript side shows as is
        print(f"floe_harness {args[0]}: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout)
    return 0
