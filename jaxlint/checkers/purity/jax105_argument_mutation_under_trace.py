from __future__ import annotations

import ast
from typing import Iterator, Optional, Set

from ...analysis import knowledge as K
from ...analysis import CERTAIN, CONTAINER, NUMPY, Function, SemanticModel
from ...analysis.objects import mutable_by_design, tuple_tree
from .bindings import AMBIGUOUS_METHODS, LIST_METHODS
from .facts import (PurityFacts, Write, attribute_observed, reset_before_return, restores_entry_value, traced_writes,
                    value_traced)
from .jax102_global_write_under_trace import TRACE_COUNTER_BASIS, trace_counter
from ..base import Context, Finding, TracedCodeRule, register


@register
class ArgumentMutationUnderTrace(TracedCodeRule):
    """
    ## What it does
    Flags a traced function that mutates one of its parameters when that
    parameter is a Python container or object owned by the caller:
    `.append/.extend/.insert/.pop/.update/.setdefault/.clear`, `arg[k] = v`
    on a dict or list argument, and `arg.attr = v` (including `self.attr = v`
    in a jitted method; Flax `setup` is exempt). Helpers count too: a helper
    that mutates its parameter is flagged when a traced function passes one
    of its own parameters into it.

    Not flagged: item assignment on an array (that is JAX301), a parameter
    the function rebinds first (`state = dict(state)`), a parameter the
    function returns (also through an alias bound once: `out = particles`;
    `out.t = t`; `return out`), an entry the function reads back and returns under the
    same key in a new dict, a `d.pop(k)` whose value is used in a function
    traced only by inference (a read; under a transform applied here it still
    empties the caller's dict in eager runs and not in jitted ones), an
    attribute filled once under `if self.x is None:` (a cache) or set to a
    tree of axis-name tuples (`tree_map(lambda x: tuple(x.names), cache)`:
    static metadata, the same on every trace) or to a literal or a
    module-level function, class or imported name (`self.update_fn = _full_update` chosen by
    static configuration: the same value on every trace, so storing it once
    loses nothing), or to a callable built only from such values and the
    receiver's own methods (`self._step_fn = lambda a, b: self._update(a, b,
    grad_fn)` with `grad_fn = jax.grad(self._loss)`; `jax.vmap(_clip)`), a
    method traced only because traced callers call it on objects they have
    just built (`op = Identity(shape); op.to(device)`: the object belongs to
    that trace), an attribute put back before the function returns
    (`backup = self.state` ... `self.state = backup`; `self.mode = "eval"`
    after a temporary change: the object ends as every call leaves it), the
    carry of a
    `lax` loop body (JAX builds it fresh), `**kwargs`, and Flax NNX code
    (`nnx.jit` propagates object mutations).

    A write into a parameter that nothing visible observes is reported only
    in the strict profile (`--strict`): the divergence (eager
    runs change the caller's object, traced runs do not) shows only to a
    caller that reads the object afterwards. Reported by default: a caller
    in the module reads the object it passed after the call (or passes it
    again on the next iteration of a loop), the write folds the place's old
    value into the new (`ema[k] = d * ema[k] + ...`, `n += 1`,
    `log.append(loss)`: running state meant to persist), or it takes data
    out (`batch.pop("labels")`, `del d[k]`: eager runs lose it). A helper
    that mutates an argument for a traced caller in another module
    is reported only in the strict profile (`--strict`): whether that caller
    reads the object back inside the same trace, where it sees the mutation,
    is not visible from the helper's module. So is an integer trace counter
    on `self` (`self.num_traces += 1`, read nowhere else in the trace; see
    JAX102): counting traces is its point. So is an attribute of `self` that
    no code this module shows running outside a trace reads (module level,
    and the functions and methods it calls): `self.n_updates += 1` read only
    by its own update, a stateful object that sets its parameters on `self`
    and reads them back in the same jitted call. The stale value is seen by
    nothing visible, though another module might read it.

    ## Why is this bad?
    In PyTorch, `state["step"] += 1` or `metrics.append(loss)` inside the
    training step updates the caller's dict every step. `jax.jit`, `grad` and
    `vmap` flatten your arguments into arrays and rebuild *new* containers
    for the traced function, so the caller's dict is never updated; and the
    Python body only runs while tracing, so an attribute set on an object
    (`self.step += 1`) changes once, not on every call.

    ## Example
    ```python
    @jax.jit
    def train_step(state, x, y):
        grads = jax.grad(loss_fn)(state["params"], x, y)
        state["params"] = sgd(state["params"], grads)
        return loss
    ```

    ## Use instead
    ```python
    @jax.jit
    def train_step(state, x, y):
        grads = jax.grad(loss_fn)(state["params"], x, y)
        return {**state, "params": sgd(state["params"], grads)}

    state = train_step(state, x, y)
    ```

    ## Fix safety
    No automatic fix: returning the new value changes the function's outputs
    and every caller.
    """

    confirm = "arg-mutation"
    # confirmation compares the arguments a trace was given; what a method does to its instance
    # is not observed (yet), so a clean run says nothing about it
    unconfirmable = (("mutates `self`", "changes to the instance (`self`) are not observed by confirmation yet, "
                                        "only the arguments are"),)
    summary = "a traced function mutates a container or object argument; the caller never sees the change"

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        for facts, fn, writes in traced_writes(m):
            for w in writes:
                msg = self._self_mutation(facts, fn, w)
                strict = None
                if msg is not None and trace_counter(m, fn, w):
                    strict = TRACE_COUNTER_BASIS     # ``self.num_traces += 1``: counting traces is its point
                elif msg is not None and not attribute_observed(m, fn, w, own_reads=False):
                    strict = UNREAD_STATE_BASIS      # ``self.n_updates += 1`` that nothing eager reads
                if msg is None:
                    msg = self._param_mutation(facts, fn, w)
                    if msg is not None and _helper_of_other_modules(fn):
                        strict = CROSS_MODULE_BASIS
                    elif msg is not None:
                        strict = self._param_basis(facts, fn, w)
                if msg is not None:
                    yield ctx.finding(self, w.node, msg, confidence=fn.confidence, strict=strict)

    # ------------------------------------------------------------ self
    @staticmethod
    def _self_mutation(facts: PurityFacts, fn: Function, w: Write) -> Optional[str]:
        if w.kind not in ("attr", "del") or not isinstance(w.target, ast.Attribute):
            return None
        owner = facts.self_root(fn, w.root)
        if owner is None or not owner.contexts or not facts.staged(fn):
            return None
        if owner.cls is not None and owner.cls.module_kind == "linen" and w.kind == "attr":
            return None   # a linen module is frozen outside setup: JAX611 names that failure, once
        if facts.frozen_class(owner.cls) or facts.nnx_rooted(fn) or facts.setup_like(owner) \
                or facts.built_per_trace(owner.cls) \
                or facts.variable_write(owner.cls, w.target):
            return None
        if w.kind == "attr" and _filled_once(fn, w):
            return None   # ``if self._fn is None: self._fn = jax.jit(...)``: a cache, filled once on purpose
        if _receivers_built_by_callers(facts.model, owner):
            return None   # ``op = Identity(...); op.to(device)``: an object of this very trace
        if w.kind == "attr" and w.values and tuple_tree(facts.model, fn, w.values[0]):
            return None   # a tree of axis-name tuples: the same static metadata on every trace
        if w.kind == "attr" and value_traced(facts.model, fn, w.values[:1]) is not None:
            return None   # a traced value: JAX106
        if w.kind == "attr" and (restores_entry_value(facts.model, fn, w) or reset_before_return(facts.model, fn, w)):
            return None   # put back as it was (``self.state = backup``), or reset before the function returns
        if w.kind == "attr" and isinstance(w.node, ast.Assign) and w.values \
                and _trace_invariant(facts.model, fn, w.values[0]):
            return None   # the same module-level function or constant on every trace: once is enough
        return (f"`{w.describe()}` mutates `{w.root.id}` inside {fn.trace_description()}; it runs once at "
                f"trace time, not on every call — keep the state in arguments and return values")

    # ------------------------------------------------------- parameters
    def _param_mutation(self, facts: PurityFacts, fn: Function, w: Write) -> Optional[str]:
        root = w.root
        p = root.id
        if w.kind == "name" or (w.target is root and w.kind != "call"):
            return None   # rebinding or deleting the name itself
        if p not in fn.param_nodes or p == fn.self_name:
            return None
        if facts.bindings.resolve(p, fn) is not fn:
            return None
        if not self._mutates_container_or_object(facts, fn, w):
            return None
        if w.kind == "call" and w.method == "pop" and _result_used(fn, w.node) and fn.confidence != CERTAIN:
            # ``x = d.pop("k")`` in code traced by inference: an entry taken out to use it.  At a
            # transform's own boundary (``jax.jit`` applied here) it still empties the caller's
            # dict when run eagerly and not when jitted: the two disagree
            return None
        if _returned_rebuilt(fn, p, w):
            return None   # the updated entries are read back and returned under the same keys
        if facts.nnx_rooted(fn) or facts.returns_name(fn, p) or _read_later(fn, p, w) \
                or mutable_by_design(facts.model, w.target if isinstance(w.target, ast.Attribute) else root, fn):
            return None
        if not facts.external_param(fn, p):
            return None
        if _callers_read_back(facts.model, fn, p):
            return None   # a helper filling in its caller's dict, which reads it afterwards, inside the trace
        return (f"`{w.describe()}` mutates argument `{p}` inside {fn.trace_description()}; under a transform "
                f"the caller's object is not updated — return the new value instead")

    @staticmethod
    def _param_basis(facts: PurityFacts, fn: Function, w: Write) -> Optional[str]:
        """Why a parameter mutation belongs to the strict profile: no caller visible here reads
        the object it passed after the call (the divergence between eager and traced runs shows
        only to such a reader)."""
        m = facts.model
        if _removes(w) or _accumulates(m, fn, w) or caller_reads_after(m, fn, w.root.id):
            return None
        return NO_READER_BASIS

    @staticmethod
    def _mutates_container_or_object(facts: PurityFacts, fn: Function, w: Write) -> bool:
        m = facts.model
        p = w.root.id
        if w.kind == "attr" or (w.kind == "del" and isinstance(w.target, ast.Attribute)):
            return True
        if w.kind == "call":
            if w.method in LIST_METHODS:
                return True
            if w.method not in AMBIGUOUS_METHODS or not w.direct:
                return False
            if w.method in ("pop", "setdefault") and w.values and isinstance(w.values[0], ast.Constant) \
                    and isinstance(w.values[0].value, str):
                return True   # a string key: a dict
            call = w.node
            if w.method == "update" and ((call.args and isinstance(call.args[0], (ast.Dict, ast.DictComp)))
                                         or (call.keywords and not call.args)):
                return True   # ``d.update({...})`` / ``d.update(k=v)``: a dict
            return facts.container_param(fn, p)
        # item store / item deletion
        t = w.target
        if not isinstance(t, ast.Subscript):
            return False
        base = t.value
        if m.is_array(base, fn):
            return False   # JAX301
        if base is w.root:
            k = m.kind(base, fn)
            return bool(k & CONTAINER) and not k & NUMPY
        k = m.kind(base, fn)
        if k & CONTAINER and not k & NUMPY:
            return True
        # p["a"]["b"] = v: nested dicts of a dict argument
        e = base
        while isinstance(e, ast.Subscript):
            sl = e.slice
            if not (isinstance(sl, ast.Constant) and isinstance(sl.value, str)):
                return False
            e = e.value
        return e is w.root and facts.container_param(fn, p)


