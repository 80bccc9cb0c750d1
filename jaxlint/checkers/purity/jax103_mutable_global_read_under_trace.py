from __future__ import annotations

import ast
import re
from typing import Dict, Iterator, Optional, Set, Tuple

from ...analysis import Function, SemanticModel
from .bindings import LIST_METHODS, VARIABLE_KINDS, Mutation, is_flags_qualname, store_targets
from .facts import PurityFacts, purity_for
from .idioms import lazy_init, metadata_log, scoped_state
from ..base import Context, Finding, TracedCodeRule, register, traced_functions

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@register
class MutableGlobalReadUnderTrace(TracedCodeRule):
    """
    ## What it does
    Flags a staged traced context (`jax.jit`, a `lax` loop body, `vmap`, a
    Flax module method, or a helper called from one) that reads a
    module-level or closed-over name whose value can change after tracing:

    - a name rebound elsewhere: by a function with a `global` (or `nonlocal`)
      statement, by a later top-level assignment, or in a loop after the
      traced function was defined;
    - a list/dict/set (or an object's attribute) that other code mutates,
      such as a `CONFIG` dict changed by `set_temperature()`;
    - command-line flag values (`FLAGS.batch_size`, absl flag holders) that
      a function of the module sets again (`FLAGS.lr = lr` in a sweep,
      `_DECAY.value = 0.99`, `FLAGS.unparse_flags()`), and an argparse
      namespace held in a global that code writes again (`args.lr = ...`).

    Names bound once and never changed — including `jnp` arrays built at
    import time, upper-case constants, optimizers and models — are not
    flagged, and neither are flags or an argparse namespace that are only
    parsed once at start-up:
    they are constants by the time anything is traced. Nor is a global that
    the one function tracing the reader sets first, from values that do not
    depend on its arguments (`global BATCH; BATCH = n_devices * 8` and then
    `jax.jit(gen_data)`): every trace sees the same value. Nor is a name
    whose every binding is the same literal (`dim_in = 28 ** 2` run again
    when a notebook cell is re-run): the rebinding changes nothing. Nor is an
    object whose fields the other writers change when the traced function
    itself sets those fields, as statements of its own body, before it reads
    them (`state.T = t; ...; return f(state)`): it reads its own values.

    ## Why is this bad?
    In PyTorch, `w - learning_rate * g` reads the current `learning_rate`
    on every step. A `jax.jit` function reads globals only while it is
    traced: their values are baked into the compiled program as constants.
    When the global later changes (`decay_learning_rate()`), the jitted
    function keeps using the old value, silently, until something else
    forces a retrace.

    ## Profiles
    A container whose only writes are a registration function storing its
    arguments under a key (`def register_env(name, ctor): ENVS[name] = ctor`)
    is a registry filled at import, before anything is traced: reading it in
    traced code is reported in the strict profile (`--strict`) only. So is a
    global whose only writers are setter functions (`def configure(tol):
    _COND["tol"] = float(tol)`: they store a setting the caller chose -- a
    parameter, a literal, a scalar conversion of one; not a value computed
    from data, `MEAN = data.mean(0)`, nor one stepped on from the old) or
    initializers (`def load_tables(): global TABLE; TABLE = ...`: no
    arguments, no read of the old value and no draw, clock or iterator --
    every call builds the same state) that this module never shows running after the traced function
    was first called: configuration set before tracing, like
    `jax.config.update`, is what JAX expects. A setter a loop runs between calls of the jitted
    function, a writer that steps the value on (`lr = lr * factor`), or one
    that traces the reader itself after setting the value is reported by
    default.

    ## Example
    ```python
    learning_rate = 0.1

    @jax.jit
    def sgd_step(w, g):
        return w - learning_rate * g

    def decay():
        global learning_rate
        learning_rate *= 0.5
    ```

    ## Use instead
    ```python
    @jax.jit
    def sgd_step(w, g, learning_rate):
        return w - learning_rate * g
    ```
    Pass values that change as arguments (traced, so no recompilation), or
    mark genuinely static configuration with `static_argnames` so a change
    triggers a recompile.

    ## Fix safety
    No automatic fix: adding a parameter changes the function's signature
    and every call site.
    """

    confirm = "global-read"
    summary = "a traced function reads a global or closed-over value that changes later; the traced value is stale"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        facts: Optional[PurityFacts] = None
        variables: Optional[Set[str]] = None
        cache: Dict[Tuple[int, str, int], Optional[str]] = {}
        possible: Dict[Tuple[int, str], bool] = {}
        text = ctx.source.text
        for fn in traced_functions(ctx):
            if facts is None:
                facts = purity_for(m)
                variables = facts.bindings.outer_variables() | {"FLAGS"}
            if not facts.cached(fn):
                continue
            b = facts.bindings
            g, n = b.declarations(fn)
            # the identifiers written in the function, before any tree walk
            if fn.is_module:
                continue
            start, end = ctx.source.node_span(fn.node)
            mentioned = variables.intersection(_IDENT.findall(text, start, end))
            flags = "FLAGS" in mentioned and bool(b.flags_rewritten())
            reasons: Dict[str, Tuple[Function, str]] = {}
            for name in mentioned:
                if name in fn.locals and name not in g and name not in n:
                    continue
                scope = b.resolve(name, fn)
                if scope is None or scope is fn:
                    continue
                if not scope.is_module and facts.in_traced(scope):
                    continue   # a value of the same trace
                if (name in g or name in n) and name in b.locally_stored(fn):
                    continue   # the function rebinds it itself: JAX102
                pkey = (id(scope), name)
                maybe = possible.get(pkey)
                if maybe is None:
                    maybe = possible[pkey] = self._may_change(b, scope, name)
                if not maybe:
                    continue
                key = (id(scope), name, id(fn))
                if key not in cache:
                    cache[key] = self._changes(facts, fn, scope, name)
                if cache[key] is not None:
                    reasons[name] = (scope, cache[key])
            if not reasons and not flags:
                continue
            write_roots = {id(w.root) for w in facts.writes(fn)}
            for node in fn.walk():
                t = node.__class__
                if t is ast.Attribute:
                    v = node.value
                    written = b.flags_rewritten()
                    line = written.get(node.attr, written.get("*"))
                    if flags and line and v.__class__ is ast.Attribute and v.attr == "FLAGS" \
                            and isinstance(node.ctx, ast.Load) and is_flags_qualname(m.qualname(v, fn)):
                        flags = False
                        msg = (f"`{ast.unparse(node)}` is a command-line flag read inside {fn.trace_description()} "
                               f"and set again at line {line}; its value at trace time "
                               f"is baked in — pass it as an argument")
                        yield ctx.finding(self, node, msg, confidence=fn.confidence)
                    continue
                if t is not ast.Name or node.ctx.__class__ is not ast.Load:
                    continue
                found = reasons.pop(node.id, None)
                if found is None:
                    continue
                if id(node) in write_roots:
                    reasons[node.id] = found   # the receiver of a write, not a read
                    continue
                if m.trace_time_only(node, fn):
                    reasons[node.id] = found   # under ``if isinstance(x, Tracer)``: trace-time on purpose
                    continue
                scope, why = found
                where = "module-level" if scope.is_module else "closed-over"
                strict = REGISTRY_BASIS if isinstance(why, _Registry) else \
                    SETTER_BASIS if isinstance(why, _Setter) else None
                msg = (f"{where} `{node.id}` is read inside {fn.trace_description()} but {why}; the value at trace "
                       f"time is baked in and later changes are ignored — pass it as an argument")
                yield ctx.finding(self, node, msg, confidence=fn.confidence, strict=strict)

    @staticmethod
    def _may_change(b, scope: Function, name: str) -> bool:
        """A cheap necessary condition for :meth:`_changes`."""
        bs = [x for x in b.scope(scope).get(name) if x.kind in VARIABLE_KINDS]
        if not bs:
            if scope.is_module:
                return not b.scope(scope).get(name) and bool(b.writers_of(scope, name))
            return name in scope.param_nodes and bool(b.writers_of(scope, name))
        if len(bs) > 1 or bs[0].loops or (not scope.is_module and name in scope.param_nodes):
            return True
        return bool(b.writers_of(scope, name)) or b.flag_kind(scope, name) is not None

    @staticmethod
    def _changes(facts: PurityFacts, reader: Function, scope: Function, name: str) -> Optional[str]:
        """Why ``name`` (bound in ``scope``) can change after ``reader`` is traced, or None."""
        b = facts.bindings
        sb = b.scope(scope)
        if not (sb.is_variable(name) or (not scope.is_module and name in scope.param_nodes)
                or (scope.is_module and name in b.global_names() and not sb.get(name))):
            return None
        flag = b.flag_kind(scope, name)
        if flag == "flags":
            written = b.flags_rewritten()
            keys = {name, "*"} | {a.attr for a in reader.walk()
                                  if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)
                                  and a.value.id == name}
            lines = [written[k] for k in keys if k in written]
            return f"holds command-line flags, set again at line {min(lines)}" if lines else None
        # (an argparse namespace parsed at start-up is configuration like flags: only a later
        # write -- ``args.lr = ...``, a rebinding -- makes a traced read stale, which the general
        # analysis below sees)
        top = facts.top_function(reader, scope)
        if top is None:
            return None

        def after(line, loops) -> bool:
            if scope.is_module:
                return b.changes_after_use(scope, line, loops, top.node, b.reaching_names(top))
            return facts.stale_after(scope, top, line, loops)

        container = None
        registry: Optional[_Registry] = None
        setter: Optional[_Setter] = None
        for mut in b.writers_of(scope, name):
            if _inside(mut.fn, reader):
                continue   # the reader's own writes are JAX102/JAX106
            if mut.kind == "global" and lazy_init(facts.model, mut.fn, mut.node, name):
                continue   # set once, from None to the object: a lazily built singleton
            if scoped_state(facts.model, mut.fn, name):
                continue   # set for a ``with`` block and restored in ``finally``
            if mut.kind == "call" and not scope.is_module and metadata_log(facts.model, mut.node, mut.fn):
                continue   # a log of shapes: whatever the trace saw of it, it only sized things
            if mut.fn is scope:
                if not after(mut.line, b.loops_around(scope, mut.node)):
                    continue   # set up before anything could have traced the reader
            elif not scope.is_module and facts.in_traced(mut.fn):
                continue   # a sibling traced during the same call of the enclosing function
            if mut.kind == "global" and _set_before_own_trace(b, reader, mut):
                continue   # set once by the function that then traces the reader
            if mut.kind == "attr" and not _reads_written_attr(reader, name, mut):
                continue   # ``self._step = ...`` while the reader reads only ``self._env``
            if scope.is_module and not mut.fn.is_module and _sets(mut, name) and \
                    not _registration(facts, mut) and not _insertion_of_arguments(mut) and \
                    not _runs_reader(b, mut.fn, reader, top) and not _setter_runs_after(b, mut.fn, top) and \
                    (mut.kind == "global" or _mutates(mut, container if container is not None else
                                                      (b.container_bound(scope, name) or b.numpy_bound(scope, name)))):
                # ``def configure(x): global _COND; _COND = x``: a setter whose call after the reader
                # has run this module never shows -- configuration set before tracing, like
                # ``jax.config.update`` -- unless some call runs it between two calls of the reader
                verb = "rebound" if mut.kind == "global" else "mutated"
                setter = setter or _Setter(f"is {verb} by {mut.fn.display()} (line {mut.line})")
                continue
            if mut.kind in ("global", "nonlocal"):
                return f"is rebound by {mut.fn.display()} (line {mut.line})"
            if container is None:
                container = b.container_bound(scope, name) or b.numpy_bound(scope, name)
            if _mutates(mut, container) and not _registration(facts, mut):
                where = "at module level" if mut.fn.is_module else f"by {mut.fn.display()}"
                if _insertion_of_arguments(mut):
                    registry = registry or _Registry(f"is mutated {where} (line {mut.line})")
                    continue
                return f"is mutated {where} (line {mut.line})"
        rb = b.rebinding_after(scope, name, after)
        if rb is not None and not _one_literal_value(b, scope, name):
            return f"is rebound at line {rb.line}"
        return registry or setter


