"""Wrong patches of the kinds coding agents write on real code, for the data audit (issue 43):
each is built from the gold patch alone, and, like candidates.py's families, it is wrong only
if running it shows a difference (``diffcheck.py``).

- ``format_spec``: a format spec the gold patch wrote in an f-string, changed (``:02d`` left
  out, its width ±1, its zero fill or precision dropped);
- ``call_site``: the gold patch makes the same edit on several lines (a call fixed at each of
  its sites): the fix at one site only, or at every site but one;
- ``branch_drop``: a partial fix, an ``if``/``elif``/``else`` the gold patch wrote with one
  branch left out (or the whole ``if`` dropped);
- ``off_by_one``: an arithmetic result or ``len()`` the gold patch wrote, ±1, and a division
  it wrote rounded or truncated;
- ``special_case``: the changed function behaving as the gold patch only when its call is the
  issue's example (every plain argument is a value the issue's text names: the example an
  agent fixes to pass its tests), and as before otherwise.
"""
from __future__ import annotations

import ast
import copy
import difflib
import re
from typing import Iterator

from floe_harness.audit.candidates import Candidate, _blocks, _lines, changed_gold_lines

SPEC = re.compile(r"^(?P<align>.?[<>=^])?(?P<sign>[+\- ])?(?P<alt>#)?(?P<zero>0)?(?P<width>\d+)?(?P<group>[,_])?(?:\.(?P<prec>\d+))?(?P<type>[bcdeEfFgGnosxX%])?$")
MAX_PER_KIND = 30


def _replace_lines(text: str, start: int, end: int, new: list[str]) -> str:
    """``text`` with its lines start..end (1-based, inclusive) replaced by ``new``."""
    lines = _lines(text, True)
    tail = "" if lines and lines[end - 1].endswith("\n") else None
    body = [ln if ln.endswith("\n") else ln + "\n" for ln in new]
    if tail is None and body:
        body[-1] = body[-1].rstrip("\n")
    return "".join(lines[:start - 1] + body + lines[end:])


def _stmt_text(node: ast.stmt, indent: str) -> list[str]:
    return [indent + ln for ln in ast.unparse(node).split("\n")]


def _indent_of(text: str, lineno: int) -> str:
    line = _lines(text)[lineno - 1]
    return line[:len(line) - len(line.lstrip())]


# ---------- format specs ----------

def _spec_variants(spec: str) -> Iterator[tuple[str, str]]:
    m = SPEC.match(spec)
    yield "no format spec", ""
    if not m:
        return
    g = m.groupdict()

    def build(**over: str | None) -> str:
        d = {**g, **over}
        return "".join(x for x in (d["align"], d["sign"], d["alt"], d["zero"], d["width"], d["group"], "." + d["prec"] if d["prec"] else None, d["type"]) if x)
    if g["width"]:
        w = int(g["width"])
        for other in (w - 1, w + 1):
            if other > 0:
                yield f"width {other}", build(width=str(other))
        yield "no width", build(width=None, zero=None)
    if g["zero"]:
        yield "no zero fill", build(zero=None)
    if g["prec"]:
        p = int(g["prec"])
        for other in (p - 1, p + 1):
            if other >= 0:
                yield f"precision {other}", build(prec=str(other))
        yield "no precision", build(prec=None)


