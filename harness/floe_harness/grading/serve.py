"""The line protocol of ``python -m floe_harness serve``, the long-lived process floe's grader
keeps one of per worker: one JSON object a line on stdin, {"id": n, "cmd": name, "req": {...}};
one line on stdout per request, in order, {"id": n, "ok": true, "out": {...}} or {"id": n,
"ok": false, "error": "one line"}. It ends when stdin closes. Which commands it answers is the
caller's table (cli.py: grading's and the audit's)."""
from __future__ import annotations

import json
import sys
from typing import Any, Callable, Mapping

Commands = Mapping[str, Callable[[dict[str, Any]], Any]]


def answer(commands: Commands, cmd: str, req: dict[str, Any]) -> Any:
    if cmd not in commands:
        raise ValueError(f"unknown command {cmd!r} ({', '.join(commands)})")
    return commands[cmd](req)


def serve(commands: Commands, stdin: Any = None, stdout: Any = None) -> int:
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
            reply: dict[str, Any] = {"id": rid, "ok": True, "out": answer(commands, msg["cmd"], msg["req"])}
        except Exception as err:  # one line the TypeScript side shows as is
            reply = {"id": rid, "ok": False, "error": f"floe_harness: {type(err).__name__}: {err}".replace("\n", " ")}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
    return 0
