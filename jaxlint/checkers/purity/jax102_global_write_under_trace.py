from __future__ import annotations

import ast
import re
from typing import Iterator, List, Optional

from ...analysis import Function, SemanticModel
from .bindings import LIST_METHODS
from .facts import PurityFacts, STORING_METHODS, Write, traced_writes, value_traced
from .idioms import lazy_init, metadata_log, reached_lazily, scoped_state
from ..base import Context, Finding, TracedCodeRule, register


@register
class GlobalWriteUnderTrace(TracedCodeRule):
    """
    ## What it does
    Flags side effects on state outside the function inside a staged traced
    context (`jax.jit`, a `lax.scan`/`fori_loop`/`while_loop`/`cond` body,
    `vmap`, a Flax module method, or a helper called from one): rebinding a
    `global` or `nonlocal` name (`counter += 1`), and mutating a module-level
    or enclosing-scope list/dict/set (`log.append(...)`, `cache[k] = v`,
    `seen.add(...)`, `del registry[k]`).

    Writes that store a *traced* value are reported as JAX106 (`tracer-leak`)
    instead. Containers created inside the same trace (a list built up in the
    jitted function itself, or in the jitted function around a scan body) are
    fine and not flagged, nor is an enclosing-scope counter the enclosing
    function asserts on (`assert num_traces == 1`): a test counting traces
    wants the trace-time effect. For the same reason an integer counter bumped
    by a literal (`TRACES["n"] += 1`) that the traced function reads nowhere
    else, and whose name or key says it counts traces or compilations (or that
    untraced code prints or asserts with words that say so:
    `print("compiles =", COUNT["n"])`), is reported only in the strict profile.
    A global built once is not flagged either: set while it is unset
    (`if _mgr is None: _mgr = Manager()`), or filled under a membership test
    (`if key not in CACHE: CACHE[key] = ...`) -- also by a helper whose every
    traced call sits under such a test (`backend = _BACKEND; if backend is
    None: set_backend("default")`).

    ## Why is this bad?
    In PyTorch the body of your training step runs on every call, so
    `calls += 1` or `history.append(...)` happens every step. Under
    `jax.jit` the Python body runs only while JAX traces it; later calls replay
    the compiled program and skip every Python side effect. A counter bumped
    inside a `lax.scan` body increments once per trace, not once per
    iteration; a log appended inside a jitted function grows once, then never
    again (or again only when a new input shape forces a retrace).

    ## Example
    ```python
    n_evals = 0

    def rhs(y, t):
        global n_evals
        n_evals += 1
        return -y * t, y

    ys = lax.scan(rhs, y0, ts)
    ```

    ## Use instead
    ```python
    def rhs(carry, t):
        y, n_evals = carry
        return (-y * t, n_evals + 1), y

    (y, n_evals), ys = lax.scan(rhs, (y0, 0), ts)
    ```
    Thread state through arguments and return values, or use
    `jax.debug.callback` for a side effect that must run on every call.

    ## Fix safety
    No automatic fix: moving the state into the function's inputs and outputs
    changes its signature and every caller.
    """

    confirm = "global-write"
    summary = "rebinding a global or mutating an outer container inside a traced function runs only at trace time"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for facts, fn, writes in traced_writes(m, staged=True):
            g, n = facts.bindings.declarations(fn)
            for w in writes:
                what = self._outer_write(facts, fn, w, g, n)
                if what is None:
                    continue
                msg = (f"`{w.describe()}` {what} inside {fn.trace_description()}; it runs once at trace time, "
                       f"not on every call — thread the state through arguments and return values")
                strict = None
                if trace_counter(m, fn, w):
                    strict = TRACE_COUNTER_BASIS
                yield ctx.finding(self, w.node, msg, confidence=fn.confidence, strict=strict)

    @staticmethod
    def _outer_write(facts: PurityFacts, fn: Function, w: Write, g, n) -> Optional[str]:
        """How ``w`` changes state outside the trace, or None."""
        b = facts.bindings
        m = facts.model
        root = w.root
        if m.trace_time_only(w.node, fn):
            return None   # under ``if isinstance(x, Tracer)``: meant to run while tracing
        if scoped_state(m, fn, root.id):
            return None   # set for a ``with`` block and restored in ``finally``
        if w.kind == "call" and metadata_log(m, w.node, fn) and not getattr(b.resolve(root.id, fn), "is_module", True):
            return None   # ``shapes.append(jnp.shape(carry))`` into the tracing function's own list: bookkeeping
        if w.kind in ("name", "del") and w.target is root:
            if root.id in g:
                if lazy_init(m, fn, w.node, root.id) or reached_lazily(m, fn, root.id):
                    return None   # a lazily built singleton (also set by a helper its callers guard)
                where = "rebinds global"
            elif root.id in n:
                scope = b.resolve(root.id, fn)
                if scope is None or not _outlives(facts, fn, scope) or _asserted(scope, root.id):
                    return None
                where = "rebinds nonlocal"
            else:
                return None
            if value_traced(m, fn, w.values) is not None:
                return None   # JAX106
            return f"{where} `{root.id}`"
        info = facts.class_root(fn, root)
        if info is not None and w.target is not root:
            # ``Model.calls += 1``: class attributes are module-level state too
            if facts.frozen_class(info) or (w.kind == "call" and w.method not in LIST_METHODS):
                return None
            if w.kind in ("attr", "item") and value_traced(m, fn, w.values[:1]) is not None:
                return None   # JAX106
            if w.kind == "call" and w.method in STORING_METHODS and value_traced(m, fn, w.values) is not None:
                return None   # JAX106
            return f"mutates class attribute `{ast.unparse(w.target)}`"
        if w.kind not in ("call", "item", "del"):
            return None
        scope = b.outer_variable(root.id, fn)
        if scope is None:
            return None
        if scope.is_module:
            owner = "module-level"
        else:
            if facts.self_root(fn, root) is not None:
                return None   # attributes of an object: JAX105/JAX106
            if not _outlives(facts, fn, scope) or _asserted(scope, root.id):
                return None
            owner = "enclosing-scope"
        if w.kind == "call":
            if w.method == "setdefault" or (w.method in ("update", "add") and _memo(fn, root.id)):
                return None   # memoization (``if key not in SEEN: SEEN.add(key)``): filling it once is the point
            if w.method in LIST_METHODS:
                pass
            elif not (w.direct and b.container_bound(scope, root.id)):
                return None
            if w.method in STORING_METHODS and value_traced(m, fn, w.values) is not None:
                return None   # JAX106
            return f"mutates {owner} `{root.id}`"
        # item store / deletion: the root must be a container (or a NumPy array)
        if not _subscript_chain(w.target):
            return None
        if not (b.container_bound(scope, root.id) or b.numpy_bound(scope, root.id)):
            return None
        if w.kind == "item" and value_traced(m, fn, w.values[:1]) is not None:
            return None   # JAX106
        if w.kind == "item" and not isinstance(w.node, ast.AugAssign) and \
                (_memo(fn, root.id) or reached_lazily(m, fn, root.id)):
            return None   # memoization: ``if key not in CACHE: CACHE[key] = ...`` (or around the helper's call)
        return f"mutates {owner} `{root.id}`"


