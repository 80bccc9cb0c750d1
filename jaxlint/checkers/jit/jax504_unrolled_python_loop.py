from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Iterator, List, Optional, Set, Tuple

from ...analysis import CONTAINER, JAX, TRACED, Function
from ...analysis import knowledge as K
from ...fixes.edits import UNSAFE, Edit, Fix
from ...fixes.imports import module_alias
from ..base import Context, Finding, Rule, register, traced_functions

# attribute chains that hold configuration: ``config.num_steps``, ``self.cfg.n_iter``
_CONFIG_OWNERS = frozenset({"config", "cfg", "conf", "hparams", "hps", "hp", "args", "opts", "options",
                            "params_cfg", "settings", "flags", "FLAGS"})
# class-construction prefixes of layer libraries: a loop that builds or calls layers
_LAYER_PREFIXES = ("flax.linen.", "flax.nnx.", "equinox.nn.", "haiku.")


class _Trip:
    """What a loop iterates over, as far as it is known when the code is written."""

    __slots__ = ("count", "what", "kind")

    def __init__(self, kind: str, what: str, count: Optional[int] = None):
        self.kind = kind      # literal | static | array
        self.what = what      # e.g. "`num_steps` (a static argument, 1000 by default)"
        self.count = count    # known trip count (or default), if any


