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

Then the task's tests run the way the grader runs them, by pytest in this process (with floe's
report plugin when it is next to this script), whatever their style: functions, unittest
``TestCase`` methods, parametrized tests, fixtures. Each test's calls into the changed code are
the variant ``<node id>#pytest``. Every such call is kept (a deep copy of its arguments, and of
the object for a method) and replayed on nearby inputs: each argument in turn replaced by a
perturbation of it or by a value of its type the tests themselves use (parametrize tables,
fixture values, the test modules' and classes' constants, the other calls' arguments, the
seeds); each replay is the variant ``replay::<name>#<hash of its inputs>``. Replays also try: a
list of plain values with each item in a list of its own (equal, unhashable); an input whose
mappings store each key as its own value (``{1: 1}``, the object's own too) with other values;
and, for a call of one member of a group one changed decorator serves (``--siblings``), the same
arguments to every other member (the tests may call ``==`` only, where the fix is for ``<`` too).

Calls are logged by the names the tests import: a file under ``src/`` (or any directory that is
not a package) is imported by its package's name, with that directory put on ``sys.path``, and
every module that re-exports a changed function (``from .core import parse`` in
``__init__.py``) gets the wrapper too.
"""
from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import importlib
import json
import os
import random
import re
import signal
import sys
import time
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


_calls: list = []  # the pytest phase's calls from test code, kept for replay: (name, fn, method, args, kwargs)
_keep = [False]  # keep calls (the pytest phase only)
_kept_of: dict = {}  # calls kept per function: a few of each, not the first thousands of one
MAX_KEPT_PER_FUNCTION = 20
# the tests the task's fix is about (its FAIL_TO_PASS ids, --focus): their calls are kept past
# the cap and replayed first, with half the replays, so a suite of hundreds of calls into the
# changed code does not leave the calls that exercise the fix with one or two replays each
FOCUS: set = set()
_focus = [False]
_focus_calls: list = []
_focus_kept_of: dict = {}
# the functions the gold patch changed (--deep, by file): their calls from inside the code are
# kept for replay too (not logged: a test's variant holds the calls the test code makes)
DEEP: dict = {}
_deep_names: set = set()
# the groups of functions or methods one changed decorator serves (--siblings, by file): a call
# of one member is replayed on the others with the same arguments (the tests may use `==` only)
SIBLINGS: dict = {}
_siblings_of: dict = {}  # qualified name -> the other members' qualified names


def _entry(name: str, method: bool, args, kwargs, how: str, what) -> list:
    """One logged call. Its reprs are made below the test code's level: a ``__repr__`` that calls
    the code under test (a cache's, expiring its items first) is not a call from the test, and
    would otherwise log itself again, each time, until the recursion limit."""
    _depth[0] += 1
    try:
        return [name, _repr(args[1:] if method else args), _repr(kwargs), how, what if how == "raise" else _repr(what), _state(args[0]) if method and args else None]
    finally:
        _depth[0] -= 1


def _wrap(fn, name: str, method: bool):
    def wrapper(*args, **kwargs):
        top = _depth[0] == 0
        kept = None
        counts = _focus_kept_of if _focus[0] else _kept_of
        if (top or name in _deep_names) and _keep[0] and counts.get(name, 0) < MAX_KEPT_PER_FUNCTION:
            # the inputs as they were before the call (it may change them), copied below the test
            # code's level: a copy made by calling the code under test (a cache's __setstate__
            # expires its items) must not be kept, and copied, in turn, until the recursion limit
            _depth[0] += 1
            _keep[0] = False
            try:
                kept = (name, fn, method, copy.deepcopy(args), copy.deepcopy(kwargs))
            except Exception:  # an input that cannot be copied (a lock, a file): not replayed
                pass
            finally:
                _depth[0] -= 1
                _keep[0] = True
        _depth[0] += 1
        try:
            result = fn(*args, **kwargs)
        except _Timeout:  # a call that hangs is not replayed
            raise
        except BaseException as err:
            if top:
                _log.append(_entry(name, method, args, kwargs, "raise", type(err).__name__))
                if kept:
                    (_focus_calls if _focus[0] else _calls).append(kept)
                    counts[name] = counts.get(name, 0) + 1
            raise
        finally:
            _depth[0] -= 1
        if kept:
            (_focus_calls if _focus[0] else _calls).append(kept)
            counts[name] = counts.get(name, 0) + 1
        if top:
            _log.append(_entry(name, method, args, kwargs, "return", result))
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


def _import_name(repo: str, path: str):
    """(the module name the tests import ``path`` by, the directory to put on sys.path for it).
    A file in a package is named from the package's top (``src/pkg/mod.py`` is ``pkg.mod``,
    with ``src`` on the path); a file outside any package from the repository's root."""
    parts = _module_name(path).split(".")
    d = os.path.dirname(path)
    top = d
    while top and os.path.isfile(os.path.join(repo, top, "__init__.py")):
        top = os.path.dirname(top)
    if top == d:  # not in a package: a top-level module, or a namespace package from the root
        return ".".join(parts), ""
    depth = len([x for x in top.split("/") if x]) if top else 0
    return ".".join(parts[depth:]), top


_wrapped: dict = {}  # id(original function) -> its wrapper


def _reexports() -> None:
    """Give every loaded module that holds a changed function under any name the wrapper: a
    package's ``__init__`` that re-exports it was executed before the wrapping."""
    for mod in list(sys.modules.values()):
        try:
            items = list(vars(mod).items())
        except TypeError:
            continue
        for attr, obj in items:
            w = _wrapped.get(id(obj)) if isinstance(obj, types.FunctionType) else None
            if w is not None and w is not obj:
                try:
                    setattr(mod, attr, w)
                except (AttributeError, TypeError):
                    pass


def instrument(targets: list, repo: str = ".") -> None:
    for path in targets:
        modname, root = _import_name(repo, path)
        if root and os.path.join(repo, root) not in sys.path:
            sys.path.insert(0, os.path.join(repo, root))
        mod = importlib.import_module(modname)
        for group in SIBLINGS.get(path, ()):
            owner = group[0].rpartition(".")[0] if group else ""
            # a class bound to more names (`VersionInfo = Version`) is wrapped, and logged, by each
            aliases = [n for n, o in vars(mod).items() if owner and o is vars(mod).get(owner)] or [owner]
            for alias in aliases:
                quals = ["%s:%s" % (mod.__name__, (alias + "." if alias else "") + q.rpartition(".")[2]) for q in group]
                for q in quals:
                    _siblings_of[q] = [o for o in quals if o != q]
        for name, obj in list(vars(mod).items()):
            if isinstance(obj, types.FunctionType) and obj.__module__ == mod.__name__:
                if name in DEEP.get(path, ()):
                    _deep_names.add("%s:%s" % (mod.__name__, name))
                w = _wrap(obj, "%s:%s" % (mod.__name__, name), False)
                _wrapped[id(obj)] = w
                setattr(mod, name, w)
            elif isinstance(obj, type) and obj.__module__ == mod.__name__:
                for attr, member in list(vars(obj).items()):
                    if attr.startswith("__") and attr not in ("__init__", "__call__", "__eq__", "__lt__", "__str__", "__len__", "__contains__", "__getitem__"):
                        continue
                    qual = "%s:%s.%s" % (mod.__name__, name, attr)
                    if "%s.%s" % (name, attr) in DEEP.get(path, ()):
                        _deep_names.add(qual)
                    if isinstance(member, staticmethod):
                        setattr(obj, attr, staticmethod(_wrap(member.__func__, qual, False)))
                    elif isinstance(member, classmethod):
                        setattr(obj, attr, classmethod(_wrap(member.__func__, qual, False)))
                    elif isinstance(member, types.FunctionType):
                        setattr(obj, attr, _wrap(member, qual, True))
    _reexports()


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
               value[1:], value[:-1], value.replace(",", " ,"), value + value, value + value[-1:], value[:1] + value]
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


