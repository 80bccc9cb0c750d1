"""The semantic model: qualified names, traced contexts and traced values."""
from .bindings import Binding, BindingTable
from .model import (ARRAYISH, CERTAIN, CONTAINER, INFERRED, JAX, NUMPY, TRACED, CallTarget,
                    ClassInfo, Function, SemanticModel, TraceContext, TransformSite)
from .source import SourceError, SourceFile

__all__ = [
    "ARRAYISH", "CERTAIN", "CONTAINER", "INFERRED", "JAX", "NUMPY", "TRACED", "Binding", "BindingTable", "CallTarget",
    "ClassInfo", "Function", "SemanticModel", "TraceContext", "TransformSite", "SourceError",
    "SourceFile",
]
