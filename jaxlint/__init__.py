"""jaxlint: a static linter for JAX tracing and purity pitfalls.

Layout:
    jaxlint/analysis/   the semantic model (names, traced contexts, traced values)
    jaxlint/checkers/   the rules, one module each, and the rule registry
    jaxlint/fixes/      fixes as edits, the fix applier, import helpers
    jaxlint/engine.py   source in, findings out (the one core)
    jaxlint/cli.py, flake8_plugin.py, pylint_plugin.py   thin front ends
"""
__version__ = "0.1.0"
