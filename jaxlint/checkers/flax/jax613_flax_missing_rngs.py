from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set

from ...analysis import CERTAIN, INFERRED, Function, SemanticModel
from ...analysis import knowledge as K
from ..base import Context, Finding, Rule, register
from ..messages import short
from ..prng.keys import key_analysis
from ..prng.states import repeat_subject
from ..prng.vocabulary import KEY_FROM_SEED
from .contracts import FALLBACK_STREAM
from .linen import ApplySite, FlaxFacts, flax_facts
from .values import const_str


@register
class FlaxMissingRngs(Rule):
    """
    ## What it does
    Flags `model.apply(...)` of a linen module that contains an active
    `nn.Dropout` (or calls `self.make_rng("dropout")`) — active for the
    arguments given, e.g. `train=True` with `deterministic=not train` — when
    the call passes no `rngs={"dropout": key}`; and a dropout key passed in
    `rngs` (directly, or through the training step that passes it on) on every
    iteration of a training loop without being split or folded first: also a
    key a loss function reads from the enclosing function whose loop runs it
    (a closure over `dropout_rng`), a key a step factory binds once
    (`rng = PRNGKey(seed)`) and the step it returns reads, on every call of a
    loop that runs that step (not when the loop makes a new step each
    iteration), a module-level key read by a step a loop
    runs (also when the step hands it on to the loss function:
    `jax.grad(loss_fn)(params, batch, dropout_rng)`, or a loop passes it to the
    step: `train_step(state, batch, DROPOUT_RNG)`), a key kept in a field of
    the training state (`rngs={"dropout": state.dropout_rng}`) that the step
    hands back unchanged (`state.apply_gradients(...)` with no new
    `dropout_rng`) to a loop that rebinds the state only from the step's
    result, a key kept on `self` that only `__init__` sets (read by a method
    that a loop runs, or that a stateful step of the class runs -- one that
    rebinds `self.params` on every call --, directly or passed on to
    `rngs`, also through a step stored as `self._step = jax.jit(self._train_step)`), a key split in the loop from a root the loop never advances
    (`_, dropout_key = jax.random.split(root_key)`), a key read inside a
    `lax.scan`/`fori_loop`/`while_loop` body (or a loss function it calls)
    from outside the body, and a key built from a constant
    (`jax.random.PRNGKey(0)`) inside the loop or inside a step that a loop of
    this file calls. Whether dropout is on follows the flags the module is
    given, also through a forward helper (`deterministic=not training`, the
    helper called with `training=True`), and layers in a `for` loop over a
    literal tuple of widths, which runs at least once. A dropout key repeated
    every step is also a key reused every step: JAX401 does not report it
    again (one pitfall, one finding: this rule names what fails, the mask).

    ## Why is this bad?
    In PyTorch, `model.train()` is all dropout needs: every forward pass draws a
    fresh mask from the global generator. Flax has no global generator. A
    module whose dropout is on needs a key for the `"dropout"` stream on every
    `apply`; without one it raises `InvalidRngError: Dropout_0 needs PRNG for
    "dropout"`. And a key is a value, not a generator: passing the same key on
    every step applies *the same* dropout mask every step, so the network
    trains on one fixed sub-network instead of a fresh one per step.

    ## Example
    ```python
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = False):
            x = nn.Dense(64)(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
            return nn.Dense(10)(x)

    model = Net()
    x = jnp.ones((8, 4))
    variables = model.init(jax.random.PRNGKey(0), x)
    logits = model.apply(variables, x, train=True)
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = False):
            x = nn.Dense(64)(x)
            x = nn.Dropout(0.5, deterministic=not train)(x)
            return nn.Dense(10)(x)

    model = Net()
    x = jnp.ones((8, 4))
    variables = model.init(jax.random.PRNGKey(0), x)
    key = jax.random.PRNGKey(1)
    for step in range(3):
        key, dropout_key = jax.random.split(key)
        logits = model.apply(variables, x, train=True, rngs={"dropout": dropout_key})
    ```
    Not flagged: dropout switched off (`train=False`, `deterministic=True`, a
    rate of 0), `rngs` with a `"params"` key (Flax falls back to it), a key
    split or folded (`jax.random.fold_in(key, state.step)`) per step, flags
    whose value the call does not show, and modules defined in other files.

    ## Fix safety
    No fix: where a fresh key should come from (split from a loop key, folded
    with the step number) is the caller's design.
    """

    confirm = ("raises", "InvalidRngError", "FlaxError: needs PRNG", "rngs=same-rng")
    summary = "a linen module with active dropout applied without a fresh `rngs={\"dropout\": key}`"
    # a dropout key repeated every step is also a key JAX401 sees reused: this rule names what
    # fails (the same mask every step), so its finding replaces JAX401's about the same repetition
    supersedes = ("JAX401",)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        facts = flax_facts(m)
        fed: List = []      # (site, need, key name) for rngs={"dropout": name}
        for site, needs in facts.sites_needing("rng", ignore=(FALLBACK_STREAM,)):
            need = needs[0]
            rngs = site.keyword("rngs")
            flag = _flag_text(site)
            if rngs is None:
                yield ctx.finding(
                    self, site.call,
                    f"`{short(site.call)}` runs `{site.instance.name}`, whose {need.what} draws from the "
                    f"{need.name!r} rng stream{flag}, but passes no `rngs={{{need.name!r}: key}}`: raises "
                    f"`InvalidRngError`",
                    confidence=CERTAIN)
                continue
            if isinstance(rngs.value, ast.Dict):
                keys = {const_str(k) for k in rngs.value.keys}
                if None in keys:
                    continue
                if need.name not in keys and FALLBACK_STREAM not in keys:
                    yield ctx.finding(
                        self, rngs.value,
                        f"`rngs` has no {need.name!r} stream for {need.what} of `{site.instance.name}`"
                        f"{flag}: raises `InvalidRngError`",
                        confidence=CERTAIN)
                    continue
                for k, v in zip(rngs.value.keys, rngs.value.values):
                    if const_str(k) in (need.name, FALLBACK_STREAM):
                        fed.append((site, need, v))
        reported: Set[int] = set()
        yield from self._reused_keys(ctx, facts, [f for f in fed if isinstance(f[2], ast.Name)], reported)
        yield from self._fixed_keys(ctx, facts, [f for f in fed if id(f[0].call) not in reported])
        yield from self._keys_on_self(ctx, facts, fed)

    @staticmethod
    def _derived_reaches(facts: FlaxFacts, use, direct, through):
        """(site, need) when a key the statement of ``use`` binds (``_, k = split(root)``) is
        given, later in the same function, to ``rngs`` of a dropout site or to a parameter of a
        step that passes it on there."""
        names = _names_bound(use.stmt)
        m = facts.model
        root = use.arg.id if isinstance(use.arg, ast.Name) else None
        loop = _enclosing_loop(use.fn, use.stmt)
        if root is None or loop is None or _stores(loop, root):
            return None     # the root advances (``key, sub = split(key)``): a new key each time
        for site, need in direct.values():
            for kw in site.call.keywords:
                if kw.arg == "rngs" and isinstance(kw.value, ast.Dict):
                    for v in kw.value.values:
                        if isinstance(v, ast.Name) and v.id in names and \
                                facts.binding_scope(v.id, site.scope) is use.fn:
                            return site, need
        for call in use.fn.of_type(ast.Call):
            if call.lineno < use.stmt.lineno or \
                    not isinstance(call.func, (ast.Name, ast.Attribute, ast.Call)):
                continue
            target = m.resolve_callable(call.func, use.fn) or facts.instance_method(call.func, use.fn)
            if target is None:
                continue
            pairs, _ = m.bind_arguments(target, call)
            for p, a in pairs:
                if isinstance(a, ast.Name) and a.id in names and (id(target.function), p) in through:
                    return through[(id(target.function), p)]
        return None

    def _keys_on_self(self, ctx: Context, facts: FlaxFacts, fed) -> Iterator[Finding]:
        """A key kept on ``self`` that only ``__init__`` sets, read (directly, or passed on to the
        parameter that reaches ``rngs``) in a loop or by a method a loop runs."""
        self_reported: Set[int] = set()
        for site, need, v in fed:
            inst = site.instance.name
            stored = list(_stored_keys(facts, v, site.scope, 0))
            for read, method, init in stored:
                if id(read) in self_reported:
                    continue
                loop = _enclosing_loop(method, read)
                got = (method, loop) if loop is not None else \
                    _loop_running(facts, method, 0) or _loop_running_method(facts, method)
                step = _stateful_step(facts, method) if got is None else None
                if got is None and step is None:
                    continue
                self_reported.add(id(read))
                via = f" (passed on to `rngs` as `{short(v)}`)" if read is not v else ""
                if got is not None:
                    caller, loop = got
                    runs = "" if caller is method else f" that runs `{method.name}`"
                    when = f"it is the same on every iteration of the loop in `{caller.name}` (line {loop.lineno}){runs}"
                else:
                    stepper, attr = step
                    runs = "" if stepper is method else f", which runs `{method.name}`"
                    when = (f"`{stepper.name}` updates `{attr}` on every call{runs}, and every call reads "
                            f"this same key")
                yield ctx.finding(
                    self, read,
                    f"dropout key `{short(read)}` is set once, in `{init.name}`, and never split or "
                    f"folded{via}: {when}; {need.what} of `{inst}` applies the "
                    f"same mask every step; split it per step (`{short(read)}, key = "
                    f"jax.random.split({short(read)})`) and pass the new key",
                    confidence=INFERRED)

    def _fixed_keys(self, ctx: Context, facts: FlaxFacts, fed) -> Iterator[Finding]:
        """Dropout keys that cannot change between the runs of a loop: a key the apply's
        (nested) function reads from an enclosing scope whose loop runs that function without
        rebinding the key, and a key built from constants (``jax.random.PRNGKey(0)``) in a
        function that a loop of this file runs on every iteration."""
        m = ctx.model
        for site, need, v in fed:
            inst = site.instance.name
            const = self._constant_key(ctx, v, site.scope)
            if const is not None:
                value, owner, stmt = const
                loop = _enclosing_loop(owner, stmt)
                where = ""
                if loop is None and not owner.is_module:
                    got = _loop_running(facts, owner, 0)
                    if got is not None:
                        caller, loop = got
                        where = (f" `{owner.name}` runs on every iteration of the loop in `{caller.name}` "
                                 f"(line {loop.lineno});")
            if const is not None and loop is not None:
                shown = f"`{short(v)}`" if v is value else f"`{short(v)}` (`{short(value, 30)}`)"
                yield ctx.finding(
                    self, v,
                    f"dropout key {shown} is built from a constant, the same on every iteration;{where} "
                    f"{need.what} of `{inst}` applies the same mask every step; split a key (or fold in "
                    f"the step) per step and pass it in",
                    confidence=CERTAIN if not where else INFERRED)
                continue
            for read, scope in _key_reads(facts, v, site.scope, 0):
                got = self._outer_fixed(ctx, facts, site, need, read, scope, via=read is not v)
                if got is not None:
                    yield got
                    break
            else:
                got = self._state_field(ctx, facts, site, need, v)
                if got is not None:
                    yield got

    def _state_field(self, ctx: Context, facts: FlaxFacts, site: ApplySite, need, v: ast.expr) -> Optional[Finding]:
        """``rngs={"dropout": state.dropout_rng}`` in a step whose every return hands the state
        back through ``state.apply_gradients(...)``/``state.replace(...)`` without a new
        ``dropout_rng``, run by a loop that rebinds the state only from the step's result:
        the field never changes, the same key every step."""
        if not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)):
            return None
        attr, pname = v.attr, v.value.id
        step = _param_owner(facts, pname, site.scope)
        if step is None or step.is_module or step.cls is not None:
            return None
        rets = [r.value for r in step.of_type(ast.Return) if _own_return(step, r)]
        if not rets or any(r is None for r in rets):
            return None
        tuple_ret = isinstance(rets[0], ast.Tuple)
        index = None
        for r in rets:
            if isinstance(r, ast.Tuple) != tuple_ret:
                return None
            elts = r.elts if tuple_ret else [r]
            at = [i for i, e in enumerate(elts) if _threads_state(e, pname, attr)]
            if len(at) != 1 or (index is not None and at[0] != index):
                return None
            index = at[0]
        for call, caller, target in facts.call_sites(step):
            pairs, _ = ctx.model.bind_arguments(target, call)
            arg = next((a for p, a in pairs if p == pname), None)
            if not isinstance(arg, ast.Name):
                continue
            loop = _enclosing_loop(caller, call)
            if loop is None:
                continue
            stmt = _statement_of(loop, call)
            if not isinstance(stmt, ast.Assign) or stmt.value is not call or len(stmt.targets) != 1:
                continue
            t = stmt.targets[0]
            got = t.elts[index] if tuple_ret and isinstance(t, ast.Tuple) and index < len(t.elts) else \
                (t if not tuple_ret else None)
            if not (isinstance(got, ast.Name) and got.id == arg.id):
                continue
            if any(isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Store)
                   and n is not got for n in ast.walk(loop)):
                continue    # the loop rebinds the state some other way (a new key put in)
            return ctx.finding(
                self, v,
                f"dropout key `{short(v)}` is a field of the state that `{step.name}` hands back unchanged "
                f"(`{pname}.apply_gradients`/`replace` without a new `{attr}`), and the loop in "
                f"`{caller.name}` (line {loop.lineno}) feeds the state back: the same key every step; "
                f"{need.what} of `{site.instance.name}` applies the same mask every step; split it in the "
                f"step and return `{pname}.replace({attr}=new_key)`",
                confidence=INFERRED)
        return None

    def _outer_fixed(self, ctx: Context, facts: FlaxFacts, site: ApplySite, need, v: ast.Name,
                     scope: Function, via: bool) -> Optional[Finding]:
        """The finding when the key ``v`` (read in ``scope``) is read from an enclosing scope (the
        module, or a function whose loop runs ``scope``) where a loop runs ``scope`` and nothing
        rebinds the key."""
        m = ctx.model
        inst = site.instance.name
        if True:
            owner = facts.binding_scope(v.id, scope)
            if owner is None or owner is scope:
                return None
            body = _lax_body_between(scope, owner)
            if body is not None and not any(v.id in f.globals_declared for f in m.functions):
                # a ``lax.scan``/``fori_loop`` body (or a function it calls) reads the key from
                # outside the body: every step sees the same key
                passed = f" and passes it on to `rngs={{{need.name!r}: ...}}`" if via else ""
                return ctx.finding(
                    self, v,
                    f"dropout key `{v.id}` is the same on every step of the `{body[1]}` body `{body[0].name}`: "
                    f"it is read from `{owner.name if not owner.is_module else 'the module'}`, outside the "
                    f"body{passed}; {need.what} of `{inst}` applies the same mask every step; carry the key "
                    f"and split it per step, or `fold_in` the step",
                    confidence=CERTAIN if not via else INFERRED, subject=("key-lax-body", id(body[0].node), v.id))
            here = _enclosing_loop(scope, v) if via and owner.is_module else None
            if here is not None and not _stores(here, v.id) and len(m.bindings(v.id, owner)) == 1 and \
                    not any(v.id in f.globals_declared for f in m.functions):
                # for ...: train_step(state, batch, DROPOUT_RNG): the module-level key, read in the loop
                return ctx.finding(
                    self, v,
                    f"dropout key `{v.id}` is the same on every iteration of the loop in `{scope.name}` (line "
                    f"{here.lineno}): the module-level `{v.id}`, which nothing rebinds, is passed on to "
                    f"`rngs={{{need.name!r}: ...}}`; {need.what} of `{inst}` applies the same mask every step",
                    confidence=INFERRED, subject=("key-loop", id(here), v.id))
            outer = scope
            while outer.parent is not None and outer.parent is not owner:
                outer = outer.parent
            if outer.parent is not owner:
                return None
            if any(v.id in f.globals_declared for f in m.functions if f is not owner):
                return None     # rebound through ``global``/``nonlocal``
            made = None
            if owner.is_module:
                if len(m.bindings(v.id, owner)) != 1:
                    return None
                got = _loop_running(facts, outer, 0) or \
                    (_loop_running_method(facts, outer) if outer.cls is not None else None)
                if got is None:
                    return None
                caller, loop = got
            else:
                loop = next((lp for call, caller, _ in facts.call_sites(outer) if caller is owner
                             for lp in [_enclosing_loop(owner, call)] if lp is not None), None)
                caller = owner
                made = None
                if loop is None and len(m.bindings(v.id, owner)) == 1 and (
                        _returns_function(m, owner, outer) or any(
                            _returns_function(m, owner, caller) for _c, caller, _t in facts.call_sites(outer))):
                    # ``def make_step(...): rng = PRNGKey(seed); @jax.jit def step(...): ... rngs=rng;
                    # return step``: every call of the product reads the one key the factory made
                    made = _loop_running(facts, outer, 0)
                    if made is not None and any(
                            t is not None and t.function is owner
                            for t in (m.resolve_callable(c.func, made[0]) for c in ast.walk(made[1])
                                      if c.__class__ is ast.Call)):
                        return None   # the loop makes a new step (and key) on every iteration
                    if made is not None:
                        caller, loop = made
                if loop is None:
                    return None
                if made is None and _stores(loop, v.id):
                    return None
            if made is not None:
                source = (f"`{outer.name}` (run by the step `{owner.name}` returns) reads `{v.id}`, bound once in "
                          f"`{owner.name}`: every call of the returned step sees that one key")
            else:
                source = (f"`{outer.name}` reads the module-level `{v.id}`, which nothing rebinds" if owner.is_module
                          else f"`{outer.name}` reads it from `{owner.name}`, which never splits or folds it in the loop")
            passed = f", and passes it on to `rngs={{{need.name!r}: ...}}`" if via else ""
            return ctx.finding(
                self, v,
                f"dropout key `{v.id}` is the same on every iteration of the loop in `{caller.name}` (line "
                f"{loop.lineno}): {source}{passed}; {need.what} of `{inst}` applies the same mask every step",
                confidence=CERTAIN if caller is owner and not via else INFERRED, subject=("key-loop", id(loop), v.id))

    @staticmethod
    def _constant_key(ctx: Context, v: ast.expr, scope: Function):
        """(key expression, scope that builds it, statement) for ``jax.random.PRNGKey(<literal>)``
        given inline or bound once to the name ``v``."""
        m = ctx.model
        stmt = None
        owner = scope
        value = v
        if isinstance(v, ast.Name):
            owner = m.resolve_scope(v.id, scope)
            if owner is None:
                return None
            bs = m.bindings(v.id, owner)
            if len(bs) != 1 or bs[0].kind != "=" or bs[0].path or not isinstance(bs[0].node, ast.Assign):
                return None
            value, stmt = bs[0].value, bs[0].node
        if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)) or \
                m.qualname(value.func, owner) not in KEY_FROM_SEED or not value.args or value.keywords or \
                not all(isinstance(a, ast.Constant) for a in value.args):
            return None
        return value, owner, stmt if stmt is not None else value

    def _reused_keys(self, ctx: Context, facts: FlaxFacts, fed, reported: Set[int]) -> Iterator[Finding]:
        """Keys reused on every loop iteration (the key analysis) that reach a dropout stream."""
        if not fed:
            return
        m = ctx.model
        direct = {id(site.call): (site, need) for site, need, _ in fed}
        # step functions whose parameter feeds rngs: (function id, parameter) -> (site, need)
        through = {}
        for site, need, name in fed:
            owner = _param_owner(facts, name.id, site.scope)
            if owner is not None:
                through[(id(owner), name.id)] = (site, need)
        # ... and the functions that pass their own parameter on to one of those
        todo = list(through.items())
        callers = facts.callers()
        while todo:
            (fid, p), hit = todo.pop()
            for expr, scope in callers.get((fid, p), ()):
                if isinstance(expr, ast.Name):
                    owner = _param_owner(facts, expr.id, scope)
                    if owner is not None and (id(owner), expr.id) not in through:
                        through[(id(owner), expr.id)] = hit
                        todo.append(((id(owner), expr.id), hit))
        for r in key_analysis(m, ctx.source.text).reuses():
            if r.reason != "loop":
                continue
            use = r.use
            hit = direct.get(id(use.call))
            where = ""
            if hit is None:
                target = (m.resolve_callable(use.call.func, use.fn) or facts.instance_method(use.call.func, use.fn)) \
                    if isinstance(use.call.func, (ast.Name, ast.Attribute, ast.Call)) else None
                pairs = m.bind_arguments(target, use.call)[0] if target is not None else []
                for p, a in pairs:
                    if a is use.arg and (id(target.function), p) in through:
                        hit = through[(id(target.function), p)]
                        where = f" `{target.function.name}` passes it on to `rngs={{{hit[1].name!r}: ...}}`;"
                        break
            if hit is None and use.kind in ("split", "fold_in") and isinstance(use.stmt, ast.Assign):
                # _, dropout_key = jax.random.split(root_key) in the loop, root_key never advanced:
                # the same derived key every iteration, passed on to the step
                hit = self._derived_reaches(facts, use, direct, through)
                if hit is not None:
                    site, need = hit
                    reported.add(id(site.call))
                    yield ctx.finding(
                        self, use.call,
                        f"`{short(use.call)}` splits `{short(use.arg)}`, which this {r.where} never advances: "
                        f"the dropout key it makes is the same on every iteration; {need.what} of "
                        f"`{site.instance.name}` applies the same mask every step; split the root and keep "
                        f"the new root (`{short(use.arg)}, dropout_key = jax.random.split({short(use.arg)})`)",
                        confidence=INFERRED, subject=repeat_subject(r))
                    continue
            if hit is None:
                continue
            site, need = hit
            reported.add(id(site.call))
            yield ctx.finding(
                self, use.arg,
                f"dropout key `{short(use.arg)}` is the same on every iteration of this {r.where};{where} "
                f"{need.what} of `{site.instance.name}` applies the same mask every step; split or fold in "
                f"the step first",
                confidence=INFERRED if where else CERTAIN, subject=repeat_subject(r))


