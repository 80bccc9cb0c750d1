"""Is it traced?  The one family of tracedness predicates.

Which to use when -- *code* (does this function body run while JAX traces?)
or *values* (does this expression hold a tracer?):

Code, on :class:`~jaxlint.analysis.scopes.Function`:

``fn.is_traced``
    ``fn`` itself is a traced context: a transform applies to it, traced code
    calls it, it is a Flax/NNX/Equinox module method, a library contract or
    another module traces it.  ``fn.contexts`` say why, ``fn.confidence`` how
    sure (``certain`` for a transform seen in this file), ``fn.primary_context``
    the reason to quote.  Rules that report *in* traced functions iterate
    ``model.traced_functions()`` (the functions with ``is_traced``).
``fn.under_trace``
    ``fn`` or a function around it is traced: a closure defined inside a
    jitted function runs traced too.  Use it for "is this statement (in
    ``scope``) traced code?" (JAX50x placement, purity of nested helpers).
``model._directly_traced(fn)``
    (model-internal) the parameters a transform traces itself, as opposed to
    those traced because a traced call site passes a tracer.

Values, on :class:`~jaxlint.analysis.model.SemanticModel`:

``model.kind(e, fn) & TRACED``
    the raw bit: ``e`` would hold a tracer if ``fn`` runs traced.  The kind
    machinery uses it everywhere; rules rarely need it.
``model.is_traced(e, fn)``
    ``e`` holds a tracer: ``fn.under_trace`` and the ``TRACED`` bit.  The
    default question of a rule ("is this argument a tracer?").
``model.truth_traced(e, fn)``
    ``bool(e)`` needs a tracer's value (``if``/``while``/``assert``/``and``/
    ``not`` tests): a traced array, not a container (whose length decides).
    Use for Python control flow and ``bool()``; ``_truthiness_traced(kind)``
    is the same test on a kind already computed.  False wherever
    ``model.concrete_primal(fn)``: under ``grad`` alone tracers have values.
``model.traced_culprit(e, fn)``
    the sub-expression that makes ``e`` traced, to name in messages.
``model.is_array(e, fn)``
    ``e`` is certainly a JAX array (traced or not), never a NumPy array or a
    container.
``model.surely_array(e, fn)``
    stricter, for rules that must not mistake a pytree for an array (a traced
    parameter is ``TRACED | JAX`` even when it holds a list of layers): a
    traced name with evidence that it is one array.

``_args_traced(call, fn)`` (in ``kinds.py``) is a kind helper: the ``TRACED``
bit when any argument of ``call`` is traced.
"""
from __future__ import annotations

import ast
from typing import Optional, Set, Tuple

from . import knowledge as K
from .kinds import CONTAINER, JAX, NOT_ARRAY, NUMPY, TRACED, UNSURE, proven
from .narrowing import NarrowingMixin
from .scopes import _LEAVES, INFERRED, Function


