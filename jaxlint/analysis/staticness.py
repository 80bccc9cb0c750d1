"""JAX's staticness rules as data: what JAX itself keeps a Python value under its transforms.

One row per rule, read from JAX's documentation (``jax.jit``, ``jax.vmap``, ``jax.tree_util``
pytree registration, ``jax.Array`` attributes).  Each row says what JAX keeps static, where the
model applies it, and the fixture tag that shows it (``# ok: [tag] ...`` on a line of
``tests/fixtures``); ``tests/test_staticness.py`` checks every row is shown by a fixture and
every tag names a row.  A value none of these rules makes static, and no transform makes a
tracer, is *unknown*: the rules that report tracers stay silent on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class StaticRule:
    tag: str        # the fixture tag, ``# ok: [tag] ...``
    what: str       # what JAX keeps a Python value
    where: str      # the part of the model that applies it


STATIC_RULES: Tuple[StaticRule, ...] = (
    StaticRule("static_argnums", "arguments named by `static_argnums`/`static_argnames` of `jit` (and "
               "`static_broadcasted_argnums` of `pmap`, `nondiff_argnums` of `custom_vjp`)",
               "staticargs.StaticArgsMixin.static_spec, knowledge.Transform.static_*_kw"),
    StaticRule("partial", "arguments bound by `functools.partial` before the transform: constants of the callable",
               "transforms.TransformsMixin._resolve_call_result"),
    StaticRule("in_axes_none", "arguments `vmap` does not map (`in_axes=None`), `shard_map` `in_specs=None`, "
               "and those `grad` does not differentiate when no staging trace surrounds it",
               "staticargs.StaticArgsMixin.untraced_spec, transforms.TransformsMixin._traced_params"),
    StaticRule("unpassed_default", "defaults no call of the transformed function passes "
               "(`jax.vmap(f)(a, b)` leaves `f`'s third parameter at its default)",
               "staticargs.StaticArgsMixin._unpassed_defaults"),
    StaticRule("in_shardings_arity", "parameters past the length of a literal `in_shardings` tuple of `jit`: "
               "the jitted function takes exactly that many positional arguments and no keywords, so they "
               "keep their defaults", "staticargs._sharded_arity, knowledge.SHARDED_ARITY_KEYWORDS"),
    StaticRule("lambda_defaults", "defaults of a transformed lambda whose calls are not all visible "
               "(`jax.jit(lambda x, _n=n: ...)`): the idiom that binds a value into a closure",
               "staticargs.StaticArgsMixin._unpassed_defaults"),
    StaticRule("numpy_conversion", "what `np.asarray`/`np.array`/`jax.device_get` return: given a tracer they "
               "raise, so their result is a concrete NumPy array", "knowledge.NUMPY_CONVERSIONS, "
               "kinds.KindsMixin._library_call_kind"),
    StaticRule("register_static", "every attribute of a class registered with "
               "`jax.tree_util.register_static`", "statics.static_names"),
    StaticRule("meta_fields", "`meta_fields` of `jax.tree_util.register_dataclass`",
               "statics.static_names"),
    StaticRule("field_metadata", "dataclass fields with `metadata=dict(static=True)` "
               "(read by `register_dataclass`)", "statics._static_field"),
    StaticRule("pytree_node_false", "`flax.struct.field(pytree_node=False)`", "statics._static_field"),
    StaticRule("eqx_static", "`eqx.field(static=True)` / `eqx.static_field()`", "statics._static_field"),
    StaticRule("tree_flatten_aux", "the auxiliary data a `tree_flatten` returns (kept in the treedef)",
               "statics._aux_attributes"),
    StaticRule("array_metadata", "`.shape`, `.ndim`, `.size`, `.dtype`, `.sharding` of any array, tracers "
               "included", "knowledge.STATIC_ATTRS, kinds.KindsMixin._kind_attribute"),
    StaticRule("static_calls", "`len()`, `jnp.shape`, `isinstance`, `jax.eval_shape`, "
               "`jax.device_count()`, tree structures: Python values", "knowledge.STATIC_RESULT_CALLS"),
    StaticRule("static_result", "a function whose every `return` is one of the above (a shape, a count), "
               "in this module or exported from another", "flow.FlowMixin.static_result"),
    StaticRule("str_methods", "what a method of a `str` returns (`'/'.join(path)`, `s.split('/')`): "
               "a `str` is never a tracer, and its methods raise on one (`format` excepted, whose "
               "result shows the tracer it formats)", "kinds.KindsMixin._method_call_kind"),
    StaticRule("hashable_keys", "the keys of a mapping (`d.keys()`, the key of `d.items()`): tracers are "
               "unhashable, so no tracer is ever a dict key", "kinds.KindsMixin._method_call_kind, "
               "kinds.KindsMixin._iter_element_kind"),
    StaticRule("filter_leaves", "under Equinox filter transforms (`eqx.filter_jit`, `filter_grad`, ...) "
               "every leaf of an argument that is not an array: a field of an argument (`method.batch_size`) "
               "is a tracer or a Python value, unknown without evidence", "kinds.KindsMixin._kind_attribute, "
               "tracedness.TracednessMixin.vouched_array"),
    StaticRule("cached_params", "parameters of a function cached on its arguments (`@functools.lru_cache`, "
               "`@functools.cache`): its arguments are hashed, and no JAX array or tracer is hashable",
               "knowledge.ARGUMENT_CACHES, transforms.TransformsMixin._find_transforms"),
    StaticRule("axis_size", "`lax.psum(1, axis)`: the size of a mapped axis", "knowledge.AXIS_SIZE_REDUCTIONS"),
)

STATIC_TAGS = frozenset(r.tag for r in STATIC_RULES)
