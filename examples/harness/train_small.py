"""Train the small MLP of mlp.py for a few steps on synthetic data.

    python examples/harness/train_small.py --steps 3

Under `jaxlint confirm examples/harness -- python examples/harness/train_small.py --steps 3`
this run doubles as the harness that confirms jaxlint's findings in mlp.py.
"""
import argparse

import jax
import jax.numpy as jnp

import mlp


def make_data(key, n=64, dim=8):
    kx, kn = jax.random.split(key)
    x = jax.random.normal(kx, (n, dim))
    y = jnp.sin(x.sum(axis=1)) + 0.1 * jax.random.normal(kn, (n,))
    return x, y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clip", type=float, default=None, help="clip gradients to this norm")
    args = parser.parse_args(argv)

    key = jax.random.PRNGKey(args.seed)
    key, data_key, init_key = jax.random.split(key, 3)
    x, y = make_data(data_key)
    params = mlp.init_params(init_key)
    for step in range(args.steps):
        key, step_key = jax.random.split(key)
        params, loss = mlp.train_step(params, x, y, step_key)
        print(f"step {step}: loss {float(loss):.4f}")
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, x.shape[0], 16)]
    print(f"eval mse {mlp.evaluate(params, batches):.4f}")


if __name__ == "__main__":
    main()
