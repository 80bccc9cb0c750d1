"""JAX612-JAX614: Flax linen `apply` contracts, run with inputs synthesized from the code."""
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(8)(x)
        x = nn.Dropout(0.5, deterministic=not train)(x)
        return nn.Dense(2)(x)


class Normed(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(8)(x)
        return nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)


net = Net()
normed = Normed()


def inner_dict(key, x):
    params = net.init(key, x)["params"]
    return net.apply(params, x)  # confirm: JAX612 confirmed


def wrapped_twice(key, x):
    variables = net.init(key, x)
    return net.apply({"params": variables}, x)  # confirm: JAX612 confirmed


def wrapped_once(key, x):
    params = net.init(key, x)["params"]
    return net.apply({"params": params}, x)  # confirm: JAX612 not-confirmed


def train_without_rngs(key, x):
    variables = net.init(key, x)
    return net.apply(variables, x, train=True)  # confirm: JAX613 confirmed


def eval_without_rngs(key, x):
    variables = net.init(key, x)
    return net.apply(variables, x)  # confirm: JAX613 not-confirmed


def same_key_every_batch(key, batches):
    variables = net.init(key, batches[0])
    outs = []
    for x in batches:
        outs.append(net.apply(variables, x, train=True, rngs={"dropout": key}))  # confirm: JAX613 confirmed
    return outs


def split_key_every_batch(key, batches):
    variables = net.init(key, batches[0])
    outs = []
    for x in batches:
        key, sub = jax.random.split(key)
        outs.append(net.apply(variables, x, train=True, rngs={"dropout": sub}))  # confirm: JAX613 not-confirmed
    return outs


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


@jax.jit
def step_constant_key(variables, x):
    k = jax.random.PRNGKey(0)
    return net.apply(variables, x, train=True, rngs={"dropout": k})  # confirm: JAX613 confirmed


@jax.jit
def step_folded_key(variables, x, step):
    k = jax.random.fold_in(jax.random.PRNGKey(0), step)
    return net.apply(variables, x, train=True, rngs={"dropout": k})  # confirm: JAX613 not-confirmed


def fit_steps(variables, x, steps=3):
    outs = [step_constant_key(variables, x) for _ in range(steps)]
    outs += [step_folded_key(variables, x, i) for i in range(steps)]
    return outs


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