@register
class UnrolledPythonLoop(Rule):
    """
    ## What it does
    Flags a Python `for` or `while` loop inside a traced function (`jax.jit`,
    `grad`, a Flax module, ...) whose body does array work and whose trip count
    is large or not fixed when the code is written: `range(N)` with a literal
    `N` of at least 16 (configurable), `range(n)` over a static argument or a
    configuration value (a `static_argnames` parameter, a module field,
    `config.num_steps`), or iteration over the rows of a traced array
    (`for row in x`). Small loops — over a model's layers, over a literal list
    of a few items, over `range(x.ndim)` — are not flagged.

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
    """

    code = "JAX504"
    symbol = "unrolled-python-loop"
    summary = "a long Python loop inside a traced function is unrolled into the compiled program"
    fix_title = "Rewrite the loop with `jax.lax.fori_loop` / `jax.lax.scan`"
    fix_applicability = UNSAFE

    def check(self, ctx: Context) -> Iterator[Finding]:
        m = ctx.model
        if not m.mentions_jax:
            return
        threshold = ctx.settings.unrolled_loop_threshold
        for fn in traced_functions(ctx):
            loops = fn.of_type(ast.For, ast.While)
            if not loops:
                continue
            for loop in loops:
                if isinstance(loop, ast.For):
                    trip = self._for_trip(ctx, fn, loop)
                    kw = "for"
                else:
                    trip = self._while_trip(ctx, fn, loop)
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
                        fix = _LoopFix(ctx, fn, loop, self.fix_title).build()
                    except _NoFix:
                        fix = None
                yield ctx.finding(self, loop, msg, confidence=fn.confidence, fix=fix, end_node=loop.iter
                                  if isinstance(loop, ast.For) else loop.test)

    # -------------------------------------------------------- trip counts
    def _for_trip(self, ctx: Context, fn: Function, loop: ast.For) -> Optional[_Trip]:
        m = ctx.model
        it = loop.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.args \
                and m.qualname(it.func, fn) in ("enumerate", "reversed") and len(it.args) == 1:
            it = it.args[0]
        if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "range":
            return self._range_trip(ctx, fn, it)
        if isinstance(it, (ast.List, ast.Tuple, ast.Set)):
            if any(isinstance(e, ast.Starred) for e in it.elts):
                return None
            return _Trip("literal", f"{len(it.elts)} literal items", len(it.elts))
        if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "zip":
            for a in it.args:
                if self._traced_array(ctx, fn, a):
                    return _Trip("array", f"the rows of traced array `{_short(a)}`")
            return None
        if self._traced_array(ctx, fn, it) and not _used_as_mapping(loop):
            return _Trip("array", f"the rows of traced array `{_short(it)}`")
        return None

    def _range_trip(self, ctx: Context, fn: Function, call: ast.Call) -> Optional[_Trip]:
        if call.keywords or not 1 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        vals = [_int_value(ctx, fn, a) for a in call.args]
        text = f"`{_short(call)}`"
        if all(v is not None for v in vals):
            try:
                n = len(range(*vals))
            except ValueError:
                return None
            return _Trip("literal", text, n)
        stop = call.args[0] if len(call.args) == 1 else call.args[1]
        start_v = vals[0] if len(call.args) > 1 else 0
        if len(call.args) == 3 or start_v is None:
            return None
        if _LAYER_COUNT.search(_bound_name(stop)):
            return None   # one iteration per layer/block/head: unrolling is the intent
        cls = self._static_bound(ctx, fn, stop)
        if cls is None:
            return None
        desc, default = cls
        n = None if default is None else max(0, default - start_v)
        if n is not None:
            what = f"{text} ({desc}, {n} by default)"
        else:
            what = f"{text} ({desc})"
        return _Trip("static", what, n)

    def _static_bound(self, ctx: Context, fn: Function, e: ast.expr,
                      depth: int = 0) -> Optional[Tuple[str, Optional[int]]]:
        """A bound fixed at trace time but not in the code: a static argument, a module field, a
        configuration value, the length of a traced array.  (description, default if known)"""
        m = ctx.model
        if isinstance(e, ast.Name):
            s = fn
            while s is not None and not s.is_module:
                if e.id in s.param_nodes:
                    if e.id in s.static_params and s.confidence == "certain" and not s.is_lambda:
                        d = s.defaults.get(e.id)
                        return "a static argument", _literal_int(d)
                    return None
                if e.id in s.locals:
                    local = _single_local_value(s, e.id)
                    if local is None or depth > 3:
                        return None
                    return self._static_bound(ctx, s, local, depth + 1)
                s = s.parent
            return None
        if isinstance(e, ast.Attribute):
            base = e.value
            if isinstance(base, ast.Name):
                owner = fn.enclosing_method()
                if owner is not None and base.id == owner.self_name and owner.cls is not None:
                    info = owner.cls
                    if e.attr in info.fields:
                        return "a module field", _class_default(info, e.attr)
                    if base.id in _CONFIG_OWNERS:
                        return "a configuration value", None
                    return None
                if base.id in _CONFIG_OWNERS and m.qualname(base, fn) is None:
                    return "a configuration value", None
            elif isinstance(base, ast.Attribute) and base.attr in _CONFIG_OWNERS:
                return "a configuration value", None
            return None
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
            arr = e.value.value
            if self._traced_array(ctx, fn, arr) and _is_leading_axis(e.slice):
                return f"the length of traced array `{_short(arr)}`", None
            return None
        if isinstance(e, ast.Call) and m.qualname(e.func, fn) == "len" and len(e.args) == 1:
            if self._traced_array(ctx, fn, e.args[0]):
                return f"the length of traced array `{_short(e.args[0])}`", None
        return None

    def _while_trip(self, ctx: Context, fn: Function, loop: ast.While) -> Optional[_Trip]:
        m = ctx.model
        test = loop.test
        if m.truth_traced(test, fn):
            return None   # a traced condition fails at trace time (JAX201)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        op = test.ops[0]
        left, right = test.left, test.comparators[0]
        if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Name):
            counter, bound = left, right
        elif isinstance(op, (ast.Gt, ast.GtE)) and isinstance(right, ast.Name):
            counter, bound = right, left
        else:
            return None
        # the counter must be stepped in the body
        if not any(isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == counter.id
                   for s in loop.body for n in ast.walk(s)):
            return None
        v = _int_value(ctx, fn, bound)
        text = f"{_short(test)}` loop"
        if v is None and _LAYER_COUNT.search(_bound_name(bound)):
            return None
        if v is not None:
            return _Trip("literal", text, v)
        cls = self._static_bound(ctx, fn, bound)
        if cls is None:
            return None
        desc, default = cls
        what = f"{text} ({desc}" + (f", {default} by default)" if default is not None else ")")
        return _Trip("static", what, default)

    @staticmethod
    def _traced_array(ctx: Context, fn: Function, e: ast.expr) -> bool:
        """``e`` is surely a traced *array*, not a pytree (a list of layers, a dict of
        parameters): a local bound from array arithmetic or a ``jax.numpy`` call, or a
        parameter annotated as an array or used like one (``x.shape``, ``x @ w``)."""
        m = ctx.model
        k = m.kind(e, fn)
        if not (k & TRACED and k & JAX) or k & CONTAINER:
            return False
        if not isinstance(e, ast.Name):
            return False
        name = e.id
        if name in fn.param_nodes:
            ann = fn.param_nodes[name].annotation
            if ann is not None:
                q = m.qualname(ann.value if isinstance(ann, ast.Subscript) else ann, fn.parent)
                if q in K.ARRAY_ANNOTATIONS:
                    return True
            return _used_as_array(fn, name) or bool(_ARRAY_NAME.match(name))
        values = [a.value for a in fn.of_type(ast.Assign)
                  if any(isinstance(t, ast.Name) and t.id == name for t in a.targets)]
        values += [a for a in fn.of_type(ast.AugAssign) if isinstance(a.target, ast.Name) and a.target.id == name]
        if not values:
            return False
        for v in values:
            if isinstance(v, ast.AugAssign):
                continue
            if isinstance(v, ast.BinOp):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, (ast.Name, ast.Attribute)):
                q = m.qualname(v.func, fn)
                if q is not None and q.startswith(("jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.")) \
                        and q not in _LIST_RESULTS:
                    continue
            return False
        return True

    # ----------------------------------------------------------- the body
    @staticmethod
    def _array_work(ctx: Context, fn: Function, loop: ast.AST) -> bool:
        m = ctx.model
        for s in loop.body:
            for n in ast.walk(s):
                if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
                    if n.value is not None and m.kind(n.value, fn) & TRACED:
                        return True
                    v = n.value
                    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                            and v.func.attr in ("append", "extend", "insert") \
                            and any(m.kind(a, fn) & TRACED for a in v.args):
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
        carried, _ = _carry_names(loop.body)
        return bool(carried)


