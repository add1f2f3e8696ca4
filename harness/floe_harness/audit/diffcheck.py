"""Differential check for the data audit: does a candidate patch behave differently from the
gold patch? Runs inside the task's container (standard library only, Python 3.8+), once per
tree (gold twice, to see what is not deterministic; each candidate once):

    python3 diffcheck.py REPO --targets a.py,pkg/b.py --tests tests/test_x.py,... [--max-variants 400]

It imports the target modules (the files the gold patch changes), wraps every function and
method defined in them so that each call made *directly from test code* is logged (arguments,
result or exception, and for a method the object's state afterwards), and then runs variants
of the task's own test functions: each variant perturbs one literal of one test (an int ± 1,
a string upper-cased, a list reversed, …; the unperturbed test is variant 0). Assertions are
evaluated but their outcome ignored, and each top-level statement runs on after one fails, so
a variant shows what the code *does* on nearby inputs rather than whether a test passes.
Output: one JSON object on stdout, ``{"variants": {id: [event, …]}, "importError": str|null}``.
Two trees behave differently when some variant's events differ (compared by the caller,
which also drops variants where two gold runs disagree). Reprs have memory addresses removed.
"""
from __future__ import annotations

import argparse
import ast
import copy
import importlib
import json
import os
import re
import signal
import sys
import types

ADDR = re.compile(r" at 0x[0-9a-fA-F]+")
MAX_REPR = 300
_depth = [0]
_log: list = []


