from __future__ import annotations

import ast
from typing import Iterator, Optional, Tuple

from ...analysis import Function, SemanticModel
from .facts import PurityFacts, purity_for
from ..base import Context, Finding, TracedCodeRule, register, traced_functions

# constructors of host random generators: seeded ones are deterministic, and the
# draws made from them are what this rule reports
GENERATOR_CONSTRUCTORS = frozenset({
    "random.Random", "random.SystemRandom",
    "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator",
})
# numpy.random names that build seeds / bit generators rather than draw numbers
NUMPY_RANDOM_PLUMBING = frozenset({
    "numpy.random.SeedSequence", "numpy.random.BitGenerator", "numpy.random.PCG64", "numpy.random.PCG64DXSM",
    "numpy.random.MT19937", "numpy.random.Philox", "numpy.random.SFC64", "numpy.random.get_state",
})
GENERATOR_ANNOTATIONS = frozenset({"numpy.random.Generator", "numpy.random.RandomState", "random.Random"})
# generator methods that do not draw
GENERATOR_NON_DRAWS = frozenset({"spawn", "bit_generator", "getstate", "get_state", "__getstate__"})

RANDOM_SUGGESTION = "use `jax.random` with an explicit key passed in as an argument"
VALUE_SUGGESTION = "pass the value in as an argument"
BAKED = "is baked into the compiled function as a constant"

# clocks, entropy and I/O: qualified name -> (what, suggestion)
_CLOCK = "the time it reads " + BAKED
IMPURE_CALLS = {
    "time.time": _CLOCK, "time.time_ns": _CLOCK, "time.perf_counter": _CLOCK,
    "time.perf_counter_ns": _CLOCK, "time.monotonic": _CLOCK, "time.monotonic_ns": _CLOCK,
    "time.process_time": _CLOCK, "time.process_time_ns": _CLOCK, "time.thread_time": _CLOCK,
    "time.thread_time_ns": _CLOCK,
    "datetime.datetime.now": _CLOCK, "datetime.datetime.utcnow": _CLOCK,
    "datetime.datetime.today": _CLOCK, "datetime.date.today": _CLOCK,
    "uuid.uuid1": "the UUID " + BAKED, "uuid.uuid4": "the UUID " + BAKED,
    "os.urandom": "the random bytes " + BAKED, "os.getrandom": "the random bytes " + BAKED,
    "input": "the input " + BAKED, "open": "the file is read or written only then",
    "io.open": "the file is read or written only then",
}
# why a file opened for reading at trace time is strict
READ_BASIS = ("the file is opened for reading: what it holds (a checkpoint, a table of constants) is loaded "
              "once and kept as a constant, as a traced program keeps any constant; wrong only if the "
              "file changes between calls")
# clock functions that read the current time only when called without arguments
CLOCK_WITHOUT_ARGS = frozenset({"time.localtime", "time.gmtime", "time.ctime", "time.asctime"})


