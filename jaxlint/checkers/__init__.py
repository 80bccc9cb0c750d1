"""Rules, in one package per family, one module (or subpackage) per rule
(``<family>/jaxNNN_symbol.py``), discovered automatically; the module's name gives
the rule its code and symbol (:func:`base.register`).

Families: ``purity`` (JAX1xx), ``concrete`` (JAX2xx), ``arrays`` (JAX3xx), ``prng``
(JAX4xx), ``jit`` (JAX5xx), ``parallel`` (JAX60x), ``flax`` (JAX61x), ``pytree``
(JAX62x). The purity and concrete rules are about traced code
(:class:`base.TracedCodeRule`); the others about how a file uses JAX's API. Analysis
that only one family uses lives in that family's package; what several families ask
lives in :mod:`jaxlint.analysis`.

Importing this package fills :data:`REGISTRY`; every front end (CLI, flake8,
pylint, docs, tests) reads the registry, never a hand-kept list.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import List

from .base import DOC_SECTIONS, REGISTRY, Context, Finding, FixOffer, Rule, Settings, TracedCodeRule, register

def _is_rule_module(name: str) -> bool:
    return name.startswith("jax") and name[3:6].isdigit()


def _discover() -> None:
    for family in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not family.ispkg:
            continue
        package = importlib.import_module(f"{__name__}.{family.name}")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if _is_rule_module(info.name):
                importlib.import_module(f"{package.__name__}.{info.name}")


_discover()


def all_rules() -> List[Rule]:
    return [REGISTRY[c] for c in sorted(REGISTRY)]


def get_rule(key: str):
    """A rule by code (``JAX101``) or symbol (``print-under-trace``), case-insensitive."""
    k = key.strip()
    r = REGISTRY.get(k.upper())
    if r is not None:
        return r
    for rule in REGISTRY.values():
        if rule.symbol == k.lower():
            return rule
    return None


__all__ = ["DOC_SECTIONS", "REGISTRY", "Context", "Finding", "FixOffer", "Rule", "Settings", "TracedCodeRule", "register",
           "all_rules", "get_rule"]
