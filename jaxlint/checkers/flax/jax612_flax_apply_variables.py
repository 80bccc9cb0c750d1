from __future__ import annotations

import ast
from typing import Iterator

from ...analysis import CERTAIN, INFERRED, SemanticModel
from ...fixes.edits import SAFE, Edit
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short
from .linen import flax_facts
from .evaluate import READS
from .values import const_strs, dict_keys
from .variables import FULL, INNER


@register
class FlaxApplyVariables(Rule):
    """
    ## What it does
    Flags `model.apply(params, ...)` (and `state.apply_fn(params, ...)`) where
    `params` is the inner parameter dict — bound from `model.init(...)["params"]`,
    `variables["params"]` (or `variables.get("params")`), a factory of the file
    that returns it (`params, opt_state = init(key)`, also before a loop that
    rebinds them from the step's results), or `state.params` of a `TrainState` created with
    `params=variables["params"]` — instead of the variables dict
    `{"params": params}` -- also through `jax.vmap(model.apply, ...)` over a stack
    of inner dicts, with `method=...`, or kept on `self` by a trainer (whose
    module may come in as a constructor argument: `Trainer(Regressor())`), also
    for a library module (`nn.Sequential([...])`, `nn.Dense(4)`); the mirror
    mistake, `{"params": variables}` where `variables` is already the whole
    `model.init(...)` result; and a variables dict written as `{"params": ...}`
    for a module whose `nn.BatchNorm` reads `batch_stats` on every run
    (evaluation with `train=False`) while `mutable` does not let `apply` create
    them.

    ## Why is this bad?
    A PyTorch module carries its weights: `model(x)` and `model.state_dict()`
    are two views of one object. A Flax module carries none; `apply` takes the
    variables dict, keyed by collection (`{"params": ..., "batch_stats": ...}`),
    as its first argument. Given the inner parameter dict, Flax looks for a
    `"params"` collection, finds `"Dense_0"`, `"Dense_1"`, ... instead and
    raises `ScopeCollectionNotFound: Tried to access "kernel" from collection
    "params" ... but the collection is empty`. Wrapping the whole variables dict
    once more raises `ApplyScopeInvalidVariablesStructureError` ("an extra
    params layer").

    ## Example
    ```python
    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(x)

    model = MLP()
    x = jnp.ones((1, 4))
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    logits = model.apply(params, x)
    ```

    ## Use instead
    ```python
    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(x)

    model = MLP()
    x = jnp.ones((1, 4))
    params = model.init(jax.random.PRNGKey(0), x)["params"]
    logits = model.apply({"params": params}, x)
    ```
    `model.apply(variables, x)` with `variables = model.init(...)` is right too.
    The dict is followed through names, shape-preserving calls
    (`optax.apply_updates`, `freeze`), a training loop that carries it through
    a step of this file (`params, opt_state = step(params, ...)` where `step`
    returns the updated `params`), the calls of this file to a function taking
    it, and -- for a function nothing here calls -- a paired factory: a
    function of this file returning `model, params` for a consumer
    `def predict(model, params, x)` (at least two names, same order). A dict
    whose origin this file does not show (a function parameter called from
    elsewhere, a module defined in another file) is not flagged; findings that
    rest on a module-level function's callers or a paired factory are
    `inferred` and come without a fix.

    ## Fix safety
    The fix wraps the argument: `model.apply({"params": params}, x)`. It is
    safe: it is offered only when every binding of the argument in this file is
    the inner parameter dict (a local name, `state.params` of the file's
    `TrainState`, or a parameter of a nested function whose every call passes
    the inner dict), the module reads no other collection (with a `BatchNorm`,
    `{"params": ...}` alone would still raise: no fix, the message names
    `batch_stats`; nor for a library module such as `nn.Sequential`, whose
    collections the file does not show), and the original call could only raise. The mirror mistake
    is reported without a fix.
    """

    confirm = ("raises", "ScopeCollectionNotFound", "ScopeParamNotFoundError",
               "ApplyScopeInvalidVariablesStructureError")
    summary = "`model.apply(params, ...)` given the inner parameter dict instead of `{\"params\": params}`"
    fix = FixOffer("Wrap in `{\"params\": ...}`", SAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        facts = flax_facts(m)
        for site in facts.apply_sites():
            if site.method == "init" or site.variables is None:
                continue
            if site.method == "apply_fn" and not facts.apply_fn_runs_apply(site.receiver):
                continue    # a state made elsewhere, or whose apply_fn is a wrapper of the user's own
            v = site.variables
            call_text = f"{short(site.receiver, 20)}.{site.method}"
            shape, local = facts.shape(v, site.scope)
            if shape == INNER:
                fix = None
                # a module that also reads another collection (BatchNorm's batch_stats) would still
                # raise with the params alone wrapped: no fix, the message names what is missing
                reads = [n for n in facts.needs(site) if n.kind == READS]
                also = ""
                if reads:
                    also = (f" (with {reads[0].what} of `{reads[0].owner}`, also its {reads[0].name!r} "
                            f"collection: `{{\"params\": ..., {reads[0].name!r}: ...}}`)")
                elif local and not _opaque(site.instance):
                    start, end = ctx.source.node_span(v)
                    fix = self.fix.make([Edit(start, end, '{"params": ' + ctx.source.segment(v) + "}")])
                yield ctx.finding(
                    self, v,
                    f"`{call_text}` is given `{short(v)}`, the inner parameter dict; it expects the variables "
                    f"dict `{{\"params\": {short(v, 30)}}}`{also} and raises `ScopeCollectionNotFound`",
                    confidence=CERTAIN if local else INFERRED, fix=fix)
                continue
            dropped = self._dropped_collection(facts, site)
            if dropped is not None:
                need, given = dropped
                yield ctx.finding(
                    self, v,
                    f"`{call_text}` is given `{short(v, 40)}`, with no {need.name!r} collection, but "
                    f"{need.what} of `{need.owner}` reads its {need.name!r} variables on every run"
                    f"{' (and `mutable` does not let it create them)' if given else ''}: raises "
                    f"`ScopeCollectionNotFound`; pass `{{\"params\": ..., {need.name!r}: ...}}`",
                    confidence=CERTAIN)
                continue
            if isinstance(v, ast.Dict):
                for key, value in zip(v.keys, v.values):
                    if isinstance(key, ast.Constant) and key.value == "params":
                        inner, local = facts.shape(value, site.scope)
                        if inner == FULL:
                            yield ctx.finding(
                                self, value,
                                f"`{call_text}` is given `{{\"params\": {short(value, 30)}}}`, but "
                                f"`{short(value)}` is already the whole variables dict (from `init`); pass it "
                                f"as is: the extra \"params\" layer raises "
                                f"`ApplyScopeInvalidVariablesStructureError`",
                                confidence=CERTAIN if local else INFERRED)

    @staticmethod
    def _dropped_collection(facts, site):
        """(need, mutable given): a collection the module reads on every run (``batch_stats`` of
        ``nn.BatchNorm``) that the variables dict -- a literal with constant keys, ``params``
        among them, written at the call or bound once to the name passed -- leaves out, while
        ``mutable`` does not let ``apply`` create it."""
        v = site.variables
        d = v
        if isinstance(v, ast.Name):
            sv = facts.single_value(v.id, site.scope)
            d = sv[0] if sv is not None else None
        if not isinstance(d, ast.Dict):
            return None
        keys = dict_keys(d)
        if keys is None or "params" not in keys:
            return None
        needs = facts.needs(site)
        reads = [n for n in needs if n.kind == READS and n.name not in keys]
        if not reads:
            return None
        need = reads[0]
        mutable = site.keyword("mutable")
        if mutable is None:
            if any(n.kind == "collection" and n.name == need.name for n in needs):
                return None    # the collection is updated too: JAX614 reports the missing `mutable`
            return need, False
        value = mutable.value
        if isinstance(value, ast.Constant) and value.value is False:
            return need, True
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            names = {value.value}
        elif isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            names = const_strs(value.elts)
        else:
            return None
        if names is None or need.name in names:
            return None
        return need, True


def _opaque(inst) -> bool:
    """A library module whose collections this file cannot see (``nn.Sequential([...])``):
    whether ``{"params": ...}`` alone is enough is unknown, so no fix is offered."""
    return inst is not None and inst.info is None and inst.layer is None
