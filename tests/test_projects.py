"""Multi-module projects: findings that need the whole project's context.

Each folder under ``tests/fixtures/projects/`` is one small project; every
file in it is linted with the project's model (:class:`jaxlint.analysis.project.Project`)
and must report exactly its ``# expect: CODE`` lines.  The same files linted
one at a time, without the project, must report none of the cross-module
findings: that is what the project adds.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from jaxlint.analysis import SourceFile
from jaxlint.analysis.project import Project, find_root, module_name_for
from jaxlint.checkers import all_rules
from jaxlint.engine import lint_source

from test_fixtures import EXPECT

PROJECTS = Path(__file__).parent / "fixtures" / "projects"
RULES = [r for r in all_rules() if r.default_enabled]


def _files(project: Path):
    return sorted(p for p in project.rglob("*.py"))


def _expected(path: Path):
    out = set()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            for code in m.group(1).replace(",", " ").split():
                out.add((i, code))
    return out


def _lint_project(project: Path):
    files = _files(project)
    proj = Project(str(project), [str(p) for p in files])
    got = {}
    for p in files:
        source = SourceFile.from_path(str(p))
        model = proj.model_for(str(p))
        got[p] = {(f.line, f.code) for f in lint_source(source, RULES, model=model)}
    return got


@pytest.mark.parametrize("project", sorted(d for d in PROJECTS.iterdir() if d.is_dir()), ids=lambda d: d.name)
def test_project_findings(project):
    got = _lint_project(project)
    problems = []
    for path, found in got.items():
        want = _expected(path)
        rel = path.relative_to(project)
        for line, code in sorted(want - found):
            problems.append(f"missing {code} at {rel}:{line}")
        for line, code in sorted(found - want):
            problems.append(f"unexpected {code} at {rel}:{line}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("project", sorted(d for d in PROJECTS.iterdir() if d.is_dir()), ids=lambda d: d.name)
def test_project_context_is_what_finds_them(project):
    """Linted alone, the files tell another story: most expected findings are missing
    (the transform is in another module) or lookalikes are reported (the constants
    that make a value static are in another module). The project is what decides."""
    alone = extra = total = 0
    for p in _files(project):
        total += len(_expected(p))
        source = SourceFile.from_path(str(p))
        found = {(f.line, f.code) for f in lint_source(source, RULES)}
        alone += len(found & _expected(p))
        extra += len(found - _expected(p))
    assert total and (alone < total / 2 or extra > 0)


def test_cross_module_message_names_the_caller():
    project = PROJECTS / "trainer"
    files = _files(project)
    proj = Project(str(project), [str(p) for p in files])
    utils = project / "src" / "trainer" / "utils.py"
    findings = lint_source(SourceFile.from_path(str(utils)), RULES, model=proj.model_for(str(utils)))
    printed = [f for f in findings if f.code == "JAX101"]
    assert printed and printed[0].confidence == "inferred"
    assert "train_step" in printed[0].message and "train.py:" in printed[0].message


def test_module_names_follow_packages():
    trainer = PROJECTS / "trainer" / "src" / "trainer"
    assert module_name_for(str(trainer / "train.py"))[:2] == ("trainer.train", False)
    assert module_name_for(str(trainer / "__init__.py"))[:2] == ("trainer", True)
    assert module_name_for(str(PROJECTS / "scripts" / "run.py"))[0] == "run"


def test_a_folder_named_as_no_identifier_is_no_package(tmp_path):
    """A checkout folder `jax-aht` with an `__init__.py` cannot be imported by name: it is the
    folder on `sys.path`, and its modules are named from below it (`envs.wrapper`)."""
    root = tmp_path / "jax-aht"
    (root / "envs").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "envs" / "__init__.py").write_text("")
    (root / "envs" / "wrapper.py").write_text("")
    assert module_name_for(str(root / "envs" / "wrapper.py"), str(root))[:2] == ("envs.wrapper", False)
    ident = tmp_path / "aht"
    (ident / "envs").mkdir(parents=True)
    (ident / "__init__.py").write_text("")
    (ident / "envs" / "__init__.py").write_text("")
    (ident / "envs" / "wrapper.py").write_text("")
    assert module_name_for(str(ident / "envs" / "wrapper.py"))[0] == "aht.envs.wrapper"


def test_find_root(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    assert find_root(str(tmp_path / "pkg" / "sub")) == str(tmp_path)
    assert find_root(str(tmp_path / "pkg" / "sub" / "m.py")) == str(tmp_path)


def test_traced_functions_from_configuration(tmp_path):
    """`[tool.jaxlint] traced-functions` makes functions traced by contract."""
    pkg = tmp_path / "envs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "grid.py").write_text(
        "import jax.numpy as jnp\n\n"
        "class Grid:\n"
        "    def step(self, state, action):\n"
        "        if action > 0:\n"
        "            return state\n"
        "        return state\n\n"
        "def reward(state):\n"
        "    print(state)\n"
        "    return state\n")
    files = [str(pkg / "__init__.py"), str(pkg / "grid.py")]
    proj = Project(str(tmp_path), files, traced_functions=["envs.grid.Grid.step", "envs.grid:reward"])
    model = proj.model_for(str(pkg / "grid.py"))
    codes = {(f.line, f.code) for f in lint_source(SourceFile.from_path(files[1]), RULES, model=model)}
    assert (5, "JAX201") in codes and (10, "JAX101") in codes
    plain = Project(str(tmp_path), files)
    codes = {f.code for f in lint_source(SourceFile.from_path(files[1]), RULES,
                                         model=plain.model_for(files[1]))}
    assert not codes


def test_cached_project_reads_no_source(tmp_path):
    """A second analysis of unchanged files comes from the cache: same seeds, no parse."""
    import shutil

    from jaxlint.cache import Cache

    project = tmp_path / "trainer"
    shutil.copytree(PROJECTS / "trainer", project)
    files = [str(p) for p in _files(project)]
    first_cache = Cache(str(project))
    first = Project(str(project), files, cache=first_cache)
    first.analyse()
    first_cache.flush()
    assert (project / ".jaxlint_cache" / ".gitignore").exists()
    second_cache = Cache(str(project))
    second = Project(str(project), files, cache=second_cache)
    second.analyse()
    assert second_cache.hits and not second_cache.misses
    assert all(m.tree is None for m in second.modules)
    assert {p: second.seeds_digest(p) for p in files} == {p: first.seeds_digest(p) for p in files}
    assert any(second.seeds_for(p) for p in files)
    # an edited helper module changes its own key and nothing else's
    utils = project / "src" / "trainer" / "utils.py"
    key = second.cache_key(str(utils))
    utils.write_text(utils.read_text() + "\n# edited\n")
    third = Project(str(project), files, cache=Cache(str(project)))
    assert third.cache_key(str(utils)) != key
    train = str(project / "src" / "trainer" / "train.py")
    assert third.cache_key(train) == second.cache_key(train)


def test_namespace_packages_inside_a_package(tmp_path):
    """PEP 420: a folder without __init__.py below a package is a namespace package."""
    (tmp_path / "src" / "app" / "common").mkdir(parents=True)
    (tmp_path / "src" / "app" / "__init__.py").write_text("")
    f = tmp_path / "src" / "app" / "common" / "types.py"
    f.write_text("MODE = 'train'\n")
    assert module_name_for(str(f), str(tmp_path))[0] == "app.common.types"
    assert module_name_for(str(f))[0] == "types"   # without the project: the __init__ chain only


_REUSE = ("import jax\n\n"
          "def draw(shape):\n"
          "    key = jax.random.PRNGKey(0)\n"
          "    a = jax.random.normal(key, shape)\n"
          "    b = jax.random.normal(key, shape)\n"
          "    return a, b\n")


def test_key_reuse_in_tests_and_tutorials_is_strict(tmp_path):
    """Where a file sits in its project decides the profile of a key reuse: tests and teaching
    material (docs, tutorials, notebooks, examples folders) keep one key on purpose, so their reuse
    is reported with --strict only; a checkout under a folder named `tests` is not test code."""
    from jaxlint.checkers import Settings
    root = tmp_path / "tests" / "proj"          # the folders above the project do not count
    splits = _REUSE.replace("normal(key, shape)", "split(key)")
    for rel, text in (("src/model.py", _REUSE), ("tests/helpers.py", _REUSE), ("docs/notebooks/intro.py", splits),
                      ("docs/notebooks/draws.py", _REUSE), ("examples/train.py", _REUSE)):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "pyproject.toml").write_text("")
    files = [str(p) for p in sorted(root.rglob("*.py"))]
    proj = Project(str(root), files)
    got = {}
    for f in files:
        rel = str(Path(f).relative_to(root))
        src = SourceFile.from_path(f)
        found = lint_source(src, RULES, Settings(strict=True), model=proj.model_for(f))
        got[rel] = sorted(x.profile for x in found if x.code == "JAX401")
    # (a tutorial that draws the same numbers twice from one key: demo data, strict too)
    assert got == {"src/model.py": ["default"], "examples/train.py": ["strict"],
                   "tests/helpers.py": ["strict"], "docs/notebooks/intro.py": ["strict"],
                   "docs/notebooks/draws.py": ["strict"]}


_CONV = ("import jax.numpy as jnp\n"
         "from jax import vmap\n\n"
         "def lpf(n, s, g):\n"
         "    return jnp.exp(-jnp.arange(-n, n + 1) ** 2 / s) * g\n\n"
         "def conv(x, s, grid, n):\n"
         "    return x, vmap(lpf, (None, None, 0), 0)(n, s, grid)\n")
_VMAPPED = ("from functools import partial\n"
            "from jax import jit, vmap\n"
            "from pkg.conv import conv\n\n"
            "@partial(jit, static_argnums=3)\n"
            "def batched(x, s, grid, n):\n"
            "    return vmap(conv, (0, None, 0, None), 0)(x, s, grid, n)\n")


def _lint_tree(root: Path, files: dict, strict: bool = False) -> dict:
    """Write ``files`` (relative path -> text; an ``__init__.py`` beside every packaged file is up
    to the caller) and a ``pyproject.toml`` under ``root``, and lint every file with the
    project's model: ``{relative path: findings}``."""
    from jaxlint.checkers import Settings
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "pyproject.toml").write_text("")
    paths = [str(p) for p in sorted(root.rglob("*.py"))]
    proj = Project(str(root), paths)
    return {Path(f).relative_to(root).as_posix():
            lint_source(SourceFile.from_path(f), RULES, Settings(strict=strict), model=proj.model_for(f))
            for f in paths}