def run(repo: str, targets: list, tests: list, max_variants: int, max_replays: int = 1000) -> dict:
    repo = os.path.abspath(repo)
    os.chdir(repo)
    sys.path.insert(0, repo)
    try:
        instrument(targets, repo)
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
                variants[key] = _capped(list(_log))
    # a test whose unperturbed run hung is not run again (its timeout is already logged)
    hung = [k.rsplit("#", 1)[0] for k, ev in variants.items() if k.endswith("#0") and ["timeout"] in ev]
    variants.update(run_pytest(tests, max_replays, hung))
    return {"variants": variants, "importError": None}


ITEM_SECONDS = 20
# a test that calls the changed code tens of thousands of times (a cross-check loop) would make
# a trace of tens of megabytes, past what the audit reads back: its first calls are kept, then
# one event with the count (the same in every tree that makes the same calls)
MAX_EVENTS_PER_VARIANT = 2000


def _capped(events: list) -> list:
    return events if len(events) <= MAX_EVENTS_PER_VARIANT else events[:MAX_EVENTS_PER_VARIANT] + [["calls", len(events)]]

REPLAY_SECONDS = 0.5
# all replays together: a real test suite keeps thousands of calls, and the audit's trace has a
# time limit; replays go round the kept calls so a cut still covers every function
REPLAY_BUDGET_SECONDS = 60.0
_POOL_TYPES = (str, int, float)


