"""What the PRNG family knows about JAX keys by name: which ``jax.random`` functions make,
consume or only look at a key, which other calls only look at one, which variable names
conventionally hold keys, and cheap text pre-filters over a module's source."""
from __future__ import annotations

import ast
import functools
import re
from typing import List, Optional, Tuple

from ...analysis import knowledge as K
from ...analysis.model import Function, SemanticModel

RANDOM = "jax.random."
# jax.random functions that create a key without consuming one
KEY_FROM_SEED = frozenset({"jax.random.PRNGKey", "jax.random.key"})
KEY_PRODUCERS = frozenset({
    "jax.random.PRNGKey", "jax.random.key", "jax.random.split", "jax.random.fold_in",
    "jax.random.clone", "jax.random.wrap_key_data",
})
PRODUCER_TERMINALS = frozenset(q.rsplit(".", 1)[1] for q in KEY_PRODUCERS)
# jax.random functions whose first argument is a key but that do not consume it
RANDOM_NON_CONSUMING = frozenset({
    "jax.random.PRNGKey", "jax.random.key", "jax.random.key_data", "jax.random.key_impl",
    "jax.random.clone", "jax.random.wrap_key_data", "jax.random.key_dtype", "jax.random.default_prng_impl",
})
# final components of every jax.random function: a cheap pre-filter before resolving names
RANDOM_TERMINALS = frozenset({
    "PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in", "gamma",
    "generalized_normal", "geometric", "gumbel", "key", "key_data", "key_impl", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal",
    "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "split",
    "t", "triangular", "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data", "shuffle",
})
# calls that only look at a key (or copy it somewhere): not a consumption
NON_CONSUMING = frozenset({
    "print", "repr", "str", "format", "isinstance", "type", "len", "id", "hash", "bool", "int",
    "list", "tuple", "dict", "set", "frozenset", "zip", "enumerate", "iter", "reversed", "sorted",
    "next", "getattr", "setattr", "hasattr", "vars", "dir", "callable", "issubclass",
    "jax.eval_shape", "jax.device_put", "jax.device_get", "jax.block_until_ready", "jax.typeof",
    "jax.ShapeDtypeStruct", "jax.core.get_aval", "jax.tree.structure", "jax.tree.leaves",
    "jax.tree.flatten", "jax.lax.stop_gradient",
})
NON_CONSUMING_PREFIXES = ("logging.", "absl.logging.", "jax.dtypes.", "numpy.", "jax.numpy.", "jax.debug.",
                          "pickle.", "json.", "copy.", "chex.assert")
# methods whose arguments are looked up or stored, never drawn from
CONTAINER_METHODS = frozenset({
    "get", "pop", "setdefault", "append", "extend", "insert", "remove", "index", "count", "add",
    "discard", "update", "__contains__", "__getitem__", "startswith", "endswith", "join", "format",
    "write", "put", "put_nowait", "send", "save", "dump", "dumps", "log", "store", "record",
    "replace", "_replace",
})
# methods that run a model only to describe it (``model.tabulate(rng, x)`` prints a summary)
LOOK_ONLY_METHODS = frozenset({"tabulate"})
# methods of a jitted function's ahead-of-time API: they trace it with abstract values
# (``jax.jit(f).lower(key)`` compiles for the key's shape; nothing is drawn)
LOWERING_METHODS = frozenset({"lower", "trace", "eval_shape"})
# wrappers that call the function they are given (seen through when comparing consumers)
WRAPPERS = K.PRNG_WRAPPERS
# methods that produce a fresh key on every call
PRODUCER_METHODS = frozenset({"make_rng"})
TIME_SOURCES = frozenset({
    "time.time", "time.time_ns", "time.perf_counter", "time.perf_counter_ns", "time.monotonic",
    "time.monotonic_ns", "time.process_time", "datetime.datetime.now", "datetime.datetime.utcnow",
    "datetime.now",
})
# words in a callee's name that say it saves or restores state (checkpoints): a key handed to
# it is stored or restored, not drawn from (``restore_checkpoint(dir, state, rng)``)
_STORAGE_WORDS = frozenset({"restore", "checkpoint", "checkpoints", "ckpt", "save", "serialize", "deserialize"})
# initializer factories: ``nn.initializers.lecun_normal()`` returns a function that draws from its key
INITIALIZER_PREFIXES = ("jax.nn.initializers.", "flax.linen.initializers.", "flax.nnx.initializers.")
# initializers that take a key and ignore it
CONSTANT_INITIALIZERS = frozenset({"zeros", "ones", "constant", "zeros_init", "ones_init"})
# methods that draw from the key given as their first argument (Flax/Haiku ``init``, RNN cells)
KEY_FIRST_METHODS = frozenset({"init", "init_with_output", "initialize_carry"})
# of those, the ones that draw from the key: a Flax RNN cell's ``initialize_carry`` uses its
# ``carry_init``, zeros unless the cell is configured otherwise
DRAWING_KEY_FIRST_METHODS = frozenset({"init", "init_with_output"})
# libraries whose functions draw from the key they are given (``pix.random_flip_left_right(key,
# image)``); and the keyword through which TFP/distrax/numpyro-style ``sample`` takes its key
DRAWING_LIBRARY_PREFIXES = ("dm_pix.random_", "jax.random.")
SEED_KEYWORDS = frozenset({"seed"})
# objects of these library classes draw from the key given first to these methods
# (``mcmc = MCMC(NUTS(model), ...); mcmc.run(key, ...)``; ``Predictive(model, ...)(key)``)
DRAWING_OBJECT_METHODS = {
    "numpyro.infer.MCMC": frozenset({"run"}),
    "numpyro.infer.Predictive": frozenset({"__call__"}),
    "numpyro.infer.SVI": frozenset({"init", "run"}),
}
# NNX streams built from a key: the modules they are handed to draw their parameters from it
NNX_RNG_STREAMS = frozenset({"flax.nnx.Rngs", "flax.nnx.RngStream"})
# names of parameters/locals that conventionally hold keys: the last word names a key
_KEY_WORDS = frozenset({"key", "keys", "rng", "prng", "subkey", "subkeys", "subrng", "prngkey", "rngkey", "sk"})
# words that make a key-named variable something else (``num_keys``, ``key_padding_mask``)
_NOT_KEY_WORDS = frozenset({
    "num", "n", "len", "count", "max", "min", "size", "dim", "dims", "shape", "name", "names", "dict",
    "map", "mask", "path", "col", "column", "attr", "str", "id", "ids", "idx", "index", "sort", "cache",
    "lookup", "api", "secret", "public", "private", "primary", "foreign", "hot", "dict", "file", "env",
})
# keywords through which Flax takes a key (``nn.Dropout(...)(x, rng=key)``)
RNG_KEYWORDS = frozenset({"rng", "prng_key", "rng_key", "dropout_rng", "dropout_key"})

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@functools.lru_cache(maxsize=8192)
def is_key_like_name(name: str) -> bool:
    """``key``, ``rng``, ``dropout_key``, ``init_rng``, ``subkey``, ``prng`` (not ``num_keys``, ``rngs``)."""
    words = name.lower().strip("_").split("_")
    if words[-1] not in _KEY_WORDS:
        return False
    return not any(w in _NOT_KEY_WORDS for w in words)


