"""JAX2xx concrete values: Python control flow, ``int()``/``.item()``, NumPy and
data-dependent shapes on traced values, which need a value that does not exist while tracing.

Rules: ``jax2NN_*.py``. Analysis only this family uses: ``values.py`` (which operand makes an
expression concrete-dependent) and ``dtypes.py`` (boolean-valued expressions)."""
