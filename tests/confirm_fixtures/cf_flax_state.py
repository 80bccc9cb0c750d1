"""JAX614: BatchNorm statistics updated without `mutable=`, or updated and discarded; a TrainState
made by the module's own `create_state` factory."""
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


class Normed(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(8)(x)
        return nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)


normed = Normed()


def stats_immutable(key, x):
    variables = normed.init(key, x)
    return normed.apply(variables, x)  # confirm: JAX614 confirmed


def stats_frozen(key, x):
    variables = normed.init(key, x)
    return normed.apply(variables, x, train=False)  # confirm: JAX614 not-confirmed


def stats_discarded(key, x):
    variables = normed.init(key, x)
    y, _ = normed.apply(variables, x, mutable=["batch_stats"])  # confirm: JAX614 confirmed
    return jnp.mean(y ** 2)


def stats_kept(key, x):
    variables = normed.init(key, x)
    y, updates = normed.apply(variables, x, mutable=["batch_stats"])  # confirm: JAX614 not-confirmed
    return jnp.mean(y ** 2), {"params": variables["params"], **updates}


class State(train_state.TrainState):
    batch_stats: Any


def create_state(key):
    variables = normed.init(key, jnp.zeros((1, 4)))
    return State.create(apply_fn=normed.apply, params=variables["params"], batch_stats=variables["batch_stats"],
                        tx=optax.sgd(0.1))


@jax.jit
def step_drops_stats(state, x):
    def loss_fn(params):
        y, updates = state.apply_fn(  # confirm: JAX614 confirmed
            {"params": params, "batch_stats": state.batch_stats}, x, mutable=["batch_stats"])
        return jnp.mean(y ** 2), updates

    grads, updates = jax.grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads)


@jax.jit
def step_keeps_stats(state, x):
    def loss_fn(params):
        y, updates = state.apply_fn(  # confirm: JAX614 not-confirmed
            {"params": params, "batch_stats": state.batch_stats}, x, mutable=["batch_stats"])
        return jnp.mean(y ** 2), updates

    grads, updates = jax.grad(loss_fn, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads, batch_stats=updates["batch_stats"])
