"""The concrete-value rules (JAX202/203/204) carry vocabularies of JAX and NumPy
names so that linting never imports JAX.  These tests check the lists against
the installed ``jax`` and ``numpy``."""
from __future__ import annotations

import importlib
import inspect

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
np = pytest.importorskip("numpy")

from jaxlint.checkers.concrete import dtypes  # noqa: E402
from jaxlint.checkers.concrete import jax202_concrete_conversion_of_traced_value as r202  # noqa: E402
from jaxlint.checkers.concrete import jax203_numpy_on_traced_value as r203  # noqa: E402
from jaxlint.checkers.concrete import jax204_data_dependent_shape as r204  # noqa: E402


def _resolve(qualname):
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name, None)


@pytest.mark.parametrize("table,module,npmodule", [
    (r203.JNP_TOP, jnp, np), (r203.JNP_LINALG, jnp.linalg, np.linalg), (r203.JNP_FFT, jnp.fft, np.fft),
])
def test_jnp_vocabulary_names_exist_in_both(table, module, npmodule):
    missing_jnp = sorted(n for n in table if not callable(getattr(module, n, None)))
    missing_np = sorted(n for n in table if not hasattr(npmodule, n))
    assert not missing_jnp, f"not in {module.__name__}: {missing_jnp}"
    assert not missing_np, f"not in {npmodule.__name__}: {missing_np}"


def test_jnp_vocabulary_is_complete():
    """Every public jnp function NumPy also has is listed (or deliberately left out)."""
    left_out = {
        "ComplexWarning", "character", "complexfloating", "flexible", "floating", "generic", "inexact",
        "integer", "number", "signedinteger", "unsignedinteger", "ufunc", "printoptions",
        "get_printoptions", "set_printoptions", "load", "save", "savez", "fromfile", "frombuffer",
        "fromstring", "fromiter", "frompyfunc", "from_dlpack", "iterable", "ndarray", "dtype",
        "vectorize", "place", "put", "fill_diagonal", "einsum_path", "array_repr", "array_str",
        "mask_indices", "put_along_axis", "object_",
    }
    shared = {n for n in dir(jnp) if not n.startswith("_") and callable(getattr(jnp, n)) and hasattr(np, n)}
    assert not (shared - r203.JNP_TOP - left_out), sorted(shared - r203.JNP_TOP - left_out)


def test_static_and_delegating_numpy_names_exist():
    for n in r203.STATIC_NUMPY | r203.DELEGATING_NUMPY:
        assert hasattr(np, n), n


def test_static_numpy_functions_work_on_tracers():
    calls = {
        "shape": lambda x: np.shape(x), "ndim": lambda x: np.ndim(x), "size": lambda x: np.size(x),
        "iscomplexobj": lambda x: np.iscomplexobj(x), "isrealobj": lambda x: np.isrealobj(x),
        "isscalar": lambda x: np.isscalar(x), "result_type": lambda x: np.result_type(x),
    }
    for name, f in calls.items():
        jax.jit(lambda x: (f(x), x)[1])(jnp.ones(3))


def test_delegating_numpy_functions_reach_the_array_method():
    special = {"reshape": lambda x: np.reshape(x, (3, 1)), "swapaxes": lambda x: np.swapaxes(x[None], 0, 1),
               "repeat": lambda x: np.repeat(x, 2), "moveaxis": lambda x: np.moveaxis(x[None], 0, 1),
               "searchsorted": lambda x: np.searchsorted(x, 1.0),
               "split": lambda x: np.split(x, 3), "array_split": lambda x: np.array_split(x, 2),
               "hsplit": lambda x: np.hsplit(x, 3), "vsplit": lambda x: np.vsplit(x.reshape(3, 1), 3),
               "dsplit": lambda x: np.dsplit(x.reshape(1, 1, 3), 3)}
    for name in r203.DELEGATING_NUMPY:
        f = special.get(name, lambda x, name=name: getattr(np, name)(x))
        jax.jit(f)(jnp.ones(3))


def test_converting_numpy_functions_fail_on_tracers():
    for name in ("asarray", "exp", "concatenate"):
        f = (lambda x: np.concatenate([x, x])) if name == "concatenate" else (lambda x, n=name: getattr(np, n)(x))
        with pytest.raises(jax.errors.TracerArrayConversionError):
            jax.jit(f)(jnp.ones(3))


@pytest.mark.parametrize("qualname", sorted(r202.SHAPE_ARGUMENTS))
def test_shape_argument_keywords_match_signatures(qualname):
    fn = _resolve(qualname)
    assert fn is not None, qualname
    positions, keywords = r202.SHAPE_ARGUMENTS[qualname]
    params = list(inspect.signature(fn).parameters.values())
    names = [p.name for p in params]
    for kw in keywords:
        if kw in ("newshape",):   # deprecated alias, still worth recognising
            continue
        assert kw in names, f"{qualname} has no parameter {kw!r}: {names}"
    for i in positions:
        if i >= 0:
            assert i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                          params[i].POSITIONAL_OR_KEYWORD), (qualname, i)
            if keywords and params[i].kind is params[i].POSITIONAL_OR_KEYWORD:
                assert params[i].name in keywords, (qualname, i, params[i].name)


def test_data_dependent_functions_accept_size():
    for qualname in r204.DATA_DEPENDENT:
        assert "size" in inspect.signature(_resolve(qualname)).parameters, qualname
    assert "size" in inspect.signature(jnp.where).parameters


def test_bool_vocabulary_names_exist():
    removed = {"jax.numpy.in1d"}   # gone from recent jax, still in older code
    for qualname in dtypes.BOOL_FUNCTIONS | dtypes.PASSTHROUGH_FUNCTIONS | set(dtypes.DTYPE_CONSTRUCTORS):
        assert qualname in removed or _resolve(qualname) is not None, qualname
    for qualname in ("jax.numpy.isnan", "jax.numpy.logical_and", "jax.lax.lt"):
        out = jax.eval_shape(lambda x, f=_resolve(qualname): f(x, x) if "logical" in qualname or "lt" in qualname
                             else f(x), jnp.ones(2))
        assert out.dtype == jnp.bool_
