"""Shared pytest options, fixtures and markers.

Markers (registered in pyproject.toml): ``jax`` for tests that import JAX and trace, compile or
run code with it (runtime confirmation, fixes checked by running both versions); ``slow`` for
those and the other tests that take seconds each (plugins run as subprocesses, the sdist build).
``python -m pytest`` runs everything (what CI runs); ``python -m pytest -m "not slow"`` is the
quick loop while editing.  They are applied here, by module or test name, so a new test in one
of these modules is marked without anyone remembering to.
"""
import pytest

# modules whose tests run JAX (in-process or in confirmation workers)
JAX_MODULES = {"test_confirm", "test_confirm_flags", "test_confirm_jax6", "test_confirm_pytest",
               "test_jit_placement", "test_fix_behaviour", "test_concrete_vocabularies"}
# single tests that run JAX in modules that otherwise do not (confirmation workers import it)
JAX_TESTS = {"test_standard_library_with_jax_imported_never_crashes",
             "test_confirm_children_of_a_worker_do_not_outlive_the_run",
             "test_confirm_interrupted_leaves_no_worker_and_no_folder", "test_confirm_workers_die_with_a_killed_jaxlint",
             "test_harness_command_that_hangs_is_stopped_at_its_time_limit", "test_chatty_worker_writes_nothing_to_disk",
             "test_worker_past_its_memory_limit_is_stopped"}
# other tests that take seconds: whole tools in subprocesses, a package build, generated programs,
# a language server session that waits on purpose
SLOW_TESTS = {"test_pylint_matches_cli", "test_flake8_matches_cli", "test_try_repo_hooks",
              "test_deep_module_through_flake8_and_pylint", "test_sdist_builds_and_tests_on_its_own",
              "test_fuzzed_programs_never_break_the_contract", "test_fixer_properties",
              "test_diagnostics_are_published_once_per_version_and_never_stale"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module is not None else ""
        name = item.originalname or item.name
        if module in JAX_MODULES or name in JAX_TESTS:
            item.add_marker(pytest.mark.jax)
            item.add_marker(pytest.mark.slow)
        elif name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", default=False,
        help="rewrite the expected-output snapshots beside the rule fixtures (tests/test_snapshots.py)")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder holding `bad.py` (a print and a Python if under jit) and `clean.py`, as cwd."""
    from test_cli import BAD, CLEAN
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path

