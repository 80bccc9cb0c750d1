"""JAX504 unrolled-python-loop: a long Python loop inside a traced function.

``rule`` (the rule, registered on import), ``trips`` (what a loop iterates over and how
many times; runtime confirmation reuses :func:`trips.loop_info`) and ``rewrite`` (the
``fori_loop``/``scan`` fix)."""
from .rule import UnrolledPythonLoop

__all__ = ["UnrolledPythonLoop"]
