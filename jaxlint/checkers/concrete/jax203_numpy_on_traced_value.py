from __future__ import annotations

import ast
from typing import Iterator, Optional

from ...analysis import CONTAINER, Function, SemanticModel
from .values import at_compile_time, culprit, traced_value, unreliable_param
from ...fixes.edits import UNSAFE, Edit, Fix
from ...fixes.imports import module_alias
from ..messages import short
from ..base import Context, Finding, FixOffer, TracedCodeRule, register, traced_functions

# ---------------------------------------------------------------------------
# Vocabulary: the functions of ``jax.numpy`` (and its ``linalg``/``fft``
# submodules) that NumPy also has under the same name (jax 0.10).  Static
# checking never imports JAX; tests/test_jax203_vocabulary.py checks this list
# against the installed ``jax.numpy``.  Left out on purpose: type hierarchy
# classes, I/O, printing, and functions whose ``jnp`` version needs extra
# arguments to mean the same thing (``place``, ``put``, ``fill_diagonal``,
# ``put_along_axis`` need ``inplace=False``).
# ---------------------------------------------------------------------------
JNP_TOP = frozenset("""
abs absolute acos acosh add all allclose amax amin angle any append apply_along_axis apply_over_axes
arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argpartition argsort
argwhere around array array_equal array_equiv array_split asarray asin asinh astype atan atan2 atanh
atleast_1d atleast_2d atleast_3d average bartlett bincount bitwise_and bitwise_count bitwise_invert
bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman block bool bool_
broadcast_arrays broadcast_shapes broadcast_to can_cast cbrt cdouble ceil choose clip column_stack
complex128 complex64 compress concat concatenate conj conjugate convolve copy copysign corrcoef
correlate cos cosh count_nonzero cov cross csingle cumprod cumsum cumulative_prod cumulative_sum
deg2rad degrees delete diag diag_indices diag_indices_from diagflat diagonal diff digitize divide
divmod dot double dsplit dstack ediff1d einsum empty empty_like equal exp exp2 expand_dims expm1
extract eye fabs finfo flatnonzero flip fliplr flipud float16 float32 float64 float_power floor
floor_divide fmax fmin fmod frexp fromfunction full full_like gcd geomspace gradient greater
greater_equal hamming hanning heaviside histogram histogram2d histogram_bin_edges histogramdd hsplit
hstack hypot i0 identity iinfo imag indices inner insert int16 int32 int64 int8 int_ interp
intersect1d invert isclose iscomplex iscomplexobj isdtype isfinite isin isinf isnan isneginf
isposinf isreal isrealobj isscalar issubdtype ix_ kaiser kron lcm ldexp left_shift less less_equal
lexsort linspace log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not logical_or
logical_xor logspace matmul matrix_transpose matvec max maximum mean median meshgrid min minimum mod
modf moveaxis multiply nan_to_num nanargmax nanargmin nancumprod nancumsum nanmax nanmean nanmedian
nanmin nanpercentile nanprod nanquantile nanstd nansum nanvar ndim negative nextafter nonzero
not_equal ones ones_like outer packbits pad partition percentile permute_dims piecewise poly polyadd
polyder polydiv polyfit polyint polymul polysub polyval positive pow power prod promote_types ptp
quantile rad2deg radians ravel ravel_multi_index real reciprocal remainder repeat reshape resize
result_type right_shift rint roll rollaxis roots rot90 round searchsorted select setdiff1d setxor1d
shape sign signbit sin sinc single sinh size sort sort_complex spacing split sqrt square squeeze
stack std subtract sum swapaxes take take_along_axis tan tanh tensordot tile trace transpose
trapezoid tri tril tril_indices tril_indices_from trim_zeros triu triu_indices triu_indices_from
true_divide trunc uint uint16 uint32 uint64 uint8 union1d unique unique_all unique_counts
unique_inverse unique_values unpackbits unravel_index unstack unwrap vander var vdot vecdot vecmat
vsplit vstack where zeros zeros_like
""".split())
JNP_LINALG = frozenset("""
cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm matrix_power
matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet solve svd svdvals tensordot
tensorinv tensorsolve trace vecdot vector_norm
""".split())
JNP_FFT = frozenset("""
fft fft2 fftfreq fftn fftshift hfft ifft ifft2 ifftn ifftshift ihfft irfft irfft2 irfftn rfft rfft2
rfftfreq rfftn
""".split())