def _pool_values(value, out: list, depth: int = 0) -> None:
    """The plain values in a test input (a str, int or float; inside lists, tuples and dicts)."""
    if isinstance(value, bool) or value is None or depth > 3:
        return
    if isinstance(value, _POOL_TYPES):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        if value and all(isinstance(v, _POOL_TYPES) and not isinstance(v, bool) for v in value):
            out.append(value)
        for v in list(value)[:50]:
            _pool_values(v, out, depth + 1)
    elif isinstance(value, dict):
        for v in list(value.values())[:50]:
            _pool_values(v, out, depth + 1)


class _Phase:
    """The pytest plugin of the check: each test's calls into the changed code, and the values
    its inputs come from (parametrize table, fixtures, its module's and class's constants)."""

    def __init__(self) -> None:
        self.variants: dict = {}
        self.pool: list = []
        self.modules: set = set()

    def _constants(self, holder) -> None:
        if holder is None or id(holder) in self.modules:
            return
        self.modules.add(id(holder))
        for name, v in sorted(vars(holder).items()):
            if not name.startswith("_"):
                _pool_values(v, self.pool)

    def pytest_runtest_call(self, item) -> None:
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            for v in callspec.params.values():
                _pool_values(v, self.pool)
        for v in (getattr(item, "funcargs", None) or {}).values():
            _pool_values(v, self.pool)
        self._constants(getattr(item, "module", None))
        self._constants(getattr(item, "cls", None))

    def pytest_runtest_protocol(self, item, nextitem):  # a hook wrapper: marked in run_pytest
        del _log[:]
        _keep[0] = True
        _focus[0] = item.nodeid in FOCUS
        random.seed(0)  # code that draws random numbers draws the same in every tree
        signal.alarm(ITEM_SECONDS)
        try:
            yield
        finally:
            signal.alarm(0)
            _keep[0] = False
            _focus[0] = False
            _depth[0] = 0
            self.variants["%s#pytest" % item.nodeid] = _capped(list(_log))


def _alternatives(value, pool: list, same: list = ()) -> list:
    """Nearby inputs for one argument: its perturbations, the values the same function took in
    that argument in its other calls, then the tests' values of its type."""
    out = list(perturbations(value)) if isinstance(value, _POOL_TYPES) else []
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _POOL_TYPES) for v in value):
        # each item in a list of its own: equal items stay equal, none can be hashed (code that
        # puts the items in a set or a dict where the fix compares them fails on it)
        out.insert(0, type(value)([v] for v in value))
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        out += [type(value)(reversed(value)), type(value)(value[1:]), type(value)(list(value) + list(value[:1]))]
    out += [v for v in same if type(v) is type(value)]
    out += [v for v in pool if type(v) is type(value)]
    seen: set = {(type(value).__name__, _repr(value))}
    kept: list = []
    for v in out:
        key = (type(v).__name__, _repr(v))
        if key not in seen:
            seen.add(key)
            kept.append(v)
    return kept