def _key_reads(facts: FlaxFacts, v: ast.expr, scope: Function, depth: int):
    """(name read, scope reading it): ``v`` itself, and, when ``v`` is a parameter that every
    call of this file fills, the names those calls pass (three calls deep): a module-level key
    a step hands to its loss function (``jax.grad(loss_fn)(params, x, dropout_rng)``)."""
    if not isinstance(v, ast.Name):
        return
    yield v, scope
    if depth >= 3:
        return
    owner = _param_owner(facts, v.id, scope)
    if owner is None:
        return
    sources, paired = facts.param_sources(owner, v.id)
    if paired:
        return
    for expr, where in sources:
        yield from _key_reads(facts, expr, where, depth + 1)


def _own_return(fn: Function, r: ast.Return) -> bool:
    """``r`` returns from ``fn`` itself, not from a function nested in it."""
    return any(n is r for stmt in fn.node.body for n in _walk_own(stmt))


def _walk_own(node: ast.AST):
    yield node
    for c in ast.iter_child_nodes(node):
        if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _walk_own(c)


# the methods of a Flax TrainState (a struct dataclass) that return a copy, the other fields kept
_STATE_COPIES = frozenset({"apply_gradients", "replace"})


def _threads_state(e: ast.expr, pname: str, attr: str) -> bool:
    """``state``, ``state.apply_gradients(grads=g)``, ``state.replace(...).apply_gradients(...)``:
    a copy of the parameter ``pname`` whose field ``attr`` no call replaces."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _STATE_COPIES:
        if any(k.arg == attr or k.arg is None for k in e.keywords):
            return False
        e = e.func.value
    return isinstance(e, ast.Name) and e.id == pname


def _statement_of(loop: ast.stmt, node: ast.AST) -> Optional[ast.stmt]:
    """The statement of ``loop``'s body (at any depth) that holds ``node``."""
    best = None
    for n in ast.walk(loop):
        if isinstance(n, ast.stmt) and n is not loop and any(x is node for x in ast.walk(n)):
            if best is None or (n.lineno, n.col_offset) >= (best.lineno, best.col_offset):
                best = n
    return best


