"""Which runtime signal confirms which rule (no JAX here).

A rule declares its own runtime evidence in a ``confirm`` class attribute,
read here and nowhere else: a strategy name, or a tuple of the strategy
name and its arguments::

    confirm = "print"
    confirm = ("trace-error", "ConcretizationTypeError", "ValueError: truth value of an array")
    confirm = ("compiles", "caller")

``trace-error`` arguments are exception class names accepted anywhere in the
raised error's MRO, or ``"Class: fragment"`` (that class, with the fragment
in its message).  ``compiles`` takes which function is the step whose
compilations are counted: ``caller`` (the eager functions that call the
jitted function, JAX501) or ``enclosing`` (the function holding the
``jax.jit``, JAX502).  ``raises`` takes error names and fragments as
``trace-error`` does, but the error may come from deeper code than the
flagged line (a Flax module's ``__call__``): the line must be one frame of
the traceback, not the innermost one; ``"rngs=same-rng"`` / ``"mutable=updates-kept"`` name
the check for a flagged call passing that keyword (a shape that raises nothing: the same dropout
key every step, the updated collection discarded).  ``pmap-sync`` takes no arguments.
A rule whose findings come in shapes that need different evidence names them in ``confirm_shapes``
(message fragment, strategy): JAX505's static value that changes on every call is ``recompiles``
(only a run of the program shows it: the traces it made of the function, same shapes, new static
values).
The strategies themselves live in :mod:`jaxlint.confirm.strategies` (worker side); the planner copies each
finding's declaration into its target, so the worker needs no registry.
"""
from __future__ import annotations

import functools
from typing import Dict, FrozenSet, Optional, Tuple

from ..analysis import knowledge as K

# strategy name -> what it observes (the worker's STRATEGIES must implement them all)
STRATEGY_NAMES: Dict[str, str] = {
    "trace-error": "tracing raises the predicted error at the flagged line",
    "print": "print/logging spy: called at trace time with a tracer",
    "global-write": "module globals / attributes changed by tracing",
    "global-read": "varying the global changes the traced program",
    "impure-call": "clock / Python or NumPy RNG called at trace time (sys.setprofile)",
    "arg-mutation": "argument pytree structure / leaf identities changed by tracing",
    "tracer-leak": "tracer left in a global / attribute; jax.checking_leaks()",
    "key-reuse": "jax_debug_key_reuse with typed keys",
    "compiles": "compilations per step vs the whole step jitted",
    "unrolled-loop": "equations / compile seconds vs the trip count",
    "raises": "the flagged call raises the predicted error (a frame of the traceback is the line)",
    "pmap-sync": "the pmapped step on several devices: replicated parameters drift apart; unbound axis names",
    "recompiles": "a run of the program traced the called function again for each new static value, same shapes",
}

# strategies that need sys.setprofile during the base trace
NEEDS_PROFILE = {"impure-call"}

# What a finding claims decides which runs can show it.  These strategies observe an effect of
# code running *under a trace* (at trace time, or on tracers): a run shows it only when the
# tracers come from the transform the program itself applies -- tracing a helper alone assumes
# the very thing the finding claims.
TRACE_STRATEGIES = frozenset({"print", "global-write", "global-read", "impure-call", "arg-mutation",
                              "tracer-leak", "unrolled-loop"})
# JAX's errors that only a tracer raises (concrete values never do); a ``trace-error``
# declaration that names one claims a traced value, and any other error it accepts (``ValueError:
# truth value of an array``, which concrete arrays raise too) is evidence only when a concrete
# re-run of the same call does not raise it
TRACER_ERRORS = K.TRACER_ERRORS


@functools.lru_cache(maxsize=None)
def _raw(code: str):
    from ..checkers import REGISTRY
    return getattr(REGISTRY.get(code), "confirm", None)


def declaration(code: str) -> Optional[dict]:
    """The rule's ``confirm`` declaration as ``{"strategy": name, "args": [...]}``, or None."""
    raw = _raw(code)
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = (raw,)
    name, args = raw[0], [str(a) for a in raw[1:]]
    if name not in STRATEGY_NAMES:
        raise ValueError(f"{code}: unknown confirmation strategy {name!r}")
    return {"strategy": name, "args": args}


def shape_declaration(code: str, message: str) -> Optional[dict]:
    """The evidence for one shape of a rule's findings (``Rule.confirm_shapes``: (message fragment,
    strategy name) pairs), when the finding's message names that shape; else None (the rule's
    ``confirm``)."""
    from ..checkers import REGISTRY
    for fragment, name in getattr(REGISTRY.get(code), "confirm_shapes", ()):
        if fragment in message:
            if name not in STRATEGY_NAMES:
                raise ValueError(f"{code}: unknown confirmation strategy {name!r}")
            return {"strategy": name, "args": []}
    return None


def unconfirmable_reason(code: str, message: str) -> Optional[str]:
    """Why the rule's declared evidence cannot show this finding (``Rule.unconfirmable``), or None."""
    from ..checkers import REGISTRY
    for fragment, why in getattr(REGISTRY.get(code), "unconfirmable", ()):
        if fragment in message:
            return why
    return None


def strategy_table() -> Dict[str, str]:
    """code -> strategy name, for every registered rule that declares one."""
    from ..checkers import REGISTRY
    out = {}
    for code in sorted(REGISTRY):
        d = declaration(code)
        if d is not None:
            out[code] = d["strategy"]
    return out


def supported(code: str) -> bool:
    return declaration(code) is not None


def claims_tracing(decl: Optional[dict]) -> bool:
    """The finding claims something about code under a trace (see :data:`TRACE_STRATEGIES`): only a
    trace the program makes -- its transformed entry, or a harness recording -- can confirm it."""
    if not decl:
        return False
    if decl["strategy"] in TRACE_STRATEGIES:
        return True
    if decl["strategy"] == "trace-error":
        names, fragments = trace_errors(decl)
        return bool(names & TRACER_ERRORS or {cls for cls, _ in fragments} & TRACER_ERRORS)
    return False


def tracer_specific(mro) -> bool:
    """An error only a tracer raises (its class, or a base class, is one of :data:`TRACER_ERRORS`)."""
    return bool(set(mro) & TRACER_ERRORS)


def trace_errors(decl: dict) -> Tuple[FrozenSet[str], Tuple[Tuple[str, str], ...]]:
    """(class names accepted anywhere in the MRO, ((class name, message fragment), ...))."""
    names, fragments = set(), []
    for a in decl.get("args") or ():
        cls, sep, frag = a.partition(":")
        if sep:
            fragments.append((cls.strip(), frag.strip()))
        else:
            names.add(a.strip())
    return frozenset(names), tuple(fragments)


def raises_args(decl: dict) -> Tuple[FrozenSet[str], Tuple[Tuple[str, str], ...], Dict[str, str]]:
    """``raises`` arguments: the accepted errors as :func:`trace_errors` reads them, and the checks
    for the shapes of the finding that raise nothing, keyed by the keyword the flagged call then
    passes (``"rngs=same-rng"``: a call given ``rngs=`` is checked by ``same-rng``)."""
    checks: Dict[str, str] = {}
    errors = []
    for a in decl.get("args") or ():
        kw, sep, check = a.partition("=")
        if sep and ":" not in a:
            checks[kw.strip()] = check.strip()
        else:
            errors.append(a)
    names, fragments = trace_errors({"args": errors})
    return names, fragments, checks


def __getattr__(name: str):
    # ``STRATEGY`` (code -> strategy name) is derived from the registry on first use
    if name == "STRATEGY":
        return strategy_table()
    raise AttributeError(name)
