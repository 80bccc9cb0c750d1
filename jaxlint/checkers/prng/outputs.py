"""Where a function's key goes: the parts of its result that derive from a key parameter.

``evaluator_setup(..., key_e)`` splits ``key_e`` and returns ``(fn, fn2, (params,
eval_keys))``: the numbers it draws reach its caller only through ``eval_keys``, the
element at path ``(2, 1)`` of its result.  A caller that never reads what it binds there
has thrown the draw away, and a second consumption of the same key repeats nothing
anyone sees (``jax401._dead_result``).

The summary is None ("the key may go anywhere") unless every statement that touches a
value derived from the key is an assignment to plain names or a ``return``, and every
call it flows into is pure: a JAX/NumPy/math function, a method of a derived value
(``keys.reshape``), a builtin, or a project function whose own summary is known for the
parameter the value reaches.  A store on an object, a callback, a yield, a branch on a
derived value: None.
"""
from __future__ import annotations

import ast
from typing import List, Optional, Set, Tuple

from ...analysis.liveness import bound_names
from .states import mentions

Path = Tuple[int, ...]

# calls a derived key value may flow into without the draw escaping other than by the result
_PURE_PREFIXES = ("jax.random.", "jax.numpy.", "jax.lax.", "jax.tree_util.", "jax.tree.", "numpy.", "math.")
_IMPURE_PARTS = ("callback", "debug", "print", "io_")
_PURE_BUILTINS = frozenset({"tuple", "list", "len", "int", "float", "zip", "range", "enumerate", "dict",
                            "iter", "next", "reversed", "sorted", "min", "max", "abs", "isinstance"})


def key_outputs(ka, fn, param: str, depth: int = 0) -> Optional[List[Path]]:
    """The result paths of ``fn`` that derive from its parameter ``param`` (``[()]``: the
    whole result; ``[]``: none -- the draw reaches nothing), or None when the key's effect
    may escape some other way."""
    if depth > 3 or fn.is_lambda or fn.is_module:
        return None
    derived: Set[str] = {param}
    body = getattr(fn.node, "body", [])
    for child in fn.children:
        if mentions(child.node, derived):
            return None                  # a closure captures the key
    # names derived from the key (flow-insensitive, to a fixpoint: loops)
    stmts = list(_simple_statements(body))
    changed = True
    while changed:
        changed = False
        for s in stmts:
            if s.__class__ in (ast.Assign, ast.AnnAssign, ast.AugAssign) and s.value is not None \
                    and mentions(s.value, derived):
                targets = s.targets if s.__class__ is ast.Assign else [s.target]
                for t in targets:
                    for n in bound_names(t):
                        if n not in derived:
                            derived.add(n)
                            changed = True
            elif s.__class__ in (ast.For, ast.AsyncFor) and mentions(s.iter, derived):
                for n in bound_names(s.target):
                    if n not in derived:
                        derived.add(n)
                        changed = True
    for child in fn.children:
        if mentions(child.node, derived):
            return None                  # a closure captures a key made from it
    paths: List[Path] = []
    m = ka.model
    for s in stmts:
        c = s.__class__
        if c in (ast.Assign, ast.AnnAssign, ast.AugAssign):
            if s.value is None or not mentions(s.value, derived):
                continue
            targets = s.targets if c is ast.Assign else [s.target]
            if any(not _plain(t) for t in targets):
                return None              # kept on an object, in a container, in a global
            if not _pure(ka, m, fn, s.value, derived, depth):
                return None
        elif c is ast.Return:
            if s.value is not None and mentions(s.value, derived):
                if not _pure(ka, m, fn, s.value, derived, depth):
                    return None
                _paths(s.value, derived, (), paths)
        elif c in (ast.For, ast.AsyncFor):
            if mentions(s.iter, derived) and not _pure(ka, m, fn, s.iter, derived, depth):
                return None
        elif c in (ast.Global, ast.Nonlocal):
            if set(s.names) & derived:
                return None
        elif _mentions_own(s, derived):
            return None                  # a branch on it, a call for its effect, a yield, ...
    return paths


