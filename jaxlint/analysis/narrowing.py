"""isinstance narrowing: where a name is known to hold a Python object, not a tracer.

``if isinstance(x, int): ... x ...`` and ``if not isinstance(spec, P): return spec``
followed by ``... spec ...``: inside the guarded region ``x`` is an ``int`` or a
``PartitionSpec`` -- a Python value even when the function walks a traced pytree
(``jax.tree.map(f, specs, is_leaf=...)`` over metadata, axis trees, masks).  The
kind of such a load is the narrowed type's kind (``0``, or ``CONTAINER`` for a
sequence or mapping), never ``TRACED``.

Only types that no tracer is an instance of narrow: Python builtins, the
``jax.sharding`` value types, and classes this module defines.  A region in which
the name is rebound is not narrowed.
"""
from __future__ import annotations

import ast
from typing import Dict, Optional

from . import knowledge as K
from .kinds import CONTAINER, JAX, NOT_ARRAY, TRACED
from .liveness import EXITS as _EXITS, dead_after, unreachable_spans
from .scopes import EAGER_MODULE_SEEDS, Function

# isinstance types whose instances are Python values: the kind a narrowed load gets
# (a sharding description, tuple-like or not, holds only Python values: mesh axis names,
# devices, specs)
_SCALAR_TYPES = frozenset({"int", "float", "bool", "str", "bytes", "complex", "type", "NoneType",
                           "enum.Enum", "slice", "range",
                           "jax.sharding.PartitionSpec", "jax.sharding.NamedSharding",
                           "jax.sharding.Mesh", "jax.sharding.AbstractMesh",
                           "jax.sharding.PositionalSharding", "jax.sharding.SingleDeviceSharding",
                           "jax.sharding.Sharding",
                           # host NumPy values and other array types no tracer is an instance of
                           "numpy.ndarray", "numpy.generic", "numpy.number", "numpy.integer",
                           "numpy.floating", "scipy.sparse.csr_matrix", "scipy.sparse.spmatrix",
                           # the numeric tower: a tracer is an instance of none of them
                           "numbers.Number", "numbers.Complex", "numbers.Real", "numbers.Rational",
                           "numbers.Integral"})
_CONTAINER_TYPES = frozenset({"tuple", "list", "dict", "set", "frozenset",
                              "collections.abc.Sequence", "collections.abc.Mapping", "typing.Sequence",
                              "typing.Mapping"})
# calls that can narrow a name
_GUARDS = frozenset({"isinstance", "is_tracer", "is_traced"})


def _catches_tracer_errors(t: Optional[ast.AST]) -> bool:
    """An ``except`` clause's type names one of JAX's tracer-only errors (``except
    jax.errors.ConcretizationTypeError``, ``except (TypeError, TracerBoolConversionError)``)."""
    if t is None:
        return False
    if t.__class__ is ast.Tuple:
        return any(_catches_tracer_errors(e) for e in t.elts)
    name = t.attr if t.__class__ is ast.Attribute else t.id if t.__class__ is ast.Name else None
    return name in K.TRACER_ERRORS


