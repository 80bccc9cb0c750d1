"""JAX60x parallel: data parallelism with ``jax.pmap`` (and ``shard_map``): gradients that
each replica applies without averaging them over the devices, collectives over an axis name
that no enclosing transform binds.

Rules: ``jax6NN_*.py``. Analysis only this family uses: ``axes.py`` (which transforms bind
which axis names, which calls are collectives, and the axis names bound around a function).
"""