# NumPy functions that only read static facts (shape, dtype) and work on a tracer
STATIC_NUMPY = frozenset("""
shape ndim size iscomplexobj isrealobj isscalar issubdtype result_type dtype iinfo finfo promote_types
can_cast broadcast_shapes isdtype min_scalar_type typename ndindex
""".split())

# NumPy functions that hand a tracer to its own method (``np.sum(x)`` -> ``x.sum()``), or
# only slice it (``np.vsplit(x, 2)``, ``np.array_split``): they work under ``jit`` (checked
# with jax 0.10.2 on CPU), only for these names and these arguments -- a finding for the
# strict profile, not a failure
DELEGATING_NUMPY = frozenset("""
sum mean std var max min amax amin prod argmax argmin any all cumsum cumprod round around squeeze
swapaxes reshape transpose repeat flip moveaxis searchsorted real imag
split vsplit hsplit dsplit array_split
""".split())

# NumPy modules that other rules own (``numpy.random``: JAX104) or that are not array math
_SKIP_PREFIXES = ("numpy.random.", "numpy.typing.", "numpy.dtypes.", "numpy.lib.", "numpy.ma.")


def jnp_equivalent(qualname: str) -> Optional[str]:
    """``numpy.linalg.norm`` -> ``linalg.norm`` when ``jax.numpy`` has the same function."""
    rest = qualname[len("numpy."):]
    if "." not in rest:
        return rest if rest in JNP_TOP else None
    sub, _, name = rest.partition(".")
    if sub == "linalg" and name in JNP_LINALG:
        return rest
    if sub == "fft" and name in JNP_FFT:
        return rest
    return None


