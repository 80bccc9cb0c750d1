from __future__ import annotations

import ast
from typing import Iterator, List, Optional

from ...analysis import CERTAIN, INFERRED, Function, SemanticModel
from ..base import Context, Finding, Rule, register
from ..messages import short
from .boundary import boundary_transform, crossings, lax_operands
from .classes import plain_classes


@register
class NonPytreeArgument(Rule):
    """
    ## What it does
    Flags an instance of a plain Python class of this module (no pytree
    registration, not a `NamedTuple`, `flax.struct.dataclass`, `eqx.Module` or
    `chex.dataclass`) passed as a traced argument to a function transformed by
    `jax.jit`, `jax.pmap`, `jax.vmap` or `jax.grad`, or returned from a
    jitted, pmapped or vmapped function; also one carried through `lax`
    control flow (the initial value of `while_loop`/`fori_loop`/`scan`, the
    operands of `cond`/`switch`, or returned from their bodies). The value
    is followed through names, factory functions of this module
    (`state = init_state(params)`) and parameters: one annotated with the
    class, one that every call in this module gives an instance, or -- in a
    function nothing here calls -- one read only through the class's
    attributes by a function that returns a new instance
    (`def step(p): ... return Particle(p.pos + v, p.vel, p.mass)`); findings
    that rest on a parameter are `inferred`. An attribute of a trainer
    (`self.state`) counts when every assignment to it in the class's methods
    is an instance of the class (a step -- jitted or not -- that returns a new
    one included), and `self.step = jax.jit(self._step)` is followed to the
    method it jits (also as `trainer.step(...)` on a name bound once to
    `Trainer(...)`). A name rebound by the call itself
    (`params, opt = update(params, grads, opt)`) is the instance its one
    straight-line binding before the call made. A loop that calls a step with a name bound to an
    instance before the loop (and rebound only from that call) passes the
    instance on its first iteration; a loop variable is an instance when the
    loop runs over a generator of the module whose every `yield` gives one
    (`for batch in loader(...)`); `self.state, loss = self._jit_step(self.state, x)`
    keeps the class the step returns at that position; and a name rebound by
    the statement that passes it (`model = fit(model, x)`) is what the binding
    before it in the same block made. A list, tuple or dict display (or a
    list comprehension) that constructs such instances is flagged too: JAX
    flattens the container and meets the objects as leaves. A `lax` loop
    flagged for its initial carry does not also get a finding for what its
    body returns (it raises on the carry first). A class that defines `tree_flatten`/`tree_unflatten` but
    that nothing in the module registers is a plain class too. When a call
    of a function is flagged for its argument, its returns are not flagged
    again (the call raises before returning).

    ## Why is this bad?
    In PyTorch you keep tensors in any object you like (a config, a `State`
    class with `self.w` and `self.b`) and pass it to any function. JAX
    transforms only see through *pytrees*: tuples, lists, dicts, `None` and
    classes registered as pytree nodes. A plain object is an opaque leaf that
    JAX cannot turn into an array, so the call raises
    `TypeError: Error interpreting argument to <function ...> as an abstract array`
    (`jax.grad`: `... is not a valid JAX type`), and returning one raises
    `TypeError: ... returned a value of type <class 'Config'>`. A loop state
    object carried through `lax.while_loop` or `lax.scan` fails the same way.
    A plain `@dataclasses.dataclass` is no different.

    ## Example
    ```python
    class Params:
        def __init__(self, w, b):
            self.w, self.b = w, b

    @jax.jit
    def predict(p, x):
        return x @ p.w + p.b

    predict(Params(w, b), x)
    ```

    ## Use instead
    ```python
    @flax.struct.dataclass          # or: class Params(eqx.Module), a NamedTuple,
    class Params:                   # @jax.tree_util.register_dataclass
        w: jax.Array
        b: jax.Array

    predict(Params(w, b), x)
    ```
    An object that holds configuration rather than arrays can instead be
    passed as a static argument (`static_argnums`): it is then hashed, not
    traced.

    ## Fix safety
    No automatic fix: registering the class, converting it to a dataclass
    pytree or making the argument static are design choices.
    """

    confirm = ("raises", "TypeError: is not a valid JAX type", "TypeError: as an abstract array",
               "TypeError: returned a value of type")
    summary = "plain Python object passed to or returned from a jitted/grad/vmapped function (not a pytree)"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        if not m.classes or not m.transform_sites:
            return
        plain = plain_classes(m)
        if not any(plain.is_plain(info) for info in m.classes.values()):
            return
        seen = set()
        flagged = set()     # functions an argument was flagged for: their calls raise before returning
        for cr in crossings(m):
            for p, a in cr.pairs:
                if p not in cr.traced:
                    continue
                info, certain = plain.evidence(a, cr.scope)
                if info is None:
                    info, certain = _first_iteration(m, plain, a, cr.scope, cr.call)
                if info is None:
                    info, certain = _loop_item(m, plain, a, cr.scope, cr.call)
                if info is None:
                    info, certain = _returned_item(m, plain, a, cr.scope)
                if info is None and isinstance(a, ast.Name):
                    # ``opt = Adam(params)`` then ``params, opt = update(params, g, opt)``: the
                    # one straight-line binding the argument sees is the instance
                    value = m.reaching_value(a, cr.scope)
                    if value is not None:
                        info, certain = plain.evidence(value, cr.scope)
                if info is not None and _through_own_boundary(m, a, cr.scope):
                    continue    # it came in through a jit of the enclosing function: that raised first
                what = "is a plain"
                if info is None:
                    # ``[Layer(w) for w in ws]``, ``{"model": Cfg()}``: a container JAX flattens,
                    # whose leaves are plain objects
                    info, certain = _contained(m, plain, a, cr.scope)
                    what = "holds a plain"
                if info is None or id(cr.call) in seen:
                    continue
                seen.add(id(cr.call))   # one finding per call: the first plain argument
                flagged.add(id(cr.function))
                yield self._plain(ctx, a, info, certain,
                                  f"`{short(a)}` {what} `{info.name}` object passed as traced argument `{p}` "
                                  f"of `{cr.function.qualname}` ({cr.transform.verb} `{cr.transform.label}`): "
                                  f"JAX only sees through pytrees and raises `TypeError`", f"make `{p}` static")
        yield from self._lax(ctx, plain, flagged)
        yield from self._returns(ctx, plain, flagged)

    def _lax(self, ctx: Context, plain, flagged) -> Iterator[Finding]:
        m = ctx.model
        for scope in m.functions:
            for call in scope.of_type(ast.Call):
                for a in lax_operands(m, call, scope):
                    info, certain = plain.evidence(a, scope)
                    if info is None:
                        continue
                    # the call raises on its operand before any body runs: the bodies' returns
                    # are not flagged again
                    for b in call.args:
                        if isinstance(b, (ast.Name, ast.Attribute, ast.Lambda)):
                            t = m.resolve_callable(b, scope) if not isinstance(b, ast.Lambda) else None
                            fn = t.function if t is not None else m.function_for_def(b)
                            if fn is not None:
                                flagged.add(id(fn))
                    yield self._plain(ctx, a, info, certain,
                                      f"`{short(a)}` is a plain `{info.name}` object passed to `{short(call.func)}`, "
                                      f"whose carry and operands must be pytrees of arrays (JAX raises `TypeError`)",
                                      "pass its arrays")
                    break

    def _returns(self, ctx: Context, plain, flagged) -> Iterator[Finding]:
        m = ctx.model
        for fn in m.functions:
            if id(fn) in flagged:
                continue    # one pitfall, one finding: the call raises on its argument first
            tr = self._direct_transform(ctx, fn)
            if tr is None or tr.kind == "grad":
                continue
            for ret in fn.of_type(ast.Return):
                for e in _returned(ret.value):
                    info, certain = plain.evidence(e, fn)
                    if info is None:
                        continue
                    yield self._plain(ctx, e, info, certain,
                                      f"{fn.trace_description()} returns `{short(e)}`, a plain `{info.name}` object: "
                                      f"outputs of a transformed function must be pytrees of arrays (JAX raises "
                                      f"`TypeError`)", "return its arrays")

    def _plain(self, ctx: Context, node: ast.expr, info, certain: bool, problem: str, remedy: str) -> Finding:
        """The finding for a plain object at ``node``: what JAX does with it, then the one advice."""
        if plain_classes(ctx.model).unregistered_pytree(info):
            msg = (f"{problem}; `{info.name}` defines `tree_flatten`/`tree_unflatten` but is never registered: "
                   f"decorate it with `@jax.tree_util.register_pytree_node_class`")
        else:
            msg = (f"{problem}; register `{info.name}` as a pytree (`flax.struct.dataclass`, `eqx.Module`, "
                   f"`jax.tree_util.register_dataclass`) or {remedy}")
        return ctx.finding(self, node, msg, confidence=CERTAIN if certain else INFERRED)

    @staticmethod
    def _direct_transform(ctx: Context, fn: Function):
        """The jit/pmap/vmap (or ``lax`` control flow) that maps ``fn`` itself: its outputs
        cross the transform's boundary."""
        if fn.is_module or not fn.contexts:
            return None
        # the first such site of each function, found in one pass over the sites (once per
        # model: a scan of every site for each function was quadratic)
        sites = ctx.model.transform_sites
        memo = ctx.model._memo("_jax621_direct")
        if memo.get("n") != len(sites):
            first: dict = {}
            for site in sites:
                if site.target is not None and not site.target.transforms \
                        and (boundary_transform(site.transform) or site.transform.kind == "body"):
                    first.setdefault(id(site.target.function), site.transform)
            memo["n"], memo["first"] = len(sites), first
        return memo["first"].get(id(fn))