@pytest.mark.parametrize("static", [True, False])
def test_unmapped_argument_keeps_the_callers_staticness(tmp_path, static):
    """Under jit, `vmap(f, (0, None))(x, n)` passes `n` through as the caller holds it: a
    `static_argnums` parameter stays a Python value in another module's `f` (a shape argument
    there is fine); a traced one is a tracer (the same shape argument raises)."""
    got = _lint_tree(tmp_path, {
        "pkg/__init__.py": "", "pkg/conv.py": _CONV,
        "pkg/api.py": _VMAPPED if static else _VMAPPED.replace("static_argnums=3", "static_argnums=()")})
    assert sorted(f.code for f in got["pkg/conv.py"]) == ([] if static else ["JAX202"])


_SELF_CHECK = ("import jax\n\n"
               "def layer(x):\n"
               "    return x * 2\n\n"
               "if __name__ == '__main__':\n"
               "    for n in range(1, 4):\n"
               "        key = jax.random.PRNGKey(0)\n"
               "        print(layer(jax.random.normal(key, (n,))))\n")


def test_main_block_of_a_library_module_is_a_self_check(tmp_path):
    """The `__main__` block of a package's module (`python -m nn.embed`) is a self-check run by
    hand: a fixed key there is strict. A script's main block is the program: default."""
    found = _lint_tree(tmp_path, {"nn/__init__.py": "", "nn/embed.py": _SELF_CHECK, "run.py": _SELF_CHECK},
                       strict=True)
    got = {rel: [x.profile for x in fs if x.code == "JAX402"] for rel, fs in found.items()}
    assert got["nn/embed.py"] == ["strict"]
    assert got["run.py"] == ["default"]


