"""Where a PRNG finding is usually deliberate: tests, benchmarks and teaching material keep one
key on purpose (to compare two computations, to feed every case the same inputs, to keep a
demonstration short).  Such findings belong to
the strict profile (``--strict``)."""
from __future__ import annotations

import ast
import re
from typing import Optional

from ...analysis.model import Function, SemanticModel


def deliberate_basis(model: SemanticModel, fn: Optional[Function], same_draws: bool = False,
                     node: Optional[ast.AST] = None) -> Optional[str]:
    """Why a key finding in ``fn`` (at ``node``) belongs to the strict profile, or None.
    ``same_draws``: the finding is one key drawn from twice by ``jax.random`` samplers (kept
    for callers; every deliberate place now takes it to the strict profile: read samples found
    same-draw reuse in demo notebooks debatable, demo data nobody acts on)."""
    if model.in_test_code(fn):
        return "test code, where one key is often given to several computations on purpose"
    if model.in_smoke_test(node):
        return "the `__main__` self-check of a library module, where one key is often kept on purpose"
    if model.in_tutorial_code():
        return "teaching material (a notebook or tutorial), where one key is often kept on purpose"
    if model.in_benchmark_code() or _benchmark_function(fn):
        return "benchmark code, where a fixed key per case keeps every run's inputs the same on purpose"
    return None


# names of functions that time or profile code (``benchmark_attention``, ``bench_matmul``,
# ``profile_step``): each case's inputs are fixed on purpose, like a benchmark module's
_BENCHMARK_NAME = re.compile(r"^_?(bench|benchmark|profile|timeit)(_|$)|_(benchmark|bench)$")


def _benchmark_function(fn: Optional[Function]) -> bool:
    """``fn`` or a function around it is named as a benchmark (``benchmark_attention``)."""
    s = fn
    while s is not None and not s.is_module:
        if _BENCHMARK_NAME.search(s.name):
            return True
        s = s.parent
    return False
