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


def import_target(job: dict):
    """Import the job's module by its dotted name (falls back to its file path)."""
    path = job["path"]
    for d in reversed(job.get("sys_path") or []):
        if d and d not in sys.path:
            sys.path.insert(0, d)
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
    try:
        dev = jax.devices()[0]
        backend = jax.default_backend()
    except Exception as exc:  # no backend at all
        for t in job["targets"]:
            emit({"event": "result", "id": t["id"], "status": "unreached",
                  "reason": f"JAX could not start a backend: {exc}"})
        return 0
    emit({"event": "device", "device_kind": dev.device_kind, "backend": backend, "platform": dev.platform,
          "jax": jax.__version__, "import_jax_s": round(time.perf_counter() - t0, 4)})
    want = job.get("device")
    if want in ("gpu", "tpu") and backend != want:
        for t in job["targets"]:
            emit({"event": "result", "id": t["id"], "status": "unreached",
                  "reason": f"no {want} visible to JAX (default backend: {backend})"})
        return 0

    from .evidence import Confirmer, import_failure_verdicts
    from .session import ErrorInfo

    phase("importing the module")
    sys.argv = [job["path"]]
    t1 = time.perf_counter()
    try:
        module = import_target(job)
    except BaseException as exc:  # SystemExit, KeyboardInterrupt and friends included
        info = ErrorInfo(exc, {job["path"], os.path.realpath(job["path"])})
        if isinstance(exc, SystemExit):
            info.type, info.message = "SystemExit", f"the module called sys.exit({exc.code!r})"
        for v in import_failure_verdicts(job, info):
            emit({"event": "result", **v})
        emit({"event": "done"})
        return 0
    emit({"event": "imported", "seconds": round(time.perf_counter() - t1, 4)})
    Confirmer(job, module, lambda v: emit({"event": "result", **v}), phase=phase).run()
    emit({"event": "done"})
    out.close()
    return 0


if __name__ == "__main__":
    # never let the user's atexit handlers or threads keep the worker alive
    rc = main()
    sys.stdout.flush()
    os._exit(rc)