def _simple_statements(body: List[ast.stmt]):
    """Every statement of a body, compound ones as their header (test/iter/items only),
    not descending into nested functions or classes."""
    for s in body:
        yield s
        if s.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            continue
        for f in ("body", "orelse", "finalbody"):
            sub = getattr(s, f, None)
            if isinstance(sub, list):
                yield from _simple_statements(sub)
        for h in getattr(s, "handlers", None) or []:
            yield from _simple_statements(h.body)


def _mentions_own(s: ast.stmt, names: Set[str]) -> bool:
    """The statement's own parts (a compound statement's header, not its body) mention a name."""
    c = s.__class__
    if c is ast.If or c is ast.While:
        return mentions(s.test, names)
    if c in (ast.With, ast.AsyncWith):
        return any(mentions(i.context_expr, names) for i in s.items)
    if c in (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) or c.__name__ == "TryStar":
        return False
    return mentions(s, names)


def _plain(t: ast.AST) -> bool:
    if t.__class__ is ast.Name:
        return True
    if t.__class__ in (ast.Tuple, ast.List):
        return all(_plain(e) for e in t.elts)
    if t.__class__ is ast.Starred:
        return _plain(t.value)
    return False


def _paths(e: ast.AST, derived: Set[str], at: Path, out: List[Path]) -> None:
    if e.__class__ is ast.Tuple and not any(x.__class__ is ast.Starred for x in e.elts):
        for i, x in enumerate(e.elts):
            if mentions(x, derived):
                _paths(x, derived, at + (i,), out)
        return
    if at not in out:
        out.append(at)


def _pure(ka, m, fn, e: ast.AST, derived: Set[str], depth: int) -> bool:
    """Every call in ``e`` that a derived value reaches leaves nothing behind but its result."""
    for n in ast.walk(e):
        c = n.__class__
        if c in (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr) and mentions(n, derived):
            return False
        if c is not ast.Call:
            continue
        args = list(n.args) + [k.value for k in n.keywords]
        if not any(mentions(a, derived) for a in args):
            continue
        f = n.func
        if f.__class__ is ast.Attribute and mentions(f.value, derived):
            continue                     # a method of a derived value: ``keys.reshape(...)``
        q = m.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
        if q is not None and (q.startswith(_PURE_PREFIXES) or q in _PURE_BUILTINS) \
                and not any(p in q for p in _IMPURE_PARTS):
            continue
        if not _project_call_pure(ka, m, fn, n, derived, depth):
            return False
    return True


def _project_call_pure(ka, m, fn, call: ast.Call, derived: Set[str], depth: int) -> bool:
    """A call of a project function whose own summary is known for every parameter a
    derived value reaches."""
    target = m.resolve_callable(call.func, fn)
    if target is not None:
        if getattr(target, "transforms", None):
            return False
        pairs, unknown = m.bind_arguments(target, call)
        if unknown:
            return False
        hit = [p for p, a in pairs if mentions(a, derived)]
        if len(hit) != sum(1 for a in list(call.args) + [k.value for k in call.keywords] if mentions(a, derived)):
            return False
        return all(ka.outputs(target.function, p, depth + 1) is not None for p in hit)
    q = m.qualname(call.func, fn) if call.func.__class__ in (ast.Name, ast.Attribute) else None
    ext = m.external_facts(q)
    if ext is None or "prng" not in ext:
        return False
    outs = ext["prng"].get("outputs") or {}
    params = ext["params"]
    for i, a in enumerate(call.args):
        if mentions(a, derived) and (i >= len(params) or a.__class__ is ast.Starred or params[i] not in outs):
            return False
    for k in call.keywords:
        if mentions(k.value, derived) and (k.arg is None or k.arg not in outs):
            return False
    return True
