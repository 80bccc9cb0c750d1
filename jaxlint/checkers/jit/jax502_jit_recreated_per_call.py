from __future__ import annotations

import ast
import re
from typing import Iterator, List, Optional, Set, Tuple

from ...analysis import JAX, NUMPY, Function, SemanticModel
from ...analysis import knowledge as K
from .calls import INIT_METHODS, CallIndex, CallSite, JitBinding, derived_names, in_traced_code, jit_index
from ...fixes.edits import SAFE, Edit, Fix
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short

# names of functions that run once per training/eval step
_STEP_NAME = re.compile(r"(?:^|_)(?:step|update)(?:$|_)")
# test functions and methods (pytest, unittest) run once
_TEST_NAME = re.compile(r"test_|test$")
# names of functions that run once per epoch (and loop over its batches themselves)
_EPOCH_NAME = re.compile(r"(?:^|_)epoch(?:$|_)")
# decorators that run a function once per distinct arguments
# how many calls up a "called once per iteration of a loop" is followed
_CALLER_DEPTH = 3
# why a per-call jit that its own function then calls in a loop belongs to the strict profile
AMORTIZED_BASIS = ("each one built is called in a loop of the function that builds it, and that function "
                   "is not run per epoch or step: one compile per run (a pipeline over a dataset, per "
                   "checkpoint), shared by every step of its loop")
# _config_sweep: the jitted function captures what a non-literal loop hands out
VARIES = "varies"
VARIES_BASIS = ("the function captures a value the loop hands out: each iteration may need its own program "
                "anyway (a loop over configurations or parameter names); only one over data recompiles needlessly")
# why a jit re-created only on every k-th iteration (an evaluation or checkpoint interval) is strict
PERIODIC_BASIS = ("it runs only on every k-th step of its loop (`if step % eval_every == 0:`): one "
                  "compile per evaluation or checkpoint interval, small beside the steps between them")
# why a jit built per iteration of an outer loop, over what that iteration binds, and called only in
# an inner loop of it is strict
OPAQUE_DECORATOR_BASIS = ("a function on the way is wrapped by a decorator jaxlint cannot see into "
                          "(`@jit_with_docstring(...)`): it may stage the loop under a trace, where the inner "
                          "`jit` is inlined and traced once")

def _opaque_decorator(m, fn: Function) -> bool:
    """``fn`` (or a function around it) carries a decorator whose effect is not known here
    (``SemanticModel.opaque_decorator``): whether its body runs eagerly is unknown."""
    s = fn
    while s is not None and not s.is_module:
        if m.opaque_decorator(s) is not None:
            return True
        s = s.parent
    return False


INNER_LOOP_BASIS = ("each one built is called only in an inner loop of the same iteration of an outer loop "
                    "not over epochs or steps (a phase or run "
                    "that trains many steps) and captures what the iteration binds: one compile per outer "
                    "iteration, shared by every inner step, and a different program anyway")
# a loop over epochs/steps/batches (not over configurations, seeds or experiments)
_PER_STEP_LOOP = re.compile(r"epoch|step|iter|batch|round|update|loader", re.IGNORECASE)


