"""Flax linen library contracts, as data: one row per layer whose behaviour a flag switches.

A row says which constructor field / call keyword switches the layer off (``deterministic``,
``use_running_average``), where that flag sits positionally, which rate makes it a no-op when
zero, which PRNG stream it draws from when on, which keyword passes a key directly instead, and
which variable collection it updates when on.  :func:`layer_for` reads this table (for
:mod:`.linen` and :mod:`.evaluate`); rules never name a Flax layer themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class Layer:
    name: str                          # canonical qualified name of the class
    switch: str                        # the flag that turns the behaviour *off* when True
    switch_field_pos: Optional[int]    # its position among the constructor's positional arguments
    switch_call_pos: Optional[int]     # its position among ``__call__``'s positional arguments after the input
    rate: Optional[str] = None         # a rate field that makes the layer a no-op when 0
    rate_field_pos: Optional[int] = None
    rate_default: Optional[float] = None   # the rate when not given (None: required)
    stream: Optional[str] = None       # the PRNG stream drawn from when on
    stream_field: Optional[str] = None  # the constructor field naming another stream
    explicit_rng: Optional[str] = None  # the ``__call__`` keyword that passes a key directly
    collection: Optional[str] = None   # the variable collection updated when on

    @property
    def short(self) -> str:
        return "nn." + self.name.rsplit(".", 1)[1]


LAYERS: Dict[str, Layer] = {row.name: row for row in (
    Layer("flax.linen.Dropout", switch="deterministic", switch_field_pos=2, switch_call_pos=0,
          rate="rate", rate_field_pos=0, rate_default=None, stream="dropout",
          stream_field="rng_collection", explicit_rng="rng"),
    Layer("flax.linen.BatchNorm", switch="use_running_average", switch_field_pos=0, switch_call_pos=0,
          collection="batch_stats"),
    Layer("flax.linen.MultiHeadDotProductAttention", switch="deterministic", switch_field_pos=None,
          switch_call_pos=None, rate="dropout_rate", rate_default=0.0, stream="dropout",
          explicit_rng="dropout_rng"),
    Layer("flax.linen.MultiHeadAttention", switch="deterministic", switch_field_pos=None,
          switch_call_pos=None, rate="dropout_rate", rate_default=0.0, stream="dropout",
          explicit_rng="dropout_rng"),
    Layer("flax.linen.SelfAttention", switch="deterministic", switch_field_pos=None,
          switch_call_pos=1, rate="dropout_rate", rate_default=0.0, stream="dropout",
          explicit_rng="dropout_rng"),
)}


def layer_for(qualname: Optional[str]) -> Optional[Layer]:
    """The row of a Flax layer class by its qualified name (``flax.linen.Dropout``, or the
    name under a ``flax.linen`` submodule: ``flax.linen.stochastic.Dropout``)."""
    if not qualname or not qualname.startswith("flax.linen."):
        return None
    return LAYERS.get("flax.linen." + qualname.rsplit(".", 1)[1])


# The ``apply`` keywords that belong to ``apply`` itself, not to the module's method.
APPLY_KEYWORDS = frozenset({"rngs", "method", "mutable", "capture_intermediates"})
# The rng stream every other stream falls back to when absent (``rngs={"params": k}`` also
# feeds ``make_rng("dropout")``).
FALLBACK_STREAM = "params"
# Calls that return the variables dict they are given, unchanged in shape.
SHAPE_PRESERVING = {
    "optax.apply_updates": 0, "flax.core.freeze": 0, "flax.core.unfreeze": 0, "flax.core.copy": 0,
    "flax.core.frozen_dict.freeze": 0, "flax.core.frozen_dict.unfreeze": 0,
    "flax.core.FrozenDict": 0, "flax.core.frozen_dict.FrozenDict": 0,
    "jax.device_put": 0, "jax.device_get": 0, "flax.jax_utils.replicate": 0,
    "flax.jax_utils.unreplicate": 0, "jax.lax.stop_gradient": 0, "jax.tree.map": 1,
}
# Flatteners whose second result rebuilds a tree shaped like the one given:
# ``flat, unravel = ravel_pytree(params)``; ``unravel(flat + eps)`` is a ``params``-shaped dict.
RAVELS = frozenset({"jax.flatten_util.ravel_pytree"})
# Tree maps: ``jax.tree.map(lambda *xs: jnp.stack(xs), *members)`` stacks dicts of one shape.
TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
# Transform kinds whose product calls the function with the arguments it is given, or with
# slices of them along a mapped axis (``jax.vmap(model.apply, in_axes=(0, None))(stacked, x)``
# runs ``apply`` with one variables dict per slice of the stack).
MAPS_ARGUMENTS = frozenset({"jit", "vmap", "pmap"})
# Methods of a module instance that run it (the first argument is the variables dict).
APPLY_METHODS = frozenset({"apply"})
INIT_METHODS = frozenset({"init"})
# ``self.<method>`` calls inside a linen module that declare or touch variables
VARIABLE_METHODS = frozenset({"variable", "param", "sow", "put_variable", "make_rng", "perturb"})