def _returned(value: Optional[ast.expr]) -> List[ast.expr]:
    if value is None:
        return []
    if isinstance(value, (ast.Tuple, ast.List)):
        return [e for e in value.elts if not isinstance(e, ast.Starred)]
    return [value]


def _contained(m: SemanticModel, plain, a: ast.expr, scope: Function, depth: int = 0):
    """(class, certain) when ``a`` is a list/tuple/dict display or a list comprehension (or a
    name bound once to one) holding a plain instance: JAX flattens the container and meets the
    object as a leaf."""
    if depth > 2:
        return None, True
    if isinstance(a, ast.Name):
        owner = m.resolve_scope(a.id, scope)
        if owner is None:
            return None, True
        bs = m.bindings(a.id, owner)
        if len(bs) != 1 or bs[0].kind != "=" or bs[0].element is None or \
                not isinstance(bs[0].element, (ast.List, ast.Tuple, ast.Dict, ast.ListComp)):
            return None, True
        return _contained(m, plain, bs[0].element, owner, depth + 1)
    if isinstance(a, (ast.List, ast.Tuple)):
        elts = [e for e in a.elts if not isinstance(e, ast.Starred)]
    elif isinstance(a, ast.Dict):
        elts = [v for k, v in zip(a.keys, a.values) if k is not None]
    elif isinstance(a, ast.ListComp):
        elts = [a.elt] if isinstance(a.elt, ast.Call) else []
    else:
        return None, True
    for e in elts:
        if isinstance(e, ast.Call):
            info, certain = plain.evidence(e, scope)
            if info is not None:
                return info, certain
        elif isinstance(e, (ast.List, ast.Tuple, ast.Dict)):
            got = _contained(m, plain, e, scope, depth + 1)
            if got[0] is not None:
                return got
    return None, True


