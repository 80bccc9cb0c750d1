from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set, Tuple

from ...analysis import CERTAIN, Function, SemanticModel
from ...fixes.edits import UNSAFE, Edit, Fix
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short
from ...analysis import knowledge as K
from ..jit.calls import call_index
from .keys import rule_analysis
from .profiles import deliberate_basis
from .loops import is_config_sweep, loop_label
from .naming import base_key_name, split_spelling
from .vocabulary import (COMPREHENSIONS, KEY_FROM_SEED, LOWERING_METHODS, NON_CONSUMING, NON_CONSUMING_PREFIXES, RANDOM_NON_CONSUMING,
                         TIME_SOURCES, constant_data, functions_mentioning, stores_state)

# transforms that trace a function only to inspect it (shapes, jaxpr): a constant key there is fine
_INSPECTING = K.INSPECTING_TRANSFORMS


@register
class ConstantPrngKey(Rule):
    """
    ## What it does
    Flags `jax.random.PRNGKey(<literal>)` / `jax.random.key(<literal>)`
    created inside a loop body (also from a seed the loop never changes:
    `PRNGKey(seed + 1)` in a loop over steps; not under `if i == 0:` on the
    loop's own counter, which runs once), inside a function or method
    that a loop of the module calls on every iteration (`agent.select()`
    drawing from `jax.random.key(0)`; strict when the function runs loops of
    its own -- a whole evaluation or trial per call, the same inputs per run
    on purpose -- and silent for a default taken only when no key is passed,
    `if key is None:`; strict too for a key made per item of a loop over a
    collection whose body then runs a loop of its own -- `for cfg in configs:
    rng = PRNGKey(0); for gen in range(n): ...`, each item a whole run seeded
    alike), or inside a traced function (`jax.jit`,
    `vmap`, `grad`, a `lax.scan` body, a Flax module method, or a helper
    called from one), and keys seeded from the clock (`time.time()`) in eager
    code (unless the seed has a deterministic alternative: `666 if
    cfg.deterministic else int(time.time())`, `cfg.seed or int(time.time())`;
    a clock seed made once, outside a loop, is in the strict profile: a run
    that differs each time is usually the author's choice).
    A clock-seeded key *inside* traced code is reported once, as the
    clock read under a trace (JAX104), not twice. A key given only as the
    `rngs` of a Flax `apply` in evaluation mode (`training=False`,
    `deterministic=True`) is not drawn from: dropout is off.

    In test code, benchmarks (files under `benchmarks/` or `bench/`, or
    named `bench*`, and functions named `benchmark_*`/`bench_*`/`profile_*`),
    the `__main__` self-check of a package's module (and functions named as
    checks that only that block runs) and
    teaching material (notebooks, tutorials) a fixed key is usually
    deliberate (a reproducible or randomised test, the same inputs for every
    benchmark case, a short demonstration): those findings belong to the
    strict profile (`--strict`).

    ## Why is this bad?
    In PyTorch you seed once (`torch.manual_seed(0)`) and the generator keeps
    moving. In JAX a key *is* the random state: `jax.random.PRNGKey(0)`
    re-created in every loop iteration, or inside a jitted training step that
    runs every step, is the same key every time, so every iteration draws the
    same "random" numbers — the same dropout mask, the same noise, the same
    shuffle. A clock seed does not help: under `jit` `time.time()` runs once,
    at trace time, and the seed is baked into the compiled program as a
    constant; outside `jit` it makes runs irreproducible, and `int(time.time())`
    repeats within a second.

    ## Example
    ```python
    for step in range(num_steps):
        key = jax.random.PRNGKey(0)
        noise = jax.random.normal(key, x.shape)

    @jax.jit
    def train_step(params, x):
        key = jax.random.PRNGKey(42)
        mask = jax.random.bernoulli(key, 0.9, x.shape)
        ...
    ```

    ## Use instead
    ```python
    key = jax.random.PRNGKey(0)
    for step in range(num_steps):
        key, subkey = jax.random.split(key)
        noise = jax.random.normal(subkey, x.shape)

    @jax.jit
    def train_step(params, x, key):     # the caller splits a fresh key per step
        mask = jax.random.bernoulli(key, 0.9, x.shape)
        ...
    ```
    Create the key once from a seed (a command-line flag or config value, not
    the clock) and pass keys down. A constant key folded with something that
    changes per iteration or per call (`jax.random.fold_in(jax.random.PRNGKey(0),
    step)`, `jax.random.split(jax.random.PRNGKey(0), n)[i]`) is a new key each
    time and is not flagged. `jax.eval_shape(lambda: model.init(
    jax.random.PRNGKey(0), x))` only computes shapes and is not flagged.

    ## Fix safety
    For `name = jax.random.PRNGKey(<literal>)` written directly in the body of a
    `for`/`while` loop, the fix hoists the key creation above the loop and
    splits a fresh key per iteration (`base_key, key = jax.random.split(base_key)`).
    It is unsafe: the numbers drawn in each iteration change (that is the
    point, but it changes results). Keys inside traced functions and clock
    seeds are reported without a fix: the caller must pass a key in.
    """

    confirm = "key-reuse"
    summary = "a PRNG key created from a constant in a loop or traced function repeats the same numbers"
    fix = FixOffer("Create the key once before the loop and split it per iteration", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        text = ctx.source.text
        ka = rule_analysis(ctx) if "PRNGKey" in text or "key(" in text else None
        if ka is None:
            return
        aliases = [local for local, q in m.imports.aliases.items() if q in KEY_FROM_SEED]
        terms = frozenset(["PRNGKey", "key"] + aliases)
        for fn in functions_mentioning(m, tuple(["PRNGKey", "key("] + aliases)):
            loops = None
            flow = None
            for call in fn.of_type(ast.Call):
                f = call.func
                term = f.attr if f.__class__ is ast.Attribute else (f.id if f.__class__ is ast.Name else None)
                if term not in terms:
                    continue
                q = ka.random_qualname(call, fn)
                if q not in KEY_FROM_SEED:
                    continue
                seed = _seed(call)
                if seed is None:
                    continue
                literal = _is_literal(seed)
                clock = None if literal else _clock(m, seed, fn)
                if loops is None:
                    loops = _loop_ranges(fn)
                loop = _enclosing_loop(m, fn, call, loops)
                if not literal and clock is None:
                    # ``PRNGKey(seed + 1)`` in a loop that rebinds nothing the seed reads: the same
                    # key on every iteration, as a literal would be
                    if loop is None or not _counting_loop(loop) or not _loop_invariant(seed, loop):
                        continue
                    literal = True
                if loop is not None and is_config_sweep(m, loop, fn):
                    loop = None      # the same inputs for each literal configuration, on purpose
                traced = _runs_traced(fn)
                looped = None
                if literal and loop is None and not traced and not m.missing_argument_branch(call, fn):
                    looped = _called_in_loop(m, fn)
                if literal and (loop is not None or traced or looped is not None):
                    # a constant key matters only where numbers are drawn from it: a dummy key
                    # for `ones_init`/`initialize_carry`, or one read for its `.dtype`, is fine
                    if flow is None:
                        flow = _Flow(ka, fn)
                    if loop is not None and not flow.drawn(call, calls_too=True):
                        loop = None
                    if traced and loop is None and not flow.drawn(call, calls_too=False):
                        traced = False
                    if looped is not None and not flow.drawn(call, calls_too=False):
                        looped = None
                spelled = "jax.random." + q.rsplit(".", 1)[1]
                if clock is not None:
                    if traced:
                        continue   # the clock read under a trace is JAX104's finding: one finding per mistake
                    msg = (f"`{spelled}` seeded from `{clock}`: runs cannot be reproduced, and the same call "
                           f"under `jit` would freeze the seed; seed from a config value and split the key")
                    strict = deliberate_basis(m, fn, node=call) or (CLOCK_BASIS if loop is None else None)
                    yield ctx.finding(self, call, msg, confidence=CERTAIN, strict=strict)
                elif loop is not None:
                    what = loop_label(loop)
                    msg = (f"`{spelled}({short(seed)})` is re-created on every iteration of this {what}: "
                           f"every iteration gets the same key and draws the same numbers; create it once "
                           f"before the loop and split it")
                    fix = _hoist_fix(ctx, fn, call, loop, loops)
                    strict = deliberate_basis(m, fn, node=call) or (
                        RUN_BASIS_LOOP if _run_per_item(loop, call) else None)
                    yield ctx.finding(self, call, msg, confidence=CERTAIN, fix=fix, strict=strict)
                elif traced:
                    msg = (f"`{spelled}({short(seed)})` inside {fn.trace_description()} is the same key on "
                           f"every call, so every call draws the same numbers; pass a fresh key in")
                    yield ctx.finding(self, call, msg, confidence=fn.confidence, strict=deliberate_basis(m, fn, node=call))
                elif looped is not None:
                    site = looped
                    what = loop_label(site.loop)
                    msg = (f"`{spelled}({short(seed)})` is re-created on every call of {fn.display()}, which this "
                           f"module calls on every iteration of a {what} (line {site.call.lineno}): every call "
                           f"draws the same numbers; keep a key (on the object, or passed in) and split it per call")
                    strict = deliberate_basis(m, fn, node=call) or deliberate_basis(m, site.scope) or (
                        RUN_BASIS if fn.of_type(ast.For, ast.AsyncFor, ast.While) else None)
                    yield ctx.finding(self, call, msg, confidence=CERTAIN, strict=strict)


def _counting_loop(loop: ast.AST) -> bool:
    """A loop over steps -- ``range(...)`` (or ``reversed`` of one), or a ``while`` --, not over a
    collection of configurations (``for wavelet in wavelet_types``: the same seed for each, on
    purpose)."""
    if isinstance(loop, ast.While):
        return True
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "reversed" and it.args:
        it = it.args[0]
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"


def _loop_invariant(e: ast.expr, loop: ast.AST) -> bool:
    """``e`` is arithmetic on names that ``loop`` never binds -- neither its target nor anything its
    body assigns: the same value on every iteration.  (An attribute or item may change through a
    call in the loop: not followed, so not invariant.)"""
    bound = set()
    for n in ast.walk(loop):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
    for n in ast.walk(e):
        if isinstance(n, ast.Name):
            if n.id in bound:
                return False
        elif not isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Load, ast.operator, ast.unaryop)):
            return False   # a call, a comprehension, ...: may differ per iteration
    return True


