"""JAX3xx arrays: NumPy/PyTorch-style in-place updates of immutable JAX arrays.

Rules: ``jax3NN_*.py``."""
