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
- ``guard``: an ``if`` the gold patch wrote on a collection's truth (``if rest:``) made a length
  test off by one (``len(rest) > 1``), and a bound it compares with ±1;
- ``unused_parameter``: a parameter of a function the gold patch wrote that its body leaves
  unused (``self`` in a key function) passed on to the call the body makes, as an agent that
  copies the signature through would;
- ``string_number``: a number inside a string literal the gold patch wrote (a regex bound
  ``{1,6}``, a width in ``"%05d"``), ±1, and a regex repetition ``{m,n}`` it wrote opened to
  ``+`` (the bound guessed, or left out);
- ``shared_helper``: the gold patch changes a module-level function several functions use (a
  decorator of six comparison methods, a helper called from three places): its fix at one user
  only (the others on the old version), or everywhere but one user;
- ``hash_shortcut``: a yes/no answer the gold patch computes from ``groupby`` runs (are all the
  items equal?) computed from a set of the items instead, which fails on unhashable ones.

Left out, measured: the changed function behaving as the gold patch only when every plain
argument is a value the issue's text names (the issue's example special-cased). On the toy
suite it found 2 more loose tasks and flagged 12 of the 44 sound ones, whose hidden tests check
exactly the issue's example (docs/results.md, Data audit).
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


def _tree(text: str) -> ast.Module | None:
    """The module's syntax tree, or None where the text does not parse."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _parses(text: str) -> bool:
    """Whether a candidate's text is still Python (an edit that breaks it is no candidate)."""
    return _tree(text) is not None


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
    tree = _tree(gold)
    if tree is None:
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
    tree = _tree(gold)
    if tree is None:
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
            if not _parses(text):
                continue
            out.append(Candidate("branch_drop", f"{path}:{node.lineno}: the gold `if` with {what}", path, text))
    return out[:MAX_PER_KIND]


# ---------- off by one, rounding ----------

def off_by_ones(path: str, base: str, gold: str) -> list[Candidate]:
    tree = _tree(gold)
    if tree is None:
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


# ---------- guards ----------

def guards(path: str, base: str, gold: str) -> list[Candidate]:
    tree = _tree(gold)
    if tree is None:
        return []
    lines = changed_gold_lines(base, gold)
    out: list[Candidate] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.If, ast.While)) or node.test.lineno not in lines or node.test.lineno != node.test.end_lineno:
            continue
        t = node.test
        forms: list[tuple[str, ast.expr]] = []
        if isinstance(t, (ast.Name, ast.Attribute, ast.Subscript)):
            forms.append((f"`{ast.unparse(t)}` as `len(…) > 1`", ast.Compare(ast.Call(ast.Name("len", ast.Load()), [copy.deepcopy(t)], []), [ast.Gt()], [ast.Constant(1)])))
        elif isinstance(t, ast.Compare) and len(t.comparators) == 1 and isinstance(t.comparators[0], ast.Constant) \
                and isinstance(t.comparators[0].value, int) and not isinstance(t.comparators[0].value, bool):
            for d in (1, -1):
                new = copy.deepcopy(t)
                new.comparators = [ast.Constant(t.comparators[0].value + d)]
                forms.append((f"bound {t.comparators[0].value} {'+' if d > 0 else '-'} 1", new))
        line = _lines(gold, True)[t.lineno - 1]
        b = line.encode()
        for what, new_test in forms:
            new_line = (b[:t.col_offset] + ast.unparse(new_test).encode() + b[t.end_col_offset:]).decode()
            glines = _lines(gold, True)
            text = "".join(glines[:t.lineno - 1] + [new_line] + glines[t.lineno:])
            if not _parses(text):
                continue
            out.append(Candidate("guard", f"{path}:{t.lineno}: the condition `{ast.unparse(t)}`: {what} (`{ast.unparse(new_test)}`)", path, text))
    return out[:MAX_PER_KIND]


# ---------- a parameter the body leaves unused, passed on ----------

def unused_parameters(path: str, base: str, gold: str) -> list[Candidate]:
    tree = _tree(gold)
    if tree is None:
        return []
    lines = changed_gold_lines(base, gold)
    out: list[Candidate] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not set(range(fn.lineno, fn.end_lineno + 1)) & lines:  # type: ignore[operator]
            continue
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        unused = [p for p in params if p not in used]
        calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and c.lineno in lines and c.lineno == c.end_lineno]
        for p in unused[:2]:
            for c in calls[:3]:
                new = copy.deepcopy(c)
                new.args = [ast.Name(p, ast.Load()), *new.args]
                line = _lines(gold, True)[c.lineno - 1]
                b = line.encode()
                new_line = (b[:c.col_offset] + ast.unparse(new).encode() + b[c.end_col_offset:]).decode()
                glines = _lines(gold, True)
                text = "".join(glines[:c.lineno - 1] + [new_line] + glines[c.lineno:])
                if not _parses(text):
                    continue
                out.append(Candidate("unused_parameter", f"{path}:{c.lineno}: `{p}`, unused in `{fn.name}`, passed on (`{ast.unparse(new)}`)", path, text))
    return out[:MAX_PER_KIND]


