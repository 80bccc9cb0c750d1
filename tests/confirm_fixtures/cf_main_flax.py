"""Runtime confirmation fixture (issue 19/22): Flax calls in a script's `__main__` block -- the
same dropout key every step, updated statistics thrown away -- and their lookalikes.
`# main: TAG` lines get a finding built in tests/test_confirm_main.py."""
import jax
import jax.numpy as jnp
import flax.linen as nn


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        x = nn.Dense(4)(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=0.5)(x)
        return nn.Dropout(0.5, deterministic=not train)(x)


model = Net()


if __name__ == "__main__":
    x = jnp.arange(12.0).reshape(3, 4) + 1.0
    variables = model.init({"params": jax.random.key(0), "dropout": jax.random.key(1)}, x, train=False)
    key = jax.random.key(2)
    for step in range(3):
        out, _ = model.apply(variables, x, rngs={"dropout": key}, mutable=["batch_stats"])  # main: stale
    v = variables
    for step in range(3):
        key, sub = jax.random.split(key)
        out, upd = model.apply(v, x, rngs={"dropout": sub}, mutable=["batch_stats"])  # main: fresh
        v = {"params": v["params"], **upd}