@register
class ImpureCallUnderTrace(TracedCodeRule):
    """
    ## What it does
    Flags calls whose result differs from call to call — Python `random.*`,
    `numpy.random.*`, draws from a `np.random.default_rng()` /
    `RandomState` / `random.Random` generator, `time.time()`,
    `perf_counter()`, `datetime.now()`, `uuid.uuid4()`, `os.urandom`,
    `secrets.*` — and I/O (`input()`, `open()`) inside a staged traced
    context: a `jax.jit` function, a `vmap`ped function, a `lax` loop body,
    a Flax module method, or a helper called from one. Eager data-loading
    code that uses NumPy's RNG is not flagged, nor are draws after a fixed
    reseed in the same trace (`np.random.seed(seed)` first: eager runs draw
    the same numbers on every call too -- a random pattern fixed on purpose,
    such as BigBird's attention blocks), nor a fallback for a missing
    argument in a module method (`if rng is None: rng =
    PRNGKey(int(time.time()))`, which the jitted `apply` may never take).
    A file opened only for reading (`open(path)`, `open(path, "rb")`: a
    checkpoint or a table of constants loaded into the program) is in the
    strict profile (`--strict`); a file written or appended to is not.

    ## Why is this bad?
    In PyTorch, `np.random.randn(...)` or `random.random()` in `forward`
    draws fresh numbers on every call. Under `jax.jit` the Python body runs
    once, while tracing; the number drawn then is baked into the compiled
    program as a constant, so every later call reuses it ("random"
    augmentation that always flips, dropout noise that never changes). Under
    `vmap` a single draw is shared by the whole batch. Clocks, UUIDs and
    file reads are frozen the same way.

    ## Example
    ```python
    @jax.jit
    def augment(image):
        if random.random() < 0.5:
            image = jnp.fliplr(image)
        return image + np.random.normal(size=image.shape)
    ```

    ## Use instead
    ```python
    @jax.jit
    def augment(key, image):
        k_flip, k_noise = jax.random.split(key)
        flip = jax.random.bernoulli(k_flip)
        image = jnp.where(flip, jnp.fliplr(image), image)
        return image + jax.random.normal(k_noise, image.shape)
    ```
    For clocks and other host values, compute them outside and pass them in
    as arguments (or use `jax.debug.callback` for a host side effect).

    ## Fix safety
    No automatic fix: switching to `jax.random` needs a key threaded through
    the function's arguments.
    """

    confirm = "impure-call"
    summary = "Python/NumPy randomness, clocks or I/O inside a traced function are evaluated once and baked in"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        facts: Optional[PurityFacts] = None
        generators = None
        for fn in traced_functions(ctx):
            calls = fn.of_type(ast.Call)
            if not calls:
                continue
            if facts is None:
                facts = purity_for(m)
            if not facts.staged(fn):
                continue
            for call in calls:
                f = call.func
                if f.__class__ not in (ast.Name, ast.Attribute):
                    continue
                if m.default_fallback(call, fn):
                    continue   # a fallback for a missing argument: maybe never taken under a trace
                hit = self._classify(facts, fn, call)
                if hit is None and f.__class__ is ast.Attribute:
                    if generators is None:
                        generators = _GeneratorBindings(facts)
                    hit = generators.draw(fn, call)
                if hit is None:
                    continue
                spelled, what, suggestion = hit
                msg = (f"`{spelled}` inside {fn.trace_description()} runs once, at trace time: {what} — "
                       f"{suggestion}")
                strict = READ_BASIS if _reads_file(m, fn, call) else None
                yield ctx.finding(self, call, msg, confidence=fn.confidence, strict=strict)

    @staticmethod
    def _classify(facts: PurityFacts, fn: Function, call: ast.Call) -> Optional[Tuple[str, str, str]]:
        m = facts.model
        f = call.func
        q = m.qualname(f, fn)
        if q is None:
            return None
        base = f
        while base.__class__ is ast.Attribute:
            base = base.value
        scope = facts.bindings.resolve(base.id, fn)
        if scope is not None and not scope.is_module:
            bs = facts.bindings.scope(scope).get(base.id)
            if not bs or any(b.kind != "import" for b in bs):
                return None   # a local variable shadows the module/builtin
        spelled = _spell(call)
        if q.startswith("random.") or q.startswith("numpy.random.") or q.startswith("secrets."):
            if q in GENERATOR_CONSTRUCTORS:
                if call.args or call.keywords or q.endswith("Generator"):
                    return None   # a seeded generator is deterministic; its draws are checked separately
                return spelled, "the generator's OS-entropy seed " + BAKED, RANDOM_SUGGESTION
            if q in NUMPY_RANDOM_PLUMBING:
                return None
            if q.endswith(".seed"):
                if call.args and not _clock_seed(m, call.args[0], fn):
                    return None   # a fixed seed: the draws after it are the same on every call anyway
                return spelled, "the global RNG is reseeded only then, not on every call", RANDOM_SUGGESTION
            if _seeded_before(m, fn, call, 0):
                # ``np.random.seed(seed)`` first, in this trace: run eagerly it draws the same numbers
                # on every call too (a fixed random pattern, built at trace time on purpose)
                return None
            return spelled, "the number it draws " + BAKED, RANDOM_SUGGESTION
        what = IMPURE_CALLS.get(q)
        if what is not None:
            return spelled, what, VALUE_SUGGESTION
        if q in CLOCK_WITHOUT_ARGS and not call.args:
            return spelled, _CLOCK, VALUE_SUGGESTION
        return None


_SEEDS = ("random.seed", "numpy.random.seed")
_OPENERS = frozenset({"open", "io.open"})