def _literal(e: Optional[ast.AST]) -> bool:
    """A value written out in literals: ``28 ** 2``, ``(64, 64)``, ``"adam"``, ``-1e-3``."""
    if isinstance(e, ast.Constant):
        return True
    if isinstance(e, ast.UnaryOp):
        return _literal(e.operand)
    if isinstance(e, ast.BinOp):
        return _literal(e.left) and _literal(e.right)
    if isinstance(e, ast.Tuple):
        return all(_literal(x) for x in e.elts)
    return False


def _one_literal_value(b, scope: Function, name: str) -> bool:
    """Every binding of ``name`` stores the same literal value (a notebook cell that runs
    ``dim = 28 ** 2`` again), or the same item of the same call of a library constructor with
    literal arguments (``opt_init, opt_update = optax.adamw(0.01)`` in each test): rebinding it
    changes nothing a trace could have baked in."""
    bs = b.scope(scope).get(name)
    if not bs or any(x.kind != "assign" for x in bs):
        return False
    if all(_literal(x.value) for x in bs):
        first = ast.dump(bs[0].value)
        return all(ast.dump(x.value) == first for x in bs[1:])
    stmts = [x.stmt for x in bs]

    def constant(n: str) -> bool:   # ``lr = 0.01`` (every binding the same literal): a constant argument
        got = b.scope(scope).get(n)
        return n != name and bool(got) and all(x.kind == "assign" and _literal(x.value) for x in got) \
            and len({ast.dump(x.value) for x in got}) == 1
    if len(bs) < 2 or any(not isinstance(s, ast.Assign) or not _literal_construction(s.value, constant)
                          for s in stmts):
        return False
    first = (ast.dump(stmts[0].value), getattr(bs[0], "path", None))
    return all((ast.dump(s.value), getattr(x, "path", None)) == first for s, x in zip(stmts[1:], bs[1:]))


