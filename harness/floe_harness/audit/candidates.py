"""Plausible wrong patches for the data audit: candidates that change only what the gold patch
changes, for the audit to run against a task's own tests (floe's `dataAudit` workflow).

Three families, each a classic way a fix goes wrong while the tests still pass:

- ``hunk_subset``: the gold patch with some of its change blocks left out (a partial fix);
- ``symbol_only``: for a name the gold patch adds (a rename, a new function), only the name —
  an alias of the closest existing name, or a stub — without the behaviour;
- ``mutation``: one small change to an expression on the lines the gold patch wrote
  (operator, comparison, constant, dropped call or argument, another local variable, a
  sibling method, a sub-expression in place of the whole), as mutation-testing tools
  (mutmut, cosmic-ray, PIT) make them.

Input: the changed files' text before and after the gold patch. Output: candidates, each with
a git-style diff against the base. Nothing here reads a task's labels (``floe.loose_tests``,
``floe.wrong_patch``): the audit must find its evidence blind. Whether a candidate is *wrong*
(behaves differently from the gold patch) is decided by running it (``diffcheck.py``), not here.
"""
from __future__ import annotations

import ast
import copy
import difflib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

# sibling methods and functions: a fix that called the neighbour by mistake
METHOD_FAMILIES: list[tuple[str, ...]] = [
    ("lower", "upper", "casefold", "capitalize", "title", "swapcase"),
    ("strip", "lstrip", "rstrip"),
    ("startswith", "endswith"),
    ("find", "rfind", "index", "rindex"),
    ("split", "rsplit"),
    ("ljust", "rjust", "center"),
    ("append", "extend"),
    ("pop", "popleft"),
    ("keys", "values", "items"),
    ("isdigit", "isnumeric", "isdecimal", "isalnum", "isalpha"),
]
FUNC_FAMILIES: list[tuple[str, ...]] = [
    ("min", "max"),
    ("any", "all"),
    ("int", "round"),
    ("floor", "ceil"),
    ("str", "repr"),
]
ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
SWAP = {ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
ATOMIC = (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Tuple, ast.Dict, ast.Set)

MAX_MUTANTS_PER_FILE = 120
MAX_SUBSETS = 30


@dataclass
class Candidate:
    kind: str  # hunk_subset | symbol_only | mutation | agent_mistakes.py's kinds
    description: str
    path: str
    text: str


def _lines(text: str, keepends: bool = False) -> list[str]:
    """Lines as git and ast count them: split at \\n only (str.splitlines also splits at form
    feeds and other separators that are not line ends in source files)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
        return [p + "\n" for p in parts] if keepends else parts
    return [p + "\n" for p in parts[:-1]] + parts[-1:] if keepends else parts


def _blocks(base: list[str], gold: list[str]) -> list[tuple[str, int, int, int, int]]:
    return [op for op in difflib.SequenceMatcher(a=base, b=gold, autojunk=False).get_opcodes() if op[0] != "equal"]


def changed_gold_lines(base_text: str, gold_text: str) -> set[int]:
    """1-based line numbers of the gold file that the gold patch wrote (for a pure deletion,
    the lines on either side of it)."""
    out: set[int] = set()
    for tag, _i1, _i2, j1, j2 in _blocks(_lines(base_text), _lines(gold_text)):
        if tag == "delete":
            out.update({j1, j1 + 1})
        else:
            out.update(range(j1 + 1, j2 + 1))
    return {n for n in out if n >= 1}


def unified(path: str, before: str | None, after: str) -> str:
    """A git-style diff of one file (applies with ``git apply`` and ``patch -p1``); ``before``
    None: the file is new."""
    a, b = _lines(before or "", True), _lines(after, True)
    for lines in (a, b):
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n\\ No newline at end of file\n"
    if before is None:
        body = "".join(difflib.unified_diff(a, b, "/dev/null", f"b/{path}", n=3))
        return f"diff --git a/{path} b/{path}\nnew file mode 100644\n{body}" if body else ""
    body = "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}", n=3))
    return f"diff --git a/{path} b/{path}\n{body}" if body else ""


def changed_gold_spans(base_text: str, gold_text: str) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of the gold file that the gold patch wrote, at the character
    level within changed lines (an insertion-free deletion is an empty range at its place)."""
    base, gold = _lines(base_text, True), _lines(gold_text, True)
    starts = [0]
    for ln in gold:
        starts.append(starts[-1] + len(ln.encode("utf-8")))
    spans: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in _blocks(base, gold):
        if tag == "replace" and i2 - i1 == j2 - j1:
            for bl, gl, j in zip(base[i1:i2], gold[j1:j2], range(j1, j2)):
                for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=bl, b=gl, autojunk=False).get_opcodes():
                    if op != "equal":
                        off = starts[j]
                        spans.append((off + len(gl[:b1].encode("utf-8")), off + len(gl[:b2].encode("utf-8"))))
        elif tag == "delete":
            spans.append((starts[j1], starts[j1]))
        else:
            spans.append((starts[j1], starts[j2]))
    return spans


