"""Which parameters carry Python configuration rather than arrays (a part of
:class:`~jaxlint.analysis.model.SemanticModel`, used by the transforms when they
decide what a module method, a contract or a seed traces).

A parameter is configuration when it is declared so (annotated ``bool``/``int``/
``str``/``Literal``/optional thereof, defaulted to a bool/str/int literal) or when
how it is used says so: it has a Python use (a truth test, ``not``, a string
comparison, a ``range()`` bound, overriding a scalar field of its module) and no
array use (an attribute, a subscript, an argument of a jnp/lax/NumPy call,
arithmetic).  When the evidence is mixed, it is an array.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

from . import knowledge as K
from .kinds import CONTAINER, JAX, TRACED, UNSURE, proven
from .narrowing import _call_argument
from .scopes import Function


class ConfigParamsMixin:
    def _param_kind(self, p: str, fn: Function, evidence) -> int:
        """The kind parameter ``p`` of ``fn`` has on entry (before any rebinding of it); a
        ``dtype`` is never an array argument (jit rejects it unless static)."""
        if p == "dtype" or p.endswith("_dtype"):
            return 0
        k = 0
        if fn.contexts and p in fn.traced_params:
            got = fn.param_kinds.get(p)
            if got is None:
                got = TRACED if fn.filtered_only else TRACED | JAX
                if fn.filter_traced and not self._array_evidence(fn, p, arithmetic=False) \
                        and not self.annotation_kind(fn.param_nodes[p].annotation, fn.parent) & JAX \
                        and not self._given_tracer(fn, p) and not self._array_passed(fn, p):
                    # an Equinox filter transform traces array leaves only and keeps a Python int
                    # static (``ctx_size`` sliced with, ``k`` of a top-k): nothing here says which
                    # this parameter is -- unknown, also where it is handed on (``partial(f, n)``)
                    got |= UNSURE
                if self._module_traced_only(fn) and not self._array_evidence(fn, p) \
                        and not self.annotation_kind(fn.param_nodes[p].annotation, fn.parent) & JAX \
                        and not self._given_tracer(fn, p):
                    # a module method's parameter that no call site here fills and the body does not
                    # use as an array (a flag passed on, a config): a tracer only if the module's caller
                    # passes one through its transform -- unknown
                    got |= UNSURE
            if got & JAX and self._used_as_object(fn, p):
                # ``env.reset()``: the body uses it as no array is used -- a pytree node (its
                # leaves may be traced), whose truth value is Python's, not a tracer's
                got &= ~JAX
            k |= got
        ann = fn.param_nodes[p].annotation
        if ann is not None:
            k |= self.annotation_kind(ann, fn.parent)
        if p == fn.vararg or p == fn.kwarg or p in evidence:
            k |= CONTAINER
        return k

    def _given_tracer(self, fn: Function, p: str) -> bool:
        """A call of ``fn`` from traced code passes a proven tracer for ``p`` (``pool(h, tokens
        != 0)`` in a module's ``__call__`` whose ``tokens`` it feeds to a layer)."""
        for c in fn.contexts:
            if c.transform != "call" or c.caller is None:
                continue
            a = _call_argument(c, fn, p)
            if isinstance(a, ast.expr) and proven(self.kind(a, c.caller)):
                return True
        return False

    def _array_passed(self, fn: Function, p: str) -> bool:
        """A call of ``fn`` in this module passes an array for ``p`` (``f(jnp.ones(()), 3)``):
        the filter transform traces that argument."""
        index = self.__dict__.get("_filter_call_sites")
        if index is None:
            index = self.__dict__["_filter_call_sites"] = {}
            targets = {id(g) for g in self.functions if g.filter_traced}
            if targets:
                for scope in self.functions:
                    for call in scope.of_type(ast.Call):
                        if call.func.__class__ not in (ast.Name, ast.Attribute):
                            continue
                        t = self.resolve_callable(call.func, scope)
                        if t is not None and id(t.function) in targets:
                            index.setdefault(id(t.function), []).append((call, scope, t))
        for call, scope, t in index.get(id(fn), ()):
            pairs, _ = self.bind_arguments(t, call)
            for q, a in pairs:
                if q == p and self.kind(a, scope) & JAX:
                    return True
        return False

    def _array_evidence(self, fn: Function, p: str, arithmetic: bool = True) -> bool:
        """The body of ``fn`` uses parameter ``p`` as an array: an arithmetic operand (unless
        ``arithmetic`` is False: Python ints do arithmetic too), ``.shape`` and the like, or an
        argument of a ``jax.numpy``/``lax`` function or of a layer (``nn.Dense(4)(x)``)."""
        if arithmetic and self._used_as_array(fn, p):
            return True
        if not arithmetic and any(n.__class__ is ast.Attribute and n.value.__class__ is ast.Name
                                  and n.value.id == p and n.attr in ("shape", "ndim", "dtype", "T", "at")
                                  for n in fn.walk()):
            return True
        memo = self._memo("_array_evidence_cache")
        got = memo.get(id(fn))
        if got is None:
            got = set()
            for c in fn.of_type(ast.Call):
                f = c.func
                if self.layer_call(c, fn):
                    array_call = True
                elif f.__class__ in (ast.Name, ast.Attribute):
                    q = self.qualname(f, fn)
                    array_call = q is not None and q.startswith(K.ARRAY_MODULES) and q not in K.STATIC_RESULT_CALLS
                else:
                    array_call = False
                if array_call:
                    q = self.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
                    shape = K.SHAPE_ARGUMENTS.get(q) if q is not None else None
                    skip = () if shape is None else (range(len(c.args)) if K.ALL_POSITIONS in shape[0] else shape[0])
                    got.update(a.id for i, a in enumerate(c.args) if a.__class__ is ast.Name and i not in skip)
            memo[id(fn)] = got
        return p in got

    def layer_call(self, call: ast.Call, fn: Function) -> bool:
        """``call`` applies a neural-network layer of a library to its arguments (arrays in,
        an array out): ``nn.Dense(4)(x)``, or ``embed(x)`` with ``embed = nn.Embed(...)`` bound in
        this function."""
        f = call.func
        if f.__class__ is ast.Name and f.id in fn.locals:
            f = self.single_value(f.id, fn)
            if f.__class__ is not ast.Call:
                return False
        elif f.__class__ is not ast.Call:
            return False
        q = self.qualname(f.func, fn) if f.func.__class__ in (ast.Name, ast.Attribute) else None
        return q is not None and q.startswith(K.LAYER_PREFIXES)

    def _module_traced_only(self, fn: Function, _seen=None) -> bool:
        """``fn`` is traced only as a Flax/NNX/Equinox module method (``init``/``apply`` run it
        under whatever transform their caller applies), or called only from such methods
        (``self.predictor(...)`` in a module's ``__call__``), not by a transform, a contract,
        another module's call or the configuration."""
        seen = _seen if _seen is not None else set()
        if id(fn) in seen:
            return True
        seen.add(id(fn))
        return bool(fn.contexts) and all(
            c.transform.endswith(".Module") or (c.transform == "call" and c.caller is not None
                                                and self._module_traced_only(c.caller, seen))
            for c in fn.contexts)

    def _is_config_param(self, fn: Function, p: str) -> bool:
        """A parameter of a function traced with ``inferred`` confidence (a module
        method, a library contract, another module's seed) or by an Equinox filter
        transform that carries Python configuration rather than arrays: declared so
        (:meth:`_declared_config`) or used so (:meth:`_config_by_use`)."""
        return self._declared_config(fn, p) or self._config_by_use(fn, p)

    def _config_by_use(self, fn: Function, p: str) -> bool:
        """The body of ``fn`` uses parameter ``p`` as a Python value and never as an
        array: at least one use that needs a Python value (a truth test, ``not``, the
        left operand of ``and``/``or``, a comparison with a string, a ``range()``
        bound), or ``p`` overrides a scalar field of the same name of its module
        (``def __call__(self, x, seqhw=None)`` beside ``seqhw: Optional[int]``), or
        defaults to an int literal; and no use that needs an array (an attribute or
        method, a subscript, an argument of a ``jax.numpy``/``lax``/NumPy call,
        arithmetic unless the default is a number)."""
        got = self._param_uses(fn).get(p)
        if got is None:
            return False
        python, array, arith, _neutral = got
        default = fn.defaults.get(p)
        if default is not None and default.__class__ is ast.UnaryOp and default.op.__class__ is ast.USub:
            default = default.operand
        int_default = default.__class__ is ast.Constant and isinstance(default.value, int)
        if int_default or self._overrides_scalar_field(fn, p):
            python += 1
        if arith and not int_default:
            array += arith
        return python > 0 and array == 0

    def _overrides_scalar_field(self, fn: Function, p: str) -> bool:
        """``p`` is also a field of ``fn``'s module class annotated with a scalar type."""
        info = fn.cls
        if info is None or not info.module_kind or p not in info.fields:
            return False
        for stmt in info.node.body:
            if stmt.__class__ is ast.AnnAssign and stmt.target.__class__ is ast.Name and stmt.target.id == p:
                return self._scalar_annotation(stmt.annotation)
        return False

    def _param_uses(self, fn: Function) -> Dict[str, List[int]]:
        """For each parameter of ``fn``: [python uses, array uses, arithmetic uses] of its
        name in ``fn`` and the closures that see it (built once per function)."""
        cache = self._memo("_use_evidence")
        got = cache.get(id(fn))
        if got is not None:
            return got
        params = set(fn.all_params()) - ({fn.self_name} if fn.self_name else set())
        got = {p: [0, 0, 0, 0] for p in params}
        cache[id(fn)] = got
        if not params or fn.is_lambda or fn.is_module:
            return got
        parents: Dict[int, ast.AST] = {}
        stack: List[ast.AST] = list(fn.node.body)
        while stack:
            node = stack.pop()
            if node.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                shadowed = {a.arg for a in ast.walk(node.args) if a.__class__ is ast.arg}
                if shadowed & params:
                    continue
            for child in ast.iter_child_nodes(node):
                parents[id(child)] = node
                stack.append(child)
                if child.__class__ is ast.Name and child.id in params and child.ctx.__class__ is ast.Load:
                    got[child.id][self._use_of(child, node, parents, fn)] += 1
        return got

    def _use_of(self, name: ast.Name, parent: ast.AST, parents: Dict[int, ast.AST], fn: Function) -> int:
        """0: a use that needs a Python value, 1: one that needs an array, 2: arithmetic,
        3: neutral (passed on, tested for ``None``, compared with a number, stored)."""
        t = parent.__class__
        if t in (ast.If, ast.While, ast.IfExp, ast.Assert):
            return 0 if parent.test is name else 3
        if t is ast.UnaryOp:
            return 0 if parent.op.__class__ is ast.Not else 2
        if t is ast.BoolOp:
            if parent.values[-1] is not name:
                return 0
            # the last operand is tested too when the whole ``and``/``or`` is a test
            up = parents.get(id(parent))
            return 0 if up is not None and up.__class__ in (ast.If, ast.While, ast.IfExp, ast.Assert) \
                and up.test is parent else 3
        if t is ast.Compare:
            others = [parent.left] + list(parent.comparators)
            if any(o.__class__ is ast.Constant and isinstance(o.value, str) for o in others):
                return 0
            return 3
        if t is ast.BinOp or t is ast.AugAssign:
            return 2
        if t is ast.Attribute or t is ast.Starred:
            return 1
        if t is ast.Subscript:
            if parent.value is name:
                return 1
            box = parent.value
            if box.__class__ is ast.Name and box.id in self.container_evidence(fn):
                return 0   # a key of a dict (``tables[kind]``)
            return 3
        if t is ast.Call:
            if parent.func is name:
                return 1
            q = self.qualname(parent.func, fn) if parent.func.__class__ in (ast.Name, ast.Attribute) else None
            if q == "range":
                return 0
            if q in ("getattr", "hasattr", "setattr", "delattr") and len(parent.args) > 1 \
                    and parent.args[1] is name:
                return 0   # an attribute name
            if q in K.SHAPE_FIRST_CALLS and parent.args and parent.args[0] is name:
                return 0   # a shape or size: ``jnp.zeros(n)``
            if q is not None and (q.startswith(K.ARRAY_MODULES) or q.startswith("numpy.")):
                return 1
            return 3
        if t is ast.keyword:
            if parent.arg == "shape":
                return 0   # ``jax.random.normal(key, shape=n)``
            call = parents.get(id(parent))
            if call is not None and call.__class__ is ast.Call \
                    and call.func.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(call.func, fn)
                if q is not None and (q.startswith(K.ARRAY_MODULES) or q.startswith("numpy.")):
                    return 1
            return 3
        if t in (ast.Tuple, ast.List, ast.Assign, ast.AnnAssign, ast.Return, ast.FormattedValue,
                 ast.NamedExpr, ast.Expr, ast.Slice):
            return 3
        return 1

    @staticmethod
    def _scalar_annotation(ann: Optional[ast.expr]) -> bool:
        """A scalar annotation: ``bool``, ``int | None``, ``Optional[str]``, ``Literal[...]``."""
        if ann is not None and isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                ann = None
        if ann is None:
            return False
        names = set()
        for n in ast.walk(ann):
            if isinstance(n, ast.Name):
                names.add(n.id)
            elif isinstance(n, ast.Attribute):
                names.add(n.attr)
        if "Literal" in names:
            return True
        return bool(names & K.SCALAR_ANNOTATIONS) and not names & {"Array", "ndarray", "ArrayLike", "Any"}

    def _declared_config(self, fn: Function, p: str) -> bool:
        """A parameter declared as Python configuration: annotated with a scalar type
        (``bool``, ``int | None``, ``Optional[str]``, ``Literal[...]``) or defaulting to
        a bool/str literal."""
        a = fn.param_nodes.get(p)
        if a is not None and self._scalar_annotation(a.annotation):
            return True
        d = fn.defaults.get(p)
        if isinstance(d, ast.Constant) and (isinstance(d.value, (bool, str))):
            return True
        return False

    def container_evidence(self, fn: Function) -> Set[str]:
        """Names of ``fn`` used like a container: ``.append``, ``.items()``, ``x["key"]``."""
        if fn._container_evidence is not None:
            return fn._container_evidence
        ev: Set[str] = set()
        for call in fn.of_type(ast.Call):
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr in K.CONTAINER_METHODS and isinstance(f.value, ast.Name):
                if f.attr == "get" and not call.args:
                    continue
                ev.add(f.value.id)
        # dictionary keys: ``for k, v in d.items()`` / ``for k in d.keys()``
        keys: Set[str] = set()
        iterated: Set[Tuple[str, str]] = set()    # (container, loop variable): for k in d
        for loop in fn.of_type(ast.For, ast.comprehension):
            it, tgt = loop.iter, loop.target
            if isinstance(it, ast.Name) and isinstance(tgt, ast.Name):
                iterated.add((it.id, tgt.id))
            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
                if it.func.attr == "items" and isinstance(tgt, ast.Tuple) and tgt.elts \
                        and isinstance(tgt.elts[0], ast.Name):
                    keys.add(tgt.elts[0].id)
                elif it.func.attr == "keys" and isinstance(tgt, ast.Name):
                    keys.add(tgt.id)
        self._memo("_dict_keys")[id(fn)] = keys
        for b in fn.of_type(ast.BoolOp):
            # ``cache or {}``: an optional container with an empty default
            if b.op.__class__ is ast.Or and b.values[-1].__class__ in (ast.Dict, ast.List, ast.Tuple):
                ev.update(v.id for v in b.values[:-1] if v.__class__ is ast.Name)
        for sub in fn.of_type(ast.Subscript):
            if not isinstance(sub.value, ast.Name):
                continue
            sl = sub.slice
            if (isinstance(sl, ast.Constant) and isinstance(sl.value, str)) or \
                    (isinstance(sl, ast.Name) and (sl.id in keys or (sub.value.id, sl.id) in iterated)):
                # d["w"], d[k] for k in d.keys()/d.items(), d[k] for k in d: a mapping
                ev.add(sub.value.id)
                if isinstance(sl, ast.Name) and (sub.value.id, sl.id) in iterated:
                    keys.add(sl.id)   # for k in d: ... d[k]: k takes the mapping's keys
        fn._container_evidence = ev
        return ev

    def dict_key_names(self, fn: Function) -> Set[str]:
        """Loop variables of ``fn`` that take a mapping's keys (``for k, v in d.items()``,
        ``for k in d.keys()``): ``x[k] = v`` with such a key stores into a dict."""
        self.container_evidence(fn)
        return self._memo("_dict_keys").get(id(fn), set())

    def holds_dict(self, e: ast.AST, fn: Function) -> bool:
        """``e`` is a slot ``d["k"]`` that ``fn`` fills with a dict (``d["k"] = {}``,
        a dict comprehension or ``dict(...)``): ``d["k"][m] = v`` is a dict store."""
        if e.__class__ is not ast.Subscript or e.value.__class__ is not ast.Name \
                or e.slice.__class__ is not ast.Constant:
            return False
        for a in fn.of_type(ast.Assign):
            v = a.value
            if not (v.__class__ in (ast.Dict, ast.DictComp) or (v.__class__ is ast.Call and
                                                               self.qualname(v.func, fn) == "dict")):
                continue
            for t in a.targets:
                if t.__class__ is ast.Subscript and t.value.__class__ is ast.Name and t.value.id == e.value.id \
                        and t.slice.__class__ is ast.Constant and t.slice.value == e.slice.value:
                    return True
        return False