class NarrowingMixin:
    def narrowed_kind(self, e: ast.Name, fn: Function) -> Optional[int]:
        """The kind of the load ``e`` where an isinstance guard narrows it, else None."""
        table = self._narrowed_loads(fn)
        return table.get(id(e)) if table else None

    def _narrowed_loads(self, fn: Function) -> Dict[int, int]:
        cache = self._memo("_narrowing_cache")
        got = cache.get(id(fn))
        if got is not None:
            return got
        got = {}
        cache[id(fn)] = got
        if fn.is_lambda or not self._has_guards(fn):
            return got
        for node in fn.of_type(ast.BoolOp):
            # ``not is_tracer(x) and x > n``: later operands see the narrowed name
            if node.op.__class__ is ast.And:
                for i, v in enumerate(node.values[:-1]):
                    for name, k in self._isinstance_tests(v, fn, positive=True):
                        self._narrow_region(node.values[i + 1:], name, k, got)
        for node in fn.of_type(ast.If):
            # if isinstance(x, T) [and ...]: body
            for name, k in self._isinstance_tests(node.test, fn, positive=True):
                self._narrow_region(node.body, name, k, got)
            # if isinstance(x, jax.Array): ... else: <x is no array, so no tracer>
            arr = self._array_test(node.test, fn)
            if arr is not None and node.orelse:
                self._narrow_region(node.orelse, arr, NOT_ARRAY, got)
            # if not isinstance(x, T): <exit>  -- the rest of the block
            if not node.orelse and node.body and node.body[-1].__class__ in _EXITS:
                # if isinstance(x, jax.Array): <exit>  -- the rest sees no array
                facts = [(arr, NOT_ARRAY)] if arr is not None else []
                facts += self._isinstance_tests(node.test, fn, positive=False)
                # if isinstance(x, Tracer): <exit>  -- the rest sees a concrete x
                tracer = self._tracer_test(node.test, fn)
                if tracer is not None:
                    facts.append((tracer, 0))
                for name, k in facts:
                    block = self.block_of(node, fn)
                    if block is not None:
                        i = next(j for j, s in enumerate(block) if s is node)
                        self._narrow_region(block[i + 1:], name, k, got)
        return got

    def _has_guards(self, fn: Function) -> bool:
        """Does ``fn`` call ``isinstance`` or an ``is_tracer``-like predicate at all?  (Asked
        per write and per load: memoised, or a long function is quadratic in its calls.)"""
        cache = self._memo("_guards_cache")
        got = cache.get(id(fn))
        if got is None:
            got = cache[id(fn)] = any(c.func.__class__ is ast.Name and c.func.id.lstrip("_") in _GUARDS
                                      for c in fn.of_type(ast.Call)) or \
                any(self._project_tracer_test(c.func, fn) for c in fn.of_type(ast.Call)
                    if c.args and c.func.__class__ in (ast.Name, ast.Attribute))
        return got

    def _project_tracer_test(self, f: ast.expr, fn: Function) -> bool:
        """``f`` names a predicate of the project that asks whether its first argument is a
        tracer (:func:`tracer_predicate`): defined here, or exported by another module."""
        memo = self._memo("_tracer_predicates")
        target = self.resolve_callable(f, fn) if f.__class__ is ast.Name or f.value.__class__ is ast.Name else None
        if target is not None:
            g = target.function
            got = memo.get(id(g))
            if got is None:
                got = memo[id(g)] = target.bound_positional == 0 and tracer_predicate(self, g)
            return got
        q = self.qualname(f, fn)
        if q is None or q.startswith(("jax.", "numpy.", "builtins.")) or "." not in q:
            return False
        self._kinds_read_exports = True   # (forget_facts must then drop the guard caches)
        facts = self.external_facts(q)
        return bool(facts is not None and facts.get("tracer_test"))

    def block_of(self, stmt: ast.stmt, fn: Function):
        """The statement list of ``fn`` (``body``/``orelse``/``finalbody`` of its parent) that holds ``stmt``."""
        parents = self._parent_map(fn)
        parent = parents.get(id(stmt))
        blocks = [getattr(fn.node, "body", [])] if parent is None else \
            [getattr(parent, f, None) for f in ("body", "orelse", "finalbody")]
        for b in blocks:
            if isinstance(b, list) and any(s is stmt for s in b):
                return b
        return None

    def reaching_attr_value(self, e: ast.Attribute, fn: Function) -> Optional[ast.expr]:
        """The value of the one straight-line ``self.<attr> = value`` of ``fn`` that ``e``
        (``self.<attr>`` read in ``fn``) sees: the last such store before it, in a block that
        holds ``e``, with no other store of the attribute in a loop around ``e`` and no call
        of a method of ``self`` in between (it could store another value); else None."""
        selfname = fn.self_name
        if selfname is None or e.value.__class__ is not ast.Name or e.value.id != selfname:
            return None
        at = (e.lineno, e.col_offset)
        stores = [a for a in fn.of_type(ast.Assign) if len(a.targets) == 1
                  and a.targets[0].__class__ is ast.Attribute and a.targets[0].attr == e.attr
                  and a.targets[0].value.__class__ is ast.Name and a.targets[0].value.id == selfname]
        before = [a for a in stores if (a.end_lineno, a.end_col_offset) < at]
        if not before:
            return None
        store = max(before, key=lambda a: (a.lineno, a.col_offset))
        block = self.block_of(store, fn)
        if block is None:
            return None
        i = next(j for j, x in enumerate(block) if x is store)
        if not any(x.lineno <= e.lineno <= (x.end_lineno or x.lineno) for x in block[i + 1:]):
            return None     # (a store in a branch or loop the read is not in)
        for loop in fn.of_type(ast.For, ast.While):
            if loop.lineno <= e.lineno <= (loop.end_lineno or loop.lineno) and any(
                    a is not store and loop.lineno <= a.lineno <= (loop.end_lineno or 0) for a in stores):
                return None
        for c in fn.of_type(ast.Call):
            f = c.func
            if f.__class__ is ast.Attribute and f.value.__class__ is ast.Name and f.value.id == selfname \
                    and (store.lineno, store.col_offset) < (c.lineno, c.col_offset) < at \
                    and self._may_store_attr(fn, f.attr, e.attr):
                return None
        return store.value

    def _may_store_attr(self, fn: Function, method: str, attr: str, depth: int = 0) -> bool:
        """``self.<method>(...)`` called from ``fn`` may rebind ``self.<attr>``: the method is not
        one of the class's own, or it (or a method of the class it calls) stores the attribute."""
        cls = fn.cls if fn.cls is not None else (fn.enclosing_method().cls if fn.enclosing_method() else None)
        target = cls.methods.get(method) if cls is not None else None
        if target is None or depth > 3:
            return True
        me = target.self_name
        for n in ast.walk(target.node):
            if n.__class__ is ast.Attribute and n.attr == attr and n.ctx.__class__ is ast.Store:
                return True
            if n.__class__ is ast.Call and n.func.__class__ is ast.Attribute and n.func.value.__class__ is ast.Name \
                    and n.func.value.id == me and n.func.attr != method \
                    and self._may_store_attr(target, n.func.attr, attr, depth + 1):
                return True
        return False

    def dead_after(self, stmt: ast.stmt, fn: Function, names, to_end: bool = True) -> bool:
        """What ``stmt`` bound to ``names`` is never read: each is rebound before any read on
        every path after it, or (``to_end``) the function ends first (``liveness.dead_after``)."""
        block = self.block_of(stmt, fn)
        if block is None:
            return False
        closures = [c.node for c in fn.children]
        exits = to_end and not fn.is_module
        return dead_after(block, stmt, frozenset(names), exits, block is getattr(fn.node, "body", None), closures)

    def structure_only(self, stmt: ast.stmt, fn: Function, names, depth: int = 4) -> bool:
        """What ``stmt`` bound to ``names`` is read, and only for its structure: every read of
        them in ``fn`` after ``stmt`` (or anywhere in a loop around it) takes a shape attribute
        (``x.shape``), is handed to a call that reads only structure (``jnp.zeros_like``,
        ``jax.eval_shape``: ``K.STRUCTURE_READERS``), or is an example input of an ``init``
        (``model.init(key, x)``, ``buffer.init(timestep)``: ``K.EXAMPLE_INPUT_METHODS``) --
        possibly wrapped on the way by containers and calls (``Timestep(obs=x)``), or through a
        statement that binds what it computes from them to names read only so in turn
        (``depth`` such steps).  The numbers of such values are never used: a dummy input
        built to give ``init`` its shapes."""
        names = set(names)
        if not names:
            return False
        parents = self._parent_map(fn)
        end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
        loops = [lp for lp in fn.of_type(ast.For, ast.AsyncFor, ast.While)
                 if lp.lineno <= stmt.lineno and (stmt.end_lineno or stmt.lineno) <= (lp.end_lineno or lp.lineno)]
        reads = []
        body = [fn.node.body] if fn.is_lambda else list(getattr(fn.node, "body", []))
        stack = list(body)
        while stack:
            n = stack.pop()
            if n.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef):
                if any(x.__class__ is ast.Name and x.id in names for x in ast.walk(n)):
                    return False    # a nested function may read them any way
                continue
            if n.__class__ is ast.Name and n.id in names and n.ctx.__class__ is ast.Load:
                at = (n.lineno, n.col_offset)
                if at > end or any(lp.lineno <= n.lineno <= (lp.end_lineno or lp.lineno) for lp in loops):
                    reads.append(n)
                continue
            stack.extend(ast.iter_child_nodes(n))
        if not reads:
            return False
        return all(self._read_for_structure(n, fn, parents, depth) for n in reads)

    def _read_for_structure(self, n: ast.AST, fn: Function, parents: dict, depth: int) -> bool:
        node = n
        while True:
            p = parents.get(id(node))
            if p is None:
                return False
            t = p.__class__
            if t is ast.Attribute:
                return node is p.value and p.attr in K.SHAPE_ATTRS
            if t is ast.Call:
                if node is p.func:
                    return False
                q = self.qualname(p.func, fn) if p.func.__class__ in (ast.Name, ast.Attribute) else None
                if q in K.STRUCTURE_READERS:
                    return True
                if p.func.__class__ is ast.Attribute and p.func.attr in K.EXAMPLE_INPUT_METHODS:
                    # (the first of several arguments, and ``rngs=``, are the keys ``init`` draws from)
                    if p.args and node is p.args[0] and (len(p.args) > 1 or p.keywords):
                        return False
                    return not (node.__class__ is ast.keyword and node.arg in ("rngs", "rng", "key"))
                node = p        # its result carries what it computed from the value
                continue
            if t in (ast.keyword, ast.Tuple, ast.List, ast.Dict, ast.Starred, ast.BinOp, ast.UnaryOp,
                     ast.Subscript, ast.IfExp):
                if t is ast.Subscript and node is not p.value or t is ast.IfExp and node is p.test:
                    return False    # (an index or a condition: its numbers decide what is taken)
                node = p
                continue
            if t is ast.Assign and node is p.value and depth > 0:
                targets = []
                for tg in p.targets:
                    if not all(x.__class__ in (ast.Name, ast.Tuple, ast.List, ast.Starred) for x in ast.walk(tg)
                               if x.__class__ not in (ast.Store, ast.Load)):
                        return False
                    targets.extend(x.id for x in ast.walk(tg) if x.__class__ is ast.Name)
                return bool(targets) and self.structure_only(p, fn, targets, depth - 1)
            return False

    def _isinstance_tests(self, test: ast.expr, fn: Function, positive: bool):
        """(name, kind) of the ``isinstance(name, T)`` facts ``test`` being true
        (``positive``) or false establishes."""
        if positive and test.__class__ is ast.BoolOp and test.op.__class__ is ast.And:
            for v in test.values:
                yield from self._isinstance_tests(v, fn, True)
            return
        if not positive:
            if test.__class__ is ast.UnaryOp and test.op.__class__ is ast.Not:
                yield from self._isinstance_tests(test.operand, fn, True)
            return
        if test.__class__ is ast.UnaryOp and test.op.__class__ is ast.Not:
            # ``not isinstance(x, jax.core.Tracer)`` / ``not _is_tracer(x)``: a concrete value
            name = self._tracer_test(test.operand, fn)
            if name is not None:
                yield name, 0
            return
        if not (test.__class__ is ast.Call and test.func.__class__ is ast.Name and test.func.id == "isinstance"
                and len(test.args) == 2 and test.args[0].__class__ is ast.Name):
            return
        k = self._static_type_kind(test.args[1], fn)
        if k is not None:
            yield test.args[0].id, k

    def _array_test(self, test: ast.expr, fn: Function) -> Optional[str]:
        """The name ``test`` (``isinstance(x, jax.Array)``, ``isinstance(x, jnp.ndarray)``)
        asks "is it a JAX array?" of: every tracer is one, so where the answer is no, ``x``
        is a Python value."""
        if not (test.__class__ is ast.Call and test.func.__class__ is ast.Name and test.func.id == "isinstance"
                and len(test.args) == 2 and test.args[0].__class__ is ast.Name):
            return None
        t = test.args[1]
        types = t.elts if t.__class__ is ast.Tuple else [t]
        for ty in types:
            q = self.qualname(ty, fn) if ty.__class__ in (ast.Name, ast.Attribute) else None
            if q in K.ARRAY_ANNOTATIONS:
                return test.args[0].id
        return None

    def _tracer_test(self, test: ast.expr, fn: Function) -> Optional[str]:
        """The name ``test`` asks "is it a tracer?" of: ``isinstance(x, jax.core.Tracer)``, a
        predicate of the project whose body asks it of its first parameter (``def
        contains_tracer(x): return any(isinstance(l, jax.core.Tracer) for l in
        jax.tree.leaves(x))``, here or imported), or one named like ``is_tracer(x)``."""
        call = self._tracer_call(test, fn)
        return call.args[0].id if call is not None else None

    def _tracer_call(self, test: ast.expr, fn: Function, _depth: int = 0) -> Optional[ast.Call]:
        """The call of :meth:`_tracer_test` that ``test`` is, or that the flag ``test`` names
        (``traced = contains_tracer(x)`` bound once, then ``if not traced:``)."""
        if test.__class__ is ast.Name and _depth == 0 and test.id in fn.locals:
            bs = self.bindings(test.id, fn)
            if len(bs) == 1 and bs[0].kind == "=" and bs[0].element.__class__ is ast.Call:
                return self._tracer_call(bs[0].element, fn, 1)
            return None
        if test.__class__ is not ast.Call or len(test.args) < 1 or test.args[0].__class__ is not ast.Name:
            return None
        return test if self._asks_tracer(test, fn) else None

    def _asks_tracer(self, test: ast.Call, fn: Function) -> bool:
        f = test.func
        fname = f.id if f.__class__ is ast.Name else (f.attr if f.__class__ is ast.Attribute else "")
        if fname == "isinstance" and len(test.args) == 2:
            return self._tracer_type(test.args[1], fn)
        if fname.lstrip("_").lower() in ("is_tracer", "is_traced"):
            return True
        return f.__class__ in (ast.Name, ast.Attribute) and self._project_tracer_test(f, fn)

    def _tracer_type(self, t: ast.expr, fn: Function) -> bool:
        q = self.qualname(t, fn) if t.__class__ in (ast.Name, ast.Attribute) else None
        return q is not None and q.endswith("Tracer")

    def trace_time_only(self, node: ast.AST, fn: Function) -> bool:
        """``node`` sits in the body of ``if isinstance(x, Tracer) ...:`` (or of an
        ``is_tracer(x)`` test): code written to run while tracing, on purpose
        (logging the shardings a trace sees, collecting trace-time metadata)."""
        if not self._has_guards(fn):
            return False
        return any(self._tracer_test(t, fn) is not None for t in self.guarding_tests(node, fn))

    def guarding_tests(self, node: ast.AST, fn: Function):
        """The conditions that hold wherever ``node`` (in ``fn``) runs: the test of every
        ``if`` whose body holds it, split at ``and``."""
        parents = self._parent_map(fn)
        child, cur = node, parents.get(id(node))
        while cur is not None:
            if cur.__class__ is ast.If and any(child is b for b in cur.body):
                t = cur.test
                yield from (t.values if t.__class__ is ast.BoolOp and t.op.__class__ is ast.And else [t])
            child, cur = cur, parents.get(id(cur))

    def unreachable_spans(self):
        """``(first line, last line)`` of the statements no run reaches (after a ``return``,
        ``raise``, ``continue`` or ``break`` in the same block; ``liveness.unreachable_spans``)."""
        got = self.__dict__.get("_unreachable_spans")
        if got is None:
            got = self._unreachable_spans = unreachable_spans(self.tree)
        return got

    def unreachable(self, node: ast.AST) -> bool:
        """Is ``node`` in a statement no run reaches?"""
        line = getattr(node, "lineno", None)
        return line is not None and any(a <= line <= b for a, b in self.unreachable_spans())

    def untraced_spans(self):
        """``(first line, last line)`` of every branch body of the module that
        :meth:`untraced_branch` says no trace takes (computed once per module)."""
        got = self.__dict__.get("_untraced_spans")
        if got is None:
            got = self._untraced_spans = [span for fn in self.functions for span in self._fn_untraced_spans(fn)]
        return got

    def _fn_untraced_spans(self, fn: Function):
        """The spans of ``fn`` no trace runs: the branches :meth:`untraced_branch` picks, and
        the statements after ``jax.core.concrete_or_error(None, x, ...)`` with ``x`` traced
        (it raises on a tracer, so what follows runs on concrete values only)."""
        if not fn.contexts:
            return []
        out = []
        if (fn.defaults or self._has_guards(fn)) and fn.of_type(ast.If):
            out = [(b[0].lineno, b[-1].end_lineno or b[-1].lineno)
                   for stmt in fn.of_type(ast.If) for b in (stmt.body, stmt.orelse)
                   if b and self.untraced_branch(b[0], fn)]
            for stmt in fn.of_type(ast.If):
                # ``if jax_surface_scan: return traced_path(...)`` then the rest of the block: the
                # rest is the ``else``, untaken when every traced call makes the test true
                flag = _flag_test(stmt.test, fn) if not stmt.orelse and stmt.body \
                    and stmt.body[-1].__class__ in _EXITS else None
                if flag is None:
                    continue
                p, polarity = flag
                ctxs = _calling_contexts(fn)
                if ctxs and all(_call_omits(c, fn, p, truthy=polarity) for c in ctxs):
                    out.extend(self._rest_of_block(stmt, fn))
        if self._has_guards(fn):
            for node in fn.of_type(ast.BoolOp):
                # ``not contains_tracer(x) and bool(jnp.any(x))`` with x traced: the later
                # operands run only on a concrete x, never in a trace
                if node.op.__class__ is not ast.And:
                    continue
                for i, v in enumerate(node.values[:-1]):
                    call = self._tracer_call(v.operand, fn) \
                        if v.__class__ is ast.UnaryOp and v.op.__class__ is ast.Not else None
                    if call is not None and self.kind(call.args[0], fn) & TRACED:
                        rest = node.values[i + 1:]
                        out.append((rest[0].lineno, rest[-1].end_lineno or rest[-1].lineno))
                        break
        for stmt in fn.of_type(ast.Try):
            if stmt.body and any(_catches_tracer_errors(h.type) for h in stmt.handlers):
                # ``try: idx = jnp.flatnonzero(w)`` / ``except ConcretizationTypeError: raise
                # ValueError("not under jit")``: the trace's failure is handled on purpose
                out.append((stmt.body[0].lineno, stmt.body[-1].end_lineno or stmt.body[-1].lineno))
                if all(h.body and h.body[-1].__class__ in _EXITS for h in stmt.handlers) and any(
                        n.__class__ is ast.Call and n.func.__class__ is ast.Name
                        and n.func.id in ("int", "float", "bool", "complex") and len(n.args) == 1
                        and self.kind(n.args[0], fn) & (TRACED | JAX) for b in stmt.body
                        for n in ast.walk(b)):
                    # ``try: n = int(res.n_valid)`` / ``except ConcretizationTypeError: return
                    # traced_path(...)``: what follows the ``try`` runs only where the conversion
                    # succeeded -- on concrete values
                    out.extend(self._rest_of_block(stmt, fn))
        for stmt in fn.of_type(ast.Expr):
            c = stmt.value
            if c.__class__ is ast.Call and len(c.args) >= 2 and c.func.__class__ in (ast.Name, ast.Attribute) \
                    and (c.func.id if c.func.__class__ is ast.Name else c.func.attr) == "concrete_or_error" \
                    and self.qualname(c.func, fn) in K.CONCRETE_GUARDS \
                    and self.kind(c.args[1], fn) & TRACED:
                out.extend(self._rest_of_block(stmt, fn))
        return out

    def _rest_of_block(self, stmt: ast.stmt, fn: Function) -> list:
        """``[(first line, last line)]`` of the statements after ``stmt`` in its block, or ``[]``."""
        block = self.block_of(stmt, fn)
        i = next((j for j, x in enumerate(block or []) if x is stmt), None)
        if i is None or i + 1 >= len(block):
            return []
        return [(block[i + 1].lineno, block[-1].end_lineno or block[-1].lineno)]

    def in_untraced_branch(self, node: ast.AST, fn: Function) -> bool:
        """``node`` (any node of ``fn``, a call say) lies in a branch :meth:`untraced_branch`
        says no trace of ``fn`` takes, for the contexts ``fn`` has now: a call there hands
        its callee nothing traced."""
        if not fn.contexts or not ((fn.defaults or self._has_guards(fn)) and fn.of_type(ast.If)
                                   or fn.of_type(ast.Expr) or fn.of_type(ast.Try)):
            return False
        memo = self._memo("_untraced_lines")
        key = (id(fn), len(fn.contexts))
        spans = memo.get(key)
        if spans is None:
            spans = memo[key] = self._fn_untraced_spans(fn)
        line = getattr(node, "lineno", None)
        return bool(spans) and line is not None and any(a <= line <= z for a, z in spans)

    def untraced_branch(self, node: ast.AST, fn: Function) -> bool:
        """Is ``node`` (in ``fn``) in the body of ``if flag:`` where ``flag`` is a parameter every
        traced call of ``fn`` leaves falsy -- passes ``False``/``None``/``0``, or nothing with such
        a default (``debug=False``)?  Every trace of ``fn`` then skips the branch (a debug path
        that unrolls a loop next to the ``lax.scan`` the traced path takes; a NumPy-only step
        the jitted caller switches off with ``include_x=False``).  Likewise the body of
        ``if not isinstance(x, jax.core.Tracer):`` where ``x`` is traced."""
        if not fn.contexts:
            return False
        for test in self.guarding_tests(node, fn):
            call = self._tracer_call(test.operand, fn) \
                if test.__class__ is ast.UnaryOp and test.op.__class__ is ast.Not else None
            if call is not None and self.kind(call.args[0], fn) & TRACED:
                # ``if x is not None and not isinstance(x, jax.core.Tracer):`` with x a tracer in
                # every trace of ``fn``: the branch is written to run eagerly only
                return True
            none_test = _none_test(test, fn)
            if none_test is not None and none_test[1] == "is not" \
                    and all(_call_leaves_none(c, fn, none_test[0]) for c in _calling_contexts(fn)):
                return True     # ``if mask is not None:`` with every traced call leaving mask None
            p = test.id if test.__class__ is ast.Name else None
            if p is None or p not in fn.param_nodes:
                continue
            if all(_call_omits(c, fn, p) for c in _calling_contexts(fn)):
                return True
        for stmt, other in self.enclosing_branches(node, fn):
            none_test = _none_test(stmt.test, fn)
            if other is stmt.body and none_test is not None and none_test[1] == "is" \
                    and all(_call_leaves_none(c, fn, none_test[0]) for c in _calling_contexts(fn)):
                return True     # the ``else`` of ``if mask is None:`` when every traced call leaves it None
            # a flag test: ``if use_jax: ... else: <NumPy path>`` with every traced call leaving
            # ``use_jax`` truthy (``True`` passed, or its default): the ``else`` is never traced;
            # ``if not skip_predictor: <predictor>`` with every traced call passing ``True``: the
            # body is never traced
            flag = _flag_test(stmt.test, fn)
            if flag is not None:
                p, polarity = flag
                runs_when_truthy = polarity if other is stmt.orelse else not polarity
                if all(_call_omits(c, fn, p, truthy=not runs_when_truthy) for c in _calling_contexts(fn)):
                    return True
        return False

    def enclosing_branches(self, node: ast.AST, fn: Function):
        """``(if_statement, the other branch's statements)`` for every ``if`` of ``fn`` one of
        whose branches holds ``node``, innermost first."""
        parents = self._parent_map(fn)
        child, cur = node, parents.get(id(node))
        while cur is not None:
            if cur.__class__ is ast.If:
                if any(child is b for b in cur.body):
                    yield cur, cur.orelse
                elif any(child is b for b in cur.orelse):
                    yield cur, cur.body
            child, cur = cur, parents.get(id(cur))

    def _host_types(self, t: ast.expr, fn: Function) -> bool:
        """Every type of an isinstance test is a host type no tracer is an instance of (a
        NumPy array, a Python number, a sharding): not a class of this module, which may be a
        pytree holding tracers."""
        types = t.elts if t.__class__ is ast.Tuple else [t]
        return bool(types) and all(x.__class__ in (ast.Name, ast.Attribute) and self.qualname(x, fn) in _SCALAR_TYPES
                                   for x in types)

    def _static_type_kind(self, t: ast.expr, fn: Function) -> Optional[int]:
        if t.__class__ is ast.Tuple:
            k = 0
            for e in t.elts:
                ek = self._static_type_kind(e, fn)
                if ek is None:
                    return None
                k |= ek
            return k
        if t.__class__ is ast.Name and t.id in self.classes and t.id not in fn.locals:
            return 0       # a class this module defines: an object, not a tracer
        if t.__class__ not in (ast.Name, ast.Attribute):
            return None
        q = self.qualname(t, fn)
        if q in _SCALAR_TYPES:
            return 0
        if q in _CONTAINER_TYPES:
            return CONTAINER
        return None

    @staticmethod
    def _narrow_region(stmts, name: str, k: int, table: Dict[int, int]) -> None:
        """Narrow the loads of ``name`` in ``stmts`` up to its first rebinding there
        (``spec = NamedSharding(spec.mesh, adj)`` ends the region at that line);
        a rebinding inside a loop of the region ends it at the loop."""
        loads, end = [], None
        for s in stmts:
            for n, stmt in _names_with_statements(s):
                if n.id != name:
                    continue
                if n.ctx.__class__ is ast.Load:
                    loads.append(n)
                else:
                    # the store takes effect once its statement is evaluated
                    # (``pos = jnp.arange(pos)`` still reads the narrowed ``pos``)
                    at = (stmt.end_lineno, stmt.end_col_offset) if stmt.__class__ in (ast.Assign, ast.AugAssign,
                                                                                     ast.AnnAssign) \
                        else (n.lineno, n.col_offset)
                    end = at if end is None or at < end else end
            if s.__class__ in (ast.For, ast.AsyncFor, ast.While) and end is not None \
                    and (s.lineno, s.col_offset) <= end:
                end = (s.lineno, s.col_offset)
        for n in loads:
            if end is not None and (n.lineno, n.col_offset) >= end:
                continue
            table[id(n)] = table[id(n)] & k if id(n) in table else k