def format_specs(path: str, base: str, gold: str) -> list[Candidate]:
    try:
        tree = ast.parse(gold)
    except SyntaxError:
        return []
    lines = changed_gold_lines(base, gold)
    out: list[Candidate] = []
    for stmt in ast.walk(tree):
        if not isinstance(stmt, ast.stmt) or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try)):
            continue
        if not set(range(stmt.lineno, stmt.end_lineno + 1)) <= lines:  # type: ignore[operator]
            continue
        fvs = [n for n in ast.walk(stmt) if isinstance(n, ast.FormattedValue) and isinstance(n.format_spec, ast.JoinedStr)
               and len(n.format_spec.values) == 1 and isinstance(n.format_spec.values[0], ast.Constant)]
        for i, fv in enumerate(fvs):
            spec = fv.format_spec.values[0].value  # type: ignore[union-attr]
            for what, new_spec in _spec_variants(spec):
                new = copy.deepcopy(stmt)
                target = [n for n in ast.walk(new) if isinstance(n, ast.FormattedValue) and isinstance(n.format_spec, ast.JoinedStr)
                          and len(n.format_spec.values) == 1 and isinstance(n.format_spec.values[0], ast.Constant)][i]
                target.format_spec = ast.JoinedStr([ast.Constant(new_spec)]) if new_spec else None
                text = _replace_lines(gold, stmt.lineno, stmt.end_lineno, _stmt_text(new, _indent_of(gold, stmt.lineno)))  # type: ignore[arg-type]
                out.append(Candidate("format_spec", f"{path}:{stmt.lineno}: format spec `:{spec}` → {what} (`{ast.unparse(new)}`)", path, text))
    return out[:MAX_PER_KIND]


# ---------- the same edit at several sites ----------

def _edit(a: str, b: str) -> tuple[tuple[str, str], ...]:
    ops = difflib.SequenceMatcher(a=a.strip(), b=b.strip(), autojunk=False).get_opcodes()
    return tuple((a.strip()[i1:i2], b.strip()[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal")


def call_sites(path: str, base: str, gold: str) -> list[Candidate]:
    b, g = _lines(base, True), _lines(gold, True)
    pairs: list[tuple[int, int]] = []  # (base line index, gold line index) of one-for-one replaced lines
    for tag, i1, i2, j1, j2 in _blocks(b, g):
        if tag == "replace" and i2 - i1 == j2 - j1:
            pairs += list(zip(range(i1, i2), range(j1, j2)))
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for i, j in pairs:
        e = _edit(b[i], g[j])
        if e:
            groups.setdefault(e, []).append((i, j))
    out: list[Candidate] = []
    for edit, sites in groups.items():
        if len(sites) < 2:
            continue
        shown = "; ".join(f"`{x}` → `{y}`" for x, y in edit)[:120]
        for keep_only in (True, False):
            for i, j in sites:
                text = list(g)
                for i2, j2 in sites:
                    if (i2 == i) != keep_only:  # keep_only: every other site back to base; else this one
                        text[j2] = b[i2]
                what = f"the edit ({shown}) at line {j + 1} only" if keep_only else f"the edit ({shown}) everywhere but line {j + 1}"
                out.append(Candidate("call_site", f"{path}: {what}, of its {len(sites)} sites", path, "".join(text)))
    return out[:MAX_PER_KIND]


# ---------- one branch of the gold change left out ----------

def branch_drops(path: str, base: str, gold: str) -> list[Candidate]:
    try:
        tree = ast.parse(gold)
    except SyntaxError:
        return []
    lines = changed_gold_lines(base, gold)
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    out: list[Candidate] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not set(range(node.lineno, node.end_lineno + 1)) & lines:  # type: ignore[operator]
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.If) and parent.orelse == [node]:
            continue  # an elif: handled as its parent's branch
        indent = _indent_of(gold, node.lineno)
        variants: list[tuple[str, list[ast.stmt]]] = []
        if set(range(node.lineno, node.end_lineno + 1)) <= lines:  # type: ignore[operator]
            alone = any(getattr(parent, f, None) == [node] for f in ("body", "orelse", "finalbody"))
            variants.append(("the new `if` left out", [ast.Pass()] if alone else []))
        chain = [node]
        while len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ast.If):
            chain.append(chain[-1].orelse[0])
        for k, branch in enumerate(chain):
            new = copy.deepcopy(node)
            links = [new]
            while len(links[-1].orelse) == 1 and isinstance(links[-1].orelse[0], ast.If):
                links.append(links[-1].orelse[0])
            if k == 0:
                if not new.orelse:
                    continue  # an `if` alone: left out above
                variants.append((f"its first branch (`if {ast.unparse(branch.test)}`) left out", new.orelse))
            else:
                links[k - 1].orelse = links[k].orelse
                variants.append((f"its branch `elif {ast.unparse(branch.test)}` left out", [new]))
        if chain[-1].orelse and not (len(chain[-1].orelse) == 1 and isinstance(chain[-1].orelse[0], ast.If)):
            new = copy.deepcopy(node)
            last = new
            while len(last.orelse) == 1 and isinstance(last.orelse[0], ast.If):
                last = last.orelse[0]
            last.orelse = []
            variants.append(("its `else` left out", [new]))
        for what, stmts in variants:
            text_lines = [ln for s in stmts for ln in _stmt_text(s, indent)]
            text = _replace_lines(gold, node.lineno, node.end_lineno, text_lines)  # type: ignore[arg-type]
            try:
                ast.parse(text)
            except SyntaxError:
                continue
            out.append(Candidate("branch_drop", f"{path}:{node.lineno}: the gold `if` with {what}", path, text))
    return out[:MAX_PER_KIND]


# ---------- off by one, rounding ----------

def off_by_ones(path: str, base: str, gold: str) -> list[Candidate]:
    try:
        tree = ast.parse(gold)
    except SyntaxError:
        return []
    lines = changed_gold_lines(base, gold)
    out: list[Candidate] = []
    for stmt in ast.walk(tree):
        if not isinstance(stmt, (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)) or stmt.value is None:
            continue
        if not set(range(stmt.lineno, stmt.end_lineno + 1)) <= lines:  # type: ignore[operator]
            continue
        targets = [n for n in ast.walk(stmt.value) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod))
                   or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"]
        for i, t in enumerate(targets):
            forms = [("+ 1", lambda e: ast.BinOp(e, ast.Add(), ast.Constant(1))), ("- 1", lambda e: ast.BinOp(e, ast.Sub(), ast.Constant(1)))]
            if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Div):
                forms += [("rounded", lambda e: ast.Call(ast.Name("round", ast.Load()), [e], [])), ("truncated", lambda e: ast.Call(ast.Name("int", ast.Load()), [e], [])),
                          ("floor-divided", lambda e: ast.BinOp(e.left, ast.FloorDiv(), e.right))]
            for what, form in forms:
                new = copy.deepcopy(stmt)
                spot = [n for n in ast.walk(new.value) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod))  # type: ignore[arg-type]
                        or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len"][i]
                replaced = form(copy.deepcopy(spot))
                holder = _replace_child(new, spot, replaced)
                if not holder:
                    continue
                text = _replace_lines(gold, stmt.lineno, stmt.end_lineno, _stmt_text(ast.fix_missing_locations(new), _indent_of(gold, stmt.lineno)))  # type: ignore[arg-type]
                out.append(Candidate("off_by_one", f"{path}:{stmt.lineno}: `{ast.unparse(t)}` {what} (`{ast.unparse(replaced)}`)", path, text))
    return out[:MAX_PER_KIND]