def _called_in_loop(m: SemanticModel, fn: Function):
    """A call of ``fn`` (``f(...)``, ``agent.select()``) in a loop of this module's untraced code
    that is not a sweep over literal configurations: each iteration runs ``fn`` again."""
    if fn.is_module or fn.is_lambda:
        return None
    for site in call_index(m).callers_of(fn):
        if site.loop is None or site.scope is fn or site.scope.is_traced:
            continue
        if isinstance(site.loop, (ast.For, ast.AsyncFor, ast.While)) and not is_config_sweep(m, site.loop, site.scope):
            return site
    return None


# why a fixed key per call of a function that runs loops of its own is strict
RUN_BASIS = ("the function runs loops of its own: each call is a whole run (an evaluation, a trial, a "
             "solver), and one fixed key per run gives every run the same inputs, usually on purpose")


# why a fixed key made per item of a loop over a collection, each item a whole run, is strict
RUN_BASIS_LOOP = ("each iteration of this loop over a collection (configurations, strategies, datasets) runs "
                  "a loop of its own after making the key: one fixed key per run gives every run the same "
                  "inputs, usually on purpose")


def _run_per_item(loop: ast.AST, call: ast.Call) -> bool:
    """``for cfg in configs: rng = PRNGKey(0); ...; for gen in range(n): ...``: the loop walks a
    collection (not a ``range``/``while`` of steps) and, after the key is made, its body runs a
    loop of its own -- a whole run per item, each re-seeded the same way."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or _counting_loop(loop):
        return False
    for stmt in loop.body:
        for n in ast.walk(stmt):
            if n.__class__ in (ast.For, ast.AsyncFor, ast.While) and \
                    (n.lineno, n.col_offset) > (call.lineno, call.col_offset):
                return True
    return False


# why a clock seed outside traced code, made once, belongs to the strict profile
CLOCK_BASIS = ("a key seeded once from the clock in code that runs eagerly is a choice of runs that differ, "
               "not a repeated draw (read samples found such seeds deliberate every time)")


def _init_like(term: str) -> bool:
    return term.startswith("init") or term.endswith(("_init", "initializer")) or term == "initialize_carry"


# the flags by which Flax modules conventionally switch dropout and other stochastic layers off
# (``nn.Dropout(deterministic=not train)``), with the value that means evaluation
_EVAL_FLAGS = {"train": False, "training": False, "is_training": False, "deterministic": True}


def _eval_mode(call: ast.Call) -> bool:
    """``model.apply(params, x, training=False, rngs={"dropout": KEY})``: evaluation mode, where
    a module's dropout draws nothing from the ``rngs`` it is given."""
    return any(k.arg in _EVAL_FLAGS and isinstance(k.value, ast.Constant) and k.value.value is _EVAL_FLAGS[k.arg]
               for k in call.keywords)


