"""The rule contract and the one registry every front end reads.

A rule is a class in its own module, ``<family>/jaxNNN_symbol.py`` (or the
package ``<family>/jaxNNN_symbol/`` with the class in ``rule.py``). The module
name is the rule's identity: :func:`register` derives the stable ``code``
(``JAX101``) and ``symbol`` (``print-under-trace``, read as "allow print under
trace") from it, so file, code and symbol cannot disagree. The class declares
the rest once: a one-line ``summary``, the fix it offers, if any
(``fix = FixOffer("Use `jax.debug.print`", SAFE)``, read back as ``fix_title`` and
``fix_applicability``), its runtime evidence (``confirm``), and its
documentation in the class docstring, in fixed sections::

    ## What it does
    ## Why is this bad?
    ## Example
    ## Use instead
    ## Fix safety

``findings(ctx, m)`` yields findings by asking the semantic model ``m``
questions; :meth:`Rule.check`, what the engine calls, skips a file that imports
no JAX-ecosystem library unless the rule is a :class:`TracedCodeRule`.
The CLI, the flake8 and pylint plugins, ``jaxlint rule CODE``, the generated
docs and the fixture tests are all derived from :data:`REGISTRY`.
"""
from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass, replace
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..analysis import CERTAIN, Function, SemanticModel, SourceFile
from ..analysis import knowledge as K
from ..analysis.scopes import EAGER_MODULE_SEEDS
from ..findings import DEFAULT_PROFILE, STRICT_PROFILE, Finding, Settings
from ..fixes.edits import Edit, Fix

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")


class Context:
    """What a rule sees while checking one file."""

    def __init__(self, model: SemanticModel, source: SourceFile, settings: Optional[Settings] = None):
        self.model = model
        self.source = source
        self.settings = settings or Settings()
        self.path = source.path

    def finding(self, rule: "Rule", node: ast.AST, message: str, *, confidence: str = CERTAIN,
                fix: Optional[Fix] = None, end_node: Optional[ast.AST] = None,
                strict: Optional[str] = None, subject: Optional[tuple] = None) -> Finding:
        """A finding of ``rule`` at ``node``.  ``strict``: why it belongs to the strict profile
        only (it rests on an unknown, or is usually deliberate); None for the default profile.
        ``subject``: what the finding is about, when another rule may report the same pitfall
        (see ``Rule.supersedes``)."""
        src = self.source
        line = node.lineno
        col = src.char_col(line, node.col_offset)
        last = end_node or node
        end_line = getattr(last, "end_lineno", None) or line
        end_col = src.char_col(end_line, getattr(last, "end_col_offset", None) or node.col_offset)
        return Finding(rule.code, rule.symbol, self.path, line, col, end_line, end_col, message,
                       confidence, fix, rule.fix_title if fix is not None else None, None,
                       STRICT_PROFILE if strict else DEFAULT_PROFILE, strict, subject)


@dataclass(frozen=True)
class FixOffer:
    """The fix a rule offers, declared once on the class: its title and its
    applicability (``SAFE`` or ``UNSAFE``, see ``fixes/edits.py``)."""

    title: str
    applicability: str

    def make(self, edits: Iterable[Edit]) -> Fix:
        """The fix, with these edits, that the rule offers."""
        return Fix(self.title, tuple(edits), self.applicability)


class _FromFixOffer:
    """``Rule.fix_title`` / ``Rule.fix_applicability``: read from the class's
    :class:`FixOffer` (None without one), on the class and on an instance alike."""

    def __init__(self, field: str):
        self.field = field

    def __get__(self, obj, cls) -> Optional[str]:
        offer = cls.fix
        return getattr(offer, self.field) if offer is not None else None


