"""Planner and runner facts behind the JAX601 / JAX612-614 / JAX621 confirmation strategies
(no JAX here; the strategies themselves run on the fixtures of tests/test_confirm.py:
cf_pmap.py, cf_flax_apply.py, cf_pytree.py)."""
from __future__ import annotations

import ast

from jaxlint.analysis import SemanticModel
from jaxlint.confirm.plan import _axis_sites, _call_facts, _has_collective
from jaxlint.confirm.rules import declaration, raises_args
from jaxlint.confirm.runner import _needs_replicas, worker_env
from jaxlint.confirm.synth import param_uses, spec_of

SRC = '''
from functools import partial
import flax.linen as nn
import jax
from jax import lax

class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)

net = Net()

def wrapped(p, x, key):
    return net.apply({"params": p}, x, rngs={"dropout": key})

def bare(v, x):
    return net.apply(v, x)

@partial(jax.pmap, axis_name="batch")
def step(x):
    return x - lax.pmean(x, axis_name="batch")

def sgd(x):
    return x

p_sgd = jax.pmap(sgd, axis_name="devices")

class Params:
    def __init__(self, w):
        self.w = w

@jax.jit
def make(w):
    return Params(w)
'''


def _model():
    return SemanticModel(ast.parse(SRC))


def _fn(m, name):
    return next(f for f in m.functions if f.name == name)


def test_a_dict_wrapped_parameter_is_the_params_collection_of_init():
    m = _model()
    uses = param_uses(m, _fn(m, "wrapped"))
    spec = spec_of(uses["p"], 2, 4, True, "p")
    assert spec["t"] == "init" and spec["obj"] == "net" and spec["kind"] == "flax" and spec["pick"] == "params"
    bare = spec_of(param_uses(m, _fn(m, "bare"))["v"], 2, 4, True, "v")
    assert bare["t"] == "init" and "pick" not in bare        # the whole variables dict


def test_call_facts_name_the_keywords_and_returns():
    m = _model()
    f = _fn(m, "wrapped")
    line = f.node.body[0].lineno
    facts = _call_facts(m, line, line, f)
    assert facts["keywords"] == ["rngs"] and facts["applies"] and not facts["returns"]
    mk = _fn(m, "make")
    line = mk.node.body[0].lineno
    facts = _call_facts(m, line, line, mk)
    assert facts["returns"] and not facts["applies"] and facts["keywords"] == []


def test_axis_sites_and_collectives():
    m = _model()
    assert _axis_sites(m, _fn(m, "step")) == [{"kind": "pmap", "names": ["batch"]}]
    assert _axis_sites(m, _fn(m, "sgd")) == [{"kind": "pmap", "names": ["devices"]}]
    assert _axis_sites(m, _fn(m, "bare")) == []
    line = _fn(m, "step").node.body[0].lineno
    assert _has_collective(m, line, line)
    assert not _has_collective(m, line - 1, line - 1)


def test_declarations_and_raises_arguments():
    assert declaration("JAX601") == {"strategy": "pmap-sync", "args": []}
    names, fragments, checks = raises_args(declaration("JAX613"))
    assert "InvalidRngError" in names and checks == {"rngs": "same-rng"}
    names, fragments, checks = raises_args(declaration("JAX614"))
    assert names == {"ModifyScopeVariableError"} and checks == {"mutable": "updates-kept"}
    names, fragments, checks = raises_args(declaration("JAX621"))
    assert not checks and ("TypeError", "is not a valid JAX type") in fragments


