"""``build``: read the build trees, read every object's kernels, write the map."""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from .. import mapformat
from ..mapformat import digests as map_digests
from ..mapformat import sizes as map_sizes
from .._statefile import stat_key
from .._version import __version__
from ..buildtree.model import NOT_BUILT, BuildTree, TreeObject
from ..buildtree.model import load as load_tree
from ..errors import BuildTreeError, FormatError
from ..readers._blob import Blob, OpenFile
from ..readers.devicecode import (
    CUDA_SECTIONS,
    HIP_BUNDLE_SECTION_PREFIX,
    HIP_SECTION,
    OFFLOADING_SECTION,
    Result,
    failed,
    read_blob,
    read_kernels,
)
from ..readers.archive import is_archive
from ..readers.elf import EM_AMDGPU, EM_CUDA, ElfFile, is_elf
from ..readers.folders import NONE, Folders
from ..readers.hostdigest import host_digest
from ..readers.hostfunctions import host_parts, instrumented
from ..readers.sizes import BITCODE, Image, images, merged
from .cache import ObjectCache
from .generated import Known, changed_since, tracked_files
from .mirrors import Mirror, Mirrors

DEVICE_LANGUAGES = ("CUDA", "HIP")


@dataclass(frozen=True)
class Options:
    build_dirs: tuple[Path, ...]
    out: Path
    source_root: Path | None = None
    targets: tuple[str, ...] = ()
    exclude_targets: tuple[str, ...] = ()  # EXCLUDE_FROM_ALL targets: never built, so never mapped
    backend: str = "native"
    read: Callable[[Path], Result] = read_kernels
    commit: str | None = None
    inside_build: bool = False
    reconfigure: bool = False  # opt-in: re-run the project's configure to answer the file-API query
    mirrors: tuple[Mirror, ...] = ()  # hipified copies -> the originals people edit
    config: str | None = None  # Ninja Multi-Config: the configuration to map (default: the one built)
    use_cache: bool = True
    jobs: int = 1  # >1: a process pool (bench/bench_parallel.py: serial wins on 2 cores)


@dataclass
class Extraction:
    document: dict[str, Any]
    inputs: list[str]  # files the map was derived from
    deps: list[str]  # every dep path checked to exist


Sizes = dict[str, dict[str, Any]]  # arch -> readers.sizes.Image.record(): an object's "sizes"
Digests = dict[str, Any]  # an object's "digests", in the map's form (mapformat.digests)
Read = tuple[Result, Sizes, Digests | None]
_DEVICE_SECTIONS = frozenset(n.encode() for n in (*CUDA_SECTIONS, HIP_SECTION, OFFLOADING_SECTION))


