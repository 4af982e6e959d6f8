"""Files the configure wrote: compiled from inputs that no map can know.

vLLM's marlin and machete kernels are written at configure time:
``execute_process`` runs ``gen_marlin.py``, which reads ``csrc/tiles.h`` and
writes git-ignored ``csrc/marlin_gen/*.cu``. Neither the compiler's deps nor
the configure's own inputs (``RERUN_CMAKE``) name what the script read, so
any change of the pull request may be one of its inputs.

Such a file is one the build compiles or includes that

* no build rule makes (those are :mod:`..buildtree.buildrules`' business),
* is inside the source root and git does not track it, or is inside a build
  folder but neither CMake's own (``CMakeFiles/``, ``_deps/``) nor a
  ``configure_file`` copy of a configure input (same name, or ``.in`` dropped),
* and is not reached through a link to a file that is known.

When git cannot list the source root's files (an sdist, no git), which of
them the configure wrote cannot be known: none inside the source root is
counted, and the map says so (``tracked_files_unknown``), so that ``select``
uses no such map as evidence. ``query`` stays exact about what it knows.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


def tracked_files(source_root: Path) -> frozenset[str] | None:
    """Every file git tracks under ``source_root`` (submodules' too), absolute; None when git cannot say."""
    root = os.path.normpath(source_root)
    try:
        proc = subprocess.run(["git", "-C", root, "ls-files", "-z", "--recurse-submodules"],
                              capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    names = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    return frozenset(os.path.normpath(os.path.join(root, n)) for n in names if n)


@dataclass(frozen=True)
class Known:
    """What tells a file the configure wrote from one the project or the build rules own."""

    source_root: str
    build_dirs: tuple[str, ...]
    tracked: frozenset[str] | None  # None: git could not say
    rule_outputs: frozenset[str]
    third_party: tuple[str, ...]  # FetchContent folders
    configure_inputs: frozenset[str]  # their file names
    _seen: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, source_root: Path, build_dirs: Iterable[Path], rule_outputs: Iterable[str],
           third_party: Iterable[Path], configure_inputs: Iterable[str],
           tracked: frozenset[str] | None) -> Known:
        """``tracked``: :func:`tracked_files` of ``source_root``, asked once for every tree of a map."""
        return cls(os.path.normpath(source_root), tuple(os.path.normpath(b) for b in build_dirs),
                   tracked, frozenset(rule_outputs),
                   tuple(os.path.normpath(t) for t in third_party),
                   frozenset(os.path.basename(p) for p in configure_inputs))

    def written_by_configure(self, path: str) -> bool:
        """Whether ``path`` (absolute, normalised) is a file the configure wrote, by the module's rules."""
        found = self._seen.get(path)
        if found is None:  # deps repeat across objects: each distinct file is judged once
            found = self._suspect(path) and ((real := os.path.realpath(path)) == path or self._suspect(real))
            self._seen[path] = found
        return found

    def _suspect(self, path: str) -> bool:
        if path in self.rule_outputs or any(_inside(path, t) for t in self.third_party):
            return False
        build = max((b for b in self.build_dirs if _inside(path, b)), key=len, default=None)
        if build is not None:  # a build folder inside the source root: the deeper root wins
            rel = os.path.relpath(path, build)
            if rel.startswith(("CMakeFiles" + os.sep, "_deps" + os.sep)):
                return False
            name = os.path.basename(path)
            return name not in self.configure_inputs and name + ".in" not in self.configure_inputs
        if not _inside(path, self.source_root):
            return False  # the toolkit's and the system's headers
        return self.tracked is not None and path not in self.tracked  # no git: the map says it cannot know


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder + os.sep)
