"""JAX62x pytrees: values JAX cannot flatten crossing a transform boundary (plain Python
objects passed to or returned from a jitted, differentiated or mapped function).

Rules: ``jax6NN_*.py``. Analysis only this family uses: ``classes.py`` (which classes of the
module are surely not pytrees, and which values are instances of them) and ``boundary.py``
(which arguments of a call a transform traces).
"""
