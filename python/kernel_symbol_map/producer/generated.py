"""Files the configure wrote: compiled from inputs that no map can know.

vLLM's marlin and machete kernels are written at configure time:
``execute_process`` runs ``gen_marlin.py``, which reads ``csrc/tiles.h`` and
writes git-ignored ``csrc/marlin_gen/*.cu``. Neither the compiler's deps nor
the configure's own inputs (``RERUN_CMAKE``) name what the script read, so
any change of the pull request may be one of its inputs.

Such a file is one the build compiles or includes that

* no build rule makes (those are :mod:`..buildtree.buildrules`' business),
* is inside the source root and git does not track it, or is inside a build
  folder but neither CMake's own (any ``CMakeFiles/``, ``_deps/``) nor a
  ``COPYONLY`` copy of a configure input (same name, or ``.in`` dropped, and
  the same bytes: a substituted ``configure_file`` may hold values that an
  ``execute_process`` computed from any file),
* and is not a link to a file that is known; a path outside the project (a
  build folder configured through a symlink) is judged where it leads.

When git cannot list the source root's files (an sdist, no git), which of
them the configure wrote cannot be known: none inside the source root is
counted, and the map says so (``tracked_files_unknown``), so that ``select``
uses no such map as evidence. ``query`` stays exact about what it knows.
"""

from __future__ import annotations

import filecmp
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


def tracked_files(source_root: Path) -> frozenset[str] | None:
    """Every file git tracks under ``source_root`` (submodules' too), absolute; None when git cannot say."""
    root = os.path.normpath(source_root)
    names = _git_names(root, "ls-files", "-z", "--recurse-submodules")
    if names is None:
        return None
    prefix = root.rstrip(os.sep) + os.sep  # git lists clean relative paths: joined, not normalised
    return frozenset(prefix + n for n in names)


def changed_since(source_root: Path, commit: str) -> frozenset[str] | None:
    """The tracked files under ``source_root`` whose working-tree content is not ``commit``'s (edited, staged
    or not, or deleted), relative to ``source_root`` as a map spells them; None when git cannot say."""
    if not commit:
        return None
    names = _git_names(os.path.normpath(source_root), "diff", "--no-renames", "--name-only", "-z", "--relative",
                       commit, "--")
    return None if names is None else frozenset(names)


def _git_names(root: str, *args: str) -> list[str] | None:
    """The NUL-separated names ``git -C root ARGS`` prints; None when git is missing or fails."""
    try:
        proc = subprocess.run(["git", "-C", root, *args], capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return [n for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if n]


@dataclass(frozen=True)
class Known:
    """What tells a file the configure wrote from one the project or the build rules own."""

    source_root: str
    build_dirs: tuple[str, ...]
    tracked: frozenset[str] | None  # None: git could not say
    rule_outputs: frozenset[str]
    third_party: tuple[str, ...]  # FetchContent folders
    configure_inputs: dict[str, tuple[str, ...]]  # file name -> the configure inputs of that name
    _seen: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)
    _folders: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, source_root: Path, build_dirs: Iterable[Path], rule_outputs: Iterable[str],
           third_party: Iterable[Path], configure_inputs: Iterable[str],
           tracked: frozenset[str] | None) -> Known:
        """``tracked``: :func:`tracked_files` of ``source_root``, asked once for every tree of a map."""
        return cls(os.path.normpath(source_root), tuple(os.path.normpath(b) for b in build_dirs),
                   tracked, frozenset(rule_outputs),
                   tuple(os.path.normpath(t) for t in third_party), _by_name(configure_inputs))

    def written_by_configure(self, path: str) -> bool:
        """Whether ``path`` (absolute, normalised) is a file the configure wrote, by the module's rules."""
        found = self._seen.get(path)
        if found is None:  # deps repeat across objects: each distinct file is judged once
            found = self._judge(path)
            self._seen[path] = found
        return found

    def _judge(self, path: str) -> bool:
        """As spelled, then as the file it is: a link to a known file is that file, and a path outside the
        project (a build folder configured through a symlink) is judged where it leads."""
        spelled = self._class(path)
        if spelled == _KNOWN:
            return False
        real = self._realpath(path)
        if real == path:
            return spelled == _WRITTEN
        return self._class(real) == _WRITTEN or (spelled == _WRITTEN and self._class(real) != _KNOWN)

    def _realpath(self, path: str) -> str:
        """``os.path.realpath``, with each folder resolved once: a map's thousands of distinct headers live in
        a few hundred folders, and resolving costs a ``stat`` per path component."""
        folder, name = os.path.split(path)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = os.path.realpath(folder)
        found = os.path.join(real, name)
        return os.path.realpath(found) if os.path.islink(found) else found

    def _class(self, path: str) -> str:
        if path in self.rule_outputs or any(_inside(path, t) for t in self.third_party):
            return _KNOWN
        build = max((b for b in self.build_dirs if _inside(path, b)), key=len, default=None)
        if build is not None:  # a build folder inside the source root: the deeper root wins
            rel = os.sep + os.path.relpath(path, build)  # CMake's own folders, a subdirectory's too
            if f"{os.sep}CMakeFiles{os.sep}" in rel or rel.startswith(f"{os.sep}_deps{os.sep}") or self._copy(path):
                return _KNOWN
            return _WRITTEN
        if not _inside(path, self.source_root):
            return _OUTSIDE  # the toolkit's and the system's headers
        if self.tracked is None:
            return _OUTSIDE  # no git: the map says it cannot know (tracked_files_unknown)
        return _KNOWN if path in self.tracked else _WRITTEN

    def _copy(self, path: str) -> bool:
        """A ``configure_file(... COPYONLY)`` copy: byte for byte a configure input of its name (or that name
        and ``.in``). A substituted one may hold values the configure computed from any file."""
        name = os.path.basename(path)
        for original in self.configure_inputs.get(name, ()) + self.configure_inputs.get(name + ".in", ()):
            try:
                if filecmp.cmp(path, original, shallow=False):
                    return True
            except OSError:
                continue
        return False


_KNOWN, _WRITTEN, _OUTSIDE = "known", "written", "outside"


def _by_name(paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for p in paths:
        found[os.path.basename(p)] = (*found.get(os.path.basename(p), ()), p)
    return found


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder + os.sep)