def _names_bound(stmt: ast.Assign) -> Set[str]:
    return {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _flag_text(site: ApplySite) -> str:
    shown = site.shown_flags()
    return f" (with {', '.join(shown)})" if shown else ""


def _param_owner(facts: FlaxFacts, name: str, scope: Function) -> Optional[Function]:
    """The function whose parameter ``name`` is, seen from ``scope`` (a closure is fine), when
    that parameter is never rebound."""
    owner = facts.binding_scope(name, scope)
    if owner is None or owner.is_module or name not in owner.param_nodes:
        return None
    for node in owner.of_type(ast.Assign, ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return None
    return owner


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _returns_function(m, factory: Function, fn: Function) -> bool:
    """Every ``return`` of ``factory`` hands back ``fn`` (plainly or transformed: ``return step``,
    ``return jax.jit(step)``)."""
    rets = [r for r in factory.of_type(ast.Return) if _own_return(factory, r)]
    if not rets:
        return False
    for r in rets:
        got = m.resolve_callable(r.value, factory) if r.value is not None else None
        if got is None or got.function is not fn:
            return False
    return True


def _enclosing_loop(fn: Function, node: ast.AST) -> Optional[ast.stmt]:
    """The innermost loop of ``fn`` whose body holds ``node`` (its iterable runs once)."""
    best = None
    for loop in fn.of_type(*_LOOPS):
        if any(n is node for stmt in loop.body for n in ast.walk(stmt)):
            if best is None or loop.lineno >= best.lineno:
                best = loop
    return best


def _loop_running(facts: FlaxFacts, fn: Function, depth: int):
    """(caller, loop): a loop of this file whose body calls ``fn`` (directly, through a
    transform, or through up to three calls)."""
    sites = facts.call_sites(fn)
    for call, caller, _ in sites:
        loop = _enclosing_loop(caller, call)
        if loop is not None:
            return caller, loop
    if depth < 3:
        for call, caller, _ in sites:
            if not caller.is_module and caller is not fn:
                got = _loop_running(facts, caller, depth + 1)
                if got is not None:
                    return got
    return None


def _stores(loop: ast.stmt, name: str) -> bool:
    """Whether anything in ``loop`` (its target included) rebinds ``name``."""
    for n in ast.walk(loop):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)):
            return True
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return True
    return False