def _plain(x, depth: int = 0):
    """x with every integral float made an int, in lists, tuples, sets and dicts too: 32 and 32.0
    (and [32] and [32.0]) compare equal, so a test cannot tell them apart with ==."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 2 ** 53:
        return int(x)
    if depth > 8 or type(x) not in (list, tuple, set, frozenset, dict):
        return x
    if type(x) is dict:
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in x.items()}
    return type(x)(_plain(v, depth + 1) for v in x)


def _repr(x) -> str:
    try:
        x = _plain(x)
    except Exception:  # unhashable after the change, or an odd container: as it is
        pass
    try:
        r = repr(x)
    except Exception as err:  # a broken __repr__ is behaviour too
        r = "<repr failed: %s>" % type(err).__name__
    r = ADDR.sub("", r)
    return r if len(r) <= MAX_REPR else r[:MAX_REPR] + "…"


def _state(obj) -> str:
    try:
        return _repr(sorted((k, v) for k, v in vars(obj).items()))
    except TypeError:
        return _repr(obj)


def _wrap(fn, name: str, method: bool):
    def wrapper(*args, **kwargs):
        top = _depth[0] == 0
        _depth[0] += 1
        try:
            result = fn(*args, **kwargs)
        except BaseException as err:
            if top:
                _log.append([name, _repr(args[1:] if method else args), _repr(kwargs), "raise", type(err).__name__, _state(args[0]) if method and args else None])
            raise
        finally:
            _depth[0] -= 1
        if top:
            _log.append([name, _repr(args[1:] if method else args), _repr(kwargs), "return", _repr(result), _state(args[0]) if method and args else None])
        return result

    wrapper.__wrapped__ = fn
    wrapper.__name__ = getattr(fn, "__name__", name)
    wrapper.__qualname__ = getattr(fn, "__qualname__", name)
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    return wrapper


def _module_name(path: str) -> str:
    p = path[:-3] if path.endswith(".py") else path
    parts = [x for x in p.split("/") if x]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def instrument(targets: list) -> None:
    for path in targets:
        mod = importlib.import_module(_module_name(path))
        for name, obj in list(vars(mod).items()):
            if isinstance(obj, types.FunctionType) and obj.__module__ == mod.__name__:
                setattr(mod, name, _wrap(obj, "%s:%s" % (mod.__name__, name), False))
            elif isinstance(obj, type) and obj.__module__ == mod.__name__:
                for attr, member in list(vars(obj).items()):
                    if attr.startswith("__") and attr not in ("__init__", "__call__", "__eq__", "__lt__", "__str__", "__len__", "__contains__", "__getitem__"):
                        continue
                    qual = "%s:%s.%s" % (mod.__name__, name, attr)
                    if isinstance(member, staticmethod):
                        setattr(obj, attr, staticmethod(_wrap(member.__func__, qual, False)))
                    elif isinstance(member, classmethod):
                        setattr(obj, attr, classmethod(_wrap(member.__func__, qual, False)))
                    elif isinstance(member, types.FunctionType):
                        setattr(obj, attr, _wrap(member, qual, True))


SEEDS: list = []


def perturbations(value) -> list:
    """Nearby values of a test literal (the same for every tree: deterministic), and the seeds
    (constants of the lines the gold patch wrote) of its type in and around it."""
    out: list = []
    if isinstance(value, bool) or value is None:
        return out
    if isinstance(value, int):
        # ints stay ints: a float where the code expects an int is an input it never meant to
        # take (Rational(1, 0.5)), and a difference there is no evidence
        out = [value + 1, value - 1, 0, -value, 2 * value, value + 10]
    elif isinstance(value, float):
        out = [value + 0.5, -value, 0.0, value * 2]
    elif isinstance(value, str):
        out = ["", value + "s", value.upper(), value.lower(), value.capitalize(), value.title(), " " + value, value + " ",
               value[1:], value[:-1], value.replace(",", " ,"), value + value]
    if isinstance(value, str):
        out += [x for s in SEEDS if isinstance(s, str) for x in (value + s, s + value, s)]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out += [x for s in SEEDS if isinstance(s, (int, float)) and not isinstance(s, bool) for x in (s, s - 1, s + 1)]
    seen: list = []
    for v in out:
        if v != value and not any(type(v) is type(s) and v == s for s in seen):
            seen.append(v)
    return seen


class _Literals(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list = []

    def visit_Assert(self, node: ast.Assert) -> None:  # the message is not an input
        self.visit(node.test)

    def visit_Constant(self, node: ast.Constant) -> None:
        if perturbations(node.value):
            self.found.append(node)

    def visit_List(self, node: ast.List) -> None:  # a sequence (a tuple is a record: left whole)
        if len(node.elts) >= 2:
            self.found.append(node)
        self.generic_visit(node)


def _variant(fn: ast.FunctionDef, index: int, value) -> ast.FunctionDef:
    """A copy of the test with literal number `index` replaced (None: unperturbed), its asserts
    evaluated without effect and every top-level statement run on after a failure."""
    new = copy.deepcopy(fn)
    if index is not None:
        finder = _Literals()
        for stmt in new.body:
            finder.visit(stmt)
        node = finder.found[index]
        if isinstance(node, ast.Constant):
            node.value = value
        else:
            node.elts = value(node.elts)

    class Asserts(ast.NodeTransformer):
        def visit_Assert(self, node: ast.Assert):
            return ast.copy_location(ast.Expr(node.test), node)

    new = Asserts().visit(new)
    body = []
    for i, stmt in enumerate(new.body):
        timeout = ast.ExceptHandler(type=ast.Name("_floe_timeout", ast.Load()), name=None, body=[ast.Raise(exc=None, cause=None)])
        handler = ast.ExceptHandler(
            type=ast.Name("BaseException", ast.Load()), name="_floe_err",
            body=[ast.Expr(ast.Call(ast.Name("_floe_failed", ast.Load()), [ast.Constant(i), ast.Name("_floe_err", ast.Load())], []))])
        body.append(ast.Try(body=[stmt], handlers=[timeout, handler], orelse=[], finalbody=[]))
    new.body = body or [ast.Pass()]
    new.decorator_list = []
    return ast.fix_missing_locations(new)


def _list_variants(node) -> list:
    return [lambda e: list(reversed(e)), lambda e: e[1:], lambda e: e + e[:1]]


def variants_of(fn: ast.FunctionDef) -> list:
    finder = _Literals()
    for stmt in fn.body:
        finder.visit(stmt)
    out: list = [(None, None)]
    for i, node in enumerate(finder.found):
        values = perturbations(node.value) if isinstance(node, ast.Constant) else _list_variants(node)
        out += [(i, v) for v in values]
    return out


class _Timeout(BaseException):
    """Not an Exception: code under test that catches Exception cannot swallow it."""


def _alarm(_sig, _frame):
    raise _Timeout()


def run(repo: str, targets: list, tests: list, max_variants: int) -> dict:
    repo = os.path.abspath(repo)
    os.chdir(repo)
    sys.path.insert(0, repo)
    try:
        instrument(targets)
    except BaseException as err:
        return {"variants": {}, "importError": "%s: %s" % (type(err).__name__, _repr(str(err)))}
    variants: dict = {}
    signal.signal(signal.SIGALRM, _alarm)
    for test_path in tests:
        try:
            source = open(test_path, encoding="utf-8").read()
            tree = ast.parse(source, test_path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        namespace: dict = {"__name__": "floe_diffcheck_" + _module_name(test_path).replace(".", "_"), "__file__": os.path.abspath(test_path)}
        namespace["_floe_failed"] = lambda i, err: _log.append(["statement", i, type(err).__name__])
        namespace["_floe_timeout"] = _Timeout  # a variant's time is up: no statement runs on
        try:
            signal.alarm(5)
            exec(compile(tree, test_path, "exec"), namespace)
        except BaseException as err:
            variants["%s::<module>" % test_path] = [["module", type(err).__name__]]
            continue
        finally:
            signal.alarm(0)
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test") and not fn.args.args and not fn.decorator_list):
                continue
            for n, (index, value) in enumerate(variants_of(fn)):
                if len(variants) >= max_variants:
                    break
                key = "%s::%s#%d" % (test_path, fn.name, n)
                module = ast.Module(body=[_variant(fn, index, value)], type_ignores=[])
                del _log[:]
                try:
                    signal.alarm(2)
                    exec(compile(module, test_path, "exec"), namespace)
                    namespace[fn.name]()
                except _Timeout:
                    _log.append(["timeout"])
                except BaseException as err:
                    _log.append(["error", type(err).__name__])
                finally:
                    signal.alarm(0)
                    _depth[0] = 0
                variants[key] = list(_log)
    return {"variants": variants, "importError": None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--targets", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--max-variants", type=int, default=400)
    ap.add_argument("--seeds", default="[]", help="JSON list of constants to try as inputs")
    a = ap.parse_args(argv)
    SEEDS[:] = [v for v in json.loads(a.seeds) if isinstance(v, (str, int, float))]
    answer = sys.stdout
    sys.stdout = sys.stderr  # what the code under test prints must not mix with the answer
    out = run(a.repo, [t for t in a.targets.split(",") if t], [t for t in a.tests.split(",") if t], a.max_variants)
    answer.write(json.dumps(out) + "\n")
    answer.flush()
    os._exit(0)  # threads or atexit hooks the code under test left must not hold the answer


if __name__ == "__main__":
    raise SystemExit(main())
