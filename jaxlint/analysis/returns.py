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


def export_returned_params(model) -> Dict[str, list]:
    """Exporter: for other modules, ``[n, {index: parameter}]`` of each top-level function
    that returns some of its parameters unchanged (``returned_params``)."""
    out: Dict[str, list] = {}
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module or fn.cls is not None:
            continue
        if model.top_level_function(fn.name) is not fn:
            continue
        got = returned_params(fn)
        if got:
            n = len(fn.of_type(ast.Return)[0].value.elts)
            out[fn.name] = [n, {str(i): p for i, p in got.items()}]
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