def _stored_keys(facts: FlaxFacts, v: ast.expr, scope: Function, depth: int):
    """(``self.attr`` read, the method reading it, the method setting it) for each key kept on
    ``self`` of a plain class (a trainer) that only ``__init__`` (or ``setup``) sets, read
    directly as ``v`` or passed unchanged to the parameter ``v`` by a call of this file: every
    run of that call sees the same key."""
    if depth > 3:
        return
    if isinstance(v, ast.Name):
        owner = _param_owner(facts, v.id, scope)
        if owner is None:
            return
        sources, paired = facts.param_sources(owner, v.id)
        if paired:
            return
        for expr, where in sources:
            yield from _stored_keys(facts, expr, where, depth + 1)
        return
    got = _stored_key(facts, v, scope)
    if got is not None:
        yield got


def _stored_key(facts: FlaxFacts, v: ast.expr, scope: Function):
    if not (isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name)):
        return None
    method = scope.enclosing_method()
    if method is None or method.cls is None or method.cls.module_kind is not None or \
            v.value.id != method.self_name:
        return None
    setters = []
    for m in method.cls.methods.values():
        for node in m.of_type(ast.Assign, ast.AugAssign, ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Attribute) and n.attr == v.attr and \
                            isinstance(n.value, ast.Name) and n.value.id == m.self_name:
                        setters.append((m, node, n is t))
        for call in m.of_type(ast.Call):
            if isinstance(call.func, ast.Name) and call.func.id in ("setattr", "delattr"):
                return None
    # every binding runs once per object (an element of an unpacked split included); the
    # attribute is given to ``rngs`` as the key itself
    if not setters or any(m.name not in _SETS_ONCE or not isinstance(node, (ast.Assign, ast.AnnAssign))
                          for m, node, _ in setters):
        return None
    if method.name in _SETS_ONCE:
        return None
    return v, method, setters[0][0]