_SCORES = ("import jax.numpy as jnp\n"
           "import numpy as np\n\n"
           "def scores(x, include_numpy=True):\n"
           "    out = {'mean': jnp.mean(x)}\n"
           "    if include_numpy:\n"
           "        out['hist'] = np.histogram(np.asarray(x))\n"
           "    return out\n")
_JITTED = ("import jax\n"
           "from pkg.scores import scores\n\n"
           "@jax.jit\n"
           "def infer(x):\n"
           "    return scores(x, include_numpy=False)\n")


@pytest.mark.parametrize("flag", ["False", "True"])
def test_branch_another_modules_traced_call_switches_off(tmp_path, flag):
    """A jitted caller in another module passes `include_numpy=False`: the NumPy-only branch of
    the callee is never traced (silent); passed True, it is (np.asarray of a tracer: JAX203)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/scores.py": _SCORES,
                                "pkg/infer.py": _JITTED.replace("False", flag)})
    assert sorted(f.code for f in got["pkg/scores.py"]) == ([] if flag == "False" else ["JAX203"])


def test_key_reuse_in_a_library_modules_self_check_is_strict(tmp_path):
    """JAX401 asks the same question as JAX402: one key drawn twice in the `__main__` block of a
    package's module is a self-check's doing (strict); in a script's main block it is default."""
    text = ("import jax\n\n"
            "if __name__ == '__main__':\n"
            "    rng = jax.random.PRNGKey(42)\n"
            "    x = jax.random.normal(rng, (2, 3))\n"
            "    a = jax.random.normal(rng, (2, 3))\n"
            "    print(x + a)\n")
    found = _lint_tree(tmp_path, {"nn/__init__.py": "", "nn/layer.py": text, "demo.py": text}, strict=True)
    got = {rel: [x.profile for x in fs if x.code == "JAX401"] for rel, fs in found.items()}
    assert got["nn/layer.py"] == ["strict"]
    assert got["demo.py"] == ["default"]