# ====================================================================== helpers
# jax.numpy functions that return a list of arrays, not an array
_LIST_RESULTS = frozenset({"jax.numpy.split", "jax.numpy.array_split", "jax.numpy.hsplit", "jax.numpy.vsplit",
                           "jax.numpy.dsplit", "jax.numpy.meshgrid", "jax.numpy.unstack", "jax.numpy.nonzero",
                           "jax.numpy.where", "jax.numpy.unravel_index", "jax.numpy.indices",
                           "jax.numpy.linalg.eigh", "jax.numpy.linalg.svd", "jax.numpy.linalg.qr",
                           "jax.numpy.linalg.slogdet", "jax.numpy.linalg.eig", "jax.lax.scan",
                           "jax.lax.while_loop", "jax.lax.fori_loop", "jax.lax.cond", "jax.lax.switch",
                           "jax.random.split"})


# parameters named like a sequence of data rather than a list of layers/parameters
_ARRAY_NAME = re.compile(r"^(?:xs|x_seq|seq|sequence|inputs|signal|frames|tokens|timesteps|ts|times|"
                         r"obs|observations|actions|rewards|trajectory|samples)$")

# a trip count named like a number of layers: ``num_layers``, ``self.depth``, ``n_blocks``
_LAYER_COUNT = re.compile(r"layer|depth|block|stage|head|level", re.IGNORECASE)


def _bound_name(e: ast.expr) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.Attribute):
        return e.attr
    if isinstance(e, ast.Call) and e.args:   # len(self.layers)
        return _bound_name(e.args[0])
    return ""


def _used_as_mapping(loop: ast.For) -> bool:
    """The loop variable is unpacked or indexed with strings: elements are layers/pytrees."""
    if not isinstance(loop.target, ast.Name):
        return True
    var = loop.target.id
    for s in loop.body:
        for n in ast.walk(s):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == var \
                    and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                return True
    return False


def _used_as_array(fn: Function, name: str) -> bool:
    """``name`` is used like an array somewhere in ``fn``: an arithmetic operand or ``.shape``."""
    for n in fn.walk():
        if isinstance(n, ast.BinOp):
            for side in (n.left, n.right):
                if isinstance(side, ast.Name) and side.id == name:
                    return True
        elif isinstance(n, ast.Attribute) and n.attr in ("shape", "ndim", "T", "dtype", "reshape", "astype") \
                and isinstance(n.value, ast.Name) and n.value.id == name:
            return True
    return False


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _literal_int(e: Optional[ast.expr]) -> Optional[int]:
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _literal_int(e.operand)
        return -v if v is not None else None
    return None