def _trace_invariant(m: SemanticModel, fn: Function, value: ast.expr, _depth: int = 0) -> bool:
    """``self.update_fn = _condition_on`` / ``self.mode = "train"``: a value no call can change,
    so storing it once at trace time is the same as storing it on every call (an idempotent
    write; ``self.n += 1`` is not one).  Invariant: a literal; a module-level function, class
    or imported name; a method of the receiver (``self._update``); a transform of invariant
    functions with literal options (``jax.grad(self._loss, has_aux=True)``,
    ``functools.partial(_step, cfg=True)``); a lambda whose free names are all invariant
    (``lambda x, y: self._update(x, y, grad_fn)`` with ``grad_fn`` bound once, in this
    function, to an invariant value).  A parameter, or anything built from one, is not."""
    if _depth > 4:
        return False
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Name):
        if value.id == fn.self_name or (fn.enclosing_method() is not None
                                        and value.id == fn.enclosing_method().self_name):
            return True   # the receiver itself: the same object on every call
        scope = m.resolve_scope(value.id, fn)
        if scope is None:
            return False
        bs = m.lookup(value.id, scope)
        if not bs:
            return False
        if scope.is_module:
            return all(b.kind in ("def", "class", "import") for b in bs)
        up = fn
        while up is not None and up is not scope:
            up = up.parent
        if up is None:
            return False   # not a name of this function or one around it
        return len(bs) == 1 and bs[0].kind == "=" and not bs[0].path and bs[0].value is not None \
            and _trace_invariant(m, scope, bs[0].value, _depth + 1)
    if isinstance(value, ast.Attribute):
        owner = fn.enclosing_method()
        if owner is not None and owner.cls is not None and isinstance(value.value, ast.Name) \
                and value.value.id == owner.self_name:
            return value.attr in owner.cls.methods   # a bound method: the same code on every call
        return False
    if isinstance(value, ast.Lambda):
        bound = {a.arg for a in ast.walk(value.args) if isinstance(a, ast.arg)}
        free = {n.id for n in ast.walk(value.body) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        return all(name in bound or _trace_invariant(m, fn, ast.Name(id=name, ctx=ast.Load()), _depth + 1)
                   for name in free - bound)
    if isinstance(value, ast.Call):
        q = m.qualname(value.func, fn)
        if not (K.transform_for(q) is not None or q in ("functools.partial",)):
            return False
        return all(_trace_invariant(m, fn, a, _depth + 1) for a in value.args) \
            and all(isinstance(k.value, ast.Constant) for k in value.keywords)
    return False


def _receivers_built_by_callers(m: SemanticModel, method: Function) -> bool:
    """``method`` runs under a trace only as a helper, and every traced caller calls it on an
    object it built itself, in its own body (``op = Identity(shape); op.to(device); return
    op``): the object is made by the same trace that mutates it, so the change is part of
    every object that trace makes -- nothing runs once that should run on every call."""
    if method.cls is None or not method.contexts:
        return False
    for ctx in method.contexts:
        call, caller = ctx.node, ctx.caller
        if ctx.transform != "call" or caller is None or not isinstance(call, ast.Call) \
                or not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, ast.Name):
            return False
        bs = m.lookup(call.func.value.id, caller)
        if not bs or m.resolve_scope(call.func.value.id, caller) is not caller:
            return False
        for b in bs:
            v = b.value
            if b.kind != "=" or b.path or not isinstance(v, ast.Call) or not isinstance(v.func, ast.Name):
                return False
            if m.classes.get(v.func.id) is not method.cls or m.resolve_scope(v.func.id, caller) is not method.cls.scope:
                return False
    return True


