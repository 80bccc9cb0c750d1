"""What a run of the program shows about the Flax calls it flags, observed while it runs (worker
side, in a run of the module's ``__main__`` block; imports JAX and Flax).

Two shapes raise nothing and show only across the program's own calls:

* **the same dropout key every step** (``same-rng``): a spy on Flax's ``Scope.make_rng`` records the
  key each layer's stream draws while the flagged line is on the stack -- under a trace through
  ``jax.debug.callback``, so a jitted step the program calls in a loop records one key per call;
* **updated statistics thrown away** (``updates-kept``): a spy on the function ``Module.apply``
  calls records, for each call at the flagged line given ``mutable=``, a digest of the mutable
  collections it was given and of those it returned.  Confirmed when the call returned statistics
  that differ from those it was given, and yet every call was given the very same ones: the
  updates never reached the stored statistics.  ``not-confirmed`` when the statistics given
  change from call to call.
"""
from __future__ import annotations

import functools
import hashlib
from typing import Dict, List, Optional

from . import rules as R


def checks_of(t: dict) -> set:
    decl = t.get("confirm") or {}
    if decl.get("strategy") != "raises":
        return set()
    return set(R.raises_args(decl)[2].values())


class RunObserver:
    def __init__(self, job: dict, paths):
        self.paths = paths
        self.rng = [t for t in job["targets"] if "same-rng" in checks_of(t)]
        self.stats = [t for t in job["targets"] if "updates-kept" in checks_of(t)]
        self.draws: Dict[int, Dict[tuple, List[bytes]]] = {}
        self.calls: Dict[int, List[list]] = {}
        self._undo = []

    def __enter__(self):
        if not (self.rng or self.stats):
            return self
        try:
            import flax.core.scope as flax_scope
            import flax.linen.module as linen_module
        except Exception:
            return self
        import jax
        import numpy as np
        from .running import _is_key, _in_span

        def on_stack(t) -> bool:
            import sys
            f = sys._getframe(2)
            while f is not None:
                if f.f_code.co_filename in self.paths and _in_span(f.f_lineno, t):
                    return True
                f = f.f_back
            return False

        if self.rng:
            real_rng = flax_scope.Scope.make_rng

            def record(tid, where, data):
                self.draws.setdefault(tid, {}).setdefault(where, []).append(np.asarray(data).tobytes())

            def make_rng(scope, name="params", *a, **k):
                key = real_rng(scope, name, *a, **k)
                try:
                    for t in self.rng:
                        if on_stack(t):
                            where = (name, tuple(getattr(scope, "path", ())))
                            data = jax.random.key_data(key) if _is_key(key) else key
                            if isinstance(data, jax.core.Tracer):
                                jax.debug.callback(functools.partial(record, t["id"], where), data)
                            else:
                                record(t["id"], where, data)
                except Exception:
                    pass
                return key
            flax_scope.Scope.make_rng = make_rng
            self._undo.append(lambda: setattr(flax_scope.Scope, "make_rng", real_rng))

        if self.stats:
            real_apply = linen_module.apply

            def digest(tree) -> str:
                h = hashlib.sha1()
                for leaf in jax.tree_util.tree_leaves(tree):
                    h.update(np.asarray(leaf).tobytes())
                return h.hexdigest()

            def note(tid, cols, given, got):
                self.calls.setdefault(tid, []).append([cols, digest(given), digest(got)])

            def apply(fn, module, *a, mutable=False, **k):
                inner = real_apply(fn, module, *a, mutable=mutable, **k)
                if mutable in (None, False):
                    return inner
                here = [t for t in self.stats if on_stack(t)]
                if not here:
                    return inner

                def run(variables, *args, **kwargs):
                    out = inner(variables, *args, **kwargs)
                    try:
                        if isinstance(out, tuple) and len(out) == 2 and hasattr(out[1], "keys") and \
                                hasattr(variables, "keys"):
                            cols = sorted(str(c) for c in out[1].keys())
                            given = {c: variables[c] for c in cols if c in variables}
                            got = {c: out[1][c] for c in cols}
                            leaves = jax.tree_util.tree_leaves((given, got))
                            for t in here:
                                if any(isinstance(x, jax.core.Tracer) for x in leaves):
                                    jax.debug.callback(functools.partial(note, t["id"], cols), given, got)
                                else:
                                    note(t["id"], cols, given, got)
                    except Exception:
                        pass
                    return out
                return run
            linen_module.apply = apply
            self._undo.append(lambda: setattr(linen_module, "apply", real_apply))
        return self

    def __exit__(self, *exc):
        try:
            import jax
            jax.effects_barrier()
        except Exception:
            pass
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        return False

    def verdict(self, t: dict, who: str) -> Optional[dict]:
        """A verdict from what the run showed for ``t``, or None (nothing to judge by)."""
        from .group import confirmed, not_confirmed
        if t["id"] in self.draws:
            v = same_key_verdict(t, self.draws[t["id"]], who)
            if v is not None:
                return v
        calls = self.calls.get(t["id"])
        if calls and len(calls) >= 2:
            cols = ", ".join(f"`{c}`" for c in calls[0][0]) or "the updated collections"
            given = [c[1] for c in calls]
            updated = [c for c in calls if c[2] != c[1]]
            if len(set(given)) > 1:
                return not_confirmed(f"{who} ran the call at line {t['line']} {len(calls)} times, and the {cols} it "
                                     f"was given changed between calls: the updates are kept")
            if updated:
                return confirmed(f"{who} ran the call at line {t['line']} {len(calls)} times; it returned updated "
                                 f"{cols} ({len(updated)} time{'s' if len(updated) != 1 else ''} different from "
                                 f"those it was given), yet every call was given the very same {cols}: the new "
                                 f"statistics are thrown away and the stored ones never change")
        return None


def same_key_verdict(t: dict, draws: Dict[tuple, List[bytes]], who: str) -> Optional[dict]:
    """The claim is "the same key every step": the draws of a stream, in the order the run made them,
    stay the same from one call to the next.  Confirmed when every draw is the same key, or three
    calls in a row drew the same one; not-confirmed when no two calls in a row did (a key drawn
    again much later -- an evaluation replaying step 0's key -- is not the claim); else no verdict."""
    from .group import confirmed, not_confirmed
    rows = [(k, v) for k, v in draws.items() if len(v) >= 2]
    if not rows:
        return None
    fresh = True
    for (name, path), keys in rows:
        run = best = 1
        for a, b in zip(keys, keys[1:]):
            run = run + 1 if a == b else 1
            best = max(best, run)
        if best >= 3 or len(set(keys)) == 1:
            layer = "/".join(path) or "the module"
            return confirmed(f"{who} ran the call at line {t['line']} {len(keys)} times, and `{layer}` drew the "
                             f"same '{name}' key {best} times in a row: the same dropout mask every step")
        fresh = fresh and best == 1
    if fresh:
        (name, _), keys = rows[0]
        return not_confirmed(f"{who} ran the call at line {t['line']} {len(keys)} times, and its '{name}' stream "
                             f"drew a different key from one call to the next")
    return None