_SELF_TESTS = ("import jax\n\n"
               "def coupling_test():\n"
               "    rng = jax.random.PRNGKey(0)\n"
               "    x = jax.random.normal(rng, (2, 3))\n"
               "    theta = jax.random.normal(rng, (2, 3))\n"
               "    return x + theta\n\n"
               "def sample_pair():\n"
               "    rng = jax.random.PRNGKey(1)\n"
               "    return jax.random.normal(rng, (2,)), jax.random.normal(rng, (2,))\n\n"
               "def layer_test():\n"
               "    rng = jax.random.PRNGKey(2)\n"
               "    return jax.random.normal(rng, (2,)) * jax.random.uniform(rng, (2,))\n\n"
               "def api(x):\n"
               "    return layer_test() + x\n\n"
               "if __name__ == '__main__':\n"
               "    coupling_test()\n"
               "    sample_pair()\n"
               "    layer_test()\n")


def test_a_self_check_function_only_the_main_block_runs_is_strict(tmp_path):
    """`coupling_test()` of a package's module, run only by its `__main__` block, is that block's
    self-check written as a function: one key drawn twice there is strict. Not so for a function
    not named as a check (`sample_pair`, library code the block also runs), for one the module's
    own code calls too (`layer_test`, called by `api`), nor in a script's module."""
    found = _lint_tree(tmp_path, {"flows/__init__.py": "", "flows/affine.py": _SELF_TESTS, "run.py": _SELF_TESTS},
                       strict=True)
    got = {rel: {x.line: x.profile for x in fs if x.code == "JAX401"} for rel, fs in found.items()}
    assert got["flows/affine.py"] == {6: "strict", 11: "default", 15: "default"}
    assert got["run.py"] == {6: "default", 11: "default", 15: "default"}


_HOST_SOLVER = ("import numpy as np\n\n"
                "def solve(x):\n"
                "    host = np.asarray(x)\n"
                "    while np.abs(host).max() > 1.0:\n"
                "        host = host / 2\n"
                "    return host\n")
