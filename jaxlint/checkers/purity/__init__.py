"""JAX1xx purity: side effects (print, logging, global state, Python/NumPy RNG, argument
mutation, leaked tracers) that run once at trace time instead of on every call.

Rules: ``jax1NN_*.py``. Analysis only this family uses: ``facts.py`` (writes, impure calls,
leaks per traced function) and ``bindings.py`` (where module-level and closed-over names are
bound, rebound and mutated)."""
