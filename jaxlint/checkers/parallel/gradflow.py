"""Where the gradients of a pmapped step go: from the ``jax.grad``/``value_and_grad`` call
that makes them, through clipping and ``tx.update``, to the optimizer update that applies
them, and whether a reducing collective (``lax.pmean``/``psum``) touches them on the way.

One pass over the statements of one function, in source order (branches are visited in
order and a sync in any branch counts: when the rule cannot tell, it stays silent).
"""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ...analysis import CallTarget, Function, SemanticModel
from ...analysis import knowledge as K
from ...analysis.project import register_exporter
from ...analysis.returns import top_level_functions
from ..pytree.boundary import instance_class
from .axes import REDUCING, call_arg, mentions_collective

# gradient makers: qualified name -> index of the gradients in the result of the made
# function (None: the whole result), and that index when ``has_aux=True``
GRAD_MAKERS = K.GRAD_MAKERS
# optimizer updates that apply gradients (or updates made from them) to the parameters:
# qualified function -> (keyword, position) of the gradient argument
APPLY_FUNCTIONS: Dict[str, Tuple[str, int]] = {
    "optax.apply_updates": ("updates", 1), "equinox.apply_updates": ("updates", 1),
}
# methods: name -> (keyword, position); ``state.apply_gradients(grads=grads)``
APPLY_METHODS: Dict[str, Tuple[str, int]] = {"apply_gradients": ("grads", 0)}
# ``tx.update(grads, opt_state, params)``: an optimizer transformation (it takes at least
# two arguments; ``dict.update`` takes one)
TX_UPDATE = "update"
TREE_MAP = frozenset({"jax.tree.map", "jax.tree_util.tree_map_with_path", "jax.tree.map_with_path"})
# libraries whose functions the rule knows (knowledge.KNOWN_LIBRARY_PREFIXES, and functools): a
# gradient handed to a function of any other module -- another module of the project that
# exports no ``reduces`` fact, a package not analysed -- is an unknown
KNOWN_LIBRARIES = K.KNOWN_LIBRARY_PREFIXES + ("functools.",)
# array reductions a per-example gradient is averaged with on one device
_REDUCING_ARRAY = frozenset({"jax.numpy.mean", "jax.numpy.sum", "jax.numpy.average"})


class Origin:
    """One gradient value: the statement that makes it and the name it is bound to."""

    __slots__ = ("stmt", "name", "tx_call")

    def __init__(self, stmt: ast.stmt, name: Optional[str]):
        self.stmt = stmt
        self.name = name            # the bound name (None when bound inside a tuple value)
        self.tx_call: Optional[ast.Call] = None   # the first tx.update that consumed it


class Unsynced:
    __slots__ = ("origin", "sink", "fn")

    def __init__(self, origin: Origin, sink: ast.Call, fn: Function):
        self.origin = origin
        self.sink = sink
        self.fn = fn                # the function the sink (and the origin) is in


# how deep the flow follows gradients into helpers of the module
MAX_HELPER_DEPTH = 2