# why a parameter mutation no visible caller observes belongs to the strict profile
NO_READER_BASIS = ("no caller in this module reads the object it passed after the call: the change that eager "
                   "runs make and traced runs do not is seen by nobody here (a caller elsewhere might)")


def _removes(w: Write) -> bool:
    """The write takes data out of the caller's object (``batch.pop("labels")``, ``del d[k]``,
    ``.clear()``): eager runs lose it from the caller's object, traced runs do not -- the two
    disagree about the caller's data whoever reads it next (a second eager call fails)."""
    return w.kind == "del" or (w.kind == "call" and w.method in ("pop", "popitem", "clear", "remove"))


def _accumulates(m: SemanticModel, fn: Function, w: Write) -> bool:
    """The write folds the old value of the place it writes into the new (``ema[k] = d * ema[k]
    + (1 - d) * v``; ``stats.update(mean=new_mean)`` with ``new_mean`` computed from
    ``stats["mean"]``; ``n += 1``; ``history.append(loss)``): running state, meant to persist
    from call to call.  Computing one entry from another (``data["h"] = f(data["x"])``) is not."""
    if isinstance(w.node, ast.AugAssign) or (w.kind == "call" and w.method in ("append", "extend", "insert")):
        return True     # what was there stays, the new is added
    p = w.root.id
    places = _written_places(w)
    if not places:
        return False
    seen: Set[str] = set()
    todo = list(w.values)
    depth = 0
    while todo and depth < 4:
        depth += 1
        nxt = []
        for v in todo:
            for n in ast.walk(v):
                if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name) \
                        and n.value.id == p and (_place(n) in places or ("any",) in places):
                    return True
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in seen \
                        and n.id in fn.locals and n.id not in fn.param_nodes:
                    seen.add(n.id)
                    v2 = m.single_value(n.id, fn)
                    if v2 is not None:
                        nxt.append(v2)
        todo = nxt
    return False


