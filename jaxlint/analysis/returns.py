"""Returned parameters: which items of a function's returned tuple are one of its parameters,
handed back unchanged (``return loss, weight``).

For another module's caller, such an item is exactly what the call passed for that parameter --
or, when the call passes nothing, the parameter's literal default (or what a configuration
system such as gin binds in its place): a Python value.  ``reconstruction(gt, pred)`` returns
``(loss, weight)`` with ``weight: float = 1.0`` left to gin; the caller's ``if weight != 0.0:``
branches on a Python float, not on a tracer.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional


def returned_params(fn) -> Optional[Dict[int, str]]:
    """``{item index: parameter}`` for the items every ``return`` of ``fn`` (a tuple of one
    length) fills with the same parameter, never rebound in ``fn`` and with a literal default;
    None when there are none."""
    rets = fn.of_type(ast.Return)
    if not rets or any(r.value.__class__ is not ast.Tuple for r in rets):
        return None
    elts = [r.value.elts for r in rets]
    n = len(elts[0])
    if any(len(e) != n or any(x.__class__ is ast.Starred for x in e) for e in elts):
        return None
    stored = {t.id for a in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign)
              for t in (a.targets if a.__class__ is ast.Assign else [a.target]) for t in ast.walk(t)
              if t.__class__ is ast.Name}
    out: Dict[int, str] = {}
    for i in range(n):
        names = {e[i].id for e in elts if e[i].__class__ is ast.Name}
        if len(names) != 1 or any(e[i].__class__ is not ast.Name for e in elts):
            continue
        p = names.pop()
        d = fn.defaults.get(p)
        if p in fn.param_nodes and p not in stored and d is not None and d.__class__ is ast.Constant:
            out[i] = p
    return out or None


def top_level_functions(model):
    """The module's top-level functions (not methods, nested functions or lambdas), each the one
    its name resolves to: what an exporter describes for other modules."""
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module or fn.cls is not None:
            continue
        if model.top_level_function(fn.name) is fn:
            yield fn


def export_returned_params(model) -> Dict[str, list]:
    """Exporter: for other modules, ``[n, {index: parameter}]`` of each top-level function
    that returns some of its parameters unchanged (``returned_params``)."""
    out: Dict[str, list] = {}
    for fn in top_level_functions(model):
        got = returned_params(fn)
        if got:
            n = len(fn.of_type(ast.Return)[0].value.elts)
            out[fn.name] = [n, {str(i): p for i, p in got.items()}]
    return out


# calls whose result says nothing of their argument's value (its identity, its length, its type)
_OPAQUE_BUILTINS = frozenset({"id", "len", "isinstance", "issubclass", "type", "hash", "callable", "hasattr",
                              "repr", "str"})
_SHAPE_ATTRS = frozenset({"shape", "dtype", "ndim", "size"})


def flowing_params(fn) -> Optional[List[str]]:
    """The parameters of ``fn`` whose value may reach what it returns, through its local
    assignments (a data-flow over names): a parameter used only as a key (``table[key]``,
    ``store.get(id(obj))``), for its identity, length, type or shape does not.  None when that
    cannot be told: ``*args``/``**kwargs``, a generator, a returned nested function (a closure
    carries whatever it reads), ``global``/``nonlocal`` state."""
    if fn.vararg or fn.kwarg or fn.of_type(ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal):
        return None
    rets = [r.value for r in fn.of_type(ast.Return) if r.value is not None]
    params = [p for p in fn.all_params() if p != fn.self_name]
    if not rets or not params:
        return None
    if not fn.of_type(ast.Subscript) and not any(
            c.func.__class__ is ast.Name and c.func.id in _OPAQUE_BUILTINS for c in fn.of_type(ast.Call)) \
            and not _mentions_shape(fn):
        return None     # (no use that keeps a value from flowing: every read parameter may reach the result)
    nested = set(fn.defs)

    def reads(e) -> Optional[set]:
        """The names ``e`` reads for its value (opaque uses left out); None: a nested def."""
        out: set = set()
        todo = [e]
        while todo:
            n = todo.pop()
            t = n.__class__
            if t is ast.Name:
                if n.id in nested:
                    return None
                out.add(n.id)
            elif t is ast.Call and n.func.__class__ is ast.Name and n.func.id in _OPAQUE_BUILTINS:
                continue
            elif t is ast.Attribute and n.attr in _SHAPE_ATTRS:
                continue
            elif t is ast.Subscript:
                todo.append(n.value)        # ``table[key]``: the table's item, not the key
            elif t is not ast.Constant:
                todo.extend(ast.iter_child_nodes(n))
        return out

    # what each name bound here reads, once per binding
    edges: Dict[str, set] = {}
    for a in fn.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.withitem, ast.NamedExpr):
        if a.__class__ is ast.Assign:
            targets, value = a.targets, a.value
        elif a.__class__ is ast.For:
            targets, value = [a.target], a.iter
        elif a.__class__ is ast.withitem:
            targets, value = ([a.optional_vars] if a.optional_vars is not None else []), a.context_expr
        else:
            targets, value = [a.target], a.value
        if value is None:
            continue
        got = reads(value)
        if got is None:
            return None
        for t in targets:
            for x in ast.walk(t):
                if x.__class__ is ast.Name:
                    edges.setdefault(x.id, set()).update(got)
    # the names the returns reach, through the bindings
    seen: set = set()
    todo: List[str] = []
    for r in rets:
        got = reads(r)
        if got is None:
            return None
        todo.extend(got)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(edges.get(n, ()))
    return [p for p in params if p in seen]


def _reads_any(fn, names) -> bool:
    """Does ``fn``'s own code load one of ``names``?"""
    names = set(names)
    for n in fn.walk():
        if n.__class__ is ast.Name and n.id in names and n.ctx.__class__ is ast.Load:
            return True
    return False


def _mentions_shape(fn) -> bool:
    """Does ``fn``'s own code read a ``.shape``/``.dtype``/``.ndim``/``.size``?  (Attribute
    nodes are not indexed by type: the function's statements are walked once.)"""
    for n in fn.walk():
        if n.__class__ is ast.Attribute and n.attr in _SHAPE_ATTRS:
            return True
    return False


def export_flows(model) -> Dict[str, list]:
    """Exporter: for other modules, the parameters of each top-level function whose values may
    reach its result (``flowing_params``), for the functions where some parameter does not:
    ``aux_data.get(weight, key)`` looks ``weight`` up by identity and returns what was stored."""
    out: Dict[str, list] = {}
    for fn in top_level_functions(model):
        got = flowing_params(fn)
        if got is None:
            continue
        stopped = [p for p in fn.all_params() if p != fn.self_name and p not in got]
        if stopped and _reads_any(fn, stopped):
            # (a parameter the body never reads changes no result: not worth a fact)
            out[fn.name] = got
    return out


def passed_argument(call: ast.Call, params: List[str], p: str):
    """What ``call`` passes for parameter ``p`` (positionally by ``params``' order, or by
    keyword); ``False`` when it passes nothing for it, None when that cannot be told."""
    if any(a.__class__ is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    for k in call.keywords:
        if k.arg == p:
            return k.value
    i = params.index(p) if p in params else None
    if i is None:
        return None
    return call.args[i] if i < len(call.args) else False