class Rule:
    code: str = ""            # JAX101: set by register() from the module name
    symbol: str = ""          # print-under-trace: likewise
    summary: str = ""
    fix: Optional[FixOffer] = None
    fix_title = _FromFixOffer("title")
    fix_applicability = _FromFixOffer("applicability")
    default_enabled: bool = True
    # how runtime confirmation (jaxlint/confirm/) shows this rule's findings with JAX:
    # a strategy name, or a tuple of the name and the evidence it looks for; None: not confirmable
    confirm: Optional[object] = None
    # findings whose claim that evidence cannot show, by a fragment of their message: confirmation
    # calls them unreached with the reason, never not-confirmed from a run that could not tell
    unconfirmable: Tuple[Tuple[str, str], ...] = ()
    # a rule about how a program uses JAX's API has nothing to say about a file that imports
    # no JAX-ecosystem library (``SemanticModel.mentions_jax``); TracedCodeRule lifts this
    jax_files_only: bool = True
    # the pitfall happens only while JAX traces the code: silent in branches no trace takes
    trace_dependent: bool = False
    # codes of rules whose finding about the same ``Finding.subject`` this rule's finding
    # replaces: one pitfall, one finding, named by the rule that says what fails (JAX613's
    # "the same dropout mask every step" over JAX401's "the same key every iteration")
    supersedes: Tuple[str, ...] = ()

    def check(self, ctx: Context) -> Iterable[Finding]:
        """The findings in one file: what the engine calls.  Findings of the strict profile
        are dropped unless the settings ask for it."""
        m = ctx.model
        if self.jax_files_only and not m.mentions_jax:
            return ()
        found = self.findings(ctx, m)
        if m.unreachable_spans():
            found = unreachable_dropped(m, found)
        if self.trace_dependent:
            found = eager_module_seeds_strict(m, untraced_branches_dropped(m, found))
        found = self.profiled(ctx, found)
        if m.in_legacy_code():
            found = legacy_strict(found)
        if m.unimportable:
            basis = f"the module cannot be imported: {m.unimportable}; nothing in it runs"
            found = [replace(f, profile=STRICT_PROFILE, basis=basis) if f.profile == DEFAULT_PROFILE else f
                     for f in found]
        if ctx.settings.strict:
            return found
        return (f for f in found if f.profile == DEFAULT_PROFILE)

    def profiled(self, ctx: Context, found: Iterable[Finding]) -> Iterable[Finding]:
        """The findings with their profiles: what every finding of this rule needs to be
        reported by default (a rule family may move some to the strict profile)."""
        return found

    def findings(self, ctx: Context, m: SemanticModel) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    # ------------------------------------------------------------ docs
    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_sections(cls) -> Dict[str, str]:
        sections: Dict[str, str] = {}
        current = None
        buf: List[str] = []
        for line in cls.documentation().splitlines():
            m = re.match(r"^##\s+(.*?)\s*$", line)
            if m:
                if current is not None:
                    sections[current] = "\n".join(buf).strip()
                current, buf = m.group(1), []
            elif current is not None:
                buf.append(line)
        if current is not None:
            sections[current] = "\n".join(buf).strip()
        return sections

    @classmethod
    def markdown(cls) -> str:
        head = f"# {cls.code} `{cls.symbol}`\n\n{cls.summary}\n\n"
        meta = [f"- Default: {'enabled' if cls.default_enabled else 'disabled (opt in with --select)'}"]
        meta.append(f"- Fix: {cls.fix_applicability or 'none'}"
                    + (f" — {cls.fix_title}" if cls.fix_title else ""))
        return head + "\n".join(meta) + "\n\n" + cls.documentation() + "\n"


REGISTRY: Dict[str, Rule] = {}


def _rule_fix_title(code: str) -> Optional[str]:
    rule = REGISTRY.get(code)
    return rule.fix_title if rule is not None else None


class TracedCodeRule(Rule):
    """A rule about what code does while a transform traces it (the purity and
    concrete-value families). It reads every module with traced functions, also a
    helper module that imports no JAX library and is traced only from another
    module (a project seed)."""

    jax_files_only = False
    trace_dependent = True

    def profiled(self, ctx: Context, found: Iterable[Finding]) -> Iterable[Finding]:
        """Findings inside a ``try`` whose handler catches the error JAX raises for the pitfall
        handle it on purpose (``knowledge.TRACE_ERRORS``)."""
        errors = K.TRACE_ERRORS.get(self.code)
        if not errors:
            return found
        return [f for f in found if not _handled(ctx.model, f.line, errors)]