@functools.lru_cache(maxsize=4096)
def stores_state(callee: str) -> bool:
    """A callee whose name says it saves or restores state (``restore_checkpoint``,
    ``mngr.restore``, ``save_ckpt``): it keeps a key it is given, it does not draw from it."""
    last = callee.rsplit(".", 1)[-1]
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", last).lower().strip("_").split("_")   # JaxRandomKeySave
    return any(w in _STORAGE_WORDS for w in words)


# words in a callee's name that say it only computes shapes, specs or annotations (an abstract
# evaluation under ``jax.eval_shape``): the key handed to it shapes the result, no value is drawn
_ABSTRACT_WORDS = frozenset({"abstract", "annotations", "annotation"})


def abstract_only(callee: str) -> bool:
    """A callee whose name says it evaluates abstractly (``get_abstract_state``,
    ``create_abstract_model``, ``get_kv_cache_annotations``): no random value is drawn."""
    last = callee.rsplit(".", 1)[-1]
    return any(w in _ABSTRACT_WORDS for w in last.lower().strip("_").split("_"))


def key_argument(call: ast.Call) -> Optional[ast.expr]:
    """The key a ``jax.random`` call takes: its first argument or ``key=``."""
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == "key":
            return kw.value
    return None


def constant_data(call: ast.Call) -> bool:
    data = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "data"), None)
    """``fold_in(key, <constant>)``: the folded data is a literal."""
    return isinstance(data, ast.Constant)


def functions_mentioning(model: SemanticModel, markers: Tuple[str, ...]) -> List[Function]:
    """The module scope and every function whose source text contains one of ``markers``
    (a nested function is looked at only when its enclosing one matched)."""
    src = getattr(model, "source", None)
    if src is None:
        return list(model.functions)
    text = src.text
    out = [model.module]
    stack = list(reversed(model.module.children))
    while stack:
        fn = stack.pop()
        node = fn.node
        seg = text[src.offset(node.lineno, 0):src.offset(node.end_lineno + 1, 0)]
        for mk in markers:
            if mk in seg:
                out.append(fn)
                stack.extend(reversed(fn.children))
                break
    return out


def mentions_random(model: SemanticModel, text: str) -> bool:
    for q in model.imports.aliases.values():
        if q == "jax.random" or q.startswith(RANDOM) or q.startswith(INITIALIZER_PREFIXES) \
                or q + "." in INITIALIZER_PREFIXES:
            return True     # (an initializer draws from the key it is given)
    if "jax.random" in text or ("initializers." in text and any(
            q in ("flax.linen", "flax.nnx", "jax.nn", "flax") for q in model.imports.aliases.values())):
        return True
    return "rng" in text and ("make_rng" in text or "rng=" in text or "rngs=" in text)

# Flax layers whose parameters are initialised without randomness (ones/zeros): their
# ``init(key, x)`` draws nothing from the key
DETERMINISTIC_INIT_LAYERS = frozenset({
    "flax.linen.LayerNorm", "flax.linen.RMSNorm", "flax.linen.GroupNorm", "flax.linen.BatchNorm",
    "flax.linen.InstanceNorm", "flax.linen.Dropout",
})
# Flax variable collections, which no layer draws random numbers from: a key given under one of
# these names in ``init({...})``/``rngs={...}`` is never drawn (RNG streams are read by
# ``make_rng(name)`` only)
VARIABLE_COLLECTIONS = frozenset({"batch_stats", "cache", "intermediates", "losses", "params_axes", "spectral_norm",
                                  "weight_norm", "perturbations", "nnx"})
# keyword values of ``apply`` that switch stochastic layers off
DETERMINISTIC_APPLY = (("deterministic", True), ("train", False), ("training", False), ("is_training", False),
                      ("enable_dropout", False))