@register
class NumpyOnTracedValue(TracedCodeRule):
    """
    ## What it does
    Flags a `numpy` function applied to a traced value inside a traced
    function: `np.asarray(x)`, `np.exp(x)`, `np.sum(x)`,
    `np.concatenate([x, y])`, `np.linalg.norm(x)`. NumPy on static values
    (`np.prod(x.shape)`, `np.zeros(x.shape)`, `np.float32` as a dtype,
    `np.issubdtype(x.dtype, ...)`) and NumPy in eager code are fine and not
    flagged; so are `np.shape`/`np.ndim`/`np.result_type` on a tracer, which
    read only static facts.

    ## Why is this bad?
    Calling NumPy on a PyTorch tensor quietly pulls it to the host. Under
    `jax.jit` (or `vmap`, `grad`, a `lax.scan` body, a Flax `__call__`) the
    value is an abstract tracer with no data, so NumPy cannot convert it:
    JAX raises `TracerArrayConversionError` at trace time. A few reductions
    such as `np.sum(x)` happen to work because NumPy calls `x.sum()`, but the
    next NumPy function will not, and outside `jit` the same line silently
    copies the array to the host. `jax.numpy` has the same function under
    the same name and traces it into the compiled program.

    ## Example
    ```python
    import numpy as np

    @jax.jit
    def log_softmax(logits):
        shifted = logits - np.max(logits, axis=-1, keepdims=True)
        return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    ```

    ## Use instead
    ```python
    import jax.numpy as jnp

    @jax.jit
    def log_softmax(logits):
        shifted = logits - jnp.max(logits, axis=-1, keepdims=True)
        return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))
    ```

    ## Fix safety
    The fix replaces `np.<name>` with `jnp.<name>` when `jax.numpy` has a
    function of that name, adding `import jax.numpy as jnp` if needed. It is
    unsafe: `jax.numpy` defaults to 32-bit floats and integers where NumPy
    uses 64-bit, differs in some edge cases (out-of-bounds indexing,
    in-place variants, `np.asarray` meant to copy to the host), and a value
    once computed by NumPy may have been used as a static Python value.
    Functions without a same-named `jax.numpy` counterpart are reported
    without a fix.
    """

    confirm = ("trace-error", "ConcretizationTypeError", "TracerIntegerConversionError", "TracerArrayConversionError")
    summary = "a `numpy` function on a traced value converts a tracer to a NumPy array"
    fix = FixOffer("Use the `jax.numpy` function of the same name", UNSAFE)

    def findings(self, ctx: Context, m: SemanticModel) -> Iterator[Finding]:
        if "numpy" not in m.imports.modules:
            return
        for fn in traced_functions(ctx):
            for call in fn.of_type(ast.Call):
                func = call.func
                if not isinstance(func, (ast.Name, ast.Attribute)):
                    continue
                q = m.qualname(func, fn)
                if q is None or not q.startswith("numpy.") or q.startswith(_SKIP_PREFIXES):
                    continue
                name = q[len("numpy."):]
                if name in STATIC_NUMPY:
                    continue
                c = self._traced_argument(ctx, call, fn)
                if c is None:
                    continue
                yield self._finding(ctx, fn, call, q, c)

    @staticmethod
    def _traced_argument(ctx: Context, call: ast.Call, fn: Function) -> Optional[ast.AST]:
        m = ctx.model
        values = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
        values += [k.value for k in call.keywords]
        for a in values:
            if _mapping(m, a, fn):
                continue   # NumPy wraps a dict in an object array: no tracer is converted
            if traced_value(m, a, fn) and m.vouched_array(a, fn):
                c = culprit(m, a, fn)
                if not unreliable_param(m, c, fn) and not at_compile_time(m, a, fn, c):
                    return c
        return None

    def _finding(self, ctx: Context, fn: Function, call: ast.Call, q: str, c: ast.AST) -> Finding:
        src_name = ctx.source.segment(call.func)
        if "\n" in src_name or len(src_name) > 40:
            src_name = "np." + q[len("numpy."):]
        equivalent = jnp_equivalent(q)
        where = fn.trace_description()
        strict = None
        if q[len("numpy."):] in DELEGATING_NUMPY and call.args \
                and not ctx.model.kind(call.args[0], fn) & CONTAINER:
            # an array (or a value not known to be a Python sequence): NumPy calls its own method,
            # which a tracer has -- it works; only a list/tuple of tracers is converted and raises
            why = "works only because NumPy calls the tracer's own method"
            strict = "it works: NumPy hands the tracer to its own method"
        else:
            why = "cannot convert a tracer to a NumPy array (`TracerArrayConversionError`)"
        if equivalent is not None:
            msg = f"`{src_name}` on traced value `{short(c)}` inside {where} {why}; use `jnp.{equivalent}`"
        else:
            msg = f"`{src_name}` on traced value `{short(c)}` inside {where} {why}; use a `jax.numpy` equivalent"
        fix = self._fix(ctx, call, equivalent) if equivalent is not None else None
        return ctx.finding(self, call, msg, confidence=fn.confidence, fix=fix, strict=strict)

    def _fix(self, ctx: Context, call: ast.Call, equivalent: str) -> Fix:
        jnp, import_edits = module_alias(ctx.model, ctx.source, "jax.numpy", "jnp")
        start, end = ctx.source.node_span(call.func)
        return self.fix.make([Edit(start, end, f"{jnp}.{equivalent}")] + import_edits)


def _mapping(m: SemanticModel, a: ast.AST, fn: Function) -> bool:
    """``a`` is a dict: a display or comprehension, or a name whose assignment before
    this use is one (``metrics = {...}; np.sum(metrics, -1)``)."""
    if a.__class__ is ast.Name:
        a = m.reaching_value(a, fn) or m.single_value(a.id, fn) or a
    return a.__class__ in (ast.Dict, ast.DictComp)
