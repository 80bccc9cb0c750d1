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
from .session import Entry, ErrorInfo, Inputs, Observer, TraceResult, run_eagerly, trace

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

    @property
    def eager(self) -> bool:
        """Nothing traces the entry here: it runs as the program runs it (concrete inputs, no jit of
        ours), and only the program's own transforms inside it trace anything."""
        return self.info.get("basis") == "eager" and self.inputs.source != "harness"

    @property
    def last_inputs(self) -> Optional[Inputs]:
        """The concrete inputs the eager run used (a value among them is ours, not the program's)."""
        return self._base.inputs if self._base is not None else None

    @property
    def verb(self) -> str:
        return "running" if self.eager else "tracing"

    def under_trace(self, t: dict, kinds=None) -> bool:
        """The flagged span ran under a trace (of one of ``kinds``): always so for a traced entry; for
        an eager one, under a trace the program itself made."""
        if not self.eager:
            return self.ran(t)
        return self.base().probe.ran_under(t["line"], t["end_line"], kinds)

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
            watch = sorted({n for t in targets for n in range(t["line"], t["end_line"] + 1)})
            if self.eager:
                self._base = run_eagerly(self.entry, self.inputs, self.c.paths,
                                         profile=bool(strategies & R.NEEDS_PROFILE), watch=watch)
            else:
                self._base = trace(self.entry, self.inputs, self.c.paths,
                                   profile=bool(strategies & R.NEEDS_PROFILE), observer=observer, watch=watch)
            self._snap_after = self.c.snapshot(names, self.entry)
            self.seconds += self._base.seconds
        return self._base

    def compile(self) -> Tuple[Optional[float], Optional[ErrorInfo]]:
        if self._compiled is None and self.eager:
            self._compiled = (None, None)       # the program compiled what it jits while it ran
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
            v = unreached(f"{self.verb} `{self.name}` failed before reaching line {t['line']}: "
                          f"{err.short()} ({err.where()})")
            v["failed_line"] = _error_line(err)
        else:
            v = unreached(f"line {t['line']} did not run while {self.verb} `{self.name}` with inputs "
                          f"{self.inputs.describe()}")
        v["retry"] = True       # another entry point may reach it
        return v

    def clean(self, t: dict, what: str) -> dict:
        err = self.base().error
        if self.eager:
            return self._clean_eager(t, what, err)
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


    def _clean_eager(self, t: dict, what: str, err: Optional[ErrorInfo]) -> dict:
        ran = f"running `{self.name}` as the program does (inputs {self.inputs.describe()})"
        if err is not None and _in_span(_error_line(err), t):
            return unreached(f"{ran} raised {err.short()} at line {_error_line(err)} itself, before {what} could be "
                             f"observed")
        if R.claims_tracing(t.get("confirm")) and not self.under_trace(t):
            v = unreached(f"line {t['line']} ran when {ran}, but not under a trace: what the finding claims happens "
                          f"only where the program traces it from elsewhere")
            v["retry"] = True
            v["inputs_ok"] = True       # not a matter of inputs: nothing to suggest
            return v
        later = f" (the run later failed {err.where()}: {err.short()})" if err is not None else ""
        kinds = sorted(set().union(*[self.base().probe.traces.get(n, set())
                                     for n in range(t["line"], t["end_line"] + 1)]) - {"EvalTrace"})
        under = f" under the program's own trace ({', '.join(kinds)})" if kinds else ""
        return not_confirmed(f"line {t['line']} ran{under} when {ran}, without {what}{later}")


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