TRACE_COUNTER_BASIS = "an integer counter that says it counts traces or compilations: the trace-time effect is the point"

# words that say a counter counts traces or compilations (``TRACES["n"]``, ``num_compiles``,
# ``print("compiles =", COUNT["n"])``): the counter's name, its key, or the text it is shown with
TRACE_COUNT_WORDS = frozenset({"trace", "traces", "traced", "tracing", "retrace", "retraces", "retraced",
                               "retracing", "compile", "compiles", "compiled", "compiling", "compilation",
                               "compilations", "recompile", "recompiles", "recompilation", "recompilations"})


def _words(text: str) -> List[str]:
    """``num_traces`` -> num, traces; ``traceCount`` -> trace, count; ``"compiles ="`` -> compiles."""
    text = re.sub(r"([a-z])([A-Z])", r"\1_\2", text)
    return [t for t in re.split(r"[^A-Za-z]+", text.lower()) if t]


def _says_traces(text: str) -> bool:
    return any(t in TRACE_COUNT_WORDS for t in _words(text))


def trace_counter(m: SemanticModel, fn: Function, w: Write) -> bool:
    """Is ``w`` a deliberate trace counter: an integer literal added to a name, an item or a
    class attribute (``TRACES["n"] += 1``, ``global n_compiles; n_compiles += 1``) that the
    traced function reads nowhere else, whose name or key says it counts traces or
    compilations, or that untraced code shows or asserts with text that says so
    (``print("compiles =", COUNT["n"])``)?  It exists to count how often JAX traces the
    function: running once per trace is what it measures.  (Public: the same holds for a
    counter on ``self``, which JAX105 reports.)"""
    node = w.node
    if isinstance(node, ast.AugAssign):
        if not isinstance(node.op, ast.Add):
            return False
        step = node.value
    elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) \
            and isinstance(node.value.op, ast.Add) and ast.dump(node.value.left) == ast.dump(node.targets[0]):
        step = node.value.right
    else:
        return False
    if not (isinstance(step, ast.Constant) and type(step.value) is int and step.value > 0):
        return False
    target, root = w.target, w.root
    if not (target is root or _subscript_chain(target) or isinstance(target, ast.Attribute)):
        return False
    # read nowhere else in the traced function (the increment's own target aside): the name, or
    # for an attribute (``self.num_traces``, ``Model.num_traces``) that attribute of the root
    own = {id(x) for x in ast.walk(target)}
    # (Attribute and Name nodes are not indexed by type: walk the function's own nodes)
    if isinstance(target, ast.Attribute):
        for x in fn.walk():
            if x.__class__ is ast.Attribute and x.attr == target.attr and isinstance(x.value, ast.Name) \
                    and x.value.id == root.id and id(x) not in own:
                return False
    else:
        for x in fn.walk():
            if x.__class__ is ast.Name and x.id == root.id and id(x) not in own:
                return False
    texts = [root.id]
    if isinstance(target, ast.Attribute):
        texts.append(target.attr)
    e = target
    while isinstance(e, ast.Subscript):
        if isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, str):
            texts.append(e.slice.value)
        e = e.value
    if any(_says_traces(t) for t in texts):
        return True
    # shown or asserted outside traced code with words that say so
    for node in ast.walk(m.tree):
        if not isinstance(node, (ast.Call, ast.Assert, ast.JoinedStr)):
            continue
        if not any(isinstance(x, ast.Name) and x.id == root.id and isinstance(x.ctx, ast.Load)
                   for x in ast.walk(node)):
            continue
        scope = m.scope_of(node)
        if scope is not None and scope.under_trace:
            continue
        if any(isinstance(x, ast.Constant) and isinstance(x.value, str) and _says_traces(x.value)
               for x in ast.walk(node)):
            return True
    return False