_IMPURE_ROOTS = ("random.", "time.", "datetime.", "uuid.", "os.", "secrets.")


def _literal_construction(e: ast.AST, constant=lambda n: False) -> bool:
    """``optax.adamw(0.01)``, ``nn.initializers.normal(stddev=0.02)``, ``optimizers.adam(step_size=lr)``
    with ``lr`` a constant: a call of a module's attribute with literal (or constant) arguments
    only -- the same call makes an equivalent object."""
    if not isinstance(e, ast.Call) or not isinstance(e.func, ast.Attribute):
        return False
    root = e.func
    while isinstance(root, ast.Attribute):
        root = root.value

    def fixed(a: ast.AST) -> bool:
        return _literal(a) or (isinstance(a, ast.Name) and constant(a.id))
    dotted = ast.unparse(e.func)
    if dotted.startswith(_IMPURE_ROOTS) or ".random." in dotted:
        return False    # ``np.random.rand(3)``, ``time.time()``: a new value at each call
    return isinstance(root, ast.Name) and all(fixed(a) for a in e.args) \
        and all(k.arg is not None and fixed(k.value) for k in e.keywords)


def _mutates(mut: Mutation, container: bool) -> bool:
    node = mut.node
    if mut.kind == "call":
        if mut.method in LIST_METHODS:
            return True
        return container and isinstance(node.func.value, ast.Name)
    if mut.kind == "item":
        return container
    return mut.kind == "attr"