def _replace_child(root: ast.AST, old: ast.AST, new: ast.AST) -> bool:
    for node in ast.walk(root):
        for field, value in ast.iter_fields(node):
            if value is old:
                setattr(node, field, new)
                return True
            if isinstance(value, list) and any(v is old for v in value):
                setattr(node, field, [new if v is old else v for v in value])
                return True
    return False


# ---------- the issue's example special-cased ----------

QUOTED = re.compile(r"""`([^`\n]{1,40})`|'([^'\n]{1,40})'|"([^"\n]{1,40})\"""")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def issue_values(problem: str, limit: int = 12) -> list:
    """Literal values the issue's text names: the constants of its code spans (`f(3, 5)`,
    `'ORD-00042'`), quoted strings, and the numbers of its prose."""
    out: list = []
    for m in QUOTED.finditer(problem or ""):
        s = next(g for g in m.groups() if g is not None)
        try:
            tree = ast.parse(s.strip(), mode="eval")
            found = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, str)) and not isinstance(n.value, bool)]
            found += [-n.operand.value for n in ast.walk(tree) if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
                      and isinstance(n.operand, ast.Constant) and isinstance(n.operand.value, (int, float)) and not isinstance(n.operand.value, bool)]
            out += found
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            if m.group(1) is None:  # a quoted word, not code
                out.append(s)
    for m in NUMBER.finditer(QUOTED.sub(" ", problem or "")):
        out.append(float(m.group()) if "." in m.group() else int(m.group()))
    seen: list = []
    for v in out:
        if not any(type(v) is type(x) and v == x for x in seen):
            seen.append(v)
    return seen[:limit]