def _int_value(ctx: Context, fn: Function, e: ast.expr, depth: int = 0) -> Optional[int]:
    """A literal int, a module-level int constant, or simple arithmetic over them."""
    if depth > 6:
        return None
    v = _literal_int(e)
    if v is not None:
        return v
    if isinstance(e, ast.Name):
        # a module-level constant bound once, never a local or parameter
        s = fn
        while s is not None and not s.is_module:
            if e.id in s.locals:
                local = _single_local_value(s, e.id)
                return _int_value(ctx, s, local, depth + 1) if local is not None else None
            s = s.parent
        value = None
        for a in ctx.model.module.of_type(ast.Assign, ast.AnnAssign):
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == e.id:
                    if value is not None:
                        return None
                    value = a.value
        if value is None:
            return None
        return _int_value(ctx, ctx.model.module, value, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        a = _int_value(ctx, fn, e.left, depth + 1)
        b = _int_value(ctx, fn, e.right, depth + 1)
        if a is None or b is None:
            return None
        if isinstance(e.op, ast.Add):
            return a + b
        if isinstance(e.op, ast.Sub):
            return a - b
        if isinstance(e.op, ast.Mult):
            return a * b
        return a // b if b else None
    return None


def _single_local_value(s: Function, name: str) -> Optional[ast.expr]:
    """The value of a local bound exactly once, by a plain ``name = value``."""
    if name in s.param_nodes:
        return None
    value = None
    for a in s.of_type(ast.Assign):
        for t in a.targets:
            if isinstance(t, ast.Name) and t.id == name:
                if value is not None:
                    return None
                value = a.value
            elif not isinstance(t, (ast.Attribute, ast.Subscript)) and any(
                    isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                return None
    for a in s.of_type(ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.withitem,
                       ast.comprehension):
        t = getattr(a, "target", None) or getattr(a, "optional_vars", None)
        if t is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
            return None
    return value


def _is_leading_axis(sl: ast.expr) -> bool:
    """Axis 0 (rows, samples) or 1 (time steps in batch-first sequences); the last axis
    (channels/features) is left alone."""
    return isinstance(sl, ast.Constant) and sl.value in (0, 1) and not isinstance(sl.value, bool)


def _class_default(info, name: str) -> Optional[int]:
    for stmt in info.node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return _literal_int(stmt.value)
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return _literal_int(stmt.value)
    return None




def _reads(node: ast.AST) -> List[ast.Name]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]


def _carry_names(body: List[ast.stmt]) -> Tuple[List[str], List[str]]:
    """(carried, temporaries) of a body of simple statements: a carried name is read
    before the body assigns it; a temporary is assigned before any read."""
    assigned: List[str] = []
    carried: List[str] = []
    seen_assigned: Set[str] = set()

    def read(name: str) -> None:
        if name not in seen_assigned and name not in carried:
            carried.append(name)

    for s in body:
        targets: List[ast.expr] = []
        if isinstance(s, ast.Assign):
            values, targets = [s.value], s.targets
        elif isinstance(s, ast.AugAssign):
            values, targets = [s.value], [s.target]
            if isinstance(s.target, ast.Name):
                read(s.target.id)
        elif isinstance(s, ast.Expr):
            values = [s.value]
        else:
            values = [s]
        for v in values:
            for n in _reads(v):
                read(n.id)
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name) and n.id not in seen_assigned:
                    seen_assigned.add(n.id)
                    assigned.append(n.id)
    carry = [n for n in assigned if n in carried]
    temps = [n for n in assigned if n not in carried]
    return carry, temps


class _NoFix(Exception):
    pass