def _reads_written_attr(reader: Function, name: str, mut: Mutation) -> bool:
    """Does ``reader`` read an attribute of ``name`` that ``mut`` writes?
    (Unknown shapes count as yes.)"""
    written = set()
    for t in store_targets(mut.node):
        e = t
        while isinstance(e, (ast.Attribute, ast.Subscript)):
            if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == name:
                written.add(e.attr)
            e = e.value
    if not written:
        return True
    # ``state.T_e = T`` as a statement of the reader's own body: later reads of ``state.T_e``
    # there see the reader's value, whatever another function wrote
    own = {}
    body = getattr(reader.node, "body", None)
    for st in body if isinstance(body, list) else ():
        if st.__class__ is ast.Assign:
            for t in st.targets:
                if t.__class__ is ast.Attribute and t.value.__class__ is ast.Name and t.value.id == name:
                    own.setdefault(t.attr, st.end_lineno or st.lineno)

    def seen(attr: str, line: int) -> bool:
        return attr in written and not (attr in own and own[attr] < line)

    through_attr = set()
    stepped = {id(n.target) for n in reader.walk() if n.__class__ is ast.AugAssign}
    for node in reader.walk():
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            if (isinstance(node.ctx, ast.Load) or id(node) in stepped) and seen(node.attr, node.lineno):
                return True
            through_attr.add(id(node.value))
    # a bare use (``f(self)``) may read any attribute
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
               and id(node) not in through_attr and any(seen(a, node.lineno) for a in written)
               for node in reader.walk())


class _Registry(str):
    """A reason whose only mutations register entries (``_insertion_of_arguments``)."""


# why a read of a registry filled by a registration function belongs to the strict profile
REGISTRY_BASIS = ("the only writes are a registration function storing its arguments under a key "
                  "(`REGISTRY[name] = ctor`): registries are filled at import, before anything is traced")


# why a read of a global that only setter functions change belongs to the strict profile
SETTER_BASIS = ("the only writes are by functions this module never shows running after the traced code "
                "(a setter such as `configure(...)`, an initializer such as `load_tables()`): configuration set "
                "before tracing, like "
                "`jax.config.update`, is what JAX expects")


