"""The rule registry: one declaration per fact, everything else derived from it."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from jaxlint.analysis import SemanticModel, SourceFile
from jaxlint.analysis.project import Project
from jaxlint.checkers import REGISTRY, Context, FixOffer, Rule, TracedCodeRule, all_rules, register
from jaxlint.checkers.base import rule_identity
from jaxlint.engine import lint_source
from jaxlint.fixes.edits import SAFE, UNSAFE

ROOT = Path(__file__).resolve().parents[1]
CHECKERS = ROOT / "jaxlint" / "checkers"


def test_identity_comes_from_the_module_name():
    assert rule_identity("jaxlint.checkers.purity.jax101_print_under_trace") == ("JAX101", "print-under-trace")
    assert rule_identity("jaxlint.checkers.jit.jax504_unrolled_python_loop.rule") == ("JAX504", "unrolled-python-loop")
    for bad in ("jaxlint.checkers.purity.facts", "jaxlint.checkers.jit.jax50_short", "x.jax101",
                "x.jax101_Print", "x.jax101_print__twice", "x.helpers.rule"):
        with pytest.raises(ValueError, match="jaxNNN_symbol"):
            rule_identity(bad)


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_file_code_symbol_and_docs_page_agree(rule):
    path = Path(inspect.getfile(type(rule))).relative_to(CHECKERS)
    stem = path.parent.name if path.name == "rule.py" else path.stem
    assert stem == f"{rule.code.lower()}_{rule.symbol.replace('-', '_')}"
    assert len(path.parts) == (3 if path.name == "rule.py" else 2), "a rule lives in its family's package"
    assert (ROOT / "docs" / "rules" / f"{rule.code}.md").exists()
    assert REGISTRY[rule.code] is rule


def test_every_rule_module_registers_a_rule():
    stems = {(p.parent.name if p.name == "rule.py" else p.stem)
             for p in CHECKERS.glob("*/jax[0-9]*") if p.suffix == ".py" or p.is_dir()}
    assert stems == {f"{r.code.lower()}_{r.symbol.replace('-', '_')}" for r in all_rules()}


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_fix_title_and_applicability_read_the_one_declaration(rule):
    cls = type(rule)
    source = inspect.getsource(cls)
    for derived in ("code", "symbol", "fix_title", "fix_applicability"):
        assert f"\n    {derived} = " not in source, f"{rule.code} declares {derived}: it is derived"
    if cls.fix is None:
        assert cls.fix_title is None and rule.fix_applicability is None
    else:
        assert isinstance(cls.fix, FixOffer)
        assert (cls.fix_title, rule.fix_applicability) == (cls.fix.title, cls.fix.applicability)
        assert cls.fix.applicability in (SAFE, UNSAFE)


def _fake(name: str, **attrs):
    attrs.setdefault("summary", "a fake rule")
    attrs["__module__"] = f"jaxlint.checkers.fake.{name}"
    return type("Fake", (Rule,), attrs)


@pytest.mark.parametrize("declared", [{"code": "JAX999"}, {"symbol": "fake-rule"}, {"fix_title": "Do it"},
                                      {"fix_applicability": SAFE}])
def test_register_refuses_a_second_copy_of_a_derived_fact(declared):
    with pytest.raises(ValueError, match="derived"):
        register(_fake("jax999_fake_rule", **declared))
    assert "JAX999" not in REGISTRY


def test_register_refuses_a_module_without_a_rule_name_and_a_taken_code():
    with pytest.raises(ValueError, match="jaxNNN_symbol"):
        register(_fake("helpers"))
    with pytest.raises(ValueError, match="duplicate rule code JAX101"):
        register(_fake("jax101_another_print"))
    assert REGISTRY["JAX101"].symbol == "print-under-trace"


def _ctx(text: str) -> Context:
    source = SourceFile("<m>", text)
    return Context(SemanticModel(source.parse(), source), source)


def test_check_skips_files_without_jax_unless_the_rule_is_about_traced_code():
    seen = []

    class Api(Rule):
        def findings(self, ctx, m):
            seen.append((type(self).__name__, m is ctx.model))
            return iter(())

    class Traced(Api, TracedCodeRule):
        pass

    plain, jaxy = _ctx("import numpy as np\nx = np.zeros(3)\n"), _ctx("import jax\nx = jax.numpy.zeros(3)\n")
    for rule in (Api(), Traced()):
        list(rule.check(plain))
        list(rule.check(jaxy))
    assert seen == [("Api", True), ("Traced", True), ("Traced", True)]


def test_the_traced_code_families_read_a_helper_module_that_imports_no_jax(tmp_path):
    """A helper traced only from another module's `jax.jit` step: the purity and
    concrete rules report in it, although it imports no JAX library."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname='p'\n")
    (tmp_path / "helpers.py").write_text(
        "def show(x):\n"
        "    print(x)\n"
        "    if x > 0:\n"
        "        return x\n"
        "    return -x\n")
    (tmp_path / "train.py").write_text(
        "import jax\n"
        "from helpers import show\n\n"
        "@jax.jit\n"
        "def step(x):\n"
        "    return show(x * 2)\n")
    files = [str(tmp_path / "helpers.py"), str(tmp_path / "train.py")]
    model = Project(str(tmp_path), files).model_for(files[0])
    assert not model.mentions_jax
    found = {(f.line, f.code) for f in lint_source(SourceFile.from_path(files[0]), all_rules(), model=model)}
    assert {(2, "JAX101"), (3, "JAX201")} <= found
    assert {type(r).__module__.split(".")[2] for r in all_rules() if isinstance(r, TracedCodeRule)} \
        == {"purity", "concrete"}


