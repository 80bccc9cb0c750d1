"""The confirmation worker: ``python -m jaxlint.confirm.worker JOB.json OUT.jsonl``.

One subprocess per module.  It imports JAX, then the user's module (its
top-level code runs here, never in the linter), then traces the entry
functions of the job and appends one JSON line per event to ``OUT.jsonl``:
``{"event": "phase"|"device"|"imported"|"result"|"done", ...}``.  The
parent reads the file even when this process is killed on timeout, so every
verdict written before that survives.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time


def module_source(job: dict) -> str:
    """The text the module runs as: the file, or a notebook's code cells joined (IPython magics
    masked) with the lines the lint numbered findings by."""
    if job.get("notebook"):
        from ..notebook import load_source
        return load_source(job["path"]).text
    with open(job["path"], "rb") as fh:
        return fh.read().decode("utf-8", "replace")


def import_target(job: dict):
    """Import the job's module by its dotted name (falls back to its file path); a notebook runs
    its code cells in order, as a fresh kernel would."""
    path = job["path"]
    for d in reversed(job.get("sys_path") or []):
        if d and d not in sys.path:
            sys.path.insert(0, d)
    if job.get("notebook"):
        import types
        alias = "_jaxlint_confirm_." + os.path.splitext(os.path.basename(path))[0]
        mod = types.ModuleType(alias)
        mod.__file__ = path
        sys.modules[alias] = mod
        exec(compile(module_source(job), path, "exec"), mod.__dict__)
        return mod
    name = job.get("module")
    real = os.path.realpath(path)
    if name:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
            mod = None
        if mod is not None:
            f = getattr(mod, "__file__", None)
            if f and os.path.realpath(f) == real:
                return mod
            if "." in name:
                raise ImportError(f"`{name}` resolves to {f}, not {path}")
    # a script outside any package, or a name taken by another module
    alias = "_jaxlint_confirm_." + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(alias, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[alias] = mod
    spec.loader.exec_module(mod)
    return mod


def import_past_flagged(job: dict, error_info, failure_verdicts, run_error_verdict):
    """Execute the module's top-level statements one by one in a fresh module object.  A statement
    that raises is stepped over only when the error confirms a finding (a module-level one on that
    statement, or one whose line the traceback passes through: the rule predicted exactly that
    error there); any other error stops the import, as a plain import would.  Returns (module or
    None when the import stopped, {target id: line of the statement stepped over}, the verdicts of
    the findings those errors confirmed and, when it stopped, of all the others)."""
    import __future__
    import ast
    import types

    from .evidence import import_entry
    path = job["path"]
    paths = {path, os.path.realpath(path)}
    tree = ast.parse(module_source(job), filename=path)
    name = job.get("module") or "_jaxlint_confirm_." + os.path.splitext(os.path.basename(path))[0]
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__package__ = name.rpartition(".")[0]
    sys.modules[name] = mod
    flags = 0
    verdicts: dict = {}
    skipped: dict = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            for a in stmt.names:
                flags |= getattr(__future__, a.name).compiler_flag
        code = compile(ast.Module(body=[stmt], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, mod.__dict__)
        except Exception as exc:
            info = error_info(exc, paths)
            # the findings this error confirms: a module-level one on this statement, or any finding
            # whose line is in the traceback with the error its rule predicts (a call made here)
            got = []
            for t in job["targets"]:
                if t["id"] in verdicts:
                    continue
                on_stmt = t.get("module_level") and stmt.lineno <= t["line"] <= (stmt.end_lineno or stmt.lineno)
                v = run_error_verdict(t, info) if (on_stmt or not t.get("module_level")) else None
                if v is not None and v["status"] == "confirmed":
                    v["evidence"] = v["evidence"].replace("the run raised", "importing the module raised")
                    got.append(dict(v, id=t["id"], **import_entry(job)))
            if not got:
                sys.modules.pop(name, None)
                rest = failure_verdicts(job, info)
                return None, skipped, [verdicts.get(v["id"], v) for v in rest]
            for v in got:
                verdicts[v["id"]] = v
                skipped[v["id"]] = stmt.lineno
    return mod, skipped, list(verdicts.values())


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path, out_path = argv
    with open(job_path, encoding="utf-8") as fh:
        job = json.load(fh)
    out = open(out_path, "a", encoding="utf-8")

    def emit(rec: dict) -> None:
        out.write(json.dumps(rec, default=str) + "\n")
        out.flush()

    def phase(text: str) -> None:
        emit({"event": "phase", "phase": text})

    phase("importing JAX")
    t0 = time.perf_counter()
    import jax
    compilation_cache(jax, job.get("xla_cache"))
    try:
        dev = jax.devices()[0]
        backend = jax.default_backend()
    except Exception as exc:  # no backend at all
        for t in job["targets"]:
            emit({"event": "result", "id": t["id"], "status": "unreached",
                  "reason": f"JAX could not start a backend: {exc}"})
        return 0
    kind = dev.device_kind
    fake = os.environ.get("JAXLINT_CONFIRM_FAKE_BACKEND")
    if fake:        # tests: the accelerator path (--device gpu) on a machine without one
        backend, kind = fake, f"{fake} (faked on {dev.platform})"
    emit({"event": "device", "device_kind": kind, "backend": backend, "platform": dev.platform,
          "jax": jax.__version__, "import_jax_s": round(time.perf_counter() - t0, 4)})
    want = job.get("device")
    if want in ("gpu", "tpu") and backend != want:
        for t in job["targets"]:
            emit({"event": "result", "id": t["id"], "status": "unreached",
                  "reason": f"no {want} visible to JAX (default backend: {backend})"})
        return 0

    if job.get("mode") == "main":       # run the module's `__main__` block (see mainrun.py)
        from .mainrun import run_main
        run_main(job, emit, phase, float(job.get("main_budget") or 20), float(job.get("per_finding") or 20))
        emit({"event": "done"})
        out.close()
        return 0

    from .evidence import Confirmer, _run_error_verdict, import_failure_verdicts
    from .session import ErrorInfo

    phase("importing the module")
    sys.argv = [job["path"]]
    t1 = time.perf_counter()
    note = ""
    watch = ModuleKeyReuse(job)
    try:
        with watch:
            module = import_target(job)
    except BaseException as exc:  # SystemExit, KeyboardInterrupt and friends included
        info = ErrorInfo(exc, {job["path"], os.path.realpath(job["path"])})
        if isinstance(exc, SystemExit):
            info.type, info.message = "SystemExit", f"the module called sys.exit({exc.code!r})"
        verdicts = import_failure_verdicts(job, info)
        module, skipped, final = None, {}, verdicts
        if isinstance(exc, Exception) and any((_run_error_verdict(t, info) or {}).get("status") == "confirmed"
                                              for t in job["targets"]):
            # a flagged module-level line raised what its rule predicts: import again statement by
            # statement, stepping over each flagged line that raises its predicted error
            phase("importing the module past its flagged lines")
            with watch:
                module, skipped, final = import_past_flagged(job, ErrorInfo, import_failure_verdicts,
                                                             _run_error_verdict)
        done = set()
        for v in final:
            if module is None or v["status"] == "confirmed" or v["id"] in skipped:
                emit({"event": "result", **v})
                done.add(v["id"])
        if module is None:
            emit({"event": "done"})
            return 0
        job = dict(job, targets=[t for t in job["targets"] if t["id"] not in done])
        note = (f" (importing the module ran past the flagged line{'s' if len(skipped) != 1 else ''} "
                f"{', '.join(str(n) for n in sorted(set(skipped.values())))} that raised)")
    emit({"event": "imported", "seconds": round(time.perf_counter() - t1, 4)})

    def result(v: dict) -> None:
        if note and v.get("evidence"):
            v = dict(v, evidence=v["evidence"] + note)
        emit({"event": "result", **v})
    c = Confirmer(job, module, result, phase=phase)
    c.import_probe = watch.probe
    c.run()
    emit({"event": "done"})
    out.close()
    return 0


def compilation_cache(jax, folder) -> None:
    """Keep every compiled program in ``folder`` (JAX's persistent compilation cache), unless the
    user set a cache of their own: confirmation clears JAX's in-memory caches before each trace so
    that the Python bodies of cached traces run again under the probe, and without this every eager
    operation after a clear would be compiled again."""
    if not folder or os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir:
        return
    try:
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    except Exception:       # an older JAX without these options: compile as before
        pass


class ModuleKeyReuse:
    """Around the import of a module with a key reuse flagged in its top-level code (a script, a
    notebook): ``jax_debug_key_reuse`` on, ``PRNGKey`` made a typed key (raw keys are not tracked),
    and a probe that records which top-level lines ran -- the reuse raises at its line, or the lines
    ran without it."""

    def __init__(self, job: dict):
        self.active = any(t.get("module_level") and (t.get("confirm") or {}).get("strategy") == "key-reuse"
                          for t in job["targets"])
        self.probe = None
        self.paths = {job["path"], os.path.realpath(job["path"])}
        if self.active:
            from .probes import Probe
            self.probe = Probe(self.paths)

    def __enter__(self):
        if not self.active:
            return self
        import jax
        self._flag = jax.config.jax_debug_key_reuse
        self._legacy = jax.random.PRNGKey
        jax.random.PRNGKey = jax.random.key
        jax.config.update("jax_debug_key_reuse", True)
        self.probe.__enter__()
        return self

    def __exit__(self, *exc):
        if self.active:
            import jax
            self.probe.__exit__(*exc)
            jax.config.update("jax_debug_key_reuse", self._flag)
            jax.random.PRNGKey = self._legacy
        return False


def watch_parent(interval: float = 0.5) -> None:
    """If jaxlint dies without a chance to clean up (SIGKILL), the worker would run on with
    init as its parent: a thread notices the new parent and kills the worker's process group
    (the worker and every child it did not move out of its session)."""
    import signal
    import threading
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                try:
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                finally:
                    os._exit(137)
    threading.Thread(target=watch, name="jaxlint-parent-watch", daemon=True).start()


if __name__ == "__main__":
    watch_parent()
    # never let the user's atexit handlers or threads keep the worker alive
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
