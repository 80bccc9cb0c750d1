from __future__ import annotations

import ast
from typing import Iterator, List, Optional

from ...analysis import CERTAIN, INFERRED, SemanticModel
from ...fixes.edits import UNSAFE, Edit, Fix
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short
from .crn import compared_together, reevaluated
from .profiles import deliberate_basis
from ...analysis.liveness import bound_names
from .keys import Reuse, Use, rule_analysis
from .states import conflict, repeat_subject
from .naming import split_spelling, subkey_name
from .vocabulary import RANDOM


@register
class PrngKeyReuse(Rule):
    """
    ## What it does
    Flags a JAX PRNG key that is consumed a second time without being split
    in between: two `jax.random` sampling calls on one key, a sampling call
    after `jax.random.split(key)` of the same key, the same key passed to two
    functions (`model.init(key, x)` and then `rngs={"dropout": key}`), a key
    consumed in a loop body (or passed to a jitted step on every iteration)
    without being re-split, and a key taken from a `lax.scan`/`fori_loop`/
    `while_loop` carry that is consumed and then returned unchanged in the
    carry, or a key made in a step, consumed there and returned in the carry
    (the next step consumes it again), `self.rng` or a key of the enclosing
    function consumed in a `lax` loop body, also by a loss function the body
    calls that reads it (one key for every step), one key given to several RNG streams of one
    call (`model.init({"params": key, "dropout": key}, x)`), and the same key
    for every element of a comprehension (`[init(rng, shape) for _ in
    range(n)]`, also through a module field whose default is an initializer:
    `self.kernel_init(rng, shape)`), a key split and also stored as a state's
    key for later steps (`TrainingState(..., key=rng)` of a class of the
    module, `state.replace(rng=rng)` after `split(rng)`: the state's next
    split hands out the same keys again -- `split(k, 2)` always equals
    `split(k, 2)`, and with JAX's default partitionable threefry `split(k, 3)`
    begins with `split(k, 2)`), and a function of the scope that draws from a
    key it reads from there (`def loss_fn(p): ... rngs={"dropout": key}`),
    called twice on different inputs, and keys made from one literal seed in
    one scope (`normal(PRNGKey(0), ...)` then `bernoulli(PRNGKey(0), ...)`:
    one seed, one key; a constant key re-made in a loop is JAX402's; not in
    tests, which re-seed on purpose; elsewhere only in the strict profile:
    a literal seed written twice is a choice of seed, often the same one on
    purpose for separate models or datasets, and none of 21 such findings
    read on fresh repositories was a bug a maintainer would fix). The
    key is followed through assignments, branches (reuse on any
    path is reported; uses in mutually exclusive `if`/`else` branches are
    not) and loops, and into the functions of the module: a helper consumes
    its key parameter when the parameter reaches a `jax.random` function,
    `init`/`initialize_carry`, `apply(..., rngs=...)` or an initializer, so
    `add_noise(images, key)` then `add_noise(labels, key)` is a reuse, while a
    helper that only stores the key (a checkpoint restore) is not a consumer,
    nor is one whose name says it only evaluates abstractly
    (`get_abstract_state`, `create_abstract_model`, `get_kv_cache_annotations`,
    or a `functools.partial` only ever handed to such a function). Two `if`
    tests of the same flag (`if cfg.nnx:` ... `if cfg.nnx:` ... `else:`) take
    the same branch on every path.

    ## Why is this bad?
    In PyTorch, `torch.randn(3)` advances a hidden global generator, so two
    calls give different numbers. A JAX key is a plain value, not a
    generator: `jax.random.normal(key, ...)` called twice with the same `key`
    returns *the same numbers* twice. Dropout masks repeat every step, "noise"
    is identical across iterations, two layers get correlated initial
    weights, and an SGLD/diffusion sampler injects the same noise every step.
    Nothing raises; the model just trains worse.

    Which consumers count is a summary of what each does with a key: a
    `jax.random` sampler, `split` and `fold_in`; Flax/Haiku `init` and
    `apply(..., rngs=...)`, `sample(seed=key)`, `dm_pix.random_*`; and each
    project function or method by what its body does with that parameter
    (draws, splits, folds, only stores, hands on), across modules. A method
    of an object whose class is unknown counts when every project method of
    that name draws from the key. Objects of library classes whose methods
    draw from the key they are given first count too (numpyro's `MCMC.run`,
    `Predictive(...)(key)`, `SVI.init`/`run`). A module's `init`/`apply`
    draws only from keys it derives from the one it is given (Flax folds in
    each variable's path): a sampler's draw from the same key repeats none of
    its numbers, while two inits of one module with one key make twin models
    with equal weights (unless the second is a target network, which starts
    as a copy on purpose).

    A draw whose result nobody reads repeats nothing: numbers thrown away
    (`normal(key, ()).block_until_ready()`), names rebound before any read on
    every path (`variables = model.init(key, x)` replaced by loaded weights),
    and, for a project function, the parts of its result that its summary
    says derive from the key (`_, (params, eval_keys) = setup(key)` with
    `eval_keys` rebound before use: a later split of the same key is fine).

    **Profiles.** The default profile reports a reuse when both consumers
    are known to draw from the key, outside tests and teaching material.
    `--strict` adds the rest: a consumer whose effect on a key is unknown
    (a callable passed in, a library method not in the table), test code
    (one key given to several computations is often deliberate there),
    benchmarks (`benchmarks/`, `bench/` folders, `bench*` files, functions
    named `benchmark_*`/`bench_*`/`profile_*`: inputs that need a shape
    only), the `__main__` self-check of a package's module (and functions
    named as checks, `regular_test`, that only that block runs),
    notebooks and tutorials (demo data drawn from one key included: read
    samples found it nothing a maintainer acts on), a key drawn from first and only then split
    (the derived keys do not repeat the drawn numbers; in a `lax` loop:
    drawn in one step and split in the next; in a Python loop: drawn below,
    split at the top of the next iteration), a key handed to a function of
    the module that passes it on only to callables whose effect is unknown
    (`state.apply_fn(params, batch, rng)` in a jitted step given the same key
    on every iteration), and a key stored on an object at construction
    (`self.rng = key` in `__init__`) that a method consumes and no method
    ever replaces (every call of that method draws the same numbers; whether
    it is called more than once is not known here), and two splits of one key
    that ask for different numbers of keys (`env_keys = split(key, n)`, then
    `key, sub = split(key)`): `split(k, 2)` always equals `split(k, 2)`
    (reported by default), but `split(k, 5)` and `split(k, 2)` share only
    their first two keys, and only under JAX's default partitionable
    threefry; whether the shared keys feed the same draws is not followed
    here (a second split that a loop repeats on every iteration is reported
    by default), and a key whose consumers, all but one, only make values
    read for their shapes and dtypes (`tau = uniform(key, (1, n))` handed to
    `model.init(key, obs, tau)`; a dummy reset, action and step of an
    environment packed into a transition for `buffer.init`; a sample whose
    `.shape` alone is read): `init` traces an example input for its structure,
    so its numbers are never used; and two draws that meet only as the two
    sides of one selection -- `jnp.where`/`lax.select` (`where(c, gumbel_approx(key),
    normal_approx(key))`), the branches of `lax.cond` over values made from each
    draw, or `m * a + (1 - m) * b` -- or kept by selections on `kind == A` and
    `kind == B` with different constants (a dispatch on a column's type: each
    element keeps one draw, for a mask of zeros and ones). Each strict finding
    says why in its
    `basis`.

    ## Example
    ```python
    def train_step(state, batch, key):
        keep = jax.random.bernoulli(key, 0.9, batch.shape)   # dropout
        return update(state, batch * keep)

    key = jax.random.PRNGKey(0)
    params = model.init(key, x)
    for step in range(num_steps):
        state = train_step(state, batch, key)   # same dropout mask every step
    ```

    ## Use instead
    ```python
    def train_step(state, batch, key):
        keep = jax.random.bernoulli(key, 0.9, batch.shape)   # dropout
        return update(state, batch * keep)

    key = jax.random.PRNGKey(0)
    key, init_key = jax.random.split(key)
    params = model.init(init_key, x)
    for step in range(num_steps):
        key, step_key = jax.random.split(key)
        state = train_step(state, batch, step_key)
    ```
    Correct patterns are not flagged: `key, sub = jax.random.split(key)` in
    each iteration, `keys = jax.random.split(key, n)` then `keys[i]` or a loop
    over `keys`, `jax.random.fold_in(key, step)` with distinct data, a key
    only read by `jax.random.key_data` or `print`, and *common random
    numbers*: one key given to two computations whose results are then
    compared with each other in an assertion (`ref = reference(x, key)`,
    `out = fused(x, key)`, `assert_allclose(out, ref)`), as tests of an
    implementation against a reference do on purpose; nor a retry: the key
    drawn from by the last statement of a `try` body and again in one of its
    handlers, which runs only when the body failed (its numbers reached
    nothing).

    ## Fix safety
    The fix inserts `key, subkey = jax.random.split(key)` (with the module's
    spelling of `jax.random` and a fresh name in the file's naming style)
    before each statement that consumes the reused key, and passes the fresh
    subkey to that consumer. It is unsafe: it changes the random stream (the
    numbers drawn differ from before), which changes results and may break
    tests pinned to them. It is offered only when every consumer of the key
    is a simple statement on its own line; other shapes are reported without
    a fix.
    """

    confirm = "key-reuse"
    summary = "a PRNG key consumed twice gives the same random numbers twice"
    fix = FixOffer("Split the key before each use", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        ka = rule_analysis(ctx)
        for r in ka.reuses() if ka is not None else ():
            if r.reason == "again" and r.first is not None and compared_together(r.fn, r.first, r.use):
                continue    # common random numbers: both sides of a comparison get the same key on purpose
            if r.reason == "again" and r.first is not None and _no_live_pair(m, r, ka):
                # numbers nobody reads (``normal(key, ()).block_until_ready()``; ``variables =
                # model.init(key, x)`` replaced by loaded weights): the reuse starts at the first
                # consumer whose result is read, if another one follows
                later = sorted((u for u in (r.sites or []) if u.line > r.use.line and not _dead_result(m, r.fn, u, ka)),
                               key=lambda u: u.line)
                if not _dead_result(m, r.fn, r.use, ka):
                    if not later or not _straight(m, r.fn, r.use, later[0]):
                        continue
                    r.first, r.use = r.use, later[0]
                else:
                    # (the recorded reuse is itself dead: the first live pair after it that repeats
                    # numbers -- two inits replaced by loaded weights, then two draws)
                    pair = next(((a, b) for i, a in enumerate(later) for b in later[i + 1:]
                                 if conflict(a, b) and _straight(m, r.fn, a, b)), None)
                    if pair is None:
                        continue
                    r.first, r.use = pair
            if _seed(r) is not None and m.in_test_code(r.fn):
                continue    # tests re-seed each input for reproducibility, on purpose
            if r.reason == "again" and r.first is not None and _retry_after_failure(r):
                continue    # ``try: s = sample(key, N=M)`` / ``except: s = sample(key, N=n)``: one of them runs to the end
            if r.reason == "again" and r.first is not None and _rebound_by_loop_between(r):
                continue    # ``for k, rng in zip(names, keys):`` rebinds the key: only a loop run zero times repeats
            yield self._finding(ctx, r)

    def _finding(self, ctx: Context, r: Reuse) -> Finding:
        use = r.use
        name = short(use.arg, 30)
        consumer = _consumer(use)
        streams = _same_call_streams(r)
        if streams:
            msg = (f"PRNG key `{name}` is given to the {_and(streams)} RNG streams of {consumer} at once; "
                   f"every stream draws the same random numbers (split it, one key per stream)")
        elif r.reason == "again" and "store" in (r.first.kind, use.kind):
            split, store = (r.first, use) if use.kind == "store" else (use, r.first)
            msg = (f"PRNG key `{name}` is split by {_consumer(split)} on line {split.line} and also stored for "
                   f"later steps by {_consumer(store)} on line {store.line}: the next split of the stored key "
                   f"gives the keys this split already handed out; store a fresh key from the split instead")
        elif r.reason == "again" and _seed(r) is not None:
            msg = (f"PRNG key `{name}` is made from seed {_seed(r)}, as is the key consumed by "
                   f"{_consumer(r.first)} on line {r.first.line}: keys from one seed are one key, so "
                   f"{consumer} draws the same random numbers again; split one key instead")
        elif r.reason == "again":
            first = r.first
            by = _consumer(first)
            more = sorted({u.line for u in r.sites if u is not use and u is not first and u.line > use.line})
            tail = f" (and again on line{'s' if len(more) > 1 else ''} {', '.join(map(str, more))})" if more else ""
            msg = (f"PRNG key `{name}` is reused: already consumed by {by} on line {first.line}, then by "
                   f"{consumer}{tail}; the same key gives the same random numbers")
        elif r.reason == "loop" and r.first is not None and r.first.call is not use.call:
            # the earlier consumer is further down the body: it leaves the key consumed for the
            # next iteration (``_, sample_rng = split(rng)`` below ``rng, k = split(rng)``)
            msg = (f"PRNG key `{name}` is consumed by {_consumer(r.first)} on line {r.first.line} without "
                   f"being re-split, and the next iteration of this {r.where} consumes it again with "
                   f"{consumer}: the same key gives the same random numbers; rebind the key from that split")
        elif r.reason == "loop":
            msg = (f"PRNG key `{name}` is consumed by {consumer} on every iteration of this {r.where} "
                   f"without being re-split; every iteration draws the same random numbers")
        elif r.reason == "carry" and r.first is not None:
            msg = (f"PRNG key `{name}` is consumed by {consumer} and then returned in the {r.where} carry; "
                   f"the next step consumes the same key again ({_consumer(r.first)} on line {r.first.line}), "
                   f"so a key the previous step already used is used again")
        elif r.reason == "carry":
            msg = (f"PRNG key `{name}` from the {r.where} carry is consumed by {consumer} and returned "
                   f"unchanged in the carry; every step draws the same random numbers")
        elif r.reason == "stored":
            msg = (f"PRNG key `{name}` is stored on the object at construction (line {r.origin}) and consumed "
                   f"by {consumer} in {r.where}; no method ever replaces it, so every call of {r.where} draws "
                   f"the same random numbers")
        else:
            msg = (f"PRNG key `{name}` from the enclosing scope is consumed by {consumer} in this "
                   f"{r.where} on every step; every step draws the same random numbers — carry the key "
                   f"and split it, or `fold_in` the step")
        certain = use.kind != "call" and (r.first is None or r.first.kind != "call")
        conf = CERTAIN if certain else INFERRED
        fix = _split_fix(ctx, r)
        return ctx.finding(self, use.call, msg, confidence=conf, fix=fix, strict=_strict_basis(ctx, r),
                           subject=repeat_subject(r))


_TRY_NODES = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


def _retry_after_failure(r: Reuse) -> bool:
    """The first consumer is the last statement of a ``try`` body and the second sits in one of
    its handlers: the handler runs only when the body failed -- at the first consumer or before it
    --, so the first draw's numbers never reach anything; the handler draws them once."""
    fn = getattr(r.use, "fn", None) or r.fn
    if fn is None or getattr(r.first, "fn", None) not in (None, fn):
        return False
    nodes = fn.walk() if fn.is_module else ast.walk(fn.node)
    for t in nodes:
        if t.__class__ not in _TRY_NODES or not t.body or t.body[-1] is not r.first.stmt:
            continue
        if any(any(_within(r.use.call, st) for st in h.body) for h in t.handlers):
            return True
    return False


def _same_call_streams(r: Reuse) -> List[str]:
    """``model.init({"params": key, "dropout": key}, x)``: the stream names one call gives the
    same key under (empty when the two uses are not two streams of one call)."""
    if r.reason != "again" or r.first is None or r.first.call is not r.use.call:
        return []
    call = r.use.call
    dicts = [kw.value for kw in call.keywords if kw.arg == "rngs"] + list(call.args[:1])
    out = []
    for d in dicts:
        if isinstance(d, ast.Dict):
            for k, v in zip(d.keys, d.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and v in (r.first.arg, r.use.arg):
                    out.append(f"`{k.value}`")
    return out if len(out) > 1 else []


def _discarded(u) -> bool:
    """The numbers ``u`` (a ``jax.random`` sampler's call) draws are thrown away: its
    statement is the call alone, or the call waited on (``jax.random.normal(key, ()).
    block_until_ready()``, the idiom that synchronises a device)."""
    if u is None or u.kind != "sample" or u.stmt.__class__ is not ast.Expr:
        return False
    e = u.stmt.value
    while e.__class__ is ast.Call and e.func.__class__ is ast.Attribute and e.func.attr == "block_until_ready":
        e = e.func.value
    return e is u.call


def _rebound_by_loop_between(r: Reuse) -> bool:
    """A ``for`` loop whose target rebinds the reused key's name runs between the two consumers
    (the second after the loop ends): the second sees the key the loop left, and the first's
    key only when the loop runs zero times."""
    name = r.use.name
    fn = getattr(r.use, "fn", None) or r.fn
    if name is None or r.first.name != name or fn is None or getattr(r.first, "fn", None) not in (None, fn):
        return False
    a, b = r.first.line, r.use.line
    for loop in fn.of_type(ast.For, ast.AsyncFor):
        end = loop.end_lineno or loop.lineno
        if a < loop.lineno and end < b and not loop.orelse \
                and any(n.__class__ is ast.Name and n.id == name for n in ast.walk(loop.target)):
            return True
    return False


def _straight(m: SemanticModel, fn, a, b) -> bool:
    """``a`` and ``b`` consume on one path: their statements share a block (a consumer in a
    loop that rebinds the key and one after the loop see the same key only when the loop
    runs zero times -- and then the first never ran)."""
    fa, fb = getattr(a, "fn", None) or fn, getattr(b, "fn", None) or fn
    if fa is not fb or a.stmt is None or b.stmt is None:
        return False
    block = m.block_of(a.stmt, fa)
    return block is not None and block is m.block_of(b.stmt, fb)


def _no_live_pair(m: SemanticModel, r: Reuse, ka) -> bool:
    """The reuse as recorded repeats nothing anyone reads: its later consumer's result is dead,
    or every consumer before it made a dead result."""
    if _dead_result(m, r.fn, r.use, ka):
        return True
    earlier = [u for u in (r.sites or [r.first]) if u is not r.use and u.line <= r.use.line] or [r.first]
    return all(_dead_result(m, r.fn, u, ka) for u in earlier)


def _dead_result(m: SemanticModel, fn, u, ka=None) -> bool:
    """What the consumer ``u`` made is never used: a sampler's numbers thrown away (``_discarded``),
    or names bound by its statement that no path reads before rebinding them (``model_vars =
    model.init(key, x)`` then ``model_vars = pickle.load(f)``).  For a call of a project function
    whose key summary says which parts of its result derive from the key (``KeyAnalysis.outputs``),
    only the names bound to those parts count (``_, _, (params, eval_keys) = setup(key)`` with
    ``eval_keys`` rebound before any read); a statement that throws such a result away entirely
    (``setup(key)`` alone) made nothing from the key."""
    if _discarded(u):
        return True
    stmt = getattr(u, "stmt", None) if u is not None else None
    if fn is None or stmt is None:
        return False
    paths = _output_paths(m, fn, u, ka) if u.kind == "call" else None
    if stmt.__class__ is ast.Expr and stmt.value is u.call:
        return paths is not None
    if stmt.__class__ is not ast.Assign or stmt.value is not u.call and paths is not None:
        return False
    names = set()
    for t in stmt.targets:
        if paths is None:
            if not all(n.__class__ is ast.Name for n in ([t] if t.__class__ is ast.Name else getattr(t, "elts", [None]))):
                return False
            names.update(bound_names(t))
        else:
            for p in paths:
                sub = _at_path(t, p)
                if sub is None:
                    return False
                names.update(bound_names(sub))
    # (a result never read to the end of the function shows the draw dead only when nothing
    # else of the consumer's can carry it: a sampler, or a call whose summary says so)
    return m.dead_after(stmt, getattr(u, "fn", None) or fn, names, to_end=u.kind != "call" or paths is not None)


def _output_paths(m: SemanticModel, fn, u, ka) -> Optional[list]:
    """The paths of the called function's result that derive from the key ``u`` hands it
    (``KeyAnalysis.outputs``, or the exported summary of another module's function), or None."""
    call = u.call
    if ka is None:
        return None
    target = m.resolve_callable(call.func, fn)
    if target is not None:
        if target.transforms:
            return None
        pairs, unknown = m.bind_arguments(target, call)
        hit = [p for p, a in pairs if a is u.arg]
        if unknown or len(hit) != 1:
            return None
        got = ka.outputs(target.function, hit[0])
        return None if got is None else [tuple(p) for p in got]
    q = m.qualname(call.func, fn) if call.func.__class__ in (ast.Name, ast.Attribute) else None
    ext = m.external_facts(q)
    if ext is None or "prng" not in ext:
        return None
    params = ext["params"]
    bound = [params[i] for i, a in enumerate(call.args) if a is u.arg and i < len(params)
             and not any(x.__class__ is ast.Starred for x in call.args[:i + 1])]
    bound += [kw.arg for kw in call.keywords if kw.value is u.arg and kw.arg is not None]
    outs = ext["prng"].get("outputs") or {}
    if len(bound) != 1 or bound[0] not in outs:
        return None
    return [tuple(p) for p in outs[bound[0]]]


def _at_path(t: ast.AST, path: tuple) -> Optional[ast.AST]:
    """The part of an assignment target a result path lands in (the whole name when the
    target does not unpack that deep: ``out = f(key)``); None at a starred element."""
    for i in path:
        if t.__class__ is ast.Name:
            return t
        if t.__class__ not in (ast.Tuple, ast.List) or any(e.__class__ is ast.Starred for e in t.elts) \
                or i >= len(t.elts):
            return None
        t = t.elts[i]
    return t


def _seed(r: Reuse):
    """The literal seed of a reused key made by ``jax.random.PRNGKey(<seed>)``, or None."""
    v = r._vid
    return v[1] if isinstance(v, tuple) and len(v) == 2 and v[0] == "seed" else None


def _and(items: List[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _strict_basis(ctx: Context, r: Reuse) -> Optional[str]:
    """Why the reuse belongs to the strict profile only, or None: it is reported by default
    when both consumers are known to draw from the key (a ``jax.random`` function, or a
    function whose summary says it samples, splits or hands the key to one), outside tests."""
    if r.reason == "stored":
        return ("whether the method runs more than once on one object is not known here "
                "(one call draws from the stored key once)")
    if _aligned_permutations(r) or _aligned_by_helper(ctx.model, r):
        return ("one key permutes (or picks from) several arrays: the same positions keep their rows "
                "aligned (the usual way to shuffle or subsample paired data)")
    for u in (r.first, r.use):
        if u is not None and u.kind == "call" and not u.draws:
            return f"{_consumer(u)} is not known to draw from the key (its effect on a key is unknown here)"
    if r.first is not None and r.reason == "again" and r.first.kind == r.use.kind == "call" \
            and reevaluated(r.fn, r.first, r.use):
        return ("the second call re-evaluates the same randomized computation at inputs computed from "
                "the first one's result (a sharpness-aware or line-search step keeps its randomness on purpose)")
    if _prefix_overlap_only(r):
        return PREFIX_OVERLAP_BASIS
    if r.reason == "again" and _seed(r) is not None:
        return SEED_BASIS
    if r.first is not None and r.reason in ("again", "loop") and r.first.call is not r.use.call \
            and not _derives(ctx, r.fn, r.first) and _derives(ctx, r.fn, r.use) and not _unrebound_in_loop(r):
        # (in a loop: drawn from below, split at the top of the next iteration)
        # (the reverse -- split, then the parent drawn from -- is the slip maintainers fix)
        return ("the key is drawn from first and only then split (or folded): the derived keys "
                "do not repeat the numbers drawn")
    if r.first is not None and r.reason == "carry" and not _derives(ctx, r.fn, r.use) \
            and _derives(ctx, r.fn, r.first):
        return ("the key is drawn from in one step and only split (or folded) in the next: the "
                "derived keys do not repeat the numbers drawn")
    same_draws = r.first is not None and r.first.kind == "sample" and r.use.kind == "sample" \
        and _seed(r) is None    # (teaching material shows that one seed gives one key on purpose)
    basis = deliberate_basis(ctx.model, r.fn, same_draws, node=r.use.call if r.use is not None else None)
    if basis is None and _examples_only(ctx.model, r):
        return EXAMPLE_BASIS
    if basis is None and _exclusive_where(ctx.model, r):
        return WHERE_BASIS
    return basis


# why two keys made from one literal seed belong to the strict profile
SEED_BASIS = ("two keys are made from the same literal seed: one seed is a choice of seed, often the same on "
              "purpose (separate models or datasets each made reproducibly), not one key passed twice; whether "
              "the two draws must differ is not known here")


# why two splits of one key with different counts belong to the strict profile
PREFIX_OVERLAP_BASIS = ("the two splits ask for different numbers of keys: they share only their first "
                        "subkeys (with JAX's default partitionable threefry; none with the classic one), "
                        "and whether those shared subkeys feed the same draws is not known here")


# why a reuse whose draws, all but one, only build example inputs belongs to the strict profile
EXAMPLE_BASIS = ("all but one of the consumers only make values whose shapes and dtypes are read (example "
                 "inputs for `init`, a dummy transition for a buffer, `.shape`): their numbers are never used")


def _examples_only(m: SemanticModel, r: Reuse) -> bool:
    """Every consumer of the key but one makes values read only for their structure
    (``SemanticModel.structure_only``): ``tau = uniform(key, (1, n))`` then ``model.init(key,
    obs, tau)``; ``obs, state = env.reset(key)``, ``action = env.sample(key)``, ... then
    ``buffer.init(Timestep(obs, action, ...))``.  One key gives the example's numbers and the
    parameters' draws, but nothing reads the example's numbers: nothing repeats that matters."""
    if r.reason != "again" or r.first is None:
        return False
    sites = list(r.sites or [r.first, r.use])
    for u in (r.first, r.use):
        if all(x is not u for x in sites):
            sites.append(u)
    real = 0
    for u in sites:
        stmt = u.stmt
        fn = getattr(u, "fn", None) or r.fn
        names = []
        if stmt.__class__ is ast.Assign and fn is not None and all(
                x.__class__ in (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store, ast.Load)
                for t in stmt.targets for x in ast.walk(t)):
            names = [x.id for t in stmt.targets for x in ast.walk(t) if x.__class__ is ast.Name]
        if u.kind in ("split", "fold_in") or not (names and m.structure_only(stmt, fn, names)):
            real += 1
            if real > 1:
                return False
    return True


def _unrebound_in_loop(r: Reuse) -> bool:
    """Both consumers sit in a loop that never rebinds the key's name: every iteration draws from
    the one key again, whatever order the draw and the split come in."""
    name = r.use.name
    fn = getattr(r.use, "fn", None) or r.fn
    if name is None or fn is None or r.first is None or r.first.name != name:
        return False
    for loop in fn.of_type(ast.For, ast.AsyncFor, ast.While):
        if _within(r.use.call, loop) and _within(r.first.call, loop) and not any(
                n.__class__ is ast.Name and n.id == name and n.ctx.__class__ is ast.Store for n in ast.walk(loop)):
            return True
    return False


# why two draws that meet only as the two sides of one selection belong to the strict profile
WHERE_BASIS = ("the draws are kept under mutually exclusive conditions -- the two sides of one selection "
               "(`jnp.where`, `lax.select`, the branches of `lax.cond`, `m * a + (1 - m) * b`), or "
               "selections on `x == A` and `x == B` (a dispatch on a type): each element keeps one of them, "
               "so no element sees two (for a mask `m` of zeros and ones)")
_SELECTS = frozenset({"jax.numpy.where", "jax.lax.select"})
_CONDS = frozenset({"jax.lax.cond"})


def _exclusive_where(m: SemanticModel, r: Reuse) -> bool:
    """Every two consumers of the key keep their numbers under exclusive conditions:
    ``jnp.where(c, gumbel_approx(key, ...), normal_approx(key, ...))``, ``z = normal(key)``
    read only in the other branch, ``lax.cond(p, lambda: a, lambda: b)`` over values made from
    each draw, ``mask * uniform(key, ...) + (1 - mask) * uniform(key, ...)``, or one draw kept
    by ``jnp.where(kind == A, d1, old)`` and the other by ``jnp.where(kind == B, d2, old)``
    with ``A != B``: no output element takes two draws."""
    if r.reason != "again" or r.first is None or r.first.call is r.use.call:
        return False
    fn = getattr(r.use, "fn", None) or r.fn
    if fn is None:
        return False
    # (a later split or fold of the key derives new keys: it repeats none of the draws)
    uses = [r.first, r.use] + [u for u in (r.sites or []) if u is not r.first and u is not r.use
                               and u.kind not in ("split", "fold_in")]
    if any(getattr(u, "fn", None) not in (None, fn) for u in uses):
        return False
    nodes = list(fn.walk()) if fn.is_module else list(ast.walk(fn.node))
    selections = [(w, got) for w in nodes for got in [_selection_sides(m, fn, w)] if got is not None]
    if not selections:
        return False
    guards = []
    for u in uses:
        g = _guard_of(nodes, selections, u, fn.node)
        if g is None:
            return False
        guards.append(g)
    return all(any(_exclusive(m, fn, x, y) for x in a for y in b)
               for i, a in enumerate(guards) for b in guards[i + 1:])


def _selection_sides(m: SemanticModel, fn, w: ast.AST) -> Optional[tuple]:
    """``(condition, side kept where it holds, side kept where it does not)`` of a selection
    whose every output element comes from one side only."""
    if w.__class__ is ast.Call and w.func.__class__ in (ast.Name, ast.Attribute):
        q = m.qualname(w.func, fn)
        if q in _SELECTS and len(w.args) == 3 and not w.keywords:
            return w.args[0], w.args[1], w.args[2]
        if q in _CONDS and len(w.args) >= 3 and not any(a.__class__ is ast.Starred for a in w.args[:3]):
            sides = []
            for br in w.args[1:3]:
                if br.__class__ is ast.Name:
                    d = fn.defs.get(br.id) if hasattr(fn, "defs") else None
                    br = d.node if d is not None else None
                if br is None:
                    return None
                sides.append(br)
            return w.args[0], sides[0], sides[1]
        return None
    if w.__class__ is ast.BinOp and w.op.__class__ is ast.Add and \
            w.left.__class__ is ast.BinOp and w.right.__class__ is ast.BinOp and \
            w.left.op.__class__ is ast.Mult and w.right.op.__class__ is ast.Mult:
        # ``m * a + (1 - m) * b`` (either order of factors and terms)
        for x, y in ((w.left, w.right), (w.right, w.left)):
            for mask in (x.left, x.right):
                for other in (y.left, y.right):
                    if other.__class__ is ast.BinOp and other.op.__class__ is ast.Sub and \
                            other.left.__class__ is ast.Constant and other.left.value == 1 and \
                            ast.dump(other.right) == ast.dump(mask) and _zero_one(m, fn, mask):
                        return mask, x, y
    return None


def _zero_one(m: SemanticModel, fn, mask: ast.expr, depth: int = 0) -> bool:
    """``mask`` holds only zeros and ones: a comparison (or its ``.astype(...)``), a ``bernoulli``
    draw, or a name bound once to one -- not a blending weight (``lam * a + (1 - lam) * b`` with
    one draw on each side repeats it everywhere)."""
    if depth > 3:
        return False
    if mask.__class__ is ast.Compare:
        return True
    if mask.__class__ is ast.Call:
        f = mask.func
        if f.__class__ is ast.Attribute and f.attr == "astype":
            return _zero_one(m, fn, f.value, depth + 1)
        q = m.qualname(f, fn) if f.__class__ in (ast.Name, ast.Attribute) else None
        return q in ("jax.random.bernoulli", "jax.numpy.logical_and", "jax.numpy.logical_or",
                     "jax.numpy.logical_not", "jax.numpy.isnan", "jax.numpy.isfinite")
    if mask.__class__ is ast.Name:
        v = m.single_value(mask.id, fn)
        return v is not None and _zero_one(m, fn, v[0] if isinstance(v, tuple) else v, depth + 1)
    return False


def _guard_of(nodes, selections, u: Use, root: ast.AST) -> Optional[frozenset]:
    """The conditions under which ``u``'s numbers survive, as ``{(condition's source, holds)}`` (each
    must hold; empty when none is known): the side of a selection its call sits in, or, for a
    consumer that binds names (``z = normal(key)``; ``mu = grid[categorical(key, s)]``), what
    every use of the values made from them keeps -- a name assigned a selection of them
    (``out = jnp.where(kind == A, mu, old)``) survives where that selection keeps its side;
    names made by other arithmetic, and nested functions reading them, carry their inputs'
    conditions (never a mask inside a reduction: a sum mixes elements)."""
    s = u.stmt
    if s.__class__ is not ast.Assign:
        value = getattr(s, "value", None)
        return _top_guard(selections, u.call, value) if value is not None else None
    if not _within(u.call, s.value):
        return None
    defs = [a for a in nodes if a.__class__ in (ast.FunctionDef, ast.AsyncFunctionDef) and a is not root]
    inner = {id(x) for d in defs for x in ast.walk(d) if x is not d}
    steps = [a for a in nodes if (a.__class__ is ast.Assign and a is not s and id(a) not in inner)
             or (a in defs and id(a) not in inner)]
    guards = {}
    start = _top_guard(selections, u.call, s.value)
    for t in s.targets:
        for n in ast.walk(t):
            if n.__class__ is ast.Name:
                guards[n.id] = start
    if not guards:
        return None
    used = set()
    for _round in range(8):
        changed = False
        for a in steps:
            value = a.value if a.__class__ is ast.Assign else a
            reads = [n for n in ast.walk(value) if n.__class__ is ast.Name and n.id in guards
                     and n.ctx.__class__ is ast.Load]
            if not reads:
                continue
            used.add(id(a))
            got = None
            for r in reads:
                g = guards[r.id] | (_top_guard(selections, r, value) if a.__class__ is ast.Assign else frozenset())
                got = g if got is None else got & g
            names = [a.name] if a.__class__ is not ast.Assign else \
                [n.id for t in a.targets for n in ast.walk(t) if n.__class__ is ast.Name]
            if a.__class__ is ast.Assign and any(n.__class__ not in (ast.Name, ast.Tuple, ast.List, ast.Load,
                                                                    ast.Store, ast.Starred)
                                                 for t in a.targets for n in ast.walk(t)):
                return None   # stored into an attribute or an item: not followed
            for name in names:
                old = guards.get(name)
                new = got if old is None else old & got
                if new != old:
                    guards[name] = new
                    changed = True
        if not changed:
            break
    inside = {id(x) for a in steps if id(a) in used
              for x in ast.walk(a.value if a.__class__ is ast.Assign else a)}
    inside.update(id(x) for x in ast.walk(s.value))
    values = None
    found = None
    for n in nodes:
        if n.__class__ is ast.Name and n.id in guards and n.ctx.__class__ is ast.Load:
            if id(n) in inside:
                continue   # a step of the derivation itself
            if values is None:
                # the value of the ``return``/expression statement holding each node
                values = {}
                for st in nodes:
                    if st.__class__ in (ast.Return, ast.Expr) and st.value is not None:
                        for x in ast.walk(st.value):
                            values.setdefault(id(x), st.value)
            stmt_value = values.get(id(n))
            g = guards[n.id] | (_top_guard(selections, n, stmt_value) if stmt_value is not None else frozenset())
            found = g if found is None else found & g
    return found or None


def _top_guard(selections, node: ast.AST, value: Optional[ast.AST]) -> frozenset:
    """``{(condition, holds)}`` when ``value`` (or an element of the tuple it is) is a selection
    with ``node`` in one of its sides: that element keeps ``node``'s numbers only there."""
    if value is None:
        return frozenset()
    parts = value.elts if value.__class__ in (ast.Tuple, ast.List) else [value]
    for part in parts:
        if not _within(node, part):
            continue
        for w, (cond, a, b) in selections:
            if w is part:
                if _within(node, a):
                    return frozenset({(ast.unparse(cond), True)})
                if _within(node, b):
                    return frozenset({(ast.unparse(cond), False)})
    return frozenset()


def _exclusive(m: SemanticModel, fn, a: tuple, b: tuple) -> bool:
    """No element is kept under both guards ``(condition's source, holds)``: one condition and
    its negation, or ``x == A`` and ``x == B`` (both holding) with ``A`` and ``B`` different
    constants."""
    try:
        na, nb = ast.parse(a[0], mode="eval").body, ast.parse(b[0], mode="eval").body
    except SyntaxError:
        return False   # (``*c``: no condition this can compare)
    if any(len(m.bindings(n.id, fn)) > 1 for c in (na, nb) for n in ast.walk(c) if n.__class__ is ast.Name):
        return False   # ``c = x > 0`` ... ``c = x > 1``: the same spelling, not the same condition
    if a[0] == b[0]:
        return a[1] != b[1]
    if not (a[1] and b[1]):
        return False
    ca, cb = _case_of(na), _case_of(nb)
    if ca is None or cb is None or ast.dump(ca[0]) != ast.dump(cb[0]):
        return False
    va, vb = _constant_value(m, fn, ca[1]), _constant_value(m, fn, cb[1])
    return va is not None and vb is not None and va[0] == vb[0] and va != vb


def _case_of(c: ast.expr) -> Optional[tuple]:
    """``(subject, value)`` of ``subject == value``."""
    if c.__class__ is ast.Compare and len(c.ops) == 1 and c.ops[0].__class__ is ast.Eq:
        return c.left, c.comparators[0]
    return None


def _constant_value(m: SemanticModel, fn, e: ast.expr):
    """The literal ``e`` is, or a module constant bound once to one (``ORDINAL_ID = 3``); for a
    constant imported from another module (``from .state import ORDINAL_ID``), its full name:
    two names of one dispatch (``ORDINAL_ID``, ``CYCLIC_ID``) stand for different cases."""
    if e.__class__ is ast.Constant:
        return ("c", e.value)
    if e.__class__ is ast.Name:
        home = m.resolve_scope(e.id, fn)
        if home is not None and home.is_module:
            bs = m.bindings(e.id, home)
            if len(bs) == 1 and bs[0].kind == "=" and bs[0].element.__class__ is ast.Constant:
                return ("c", bs[0].element.value)
            q = m.qualname(e, fn)
            if q is not None and "." in q and e.id.isupper():
                return ("n", q)
    return None


def _prefix_overlap_only(r: Reuse) -> bool:
    """``keys = split(key, n)`` then ``key, sub = split(key)``: two splits of one key whose counts
    differ (or are not known to be equal).  ``split(k, n)`` always equals ``split(k, n)`` -- the
    same keys, reported by default -- but ``split(k, 5)`` and ``split(k, 2)`` agree only in their
    first two keys, and only under ``jax_threefry_partitionable`` (the default since JAX 0.5):
    the repeat is of some subkeys, whose consumers are not followed here.  The same holds in a
    loop whose next iteration splits again, with another count, the key a split further down
    left unrebound (``rng, _ = split(rng)`` then ``keys = split(rng, n)``).  A second split that
    a loop repeats (the first outside it) hands out the same keys on every iteration: not this."""
    a, b = r.first, r.use
    if r.reason not in ("again", "loop") or a is None or a.kind != "split" or b.kind != "split" \
            or a.call is b.call:
        return False
    if _split_count(a.call) == _split_count(b.call):
        return False
    fn = getattr(b, "fn", None) or r.fn
    if r.reason == "again" and fn is not None and any(_within(b.call, loop) and not _within(a.call, loop)
                              for loop in fn.of_type(ast.For, ast.AsyncFor, ast.While)):
        return False
    return True


def _split_count(call: ast.Call) -> str:
    """The number of keys ``jax.random.split`` is asked for, as syntax (``2`` when not given)."""
    n = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "num"), None)
    if n is None:
        return "2"
    if isinstance(n, ast.Constant):
        return repr(n.value)
    return ast.dump(n, annotate_fields=False, include_attributes=False)


# samplers that pick positions of the array they are given: one key picks the same positions
# of every array of the same length
_INDEX_SAMPLERS = frozenset({"permutation", "choice"})


def _aligned_permutations(r: Reuse) -> bool:
    """``jax.random.permutation``/``choice`` given one key for different arrays -- two of them
    (``permutation(key, x), permutation(key, y)``; ``choice(key, x0, (n,))``, ``choice(key, x1,
    (n,))``), or a loop over the arrays (``[permutation(key, a) for a in arrays]``): the same
    positions of each keep paired rows aligned.  (The same data permuted on every epoch repeats
    the shuffle: not this.)"""
    uses = [u for u in (r.first, r.use) if u is not None]
    names = {u.callee.rsplit(".", 1)[-1] for u in uses}
    if r.reason not in ("again", "loop") or len(names) != 1 or not names <= _INDEX_SAMPLERS \
            or not all(u.kind == "sample" for u in uses):
        return False
    data = [_permuted(u.call) for u in uses]
    if any(d is None for d in data):
        return False
    if r.reason == "again":
        rest = [ast.dump(ast.Tuple(elts=list(u.call.args[2:]) + [k.value for k in u.call.keywords if k.arg != "a"
                                                                 and k.arg != "x"], ctx=ast.Load()))
                for u in uses]
        return len(data) == 2 and ast.dump(data[0]) != ast.dump(data[1]) and rest[0] == rest[1]
    loop_vars = set()
    for node in ast.walk(r.fn.node):
        if node.__class__ in (ast.For, ast.AsyncFor) and _within(r.use.call, node):
            loop_vars.update(n.id for n in ast.walk(node.target) if n.__class__ is ast.Name)
        elif node.__class__ in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp) \
                and _within(r.use.call, node):
            for g in node.generators:
                loop_vars.update(n.id for n in ast.walk(g.target) if n.__class__ is ast.Name)
    return any(n.__class__ is ast.Name and n.id in loop_vars for n in ast.walk(data[-1]))


def _aligned_by_helper(m: SemanticModel, r: Reuse) -> bool:
    """Two calls of one function of this module whose only draw from the key is a
    ``permutation``/``choice`` of its own parameter (``def convert(x): return
    permutation(subkey, x)``; ``convert(advantages)``, ``convert(targets)``), or of its row
    count (``idx = choice(key, len(data), (n,)); return data[idx]``; ``sample(key, xs)``,
    ``sample(key, ys)``): the same positions of each argument stay aligned, as with
    :func:`_aligned_permutations`."""
    if r.reason != "again" or r.first is None or r.first.kind != "call" or r.use.kind != "call":
        return False
    got = []
    for u in (r.first, r.use):
        target = m.resolve_callable(u.call.func, r.fn)
        if target is None or target.transforms:
            return False
        got.append((target.function, u, target))
    (f1, u1, t1), (f2, u2, t2) = got
    if f1 is not f2 or f1.is_lambda:
        return False
    draws = [c for c in f1.of_type(ast.Call) if (m.qualname(c.func, f1) or "").startswith("jax.random.")]
    if len(draws) != 1:
        return False
    c = draws[0]
    if c.func.__class__ is not ast.Attribute or c.func.attr not in _INDEX_SAMPLERS:
        return False
    data = _sized(_permuted(c))
    if data.__class__ is not ast.Name or data.id not in f1.param_nodes:
        return False
    if any(n.__class__ is ast.Name and n.id == data.id and n.ctx.__class__ is ast.Store and n.lineno < c.lineno
           for n in f1.walk()):
        return False    # rebound before the draw: not the argument any more
    args = []
    for u, t in ((u1, t1), (u2, t2)):
        pairs, _ = m.bind_arguments(t, u.call)
        a = next((a for p, a in pairs if p == data.id), None)
        if a is None:
            return False
        args.append(ast.dump(a))
    return args[0] != args[1]


def _sized(e: Optional[ast.AST]) -> Optional[ast.AST]:
    """The array whose row count ``e`` is (``len(data)``, ``data.shape[0]``) -- ``choice(key,
    len(data), (n,))`` draws row indices of ``data`` that depend on nothing but its length --,
    else ``e`` itself."""
    if e.__class__ is ast.Call and e.func.__class__ is ast.Name and e.func.id == "len" and len(e.args) == 1 \
            and not e.keywords:
        return e.args[0]
    if e.__class__ is ast.Subscript and e.value.__class__ is ast.Attribute and e.value.attr == "shape" \
            and e.slice.__class__ is ast.Constant and e.slice.value == 0:
        return e.value.value
    return e


def _permuted(call: ast.Call) -> Optional[ast.AST]:
    """The array (or size) ``jax.random.permutation(key, x)`` permutes, ``choice(key, a, ...)``
    picks from."""
    if len(call.args) > 1:
        return call.args[1]
    return next((k.value for k in call.keywords if k.arg in ("x", "a")), None)


def _derives(ctx: Context, fn, u: Use) -> bool:
    """``u`` derives new keys from the key (``split``/``fold_in``, or a function whose summary
    says it splits that parameter) rather than drawing numbers from it."""
    if u.kind in ("split", "fold_in"):
        return True
    if u.kind != "call":
        return False
    m = ctx.model
    f = u.call.func
    target = m.resolve_callable(f, fn)
    if target is not None:
        ka = rule_analysis(ctx)
        pairs, _ = m.bind_arguments(target, u.call)
        return any(a is u.arg and ka.splits(target.function, p) for p, a in pairs)
    q = m.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
    ext = m.external_facts(q)
    if ext is not None and "prng" in ext:
        params = ext["params"]
        bound = [params[i] for i, a in enumerate(u.call.args) if a is u.arg and i < len(params)]
        bound += [kw.arg for kw in u.call.keywords if kw.value is u.arg]
        return any(p in ext["prng"].get("split", ()) for p in bound)
    return False


def _consumer(use: Use) -> str:
    c = use.callee
    if c.startswith(RANDOM):
        c = "jax.random." + c[len(RANDOM):]
    if getattr(use.arg, "jaxlint_closure", False):
        return f"`{c}` (which draws from the `{use.name}` it reads from this scope)"
    return f"`{c}`"


# ---------------------------------------------------------------- the fix
_SIMPLE = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)