def _place(e: ast.AST):
    """``d["k"]`` / ``d[i]`` / ``o.attr``: the key, index expression or attribute, comparable."""
    if isinstance(e, ast.Attribute):
        return ("attr", e.attr)
    s = e.slice
    return ("key", s.value) if isinstance(s, ast.Constant) else ("expr", ast.dump(s))


def _written_places(w: Write) -> Set[tuple]:
    """The places under the root ``w`` writes: ``d["k"] = ...``, ``d[i] = ...``, ``o.a = ...``,
    ``d.update(k=v)``."""
    t = w.target
    if w.kind == "call" and w.method == "update":
        if any(isinstance(a, ast.DictComp) for a in w.node.args[:1]):
            return {("any",)}   # ``d.update({k: f(d[k]) for k in ...})``: every entry it names
        return {("key", k.arg) for k in w.node.keywords if k.arg is not None} | {
            ("key", k.value) for a in w.node.args[:1] if isinstance(a, ast.Dict)
            for k in a.keys if isinstance(k, ast.Constant)}
    if isinstance(t, (ast.Subscript, ast.Attribute)) and t.value is w.root:
        return {_place(t)}
    return set()


def caller_reads_after(m: SemanticModel, fn: Function, p: str, _depth: int = 0) -> bool:
    """Some call of ``fn`` in this module -- directly, or of the name its transform's product
    is bound to (``step = jax.jit(train_step)``; ``@jax.jit`` keeps the name; ``self._step =
    jax.jit(self.train_step)``) -- passes a name for parameter ``p`` and the calling function
    reads that name again after the call (``step(state, batch)`` then ``log(batch["labels"])``,
    or the same call again on the next iteration of a loop that keeps the name): a reader that
    sees the caller's object, unchanged under a transform and changed eagerly.  Through helpers:
    a traced caller that passes its own parameter on is asked the same about its callers."""
    if _depth > 3:
        return False
    params = [q for q in fn.params if q != fn.self_name]
    if p not in params:
        return False
    index = params.index(p)
    names = {fn.name}
    for site in m.transform_sites:
        if site.target is None or site.target.function is not fn or site.call is None:
            continue
        t = m.binding_target(site.call, site.scope)
        if isinstance(t, ast.Name):
            names.add(t.id)
        elif isinstance(t, ast.Attribute):
            names.add(t.attr)
    for caller in m.functions:
        for call in caller.of_type(ast.Call):
            f = call.func
            callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if callee not in names:
                continue
            arg = call.args[index] if index < len(call.args) and not any(
                isinstance(a, ast.Starred) for a in call.args[:index + 1]) else \
                next((k.value for k in call.keywords if k.arg == p), None)
            if not isinstance(arg, ast.Name):
                continue
            end = getattr(call, "end_lineno", None) or call.lineno
            if any(isinstance(n, ast.Name) and n.id == arg.id and isinstance(n.ctx, ast.Load)
                   and n.lineno > end for n in caller.walk()):
                return True
            if _in_loop_keeping(caller, call, arg.id):
                return True    # the next iteration passes the same object again
            if arg.id in caller.param_nodes and caller is not fn and caller.contexts \
                    and caller_reads_after(m, caller, arg.id, _depth + 1):
                return True
    return False