@register
class JitRecreatedPerCall(Rule):
    """
    ## What it does
    Flags `jax.jit(...)` or `jax.pmap(...)` applied inside a loop body, or
    inside a function that runs every step or epoch (one called in a loop,
    directly or through other functions of the module, passed as the
    per-step callback of a loop, or named like
    `train_step`/`update`/`train_epoch`), to a callable that is new each
    time: a lambda, a locally defined function, a fresh `functools.partial`,
    a bound method (`self.loss`, `model.apply`) or the result of another
    transform (`jax.jit(jax.grad(loss))`). Also flags `jax.jit(f)(x)` called
    inline inside a loop: a bound method (`env.step`) is a new object at
    every access and recompiles each time (a method every project class
    declares `@staticmethod` is not: it is one plain function at every
    access, on a class or an instance); the same plain function only
    loses jit's fast dispatch path (its compiled program is reused), which
    belongs to the strict profile (`--strict`). Not flagged: a jit per item
    of a loop over different functions (`jax.jit(env.step)` for each
    environment, `partial(t.loss_fn, ...)` for each trainer), one built
    under `if step is None:` (the first iteration only), and one called with
    an array whose shape follows the loop variable (`a = jnp.ones((n, dim,
    dim))` for each `dim`): JAX compiles a program per shape, so each
    iteration compiles anyway. A jit made per call of a function that wears,
    or is called through one that wears, a decorator jaxlint cannot see into
    (a project's own `@jit_with_docstring(...)`, which may stage it under a
    trace where the inner jit is inlined) is in the strict profile.

    ## Why is this bad?
    In PyTorch you can wrap a function at any time and pay nothing. `jax.jit`
    caches compiled code per *function object*: a lambda, a closure, a
    `partial` or a `jax.grad(...)` built anew on every iteration is a new
    object, so every call misses the cache and JAX traces and compiles the
    function again, typically far slower than running it. Even for a function
    that is already cached, re-wrapping it with `jax.jit` each iteration throws
    away the wrapper's fast dispatch path. `jax.pmap` caches the same way. A
    jit created once — at module level, in `__init__`, in a factory that
    returns it, or in a `functools.lru_cache`d builder — is fine and is not
    flagged, nor is a call made on one chosen iteration only
    (`if epoch == num_epochs - 1:`); one made on every k-th step only
    (`if step % eval_every == 0:`, an evaluation or checkpoint interval
    counted in steps, not epochs) compiles once per interval, and is in the
    strict profile; so is one built per iteration of an outer loop over what
    that iteration binds and called only in an inner loop of it, when the
    outer loop is not over epochs or steps (a phase that trains many steps):
    one compile per phase. Per epoch it stays default. Nor is a jit whose program differs per
    iteration anyway: its shardings, static arguments or axes come from the
    loop variable (`jax.jit(stack, out_shardings=shardings[name])`), or, in a
    loop over a literal set of configurations, the function captures a value
    the loop derives from them. When the loop is over something else and the
    function captures what it hands out (`for key in obj.params: jax.jit(lambda
    p: f(**{key: p}))`), each iteration may need its own program anyway: that
    finding is in the strict profile, unless the loop is over data (named like
    batches or steps, or the captured value is an array). So is a jit built on
    every call of a function that then calls it in a loop of its own (a pipeline
    run over a dataset) when that function is not itself run per epoch or step
    and the jitted function captures what each call is handed anew (a restored
    checkpoint), or is given it and it is no array (another model or parameter
    tree per run of a sweep): one compile per run, shared by every step of its
    loop, and a different program anyway.

    ## Example
    ```python
    def evaluate(params, batches):
        for images, labels in batches:
            predict = jax.jit(lambda x: model.apply(params, x))
            logits = predict(images)
    ```

    ## Use instead
    ```python
    def evaluate(params, batches):
        predict = jax.jit(lambda x: model.apply(params, x))
        for images, labels in batches:
            logits = predict(images)
    ```
    Better still, pass the changing values (`params`) as arguments of a
    function jitted once at module level.

    ## Fix safety
    The fix moves a `name = jax.jit(...)` statement out of the loop, to just
    before it. It is offered (as safe) only when the wrapped callable captures
    no variable the loop assigns, the statement sits directly in the loop
    body, and the name is not used in the loop before it, so every iteration
    would have built an equivalent function. Jits created per call of a step
    function are reported without a fix: where to keep the jitted function
    (module level, `__init__`) is a design choice.
    """

    confirm = ("compiles", "enclosing")
    summary = "`jax.jit` re-created in a loop or per step on a new callable: retraces and recompiles every time"
    fix = FixOffer("Create the jitted function once, before the loop", SAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        idx = jit_index(m, pmap=True)
        if idx is None:
            return
        for b in idx.bindings:
            scope = b.created_in
            if in_traced_code(scope):
                continue   # runs at trace time only
            if b.kind == "def" and b.cls is not None:
                continue   # a decorated method: created once per class
            loop = idx.enclosing_loop(b.site.node, scope)
            if loop is not None:
                f = self._in_loop(ctx, idx, b, scope, loop)
            else:
                f = self._per_call(ctx, idx, b, scope)
            if f is not None:
                yield f

    # ------------------------------------------------------------- loops
    def _in_loop(self, ctx: Context, idx: CallIndex, b: JitBinding, scope: Function,
                 loop: ast.AST) -> Optional[Finding]:
        jit = _jit_spelling(ctx, b)
        what = self._fresh(ctx, b, scope, loop)
        kw = "while" if isinstance(loop, ast.While) else (
            "for" if isinstance(loop, (ast.For, ast.AsyncFor)) else "comprehension")
        where = f"`{kw}` loop" if kw != "comprehension" else "comprehension"
        sweep = self._config_sweep(ctx, b, scope, loop) if what is not None else False
        if sweep is True:
            return None
        if _calls_rebuilt_function(b, loop, ctx.model, scope):
            return None
        if _stored_element(b, loop):
            return None   # ``{impl: jax.jit(partial(f, impl=impl)) for impl in impls}``: one kept per item
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _per_item_function(ctx.model, b, loop):
            return None   # ``for env in envs: jax.jit(env.step)``: a different function each time
        if _made_once(b, loop):
            return None   # ``if step is None: step = jax.jit(...)``: built on the first iteration only
        if isinstance(loop, (ast.For, ast.AsyncFor)) and _new_shapes_each_iteration(ctx.model, b, loop, scope):
            return None   # ``A = jnp.ones((n, dim, dim))`` per ``dim``: a new program each iteration anyway
        if what is not None:
            msg = (f"`{jit}` of {what} is created on every iteration of the {where} at line {loop.lineno}, "
                   f"so it retraces and recompiles each time; create it once before the loop")
            fix = self._hoist_fix(ctx, b, loop) if b.kind == "name" else None
            strict = VARIES_BASIS if sweep is VARIES else (
                PERIODIC_BASIS if _periodic_in_loop(b.site.node, loop) else
                INNER_LOOP_BASIS if _called_in_inner_loop(idx, b, loop) and _captures_rebound(b, loop)
                and not _per_step_loop(loop) else None)
            return ctx.finding(self, b.site.node, msg, fix=fix, strict=strict)
        if b.kind == "inline" and b.is_jit:
            fun = short(b.fun_expr) if b.fun_expr is not None else "the function"
            if _bound_method(ctx.model, b.fun_expr, scope):
                msg = (f"`{jit}({fun})` is re-wrapped on every iteration of the {where} at line {loop.lineno}: "
                       f"a bound method is a new object at every access, so it retraces and recompiles each "
                       f"time; create it once before the loop")
                return ctx.finding(self, b.site.node, msg,
                                   strict=PERIODIC_BASIS if _periodic_in_loop(b.site.node, loop) else None)
            msg = (f"`{jit}({fun})` is re-wrapped on every iteration of the {where} at line {loop.lineno}, "
                   f"losing jit's fast dispatch path; create it once before the loop")
            return ctx.finding(self, b.site.node, msg,
                               strict="the same function object is re-wrapped: its compiled program is reused, "
                                      "only the fast dispatch path is lost")
        return None

    @staticmethod
    def _config_sweep(ctx: Context, b: JitBinding, scope: Function, loop: ast.AST):
        """A loop over a literal set of configurations whose values the jitted function
        captures: each iteration needs its own program (a sweep, an autotuning loop) -- True.
        ``VARIES`` when the function captures a value the loop derives from an iterable that
        is not literal (``for key in obj.params: jax.jit(lambda p: f(**{key: p}))``): whether
        each iteration needs its own program depends on what the loop hands out."""
        m = ctx.model
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            return False
        loop_vars = _loop_derived(loop)
        call = b.site.call
        if call is not None and any(kw.arg in _PROGRAM_KEYWORDS and _free_names(kw.value) & loop_vars
                                    for kw in call.keywords):
            return True   # ``jax.jit(f, out_shardings=sharding[name])``: a different program per iteration
        literal = _literal_iterable(m, loop.iter, scope)
        parent_call = b.site.node
        if literal and b.kind == "inline" and any(isinstance(c, ast.Call) and c.func is parent_call
                                                  and _free_names(c) & loop_vars for c in _walk_loop(loop)):
            return True   # ``jax.jit(f)(arg)`` over a literal list of inputs: a trace per input anyway
        if b.kind == "def" and b.target is not None:
            captured = set()
            for n in b.target.walk():
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    captured.add(n.id)
            for d in b.target.decorators:
                captured |= _free_names(d)
        elif b.fun_expr is not None:
            captured = _free_names(b.fun_expr)
            if isinstance(b.fun_expr, ast.Name):   # ``def make(): ... dtype ...`` in the loop, then ``jit(make)``
                for n in _walk_loop(loop):
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == b.fun_expr.id:
                        own = {a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg)}
                        captured |= {x.id for x in ast.walk(n) if isinstance(x, ast.Name)
                                     and isinstance(x.ctx, ast.Load)} - own
        else:
            return False
        if not captured & loop_vars:
            return False
        if literal:
            return True
        # a loop over data (``for batch in batches``, the target or iterable named like a
        # step, or a captured value that is an array) recompiles needlessly: not this
        if isinstance(loop, (ast.For, ast.AsyncFor)) and (
                _PER_STEP_LOOP.search(" ".join(sorted(_free_names(loop.target) | _free_names(loop.iter))))
                or any(m.name_kind(n, scope) & (JAX | NUMPY) for n in captured & loop_vars if n in scope.locals)):
            return False
        return VARIES

    # ---------------------------------------------------------- per call
    def _per_call(self, ctx: Context, idx: CallIndex, b: JitBinding, scope: Function) -> Optional[Finding]:
        if scope.is_module or scope.is_lambda or scope.name in INIT_METHODS:
            return None
        if b.kind not in ("name", "inline", "def"):
            return None   # returned (a factory), stored on self, passed on: created once by design
        what = self._fresh(ctx, b, scope, None)
        if what is None:
            return None
        if b.kind in ("name", "def") and not self._only_called_locally(b, scope):
            return None
        uses = idx.calls_to(b)
        if b.kind != "inline" and not uses:
            return None
        if _cached(ctx, scope):
            return None   # functools.lru_cache: runs once per distinct arguments
        chain = _looped_call(ctx, idx, scope, 0, set())
        if chain is not None:
            looped = chain[-1]
            where = "at module level" if looped.scope.is_module else f"in {looped.scope.display()}"
            why = f"called in a loop {where}, line {looped.call.lineno}"
            if len(chain) > 1:
                via = " from ".join(c.scope.display() for c in chain[:-1])
                why = f"called from {via}, which is {why}"
        elif (passed := _passed_to_loop(ctx, idx, scope)) is not None:
            g, param, inner = passed
            why = f"passed to {g.display()} as `{param}`, which calls it in a loop, line {inner.lineno}"
        elif _TEST_NAME.match(scope.name):
            return None   # `test_jit_update`: a test runs once, whatever its name says
        elif _STEP_NAME.search(scope.name) and not any(u.in_loop for u in uses) \
                and not _called_once_at_top(idx, scope):
            why = "run every step"
        elif _EPOCH_NAME.search(scope.name):
            why = "run every epoch"
        else:
            return None
        jit = _jit_spelling(ctx, b)
        msg = (f"`{jit}` of {what} is created on every call of {scope.display()} ({why}), so it retraces "
               f"and recompiles each time; create it once (module level, `__init__`) and reuse it")
        # each one made is then called in a loop of the function that made it (a pipeline run over
        # a whole dataset): one compile per run, not per step
        outer_per_step = chain is not None and _per_step_loop(chain[-1].loop)
        strict = AMORTIZED_BASIS if any(u.in_loop for u in uses) and not outer_per_step \
            and len(chain or ()) == 1 and _captures_what_varies(ctx.model, b, scope, chain[0], uses) else None
        if strict is None and chain is not None and chain[-1].loop is not None \
                and _periodic_in_loop(chain[-1].call, chain[-1].loop):
            strict = PERIODIC_BASIS
        if strict is None and (_opaque_decorator(ctx.model, scope) or
                               any(_opaque_decorator(ctx.model, c.scope) for c in chain or ())):
            strict = OPAQUE_DECORATOR_BASIS
        return ctx.finding(self, b.site.node, msg, strict=strict)

    @staticmethod
    def _only_called_locally(b: JitBinding, scope: Function) -> bool:
        """The jitted name is only called in ``scope``: not returned, stored or passed on."""
        name = b.name
        calls = set()
        for c in scope.of_type(ast.Call):
            if isinstance(c.func, ast.Name) and c.func.id == name:
                calls.add(id(c.func))
        for n in scope.walk():
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in calls:
                return False
        for child in scope.children:   # captured by a nested function: it may escape
            if name in child.locals:
                continue
            for c in child.walk():
                if isinstance(c, ast.Name) and c.id == name:
                    return False
        return True

    # --------------------------------------------------------- freshness
    def _fresh(self, ctx: Context, b: JitBinding, scope: Function, loop: Optional[ast.AST]) -> Optional[str]:
        """What new callable the jit wraps each time (None: the same object every time)."""
        m = ctx.model
        if b.kind == "def":
            fn = b.target
            if fn is None:
                return None
            if loop is not None and not _inside(fn.node, loop):
                return None
            return f"the local function `{fn.name}`"
        e = b.fun_expr
        if e is None:
            return None
        return _fresh_expr(m, e, scope, loop, 0)

    # --------------------------------------------------------------- fix
    def _hoist_fix(self, ctx: Context, b: JitBinding, loop: ast.AST) -> Optional[Fix]:
        stmt = b.stmt
        if not isinstance(stmt, ast.Assign) or not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            return None
        if not any(s is stmt for s in loop.body) or len(loop.body) < 2:
            return None
        name = b.name
        assigned = _assigned_names(loop)
        free = _free_names(stmt.value)
        if free & assigned:
            return None
        # the name itself: assigned only here, and not read in the loop before this statement
        stores = 0
        for n in _walk_loop(loop):
            if isinstance(n, ast.Name) and n.id == name:
                if isinstance(n.ctx, ast.Store):
                    stores += 1
                elif (n.lineno, n.col_offset) < (stmt.lineno, stmt.col_offset):
                    return None
        if stores != 1:
            return None
        src = ctx.source
        for n in ast.walk(stmt):
            if isinstance(n, (ast.Constant, ast.JoinedStr)) and getattr(n, "end_lineno", n.lineno) != n.lineno:
                return None   # a multi-line string: re-indenting would change it
        first = src.line_text(stmt.lineno)
        if first[:len(first) - len(first.lstrip())] != first[:src.char_col(stmt.lineno, stmt.col_offset)]:
            return None   # something precedes the statement on its line
        tail = src.line_text(stmt.end_lineno)[src.char_col(stmt.end_lineno, stmt.end_col_offset):].strip()
        if tail and not tail.startswith("#"):
            return None   # `; more` after it
        loop_first = src.line_text(loop.lineno)
        if loop_first[:src.char_col(loop.lineno, loop.col_offset)].strip():
            return None
        body_indent = src.indentation(stmt.lineno)
        loop_indent = src.indentation(loop.lineno)
        start = src.offset(stmt.lineno, 0)
        end = src.offset(stmt.end_lineno + 1, 0) if stmt.end_lineno < src.line_count else len(src.text)
        moved_lines = src.text[start:end].splitlines(keepends=True)
        out = []
        for line in moved_lines:
            if line.startswith(body_indent):
                line = loop_indent + line[len(body_indent):]
            out.append(line)
        moved = "".join(out)
        if not moved.endswith(("\n", "\r")):
            moved += src.newline()
        at = src.offset(loop.lineno, 0)
        return self.fix.make([Edit.insert(at, moved), Edit.delete(start, end)])