def _names_with_statements(stmt: ast.stmt):
    """Every Name under ``stmt`` (an operand of ``isinstance(x, T) and x`` may be one itself)
    with its innermost enclosing statement."""
    if stmt.__class__ is ast.Name:
        yield stmt, stmt
        return
    stack = [(stmt, stmt)]
    while stack:
        node, owner = stack.pop()
        for child in ast.iter_child_nodes(node):
            if child.__class__ is ast.Name:
                yield child, owner
            else:
                stack.append((child, child if isinstance(child, ast.stmt) else owner))


def _call_omits(ctx, fn: Function, p: str, truthy: bool = False, _depth: int = 0) -> bool:
    """The traced call behind ``ctx`` leaves parameter ``p`` falsy: passes a falsy literal
    (``debug=False``), or passes nothing for it and its default is a falsy literal (``truthy``:
    the same for a truthy literal, ``use_jax=True``).  A "call" context of this module, or a
    "project" one (another module's calls, summarised in ``ctx.untaken``: the parameters every
    call passes a falsy literal, that or nothing, a truthy literal, that or nothing)."""
    lit = _truthy_literal if truthy else _falsy_literal
    default_falsy = lit(fn.defaults.get(p))
    if ctx.transform == "project":
        untaken = ctx.untaken or (frozenset(),) * 4
        lit_set, or_default = untaken[2:4] if truthy else untaken[0:2]
        return p in lit_set or (default_falsy and p in or_default)
    a = _call_argument(ctx, fn, p)
    caller = ctx.caller
    if a.__class__ is ast.Name and caller is not None and _depth < 4 and a.id in caller.param_nodes \
            and sum(1 for x in ast.walk(caller.node)
                                                                       if x.__class__ is ast.Name and x.id == a.id
                                                                       and x.ctx.__class__ is ast.Store) == 0:
        # ``run_boozer(booz, jax_surface_scan=jax_surface_scan)``: the flag forwarded from the
        # caller's own parameter -- what every traced call of the caller passes for it
        ctxs = _calling_contexts(caller)
        return bool(ctxs) and all(_call_omits(c, caller, a.id, truthy, _depth + 1) for c in ctxs)
    return False if a is None else default_falsy if a is _UNPASSED else lit(a)