# methods that run once per object
_SETS_ONCE = frozenset({"__init__", "setup", "__post_init__"})


def _loop_running_method(facts: FlaxFacts, method: Function):
    """(caller, loop): a loop of this file that calls ``obj.<method>(...)`` (or a method that
    calls it on ``self``) where ``obj`` is bound once to an instance of the method's class
    (``trainer = Trainer(...)`` ... ``for batch in data: trainer.step(batch)``)."""
    cls = method.cls
    names = {method.name}
    # the methods of the class that call this one on ``self`` (``fit`` calling ``self.step``)
    for call, caller, _ in facts.call_sites(method):
        if caller.cls is cls and caller.enclosing_method() is caller:
            names.add(caller.name)
    m = facts.model
    for fn in m.functions:
        for call in fn.of_type(ast.Call):
            f = call.func
            if not (isinstance(f, ast.Attribute) and f.attr in names and isinstance(f.value, ast.Name)):
                continue
            sv = facts.single_value(f.value.id, fn)
            if sv is None or not isinstance(sv[0], ast.Call) or not isinstance(sv[0].func, ast.Name) or \
                    m.classes.get(sv[0].func.id) is not cls:
                continue
            loop = _enclosing_loop(fn, call)
            if loop is not None:
                return fn, loop
    return None