class _Setter(str):
    """Why the global can change, when its only writers are setter functions (strict)."""


def _sets(mut: Mutation, name: str) -> bool:
    """The write stores a setting the caller chose: a parameter of the writing function as
    given, or converted to a Python scalar (``_COND = cond``, ``CONFIG["t"] = float(t)``), or a
    literal -- a setter.  ``lr = lr * factor``, ``count += 1``, ``.append(x)`` step the value on
    from the last one (a progression, run again and again), and ``MEAN = data.mean(0)`` computes
    state from data (a refit, run when new data comes): neither is configuration.  An entry
    stored under a key the caller chose (``PERMITTIVITY_FNS[name] = fn``) is a registration:
    configuration too."""
    node = mut.node
    if not isinstance(node, ast.Assign) or node.value is None:
        return False
    t = node.targets[0] if len(node.targets) == 1 else None
    if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id in mut.fn.param_nodes \
            and not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value)):
        return True     # ``REGISTRY[name] = make(path)``: an entry under the key the caller chose
    return _setting(node.value, mut.fn) or _initializer(mut.fn, name)


def _initializer(fn: Function, name: str) -> bool:
    """``def load_tables(): global TABLE; TABLE = jnp.asarray(np.load(PATH))``: a writer that
    takes no arguments and never reads the old value computes the same state on every call (it
    loads or builds it from what the module fixes) -- an initializer, run before the state is
    used, like a setter.  One that reads the old value (``def decay(): global lr; lr = lr * 0.9``)
    steps it on: a progression."""
    if fn.is_module or fn.is_lambda or fn.all_params():
        return False
    bases = set()
    first = None        # where the function first stores ``name``: reads after it read the new value
    for a in fn.walk():
        if a.__class__ is ast.AugAssign:
            t = a.target
            while isinstance(t, (ast.Subscript, ast.Attribute)):
                t = t.value
            if isinstance(t, ast.Name) and t.id == name:
                return False    # ``TABLE += x``: stepped on from the old value
        elif a.__class__ in (ast.Assign, ast.AnnAssign):
            for t in (a.targets if a.__class__ is ast.Assign else [a.target]):
                while isinstance(t, (ast.Subscript, ast.Attribute)):
                    t = t.value
                    bases.add(id(t))
                if isinstance(t, ast.Name) and t.id == name and (first is None or a.lineno < first):
                    first = a.lineno
    nodes = list(ast.walk(fn.node))     # (nested functions and lambdas too)
    if any(n.__class__ is ast.Call and _varies_per_call(n.func) for n in nodes):
        return False    # ``NOISE = np.random.randn(3)``, ``STEP = next(it)``: a new value every call
    # (the old value is read where a load comes no later than the first store: ``lr = lr * 0.9``)
    return not any(n.__class__ is ast.Name and n.id == name and n.ctx.__class__ is ast.Load
                   and id(n) not in bases and (first is None or n.lineno <= first) for n in nodes)


# calls whose result differs from call to call: draws, clocks, iterators, input
_VARYING_CALL = re.compile(r"(^|\.)(random|rng|time|datetime|uuid|secrets)\.|^(next|input)$")


def _varies_per_call(func: ast.AST) -> bool:
    try:
        text = ast.unparse(func)
    except Exception:   # pragma: no cover - unparse of a valid node does not fail
        return True
    return bool(_VARYING_CALL.search(text))


_CONVERSIONS = frozenset({"float", "int", "bool", "str", "tuple", "frozenset"})


def _setting(v: ast.AST, fn: Function, depth: int = 0) -> bool:
    """A parameter of ``fn``, a literal, a scalar conversion of one, or a display of those (also
    through a local bound once to one: ``fn_map = {"sample": sample}; _BACKENDS[name] = fn_map``)."""
    if isinstance(v, ast.Name):
        if v.id in fn.param_nodes:
            return True
        bound = [a for a in fn.of_type(ast.Assign) if any(isinstance(t, ast.Name) and t.id == v.id for t in a.targets)]
        return depth < 2 and len(bound) == 1 and len(bound[0].targets) == 1 and \
            _setting(bound[0].value, fn, depth + 1)
    if _literal(v):
        return True
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in _CONVERSIONS \
            and len(v.args) == 1 and not v.keywords:
        return _setting(v.args[0], fn, depth)
    if isinstance(v, (ast.Tuple, ast.List)):
        return all(_setting(e, fn, depth) for e in v.elts)
    if isinstance(v, ast.Dict):
        return all(k is not None and _setting(x, fn, depth) for k, x in zip(v.keys, v.values))
    return False