def _in_loop_keeping(caller: Function, call: ast.Call, name: str) -> bool:
    """``call`` runs in a ``for``/``while`` loop of ``caller`` that never rebinds ``name``."""
    for loop in caller.of_type(ast.For, ast.While, ast.AsyncFor):
        if not (loop.lineno <= call.lineno <= (loop.end_lineno or loop.lineno)):
            continue
        if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(loop)):
            continue
        return True
    return False


CROSS_MODULE_BASIS = ("a helper called from another module's traced code: whether that caller reads the "
                      "object back inside the same trace (and so sees the mutation) is not known here")


def _helper_of_other_modules(fn: Function) -> bool:
    """``fn`` is traced only as a helper, and some of its callers are in other modules (their
    code, and whether they read the mutated object back, is not visible here)."""
    return bool(fn.contexts) and all(c.transform in ("call", "project") for c in fn.contexts) \
        and any(c.transform == "project" for c in fn.contexts)


def _callers_read_back(m: SemanticModel, fn: Function, p: str) -> bool:
    """``fn`` runs only as a helper called from traced code, and every such caller reads the
    object it passed as ``p`` again after the call (``compute_targets(batch)`` then
    ``loss(batch["targets"])``): the mutation reaches its reader inside the same trace."""
    if not fn.contexts or any(c.transform not in ("call", "project") for c in fn.contexts):
        return False
    for ctx in fn.contexts:
        caller, call = ctx.caller, ctx.node
        if caller is None or not isinstance(call, ast.Call):
            return False
        target = m.resolve_callable(call.func, caller)
        if target is None or target.function is not fn:
            return False
        pairs, _ = m.bind_arguments(target, call)
        names = [a.id for q, a in pairs if q == p and isinstance(a, ast.Name)]
        if len(names) != 1:
            return False
        end = getattr(call, "end_lineno", None) or call.lineno
        if not any(isinstance(n, ast.Name) and n.id == names[0] and isinstance(n.ctx, ast.Load)
                   and n.lineno > end for n in caller.walk()):
            return False
    return True


