from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import CERTAIN, Function, SemanticModel
from ..base import Context, Finding, Rule, register
from ..messages import short
from .linen import ApplySite, FlaxFacts, flax_facts
from .values import const_strs


@register
class FlaxMutableCollections(Rule):
    """
    ## What it does
    Flags `model.apply(...)` of a linen module that updates a variable
    collection for the arguments given — `nn.BatchNorm` with
    `use_running_average=False` (e.g. `use_running_average=not train` applied
    with `train=True`), or `self.variable("counter", ...).value = ...` — when
    the call does not list that collection in `mutable=[...]`, and calls that
    do list it but throw the updated collection away
    (`logits, _ = model.apply(..., mutable=["batch_stats"])`, an unused second
    result or one merged only into a name nothing reads -- `merged =
    {**variables, **updates}` --, or `[0]` of the result). A module whose run
    certainly executes `self.x = ...` outside `setup` is left to JAX611: that
    raises first. `apply(..., method=model.embed)` (or `method="embed"`) runs
    that method of the module, with the arguments given. Throwing away a
    variable the module only writes and never reads (`self.cache.value =
    keys` where the caller carries `keys` itself) loses nothing: not
    reported; nor is a discarded update when another apply of the same
    module in the same function keeps its own (two views through one step,
    `za, _ = apply(v, a, mutable=...)` then `zb, upd = apply(v, b, ...)` with
    `upd` stored: the statistics do change).

    ## Why is this bad?
    In PyTorch, `BatchNorm` updates its running mean and variance in place on
    every forward pass in `train()` mode. A Flax module updates nothing in
    place: `apply` returns the new statistics and only if you ask for them.
    Without `mutable=["batch_stats"]`, Flax refuses the update and raises
    `ModifyScopeVariableError: Cannot update variable "mean" ... because
    collection "batch_stats" is immutable`. With it, `apply` returns
    `(output, updates)`; dropping `updates` means the running statistics stay
    at their initial values forever, and evaluation with
    `use_running_average=True` normalises with zeros and ones — silently.

    ## Example
    ```python
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = False):
            x = nn.Dense(64)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            return nn.Dense(10)(x)

    model = Net()
    x = jnp.ones((8, 4))
    variables = model.init(jax.random.PRNGKey(0), x)
    logits, _ = model.apply(variables, x, train=True, mutable=["batch_stats"])
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool = False):
            x = nn.Dense(64)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            return nn.Dense(10)(x)

    model = Net()
    x = jnp.ones((8, 4))
    variables = model.init(jax.random.PRNGKey(0), x)
    logits, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])
    variables = {"params": variables["params"], "batch_stats": updates["batch_stats"]}
    ```
    Not flagged: `use_running_average=True` (evaluation), `mutable=True`,
    updates kept (returned from a loss function as `aux`, stored in a
    `TrainState`), `self.sow` (a no-op by design unless asked for), flags whose
    value the call does not show, and modules defined in other files.

    ## Fix safety
    No fix: where the updated statistics should be kept (a `TrainState`
    field, the variables dict, the loss function's `aux`) is the caller's design.
    """

    confirm = ("raises", "ModifyScopeVariableError", "mutable=updates-kept")
    summary = "a linen module that updates `batch_stats` applied without `mutable=[...]`, or its updates discarded"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        facts = flax_facts(m)
        sites = list(facts.sites_needing("collection"))
        for site, needs in sites:
            need = needs[0]
            flag = " ".join(site.shown_flags())
            flag = f" (with {flag})" if flag else ""
            mutable = site.keyword("mutable")
            names = _mutable_names(mutable.value) if mutable is not None else set()
            if names is None:
                continue   # mutable=<expression>: cannot tell
            if names is not True and not ({n.name for n in needs} <= names):
                missing = sorted({n.name for n in needs} - names)
                yield ctx.finding(
                    self, site.call,
                    f"`{short(site.call)}` runs `{site.instance.name}`, where {need.what} updates the "
                    f"`{missing[0]}` collection{flag}, without `mutable=[{missing[0]!r}]`: raises "
                    f"`ModifyScopeVariableError`",
                    confidence=CERTAIN)
                continue
            dropped = _discarded(facts, site) if names is not True else None   # (documented: not mutable=True)
            if dropped is not None and all(_write_only(m, n) for n in needs):
                continue   # ``self.cache.value = keys`` that no method reads: losing it changes nothing
            if dropped is not None and _kept_beside(facts, site, needs, sites):
                continue   # two views through one step, the second's statistics kept: they change
            if dropped is not None:
                origin = f"returned by `{short(site.call, 30)}`"
                anchor = dropped
                if dropped.lineno != site.call.lineno:
                    # reported at the call whose updates are lost; the message says where
                    origin = (f"that this call returns through `{site.scope.name}` is discarded on line "
                              f"{dropped.lineno} (`{short(dropped, 30)}`)")
                    anchor = site.call
                else:
                    origin += " is discarded"
                yield ctx.finding(
                    self, anchor,
                    f"the updated `{need.name}` {origin}: "
                    f"{need.what} of `{site.instance.name}` never changes its running statistics; keep "
                    f"the second result and store it (e.g. `state.replace({need.name}=updates[{need.name!r}])`)",
                    confidence=CERTAIN)


