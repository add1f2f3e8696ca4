"""A small JSON-over-HTTP server on the standard library (no web framework).

Routes map (method, path) to a function ``fn(body, headers)`` of the parsed JSON
body and the (lower-cased) headers, returning either a JSON-able object or
``Text(...)`` (for Prometheus metrics). A route that also takes a ``query``
argument (``fn(body, headers, query)``) gets the URL's query string parsed
into {name: value} (the last value of a repeated name); the path is matched
without it. ValueError/KeyError/TypeError become 400 with an OpenAI-style
error body, ``HTTPError`` its own status; anything else is a 500 with the
exception named.
"""
from __future__ import annotations

import inspect
import json
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Tuple
from urllib.parse import parse_qsl, urlsplit

# fn(body, headers) or fn(body, headers, query)
Route = Callable[..., Any]


class Text(str):
    content_type = "text/plain; version=0.0.4; charset=utf-8"


class HTTPError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.err_type = err_type


def takes_query(fn: Callable) -> bool:
    """Whether a route function takes the parsed query string (a ``query`` parameter or **kwargs)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "query" or p.kind == inspect.Parameter.VAR_KEYWORD for p in params)


def parse_query(qs: str) -> Dict[str, str]:
    return dict(parse_qsl(qs, keep_blank_values=True))


def make_server(host: str, port: int, routes: Dict[Tuple[str, str], Route], verbose: bool = False
                ) -> ThreadingHTTPServer:
    with_query = {key: takes_query(fn) for key, fn in routes.items()}

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
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            fn = routes.get((method, path))
            # the body is read before any answer: an unread body on a kept-alive connection would
            # be parsed as the next request
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            if fn is None:
                known = sorted({p for (_, p) in routes})
                status = 405 if any(p == path for (_, p) in routes) else 404
                return self._send(status, {"error": {"message": f"no route {method} {path}; routes: {known}",
                                                      "type": "not_found"}})
            try:
                body = json.loads(raw) if raw.strip() else {}
                if not isinstance(body, dict):
                    raise ValueError("request body must be a JSON object")
                headers = {k.lower(): v for k, v in self.headers.items()}
                if with_query[(method, path)]:
                    self._send(200, fn(body, headers, query=parse_query(url.query)))
                else:
                    self._send(200, fn(body, headers))
            except HTTPError as e:
                self._send(e.status, {"error": {"message": str(e), "type": e.err_type, "code": e.status}})
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
