"""Inputs for unannotated functions, from how their parameters are used (no JAX here).

The planner asks :func:`candidates` for a few argument lists (argument specs,
see :mod:`jaxlint.confirm.specs`) to trace an entry function with.  Each
parameter's uses in the function (and in the functions of the module it is
passed to) say what it holds:

* ``p["w"]`` a dict with key ``w``; ``p.step`` an object with that attribute
  (built as a pytree); ``for layer in p`` / ``p[-1]["w"]`` a list of those;
  ``a, b = p`` a tuple;
* ``p @ w``, ``p.shape[-1]``, ``p[:, 0]``, ``jnp.dot(p, ...)`` an array of at
  least that rank, ``h, w = p.shape`` of exactly that rank; an index into an
  array, ``one_hot`` or integer labels an ``int32`` array;
* the first argument of ``jax.random.*`` a PRNG key;
* ``range(p)``, a shape (``jnp.zeros((p, 3))``) a Python int, ``p == "relu"``
  that string: Python values, passed as static values unless the model says
  the function's transform traces that parameter.

Unknown array ranks take one value per candidate (2, 1, 0, 3, then 2 with
larger dimensions), every dimension the same size, so matmuls and
broadcasts agree.  Arguments at the module's own call sites that can be
sized statically (``jnp.ones((8, 3))``, literals, ``jax.random.key(0)``) are
used as they are (:mod:`jaxlint.confirm.callsites`).  JAX is the oracle:
the worker keeps the first candidate whose trace reaches the flagged line.
"""
from __future__ import annotations

import ast
import json
from typing import Dict, List, Optional, Tuple

from ..analysis import Function, SemanticModel
from ..analysis.kinds import proven
from .synthrefs import (TRAINSTATE_FIELDS, TRAINSTATE_METHODS, _axis_rank, _is_create, _is_module_object,
                        _resolve_inits, _state_global, _state_objects)

RANKS = (2, 1, 0, 3)
ARRAY_ATTRS = {
    "shape", "ndim", "dtype", "T", "mT", "size", "at", "mean", "sum", "std", "var", "max", "min", "prod", "reshape",
    "astype", "squeeze", "transpose", "flatten", "ravel", "argmax", "argmin", "all", "any", "clip", "dot", "round",
    "cumsum", "real", "imag", "conj", "swapaxes", "sort", "argsort", "item", "tolist", "block_until_ready", "copy",
    "nonzero", "repeat", "take", "astype", "aval", "addressable_data", "sharding",
}
DICT_METHODS = {"items", "keys", "values", "get", "pop", "setdefault", "update"}
SEQ_METHODS = {"append", "extend", "insert", "index", "count"}
SHAPE_FUNCS = {"zeros", "ones", "empty", "full", "arange", "eye", "identity", "linspace", "tri"}
INT_ARG_FUNCS = {"one_hot": 0, "take": 1, "take_along_axis": 1, "bincount": 0, "segment_sum": 1}
MATMUL_FUNCS = {"dot", "matmul", "inner", "outer", "tensordot", "vdot", "einsum"}
# layers whose input is integer ids (an embedding table's lookup): `nn.Embed(v, d)(tokens)`
INT_INPUT_LAYERS = {"flax.linen.Embed", "flax.nnx.Embed", "equinox.nn.Embedding", "haiku.Embed"}
RANDOM_SHAPE_ARG = 1       # jax.random.normal(key, shape)


class Use:
    """What one parameter (or one part of it) is used as."""

    __slots__ = ("array", "min_rank", "rank", "dtype", "key", "static", "value", "items", "attrs", "elem",
                 "index", "length", "callable", "replace", "init_of", "arith", "mapping", "truth", "trainstate",
                 "last")

    def __init__(self):
        self.array = False
        self.min_rank = 0
        self.rank: Optional[int] = None
        self.dtype: Optional[str] = None
        self.key = False
        self.static: Optional[str] = None      # "int" | "str" | "bool"
        self.value = None
        self.items: Dict[str, "Use"] = {}      # dict keys
        self.attrs: Dict[str, "Use"] = {}      # attributes
        self.elem: Optional["Use"] = None      # sequence elements
        self.index: Dict[int, "Use"] = {}      # p[0], a, b = p
        self.length: Optional[int] = None
        self.callable = False
        self.replace = False
        self.arith = False            # in arithmetic: an array even when unpacked like a tuple
        self.mapping = False          # indexed by keys the code does not spell (d[k] for k in d)
        self.truth = False            # tested for truth (`if p`, `not p`, `p and q`): a flag when nothing else
        self.last: Optional[int] = None   # its last axis: that of a module-level array it is combined with
        # built by a module-level object's ``init``: (object, "flax" | "optax", [(param, path) | None, ...]),
        # then the collection picked from it when the code wraps it (``{"params": p}``)
        self.init_of: Optional[tuple] = None
        # a Flax TrainState (``.apply_gradients`` / ``.apply_fn`` used): the module-level (model, optimizer)
        # (model, optimizer, a factory function of the module that returns one)
        self.trainstate: Optional[tuple] = None

    def child(self, step: Tuple[str, object]) -> "Use":
        kind, v = step
        table = {"key": self.items, "attr": self.attrs, "idx": self.index}.get(kind)
        if table is not None:
            return table.setdefault(v, Use())
        if self.elem is None:
            self.elem = Use()
        return self.elem

    @property
    def known(self) -> bool:
        return bool(self.array or self.key or self.static or self.items or self.attrs or self.elem or self.index)


