"""Which runtime signal confirms which rule (no JAX here).

One table keyed by rule code; a code whose rule is not registered yet is
simply supported when it appears.  The strategies themselves live in
:mod:`jaxlint.confirm.evidence` (worker side).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Tuple

# code -> strategy name (see evidence.STRATEGIES)
STRATEGY: Dict[str, str] = {
    "JAX101": "print",            # print/logging spy: called at trace time with a tracer
    "JAX102": "global-write",     # module globals / attributes changed by tracing
    "JAX103": "global-read",      # varying the global changes the traced program
    "JAX104": "impure-call",      # clock / Python or NumPy RNG called at trace time (sys.setprofile)
    "JAX105": "arg-mutation",     # argument pytree structure / leaf identities changed by tracing
    "JAX106": "tracer-leak",      # tracer left in a global / attribute; jax.checking_leaks()
    "JAX201": "trace-error",
    "JAX202": "trace-error",
    "JAX203": "trace-error",
    "JAX204": "trace-error",
    "JAX301": "trace-error",
    "JAX401": "key-reuse",        # jax_debug_key_reuse with typed keys
    "JAX402": "key-reuse",
    "JAX501": "compiles",         # compilations per step vs the whole step jitted
    "JAX502": "compiles",
    "JAX504": "unrolled-loop",    # equations / compile seconds vs the trip count
}

_CONCRETIZATION = frozenset({"ConcretizationTypeError", "TracerBoolConversionError",
                             "TracerIntegerConversionError", "TracerArrayConversionError"})

# code -> (exception class names accepted anywhere in the MRO,
#          ((class name, message fragment), ...) accepted as well)
TRACE_ERRORS: Dict[str, Tuple[FrozenSet[str], Tuple[Tuple[str, str], ...]]] = {
    "JAX201": (frozenset({"TracerBoolConversionError", "ConcretizationTypeError"}),
               (("ValueError", "truth value of an array"),)),
    "JAX202": (_CONCRETIZATION, ()),
    "JAX203": (_CONCRETIZATION, ()),
    "JAX204": (frozenset({"NonConcreteBooleanIndexError", "ConcretizationTypeError"}), ()),
    "JAX301": (frozenset(), (("TypeError", "immutable"), ("TypeError", "does not support item assignment"))),
}

# strategies that need sys.setprofile during the base trace
NEEDS_PROFILE = {"impure-call"}


def supported(code: str) -> bool:
    return code in STRATEGY
