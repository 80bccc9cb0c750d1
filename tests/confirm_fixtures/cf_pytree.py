"""JAX621: plain Python objects handed to and returned from transformed functions."""
import flax.struct
import jax
import jax.numpy as jnp


class Params:
    def __init__(self, w, b):
        self.w = w
        self.b = b


@flax.struct.dataclass
class TreeParams:
    w: jax.Array
    b: jax.Array


@jax.jit
def predict(p, x):
    return x @ p.w + p.b


def run_plain(x):
    p = Params(jnp.ones((4, 4)), jnp.zeros(4))
    return predict(p, x)  # confirm: JAX621 confirmed


def run_pytree(x):
    p = TreeParams(jnp.ones((4, 4)), jnp.zeros(4))
    return predict(p, x)  # confirm: JAX621 not-confirmed


def score(p, x):
    return jnp.sum(p.w * x)


def grad_plain(x):
    return jax.grad(score)(Params(x, x), x)  # confirm: JAX621 confirmed


@jax.jit
def make(w):
    return Params(w, w)  # confirm: JAX621 confirmed


@jax.jit
def make_tree(w):
    return TreeParams(w, w)  # confirm: JAX621 not-confirmed


def energy(b):
    return 0.5 * b.mass * jnp.sum(b.vel ** 2)


batched_energy = jax.vmap(energy)


def total_energy(bodies):
    # `bodies` is synthesized from its uses as a pytree with `.mass` and `.vel`: it cannot show
    # what a plain object would do
    return batched_energy(bodies)  # confirm: JAX621 unreached