def _through_own_boundary(m: SemanticModel, a: ast.expr, scope: Function) -> bool:
    """``a`` is a parameter of ``scope`` or of a function enclosing it that a transform decorates
    and traces (``@jax.jit def sgd(weights, scaler, x)``): every call goes through that boundary,
    where what the callers pass is flattened -- a plain object raises there, and never gets this
    far.  (A function also called directly, ``mse(LinearParams(w, b), batch)`` inside a trace, can
    receive one made inside.)"""
    if not isinstance(a, ast.Name):
        return False
    owner = m.resolve_scope(a.id, scope)
    if owner is None or owner.is_module or a.id not in owner.param_nodes or a.id not in owner.traced_params:
        return False
    return any(s.transform.kind in ("jit", "pmap", "vmap", "grad") for s in m.decorator_sites(owner))


def _loop_item(m: SemanticModel, plain, a: ast.expr, scope: Function, call: ast.Call):
    """``for cfg in configs: fit(cfg, ...)`` where ``configs`` holds plain instances -- a list
    display or comprehension of constructions, bound here or passed for the parameter by this
    module's calls (``sweep([SweepConfig(lr, l2) for ...], x)``): every item is one."""
    if not isinstance(a, ast.Name):
        return None, True
    loops = [lp for lp in scope.of_type(ast.For, ast.AsyncFor)
             if isinstance(lp.target, ast.Name) and lp.target.id == a.id and lp.body
             and lp.body[0].lineno <= call.lineno <= lp.body[-1].end_lineno]
    if len(loops) != 1 or any(b.kind != "for" for b in m.bindings(a.id, scope) if b.kind != "param") \
            or a.id in scope.param_nodes:
        return None, True
    it = loops[0].iter
    displays = []
    if isinstance(it, ast.Name):
        owner = m.resolve_scope(it.id, scope)
        bs = m.bindings(it.id, owner) if owner is not None else []
        if len(bs) == 1 and bs[0].kind == "param" and owner is scope:
            for c, caller, target in plain.call_sites(scope):
                pairs, _ = m.bind_arguments(target, c)
                given = [g for p, g in pairs if p == it.id]
                if not given:
                    return None, True
                displays.append((_displayed(m, given[0], caller), caller))
        elif m.single_value(it.id, scope) is not None:
            displays.append((m.single_value(it.id, scope), owner))
    else:
        displays.append((it, scope))
    infos = set()
    for d, where in displays:
        elts = [d.elt] if isinstance(d, ast.ListComp) else list(d.elts) if isinstance(d, (ast.List, ast.Tuple)) else []
        if not elts:
            return None, True
        for e in elts:
            info, _ = plain.evidence(e, where)
            if info is None:
                return None, True
            infos.add(id(info))
            found = info
    if len(infos) != 1:
        return None, True
    return found, False