def _kept_beside(facts: FlaxFacts, site: ApplySite, needs, sites) -> bool:
    """Another apply of the same module in the same function makes the same collections
    mutable and keeps what it returns (``za, _ = apply(v, a, mutable=...)`` then ``zb, upd =
    apply(v, b, mutable=...)`` whose ``upd`` is stored): the step does change the running
    statistics, so the first call's discarded updates are not "never changes"."""
    if site.scope.is_module:
        return False   # a script's statements are separate runs, not one step
    want = {n.name for n in needs}
    for other, _ in sites:
        if other is site or other.scope is not site.scope or \
                ast.dump(other.receiver) != ast.dump(site.receiver):
            continue
        kw = other.keyword("mutable")
        names = _mutable_names(kw.value) if kw is not None else set()
        if names is True or (names is not None and want <= names):
            if _discarded(facts, other) is None:
                return True
    return False


def _write_only(m: SemanticModel, need) -> bool:
    """``need`` is a write of a variable's value (``self.cache.value = keys``) that no method of
    the module's class reads (``self.cache.value`` is never loaded): whether the updated
    collection is kept or thrown away, the module computes the same.  A layer's statistics
    (``nn.BatchNorm``) and ``put_variable`` are read by the layer itself: never write-only."""
    t = need.node
    if not (isinstance(t, ast.Attribute) and t.attr == "value" and isinstance(t.ctx, ast.Store)):
        return False
    info = m.classes.get(need.owner)
    if info is None:
        return False
    holder = ast.dump(t.value)
    for fn in info.methods.values():
        nodes = list(ast.walk(fn.node))
        stepped = {id(a.target) for a in nodes if a.__class__ is ast.AugAssign}
        for a in nodes:
            if a.__class__ is not ast.Attribute:
                continue
            if a.attr in ("get_variable", "variables", "has_variable") \
                    and isinstance(a.value, ast.Name) and a.value.id == fn.self_name:
                return False   # read some other way (``self.get_variable("cache", ...)``): not shown unread
            if a.attr == "value" and (isinstance(a.ctx, ast.Load) or id(a) in stepped) \
                    and ast.dump(a.value) == holder:
                return False   # read, or stepped on (``steps.value += 1`` reads the old value)
    return True


def _mutable_names(v: ast.expr):
    """True for ``mutable=True``; the set of collection names of a literal; None if unknown."""
    if isinstance(v, ast.Constant):
        if v.value is True:
            return True
        if v.value is False or v.value is None:
            return set()
        if isinstance(v.value, str):
            return {v.value}
        return None
    if isinstance(v, (ast.List, ast.Tuple, ast.Set)):
        return const_strs(v.elts)
    return None


def _discarded(facts: FlaxFacts, site: ApplySite) -> Optional[ast.AST]:
    """The node showing the updated collections are thrown away, if they are: the call as a
    statement, ``[0]`` of it (also through a name read only as ``name[0]``), ``_`` or an unused
    name as its second result, or that name
    returned (as ``aux`` of ``jax.value_and_grad(..., has_aux=True)``, or plainly) to callers
    that all throw it away."""
    fn: Function = site.scope
    call = site.call
    for node in fn.of_type(ast.Expr):
        if node.value is call:
            return call
    for node in fn.of_type(ast.Subscript):
        if node.value is call and isinstance(node.slice, ast.Constant) and node.slice.value == 0:
            return node
    target = _assigned_to(fn, call)
    if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2 and \
            not any(isinstance(e, ast.Starred) for e in target.elts):
        return _fate(facts, fn, target.elts[1], 0)
    if isinstance(target, ast.Name) and target.id != "_":
        # ``outputs = apply(..., mutable=...)`` read only as ``outputs[0]``: the updates, its
        # second element, are never read
        loads = _loads(facts, fn, target.id)
        firsts = [n for n in fn.of_type(ast.Subscript) if isinstance(n.value, ast.Name) and n.value.id == target.id
                  and isinstance(n.slice, ast.Constant) and n.slice.value == 0]
        if loads and len(firsts) == len(loads) and all(any(f.value is l for f in firsts) for l in loads):
            return firsts[0]
    return None


def _assigned_to(fn: Function, call: ast.Call) -> Optional[ast.expr]:
    for node in fn.of_type(ast.Assign):
        if node.value is call and len(node.targets) == 1:
            return node.targets[0]
    return None