class _Flow:
    """Where values go in one scope, flow-insensitively: keys of consuming ``jax.random``
    calls, and arguments of other calls (initializers and look-only calls excluded).  A key
    folded with changing data (``fold_in(PRNGKey(0), i)``) or split and indexed with it
    (``split(PRNGKey(0), n)[i]``) gives a new key per datum: that is not drawing from it."""

    def __init__(self, ka, fn: Function):
        self.fn = fn
        self.random_exprs: Set[int] = set()
        self.random_names: Set[str] = set()
        self.call_exprs: Set[int] = set()
        self.call_names: Set[str] = set()
        self.ka = ka
        m = ka.model
        per_datum = {id(s.value) for s in fn.of_type(ast.Subscript)
                     if isinstance(s.value, ast.Call) and not isinstance(s.slice, ast.Constant)}
        for call in fn.of_type(ast.Call):
            q = ka.random_qualname(call, fn)
            if q is not None:
                if q in RANDOM_NON_CONSUMING:
                    continue
                if q == "jax.random.fold_in" and not constant_data(call):
                    continue
                if q == "jax.random.split" and id(call) in per_datum:
                    continue
                a = ka.key_argument(call)
                if isinstance(a, ast.Name):
                    self.random_names.add(a.id)
                elif a is not None:
                    self.random_exprs.add(id(a))
                continue
            f = call.func
            term = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
            if _init_like(term) or stores_state(term) or term in LOWERING_METHODS:
                continue   # (``jit(f).lower(PRNGKey(42))`` compiles for the key's shape only)
            fq = m.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
            if fq is not None and (fq in NON_CONSUMING or fq.startswith(NON_CONSUMING_PREFIXES)):
                continue
            evaluating = term == "apply" and _eval_mode(call)
            for a in list(call.args) + [k.value for k in call.keywords if not (evaluating and k.arg == "rngs")]:
                self._add(a)

    def _add(self, a: ast.AST) -> None:
        if isinstance(a, ast.Starred):
            a = a.value
        if isinstance(a, ast.Name):
            self.call_names.add(a.id)
        elif isinstance(a, (ast.Tuple, ast.List)):
            for e in a.elts:
                self._add(e)
        elif isinstance(a, ast.Dict):
            for e in a.values:
                self._add(e)
        else:
            self.call_exprs.add(id(a))

    def drawn(self, call: ast.Call, calls_too: bool) -> bool:
        exprs = self.random_exprs | self.call_exprs if calls_too else self.random_exprs
        names = self.random_names | self.call_names if calls_too else self.random_names
        if id(call) in exprs:
            return True
        if not names:
            return False
        for node in self.fn.of_type(ast.Assign):
            if node.value is call:
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id in names and not self._refolded(node, t.id):
                        return True
        return False

    def _refolded(self, stmt: ast.Assign, name: str) -> bool:
        """``key = PRNGKey(0)`` followed at once by ``key = fold_in(key, step)`` or
        ``key = split(key, n)[i]``: every later read sees a key of its own datum."""
        nxt = _next_statement(self.fn, stmt)
        if not (isinstance(nxt, ast.Assign) and len(nxt.targets) == 1 and isinstance(nxt.targets[0], ast.Name)
                and nxt.targets[0].id == name):
            return False
        v = nxt.value
        want = "jax.random.fold_in"
        if isinstance(v, ast.Subscript) and not isinstance(v.slice, ast.Constant):
            v, want = v.value, "jax.random.split"
        if not isinstance(v, ast.Call):
            return False
        a = self.ka.key_argument(v)
        return isinstance(a, ast.Name) and a.id == name and self.ka.random_qualname(v, self.fn) == want \
            and (want == "jax.random.split" or not constant_data(v))


