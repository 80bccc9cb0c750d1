"""JAX61x Flax linen: modules used like PyTorch ones — attributes assigned outside ``setup``,
``apply`` given the inner parameter dict, dropout without an rng stream, BatchNorm statistics
that are never updated.

Rules: ``jax61N_*.py``. Library contracts (Flax layers and the keywords that switch them on)
as data: ``contracts.py``. Analysis only this family uses, one ``FlaxFacts`` per file (``linen.py``:
which module instance an ``apply`` runs, call sites), with its parts ``evaluate.py`` (what the
module's layers need for the arguments it is given), ``variables.py`` (the shape of the variables
dict passed to it) and ``values.py`` (constants read off the syntax tree)."""