class GradFlow:
    def __init__(self, model: SemanticModel, fn: Function, seeds: Optional[Dict[str, Origin]] = None,
                 depth: int = 0):
        self.m = model
        self.fn = fn
        self.depth = depth
        self.raw: Dict[str, Origin] = dict(seeds or {})
        self.found: List[Unsynced] = []
        # helper calls already followed: id(call) -> the helper's flow
        self._helpers: Dict[int, "GradFlow"] = {}
        # names of this function bound, so far in source order, to a gradient function
        # (``grad_fn = jax.value_and_grad(loss_fn)``; None: bound to something else)
        self._grad_fns: Dict[str, Optional[Tuple[Optional[int]]]] = {}

    # ------------------------------------------------------------- entry
    def run(self) -> List[Unsynced]:
        body = self.fn.node.body if not self.fn.is_lambda else []
        self._block(body)
        return self.found

    def _block(self, stmts: List[ast.stmt]) -> None:
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            self._sinks(st)
            self._follow_helpers(st)
            if isinstance(st, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self._assign(st)
            elif isinstance(st, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
                for field in ("body", "orelse", "finalbody"):
                    self._block(getattr(st, field, []) or [])
                for h in getattr(st, "handlers", []) or []:
                    self._block(h.body)

    # ------------------------------------------------------- bindings
    def _assign(self, st: ast.stmt) -> None:
        value = st.value
        if value is None:
            return
        targets = st.targets if isinstance(st, ast.Assign) else [st.target]
        for t in targets:
            if isinstance(t, ast.Name):
                # grad_fn = jax.value_and_grad(...) in one branch, something else in another
                self._grad_fns[t.id] = self._maker(value, 0)
        grad = self._maker(value.func, 0) if isinstance(value, ast.Call) else None
        if grad is not None:
            (index,) = grad
            for t in targets:
                self._bind_grads(st, t, index)
            return
        sub = self._helpers.get(id(value))
        if sub is not None:
            # ``loss, grads = compute_grads(...)`` with ``loss = lax.pmean(loss, ...)`` inside: what
            # the helper returns unreduced, followed
            self._bind_returned(st, targets, sub)
            return
        if self._syncs(value):
            for t in targets:
                for name in _names(t):
                    self.raw.pop(name, None)
            return
        made = self._body_grads(value) if isinstance(value, ast.Call) else None
        if made is not None:
            # grads, _ = lax.scan(micro_step, zeros, batches): accumulated in a loop body;
            # (grads, total) = lax.fori_loop(0, n, body, (zeros, 0.0)): one element of the carry
            for path in made:
                for t in targets:
                    self._bind_path(st, t, path)
            return
        origin = self._raw_in(value)
        if origin is None:
            # grads = grads + jax.grad(loss_fn)(params, xs[i]) / n;
            # grads = jax.vmap(jax.grad(loss_fn), ...)(params, xs).mean(0): made inside the expression
            made = self._made_inside(value)
            if made is not None:
                single = targets[0].id if len(targets) == 1 and isinstance(targets[0], ast.Name) else None
                origin = Origin(st, single)
        for t in targets:
            for name in _names(t):
                if origin is not None:
                    self.raw[name] = origin
                elif not isinstance(st, ast.AugAssign):
                    self.raw.pop(name, None)
        if origin is not None and isinstance(value, ast.Call) and origin.tx_call is None \
                and self._is_tx_update(value):
            origin.tx_call = value

    def _bind_grads(self, st: ast.stmt, target: ast.expr, index: Optional[int]) -> None:
        if index is None:
            if isinstance(target, ast.Name):
                self.raw[target.id] = Origin(st, target.id)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if index < len(target.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
                e = target.elts[index]
                if isinstance(e, ast.Name):
                    self.raw[e.id] = Origin(st, e.id)
        elif isinstance(target, ast.Name):
            self.raw[target.id] = Origin(st, None)   # the (value, grads) pair

    def _made_inside(self, value: ast.expr) -> Optional[ast.Call]:
        """The gradient call (``jax.grad(f)(...)``, whole result) that ``value`` only does
        arithmetic on: ``acc + jax.grad(f)(p, x) / n``, ``jax.vmap(jax.grad(f))(p, xs).mean(0)``,
        ``jnp.mean(jax.vmap(jax.grad(f))(p, xs), axis=0)``, ``jax.tree.map(f, jax.grad(...)(...))``."""
        m, fn = self.m, self.fn
        e = value
        if isinstance(e, ast.BinOp):
            for n in ast.walk(e):
                if isinstance(n, ast.Call) and self._maker(n.func, 0) == (None,):
                    return n
                if isinstance(n, ast.Call) and n is not e:
                    # only arithmetic and gradient calls on the way
                    if not (isinstance(n.func, ast.Attribute) or self._maker(n.func, 0) is not None):
                        return None
            return None
        if not isinstance(e, ast.Call):
            return None
        inner: List[ast.expr] = []
        if isinstance(e.func, ast.Attribute) and isinstance(e.func.value, ast.Call) and \
                m.qualname(e.func, fn) is None:
            inner = [e.func.value]                      # (...).mean(axis=0)
        elif isinstance(e.func, (ast.Name, ast.Attribute)):
            q = m.qualname(e.func, fn)
            if q in _REDUCING_ARRAY or q in TREE_MAP or q == "jax.tree_util.tree_map":
                inner = list(e.args)
        for a in inner:
            if isinstance(a, ast.Call) and self._maker(a.func, 0) == (None,):
                return a
        return None

    def _bind_path(self, st: ast.stmt, target: ast.expr, path: Tuple[Optional[int], ...]) -> None:
        """Bind the name ``path`` leads to in ``target`` (``()``: the whole target)."""
        for i in path:
            if i is None:
                break
            if not isinstance(target, (ast.Tuple, ast.List)) or i >= len(target.elts) or \
                    any(isinstance(e, ast.Starred) for e in target.elts):
                return
            target = target.elts[i]
        if isinstance(target, ast.Name):
            self.raw[target.id] = Origin(st, target.id)

    def _maker(self, func: ast.expr, depth: int) -> Optional[Tuple[Optional[int]]]:
        """Is ``func`` a gradient function (``jax.grad(f)``, a name bound to one)?  Returns
        ``(index,)``: where the gradients are in its result (None: the whole result)."""
        m, fn = self.m, self.fn
        if isinstance(func, ast.Call):
            q = m.qualname(func.func, fn) if isinstance(func.func, (ast.Name, ast.Attribute)) else None
            if q in GRAD_MAKERS:
                plain, aux = GRAD_MAKERS[q]
                has_aux = any(k.arg == "has_aux" and isinstance(k.value, ast.Constant) and k.value.value is True
                              for k in func.keywords)
                return (aux if has_aux else plain,)
            tr = K.transform_for(q)
            if tr is not None and tr.kind in ("jit", "filter", "vmap") and func.args and depth < 4:
                # jax.jit(jax.grad(f)); jax.vmap(jax.grad(f)): per-example gradients, stacked
                return self._maker(func.args[0], depth + 1)
            return None
        if isinstance(func, ast.Name) and depth < 4:
            if func.id in self._grad_fns:
                return self._grad_fns[func.id]
            bound = m.single_value(func.id, fn)
            if bound is not None:
                return self._maker(bound, depth + 1)
        return None

    def _body_grads(self, call: ast.Call) -> Optional[List[Tuple[int, ...]]]:
        """``lax.scan``/``fori_loop``/``while_loop``/``map`` whose body (a function of this
        module) returns gradients it makes (micro-batch accumulation): the paths to them in
        the loop's result (the carry: position 0 of what ``scan`` returns, the whole result of
        the others; in a carry tuple ``(acc, total)``, the elements holding them)."""
        m, fn = self.m, self.fn
        if self.depth >= MAX_HELPER_DEPTH or not isinstance(call.func, (ast.Name, ast.Attribute)):
            return None
        tr = K.transform_for(m.qualname(call.func, fn))
        if tr is None or tr.kind != "body" or tr.loop is None or not tr.fun_positions:
            return None
        pos = tr.fun_positions[-1]     # the body (while_loop: after the condition)
        if pos >= len(call.args):
            return None
        target = m.resolve_callable(call.args[pos], fn)
        if target is None or target.transforms:
            return None
        body = target.function
        sub = GradFlow(m, body, {}, self.depth + 1)
        sub.run()
        if sub.found:
            return None      # the body applies them itself
        # scan returns (carry, stacked outputs): the carry accumulates; fori_loop/while_loop
        # return the carry, lax.map the stacked results
        carry_out = 0 if tr.loop == "first" else None
        rets = [body.node.body] if body.is_lambda else [r.value for r in body.of_type(ast.Return)]
        if not rets:
            return None
        prefix: Tuple[int, ...] = (carry_out,) if carry_out is not None else ()
        paths: Optional[Set[Tuple[int, ...]]] = None
        for v in rets:
            if v is None:
                return None
            if carry_out is not None:
                if not isinstance(v, ast.Tuple) or len(v.elts) < 2:
                    return None
                v = v.elts[carry_out]
            if sub._raw_in(v) is None or sub._syncs(v):
                return None
            # a carry tuple (acc, total): the elements that hold the gradients
            here = {prefix + (i,) for i, e in enumerate(v.elts) if sub._raw_in(e) is not None} \
                if isinstance(v, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in v.elts) else {prefix}
            paths = here if paths is None or paths == here else {prefix}
        return sorted(paths or {prefix})

    def _syncs(self, value: ast.expr) -> bool:
        """``value`` passes something through a reducing collective (directly, in a
        ``tree.map`` lambda, via ``partial``, or in a helper of this module)."""
        m, fn = self.m, self.fn
        if mentions_collective(m, value, fn):
            return True
        for n in ast.walk(value):
            if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
                if any(kw.arg == "axis_name" for kw in n.keywords) and m.resolve_callable(n.func, fn) is None:
                    # ``jl_utils.tree_psum(grads, axis_name="i")``: a helper this module cannot see into,
                    # given the mapped axis -- it may well reduce across it (unknown: silent)
                    return True
                target = self._callee(n.func)
                if target is not None and _reaches_collective(m, target.function, set()):
                    return True
                pos = K.HIGHER_ORDER.get(m.qualname(n.func, fn) or "")
                if target is None and pos is not None and len(n.args) > pos and \
                        n.args[pos].__class__ in (ast.Name, ast.Attribute):
                    # ``jax.tree.map(_pmean_unless_frozen, grads, mask)``: the callable handed to
                    # a tree map runs on every leaf; one that reduces (on any path) averages them
                    mapped = self._callee(n.args[pos])
                    if mapped is not None and any(
                            r.value is not None and mentions_collective(m, r.value, mapped.function)
                            for r in mapped.function.of_type(ast.Return)):
                        return True   # (a helper that reduces only a norm returns the leaf unreduced)
                if target is None and self._raw_in(n) is not None and self._unknown_reducer(n.func):
                    return True
        return False

    def _unknown_reducer(self, func: ast.expr) -> bool:
        """``model_utils.cross_device_avg(grads)``: a function of another module that the project
        says applies a reducing collective (its ``reduces`` export), or one nothing here can see
        into (a package outside the project) -- it may reduce across the mapped axis: unknown."""
        q = self.m.qualname(func, self.fn)
        if q is None or q.startswith(KNOWN_LIBRARIES) or "." not in q:
            return False
        ext = self.m.external_facts(q)
        if ext is None:
            return True
        return bool(ext.get("reduces"))

    def _callee(self, func: ast.expr) -> Optional[CallTarget]:
        """What a call of this module runs: a function or method the model resolves, or
        ``updater.apply`` where ``updater`` is bound once to an instance of a plain class of
        this module (its method, ``self`` bound)."""
        m, fn = self.m, self.fn
        target = m.resolve_callable(func, fn)
        if target is None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            cls = instance_class(m, func.value, fn)
            meth = m.class_method(cls, func.attr) if cls is not None else None
            if meth is not None and not meth.is_staticmethod and not meth.decorators:
                target = CallTarget(meth, 1)
        return target

    def _raw_in(self, node: ast.AST) -> Optional[Origin]:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in self.raw:
                return self.raw[n.id]
        return None

    def _is_tx_update(self, call: ast.Call) -> bool:
        f = call.func
        return isinstance(f, ast.Attribute) and f.attr == TX_UPDATE and len(call.args) + len(call.keywords) >= 2

    # ------------------------------------------------------------ sinks
    def _sinks(self, st: ast.stmt) -> None:
        if not self.raw:
            return
        if isinstance(st, ast.Return) and st.value is not None:
            # return w - lr * grads: a hand-written step on the parameters given
            for e in (st.value.elts if isinstance(st.value, ast.Tuple) else [st.value]):
                if self._param_step(e) and not self._syncs(e):
                    self._report(self._raw_in(e.right), e)
        for node in _own_nodes(st):
            if isinstance(node, ast.Call):
                arg = self._sink_arg(node)
                if arg is None or self._syncs(arg):
                    continue
                origin = self._raw_in(arg)
                self._report(origin, node)

    def _param_step(self, e: ast.expr) -> bool:
        """``w - lr * g`` (``w + -lr * g``) where ``w`` is a parameter of this function and the
        right side holds gradients."""
        if not isinstance(e, ast.BinOp) or not isinstance(e.left, ast.Name) or \
                e.left.id not in self.fn.param_nodes or e.left.id in self.raw:
            return False
        if isinstance(e.op, ast.Add):
            if not any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) for n in ast.walk(e.right)):
                return False
        elif not isinstance(e.op, ast.Sub):
            return False
        return self._raw_in(e.right) is not None

    def _report(self, origin: Optional[Origin], sink: ast.Call, fn: Optional[Function] = None) -> None:
        if origin is not None and not any(u.origin is origin for u in self.found):
            self.found.append(Unsynced(origin, sink, fn or self.fn))

    # ---------------------------------------------------------- helpers
    def _follow_helpers(self, st: ast.stmt) -> None:
        """Calls of functions of this module: gradients made or applied inside them
        (``loss, grads = compute_grads(...)``, ``state = update(state, grads)``)."""
        if self.depth >= MAX_HELPER_DEPTH:
            return
        m, fn = self.m, self.fn
        for node in _own_nodes(st):
            if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
                continue
            if m.qualname(node.func, fn) is not None:
                continue
            target = self._callee(node.func)
            if target is None or target.function is fn or target.function.is_lambda or target.transforms:
                continue
            if self._syncs(node) and not _reduces_in_own_body(m, target.function):
                continue    # (a helper whose own statements reduce is followed: what it reduces is seen)
            pairs, _ = m.bind_arguments(target, node)
            seeds = {}
            for p, a in pairs:
                origin = self._raw_in(a)
                if origin is not None:
                    seeds[p] = origin
            sub = GradFlow(m, target.function, seeds, self.depth + 1)
            sub.run()
            self._helpers[id(node)] = sub
            callers = set(map(id, seeds.values()))
            for u in sub.found:
                if id(u.origin) in callers:
                    self._report(u.origin, node)      # our gradients, applied in the helper
                else:
                    self._report(u.origin, u.sink, u.fn)   # made and applied in the helper

    def _bind_returned(self, st: ast.stmt, targets: List[ast.expr], sub: "GradFlow") -> None:
        """Bind the targets of ``x = helper(...)`` from what the helper returns."""
        whole = False
        positions: Set[int] = set()
        for ret in sub.fn.of_type(ast.Return):
            v = ret.value
            made = sub._maker(v.func, 0) if isinstance(v, ast.Call) else None
            if made is not None:
                # ``return jax.value_and_grad(loss_fn)(state.params)``: the gradient call's own result
                (index,) = made
                if index is None:
                    whole = True
                else:
                    positions.add(index)
                continue
            # (``return lax.pmean(grads, "batch")``: what a return passes through a collective is reduced)
            if isinstance(v, ast.Tuple):
                positions.update(i for i, e in enumerate(v.elts) if sub._raw_in(e) is not None and not sub._syncs(e))
            elif v is not None and sub._raw_in(v) is not None and not sub._syncs(v):
                whole = True
        for t in targets:
            for name in _names(t):
                self.raw.pop(name, None)
            if whole and isinstance(t, ast.Name):
                self.raw[t.id] = Origin(st, t.id)
            elif isinstance(t, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in t.elts):
                for i in positions:
                    if i < len(t.elts) and isinstance(t.elts[i], ast.Name):
                        self.raw[t.elts[i].id] = Origin(st, t.elts[i].id)

    def _sink_arg(self, call: ast.Call) -> Optional[ast.AST]:
        m, fn = self.m, self.fn
        f = call.func
        q = m.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
        spec = APPLY_FUNCTIONS.get(q) if q else None
        if spec is None and q is None and isinstance(f, ast.Attribute):
            spec = APPLY_METHODS.get(f.attr)
        if spec is not None:
            return call_arg(call, spec[0], spec[1])
        if q in TREE_MAP and len(call.args) >= 2 and _is_step(m, call.args[0], fn):
            # jax.tree.map(lambda p, g: p - lr * g, params, grads): a hand-written SGD step
            return ast.Tuple(elts=list(call.args[1:]), ctx=ast.Load())
        return None


def _names(target: ast.expr) -> Iterator[str]:
    for n in ast.walk(target):
        if isinstance(n, ast.Name):
            yield n.id


def _own_nodes(st: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of one simple statement (or a compound statement's header)."""
    if isinstance(st, (ast.If, ast.While)):
        roots = [st.test]
    elif isinstance(st, (ast.For, ast.AsyncFor)):
        roots = [st.iter]
    elif isinstance(st, (ast.With, ast.AsyncWith)):
        roots = [i.context_expr for i in st.items]
    elif isinstance(st, ast.Try):
        roots = []
    else:
        roots = [st]
    for r in roots:
        yield from ast.walk(r)


def _is_step(m: SemanticModel, fun: ast.expr, scope: Function) -> bool:
    """``lambda p, g: p - lr * g`` (or a def returning ``p - ...``): a parameter update."""
    body = None
    if isinstance(fun, ast.Lambda):
        body = fun.body
    else:
        target = m.resolve_callable(fun, scope) if isinstance(fun, (ast.Name, ast.Attribute)) else None
        if target is not None and not target.function.is_lambda:
            rets = target.function.of_type(ast.Return)
            if len(rets) == 1:
                body = rets[0].value
        elif target is not None:
            body = target.function.node.body
    if not isinstance(body, ast.BinOp) or not isinstance(body.op, (ast.Sub, ast.Add)):
        return False
    if isinstance(body.op, ast.Add) and not any(isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub)
                                                for n in ast.walk(body.right)):
        return False    # ``lambda acc, g: acc + g / n``: gradients accumulated, not applied (``p + -lr * g`` is)
    params = _lambda_params(fun, m, scope)
    return isinstance(body.left, ast.Name) and (params is None or body.left.id == params[0])


def _lambda_params(fun: ast.expr, m: SemanticModel, scope: Function) -> Optional[List[str]]:
    if isinstance(fun, ast.Lambda):
        return [a.arg for a in fun.args.args]
    target = m.resolve_callable(fun, scope)
    if target is not None:
        return target.function.params[target.bound_positional:] or None
    return None


def _reduces_in_own_body(m: SemanticModel, fn: Function) -> bool:
    """``fn`` applies a reducing collective in its own statements and reaches none through its
    nested functions or the functions it calls: following it shows what it reduces."""
    if not any(mentions_collective(m, call, fn, REDUCING) for call in fn.of_type(ast.Call)):
        return False
    if any(_reaches_collective(m, child, set()) for child in fn.children):
        return False
    for call in fn.of_type(ast.Call):
        if isinstance(call.func, (ast.Name, ast.Attribute)):
            t = m.resolve_callable(call.func, fn)
            if t is not None and t.function is not fn and _reaches_collective(m, t.function, set()):
                return False
    return True


def _reaches_collective(m: SemanticModel, fn: Function, seen: Set[int], depth: int = 0) -> bool:
    """``fn`` (or a function of this module it calls) applies a reducing collective."""
    if id(fn) in seen or depth > 6:
        return False
    seen.add(id(fn))
    for call in fn.of_type(ast.Call):
        if mentions_collective(m, call, fn, REDUCING):
            return True
    for child in fn.children:
        if _reaches_collective(m, child, seen, depth + 1):
            return True
    for call in fn.of_type(ast.Call):
        if isinstance(call.func, (ast.Name, ast.Attribute)):
            t = m.resolve_callable(call.func, fn)
            if t is not None and _reaches_collective(m, t.function, seen, depth + 1):
                return True
    return False


def export_reducers(model: SemanticModel) -> Dict[str, bool]:
    """Exporter: for other modules, the top-level functions of this module that apply a
    reducing collective (``lax.pmean``/``psum``...), directly or through a function of this
    module (``cross_device_avg = lambda g: jax.tree.map(lambda x: lax.pmean(x, "batch"), g)``)."""
    out: Dict[str, bool] = {}
    text = getattr(model.source, "text", None)
    if not model.mentions_jax or text is None or not any(t in text for t in _REDUCING_TERMINALS):
        return out      # (a module that never spells a reducing collective reduces nothing itself)
    reaching = _functions_reaching_collectives(model)
    for fn in top_level_functions(model):
        if id(fn) in reaching:
            out[fn.name] = True
    return out


def _functions_reaching_collectives(model: SemanticModel) -> Set[int]:
    """The ids of the module's functions that apply a reducing collective, directly, in a nested
    function, or through a function of the module they call (what ``_reaches_collective`` answers
    for one function, for all of them in one pass over the calls)."""
    terms = set(_REDUCING_TERMINALS)
    direct: Set[int] = set()
    callees: Dict[int, List[Function]] = {}
    for fn in model.functions:
        calls = fn.of_type(ast.Call)
        for call in calls:
            f = call.func
            if f.__class__ in (ast.Name, ast.Attribute):
                t = model.resolve_callable(f, fn)
                if t is not None:
                    callees.setdefault(id(fn), []).append(t.function)
        for n in fn.walk():
            c = n.__class__
            if (c is ast.Attribute and n.attr in terms or c is ast.Name and n.id in terms) \
                    and model.qualname(n, fn) in REDUCING:
                direct.add(id(fn))
                break
    reaching = set(direct)
    changed = True
    while changed:
        changed = False
        for fn in model.functions:
            if id(fn) in reaching:
                continue
            if any(id(ch) in reaching for ch in fn.children) or \
                    any(id(g) in reaching for g in callees.get(id(fn), ())):
                reaching.add(id(fn))
                changed = True
    return reaching


# the last components of the reducing collectives' names: a cheap text test before the walk
_REDUCING_TERMINALS = tuple(sorted({q.rsplit(".", 1)[1] for q in REDUCING}))


register_exporter("reduces", export_reducers)