def _runs_reader(b, writer: Function, reader: Function, top: Function) -> bool:
    """``writer`` calls or transforms the reader itself after setting the value
    (``SCALE = scale; return jax.jit(make_scaled)(key)``): every call of the writer runs the
    reader again, after a new value."""
    start, end = writer.node.lineno, getattr(writer.node, "end_lineno", None) or writer.node.lineno
    if any(c.caller is writer or (c.caller is None and start <= getattr(c.node, "lineno", 0) <= end)
           for c in reader.contexts):
        return True
    names = {reader.name, top.name}
    return any(c.func.__class__ is ast.Name and c.func.id in names for c in b.program_calls(writer))


def _setter_runs_after(b, writer: Function, top: Function) -> bool:
    """Does some call of ``writer`` in this module run after ``top`` (the reader's outermost
    function) may have been traced, and before it runs again?  A call in a loop that also
    runs the file's functions, or between two such calls (``changes_after_use`` at the call's
    place).  A writer this module cannot name (a method, a nested function) or never calls
    gives no such evidence."""
    if writer.parent is None or not writer.parent.is_module or writer.is_lambda or writer.cls is not None:
        return False
    for s in b.model.functions:
        for c in b.program_calls(s):
            if c.func.__class__ is ast.Name and c.func.id == writer.name and \
                    b.changes_after_use(s, c.lineno, b.loops_around(s, c), top.node,
                                        b.reaching_names(top) if s.is_module else None):
                return True
    return False


def _insertion_of_arguments(mut: Mutation) -> bool:
    """``def register_env(name, ctor): _ENVS_REGISTRY[name] = ctor``: the write stores one
    parameter of the writing function under another -- a registration, conventionally called at
    import time."""
    fn, node = mut.fn, mut.node
    if fn.is_module or not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return False
    t = node.targets[0]
    return isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id in fn.param_nodes \
        and isinstance(node.value, ast.Name) and node.value.id in fn.param_nodes


def _registration(facts: PurityFacts, mut: Mutation) -> bool:
    """``REGISTRY[key] = fn; return fn``: a registering decorator fills the
    container at import time, before anything is traced."""
    fn = mut.fn
    node = mut.node
    if mut.kind == "call":
        values = list(node.args)
    elif isinstance(node, ast.Assign):
        values = [node.value]
    else:
        return False
    for v in values:
        if isinstance(v, ast.Name) and v.id in fn.param_nodes and facts.returns_name(fn, v.id):
            return True
    return False


def _inside(fn: Function, outer: Function) -> bool:
    s = fn
    while s is not None:
        if s is outer:
            return True
        s = s.parent
    return False


def _first_called_after(b, reader: Function, writer: Function, line: int, end: int) -> bool:
    """``reader`` (a module-level function jitted where it is defined) is called only by
    ``writer``, after ``line``: its first call -- its trace -- sees the value set there."""
    if reader.parent is None or not reader.parent.is_module or reader.is_lambda:
        return False
    calls = [(c, s) for s in b.model.functions for c in b.program_calls(s)
             if c.func.__class__ is ast.Name and c.func.id == reader.name]
    return bool(calls) and all(s is writer and line < c.lineno <= end for c, s in calls)


def _set_before_own_trace(b, reader: Function, mut: Mutation) -> bool:
    """``global BATCH; BATCH = len(jax.devices()) * 8`` and then ``jax.jit(gen_data)``
    in the same function: the function that rebinds the global is the one that
    traces the reader -- every transform of the reader is applied there, after
    the rebinding -- and the new value does not depend on that function's
    arguments, so every call sets the same value before the first trace."""
    writer = mut.fn
    if writer.is_module or not reader.contexts or b.loops_around(writer, mut.node):
        return False
    end = getattr(writer.node, "end_lineno", None) or writer.node.lineno
    for c in reader.contexts:
        line = getattr(c.node, "lineno", 0)
        if c.caller not in (None, writer) or not mut.line < line <= end:
            if _first_called_after(b, reader, writer, mut.line, end):
                continue   # ``@jax.jit def step``: traced at its first call, and every call follows the set
            return False   # traced elsewhere too, or before the rebinding
    node = mut.node
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is None:
        return False   # ``x += 1``, a loop target...: changes on every call
    params = set(writer.param_nodes)
    return not any(isinstance(n, ast.Name) and n.id in params for n in ast.walk(value))