POOL_PER_TYPE = 40
MATERIALISE = 50


def _outcome_repr(result) -> str:
    """A replay's result; an iterator's first items are its behaviour (a lazy result's repr
    says nothing), so they are taken (the replay's result goes nowhere else)."""
    if hasattr(result, "__next__") and hasattr(result, "__iter__") and not isinstance(result, (str, bytes, list, tuple, dict)):
        import itertools
        items = list(itertools.islice(result, MATERIALISE + 1))
        return "<iterator> " + _repr(items[:MATERIALISE]) + (" …" if len(items) > MATERIALISE else "")
    return _repr(result)


def _resolve(qual: str):
    """The function or method a qualified name (``module:Class.name``) names in this tree (the
    instrumented one: a replay's inner calls are not logged), or None."""
    modname, _, attrs = qual.partition(":")
    obj = sys.modules.get(modname)
    for attr in attrs.split("."):
        if obj is None:
            return None
        obj = vars(obj).get(attr) if isinstance(obj, type) else getattr(obj, attr, None)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    return obj if callable(obj) else None


def _shifted(v):
    """A value of v's type that differs from it (a stored value made unlike its key)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v + 100
    if isinstance(v, float):
        return v + 100.5
    if isinstance(v, str):
        return v + "-value"
    return None


def _vary_values(value, depth: int = 0, seen: set = None) -> bool:
    """Make, in place, every mapping in ``value`` (itself, its items, its attributes) whose
    items all have the value equal to the key hold other values (a test that stores each key as
    its own value cannot tell a key from its value: `(k, k)` where `(k, cache[k])` was meant);
    likewise a list of `(k, k)` pairs. Whether anything changed."""
    seen = set() if seen is None else seen
    if depth > 3 or id(value) in seen or isinstance(value, (str, bytes, int, float, type)) or value is None:
        return False
    seen.add(id(value))
    changed = False
    if isinstance(value, dict):
        items = list(value.items())
        if items and all(type(k) is type(v) and k == v and _shifted(v) is not None for k, v in items):
            for k, v in items:
                value[k] = _shifted(v)
            return True
        for v in list(value.values())[:50]:
            changed = _vary_values(v, depth + 1, seen) or changed
        return changed
    if isinstance(value, list):
        if value and all(type(x) is tuple and len(x) == 2 and type(x[0]) is type(x[1]) and x[0] == x[1] and _shifted(x[1]) is not None for x in value):
            value[:] = [(x[0], _shifted(x[1])) for x in value]
            return True
        for v in value[:50]:
            changed = _vary_values(v, depth + 1, seen) or changed
        return changed
    try:
        attrs = dict(vars(value))
    except TypeError:
        attrs = {}
    for slot in getattr(type(value), "__slots__", ()) or ():
        if isinstance(slot, str) and hasattr(value, slot):
            attrs.setdefault(slot, getattr(value, slot))
    if depth > 0 and not attrs:
        return False
    for v in attrs.values():
        if not isinstance(v, types.FunctionType):
            changed = _vary_values(v, depth + 1, seen) or changed
    return changed


def _values_unlike_keys(value):
    """A copy of an input with its key-equals-value mappings varied (_vary_values), or None."""
    try:
        v = copy.deepcopy(value)
    except Exception:
        return None
    return v if _vary_values(v) else None


def replay(calls: list, pool: list, max_replays: int, budget: float = REPLAY_BUDGET_SECONDS) -> dict:
    """Each kept call again with one argument replaced by each of its alternatives, round the
    distinct calls (one replay of each in turn) until ``max_replays`` or the time budget. A
    replay that times out is left out (how long a call takes is no behaviour), so a variant
    one tree has and another lacks is never evidence (core/dataAudit.ts skips it)."""
    variants: dict = {}
    distinct: dict = {}
    for c in calls:
        name, _fn, method, args, kwargs = c
        distinct.setdefault((name, _repr(args), _repr(kwargs), _state(args[0]) if method and args else None), c)

    same: dict = {}  # (function, argument) -> the values its calls took there
    for _n, _fn, method, args, kwargs in distinct.values():
        for i in range(1 if method else 0, len(args)):
            if isinstance(args[i], _POOL_TYPES):
                same.setdefault((_n, ("a", i)), {}).setdefault(_repr(args[i]), args[i])
        for k, v in kwargs.items():
            if isinstance(v, _POOL_TYPES):
                same.setdefault((_n, ("k", k)), {}).setdefault(_repr(v), v)

    def inputs(c):
        _n, _fn, method, args, kwargs = c
        for sibling in _siblings_of.get(_n, ()):  # the same arguments to the others one decorator serves
            yield ("sibling", sibling), None
        for slot in [("a", i) for i in range(len(args))] + [("k", k) for k in sorted(kwargs)]:  # stored values unlike their keys
            varied = _values_unlike_keys(args[slot[1]] if slot[0] == "a" else kwargs[slot[1]])
            if varied is not None:
                yield ("values", slot), varied
        for slot in [("a", i) for i in range(1 if method else 0, len(args))] + [("k", k) for k in sorted(kwargs)]:
            seen_here = list(same.get((_n, slot), {}).values())[:POOL_PER_TYPE]
            for alt in _alternatives(args[slot[1]] if slot[0] == "a" else kwargs[slot[1]], pool, seen_here):
                yield slot, alt

    # the first call of each function, then the second of each, …: a cut still covers them all
    nth: dict = {}
    order = []
    for key, c in distinct.items():
        nth[key[0]] = nth.get(key[0], -1) + 1
        order.append((nth[key[0]], len(order), key, c))
    queues = [(key, c, inputs(c)) for _n, _i, key, c in sorted(order, key=lambda x: (x[0], x[1]))]
    deadline = time.monotonic() + budget
    while queues and len(variants) < max_replays and time.monotonic() < deadline:
        left = []
        for (name, _a, _k, before), (_n, fn, method, args, kwargs), gen in queues:
            if len(variants) >= max_replays or time.monotonic() >= deadline:
                break
            nxt = next(gen, None)
            if nxt is None:
                continue
            left.append(((name, _a, _k, before), (_n, fn, method, args, kwargs), gen))
            slot, alt = nxt
            try:
                a, k = copy.deepcopy(args), copy.deepcopy(kwargs)
            except Exception:
                continue
            call, called, mark = fn, name, ""
            if slot[0] == "sibling":
                call, called, mark = _resolve(slot[1]), slot[1], "|sibling of %s" % name
                if call is None:
                    continue
            elif slot[0] == "values":
                mark = "|values unlike keys in %s" % (slot[1],)
                slot = slot[1]
            if slot[0] == "a":
                a = a[:slot[1]] + (alt,) + a[slot[1] + 1:]
            elif slot[0] == "k":
                k[slot[1]] = alt
            shown = _repr(a[1:] if method else a)
            if mark:  # the object itself may be what changed: its state is part of the input
                shown_in = "%s|%s|%s" % (shown, _state(a[0]) if method and a else None, type(a[0]).__qualname__ if method and a else None)
            key = "replay::%s#%s" % (called, hashlib.sha1(("%s|%s|%s%s" % (shown_in if mark else shown, _repr(k), before, mark)).encode("utf-8", "replace")).hexdigest()[:16])
            _depth[0] = 1  # calls the replayed code makes are not calls from test code
            random.seed(0)
            try:
                signal.setitimer(signal.ITIMER_REAL, REPLAY_SECONDS)
                result = _outcome_repr(call(*a, **k))
                event = [called, shown, _repr(k), "return", result, _state(a[0]) if method and a else None]
            except _Timeout:
                event = None
            except BaseException as err:
                event = [called, shown, _repr(k), "raise", type(err).__name__, _state(a[0]) if method and a else None]
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                _depth[0] = 0
            if event is not None:
                variants[key] = [event]
        queues = left
    return variants


def run_pytest(tests: list, max_replays: int, deselect: list = ()) -> dict:
    """The tests run by pytest as the grader runs them; then the replays of their calls."""
    try:
        import pytest  # the task's own, as the grader uses it
    except ImportError:
        return {}
    if not hasattr(_Phase.pytest_runtest_protocol, "pytest_impl"):  # pytest is imported here, not at the top
        pytest.hookimpl(hookwrapper=True)(_Phase.pytest_runtest_protocol)
    phase = _Phase()
    args = ["-q", "-p", "no:cacheprovider", "--maxfail=2147483647", *tests]
    for nodeid in deselect:
        args += ["--deselect", nodeid]
    try:
        import floe_pytest_report  # noqa: F401 - next to this script where the grader stages it
        args[:0] = ["-p", "floe_pytest_report"]
    except ImportError:
        pass
    try:  # tests spread over xdist workers would run where nothing is wrapped: one process
        import xdist  # noqa: F401
        args += ["-n", "0"]
    except ImportError:
        pass
    del _calls[:]
    del _focus_calls[:]
    _kept_of.clear()
    _focus_kept_of.clear()
    try:
        pytest.main(args, plugins=[phase])
    except BaseException as err:  # pytest itself failed: what ran so far is still evidence
        phase.variants["pytest::<session>"] = [["error", type(err).__name__]]
    # the tests' values, at most POOL_PER_TYPE of each type, spread over their sorted order (the
    # same for every tree: they come from the tests, not from the code under test)
    by_type: dict = {}
    for v in phase.pool + [x for c in _focus_calls + _calls for x in _flat(c[3], c[4])] + list(SEEDS):
        by_type.setdefault(type(v).__name__, {}).setdefault(_repr(v), v)
    pool: list = []
    for name in sorted(by_type):
        values = [by_type[name][r] for r in sorted(by_type[name])]
        step = max(1, len(values) // POOL_PER_TYPE)
        pool += values[::step][:POOL_PER_TYPE]
    started = time.monotonic()
    focused = replay(_focus_calls, pool, max_replays // 2, REPLAY_BUDGET_SECONDS / 2) if _focus_calls else {}
    phase.variants.update(focused)
    phase.variants.update(replay(_calls, pool, max_replays - len(focused), REPLAY_BUDGET_SECONDS - (time.monotonic() - started)))
    return phase.variants


def _flat(args, kwargs) -> list:
    out: list = []
    for v in list(args) + list(kwargs.values()):
        _pool_values(v, out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--targets", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--max-variants", type=int, default=400)
    ap.add_argument("--max-replays", type=int, default=1000)
    ap.add_argument("--seeds", default="[]", help="JSON list of constants to try as inputs")
    ap.add_argument("--deep", default="{}", help="JSON {file: [function or Class.method]} the gold patch changed: their inner calls are replayed too")
    ap.add_argument("--siblings", default="{}", help="JSON {file: [[function or Class.method, …]]}: the groups one decorator the gold patch changed serves; a call of one is replayed on the others")
    ap.add_argument("--focus", default="[]", help="JSON list of pytest node ids whose calls are replayed first (the FAIL_TO_PASS tests)")
    a = ap.parse_args(argv)
    DEEP.clear()
    DEEP.update({k: list(v) for k, v in json.loads(a.deep).items()} if a.deep else {})
    SIBLINGS.clear()
    SIBLINGS.update({k: [list(g) for g in v] for k, v in json.loads(a.siblings).items()} if a.siblings else {})
    _siblings_of.clear()
    FOCUS.clear()
    FOCUS.update(x for x in json.loads(a.focus) if isinstance(x, str))
    SEEDS[:] = [v for v in json.loads(a.seeds) if isinstance(v, (str, int, float))]
    # what the code under test (or pytest, or a process it starts) prints must not mix with the
    # answer: file descriptor 1 is stderr while they run, the answer goes to a copy of the old one
    sys.stdout.flush()
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out = run(a.repo, [t for t in a.targets.split(",") if t], [t for t in a.tests.split(",") if t], a.max_variants, a.max_replays)
    answer.write(json.dumps(out) + "\n")
    answer.flush()
    os._exit(0)  # threads or atexit hooks the code under test left must not hold the answer


if __name__ == "__main__":
    raise SystemExit(main())
