"""JAX504, the rule: which loops of a traced function are unrolled into the compiled program,
and the message that says how many copies of the body that makes.  Trip counting lives in
:mod:`.trips`, the ``fori_loop``/``scan`` rewrite in :mod:`.rewrite`."""
from __future__ import annotations

import ast
from typing import Iterator

from ....analysis import Function, SemanticModel, proven
from ....analysis import knowledge as K
from ....fixes.edits import UNSAFE
from ....findings import Settings
from ...base import Context, Finding, FixOffer, Rule, register, traced_functions
from .rewrite import LoopFix, NoFix, carry_names
from .trips import for_trip, while_trip

# why a loop whose trip count is not known here belongs to the strict profile
UNKNOWN_COUNT_BASIS = ("how many times the loop runs is not known here (a static argument or configuration "
                       "value without a default): a few unrolled iterations cost little")
# below this many known iterations an unrolled loop is reported in the strict profile only
# (with the default `unrolled-loop-threshold`; a threshold the user sets is used as given)
SMALL_UNROLL = 32
_DEFAULT_THRESHOLD = Settings().unrolled_loop_threshold
# why a loop of a few dozen known iterations belongs to the strict profile
SMALL_UNROLL_BASIS = ("a fixed loop of fewer than 32 iterations: compiled once, and the unrolled program "
                      "stays small (it often runs faster than a loop); blind reads of real code found such "
                      "unrolls deliberate or harmless, not something a maintainer changes")
# why a loop over the rows (or the length) of a traced array belongs to the strict profile: the
# array's length is static under a trace, but not known where the loop is written
UNKNOWN_LENGTH_BASIS = ("how many rows the traced array has is not known here (its length is fixed when "
                        "it is traced, and is often a handful: the images of a lens, the sequences of a "
                        "prompt, the feature maps of a block)")
# class-construction prefixes of layer libraries: a loop that builds or calls layers
_LAYER_PREFIXES = ("flax.linen.", "flax.nnx.", "equinox.nn.", "haiku.")