def test_pmap_jobs_get_four_cpu_devices_before_jax_starts(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    job = {"targets": [{"confirm": {"strategy": "pmap-sync", "args": []}}]}
    other = {"targets": [{"confirm": {"strategy": "raises", "args": []}}, {"confirm": None}]}
    assert _needs_replicas(job) and not _needs_replicas(other)
    assert "--xla_force_host_platform_device_count=4" in worker_env("cpu", replicas=True)["XLA_FLAGS"]
    assert "XLA_FLAGS" not in worker_env("cpu", replicas=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    assert worker_env("cpu", replicas=True)["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"


STATE_SRC = '''
import flax.linen as nn
import jax
import optax

class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(2)(x)

model = Net()
tx = optax.adam(1e-3)

def step(state, x):
    def loss_fn(params):
        return state.apply_fn({"params": params, "batch_stats": state.batch_stats}, x).sum()
    grads = jax.grad(loss_fn)(state.params)
    return state.apply_gradients(grads=grads)
'''


def test_a_train_state_is_made_of_the_modules_model_and_optimizer():
    m = SemanticModel(ast.parse(STATE_SRC))
    spec = spec_of(param_uses(m, _fn(m, "step"))["state"], 2, 4, True, "state")
    assert spec["t"] == "trainstate" and spec["model"] == "model" and spec["tx"] == "tx"
    params, stats = spec["items"]["params"], spec["items"]["batch_stats"]
    assert params["t"] == "init" and params["obj"] == "model" and params["pick"] == "params"
    assert stats["t"] == "init" and stats["pick"] == "batch_stats"


_RECOMPILES = '''
from functools import partial
import jax
import jax.numpy as jnp

class SGDTrainer:
    def __init__(self, lr=0.1):
        self.lr = lr

    @partial(jax.jit, static_argnums=(0, 4))
    def _update(self, params, x, y, lr):
        return params - lr * x

    def fit(self, params, x, y, steps=8):
        for step in range(steps):
            lr = self.lr * 0.9 ** step
            params = self._update(params, x, y, lr)
        return params

@partial(jax.jit, static_argnums=1)
def pad(x, widths):
    return x

def run(x):
    return pad(x, [1, 2])
'''


def test_a_recompiling_static_value_is_judged_by_the_traces_a_run_made():
    """JAX505's recompiling static value raises nothing: its evidence is the traces a run of the
    program made (``recompiles``), never a verdict from tracing an entry with inputs of ours; the
    unhashable static value keeps its trace-error evidence."""
    from jaxlint.analysis import SourceFile
    from jaxlint.confirm.evidence import recompile_verdict
    from jaxlint.confirm.rules import declaration, shape_declaration
    from jaxlint.engine import lint_source
    found = [f for f in lint_source(SourceFile("case.py", _RECOMPILES)) if f.code == "JAX505"]
    by_line = {f.line: shape_declaration(f.code, f.message) for f in found}
    assert by_line[17] == {"strategy": "recompiles", "args": []}
    assert by_line[25] is None and declaration("JAX505")["strategy"] == "trace-error"
    t = {"line": 17, "end_line": 17}
    assert recompile_verdict(t, None, "x")["status"] == "unreached"      # no run: nothing to judge by
    recs = {"step": [(17, (((4,), "float32"),), ("0.1",)), (17, (((4,), "float32"),), ("0.2",))]}
    assert recompile_verdict(t, recs, "the run")["status"] == "confirmed"
    shapes = {"step": [(17, (((4,), "float32"),), ("0.1",)), (17, (((5,), "float32"),), ("0.2",))]}
    assert recompile_verdict(t, shapes, "the run")["status"] == "unreached"   # new shapes explain it


def test_instance_mutations_are_not_judged_by_comparing_arguments():
    """JAX105 on `self.n += 1`: confirmation observes the arguments only, so it must not call a
    clean run of the method not-confirmed."""
    from jaxlint.confirm.rules import unconfirmable_reason
    msg = "`self.calls += ...` mutates `self` inside `Filter.update` (jitted with `jax.jit`); it runs once"
    assert unconfirmable_reason("JAX105", msg) is not None
    assert unconfirmable_reason("JAX105", "`state['step'] = ...` mutates argument `state` inside `step`") is None