def _read_later(fn: Function, p: str, w: Write) -> bool:
    """Does a later statement of ``fn`` read what ``w`` wrote into ``p``?  Then
    the function itself uses the change (``params["student"] = student_params``
    before ``model.apply(params, ...)``): a local update, not a side effect the
    caller relies on, and the rule stays silent.  A later read of another key
    or attribute of ``p`` (``run_info.scale``), or a further write, does not
    count; nor does anything after a read-modify-write of ``p`` (state meant
    to persist across calls)."""
    write = w.node
    end = getattr(write, "end_lineno", None) or write.lineno
    if isinstance(write, ast.AugAssign) or any(
            isinstance(n, ast.Name) and n.id == p for v in w.values for n in ast.walk(v)):
        # ``v[i] = 0.9 * v[i] + g``: a state update meant to persist -- unless the entry is
        # reshaped, not accumulated, and the whole object is handed on afterwards
        # (``batch["label"] = batch["label"][0]`` then ``metrics_fn(logits, batch)``)
        if isinstance(write, ast.AugAssign) or any(isinstance(v, ast.BinOp) for v in w.values):
            return False
        return any(isinstance(c, ast.Call) and c.lineno > end
                   and not (isinstance(c.func, ast.Name) and c.func.id in ("print", "repr", "str"))
                   and any(isinstance(a, ast.Name) and a.id == p
                           for a in list(c.args) + [k.value for k in c.keywords])
                   for c in fn.walk())
    part = _written_part(w)
    parents = {}
    nodes = list(fn.walk())
    for inner in fn.children:   # closures defined later that read it
        if inner.node.lineno > end and p not in inner.locals:
            nodes.extend(inner.walk())
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in nodes:
        if not (isinstance(node, ast.Name) and node.id == p and isinstance(node.ctx, ast.Load)
                and node.lineno > end):
            continue
        up = parents.get(id(node))
        if isinstance(up, (ast.Attribute, ast.Subscript)) and isinstance(up.ctx, (ast.Store, ast.Del)):
            continue   # another write
        if isinstance(up, ast.Attribute) and part is not None and up.attr != part \
                and not isinstance(parents.get(id(up)), ast.Call):
            continue   # another attribute
        if isinstance(up, ast.Subscript) and isinstance(up.slice, ast.Constant) and part is not None \
                and up.slice.value != part:
            continue   # another key
        if isinstance(up, ast.Subscript) and isinstance(parents.get(id(up)), ast.AugAssign) \
                and parents[id(up)].target is up:
            continue
        return True
    return False


