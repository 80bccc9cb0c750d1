"""Value kinds: ``model.kind(expr, fn)`` is a bit set (a part of
:class:`~jaxlint.analysis.model.SemanticModel`).

``TRACED`` (a tracer while the function is traced), ``JAX`` (a JAX array),
``NUMPY``, ``CONTAINER`` (a Python list/dict/tuple), ``UNSURE`` (the ``TRACED`` bit rests
on an unknown: an object built from traced values by a constructor or a method the model
cannot see into may hold tracers or only Python values -- :func:`proven` is false for it).
A value is *traced* (proven), *static* (no ``TRACED`` bit) or *unknown* (``TRACED |
UNSURE``); rules report what is proven.  Computed
flow-insensitively per scope from parameters, assignments, loops and
comprehensions; static facts (``.shape``, ``len``, ``is None``, literals,
``range(static)`` loop indices, Flax module fields) are never traced; calls
into the module use the callee's return kind.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional

from .returns import passed_argument
from . import knowledge as K
from .names import class_like
from .scopes import _BUILTINS, Function
from .statics import ENUM_BASES

# value kinds: a small bit set
TRACED = 1      # a tracer while the enclosing function is being traced
JAX = 2         # a JAX array (concrete or traced)
NUMPY = 4       # a NumPy array
CONTAINER = 8   # a Python list / tuple / dict / set (possibly holding arrays)
UNSURE = 16     # with TRACED: may hold a tracer, or only Python values (an object of unknown class)
TRACED_BITS = TRACED | UNSURE   # what a value passes on of its tracedness
NOT_ARRAY = -1  # (a narrowing, not a kind: "not a JAX array", see narrowing.py)
ARRAYISH = TRACED | JAX | NUMPY


def _index_update(e: ast.AST) -> bool:
    """``x.at[i]``: the receiver of ``.set``/``.add``/``.get`` ... (an array's index-update helper)."""
    return e.__class__ is ast.Subscript and e.value.__class__ is ast.Attribute and e.value.attr == "at"


# methods of a dict or list: on a receiver of unknown shape, what they give keeps its kind
_MAPPING_METHODS = frozenset({"items", "values", "keys", "get", "pop", "copy", "setdefault", "popitem",
                              "index", "count"})
_DISPLAYS = (ast.List, ast.Tuple, ast.ListComp)


def proven(k: int) -> bool:
    """The kind ``k`` is a tracer for sure while its function is traced (not an unknown)."""
    return bool(k & TRACED) and not k & UNSURE


def operate(*kinds: int) -> int:
    """The kind of an operation on values of these kinds (``a + b``, ``f(a, b)``): traced when
    one of them is, and proven when one traced operand is proven (an unknown added to a tracer
    is a tracer)."""
    k = 0
    sure = False
    for x in kinds:
        k |= x
        if x & TRACED and not x & UNSURE:
            sure = True
    return k & ~UNSURE if sure else k

# attributes of an array that are arrays again
_ARRAY_VIEWS = frozenset({"T", "mT", "real", "imag", "at", "flat"})


class _Growing(dict):
    """A scope's name kinds while :meth:`KindsMixin.kinds` computes them: when each name last
    grew (``clock``: the number of the binding evaluation under way), and the names the
    evaluation under way has read (``reads``; None between evaluations)."""

    __slots__ = ("grown_at", "clock", "reads")

    def __init__(self, initial: Dict[str, int]):
        super().__init__(initial)
        self.grown_at: Dict[str, int] = {}
        self.clock = 0
        self.reads: Optional[set] = None

    def __setitem__(self, name: str, k: int) -> None:
        dict.__setitem__(self, name, k)
        self.grown_at[name] = self.clock


def _empty_display(e: ast.AST) -> bool:
    """``{}``, ``[]``, ``()``: an empty dict, list or tuple display."""
    t = e.__class__
    return (t is ast.Dict and not e.keys) or ((t is ast.List or t is ast.Tuple) and not e.elts)


class KindsMixin:
    def kinds(self, fn: Function) -> Dict[str, int]:
        """Value kinds of the local names of ``fn`` (flow-insensitive)."""
        if fn._kinds is not None:
            return fn._kinds
        kinds: Dict[str, int] = {}
        fn._kinds = kinds   # guards recursion through closures
        evidence = self.container_evidence(fn)
        for p in fn.all_params():
            k = self._param_kind(p, fn, evidence)
            if k:
                kinds[p] = k
        bindings = self._bindings(fn)
        # Each pass evaluates the bindings whose inputs changed: a binding none of whose names
        # read (from this table, however deep in its evaluation) grew since it was last
        # evaluated would give the same kind again, and kinds only grow, so it changes nothing
        # -- the passes (and when they stop) are those of evaluating every binding every time.
        growing = _Growing(kinds)
        fn._kinds = growing
        last: List[Optional[tuple]] = [None] * len(bindings)   # (clock at its evaluation, names read)
        try:
            for _ in range(12):
                changed = False
                for i, (target, value, mode) in enumerate(bindings):
                    seen = last[i]
                    if seen is not None:
                        start, read = seen
                        grown = growing.grown_at
                        for name in read:
                            if grown.get(name, -1) >= start:
                                break
                        else:
                            continue
                    growing.clock += 1
                    read = growing.reads = set()
                    k = self._binding_kind(value, mode, fn)
                    if self._assign(target, k, growing, fn, value, mode):
                        changed = True
                    growing.reads = None
                    last[i] = (growing.clock, read)
                if not changed:
                    break
        finally:
            growing.reads = None
            kinds = dict(growing)
            if fn._kinds is growing:    # (not forgotten meanwhile)
                fn._kinds = kinds
        for name in evidence:
            if name in kinds:
                kinds[name] |= CONTAINER
        return kinds

    def annotation_kind(self, ann: Optional[ast.expr], scope: Function, _depth: int = 0) -> int:
        """``JAX`` for an array annotation, ``CONTAINER`` for a dict/list/tuple/sequence
        one, else 0; through ``Optional[X]``, ``X | None``, ``Union[X, None]`` and a
        module-level alias (``Cache = dict[str, LayerCache]``)."""
        if ann is None or _depth > 4:
            return 0
        t = ann.__class__
        if t is ast.BinOp and ann.op.__class__ is ast.BitOr:
            sides = [x for x in (ann.left, ann.right) if not (x.__class__ is ast.Constant and x.value is None)]
            return self._union_kind(sides, scope, _depth)
        base = ann.value if t is ast.Subscript else ann
        q = self.qualname(base, scope) if base.__class__ in (ast.Name, ast.Attribute) else None
        if q in K.ARRAY_ANNOTATIONS:
            return JAX
        if q in K.CONTAINER_ANNOTATIONS or q in K.TUPLE_ANNOTATIONS:
            return CONTAINER
        if q in K.OPTIONAL_ANNOTATIONS and t is ast.Subscript:
            inner = ann.slice
            parts = inner.elts if inner.__class__ is ast.Tuple else [inner]
            parts = [x for x in parts if not (x.__class__ is ast.Constant and x.value is None)]
            return self._union_kind(parts, scope, _depth)
        if t is ast.Name and q is None and ann.id in self.classes:
            methods = self.classes[ann.id].methods
            if "__bool__" not in methods and "__len__" not in methods:
                return CONTAINER   # an object of a class this module defines: truthy, never a tracer
        if q is not None and self.class_resolver is not None and not q.startswith(K.KNOWN_LIBRARY_PREFIXES):
            methods = self.class_resolver(q)
            if methods is not None and "__bool__" not in methods and "__len__" not in methods:
                return CONTAINER   # an object of a class another project module defines (a NamedTuple)
        if t is ast.Name and q is None:
            s = self.resolve_scope(ann.id, scope)
            if s is not None and s.is_module:
                alias = self.single_value(ann.id, s)
                if alias is not None:
                    return self.annotation_kind(alias, s, _depth + 1)
        return 0

    def _union_kind(self, parts, scope: Function, depth: int) -> int:
        """One member: its kind.  Several (``Array | List[Array]``): a container when
        one of them is (the value may be a list), else unknown (0)."""
        if len(parts) == 1:
            return self.annotation_kind(parts[0], scope, depth + 1)
        kinds = [self.annotation_kind(x, scope, depth + 1) for x in parts]
        if any(k & CONTAINER for k in kinds):
            k = 0
            for x in kinds:
                k |= x
            return k
        return 0

    def _binding_kind(self, value: ast.AST, mode: str, fn: Function) -> int:
        if mode == "aug":
            return operate(self.kind(value.target, fn), self.kind(value.value, fn) & ~CONTAINER)
        return self.kind(value, fn)

    def _assign(self, target: ast.expr, k: int, kinds: Dict[str, int], fn: Function,
                value: ast.AST, mode: str) -> bool:
        t = target.__class__
        if t is ast.Name:
            old = kinds.get(target.id, 0)
            if mode == "for":
                k = self._iter_element_kind(value, fn, k)
            new = old | k
            if new != old:
                kinds[target.id] = new
                return True
            return False
        if t is ast.Tuple or t is ast.List:
            return self._assign_unpacked(target.elts, k, kinds, fn, value, mode)
        if t is ast.Starred:
            return self._assign(target.value, k | CONTAINER, kinds, fn, None, "elem")
        return False

    def _assign_unpacked(self, elts: List[ast.expr], k: int, kinds: Dict[str, int], fn: Function,
                         value: ast.AST, mode: str) -> bool:
        """``a, b = value`` (or a loop target ``for a, b in ...``) of kind ``k``."""
        if mode == "elem" and k & CONTAINER and len(elts) == 2 and value is None and not k & ARRAYISH:
            # a (key, value) pair from d.items(): the key is static
            return self._assign_each(elts, [0, k & TRACED_BITS], kinds, fn)
        if mode == "=" and isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts) \
                and not any(isinstance(e, ast.Starred) for e in value.elts):
            changed = False
            for te, ve in zip(elts, value.elts):
                if self._assign(te, self.kind(ve, fn), kinds, fn, ve, "="):
                    changed = True
            return changed
        if mode == "for":
            elems = self._iter_tuple_kinds(value, fn, len(elts))
            if elems is not None:
                return self._assign_each(elts, elems, kinds, fn)
            k = self._iter_element_kind(value, fn, k)
        if mode == "=" and isinstance(value, ast.Name) and value.id in fn.param_residuals:
            elems = self._residual_elements(fn, value.id, len(elts))
            if elems is not None:
                return self._assign_each(elts, elems, kinds, fn)
        if mode == "=" and isinstance(value, ast.Name) and value.id in fn.param_inits:
            elems = self._carry_elements(fn, value.id, len(elts))
            if elems is not None:
                return self._assign_each(elts, elems, kinds, fn)
        if mode == "=" and isinstance(value, ast.Call):
            elems = self._returned_tuple_kinds(value, fn, len(elts), k)
            if elems is not None:
                return self._assign_each(elts, elems, kinds, fn)
        # unpacking: the elements of a call's result (``q, r = jnp.linalg.qr(x)``)
        # share its array kind; elements of any other value (a carry tuple,
        # a pytree parameter) are only known to be traced
        if isinstance(value, ast.Call) and not (k & CONTAINER and not k & ARRAYISH):
            ek = k & ~CONTAINER
        else:
            ek = k & TRACED_BITS
        elems = [ek] * len(elts)
        if isinstance(value, ast.Call) and value.func.__class__ in (ast.Name, ast.Attribute):
            for i in K.STATIC_RESULT_ITEMS.get(self.qualname(value.func, fn), ()):
                if i < len(elems):
                    elems[i] = 0    # a GraphDef / treedef: structure, never a tracer
        return self._assign_each(elts, elems, kinds, fn)

    def _assign_each(self, elts: List[ast.expr], element_kinds: List[int], kinds: Dict[str, int],
                     fn: Function) -> bool:
        """Assign each target its element kind (every one, even after a change)."""
        changed = False
        for te, ek in zip(elts, element_kinds):
            if self._assign(te, ek, kinds, fn, None, "elem"):
                changed = True
        return changed

    def _iter_element_kind(self, it: ast.AST, fn: Function, k: int) -> int:
        """Kind of the loop variable of ``for x in <it>``."""
        it = self._unwrap_iterable(it, fn)
        if it.__class__ is ast.Name and it.id in fn.locals:
            bound = self.single_value(it.id, fn)   # ``keys = flat.keys()`` ... ``for k in keys``
            if bound.__class__ is ast.Call and bound.func.__class__ is ast.Attribute and bound.func.attr == "keys":
                it = bound
        if isinstance(it, ast.Call):
            q = self.qualname(it.func, fn)
            if q == "range":
                return 0
            if isinstance(it.func, ast.Attribute) and it.func.attr in ("keys",):
                return 0
            if isinstance(it.func, ast.Attribute) and it.func.attr in ("items",):
                return self.kind(it.func.value, fn) & TRACED_BITS | CONTAINER
        if k & CONTAINER and not (k & ARRAYISH):
            return k & TRACED_BITS
        return k & ~CONTAINER

    def _unwrap_iterable(self, it: ast.AST, fn: Function) -> ast.AST:
        """``sorted(d.items())``, ``list(...)``, ``tuple(...)``, ``reversed(...)`` iterate like their argument."""
        while isinstance(it, ast.Call) and len(it.args) == 1 and \
                self.qualname(it.func, fn) in ("sorted", "list", "tuple", "reversed"):
            it = it.args[0]
        return it

    def _iter_tuple_kinds(self, it: ast.AST, fn: Function, n: int) -> Optional[List[int]]:
        it = self._unwrap_iterable(it, fn)
        if not isinstance(it, ast.Call):
            return None
        q = self.qualname(it.func, fn)
        if q == "enumerate" and it.args and n == 2:
            inner = self._unwrap_iterable(it.args[0], fn)
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "items":
                # enumerate(d.items()): (index, (key, value)) -- the pair is a container
                return [0, CONTAINER | (self.kind(inner.func.value, fn) & TRACED_BITS)]
            return [0, self._iter_element_kind(it.args[0], fn, self.kind(it.args[0], fn))]
        if q == "zip" and len(it.args) == n and not any(isinstance(a, ast.Starred) for a in it.args):
            return [self._iter_element_kind(a, fn, self.kind(a, fn)) for a in it.args]
        if (isinstance(it.func, ast.Attribute) and it.func.attr == "items" or q in K.PATH_LEAF_PAIRS) and n == 2:
            # (key, value) of d.items(), (key path, leaf) of tree_leaves_with_path: the key is static
            base = it.func.value if q not in K.PATH_LEAF_PAIRS else (it.args[0] if it.args else None)
            return [0, self.kind(base, fn) & TRACED_BITS]
        return None

    def _returned_tuple_kinds(self, call: ast.Call, fn: Function, n: int, k: int) -> Optional[List[int]]:
        """``a, n = helper(x)`` where every ``return`` of the project function ``helper``
        is a literal tuple of ``n`` items: an item that is a Python value in every
        return (``x.shape[1]``, ``0``, a config int) stays one in the caller; the
        others get the call's kind as usual.  Only for a callee the model analyses as
        traced code (its parameters carry the caller's tracers), else None."""
        fallback = k & ~CONTAINER if not (k & CONTAINER and not k & ARRAYISH) else k & TRACED_BITS
        # (a module called where it is made or held -- ``Block()(x)``, ``self.blocks[i](x)`` --
        # is resolved to its ``__call__`` below)
        q = self.qualname(call.func, fn) if call.func.__class__ in (ast.Name, ast.Attribute) else None
        if q is not None:
            # another module's function: which items it returns are Python values whatever
            # the arguments (its module says, through the project)
            self._kinds_read_exports = True   # (forget_facts must then drop the kinds)
            ext = self.external_facts(q)
            got = ext.get("static_items") if ext else None
            out = [0 if got and got[0] == n and i in got[1] else fallback for i in range(n)]
            given = ext.get("returned_params") if ext else None
            if given and given[0] == n:
                # ``loss, weight = reconstruction(gt, pred)``: ``weight`` is what the call passes
                # for it, or its literal (or gin-bound) default -- a Python value
                for i, p in given[1].items():
                    a = passed_argument(call, ext.get("params") or [], p)
                    if a is False:
                        out[int(i)] = 0
                    elif a is not None:
                        out[int(i)] = self.kind(a, fn)
            return out if any(not o & TRACED for o in out) and (got and got[0] == n or given and given[0] == n) \
                else None
        target = self.resolve_callable(call.func, fn)   # (``self.window_partition(x)``: a method)
        if target is None or target.function.is_lambda or target.function is fn:
            return None
        callee = target.function
        if not callee.under_trace:
            got = self.static_return_items(callee)
            if got is None or got[0] != n:
                return None
            return [0 if i in got[1] else fallback for i in range(n)]
        rets = [r.value for r in callee.of_type(ast.Return)]
        if not rets or any(not isinstance(r, ast.Tuple) or len(r.elts) != n
                           or any(isinstance(e, ast.Starred) for e in r.elts) for r in rets):
            return None
        out = []
        for i in range(n):
            ki = 0
            for r in rets:
                ki |= self.kind(r.elts[i], callee)
            # a Python value, or a tuple of them (``(hp, wp)`` from ``x.shape``), stays one; so does
            # a proven traced array (``done = jnp.abs(pos) > 2`` of ``state, reward, done =
            # env_step(state, action)`` in a traced caller)
            out.append(ki if not ki & (TRACED | ARRAYISH)
                       or (proven(ki) and ki & JAX and not ki & CONTAINER) else fallback)
        return out if any(o != fallback for o in out) else None

    def _residual_elements(self, fn: Function, name: str, n: int) -> Optional[List[int]]:
        """Kinds of the elements of a custom_vjp residual tuple ``name`` of ``n`` items:
        a Python value ``fwd`` put there (an int, ``x.shape``) stays one; the rest are
        traced (arrays where ``fwd`` had arrays)."""
        res, fwd = fn.param_residuals[name]
        if len(res.elts) != n:
            return None
        out = []
        for e in res.elts:
            k = self.kind(e, fwd)
            if not k & (ARRAYISH | CONTAINER):
                out.append(0)
            elif k & CONTAINER and not k & ARRAYISH:
                out.append(TRACED | CONTAINER)
            else:
                out.append(TRACED | JAX)
        return out

    def _carry_elements(self, fn: Function, name: str, n: int) -> Optional[List[int]]:
        """Kinds of the elements of a lax carry ``name`` whose initial value is a literal
        tuple of ``n`` items: each element is traced, and an array if its initial value is."""
        got = fn.param_inits.get(name)
        if got is None or name not in fn.traced_params:
            return None
        init, scope = got
        if not isinstance(init, (ast.Tuple, ast.List)) or len(init.elts) != n \
                or any(isinstance(e, ast.Starred) for e in init.elts):
            return None
        out = []
        for e in init.elts:
            k = self.kind(e, scope)
            if k & CONTAINER and not k & ARRAYISH:
                out.append(TRACED | CONTAINER)
            elif k & (JAX | NUMPY | TRACED):
                out.append(TRACED | JAX)
            else:
                out.append(TRACED)
        return out

    def name_kind(self, name: str, fn: Function) -> int:
        """The kind of ``name`` in the scope it resolves to (module-level values are never traced)."""
        s = self.resolve_scope(name, fn)
        if s is None:
            return 0
        table = self.kinds(s)
        if table.__class__ is _Growing and table.reads is not None:
            table.reads.add(name)   # (being computed: what the binding evaluated now reads)
        if s.is_module:
            return table.get(name, 0) & ~TRACED
        return table.get(name, 0)

    def kind(self, e: Optional[ast.AST], fn: Function) -> int:
        """The value kind of expression ``e`` evaluated in scope ``fn``: one
        rule per node type (:data:`_KIND_RULES`); node types without a rule
        (constants, f-strings, lambdas, ...) are static (0)."""
        if e is None:
            return 0
        rule = _KIND_RULES.get(e.__class__)
        return 0 if rule is None else rule(self, e, fn)

    def stages_constants(self, fn: Function) -> bool:
        """Does tracing ``fn`` stage out operations on constants too (their results are
        tracers)?  True under ``jit``, ``pmap``, ``lax`` bodies, module methods and
        callers' traces; False only when every trace of ``fn`` (and of the functions
        around it) is a ``grad``/``vmap``-style transform applied outside any trace,
        where ``jnp.sum(constant)`` runs eagerly and gives a concrete array (helpers
        called from traced code follow their callers)."""
        return not self._traced_only_by(fn, "_stages_cache", lambda tr: tr.kind in ("grad", "vmap") or tr.eager,
                                        unstaged_ok=True)

    def _compile_time_eval(self, node: ast.AST, fn: Function) -> bool:
        """``node`` runs in the body of ``with jax.ensure_compile_time_eval():`` (JAX computes
        operations on concrete values there at once, even while tracing)."""
        spans = self._memo("_eval_spans").get(id(fn))
        if spans is None:
            spans = []
            for w in fn.of_type(ast.With):
                if any(i.context_expr.__class__ is ast.Call
                       and self.qualname(i.context_expr.func, fn) in K.COMPILE_TIME_EVAL for i in w.items):
                    spans.append((w.body[0].lineno, w.end_lineno))
            self._memo("_eval_spans")[id(fn)] = spans
        line = getattr(node, "lineno", None)
        return any(a <= line <= b for a, b in spans) if spans and line is not None else False

    def _traced_only_by(self, fn: Function, memo: str, accept, unstaged_ok: bool = False) -> bool:
        """``fn`` is traced, and every trace of it and of the functions around it is a
        transform ``accept(record)`` takes, applied outside any trace -- or, for a helper,
        a call from traced code for which the same holds.  (``memo``: the cache, which
        the propagation rounds reset.)  Functions that reach each other (a custom function
        called from its own derivative rule) are answered together: a cycle holds unless
        something on it is staged."""
        cache = self._memo(memo)
        got = cache.get(id(fn))
        if got is not None:
            return got
        active = self._memo(memo + "_active")
        if id(fn) in active:
            return True          # on the cycle being answered: it holds unless another path says no
        active[id(fn)] = True
        try:
            got = self._traced_only_by_now(fn, memo, accept, unstaged_ok)
        finally:
            del active[id(fn)]
        if not got or not active:
            cache[id(fn)] = got  # (a True found inside a cycle waits for the cycle's answer)
        return got

    def _traced_only_by_now(self, fn: Function, memo: str, accept, unstaged_ok: bool = False) -> bool:
        sites = self._site_maps()[0]
        seen, ok = False, True
        s: Optional[Function] = fn
        while ok and s is not None and not s.is_module:
            for c in s.contexts:
                seen = True
                if c.transform == "call" and c.caller is not None:
                    ok = self._traced_only_by(c.caller, memo, accept, unstaged_ok)
                elif c.unstaged and c.transform in K.TRANSFORMS:
                    # another module's transform, applied outside any trace (its differentiation):
                    # as for a site of this module
                    ok = accept(K.TRANSFORMS[c.transform])
                elif c.unstaged:
                    # another module's callers, each traced only by grad/vmap outside any trace
                    ok = unstaged_ok
                else:
                    tr = K.TRANSFORMS.get(c.transform)
                    site = sites.get(id(c.node))
                    if site is None and tr is not None and tr.eager and accept(tr):
                        # a custom derivative rule (``f.defvjp(fwd, bwd)``, ``@f.defjvp``): it runs
                        # when ``f`` is differentiated, on the values ``f`` is given -- staged exactly
                        # when ``f`` is
                        primal = self._rule_primal(c.node, s)
                        ok = primal is not None and self._traced_only_by(primal, memo, accept, unstaged_ok)
                    else:
                        ok = tr is not None and accept(tr) and site is not None and not site.scope.under_trace
                if not ok:
                    break
            s = s.parent
        return ok and seen

    def _rule_primal(self, node: ast.AST, rule: Function) -> Optional[Function]:
        """The function a custom derivative rule is for: ``f`` of ``f.defvjp(fwd, bwd)`` or
        of the decorator ``@f.defjvp``."""
        f = node.func if node.__class__ is ast.Call else node
        if f.__class__ is not ast.Attribute:
            return None
        target = self.resolve_callable(f.value, rule.parent or rule)
        return target.function if target is not None else None

    def _kind_name(self, e: ast.Name, fn: Function) -> int:
        gen = fn.comprehension_loads().get(id(e)) if fn.nodes.get(ast.comprehension) else None
        if gen is not None:
            # a comprehension's own variable: the kind of its generator's elements only
            elems: Dict[str, int] = {}
            self._assign(gen.target, self.kind(gen.iter, fn), elems, fn, gen.iter, "for")
            return elems.get(e.id, 0)
        narrowed = self.narrowed_kind(e, fn)
        if narrowed == NOT_ARRAY:
            # ``else`` of ``isinstance(x, jax.Array)``: no array, but maybe a container of tracers
            k = self.name_kind(e.id, fn)
            return CONTAINER | (k & TRACED_BITS) if k else 0
        if narrowed is not None:
            return narrowed     # under ``isinstance(e, int)``: a Python value
        k = self.name_kind(e.id, fn)
        if e.id not in fn.locals:
            return k
        if k & TRACED and e.id in self.dict_key_names(fn):
            return 0            # a mapping's key (``for k in d: ... d[k]``): a Python string
        # the one straight-line binding this load sees, when the name is bound more than once:
        # ``x = [...]`` ... ``x[i][j] = v`` ... ``x = jnp.array(x)`` -- a list up to the rebinding
        seen = self.reaching_value(e, fn)
        if seen is None:
            if k & TRACED:
                got = self._loop_variable_kind(e, fn)
                if got is not None:
                    return got
            if k & TRACED and self.sees_parameter(e, fn):
                # ``assert n >= 1`` before ``n = jnp.asarray(n)``: still the parameter here
                return self._param_kind(e.id, fn, self.container_evidence(fn))
            return k
        return self.kind(seen, fn)

    def _loop_variable_kind(self, e: ast.Name, fn: Function) -> Optional[int]:
        """``for k in range(n): comb(d, k)`` in a function that binds ``k`` again elsewhere (``k =
        jnp.asarray(...)`` below the loop): inside the loop's body, where nothing else binds it, the
        name holds an element of what the loop iterates over -- that kind, not every binding's.
        None when the load is not in such a loop."""
        if not hasattr(e, "lineno") or not fn.nodes.get(ast.For):
            return None
        at = (e.lineno, e.col_offset)
        for loop in fn.of_type(ast.For):
            body = loop.body
            if not body or not ((body[0].lineno, body[0].col_offset) <= at
                                <= (loop.end_lineno, loop.end_col_offset or 0)):
                continue
            if not any(n.__class__ is ast.Name and n.id == e.id for n in ast.walk(loop.target)):
                continue
            if any(n.__class__ is ast.Name and n.id == e.id and n.ctx.__class__ is not ast.Load
                   for st in body + loop.orelse for n in ast.walk(st)):
                return None     # (rebound in the body too)
            elems: Dict[str, int] = {}
            self._assign(loop.target, self.kind(loop.iter, fn), elems, fn, loop.iter, "for")
            return elems.get(e.id, 0)
        return None

    def _kind_attribute(self, e: ast.Attribute, fn: Function) -> int:
        if e.attr in K.STATIC_ATTRS or e.attr.startswith(K.STATIC_ATTR_PREFIXES) \
                or e.attr in self.static_fields:
            return 0
        v = e.value
        if v.__class__ is ast.Name:
            owner = fn.enclosing_method()
            if owner is not None and v.id == owner.self_name and owner.cls is not None:
                return self._self_attr_kind(owner, e.attr)
            if self.qualname(v, fn) is not None:
                return 0   # a module attribute such as jnp.pi or jnp.float32
            # ``prob = Problem(y=y, penalty=p)`` ... ``prob.penalty``: the kind of what was given
            made = self.single_value(v.id, fn) if v.id in fn.locals else None
            given = next((kw.value for kw in made.keywords if kw.arg == e.attr), None) \
                if made.__class__ is ast.Call and class_like(made.func) else None
            guard = (id(e), "given")
            if given is not None and guard not in self._attrs_in_progress:
                self._attrs_in_progress.add(guard)
                try:
                    return self.kind(given, fn)
                finally:
                    self._attrs_in_progress.discard(guard)
        vk = self.kind(v, fn)
        if e.attr in _ARRAY_VIEWS:
            return vk & (TRACED_BITS | JAX | NUMPY)
        # a field of a traced pytree (state.params, state.dynamic_scale): traced,
        # but not known to be an array (it may be None, a tuple, a dataclass)
        k = vk & (TRACED_BITS | NUMPY)
        if k & TRACED and not k & UNSURE and e.attr not in self.data_fields:
            # a field of a traced pytree whose class says nothing here: JAX traces the leaves of a
            # pytree and keeps its metadata static (``register_dataclass`` meta fields, aux data),
            # and only the class declares which a field is -- unknown, unless a pytree class of
            # the project (or a library's: ``TrainState.step``) declares a field of this name a leaf
            k |= UNSURE
        if k & TRACED and not k & UNSURE and fn.contexts and fn.filtered_only:
            # an Equinox filter transform traces array leaves only: a field of what it was
            # given (``method.batch_size``) is a tracer or a static Python value -- unknown
            k |= UNSURE
        return k

    def _kind_subscript(self, e: ast.Subscript, fn: Function) -> int:
        vk = self.kind(e.value, fn)
        if vk & CONTAINER and not vk & ARRAYISH:
            return vk & TRACED_BITS
        return vk & (ARRAYISH | UNSURE)

    def _kind_binop(self, e: ast.BinOp, fn: Function) -> int:
        lk, rk = self.kind(e.left, fn), self.kind(e.right, fn)
        k = operate(lk, rk)
        if e.op.__class__ in (ast.Mult, ast.Add) and (e.left.__class__ in _DISPLAYS or e.right.__class__ in _DISPLAYS):
            return CONTAINER | (k & (TRACED | UNSURE))   # ``[x] * n``, ``[a] + rest``: a list, whatever it holds
        if (lk & CONTAINER and not lk & (JAX | NUMPY)) or (rk & CONTAINER and not rk & (JAX | NUMPY)):
            return k   # tuple/list concatenation or repetition, set difference
        if k & TRACED:
            return (k & (ARRAYISH | UNSURE)) | JAX
        return k & ARRAYISH

    def _kind_unaryop(self, e: ast.UnaryOp, fn: Function) -> int:
        k = self.kind(e.operand, fn)
        if e.op.__class__ is ast.Not:
            return k & (TRACED | UNSURE) if self._truthiness_traced(k, True) else 0
        return k & ~CONTAINER

    def _kind_boolop(self, e: ast.BoolOp, fn: Function) -> int:
        return operate(*[self.kind(v, fn) for v in e.values])

    def _kind_compare(self, e: ast.Compare, fn: Function) -> int:
        for op in e.ops:
            if op.__class__ in (ast.Is, ast.IsNot, ast.In, ast.NotIn):
                return 0
        if any(c.__class__ is ast.Constant and c.value is None for c in (e.left, *e.comparators)):
            # ``x != None``: an array's ``==``/``!=`` with None falls back to Python's identity
            # test -- a Python bool, even on a tracer
            return 0
        if all(op.__class__ in (ast.Eq, ast.NotEq) for op in e.ops) and \
                any(_empty_display(c) for c in (e.left, *e.comparators)):
            # ``batch_stats != {}``, ``extras == []``: equality with an empty display compares a
            # container's length (a dict's keys), never its leaves -- a Python bool, even where
            # the leaves are tracers (an array compared with one raises a TypeError instead)
            return 0
        if self._is_str_constant(e.left, fn) or any(self._is_str_constant(c, fn) for c in e.comparators):
            # ``mode == "train"``, ``v.tag == MODE``: an array is never compared with a
            # string; the value is Python configuration
            return 0
        kinds = [self.kind(e.left, fn)] + [self.kind(c, fn) for c in e.comparators]
        if len(kinds) == 2 and e.ops[0].__class__ in (ast.Eq, ast.NotEq) and any(
                k & CONTAINER and not k & (JAX | NUMPY) for k in kinds) and any(
                not k & (CONTAINER | UNSURE | ARRAYISH) for k in kinds):
            # ``pair == ignore`` with ``pair`` a tuple of tracers and ``ignore`` a Python number:
            # a tuple never equals a number (no element is compared) -- a Python bool
            return 0
        k = operate(*kinds)
        if k & CONTAINER and not k & ARRAYISH:
            return k & (TRACED | UNSURE)
        if k & TRACED:
            return TRACED | JAX | (k & UNSURE)
        return k & (ARRAYISH | UNSURE)

    def _is_str_constant(self, e: ast.AST, fn: Function) -> bool:
        """A string literal, or a name bound (only) to one at module level (``MODE_TRAIN = "train"``)."""
        t = e.__class__
        if t is ast.Constant:
            return isinstance(e.value, str)
        if t is ast.JoinedStr:
            return True
        if (t is ast.Name or t is ast.Attribute) and self.static_constants \
                and self.qualname(e, fn) in self.static_constants:
            return True   # a string constant or enum member another module of the project defines
        if t is ast.Attribute and e.value.__class__ is ast.Name and e.value.id in self.classes \
                and any(b.rpartition(".")[2] in ENUM_BASES for b in self.classes[e.value.id].bases):
            return True   # a member of an enum this module defines (``Method.SUM``)
        if t is ast.Name:
            s = self.resolve_scope(e.id, fn)
            if s is not None and s.is_module:
                v = self.single_value(e.id, s)
                return v is not None and v.__class__ is ast.Constant and isinstance(v.value, str)
        return False

    def _kind_ifexp(self, e: ast.IfExp, fn: Function) -> int:
        return self.kind(e.body, fn) | self.kind(e.orelse, fn)

    def _kind_display(self, e: ast.AST, fn: Function) -> int:
        """A tuple/list/set/dict display: a container, traced if an element is."""
        return CONTAINER | (operate(*[self.kind(x, fn) for x in (e.values if e.__class__ is ast.Dict else e.elts)])
                            & (TRACED | UNSURE))

    def _kind_comprehension(self, e: ast.AST, fn: Function) -> int:
        elt = e.value if e.__class__ is ast.DictComp else e.elt
        return CONTAINER | (self.kind(elt, fn) & (TRACED | UNSURE))

    def _kind_wrapped(self, e: ast.AST, fn: Function) -> int:
        """``*x``, ``(y := x)``, ``await x``: the kind of ``x``."""
        return self.kind(e.value, fn)

    def _self_attr_kind(self, method: Function, attr: str) -> int:
        """Kind of ``self.<attr>``: Flax params/variables from ``setup`` are traced;
        attributes bound from JAX calls in ``__init__`` are (concrete) JAX arrays;
        everything else — module fields, configuration — is static."""
        info = method.cls
        values = info.setup_attrs.get(attr)
        if not values:
            return 0
        key = (id(info), attr)
        if key in self._attrs_in_progress:
            return 0   # self.x = f(self.x) in __init__: no new information
        self._attrs_in_progress.add(key)
        try:
            init = info.methods.get("setup" if info.module_kind == "linen" else "__init__")
            k = 0
            for v in values:
                if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                        and v.func.attr in ("param", "variable") and info.module_kind == "linen":
                    k |= TRACED | JAX if method.contexts else JAX
                elif init is not None:
                    k |= self.kind(v, init) & (JAX | NUMPY | CONTAINER)
            return k
        finally:
            self._attrs_in_progress.discard(key)

    def _call_kind(self, call: ast.Call, fn: Function) -> int:
        """A call's kind: by the callee's qualified name, else as a method of its
        receiver, else from the module function it resolves to."""
        func = call.func
        ft = func.__class__
        term = func.attr if ft is ast.Attribute else (func.id if ft is ast.Name else "")
        if term.startswith(K.PREDICATE_PREFIXES):
            return 0
        if ft is ast.Attribute and term in self.static_methods:
            return 0   # a method some class of the project declares to return a Python value
        q = self.qualname(func, fn) if ft is ast.Name or ft is ast.Attribute else None
        if q is not None:
            k = self._library_call_kind(q, call, fn)
            if k is not None:
                if k & JAX and not fn.under_trace and self.imports.ambiguous and _root_id(func) in self.imports.ambiguous:
                    # ``np`` is jax.numpy in one place and numpy in another: outside a trace, which
                    # array this makes depends on the order the code runs in -- maybe a NumPy one
                    k |= NUMPY
                return k
            # another module's function whose every return is a shape or a count
            self._kinds_read_exports = True   # (forget_facts must then drop the kinds)
            ext = self.external_facts(q)
            if ext is not None and ext.get("static_result"):
                return 0
            flows = ext.get("flows") if ext is not None else None
            if flows is not None and ext.get("params") is not None:
                # only the arguments whose values reach the result make it traced
                k = self._flowing_args_traced(call, fn, ext["params"], flows)
                if k is not None:
                    return k
        if ft is ast.Attribute:
            return self._method_call_kind(func, call, fn)
        if q is None and ft is ast.Name and self.layer_call(call, fn):
            k = self._args_traced(call, fn)
            return JAX | TRACED if k & TRACED else JAX   # ``embed(x)`` with ``embed = nn.Embed(...)``
        if q is None and ft is ast.Name:
            target = self.resolve_callable(func, fn)
            if target is not None:
                if not target.transforms and not target.function.is_lambda and self.static_result(target.function):
                    return 0   # ``n = first_dim(x)``: every return is a shape or a count
                k = self.return_kind(target.function)
                if self._returns_python_value(target, fn):
                    return k
                return k | self._args_traced(call, fn)
            if func.id in self.classes and self.resolve_scope(func.id, fn) is self.module:
                # an instance of a class of this module built from traced values: it may hold
                # tracers or only what it computed from their shapes -- unknown
                return self._object_kind(call, fn)
        if ft is ast.Call:
            # ``jax.jit(f)(x)``: a transformed function returns arrays
            k = self._args_traced(call, fn)
            q = self.qualname(func.func, fn) if func.func.__class__ in (ast.Name, ast.Attribute) else None
            if K.transform_for(q) is not None:
                inner = func.args[0] if func.args else None
                if inner is not None and inner.__class__ is ast.Attribute and inner.attr in K.VARIABLES_MAKERS:
                    # ``jax.jit(model.init, ...)(key, x)``: the module's variables, a dict of collections
                    return CONTAINER | (k & TRACED_BITS)
                k |= JAX
            elif q is not None and q.startswith(K.LAYER_PREFIXES) and k & TRACED:
                return JAX | TRACED   # ``nn.Dense(4)(x)``: a layer's output is an array, traced with the module
            return k
        return self._args_traced(call, fn)

    def _object_kind(self, call: ast.Call, fn: Function) -> int:
        """An object a constructor builds from the call's arguments: unknown when one is traced."""
        return TRACED | UNSURE if self._args_traced(call, fn) else 0

    def _library_call_kind(self, q: str, call: ast.Call, fn: Function) -> Optional[int]:
        """The kind of a call of the imported or builtin callable ``q`` (None: no rule)."""
        if q in K.STATIC_RESULT_CALLS or q.startswith("math."):
            return 0
        if q in K.HIGHER_ORDER and len(call.args) > K.HIGHER_ORDER[q]:
            target = self.resolve_callable(call.args[K.HIGHER_ORDER[q]], fn)
            if target is not None and self._maps_to_python_values(target.function):
                return CONTAINER    # ``tree_map(is_zero, tree)``: a tree of Python bools
        if q in K.AXIS_SIZE_REDUCTIONS and call.args and call.args[0].__class__ is ast.Constant:
            return 0   # ``lax.psum(1, axis)``: the axis size, a Python int
        if q in K.SEQUENCE_RESULTS:
            return CONTAINER | JAX | self._args_traced(call, fn)   # ``jnp.split(x, 3)``: a list of arrays
        if q in K.CONTAINER_CALLS:
            k = CONTAINER
            if q == "range":
                return k
            for a in call.args:
                k |= self.kind(a, fn) & TRACED_BITS
            return k
        if q in K.ARRAY_FUNCTIONS or (q.startswith(K.ARRAY_MODULES) and q not in K.NON_ARRAY):
            if q.startswith(K.PYTREE_FUNCTIONS_PREFIX):
                return self._args_traced(call, fn)
            if fn.under_trace and (not self.stages_constants(fn) or self._compile_time_eval(call, fn)):
                # under grad/vmap alone an operation on constants runs eagerly; so it does in
                # ``with jax.ensure_compile_time_eval():`` under any trace
                return JAX | self._args_traced(call, fn)
            return JAX | (TRACED if fn.under_trace else 0)
        if q in K.NUMPY_CONVERSIONS:
            return NUMPY   # raises on a tracer, so it returns a concrete array (JAX203 reports the call)
        if q.startswith("numpy."):
            return NUMPY | self._args_traced(call, fn)
        if q in ("jax.tree.map", "jax.tree.leaves", "jax.tree.flatten"):
            return self._args_traced(call, fn)
        if q.startswith("jax.") and (q.split(".")[-1] in K.transform_terminals()):
            return 0
        if q in ("min", "max", "abs", "sum", "round", "pow", "divmod"):
            return self._args_traced(call, fn) | (self._args_kind(call, fn) & (JAX | NUMPY))
        if q in _BUILTINS:
            return 0
        return None

    def _method_call_kind(self, func: ast.Attribute, call: ast.Call, fn: Function) -> int:
        """``recv.m(...)``: conversions are static, array methods keep the receiver's
        kind, container methods give its elements, linen ``self.param`` is traced."""
        m = func.attr
        if m in K.CONCRETIZING_METHODS or m in K.STR_ONLY_METHODS or m in K.METADATA_METHODS:
            return 0
        recv_node = func.value
        if m != "format" and self._is_str_constant(recv_node, fn):
            # ``'/'.join(path)``: a str method returns Python values (and raises on a tracer);
            # ``"{}".format(x)`` is a str too, but one that shows x's tracer, which JAX101 reports
            return 0
        if m == "keys" and not call.args and not call.keywords and self.resolve_callable(func, fn) is None:
            return CONTAINER   # a mapping's keys are hashable, and tracers are not: never traced
        if m in K.CONTAINER_RESULT_METHODS:
            # ``variables.unfreeze()``: a Python dict of what the receiver holds
            return CONTAINER | (self.kind(recv_node, fn) & TRACED_BITS)
        if m in K.SEQUENCE_INT_METHODS and 1 <= len(call.args) <= 3 and not call.keywords \
                and self.resolve_callable(func, fn) is None:
            return 0   # ``seq.index(x)``: arrays have no such method; a project method would resolve
        if recv_node.__class__ is ast.Name:
            owner = fn.enclosing_method()
            if owner is not None and owner.cls is not None and recv_node.id == owner.self_name \
                    and owner.cls.module_kind == "linen" and m in ("param", "variable"):
                return TRACED | JAX if fn.under_trace else JAX
        recv = self.kind(recv_node, fn)
        if recv & TRACED and not recv & CONTAINER and m not in K.ARRAY_ATTRIBUTES and not m.startswith("__") \
                and m not in _MAPPING_METHODS and not _index_update(recv_node) \
                and self.resolve_callable(func, fn) is None:
            # ``args["height"].unwrap()``: no ``jax.Array`` has that method, so the receiver is
            # some other pytree node (a static wrapper, a distribution, a state object), and
            # what its method returns is unknown -- a tracer, or a Python value it holds
            return TRACED | UNSURE
        if recv & UNSURE and not recv & (JAX | NUMPY | CONTAINER):
            # a method of an unknown object (an instance built from tracers): what it returns
            # is unknown too -- a tracer, or a Python value computed from their shapes
            return TRACED | UNSURE
        if recv & ARRAYISH:
            return operate(recv & (ARRAYISH | UNSURE), self._args_traced(call, fn))
        if recv & CONTAINER:
            return (recv & (TRACED | UNSURE)) | (CONTAINER if m in ("items", "values", "keys", "copy") else 0)
        return operate(recv & (TRACED | UNSURE), self._args_traced(call, fn))

    def return_kind(self, fn: Function) -> int:
        """Union of the kinds ``fn`` returns (without TRACED: the caller decides
        whether the call happens under a trace; with UNSURE when it returns an unknown)."""
        cache = self._return_kinds
        k = cache.get(id(fn))
        if k is not None:
            return k
        cache[id(fn)] = 0          # recursion guard
        k = 0
        if fn.is_lambda:
            k = self.kind(fn.node.body, fn)
        else:
            for ret in fn.of_type(ast.Return):
                if ret.value is not None:
                    k |= self.kind(ret.value, fn)
        k &= JAX | NUMPY | CONTAINER | UNSURE
        cache[id(fn)] = k
        return k

    def _returns_python_value(self, target, fn: Function) -> bool:
        """The project function ``target`` runs as traced code (its parameters carry
        what its call sites pass) and no ``return`` of it gives a traced value:
        ``make_config(x)`` builds its result from ``x.shape`` and Python values."""
        callee = target.function
        if callee is fn or callee.is_lambda or target.transforms or not callee.under_trace:
            return False
        key = ("traced", id(callee))
        cache = self._return_kinds
        got = cache.get(key)
        if got is None:
            cache[key] = True          # recursion guard: assume traced
            got = any(ret.value is not None and self.kind(ret.value, callee) & TRACED
                      for ret in callee.of_type(ast.Return))
            cache[key] = got
        return not got

    def _maps_to_python_values(self, callee: Function) -> bool:
        """A tree_map callback that returns only Python values (``not isinstance(x, Zero)``,
        ``x is None``) whatever leaves it gets.  Before the callback is known to run
        traced its parameters are not yet traced; the propagation rounds grow that."""
        if callee.is_lambda:
            return not self.kind(callee.node.body, callee) & (ARRAYISH | CONTAINER)
        rets = callee.of_type(ast.Return)
        return bool(rets) and all(r.value is not None and not self.kind(r.value, callee) & (ARRAYISH | CONTAINER)
                                  for r in rets)

    def _args_traced(self, call: ast.Call, fn: Function) -> int:
        """``TRACED`` when an argument of ``call`` is proven traced, ``TRACED | UNSURE`` when
        the traced ones are unknowns, else 0."""
        return self._traced_among([a.value if a.__class__ is ast.Starred else a for a in call.args]
                                  + [kw.value for kw in call.keywords], fn)

    def _traced_among(self, args, fn: Function) -> int:
        """``TRACED`` when one of ``args`` is proven traced, ``TRACED | UNSURE`` when the traced
        ones are unknowns, else 0."""
        out = 0
        for a in args:
            k = self.kind(a, fn)
            if k & TRACED:
                if not k & UNSURE:
                    return TRACED
                out = TRACED | UNSURE
        return out

    def _flowing_args_traced(self, call: ast.Call, fn: Function, params: List[str], flows: List[str]) -> Optional[int]:
        """:meth:`_args_traced` over the arguments ``call`` passes for the parameters ``flows``
        names (another module's function, whose export says which reach its result); None when the
        call's arguments cannot be paired with the parameters (``*args``, ``**kwargs``)."""
        args = []
        for p in flows:
            a = passed_argument(call, params, p)
            if a is None:
                return None
            if a is not False:
                args.append(a)
        return self._traced_among(args, fn)

    def _args_kind(self, call: ast.Call, fn: Function) -> int:
        k = 0
        for a in call.args:
            k |= self.kind(a, fn)
        return k