# (``_call_argument``: the call passes nothing for the parameter -- its default applies)
_UNPASSED = object()


def _call_argument(ctx, fn: Function, p: str):
    """What the traced call behind a "call" context passes for ``p``: the argument,
    ``_UNPASSED`` when it passes nothing, None when that cannot be told (another kind of
    context, ``*args``/``**kwargs`` at the call, ``p`` bound to the receiver)."""
    call = ctx.node
    if ctx.transform != "call" or call.__class__ is not ast.Call:
        return None
    if any(k.arg is None for k in call.keywords) or any(a.__class__ is ast.Starred for a in call.args):
        return None
    for k in call.keywords:
        if k.arg == p:
            return k.value
    if p in fn.kwonly:
        return _UNPASSED
    offset = 1 if fn.self_name and not _unbound_call(call, fn) else 0
    i = fn.params.index(p) - offset
    if i < len(call.args):
        return call.args[i] if i >= 0 else None
    return _UNPASSED


def _flag_test(test: ast.expr, fn: Function):
    """``(p, True)`` for ``if p:``, ``(p, False)`` for ``if not p:``, ``p`` a parameter of
    ``fn``; None for any other test."""
    polarity = True
    if test.__class__ is ast.UnaryOp and test.op.__class__ is ast.Not:
        test, polarity = test.operand, False
    if test.__class__ is ast.Name and test.id in fn.param_nodes:
        return test.id, polarity
    return None