def _looped_call(ctx: Context, idx: CallIndex, fn: Function, depth: int,
                 seen: Set[int]) -> Optional[List[CallSite]]:
    """The calls through which ``fn`` runs once per iteration of an eager loop: a call of
    ``fn`` inside a loop, or a call of ``fn`` from a function that is itself called in a
    loop over epochs, steps or batches (innermost call first, the looped call last); None
    when no such chain is found.  Through other functions, a loop over configurations or
    seeds (one experiment per iteration, each needing its own program) does not count."""
    seen.add(id(fn))
    callers = [c for c in idx.callers_of(fn) if not in_traced_code(c.scope)]
    looped = next((c for c in callers if c.in_loop and not _once_in_loop(c) and not _sweep_call(ctx.model, c)
                   and (depth == 0 or _per_step_loop(c.loop))), None)
    if looped is not None:
        return [looped]
    if depth >= _CALLER_DEPTH:
        return None
    for c in callers:
        caller = c.scope
        if caller.is_module or caller.is_lambda or id(caller) in seen or _cached(ctx, caller):
            continue
        chain = _looped_call(ctx, idx, caller, depth + 1, seen)
        if chain is not None:
            return [c] + chain
    return None


def _captures_what_varies(m, b: JitBinding, scope: Function, c: CallSite, uses=()) -> bool:
    """The function ``b`` jits captures something made from what the looped call ``c`` passes
    anew each time (``for ckpt in checkpoints: pipeline(ckpt)`` restoring ``state`` from ``ckpt``
    and jitting ``partial(f, state)``), or is handed such a thing that is no array (``model =
    SNN(kind)`` ... ``step(model, opt, x, y)``: a model of another structure, a configuration) --
    each call's program may differ anyway.  Captured values the caller passes unchanged (the
    same params every episode), and arrays made from what varies (same shapes, same program),
    make the rebuild pure waste."""
    if c.loop is None:
        return False
    targets = set()
    line = c.call.lineno
    for loop in c.scope.of_type(ast.For, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
        if not loop.lineno <= line <= (loop.end_lineno or loop.lineno):
            continue        # (every loop around the call: the outer one may hand out the checkpoint)
        gens = getattr(loop, "generators", None)
        targets |= {n.id for t in ([loop.target] if gens is None else [g.target for g in gens])
                    for n in ast.walk(t) if isinstance(n, ast.Name)}
    targets = derived_names(c.scope.of_type(ast.Assign), targets)   # ``model = models[name]`` in the loop
    target = m.resolve_callable(c.call.func, c.scope)
    if target is None or target.function is not scope:
        return False
    pairs, _ = m.bind_arguments(target, c.call)
    varying = {p for p, a in pairs if any(isinstance(n, ast.Name) and n.id in targets for n in ast.walk(a))}
    if not varying:
        return False
    varying = derived_names(scope.of_type(ast.Assign), varying)   # names of ``scope`` made from the varying parameters
    if b.fun_expr is not None and _free_names(b.fun_expr) & varying:
        return True
    for u in uses:
        if u.scope is not scope:
            continue
        for a in list(u.call.args) + [k.value for k in u.call.keywords]:
            if _free_names(a) & varying and not m.kind(a, scope) & (JAX | NUMPY):
                return True
    return False


def _sweep_call(m, c: CallSite) -> bool:
    """The call runs once per item of a literal set of configurations and is handed the item
    (``for name in TEST_SETTINGS: test_ivp(name)``): each call needs its own program anyway."""
    loop = c.loop
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not _literal_iterable(m, loop.iter, c.scope):
        return False
    targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    return any(isinstance(n, ast.Name) and n.id in targets for a in c.call.args + [k.value for k in c.call.keywords]
               for n in ast.walk(a))


def _passed_to_loop(ctx: Context, idx: CallIndex, fn: Function) -> Optional[Tuple[Function, str, ast.Call]]:
    """``fn`` is used as a per-step function: passed to a function of this module that calls
    the parameter it arrives in inside a loop over epochs, steps or batches
    (``train_loop(my_step, ...)`` with ``for batch in ds: state = step_fn(state, batch)``).
    (that function, the parameter, the call in the loop)"""
    m = ctx.model
    if fn.is_lambda or fn.is_module:
        return None
    for s in m.functions:
        if in_traced_code(s):
            continue
        for call in s.of_type(ast.Call):
            args = list(call.args) + [k.value for k in call.keywords]
            if not any(isinstance(a, ast.Name) and a.id == fn.name for a in args) \
                    or m.lookup_function(fn.name, s) is not fn:
                continue
            target = m.resolve_callable(call.func, s)
            if target is None or target.function is fn or in_traced_code(target.function):
                continue
            g = target.function
            for param, a in m.bind_arguments(target, call)[0]:
                if not (isinstance(a, ast.Name) and a.id == fn.name) or param not in g.param_nodes:
                    continue
                for inner in g.of_type(ast.Call):
                    if isinstance(inner.func, ast.Name) and inner.func.id == param:
                        loop = idx.enclosing_loop(inner, g)
                        if loop is not None and _per_step_loop(loop):
                            return g, param, inner
    return None


def _per_step_loop(loop: ast.AST) -> bool:
    """The loop header names epochs, steps or batches (``for epoch in range(num_epochs)``,
    ``while step < total``, ``for batch in loader``)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        parts = [loop.target, loop.iter]
    elif isinstance(loop, ast.While):
        parts = [loop.test]
    else:
        parts = [x for g in loop.generators for x in (g.target, g.iter)]
    for part in parts:
        for n in ast.walk(part):
            name = n.id if isinstance(n, ast.Name) else (n.attr if isinstance(n, ast.Attribute) else None)
            if name is not None and _PER_STEP_LOOP.search(name):
                return True
    return False


def _once_in_loop(c: CallSite) -> bool:
    """The call sits under an ``if`` that picks one iteration of its loop
    (``if epoch == num_epochs - 1:``): it runs once, not once per iteration."""
    loop = c.loop
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    loop_vars = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for t in _guarding_tests(c.call, loop):
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq) \
                and any(isinstance(n, ast.Name) and n.id in loop_vars for n in (t.left, t.comparators[0])):
            return True   # ``epoch == last`` (not ``epoch % k == 0``: that runs every k-th time)
    return False


def _guarding_tests(node: ast.AST, loop: ast.AST) -> Iterator[ast.expr]:
    """The tests of the ``if`` statements inside ``loop`` whose body holds ``node``."""
    pos = (node.lineno, node.col_offset)
    for n in ast.walk(loop):
        if isinstance(n, ast.If) and n.body \
                and (n.body[0].lineno, n.body[0].col_offset) <= pos \
                <= (n.body[-1].end_lineno, n.body[-1].end_col_offset):
            yield n.test


def _called_in_inner_loop(idx: CallIndex, b: JitBinding, loop: ast.AST) -> bool:
    """Every call of the jitted function sits in a loop nested inside ``loop`` (a phase loop
    around an epoch loop): each one built serves every step of that inner loop."""
    calls = idx.calls_to(b)
    return bool(calls) and all(c.loop is not None and c.loop is not loop and _inside(c.loop, loop)
                               for c in calls)


def _captures_rebound(b: JitBinding, loop: ast.AST) -> bool:
    """The jitted function (or a function of the loop it calls) reads a name the loop binds
    (``reference = data[phase]`` above ``def train_step``): each iteration's function differs."""
    bound = _assigned_names(loop)
    node = b.site.node

    def free(f: ast.AST) -> Set[str]:
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = f.args
            own = {x.arg for x in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)}
            own |= {n.id for st in f.body for n in ast.walk(st) if isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Store)}
            return {n for st in f.body for n in _free_names(st)} - own
        return _free_names(f)

    if isinstance(b.stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node = b.stmt     # a decorated def: the binding statement is the def
    reads = free(node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
        free(b.fun_expr) if b.fun_expr is not None else set()
    # (through other functions defined in the loop: their free names count too)
    for d in ast.walk(loop):
        if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name in reads and d is not node:
            reads |= free(d)
    return bool(reads & bound)


def _periodic_in_loop(node: ast.AST, loop: ast.AST) -> bool:
    """``node`` sits, inside ``loop``, under an ``if`` whose test picks every k-th step
    (``if step % config.eval_every_steps == 0 or is_last_step:``, ``if not i % 100:``): it runs
    once per interval. A literal period below 10 (``i % 2``) runs too often to count, and an
    interval counted in epochs (``epoch % eval_every == 0``) may be every epoch."""
    for test in _guarding_tests(node, loop):
        for t in ast.walk(test):
            if isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mod) \
                    and not isinstance(t.left, ast.Constant) \
                    and not any(isinstance(x, ast.Name) and _EPOCH_NAME.search(x.id) for x in ast.walk(t.left)) \
                    and not (isinstance(t.right, ast.Constant)
                             and (not isinstance(t.right.value, int) or t.right.value < 10)):
                return True
    return False


def _cached(ctx: Context, fn: Function) -> bool:
    """``fn`` is memoised (``functools.lru_cache``/``functools.cache``): its body runs once
    per distinct arguments, not on every call."""
    return ctx.model.cached_by_arguments(fn)


def _jit_spelling(ctx: Context, b: JitBinding) -> str:
    site = b.site
    if site.is_decorator:
        node = site.node
        if isinstance(node, ast.Call):
            node = node.args[0] if node.args and ctx.model.qualname(node.func, site.scope) in K.PARTIAL else node.func
        text = ctx.source.segment(node)
    else:
        text = ctx.source.segment(site.call.func)
    return text if len(text) <= 30 else site.transform.name


def _inside(node: ast.AST, loop: ast.AST) -> bool:
    """``node`` lies in the repeated part of ``loop``."""
    pos = (node.lineno, node.col_offset)
    if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        if not loop.body:
            return False
        first, last = loop.body[0], loop.body[-1]
        return (first.lineno, first.col_offset) <= pos <= (last.end_lineno, last.end_col_offset)
    return (loop.lineno, loop.col_offset) <= pos <= (loop.end_lineno, loop.end_col_offset)


def _fresh_expr(m, e: ast.expr, scope: Function, loop: Optional[ast.AST], depth: int) -> Optional[str]:
    if depth > 4:
        return None
    t = e.__class__
    if t is ast.Lambda:
        return "a lambda"
    if t is ast.Call:
        q = m.qualname(e.func, scope)
        if q in K.PARTIAL:
            return "a new `functools.partial`"
        tr = K.transform_for(q)
        if tr is not None and tr.kind != "body":
            return f"a new `{ast.unparse(e.func)}(...)` function"
        return None
    if t is ast.Name:
        fn = m.lookup_function(e.id, scope)
        if fn is not None:
            if fn.parent is None or fn.parent.is_module:
                return None
            if loop is not None:
                return f"the local function `{fn.name}`" if _inside(fn.node, loop) else None
            if fn.parent is scope:
                return f"the local function `{fn.name}`"
            return None
        # a local alias bound to a fresh callable: ``g = jax.grad(loss); jax.jit(g)``
        if not scope.is_module:
            for b in m.bindings(e.id, scope):
                if isinstance(b.node, ast.Assign) and len(b.node.targets) == 1 and not b.path:
                    if loop is not None and not _inside(b.node, loop):
                        return None
                    return _fresh_expr(m, b.value, scope, loop, depth + 1)
        return None
    if t is ast.Attribute:
        if m.qualname(e, scope) is not None:
            return None   # a module attribute: the same function every time
        base = e.value
        if isinstance(base, ast.Name):
            owner = scope.enclosing_method()
            if owner is not None and base.id == owner.self_name:
                if m.class_method(owner.cls, e.attr) is not None:
                    return f"the bound method `{base.id}.{e.attr}`"
                return None
        if e.attr == "apply":
            if isinstance(base, ast.Name) and _plain_functions_record(m, base, scope):
                return None   # ``hk.transform(f).apply``: a function kept in a record, the same object
            return f"the bound method `{ast.unparse(e)}`"
        return None
    return None


def _plain_functions_record(m: SemanticModel, name: ast.Name, scope: Function) -> bool:
    """``name`` is bound once to what a Haiku transform returns (through ``hk.without_apply_rng``
    and the like)."""
    home = m.resolve_scope(name.id, scope)
    v = m.single_value(name.id, home) if home is not None else None
    if not isinstance(v, ast.Call) or not isinstance(v.func, (ast.Name, ast.Attribute)):
        return False
    return m.qualname(v.func, home) in K.PLAIN_FUNCTION_RECORDS


def _called_once_at_top(idx: CallIndex, scope: Function) -> bool:
    """Every call of ``scope`` in the module is a statement of the module itself (a script's
    ``if __name__ == "__main__": example_step()``), outside any loop: named like a step, run once."""
    callers = idx.callers_of(scope)
    return bool(callers) and all(c.scope.is_module and c.loop is None for c in callers)


def _stored_element(b: JitBinding, loop: ast.AST) -> bool:
    """The jitted function is the element a comprehension collects (a dict or list of
    jitted functions, one per configuration): each is kept and called later, none is
    thrown away after one call."""
    if not isinstance(loop, (ast.ListComp, ast.DictComp, ast.SetComp)) or b.kind not in ("inline", "other"):
        return False
    elt = loop.value if isinstance(loop, ast.DictComp) else loop.elt
    return elt is b.site.node


def _literal_iterable(m, it: ast.expr, scope: Function) -> bool:
    """The loop runs over a literal set of configurations: a display, a name bound only to
    displays (``dtypes = [f32]; dtypes += [f64]``), ``itertools`` over such values, or
    ``zip``/``enumerate``/``sorted``/``reversed`` of them."""
    if isinstance(it, ast.Name):
        if _displays_only(m, it.id, scope):
            return True
        it = m.single_value(it.id, scope) or it   # ``configs = itertools.product(...)``; ``for c in configs``
    if isinstance(it, ast.Call) and m.qualname(it.func, scope) in ("enumerate", "zip", "sorted", "reversed"):
        args = it.args
    else:
        args = [it]
    for a in args:
        if isinstance(a, ast.Name):   # ``methods = ("Unrolled", "Implicit")``; ``zip(flags, methods)``
            a = m.single_value(a.id, scope) or a
        if isinstance(a, (ast.List, ast.Tuple, ast.Set)):
            continue
        if isinstance(a, ast.Call) and (m.qualname(a.func, scope) or "").startswith("itertools."):
            continue
        return False
    return True


def _displays_only(m, name: str, scope: Function) -> bool:
    """Every binding of ``name`` in ``scope`` is a list or tuple display (``xs = [a]``,
    ``xs += [b]``): the loop runs over a literal set of configurations."""
    if name in scope.param_nodes:
        return False   # ``if configs is None: configs = [a]``: callers may pass anything
    found = False
    for n in scope.walk():
        if isinstance(n, (ast.For, ast.comprehension, ast.NamedExpr)):
            bound = [n.target]
        elif isinstance(n, ast.With):
            bound = [i.optional_vars for i in n.items if i.optional_vars is not None]
        else:
            bound = []
        if any(isinstance(x, ast.Name) and x.id == name for b in bound for x in ast.walk(b)):
            return False   # bound by a loop, a with or a walrus: not a display
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            v = n.value
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and isinstance(n.target, ast.Name) and n.target.id == name:
            v = n.value
        else:
            continue
        if not isinstance(v, (ast.List, ast.Tuple, ast.Dict)):
            return False   # (a dict display: ``for name in SETTINGS`` runs over its literal keys)
        found = True
    return found


def _rebuilt_in_loop(loop: ast.AST, site: ast.AST) -> Set[str]:
    """Names the loop binds from a call other than the jit ``site`` itself
    (``init_fn, apply_fn = simulate.nvt(E, T)``): when they hold functions, a new
    function object each iteration."""
    out: Set[str] = set()
    for n in _walk_loop(loop):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and n.value is not site:
            for t in n.targets:
                out |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return out


def _calls_rebuilt_function(b: JitBinding, loop: ast.AST, m=None, scope=None) -> bool:
    """The jitted callable is itself rebuilt every iteration by a factory
    (``apply_fn = jit(apply_fn)`` after ``_, apply_fn = simulate.nvt(E, shift, dt, T)``
    with a new ``T``), or calls such a function, or hands it to a loop primitive
    (``jax.pmap(partial(lax.scan, step_fn))`` after ``step_fn = get_step_fn(optimizer)``): each
    iteration must compile its own program, and there is nothing to hoist out of the loop."""
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
        return False   # a comprehension binds nothing from a factory
    rebuilt = _rebuilt_in_loop(loop, b.site.node)
    if not rebuilt:
        return False
    e = b.fun_expr
    if isinstance(e, ast.Name):
        return e.id in rebuilt
    if m is not None and isinstance(e, ast.Call) and e.args and m.qualname(e.func, scope) in K.PARTIAL:
        inner = e.args[0]
        if isinstance(inner, ast.Name) and inner.id in rebuilt:
            return True     # ``partial(step_fn, ...)`` of a rebuilt function
        q = m.qualname(inner, scope) if isinstance(inner, (ast.Name, ast.Attribute)) else None
        arity = K.BODY_ARITY.get(q) if q is not None else None
        if arity is not None and len(e.args) > 1 and isinstance(e.args[1], ast.Name) and e.args[1].id in rebuilt:
            return True     # ``partial(lax.scan, step_fn)``: the body is the rebuilt function
    body = b.target.node if b.kind == "def" and b.target is not None else e
    if body is None:
        return False
    called = {n.func.id for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return bool(called & rebuilt)


# the array constructors followed (their shape argument's place is K.SHAPE_ARGUMENTS' row), and
# NumPy's legacy draws whose every positional argument is a dimension
# the constructors followed: every array maker and draw whose shape an argument gives (their
# positions: ``K.SHAPE_ARGUMENTS``), the NumPy spellings of the makers too
_SHAPED_ARRAYS = frozenset(q.rpartition(".")[2] for q in K.SHAPE_ARGUMENTS if q.startswith("jax.numpy."))
_SHAPED_DRAWS = frozenset(q.rpartition(".")[2] for q in K.SHAPE_ARGUMENTS if q.startswith("jax.random."))
_DIMENSION_DRAWS = frozenset({"rand", "randn"})


def _shape_args(q: str, call: ast.Call) -> List[ast.expr]:
    """The shape arguments of the constructor call ``call`` (``q``: its qualified name, or its
    spelling when unresolved); [] for anything else."""
    name = q.rpartition(".")[2]
    if name in _DIMENSION_DRAWS:
        return list(call.args)
    if name in _SHAPED_ARRAYS:
        row = K.SHAPE_ARGUMENTS.get("jax.numpy." + name)
    elif name in _SHAPED_DRAWS:
        row = K.SHAPE_ARGUMENTS.get("jax.random." + name)
    else:
        return []
    positions, keywords = row
    return [call.args[i] for i in positions if i < len(call.args)] + \
        [k.value for k in call.keywords if k.arg in keywords]


def _new_shapes_each_iteration(m, b: JitBinding, loop: ast.AST, scope: Function) -> bool:
    """The jitted function is called (``jax.jit(f)(A, B)``, or handed with its arguments to a
    timer: ``timeit(jax.jit(f), A, B)``) with an array the loop makes with a shape that follows
    the loop variable (``A = jnp.ones((n, dim, dim))`` for ``dim in dims``): JAX compiles a
    program per shape, so each iteration compiles anyway -- a jit made once would too."""
    node = b.site.node
    derived = _loop_derived(loop)
    args: List[ast.expr] = []
    for c in _walk_loop(loop):
        if not isinstance(c, ast.Call):
            continue
        if c.func is node or (b.kind in ("def", "name") and b.name and isinstance(c.func, ast.Name)
                              and c.func.id == b.name):
            args = list(c.args)     # (``f = jax.jit(g)`` / ``@jax.jit def f``, then ``f(A, B)``)
        elif any(a is node for a in c.args):
            i = next(i for i, a in enumerate(c.args) if a is node)
            args = list(c.args[i + 1:])
        if args:
            break
    shaped = set()
    for a in (x for s in loop.body for x in ast.walk(s)):
        if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                and isinstance(a.value, ast.Call) and isinstance(a.value.func, (ast.Name, ast.Attribute))):
            continue
        # (unresolved -- ``from pkg import *`` -- the usual spellings count: this only silences)
        q = m.qualname(a.value.func, scope) or ast.unparse(a.value.func)
        if not q.startswith(("jax.numpy.", "numpy.", "jax.random.", "jnp.", "np.", "random.")):
            continue
        if any(_free_names(e) & derived for e in _shape_args(q, a.value)):
            shaped.add(a.targets[0].id)
        elif ("jax.numpy." + q.rpartition(".")[2]) in K.SHAPE_ARGUMENTS and \
                any(_free_names(e) & shaped for e in a.value.args):
            # ``r = jnp.tile(x[None], (batch, 1))`` of such an ``x``: its shape follows (a
            # reshaping maker, not a reduction: ``jnp.sum(A)`` has one shape whatever ``A``'s)
            shaped.add(a.targets[0].id)
    return any(isinstance(x, ast.Name) and x.id in shaped for x in args)


def _walk_loop(loop: ast.AST):
    roots = list(loop.body)
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        roots.append(loop.target)
    else:
        roots.append(loop.test)
    for r in roots:
        yield from ast.walk(r)


def _assigned_names(loop: ast.AST) -> Set[str]:
    """Names the loop rebinds or mutates (``x = ...``, ``x[i] = ...``, ``x.a = ...``,
    ``x.append(...)``): a jitted closure over one of them would see a new value per iteration."""
    out: Set[str] = set()
    for n in _walk_loop(loop):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            root = _root_name(n)
            if root is not None:
                out.add(root)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in K.CONTAINER_METHODS:
            root = _root_name(n.func.value)
            if root is not None:
                out.add(root)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add((a.asname or a.name).split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
    return out


def _innermost_function(m, e: Optional[ast.expr], scope: Function) -> Optional[ast.expr]:
    """The function a transform or ``partial`` chain wraps (``jax.vmap(env.init)`` ->
    ``env.init``, ``partial(t.loss_fn, enn)`` -> ``t.loss_fn``)."""
    for _ in range(8):
        if not (isinstance(e, ast.Call) and e.args and isinstance(e.func, (ast.Name, ast.Attribute))):
            return e
        q = m.qualname(e.func, scope)
        if q is None or not (q in K.PARTIAL or K.transform_for(q) is not None):
            return e
        e = e.args[0]
    return e


def _per_item_function(m, b: JitBinding, loop: ast.AST) -> bool:
    """The jitted function itself comes from the loop's item: ``jax.jit(fn)`` over
    ``for fn in fns``, ``jax.jit(jax.vmap(env.init))`` with ``env = make(game)`` per game, a
    local function that calls a method of the item: each iteration needs its own program."""
    derived = _loop_derived(loop)
    local = b.target if b.kind == "def" else None
    if local is None and isinstance(b.fun_expr, ast.Name):
        made = m.resolve_callable(b.fun_expr, b.created_in)
        if made is not None and not made.function.is_lambda and _inside(made.function.node, loop):
            local = made.function
    if local is not None:
        return any(isinstance(c.func, ast.Attribute) and _root_name(c.func) in derived
                   for c in local.of_type(ast.Call))
    inner = _innermost_function(m, b.fun_expr, b.created_in)
    if isinstance(b.fun_expr, ast.Name) and b.kind in ("name", "inline") and b.fun_expr.id in derived:
        return True
    if isinstance(inner, ast.Call):
        # ``auto_reset(env.step, env.init)``: a wrapper around the item's own methods
        return any(isinstance(a, ast.Attribute) and _root_name(a) in derived for a in inner.args)
    return inner is not None and isinstance(inner, (ast.Name, ast.Attribute)) and _root_name(inner) in derived


def _made_once(b: JitBinding, loop: ast.AST) -> bool:
    """``if step is None: step = jax.jit(...)`` (or ``if not step``): the binding is guarded by a
    test that it was not made yet, so the jit is created once and reused."""
    if b.kind != "name" or b.stmt is None:
        return False
    for n in _walk_loop(loop):
        if isinstance(n, ast.If) and any(x is b.stmt for x in n.body):
            t = n.test
            if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Is) \
                    and isinstance(t.left, ast.Name) and t.left.id == b.name \
                    and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None:
                return True
            if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.Not) and isinstance(t.operand, ast.Name) \
                    and t.operand.id == b.name:
                return True
    return False


