"""JSON-lines render server: the TypeScript workers' way to the chat template and tokenizer.

    python -m floe_engine.render_server --tokenizer SPEC [--chat-template PATH]

One process per worker, kept alive so the tokenizer is loaded once. The first stdout line
is ``{"event": "ready", "info": …}``; then each stdin line ``{"id", "op", …args}`` gets one
reply line with the same id, ``{"ok": true, "result": …}`` or ``{"ok": false, "error": …}``.
A bad request gets an error reply, never a dead server; the server exits when stdin closes.
Replies are ASCII JSON (non-ASCII escaped) so no stdout encoding can mangle them.
"""
from __future__ import annotations

import argparse
import json
import sys

from .render import Renderer

OPS = {
    "info": lambda r, a: r.info(),
    "start": lambda r, a: r.start(a.get("messages"), a.get("tools")),
    "continuation": lambda r, a: r.continuation(a.get("messages"), a.get("tools")),
    "full": lambda r, a: r.full(a.get("messages"), a.get("tools")),
    "assistant_ids": lambda r, a: r.assistant_ids(a.get("text")),
    "decode": lambda r, a: r.decode(a.get("ids")),
}


def handle(renderer: Renderer, line: bytes) -> dict:
    req_id = None
    try:
        try:
            req = json.loads(line)
        except ValueError as e:
            raise ValueError(f"the line is not JSON ({e})") from None
        if not isinstance(req, dict):
            raise ValueError("a request must be a JSON object")
        req_id = req.get("id")
        op = req.get("op")
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
        return {"id": req_id, "ok": True, "result": OPS[op](renderer, req)}
    except Exception as e:  # one bad request must not take the worker's renderer down
        return {"id": req_id, "ok": False, "error": f"{type(e).__name__}: {e}"}


def write(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m floe_engine.render_server")
    ap.add_argument("--tokenizer", default="byte", help="'byte' or a Hugging Face tokenizer folder")
    ap.add_argument("--chat-template", default=None, help="a .jinja file; default: the tokenizer folder's own")
    args = ap.parse_args(argv)
    try:
        renderer = Renderer(args.tokenizer, args.chat_template)
    except Exception as e:  # say why on both streams: the worker reads stdout, people read stderr
        write({"event": "error", "error": f"{type(e).__name__}: {e}"})
        print(f"render_server: {e}", file=sys.stderr)
        return 2
    write({"event": "ready", "info": renderer.info()})
    for line in iter(sys.stdin.buffer.readline, b""):
        if line.strip():
            write(handle(renderer, line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