@pytest.mark.parametrize("rule", [r for r in all_rules() if r.fix is not None], ids=lambda r: r.code)
def test_the_fixes_a_rule_builds_are_the_fix_it_declares(rule):
    """Title and applicability are declared once (``fix = FixOffer(...)``): every fix the
    rule builds on its fix fixtures carries them, so the docs, `jaxlint rule` and `--fix`
    (which applies only safe fixes unless asked) agree."""
    built = []
    for path in sorted((ROOT / "tests" / "fixtures" / rule.code / "fix").glob("*.py")):
        if path.name.endswith(".fixed.py"):
            continue
        built += [f for f in lint_source(SourceFile.from_path(str(path)), [rule]) if f.fix is not None]
    assert built, f"{rule.code}: no fix built on its fix fixtures"
    for f in built:
        assert (f.fix.title, f.fix.applicability, f.fix_title) == (rule.fix_title, rule.fix_applicability,
                                                                   rule.fix_title)


_STALE_DROPOUT = '''
import jax
import flax.linen as nn
import optax
from flax.training import train_state


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = True):
        return nn.Dense(2)(nn.Dropout(0.5, deterministic=not train)(nn.Dense(8)(x)))


@jax.jit
def step(state, x, dropout_key):
    def loss(p):
        return state.apply_fn({"params": p}, x, rngs={"dropout": dropout_key}).sum()
    return state.apply_gradients(grads=jax.grad(loss)(state.params))


key = jax.random.PRNGKey(0)
key, init_key, dropout_key = jax.random.split(key, 3)
x = jax.numpy.ones((4, 3))
model = Net()
state = train_state.TrainState.create(apply_fn=model.apply, params=model.init(init_key, x)["params"],
                                      tx=optax.sgd(0.1))
for i in range(3):
    state = step(state, x, dropout_key)
'''


def test_one_pitfall_one_finding_the_superseding_rule_names_it():
    """A dropout key passed unchanged to every step is JAX613's (the same mask every step) and
    JAX401's (the same key every iteration): with both rules on, only JAX613 reports it; with
    JAX613 off, JAX401 still does (supersession never hides a pitfall nobody reports)."""
    from jaxlint.analysis import SourceFile
    from jaxlint.engine import lint_source
    src = SourceFile("stale.py", _STALE_DROPOUT)
    both = lint_source(src, [REGISTRY["JAX401"], REGISTRY["JAX613"]])
    assert [f.code for f in both] == ["JAX613"], [f"{f.line} {f.code}" for f in both]
    alone = lint_source(src, [REGISTRY["JAX401"]])
    assert [(f.code, f.line) for f in alone] == [("JAX401", both[0].line)]
    assert alone[0].subject is not None and alone[0].subject[0] == both[0].subject[0] == "key-loop"
    assert REGISTRY["JAX613"].supersedes == ("JAX401",)


def test_supersession_needs_the_same_subject():
    """In the JAX613 fixtures, a JAX401 finding about another key (an init key reused, a key
    given to `init` then `apply`) stays: only the same repetition is superseded."""
    from jaxlint.analysis import SourceFile
    from jaxlint.engine import lint_source
    from pathlib import Path
    want = {"fixed_keys.py": ([28, 40], []), "keys_passed_on.py": ([89], []),
            "dropout_apply.py": ([63, 70], [63, 70]), "lax_loop_bodies.py": ([26, 64], [])}
    for name, (alone_lines, kept_lines) in want.items():
        src = SourceFile.from_path(str(Path(__file__).parent / "fixtures" / "JAX613" / name))
        alone = [f.line for f in lint_source(src, [REGISTRY["JAX401"]])]
        both = [f.line for f in lint_source(src, [REGISTRY["JAX401"], REGISTRY["JAX613"]]) if f.code == "JAX401"]
        assert len(alone) == len(alone_lines) and all(a is None or a in alone for a in alone_lines), (name, alone)
        assert both == kept_lines, (name, both)
