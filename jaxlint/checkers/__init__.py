"""Rules: one module per rule (``jaxNNN_symbol.py``), discovered automatically.

Importing this package fills :data:`REGISTRY`; every front end (CLI, flake8,
pylint, docs, tests) reads the registry, never a hand-kept list.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import List

from .base import DOC_SECTIONS, REGISTRY, Context, Finding, Rule, Settings, register

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("jax") and _info.name[3:6].isdigit():
        importlib.import_module(f"{__name__}.{_info.name}")


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


__all__ = ["DOC_SECTIONS", "REGISTRY", "Context", "Finding", "Rule", "Settings", "register",
           "all_rules", "get_rule"]
