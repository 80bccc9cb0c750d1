"""The confirmer of one module job (worker side; imports JAX).

:class:`Confirmer` takes one module job (see :mod:`jaxlint.confirm.plan`),
groups its findings by the entry function that reaches them and the inputs
built for it (:class:`~.group.Group`), and asks the strategy the finding's
rule declared (:mod:`jaxlint.confirm.strategies`) for a verdict:
``confirmed`` with evidence, ``not-confirmed`` (traced and compiled
cleanly) or ``unreached`` with the reason.
"""
from __future__ import annotations

import inspect
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import rules as R
from . import session
from .group import Group, _error_line, _in_span, confirmed, not_confirmed, strategy_of, unreached
from .session import (Entry, ErrorInfo, Inputs, NoInputs, Unresolved, describe_value, inputs_from_spec,
                      resolve_entry, _first_line)
from .strategies import STRATEGIES


class Confirmer:
    def __init__(self, job: dict, module, emit: Callable[[dict], None], *,
                 signatures: Optional[Dict[str, List[Tuple[Callable, Inputs]]]] = None,
                 step_records: Optional[Dict[str, dict]] = None,
                 run_errors: Optional[List[ErrorInfo]] = None,
                 phase: Callable[[str], None] = lambda s: None,
                 harness_only: bool = False, guard: Optional[Callable] = None,
                 trace_records: Optional[Dict[str, list]] = None, run_name: str = "the command",
                 observer=None):
        self.job = job
        self.module = module
        self.emit = emit
        self.phase = phase
        path = job["path"]
        self.paths = {path, os.path.realpath(path)}
        self.signatures = signatures or {}
        self.step_records = step_records or {}
        self.run_errors = run_errors or []
        self.harness_only = harness_only
        self.trace_records = trace_records      # qual -> (call line, avals, statics) per trace of the run
        self.run_name = run_name
        self.observer = observer                # runobs.RunObserver: what the run showed at the flagged calls
        self.guard = guard
        self._entries: Dict[str, object] = {}
        self._inputs: Dict[str, object] = {}

    # -- globals / attributes
    def _lookup(self, name: str, entry: Entry):
        parts = name.split(".")
        if parts[0] == "self":
            obj = entry.instance
            if obj is None or len(parts) < 2:
                return None
            return (obj, parts[1]) if hasattr(obj, parts[1]) else None
        if parts[0] not in vars(self.module):
            return None
        val = vars(self.module)[parts[0]]
        if callable(val) and not hasattr(val, "__dict__") or isinstance(val, (type, type(os))):
            return None
        return (self.module, parts[0])

    @staticmethod
    def _state(v):
        if isinstance(v, (list, tuple, set, frozenset)) or type(v).__name__ == "deque":
            return ("seq", len(v), tuple(id(x) for x in list(v)[:200]))
        if isinstance(v, dict):
            return ("dict", len(v), tuple((repr(k), id(x)) for k, x in list(v.items())[:200]))
        d = getattr(v, "__dict__", None)
        if isinstance(d, dict) and not callable(v):
            return ("obj", tuple(sorted((k, id(x)) for k, x in d.items())))
        return ("id", id(v))

    def _values(self, names: Sequence[str], entry: Entry):
        """(owner, attribute, value) for the globals / ``self.`` attributes named."""
        for n in names:
            loc = self._lookup(n, entry)
            if loc is None:
                continue
            owner, attr = loc
            try:
                yield owner, attr, getattr(owner, attr)
            except Exception:
                continue

    def snapshot(self, names: Sequence[str], entry: Entry) -> Dict[str, object]:
        out = {}
        for owner, attr, v in self._values(names, entry):
            key = f"{'self.' if owner is entry.instance and owner is not self.module else ''}{attr}"
            out[key] = (id(v), self._state(v), v)
        return out

    @staticmethod
    def diff(before: Dict[str, object], after: Dict[str, object]) -> List[str]:
        out = []
        for k, (vid, state, val) in before.items():
            if k not in after:
                continue
            vid2, state2, val2 = after[k]
            if vid != vid2:
                out.append(f"`{k}` ({describe_value(val)} → {describe_value(val2)})")
            elif state != state2:
                if state[0] in ("seq", "dict") and state[1] != state2[1]:
                    out.append(f"`{k}` ({state[1]} → {state2[1]} items)")
                else:
                    out.append(f"`{k}` (modified in place)")
        return out

    def find_tracers(self, names: Sequence[str], entry: Entry) -> List[str]:
        from .session import _has_tracer
        out = []
        for owner, attr, v in self._values(names, entry):
            found = _has_tracer(v)
            if found and not isinstance(v, str):
                shown = f"self.{attr}" if owner is entry.instance else attr
                text = f"`{shown}` holds a tracer, {found}"
                if text not in out:
                    out.append(text)
        return out

    # -- entries and inputs
    @staticmethod
    def _cached(cache: dict, qual: str, build: Callable, error: type, what: str):
        """``build()`` once per ``qual``; its ``error`` (or any exception, as ``error``) is kept and re-raised."""
        if qual not in cache:
            try:
                cache[qual] = build()
            except error as exc:
                cache[qual] = exc
            except Exception as exc:
                cache[qual] = error(f"{what} `{qual}`: {type(exc).__name__}: {_first_line(exc)}")
        v = cache[qual]
        if isinstance(v, Exception):
            raise v
        return v

    def entry(self, qual: str) -> Entry:
        def build():
            sig = self.signatures.get(qual)
            if sig and sig[0][0] is not None:
                fn = sig[0][0]      # the function the program itself passed to the transform
                return Entry(qual, fn, getattr(inspect.unwrap(fn), "__self__", None), fn)
            return resolve_entry(self.module, self.job["entries"][qual], self.job["config"])
        return self._cached(self._entries, qual, build, Unresolved, "cannot reach")

    def inputs(self, qual: str, entry: Entry) -> List[Inputs]:
        """The candidate inputs for ``qual``, best first: recorded by the harness, declared,
        or built by the planner (annotations, call sites, uses of the parameters)."""
        info = self.job["entries"][qual]

        def build():
            sig = self.signatures.get(qual)
            if sig:
                fn, inp = sig[0]
                if fn is not None:
                    entry.call = fn
                return [inp]
            if self.harness_only:
                raise NoInputs(f"`{qual}` was not called (through an instrumented transform or eagerly) "
                               f"during {self.run_name}")
            if info.get("declared") is not None:
                return [inputs_from_spec(info["declared"])]
            if not info.get("candidates"):
                why = info.get("no_inputs") or "no argument could be built"
                raise NoInputs(f"no inputs for `{qual}`: {why}; declare them in [tool.jaxlint.confirm]: "
                               f"{info.get('suggest') or ''}".rstrip(": "))
            session.MODULE = self.module
            session.INSTANCE = entry.instance if info.get("instance_attr") else None
            names = [p["name"] for p in info["params"] if p["kind"] == "pos"]
            built, failed = [], None
            for c in info["candidates"]:
                try:
                    built.append(inputs_from_spec(c, c.get("source", "synthesized"), names))
                except Exception as exc:     # e.g. a module's `init` rejects this rank
                    failed = failed or exc
            if not built:
                raise failed
            return built
        return self._cached(self._inputs, qual, build, NoInputs, "no inputs for")

    # -- the run
    def groups(self, qual: str):
        """The groups of ``qual``, one per candidate input, created as they are asked for."""
        entry = self.entry(qual)
        for i in range(len(self.inputs(qual, entry))):
            g = self._groups.get((qual, i))
            if g is None:
                g = self._groups[(qual, i)] = Group(self, qual, self.job["entries"][qual], entry,
                                                    self.inputs(qual, entry)[i])
            yield g

    def _judge(self, t: dict, group: Group) -> dict:
        self.phase(f"confirming {t['code']} at line {t['line']} via `{group.qual}`")
        try:
            if self.guard is not None:
                with self.guard():
                    verdict = STRATEGIES[strategy_of(t)](t, group)
            else:
                verdict = STRATEGIES[strategy_of(t)](t, group)
        except TimeoutError as exc:
            verdict = unreached(f"confirmation {exc}")
        except Exception as exc:  # a bug here must not lose the other findings
            info = ErrorInfo(exc, self.paths)
            verdict = unreached(f"confirmation crashed: {info.short()}")
        if verdict["status"] == "unreached" and group.inputs.source in ("synthesized", "call site") and \
                not verdict["reason"].startswith("confirmation timed out"):
            verdict["retry"] = True       # these inputs did not get there: the next candidate may
        verdict["entry"] = f"{self.job.get('module') or os.path.basename(self.job['path'])}:{group.qual}"
        verdict["inputs"] = f"{group.inputs.source} {group.inputs.describe()}"
        verdict["arguments"] = group.inputs.provenance()
        verdict["basis"] = self._basis(group.qual)
        key = "evidence" if verdict["status"] != "unreached" else "reason"
        verdict[key] += f" [entry `{group.qual}`, {verdict['basis']}; inputs: {verdict['arguments']}]"
        return verdict

    def _basis(self, qual: str) -> str:
        """How the entry's tracers arise, in words."""
        if qual in self.signatures:
            return "recorded from the program's own call"
        info = self.job["entries"][qual]
        return info.get("basis_why") or info.get("basis") or "?"

    def _real_trace(self, qual: str) -> bool:
        """Tracing ``qual`` is a trace the program makes: a transform is applied to it here, it is a
        Flax/Equinox module method (run by ``init``/``apply`` under the program's transform, with
        tracers only where the model proves arrays: the module's input, never a flag or a field), it
        is eager code run as the program runs it (its own transforms trace what they trace; a verdict
        then needs the line to have run under one), or the harness recorded the program's own call
        into it."""
        return qual in self.signatures or self.job["entries"][qual].get("basis") in ("transform", "module", "eager")

    def _helpers_only(self, t: dict, helpers: List[str], reasons: List[str]) -> dict:
        """The verdict of a finding that claims something about code under a trace when only helpers
        (functions no transform is applied to here) reach it."""
        info = self.job["entries"][helpers[0]]
        why = (f"`{helpers[0]}` is {info.get('basis_why') or 'not transformed here'}, and no function that a "
               f"transform is applied to in this module could be traced to reach line {t['line']}")
        if reasons:
            why += f" ({reasons[0]})"
        return unreached(f"{why}; tracing `{helpers[0]}` alone would assume it runs under a trace, which is what "
                         f"{t['code']} claims, so it would prove nothing: run the program or its tests under "
                         f"`jaxlint confirm -- COMMAND` / `jaxlint confirm --pytest` to confirm it")

    def run(self, targets: Optional[Sequence[dict]] = None) -> None:
        targets = list(targets if targets is not None else self.job["targets"])
        self._groups: Dict[Tuple[str, int], Group] = {}
        self.targets_by_qual: Dict[str, List[dict]] = {}
        for t in targets:
            for q in t["entries"]:
                self.targets_by_qual.setdefault(q, []).append(t)
        for t in targets:
            t0 = time.perf_counter()
            verdict = self._early(t)
            if verdict is None:
                reasons: List[str] = []
                first_unreached = None
                tentative = None
                suggest = None
                claim = R.claims_tracing(t.get("confirm"))
                helpers = [q for q in t["entries"] if claim and not self._real_trace(q)]
                for qual in t["entries"]:
                    if qual in helpers:
                        continue        # tracers there would be invented, not the program's
                    try:
                        seen_failures = set()
                        for group in self.groups(qual):
                            group.targets.append(t)
                            v = self._judge(t, group)
                            failed_line = v.pop("failed_line", None)
                            inputs_ok = v.pop("inputs_ok", False)
                            if v.pop("retry", False):
                                if first_unreached is None:
                                    first_unreached = v
                                    if group.inputs.source == "synthesized" and not inputs_ok:
                                        failed = failed_line is not None or " failed " in v["reason"] or \
                                            " raised " in v["reason"]
                                        suggest = (qual, failed_line, failed)
                                sig = _failure(group)
                                if inputs_ok or (sig is not None and sig in seen_failures):
                                    break       # other inputs fail the same way: they are not the cause
                                seen_failures.add(sig)
                                continue
                            if v["status"] == "not-confirmed" and group.inputs.source == "synthesized" and \
                                    qual != t["entries"][-1]:
                                # inputs of ours ran the line cleanly; a caller further out runs it with
                                # the values the program gives it (a mask its caller computes as a
                                # comparison): its verdict is stronger, this one stands otherwise
                                tentative = tentative or v
                                break
                            verdict = v
                            break
                    except (Unresolved, NoInputs) as exc:
                        reasons.append(str(exc))
                        continue
                    if verdict is not None:
                        break
                if verdict is not None and verdict["status"] != "confirmed" and tentative is not None:
                    verdict = tentative
                if verdict is None and tentative is not None:
                    verdict = tentative
                if verdict is None and first_unreached is not None:
                    verdict = first_unreached
                    if suggest:
                        verdict["reason"] += self._instead(*suggest)
                if verdict is None and helpers:
                    verdict = self._helpers_only(t, helpers, reasons)
                if verdict is None:
                    why = reasons[0] if reasons else "no entry point"
                    if len(t["entries"]) > 1:
                        why += f" (also tried {', '.join(f'`{q}`' for q in t['entries'][1:])})"
                    verdict = unreached(why)
            verdict["id"] = t["id"]
            verdict["seconds"] = round(time.perf_counter() - t0, 4)
            if "entry" not in verdict:      # no group ran: say which entry it would have been
                mod = self.job.get("module") or os.path.basename(self.job["path"])
                verdict["entry"] = f"{mod}:{t['entries'][0]}" if t.get("entries") else f"{mod}:<module>"
                verdict.setdefault("arguments", "none built")
            self.emit(verdict)

    def _instead(self, qual: str, failed_line: Optional[int], failed: bool = True) -> str:
        """What to do when the synthesized inputs of ``qual`` did not get to the line: they are the
        entry below, and they failed (or took another path); the parameters to change are those the
        failing line uses."""
        info = self.job["entries"][qual]
        entry = info.get("suggest")
        if not entry:
            return ""
        params = [p for p in (info.get("line_params") or {}).get(str(failed_line), [])]
        at = f" at line {failed_line}" if failed_line else ""
        change = (f"change {', '.join(f'`{p}`' for p in params)}, which line {failed_line} uses, "
                  if params else "change the shapes and values ")
        what = f"failed{at}" if failed else "took another path"
        return (f"; these inputs were synthesized from how `{qual}` uses its parameters and {what}: declare "
                f"the inputs your program passes instead -- start from {entry} under [tool.jaxlint.confirm] and "
                f"{change}to what the program gives it")

    def _early(self, t: dict) -> Optional[dict]:
        for err in self.run_errors:      # harness: an error the real run raised at this line
            v = _run_error_verdict(t, err)
            if v is not None:
                return v
        if t.get("unreached"):
            return unreached(t["unreached"])
        if strategy_of(t) == "recompiles":
            return recompile_verdict(t, self.trace_records, self.run_name)
        if self.observer is not None:
            v = self.observer.verdict(t, self.run_name)
            if v is not None:
                return v
        if strategy_of(t) not in STRATEGIES:
            return unreached(f"no runtime check for {t['code']} yet")
        if t.get("module_level"):
            probe = getattr(self, "import_probe", None)
            if probe is not None and strategy_of(t) == "key-reuse":
                return _module_key_verdict(t, probe, self.job)
            return unreached("module-level code: not inside a function that can be traced")
        if not t["entries"]:
            return unreached("no entry point: the flagged code is not in a function reachable by getattr")
        return None