LEGACY_BASIS = ("code in a folder the project keeps for reference (legacy, deprecated, outdated, archive): "
                "not maintained, often on an old API on purpose")


def legacy_strict(found: Iterable[Finding]) -> Iterable[Finding]:
    """Every default finding of a module under a legacy folder goes to the strict profile."""
    for f in found:
        yield replace(f, profile=STRICT_PROFILE, basis=LEGACY_BASIS) if f.profile == DEFAULT_PROFILE else f


def eager_module_seeds_strict(m: SemanticModel, found: Iterable[Finding]) -> Iterable[Finding]:
    """A finding in code traced only on the guess that an NNX/Equinox module's method runs
    under a transform (``Function.traced_by_module_seed_only``) belongs to the strict profile:
    those modules run eagerly by default, and then nothing of what it says happens."""
    linen = m.module.module_applied_eagerly and m.in_tutorial_code()
    if not _has_eager_module_seeds(m) and not linen:
        yield from found
        return
    for f in found:
        if f.profile == DEFAULT_PROFILE:
            fn = _innermost_traced(m, f.line)
            if fn is not None and fn.traced_by_module_seed_only:
                f = replace(f, profile=STRICT_PROFILE, basis=MODULE_SEED_BASIS)
            elif fn is not None and linen and fn.traced_only_by_seeds(_LINEN_EAGER_SEEDS):
                f = replace(f, profile=STRICT_PROFILE, basis=LINEN_EAGER_BASIS)
        yield f


MODULE_SEED_BASIS = ("traced only if its NNX/Equinox module is called under a transform, which nothing in "
                     "this file shows (such modules run eagerly by default)")
_LINEN_EAGER_SEEDS = EAGER_MODULE_SEEDS | {"linen.Module"}
LINEN_EAGER_BASIS = ("traced only if its linen module is applied under a transform: this notebook applies it "
                     "with `init`/`apply` alone, which run it eagerly")


def unreachable_dropped(m: SemanticModel, found: Iterable[Finding]) -> Iterable[Finding]:
    """The findings outside statements no run reaches (after a ``return``/``raise``/``continue``/
    ``break`` of the same block): code that never runs has no pitfall to report."""
    return _outside(found, m.unreachable_spans())


def untraced_branches_dropped(m: SemanticModel, found: Iterable[Finding]) -> Iterable[Finding]:
    """The findings outside branches no trace takes (``SemanticModel.untraced_branch``): a
    finding about what tracing does says nothing about code only eager runs reach."""
    spans = m.untraced_spans()
    if not spans:
        return found
    return _outside(found, spans)


def _outside(found: Iterable[Finding], spans) -> List[Finding]:
    """The findings whose line lies in none of the ``(first, last)`` line spans."""
    return [f for f in found if not any(a <= f.line <= b for a, b in spans)]


_TRY_TYPES = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)


def _handled_spans(m: SemanticModel, errors, traced_only: bool = True) -> List[Tuple[int, int]]:
    """The bodies of the ``try`` statements of traced code (with ``traced_only``; else of any
    code) whose handler catches one of ``errors`` (the error JAX raises for a pitfall),
    ``Exception`` or anything."""
    def catches(h: ast.ExceptHandler) -> bool:
        if h.type is None:
            return True
        names = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        for n in names:
            last = n.attr if isinstance(n, ast.Attribute) else (n.id if isinstance(n, ast.Name) else None)
            if last in errors or last in K.CATCH_ALL_ERRORS:
                return True
        return False

    out = []
    for fn in m.functions:
        if traced_only and not fn.contexts:
            continue
        for t in fn.of_type(*_TRY_TYPES):
            if t.body and any(catches(h) for h in t.handlers):
                out.append((t.body[0].lineno, t.body[-1].end_lineno or t.body[-1].lineno))
    return out


