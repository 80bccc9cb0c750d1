"""The semantic model: qualified names, traced contexts and traced values."""
from .bindings import Binding, BindingTable
from .model import (ARRAYISH, CERTAIN, CONTAINER, INFERRED, JAX, NUMPY, TRACED, UNSURE, CallTarget,
                    ClassInfo, Function, SemanticModel, TraceContext, TransformSite, proven)
from .source import SourceError, SourceFile

__all__ = [
    "ARRAYISH", "CERTAIN", "CONTAINER", "INFERRED", "JAX", "NUMPY", "TRACED", "UNSURE", "proven", "Binding", "BindingTable", "CallTarget",
    "ClassInfo", "Function", "SemanticModel", "TraceContext", "TransformSite", "SourceError",
    "SourceFile",
]