def _written_part(w: Write):
    """The constant key or attribute name ``w`` writes directly under its root, if any
    (``d.pop("labels")`` writes the key ``labels``)."""
    if w.kind == "call" and w.method in ("pop", "setdefault") and w.values \
            and isinstance(w.values[0], ast.Constant):
        return w.values[0].value
    t = w.target
    while isinstance(t, (ast.Attribute, ast.Subscript)) and t.value is not w.root:
        t = t.value
    if isinstance(t, ast.Attribute):
        return t.attr
    if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant):
        return t.slice.value
    return None


def _parents(fn: Function) -> dict:
    parents = {}
    for node in fn.walk():
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _filled_once(fn: Function, w: Write) -> bool:
    """``w`` (``self.x = v``) sits under ``if self.x is None:`` or ``if not hasattr(self, "x"):``
    in ``fn``: a lazily filled cache (a jitted function, static annotations), meant to be
    set once, at whichever trace or call comes first."""
    t = w.target
    if not isinstance(t, ast.Attribute) or not isinstance(t.value, ast.Name):
        return False
    owner, attr = t.value.id, t.attr

    def same(e: ast.AST) -> bool:
        return isinstance(e, ast.Attribute) and e.attr == attr and isinstance(e.value, ast.Name) \
            and e.value.id == owner

    def unset_test(test: ast.AST) -> bool:
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) \
                and same(test.left) and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value is None:
            return True
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            o = test.operand
            if same(o):
                return True
            return isinstance(o, ast.Call) and isinstance(o.func, ast.Name) and o.func.id == "hasattr" \
                and len(o.args) == 2 and isinstance(o.args[0], ast.Name) and o.args[0].id == owner \
                and isinstance(o.args[1], ast.Constant) and o.args[1].value == attr
        return False

    parents = _parents(fn)
    child, up = w.node, parents.get(id(w.node))
    while up is not None:
        if isinstance(up, ast.If) and child in up.body and unset_test(up.test):
            return True
        child, up = up, parents.get(id(up))
    return False


def _result_used(fn: Function, call: ast.AST) -> bool:
    """The value of ``call`` is used (assigned, passed on), not dropped as a statement."""
    up = _parents(fn).get(id(call))
    return up is not None and not isinstance(up, ast.Expr)


def _returned_rebuilt(fn: Function, p: str, w: Write) -> bool:
    """``p["k"] = f(p["k"], ...)``, then ``y = g(p["k"])`` and ``return {..., "k": y}``:
    the function rebuilds the state it was given (a jitted update of a donated dict)
    and hands the entry it wrote back to the caller, under the same key, in the new
    dict it returns."""
    part = _written_part(w)
    if not isinstance(part, str) or w.kind != "item" or not w.direct:
        return False
    end = getattr(w.node, "end_lineno", None) or w.node.lineno

    def reads_back(e: ast.AST) -> bool:
        return any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and n.lineno > end
                   and isinstance(n.value, ast.Name) and n.value.id == p
                   and isinstance(n.slice, ast.Constant) and n.slice.value == part for n in ast.walk(e))

    bound = {}
    for node in fn.walk():
        if isinstance(node, ast.Assign) and node.lineno > end:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound.setdefault(t.id, []).append(node.value)
    for node in fn.walk():
        if not (isinstance(node, ast.Return) and node.value is not None):
            continue
        outs = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for o in outs:
            if not isinstance(o, ast.Dict):
                continue
            for k, v in zip(o.keys, o.values):
                if not (isinstance(k, ast.Constant) and k.value == part):
                    continue
                if reads_back(v) or (isinstance(v, ast.Name) and any(reads_back(b) for b in bound.get(v.id, ()))):
                    return True
    return False


# why a write of an attribute nothing in the module reads belongs to the strict profile
UNREAD_STATE_BASIS = ("no code that runs outside a trace reads the attribute here, nor does the writing function "
                      "before it writes: what the trace left in it is not seen by anything visible (a traced reader "
                      "may run after the write in the same trace; another module might read it)")