# ---------- numbers inside the strings the gold patch wrote ----------

REPEAT = re.compile(r"\{\d+(,\d*)?\}")


def string_numbers(path: str, base: str, gold: str) -> list[Candidate]:
    tree = _tree(gold)
    if tree is None:
        return []
    changed = changed_gold_lines(base, gold)
    gold_lines = _lines(gold, True)
    base_strings = {n.value for n in ast.walk(ast.parse(base)) if isinstance(n, ast.Constant) and isinstance(n.value, str)} if base else set()
    in_fstring = {id(c) for j in ast.walk(tree) if isinstance(j, ast.JoinedStr) for c in ast.walk(j)}  # format_specs' part
    out: list[Candidate] = []
    for node in ast.walk(tree):
        if id(node) in in_fstring:
            continue
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno == node.end_lineno and node.lineno in changed):
            continue
        if node.value in base_strings or not re.search(r"\d", node.value):
            continue
        line = gold_lines[node.lineno - 1]
        seg = line.encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
        variants: list[tuple[str, str]] = []
        for m in re.finditer(r"\d+", seg):
            n = int(m.group())
            for d in (1, -1):
                if n + d >= 0:
                    variants.append((f"`{m.group()}` {'+' if d > 0 else '-'} 1", seg[:m.start()] + str(n + d) + seg[m.end():]))
        for m in REPEAT.finditer(seg):
            variants.append((f"`{m.group()}` opened to `+`", seg[:m.start()] + "+" + seg[m.end():]))
        for what, new_seg in variants:
            b = line.encode()
            new_line = (b[:node.col_offset] + new_seg.encode() + b[node.end_col_offset:]).decode()
            if not _parses(new_seg):
                continue
            text = "".join(gold_lines[:node.lineno - 1] + [new_line] + gold_lines[node.lineno:])
            out.append(Candidate("string_number", f"{path}:{node.lineno}: in the string {seg}, {what} ({new_seg})", path, text))
    return out[:MAX_PER_KIND]



# ---------- a shared helper's fix at one of its users ----------

MAX_USERS = 8


