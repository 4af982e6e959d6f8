"""Copies traced back to the files people edit: vLLM-style hipified trees.

A ROCm build of a CUDA project copies the sources into the build tree,
hipifies the copies (``csrc/foo.cu`` becomes ``csrc/foo.hip``, "cuda" becomes
"hip" in names) and compiles those. A mirror ``(copy, original)`` maps a path
under ``copy`` back to the original it came from: the same relative path
first, then the renames torch's hipify applies, undone (``.hip`` to ``.cu``,
"hip" to "cuda" and "HIP" to "CUDA" in folder and file names, a ``_hip``
suffix dropped). A copy with no original stays as it is.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Mirror:
    copy: str  # absolute, normalised
    original: str


def parse(spec: str, base: Path) -> Mirror:
    """``COPY=ORIGINAL`` (relative paths from ``base``)."""
    copy, sep, original = spec.partition("=")
    if not sep or not copy or not original:
        raise ValueError(f"--mirror {spec!r}: expected COPY=ORIGINAL")
    return Mirror(os.path.normpath(base / copy), os.path.normpath(base / original))


def _unhipified(rel: str) -> list[str]:
    """Candidate originals of a hipified relative path, most likely first (the path itself is tried first)."""
    folder, name = os.path.split(rel)
    root, ext = os.path.splitext(name)
    exts = [ext, ".cu"] if ext == ".hip" else [ext]
    roots = [root]
    if root.endswith("_hip"):
        roots.append(root[: -len("_hip")])
    roots += [r.replace("hip", "cuda").replace("HIP", "CUDA") for r in list(roots)]
    folders = [folder, folder.replace("hip", "cuda").replace("HIP", "CUDA")]
    seen: dict[str, None] = {}
    for f, r, e in itertools.product(folders, roots, exts):
        seen.setdefault(os.path.join(f, r + e))
    return list(seen)


@dataclass
class Mirrors:
    """Resolve copies to originals; remembers copies that have none, for the map's notes."""

    mirrors: tuple[Mirror, ...]
    orphans: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.resolve = lru_cache(maxsize=None)(self._resolve)  # type: ignore[method-assign]

    def _resolve(self, path: str) -> tuple[str, str | None]:
        """``(original, copy)`` for a path under a copy with an original; else ``(path, None)``."""
        for m in self.mirrors:
            prefix = m.copy.rstrip("/") + "/"
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix) :]
            for candidate in _unhipified(rel):
                original = os.path.join(m.original, candidate)
                if os.path.isfile(original):
                    return original, path
            self.orphans.add(path)
        return path, None