def _bound_method(m, e: Optional[ast.expr], scope: Function) -> bool:
    """``env.step`` on an instance: not a module's function (``jnp.sum``), nor a class's own
    attribute (``Metrics.from_output``)."""
    if not isinstance(e, ast.Attribute) or m.qualname(e, scope) is not None:
        return False
    if _static_method_name(m, e.attr):
        return False   # a staticmethod is the same plain function at every access, on a class or an instance
    root = e.value
    if isinstance(root, ast.Name):
        if _plain_functions_record(m, root, scope):
            return False   # ``hk.transform(f).apply``: a plain function kept in a record
        return root.id not in m.classes and not root.id[:1].isupper()
    return isinstance(root, (ast.Attribute, ast.Subscript, ast.Call))


def _static_method_name(m, attr: str) -> bool:
    """Every project class that defines a method ``attr`` declares it ``@staticmethod`` (and one
    does): ``obj.attr`` is then the same function object whatever ``obj`` is."""
    return attr in m.plain_methods


def _root_name(e: ast.expr) -> Optional[str]:
    while isinstance(e, (ast.Attribute, ast.Subscript)):
        e = e.value
    return e.id if isinstance(e, ast.Name) else None


# arguments of a jit/pmap call that change the compiled program itself
_PROGRAM_KEYWORDS = frozenset({"in_shardings", "out_shardings", "static_argnums", "static_argnames",
                               "axis_name", "in_axes", "out_axes", "devices", "backend", "device"})