# ------------------------------------------------------------ reading uses
class _Reader:
    def __init__(self, model: SemanticModel, depth: int = 0, memo=None):
        self.m = model
        self.depth = depth
        self.memo = memo if memo is not None else {}

    def params(self, fn: Function) -> Dict[str, Use]:
        key = id(fn)
        if key in self.memo:
            return self.memo[key]
        uses: Dict[str, Use] = {p: Use() for p in fn.all_params()}
        self.memo[key] = uses
        self._uses, self._alias = uses, {}
        node = fn.node
        parents: Dict[int, ast.AST] = {}
        body = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        self._keys = set()          # names bound to a mapping's keys: for k in d / for k, v in d.items()
        for root in body:
            for n in ast.walk(root):
                if isinstance(n, (ast.For, ast.comprehension)):
                    it, tgt = n.iter, n.target
                    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
                            it.func.attr in ("items", "keys") and isinstance(tgt, (ast.Tuple, ast.Name)):
                        first = tgt.elts[0] if isinstance(tgt, ast.Tuple) else tgt
                        if isinstance(first, ast.Name):
                            self._keys.add(first.id)
        for root in body:
            for n in ast.walk(root):
                for c in ast.iter_child_nodes(n):
                    parents[id(c)] = n
        # local names that alias a part of a parameter: x = p["a"]; for layer in p; a, b = p
        alias: Dict[str, Tuple[str, tuple]] = self._alias
        for _ in range(3):
            for root in body:
                for n in ast.walk(root):
                    self._bind(n, uses, alias)
        # locals computed from parameters by integer arithmetic (`width = 2 * obs_dim + 3`): used as a
        # shape, the parameters are Python ints too
        derived: Dict[str, set] = {}
        for root in body:
            for n in ast.walk(root):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                        and n.targets[0].id not in uses and isinstance(n.value, ast.BinOp):
                    names = _int_arith_names(n.value)
                    if names and names <= set(uses):
                        derived[n.targets[0].id] = names
        for root in body:
            for n in ast.walk(root):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    base = uses.get(n.id) if n.id not in alias else None
                    path: tuple = ()
                    if base is None and n.id in alias:
                        p, path = alias[n.id]
                        base = uses.get(p)
                    if base is not None:
                        self._use(fn, n, base, path, parents)
                    elif n.id in derived:
                        probe = Use()
                        self._use(fn, n, probe, (), parents)
                        if probe.static == "int":
                            for p in derived[n.id]:
                                uses[p].static = uses[p].static or "int"
        return uses

    def _path(self, e: ast.AST, uses: Dict[str, Use], alias) -> Optional[Tuple[str, tuple]]:
        """``p["a"].b[0]`` -> ("p", (("key", "a"), ("attr", "b"), ("idx", 0)))."""
        steps = []
        while True:
            if isinstance(e, ast.Name):
                if e.id in alias:
                    p, pre = alias[e.id]
                    return p, tuple(pre) + tuple(reversed(steps))
                return (e.id, tuple(reversed(steps))) if e.id in uses else None
            if isinstance(e, ast.Subscript):
                s = e.slice
                if isinstance(s, ast.Constant) and isinstance(s.value, str):
                    steps.append(("key", s.value))
                elif isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool):
                    steps.append(("idx", s.value))
                elif isinstance(s, ast.Slice):
                    pass                               # a slice of a list is a list of the same things
                else:
                    return None
                e = e.value
            elif isinstance(e, ast.Attribute) and e.attr not in ARRAY_ATTRS:
                steps.append(("attr", e.attr))
                e = e.value
            else:
                return None

    def _bind(self, n: ast.AST, uses, alias) -> None:
        targets, value, step = [], None, None
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            targets, value = [n.targets[0]], n.value
        elif isinstance(n, (ast.For, ast.comprehension)):
            targets, value, step = [n.target], n.iter, ("elem", None)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "enumerate" \
                    and value.args and isinstance(n.target, ast.Tuple) and len(n.target.elts) == 2:
                targets, value = [n.target.elts[1]], value.args[0]
        if value is None:
            return
        src = self._path(value, uses, alias)
        if src is None:
            return
        p, path = src
        if step is not None:
            path = path + (step,)
        for t in targets:
            if isinstance(t, ast.Name) and t.id not in uses:
                alias[t.id] = (p, path)
            elif isinstance(t, ast.Tuple) and all(isinstance(x, ast.Name) for x in t.elts):
                u = self._at(uses[p], path)
                u.length = len(t.elts)
                for i, x in enumerate(t.elts):
                    if x.id not in uses:
                        alias[x.id] = (p, path + (("idx", i),))

    @staticmethod
    def _at(u: Use, path: tuple) -> Use:
        for step in path:
            u = u.child(step)
        return u

    def _use(self, fn: Function, n: ast.AST, base: Use, path: tuple, parents) -> None:
        """Climb from a use of a parameter through subscripts and attributes, noting what it is used as."""
        u = self._at(base, path)
        cur = n
        while True:
            par = parents.get(id(cur))
            if par is None:
                return
            if isinstance(par, ast.Subscript) and par.slice is cur:
                u.array, u.dtype = True, u.dtype or "int32"       # an index into another array
                return
            if isinstance(par, ast.Subscript) and par.value is cur and not isinstance(par.ctx, ast.Load):
                s = par.slice                                     # x[i] = v: only arrays (and lists) take it
                elts = s.elts if isinstance(s, ast.Tuple) else [s]
                keyed = isinstance(s, ast.Name) and s.id in self.m.container_evidence(fn) | self._keys
                if not (isinstance(s, ast.Constant) and isinstance(s.value, str)) and not keyed:
                    u.array = True
                    u.min_rank = max(u.min_rank, len(elts))
                    return
            if isinstance(par, ast.Subscript) and par.value is cur:
                s = par.slice
                if isinstance(s, ast.Constant) and isinstance(s.value, str):
                    u = u.child(("key", s.value))
                    cur = par
                    continue
                if isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool):
                    u = u.child(("idx", s.value))
                    cur = par
                    continue
                if isinstance(s, ast.Slice):
                    u.min_rank = max(u.min_rank, 1)
                    cur = par
                    continue
                if isinstance(s, ast.Name) and s.id in self.m.container_evidence(fn) | self._keys:
                    u.mapping = True
                    return
                elts = s.elts if isinstance(s, ast.Tuple) else [s]
                dims = sum(1 for x in elts if not (isinstance(x, ast.Constant) and x.value in (None, Ellipsis)))
                u.array = True
                u.min_rank = max(u.min_rank, dims)
                return
            if isinstance(par, ast.Attribute) and par.value is cur:
                a = par.attr
                if a in ARRAY_ATTRS:
                    u.array = True
                    gp = parents.get(id(par))
                    if isinstance(gp, ast.Call) and gp.func is par:
                        u.min_rank = max(u.min_rank, _axis_rank(gp))
                    if a in ("T", "mT"):
                        u.min_rank = max(u.min_rank, 2)
                    if a == "shape":
                        self._shape_use(par, u, parents)
                    return
                if a in DICT_METHODS:
                    gp = parents.get(id(par))
                    if isinstance(gp, ast.Call) and a == "get" and gp.args and isinstance(gp.args[0], ast.Constant) \
                            and isinstance(gp.args[0].value, str):
                        u.child(("key", gp.args[0].value))
                    elif not u.items:
                        u.items.setdefault("a", Use())
                    return
                if a in SEQ_METHODS:
                    if u.elem is None:
                        u.elem = Use()
                    return
                if a == "replace":
                    u.replace = True
                    return
                if a in TRAINSTATE_METHODS:
                    u.trainstate = self._state_objects() + (self._state_factory(), _state_global(self.m))
                u = u.child(("attr", a))
                cur = par
                continue
            if isinstance(par, ast.BinOp) and isinstance(par.op, ast.MatMult):
                u.array = True
                u.min_rank = max(u.min_rank, 1)
                return
            if isinstance(par, ast.UnaryOp) and isinstance(par.op, ast.Not) \
                    or isinstance(par, ast.BoolOp) \
                    or isinstance(par, (ast.If, ast.While, ast.IfExp)) and par.test is cur:
                u.truth = True
                return
            if isinstance(par, (ast.BinOp, ast.UnaryOp)):
                u.arith = True
                if isinstance(par, ast.BinOp) and not isinstance(par.op, ast.MatMult):
                    # `batch - FEATURE_MEAN`: broadcasting with a module-level array of a stated size
                    # needs the same last axis (a value the module builds, not a guess)
                    n = self._global_last(fn, par.right if par.left is cur else par.left)
                    if n is not None:
                        u.last = u.last or n
                return
            if isinstance(par, ast.Compare):
                for c in [par.left] + list(par.comparators):
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        u.static, u.value = "str", u.value if u.value is not None else c.value
                return
            if isinstance(par, ast.Tuple) and isinstance(parents.get(id(par)), ast.Call):
                call = parents[id(par)]
                if self._is_shape_arg(call, par):
                    u.static = "int"
                return
            if isinstance(par, ast.Call):
                self._call_use(fn, par, cur, u)
                return
            if isinstance(par, ast.Dict) and cur in par.values:
                # `model.apply({"params": p, ...}, x)`: `p` is the "params" collection of what
                # `model.init(rngs, x)` returns
                k = par.keys[par.values.index(cur)]
                call = parents.get(id(par))
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(call, ast.Call) and \
                        call.args and call.args[0] is par and self._init_use(fn, call, 0, u):
                    u.init_of = u.init_of + (k.value,)
                return
            if isinstance(par, (ast.For, ast.comprehension)) and par.iter is cur:
                if u.elem is None:
                    u.elem = Use()
                return
            if isinstance(par, ast.keyword):
                call = parents.get(id(par))
                if isinstance(call, ast.Call):
                    self._call_use(fn, call, cur, u, keyword=par.arg)
                return
            return

    def _init_use(self, fn: Function, call: ast.Call, pos: Optional[int], u: Use) -> bool:
        """``model.apply(p, x)``: ``p`` is what ``model.init(rngs, x)`` returns; ``tx.update(g, p, params)``:
        ``p`` is ``tx.init(params)``."""
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "apply_fn" and pos == 0 and self._state_objects()[0]:
            # `state.apply_fn(variables, x)` of a TrainState made from the module's Flax model
            u.init_of = (self._state_objects()[0], "flax", self._refs(call)[1:])
            return True
        if not isinstance(f, ast.Attribute) or not _is_module_object(self.m, fn, f.value):
            return False
        refs = self._refs(call)
        if f.attr == "apply" and pos == 0:
            u.init_of = (f.value.id, "flax", refs[1:])
            return True
        if f.attr == "update" and pos == 1 and len(call.args) >= 1:
            u.init_of = (f.value.id, "optax", [refs[2] if len(refs) > 2 else refs[0]])
            return True
        return False

    def _refs(self, call: ast.Call) -> list:
        # references by name: a closure's free variable is the entry's parameter of that name
        free = {n.id: Use() for a in call.args for n in ast.walk(a) if isinstance(n, ast.Name)}
        return [self._path(a, {**free, **self._uses}, self._alias) for a in call.args]

    def _state_objects(self) -> Tuple[Optional[str], Optional[str]]:
        """(Flax model, optax transformation): the module-level objects a TrainState of this module
        is made of: those ``TrainState.create(apply_fn=m.apply, tx=t)`` names, else the only one of
        each kind the module binds."""
        got = self.memo.get("state-objects")
        if got is None:
            got = self.memo["state-objects"] = _state_objects(self.m)
        return got

    def _state_factory(self) -> Optional[Tuple[str, list]]:
        """A module-level function of this module that returns ``SomeState.create(apply_fn=...)``
        (``create_train_state(rng)``), with the uses of its parameters: the code's own way to make
        its TrainState, when no module-level optimizer says what it holds."""
        if "state-factory" not in self.memo:
            self.memo["state-factory"] = None
            for f in self.m.functions:
                if f.is_module or f.is_lambda or f.cls is not None or f.parent is None or not f.parent.is_module:
                    continue
                creates = {t.id for n in ast.walk(f.node) if isinstance(n, ast.Assign) and _is_create(n.value)
                           for t in n.targets if isinstance(t, ast.Name)}
                if any(isinstance(r, ast.Return) and (_is_create(r.value) or isinstance(r.value, ast.Name) and
                                                      r.value.id in creates) for r in ast.walk(f.node)):
                    uses = _Reader(self.m, self.depth + 1, self.memo).params(f) if self.depth < 3 else {}
                    required = [p for p in f.params if f.defaults.get(p) is None]
                    self.memo["state-factory"] = (f.name, [(p, uses.get(p) or Use()) for p in required])
                    break
        return self.memo["state-factory"]

    def _global_last(self, fn: Function, e: ast.AST) -> Optional[int]:
        """The last axis of a module-level array ``e`` names, when the module states it:
        ``np.zeros(NUM_FEATURES)``, ``jnp.ones((3, 8))``, ``np.full(8, 0.5)``."""
        if not isinstance(e, ast.Name) or e.id in self._uses or self.m.lookup_function(e.id, fn) is not None:
            return None
        v = self.m.single_value(e.id, self.m.module)
        if not (isinstance(v, ast.Call) and v.args):
            return None
        q = self.m.call_qualname(v) or ""
        if not (q.startswith(("jax.numpy.", "numpy.")) and q.rsplit(".", 1)[-1] in ("zeros", "ones", "full", "empty")):
            return None
        shape = v.args[0]
        last = shape.elts[-1] if isinstance(shape, (ast.Tuple, ast.List)) and shape.elts else shape
        if isinstance(last, ast.Name):
            last = self.m.single_value(last.id, self.m.module)
        if isinstance(last, ast.Constant) and isinstance(last.value, int) and not isinstance(last.value, bool) \
                and last.value > 0:
            return last.value
        return None

    def _shape_use(self, shape: ast.Attribute, u: Use, parents) -> None:
        par = parents.get(id(shape))
        if isinstance(par, ast.Subscript) and par.value is shape:
            s = par.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, int):
                u.min_rank = max(u.min_rank, s.value + 1 if s.value >= 0 else -s.value)
            elif isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub) and isinstance(s.operand, ast.Constant):
                u.min_rank = max(u.min_rank, int(s.operand.value))
            elif isinstance(s, ast.Slice) and isinstance(s.upper, ast.Constant) and isinstance(s.upper.value, int):
                u.min_rank = max(u.min_rank, s.upper.value)
        elif isinstance(par, ast.Assign) and par.value is shape and isinstance(par.targets[0], ast.Tuple):
            u.rank = len(par.targets[0].elts)

    def _is_shape_arg(self, call: ast.Call, arg: ast.AST) -> bool:
        q = self.m.call_qualname(call) or ""
        short = q.rsplit(".", 1)[-1]
        if q.startswith(("jax.numpy.", "numpy.")) and short in SHAPE_FUNCS:
            return bool(call.args) and call.args[0] is arg
        if q.startswith("jax.random.") and len(call.args) > RANDOM_SHAPE_ARG:
            return call.args[RANDOM_SHAPE_ARG] is arg
        if isinstance(call.func, ast.Attribute) and call.func.attr == "reshape":
            return True
        return any(k.arg == "shape" and k.value is arg for k in call.keywords)

    def _int_layer(self, fn: Function, func: ast.AST) -> bool:
        """``func`` is an embedding layer (``nn.Embed(...)``, or a name bound once to one here)."""
        if isinstance(func, ast.Name):
            func = self.m.single_value(func.id, fn)
        return isinstance(func, ast.Call) and (self.m.call_qualname(func, fn) or "") in INT_INPUT_LAYERS

    def _call_use(self, fn: Function, call: ast.Call, arg: ast.AST, u: Use, keyword: Optional[str] = None) -> None:
        if call.func is arg:
            u.callable = True
            model = self._state_objects()[0]
            if isinstance(arg, ast.Attribute) and arg.attr == "apply_fn" and model is not None:
                # `state.apply_fn(variables, x)`: the arguments `model.init` takes, for the state's params
                u.init_of = (model, "flax", self._refs(call)[1:])
            return
        q = self.m.call_qualname(call) or ""
        short = q.rsplit(".", 1)[-1]
        pos = next((i for i, a in enumerate(call.args) if a is arg), None)
        if isinstance(call.func, ast.Name) and call.func.id == "range":
            u.static = "int"
            return
        if isinstance(call.func, ast.Name) and call.func.id == "len":
            if not (u.items or u.attrs):
                u.min_rank = max(u.min_rank, 1)
            return
        if q.startswith("jax.random."):
            if short in ("PRNGKey", "key") and pos == 0:
                u.static = u.static or "int"
            elif pos == 0 or keyword == "key":
                u.key = True
            elif self._is_shape_arg(call, arg) or keyword == "shape":
                u.static = "int"
            else:
                u.array = True
            return
        if self._is_shape_arg(call, arg) or (keyword == "shape"):
            u.static = "int"
            return
        if pos == 0 and self._int_layer(fn, call.func):
            u.array, u.dtype = True, u.dtype or "int32"
            return
        if short in INT_ARG_FUNCS and pos == INT_ARG_FUNCS[short] and (q.startswith("jax.") or "." not in q):
            u.array, u.dtype = True, "int32"
            return
        if "integer_labels" in short and (pos == 1 or keyword == "labels"):
            u.array, u.dtype = True, "int32"
            u.rank = u.rank if u.rank is not None else 1
            return
        if short in MATMUL_FUNCS and q.startswith(("jax.", "numpy.")):
            u.array = True
            u.min_rank = max(u.min_rank, 1)
            return
        if q in _TRANSFORM_NAMES:          # a transform's operand: a pytree, whatever its body makes of it
            return
        if q.startswith(("jax.numpy.", "jax.nn.", "jax.lax.", "numpy.", "optax.")):
            u.array = True
            if pos == 0:
                u.min_rank = max(u.min_rank, _axis_rank(call))
            return
        # a function of this module: what it does with the argument
        if self._init_use(fn, call, pos, u):
            return
        if self.depth >= 3 or pos is None and keyword is None:
            return
        target = self.m.resolve_callable(call.func, fn)
        if target is None or target.function is fn:
            return
        pairs, _ = self.m.bind_arguments(target, call)
        for p, a in pairs:
            if a is arg:
                sub = _Reader(self.m, self.depth + 1, self.memo).params(target.function).get(p)
                if sub is not None:
                    _merge(u, sub)


