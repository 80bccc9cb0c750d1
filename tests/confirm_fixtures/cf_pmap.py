"""JAX601: pmapped training steps run on several CPU devices, and collectives over axis names.

`cross_device_mean` is not called here: the axes bound around it are unknown (its callers may run
it under a pmap), so tracing it alone proves nothing.  `updates_synced_step` averages the updates:
each device's Adam moments differ, its parameters do not."""
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax import lax

tx = optax.adam(0.1)


class Linear(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(x)


model = Linear()


def mse(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


@partial(jax.pmap, axis_name="batch")
def drifting_step(params, opt_state, x, y):
    grads = jax.grad(mse)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)  # confirm: JAX601 confirmed
    return optax.apply_updates(params, updates), opt_state


@partial(jax.pmap, axis_name="batch")
def synced_step(params, opt_state, x, y):
    grads = jax.grad(mse)(params, x, y)
    grads = lax.pmean(grads, axis_name="batch")
    updates, opt_state = tx.update(grads, opt_state, params)  # confirm: JAX601 not-confirmed
    return optax.apply_updates(params, updates), opt_state


def sgd(params, x, y):
    grads = jax.grad(mse)(params, x, y)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)  # confirm: JAX601 confirmed


p_sgd = jax.pmap(sgd, axis_name="devices")


@jax.jit
def global_mean(x):
    return lax.pmean(x, axis_name="batch")  # confirm: JAX601 confirmed


def report(x):
    return float(global_mean(x))  # called outside any pmap: nothing binds "batch"


@jax.jit
def cross_device_mean(x):
    return lax.pmean(x, axis_name="batch")  # confirm: JAX601 unreached


@partial(jax.pmap, axis_name="batch")
def updates_synced_step(params, opt_state, x, y):
    grads = jax.grad(mse)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    updates = lax.pmean(updates, axis_name="batch")
    return optax.apply_updates(params, updates), opt_state  # confirm: JAX601 not-confirmed


@partial(jax.pmap, axis_name="batch")
def centered(x):
    return x - lax.pmean(x, axis_name="batch")  # confirm: JAX601 not-confirmed


@partial(jax.pmap, axis_name="batch")
def state_step(state, x, y):
    def loss_fn(params):
        return jnp.mean((state.apply_fn({"params": params}, x) - y) ** 2)

    grads = jax.grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads)  # confirm: JAX601 confirmed


@partial(jax.pmap, axis_name="batch")
def state_step_synced(state, x, y):
    def loss_fn(params):
        return jnp.mean((state.apply_fn({"params": params}, x) - y) ** 2)

    grads = lax.pmean(jax.grad(loss_fn)(state.params), "batch")
    return state.apply_gradients(grads=grads)  # confirm: JAX601 not-confirmed
