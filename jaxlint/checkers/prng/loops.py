"""Loops in the key flow: Python loops over literal configurations (replayed on purpose), the
``lax`` loop primitives whose body runs once per step (``LOOP_BODIES``, which function of a
``lax.scan``/``fori_loop``/``while_loop`` call is the body and where its carry is) and keys
closed over by such a body."""
from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel
from .consumers import closure_stand_in
from .states import Reuse, Use
from .vocabulary import COMPREHENSIONS, RANDOM_NON_CONSUMING, constant_data, key_argument

# loop primitives whose body runs once per step: name -> (function position, function keyword,
# index of the carry parameter or None, how the carry is returned: "first" of a 2-tuple / "all")
LOOP_BODIES = K.LOOP_BODIES


def loop_label(loop: ast.AST) -> str:
    """How a message names the loop whose iterations repeat a key."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return "`for` loop"
    if isinstance(loop, ast.While):
        return "`while` loop"
    return "comprehension"


_SWEEP_CALLS = frozenset({"itertools.product", "itertools.combinations", "itertools.permutations"})
_LITERALS = (ast.List, ast.Tuple, ast.Set, ast.Dict)


def is_config_sweep(model: SemanticModel, loop: ast.AST, fn: Function) -> bool:
    """A loop over literal configurations (``for shape in [(2, 3), (4,)]``,
    ``for dtype in dtypes`` with ``dtypes = [...]``, ``itertools.product(...)``)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        it = loop.iter
    elif isinstance(loop, COMPREHENSIONS):
        it = loop.generators[0].iter
    else:
        return False
    return _sweep_iter(model, it, fn, 0)


def _sweep_iter(model: SemanticModel, it: ast.AST, fn: Function, depth: int) -> bool:
    if depth > 3:
        return False
    if isinstance(it, _LITERALS):
        return True
    if isinstance(it, ast.Call):
        f = it.func
        if isinstance(f, ast.Attribute) and f.attr in ("items", "keys", "values") and not it.args:
            return _sweep_iter(model, f.value, fn, depth + 1)
        q = model.qualname(f, fn) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if q in _SWEEP_CALLS:
            return True
        if q in ("zip", "enumerate", "reversed", "sorted", "list", "tuple") and it.args:
            return _sweep_iter(model, it.args[0], fn, depth + 1)
        return False
    if isinstance(it, ast.Name):
        s = model.resolve_scope(it.id, fn)
        if s is None or it.id in s.param_nodes:
            return False
        values = [b.value for b in model.bindings(it.id, s)
                  if isinstance(b.node, ast.Assign) and b.path == ()]
        return bool(values) and all(_sweep_iter(model, v, s, depth + 1) for v in values)
    return False


def loop_bodies(m: SemanticModel) -> Dict[int, Tuple[str, Optional[str], str]]:
    """Functions used as the body of a ``lax`` loop primitive:
    id(function) -> (primitive, carry parameter or None, carry return shape)."""
    out: Dict[int, Tuple[str, Optional[str], str]] = {}
    for site in m.transform_sites:
        spec = LOOP_BODIES.get(site.transform.name)
        if spec is None or site.target is None or site.call is None:
            continue
        pos, kw, carry_idx, shape = spec
        call = site.call
        arg = call.args[pos] if len(call.args) > pos and not isinstance(call.args[pos], ast.Starred) else None
        if arg is None:
            arg = next((k.value for k in call.keywords if k.arg == kw), None)
        if arg is None:
            continue
        target = m.resolve_callable(arg, site.scope)
        if target is None or target.function is not site.target.function:
            continue
        body = target.function
        carry = None
        if carry_idx is not None:
            i = target.bound_positional + carry_idx
            if i < len(body.params):
                carry = body.params[i]
        out[id(body)] = (site.transform.name, carry, shape)
    return out


def closure_reuses(an, fn: Function, primitive: str) -> List[Reuse]:
    """A key of an enclosing scope consumed in a ``lax`` loop body: the same key every step
    (``an`` is the module's :class:`~.keys.KeyAnalysis`)."""
    out: List[Reuse] = []
    seen: Set[str] = set()
    label = primitive.replace("jax.lax.", "lax.")
    for call in sorted(fn.of_type(ast.Call), key=lambda c: (c.lineno, c.col_offset)):
        q = an.random_qualname(call, fn)
        if q is None:
            r = _helper_reuse(an, fn, call, label, seen) or _closure_reuse(an, fn, call, label, seen)
            if r is not None:
                out.append(r)
            continue
        if q in RANDOM_NON_CONSUMING:
            continue
        a = key_argument(call)
        if not isinstance(a, ast.Name) or a.id in fn.locals:
            continue
        if q == "jax.random.fold_in" and not constant_data(call):
            continue
        owner = an.model.resolve_scope(a.id, fn.parent)
        if owner is None or a.id in owner.globals_declared:
            continue
        if a.id not in an.key_names(owner):
            continue
        if a.id in seen:
            continue
        seen.add(a.id)
        kind = "split" if q == "jax.random.split" else ("fold_in" if q == "jax.random.fold_in" else "sample")
        use = Use(call, a, None, kind, q, None, False, fn)
        out.append(Reuse(fn, use, None, "closure", f"`{label}` body"))
    return out


def _closure_reuse(an, fn: Function, call: ast.Call, label: str, seen: Set[str]) -> Optional[Reuse]:
    """A function called in the ``lax`` loop body ``fn`` (directly or through ``jax.grad``/
    ``value_and_grad``/``jit``/``partial``) that draws from a key it reads from a scope outside
    the body (``def loss_fn(p): ... rngs={"dropout": key}`` with ``key`` a parameter of the
    function running the scan): the same key every step."""
    m = an.model
    target = m.resolve_callable(call.func, fn)
    if target is None:
        return None
    callee = target.function
    if callee is fn:
        return None
    for name in sorted({n.id for n in ast.walk(callee.node) if isinstance(n, ast.Name)}):
        if name in seen or name in fn.locals or name in callee.locals:
            continue
        owner = m.resolve_scope(name, fn.parent)
        if owner is None or name in owner.globals_declared or name not in an.key_names(owner):
            continue
        if not an.closure_draws(callee, name):
            continue
        seen.add(name)
        node = closure_stand_in(name, call, callee)
        display = ast.unparse(call.func)
        use = Use(call, node, None, "call", display if len(display) <= 40 else "a call", None, False, fn, None, True)
        return Reuse(fn, use, None, "closure", f"`{label}` body")
    return None


def _helper_reuse(an, fn: Function, call: ast.Call, label: str, seen: Set[str]) -> Optional[Reuse]:
    """A key of an enclosing scope handed, in a ``lax`` loop body, to a function of this module
    that draws from that parameter (``add_noise(x, key)``): the same key every step."""
    m = an.model
    target = m.resolve_callable(call.func, fn)
    if target is None:
        return None
    pairs, _ = m.bind_arguments(target, call)
    callee = target.function
    for p, a in pairs:
        if not isinstance(a, ast.Name) or a.id in fn.locals or a.id in seen:
            continue
        owner = m.resolve_scope(a.id, fn.parent)
        if owner is None or a.id in owner.globals_declared or a.id not in an.key_names(owner):
            continue
        if p not in an.key_params(callee) or an.passes_on_folded(callee, p) or not an.param_draws(callee, p):
            continue
        seen.add(a.id)
        display = ast.unparse(call.func)
        use = Use(call, a, None, "call", display if len(display) <= 40 else "a call", None, False, fn, None, True)
        return Reuse(fn, use, None, "closure", f"`{label}` body")
    return None