def handled_anywhere(m: SemanticModel, line: int, errors) -> bool:
    """Is ``line`` in the body of a ``try`` (traced code or not) whose handler catches one of
    ``errors``, ``Exception`` or anything -- a pitfall that raises eagerly too, shown on purpose
    (``try: x[0] = 10`` / ``except Exception as e: print(e)`` in a tutorial)?"""
    spans = _cached(m, "_handled_any_" + "_".join(sorted(errors)), lambda: _handled_spans(m, errors, False))
    return any(a <= line <= b for a, b in spans)


def _handled(m: SemanticModel, line: int, errors) -> bool:
    """Is ``line`` in the body of a ``try`` whose handler catches the error JAX raises for the
    pitfall (``except jax.errors.TracerArrayConversionError:``, ``except TypeError:``,
    ``except Exception:``, a bare ``except:``)?  The code then handles the tracer on purpose."""
    spans = _cached(m, "_handled_spans_" + "_".join(sorted(errors)), lambda: _handled_spans(m, errors))
    return any(a <= line <= b for a, b in spans)


def _cached(m: SemanticModel, key: str, compute):
    got = m.__dict__.get(key)
    if got is None:
        got = compute()
        m.__dict__[key] = got
    return got


def _has_eager_module_seeds(m: SemanticModel) -> bool:
    return _cached(m, "_eager_module_seeds", lambda: not m.module.module_applied_under_trace and any(
        c.transform in EAGER_MODULE_SEEDS for fn in m.functions for c in fn.contexts))


def _innermost_traced(m: SemanticModel, line: int) -> Optional[Function]:
    """The innermost traced function whose body holds ``line``."""
    best = None
    for fn in m.functions:
        node = fn.node
        if fn.is_module or not fn.contexts or not (node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        if best is None or node.lineno >= best.node.lineno:
            best = fn
    return best


_RULE_MODULE = re.compile(r"jax(\d{3})_([a-z0-9]+(?:_[a-z0-9]+)*)")


def rule_identity(module: str) -> Tuple[str, str]:
    """``(code, symbol)`` of the rule defined in ``module``:
    ``...purity.jax101_print_under_trace`` -> ``("JAX101", "print-under-trace")``; a rule
    split into a package declares its class in ``rule.py``
    (``...jit.jax504_unrolled_python_loop.rule`` -> ``("JAX504", "unrolled-python-loop")``)."""
    parts = module.split(".")
    name = parts[-2] if parts[-1] == "rule" and len(parts) > 1 else parts[-1]
    m = _RULE_MODULE.fullmatch(name)
    if m is None:
        raise ValueError(f"{module}: a rule lives in a module named jaxNNN_symbol (or jaxNNN_symbol/rule.py)")
    return "JAX" + m.group(1), m.group(2).replace("_", "-")


def register(cls):
    """Class decorator: add a rule to the registry under the code and symbol its
    module's name gives it (codes and symbols must be unique)."""
    for derived in ("code", "symbol", "fix_title", "fix_applicability"):
        if derived in vars(cls):
            raise ValueError(f"{cls.__name__} declares {derived!r}: it is derived "
                             f"({'from the module name' if derived in ('code', 'symbol') else 'from fix = FixOffer(...)'})")
    cls.code, cls.symbol = rule_identity(cls.__module__)
    inst = cls()
    if cls.code in REGISTRY:
        raise ValueError(f"duplicate rule code {cls.code}")
    if any(r.symbol == cls.symbol for r in REGISTRY.values()):
        raise ValueError(f"duplicate rule symbol {cls.symbol}")
    REGISTRY[cls.code] = inst
    return cls


def traced_functions(ctx: Context) -> Iterator[Function]:
    """The traced contexts of the file, in source order."""
    for fn in ctx.model.functions:
        if fn.contexts:
            yield fn