def _stateful_step(facts: FlaxFacts, method: Function):
    """(step, ``self.attr``): ``method``, or a method of its class that calls it on ``self``
    (transitively, three deep), rebinds an attribute of ``self`` outside construction
    (``self.params = optax.apply_updates(...)``): a training step, run once per step."""
    cls = method.cls
    seen = set()
    todo = [(method, 0)]
    while todo:
        fn, depth = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if fn.cls is cls and fn.name not in _SETS_ONCE and fn.self_name:
            for node in fn.of_type(ast.Assign, ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                                n.value.id == fn.self_name and isinstance(n.ctx, ast.Store):
                            return fn, f"self.{n.attr}"
        if depth < 3:
            for call, caller, _ in facts.call_sites(fn):
                owner = caller.enclosing_method()
                if owner is not None and owner.cls is cls:
                    todo.append((owner, depth + 1))
    return None


def _lax_body_between(scope: Function, owner: Function):
    """The ``lax`` loop body (``lax.scan``/``fori_loop``/``while_loop``) that ``scope`` is, or is
    nested in, below ``owner`` -- with the loop's name -- or None."""
    f = scope
    while f is not None and f is not owner:
        for c in f.contexts:
            if c.transform in K.LOOP_BODIES:
                return f, c.transform.replace("jax.lax.", "lax.")
        f = f.parent
    # a sibling the body calls (``def loss_fn(p): ... key ...`` beside ``def body(carry, x):
    # ... jax.value_and_grad(loss_fn)(...)``, both inside ``owner``): the body's every step
    # runs it with the same closed-over key
    if scope.parent is owner and not owner.is_module:
        for c in scope.contexts:
            caller = c.caller
            if caller is not None and caller is not scope and caller.parent is owner:
                for cc in caller.contexts:
                    if cc.transform in K.LOOP_BODIES:
                        return caller, cc.transform.replace("jax.lax.", "lax.")
    return None
