"""Data-parallel training over all local devices, written the way a PyTorch DDP user would.

In PyTorch, wrapping the model in DistributedDataParallel all-reduces the gradients during
`loss.backward()`. `jax.pmap` does not: run `jaxlint check examples/` to see what is missing.
Try it on CPU with `XLA_FLAGS=--xla_force_host_platform_device_count=4 python examples/data_parallel.py`.
"""
from functools import partial

import jax
import jax.numpy as jnp
import optax
from jax import lax

LEARNING_RATE = 0.1
optimizer = optax.sgd(LEARNING_RATE)


def init_params(key, n_in=8, n_out=1):
    return {"w": jax.random.normal(key, (n_in, n_out)) * 0.1, "b": jnp.zeros(n_out)}


def loss_fn(params, x, y):
    pred = x @ params["w"] + params["b"]
    return jnp.mean((pred - y) ** 2)


@partial(jax.pmap, axis_name="batch")
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    # each device has the gradients of its own shard only: DDP would all-reduce them here
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, lax.pmean(loss, axis_name="batch")


def replicate(tree, n):
    return jax.tree.map(lambda a: jnp.stack([a] * n), tree)


def main(steps=5, batch_size=64):
    n = jax.local_device_count()
    key, init_key = jax.random.split(jax.random.key(0))
    params = init_params(init_key)
    opt_state = optimizer.init(params)
    params, opt_state = replicate(params, n), replicate(opt_state, n)
    true_w = jnp.arange(8.0).reshape(8, 1)
    for step in range(steps):
        key, sub = jax.random.split(key)
        x = jax.random.normal(sub, (n, batch_size // n, 8))   # one shard per device
        y = x @ true_w
        params, opt_state, loss = train_step(params, opt_state, x, y)
        drift = jnp.max(jnp.abs(params["w"] - params["w"][0]))
        print(f"step {step}: loss {float(loss[0]):.3f}, largest difference between replicas {float(drift):.4f}")


if __name__ == "__main__":
    main()
