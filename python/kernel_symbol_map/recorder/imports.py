"""A hook run on a module right after it is imported: how the recorder watches code it must not import itself.

A JIT or a profiler may be imported at any time, inside a test too; the
recorder must watch it from its first use, and must not import it first (an
import of torch costs seconds, and changes what a test sees). So the
recorder registers an import hook per module name: the module runs as it
would, then the hook, before the importer gets it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a watched module right after it is executed, before its importer sees it."""

    def __init__(self, hooks: dict[str, Callable[[types.ModuleType], None]],
                 failed: Callable[[str, BaseException], None]) -> None:
        self.hooks, self.failed = hooks, failed
        self.finding: set[str] = set()

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        hook = self.hooks.get(name)
        if hook is None or name in self.finding:
            return None
        self.finding.add(name)
        spec = None
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self.finding.discard(name)
        if spec is None or spec.loader is None:
            return spec
        if not hasattr(spec.loader, "exec_module"):  # a legacy loader: the module runs unhooked, and is said so
            self.failed(name, ImportError(f"its loader ({type(spec.loader).__name__}) cannot be hooked"))
            return spec
        spec.loader = HookedLoader(spec.loader, hook, self.failed)
        return spec


class HookedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, hook: Callable[[types.ModuleType], None],
                 failed: Callable[[str, BaseException], None]) -> None:
        self.loader, self.hook, self.failed = loader, hook, failed

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = self.loader  # as the module would have it: its source, its resources
        self.loader.exec_module(module)
        try:
            self.hook(module)
        except Exception as e:  # noqa: BLE001 - never the importer's error: the measurement says it instead
            self.failed(module.__name__, e)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def watch(hooks: dict[str, Callable[[types.ModuleType], None]],
          failed: Callable[[str, BaseException], None]) -> AfterImport:
    """Run each hook on its module: now, for those already imported, and right after the import of the others."""
    finder = AfterImport(hooks, failed)
    sys.meta_path.insert(0, finder)
    for name, hook in hooks.items():
        module = sys.modules.get(name)
        if module is not None:
            try:
                hook(module)
            except Exception as e:  # noqa: BLE001 - a module we cannot watch is said by ``failed``, never raised
                failed(name, e)
    return finder