_WRAPPER = ("import jax\n"
            "from pkg.host import solve\n\n"
            "@jax.custom_jvp\n"
            "def forward(x):\n"
            "    return solve(x)\n\n"
            "@forward.defjvp\n"
            "def forward_jvp(primals, tangents):\n"
            "    (x,), (dx,) = primals, tangents\n"
            "    return forward(x), dx\n")


@pytest.mark.parametrize("jitted", [False, True])
def test_calls_from_code_that_runs_on_concrete_values_stay_eager(tmp_path, jitted):
    """A custom_jvp wrapper (differentiated or called eagerly) hands another module's host-side
    solver concrete arrays: NumPy there is fine. Jitted, the same call hands it tracers."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/host.py": _HOST_SOLVER,
                                "pkg/wrap.py": _WRAPPER + ("\nrun = jax.jit(forward)\n" if jitted else "")})
    assert ("JAX203" in {f.code for f in got["pkg/host.py"]}) == jitted


def test_helper_mutating_a_dict_for_another_modules_traced_caller_is_strict(tmp_path):
    """`update_seq(inputs)` fills the dict its caller passes: within one module jaxlint sees
    whether the caller reads it back; called from another module's jitted function it cannot,
    so the finding is the strict profile's."""
    got = _lint_tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/inputs.py": ("import jax.numpy as jnp\n\n"
                          "def update_seq(seq, inputs):\n"
                          "    inputs.update({'msa': jnp.tanh(seq)})\n"),
        "pkg/model.py": ("import jax\n"
                         "from pkg.inputs import update_seq\n\n"
                         "@jax.jit\n"
                         "def model(seq, inputs):\n"
                         "    update_seq(seq, inputs)\n"
                         "    return inputs['msa'].sum()\n")}, strict=True)
    assert [(f.code, f.profile) for f in got["pkg/inputs.py"]] == [("JAX105", "strict")]


def test_a_jupytext_notebook_is_teaching_material(tmp_path):
    """A notebook kept as Python by jupytext (a `jupytext` header, or `# %%` cells) is a notebook:
    one key feeding two draws of demo data there is the strict profile's."""
    body = ("import jax\n\n# %%\nkey = jax.random.PRNGKey(0)\n\n# %%\nx = jax.random.normal(key, (5,))\n\n"
            "# %%\nnoise = jax.random.normal(key, (5,))\n")
    found = _lint_tree(tmp_path, {"src/regression.py": body,
                                  "src/train.py": body.replace("# %%\n", "")}, strict=True)
    got = {Path(rel).name: [x.profile for x in fs if x.code == "JAX401"] for rel, fs in found.items()}
    assert got == {"regression.py": ["strict"], "train.py": ["default"]}


_EVAL_SETUP = ("import jax\nimport jax.numpy as jnp\n\n"
               "def evaluator_setup(evaluate, params, key_e, n):\n"
               "    evaluator = jax.pmap(evaluate, axis_name='device')\n"
               "    key_e, *eval_keys = jax.random.split(key_e, n + 1)\n"
               "    eval_keys = jnp.stack(eval_keys).reshape(n, -1)\n"
               "    return evaluator, (params, eval_keys)\n")
_EVAL_LOOP = ("import jax\nimport jax.numpy as jnp\nfrom pkg.evaluation import evaluator_setup\n\n"
              "def run(evaluate, params, key, n, steps):\n"
              "    key, key_e = jax.random.split(key)\n"
              "    evaluator, (trained, eval_keys) = evaluator_setup(evaluate, params, key_e, n)\n"
              "    USE\n"
              "    for _ in range(steps):\n"
              "        key_e, *eval_keys = jax.random.split(key_e, n + 1)\n"
              "        evaluator(trained, jnp.stack(eval_keys))\n"
              "    return trained\n")