def _asserted(scope: Function, name: str) -> bool:
    """Does ``scope`` (the function owning ``name``) assert on it -- ``assert num_traces == 1``,
    ``self.assertEqual(len(witness), 1)``?  Then the trace-time effect is what it checks:
    a test counting traces, where running once per trace is the point.  A name bound from
    it (``count = len(witness)``) stands for it."""
    names = {name}
    for node in scope.walk():
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name
                                                for x in ast.walk(node.value)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in scope.walk():
        if isinstance(node, ast.Assert):
            exprs = [node.test]
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and \
                (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id).lstrip("_") \
                .lower().startswith("assert"):
            exprs = list(node.args) + [k.value for k in node.keywords]
        else:
            continue
        if any(isinstance(x, ast.Name) and x.id in names for e in exprs for x in ast.walk(e)):
            return True
    return False


def _memo(fn: Function, name: str) -> bool:
    """Is ``name`` used as a memo cache in ``fn``: a membership test
    (``key in name``) or a lookup with ``name.get(key)``?"""
    for call in fn.of_type(ast.Call):
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name) \
                and f.value.id == name:
            return True
    for node in fn.of_type(ast.If, ast.IfExp, ast.While, ast.Assert, ast.BoolOp, ast.UnaryOp):
        test = getattr(node, "test", node)
        for c in ast.walk(test):
            if isinstance(c, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in c.ops) \
                    and any(isinstance(x, ast.Name) and x.id == name for x in c.comparators):
                return True
    return False


def _outlives(facts: PurityFacts, fn: Function, scope: Function) -> bool:
    """Does a side effect of ``fn`` on state of the enclosing function ``scope``
    go wrong?  Always for a loop body or a ``vmap``ped function (it runs once
    per trace, not per iteration or element); for other traced functions only
    when ``scope`` runs eagerly and keeps using the traced function (a loop, or
    it escapes): inside one trace, or for a single use, the effect happens once
    per call either way."""
    if facts.iterative(fn):
        return True
    if facts.in_traced(scope):
        return False
    top = facts.top_function(fn, scope)
    return top is not None and facts.reused(scope, top)


def _subscript_chain(e: ast.AST) -> bool:
    """``a[k]``, ``a[k][j]``: subscripts all the way down to the root name."""
    if not isinstance(e, ast.Subscript):
        return False
    while isinstance(e, ast.Subscript):
        e = e.value
    return isinstance(e, ast.Name)