def _trainstate_spec(u: Use, rank: int, dim: int, traced: bool, name: str, statics=frozenset()) -> dict:
    model, tx, factory, state_global = u.trainstate
    if tx is None and state_global is not None:
        return {"t": "global", "name": state_global}
    if tx is None and factory is not None:
        fname, params = factory
        return {"t": "factory", "fn": fname,
                "args": [spec_of(pu, rank, dim, False, p, statics) for p, pu in params]}
    if tx is None:
        raise Unbuildable(f"`{name}` is used as a Flax TrainState, but no module-level optax transformation "
                          f"says which optimizer it holds")
    items: Dict[str, dict] = {}
    apply_fn = u.attrs.get("apply_fn")
    params = u.attrs.get("params")
    fallback = {"t": "array", "dtype": "float32", "shape": [dim] * max(rank, 1)}
    if apply_fn is not None and apply_fn.init_of is not None and apply_fn.init_of[0] == model:
        items["params"] = {"t": "init", "obj": model, "kind": "flax", "refs": apply_fn.init_of[2], "pick": "params",
                           "fallback": fallback}
    elif params is not None and params.known:
        items["params"] = spec_of(params, rank, dim, traced, f"{name}.params", statics)
    else:
        items["params"] = fallback
    for k, v in u.attrs.items():
        if k not in TRAINSTATE_FIELDS:
            items[k] = _attr_spec(k, v, rank, dim, traced, f"{name}.{k}", statics)
    return {"t": "trainstate", "model": model if apply_fn is not None else None, "tx": tx, "items": items}