def recompile_verdict(t: dict, records: Optional[Dict[str, list]], run_name: str) -> dict:
    """JAX505, a static value that changes from call to call: the traces the program's own run made
    of the function called at the finding's line.  Confirmed when two of them had the same traced
    shapes and dtypes and differed only in static values -- each new value compiled a new program,
    which nothing but the static value explains.  Only a run of the program shows it."""
    if records is None:
        return unreached("a static value that changes on every call recompiles and raises nothing: only a run of "
                         "the program shows it (the module's `__main__` block, or `jaxlint confirm -- COMMAND`)")
    lo, hi = t["line"], t.get("end_line") or t["line"]
    best = None
    for qual, lst in sorted(records.items()):
        here = [r for r in lst if r[0] is not None and lo <= r[0] <= hi]
        if not here:
            continue
        by_avals: Dict[tuple, list] = {}
        for _, avals, statics in here:
            by_avals.setdefault(tuple(avals), []).append(tuple(statics))
        for avals, statics in by_avals.items():
            distinct = list(dict.fromkeys(statics))
            if len(distinct) >= 2 and (best is None or len(statics) > best[2]):
                best = (qual, distinct, len(statics), len(here))
    if best is None:
        return unreached(f"{run_name} made no two traces of the function called at line {t['line']} that differ only "
                         f"in static values")
    qual, distinct, n, total = best
    changed = [i for i in range(len(distinct[0])) if len({d[i] for d in distinct if len(d) > i}) > 1]
    shown = ", ".join(" / ".join(d[i] for d in distinct[:3]) + (" / ..." if len(distinct) > 3 else "")
                      for i in changed[:2]) or ", ".join(repr(d) for d in distinct[:3])
    return confirmed(f"{run_name} traced and compiled `{qual}` {n} times from the call at line {t['line']} with the "
                     f"same traced shapes and dtypes and {len(distinct)} different static values ({shown}): each new "
                     f"value compiles a new program")


