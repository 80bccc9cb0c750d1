"""The semantic models confirmation plans with (no JAX here).

A finding was made by a model that knows the whole project: what other modules' traced code
passes to this module's functions (seeds) and which attribute names the project's classes declare
static (``register_static``, ``struct.field(pytree_node=False)``...).  Synthesized inputs must
follow the same facts (a static field is never synthesized as a tracer), so planning uses the same
project model: :class:`ModelSource` builds one :class:`~jaxlint.analysis.project.Project` per
project root, reading the lint's cache (never writing it), and falls back to the module alone
when the project cannot be analysed.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, Optional, Sequence

from ..analysis import SemanticModel, SourceFile

MAX_PROJECT_FILES = 20000


class ModelSource:
    def __init__(self, traced_functions: Sequence[str] = (), exclude: Sequence[str] = ()):
        self.traced_functions = list(traced_functions)
        self.exclude = list(exclude)
        self.projects: Dict[str, object] = {}
        self.notes: Dict[str, str] = {}     # root -> why its project could not be used

    def _project(self, path: str):
        from ..analysis.project import Project, find_root
        root = find_root(os.path.dirname(os.path.abspath(path)))
        if root is None:
            return None
        if root not in self.projects:
            project = None
            try:
                from ..discovery import iter_python_files
                files = [p for p, exists in iter_python_files([root], self.exclude, root=root)
                         if exists and p.endswith((".py", ".ipynb"))]
                if len(files) <= MAX_PROJECT_FILES:
                    project = Project(root, files, self.traced_functions, cache=_cache(root), loader=_loader())
            except Exception as exc:    # the module alone is still a sound (if poorer) plan
                self.notes[root] = f"{type(exc).__name__}: {exc}"
                project = None
            self.projects[root] = project
        return self.projects[root]

    def model(self, source: SourceFile, tree: Optional[ast.Module] = None) -> SemanticModel:
        project = self._project(source.path)
        if project is not None:
            try:
                return project.model_for_source(source, tree)
            except Exception as exc:
                self.notes[project.root] = f"{type(exc).__name__}: {exc}"
        return SemanticModel(tree if tree is not None else source.parse(), source)


def _cache(root: str):
    """The lint's cache of ``root``, read-only (nothing here flushes it); None when unusable."""
    try:
        from ..cache import Cache
        return Cache(root)
    except Exception:
        return None


def _loader():
    """How the lint reads a project file (notebooks included)."""
    try:
        from ..workspace import _read
        return _read
    except Exception:
        return SourceFile.from_path