def _transform_names():
    from ..analysis import knowledge as K
    return set(K.TRANSFORMS)


class _Names:
    def __contains__(self, q):
        return q in _transform_names()


_TRANSFORM_NAMES = _Names()
KEY_NAMES = ("key", "rng", "prng", "rng_key", "prng_key", "rngkey", "seed_key")


def _merge(into: Use, other: Use, depth: int = 0) -> None:
    if depth > 6:
        return
    into.array |= other.array
    into.key |= other.key
    into.callable |= other.callable
    into.replace |= other.replace
    into.init_of = into.init_of or other.init_of
    into.trainstate = into.trainstate or other.trainstate
    into.arith |= other.arith
    into.mapping |= other.mapping
    into.truth |= other.truth
    into.min_rank = max(into.min_rank, other.min_rank)
    into.last = into.last or other.last
    into.rank = into.rank if into.rank is not None else other.rank
    into.dtype = into.dtype or other.dtype
    if other.static and not into.static:
        into.static, into.value = other.static, other.value
    into.length = into.length or other.length
    for table, otable in ((into.items, other.items), (into.attrs, other.attrs), (into.index, other.index)):
        for k, v in otable.items():
            _merge(table.setdefault(k, Use()), v, depth + 1)
    if other.elem is not None:
        if into.elem is None:
            into.elem = Use()
        _merge(into.elem, other.elem, depth + 1)