def _next_statement(fn: Function, stmt: ast.stmt) -> Optional[ast.stmt]:
    for node in ast.walk(fn.node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for i, s in enumerate(block):
                    if s is stmt:
                        return block[i + 1] if i + 1 < len(block) else None
    return None


def _seed(call: ast.Call) -> Optional[ast.expr]:
    if call.args:
        a = call.args[0]
        return None if isinstance(a, ast.Starred) else a
    for kw in call.keywords:
        if kw.arg == "seed":
            return kw.value
    return None


def _is_literal(e: ast.expr) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool)


def _clock(m, seed: ast.expr, fn: Function) -> Optional[str]:
    """The clock the seed reads (``time.time``), or None -- also when the seed has a
    deterministic alternative (``666 if cfg.deterministic else int(time.time())``,
    ``cfg.seed or int(time.time())``): reproducibility is then the caller's choice."""
    if isinstance(seed, ast.IfExp):
        sides = [_clock(m, seed.body, fn), _clock(m, seed.orelse, fn)]
        return None if None in sides else sides[0]
    if isinstance(seed, ast.BoolOp) and isinstance(seed.op, ast.Or):
        sides = [_clock(m, v, fn) for v in seed.values]
        return None if None in sides else sides[0]
    for n in ast.walk(seed):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
            q = m.qualname(n.func, fn)
            if q in TIME_SOURCES:
                return q
    return None


