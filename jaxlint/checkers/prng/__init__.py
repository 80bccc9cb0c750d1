"""JAX4xx PRNG keys: reused and constant keys, which repeat the same "random" numbers.

Rules: ``jax4NN_*.py``. Analysis only this family uses: ``keys.py`` (key flow: where keys are
made, split, consumed and reused)."""