def _fate(facts: FlaxFacts, fn: Function, target: ast.expr, depth: int) -> Optional[ast.AST]:
    """Where the value bound to ``target`` in ``fn`` is thrown away; None if it is used (or
    this file cannot tell)."""
    if not isinstance(target, ast.Name):
        return None
    if target.id == "_":
        return target
    loads = _loads(facts, fn, target.id)
    if not loads:
        return target
    if depth >= 3:
        return None
    paths = set()
    dead = None
    for load in loads:
        p = _return_path(fn, load) if not fn.is_module else None
        if p is None:
            # copied into a name nothing reads (``merged = {**variables, **updates}``)
            into = _copied_into(fn, load, target.id)
            point = _fate(facts, fn, into, depth + 1) if into is not None else None
            if point is None:
                return None          # read somewhere other than a return
            dead = dead or point
            continue
        paths.add(p)
    if not paths:
        return dead
    if fn.is_module or len(paths) != 1:
        return None
    path = paths.pop()
    sites = facts.call_sites(fn)
    if not sites:
        return None
    first = None
    for call, caller, target_info in sites:
        p = _through_transforms(path, target_info)
        if p is None:
            return None
        bound = _assigned_to(caller, call)
        if bound is None:
            return None
        for i in p:
            if not isinstance(bound, (ast.Tuple, ast.List)) or i >= len(bound.elts) or \
                    any(isinstance(e, ast.Starred) for e in bound.elts):
                bound = None
                break
            bound = bound.elts[i]
        if bound is None:
            return None
        point = _fate(facts, caller, bound, depth + 1)
        if point is None:
            return None
        first = first or point
    return first


def _copied_into(fn: Function, load: ast.Name, name: str) -> Optional[ast.Name]:
    """The other name ``load`` is copied into by a plain assignment of ``fn`` (``merged =
    {**variables, **updates}``, ``new = updates``); None when it is read any other way."""
    for node in fn.of_type(ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id != name \
                and any(n is load for n in ast.walk(node.value)):
            v = node.value
            whole = v is load or (isinstance(v, ast.Dict) and any(val is load for val in v.values)) or \
                (isinstance(v, ast.Dict) and any(k is None and val is load for k, val in zip(v.keys, v.values)))
            return node.targets[0] if whole else None
    return None


def _loads(facts: FlaxFacts, fn: Function, name: str) -> list:
    """Every read of ``fn``'s own ``name``: in ``fn`` and in nested functions that see it (a
    nested function's own ``name`` -- ``loss_fn``'s local ``updates`` -- is another variable)."""
    out = []
    stack = [fn]
    while stack:
        s = stack.pop()
        if s is not fn and facts.binding_scope(name, s) is not fn:
            continue
        out.extend(n for n in _own_nodes(s.node)
                   if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
        stack.extend(s.children)
    return out


def _own_nodes(node: ast.AST):
    """The nodes of one scope: ``node``'s body without nested function and lambda bodies (their
    decorators and defaults belong to this scope)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        stack = list(node.body)
    elif isinstance(node, ast.Lambda):
        stack = [node.body]
    else:
        stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(n.decorator_list)
            stack.extend(d for d in n.args.defaults + n.args.kw_defaults if d is not None)
            if n.returns is not None:
                stack.append(n.returns)
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(d for d in n.args.defaults + n.args.kw_defaults if d is not None)
            continue
        stack.extend(ast.iter_child_nodes(n))


def _return_path(fn: Function, load: ast.Name) -> Optional[tuple]:
    """``(1,)`` when ``load`` (or one collection of it, ``load["batch_stats"]``) is the second
    element of a returned tuple of ``fn``."""
    for ret in fn.of_type(ast.Return):
        v = ret.value
        path = []
        while v is not None:
            if v is load or (isinstance(v, ast.Subscript) and v.value is load and isinstance(v.slice, ast.Constant)):
                return tuple(path)      # (``mutated["batch_stats"]``: the updated collection itself)
            if isinstance(v, (ast.Tuple, ast.List)):
                nxt = None
                for i, e in enumerate(v.elts):
                    if any(n is load for n in ast.walk(e)):
                        nxt, idx = e, i
                        break
                if nxt is None:
                    break
                path.append(idx)
                v = nxt
                continue
            break
    return None


def _through_transforms(path: tuple, target) -> Optional[tuple]:
    """Where a function's returned element lands in the result of a (transformed) call."""
    for tr, tcall in reversed(getattr(target, "transforms", ()) or ()):
        name = getattr(tr, "name", "")
        if name.endswith("value_and_grad") or name.endswith(".grad"):
            aux = next((k.value for k in tcall.keywords if k.arg == "has_aux"), None)
            if not (isinstance(aux, ast.Constant) and aux.value is True):
                return None
            if not path or path[0] != 1:
                return None
            if name.endswith("value_and_grad"):
                path = (0,) + path        # ((loss, aux), grads)
            else:
                path = (1,) + path[1:]    # (grads, aux)
        elif getattr(tr, "kind", None) not in ("jit",):
            return None
    return path
