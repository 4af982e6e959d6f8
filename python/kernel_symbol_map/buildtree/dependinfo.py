"""The Makefile generator's ``DependInfo.cmake`` files: per target, (source, object, depfile).

``CMakeFiles/Makefile.cmake`` lists every target's DependInfo file; each holds
``CMAKE_DEPENDS_DEPENDENCY_FILES`` as quadruples ``source object format depfile``,
paths relative to the top build directory, for objects whose compiler writes
a depfile, and ``CMAKE_DEPENDS_CHECK_<LANG>`` as ``source object`` pairs for
those CMake scans itself (HIP), into ``depend.internal`` beside this file. Hand-written: these are CMake
``set()`` calls with quoted arguments, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import regex

from ..errors import BuildTreeError
from .compdb import absolute

_SET = regex.compile(r"set\(\s*(\w+)((?:\s+\"(?:[^\"\\]|\\.)*\")*)\s*\)", regex.S)
_QUOTED = regex.compile(r"\"((?:[^\"\\]|\\.)*)\"")


SCAN_FILE = "depend.internal"


@dataclass(frozen=True)
class MakeObject:
    source: Path
    object: Path
    depfile: Path | None  # the compiler's depfile; None when CMake scans the source itself
    scanned: Path | None = None  # CMake's depend.internal, when it does


def _lists(path: Path) -> dict[str, list[str]]:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None
    return {m.group(1): _QUOTED.findall(m.group(2)) for m in _SET.finditer(text)}


def dependinfo_files(build_dir: Path) -> list[Path]:
    path = build_dir / "CMakeFiles" / "Makefile.cmake"
    files = _lists(path).get("CMAKE_DEPEND_INFO_FILES")
    if files is None:
        raise BuildTreeError(f"{path}: no CMAKE_DEPEND_INFO_FILES; not a Makefile build tree?")
    return [absolute(f, build_dir) for f in files]


def read_dependinfo(path: Path, build_dir: Path) -> list[MakeObject]:
    lists = _lists(path)
    items = lists.get("CMAKE_DEPENDS_DEPENDENCY_FILES", [])
    if len(items) % 4:
        raise BuildTreeError(f"{path}: CMAKE_DEPENDS_DEPENDENCY_FILES is not in fours")
    found = [
        MakeObject(absolute(src, build_dir), absolute(obj, build_dir), absolute(dep, build_dir))
        for src, obj, _format, dep in zip(*[iter(items)] * 4)  # noqa: B905 - fours, checked above
        if obj.endswith((".o", ".obj"))
    ]
    for key, pairs in sorted(lists.items()):
        if not key.startswith("CMAKE_DEPENDS_CHECK_"):
            continue
        if len(pairs) % 2:
            raise BuildTreeError(f"{path}: {key} is not in pairs")
        found += [MakeObject(absolute(src, build_dir), absolute(obj, build_dir), None, path.parent / SCAN_FILE)
                  for src, obj in zip(*[iter(pairs)] * 2)]  # noqa: B905 - pairs, checked above
    return found