def _unbound_call(call: ast.Call, fn: Function) -> bool:
    """``Class.method(obj, x)``: a method called through its class (or a base class), the
    receiver passed as the first argument -- every other call of a method (``self.m(x)``,
    ``obj.m(x)``, ``pool(x)`` on a module instance) binds it."""
    f = call.func
    if f.__class__ is not ast.Attribute or f.value.__class__ is not ast.Name or fn.cls is None:
        return False
    name = f.value.id
    return name == fn.cls.name or any(b == name or b.endswith("." + name) for b in fn.cls.bases)


def _calling_contexts(fn: Function):
    """The contexts of ``fn`` whose calls decide which of its branches a trace takes: all of
    them, less the guess that an NNX/Equinox module's ``__call__`` runs under some transform
    (a seed with no call behind it) when real callers are known -- a traced call that leaves
    ``pixels`` None says the ``if pixels is not None:`` branch is untaken; the seed says nothing."""
    real = [c for c in fn.contexts if c.transform not in EAGER_MODULE_SEEDS]
    return real or fn.contexts

def _none_test(test: ast.expr, fn: Function):
    """``(p, "is")`` for ``p is None``, ``(p, "is not")`` for ``p is not None``, with ``p`` a
    parameter of ``fn``; else None."""
    if test.__class__ is not ast.Compare or len(test.ops) != 1 or test.left.__class__ is not ast.Name \
            or test.left.id not in fn.param_nodes:
        return None
    c = test.comparators[0]
    if c.__class__ is not ast.Constant or c.value is not None:
        return None
    op = test.ops[0].__class__
    return (test.left.id, "is") if op is ast.Is else (test.left.id, "is not") if op is ast.IsNot else None


