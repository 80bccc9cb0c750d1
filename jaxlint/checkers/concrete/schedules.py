"""Learning-rate schedules given to an optax optimizer by position (``optax.adam(schedule)``).

optax calls a schedule with the optimizer state's step count, an ``int32`` array, inside the
optimizer's ``update`` -- which runs under the training step's ``jit``.  The model knows the
keyword spellings (``learning_rate=schedule``, a library contract in
``analysis/contracts.py``); this module adds, as data of the concrete family, the optimizers
whose *first positional* parameter is the learning rate, and finds what a schedule's step
reaches: Python ``min``/``max`` of it (JAX202) and Python branches on it (JAX201).

The step's reach is followed through plain assignments in the schedule and into functions of
the module the schedule hands it to (``polynomial(step, decay_steps)``), a few calls deep.
A function the model already traces (a keyword contract, a jit) is left to the rules' own
checks.  (A model fact computed here: a ``CallContract`` row per optimizer, position 0, in
``analysis/contracts.py`` would make these schedules traced for every rule.)
"""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ...analysis.model import Function, SemanticModel

# optax optimizers whose first positional parameter is ``learning_rate`` (optax 0.2.x)
LEARNING_RATE_FIRST = frozenset({
    "adabelief", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamaxw", "adamw", "adan",
    "amsgrad", "fromage", "lamb", "lars", "lbfgs", "lion", "nadam", "nadamw", "noisy_sgd", "novograd",
    "optimistic_adam", "optimistic_adam_v2", "optimistic_gradient_descent", "radam", "rmsprop", "rprop",
    "scale_by_learning_rate", "sgd", "sign_sgd", "signum", "sm3", "yogi", "polyak_sgd",
})

_DEPTH = 3


class Schedule:
    """One function the step count reaches: the names holding it there, how it got there."""

    __slots__ = ("fn", "names", "optimizer", "via")

    def __init__(self, fn: Function, names: Set[str], optimizer: str, via: Optional[str]):
        self.fn = fn
        self.names = names
        self.optimizer = optimizer
        self.via = via

    def description(self) -> str:
        what = f"a learning-rate schedule given to `{self.optimizer}`"
        if self.via:
            what = f"called with the step by `{self.via}`, {what}"
        return (f"`{self.fn.qualname}` ({what}, which calls it with the traced step count inside "
                f"the optimizer's update)")


def _optimizer(m: SemanticModel, call: ast.Call, fn: Function) -> Optional[str]:
    f = call.func
    if f.__class__ is ast.Call and f.args and f.func.__class__ in (ast.Name, ast.Attribute) \
            and m.qualname(f.func, fn) == "optax.inject_hyperparams":
        # ``optax.inject_hyperparams(optax.adam)(schedule)``: the injected optimizer's
        # hyperparameters, a callable one evaluated with the step count in ``update``
        inner = f.args[0]
        if inner.__class__ not in (ast.Name, ast.Attribute):
            return None
        q = m.qualname(inner, fn)
        if q is None or not q.startswith("optax.") or q.rsplit(".", 1)[1] not in LEARNING_RATE_FIRST:
            return None
        return f"optax.inject_hyperparams(optax.{q.rsplit('.', 1)[1]})"
    if f.__class__ not in (ast.Name, ast.Attribute):
        return None
    q = m.qualname(f, fn)
    if q is None or not q.startswith("optax."):
        return None
    name = q.rsplit(".", 1)[1]
    return f"optax.{name}" if name in LEARNING_RATE_FIRST else None


def _returned_functions(m: SemanticModel, factory: Function) -> List[Function]:
    """The nested functions/lambdas a schedule factory returns (``return schedule``)."""
    out = []
    for r in factory.of_type(ast.Return):
        if r.value is None:
            continue
        t = m.resolve_callable(r.value, factory)
        if t is not None and t.function.parent is factory and t.bound_positional == 0:
            out.append(t.function)
    return out


def _schedule_functions(m: SemanticModel, arg: ast.AST, fn: Function, depth: int = 0) -> List[Function]:
    if depth > 2:
        return []
    if isinstance(arg, ast.Name):
        v = m.single_value(arg.id, fn)
        if v is not None and isinstance(v, ast.Call):
            return _schedule_functions(m, v, fn, depth + 1)
    if isinstance(arg, ast.Call):
        t = m.resolve_callable(arg.func, fn)
        if t is None:
            return []
        return _returned_functions(m, t.function)
    t = m.resolve_callable(arg, fn)
    if t is None or t.bound_positional != 0:
        return []
    return [t.function]


