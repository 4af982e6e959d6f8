"""How a map spells a path: relative to the source root inside it, behind a marker inside a build folder
(``$BUILD/...``, ``$BUILD1/...``) or a FetchContent dependency (``$DEP/<name>/...``), else absolute; so
that a map does not depend on where the build ran."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

BUILD_MARKER = "$BUILD"  # a path inside the i-th build folder: "$BUILD/gen/x.cu", "$BUILD1/..." for i >= 1


def build_marker(index: int) -> str:
    return BUILD_MARKER if index == 0 else f"{BUILD_MARKER}{index}"


DEP_MARKER = "$DEP"  # a file of a FetchContent dependency: "$DEP/cutlass/include/cute/tensor.hpp"


def spell(path: str | os.PathLike[str], source_root: str | os.PathLike[str], build_dirs: Sequence[str],
          deps: Mapping[str, str] | None = None) -> str:
    """How a map writes ``path``, whatever folder the build ran in.

    Inside a third-party dependency's folder (``deps``: FetchContent name ->
    folder): ``$DEP/<name>/...``, wherever it was fetched to (checked first: it
    may lie in a build folder, or in the source root's ``.deps``). Inside a
    build folder: relative to it, behind its marker (a build folder inside the
    source tree is still a build folder). Inside the source root: relative to
    it. A path spelled through a symlinked root (a project configured as
    ``-S /link``) is compared as the real file too. Anything else (system and
    toolkit headers) stays absolute.
    """
    return Speller(source_root, build_dirs, deps)(path)


class Speller:
    """:func:`spell` for many paths of one build: the roots' real paths are found once, not once a path."""

    def __init__(self, source_root: str | os.PathLike[str], build_dirs: Sequence[str],
                 deps: Mapping[str, str] | None = None) -> None:
        self.roots = (source_root, build_dirs, deps or {})
        self._real: tuple[str, list[str], dict[str, str]] | None = None  # found when a path first needs them

    def __call__(self, path: str | os.PathLike[str]) -> str:
        p = os.path.normpath(path)
        marked = _under(p, *self.roots)
        if marked is None:
            if self._real is None:
                source_root, build_dirs, deps = self.roots
                self._real = (os.path.realpath(source_root), [os.path.realpath(b) for b in build_dirs],
                              {n: os.path.realpath(f) for n, f in deps.items()})
            marked = _under(os.path.realpath(p), *self._real)
        return p if marked is None else marked


def _under(p: str, source_root: str | os.PathLike[str], build_dirs: Sequence[str],
           deps: Mapping[str, str]) -> str | None:
    for name, folder in deps.items():
        if p == folder or p.startswith(folder.rstrip("/") + "/"):
            return f"{DEP_MARKER}/{name}" + p[len(folder.rstrip("/")) :]
    for index, folder in enumerate(build_dirs):
        if p == folder or p.startswith(folder.rstrip("/") + "/"):
            return build_marker(index) + p[len(folder.rstrip("/")) :]
    rel = relpath(p, source_root)
    return None if os.path.isabs(rel) else rel


def unspell(path: str, build_dirs: Sequence[str]) -> str:
    """``path`` with its build marker replaced by the consumer's build folder, when it has that one."""
    if not path.startswith(BUILD_MARKER):
        return path
    rest = path[len(BUILD_MARKER) :]  # string operations: no regex import on the no-op path
    digits = len(rest) - len(rest.lstrip("0123456789"))
    number, tail = rest[:digits], rest[digits:]
    index = int(number or 0)
    if (tail and not tail.startswith("/")) or index >= len(build_dirs):
        return path
    return os.path.normpath(build_dirs[index] + tail)


def relpath(path: str | os.PathLike[str], source_root: str | os.PathLike[str]) -> str:
    """Relative to the source root when inside it, else absolute (FetchContent, CUDA headers).

    String operations on normalised absolute paths: this runs once per distinct dep.
    """
    p = os.path.normpath(path)
    root = os.path.normpath(source_root)
    if p == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return p[len(prefix) :] if p.startswith(prefix) else p