def _call_leaves_none(ctx, fn: Function, p: str) -> bool:
    """The traced call behind ``ctx`` leaves ``p`` None: passes the literal ``None``, or nothing
    with a ``None`` default (another module's calls: passed nothing by every call)."""
    default_none = _none_literal(fn.defaults.get(p))
    if ctx.transform == "project":
        untaken = ctx.untaken or ()
        return default_none and len(untaken) >= 4 and p in untaken[1] and p in untaken[3]
    a = _call_argument(ctx, fn, p)
    return False if a is None else default_none if a is _UNPASSED else _none_literal(a)


def _none_literal(e) -> bool:
    return e.__class__ is ast.Constant and e.value is None


def _falsy_literal(e) -> bool:
    return e.__class__ is ast.Constant and e.value in (False, None, 0)


def _truthy_literal(e) -> bool:
    return e.__class__ is ast.Constant and e.value is not None and bool(e.value) and e.value is not Ellipsis


def tracer_predicate(model, g: Function) -> bool:
    """``g`` answers "is (some leaf of) my first parameter a tracer?": its one ``return`` is
    ``isinstance(p, <...>.Tracer)`` or ``any(isinstance(leaf, <...>.Tracer) for leaf in
    <leaves of p>)`` -- true exactly when ``p`` is traced, so ``not g(p)`` shows ``p`` concrete."""
    if g.is_module or g.is_lambda or not g.params:
        return False
    rets = g.of_type(ast.Return)
    if len(rets) != 1 or rets[0].value is None:
        return False
    p = g.params[0]
    v = rets[0].value
    if v.__class__ is ast.Call and v.func.__class__ is ast.Name and v.func.id == "isinstance" and len(v.args) == 2:
        return v.args[0].__class__ is ast.Name and v.args[0].id == p and model._tracer_type(v.args[1], g)
    if not (v.__class__ is ast.Call and v.func.__class__ is ast.Name and v.func.id == "any" and len(v.args) == 1
            and v.args[0].__class__ is ast.GeneratorExp and len(v.args[0].generators) == 1):
        return False
    gen = v.args[0]
    comp = gen.generators[0]
    e = gen.elt
    if comp.target.__class__ is not ast.Name or comp.ifs or not (
            e.__class__ is ast.Call and e.func.__class__ is ast.Name and e.func.id == "isinstance" and len(e.args) == 2
            and e.args[0].__class__ is ast.Name and e.args[0].id == comp.target.id and model._tracer_type(e.args[1], g)):
        return False
    it = comp.iter
    if it.__class__ is ast.Name:
        return it.id == p
    return it.__class__ is ast.Call and len(it.args) == 1 and it.args[0].__class__ is ast.Name and \
        it.args[0].id == p and it.func.__class__ in (ast.Name, ast.Attribute) and \
        (model.qualname(it.func, g) or "") in ("jax.tree.leaves", "jax.tree_util.tree_leaves")


def export_tracer_tests(model) -> Dict[str, bool]:
    """Exporter: for other modules, the top-level functions that ask whether their first
    parameter is (or holds) a tracer (:func:`tracer_predicate`)."""
    out: Dict[str, bool] = {}
    text = getattr(model.source, "text", None)
    if text is not None and "Tracer" not in text:
        return out
    for fn in model.functions:
        if fn.is_lambda or fn.is_module or fn.parent is None or not fn.parent.is_module or fn.cls is not None:
            continue
        if tracer_predicate(model, fn) and model.top_level_function(fn.name) is fn:
            out[fn.name] = True
    return out