def param_uses(model: SemanticModel, fn: Function) -> Dict[str, Use]:
    return _Reader(model).params(fn)


# ------------------------------------------------------------ uses -> specs
class Unbuildable(Exception):
    pass


def concrete(spec: dict) -> dict:
    """``spec`` as a concrete value: arrays and keys are built as real values (closed over by the
    trace, never tracers); Python values stay as they are."""
    return spec if spec.get("t") in ("static", "concrete") else {"t": "concrete", "of": spec}


def _attr_spec(attr: str, u: Use, rank: int, dim: int, traced: bool, name: str, statics) -> dict:
    """The spec of attribute ``attr`` of a synthesized object: a static pytree field (a
    ``register_static`` class's attribute, ``struct.field(pytree_node=False)``, ``meta_fields``...,
    :func:`jaxlint.analysis.statics.static_names`) is a Python value, never a tracer."""
    if attr in statics:
        return concrete(spec_of(u, rank, dim, False, name, statics))
    return spec_of(u, rank, dim, traced, name, statics)


def spec_of(u: Use, rank: int, dim: int, traced: bool, name: str, statics=frozenset()) -> dict:
    """One argument spec for a use, with ``rank`` for arrays of unknown rank; ``traced``: the value
    may hold tracers (else a value used as a Python int is one); ``statics``: attribute names that
    classes declare static."""
    if u.trainstate is not None and u.attrs:
        return _trainstate_spec(u, rank, dim, traced, name, statics)
    if u.callable and not (u.items or u.attrs):
        raise Unbuildable(f"`{name}` is called like a function")
    short = name.rsplit(".", 1)[-1].strip("[]'\"").lower()
    if u.key or not u.known and not u.arith and (short in KEY_NAMES or short.endswith(("_key", "_rng"))):
        return {"t": "key", "shape": []}       # an unused or passed-on `key`: JAX code names its keys
    if u.init_of is not None:
        init, u.init_of = u.init_of, None
        try:
            fallback = spec_of(u, rank, dim, traced, name, statics)
        finally:
            u.init_of = init
        spec = {"t": "init", "obj": init[0], "kind": init[1], "refs": init[2], "fallback": fallback}
        if len(init) > 3:
            spec["pick"] = init[3]          # one collection of the variables (``{"params": p}``)
        return spec
    if u.truth and not (u.array or u.arith or u.key or u.static or u.items or u.attrs or u.elem or u.index
                        or u.callable or u.mapping or u.init_of is not None):
        # used only as a condition (`deterministic=not train`): a Python flag, as its callers pass it;
        # an array here would make JAX raise where the real code never does
        return {"t": "static", "v": True}
    if u.static and not u.array:
        if u.static == "str":
            return {"t": "static", "v": u.value if u.value is not None else "?"}
        if traced:
            return {"t": "array", "dtype": "int32", "shape": [], "weak": True}
        return {"t": "static", "v": dim}
    if u.mapping and not u.items:
        return {"t": "dict", "items": {}, "like": True}       # keys as another dict argument's (below)
    if u.items:
        return {"t": "dict", "items": {k: spec_of(v, rank, dim, traced, f"{name}[{k!r}]", statics)
                                       for k, v in u.items.items()}}
    if u.attrs or u.replace:
        return {"t": "ns", "items": {k: _attr_spec(k, v, rank, dim, traced, f"{name}.{k}", statics)
                                     for k, v in u.attrs.items()}}
    if u.length and u.arith and not u.elem:                   # x, y, z = state; state + dt * f(state)
        r = max(1, u.rank if u.rank is not None else max(u.min_rank, rank))
        return {"t": "array", "dtype": u.dtype or "float32", "shape": [u.length] + [dim] * (r - 1)}
    structured = any(v.known or v.callable for v in u.index.values())
    if u.elem is not None or (u.index and not u.array and (structured or u.length)):
        idx = [i for i in u.index if isinstance(i, int)]
        # three items: a loop over `p[:-1]` then runs twice, as a loop over layers does
        n = u.length or max([3] + [i + 1 for i in idx if i >= 0] + [-i for i in idx if i < 0])
        items = []
        for i in range(n):
            part = u.index.get(i) or u.index.get(i - n)
            merged = Use()
            if u.elem is not None:
                _merge(merged, u.elem)
            if part is not None:
                _merge(merged, part)
            items.append(spec_of(merged, rank, dim, traced, f"{name}[{i}]", statics))
        return {"t": "tuple" if u.length and u.elem is None else "list", "items": items}
    r = u.rank if u.rank is not None else max(u.min_rank, 1 if u.index else 0, rank)
    shape = [dim] * r
    if u.last and shape:
        shape[-1] = u.last
    return {"t": "array", "dtype": u.dtype or "float32", "shape": shape}