# modules whose functions compute arrays, and array methods that compute on their receiver
_SCOPE_DEFS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
_ARRAY_PREFIXES = ("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "jax.scipy.")
_LAYER_PREFIXES = K.LAYER_PREFIXES
_ARRAY_RESULTS = frozenset({"optax.global_norm", "optax.safe_norm", "optax.tree_utils.tree_l2_norm"})
_ARRAY_METHODS = frozenset({"sum", "mean", "max", "min", "any", "all", "prod", "std", "var", "argmax", "argmin",
                            "cumsum", "astype", "reshape", "dot", "clip", "round", "squeeze", "ravel", "flatten",
                            "transpose", "nonzero", "item", "tolist", "__array__"})


class TracednessMixin(NarrowingMixin):
    @staticmethod
    def _truthiness_traced(k: int, may: bool = False) -> bool:
        """``bool(v)`` needs a tracer's value: not for a container (its length decides), nor
        for an unknown (``UNSURE``) unless ``may``."""
        return bool(k & TRACED) and bool(k & JAX) and not (k & CONTAINER) and (may or not k & UNSURE)

    def truth_traced(self, e: ast.AST, fn: Function) -> bool:
        """Does ``bool(e)`` (an ``if``/``while``/``and``/``not`` test) need a traced value?
        Never where :meth:`concrete_primal` holds."""
        if self.concrete_primal(fn):
            return False
        return self._truth_traced(e, fn)

    def _truth_traced(self, e: ast.AST, fn: Function) -> bool:
        if isinstance(e, ast.BoolOp):
            return any(self._truth_traced(v, fn) for v in e.values)
        return self._truthiness_traced(self.kind(e, fn))

    def concrete_primal(self, fn: Function) -> bool:
        """Every trace of ``fn`` is differentiation (``grad``, ``jacrev``, ``jvp``...) or a
        transform that runs its function on the values it is given (``custom_jvp``,
        ``custom_vjp``: eager unless a staging trace surrounds the call), applied outside
        any staging trace, directly or through the traced callers of a helper: its tracers
        carry concrete values, so Python control flow and boolean-mask indexing on them
        work (``jax.grad`` of ``if x > 0: ...`` runs).
        Any ``jit``, ``vmap``, ``lax`` body, module method or other module's trace
        around it: False."""
        return self._traced_only_by(fn, "_primal_cache", lambda tr: tr.differentiates or tr.eager)

    def is_traced(self, e: ast.AST, fn: Function) -> bool:
        """``e`` holds a tracer: ``fn`` runs traced and ``e`` is a traced value (proven, not an
        unknown)."""
        return fn.under_trace and proven(self.kind(e, fn))

    def traced_culprit(self, e: ast.AST, fn: Function) -> Optional[ast.AST]:
        """The innermost-leftmost sub-expression that makes ``e`` traced.

        Used in messages: "`if` on traced value `x`".  Returns a Name when
        one carries the taint, else the smallest traced call or attribute.
        """
        if not proven(self.kind(e, fn)):
            return None
        t = e.__class__
        if t is ast.Name:
            return e
        if t is ast.Call:
            if isinstance(e.func, ast.Attribute):
                c = self.traced_culprit(e.func.value, fn)
                if c is not None:
                    return c
            for a in list(e.args) + [k.value for k in e.keywords]:
                c = self.traced_culprit(a, fn)
                if c is not None:
                    return c
            return e
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                c = self.traced_culprit(child, fn)
                if c is not None:
                    return c
        return e

    def is_array(self, e: ast.AST, fn: Function) -> bool:
        """A JAX array for sure: traced array or bound from a jax call, never a NumPy array or container."""
        k = self.kind(e, fn)
        return bool(k & JAX) and not (k & (NUMPY | CONTAINER))

    def surely_array(self, e: ast.AST, fn: Function) -> bool:
        """``e`` is surely one traced array, not a pytree of arrays (a list of layers, a
        dict of parameters): its kind is ``TRACED | JAX`` without ``CONTAINER``, and it is
        a name that is either a parameter of ``fn`` annotated as an array or used like one
        in ``fn`` (an arithmetic operand, ``.shape``, ``.T``, ``.reshape``, ...), or a local
        of ``fn`` bound by at least one plain ``name = value`` and all of whose plain
        assignments are arithmetic or a ``jax.numpy``/``lax``/``random``/``nn`` call
        returning one array (``+=``-style updates keep it an array)."""
        k = self.kind(e, fn)
        if not (proven(k) and k & JAX) or k & CONTAINER or e.__class__ is not ast.Name:
            return False
        name = e.id
        if name in fn.param_nodes:
            ann = fn.param_nodes[name].annotation
            if ann is not None:
                q = self.qualname(ann.value if isinstance(ann, ast.Subscript) else ann, fn.parent)
                if q in K.ARRAY_ANNOTATIONS:
                    return True
            return self._used_as_array(fn, name)
        # the values of its plain assignments and updates (unpacking, loop and other
        # targets add nothing either way)
        bindings = [b for b in self.bindings(name, fn)
                    if b.kind == "aug" or (b.node.__class__ is ast.Assign and not b.path)]
        if not bindings:
            return False
        for b in bindings:
            if b.kind == "aug":
                continue
            v = b.value
            if v.__class__ is ast.BinOp:
                continue
            if v.__class__ is ast.Call and v.func.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(v.func, fn)
                if q is not None and q.startswith(K.SINGLE_ARRAY_MODULES) and q not in K.MULTI_ARRAY_RESULTS:
                    continue
            return False
        return True

    # ------------------------------------------------------- None guards
    def off_trace(self, node: ast.AST, fn: Function) -> bool:
        """``node`` (in ``fn``) never runs while ``fn`` is traced: it sits under
        ``if v is None:`` (or in the ``else`` of ``if v is not None:``) where ``v`` is
        not None whenever a transform traces ``fn`` -- a parameter every transform site
        binds with ``partial(fn, v=<not None>)``, or a variable of the enclosing function
        that is tested ``if v is None: return ...`` before every transform site.  Code
        there is the eager path (``neighbors is None``: allocate; else: update in
        ``lax.cond``)."""
        for v in self._none_guards(node, fn):
            if self._not_none_when_traced(v, fn):
                return True
        if self.default_fallback(node, fn):
            return True   # (may not: a fallback the traced callers may never take -- unknown, silent)
        return self._host_type_branch(node, fn)

    def default_fallback(self, node: ast.AST, fn: Function) -> bool:
        """``node`` sits in a fallback for a missing argument -- under ``if p is None:`` (or the
        ``else`` of ``if p is not None:``) for a parameter ``p`` of ``fn`` -- and ``fn`` is traced
        only by inference (a module method, code reached from one): whether any traced call leaves
        ``p`` out is not known here (``if rng is None: rng = PRNGKey(int(time.time()))`` taken
        by an eager ``init`` only, every jitted ``apply`` passing a key)."""
        if fn.confidence != INFERRED or any(c.transform == "config" for c in fn.contexts):
            return False
        return self.missing_argument_branch(node, fn)

    def missing_argument_branch(self, node: ast.AST, fn: Function) -> bool:
        """``node`` sits in a fallback for a missing argument: under ``if p is None:`` (or the
        ``else`` of ``if p is not None:``) for a parameter ``p`` of ``fn`` -- what callers that
        leave ``p`` out get, not what the callers that pass it get."""
        return any(v in fn.param_nodes for v in self._none_guards(node, fn))

    def _host_type_branch(self, node: ast.AST, fn: Function) -> bool:
        """``node`` sits under ``if isinstance(e, np.ndarray):`` (a NumPy array, a Python
        number, a sharding...) where ``e`` is traced: no tracer is an instance of such a
        type, so the branch is the eager path and never runs while ``fn`` is traced."""
        if not fn.nodes.get(ast.If):
            return False
        direct = any(c.transform not in ("call", "project") for c in fn.contexts)
        for t in self.guarding_tests(node, fn):
            if t.__class__ is ast.Call and t.func.__class__ is ast.Name and t.func.id == "isinstance" \
                    and len(t.args) == 2 and direct and self._host_types(t.args[1], fn) \
                    and self._directly_traced_value(t.args[0], fn):
                return True
        return False

    def _directly_traced_value(self, e: ast.AST, fn: Function) -> bool:
        """``e`` is a parameter a transform traces (or an item of one): surely a tracer here."""
        while e.__class__ is ast.Subscript:
            e = e.value
        return e.__class__ is ast.Name and e.id in fn.traced_params and not self.reaching_value(e, fn)

    def _none_guards(self, node: ast.AST, fn: Function):
        """Names ``v`` of the ``if v is None`` branches (of ``fn``) that hold ``node``."""
        parents = self._parent_map(fn)
        child, cur = node, parents.get(id(node))
        while cur is not None:
            if cur.__class__ is ast.If:
                t = cur.test
                if t.__class__ is ast.Compare and len(t.ops) == 1 and t.left.__class__ is ast.Name \
                        and t.comparators[0].__class__ is ast.Constant and t.comparators[0].value is None:
                    op = t.ops[0].__class__
                    in_body = any(child is b for b in cur.body)
                    in_else = any(child is b for b in cur.orelse)
                    if (op is ast.Is and in_body) or (op is ast.IsNot and in_else):
                        yield t.left.id
            child, cur = cur, parents.get(id(cur))

    def _parent_map(self, fn: Function) -> dict:
        cache = self._memo("_parents_cache")
        got = cache.get(id(fn))
        if got is None:
            got = {}
            body = [fn.node.body] if fn.is_lambda else list(getattr(fn.node, "body", []))
            stack = list(body)
            for b in body:
                got[id(b)] = None
            pop, push, AST, leaves = stack.pop, stack.append, ast.AST, _LEAVES
            while stack:
                n = pop()
                if n.__class__ in _SCOPE_DEFS:
                    continue
                # (``ast.iter_child_nodes`` inlined: every child mapped, in its order; leaves --
                # contexts, operators, constants -- have no children to visit)
                for f in n._fields:
                    v = getattr(n, f, None)
                    if v.__class__ is list:
                        for c in v:
                            if isinstance(c, AST):
                                got[id(c)] = n
                                if c.__class__ not in leaves:
                                    push(c)
                    elif isinstance(v, AST):
                        got[id(v)] = n
                        if v.__class__ not in leaves:
                            push(v)
            cache[id(fn)] = got
        return got

    def _not_none_when_traced(self, v: str, fn: Function) -> bool:
        if not fn.contexts:
            return False
        sites = self._site_maps()[0]
        for c in fn.contexts:
            site = sites.get(id(c.node))
            if site is None or site.call is None or site.is_decorator:
                return False
            if v in fn.param_nodes:
                if not self._partial_binds(site, fn, v):
                    return False
            else:
                scope = self.resolve_scope(v, fn)
                if scope is None or scope.is_module or site.scope is not scope \
                        or not self._guarded_before(site.node, scope, v):
                    return False
        return True

    def _partial_binds(self, site, fn: Function, v: str) -> bool:
        """The site passes ``partial(fn, ..., v=<not None>)`` as the traced function."""
        for fun in self._transform_funs(site.call, site.transform):
            if fun.__class__ is ast.Call and self.qualname(fun.func, site.scope) in K.PARTIAL:
                target = self.resolve_callable(fun, site.scope)
                if target is None or target.function is not fn:
                    continue
                for kw in fun.keywords:
                    if kw.arg == v:
                        val = kw.value
                        return not (val.__class__ is ast.Constant and val.value is None)
        return False

    def _guarded_before(self, node: ast.AST, scope: Function, v: str) -> bool:
        """A statement before ``node`` in one of its blocks (in ``scope``) is
        ``if w is None: ... return/raise`` with ``w`` being ``v`` or a plain alias of it."""
        parents = self._parent_map(scope)
        child, cur = node, parents.get(id(node))
        while True:
            if cur is None:
                blocks = [getattr(scope.node, "body", [])]
            else:
                blocks = [getattr(cur, f, None) for f in ("body", "orelse", "finalbody")]
            for block in blocks:
                if not isinstance(block, list) or not any(stmt is child for stmt in block):
                    continue
                for stmt in block:
                    if stmt is child:
                        break
                    w = self._none_exit(stmt)
                    if w is not None and (w == v or self._alias_at(w, v, scope, stmt.lineno)):
                        return True
            if cur is None:
                return False
            child, cur = cur, parents.get(id(cur))

    def _alias_at(self, w: str, v: str, scope: Function, line: int) -> bool:
        """The last binding of ``w`` in ``scope`` before ``line`` is ``w = v``."""
        last = None
        for target, value, mode in self.binding_table(scope).entries:
            if target.__class__ is ast.Name and target.id == w and target.lineno < line \
                    and (last is None or target.lineno > last[0].lineno):
                last = (target, value, mode)
        return last is not None and last[2] == "=" and last[1].__class__ is ast.Name and last[1].id == v

    @staticmethod
    def _none_exit(stmt: ast.AST) -> Optional[str]:
        """``w`` of ``if w is None: ...; return`` (or raise), without an else."""
        if stmt.__class__ is not ast.If or stmt.orelse:
            return None
        t = stmt.test
        if not (t.__class__ is ast.Compare and len(t.ops) == 1 and t.ops[0].__class__ is ast.Is
                and t.left.__class__ is ast.Name
                and t.comparators[0].__class__ is ast.Constant and t.comparators[0].value is None):
            return None
        if stmt.body and stmt.body[-1].__class__ in (ast.Return, ast.Raise):
            return t.left.id
        return None

    def vouched_array(self, e: ast.AST, fn: Function) -> bool:
        """May a rule report ``e`` (a traced value of ``fn``) as an array?  Under a
        transform this module applies, or in a function the user lists in
        ``traced-functions``, being traced is enough; in code traced by inference
        (module methods, library contracts, other modules' calls) or by an Equinox
        filter transform (which traces array leaves only) ``e`` must also be
        :meth:`evidently_array` -- there parameters and pytree fields are as often
        static Python values, and when the code cannot tell, rules stay silent."""
        if any(c.transform == "config" for c in fn.contexts):
            return True
        # Equinox's filter transforms trace array leaves only: a non-array field stays static
        filtered = any(getattr(K.transform_for(c.transform), "kind", None) == "filter" for c in fn.contexts)
        if fn.confidence != INFERRED and not filtered:
            return True
        return self.evidently_array(e, fn)

    def evidently_array(self, e: Optional[ast.AST], fn: Function, _depth: int = 0) -> bool:
        """There is evidence in the code that ``e`` holds an array, not a Python value a
        traced pytree or a configuration carries: a ``jax.numpy``/``lax``/``random``/``nn``
        call, an array method on a traced value (``x.sum()``), arithmetic or a comparison
        with such a value, an item of one, or a name :meth:`surely_array` vouches for
        (annotated as an array, used in arithmetic or with ``.shape``, or bound to array
        operations).  Rules reporting on values of *inferred* traced code (module methods,
        library contracts, other modules' calls) ask it: there a parameter or a pytree
        field is as often a static Python value as an array."""
        if e is None or _depth > 6:
            return False
        t = e.__class__
        if t is ast.Name and (self.kind(e, fn) & (CONTAINER | JAX)) == CONTAINER:
            return False   # a Python list or dict (``primary_H + others`` concatenates lists)
        if t in (ast.Name, ast.Subscript, ast.Attribute, ast.Call) and not self._loop_variable(e, fn) \
                and self._array_use(e, fn):
            return True
        if t is ast.Call:
            f = e.func
            if f.__class__ is ast.Call:
                # ``nn.Dense(4)(x)``: a layer of a neural-network library applied to a value
                q = self.qualname(f.func, fn) if f.func.__class__ in (ast.Name, ast.Attribute) else None
                return q is not None and q.startswith(_LAYER_PREFIXES)
            if f.__class__ is ast.Attribute and f.attr == "param" and f.value.__class__ is ast.Name \
                    and f.value.id == "self":
                return True   # a linen ``self.param(...)``
            if f.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(f, fn)
                if q is not None:
                    return (q.startswith(_ARRAY_PREFIXES) or q in K.ARRAY_FUNCTIONS or q in _ARRAY_RESULTS) \
                        and q not in K.STATIC_RESULT_CALLS
                if f.__class__ is ast.Attribute and f.attr in _ARRAY_METHODS:
                    return self.evidently_array(f.value, fn, _depth + 1) or bool(self.kind(f.value, fn) & TRACED)
                target = self.resolve_callable(f, fn)
                if target is not None and not target.function.is_lambda and target.function is not fn:
                    rets = [r.value for r in target.function.of_type(ast.Return)]
                    return bool(rets) and all(self.evidently_array(r, target.function, _depth + 1) for r in rets)
            return False
        if t is ast.BinOp:
            return self.evidently_array(e.left, fn, _depth + 1) or self.evidently_array(e.right, fn, _depth + 1)
        if t is ast.UnaryOp:
            return self.evidently_array(e.operand, fn, _depth + 1)
        if t is ast.Compare:
            return any(self.evidently_array(x, fn, _depth + 1) for x in [e.left] + list(e.comparators))
        if t is ast.BoolOp:
            return any(self.evidently_array(x, fn, _depth + 1) for x in e.values)
        if t is ast.Subscript:
            if e.slice.__class__ is ast.Constant and isinstance(e.slice.value, str):
                return False   # ``state["stacked_obs"]``: an entry of a dict, of any kind
            return self.evidently_array(e.value, fn, _depth + 1)
        if t is ast.Attribute:
            return e.attr in ("T", "mT", "real", "imag") and self.evidently_array(e.value, fn, _depth + 1)
        if t is ast.Name:
            narrowed = self.narrowed_kind(e, fn)
            if narrowed is not None:
                return narrowed != NOT_ARRAY and bool(narrowed & JAX)
            if self.surely_array(e, fn):
                return True
            a = fn.param_nodes.get(e.id)
            if a is not None and self._used_as_object(fn, e.id):
                return False  # ``env.reset()``, ``policy(x)``: no array has that attribute, nor is called
            if a is not None and fn.param_kinds.get(e.id, 0) & JAX:
                return True   # the traced call sites pass arrays
            if a is not None and fn.contexts and fn.filtered_only \
                    and all(b.kind == "param" for b in self.bindings(e.id, fn)) and self._array_passed(fn, e.id):
                return True   # ``f(jnp.ones(()), 3)``: an Equinox filter transform traces the array passed
            if a is not None and a.annotation is not None:
                return bool(self.annotation_kind(a.annotation, fn.parent) & JAX)
            v = self.single_value(e.id, fn) if e.id in fn.locals and e.id not in fn.param_nodes else None
            return v is not None and self.evidently_array(v, fn, _depth + 1)
        return False

    def _loop_variable(self, e: ast.AST, fn: Function) -> bool:
        """``e`` is a name a loop or a comprehension binds: an element of a container,
        whose kind is the container's (a Python weight beside an array in ``for w, x in
        terms`` is as traced as the array) -- its uses prove nothing."""
        if e.__class__ is not ast.Name:
            return False
        if fn.nodes.get(ast.comprehension) and fn.comprehension_loads().get(id(e)) is not None:
            return True
        return any(mode == "for" and any(n.__class__ is ast.Name and n.id == e.id for n in ast.walk(target))
                   for target, _value, mode in self.binding_table(fn).entries)

    def _array_use(self, e: ast.AST, fn: Function) -> bool:
        """``fn`` uses the expression ``e`` (the same code) as an array somewhere: an
        operand of arithmetic or unary minus, or an argument of a ``jax.numpy``/``lax``
        call (``w = w / scale``, ``action = -action``, ``jnp.clip(x, 0, 1)``) -- except where
        JAX needs a static Python int (``K.SHAPE_ARGUMENTS``: ``jnp.zeros(n)``, the ``num`` of
        ``jnp.linspace``), which says the opposite."""
        key = ast.dump(e)
        # under an Equinox filter transform a Python int stays static: arithmetic (``-ctx_size``,
        # ``n + 1``) is what ints do too -- only array functions are evidence there
        arith = not (fn.contexts and fn.filtered_only and e.__class__ is ast.Name and e.id in fn.param_nodes)
        for n in fn.walk():
            t = n.__class__
            if t is ast.BinOp and n.op.__class__ is not ast.Mod and arith:
                sides = (n.left, n.right)
            elif t is ast.UnaryOp and n.op.__class__ is ast.USub and arith:
                sides = (n.operand,)
            elif t is ast.Call and n.func.__class__ in (ast.Name, ast.Attribute):
                q = self.qualname(n.func, fn)
                if q is None or not q.startswith(_ARRAY_PREFIXES) or q in K.STATIC_RESULT_CALLS:
                    continue
                sides = n.args[1:] if q in K.SEQUENCE_FIRST else n.args
                shape = K.SHAPE_ARGUMENTS.get(q)
                if shape is not None:
                    # ``jnp.logspace(a, b, num)``: JAX needs a Python int there, not an array
                    positions = shape[0]
                    sides = [] if K.ALL_POSITIONS in positions else \
                        [a for i, a in enumerate(n.args) if i not in positions]
            else:
                continue
            for side in sides:
                if side.__class__ is e.__class__ and ast.dump(side) == key:
                    return True
        return False

    def _used_as_object(self, fn: Function, name: str) -> bool:
        """``fn`` uses ``name`` as something no ``jax.Array`` is: it reads an attribute or
        calls a method arrays do not have (``env.reset()``, ``cfg.depth``; ``K.ARRAY_ATTRIBUTES``)
        or calls it (``policy(obs)``).  What the caller passes there is some other pytree node
        or Python object, whatever the traced call sites look like."""
        return name in self._name_uses(fn)[1]

    def _used_as_array(self, fn: Function, name: str) -> bool:
        """``name`` is used like an array somewhere in ``fn``: an arithmetic operand, ``.shape``."""
        return name in self._name_uses(fn)[0]

    def _name_uses(self, fn: Function) -> Tuple[Set[str], Set[str]]:
        """The names ``fn`` uses as arrays and the names it uses as other objects (see
        :meth:`_used_as_array`, :meth:`_used_as_object`): one walk per function for every
        name asked about."""
        memo = self._memo("_name_uses_memo")
        got = memo.get(id(fn))
        if got is None:
            arrays: Set[str] = set()
            objects: Set[str] = set()
            for n in fn.walk():
                t = n.__class__
                if t is ast.BinOp:
                    for side in (n.left, n.right):
                        if side.__class__ is ast.Name:
                            arrays.add(side.id)
                elif t is ast.Attribute and n.value.__class__ is ast.Name:
                    if n.attr in K.ARRAY_ONLY_ATTRS:
                        arrays.add(n.value.id)
                    if n.ctx.__class__ is ast.Load and n.attr not in K.ARRAY_ATTRIBUTES \
                            and not n.attr.startswith("__"):
                        objects.add(n.value.id)
                elif t is ast.Call and n.func.__class__ is ast.Name:
                    objects.add(n.func.id)
            got = memo[id(fn)] = (arrays, objects)
        return got