def _loop_derived(loop: ast.AST) -> Set[str]:
    """The loop's target names and the names its body binds from them (``f_wrap = wrapper(f)``,
    ``vf = transform(partial(fn, axis_name=axis_name))``): values that differ per iteration."""
    out = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    assigns = [n for s in loop.body for n in ast.walk(s) if isinstance(n, ast.Assign)]
    defs = [n for s in loop.body for n in ast.walk(s) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    branches = [n for s in loop.body for n in ast.walk(s) if isinstance(n, ast.If)]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            if not (_free_names(a.value) & out):
                continue
            for t in a.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id not in out:
                        out.add(n.id)
                        changed = True
        for d in defs:
            # ``def _reg_fun(p): ... {key: p} ...`` in the loop: a closure over the loop variable
            if d.name not in out and any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in out
                                         for n in ast.walk(d)):
                out.add(d.name)
                changed = True
        for b in branches:
            # ``if constant: dt0 = 0.1 else: dt0 = None``: chosen by the loop variable
            if not (_free_names(b.test) & out):
                continue
            for n in (x for st in b.body + b.orelse for x in ast.walk(st)):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                    out.add(n.id)
                    changed = True
    return out


def _free_names(e: ast.AST) -> Set[str]:
    """Names read by ``e`` that are not bound by a lambda or comprehension inside it."""
    out: Set[str] = set()

    def visit(node: ast.AST, bound: frozenset) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in bound:
                out.add(node.id)
            return
        if isinstance(node, ast.Lambda):
            a = node.args
            names = {x.arg for x in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)}
            if a.vararg:
                names.add(a.vararg.arg)
            if a.kwarg:
                names.add(a.kwarg.arg)
            for d in list(a.defaults) + [d for d in a.kw_defaults if d is not None]:
                visit(d, bound)
            visit(node.body, bound | names)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = set(bound)
            for g in node.generators:
                visit(g.iter, frozenset(inner))
                for t in ast.walk(g.target):
                    if isinstance(t, ast.Name):
                        inner.add(t.id)
                for c in g.ifs:
                    visit(c, frozenset(inner))
            elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for x in elts:
                visit(x, frozenset(inner))
            return
        for child in ast.iter_child_nodes(node):
            visit(child, bound)

    visit(e, frozenset())
    return out
