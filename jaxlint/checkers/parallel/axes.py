"""Axis names: which transforms bind them, which calls communicate over them, and which
names are bound around a function of the module.

The per-transform facts (``axis_name``, mesh axes, whether gradients are left per replica)
are fields of the ``Transform`` records in ``analysis/knowledge.py``, read here through live
views; the collectives (``lax`` functions, not transforms) are the tables below.
"""
from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from ...analysis import Function, SemanticModel, TransformSite
from ...analysis import knowledge as K

# transforms that bind a named axis: qualified name -> (keyword, positional index or None)
AXIS_BINDERS = K.AXIS_BINDERS
# transforms that bind axis names this module does not spell at the call (a Mesh's axes)
MESH_BINDERS = K.MESH_BINDERS
# data-parallel transforms whose gradients of replicated parameters are NOT reduced for you
# (shard_map's gradients of replicated inputs are psum-ed by JAX itself: it is not here)
REPLICATING = K.REPLICATING

# collectives: qualified name -> positional index of the axis name (keyword ``axis_name``)
COLLECTIVES: Dict[str, int] = {
    "jax.lax.psum": 1, "jax.lax.pmean": 1, "jax.lax.pmax": 1, "jax.lax.pmin": 1,
    "jax.lax.all_gather": 1, "jax.lax.psum_scatter": 1, "jax.lax.ppermute": 1,
    "jax.lax.pshuffle": 1, "jax.lax.pswapaxes": 1, "jax.lax.all_to_all": 1,
    "jax.lax.pbroadcast": 1, "jax.lax.axis_index": 0, "jax.lax.axis_size": 0,
}
# collectives that combine the replicas' values (what synchronizing gradients needs)
REDUCING: FrozenSet[str] = frozenset({
    "jax.lax.psum", "jax.lax.pmean", "jax.lax.psum_scatter", "jax.lax.all_gather",
})

UNKNOWN = None   # "the axis names bound here cannot be known from this module"


def call_arg(call: ast.Call, keyword: str, position: Optional[int]) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    if position is not None and len(call.args) > position:
        a = call.args[position]
        return None if isinstance(a, ast.Starred) else a
    return None


