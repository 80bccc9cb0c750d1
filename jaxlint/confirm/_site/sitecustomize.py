"""jaxlint harness mode: instrument this Python process (see jaxlint.confirm.instrument).

Put first on PYTHONPATH by ``jaxlint confirm -- COMMAND``; it then runs the
next ``sitecustomize`` on ``sys.path``, if any, so a project's own keeps working.
"""
import os
import sys


def _jaxlint_instrument():
    """jaxlint.confirm.instrument from this very jaxlint (the one that wrote the
    plan), without putting jaxlint's own environment on the program's path."""
    if "jaxlint" not in sys.modules:
        import importlib.util
        pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        spec = importlib.util.spec_from_file_location("jaxlint", os.path.join(pkg, "__init__.py"),
                                                      submodule_search_locations=[pkg])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["jaxlint"] = mod
        spec.loader.exec_module(mod)
    from jaxlint.confirm import instrument
    return instrument


if os.environ.get("JAXLINT_CONFIRM_PLAN"):
    try:
        _jaxlint_instrument().install()
    except Exception as _exc:  # never break the user's program
        sys.stderr.write(f"jaxlint confirm: instrumentation not installed: {type(_exc).__name__}: {_exc}\n")


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        try:
            if os.path.abspath(d or ".") == here:
                continue
            cand = os.path.join(d or ".", "sitecustomize.py")
            if os.path.isfile(cand):
                import importlib.util
                spec = importlib.util.spec_from_file_location("_jaxlint_next_sitecustomize", cand)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                return
        except Exception:
            return


_chain()
