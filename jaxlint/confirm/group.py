"""Verdicts and the trace shared by the findings of one entry (worker side; imports JAX).

A :class:`Group` is one entry function with one set of inputs.  It traces
the entry once under a :class:`~.session.Probe` (lazily, on the first
question), compiles it on demand and answers the questions every strategy
asks: did the flagged line run, and what to say when it did not.
"""
from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

import jax

from . import rules as R
from .session import Entry, ErrorInfo, Inputs, Observer, TraceResult, trace

CONFIRMED, NOT_CONFIRMED, UNREACHED = "confirmed", "not-confirmed", "unreached"


def confirmed(text: str) -> dict:
    return {"status": CONFIRMED, "evidence": text}


def not_confirmed(text: str) -> dict:
    return {"status": NOT_CONFIRMED, "evidence": text}


def unreached(text: str) -> dict:
    return {"status": UNREACHED, "reason": text}


# ------------------------------------------------------------ groups
class Group:
    """One entry function with one set of inputs, shared by its findings."""

    def __init__(self, confirmer, qual: str, info: dict, entry: Entry, inputs: Inputs):
        self.c = confirmer
        self.qual = qual
        self.info = info
        self.entry = entry
        self.inputs = inputs
        self.targets: List[dict] = []
        self._base: Optional[TraceResult] = None
        self._compiled = None
        self._snap_before: Dict[str, object] = {}
        self._snap_after: Dict[str, object] = {}
        self._extra: Dict[str, object] = {}
        self.seconds = 0.0

    @property
    def name(self) -> str:
        return self.qual

    def param_names(self) -> List[str]:
        return [p["name"] for p in self.info.get("params", []) if p["kind"] == "pos"]

    # -- the base trace
    def base(self) -> TraceResult:
        if self._base is None:
            targets = self.c.targets_by_qual.get(self.qual, self.targets)
            strategies = {strategy_of(t) for t in targets}
            names = sorted({n for t in targets for n in t["names"]})
            self._snap_before = self.c.snapshot(names, self.entry)
            observer = Observer(self.param_names()) if "arg-mutation" in strategies else None
            jax.clear_caches()   # JAX reuses traces of cond/scan bodies: make the Python bodies run again
            self._base = trace(self.entry, self.inputs, self.c.paths,
                               profile=bool(strategies & R.NEEDS_PROFILE), observer=observer)
            self._snap_after = self.c.snapshot(names, self.entry)
            self.seconds += self._base.seconds
        return self._base

    def compile(self) -> Tuple[Optional[float], Optional[ErrorInfo]]:
        if self._compiled is None:
            base = self.base()
            t0 = time.perf_counter()
            try:
                base.traced.lower().compile()
                self._compiled = (time.perf_counter() - t0, None)
            except Exception as exc:
                self._compiled = (None, ErrorInfo(exc, self.c.paths))
            self.seconds += time.perf_counter() - t0
        return self._compiled

    def retrace(self, **kw) -> TraceResult:
        jax.clear_caches()
        res = trace(self.entry, self.inputs, self.c.paths, probe=kw.pop("probe", False), **kw)
        self.seconds += res.seconds
        return res

    def memo(self, key: str, fn: Callable):
        if key not in self._extra:
            self._extra[key] = fn()
        return self._extra[key]

    # -- shared verdicts
    def ran(self, t: dict) -> bool:
        return self.base().probe.ran(t["line"], t["end_line"])

    def not_reached(self, t: dict) -> dict:
        err = self.base().error
        if err is not None:
            v = unreached(f"tracing `{self.name}` failed before reaching line {t['line']}: "
                          f"{err.short()} ({err.where()})")
        else:
            v = unreached(f"line {t['line']} did not run while tracing `{self.name}` with inputs "
                          f"{self.inputs.describe()}")
        v["retry"] = True       # another entry point may reach it
        return v

    def clean(self, t: dict, what: str) -> dict:
        err = self.base().error
        if err is not None and _in_span(_error_line(err), t):
            return unreached(f"tracing `{self.name}` raised {err.short()} at line {_error_line(err)} itself, "
                             f"before {what} could be observed")
        if err is not None:
            return not_confirmed(f"line {t['line']} ran under tracing without {what} "
                                 f"(tracing later failed {err.where()}: {err.short()})")
        secs, cerr = self.compile()
        if cerr is not None:
            return unreached(f"`{self.name}` traced, but compiling failed: {cerr.short()}")
        return not_confirmed(f"`{self.name}` traced and compiled cleanly with inputs {self.inputs.describe()}; "
                             f"line {t['line']} ran under tracing without {what}")


def _in_span(line: Optional[int], t: dict) -> bool:
    return line is not None and t["line"] <= line <= t["end_line"]


def _error_line(err: ErrorInfo) -> Optional[int]:
    if err.site is not None:
        return err.site
    if err.lines and not err.site_elsewhere:
        return err.lines[-1]
    return None


def strategy_of(t: dict) -> Optional[str]:
    """The strategy the finding's rule declared (``None``: no runtime check)."""
    decl = t.get("confirm")
    return decl.get("strategy") if decl else None