def _failure(group: Group):
    """(error type, line, message) of the group's run when it failed with an error only a tracer
    raises: a second candidate failing the same way says the program's own trace fails there, not
    the inputs (shape errors are left to the other candidates: another rank or size may fit)."""
    base = group._base if group._base is not None else group._extra.get("key-reuse")
    err = getattr(base, "error", None)
    if err is None or not R.tracer_specific(err.mro):
        return None
    return (err.type, _error_line(err), err.message)


def _module_key_verdict(t: dict, probe, job: dict) -> dict:
    """A key reuse flagged in top-level code, after the import ran under ``jax_debug_key_reuse``
    without raising at the line (a raise there confirms it on the way in)."""
    first = t["extra"].get("first_use")
    ran = probe.ran(t["line"], t["end_line"])
    v = (unreached(f"line {t['line']} did not run when the module's top-level code ran") if not ran else
         unreached(f"line {t['line']} ran, but the earlier consumer of the key at line {first} did not, when the "
                   f"module's top-level code ran") if first and not probe.lines.get(first) else
         not_confirmed(f"the module's top-level code ran line {t['line']}"
                       f"{f' and the earlier consumer at line {first}' if first else ''} under "
                       f"`jax_debug_key_reuse` without a reused key"))
    v.update(import_entry(job))
    return v


