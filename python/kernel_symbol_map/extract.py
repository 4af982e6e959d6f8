"""``build``: read the build trees, read every object's kernels, write the map."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__, buildtree, mapfile
from .buildtree import BuildTree, TreeObject
from .devicecode import Result, read_kernels
from .errors import BuildTreeError

DEVICE_LANGUAGES = ("CUDA", "HIP")


@dataclass(frozen=True)
class Options:
    build_dirs: tuple[Path, ...]
    out: Path
    source_root: Path | None = None
    targets: tuple[str, ...] = ()
    backend: str = "native"
    read: Callable[[Path], Result] = read_kernels
    commit: str | None = None
    inside_build: bool = False


def _entry(
    obj: TreeObject, result: Result | None, tree: BuildTree, relative: Callable[[str], str]
) -> dict[str, Any]:
    source = obj.source if obj.source is not None else obj.object
    entry: dict[str, Any] = {
        "source": relative(str(source)),
        "target": obj.target,
        "object": mapfile.relpath(obj.object, tree.build_dir),
        "device": obj.language in DEVICE_LANGUAGES or bool(result and result.device),
        "symbols": list(result.symbols) if result else [],
        "deps": sorted({relative(d) for d in obj.deps}),
        "archs": list(result.archs) if result else [],
    }
    if obj.device_link:
        entry["device_link"] = True
    error = obj.error or (result.error if result else None)
    if error:
        entry["error"] = error
    return entry


def build_map(options: Options, log: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """The map document for ``options``; tree-level failures become a ``reason``, never an exception."""
    started = time.perf_counter()
    trees: list[BuildTree] = []
    problems: list[str] = []
    for build_dir in options.build_dirs:
        try:
            trees.append(
                buildtree.load(
                    build_dir, inside_build=options.inside_build, targets=list(options.targets) or None, log=log
                )
            )
        except BuildTreeError as e:
            problems.append(str(e))
    root = (options.source_root or (trees[0].source_root if trees else Path.cwd())).resolve()
    relative = lru_cache(maxsize=None)(lambda p: mapfile.relpath(p, root))
    objects = []
    for tree in trees:
        for obj in tree.objects:
            result = None if obj.error else options.read(obj.object)
            objects.append(_entry(obj, result, tree, relative))
    objects.sort(key=lambda e: (e["source"], e["target"], e["object"]))
    errors = [{"object": e["object"], "source": e["source"], "error": e["error"]} for e in objects if "error" in e]
    document: dict[str, Any] = {
        "version": mapfile.VERSION,
        "commit": mapfile.resolve_commit(options.commit, root),
        "cuda": next((t.cuda_version for t in trees if t.cuda_version), ""),
        "generated_at": mapfile.generated_at(),
        "build_dirs": [mapfile.relpath(b.resolve(), root) for b in options.build_dirs],
        "incomplete": False,
        "errors": errors,
        "objects": objects,
        "stats": {},
        "backend": _backend(objects),
        "generator": ", ".join(sorted({t.generator for t in trees})),
        "cmake_version": ", ".join(sorted({t.cmake_version for t in trees})),
        "tool": f"kernel-symbol-map {__version__}",
        "reader": options.backend,
        "pairing": ", ".join(sorted({t.pairing for t in trees})),
        "deps_from": ", ".join(sorted({t.deps_from for t in trees})),
    }
    notes = [n for t in trees for n in t.notes]
    if notes:
        document["notes"] = notes
    mapfile.fail_closed(document)
    if problems:
        document["incomplete"] = True
        document["objects"] = []
        document["reason"] = "; ".join(problems)
    elif not trees or not objects:
        document["reason"] = "no compiled objects in the build tree"
    seconds = 0.0 if mapfile.source_date_epoch() is not None else round(time.perf_counter() - started, 2)
    document["stats"] = {
        "objects": len(objects),
        "device_objects": sum(1 for e in objects if e["device"]),
        "objects_with_symbols": sum(1 for e in objects if e["symbols"]),
        "symbols": sum(len(e["symbols"]) for e in objects),
        "errors": len(errors),
        "cuobjdump_errors": len(errors),  # the seed's name for the same count
        "seconds": seconds,
    }
    return document


def _backend(objects: list[dict[str, Any]]) -> str:
    """``cuda`` or ``rocm``, from the architectures the objects hold."""
    archs = {a for e in objects for a in e.get("archs", [])}
    return "rocm" if archs and all(a.startswith(("gfx", "amdgcn")) for a in archs) else "cuda"