@register
class UnrolledPythonLoop(Rule):
    """
    ## What it does
    Flags a Python `for` or `while` loop inside a traced function (`jax.jit`,
    `grad`, a Flax module, ...) whose body does array work (a call of another
    package's constructors or of an unknown object's methods, handed traced
    values, is not known to be array work) and whose trip count
    is large or not fixed when the code is written: `range(N)` with a literal
    `N` of at least 16 (configurable), `range(n)` over a static argument or a
    configuration value (a `static_argnames` parameter, a module field,
    `config.num_steps`), or iteration over the rows of a traced array
    (`for row in x`). Small loops — over a model's layers, over a literal list
    of a few items, over `range(x.ndim)` — are not flagged, nor is a loop
    over a list of separate variables (`for arg in [itypes, volume, ...]`):
    each has its own shape and type, nothing a `scan` or `vmap` could stack;
    nor a loop over a literal display of strings (`for name in ("C1", "C2",
    ...)` with `getattr(t, name)`): JAX traces no strings, so it walks
    structure no `scan` can index.

    ## Why is this bad?
    In PyTorch a Python loop runs its body N times at run time. Under
    `jax.jit` the loop runs once, at trace time, and records every iteration:
    a 1000-step loop becomes 1000 copies of its body in the compiled program.
    Tracing and compilation time grow with N (minutes for long loops), and the
    program is compiled again for every new value of a static trip count.
    `jax.lax.fori_loop` and `jax.lax.scan` trace the body once and loop on the
    device.

    ## Example
    ```python
    @partial(jax.jit, static_argnames="num_steps")
    def integrate(state, dt, num_steps=1000):
        for _ in range(num_steps):
            state = state + dt * lorenz(state)
        return state
    ```

    ## Use instead
    ```python
    @partial(jax.jit, static_argnames="num_steps")
    def integrate(state, dt, num_steps=1000):
        return jax.lax.fori_loop(0, num_steps, lambda _, s: s + dt * lorenz(s), state)
    ```
    Use `jax.lax.fori_loop` when only a carry flows from one step to the
    next, and `jax.lax.scan` when each step also produces an output that you
    collect (`ys.append(y)` followed by `jnp.stack(ys)`).

    ## Fix safety
    The fix rewrites two simple shapes: a loop over `range(...)` whose body
    only reassigns carried variables (`carry = body(carry, i)`) becomes
    `jax.lax.fori_loop`, and a loop whose body ends by appending a per-step
    output to a list that is then `jnp.stack`ed becomes `jax.lax.scan`. It is
    unsafe: the carry must keep the same shape and dtype on every iteration (a
    Python `0` that becomes a float array does not), the loop index becomes a
    traced integer (it can no longer pick shapes or Python branches), a
    `fori_loop` whose bounds are traced cannot be reverse-differentiated, and
    temporaries of the body no longer exist after the loop. Loops with other
    statements (`if`, nested loops, an `append` that is not last) are reported
    without a fix.

    ## Profiles
    The default profile reports a loop whose trip count is known where it is
    written (a literal, a module constant, or the default of the static
    argument or field that bounds it). A loop bounded by a static argument
    with no default or a configuration value, and a loop over the rows or the
    length of a traced array (`for x_t in xs`, `range(x.shape[0])`), go to
    the strict profile (`--strict`): how many copies it makes is not known
    here. An array's length is fixed when it is traced, but not where the
    loop is written, and on real code such loops are most often a handful of
    iterations (the epochs of a small configuration, a block count chosen by
    the caller, the images of a lens or the feature maps of a block: blind
    reads of nine fresh samples of repositories found none of them a
    maintainer would change). So does a loop of fewer than 32 known
    iterations (19 lattice velocities, 30 integration steps of a benchmark):
    it compiles once into a program that stays small -- often faster than a
    rolled loop -- and blind reads found no such loop a maintainer would
    change; 32 or more copies (a 49-step leapfrog integrator, each step a
    gradient) are reported by default. (The bound sits between the counts
    real code showed harmless and the smallest one a blind set showed as a
    bug: a measured choice, not a rule of JAX. An `unrolled-loop-threshold`
    set in the configuration is used as given: loops at or above it are
    reported by default.)
    """

    trace_dependent = True

    confirm = "unrolled-loop"
    summary = "a long Python loop inside a traced function is unrolled into the compiled program"
    fix = FixOffer("Rewrite the loop with `jax.lax.fori_loop` / `jax.lax.scan`", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        threshold = ctx.settings.unrolled_loop_threshold
        for fn in traced_functions(ctx):
            loops = fn.of_type(ast.For, ast.While)
            if not loops or not m.stages_constants(fn):
                continue    # (under vmap or grad alone the loop runs op by op: nothing is compiled)
            for loop in loops:
                if isinstance(loop, ast.For):
                    trip = for_trip(m, fn, loop)
                    kw = "for"
                else:
                    trip = while_trip(m, fn, loop)
                    kw = "while"
                if trip is None:
                    continue
                if trip.count is not None and trip.count < threshold:
                    continue
                if not self._array_work(ctx, fn, loop) or self._layer_loop(ctx, fn, loop):
                    continue
                appends = self._appends(loop)
                if trip.kind == "array" or appends:
                    if appends and not self._carried(loop, fn):
                        hint = "`jax.vmap` (independent steps) or `jax.lax.scan`"
                    else:
                        hint = "`jax.lax.scan` (carry plus per-step outputs)"
                else:
                    hint = "`jax.lax.fori_loop` (carry only) or `jax.lax.scan` (carry plus per-step outputs)"
                if trip.kind == "literal" and kw == "while":
                    copies = f"one copy of its body per iteration (counting to {trip.count})"
                elif trip.kind == "literal":
                    copies = f"{trip.count} copies of its body"
                elif trip.kind == "array":
                    copies = "one copy of its body per row"
                else:
                    copies = "one copy of its body per iteration"
                head = f"Python `for` loop over {trip.what}" if kw == "for" else f"Python `while {trip.what}"
                msg = f"{head} inside {fn.trace_description()} is unrolled into {copies}; use {hint}"
                fix = None
                if kw == "for":
                    try:
                        fix = LoopFix(ctx, fn, loop, self.fix).build()
                    except NoFix:
                        fix = None
                strict = None
                if trip.count is None and (trip.kind == "array" or trip.array_length):
                    strict = UNKNOWN_LENGTH_BASIS
                elif trip.count is None and trip.kind == "static":
                    strict = UNKNOWN_COUNT_BASIS
                elif trip.count is not None and trip.count < SMALL_UNROLL and threshold == _DEFAULT_THRESHOLD:
                    # (a threshold the user set is the count they want reported: no second bound)
                    strict = SMALL_UNROLL_BASIS
                yield ctx.finding(self, loop, msg, confidence=fn.confidence, fix=fix, end_node=loop.iter
                                  if isinstance(loop, ast.For) else loop.test, strict=strict)

    # ----------------------------------------------------------- the body
    @staticmethod
    def _array_work(ctx: Context, fn: Function, loop: ast.AST) -> bool:
        m = ctx.model
        for s in loop.body:
            for n in ast.walk(s):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and _named_slot(n.targets[0]):
                    continue   # ``stats[f"layer{i}/load"] = x[i]``: filing values under names, no computation
                if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
                    v = n.value
                    if v is not None and proven(m.kind(v, fn)) and not _opaque_call(m, v, fn):
                        return True
                    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                            and v.func.attr in ("append", "extend", "insert") \
                            and any(proven(m.kind(a, fn)) and not _opaque_call(m, a, fn) for a in v.args):
                        return True
        return False

    @staticmethod
    def _layer_loop(ctx: Context, fn: Function, loop: ast.AST) -> bool:
        """The body builds or calls layers (sub-modules): unrolling is the intent."""
        m = ctx.model
        selfname = None
        owner = fn.enclosing_method()
        if owner is not None:
            selfname = owner.self_name
        for s in loop.body:
            for n in ast.walk(s):
                if not isinstance(n, ast.Call):
                    continue
                f = n.func
                if isinstance(f, ast.Call):
                    q = m.qualname(f.func, fn)
                    if q is not None and q.startswith(_LAYER_PREFIXES) and q.rsplit(".", 1)[-1][:1].isupper():
                        return True
                    if q == "getattr":
                        return True
                    if isinstance(f.func, ast.Name) and f.func.id in m.classes \
                            and m.classes[f.func.id].module_kind:
                        return True
                elif isinstance(f, ast.Subscript):
                    base = f.value
                    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                            and base.value.id == selfname:
                        return True
                elif isinstance(f, ast.Name) and f.id in m.classes and m.classes[f.id].module_kind:
                    return True
                else:
                    q = m.qualname(f, fn)
                    if q is not None and q.startswith(_LAYER_PREFIXES) and q.rsplit(".", 1)[-1][:1].isupper():
                        return True
        return False

    @staticmethod
    def _appends(loop: ast.AST) -> bool:
        for s in loop.body:
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append":
                    return True
        return False

    @staticmethod
    def _carried(loop: ast.AST, fn: Function) -> bool:
        carried, _ = carry_names(loop.body)
        return bool(carried)


def _named_slot(t: ast.AST) -> bool:
    """``d[f"..."]`` / ``d["..." + name]``: an entry of a dict keyed by a string built per
    iteration (a metrics dict, one entry per layer or expert)."""
    if not isinstance(t, ast.Subscript):
        return False
    k = t.slice
    return isinstance(k, ast.JoinedStr) or (isinstance(k, ast.BinOp) and any(
        isinstance(x, (ast.Constant, ast.JoinedStr)) and isinstance(getattr(x, "value", ""), str)
        for x in (k.left, k.right)))


def _opaque_call(m, v: ast.AST, fn: Function) -> bool:
    """``jqtc.Rx(gammas[i])``, ``cirq.append(...)``: a call of a package outside JAX's array
    libraries or of a method on an object the module cannot see into, handed a traced value --
    it may build a Python object (a circuit gate) as well as compute: not evidence of array work."""
    if v.__class__ is not ast.Call or v.func.__class__ not in (ast.Name, ast.Attribute):
        return False
    if m.resolve_callable(v.func, fn) is not None:
        return False
    q = m.qualname(v.func, fn)
    if q is None:
        return v.func.__class__ is ast.Attribute and not m.is_array(v.func.value, fn)
    return "." in q and not q.startswith(K.KNOWN_LIBRARY_PREFIXES) and m.external_facts(q) is None
