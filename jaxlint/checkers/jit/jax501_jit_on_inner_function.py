from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set, Tuple

from ...analysis import Function, SemanticModel
from ...analysis import knowledge as K
from .calls import INIT_METHODS, CallIndex, CallSite, JitBinding, in_traced_code, jit_index
from .steps import GRAD_NAMES, TREE_MAPS, arithmetic_callable, contains_update, eager_grad, \
    optimizer_update, tree_update
from ...fixes.edits import UNSAFE, Edit, Fix
from ..base import Context, Finding, FixOffer, Rule, register
from ..messages import short

def _strict_basis(m: SemanticModel, caller: Function) -> Optional[str]:
    """Why the claim that ``caller`` runs eagerly on every step rests on what is not known here:
    a decorator of another package or of the project that may compile it (``@train_utils.jit_once``
    wraps ``jax.jit``), or a test helper (called once per test, not on every step)."""
    f = m.opaque_decorator(caller)
    if f is not None:
        return (f"{caller.display()} is decorated by `{short(f)}`, whose effect is not known here "
                f"(a project's decorator may jit it)")
    if m.in_test_code(caller):
        return "test code: a helper called once per test, not a step run on every iteration"
    return None


# calls that cannot run under jit (Python side effects, host conversion)
_NOT_JITTABLE = frozenset({"print", "float", "int", "bool", "open", "input", "numpy.asarray", "numpy.array",
                           "jax.device_get", "time.time", "time.perf_counter"})