def _reads_file(m, fn: Function, call: ast.Call) -> bool:
    """``open(path)`` / ``open(path, "rb")``: a literal mode (or none) that only reads.  A mode
    that writes or appends (``"w"``, ``"a"``, ``"x"``, ``"+"``), or one not written out, is not."""
    f = call.func
    if f.__class__ not in (ast.Name, ast.Attribute) or m.qualname(f, fn) not in _OPENERS:
        return False
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return not any(a.__class__ is ast.Starred for a in call.args) and \
            not any(k.arg is None for k in call.keywords)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
        not any(c in mode.value for c in "wax+")


def _clock_seed(m, e: ast.AST, fn: Function) -> bool:
    """A seed read from the clock (``time.time()``): not fixed."""
    for n in ast.walk(e):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)) \
                and (m.qualname(n.func, fn) or "").startswith(("time.", "datetime.")):
            return True
    return False


def _seeded_before(m, fn: Function, node: ast.AST, depth: int) -> bool:
    """The global Python/NumPy RNG is reseeded with a fixed seed before ``node`` in ``fn``, or
    before every call site through which traced code reaches ``fn``."""
    for c in fn.of_type(ast.Call):
        if c.lineno < node.lineno and c.args and isinstance(c.func, (ast.Name, ast.Attribute)) \
                and m.qualname(c.func, fn) in _SEEDS and not _clock_seed(m, c.args[0], fn):
            return True
    calls = [c for c in fn.contexts if c.transform == "call"]
    if depth > 4 or not calls or len(calls) != len(fn.contexts):
        return False
    return all(c.caller is not None and _seeded_before(m, c.caller, c.node, depth + 1) for c in calls)


def _spell(call: ast.Call) -> str:
    text = ast.unparse(call.func)
    if len(text) > 40:
        text = text[:37] + "..."
    return text + ("(...)" if call.args or call.keywords else "()")


class _GeneratorBindings:
    """Which receivers hold a host random generator: names bound to a generator
    constructor at module level or in an enclosing function, ``self.<attr>``
    bound to one in any method of the class, and parameters annotated as one."""

    def __init__(self, facts: PurityFacts):
        self.facts = facts
        self.model = facts.model
        self._self_attrs = {}

    def _is_constructor(self, v: ast.AST, scope: Function) -> bool:
        return isinstance(v, ast.Call) and self.model.qualname(v.func, scope) in GENERATOR_CONSTRUCTORS

    def draw(self, fn: Function, call: ast.Call) -> Optional[Tuple[str, str, str]]:
        f = call.func
        if f.attr in GENERATOR_NON_DRAWS or f.attr.startswith("_"):
            return None
        recv = f.value
        if recv.__class__ is ast.Name:
            if not self._generator_name(fn, recv.id):
                return None
        elif recv.__class__ is ast.Attribute and recv.value.__class__ is ast.Name:
            owner = self.facts.self_root(fn, recv.value)
            if owner is None or not self._generator_attr(owner, recv.attr):
                return None
        else:
            return None
        return _spell(call), "the number it draws " + BAKED, RANDOM_SUGGESTION

    def _generator_name(self, fn: Function, name: str) -> bool:
        b = self.facts.bindings
        scope = b.resolve(name, fn)
        if scope is None:
            return False
        if scope is fn:
            # a local generator: seeded ones are deterministic, unseeded ones are
            # reported at their construction; a parameter must say what it is
            a = fn.param_nodes.get(name)
            if a is None or a.annotation is None:
                return False
            ann = a.annotation
            return self.model.qualname(ann, fn.parent) in GENERATOR_ANNOTATIONS
        if self.facts.in_traced(scope) and not scope.is_module:
            return False
        return any(b_.value is not None and self._is_constructor(b_.value, scope) for b_ in b.scope(scope).get(name))

    def _generator_attr(self, owner: Function, attr: str) -> bool:
        info = owner.cls
        key = (id(info), attr)
        v = self._self_attrs.get(key)
        if v is not None:
            return v
        v = False
        for meth in info.methods.values():
            selfname = meth.self_name
            if selfname is None:
                continue
            for node in meth.of_type(ast.Assign):
                if not self._is_constructor(node.value, meth):
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) \
                            and t.value.id == selfname:
                        v = True
        self._self_attrs[key] = v
        return v