def _runs_traced(fn: Function, depth: int = 0) -> bool:
    """Traced by a transform that runs the function repeatedly (not only inspected by
    ``eval_shape``/``make_jaxpr``)."""
    if depth > 6:
        return False
    for c in fn.contexts:
        if c.transform in _INSPECTING:
            continue
        if c.transform == "call" and c.caller is not None:
            if _runs_traced(c.caller, depth + 1):
                return True
            continue
        return True
    return False


def _span(node: ast.AST) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def _loop_ranges(fn: Function) -> List[Tuple[Tuple[int, int], Tuple[int, int], ast.AST]]:
    """Source ranges of the parts of ``fn``'s loops that run once per iteration."""
    out = []
    for loop in fn.of_type(ast.For, ast.AsyncFor, ast.While):
        parts: List[ast.AST] = list(loop.body)
        if isinstance(loop, ast.While):
            parts.append(loop.test)
        if parts:
            start = min(_span(p)[0] for p in parts)
            end = max(_span(p)[1] for p in parts)
            out.append((start, end, loop))
    for comp in fn.of_type(*COMPREHENSIONS):
        parts = [comp.key, comp.value] if isinstance(comp, ast.DictComp) else [comp.elt]
        for g in comp.generators:
            parts.extend(g.ifs)
        for g in comp.generators[1:]:
            parts.append(g.iter)
        start = min(_span(p)[0] for p in parts)
        end = max(_span(p)[1] for p in parts)
        out.append((start, end, comp))
    return out


