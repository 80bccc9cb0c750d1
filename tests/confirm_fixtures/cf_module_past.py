"""Module-level calls that raise what their rule predicts: the import steps over each one and goes
on; an error no finding predicts stops it, as a plain import would."""
import flax.linen as nn
import jax
import jax.numpy as jnp


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(4)(x)
        return nn.Dropout(0.5, deterministic=not train)(x)


net = Net()
x = jnp.ones((2, 3))
variables = net.init(jax.random.key(0), x)
params = variables["params"]
y = net.apply(params, x)  # confirm: JAX612 confirmed
y = net.apply(variables, x, train=True)  # confirm: JAX613 confirmed
y = net.apply(variables, x)  # confirm: JAX613 unreached


def loss(p, batch):
    return net.apply(p, batch).sum()  # confirm: JAX612 confirmed


total = loss(params, x)  # the call that raises at line 25
raise RuntimeError("no dataset at import")


def after(batch):
    return net.apply(variables, batch, train=True)  # confirm: JAX613 unreached