def literal_names(node: Optional[ast.expr]) -> Optional[Tuple[str, ...]]:
    """``"batch"`` or ``("data", "model")`` as a tuple of strings; None if not literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return tuple(e.value for e in node.elts)
    return None


def site_axis(model: SemanticModel, site: TransformSite) -> Tuple[bool, Optional[Tuple[str, ...]]]:
    """(binds?, names) for one transform site: ``(False, ())`` binds nothing,
    ``(True, names)`` binds literal names, ``(True, None)`` binds names unknown here."""
    name = site.transform.name
    if name in MESH_BINDERS:
        return True, None
    spec = AXIS_BINDERS.get(name)
    if spec is None or site.call is None:
        return False, ()
    call = site.call
    # jax.pmap(f, "batch") may pass the name by position; partial(jax.pmap, axis_name=...) may not
    direct = model.qualname(call.func, site.scope) == name
    value = call_arg(call, spec[0], spec[1] if direct else None)
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return False, ()
    if isinstance(value, ast.Name):
        # ``AXIS = "dp"`` once, then ``jax.pmap(step, axis_name=AXIS)``: the constant's name
        bound = model.single_value(value.id, site.scope)
        if bound is not None and literal_names(bound) is not None:
            return True, literal_names(bound)
        given = _param_names(model, site.scope, value.id)
        if given is not None:
            return True, given
    return True, literal_names(value)


def _param_names(model: SemanticModel, fn, name: str) -> Optional[Tuple[str, ...]]:
    """``def make_step(model, tx, axis="hosts"): ... jax.pmap(step, axis_name=axis)``: the axis
    names a parameter takes -- its literal default where this module's calls leave it out, the
    literal they pass otherwise; None when a call passes anything else (or it is rebound)."""
    if fn is None or fn.is_module or name not in fn.param_nodes or \
            any(b.kind != "param" for b in model.bindings(name, fn)):
        return None
    default = fn.defaults.get(name) if isinstance(fn.defaults, dict) else None
    names = set()
    calls = [(c, s) for s in model.functions for c in s.of_type(ast.Call)
             if isinstance(c.func, ast.Name) and c.func.id == fn.name and model.resolve_scope(fn.name, s) is fn.parent]
    for c, s in calls:
        target = model.resolve_callable(c.func, s)
        if target is None or target.function is not fn:
            continue
        if any(isinstance(a, ast.Starred) for a in c.args) or any(k.arg is None for k in c.keywords):
            return None
        pairs, _ = model.bind_arguments(target, c)
        given = [a for p, a in pairs if p == name]
        got = literal_names(given[0]) if given else literal_names(default)
        if got is None:
            return None
        names.update(got)
    if not calls:
        got = literal_names(default)
        if got is None:
            return None
        names.update(got)
    return tuple(sorted(names))


class AxisIndex:
    """Axis names bound around each function of one module (computed on demand)."""

    def __init__(self, model: SemanticModel):
        self.model = model
        self._sites: Dict[int, List[TransformSite]] = {}
        for s in model.transform_sites:
            self._sites.setdefault(id(s.node), []).append(s)
        self._bound: Dict[int, Optional[FrozenSet[str]]] = {}
        self._escaped: Optional[Set[str]] = None

    def site_names(self, site: TransformSite) -> Tuple[bool, Optional[Tuple[str, ...]]]:
        return site_axis(self.model, site)

    def bound(self, fn: Function, _stack: Optional[Set[int]] = None) -> Optional[FrozenSet[str]]:
        """The axis names bound wherever ``fn`` runs, or ``UNKNOWN``: some way ``fn`` is
        reached is not visible here (no trace context, a Flax/Equinox module method, a
        function handed to a callable jaxlint does not know, a mesh's axes)."""
        got = self._bound.get(id(fn), 0)
        if got != 0:
            return got
        stack = _stack if _stack is not None else set()
        if id(fn) in stack:
            return frozenset()   # a cycle adds nothing new
        stack.add(id(fn))
        out = self._compute(fn, stack)
        stack.discard(id(fn))
        if _stack is None or out is UNKNOWN:
            self._bound[id(fn)] = out
        return out

    def _compute(self, fn: Function, stack: Set[int]) -> Optional[FrozenSet[str]]:
        if fn.is_module or not fn.contexts or self._escapes(fn):
            return UNKNOWN
        names: Set[str] = set()
        for c in fn.contexts:
            if c.transform == "call":
                if c.caller is None:
                    return UNKNOWN
                inner = self.bound(c.caller, stack)
                if inner is UNKNOWN:
                    return UNKNOWN
                names |= inner
                continue
            sites = [s for s in self._sites.get(id(c.node), ()) if s.transform.name == c.transform]
            if not sites or c.transform not in K.TRANSFORMS:
                return UNKNOWN   # module methods, custom derivative rules, ...
            for site in sites:
                binds, got = self.site_names(site)
                if binds and got is None:
                    return UNKNOWN
                names.update(got or ())
                if self._site_escapes(site):
                    return UNKNOWN
                # where the transform is applied: axis names bound there surround the call
                if site.scope is not None and not site.scope.is_module and site.scope.under_trace:
                    inner = self.bound(site.scope, stack)
                    if inner is UNKNOWN:
                        return UNKNOWN
                    names |= inner
                elif not binds and not self._called_eagerly(site):
                    # a jitted function applied outside any trace: it binds no axis, and its
                    # callers (perhaps a pmap in another module) are not all visible here
                    return UNKNOWN
        return frozenset(names)

    def _called_eagerly(self, site: TransformSite) -> bool:
        """The callable ``site`` makes is called here from code that runs outside any trace
        (where no axis name is bound): ``jax.jit(f)(x)`` in a plain function, or a jitted
        ``f`` called from one."""
        from ..jit.calls import call_index   # the jit family's index of jitted callables' calls
        m = self.model
        if site.call is not None:
            for node in site.scope.of_type(ast.Call):
                if node.func is site.call:
                    return self._runs_eagerly(site.scope, 0)
        idx = call_index(m)
        binding = next((b for b in idx.bindings if b.site is site), None)
        if binding is None:
            return False
        return any(self._runs_eagerly(cs.scope, 0) for cs in idx.calls_to(binding))

    @staticmethod
    def _runs_eagerly(scope: Function, depth: int = 0) -> bool:
        """``scope`` runs outside any trace as far as this module shows: not traced here, and
        not a method -- a method is called on objects other modules hold, inside their
        ``pmap`` as often as not (jumanji's ``Agent.run_epoch``): unknown."""
        s: Optional[Function] = scope
        while s is not None and not s.is_module:
            if s.under_trace or s.cls is not None:
                return False
            s = s.parent
        return True

    def _escapes(self, fn: Function) -> bool:
        """``fn`` is decorated by, or handed to, a callable that is not a known transform
        (``nn.vmap(..., axis_name=...)``, ``hk.transform``, a registry): it may run where
        axis names are bound."""
        m = self.model
        for d in fn.decorators:
            e = d.func if isinstance(d, ast.Call) else d
            q = m.qualname(e, fn.parent)
            if q in K.PARTIAL and isinstance(d, ast.Call) and d.args:
                q = m.qualname(d.args[0], fn.parent)
            if q is None or (q not in K.TRANSFORMS and q not in ("staticmethod", "classmethod",
                                                                 "functools.wraps")):
                return True
        if self._escaped is None:
            self._escaped = self._escaping_names()
        return fn.name in self._escaped

    def _site_escapes(self, site: TransformSite) -> bool:
        """The callable a transform call makes is returned, or handed to an unknown callable."""
        if site.is_decorator or site.call is None:
            return False
        call, scope = site.call, site.scope
        if self._escaped is None:
            self._escaped = self._escaping_names()
        for node in scope.of_type(ast.Return):
            if node.value is call or (isinstance(node.value, ast.Tuple) and call in node.value.elts):
                return True
        for node in scope.of_type(ast.Assign):
            if node.value is call:
                return any(isinstance(t, ast.Name) and t.id in self._escaped or
                           isinstance(t, ast.Attribute) for t in node.targets)
        for other in scope.of_type(ast.Call):
            if call in other.args or any(k.value is call for k in other.keywords):
                q = self.model.qualname(other.func, scope) if isinstance(
                    other.func, (ast.Name, ast.Attribute)) else None
                if q not in K.TRANSFORMS:
                    return True
        return False

    def _escaping_names(self) -> Set[str]:
        m = self.model
        out: Set[str] = set()
        for scope in m.functions:
            for call in scope.of_type(ast.Call):
                q = m.qualname(call.func, scope) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
                if q is not None and (q in K.TRANSFORMS or q in K.PARTIAL or q in K.HIGHER_ORDER):
                    continue
                for a in list(call.args) + [k.value for k in call.keywords]:
                    if isinstance(a, ast.Starred):
                        a = a.value
                    if isinstance(a, ast.Name):
                        out.add(a.id)
                    elif isinstance(a, ast.Attribute):
                        out.add(a.attr)
            for node in scope.of_type(ast.Return):
                if isinstance(node.value, ast.Name):
                    out.add(node.value.id)
        return out


def axis_index(model: SemanticModel) -> AxisIndex:
    return model.facts(AxisIndex)


def collective_name(model: SemanticModel, call: ast.Call, scope: Function) -> Optional[str]:
    """The qualified name of a collective call (``jax.lax.pmean``), else None."""
    f = call.func
    if not isinstance(f, (ast.Name, ast.Attribute)):
        return None
    q = model.qualname(f, scope)
    return q if q in COLLECTIVES else None


def collective_axis(call: ast.Call, q: str) -> Optional[ast.expr]:
    return call_arg(call, "axis_name", COLLECTIVES[q])


def mentions_collective(model: SemanticModel, node: ast.AST, scope: Function,
                        names: FrozenSet[str] = REDUCING) -> bool:
    """Some name in ``node`` (a call, a ``partial(lax.pmean, ...)``, a lambda body)
    is one of the collectives ``names``."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)) and model.qualname(n, scope) in names:
            return True
    return False


def iter_collectives(model: SemanticModel, fn: Function) -> Iterator[Tuple[ast.Call, str]]:
    for call in fn.of_type(ast.Call):
        q = collective_name(model, call, fn)
        if q is not None:
            yield call, q
