"""JAX612 and JAX613: Flax linen `apply` contracts, run with inputs synthesized from the code."""
import flax.linen as nn
import jax


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        x = nn.Dense(8)(x)
        x = nn.Dropout(0.5, deterministic=not train)(x)
        return nn.Dense(2)(x)


net = Net()


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


@jax.jit
def step_constant_key(variables, x):
    k = jax.random.PRNGKey(0)
    return net.apply(variables, x, train=True, rngs={"dropout": k})  # confirm: JAX613 confirmed


@jax.jit
def step_folded_key(variables, x, step):
    k = jax.random.fold_in(jax.random.PRNGKey(0), step)
    return net.apply(variables, x, train=True, rngs={"dropout": k})  # confirm: JAX613 not-confirmed


def fit_constant(variables, x, steps=3):
    return [step_constant_key(variables, x) for _ in range(steps)]


def fit_folded(variables, x, steps=3):
    return [step_folded_key(variables, x, i) for i in range(steps)]
