"""The JAX504 fix: rewrites the simple loop shapes — a carry-only loop over ``range`` becomes
``jax.lax.fori_loop``, an append-then-``jnp.stack`` loop becomes ``jax.lax.scan`` — keeping the
body's lines and comments verbatim. :class:`LoopFix` raises :class:`NoFix` (and the finding is
reported without a fix) as soon as a loop leaves those shapes."""
from __future__ import annotations

import ast
import io
import tokenize
from typing import List, Optional, Set, Tuple

from ....analysis import CONTAINER, JAX, Function, proven
from ....fixes.edits import Edit, Fix
from ....fixes.imports import module_alias
from ....fixes.names import fresh_name, names_in_scope
from ...base import Context, FixOffer


def _reads(node: ast.AST) -> List[ast.Name]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def carry_names(body: List[ast.stmt]) -> Tuple[List[str], List[str]]:
    """(carried, temporaries) of a body of simple statements: a carried name is read
    before the body assigns it; a temporary is assigned before any read."""
    assigned: List[str] = []
    carried: List[str] = []
    seen_assigned: Set[str] = set()

    def read(name: str) -> None:
        if name not in seen_assigned and name not in carried:
            carried.append(name)

    for s in body:
        targets: List[ast.expr] = []
        if isinstance(s, ast.Assign):
            values, targets = [s.value], s.targets
        elif isinstance(s, ast.AugAssign):
            values, targets = [s.value], [s.target]
            if isinstance(s.target, ast.Name):
                read(s.target.id)
        elif isinstance(s, ast.Expr):
            values = [s.value]
        else:
            values = [s]
        for v in values:
            for n in _reads(v):
                read(n.id)
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and n.id not in seen_assigned:
                    seen_assigned.add(n.id)
                    assigned.append(n.id)
    carry = [n for n in assigned if n in carried]
    temps = [n for n in assigned if n not in carried]
    return carry, temps


def _comment_spans(src) -> Optional[List[Tuple[int, int]]]:
    """(start, end) offsets of every comment of ``src``; None when it does not tokenize."""
    out: List[Tuple[int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src.text).readline):
            if tok.type == tokenize.COMMENT:
                a = src.offset(tok.start[0], 0) + tok.start[1]
                out.append((a, a + len(tok.string)))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return out


class CommentSpans:
    """The comments of a model's source, tokenized once per file (``model.facts(CommentSpans)``)."""

    def __init__(self, model):
        self.spans = _comment_spans(model.source) if model.source is not None else None


class NoFix(Exception):
    """The loop is not one of the shapes the fix rewrites."""