@pytest.mark.parametrize("used", [False, True])
def test_a_setup_whose_derived_keys_are_thrown_away_repeats_nothing(tmp_path, used):
    """Another module's `evaluator_setup` splits `key_e` and returns the keys it made in one
    part of its result (its key summary records the path). The caller rebinds that part in the
    loop before reading it: the setup's draw is dead and the loop's split repeats nothing anyone
    saw (silent). When the caller evaluates with the setup's keys first, the loop's first split
    gives the same keys again (JAX401)."""
    loop = _EVAL_LOOP.replace("USE", "evaluator(trained, eval_keys)" if used else "pass")
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/evaluation.py": _EVAL_SETUP, "pkg/train.py": loop},
                     strict=True)
    assert [f.code for f in got["pkg/train.py"]] == (["JAX401"] if used else [])


_VMAP_SOLVER = ("import jax.numpy as jnp\n\n"
           "def step(v, a, n_nodes, dt):\n"
           "    return inner(v, a, n_nodes) * dt\n\n"
           "def inner(v, a, n_nodes):\n"
           "    return v + jnp.ones(n_nodes) * a\n")
_VMAP_STEPPER = ("from jax import vmap\nfrom pkg.solver import step\n\n"
            "def advance(v, a, kwargs, dt):\n"
            "    nones = [None] * len(kwargs)\n"
            "    f = vmap(step, in_axes=AXES)\n"
            "    return f(v, a, *kwargs.values(), dt)\n")


def test_vmap_axes_after_a_starred_part_are_unknown(tmp_path):
    """`vmap(step, in_axes=(0, 0, *nones, None))` in another module: the arguments after the
    starred part cannot be paired with their axes, so `n_nodes` is not known to be mapped and
    its shape use is silent (the single-file twin with the axes spelled out reports it:
    tests/fixtures/JAX202/vmap_starred_axes.py)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/solver.py": _VMAP_SOLVER,
                                "pkg/stepper.py": _VMAP_STEPPER.replace("AXES", "(0, 0, *nones, None)")})
    assert [f.code for f in got["pkg/solver.py"]] == []


_COEFFS = ("import jax.numpy as jnp\nimport numpy as np\n\n"
           "def coeffs(x, y, use_jax=True):\n"
           "    if use_jax:\n"
           "        return jnp.diff(y) / jnp.diff(x)\n"
           "    else:\n"
           "        return np.abs(np.diff(y))\n")
_SLOPES = ("import jax\nfrom pkg.interp import coeffs\n\n"
           "@jax.jit\n"
           "def slopes(x, y):\n"
           "    return coeffs(x, yARGS)\n")


@pytest.mark.parametrize("args", ["", ", use_jax=False", ", use_jax=True"])
def test_else_branch_every_traced_call_keeps_truthy_is_untraced(tmp_path, args):
    """Another module's jitted caller leaves `use_jax` at its default True (or passes True):
    the NumPy `else` branch is never traced (silent); passed False, it is (JAX203)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/interp.py": _COEFFS,
                                "pkg/fit.py": _SLOPES.replace("ARGS", args)})
    assert [f.code for f in got["pkg/interp.py"]] == (["JAX203"] if "False" in args else [])


_COEFFS_HELPER = ("import jax.numpy as jnp\nimport numpy as np\n\n"
                  "def coeffs(x, y, use_jax=True):\n"
                  "    if use_jax:\n"
                  "        return jnp.diff(y) / jnp.diff(x)\n"
                  "    else:\n"
                  "        return _coeffs_nojax(x, y)\n\n"
                  "def _coeffs_nojax(x, y):\n"
                  "    return np.sort(np.asarray(y))\n")


@pytest.mark.parametrize("args", ["", ", use_jax=False"])
def test_calls_in_a_branch_no_trace_takes_trace_nothing(tmp_path, args):
    """The NumPy helper is called only from the `else` no traced call takes: it is not traced
    code (silent); passed False, the jitted caller reaches it with tracers (JAX203)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/interp.py": _COEFFS_HELPER,
                                "pkg/fit.py": _SLOPES.replace("ARGS", args)})
    assert [f.code for f in got["pkg/interp.py"]] == (["JAX203"] if "False" in args else [])


_WEIGHTED = ("import jax.numpy as jnp\nimport numpy as np\n\n"
             "def weighted(x, w=None):\n"
             "    if w is None:\n"
             "        return jnp.mean(x)\n"
             "    else:\n"
             "        return np.asarray(x).mean()\n")
_WEIGHTED_CALLER = ("import jax\nfrom pkg.stats import weighted\n\n"
                    "@jax.jit\n"
                    "def step(x, w):\n"
                    "    return weighted(xARGS)\n")


@pytest.mark.parametrize("args", ["", ", w"])
def test_else_of_a_none_test_every_traced_call_leaves_none_is_untraced(tmp_path, args):
    """Another module's jitted caller leaves `w` at its None default: the NumPy `else` of
    `if w is None:` is never traced (silent); passing the traced `w`, it is (JAX203)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/stats.py": _WEIGHTED,
                                "pkg/train.py": _WEIGHTED_CALLER.replace("ARGS", args)})
    assert [f.code for f in got["pkg/stats.py"]] == (["JAX203"] if args else [])


