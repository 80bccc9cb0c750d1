"""Trace-time errors: JAX201/202/203/204/301 (plus JAX101 print spy)."""
import logging

import jax
import jax.numpy as jnp
import numpy as np

logger = logging.getLogger(__name__)


@jax.jit
def relu(x: jax.Array):
    if x.sum() > 0:  # confirm: JAX201 confirmed
        return x
    return -x


@jax.jit
def safe_relu(x: jax.Array):
    if x.ndim == 1:  # confirm: JAX201 not-confirmed
        x = x.reshape(-1)
    return jnp.where(x > 0, x, 0.0)


@jax.jit
def repeat(x: jax.Array, n: int):
    out = x
    for _ in range(n):  # confirm: JAX202 confirmed
        out = out + x
    return out


@jax.jit
def repeat_static(x: jax.Array):
    total = int(x.shape[0])  # confirm: JAX202 not-confirmed
    return x * total


@jax.jit
def to_numpy(x: jax.Array):
    host = np.asarray(x)  # confirm: JAX203 confirmed
    return jnp.asarray(host)


@jax.jit
def scaled(x: jax.Array):
    width = np.sqrt(x.shape[0])  # confirm: JAX203 not-confirmed
    return x * width


@jax.jit
def positives(x: jax.Array):
    kept = x[x > 0]  # confirm: JAX204 confirmed
    return kept.sum()


@jax.jit
def masked_sum(x: jax.Array):
    kept = jnp.where(x > 0, x, 0.0)  # confirm: JAX204 not-confirmed
    return kept.sum()


@jax.jit
def clip_first(x: jax.Array):
    x[0] = 0.0  # confirm: JAX301 confirmed
    return x


@jax.jit
def clip_first_functional(x: jax.Array):
    x = x.at[0].set(0.0)  # confirm: JAX301 not-confirmed
    return x


@jax.jit
def noisy_step(x: jax.Array):
    loss = (x ** 2).mean()
    print("loss", loss)  # confirm: JAX101 confirmed
    logger.info("loss %s", loss)  # confirm: JAX101 confirmed
    print("compiling for shape", x.shape)  # confirm: JAX101 not-confirmed
    return loss


@jax.jit
def branchy(x: jax.Array, flag: bool = False):
    if flag:
        print("never traced", x)  # confirm: JAX101 unreached
    return x


def unannotated(params, x):
    if x.sum() > 0:  # confirm: JAX201 unreached
        return x
    return params


def _standardize(x):
    if x.std() > 0:  # confirm: JAX201 confirmed
        x = x / x.std()
    return x


@jax.jit
def standardize_step(x: jax.Array):
    return _standardize(x).mean()


@jax.jit
def report_step(x: jax.Array):
    loss = (x ** 2).mean()
    print(f"loss {loss:.3f}")  # confirm: JAX101 confirmed
    return loss