def _forward(args: ast.arguments) -> tuple[list[ast.expr], list[ast.keyword]]:
    pos: list[ast.expr] = [ast.Name(a.arg, ast.Load()) for a in args.posonlyargs + args.args]
    if args.vararg:
        pos.append(ast.Starred(ast.Name(args.vararg.arg, ast.Load()), ast.Load()))
    kws = [ast.keyword(a.arg, ast.Name(a.arg, ast.Load())) for a in args.kwonlyargs]
    if args.kwarg:
        kws.append(ast.keyword(None, ast.Name(args.kwarg.arg, ast.Load())))
    return pos, kws


def special_cases(path: str, base: str, gold: str, problem: str) -> list[Candidate]:
    values = issue_values(problem)
    if not values:
        return []
    try:
        gtree, btree = ast.parse(gold), ast.parse(base)
    except SyntaxError:
        return []
    lines = changed_gold_lines(base, gold)

    def functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
        out: dict[str, ast.FunctionDef] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                out[node.name] = node
            elif isinstance(node, ast.ClassDef):
                out.update({f"{node.name}.{m.name}": m for m in node.body if isinstance(m, ast.FunctionDef)})
        return out
    gf, bf = functions(gtree), functions(btree)
    out: list[Candidate] = []
    for name, fn in gf.items():
        old = bf.get(name)
        if old is None or not set(range(fn.lineno, fn.end_lineno + 1)) & lines or ast.dump(old) == ast.dump(fn):  # type: ignore[operator]
            continue
        if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Nonlocal, ast.Global)) for n in ast.walk(fn)) or "super" in {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}:
            continue
        pos, kws = _forward(fn.args)
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
        if not params:
            continue
        inner_gold = copy.deepcopy(fn)
        inner_gold.name, inner_gold.decorator_list = "_floe_gold", []
        inner_base = copy.deepcopy(inner_gold)
        inner_base.name, inner_base.body = "_floe_base", copy.deepcopy(old.body)
        if ast.dump(old.args) != ast.dump(fn.args):
            continue  # a changed signature: the base body cannot take the gold's arguments
        lits = ast.parse(repr(tuple(values)), mode="eval").body
        # the call is the issue's example: every plain argument is one of its values
        cond = ast.parse(f"all(any(type(_v) is type(_x) and _v == _x for _x in _ISSUE) for _v in ({', '.join(params)},) if type(_v) in (int, float, str))", mode="eval").body
        body = [
            ast.Assign([ast.Name("_ISSUE", ast.Store())], lits),
            inner_gold, inner_base,
            ast.If(cond, [ast.Return(ast.Call(ast.Name("_floe_gold", ast.Load()), pos, kws))], []),
            ast.Return(ast.Call(ast.Name("_floe_base", ast.Load()), copy.deepcopy(pos), copy.deepcopy(kws))),
        ]
        new = copy.deepcopy(fn)
        new.body = body
        ast.fix_missing_locations(new)
        start = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        text = _replace_lines(gold, start, fn.end_lineno, _stmt_text(new, _indent_of(gold, start)))  # type: ignore[arg-type]
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        shown = ", ".join(repr(v) for v in values[:4]) + ("…" if len(values) > 4 else "")
        out.append(Candidate("special_case", f"{path}: `{name}` as the gold patch only when every plain argument is one of the issue's values ({shown}), as before otherwise", path, text))
    return out[:MAX_PER_KIND]


def agent_mistakes(path: str, base: str, gold: str, problem: str = "") -> list[Candidate]:
    """Every family above for one file the gold patch changes."""
    if not path.endswith(".py"):
        return []
    return [*format_specs(path, base, gold), *call_sites(path, base, gold), *branch_drops(path, base, gold),
            *off_by_ones(path, base, gold), *special_cases(path, base, gold, problem)]
