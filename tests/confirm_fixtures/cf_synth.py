"""Unannotated functions: inputs are synthesized from how the parameters are used."""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax import lax


@jax.jit
def dict_params(params, x):
    h = x @ params["w"] + params["b"]
    if h.sum() > 0:  # confirm: JAX201 confirmed
        h = -h
    return h


@jax.jit
def dict_params_ok(params, x):
    h = x @ params["w"] + params["b"]
    return jnp.where(h.sum() > 0, -h, h)  # confirm: JAX201 not-confirmed


@jax.jit
def state_attrs(state, batch):
    grads = jax.grad(lambda p: jnp.sum((batch["x"] @ p["w"]) ** 2))(state.params)
    print("step", state.step)  # confirm: JAX101 confirmed
    return state.replace(params=jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, state.params, grads))


def layers(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"])
    return x @ params[-1]["w"]


@jax.jit
def through_helper(params, x):
    y = layers(params, x)
    return int(y.sum())  # confirm: JAX202 confirmed


@jax.jit
def noisy(x, key):
    a = jax.random.normal(key, x.shape)
    b = jax.random.normal(key, x.shape)  # confirm: JAX401 confirmed
    return x + a + b


@jax.jit
def noisy_ok(x, key):
    k1, k2 = jax.random.split(key)
    a = jax.random.normal(k1, x.shape)
    b = jax.random.normal(k2, x.shape)  # confirm: JAX401 not-confirmed
    return x + a + b


@functools.partial(jax.jit, static_argnames=("mode",))
def by_mode(x, mode):
    if mode == "relu":
        x = jax.nn.relu(x)
    x[0] = 1.0  # confirm: JAX301 confirmed
    return x


@jax.jit
def zero_first(m):
    m[0] = 0.0  # confirm: JAX301 confirmed
    return m


@functools.partial(jax.jit, static_argnames=("n",))
def repeat(x, n):
    for _ in range(n):  # confirm: JAX504 not-confirmed
        x = x * 2
    return x


def image_rank(images):
    bright = images.mean(axis=(1, 2, 3))
    return images[bright > 0.5]  # confirm: JAX204 confirmed


keep_bright = jax.jit(image_rank)


def scan_body(carry, x):
    if x > 0:  # confirm: JAX201 confirmed
        carry = carry + x
    return carry, x


@jax.jit
def run_scan(xs):
    return lax.scan(scan_body, 0.0, xs)


class Block(nn.Module):
    features: int = 8

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(self.features)(x)
        print("mean", x.mean())  # confirm: JAX101 confirmed
        return x


class BlockOk(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(4)(x)
        jax.debug.print("mean {m}", m=x.mean())  # confirm: JAX101 not-confirmed
        return x


class Stash(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(4)(x)
        self.features = x  # confirm: JAX611 confirmed
        return x


class StashOk(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(4)(x)
        self.sow("intermediates", "features", x)  # confirm: JAX611 not-confirmed
        return x


net = BlockOk()
tx = optax.adam(1e-3)


@jax.jit
def opt_step(params, opt_state, x):
    grads = jax.grad(lambda p: jnp.sum(net.apply(p, x)))(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    print("updates", updates)  # confirm: JAX101 confirmed
    return optax.apply_updates(params, updates), opt_state


@functools.partial(jax.jit, static_argnames=("k",))
def called_with_sizes(x, k):
    return x.reshape(k, -1)[0, 0] if x.shape[0] > 2 else x  # confirm: JAX201 not-confirmed


@functools.partial(jax.jit, static_argnums=0)
def apply_fn(f, x):
    if x.sum() > 0:  # confirm: JAX201 unreached
        return f(x)
    return x


called_with_sizes(jnp.ones((8, 3)), 2)