class LoopFix:
    """Rewrites the simple loop shapes: carry-only ``range`` loops to ``fori_loop``,
    append-then-stack loops to ``scan``."""

    def __init__(self, ctx: Context, fn: Function, loop: ast.For, offer: FixOffer):
        self.ctx = ctx
        self.m = ctx.model
        self.src = ctx.source
        self.fn = fn
        self.loop = loop
        self.offer = offer
        self.edits: List[Edit] = []

    def require(self, cond) -> None:
        if not cond:
            raise NoFix()

    # ------------------------------------------------------------ entry
    def build(self) -> Optional[Fix]:
        loop = self.loop
        self.require(not loop.orelse and not loop.type_comment)
        self.require(isinstance(loop.target, ast.Name))
        self.var = loop.target.id
        body = loop.body
        last = body[-1]
        is_append = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                     and isinstance(last.value.func, ast.Attribute) and last.value.func.attr == "append"
                     and isinstance(last.value.func.value, ast.Name) and len(last.value.args) == 1
                     and not last.value.keywords)
        stmts = body[:-1] if is_append else body
        for s in stmts:
            self.require(isinstance(s, ast.Assign) and all(self._simple_target(t) for t in s.targets)
                         or isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name))
        for s in body:
            for n in ast.walk(s):
                self.require(not isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)))
        carried, temps = carry_names(body)
        self.require(carried and self.var not in carried and self.var not in temps)
        self.carried, self.temps = carried, temps
        if is_append:
            return self._scan(stmts, last)
        return self._fori()

    @staticmethod
    def _simple_target(t: ast.expr) -> bool:
        if isinstance(t, ast.Name):
            return True
        if isinstance(t, ast.Tuple):
            return all(isinstance(e, ast.Name) for e in t.elts)
        return False

    # ---------------------------------------------------------- context
    def _lax(self) -> str:
        local = self.m.imports.local_name_for("jax.lax")
        if local is not None:
            return local
        jax_name, edits = module_alias(self.m, self.src, "jax", "jax")
        self.edits.extend(edits)
        return f"{jax_name}.lax"

    def _jnp(self) -> str:
        name, edits = module_alias(self.m, self.src, "jax.numpy", "jnp")
        self.edits.extend(edits)
        return name

    def _comments(self, start: int, end: int) -> List[Tuple[int, int]]:
        """(start, end) offsets of comments within [start, end)."""
        spans = self.m.facts(CommentSpans).spans if self.m.source is self.src else _comment_spans(self.src)
        self.require(spans is not None)
        return [c for c in spans if start <= c[0] < end]

    def _unused_after(self, names: List[str], after: Tuple[int, int]) -> None:
        """Temporaries and the loop variable vanish: they must not be read after the loop."""
        wanted = set(names)
        for n in self.fn.walk():
            if isinstance(n, ast.Name) and n.id in wanted and isinstance(n.ctx, ast.Load) \
                    and (n.lineno, n.col_offset) > after:
                raise NoFix()
        for child in self.fn.children:   # read by a nested function
            for n in child.walk():
                if isinstance(n, ast.Name) and n.id in wanted:
                    raise NoFix()

    def _carry(self, inner: str, nl: str) -> Tuple[str, str, str, str]:
        """How the body function takes and gives back the carried names: (its parameter, the
        line unpacking it, the carry as one expression, the carry as assignment targets)."""
        names = ", ".join(self.carried)
        if len(self.carried) == 1:
            return names, "", names, names
        return "carry", f"{inner}{names} = carry{nl}", f"({names})", names

    def _range_bounds(self) -> Tuple[str, str, Optional[str]]:
        it = self.loop.iter
        self.require(isinstance(it, ast.Call) and self.m.qualname(it.func, self.fn) == "range"
                     and 1 <= len(it.args) <= 2 and not it.keywords)
        seg = self.src.segment
        if len(it.args) == 1:
            return "0", seg(it.args[0]), None
        return seg(it.args[0]), seg(it.args[1]), seg(it.args[0])

    def _body_text(self, stmts: List[ast.stmt], upto: Optional[int] = None) -> str:
        """The body lines verbatim (with their indentation and comments)."""
        src = self.src
        first = stmts[0]
        self.require(first.lineno > self.loop.lineno)
        start = src.offset(first.lineno, 0)
        if upto is not None:
            return src.text[start:upto]
        last = stmts[-1]
        end = src.offset(last.end_lineno, last.end_col_offset)
        return src.text[start:end]

    def _header_comment(self) -> str:
        """The header line's trailing comment (moved to the new ``def``); no other comment may sit
        in the header or between it and the first body statement."""
        src = self.src
        it = self.loop.iter
        gap_start = src.offset(it.end_lineno, 0) + len(src.line_text(it.end_lineno))
        self.require(not self._comments(gap_start, src.offset(self.loop.body[0].lineno, 0)))
        if it.end_lineno != self.loop.lineno:
            comments = self._comments(src.offset(self.loop.lineno, 0), src.offset(it.end_lineno, it.end_col_offset))
            self.require(not comments)
        line_start = src.offset(it.end_lineno, 0)
        line_end = line_start + len(src.line_text(it.end_lineno))
        cs = self._comments(src.offset(it.end_lineno, it.end_col_offset), line_end)
        if cs:
            a, b = cs[0]
            return "  " + src.text[a:b]
        return ""

    # ------------------------------------------------------------- fori
    def _fori(self) -> Fix:
        src = self.src
        loop = self.loop
        body = loop.body
        lo, hi, _ = self._range_bounds()
        after = (loop.end_lineno, loop.end_col_offset)
        self._unused_after(self.temps + [self.var], after)
        lax = self._lax()
        start = src.offset(loop.lineno, loop.col_offset)
        end = src.offset(loop.end_lineno, loop.end_col_offset)
        carried = self.carried
        single = body[0] if len(body) == 1 else None
        if single is not None and not self._comments(start, end) and len(carried) == 1:
            target = carried[0]
            if isinstance(single, ast.Assign) and len(single.targets) == 1 \
                    and isinstance(single.targets[0], ast.Name) and single.targets[0].id == target:
                value = src.segment(single.value)
            elif isinstance(single, ast.AugAssign) and single.target.id == target:
                op = _AUG_OPS.get(type(single.op))
                self.require(op is not None)
                value = f"{target} {op} ({src.segment(single.value)})"
            else:
                raise NoFix()
            text = f"{target} = {lax}.fori_loop({lo}, {hi}, lambda {self.var}, {target}: {value}, {target})"
            return self.offer.make([Edit(start, end, text)] + self.edits)
        # a nested def
        indent = src.indentation(loop.lineno)
        self.require(src.line_text(loop.lineno)[:src.char_col(loop.lineno, loop.col_offset)].strip() == "")
        inner = src.indentation(body[0].lineno)
        self.require(len(inner) > len(indent))
        nl = src.newline()
        name = fresh_name(names_in_scope(self.m, self.fn), "loop_body", sep="_")
        param, unpack, init, assign = self._carry(inner, nl)
        head = f"def {name}({self.var}, {param}):{self._header_comment()}{nl}"
        ret = f"{inner}return {assign}"
        text = (head + unpack + self._body_text(body) + nl + ret + nl
                + f"{indent}{assign} = {lax}.fori_loop({lo}, {hi}, {name}, {init})")
        return self.offer.make([Edit(start, end, text)] + self.edits)

    # ------------------------------------------------------------- scan
    def _scan(self, stmts: List[ast.stmt], append: ast.Expr) -> Fix:
        src = self.src
        m = self.m
        loop = self.loop
        fn = self.fn
        lst = append.value.func.value.id
        out_expr = append.value.args[0]
        # the statements around the loop: ``ys = []`` before, ``y = jnp.stack(ys)`` after
        siblings = _statement_list(fn, loop)
        self.require(siblings is not None)
        i = next(k for k, s in enumerate(siblings) if s is loop)
        self.require(0 < i < len(siblings) - 1)
        init, after = siblings[i - 1], siblings[i + 1]
        self.require(isinstance(init, ast.Assign) and len(init.targets) == 1
                     and isinstance(init.targets[0], ast.Name) and init.targets[0].id == lst
                     and isinstance(init.value, ast.List) and not init.value.elts)
        stack = after.value if isinstance(after, (ast.Assign, ast.Return)) else None
        self.require(isinstance(stack, ast.Call) and m.qualname(stack.func, fn) == "jax.numpy.stack"
                     and len(stack.args) == 1 and isinstance(stack.args[0], ast.Name) and stack.args[0].id == lst)
        for kw in stack.keywords:
            self.require(kw.arg == "axis" and isinstance(kw.value, ast.Constant) and kw.value.value == 0)
        if isinstance(after, ast.Assign):
            self.require(len(after.targets) == 1)
            result = src.segment(after.targets[0])
            self.require(lst not in {n.id for n in ast.walk(after.targets[0]) if isinstance(n, ast.Name)})
        else:
            result = None
        # the list is used only by the append and the stack
        uses = [n for n in fn.walk() if isinstance(n, ast.Name) and n.id == lst]
        self.require(len(uses) == 3)
        self.require(all(lst not in c.locals and not any(isinstance(n, ast.Name) and n.id == lst for n in c.walk())
                         for c in fn.children))
        self.require(self.var not in self.carried)
        # what the loop iterates over
        it = loop.iter
        var_used = any(isinstance(n, ast.Name) and n.id == self.var for s in loop.body for n in ast.walk(s))
        if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "range":
            lo, hi, lo_given = self._range_bounds()
            if not var_used and lo_given is None:
                xs = f"None, length={hi}"
            else:
                jnp = self._jnp()
                xs = f"{jnp}.arange({lo}, {hi})" if lo_given is not None else f"{jnp}.arange({hi})"
        else:
            k = m.kind(it, fn)
            self.require(proven(k) and k & JAX and not k & CONTAINER)
            xs = src.segment(it)
            self.require("\n" not in xs)
        after_pos = (after.end_lineno, after.end_col_offset)
        self._unused_after(self.temps + [self.var], after_pos)
        lax = self._lax()
        indent = src.indentation(loop.lineno)
        for s in (init, after):
            self.require(src.indentation(s.lineno) == indent)
            self.require(src.line_text(s.lineno)[:src.char_col(s.lineno, s.col_offset)].strip() == "")
        self.require(src.line_text(loop.lineno)[:src.char_col(loop.lineno, loop.col_offset)].strip() == "")
        inner = src.indentation(loop.body[0].lineno)
        self.require(len(inner) > len(indent))
        start = src.offset(init.lineno, init.col_offset)
        end = src.offset(after.end_lineno, after.end_col_offset)
        # comments are kept inside the body; none may sit between the pieces we replace
        self.require(not self._comments(start, src.offset(loop.lineno, 0)))
        a_start = src.offset(append.lineno, append.col_offset)
        a_end = src.offset(append.end_lineno, append.end_col_offset)
        self.require(not self._comments(a_start, a_end))
        self.require(not self._comments(a_end, end) or
                     all(c[0] < src.offset(append.end_lineno + 1, 0) for c in self._comments(a_end, end)))
        nl = src.newline()
        name = fresh_name(names_in_scope(m, fn), "scan_body", sep="_")
        param, unpack, carry_out, _ = self._carry(inner, nl)
        head = f"def {name}({param}, {self.var}):{self._header_comment()}{nl}"
        body_text = ""
        if stmts:
            body_text = self._body_text(loop.body, upto=src.offset(append.lineno, 0))
        # the append line becomes the return (its trailing comment kept)
        line_end = src.offset(append.end_lineno, 0) + len(src.line_text(append.end_lineno))
        tail = src.text[a_end:min(line_end, end)]
        ret = f"{inner}return {carry_out}, {src.segment(out_expr)}{tail}"
        call = f"{lax}.scan({name}, {carry_out}, {xs})"
        if result is not None:
            final = f"{indent}{carry_out}, {result} = {call}"
        else:
            final = f"{indent}return {call}[1]"
        text = head + unpack + body_text + ret + nl + final
        # the init statement starts at its column; the replacement starts with the def
        return self.offer.make([Edit(start, end, text)] + self.edits)


_AUG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
            ast.FloorDiv: "//", ast.Mod: "%"}


def _statement_list(fn: Function, target: ast.stmt) -> Optional[List[ast.stmt]]:
    """The statement list (a body/orelse/finalbody of ``fn``) that holds ``target``."""
    roots = [fn.node]
    while roots:
        node = roots.pop()
        for field in ("body", "orelse", "finalbody", "handlers"):
            lst = getattr(node, field, None)
            if not isinstance(lst, list):
                continue
            for s in lst:
                if s is target:
                    return lst
            for s in lst:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                if isinstance(s, ast.AST) and (s.lineno <= target.lineno <= (s.end_lineno or s.lineno)):
                    roots.append(s)
    return None