def _split_fix(ctx: Context, r: Reuse) -> Optional[Fix]:
    if r.reason == "closure" or _seed(r) is not None:
        return None     # (a key re-made from its seed cannot be advanced by splitting it)
    fn = r.fn
    name = r.use.name
    if name is None or name in fn.globals_declared:
        return None
    if not fn.is_module and name not in fn.locals:
        return None
    sites = [u for u in r.sites if not (u.kind == "fold_in" and u.data is None)]
    if r.use not in sites:
        return None
    src = ctx.source
    stmts = set()
    for u in sites:
        if u.name != name or u.in_comp or u.stmt is None or getattr(u.arg, "jaxlint_closure", False) \
                or not _fixable_stmt(ctx, u):
            return None
        if id(u.stmt) in stmts:
            return None          # two consumers in one statement
        stmts.add(id(u.stmt))
    spelling, import_edits = split_spelling(ctx, fn)
    sub = subkey_name(ctx, fn, name)
    nl = src.newline()
    edits: List[Edit] = list(import_edits)
    for u in sites:
        s = u.stmt
        indent = src.line_text(s.lineno)[:src.char_col(s.lineno, s.col_offset)]
        at = src.offset(s.lineno, 0)
        edits.append(Edit.insert(at, f"{indent}{name}, {sub} = {spelling}({name}){nl}"))
        start, end = src.node_span(u.arg)
        edits.append(Edit(start, end, sub))
    return PrngKeyReuse.fix.make(edits)


def _fixable_stmt(ctx: Context, u: Use) -> bool:
    s = u.stmt
    src = ctx.source
    prefix = src.line_text(s.lineno)[:src.char_col(s.lineno, s.col_offset)]
    if prefix.strip():
        return False             # not the first statement on its line (`if c: f(key)`, `a; f(key)`)
    if isinstance(s, _SIMPLE):
        return True
    if isinstance(s, (ast.For, ast.AsyncFor)):
        return _within(u.arg, s.iter)
    return False


def _within(node: ast.AST, root: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))
