"""Which arguments of a call cross a transform boundary as traced values.

``f(cfg, x)`` where ``f`` is ``@jax.jit``-decorated, ``step = jax.jit(f); step(cfg, x)``,
``jax.grad(loss)(params, cfg)``, ``jax.vmap(f, in_axes=(None, 0))(cfg, xs)``: the outermost
transform receives the arguments; its static arguments, a ``vmap``'s ``in_axes=None``
positions and a ``grad``'s non-differentiated arguments are not traced (JAX accepts any
Python object there, shown with JAX on CPU).
"""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set

from ...analysis import CallTarget, Function, SemanticModel
from ...analysis import knowledge as K

# transform kinds whose traced arguments must be pytrees of arrays (Equinox's filter_*
# transforms and NNX's lifted ones accept arbitrary objects: not here)
BOUNDARY_KINDS = frozenset({"jit", "pmap", "vmap", "grad"})


def boundary_transform(tr: Optional[K.Transform]) -> bool:
    return tr is not None and tr.kind in BOUNDARY_KINDS and tr.name.startswith("jax.")


class Crossing:
    """One call of a transformed function of this module."""

    __slots__ = ("call", "scope", "function", "transform", "transform_call", "traced", "pairs")

    def __init__(self, call, scope, function, transform, transform_call, traced, pairs):
        self.call = call                      # the call that passes the arguments
        self.scope = scope
        self.function = function              # the transformed function
        self.transform = transform            # the outermost transform
        self.transform_call = transform_call  # its call (None for a bare decorator)
        self.traced = traced                  # parameter names it traces
        self.pairs = pairs                    # (parameter, argument) of the call


def crossings(m: SemanticModel) -> Iterator[Crossing]:
    for scope in m.functions:
        for call in scope.of_type(ast.Call):
            got = _resolve(m, call, scope)
            if got is not None:
                yield got


def _resolve(m: SemanticModel, call: ast.Call, scope: Function) -> Optional[Crossing]:
    f = call.func
    if not isinstance(f, (ast.Name, ast.Attribute, ast.Call)):
        return None
    if isinstance(f, ast.Call):
        if not isinstance(f.func, (ast.Name, ast.Attribute)) or \
                not boundary_transform(K.transform_for(m.qualname(f.func, scope))):
            return None
    elif isinstance(f, ast.Name) and m.qualname(f, scope) is not None:
        return None
    target = m.resolve_callable(f, scope)
    if target is None:
        target = stored_callable(m, f, scope)
    if target is None:
        return None
    fn = target.function
    if target.transforms:
        tr, tcall = target.transforms[0]
        if not boundary_transform(tr):
            return None
        params = fn.params[target.bound_positional:]
        call_bound = target.bound_positional
    else:
        sites = m.decorator_sites(fn)
        if not sites:
            return None
        # the outermost decorator receives the call's arguments
        order = {id(d): i for i, d in enumerate(fn.decorators)}
        site = min(sites, key=lambda s: order.get(id(s.node), 99))
        tr, tcall = site.transform, site.call
        if not boundary_transform(tr):
            return None
        params = list(fn.params)
        call_bound = target.bound_positional    # 1 for self.method(...)
    traced = traced_params(m, fn, tr, tcall, params, target.bound_keywords)
    if traced is None:
        return None
    pairs, _ = m.bind_arguments(CallTarget(fn, call_bound, target.bound_keywords), call)
    starred = {id(a.value) for a in call.args if isinstance(a, ast.Starred)}
    starred |= {id(k.value) for k in call.keywords if k.arg is None}
    pairs = [(p, a) for p, a in pairs if id(a) not in starred]
    return Crossing(call, scope, fn, tr, tcall, traced, pairs)


def self_assignments(m: SemanticModel, attr: ast.Attribute, scope: Function):
    """[(value, method, whole)] for every assignment to ``self.<attr>`` in the methods of the
    plain class whose method ``scope`` is (or is nested in), ``attr`` being ``self.<name>``
    there; ``whole`` is False for an element of an unpacked target; None when ``attr`` is not
    such an attribute or some binding is not a plain assignment (``+=``, ``setattr``)."""
    if not isinstance(attr, ast.Attribute) or not isinstance(attr.value, ast.Name):
        return None
    method = scope.enclosing_method()
    if method is None or method.cls is None or attr.value.id != method.self_name:
        return None
    return class_self_assignments(method.cls, attr.attr)


def class_self_assignments(cls, name: str):
    """[(value, method, whole)] for every assignment to ``self.<name>`` in the methods of
    ``cls``; None when some binding is not a plain assignment (``+=``, ``setattr``)."""
    out = []
    for meth in cls.methods.values():
        for node in meth.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Call):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
                    return None
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Attribute) and n.attr == name and \
                            isinstance(n.value, ast.Name) and n.value.id == meth.self_name:
                        if isinstance(node, ast.AugAssign) or node.value is None:
                            return None
                        out.append((node.value, meth, n is t))
    return out