# how ``kind`` treats each node type (unlisted types are static)
_KIND_RULES = {
    ast.Name: KindsMixin._kind_name,
    ast.Attribute: KindsMixin._kind_attribute,
    ast.Subscript: KindsMixin._kind_subscript,
    ast.Call: KindsMixin._call_kind,
    ast.BinOp: KindsMixin._kind_binop,
    ast.UnaryOp: KindsMixin._kind_unaryop,
    ast.BoolOp: KindsMixin._kind_boolop,
    ast.Compare: KindsMixin._kind_compare,
    ast.IfExp: KindsMixin._kind_ifexp,
    ast.Tuple: KindsMixin._kind_display,
    ast.List: KindsMixin._kind_display,
    ast.Set: KindsMixin._kind_display,
    ast.Dict: KindsMixin._kind_display,
    ast.ListComp: KindsMixin._kind_comprehension,
    ast.SetComp: KindsMixin._kind_comprehension,
    ast.GeneratorExp: KindsMixin._kind_comprehension,
    ast.DictComp: KindsMixin._kind_comprehension,
    ast.Starred: KindsMixin._kind_wrapped,
    ast.NamedExpr: KindsMixin._kind_wrapped,
    ast.Await: KindsMixin._kind_wrapped,
}


def _root_id(e: ast.AST) -> Optional[str]:
    while e.__class__ is ast.Attribute:
        e = e.value
    return e.id if e.__class__ is ast.Name else None
