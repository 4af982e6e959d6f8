"""Which target compiled each object, from what CMake wrote (never from guessed paths).

Objects come in groups, one per target: each target's objects share one
object directory (``CMakeFiles/<tgt>.dir`` or, with CMake 4.2's SHORT
strategy, ``.o/<hash>``), and the Makefile generator writes one DependInfo file
per target. Without the CMake package's per-target object lists, a group
belongs to the one target of the file-API reply that compiles exactly the
group's sources; anything ambiguous is an error for those objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import BuildTreeError
from .compdb import absolute
from .fileapi import Reply, Target

PACKAGE_LISTS = Path(".kernel_symbol_map") / "targets"
DEVICE_LINK_OBJECT = "cmake_device_link.o"


@dataclass(frozen=True)
class ListedTarget:
    """A target as the CMake package's ``file(GENERATE)`` list describes it."""

    name: str
    type: str
    objects: tuple[Path, ...]


@lru_cache(maxsize=None)
def group_dir(path: Path) -> Path:
    """The object directory of the target that produced ``path``."""
    parts = path.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i].endswith(".dir") and parts[i - 1] == "CMakeFiles":
            return Path(*parts[: i + 1])
        if parts[i - 1] == ".o":
            return Path(*parts[: i + 1])
    return path.parent


def read_package_lists(build_dir: Path) -> dict[str, ListedTarget] | None:
    """The per-target object lists the CMake package writes, or None when it did not."""
    folder = build_dir / PACKAGE_LISTS
    if not folder.is_dir():
        return None
    found = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            objects = tuple(absolute(o, build_dir) for o in data["objects"].split(";") if o)
            target = ListedTarget(str(data["name"]), str(data["type"]), objects)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise BuildTreeError(f"{path}: not a kernel_symbol_map object list: {e}") from None
        found[target.name] = target
    return found


@lru_cache(maxsize=None)
def compiled_sources(target: Target, source_root: Path) -> dict[Path, str]:
    """Absolute source -> compile language, for the sources ``target`` compiles itself."""
    found = {}
    for s in target.sources:
        language = target.language_of(s)
        if language is not None:
            found[absolute(s.path, source_root)] = language
    return found


def match_groups(groups: dict[Path, set[Path]], reply: Reply) -> dict[Path, Target | str]:
    """Group dir -> its target, or why none can be named."""
    sources = {t.name: set(compiled_sources(t, reply.source_root)) for t in reply.targets}
    found: dict[Path, Target | str] = {}
    for group, members in groups.items():
        exact = [t for t in reply.targets if sources[t.name] == members]
        if len(exact) > 1:  # same sources in two targets: CMake names the directory after one
            exact = [t for t in exact if group.name == f"{t.name}.dir"] or exact
        if len(exact) == 1:
            found[group] = exact[0]
        elif exact:
            names = ", ".join(t.name for t in exact)
            found[group] = f"objects in {group} could belong to any of {names}; use the CMake package's object lists"
        else:
            found[group] = f"no target of the file-API reply compiles exactly the objects in {group}"
    return found


def device_link_objects(build_dir: Path, generator: str, groups: set[Path], manifest: Path | None = None) -> set[Path]:
    """``cmake_device_link.o`` paths that the build manifest names in one of ``groups``."""
    found: set[Path] = set()
    if "Ninja" in generator:
        manifest = manifest or build_dir / "build.ninja"
        try:
            with manifest.open(errors="replace") as f:
                for line in f:
                    if line.startswith("build ") and DEVICE_LINK_OBJECT + ":" in line:
                        found.add(absolute(line[6:].split(":", 1)[0].strip(), build_dir))
        except OSError as e:
            raise BuildTreeError(f"{manifest}: {e.strerror or e}") from None
    else:
        for g in groups:
            make = g / "build.make"
            if make.is_file() and DEVICE_LINK_OBJECT in make.read_text(errors="replace"):
                found.add(g / DEVICE_LINK_OBJECT)
    return {p for p in found if group_dir(p) in groups}  # Ninja Multi-Config: <group>/<config>/cmake_device_link.o