def param_tracer(model: SemanticModel, fn: Function, p: str) -> bool:
    """Whether parameter ``p`` of ``fn`` may be synthesized as a tracer: the model proves it traced
    (a parameter the function's trace traces, not static, its kind a proven tracer -- not one that
    rests on an unknown; never under differentiation alone, where tracers carry values).  Anything
    else is a Python value or a concrete array: synthesized inputs follow the staticness rules of
    :mod:`jaxlint.analysis.staticness` as the static analysis does."""
    if not fn.contexts or p in fn.static_params or p not in fn.traced_params:
        return False
    if model.concrete_primal(fn):
        return False
    return proven(model.kinds(fn).get(p, 0))


def _residual_items(model: SemanticModel, fn: Function, name: str, items: List[dict]) -> List[dict]:
    res, fwd = fn.param_residuals[name]
    if len(res.elts) != len(items):
        return [concrete(i) for i in items]
    return [i if proven(model.kind(e, fwd)) else concrete(i) for e, i in zip(res.elts, items)]


def candidates(model: SemanticModel, fn: Function, params: List[dict], dim: int,
               given: Optional[Dict[str, dict]] = None, limit: int = 5) -> Tuple[List[dict], Optional[str]]:
    """Up to ``limit`` call specs ``{"args", "kwargs", "source"}`` for ``fn`` and, when none can be
    built, the reason (the list then holds one partial call, ``"?"`` for what could not be built, for
    the entry to suggest).  ``params`` is the planner's parameter list (annotation specs in "ann");
    ``given`` maps parameters to specs taken from call sites."""
    uses = param_uses(model, fn)
    statics = frozenset(model.static_fields)
    given = given or {}
    variants = [(r, dim) for r in RANKS] + [(2, dim * 4)]
    out: List[dict] = []
    seen = set()
    synthesized = False
    for rank, d in variants:
        args, kwargs, positional_ok, why = [], {}, True, None
        for p in params:
            if p["kind"] in ("var", "varkw"):
                continue
            if p["has_default"] and p["name"] not in given:
                positional_ok = False
                continue
            name = p["name"]
            tracer = p.get("tracer", False)
            if name in given:
                spec = dict(given[name], src="call site")
            elif p["ann"] is not None and p["ann"]["t"] == "array" and (uses.get(name) or Use()).key:
                # `key: jax.Array` used as a PRNG key: a key, which the annotation also allows
                spec = {"t": "key", "shape": [], "src": "annotation"}
            elif p["ann"] is not None and not (p["static"] and p["ann"]["t"] != "static"):
                spec = dict(p["ann"], src="annotation")
            else:
                synthesized = True
                u = uses.get(name) or Use()
                try:
                    spec = spec_of(u, rank, d, tracer, name, statics)
                except Unbuildable as exc:
                    why, spec = why or str(exc), {"t": "static", "v": "?"}
                if p["static"] and spec["t"] == "ns":
                    # a static argument read by attribute (a config object): a plain Python object
                    # whose attributes are Python values, as the program passes one
                    spec = {"t": "pyobj", "items": {k: concrete(spec_of(v, rank, d, False, f"{name}.{k}", statics))
                                                    for k, v in u.attrs.items()}}
                elif p["static"] and spec["t"] != "static":
                    spec = {"t": "static", "v": d}
                spec = dict(spec, src="synthesized")
            if not tracer:
                # not proven traced: a Python value or a concrete array, as the caller passes it
                src = spec.pop("src")
                spec = dict(concrete(spec), src=src)
            elif name in fn.param_residuals and spec.get("t") in ("tuple", "list"):
                # a custom_vjp residual tuple: what `fwd` put there as a Python value (a shape, an
                # int) reaches `bwd` as one; only `fwd`'s traced values are tracers
                spec = dict(spec, items=_residual_items(model, fn, name, spec["items"]))
            if p["kind"] == "pos" and positional_ok:
                args.append(spec)
            else:
                kwargs[name] = spec
        if why is not None:
            return [{"args": args, "kwargs": kwargs, "source": "partial"}], why
        try:
            _resolve_inits(args, kwargs, [p["name"] for p in params if p["kind"] == "pos"],
                           {"t": "array", "dtype": "float32", "shape": [d] * max(rank, 1)})
        except Unbuildable as exc:
            return out, str(exc)
        key = json.dumps([args, kwargs], sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        source = "call site" if given and not synthesized else ("synthesized" if synthesized else "annotations")
        out.append({"args": args, "kwargs": kwargs, "source": source})
        if not synthesized or len(out) >= limit:
            break
    return out, None




def _int_arith_names(e: ast.AST) -> Optional[set]:
    """The names of an expression made only of names, integer literals and ``+ - * //``; else None."""
    if isinstance(e, ast.Name):
        return {e.id}
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return set()
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        a, b = _int_arith_names(e.left), _int_arith_names(e.right)
        return None if a is None or b is None else a | b
    return None