def _mentions(e: ast.AST, names: Set[str]) -> bool:
    for n in ast.walk(e):
        if n.__class__ is ast.Name and n.id in names and isinstance(n.ctx, ast.Load):
            return True
    return False


def _value_use(e: ast.AST, names: Set[str]) -> bool:
    """``e`` computes with the step (not only tests it for ``None`` or reads a static fact)."""
    if not _mentions(e, names):
        return False
    for n in ast.walk(e):
        if isinstance(n, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops):
            return False
        if isinstance(n, ast.Attribute) and n.attr in ("shape", "ndim", "dtype", "size"):
            return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("isinstance", "len", "type"):
            return False
    return True


def _reach(fn: Function, start: Set[str]) -> Set[str]:
    """Names of ``fn``'s own scope assigned from expressions computed with the step."""
    names = set(start)
    for _ in range(4):
        grew = False
        for a in fn.of_type(ast.Assign):
            if not _value_use(a.value, names):
                continue
            for t in a.targets:
                if isinstance(t, ast.Name) and t.id not in names:
                    names.add(t.id)
                    grew = True
        for a in fn.of_type(ast.AugAssign):
            if isinstance(a.target, ast.Name) and a.target.id not in names and _value_use(a.value, names):
                names.add(a.target.id)
                grew = True
        if not grew:
            break
    return names


class ScheduleFacts:
    """The schedules of one module (``model.facts(ScheduleFacts)``)."""

    def __init__(self, m: SemanticModel):
        self.items: List[Schedule] = []
        seen: Set[int] = set()
        if not m.imports.mentions_any(("optax",)):
            return
        for fn in m.functions:
            for call in fn.of_type(ast.Call):
                opt = _optimizer(m, call, fn)
                if opt is None:
                    continue
                given = [call.args[0]] if call.args and not isinstance(call.args[0], ast.Starred) else []
                if opt.startswith("optax.inject_hyperparams"):
                    # (the keyword spelling of a plain optimizer is the model's contract)
                    given += [k.value for k in call.keywords if k.arg == "learning_rate"]
                for s in [s for g in given for s in _schedule_functions(m, g, fn)]:
                    if s.contexts or not s.params or id(s) in seen:
                        continue
                    seen.add(id(s))
                    _follow(m, Schedule(s, _reach(s, {s.params[0]}), opt, None), self.items, seen, 0)


def schedules(m: SemanticModel) -> List[Schedule]:
    """Every function of the module the step count of a positional optax schedule reaches,
    the schedule first."""
    return m.facts(ScheduleFacts).items


def _follow(m: SemanticModel, s: Schedule, out: List[Schedule], seen: Set[int], depth: int) -> None:
    out.append(s)
    if depth >= _DEPTH:
        return
    fn = s.fn
    for call in fn.of_type(ast.Call):
        if not any(_value_use(a, s.names) for a in call.args) and \
                not any(_value_use(k.value, s.names) for k in call.keywords):
            continue
        t = m.resolve_callable(call.func, fn)
        if t is None or t.function.contexts or id(t.function) in seen:
            continue
        pairs, _unknown = m.bind_arguments(t, call)
        params = {p for p, a in pairs if _value_use(a, s.names)}
        if not params:
            continue
        seen.add(id(t.function))
        _follow(m, Schedule(t.function, _reach(t.function, params), s.optimizer, fn.qualname), out, seen, depth + 1)


def builtin_min_max(m: SemanticModel) -> Iterator[Tuple[Schedule, ast.Call, str, ast.AST]]:
    """(schedule, call, ``min``/``max``, the argument computed with the step)."""
    for s in schedules(m):
        for call in s.fn.of_type(ast.Call):
            f = call.func
            if not (isinstance(f, ast.Name) and f.id in ("min", "max")) or m.qualname(f, s.fn) not in ("min", "max"):
                continue
            if len(call.args) < 2 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
                continue
            arg = next((a for a in call.args if _value_use(a, s.names)), None)
            if arg is not None:
                yield s, call, f.id, arg


def branches(m: SemanticModel) -> Iterator[Tuple[Schedule, ast.AST, ast.AST]]:
    """(schedule, ``if``/``while``/conditional expression, its test) testing a comparison of the step."""
    for s in schedules(m):
        for node in s.fn.of_type(ast.If, ast.While, ast.IfExp):
            test = node.test
            if isinstance(test, ast.Compare) and _value_use(test, s.names):
                yield s, node, test