_LOSSES = ("import jax.numpy as jnp\nimport gin\n\n"
           "@gin.configurable('reconstruction_loss', allowlist=['weight'])\n"
           "def reconstruction(gt, pred, weight: float = 1.0):\n"
           "    return jnp.mean((gt - pred) ** 2), weight\n")
_TRAINING = ("import jax\nfrom pkg.losses import reconstruction\n\n"
             "@jax.jit\n"
             "def loss_fn(gt, pred, w):\n"
             "    loss, weight = reconstruction(gt, predARGS)\n"
             "    if weight != 0.0:\n"
             "        return loss * weight\n"
             "    return loss\n")


@pytest.mark.parametrize("args", ["", ", weight=w"])
def test_a_returned_parameter_is_what_the_call_passed(tmp_path, args):
    """Another module's `reconstruction` returns its `weight` parameter unchanged: left to its
    literal (gin-bound) default it is a Python float in the jitted caller (silent); passed the
    traced `w`, it is a tracer (JAX201)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/losses.py": _LOSSES,
                                "pkg/train.py": _TRAINING.replace("ARGS", args)})
    assert [f.code for f in got["pkg/train.py"]] == (["JAX201"] if args else [])


def test_findings_in_legacy_folders_are_strict(tmp_path):
    """A module under a folder the project keeps for reference (`legacy/`, `deprecated/`,
    `outdated/`, `legacy_examples/`, `_attic/`) is not maintained: its findings are strict; the same code
    elsewhere is default."""
    text = ("import jax\n\n@jax.jit\ndef step(x):\n    print(x)\n    return x\n")
    found = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/legacy/__init__.py": "", "pkg/legacy/old_step.py": text,
                                  "legacy_examples/run.py": text, "pkg/step.py": text,
                                  "src/_attic/grf.py": text}, strict=True)
    got = {rel: [x.profile for x in fs] for rel, fs in found.items() if fs}
    assert got == {"pkg/legacy/old_step.py": ["strict"], "legacy_examples/run.py": ["strict"],
                   "pkg/step.py": ["default"], "src/_attic/grf.py": ["strict"]}


_AVG_UTILS = ("import jax\nfrom jax import lax\n\n"
              "def cross_device_avg(tree):\n"
              "    return BODY\n")
_PMAP_STEP = ("import functools\n\nimport jax\nimport optax\n\nfrom pkg import utils\n\n"
              "tx = optax.sgd(0.1)\n\n"
              "@functools.partial(jax.pmap, axis_name='batch')\n"
              "def update(params, opt_state, x):\n"
              "    grads = jax.grad(lambda p: (p * x).sum())(params)\n"
              "    grads = utils.cross_device_avg(grads)\n"
              "    updates, opt_state = tx.update(grads, opt_state, params)\n"
              "    return optax.apply_updates(params, updates), opt_state\n")


@pytest.mark.parametrize("body,reported", [
    ("jax.tree.map(lambda x: lax.pmean(x, 'batch'), tree)", False),
    ("jax.tree.map(lambda x: x / 2.0, tree)", True),
])
def test_gradients_averaged_by_another_modules_helper(tmp_path, body, reported):
    """`grads = utils.cross_device_avg(grads)` in a pmapped step: the project exports which
    functions apply a reducing collective (`reduces`), so a helper of another module that
    pmeans the gradients synchronises them (JAX601 silent) and one that only rescales them
    does not (JAX601 reported at the update that applies them)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/utils.py": _AVG_UTILS.replace("BODY", body),
                                "pkg/train.py": _PMAP_STEP})
    assert ("JAX601" in [f.code for f in got["pkg/train.py"]]) == reported