# ---------- hunk subsets ----------

def hunk_subsets(path: str, base_text: str, gold_text: str) -> list[Candidate]:
    base, gold = _lines(base_text, True), _lines(gold_text, True)
    blocks = _blocks(base, gold)
    n = len(blocks)
    if n < 2:
        return []
    if 2 ** n - 2 <= MAX_SUBSETS:
        picks = [set(c) for k in range(1, n) for c in itertools.combinations(range(n), k)]
    else:  # one block left out, or only one block kept
        picks = [set(range(n)) - {i} for i in range(n)] + [{i} for i in range(n)]
    out = []
    for keep in picks:
        lines: list[str] = []
        at = 0
        for idx, (_tag, i1, i2, j1, j2) in enumerate(blocks):
            lines += base[at:i1]
            lines += gold[j1:j2] if idx in keep else base[i1:i2]
            at = i2
        lines += base[at:]
        left_out = ", ".join(f"lines {blocks[i][3] + 1}-{blocks[i][4]}" for i in sorted(set(range(n)) - keep))
        out.append(Candidate("hunk_subset", f"{path}: the gold patch without its change at {left_out}", path, "".join(lines)))
    return out


# ---------- symbol-only fixes ----------

def _defined(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = "function"
        elif isinstance(node, ast.ClassDef):
            out[node.name] = "class"
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = "value"
    return out


def symbol_only(path: str, base_text: str, gold_text: str) -> list[Candidate]:
    try:
        base_names, gold_names = _defined(ast.parse(base_text)), _defined(ast.parse(gold_text))
    except SyntaxError:
        return []
    out = []
    sep = "" if base_text.endswith("\n") or not base_text else "\n"
    for name, kind in gold_names.items():
        if name in base_names:
            continue
        close = difflib.get_close_matches(name, [n for n, k in base_names.items() if k == kind], n=1, cutoff=0.5)
        if close:
            out.append(Candidate("symbol_only", f"{path}: `{name} = {close[0]}`, an alias of the old name, instead of the gold change", path, f"{base_text}{sep}\n{name} = {close[0]}\n"))
        stub = f"class {name}:\n    pass\n" if kind == "class" else f"{name} = None\n" if kind == "value" else f"def {name}(*args, **kwargs):\n    return None\n"
        out.append(Candidate("symbol_only", f"{path}: a stub `{name}` instead of the gold change", path, f"{base_text}{sep}\n{stub}"))
    return out


# ---------- mutations ----------

def _locals_of(fn: ast.AST) -> set[str]:
    names: set[str] = set()
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = fn.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + ([a.vararg] if a.vararg else []) + ([a.kwarg] if a.kwarg else []):
            names.add(arg.arg)
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    names.discard("self")
    names.discard("cls")
    return names


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _scoped(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Where names are bound by a comprehension or lambda, or in an f-string's format spec. A
    comprehension's first iterable is evaluated outside it, so it is not scoped."""
    child, p = node, parents.get(node)
    while p is not None:
        if isinstance(p, ast.Lambda) or isinstance(p, ast.FormattedValue) and child is p.format_spec:
            return True
        if isinstance(p, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            first = p.generators[0]
            if child is not first:
                return True
        if isinstance(p, ast.comprehension) and child is not p.iter:
            return True
        if isinstance(p, ast.comprehension) and p is not parents[p].generators[0]:  # type: ignore[attr-defined]
            return True
        child, p = p, parents.get(p)
    return False


def _self_attributes(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> set[str]:
    """Attributes of `self` that the enclosing class uses."""
    p = parents.get(node)
    while p is not None and not isinstance(p, ast.ClassDef):
        p = parents.get(p)
    if p is None:
        return set()
    return {n.attr for n in ast.walk(p) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    p = parents.get(node)
    while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
        p = parents.get(p)
    return p


def _with(node: ast.AST, **changes: Any) -> ast.AST:
    new = copy.deepcopy(node)
    for k, v in changes.items():
        setattr(new, k, v)
    return new


def _node_mutants(node: ast.expr, parents: dict[ast.AST, ast.AST], root: bool) -> Iterator[tuple[str, ast.AST]]:
    src = ast.unparse(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ARITH):
        for op in ARITH:
            if not isinstance(node.op, op):
                yield f"operator in `{src}`", _with(node, op=op())
        yield "an operand in place of the operation", node.left
        yield "an operand in place of the operation", node.right
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        op = node.ops[0]
        if isinstance(op, ORDER):
            for other in ORDER:
                if not isinstance(op, other):
                    yield f"comparison in `{src}`", _with(node, ops=[other()])
        elif type(op) in SWAP:
            yield f"comparison in `{src}`", _with(node, ops=[SWAP[type(op)]()])
    elif isinstance(node, ast.BoolOp):
        yield f"`and`/`or` in `{src}`", _with(node, op=ast.Or() if isinstance(node.op, ast.And) else ast.And())
        for v in node.values:
            yield "one condition in place of all", v
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield "the operand without its unary operator", node.operand
    elif isinstance(node, ast.Constant) and not isinstance(parents.get(node), ast.JoinedStr):
        v = node.value
        if isinstance(v, bool):
            yield f"constant `{src}`", ast.Constant(not v)
        elif isinstance(v, int):
            for w in dict.fromkeys([v + 1, v - 1, 0, 1]):
                if w != v:
                    yield f"constant `{src}`", ast.Constant(w)
        elif isinstance(v, float):
            for w in dict.fromkeys([v + 1, v - 1, 0.0]):
                if w != v:
                    yield f"constant `{src}`", ast.Constant(w)
        elif isinstance(v, str) and 0 < len(v) <= 40:
            yield f"constant `{src}`", ast.Constant("")
    elif isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            for fam in FUNC_FAMILIES:
                if f.id in fam:
                    for other in fam:
                        if other != f.id:
                            yield f"`{other}` for `{f.id}`", _with(node, func=ast.Name(other, ast.Load()))
        if isinstance(f, ast.Attribute):
            for fam in METHOD_FAMILIES:
                if f.attr in fam:
                    for other in fam:
                        if other != f.attr:
                            yield f"`.{other}()` for `.{f.attr}()`", _with(node, func=_with(f, attr=other))
            yield f"`{ast.unparse(f.value)}` without `.{f.attr}(…)`", f.value
        if not any(isinstance(a, ast.Starred) for a in node.args):
            for a in node.args:
                yield f"the argument in place of `{src}`", a
            if len(node.args) >= 2:
                for i in range(len(node.args)):
                    yield f"argument {i + 1} of `{src}` left out", _with(node, args=node.args[:i] + node.args[i + 1:])
        for i in range(len(node.keywords)):
            yield f"keyword argument of `{src}` left out", _with(node, keywords=node.keywords[:i] + node.keywords[i + 1:])
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load) and len(node.elts) >= 2:
        for i in range(len(node.elts)):
            yield f"element {i + 1} of `{src}` left out", _with(node, elts=node.elts[:i] + node.elts[i + 1:])
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        s = node.slice
        for part in ("lower", "upper", "step"):
            if getattr(s, part) is not None:
                yield f"slice bound of `{src}` left out", _with(node, slice=_with(s, **{part: None}))
    elif isinstance(node, ast.IfExp):
        yield "one branch of the conditional", node.body
        yield "one branch of the conditional", node.orelse
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and node.value.id == "self":
        parent_call = parents.get(node)
        if not (isinstance(parent_call, ast.Call) and parent_call.func is node):
            for other in sorted(_self_attributes(node, parents) - {node.attr}):
                yield f"`self.{other}` for `self.{node.attr}`", _with(node, attr=other)
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and not (isinstance(parents.get(node), ast.Call) and parents[node].func is node):  # type: ignore[attr-defined]
        for fam in METHOD_FAMILIES:
            if node.attr in fam:
                for other in fam:
                    if other != node.attr:
                        yield f"`.{other}` for `.{node.attr}`", _with(node, attr=other)
    parent = parents.get(node)
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Call) and parent.func is node):
        fn = _enclosing_function(node, parents)
        if fn is not None and node.id in _locals_of(fn):
            for other in sorted(_locals_of(fn) - {node.id}):
                yield f"`{other}` for `{node.id}`", ast.Name(other, ast.Load())
    if root:  # the statement's whole expression replaced by a part of it
        seen = {src}
        for sub in ast.walk(node):
            if sub is node or not isinstance(sub, (ast.Call, ast.BinOp, ast.Subscript)) or _scoped(sub, parents):
                continue
            s = ast.unparse(sub)
            if s not in seen:
                seen.add(s)
                yield f"`{s}` in place of `{src}`", sub


def _roots(tree: ast.AST) -> set[ast.AST]:
    out: set[ast.AST] = set()
    for node in ast.walk(tree):
        for field in ("value", "test"):
            v = getattr(node, field, None)
            if isinstance(node, ast.stmt) and isinstance(v, ast.expr):
                out.add(v)
    return out


def _same(segment: bytes, node: ast.expr) -> bool:
    try:
        return ast.dump(ast.parse(segment.decode("utf-8").strip(), mode="eval").body) == ast.dump(node)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return False


def mutations(path: str, gold_text: str, lines: set[int], spans: list[tuple[int, int]] | None = None) -> list[Candidate]:
    """Mutants of the expressions on the gold patch's lines that contain a character it wrote
    (``spans``; None: any expression on those lines)."""
    try:
        tree = ast.parse(gold_text)
    except SyntaxError:
        return []
    parents = _parents(tree)
    roots = _roots(tree)
    raw = [ln.encode("utf-8") for ln in _lines(gold_text, True)]
    starts = [0]
    for ln in raw:
        starts.append(starts[-1] + len(ln))
    blob = b"".join(raw)
    out: list[Candidate] = []
    seen = {gold_text}

    def span(n: ast.AST) -> tuple[int, int]:
        return starts[n.lineno - 1] + n.col_offset, starts[n.end_lineno - 1] + n.end_col_offset  # type: ignore[attr-defined,operator]

    def touches(a: int, b: int) -> bool:
        return any(a <= e and s <= b and (s < b and e > a or s == e) for s, e in spans or [])

    # the constants of an expression the gold patch changed are part of it (`score >= 90`)
    touching = {n for n in ast.walk(tree) if isinstance(n, ast.expr) and getattr(n, "end_lineno", None) and touches(*span(n))}
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or not hasattr(node, "end_lineno") or node.end_lineno is None:
            continue
        if not set(range(node.lineno, node.end_lineno + 1)) <= lines or _scoped(node, parents):
            continue
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            continue
        a, b = span(node)
        if spans is not None and not touches(a, b) and not (isinstance(node, ast.Constant) and parents.get(node) in touching):
            continue
        if not _same(blob[a:b], node):  # a position Python got wrong (f-strings before 3.12)
            continue
        for what, new in _node_mutants(node, parents, node in roots):
            code = ast.unparse(new)
            if not isinstance(new, ATOMIC) and not (isinstance(new, ast.UnaryOp) and isinstance(new.operand, ATOMIC)):
                code = f"({code})"
            text = (blob[:a] + code.encode("utf-8") + blob[b:]).decode("utf-8")
            if text in seen:
                continue
            seen.add(text)
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            out.append(Candidate("mutation", f"{path}:{node.lineno}: {what} (`{ast.unparse(node)}` → `{ast.unparse(new)}`)", path, text))
            if len(out) >= MAX_MUTANTS_PER_FILE:
                return out
    return out


def seeds(files: dict[str, dict[str, str]], limit: int = 20) -> list[Any]:
    """Constants on the lines the gold patch wrote (strings, ints, floats): diffcheck.py puts
    them into the tests' inputs, as test generators seed inputs with the code's own constants
    (a fix for words ending in "sh" is exercised by a word ending in "sh")."""
    out: list[Any] = []
    for t in files.values():
        try:
            tree = ast.parse(t["gold"])
        except SyntaxError:
            continue
        lines = changed_gold_lines(t.get("base") or "", t["gold"])
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and getattr(node, "lineno", 0) in lines and not isinstance(node.value, bool):
                v = node.value
                if isinstance(v, (int, float)) or isinstance(v, str) and 0 < len(v) <= 20:
                    if not any(type(v) is type(x) and v == x for x in out):
                        out.append(v)
    return out[:limit]


def changed_functions(files: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """By file, the functions and methods (``name``, ``Class.name``) whose lines the gold patch
    wrote: diffcheck.py keeps their calls from inside the code as well (a helper the tests reach
    only through the function they call), for replay."""
    out: dict[str, list[str]] = {}
    for path, t in files.items():
        try:
            tree = ast.parse(t["gold"])
        except SyntaxError:
            continue
        lines = changed_gold_lines(t.get("base") or "", t["gold"])

        def visit(body: list, prefix: str) -> None:
            for node in body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if lines & set(range(node.lineno, (node.end_lineno or node.lineno) + 1)):
                        out.setdefault(path, []).append(prefix + node.name)
                elif isinstance(node, ast.ClassDef):
                    visit(node.body, prefix + node.name + ".")

        visit(tree.body, "")
    return out


def candidates(files: dict[str, dict[str, str]], limit: int = 200, more: Callable[[str, str, str], list[Candidate]] | None = None) -> list[dict[str, Any]]:
    """Every candidate for a gold patch: ``files`` maps each Python file it changes to
    ``{"base": text (None: a file the gold patch creates), "gold": text}`` (other files stay as the gold patch leaves them). Each
    candidate's diff is against the base and includes the gold patch's other files unchanged.
    ``more``: more candidates of a file (path, base, gold), before the mechanical mutations
    (the serve command passes agent_mistakes.py's, which build on this module)."""
    per_file: list[Candidate] = []
    for path, t in files.items():
        base, gold = t.get("base") or "", t["gold"]
        per_file += hunk_subsets(path, base, gold)
        per_file += symbol_only(path, base, gold)
        per_file += more(path, base, gold) if more else []
        if path.endswith(".py"):
            per_file += mutations(path, gold, changed_gold_lines(base, gold), changed_gold_spans(base, gold))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in per_file:
        if c.text in (files[c.path].get("base") or "", files[c.path]["gold"]):  # the bug itself, or the gold patch
            continue
        diff = "".join(unified(p, t.get("base"), c.text if p == c.path else t["gold"]) for p, t in files.items())
        if not diff or diff in seen:
            continue
        seen.add(diff)
        out.append({"id": f"c{len(out):03d}", "kind": c.kind, "description": c.description, "path": c.path, "diff": diff})
        if len(out) >= limit:
            break
    return out
