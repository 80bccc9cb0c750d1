"""Keys held on objects: ``self.rng`` read where the same key value is seen again and again.

* A ``lax`` loop body (a ``lax.scan``/``fori_loop``/``while_loop`` body) that consumes
  ``self.<attr>`` of an enclosing method's ``self``: the attribute holds one key for the whole
  loop (a traced body cannot advance it), so every step draws the same numbers -- the
  attribute form of a key closed over by a loop body (:func:`~.loops.closure_reuses`).
* A key stored on the object at construction (``self.key = key`` in ``__init__``/``setup``,
  from a key the constructor is given or makes) and consumed by another method of the class
  that no method ever replaces: every call of that method draws the same numbers.  Whether
  the method runs more than once is not known here, so this one is strict.

The key-ness of the attribute is proven by the consumer (a ``jax.random`` function takes it
as its key) or by the value stored (a key); a consumer whose effect is unknown is strict.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set

from ...analysis.model import Function
from .states import Reuse, Use
from .vocabulary import CONTAINER_METHODS, RANDOM_NON_CONSUMING, constant_data, is_key_like_name, key_argument

_CONSTRUCTORS = ("__init__", "setup", "__post_init__")


def _self_attr(e: ast.AST, self_name: str) -> Optional[str]:
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == self_name:
        return e.attr
    return None


def _enclosing_method(fn: Function) -> Optional[Function]:
    s = fn.parent
    while s is not None and not s.is_module:
        if s.is_method:
            return s
        s = s.parent
    return None


def _stores(fn: Function, self_name: str, attr: str) -> bool:
    """``fn`` (or a function nested in it) assigns ``self.<attr>``."""
    for n in ast.walk(fn.node):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for x in ast.walk(t):
                if _self_attr(x, self_name) == attr and isinstance(x.ctx, ast.Store):
                    return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == self_name:
            return True      # setattr(self, name, ...): any attribute may be replaced
    return False


def _consumption(an, call: ast.Call, fn: Function, self_name: str):
    """(attribute, kind, callee, draws) when ``call`` consumes ``self.<attr>`` as a key."""
    q = an.random_qualname(call, fn)
    if q is not None:
        if q in RANDOM_NON_CONSUMING:
            return None
        attr = _self_attr(key_argument(call), self_name)
        if attr is None:
            return None
        if q == "jax.random.fold_in" and not constant_data(call):
            return None      # fold_in(self.rng, step): a key per step
        kind = "split" if q == "jax.random.split" else ("fold_in" if q == "jax.random.fold_in" else "sample")
        return attr, kind, q, True
    return None


def _unknown_consumption(an, call: ast.Call, fn: Function, self_name: str):
    """``self.sublayer.pure_fn(x, weights, state, self.rng)``: a key-named attribute handed to
    a call whose effect on a key is not known here (strict)."""
    if an.random_qualname(call, fn) is not None:
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr in CONTAINER_METHODS:
        return None
    for a in list(call.args) + [k.value for k in call.keywords]:
        attr = _self_attr(a, self_name)
        if attr is None or not is_key_like_name(attr):
            continue
        display = ast.unparse(f) if len(ast.unparse(f)) <= 40 else "a call"
        target = an.model.resolve_callable(f, fn)
        if target is None:
            return attr, "call", display, False
        # a function of this module: its summary decides (draws: default; unknown: strict)
        pairs, _ = an.model.bind_arguments(target, call)
        params = [p for p, x in pairs if x is a]
        if len(params) != 1:
            return None
        callee, p = target.function, params[0]
        if p in an.key_params(callee) and an.param_draws(callee, p):
            return attr, "call", display, True
        if an.param_reaches_unknown(callee, p):
            return attr, "call", display, False
        return None
    return None


def body_attribute_reuses(an, fn: Function, primitive: str) -> List[Reuse]:
    """``self.<attr>`` of an enclosing method consumed in the ``lax`` loop body ``fn``."""
    method = _enclosing_method(fn)
    if method is None or method.self_name is None:
        return []
    self_name = method.self_name
    if self_name in fn.locals:
        return []
    label = primitive.replace("jax.lax.", "lax.")
    out: List[Reuse] = []
    seen: Set[str] = set()
    for call in sorted(fn.of_type(ast.Call), key=lambda c: (c.lineno, c.col_offset)):
        got = _consumption(an, call, fn, self_name) or _unknown_consumption(an, call, fn, self_name)
        if got is None:
            continue
        attr, kind, q, _draws = got
        if attr in seen or _stores(fn, self_name, attr):
            continue
        seen.add(attr)
        arg = key_argument(call) if kind != "call" else next(
            a for a in list(call.args) + [k.value for k in call.keywords] if _self_attr(a, self_name) == attr)
        use = Use(call, arg, None, kind, q, None, False, fn, None, _draws)
        out.append(Reuse(fn, use, None, "closure", f"`{label}` body"))
    return out


def _stored_keys(an, cls_methods: Dict[str, Function]) -> Dict[str, ast.AST]:
    """Attributes a constructor of the class sets to a key: attr -> the assignment."""
    out: Dict[str, ast.AST] = {}
    for name in _CONSTRUCTORS:
        ctor = cls_methods.get(name)
        if ctor is None or ctor.self_name is None:
            continue
        keys = an.key_names(ctor)
        for n in ctor.of_type(ast.Assign):
            if len(n.targets) != 1:
                continue
            attr = _self_attr(n.targets[0], ctor.self_name)
            if attr is None:
                continue
            v = n.value
            if (isinstance(v, ast.Name) and (v.id in keys or v.id in ctor.param_nodes)
                    and is_key_like_name(v.id)) or an.is_producer(v, ctor):
                if isinstance(v, ast.Subscript) or (isinstance(v, ast.Call) and _splits_many(an, v, ctor)):
                    continue  # ``self.keys = split(key, n)``: an array of keys, indexed per use
                out.setdefault(attr, n)
    return out


def _splits_many(an, call: ast.Call, fn: Function) -> bool:
    return an.random_qualname(call, fn) == "jax.random.split" and (len(call.args) > 1 or call.keywords)


def stored_key_reuses(an, model) -> List[Reuse]:
    """Keys stored at construction and consumed by a method that nothing replaces them in."""
    out: List[Reuse] = []
    by_class: Dict[int, Dict[str, Function]] = {}
    for fn in model.functions:
        if fn.is_method and fn.cls is not None:
            by_class.setdefault(id(fn.cls), {})[fn.name] = fn
    for methods in by_class.values():
        cls = next(iter(methods.values())).cls
        if cls.module_kind == "linen":
            continue     # a linen module's ``setup`` runs again on every ``init``/``apply``
        stored = _stored_keys(an, methods)
        if not stored:
            continue
        for attr, assign in stored.items():
            if any(m.self_name and _stores(m, m.self_name, attr) for name, m in methods.items()
                   if name not in _CONSTRUCTORS):
                continue     # some method replaces the key (``self.rng, sub = split(self.rng)``)
            for name, m in sorted(methods.items()):
                if name in _CONSTRUCTORS or m.self_name is None:
                    continue
                for call in sorted(m.of_type(ast.Call), key=lambda c: (c.lineno, c.col_offset)):
                    got = _consumption(an, call, m, m.self_name)
                    if got is None or got[0] != attr:
                        continue
                    use = Use(call, key_argument(call), None, got[1], got[2], None, False, m)
                    r = Reuse(m, use, None, "stored", f"`{name}`")
                    r.origin = assign.lineno
                    out.append(r)
                    break
    return out