def _returned_item(m: SemanticModel, plain, a: ast.expr, scope: Function):
    """``graphs, targets = collate(rng)`` (every binding of the name), where ``collate`` is a
    function of this module whose every return holds, at that place, a plain instance (``return
    batch, y`` with ``batch = GraphBatch(...)``)."""
    if not isinstance(a, ast.Name):
        return None, True
    owner = m.resolve_scope(a.id, scope)
    bs = m.bindings(a.id, owner) if owner is not None else []
    if not bs or any(b.kind != "=" or len(b.path) != 1 or not isinstance(b.value, ast.Call) for b in bs):
        return None, True
    found = None
    for b in bs:
        target = m.resolve_callable(b.value.func, owner) if isinstance(b.value.func, (ast.Name, ast.Attribute)) else None
        if target is None or target.transforms:
            return None, True
        g = target.function
        rets = [r.value for r in g.of_type(ast.Return)]
        if not rets:
            return None, True
        for r in rets:
            if not isinstance(r, ast.Tuple) or b.path[0] >= len(r.elts) or \
                    any(isinstance(e, ast.Starred) for e in r.elts):
                return None, True
            info, _ = plain.evidence(r.elts[b.path[0]], g)
            if info is None or (found is not None and info is not found):
                return None, True
            found = info
    return found, False


def _displayed(m: SemanticModel, e: ast.expr, scope: Function) -> ast.expr:
    """``e``, or the value a name is bound to once (``grid = [Cfg(...) for ...]``)."""
    if isinstance(e, ast.Name):
        return m.single_value(e.id, scope) or e
    return e


def _first_iteration(m: SemanticModel, plain, a: ast.expr, scope: Function, call: ast.Call):
    """``params = State(...)`` before a loop whose body calls ``step(params, ...)`` and only
    then rebinds ``params`` (from that call's result): on the first iteration the call is given
    the instance made before the loop, and raises there.  So for a parameter the loop rebinds
    (``def fit(p, ...): for ...: g = grad_fn(p, x); p = update(p, g)``): what the callers pass."""
    if not isinstance(a, ast.Name):
        return None, True
    owner = m.resolve_scope(a.id, scope)
    if owner is not scope:
        return None, True
    loops = [lp for lp in scope.of_type(ast.For, ast.While, ast.AsyncFor)
             if lp.body and lp.body[0].lineno <= call.lineno <= lp.body[-1].end_lineno]
    if not loops:
        return None, True
    loop = min(loops, key=lambda lp: lp.body[-1].end_lineno - lp.lineno)   # the innermost
    before, inside = [], []
    for b in m.bindings(a.id, scope):
        node = getattr(b, "node", None)
        if b.kind == "param":
            before.append(b)    # ``def fit(p, ...)``: what the callers pass, before the loop
            continue
        if b.kind != "=" or node is None:
            return None, True
        if node.lineno < loop.lineno:
            if b.element is None:
                return None, True
            before.append(b)
        elif loop.lineno <= node.lineno <= loop.body[-1].end_lineno:
            if node.lineno < call.lineno:
                return None, True       # rebound before the call inside the loop
            inside.append(b)            # (``model, loss = step(model, ...)``: from the call's result)
        # (bound after the loop: does not reach it)
    if len(before) != 1 or not inside:
        return None, True
    if before[0].kind == "param":
        got = plain.param_class(scope, a.id)
        return (got, False) if got is not None else (None, True)
    return plain.evidence(before[0].element, scope)
