"""JAX5xx compilation: jit placement, jit recreated per call, nested jit, Python loops
unrolled under jit and bad static arguments.

Rules: ``jax5NN_*``. Analysis only this family uses: ``calls.py`` (an index of jitted
bindings and their call sites) and ``steps.py`` (what a training step looks like)."""