def _run_error_verdict(t: dict, err: ErrorInfo) -> Optional[dict]:
    strategy = strategy_of(t)
    line = _error_line(err)
    if strategy == "raises":        # raised deeper (a Flax module): the line is one frame of the traceback
        names, fragments, _ = R.raises_args(t["confirm"])
        at = [ln for ln in err.lines + err.cause_lines if _in_span(ln, t)]
        if at and (err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments)):
            return confirmed(f"the run raised {err.type} from the call at line {at[-1]}: {err.message}")
        return None
    if not _in_span(line, t):
        return None
    if strategy == "trace-error":
        names, fragments = R.trace_errors(t["confirm"])
        if err.mro & names or any(cls in err.mro and frag in err.full_message for cls, frag in fragments):
            if R.claims_tracing(t["confirm"]) and not R.tracer_specific(err.mro):
                return None     # concrete values raise it too: the traced run must tell them apart
            return confirmed(f"the run raised {err.type} at line {line}: {err.message}")
    if strategy == "key-reuse" and "KeyReuseError" in err.mro:
        return confirmed(f"the run raised KeyReuseError at line {line}: {err.message}")
    return None


def import_failure_verdicts(job: dict, err: ErrorInfo) -> List[dict]:
    """Verdicts when the module itself failed to import: an error raised at a
    module-level finding's own line confirms it; everything else is unreached."""
    from .reasons import import_failure
    cause = import_failure(err.type, err.full_message, err.mro, _versions())
    out = []
    for t in job["targets"]:
        v = _run_error_verdict(t, err) if t.get("module_level") else None
        if v is None:
            v = unreached(f"{cause + ': ' if cause else ''}importing the module failed: {err.short()} "
                          f"({err.where()})")
        else:
            v.update(import_entry(job))
            v["evidence"] = v["evidence"].replace("the run raised", "importing the module raised")
        v["id"] = t["id"]
        out.append(v)
    return out


def _versions() -> dict:
    out = {}
    for name in ("jax", "flax", "optax"):
        mod = __import__("sys").modules.get(name)
        out[name] = getattr(mod, "__version__", None) if mod is not None else None
    return out


def import_entry(job: dict) -> dict:
    """``entry`` and ``inputs`` of a verdict the module's own import gave."""
    return {"entry": f"{job.get('module') or os.path.basename(job['path'])}:<module>",
            "inputs": "the module's own top-level code, run by importing it"}
