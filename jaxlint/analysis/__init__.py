"""The semantic model: qualified names, traced contexts and traced values.

The names below are imported from their modules when first used (PEP 562): importing
``jaxlint.analysis.source`` (what reading a file needs) does not import the model.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .bindings import Binding, BindingTable
    from .model import (ARRAYISH, CERTAIN, CONTAINER, INFERRED, JAX, NUMPY, TRACED, UNSURE, CallTarget,
                        ClassInfo, Function, SemanticModel, TraceContext, TransformSite, proven)
    from .source import SourceError, SourceFile

# name -> the module of this package that defines it
_WHERE = {
    "Binding": "bindings", "BindingTable": "bindings",
    **{name: "model" for name in ("ARRAYISH", "CERTAIN", "CONTAINER", "INFERRED", "JAX", "NUMPY", "TRACED", "UNSURE",
                                  "CallTarget", "ClassInfo", "Function", "SemanticModel", "TraceContext",
                                  "TransformSite", "proven")},
    "SourceError": "source", "SourceFile": "source",
}

__all__ = [
    "ARRAYISH", "CERTAIN", "CONTAINER", "INFERRED", "JAX", "NUMPY", "TRACED", "UNSURE", "proven", "Binding", "BindingTable", "CallTarget",
    "ClassInfo", "Function", "SemanticModel", "TraceContext", "TransformSite", "SourceError",
    "SourceFile",
]


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:       # a submodule not imported yet (``jaxlint.analysis.kinds``)
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