def _span(node: ast.AST) -> tuple[int, int]:
    """First and last line of a definition, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def _users(tree: ast.Module, name: str, helper: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, list[int]]]:
    """The functions and methods that use module-level function ``name``: decorated by it
    (``@name``, ``@name(…)``) or calling it, outside the helper itself; each with its qualified
    name and the lines where the name is used."""
    inside = {id(n) for n in ast.walk(helper)}
    out: list = []

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(node) not in inside:
                used = [n.lineno for d in node.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name) and n.id == name]
                used += [n.func.lineno for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name]
                if used:
                    out.append((prefix + node.name, node, sorted(set(used))))

    visit(tree.body, "")
    return out


def shared_helpers(path: str, base: str, gold: str) -> list[Candidate]:
    """The gold patch changes a module-level function that several functions or methods use
    (a decorator on six comparison methods, a helper called from three places); an agent fixes
    the symptom where the issue shows it: the gold version of the helper serves one user only
    (a copy of it, ``<helper>__fixed``, decorating or called by that user) while the others keep
    the old helper; and the converse, every user fixed but one."""
    tree, base_tree = _tree(gold), _tree(base) if base else None
    if tree is None or base_tree is None:
        return []
    lines = changed_gold_lines(base, gold)
    glines = _lines(gold, True)
    blines = _lines(base, True)
    base_defs = {n.name: n for n in base_tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: list[Candidate] = []
    for helper in tree.body:
        if not isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)) or helper.name not in base_defs:
            continue
        g1, g2 = _span(helper)
        if not lines & set(range(g1, g2 + 1)):
            continue
        users = _users(tree, helper.name, helper)
        if len(users) < 2:
            continue
        b1, b2 = _span(base_defs[helper.name])
        old_text, new_text = blines[b1 - 1:b2], glines[g1 - 1:g2]
        if old_text == new_text:
            continue
        name_re = re.compile(r"\b%s\b" % re.escape(helper.name))

        def renamed(text: list[str], to: str) -> list[str]:
            head = [ln for ln in text]
            for k, ln in enumerate(head):
                if re.match(r"\s*(async\s+)?def\s+%s\b" % re.escape(helper.name), ln):
                    head[k] = re.sub(r"def\s+%s\b" % re.escape(helper.name), "def " + to, ln, count=1)
                    break
            return head

        for only in (True, False):
            copy_name = helper.name + ("__fixed" if only else "__old")
            for qual, _node, used in users[:MAX_USERS]:
                text = list(glines)
                for ln in used:  # this user's uses point at the copy
                    text[ln - 1] = name_re.sub(copy_name, text[ln - 1])
                if only:  # the helper as it was, the gold helper as the copy
                    block = old_text + ["\n", "\n"] + renamed(new_text, copy_name)
                else:  # the gold helper, the old one as the copy
                    block = new_text + ["\n", "\n"] + renamed(old_text, copy_name)
                if block and not block[-1].endswith("\n"):
                    block[-1] += "\n"
                text[g1 - 1:g2] = block
                cand = "".join(text)
                if not _parses(cand):
                    continue
                what = f"at `{qual}` only" if only else f"everywhere but `{qual}`"
                out.append(Candidate("shared_helper", f"{path}: the gold change to `{helper.name}` (used by {len(users)}) {what}", path, cand))
    return out[:MAX_PER_KIND]



def siblings(files: dict[str, dict[str, str]]) -> dict[str, list[list[str]]]:
    """By file, the groups of functions and methods (``name``, ``Class.name``) one decorator
    serves, for each module-level decorator the gold patch changed: diffcheck.py replays a
    call of one member on the others with the same arguments (the tests may call ``==`` only,
    while the fix is for ``<`` too). Computed from the gold file: the same in every tree."""
    out: dict[str, list[list[str]]] = {}
    for path, t in files.items():
        tree = _tree(t["gold"]) if path.endswith(".py") else None
        if tree is None:
            continue
        lines = changed_gold_lines(t.get("base") or "", t["gold"])
        for helper in tree.body:
            if not isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            g1, g2 = _span(helper)
            if not lines & set(range(g1, g2 + 1)):
                continue
            decorated: dict[str, list[str]] = {}
            for qual, node, _used in _users(tree, helper.name, helper):
                if any(isinstance(n, ast.Name) and n.id == helper.name for d in node.decorator_list for n in ast.walk(d)):
                    decorated.setdefault(qual.rpartition(".")[0], []).append(qual)
            out.setdefault(path, []).extend(g for g in decorated.values() if len(g) >= 2)
    return {k: v for k, v in out.items() if v}



# ---------- equality by hashing ----------

def _is_groupby(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (isinstance(node.func, ast.Name) and node.func.id == "groupby"
                                            or isinstance(node.func, ast.Attribute) and node.func.attr == "groupby")


def hash_shortcuts(path: str, base: str, gold: str) -> list[Candidate]:
    """A yes/no answer the gold patch computes from the runs of equal items (``groupby``: are
    all the items equal?) computed by hashing instead, the shortcut agents write: the set of the
    items (of their keys, when a key is given) has at most one member. It agrees on hashable
    items and fails on unhashable ones (lists), which the runs never hash."""
    tree = _tree(gold)
    if tree is None:
        return []
    lines = changed_gold_lines(base, gold)
    out: list[Candidate] = []
    for stmt in ast.walk(tree):
        if not isinstance(stmt, (ast.Return, ast.Assign)) or stmt.value is None:
            continue
        if not set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)) <= lines:
            continue
        if not isinstance(stmt.value, (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            continue
        calls = [n for n in ast.walk(stmt.value) if _is_groupby(n)]
        if len(calls) != 1 or not calls[0].args or len(calls[0].args) > 2:
            continue
        items = calls[0].args[0]
        key = calls[0].args[1] if len(calls[0].args) == 2 else next((k.value for k in calls[0].keywords if k.arg == "key"), None)
        plain = ast.Call(ast.Name("set", ast.Load()), [copy.deepcopy(items)], [])
        if key is None or isinstance(key, ast.Constant) and key.value is None:
            distinct: ast.expr = plain
        else:
            keyed = ast.Call(ast.Name("set", ast.Load()), [ast.Call(ast.Name("map", ast.Load()), [copy.deepcopy(key), copy.deepcopy(items)], [])], [])
            distinct = keyed if not isinstance(key, ast.Name) else ast.IfExp(ast.Compare(copy.deepcopy(key), [ast.IsNot()], [ast.Constant(None)]), keyed, plain)
        value = ast.Compare(ast.Call(ast.Name("len", ast.Load()), [distinct], []), [ast.LtE()], [ast.Constant(1)])
        new = copy.deepcopy(stmt)
        new.value = value
        text = _replace_lines(gold, stmt.lineno, stmt.end_lineno, _stmt_text(ast.fix_missing_locations(new), _indent_of(gold, stmt.lineno)))  # type: ignore[arg-type]
        if _parses(text):
            out.append(Candidate("hash_shortcut", f"{path}:{stmt.lineno}: `{ast.unparse(stmt.value)}` computed by hashing (`{ast.unparse(value)}`)", path, text))
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


def agent_mistakes(path: str, base: str, gold: str) -> list[Candidate]:
    """Every family above for one file the gold patch changes."""
    if not path.endswith(".py"):
        return []
    return [*format_specs(path, base, gold), *call_sites(path, base, gold), *branch_drops(path, base, gold),
            *off_by_ones(path, base, gold), *string_numbers(path, base, gold), *guards(path, base, gold),
            *unused_parameters(path, base, gold), *shared_helpers(path, base, gold),
            *hash_shortcuts(path, base, gold)]