@register
class JitOnInnerFunction(Rule):
    """
    ## What it does
    Flags a `jax.jit` applied to an inner piece of a training step — the loss,
    the gradient function, the model's forward pass, the optimizer update —
    when the function that calls it every step is not jitted and does array
    work of its own: an optimizer update (`tx.update`, `optax.apply_updates`,
    `state.apply_gradients`), a parameter update with `jax.tree.map`, eager
    differentiation with `jax.grad`, or arithmetic on the gradients.

    **Profiles.** The default profile reports a caller known to run
    eagerly here. `--strict` adds a caller wrapped by a decorator whose
    effect is not known (a project's `@jit_once` may compile it) and a
    helper of test code (run once per test, not on every step).

    ## Why is this bad?
    In PyTorch, wrapping the model in `torch.compile` speeds up the whole
    forward pass. In JAX only the jitted function is compiled; everything its
    caller does is dispatched op by op from Python. An optimizer update over a
    pytree of parameters is dozens of small kernels per step — each one a
    separate dispatch, with no fusion and no buffer donation — so the eager
    part of the step can dominate the step time. Jitting the whole step
    (forward, backward and update) compiles it into one program. A training
    loop that only calls a fully jitted step and logs the result is the right
    design and is not flagged.

    ## Example
    ```python
    @jax.jit
    def apply_updates(params, grads, opt_state):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = apply_updates(params, grads, opt_state)
        return params, opt_state, loss
    ```

    ## Use instead
    ```python
    def apply_updates(params, grads, opt_state):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    @jax.jit
    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params, opt_state = apply_updates(params, grads, opt_state)
        return params, opt_state, loss
    ```

    ## Fix safety
    When the inner function is decorated with a bare `@jax.jit` and it and
    its only eager caller are both module-level functions of this module, the
    fix moves the decorator onto the caller. It is unsafe: the caller's
    arguments must all be arrays or pytrees of arrays (a Python object or flag
    argument needs `static_argnames`), and any Python side effect in it
    (printing, logging, `.item()`) would then run only at trace time.
    """

    confirm = ("compiles", "caller")
    summary = "`jax.jit` on an inner piece of a step whose caller runs the rest (the update) eagerly"
    fix = FixOffer("Move `@jax.jit` to the outer step", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        idx = jit_index(m)
        if idx is None:
            return
        for b in idx.jit_bindings:
            if b.kind not in ("def", "name", "attr"):
                continue
            scope = b.created_in
            if in_traced_code(scope):
                continue
            created_once = scope.is_module or (b.kind == "def" and b.cls is not None) or \
                (b.kind == "attr" and scope.name in INIT_METHODS)
            if not created_once:
                continue   # a jit re-created per call is JAX502's
            target = b.target
            complete = target is not None and contains_update(m, target)
            calls = idx.calls_to(b)
            for cs in calls:
                caller = cs.scope
                if caller.is_module or caller.is_lambda or in_traced_code(caller) or caller is target:
                    continue
                work = self._step_work(ctx, idx, b, caller, complete)
                if work is None:
                    continue
                inner = self._inner_name(ctx, b)
                msg = (f"`jax.jit` covers only {inner}, but its caller {caller.display()} is not jitted and "
                       f"runs {work} eagerly every step; jit the whole step instead")
                fix = self._fix(ctx, idx, b, caller, calls)
                yield ctx.finding(self, b.site.node, msg, fix=fix, strict=_strict_basis(m, caller))
                break

    # ------------------------------------------------------------ evidence
    def _step_work(self, ctx: Context, idx: CallIndex, b: JitBinding, caller: Function,
                   complete: bool) -> Optional[str]:
        m = ctx.model
        fed, results = self._state_names(idx, b, caller)
        opt = optimizer_update(m, caller)
        g = eager_grad(m, caller)
        if g is not None:
            # the gradients feed the jitted piece, or the caller applies an update itself
            grads = _bound_names(caller, g[1])
            if grads & fed or opt is not None or tree_update(m, caller) is not None:
                return f"differentiation ({g[0]})"
        if complete:
            return None   # the jitted function is the whole step; the caller only drives it
        if opt is not None:
            return f"the optimizer update ({opt[0]})"
        if b.target is None:
            return None
        fed, results = self._state_names(idx, b, caller)
        if not fed or not results:
            return None
        for call in caller.of_type(ast.Call):
            f = call.func
            if f.__class__ not in (ast.Name, ast.Attribute) or len(call.args) < 2:
                continue
            if m.qualname(f, caller) in TREE_MAPS and arithmetic_callable(m, call.args[0], caller):
                names = {a.id for a in call.args[1:] if isinstance(a, ast.Name)}
                if names & fed and names & results:
                    return f"a parameter update (`{ast.unparse(f)}`)"
        if self._grad_producing(ctx, b):
            upd = self._arith_update(caller, fed, results)
            if upd is not None:
                return f"the gradient update (`{upd}`)"
        return None

    @staticmethod
    def _state_names(idx: CallIndex, b: JitBinding, caller: Function) -> Tuple[Set[str], Set[str]]:
        """Names passed into the jitted call (``fed``) and names bound from its results."""
        fed: Set[str] = set()
        results: Set[str] = set()
        mine = {id(cs.call) for cs in idx.calls_to(b) if cs.scope is caller}
        for cs_call in (c for c in caller.of_type(ast.Call) if id(c) in mine):
            for a in list(cs_call.args) + [k.value for k in cs_call.keywords]:
                if isinstance(a, ast.Name):
                    fed.add(a.id)
        for a in caller.of_type(ast.Assign):
            if isinstance(a.value, ast.Call) and id(a.value) in mine:
                for t in a.targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            results.add(n.id)
        return fed, results

    @staticmethod
    def _arith_update(caller: Function, fed: Set[str], results: Set[str]) -> Optional[str]:
        """``params = params - lr * grads`` (or ``return params - lr * grads``)."""
        cands: List[Tuple[Optional[str], ast.expr]] = []
        for a in caller.of_type(ast.Assign):
            if len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and a.targets[0].id in fed:
                cands.append((a.targets[0].id, a.value))
        for a in caller.of_type(ast.AugAssign):
            if isinstance(a.target, ast.Name) and a.target.id in fed:
                cands.append((a.target.id, a.value))
        for r in caller.of_type(ast.Return):
            if r.value is not None:
                cands.append((None, r.value))
        for _, v in cands:
            for n in ast.walk(v):
                if isinstance(n, ast.BinOp):
                    names = {x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
                    if names & results and names & fed:
                        return short(n)
        return None

    @staticmethod
    def _grad_producing(ctx: Context, b: JitBinding) -> bool:
        t = b.site.target
        if t is None:
            return False
        if any(tr.name in GRAD_NAMES for tr, _ in t.transforms):
            return True
        fn = t.function
        for site in ctx.model.transform_sites:
            if site.transform.name in GRAD_NAMES:
                s = site.scope
                while s is not None:
                    if s is fn:
                        return True
                    s = s.parent
        return False

    @staticmethod
    def _inner_name(ctx: Context, b: JitBinding) -> str:
        if b.kind == "def":
            return f"`{b.target.qualname}`" if b.target is not None else f"`{b.name}`"
        return f"`{short(b.fun_expr) if b.fun_expr is not None else b.name}`"

    # ----------------------------------------------------------------- fix
    def _fix(self, ctx: Context, idx: CallIndex, b: JitBinding, caller: Function,
             calls: List[CallSite]) -> Optional[Fix]:
        m = ctx.model
        site = b.site
        inner = b.target
        if b.kind != "def" or b.cls is not None or inner is None or not b.scope.is_module:
            return None
        if site.call is not None or not caller.parent or not caller.parent.is_module or caller.cls is not None:
            return None
        if caller.decorators or isinstance(caller.node, ast.AsyncFunctionDef):
            return None
        for cs in calls:
            if cs.scope is not caller and not in_traced_code(cs.scope):
                return None   # another eager caller would lose the jit
            if cs.scope is caller and cs.in_loop:
                return None
        if caller.of_type(ast.For, ast.AsyncFor, ast.While, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom):
            return None
        for call in caller.of_type(ast.Call):
            f = call.func
            q = m.qualname(f, caller) if f.__class__ in (ast.Name, ast.Attribute) else None
            if q in _NOT_JITTABLE or q in K.LOGGING_FUNCS:
                return None
            if isinstance(f, ast.Attribute) and f.attr in K.CONCRETIZING_METHODS | K.LOGGER_METHODS:
                return None
        src = ctx.source
        dec = site.node
        line = src.line_text(dec.lineno)
        if dec.lineno != dec.end_lineno or not line.strip().startswith("@"):
            return None
        if src.indentation(dec.lineno) or src.indentation(caller.node.lineno):
            return None
        start = src.offset(dec.lineno, 0)
        end = src.offset(dec.lineno + 1, 0) if dec.lineno < src.line_count else len(src.text)
        moved = src.text[start:end]
        if not moved.endswith(("\n", "\r")):
            moved += src.newline()
        at = src.offset(caller.node.lineno, 0)
        return self.fix.make([Edit.delete(start, end), Edit.insert(at, moved)])


def _bound_names(fn: Function, call: ast.Call) -> Set[str]:
    """Names bound from ``call``'s result in ``fn`` (``loss, grads = jax.value_and_grad(f)(...)``)."""
    out: Set[str] = set()
    for a in fn.of_type(ast.Assign):
        if a.value is call:
            for t in a.targets:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out
