"""The shape of a variables dict passed to a linen ``apply``: ``"inner"`` for the parameter dict
itself (``variables["params"]``, ``state.params`` of a ``TrainState`` created with the inner
dict), ``"full"`` for a variables dict (``model.init(...)``, ``{"params": ...}``), following single
bindings, shape-preserving calls (``optax.apply_updates``, ``freeze``), a training loop that
carries the dict through a step of this file and, for parameters of functions of this file,
every call site.

:class:`VariablesShapes` is a part of :class:`.linen.FlaxFacts`; it reads the instances, the
``TrainState.create`` calls and the parameter sources the rest of the class finds.
"""
from __future__ import annotations

import ast
from typing import Optional, Set, Tuple

from ...analysis import Function, SemanticModel
from .contracts import INIT_METHODS, MAPS_ARGUMENTS, RAVELS, SHAPE_PRESERVING, TREE_MAPS
from .values import MAX_DEPTH, const_str

INNER = "inner"
FULL = "full"


class VariablesShapes:
    """``shape``: what a variables-dict expression holds, for :class:`.linen.FlaxFacts`."""

    model: SemanticModel

    def shape(self, e: Optional[ast.expr], fn: Function, _depth: int = 0,
              _seen: Optional[Set[int]] = None) -> Tuple[Optional[str], bool]:
        """(``inner`` | ``full`` | None, local): ``local`` is False when the answer rests on the
        call sites of a function that other modules could call too."""
        if e is None or _depth > MAX_DEPTH:
            return None, True
        _seen = _seen if _seen is not None else set()
        if isinstance(e, ast.Subscript):
            if const_str(e.slice) == "params":
                return INNER, True
            return None, True
        if isinstance(e, ast.Dict):
            if "params" in {const_str(k) for k in e.keys if k is not None}:
                return FULL, True
            return None, True
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and len(e.args) == 1 and not e.keywords \
                    and const_str(e.args[0]) == "params":
                return INNER, True      # variables.get("params"), as variables["params"]
            if isinstance(f, ast.Attribute) and f.attr in INIT_METHODS:
                if self.instance(f.value, fn) is not None or len(e.args) >= 2:
                    return FULL, True
                return None, True
            if isinstance(f, ast.Call) and isinstance(f.args[0] if f.args else None, ast.Attribute) \
                    and f.args[0].attr in INIT_METHODS and self.model.qualname(f.func, fn) == "jax.jit":
                return FULL, True
            arg = self._preserved(e, fn)
            if arg is not None:
                return self.shape(arg, fn, _depth + 1, _seen)
            tree = self._unraveled(f, fn, _depth)
            if tree is not None:
                # ``unravel(flat)`` of ``flat, unravel = ravel_pytree(params)``: a tree shaped like it
                return self.shape(tree[0], tree[1], _depth + 1, _seen)
            stacked = self._stacked(e, fn)
            if stacked is not None:
                return self.shape(stacked, fn, _depth + 1, _seen)
            return self._returned_shape(e, fn, _depth, _seen)
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
            got = self._self_attribute_shape(e, fn, _depth, _seen)
            if got is not None:
                return got
        if isinstance(e, ast.Attribute) and e.attr == "params":
            return self._state_params_shape(e.value, _depth, _seen)
        if isinstance(e, ast.Name):
            scope = self.binding_scope(e.id, fn)
            if scope is None:
                return None, True
            if e.id in scope.param_nodes:
                return self._param_shape(scope, e.id, _depth, _seen)
            bindings = self.model.bindings(e.id, scope)
            if not bindings:
                return None, True
            key = id(scope), e.id
            if key in _seen:
                return None, True
            _seen = _seen | {key}
            shapes = set()
            local = True
            for b in bindings:
                if b.kind != "=":
                    return None, True
                v = b.element
                if v is None:
                    # ``params, opt_state = step(params, opt_state, batch)`` where ``step``
                    # returns ``optax.apply_updates(params, ...)`` there: the same dict, updated
                    if b.path and self._passed_back(b.value, b.path, e.id, scope):
                        continue
                    # ``model, params = init_model(key)``: what the factory returns there
                    # (``params, opt_state = init(key)`` before a loop that passes them back: that
                    # binding, the others being the step's own results)
                    got = self.unpacked_binding(b, scope)
                    if got is not None:
                        s, loc = self.shape(got[0], got[1], _depth + 1, _seen)
                        if s is not None:
                            shapes.add(s)
                            local = local and loc
                            continue
                    return None, True
                s, loc = self.shape(v, scope, _depth + 1, _seen)
                if s is None:
                    # a self-referencing update (``params = optax.apply_updates(params, u)``)
                    if self._refers_to(v, e.id):
                        continue
                    return None, True
                shapes.add(s)
                local = local and loc
            if len(shapes) == 1:
                return shapes.pop(), local
        return None, True

    def _self_attribute_shape(self, e: ast.Attribute, fn: Function, depth: int,
                              seen: Set) -> Optional[Tuple[Optional[str], bool]]:
        """``self.params`` in a method of a plain class (a trainer): the shape every assignment to
        that attribute in the class's methods gives it (``self.params = model.init(...)["params"]``
        in ``__init__``), updates of the attribute itself (``self.params =
        optax.apply_updates(self.params, u)``, ``self.params, self.opt_state = self.step(
        self.params, ...)`` where the step returns its argument updated) keeping it; None when
        ``e`` is not such an attribute, (None, True) when some assignment is not understood."""
        method = fn.enclosing_method()
        if method is None or method.cls is None or method.cls.module_kind is not None \
                or e.value.id != method.self_name:
            return None
        key = id(method.cls), "self." + e.attr
        if key in seen:
            return None, True
        seen = seen | {key}
        values = []
        for m in method.cls.methods.values():
            for node in m.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Attribute) and n.attr == e.attr and \
                                isinstance(n.value, ast.Name) and n.value.id == m.self_name:
                            if not isinstance(node, ast.Assign) and not (
                                    isinstance(node, ast.AnnAssign) and node.value is not None and n is t):
                                return None, True
                            values.append((t, n, node.value, m))
        if not values:
            return None
        shapes = set()
        for t, n, v, m in values:
            if n is not t:
                # an element of an unpacked result: ``self.params, self.opt_state = step(self.params, ...)``
                path = _element_path(t, n)
                if path is None or not isinstance(v, ast.Call) or \
                        not self._passed_back(v, path, ast.unparse(n), m):
                    return None, True
                continue
            s, _ = self.shape(v, m, depth + 1, seen)
            if s is None:
                if self._updates(v, ast.unparse(n), m, depth + 1):
                    continue
                return None, True
            shapes.add(s)
        if len(shapes) == 1:
            return shapes.pop(), True
        return None, True

    def _stacked(self, call: ast.Call, fn: Function) -> Optional[ast.expr]:
        """``jax.tree.map(lambda *xs: jnp.stack(xs), *members)``: a tree map over a list of
        dicts of one shape keeps that shape (a stack of them); the element expression of the list
        (``[model.init(k, x)["params"] for k in keys]``, bound once), None for anything else."""
        q = self.model.qualname(call.func, fn) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
        if q not in TREE_MAPS or len(call.args) != 2 or not isinstance(call.args[1], ast.Starred):
            return None
        seq = call.args[1].value
        if isinstance(seq, ast.Name):
            sv = self.single_value(seq.id, fn)
            if sv is None:
                return None
            seq, fn = sv
        if isinstance(seq, ast.ListComp):
            return seq.elt
        if isinstance(seq, (ast.List, ast.Tuple)) and seq.elts and \
                not any(isinstance(x, ast.Starred) for x in seq.elts):
            return seq.elts[0] if all(ast.dump(x) == ast.dump(seq.elts[0]) for x in seq.elts) else None
        return None

    def _returned_shape(self, call: ast.Call, fn: Function, depth: int, seen: Set) -> Tuple[Optional[str], bool]:
        """What a function of this file returns on every ``return`` (a lambda: its body), called
        directly or through transforms that keep the shape of its result per slice
        (``jax.vmap(lambda k: model.init(k, x)["params"])(keys)``: a stack of inner dicts)."""
        if not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
            return None, True
        target = self.model.resolve_callable(call.func, fn)
        if target is None or any(getattr(tr, "kind", None) not in MAPS_ARGUMENTS for tr, _ in target.transforms):
            return None, True
        g = target.function
        if g.is_module:
            return None, True
        key = id(g), "<return>"
        if key in seen:
            return None, True
        seen = seen | {key}
        if isinstance(g.node, ast.Lambda):
            values = [g.node.body]
        else:
            values = [r.value for r in g.of_type(ast.Return)]
        if not values or any(v is None for v in values):
            return None, True
        shapes = set()
        local = True
        for v in values:
            s, loc = self.shape(v, g, depth + 1, seen)
            if s is None:
                return None, True
            shapes.add(s)
            local = local and loc
        return (shapes.pop(), local) if len(shapes) == 1 else (None, True)

    def _unraveled(self, func: ast.expr, fn: Function, depth: int):
        """(tree, its scope) when ``func`` is the ``unravel`` of ``flat, unravel =
        jax.flatten_util.ravel_pytree(tree)`` -- bound so here, or a parameter every call of this
        file fills with such an ``unravel``: what it returns has ``tree``'s structure."""
        if not isinstance(func, ast.Name) or depth > MAX_DEPTH:
            return None
        scope = self.binding_scope(func.id, fn)
        if scope is None:
            return None
        if func.id in scope.param_nodes:
            if scope.is_module:
                return None
            sources, _ = self.param_sources(scope, func.id)
            trees = [self._unraveled(src, s, depth + 1) for src, s in sources]
            if trees and all(t is not None for t in trees) and len({(id(t[0]), id(t[1])) for t in trees}) == 1:
                return trees[0]
            return None
        bindings = self.model.bindings(func.id, scope)
        if len(bindings) != 1:
            return None
        b = bindings[0]
        v = b.value
        if b.kind != "=" or tuple(b.path or ()) != (1,) or not isinstance(v, ast.Call) or not v.args \
                or self.model.qualname(v.func, scope) not in RAVELS:
            return None
        return v.args[0], scope

    def _preserved(self, call: ast.Call, scope: Function) -> Optional[ast.expr]:
        """The argument a shape-preserving call (``optax.apply_updates(params, u)``) returns
        updated; None for any other call."""
        q = self.model.qualname(call.func, scope)
        pos = SHAPE_PRESERVING.get(q) if q else None
        if pos is None or len(call.args) <= pos or isinstance(call.args[pos], ast.Starred):
            return None
        return call.args[pos]

    def _passed_back(self, call: ast.AST, path: Tuple[int, ...], name: str, scope: Function) -> bool:
        """Whether ``call`` (a function of this file, jitted or not) is given ``name`` and returns,
        at ``path`` of its result on every ``return``, that same argument (through
        shape-preserving calls such as ``optax.apply_updates``)."""
        if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
            return False
        target = self.model.resolve_callable(call.func, scope)
        if target is None:
            target = self._stored_callable(call.func, scope)
        if target is None or any(getattr(tr, "kind", None) not in ("jit", "pmap") for tr, _ in target.transforms):
            return False
        g = target.function
        if any(site.transform.kind not in ("jit", "pmap") for site in self.model.decorator_sites(g)):
            return False
        pairs, _ = self.model.bind_arguments(target, call)
        params = [p for p, a in pairs if isinstance(a, (ast.Name, ast.Attribute)) and _text(a) == name]
        if len(params) != 1 or g.is_module or isinstance(g.node, ast.Lambda):
            return False
        rets = g.of_type(ast.Return)
        if not rets:
            return False
        for r in rets:
            v = r.value
            for i in path:
                if not isinstance(v, (ast.Tuple, ast.List)) or i >= len(v.elts) or \
                        any(isinstance(x, ast.Starred) for x in v.elts):
                    return False
                v = v.elts[i]
            if not self._same_dict(v, params[0], g, 0):
                return False
        return True

    def _stored_callable(self, func: ast.expr, scope: Function):
        """``self.step`` bound once in the class's methods (``self.step = jax.jit(self._step)``):
        the function that binding resolves to."""
        method = scope.enclosing_method()
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or method is None \
                or method.cls is None or func.value.id != method.self_name:
            return None
        stored = self.model.self_attr_value(method.cls, func.attr)
        if stored is None:
            return None
        value, m = stored
        return self.model.resolve_callable(value, m) if isinstance(value, (ast.Call, ast.Attribute, ast.Name)) else None

    def _same_dict(self, v: ast.expr, param: str, g: Function, depth: int) -> bool:
        """``v`` in ``g`` is the parameter ``param`` itself or a shape-preserving update of it."""
        if depth > MAX_DEPTH:
            return False
        if isinstance(v, ast.Call):
            arg = self._preserved(v, g)
            return arg is not None and self._same_dict(arg, param, g, depth + 1)
        if not isinstance(v, ast.Name) or self.binding_scope(v.id, g) is not g:
            return False
        bs = self.model.bindings(v.id, g)
        if v.id == param:
            rest = [b for b in bs if b.kind != "param"]
            # a rebinding counts when it updates the parameter itself (``p = apply_updates(p, u)``)
            return all(b.kind == "=" and b.element is not None and
                       self._updates(b.element, param, g, depth + 1) for b in rest)
        return len(bs) == 1 and bs[0].kind == "=" and bs[0].element is not None and \
            self._same_dict(bs[0].element, param, g, depth + 1)

    def _updates(self, v: ast.expr, param: str, g: Function, depth: int) -> bool:
        """``v`` is a shape-preserving call chain ending at the name ``param`` itself."""
        while isinstance(v, ast.Call) and depth <= MAX_DEPTH:
            v = self._preserved(v, g)
            if v is None:
                return False
            depth += 1
        return isinstance(v, (ast.Name, ast.Attribute)) and _text(v) == param

    @staticmethod
    def _refers_to(v: ast.expr, name: str) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(v))

    def _state_params_shape(self, state: ast.expr, depth: int, seen: Set) -> Tuple[Optional[str], bool]:
        """``state.params`` holds what the ``TrainState.create(params=...)`` that made ``state``
        was given.  The creates that can have made it: those bound to the same name or
        attribute (``self.actor_state = TrainState.create(...)`` for ``actor_state.params``), else
        the file's creates that are bound to no name of their own (returned by a factory);
        none of them: unknown (a state made in another module)."""
        shapes = set()
        for call, fn in self._creates_for(state):
            kw = next((k for k in call.keywords if k.arg == "params"), None)
            if kw is None:
                return None, True
            s, _ = self.shape(kw.value, fn, depth + 1, seen)
            if s is None:
                return None, True
            shapes.add(s)
        if len(shapes) == 1:
            return shapes.pop(), True
        return None, True

    def _creates_for(self, state: ast.expr) -> list:
        name = state.id if isinstance(state, ast.Name) else state.attr if isinstance(state, ast.Attribute) else None
        named, unnamed = [], []
        for call, fn in self.train_state_creates():
            bound = self._bound_name(call, fn)
            if bound is None:
                unnamed.append((call, fn))
            elif bound == name:
                named.append((call, fn))
        return named or unnamed

    @staticmethod
    def _bound_name(call: ast.Call, fn: Function) -> Optional[str]:
        """The name or attribute the result of a create call is assigned to (``state = ...``,
        ``self.actor_state = ...``); None when it is returned or passed on."""
        for a in fn.of_type(ast.Assign, ast.AnnAssign):
            if a.value is call:
                targets = a.targets if isinstance(a, ast.Assign) else [a.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        return t.id
                    if isinstance(t, ast.Attribute):
                        return t.attr
        return None

    def _param_shape(self, fn: Function, param: str, depth: int, seen: Set) -> Tuple[Optional[str], bool]:
        if fn.is_module:
            return None, True
        key = id(fn), param
        if key in seen:
            return None, True
        seen = seen | {key}
        sites, paired = self.param_sources(fn, param)
        if not sites:
            return None, True
        shapes = set()
        for expr, scope in sites:
            s, _ = self.shape(expr, scope, depth + 1, seen)
            if s is None:
                return None, True
            shapes.add(s)
        if len(shapes) != 1:
            return None, True
        # a nested function is called from this file only
        return shapes.pop(), not paired and not fn.parent.is_module


def _text(e: ast.expr) -> Optional[str]:
    """``name`` or ``self.attr`` as written (None for anything else)."""
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name):
        return e.value.id + "." + e.attr
    return None


def _element_path(target: ast.expr, node: ast.expr) -> Optional[Tuple[int, ...]]:
    """The index path of ``node`` inside a tuple/list target (``a, (b, c) = ...``)."""
    if target is node:
        return ()
    if isinstance(target, (ast.Tuple, ast.List)):
        if any(isinstance(x, ast.Starred) for x in target.elts):
            return None
        for i, elt in enumerate(target.elts):
            sub = _element_path(elt, node)
            if sub is not None:
                return (i,) + sub
    return None