class _LoopFix:
    """Rewrites the simple loop shapes: carry-only ``range`` loops to ``fori_loop``,
    append-then-stack loops to ``scan``."""

    def __init__(self, ctx: Context, fn: Function, loop: ast.For, title: str):
        self.ctx = ctx
        self.m = ctx.model
        self.src = ctx.source
        self.fn = fn
        self.loop = loop
        self.title = title
        self.edits: List[Edit] = []

    def require(self, cond) -> None:
        if not cond:
            raise _NoFix()

    # ------------------------------------------------------------ entry
    def build(self) -> Optional[Fix]:
        loop = self.loop
        self.require(not loop.orelse and not loop.type_comment)
        self.require(isinstance(loop.target, ast.Name))
        self.var = loop.target.id
        body = loop.body
        last = body[-1]
        is_append = (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                     and isinstance(last.value.func, ast.Attribute) and last.value.func.attr == "append"
                     and isinstance(last.value.func.value, ast.Name) and len(last.value.args) == 1
                     and not last.value.keywords)
        stmts = body[:-1] if is_append else body
        for s in stmts:
            self.require(isinstance(s, ast.Assign) and all(self._simple_target(t) for t in s.targets)
                         or isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name))
        for s in body:
            for n in ast.walk(s):
                self.require(not isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)))
        carried, temps = _carry_names(body)
        self.require(carried and self.var not in carried and self.var not in temps)
        self.carried, self.temps = carried, temps
        if is_append:
            return self._scan(stmts, last)
        return self._fori()

    @staticmethod
    def _simple_target(t: ast.expr) -> bool:
        if isinstance(t, ast.Name):
            return True
        if isinstance(t, ast.Tuple):
            return all(isinstance(e, ast.Name) for e in t.elts)
        return False

    # ---------------------------------------------------------- context
    def _lax(self) -> str:
        local = self.m.imports.local_name_for("jax.lax")
        if local is not None:
            return local
        jax_name, edits = module_alias(self.m, self.src, "jax", "jax")
        self.edits.extend(edits)
        return f"{jax_name}.lax"

    def _jnp(self) -> str:
        name, edits = module_alias(self.m, self.src, "jax.numpy", "jnp")
        self.edits.extend(edits)
        return name

    def _comments(self, start: int, end: int) -> List[Tuple[int, int]]:
        """(start, end) offsets of comments within [start, end)."""
        cache = getattr(self.ctx, "_jax504_comments", None)
        if cache is None:
            cache = []
            try:
                for tok in tokenize.generate_tokens(io.StringIO(self.src.text).readline):
                    if tok.type == tokenize.COMMENT:
                        a = self.src.offset(tok.start[0], 0) + tok.start[1]
                        cache.append((a, a + len(tok.string)))
            except (tokenize.TokenError, SyntaxError, IndentationError):
                cache = None
            setattr(self.ctx, "_jax504_comments", cache)
        self.require(cache is not None)
        return [c for c in cache if start <= c[0] < end]

    def _unused_after(self, names: List[str], after: Tuple[int, int]) -> None:
        """Temporaries and the loop variable vanish: they must not be read after the loop."""
        wanted = set(names)
        for n in self.fn.walk():
            if isinstance(n, ast.Name) and n.id in wanted and isinstance(n.ctx, ast.Load) \
                    and (n.lineno, n.col_offset) > after:
                raise _NoFix()
        for child in self.fn.children:   # read by a nested function
            for n in child.walk():
                if isinstance(n, ast.Name) and n.id in wanted:
                    raise _NoFix()

    def _fresh_name(self, base: str) -> str:
        taken: Set[str] = set()
        s = self.fn
        while s is not None:
            taken |= s.locals
            s = s.parent
        for f in self.fn.children:
            taken |= f.locals
        name = base
        i = 2
        while name in taken:
            name = f"{base}_{i}"
            i += 1
        return name

    def _range_bounds(self) -> Tuple[str, str, Optional[str]]:
        it = self.loop.iter
        self.require(isinstance(it, ast.Call) and self.m.qualname(it.func, self.fn) == "range"
                     and 1 <= len(it.args) <= 2 and not it.keywords)
        seg = self.src.segment
        if len(it.args) == 1:
            return "0", seg(it.args[0]), None
        return seg(it.args[0]), seg(it.args[1]), seg(it.args[0])

    def _body_text(self, stmts: List[ast.stmt], upto: Optional[int] = None) -> str:
        """The body lines verbatim (with their indentation and comments)."""
        src = self.src
        first = stmts[0]
        self.require(first.lineno > self.loop.lineno)
        start = src.offset(first.lineno, 0)
        if upto is not None:
            return src.text[start:upto]
        last = stmts[-1]
        end = src.offset(last.end_lineno, last.end_col_offset)
        return src.text[start:end]

    def _header_comment(self) -> str:
        """The header line's trailing comment (moved to the new ``def``); no other comment may sit
        in the header or between it and the first body statement."""
        src = self.src
        it = self.loop.iter
        gap_start = src.offset(it.end_lineno, 0) + len(src.line_text(it.end_lineno))
        self.require(not self._comments(gap_start, src.offset(self.loop.body[0].lineno, 0)))
        if it.end_lineno != self.loop.lineno:
            comments = self._comments(src.offset(self.loop.lineno, 0), src.offset(it.end_lineno, it.end_col_offset))
            self.require(not comments)
        line_start = src.offset(it.end_lineno, 0)
        line_end = line_start + len(src.line_text(it.end_lineno))
        cs = self._comments(src.offset(it.end_lineno, it.end_col_offset), line_end)
        if cs:
            a, b = cs[0]
            return "  " + src.text[a:b]
        return ""

    # ------------------------------------------------------------- fori
    def _fori(self) -> Fix:
        src = self.src
        loop = self.loop
        body = loop.body
        lo, hi, _ = self._range_bounds()
        after = (loop.end_lineno, loop.end_col_offset)
        self._unused_after(self.temps + [self.var], after)
        lax = self._lax()
        start = src.offset(loop.lineno, loop.col_offset)
        end = src.offset(loop.end_lineno, loop.end_col_offset)
        carried = self.carried
        single = body[0] if len(body) == 1 else None
        if single is not None and not self._comments(start, end) and len(carried) == 1:
            target = carried[0]
            if isinstance(single, ast.Assign) and len(single.targets) == 1 \
                    and isinstance(single.targets[0], ast.Name) and single.targets[0].id == target:
                value = src.segment(single.value)
            elif isinstance(single, ast.AugAssign) and single.target.id == target:
                op = _AUG_OPS.get(type(single.op))
                self.require(op is not None)
                value = f"{target} {op} ({src.segment(single.value)})"
            else:
                raise _NoFix()
            text = f"{target} = {lax}.fori_loop({lo}, {hi}, lambda {self.var}, {target}: {value}, {target})"
            return Fix(self.title, tuple([Edit(start, end, text)] + self.edits), UNSAFE)
        # a nested def
        indent = src.indentation(loop.lineno)
        self.require(src.line_text(loop.lineno)[:src.char_col(loop.lineno, loop.col_offset)].strip() == "")
        inner = src.indentation(body[0].lineno)
        self.require(len(inner) > len(indent))
        nl = src.newline()
        name = self._fresh_name("loop_body")
        comment = self._header_comment()
        carry_tuple = ", ".join(carried)
        if len(carried) == 1:
            head = f"def {name}({self.var}, {carried[0]}):{comment}{nl}"
            unpack = ""
            ret = f"{inner}return {carried[0]}"
            init = carried[0]
            assign = carried[0]
        else:
            head = f"def {name}({self.var}, carry):{comment}{nl}"
            unpack = f"{inner}{carry_tuple} = carry{nl}"
            ret = f"{inner}return {carry_tuple}"
            init = f"({carry_tuple})"
            assign = carry_tuple
        text = (head + unpack + self._body_text(body) + nl + ret + nl
                + f"{indent}{assign} = {lax}.fori_loop({lo}, {hi}, {name}, {init})")
        return Fix(self.title, tuple([Edit(start, end, text)] + self.edits), UNSAFE)

    # ------------------------------------------------------------- scan
    def _scan(self, stmts: List[ast.stmt], append: ast.Expr) -> Fix:
        src = self.src
        m = self.m
        loop = self.loop
        fn = self.fn
        lst = append.value.func.value.id
        out_expr = append.value.args[0]
        # the statements around the loop: ``ys = []`` before, ``y = jnp.stack(ys)`` after
        siblings = _statement_list(fn, loop)
        self.require(siblings is not None)
        i = next(k for k, s in enumerate(siblings) if s is loop)
        self.require(0 < i < len(siblings) - 1)
        init, after = siblings[i - 1], siblings[i + 1]
        self.require(isinstance(init, ast.Assign) and len(init.targets) == 1
                     and isinstance(init.targets[0], ast.Name) and init.targets[0].id == lst
                     and isinstance(init.value, ast.List) and not init.value.elts)
        stack = after.value if isinstance(after, (ast.Assign, ast.Return)) else None
        self.require(isinstance(stack, ast.Call) and m.qualname(stack.func, fn) == "jax.numpy.stack"
                     and len(stack.args) == 1 and isinstance(stack.args[0], ast.Name) and stack.args[0].id == lst)
        for kw in stack.keywords:
            self.require(kw.arg == "axis" and isinstance(kw.value, ast.Constant) and kw.value.value == 0)
        if isinstance(after, ast.Assign):
            self.require(len(after.targets) == 1)
            result = src.segment(after.targets[0])
            self.require(lst not in {n.id for n in ast.walk(after.targets[0]) if isinstance(n, ast.Name)})
        else:
            result = None
        # the list is used only by the append and the stack
        uses = [n for n in fn.walk() if isinstance(n, ast.Name) and n.id == lst]
        self.require(len(uses) == 3)
        self.require(all(lst not in c.locals and not any(isinstance(n, ast.Name) and n.id == lst for n in c.walk())
                         for c in fn.children))
        self.require(self.var not in self.carried)
        # what the loop iterates over
        it = loop.iter
        var_used = any(isinstance(n, ast.Name) and n.id == self.var for s in loop.body for n in ast.walk(s))
        if isinstance(it, ast.Call) and m.qualname(it.func, fn) == "range":
            lo, hi, lo_given = self._range_bounds()
            if not var_used and lo_given is None:
                xs = f"None, length={hi}"
            else:
                jnp = self._jnp()
                xs = f"{jnp}.arange({lo}, {hi})" if lo_given is not None else f"{jnp}.arange({hi})"
        else:
            k = m.kind(it, fn)
            self.require(k & TRACED and k & JAX and not k & CONTAINER)
            xs = src.segment(it)
            self.require("\n" not in xs)
        after_pos = (after.end_lineno, after.end_col_offset)
        self._unused_after(self.temps + [self.var], after_pos)
        lax = self._lax()
        indent = src.indentation(loop.lineno)
        for s in (init, after):
            self.require(src.indentation(s.lineno) == indent)
            self.require(src.line_text(s.lineno)[:src.char_col(s.lineno, s.col_offset)].strip() == "")
        self.require(src.line_text(loop.lineno)[:src.char_col(loop.lineno, loop.col_offset)].strip() == "")
        inner = src.indentation(loop.body[0].lineno)
        self.require(len(inner) > len(indent))
        start = src.offset(init.lineno, init.col_offset)
        end = src.offset(after.end_lineno, after.end_col_offset)
        # comments are kept inside the body; none may sit between the pieces we replace
        self.require(not self._comments(start, src.offset(loop.lineno, 0)))
        a_start = src.offset(append.lineno, append.col_offset)
        a_end = src.offset(append.end_lineno, append.end_col_offset)
        self.require(not self._comments(a_start, a_end))
        self.require(not self._comments(a_end, end) or
                     all(c[0] < src.offset(append.end_lineno + 1, 0) for c in self._comments(a_end, end)))
        nl = src.newline()
        name = self._fresh_name("scan_body")
        comment = self._header_comment()
        carried = self.carried
        carry_tuple = ", ".join(carried)
        if len(carried) == 1:
            head = f"def {name}({carried[0]}, {self.var}):{comment}{nl}"
            unpack = ""
            carry_out = carried[0]
            init_text = carried[0]
        else:
            head = f"def {name}(carry, {self.var}):{comment}{nl}"
            unpack = f"{inner}{carry_tuple} = carry{nl}"
            carry_out = f"({carry_tuple})"
            init_text = f"({carry_tuple})"
        body_text = ""
        if stmts:
            body_text = self._body_text(loop.body, upto=src.offset(append.lineno, 0))
        # the append line becomes the return (its trailing comment kept)
        line_end = src.offset(append.end_lineno, 0) + len(src.line_text(append.end_lineno))
        tail = src.text[a_end:min(line_end, end)]
        ret = f"{inner}return {carry_out}, {src.segment(out_expr)}{tail}"
        call = f"{lax}.scan({name}, {init_text}, {xs})"
        if result is not None:
            final = f"{indent}{carry_out if len(carried) > 1 else carried[0]}, {result} = {call}"
        else:
            final = f"{indent}return {call}[1]"
        text = head + unpack + body_text + ret + nl + final
        # the init statement starts at its column; the replacement starts with the def
        return Fix(self.title, tuple([Edit(start, end, text)] + self.edits), UNSAFE)


_AUG_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
            ast.FloorDiv: "//", ast.Mod: "%"}


def _statement_list(fn: Function, target: ast.stmt) -> Optional[List[ast.stmt]]:
    """The statement list (a body/orelse/finalbody of ``fn``) that holds ``target``."""
    roots = [fn.node]
    while roots:
        node = roots.pop()
        for field in ("body", "orelse", "finalbody", "handlers"):
            lst = getattr(node, field, None)
            if not isinstance(lst, list):
                continue
            for s in lst:
                if s is target:
                    return lst
            for s in lst:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                if isinstance(s, ast.AST) and (s.lineno <= target.lineno <= (s.end_lineno or s.lineno)):
                    roots.append(s)
    return None