def _read_all(objects: list[tuple[Path, ObjectCache | None]], options: Options, folders: Folders = NONE
              ) -> dict[Path, Read]:
    """Each object's Result, sizes and digests: from its tree's cache when its stat key holds, else read
    (and remembered)."""
    found: dict[Path, Read] = {}
    todo: list[tuple[Path, list[int] | None, ObjectCache | None]] = []
    masked = hashlib.sha256(folders.key().encode()).hexdigest()[:16]  # digests mask these folders
    for obj, cache in objects:
        key = stat_key(obj)
        hit = cache.get(str(obj), key) if cache else None
        # A cache of digests of another scheme (or none), or that masked other folders, is a miss.
        if hit is not None and hit.get("scheme") == map_digests.SCHEME and hit.get("folders") == masked:
            kernels = {a: frozenset(s) for a, s in hit["kernels"].items()}
            found[obj] = Result(str(obj), kernels, device=hit["device"]), hit["sizes"], hit["digests"]
        else:
            todo.append((obj, key, cache))
    paths = [t[0] for t in todo]
    read = partial(_read_and_measure, options.read, folders=folders)
    if options.jobs > 1 and len(paths) > 1:
        with ProcessPoolExecutor(options.jobs) as pool:
            results = list(pool.map(read, paths, chunksize=max(1, len(paths) // (4 * options.jobs))))
    else:
        results = [read(p) for p in paths]
    for (obj, key, cache), (result, sizes, digests) in zip(todo, results, strict=True):
        found[obj] = result, sizes, digests
        if cache is not None and result.error is None and not result.members:
            cache.put(str(obj), key, {"kernels": {a: sorted(s) for a, s in result.kernels.items()},
                                      "device": result.device, "sizes": sizes, "digests": digests,
                                      "folders": masked, "scheme": map_digests.SCHEME})
    return found


def _read_and_measure(read: Callable[[Path], Result], path: Path, folders: Folders = NONE) -> Read:
    """The object's kernels (with ``read``: native or cuobjdump), and its images' sizes and digests (always
    native), in one walk of its device code.

    Sizes are for people, never evidence: an object whose sizes cannot be
    measured (bitcode only) keeps its kernels and has no ``sizes``. Digests
    are evidence for ``select --base-map``: an object whose digests cannot be
    taken has none, and a consumer then cannot compare its code.

    With the native reader the object is opened once, with a memo, so its
    images are decompressed once for the kernels, the sizes and the digests;
    another reader (cuobjdump) reads the file its own way first. ``folders``: where the build
    ran, masked in the digests (two clean builds of one commit in two folders give the same ones).
    """
    if read is read_kernels:
        try:
            with OpenFile(path, memo=True) as blob:
                # Sizes and digests first: their walk inflates each image and leaves its kernels in the memo,
                # so the kernels' walk inflates none again, whatever the memo's limit on payloads (a library's
                # images are hundreds of MB)
                try:
                    walked: tuple[Image, ...] | None = tuple(images(blob, digests=True, folders=folders))
                except FormatError:
                    walked = None
                result = read_blob(blob)
                if result.error is not None or walked is None:
                    return result, {}, None
                return _measured(blob, result, folders, walked if result.device else ())
        except FormatError as e:  # the file cannot be opened: read_kernels says the same
            return failed(os.fspath(path), e), {}, None
    result = read(path)
    if result.error is not None:
        return result, {}, None
    try:
        with OpenFile(path) as blob:
            return _measured(blob, result, folders)
    except FormatError:
        return result, {}, None


def _measured(blob: Blob, result: Result, folders: Folders = NONE, found: tuple[Image, ...] | None = None) -> Read:
    """``result`` with the sizes and digests of the file open as ``blob``; none when they cannot be taken.
    ``found``: its images, when they were walked already."""
    try:
        host, coverage = _host_digest(blob, folders)
        if found is None:
            found = tuple(images(blob, digests=True, folders=folders)) if result.device else ()
    except FormatError:
        return result, {}, None
    sizes = merged([(i.arch, i.record()) for i in found if i.kind != BITCODE])
    digested = [map_digests.ImageDigests(i.arch, i.digests, i.per_kernel, i.relocatable, i.beside_cubin) for i in found]
    parts = _host_parts(blob, folders) if host is not None else None
    return result, sizes, map_digests.pack(result.symbols, digested, host, coverage, parts)


def _host_parts(blob: Blob, folders: Folders) -> map_digests.HostParts | None:
    """The object's host code by parts, where it was compiled with host coverage (only a recording of such a
    build can say which functions a test ran: elsewhere parts would cost a third of a cold map and decide
    nothing); None where it was not, or does not split (it is then compared whole)."""
    try:
        elf = ElfFile(blob)
        if not instrumented(elf):
            return None
        found = host_parts(elf, _DEVICE_SECTIONS, HIP_BUNDLE_SECTION_PREFIX.encode(), folders)
    except FormatError:
        return None
    return None if isinstance(found, str) else \
        map_digests.HostParts(found.functions, found.init, found.data, found.unseen)


def _host_digest(blob: Blob, folders: Folders = NONE) -> tuple[str | None, str | None]:
    """The digest of an object's host code and how it covers it (mapformat.digests' ``covers.host``): a
    device image (a cubin, a fatbin, PTX) has no host code; an archive's is not digested (None, None)."""
    if is_archive(blob):
        return None, None
    elf = ElfFile(blob) if is_elf(blob) else None
    if elf is None or elf.machine in (EM_CUDA, EM_AMDGPU):
        return None, map_digests.DEVICE_IMAGE
    return host_digest(elf, _DEVICE_SECTIONS, HIP_BUNDLE_SECTION_PREFIX.encode(), folders), map_digests.DIGESTED


class DepSpellings(dict[str, tuple[str, ...]]):
    """A dep path as the compiler spelled it -> how the map writes it (its original's, when a mirror
    compiled it): each distinct path spelled once, not once per object that depends on it (a vLLM-sized
    tree has ~300 deps an object and a few thousand distinct ones)."""

    def __init__(self, spell: Callable[[str], tuple[str, ...]]) -> None:
        super().__init__()
        self._spell = spell

    def __missing__(self, path: str) -> tuple[str, ...]:
        spelled = self[path] = self._spell(path)
        return spelled

    def of(self, deps: tuple[str, ...]) -> list[str]:
        """An object's deps as the map writes them: sorted, each once."""
        out: set[str] = set()
        for d in deps:
            out.update(self[d])
        return sorted(out)


def _entry(
    obj: TreeObject, read: Read | None, tree: BuildTree, relative: Callable[[str], str], mirrors: Mirrors,
    spellings: DepSpellings, known: Known, configured: frozenset[str],
) -> dict[str, Any]:
    result, sizes, digests = read or (None, {}, None)
    source, copy = mirrors.resolve(str(obj.source if obj.source is not None else obj.object))
    entry: dict[str, Any] = {
        "source": relative(source),
        "target": obj.target,
        "object": mapformat.relpath(obj.object, tree.build_dir),
        "device": obj.language in DEVICE_LANGUAGES or bool(result and result.device),
        "symbols": list(result.symbols) if result else [],
        "deps": spellings.of(obj.deps),
        "archs": list(result.archs) if result else [],
    }
    if copy is not None:  # compiled from a hipified copy: the map names the original, and keeps the copy
        entry["compiled_from"] = relative(copy)
    if obj.unity_sources:  # a unity object: a change to any of these is a change to its source
        entry["unity_sources"] = sorted({relative(mirrors.resolve(u)[0]) for u in obj.unity_sources})
    if obj.device_link:
        entry["device_link"] = True
    if obj.rule_inputs:  # a generated source or header: what the build rules made it from (in deps too)
        entry["rule_inputs"] = sorted({relative(mirrors.resolve(d)[0]) for d in obj.rule_inputs})
    if not obj.device_link and not obj.precompiled_header and (not configured.isdisjoint(obj.deps) or any(
            known.written_by_configure(mirrors.resolve(p)[0]) for p in _compiled_from(obj))):
        entry["configure_generated"] = True  # inputs no map knows: every change reaches it (kernelmap)
    packed = map_sizes.pack(entry["symbols"], sizes) if sizes else None
    if packed:
        entry["sizes"] = packed
    if obj.precompiled_header:
        entry["digests"] = map_digests.precompiled_header()  # its code shows in the objects compiled with it
    elif digests is not None:
        entry["digests"] = digests
    if obj.scanned:  # CMake's own scan: project headers only, no system or toolkit headers
        entry["deps_from"] = "cmake-scan"
    elif obj.device_side:  # clang: the depfile's host job, and the device side per architecture, from one
        # clang-scan-deps process over every object, or (no matching tool, or it failed) a preprocessor run each
        entry["deps_from"] = "device-scan-deps" if obj.device_method == "scan-deps" else "device-preprocessor"
    error = obj.error or (result.error if result else None)
    if error:
        entry["error"] = error
    return entry


def build_map(options: Options, log: Callable[[str], None] = lambda _m: None) -> Extraction:
    """The map for ``options``; tree-level failures become a ``reason``, never an exception."""
    started = time.perf_counter()
    trees: list[BuildTree] = []
    problems: list[str] = []
    for build_dir in options.build_dirs:
        try:
            trees.append(
                load_tree(
                    build_dir, inside_build=options.inside_build, reconfigure=options.reconfigure,
                    targets=list(options.targets) or None, exclude=list(options.exclude_targets) or None,
                    config=options.config or None, log=log,
                    use_cache=options.use_cache,
                )
            )
        except BuildTreeError as e:
            problems.append(str(e))
    root = (options.source_root or (trees[0].source_root if trees else Path.cwd())).resolve()
    folders = [os.path.normpath(b.resolve()) for b in options.build_dirs]
    deps = {name: os.path.normpath(folder) for t in trees for name, folder in t.third_party.items()}
    relative = lru_cache(maxsize=None)(mapformat.Speller(root, folders, deps))

    def spellings(path: str) -> tuple[str, ...]:
        """A project file as the compiler spelled it, and as the real file when reached through a symlink.

        A header staged into the build tree as a link (or linked inside the
        source tree) is then reached by an edit of the file people change.
        Files outside the project stay as spelled, so no realpath is paid there.
        """
        spelled = relative(path)
        if os.path.isabs(spelled):
            return (spelled,)
        real = relative(os.path.realpath(path))
        return (spelled,) if real == spelled or os.path.isabs(real) else (spelled, real)

    mirrors = Mirrors(options.mirrors)
    dep_spellings = DepSpellings(lambda d: spellings(mirrors.resolve(d)[0]))

    # Where the build ran, as its strings spell it: the source root, each build folder, each fetched
    # dependency's, by its role (so the same role in another checkout masks alike).
    roles = {str(root): "source", **{f: f"build{i}" for i, f in enumerate(folders)},
             **{folder: f"dep:{name}" for name, folder in sorted(deps.items())}}
    masks = Folders(roles)
    tool = f"{__version__}/{options.backend}"
    caches = {t.build_dir: ObjectCache(t.build_dir, tool, log) for t in trees} if options.use_cache else {}
    results = _read_all(
        [(o.object, caches.get(t.build_dir)) for t in trees for o in t.objects
         if not o.error and not o.precompiled_header], options, masks
    )
    objects = []
    tracked = tracked_files(root) if trees else frozenset()
    for tree in trees:
        known = Known.of(root, options.build_dirs, tree.rule_outputs, tree.third_party.values(), tree.configure_inputs,
                         tracked)
        # The deps the configure wrote, each distinct one judged once (objects share most of theirs)
        configured = frozenset(d for d in {d for o in tree.objects for d in o.deps}
                               if known.written_by_configure(mirrors.resolve(d)[0]))
        for obj in tree.objects:
            objects.append(_entry(obj, results.get(obj.object), tree, relative, mirrors, dep_spellings, known,
                                  configured))
        if tree.build_dir in caches:
            caches[tree.build_dir].save(str(o.object) for o in tree.objects)
    objects.sort(key=lambda e: (e["source"], e["target"], e["object"]))
    errors = [{"object": e["object"], "source": e["source"], "error": e["error"], "target": e["target"]}
              for e in objects if "error" in e]
    document: dict[str, Any] = {
        "version": mapformat.VERSION,
        "commit": mapformat.resolve_commit(options.commit, root),
        "cuda": next((t.cuda_version for t in trees if t.cuda_version), ""),
        "generated_at": mapformat.generated_at(),
        "build_dirs": [mapformat.spell(f, root, folders) for f in folders],
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
        "digests": map_digests.SCHEME,  # objects' device and host code digests (select --base-map)
    }
    toolchain = _toolchain(trees)
    if toolchain:
        document["toolchain"] = toolchain
    configs = sorted({t.config for t in trees if t.config})
    if configs:
        document["config"] = ", ".join(configs)
    notes = [n for t in trees for n in t.notes]
    if mirrors.orphans:
        orphans = sorted(relative(p) for p in mirrors.orphans)
        notes.append(f"{len(orphans)} files under mirrored copies have no original and are kept as compiled: "
                     + ", ".join(orphans[:10]) + (" ..." if len(orphans) > 10 else ""))
    generated = sum(1 for o in objects if o.get("configure_generated"))
    if tracked is None:  # select uses no such map as evidence (tracked-files-unknown)
        document["tracked_files_unknown"] = True
        notes.append("git cannot list the source root's files: which sources the configure wrote cannot be "
                     "known, so this map clears no test")
    dirty = _dirty(root, document["commit"], objects)
    if dirty:  # select uses no such map as evidence for its commit (map-dirty)
        document["dirty"] = dirty
        notes.append(f"the tree that was built is not commit {document['commit']}: {len(dirty)} of the mapped "
                     f"files differ from it (e.g. {dirty[0]}), so this map clears no test recorded at it")
    if generated:
        notes.append(f"{generated} objects are compiled from files the configure wrote (untracked, made by no "
                     "build rule): their inputs are unknown, so every change reaches them")
    scanned = sum(1 for t in trees for o in t.objects if o.scanned)
    if scanned:
        notes.append(f"{scanned} objects have deps from CMake's own scan (depend.internal, Unix Makefiles): "
                     "project headers only")
    # What the configure read (CMakeLists, configure_file inputs): a change to one may change any object.
    document["configure_inputs"] = sorted({r for t in trees for p in t.configure_inputs
                                           if not os.path.isabs(r := relative(p)) and not r.startswith("$")})
    if trees and all(t.artefacts is not None for t in trees):  # which files a test's process loads hold which code
        artefacts: dict[str, set[str]] = {}
        for tree in trees:
            for target, names in (tree.artefacts or {}).items():
                artefacts.setdefault(target, set()).update(names)
        document["artefacts"] = {t: sorted(n) for t, n in sorted(artefacts.items())}
    elif trees:
        notes.append("no file-API reply: which library or executable each target is linked into is unknown, "
                     "so a host change reaches the tests that launched its object's kernels (select --host-scope)")
    links = {t: sorted(d) for tree in trees for t, d in tree.links.items()}
    if links:  # which targets each target depends on (links, object libraries): --whole-target follows them
        document["target_links"] = dict(sorted(links.items()))
    # Only a tree with third-party folders spells a path $DEP/<name>/...; each distinct spelling is looked at once.
    spelled = {p for ps in dep_spellings.values() for p in ps} | {o["source"] for o in objects} if deps else set()
    used = {d.split("/", 2)[1] for d in spelled if d.startswith(mapformat.DEP_MARKER + "/")}
    if used:  # FetchContent dependencies: spelled $DEP/<name>/..., wherever they were fetched to
        document["third_party"] = sorted(used)
    unmapped = [c for t in trees for c in t.unmapped]
    if unmapped:  # code compiled by custom commands: no map can know its kernels
        document["unmapped_targets"] = [
            {"target": c.target, "outputs": [relative(o) for o in c.outputs],
             "sources": [relative(s) for s in c.sources[:50]],
             "reason": "a custom command compiles these sources outside CMake's compile model: "
                       "its kernels are in no map"} for c in unmapped]
        notes.append(f"{len(unmapped)} custom commands compile code outside CMake's compile model "
                     f"({', '.join(sorted({c.target or c.outputs[0] for c in unmapped}))}): their kernels are in "
                     "no map, so a test that launches one is never skipped (unknown-kernel)")
    if options.exclude_targets:
        document["excluded_targets"] = sorted(options.exclude_targets)
    if options.targets:  # a subset: a consumer may clear tests only with maps that cover every target
        document["only_targets"] = sorted(options.targets)
        document["all_targets"] = sorted({t for tree in trees for t in tree.compiling_targets})
        left_out = sorted(set(document["all_targets"]) - set(options.targets))
        if left_out:
            notes.append(f"covers {len(options.targets)} of {len(document['all_targets'])} targets (--targets); "
                         f"leaves out {', '.join(left_out[:20])}{' ...' if len(left_out) > 20 else ''}: alone it "
                         "clears no test (select: map-subset)")
    if notes:
        document["notes"] = notes
    mapformat.fail_closed(document, _why_no_evidence(objects, errors))
    if problems:
        document["incomplete"] = True
        document["objects"] = []
        document["reason"] = "; ".join(problems)
    elif not trees or not objects:
        document["reason"] = "no compiled objects in the build tree"
    seconds = 0.0 if mapformat.source_date_epoch() is not None else round(time.perf_counter() - started, 2)
    document["stats"] = {**mapformat.stats(len(objects), document["objects"], errors, options.backend),
                         "seconds": seconds}
    inputs = [p for t in trees for p in t.inputs]
    deps = sorted({d for t in trees for o in t.objects for d in o.deps})
    return Extraction(document, inputs, deps)


def _dirty(root: Path, commit: str, objects: list[dict[str, Any]]) -> list[str]:
    """The map's sources and project deps whose content in the built tree is not ``commit``'s."""
    changed = changed_since(root, commit) if objects else None
    if not changed:
        return []
    mapped = {p for o in objects for p in (o["source"], *o["deps"]) if not p.startswith(("/", "$"))}
    return sorted(changed & mapped)


def _toolchain(trees: list[BuildTree]) -> dict[str, str]:
    """Language -> its compiler and version; several trees' different ones joined (a map of both)."""
    found: dict[str, set[str]] = {}
    for tree in trees:
        for language, compiler in tree.toolchain.items():
            found.setdefault(language, set()).add(compiler)
    return {language: ", ".join(sorted(c)) for language, c in sorted(found.items())}


def _compiled_from(obj: TreeObject) -> list[str]:
    """The files ``obj`` was compiled from besides its deps: its source, and a unity file's sources."""
    source = [os.path.normpath(obj.source)] if obj.source is not None else []
    return [*source, *(os.path.normpath(u) for u in obj.unity_sources)]


def _why_no_evidence(objects: list[dict[str, Any]], errors: list[dict[str, Any]]) -> str | None:
    """The reason of a map that failed closed: what is not built, per target, then what is unreadable."""
    if not errors:
        return None
    totals = Counter(o["target"] for o in objects)
    unbuilt = [e for e in errors if e["error"] == NOT_BUILT]
    others = [e for e in errors if e["error"] != NOT_BUILT]
    parts = []
    if unbuilt:
        per_target = Counter(e["target"] for e in unbuilt)
        listed = ", ".join(f"{t}: {n} of {totals[t]}" for t, n in sorted(per_target.items(), key=lambda i: (-i[1], i[0])))
        parts.append(f"{len(unbuilt)} of {len(objects)} objects are not built ({listed}), e.g. {unbuilt[0]['object']}")
    if others:
        first = others[0]
        parts.append(f"{len(others)} object{'' if len(others) == 1 else 's'} unreadable, e.g. {first['object']}: "
                     f"{first['error']}")
    return "; ".join(parts)


def _backend(objects: list[dict[str, Any]]) -> str:
    """``cuda``, ``rocm`` (all AMD), or ``mixed`` (both), from the architectures the objects hold."""
    archs = {a for e in objects for a in e.get("archs", [])}
    amd = {a for a in archs if a.startswith(("gfx", "amdgcn"))}
    if amd and amd == archs:
        return "rocm"
    return "mixed" if amd else "cuda"
