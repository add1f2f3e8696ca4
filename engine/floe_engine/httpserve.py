"""A small JSON-over-HTTP server on the standard library (no web framework).

Routes map (method, path) to a function of the parsed JSON body returning
either a JSON-able object or ``Text(...)`` (for Prometheus metrics).
ValueError/KeyError/TypeError become 400 with an OpenAI-style error body;
anything else is a 500 with the exception named.
"""
from __future__ import annotations

import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Tuple

Route = Callable[[dict, Dict[str, str]], Any]


class Text(str):
    content_type = "text/plain; version=0.0.4; charset=utf-8"


class HTTPError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def make_server(host: str, port: int, routes: Dict[Tuple[str, str], Route], verbose: bool = False
                ) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet unless asked
            if verbose:
                sys.stderr.write("[http] " + fmt % args + "\n")

        def _send(self, status: int, payload: Any) -> None:
            if isinstance(payload, Text):
                body, ctype = payload.encode(), Text.content_type
            else:
                body, ctype = json.dumps(payload).encode(), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self, method: str) -> None:
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            fn = routes.get((method, path))
            if fn is None:
                known = sorted({p for (_, p) in routes})
                status = 405 if any(p == path for (_, p) in routes) else 404
                return self._send(status, {"error": {"message": f"no route {method} {path}; routes: {known}",
                                                      "type": "not_found"}})
            try:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                body = json.loads(raw) if raw.strip() else {}
                if not isinstance(body, dict):
                    raise ValueError("request body must be a JSON object")
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(200, fn(body, headers))
            except HTTPError as e:
                self._send(e.status, {"error": {"message": str(e), "type": "invalid_request_error"}})
            except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
                msg = str(e) if not isinstance(e, KeyError) else f"missing field {e}"
                self._send(400, {"error": {"message": msg, "type": "invalid_request_error"}})
            except Exception as e:  # pragma: no cover - surfaced to the client
                traceback.print_exc(file=sys.stderr)
                self._send(500, {"error": {"message": f"{type(e).__name__}: {e}", "type": "internal_error"}})

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    return Server((host, port), Handler)


def prometheus(metrics) -> Text:
    """metrics: iterable of (name, type, help, value[, labels dict]) -> exposition text."""
    lines = []
    for m in metrics:
        name, mtype, help_, value = m[:4]
        labels = m[4] if len(m) > 4 else None
        lab = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else ""
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {mtype}")
        lines.append(f"{name}{lab} {value}")
    return Text("\n".join(lines) + "\n")