def _enclosing_loop(m: SemanticModel, fn: Function, call: ast.Call, loops) -> Optional[ast.AST]:
    pos_start, pos_end = _span(call)
    around = sorted(((start, loop) for start, end, loop in loops if start <= pos_start and pos_end <= end),
                    key=lambda t: t[0], reverse=True)
    for _, loop in around:
        if not _one_iteration(m, fn, call, loop):
            return loop     # (under ``if i == 0:`` of an inner loop: the outer one still repeats it)
    return None


def _one_iteration(m: SemanticModel, fn: Function, node: ast.AST, loop: ast.AST) -> bool:
    """``node`` sits under ``if i == <constant>:`` in the body of ``for i in range(...)`` (or ``for
    i, x in enumerate(...)``: the loop's counter, whose values do not repeat -- not any loop target,
    ``for tok in tokens: if tok == 0``), with ``i`` not rebound in the body: it runs on one
    iteration only."""
    counter = m.loop_counter(loop, fn)
    if counter is None or any(isinstance(n, ast.Name) and n.id == counter and isinstance(n.ctx, ast.Store)
                              for st in loop.body for n in ast.walk(st)):
        return False
    span = _span(node)
    for st in ast.walk(loop):
        if isinstance(st, ast.If) and st.body and _span(st.body[0])[0] <= span[0] and span[1] <= _span(st.body[-1])[1]:
            test = st.test
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq) and \
                    {type(test.left), type(test.comparators[0])} == {ast.Name, ast.Constant} and \
                    counter in (getattr(test.left, "id", None), getattr(test.comparators[0], "id", None)):
                return True
    return False


def _hoist_fix(ctx: Context, fn: Function, call: ast.Call, loop: ast.AST, loops) -> Optional[Fix]:
    """``name = PRNGKey(<literal>)`` directly in a loop body: create the key once above the
    outermost enclosing loop and split it per iteration where it was created."""
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        return None
    stmt = next((s for s in loop.body if isinstance(s, ast.Assign) and s.value is call), None)
    if stmt is None or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    name = stmt.targets[0].id
    if name in fn.globals_declared:
        return None
    # hoist above the outermost statement loop that encloses the creation
    outer = loop
    for start, end, other in loops:
        if isinstance(other, (ast.For, ast.AsyncFor, ast.While)) and start <= _span(stmt)[0] \
                and _span(stmt)[1] <= end and (other.lineno, other.col_offset) < (outer.lineno, outer.col_offset):
            outer = other
    src = ctx.source
    for node in (stmt, outer):
        prefix = src.line_text(node.lineno)[:src.char_col(node.lineno, node.col_offset)]
        if prefix.strip():
            return None
    # every other mention of the name must read the key after it is created, in the same loop
    # body (anything else would now see the hoisted or the split key)
    after = _span(stmt)[1]
    body_end = _span(loop.body[-1])[1]
    target = stmt.targets[0]
    for n in ast.walk(outer):
        if isinstance(n, ast.Name) and n.id == name and n is not target:
            if isinstance(n.ctx, ast.Store) or not (after <= (n.lineno, n.col_offset) and
                                                    (n.end_lineno, n.end_col_offset) <= body_end):
                return None
    local, import_edits = split_spelling(ctx, fn)
    base = base_key_name(ctx, fn, name)
    nl = src.newline()
    indent = src.line_text(outer.lineno)[:src.char_col(outer.lineno, outer.col_offset)]
    edits = list(import_edits)
    edits.append(Edit.insert(src.offset(outer.lineno, 0), f"{indent}{base} = {src.segment(call)}{nl}"))
    start, end = src.node_span(stmt)
    edits.append(Edit(start, end, f"{base}, {name} = {local}({base})"))
    return ConstantPrngKey.fix.make(edits)
