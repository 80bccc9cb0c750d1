"""What jaxlint knows about JAX, Flax, Equinox and the Python standard library.

Everything here is data, keyed by *qualified* names (``jax.numpy.sum``, never
``jnp.sum``).  The semantic model (``model.py``) reads these tables; rules
should ask the model rather than read the tables directly, except for
rule-specific vocabularies (which calls are impure, which are samplers, ...).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

# --------------------------------------------------------------------------
# Canonical spellings: several public paths name the same object.
# --------------------------------------------------------------------------
CANONICAL_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("jax.experimental.pjit.pjit", "jax.jit"),
    ("jax.experimental.shard_map.shard_map", "jax.shard_map"),
    ("jax.tree_util.tree_map", "jax.tree.map"),
    ("jax.tree_map", "jax.tree.map"),
    ("jax.tree_util.tree_leaves", "jax.tree.leaves"),
    ("jax.tree_util.tree_structure", "jax.tree.structure"),
    ("jax.tree_util.tree_flatten", "jax.tree.flatten"),
    ("jax._src.numpy", "jax.numpy"),
    ("flax.linen.module.Module", "flax.linen.Module"),
    ("flax.linen.module.compact", "flax.linen.compact"),
    ("flax.nnx.module.Module", "flax.nnx.Module"),
    ("flax.nnx.Module", "flax.nnx.Module"),
    ("equinox._module.Module", "equinox.Module"),
)


def canonical(name: str) -> str:
    for prefix, repl in CANONICAL_PREFIXES:
        if name == prefix or name.startswith(prefix + "."):
            return repl + name[len(prefix):]
    return name


# --------------------------------------------------------------------------
# Transforms: calls that trace the function they are given.
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Transform:
    name: str                     # canonical qualified name
    kind: str                     # jit | grad | vmap | pmap | trace | filter | body
    fun_positions: Tuple[int, ...] = (0,)   # positional indices of traced callables
    fun_keywords: Tuple[str, ...] = ("fun", "f")
    static_nums_kw: Tuple[str, ...] = ()   # keywords naming static positional args
    static_names_kw: Tuple[str, ...] = ()  # keywords naming static keyword args
    list_positions: Tuple[int, ...] = ()   # positional args holding a list of callables

    @property
    def short(self) -> str:
        return self.name


def _t(name, kind, **kw) -> Transform:
    return Transform(name, kind, **kw)


_JIT_STATIC = dict(static_nums_kw=("static_argnums",), static_names_kw=("static_argnames",))

TRANSFORMS = {t.name: t for t in [
    _t("jax.jit", "jit", **_JIT_STATIC),
    _t("jax.pmap", "pmap", static_nums_kw=("static_broadcasted_argnums",)),
    _t("jax.vmap", "vmap"),
    _t("jax.grad", "grad"),
    _t("jax.value_and_grad", "grad"),
    _t("jax.jacfwd", "grad"),
    _t("jax.jacrev", "grad"),
    _t("jax.hessian", "grad"),
    _t("jax.checkpoint", "trace", static_nums_kw=("static_argnums",)),
    _t("jax.remat", "trace", static_nums_kw=("static_argnums",)),
    _t("jax.custom_jvp", "trace", static_nums_kw=("nondiff_argnums",), static_names_kw=("nondiff_argnames",)),
    _t("jax.custom_vjp", "trace", static_nums_kw=("nondiff_argnums",), static_names_kw=("nondiff_argnames",)),
    _t("jax.shard_map", "trace"),
    _t("jax.eval_shape", "trace"),
    _t("jax.make_jaxpr", "trace", **_JIT_STATIC),
    _t("jax.jvp", "trace"),
    _t("jax.vjp", "trace"),
    _t("jax.linearize", "trace"),
    _t("jax.named_scope", "none"),
    _t("equinox.filter_jit", "filter"),
    _t("equinox.filter_grad", "filter"),
    _t("equinox.filter_value_and_grad", "filter"),
    _t("equinox.filter_vmap", "filter"),
    _t("equinox.filter_pmap", "filter"),
    _t("equinox.filter_checkpoint", "filter"),
    _t("flax.nnx.jit", "jit", **_JIT_STATIC),
    _t("flax.nnx.grad", "grad"),
    _t("flax.nnx.value_and_grad", "grad"),
    _t("flax.nnx.vmap", "vmap"),
    _t("flax.nnx.scan", "trace"),
    _t("flax.nnx.remat", "trace"),
    _t("flax.nnx.pmap", "pmap"),
    _t("flax.linen.jit", "trace"),
    _t("flax.linen.remat", "trace"),
    _t("flax.linen.checkpoint", "trace"),
    # structured control flow: bodies are always traced, even outside jit
    _t("jax.lax.scan", "body", fun_keywords=("f",)),
    _t("jax.lax.fori_loop", "body", fun_positions=(2,), fun_keywords=("body_fun",)),
    _t("jax.lax.while_loop", "body", fun_positions=(0, 1), fun_keywords=("cond_fun", "body_fun")),
    _t("jax.lax.cond", "body", fun_positions=(1, 2), fun_keywords=("true_fun", "false_fun")),
    _t("jax.lax.switch", "body", fun_positions=(), fun_keywords=("branches",), list_positions=(1,)),
    _t("jax.lax.map", "body", fun_keywords=("f",)),
    _t("jax.lax.associative_scan", "body", fun_keywords=("fn",)),
]}
# the "none" entry above only documents that named_scope is not a transform
del TRANSFORMS["jax.named_scope"]

# the final path component of every transform name: a cheap pre-filter before
# resolving a call's qualified name
TRANSFORM_TERMINALS = frozenset(n.rsplit(".", 1)[1] for n in TRANSFORMS)

PARTIAL = frozenset({"functools.partial"})

JIT_KINDS = frozenset({"jit"})

# Higher-order helpers that call a function on (leaves of) their other arguments
# in the caller's context: the callable's parameters are traced when the
# arguments are.
HIGHER_ORDER = {
    "jax.tree.map": 0,
    "jax.tree_util.tree_map_with_path": 0,
    "jax.tree.map_with_path": 0,
}

# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------
# attributes of an array that are static Python values even while tracing
STATIC_ATTRS = frozenset({
    "shape", "ndim", "dtype", "size", "itemsize", "nbytes", "weak_type",
    "sharding", "aval", "named_shape", "__class__", "__name__",
})

# calls whose result is a Python value computed from static facts only
STATIC_RESULT_CALLS = frozenset({
    "len", "isinstance", "issubclass", "type", "id", "callable", "hasattr",
    "repr", "str", "format", "print", "hash", "dir", "vars",
    "int", "float", "bool", "complex",            # concretize (JAX202 reports them)
    "jax.numpy.shape", "jax.numpy.ndim", "jax.numpy.size", "jax.numpy.dtype",
    "jax.numpy.result_type", "jax.numpy.issubdtype", "jax.numpy.iinfo",
    "jax.numpy.finfo", "jax.numpy.promote_types", "jax.numpy.can_cast",
    "jax.numpy.isdtype", "jax.numpy.isscalar", "jax.numpy.iscomplexobj",
    "jax.numpy.isrealobj", "jax.numpy.issubsctype",
    "numpy.shape", "numpy.ndim", "numpy.size", "numpy.dtype", "numpy.result_type",
    "numpy.issubdtype", "numpy.iinfo", "numpy.finfo", "numpy.prod",
    "jax.tree.structure", "jax.eval_shape", "jax.ShapeDtypeStruct",
    "jax.device_count", "jax.local_device_count", "jax.devices", "jax.local_devices",
    "jax.process_index", "jax.process_count", "jax.default_backend",
    "jax.core.is_concrete", "jax.dtypes.canonicalize_dtype", "jax.dtypes.result_type",
    "jax.debug.print", "jax.debug.callback", "jax.debug.breakpoint",
    "math.prod", "jax.lax.axis_size", "jax.core.valid_jaxtype",
})

# attribute name prefixes that denote static metadata (``arr.n_batch``, ``cfg.num_heads``)
STATIC_ATTR_PREFIXES = ("n_", "num_", "is_", "has_", "use_")
# unknown callables named like predicates return Python bools (``is_array(x)``)
PREDICATE_PREFIXES = ("is_", "has_", "can_", "should_", "valid", "check_", "_is_", "_has_")

# Pallas kernels write through mutable refs (``o_ref[...] = x``)
PALLAS_PREFIX = "jax.experimental.pallas"

# how many positional arguments a structured-control-flow primitive passes to its body;
# ``None``: computed from the call (cond/switch operands)
BODY_ARITY = {
    "jax.lax.scan": 2, "jax.lax.fori_loop": 2, "jax.lax.while_loop": 1, "jax.lax.map": 1,
    "jax.lax.associative_scan": 2, "jax.lax.cond": None, "jax.lax.switch": None,
}

# Python builtins whose result is a container of their inputs
CONTAINER_CALLS = frozenset({
    "list", "tuple", "dict", "set", "frozenset", "sorted", "reversed", "zip",
    "enumerate", "map", "filter", "range",
})

# modules whose functions return JAX arrays
ARRAY_MODULES = (
    "jax.numpy.", "jax.lax.", "jax.random.", "jax.nn.", "jax.scipy.", "jax.image.",
    "jax.ops.", "flax.linen.activation.", "optax.",
)
ARRAY_FUNCTIONS = frozenset({"jax.device_put", "jax.numpy.array", "jax.numpy.asarray"})
# modules of jax-adjacent functions that are not array producers
NON_ARRAY = frozenset({
    "jax.numpy.ndarray", "optax.GradientTransformation",
})

# optax / flax calls whose results are PyTrees of arrays rather than arrays
PYTREE_FUNCTIONS_PREFIX = ("optax.",)

# methods whose result is a Python value (conversion), not an array
CONCRETIZING_METHODS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__"})

# evidence that a name holds a Python container rather than an array
CONTAINER_METHODS = frozenset({
    "append", "extend", "insert", "pop", "update", "setdefault", "clear",
    "items", "keys", "values", "get", "remove", "add", "discard", "popitem",
})

CONTAINER_ANNOTATIONS = frozenset({
    "dict", "list", "set", "typing.Dict", "typing.List", "typing.Set",
    "typing.MutableMapping", "typing.Mapping", "typing.Sequence",
    "typing.MutableSequence", "collections.abc.Mapping", "collections.abc.MutableMapping",
    "collections.abc.Sequence", "collections.OrderedDict", "collections.defaultdict",
})

ARRAY_ANNOTATIONS = frozenset({
    "jax.Array", "jax.numpy.ndarray", "jax.typing.ArrayLike", "chex.Array",
    "jaxtyping.Array", "jax.numpy.DeviceArray",
})

# annotations of parameters that carry Python configuration, not arrays
SCALAR_ANNOTATIONS = frozenset({"bool", "int", "str", "float"})

# module bases
FLAX_LINEN_MODULE = "flax.linen.Module"
NNX_MODULE = "flax.nnx.Module"
EQUINOX_MODULE = "equinox.Module"
MODULE_BASES = {FLAX_LINEN_MODULE: "linen", NNX_MODULE: "nnx", EQUINOX_MODULE: "equinox"}
LINEN_COMPACT = "flax.linen.compact"
LINEN_TRACED_METHODS = frozenset({"__call__", "setup"})
LINEN_PARAM_METHODS = frozenset({"param", "variable", "make_rng", "sow", "perturb"})

LOGGING_FUNCS = frozenset({
    "logging.debug", "logging.info", "logging.warning", "logging.warn", "logging.error",
    "logging.critical", "logging.exception", "logging.log",
    "absl.logging.debug", "absl.logging.info", "absl.logging.warning", "absl.logging.error",
    "absl.logging.log", "absl.logging.fatal", "absl.logging.vlog",
})
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
LOGGER_FACTORIES = frozenset({"logging.getLogger", "absl.logging.get_absl_logger"})


def transform_for(qualname: Optional[str]) -> Optional[Transform]:
    if qualname is None:
        return None
    return TRANSFORMS.get(qualname)