def stored_callable(m: SemanticModel, f: ast.expr, scope: Function) -> Optional[CallTarget]:
    """``self.step`` bound once, in a method of the class, to a callable of this module
    (``self.step = jax.jit(self._step)``): what that binding resolves to."""
    found = self_assignments(m, f, scope) if isinstance(f, ast.Attribute) else None
    if found is None and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        # ``trainer.update(...)`` where ``trainer`` is bound once to ``Trainer(...)``, a plain
        # class of this module, and ``__init__`` set ``self.update = jax.jit(self._update)``
        cls = instance_class(m, f.value, scope)
        if cls is not None and f.attr not in cls.methods:
            found = class_self_assignments(cls, f.attr)
    if not found or len(found) != 1 or not found[0][2]:
        return None
    value, meth, _ = found[0]
    if not isinstance(value, (ast.Call, ast.Attribute, ast.Name)):
        return None
    return m.resolve_callable(value, meth)


def instance_class(m: SemanticModel, e: ast.Name, scope: Function):
    """The class of this module (not a Flax/NNX/Equinox module) that ``e`` is bound to an
    instance of by its one binding (``trainer = Trainer(0.1)``)."""
    owner = m.resolve_scope(e.id, scope)
    if owner is None:
        return None
    bs = m.bindings(e.id, owner)
    if len(bs) != 1 or bs[0].kind != "=" or bs[0].element is None:
        return None
    return constructed_class(m, bs[0].element, owner)


def constructed_class(m: SemanticModel, v: ast.AST, scope: Function):
    """The plain class of this module (not a Flax/NNX/Equinox module) that the call ``v`` (seen
    from ``scope``) constructs: ``Trainer(0.1)``."""
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)) or m.qualname(v.func, scope) is not None:
        return None
    info = m.classes.get(v.func.id)
    if info is None or info.module_kind is not None or m.resolve_scope(v.func.id, scope) is not m.module:
        return None
    return info


def traced_params(m: SemanticModel, fn: Function, tr: K.Transform, tcall: Optional[ast.Call],
                  params: List[str], bound_keywords) -> Optional[Set[str]]:
    """The parameters ``tr`` (applied with ``tcall``) traces, ``params`` being the
    positional parameters it sees; None when that cannot be read from the source."""
    static: Set[str] = set(bound_keywords)
    nums, names = m.static_spec(tr, tcall)
    if tcall is not None:
        for kw in tcall.keywords:
            if kw.arg in tr.static_nums_kw + tr.static_names_kw and \
                    m.literal_ints(kw.value) is None and m.literal_strs(kw.value) is None:
                return None   # static_argnums=STATIC: unknown
    for i in nums:
        if -len(params) <= i < len(params):
            static.add(params[i])
    static.update(names)
    everything = [p for p in params + fn.kwonly if p not in static]
    if tr.kind == "grad":
        argnums = _kw(tcall, "argnums")
        idx = [0] if argnums is None else m.literal_ints(argnums)
        if idx is None:
            return None
        return {params[i] for i in idx if -len(params) <= i < len(params)} - static
    if tr.kind == "vmap":
        axes = _kw(tcall, "in_axes")
        if axes is None and tcall is not None and len(tcall.args) > 1 and \
                m.qualname(tcall.func) == tr.name:
            axes = tcall.args[1]
        if axes is None:
            return set(everything)
        if isinstance(axes, ast.Constant) and isinstance(axes.value, int):
            return set(everything)
        if isinstance(axes, (ast.Tuple, ast.List)):
            return {p for p, ax in zip(params, axes.elts)
                    if not (isinstance(ax, ast.Constant) and ax.value is None)} - static
        return None
    return set(everything)


def _kw(call: Optional[ast.Call], name: str) -> Optional[ast.expr]:
    if call is None:
        return None
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


# arrays a structured-control-flow primitive scans over (beside its carry and operands,
# which the Transform records give): qualified name -> positional index
SCANNED_ARGS = {"jax.lax.scan": 2, "jax.lax.map": 1, "jax.lax.associative_scan": 1}


def lax_operands(m: SemanticModel, call: ast.Call, scope: Function) -> List[ast.expr]:
    """The values a ``lax`` control-flow call hands to its bodies (carry init, operands,
    scanned arrays): they must be pytrees of arrays."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return []
    tr = K.transform_for(m.qualname(call.func, scope))
    if tr is None or tr.kind != "body" or any(isinstance(a, ast.Starred) for a in call.args):
        return []
    idx: Set[int] = set()
    if tr.carry_init is not None:
        idx.add(tr.carry_init[1])
    if tr.name in SCANNED_ARGS:
        idx.add(SCANNED_ARGS[tr.name])
    if tr.operands_from is not None:
        idx.update(range(tr.operands_from, len(call.args)))
    return [call.args[i] for i in sorted(idx) if i < len(call.args)]