_STORE = ("_DATA = {}\n\n"
          "def get(obj, key, default=None):\n"
          "    entry = _DATA.get(id(obj), {})\n"
          "    return entry.get(key, default)\n\n"
          "def scaled(obj, factor):\n"
          "    return obj * factor\n")
_READER = ("import jax\nimport jax.numpy as jnp\nfrom pkg import store\n\n"
           "@jax.jit\n"
           "def step(w):\n"
           "    limit = store.get(w, 'limit')\n"
           "    if limit > 0.5:\n"
           "        return w\n"
           "    if store.scaled(w, 2.0).sum() > 0:\n"
           "        return -w\n"
           "    return w\n")


def test_another_modules_function_traced_only_through_parameters_that_reach_its_result(tmp_path):
    """`store.get(w, 'limit')` looks `w` up by identity and returns what was stored: the project
    exports which parameters reach each function's result (`flows`), so the `if` on its result is
    not on a tracer; `store.scaled(w, 2.0)` returns `w * factor`, a tracer, and its `if` is
    reported."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/store.py": _STORE, "pkg/train.py": _READER})
    assert [(f.code, f.line) for f in got["pkg/train.py"]] == [("JAX201", 10)]


_NORMS = ("import jax.numpy as jnp\n\n"
          "def norm(mu, lo):\n"
          "    top = max(mu, lo)\n"
          "    return jnp.linspace(lo, top, 10).sum()\n\n"
          "def mass_function(m, mu, lo):\n"
          "    return jnp.exp(-m) / norm(mu, lo)\n")
_DIFFERENTIATE = ("import jax\n"
                  "import jax.numpy as jnp\n"
                  "from pkg.dist import mass_function\n\n"
                  "def derivative(m, mu, lo):\n"
                  "    return jax.TRANSFORM(mass_function, argnums=(1, 2))(m, mu, lo)\n")


@pytest.mark.parametrize("transform", ["jacrev", "jit"])
def test_another_modules_eager_differentiation_gives_concrete_values(tmp_path, transform):
    """`jax.jacrev(mass_function)(...)` in eager code of another module: the tracers carry their
    values, so Python's `max()` of them compares (run: it does). Under `jax.jit` it raises (JAX202)."""
    text = _DIFFERENTIATE.replace("TRANSFORM", transform)
    if transform == "jit":
        text = text.replace(", argnums=(1, 2)", "")
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/dist.py": _NORMS, "pkg/fit.py": text})
    assert ("JAX202" in {f.code for f in got["pkg/dist.py"]}) == (transform == "jit")


_VALIDATION = ("import jax\n\n"
               "def contains_tracer(x):\n"
               "    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))\n\n"
               "def has_rows(x):\n"
               "    return x.ndim == 2\n")
_GUARDED = ("import jax\n"
            "import jax.numpy as jnp\n"
            "from pkg.validation import {name} as _check\n\n"
            "@jax.jit\n"
            "def step(mask):\n"
            "    if not _check(mask) and bool(jnp.any(mask > 1)):\n"
            "        raise ValueError('mask')\n"
            "    return mask\n")


@pytest.mark.parametrize("name", ["contains_tracer", "has_rows"])
def test_another_modules_tracer_test_guards_a_concrete_only_check(tmp_path, name):
    """`not contains_tracer(mask) and bool(...)` with the predicate in another module (it asks
    `isinstance(leaf, jax.core.Tracer)` of the leaves): the conversion runs on concrete masks
    only (silent). A predicate that asks something else guards nothing (JAX202)."""
    got = _lint_tree(tmp_path, {"pkg/__init__.py": "", "pkg/validation.py": _VALIDATION,
                                "pkg/step.py": _GUARDED.format(name=name)})
    assert sorted(f.code for f in got["pkg/step.py"]) == ([] if name == "contains_tracer" else ["JAX202"])
