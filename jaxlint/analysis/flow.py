"""Straight-line rebinding: which assignment a load of a name sees.

Value kinds are flow-insensitive: a name's kind joins every binding of it in
its scope.  That is wrong in one common, easy case -- a name rebound in the
straight-line code of a function::

    x = jax.tree_util.tree_structure(x)   # x was a traced pytree, now a PyTreeDef
    if x == y: ...                         # a Python comparison

    group = int(length / m)                # a Python int ...
    if group % offset: ...                 # ... here
    for group in jnp.split(inputs, n):     # ... an array only from here on

A load sees exactly one binding when the nearest binding before it is a plain
``name = value`` statement in the function's own top-level block, no binding of
the name lies between the two, and no loop around the load rebinds the name
(a later binding would reach the load through the loop's back edge).  The
kind of such a load is the kind of that value.  Everything else keeps the
flow-insensitive answer.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from . import knowledge as K
from .scopes import _CHILD_FIELDS, _LEAVES, Function, _child_fields

# attributes that are Python values on any array
_STATIC_ATTRS = frozenset({"shape", "ndim", "size", "dtype"})

_LOOPS = frozenset({ast.For, ast.AsyncFor, ast.While})
_DEFS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
# the statements that bind names, and the fields holding their targets
_TARGETS = {ast.Assign: ("targets",), ast.AugAssign: ("target",), ast.AnnAssign: ("target",),
            ast.For: ("target",), ast.AsyncFor: ("target",), ast.Delete: ("targets",),
            ast.With: ("items",), ast.AsyncWith: ("items",)}
# Python 3.12: ``type X = ...`` binds X (its ``name`` field, which the child-field tables skip)
_TYPE_ALIAS = getattr(ast, "TypeAlias", None)
# the fields of compound statements that hold statements (or clauses holding them)
_BODIES = {t: tuple(f for f in ("body", "orelse", "finalbody", "handlers", "cases") if f in t._fields)
           for t in (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                     getattr(ast, "TryStar", ast.Try), getattr(ast, "Match", ast.Try))}
_CLAUSES = frozenset({ast.ExceptHandler, getattr(ast, "match_case", ast.ExceptHandler)})
# scopes of their own inside an expression
_NESTED = frozenset({ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp})


def _parallel(stmt: ast.stmt) -> bool:
    """``a, b = x, y``: one tuple target, a tuple value of the same length, nothing starred --
    each name gets its own element, as if bound by ``a = x`` and ``b = y``."""
    if stmt.__class__ is not ast.Assign or len(stmt.targets) != 1:
        return False
    t, v = stmt.targets[0], stmt.value
    return t.__class__ in (ast.Tuple, ast.List) and v.__class__ in (ast.Tuple, ast.List) \
        and len(t.elts) == len(v.elts) and not any(e.__class__ is ast.Starred for e in t.elts + v.elts)


def _nested_entry(stmt: ast.stmt, block: list) -> tuple:
    """The entry of a statement of a nested block (a branch, a loop or ``with`` body): a plain
    ``name = value`` there reaches the loads after it up to the end of its block (the block's end
    position in place of the top-level flag); anything else is no plain assign."""
    end = (stmt.end_lineno, stmt.end_col_offset)
    single = stmt.__class__ is ast.Assign and len(stmt.targets) == 1 and stmt.targets[0].__class__ is ast.Name
    if single or _parallel(stmt):
        last = block[-1]
        return end, (last.end_lineno, last.end_col_offset), stmt.value if single else None
    return end, False, None


class _Rebinding:
    """The bindings of the names a function binds more than once."""

    __slots__ = ("stores", "loops", "_statements_only")

    def __init__(self, fn: Function):
        # name -> [(end position of the binding statement, is a top-level plain assign, value)]
        self.stores: Dict[str, List[Tuple[Tuple[int, int], bool, Optional[ast.expr]]]] = {}
        # loops of the function: (start, end, names bound inside)
        self.loops: List[Tuple[Tuple[int, int], Tuple[int, int], set]] = []
        body = getattr(fn.node, "body", None)
        if not isinstance(body, list):
            return
        stores: Dict[str, list] = {p: [((0, 0), False, None)] for p in fn.param_nodes}
        # without an assignment expression (none among the nodes the index gave the function, a
        # superset of those walked here) a name is bound only by a statement's targets: the
        # statements and their targets are walked, not every expression
        self._statements_only = not fn.nodes.get(ast.NamedExpr)
        for stmt in body:
            top = stmt.__class__ is ast.Assign and len(stmt.targets) == 1 \
                and stmt.targets[0].__class__ is ast.Name
            self._statement(stmt, ((stmt.end_lineno, stmt.end_col_offset), top or _parallel(stmt),
                                   stmt.value if top else None), stores, ())
        self.stores = {n: sorted(v, key=lambda t: t[0]) for n, v in stores.items() if len(v) > 1}

    # Each binding of a name is recorded with its statement's entry: (end position of the
    # innermost statement around it, is a top-level plain assign, value).  Only a top-level
    # statement can be a plain assign, so two bindings of one name in statements that end at
    # the same place have equal entries, and the order of the walk does not matter.
    def _statement(self, s: ast.stmt, entry: tuple, stores: Dict[str, list], loops: tuple) -> None:
        t = s.__class__
        if t in _DEFS:
            # its name is a binding of this function; its body is not
            stores.setdefault(s.name, []).append(entry)
            for names in loops:
                names.add(s.name)
            return
        if t in _LOOPS:
            names: set = set()
            self.loops.append(((s.lineno, s.col_offset), (s.end_lineno, s.end_col_offset), names))
            loops = loops + (names,)
        elif t is _TYPE_ALIAS:
            self._target(s.name, entry, stores, loops)
        if not self._statements_only:
            self._walk(s, entry, stores, loops)
            return
        if entry[1] and entry[2] is None and _parallel(s):
            # ``a, b = x, y``: each name reaches its loads with its own element
            for target, value in zip(s.targets[0].elts, s.value.elts):
                if target.__class__ is ast.Name:
                    stores.setdefault(target.id, []).append((entry[0], entry[1], value))
                    for names in loops:
                        names.add(target.id)
                else:
                    self._target(target, (entry[0], False, None), stores, loops)
            return
        targets = _TARGETS.get(t)
        if targets is not None:
            for field in targets:
                v = getattr(s, field)
                if field == "items":    # with-items
                    v = [item.optional_vars for item in v if item.optional_vars is not None]
                elif v.__class__ is not list:
                    v = () if v is None else (v,)
                for target in v:
                    self._target(target, entry, stores, loops)
        for field in _BODIES.get(t, ()):
            block = getattr(s, field)
            for child in block:
                if child.__class__ in _CLAUSES:     # an except handler, a match case: their bodies
                    for c in child.body:
                        self._statement(c, _nested_entry(c, child.body), stores, loops)
                else:
                    self._statement(child, _nested_entry(child, block), stores, loops)

    @staticmethod
    def _target(target: ast.expr, entry: tuple, stores: Dict[str, list], loops: tuple) -> None:
        """The names an assignment target binds (the names in an attribute or subscript target
        are read, and only an assignment expression could bind one there)."""
        todo = [target]
        while todo:
            n = todo.pop()
            t = n.__class__
            if t is ast.Name:
                stores.setdefault(n.id, []).append(entry)
                for names in loops:
                    names.add(n.id)
            elif t is ast.Tuple or t is ast.List:
                todo.extend(n.elts)
            elif t is ast.Starred:
                todo.append(n.value)

    def _walk(self, root: ast.AST, entry: tuple, stores: Dict[str, list], loops: tuple) -> None:
        """The bindings below ``root`` (its own children first): nested statements get their own
        entry, nested scopes (lambdas, comprehensions) bind nothing here."""
        fields_of = _CHILD_FIELDS
        leaves = _LEAVES
        Name, Load, stmt_type = ast.Name, ast.Load, ast.stmt
        stack = [root]
        pop, push = stack.pop, stack.append
        first = True
        while stack:
            n = pop()
            t = n.__class__
            if first:
                first = False
            elif t is Name:
                if n.ctx.__class__ is not Load:
                    stores.setdefault(n.id, []).append(entry)
                    for names in loops:
                        names.add(n.id)
                continue
            elif t in _NESTED:
                continue
            elif isinstance(n, stmt_type):
                self._statement(n, ((n.end_lineno, n.end_col_offset), False, None), stores, loops)
                continue
            fields = fields_of.get(t)
            if fields is None:
                fields = _child_fields(t)
            for field in fields:
                v = getattr(n, field, None)
                if v.__class__ is list:
                    for x in v:
                        if x.__class__ not in leaves:
                            push(x)
                elif v.__class__ not in leaves:
                    push(v)


class FlowMixin:
    def loop_counter(self, loop: ast.AST, scope: Function) -> Optional[str]:
        """The counter a ``for`` loop binds: ``i`` of ``for i in range(...)``, the index of ``for
        i, x in enumerate(...)`` -- a new value every iteration, never repeated."""
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call):
            return None
        q = self.qualname(loop.iter.func, scope)
        if q == "range" and isinstance(loop.target, ast.Name):
            return loop.target.id
        if q == "enumerate" and isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2 and \
                isinstance(loop.target.elts[0], ast.Name):
            return loop.target.elts[0].id
        return None

    def _rebinding(self, fn: Function) -> _Rebinding:
        cache = getattr(self, "_rebinding_cache", None)
        if cache is None:
            cache = self._rebinding_cache = {}
        rb = cache.get(id(fn))
        if rb is None:
            rb = cache[id(fn)] = _Rebinding(fn)
        return rb

    def sees_parameter(self, e: ast.Name, fn: Function) -> bool:
        """The load ``e`` of a parameter of ``fn`` comes before every rebinding of it, and
        no loop around the load rebinds it: it sees the argument itself."""
        rb = self._rebinding(fn)
        stores = rb.stores.get(e.id)
        if not stores or stores[0][0] != (0, 0) or e.id not in fn.param_nodes:
            return False
        at = (e.lineno, e.col_offset)
        if stores[1][0] <= at:
            return False
        return not any(start <= at <= stop and e.id in names for start, stop, names in rb.loops)

    def reaching_value(self, e: ast.Name, fn: Function) -> Optional[ast.expr]:
        """The value of the one straight-line assignment the load ``e`` (in ``fn``)
        sees, when the name is bound more than once in ``fn``; else None."""
        rb = self._rebinding(fn)
        stores = rb.stores.get(e.id)
        if not stores:
            return None
        at = (e.lineno, e.col_offset)
        before = [s for s in stores if s[0] <= at]
        if not before:
            return None
        end, top, value = before[-1]
        if not top or value is None:
            return None
        if top is not True and at > top:
            return None   # a binding in a branch that ended before this load: others may reach it
        for start, stop, names in rb.loops:
            if start <= at <= stop and e.id in names:
                if top is not True and end >= start:
                    continue  # bound earlier in this block, inside this loop: every iteration binds it first
                return None   # a binding later in the loop reaches this load again
        return value

    # ------------------------------------------------ static whatever the arguments
    def static_regardless(self, e: Optional[ast.AST], fn: Function, _depth: int = 0) -> bool:
        """``e`` (in ``fn``) is a Python value whatever ``fn``'s arguments are: a
        constant, a ``.shape``/``.ndim``/``.size``/``.dtype`` (or an item of one), a
        static-result call, arithmetic or a tuple of such, or a local name every
        binding of which is one (``t = x.shape[1]``, ``n, h, w, c = x.shape``)."""
        if e is None or _depth > 6:
            return False
        t = e.__class__
        if t is ast.Constant or t is ast.JoinedStr:
            return True
        if t is ast.Attribute:
            return e.attr in _STATIC_ATTRS
        if t is ast.Subscript:
            return self.static_regardless(e.value, fn, _depth + 1)
        if t is ast.BinOp:
            return self.static_regardless(e.left, fn, _depth + 1) and self.static_regardless(e.right, fn, _depth + 1)
        if t is ast.UnaryOp:
            return self.static_regardless(e.operand, fn, _depth + 1)
        if t is ast.Tuple or t is ast.List:
            return all(self.static_regardless(x, fn, _depth + 1) for x in e.elts)
        if t is ast.Call:
            q = self.qualname(e.func, fn) if e.func.__class__ in (ast.Name, ast.Attribute) else None
            return q in ("len", "int") or (q in K.STATIC_RESULT_CALLS and q not in ("float", "bool", "complex"))
        if t is ast.Name:
            if e.id in fn.param_nodes or e.id not in fn.locals:
                return False
            found = False
            for target, value, mode in self.binding_table(fn).entries:
                if target.__class__ is ast.Name:
                    if target.id != e.id:
                        continue
                elif not any(n.__class__ is ast.Name and n.id == e.id for n in ast.walk(target)):
                    continue
                if mode not in ("=", "ann") or value is None or not self.static_regardless(value, fn, _depth + 1):
                    return False
                found = True
            return found
        return False

    def static_result(self, fn: Function) -> bool:
        """Every ``return`` of ``fn`` gives a Python value whatever its arguments (a shape, a
        count): its calls are static.  (A generator or a function without ``return`` is not.)"""
        memo = self._memo("_static_result_cache")
        got = memo.get(id(fn))
        if got is None:
            rets = fn.of_type(ast.Return) if not fn.is_lambda else []
            got = bool(rets) and not fn.of_type(ast.Yield, ast.YieldFrom) \
                and all(r.value is not None and r.value.__class__ is not ast.Tuple
                        and self.static_regardless(r.value, fn) for r in rets)
            memo[id(fn)] = got
        return got

    def static_return_items(self, fn: Function) -> Optional[Tuple[int, List[int]]]:
        """``(n, indices)`` when every ``return`` of ``fn`` is a tuple of ``n`` items:
        the items that are Python values whatever the arguments (``return x, x.shape[1]``)."""
        rets = [r.value for r in fn.of_type(ast.Return)]
        if not rets or any(r.__class__ is not ast.Tuple or any(x.__class__ is ast.Starred for x in r.elts)
                           for r in rets):
            return None
        n = len(rets[0].elts)
        if any(len(r.elts) != n for r in rets):
            return None
        idx = [i for i in range(n) if all(self.static_regardless(r.elts[i], fn) for r in rets)]
        return (n, idx) if idx else None


def export_static_results(model) -> Dict[str, bool]:
    """Exporter: for other modules, the top-level functions whose every ``return`` is a Python
    value whatever the arguments (``def first_dim(t): return jax.tree.leaves(t)[0].shape[0]``)."""
    out: Dict[str, bool] = {}
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module or fn.cls is not None:
            continue
        if model.static_result(fn) and model.top_level_function(fn.name) is fn:
            out[fn.name] = True
    return out


def export_static_items(model) -> Dict[str, list]:
    """Exporter: for other modules, which returned tuple items of each top-level
    function are Python values whatever it is called with."""
    out: Dict[str, list] = {}
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module or fn.cls is not None:
            continue
        rets = fn.of_type(ast.Return)
        if not rets or any(r.value.__class__ is not ast.Tuple for r in rets):
            continue   # (the cheap test first: most functions return no tuple)
        if model.top_level_function(fn.name) is not fn:
            continue
        got = model.static_return_items(fn)
        if got is not None:
            out[fn.name] = [got[0], got[1]]
    return out
