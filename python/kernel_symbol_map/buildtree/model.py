"""The build-tree model: every object of every target, with its source and header deps.

Everything comes from what CMake and the build tools wrote: targets and
sources from the file-API reply (or the CMake package's object lists inside a
running build), exact (source, object) pairs from the compile database or
DependInfo.cmake, and deps from ninja's deps log or the compilers' depfiles.
Nothing is found by scanning for ``*.o``, so stale objects on disk never count.
An object whose deps cannot be trusted carries an ``error``; the map writer
then fails closed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import regex

from .._graph import reachable
from .._statefile import memoised
from .._version import __version__
from ..errors import BuildTreeError
from . import buildrules, compdb, dependinfo, devicedeps, fileapi, generatorfiles, ninjafile, pairing, thirdparty, unity
from .makedeps import read_cmake_scan, read_depfile
from .ninjadeps import NinjaDeps, stale

# The toolkit's version first: with clang as the CUDA compiler, the compiler's own version is clang's.
_CUDA_VERSIONS = (regex.compile(r'set\(CMAKE_CUDA_COMPILER_TOOLKIT_VERSION "([^"]+)"\)'),
                  regex.compile(r'set\(CMAKE_CUDA_COMPILER_VERSION "([^"]+)"\)'))
_COMPILER_FIELDS = regex.compile(r'set\(CMAKE_(C|CXX|CUDA|HIP)_COMPILER_(ID|VERSION) "([^"]*)"\)')
_LANGUAGE_BY_SUFFIX = {".cu": "CUDA", ".hip": "HIP", ".c": "C"}
NOT_BUILT = "not built: the object file does not exist"
PCH_SUFFIXES = (".gch", ".pch")


@dataclass(frozen=True)
class TreeObject:
    target: str
    object: Path
    source: Path | None  # None for a device-link object
    language: str
    deps: tuple[str, ...] = ()  # absolute, normalised
    error: str | None = None
    device_link: bool = False
    scanned: bool = False  # deps from CMake's own scan (project headers only), not the compiler
    device_side: bool = False  # deps include the device side's, preprocessed per architecture (clang)
    device_method: str = ""  # how the device side's came: devicedeps.SCAN_DEPS or devicedeps.PREPROCESSOR
    unity_sources: tuple[str, ...] = ()  # a unity object's real sources (its source is CMake's unity file)
    rule_inputs: tuple[str, ...] = ()  # what build rules made its generated source or headers from (in deps too)

    @property
    def precompiled_header(self) -> bool:
        """CMake's precompiled header (``cmake_pch.hxx.gch``, clang's ``.pch``): host code, never device code.

        Its deps are the headers it precompiles, which the objects using it do
        not list again; so it stays in the map as a host object, unread.
        """
        return self.object.suffix in PCH_SUFFIXES


@dataclass(frozen=True)
class BuildTree:
    build_dir: Path
    source_root: Path
    generator: str
    cmake_version: str
    cuda_version: str
    objects: tuple[TreeObject, ...]
    pairing: str  # where (source, object, target) came from
    deps_from: str  # "ninja_deps" or "depfiles"
    notes: tuple[str, ...] = field(default=())
    inputs: tuple[str, ...] = ()  # every file the model was read from: a change to any means re-run
    compiling_targets: tuple[str, ...] = ()  # every target with objects, before any --targets filter
    config: str = ""  # CMAKE_BUILD_TYPE, or the Ninja Multi-Config configuration mapped
    configure_inputs: tuple[str, ...] = ()  # every file the configure read (CMakeLists, configure_file inputs)
    links: dict[str, tuple[str, ...]] = field(default_factory=dict)  # target -> compiling targets it depends on
    third_party: dict[str, Path] = field(default_factory=dict)  # FetchContent name -> its sources' folder
    unmapped: tuple[thirdparty.CustomCompile, ...] = ()  # custom commands that compile outside the model
    rule_outputs: frozenset[str] = frozenset()  # every file a build rule makes (absolute, normalised)
    toolchain: dict[str, str] = field(default_factory=dict)  # language -> "<compiler id> <version>"
    # Target -> the file names of the linked artefacts its objects end up in (a library's or executable's
    # own; a static or object library's, those of what links it); None: not known (no file-API reply).
    artefacts: dict[str, tuple[str, ...]] | None = None


@dataclass
class _Pair:
    source: Path
    object: Path
    depfile: Path | None = None
    scanned: Path | None = None  # CMake's depend.internal, when the compiler writes no depfile


def _language(path: Path) -> str:
    return _LANGUAGE_BY_SUFFIX.get(path.suffix, "CXX")


def load(
    build_dir: Path,
    *,
    inside_build: bool = False,
    reconfigure: bool = False,
    targets: list[str] | None = None,
    exclude: list[str] | None = None,
    config: str | None = None,
    log: Callable[[str], None] = lambda _m: None,
    use_cache: bool = False,
) -> BuildTree:
    """The model of ``build_dir``, read without writing to it (but for the file-API query).

    Exact sources, in order: a current file-API reply; the CMake package's
    object lists (inside a build); the generator's own files (``build.ninja``,
    the Makefiles). Only ``reconfigure`` re-runs the project's configure.
    Ninja Multi-Config maps one configuration: ``config``, else the one built.
    ``exclude`` names targets the build leaves out (``EXCLUDE_FROM_ALL``).
    """
    build_dir = build_dir.resolve()
    cache = fileapi.read_cmake_cache(build_dir)
    generator = cache.get("CMAKE_GENERATOR", "")
    notes: list[str] = []
    multi = generator == MULTI_CONFIG
    config = _configuration(build_dir, cache, config) if multi else cache.get("CMAKE_BUILD_TYPE", "")

    reply = _reply(build_dir, inside_build, reconfigure, log, notes, config if multi else None)
    listed = None if multi else pairing.read_package_lists(build_dir)
    source_root = reply.source_root if reply else Path(cache.get("CMAKE_HOME_DIRECTORY", build_dir))
    languages: dict[Path, str] = {}
    members: dict[str, list[_Pair | tuple[Path, str]]] = defaultdict(list)  # target -> pairs, or (object, error)
    if multi:  # the configuration's own manifest is exact; the reply, when there is one, must agree with it
        generated, how = _read_generated(build_dir, generator, cache, config)
        pairs, dependencies = _generated(generated, members, languages), generated.dependencies
        if reply is not None:
            _agree(reply, members, source_root, how)
            how += ", checked against the file-API reply"
    elif reply is None and listed is None:
        generated, how = _read_generated(build_dir, generator, cache)
        pairs, dependencies = _generated(generated, members, languages), generated.dependencies
        notes.append(f"no current file-API reply: targets and objects read from {how}")
    else:
        pairs, groups, how = _pairs(build_dir, generator, cache, use_cache)
        how = _assign(pairs, groups, how, reply, listed, members)
        dependencies = reply.dependencies() if reply else _read_generated(build_dir, generator, cache)[0].dependencies
    if reply is not None:
        for t in reply.targets:
            languages.update(pairing.compiled_sources(t, source_root))

    known = set(members) | ({t.name for t in reply.targets} if reply else set())
    if exclude:  # targets the build never builds (EXCLUDE_FROM_ALL): not part of the map, nor of "every target"
        members = {k: v for k, v in members.items() if k not in exclude}
    compiling = tuple(sorted(members))
    links = {t: tuple(sorted(dependencies.get(t, set()) & set(compiling) - {t})) for t in compiling}
    if targets:
        unknown = sorted(set(targets) - known)
        if unknown:
            raise BuildTreeError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        members = {k: v for k, v in members.items() if k in targets}

    stamps = _Stamps()
    deps = _deps_reader(build_dir, generator, stamps)
    objects: list[TreeObject] = []
    built_by: dict[str, list[TreeObject]] = {}
    for target, items in sorted(members.items()):
        built: list[TreeObject] = built_by.setdefault(target, [])
        for item in items:
            if isinstance(item, tuple):
                objects.append(TreeObject(target, item[0], None, "", error=item[1]))
                continue
            found, error = deps(item)
            language = languages.get(item.source) or _language(item.source)
            batched: tuple[str, ...] = ()
            if unity.is_unity_source(item.source, build_dir):
                try:
                    batched = unity.constituents(item.source)
                except BuildTreeError as e:
                    error = error or str(e)
            built.append(TreeObject(target, item.object, item.source, language, found, error,
                                    scanned=item.depfile is None and item.scanned is not None,
                                    unity_sources=batched))
    if _clang_languages(cache):
        built_by = _with_device_side(build_dir, generator, cache, built_by, stamps, use_cache, log)
    manifest = generatorfiles.manifest(build_dir, config, multi)
    statements = ninjafile.read(manifest, build_dir) if "Ninja" in generator else None  # one parse for both
    configured = tuple(d for d in [cache.get("CMAKE_CACHEFILE_DIR", "")] if d)  # as the compilers spell it
    rules = buildrules.read(build_dir, generator, manifest, statements, configured)
    built_by = _with_rule_inputs(built_by, rules, stamps)
    objects += [o for target in sorted(built_by) for o in built_by[target]]
    objects += _device_links(build_dir, generator, built_by, links, stamps, config if multi else None)

    compiler = (reply.compilers.get("CUDA") or {}) if reply else {}
    cuda = _cuda_version_from_cache(build_dir, cache) or str(compiler.get("version", ""))
    inputs = _inputs(build_dir, objects, pairs)
    return BuildTree(
        build_dir=build_dir,
        source_root=source_root,
        generator=generator,
        cmake_version=reply.cmake_version if reply else _cmake_version_from_cache(cache),
        cuda_version=".".join(cuda.split(".")[:2]),  # "13.0", as the seed wrote
        objects=tuple(sorted(objects, key=lambda o: (o.target, str(o.object)))),
        pairing=how,
        deps_from=_deps_from(generator, objects),
        rule_outputs=rules.outputs,
        notes=tuple(notes),
        inputs=inputs,
        compiling_targets=compiling,
        configure_inputs=tuple(str(p) for p in generatorfiles.configure_inputs(build_dir, generator)),
        links={t: d for t, d in links.items() if d},
        third_party=thirdparty.fetched(build_dir, cache, source_root),
        unmapped=tuple(thirdparty.custom_compiles(build_dir, generator, manifest, statements)),
        config=config,
        toolchain=_toolchain(build_dir, cache),
        artefacts=_artefacts(reply, compiling) if reply is not None else None,
    )


LINKED = frozenset({"SHARED_LIBRARY", "MODULE_LIBRARY", "EXECUTABLE"})  # what a process loads


def _artefacts(reply: fileapi.Reply, compiling: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each compiling target's linked artefacts, by file name: a shared or module library's or an
    executable's own (its artifacts and name on disk); a static or object library's, those of every target
    that depends on it, transitively (dependencies are the file API's: links, object libraries and manual
    ones, so never too few)."""
    own = {t.name: {os.path.basename(a.path) for a in t.artifacts if not a.path.endswith((".lib", ".a"))}
           | ({t.nameOnDisk} if t.nameOnDisk else set()) for t in reply.targets if t.type in LINKED}
    dependents: dict[str, set[str]] = defaultdict(set)
    for target, deps in reply.dependencies().items():
        for d in deps:
            dependents[d].add(target)
    found = {}
    for target in compiling:
        users = {target} if target in own else reachable(dependents, {target})
        found[target] = tuple(sorted({name for u in users for name in own.get(u, ())}))
    return found


def _toolchain(build_dir: Path, cache: dict[str, str]) -> dict[str, str]:
    """Each compiled language's compiler and version, as the configure found them (CMake<LANG>Compiler.cmake):
    a build by another compiler gives other device code for the same sources."""
    found: dict[str, dict[str, str]] = {}
    folder = build_dir / "CMakeFiles" / _cmake_version_from_cache(cache)
    for language in ("C", "CXX", "CUDA", "HIP"):
        try:
            text = (folder / f"CMake{language}Compiler.cmake").read_text(errors="replace")
        except OSError:
            continue
        for lang, key, value in _COMPILER_FIELDS.findall(text):
            if lang == language:
                found.setdefault(language, {})[key] = value
    return {lang: f"{f.get('ID', '')} {f.get('VERSION', '')}".strip() for lang, f in sorted(found.items())}


def _clang_languages(cache: dict[str, str]) -> set[str]:
    """The languages clang compiles for a GPU here: HIP, CUDA with clang as its compiler, C++ with hipcc."""
    found = {"HIP"} if cache.get("CMAKE_HIP_COMPILER") else set()
    if "clang" in Path(cache.get("CMAKE_CUDA_COMPILER", "")).name or cache.get("CMAKE_CUDA_COMPILER_ID") == "Clang":
        found.add("CUDA")
    if "hipcc" in Path(cache.get("CMAKE_CXX_COMPILER", "")).name:
        found.add("CXX")
    return found


def _with_device_side(
    build_dir: Path, generator: str, cache: dict[str, str], built_by: dict[str, list[TreeObject]], stamps: _Stamps,
    use_cache: bool, log: Callable[[str], None],
) -> dict[str, list[TreeObject]]:
    """Objects clang compiled for a GPU, with their device side's includes added (see :mod:`.devicedeps`).

    CMake's own scan (HIP under Makefiles) reads every ``#include`` line
    whatever the preprocessor would take, so scanned objects need no run.
    """
    languages = _clang_languages(cache)
    candidates = [o for objs in built_by.values() for o in objs
                  if not o.error and not o.scanned and not o.precompiled_header and o.language in languages]
    if not candidates:
        return built_by
    ninja = (cache.get("CMAKE_MAKE_PROGRAM") or "ninja") if "Ninja" in generator else None
    commands = compdb.read_commands(build_dir, ninja)
    if not commands and generator == "Unix Makefiles":
        commands = generatorfiles.make_commands(build_dir)
    chosen = {o.object: commands[o.object] for o in candidates
              if o.object in commands and devicedeps.is_clang_offload(commands[o.object])}
    missing = {o.object for o in candidates if o.object not in commands}
    found = devicedeps.device_deps(build_dir, chosen, __version__, use_cache, log=log) if chosen else {}
    updated: dict[str, list[TreeObject]] = {}
    for target, objs in built_by.items():
        updated[target] = []
        for o in objs:
            if o.object in missing:
                o = replace(o, error="device-side includes unknown: no compile command for this object")
            elif o.object in found:
                extra, error, method = found[o.object]
                merged = tuple(sorted(set(o.deps) | set(extra)))
                error = error or next((f"device-side include {d} does not exist" for d in extra if stamps[d] is None),
                                      None) or out_of_date(o.object, extra, stamps)
                o = replace(o, deps=merged, error=error, device_side=True, device_method=method)
            updated[target].append(o)
    return updated


def _deps_from(generator: str, objects: list[TreeObject]) -> str:
    found = "ninja_deps" if "Ninja" in generator else "depfiles"
    if any(o.scanned for o in objects):
        found += "+cmake-scan"
    if any(o.device_side and o.device_method != devicedeps.SCAN_DEPS for o in objects):
        found += "+device-preprocessor"
    if any(o.device_side and o.device_method == devicedeps.SCAN_DEPS for o in objects):
        found += "+device-scan-deps"
    if any(o.rule_inputs for o in objects):
        found += "+build-rules"
    return found


def _with_rule_inputs(
    built_by: dict[str, list[TreeObject]], rules: buildrules.Rules, stamps: _Stamps
) -> dict[str, list[TreeObject]]:
    """Objects compiled from a generated source or header, with what the build rules made it from.

    A compiler's depfile names the generated file, never the generator's
    inputs (``csrc/ops.def``): those are added, transitively through generated
    generators, and checked as deps are (missing, or newer than the object).
    An object a generator itself depends on (a tool the build compiles first)
    brings its own deps.
    """
    deps_of = {str(o.object): o.deps for objs in built_by.values() for o in objs}
    compiled = set(deps_of)  # the objects themselves, which a walk may pass through
    outputs = rules.outputs
    updated: dict[str, list[TreeObject]] = {}
    for target, objs in built_by.items():
        updated[target] = []
        for o in objs:
            generated = set(outputs.intersection(o.deps))  # at C speed: an object has a thousand deps
            if o.source is not None and str(o.source) in outputs:
                generated.add(str(o.source))
            if generated and not o.precompiled_header:
                leaves, made = rules.upstream(generated)
                inputs = leaves | {d for m in made for d in deps_of.get(m, ())}
                inputs -= compiled  # an object reached on the way stands for its deps, added above
                merged = tuple(sorted(set(o.deps) | inputs | (made - compiled)))
                error = o.error or next((f"build rule input {d} does not exist" for d in sorted(inputs)
                                         if stamps[d] is None), None) or out_of_date(o.object, inputs, stamps)
                o = replace(o, deps=merged, error=error, rule_inputs=tuple(sorted(inputs)))
            updated[target].append(o)
    return updated


def _inputs(build_dir: Path, objects: list[TreeObject], pairs: list[_Pair]) -> tuple[str, ...]:
    """The files this model depends on (missing ones too: their appearing is a change)."""
    api = build_dir / ".cmake" / "api" / "v1"
    fixed = [
        build_dir / "CMakeCache.txt", api / "reply", fileapi.query_file(build_dir),
        build_dir / "compile_commands.json", build_dir / "build.ninja", build_dir / ".ninja_deps",
        build_dir / "CMakeFiles" / "Makefile.cmake", build_dir / pairing.PACKAGE_LISTS,
    ]
    lists = sorted((build_dir / pairing.PACKAGE_LISTS).glob("*.json"))
    groups = {pairing.group_dir(o.object) for o in objects}
    per_group = [g / name for g in groups for name in ("DependInfo.cmake", "build.make")]
    depfiles = [p.depfile for p in pairs if p.depfile is not None]
    depfiles += sorted({p.scanned for p in pairs if p.depfile is None and p.scanned is not None})
    return tuple(str(p) for p in [*fixed, *lists, *per_group, *depfiles, *(o.object for o in objects)])


def _cmake_version_from_cache(cache: dict[str, str]) -> str:
    parts = [cache.get(f"CMAKE_CACHE_{p}_VERSION", "") for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts) if all(parts) else ""


def _cuda_version_from_cache(build_dir: Path, cache: dict[str, str]) -> str:
    """The CUDA toolkit's version from CMakeFiles/<version>/CMakeCUDACompiler.cmake (clang's or nvcc's)."""
    found = build_dir / "CMakeFiles" / _cmake_version_from_cache(cache) / "CMakeCUDACompiler.cmake"
    try:
        text = found.read_text(errors="replace")
    except OSError:
        return ""
    for pattern in _CUDA_VERSIONS:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return ""


MULTI_CONFIG = "Ninja Multi-Config"


def _configuration(build_dir: Path, cache: dict[str, str], asked: str | None) -> str:
    """The configuration of a Ninja Multi-Config tree to map: the one asked for, else the one built."""
    configs = [c for c in cache.get("CMAKE_CONFIGURATION_TYPES", "").split(";") if c]
    if asked:
        if asked not in configs:
            raise BuildTreeError(f"{build_dir}: no configuration {asked!r}; it has {', '.join(configs)}")
        return asked
    built = generatorfiles.built_configurations(build_dir, configs)
    if len(built) == 1:
        return built[0]
    if not built:
        raise BuildTreeError(f"{build_dir}: no configuration of {', '.join(configs)} is built")
    raise BuildTreeError(f"{build_dir}: configurations {', '.join(built)} are all built; choose one with --config")


def _agree(reply: fileapi.Reply, members: dict[str, list[_Pair | tuple[Path, str]]], source_root: Path,
           how: str) -> None:
    """The reply's configuration compiles, per target, exactly the sources the manifest does."""
    compiled = {t.name: set(pairing.compiled_sources(t, source_root)) for t in reply.targets}
    for target, items in members.items():
        sources = {p.source for p in items if isinstance(p, _Pair)}
        if compiled.get(target) != sources:
            raise BuildTreeError(f"{how} and the file-API reply disagree on what target {target} compiles")


def _assign(
    pairs: list[_Pair], groups: dict[Path, set[Path]], how: str, reply: fileapi.Reply | None,
    listed: dict[str, pairing.ListedTarget] | None, members: dict[str, list[_Pair | tuple[Path, str]]],
) -> str:
    """Put each pair in its target's ``members``: by the package's object lists, else by the reply."""
    if listed is not None:
        by_object = {p.object: p for p in pairs}
        how = f"object-lists+{how}"
        for t in listed.values():
            for obj in t.objects:
                pair = by_object.get(obj)
                members[t.name].append(pair or (obj, f"listed for {t.name} but not in the {how} pairs"))
        return how
    assert reply is not None
    pairs_of: dict[Path, list[_Pair]] = defaultdict(list)
    for p in pairs:
        pairs_of[pairing.group_dir(p.object)].append(p)
    for group, target in pairing.match_groups(groups, reply).items():
        group_pairs = pairs_of[group]
        if isinstance(target, str):
            members[f"<unknown {group.name}>"].extend((p.object, target) for p in group_pairs)
        else:
            members[target.name].extend(group_pairs)
    return how


def _reply(
    build_dir: Path, inside_build: bool, reconfigure: bool, log: Callable[[str], None], notes: list[str],
    config: str | None = None,
) -> fileapi.Reply | None:
    """A current reply, or None. Only ``reconfigure`` runs CMake, and never inside a running build."""
    if fileapi.reply_is_current(build_dir):
        return fileapi.read_reply(build_dir, config)
    if reconfigure and not inside_build:
        log(f"WARNING re-running the project's configure in {build_dir} (--reconfigure): it may change "
            "the build's flags and make the next build recompile")
        command = fileapi.refresh(build_dir)
        notes.append(f"re-ran {' '.join(command)} (--reconfigure) to answer the file-API query")
        return fileapi.read_reply(build_dir, config)
    try:  # the one write into the build tree: the next configure answers it
        fileapi.write_query(build_dir)
    except OSError as e:
        notes.append(f"could not write the file-API query ({e.strerror or e}): a read-only build tree")
    return None


def _read_generated(
    build_dir: Path, generator: str, cache: dict[str, str], config: str | None = None
) -> tuple[generatorfiles.Generated, str]:
    """What the generator's own files say, and which files those were."""
    how_to_fix = ("configure once with the package (find_package(KernelSymbolMap) and kernel_symbol_map(), or "
                  "CMAKE_PROJECT_TOP_LEVEL_INCLUDES), or run build --reconfigure")
    try:
        if generator == MULTI_CONFIG and config is not None:
            return generatorfiles.from_ninja(build_dir, config, multi_config=True), f"build-{config}.ninja"
        if "Ninja" in generator and "Multi-Config" not in generator:
            return generatorfiles.from_ninja(build_dir, cache.get("CMAKE_BUILD_TYPE", "")), "build.ninja"
        if generator == "Unix Makefiles":
            return generatorfiles.from_makefiles(build_dir), "Makefile2+DependInfo"
        raise BuildTreeError(f"generator {generator!r} has no read-only model")
    except BuildTreeError as e:
        raise BuildTreeError(f"{build_dir}: no current file-API reply, and {e}; {how_to_fix}") from None


def _generated(
    generated: generatorfiles.Generated, members: dict[str, list[_Pair | tuple[Path, str]]],
    languages: dict[Path, str],
) -> list[_Pair]:
    """Fill ``members`` and ``languages`` from the generator's own files; the pairs."""
    pairs = []
    for g in generated.objects:
        pair = _Pair(g.source, g.object, g.depfile, g.scanned)
        pairs.append(pair)
        members[g.target].append(pair)
        if g.language:
            languages[g.source] = g.language
    return pairs


def _pairs(
    build_dir: Path, generator: str, cache: dict[str, str], use_cache: bool
) -> tuple[list[_Pair], dict[Path, set[Path]], str]:
    """(pairs, group dir -> its sources, where they came from)."""
    if "Ninja" in generator:
        entries = compdb.from_compile_commands(build_dir)
        how = "compile_commands"
        if entries is None:
            ninja = cache.get("CMAKE_MAKE_PROGRAM") or "ninja"
            # `ninja -t compdb` costs a process; its answer changes only with build.ninja.
            raw = memoised(build_dir, "compdb.json", __version__, build_dir / "build.ninja",
                           lambda: [[str(e.source), str(e.object)] for e in compdb.from_ninja(build_dir, ninja)],
                           enabled=use_cache)
            entries = [compdb.CompileEntry(Path(s), Path(o)) for s, o in raw]
            how = "ninja-compdb"
        pairs = [_Pair(e.source, e.object) for e in entries]
        groups: dict[Path, set[Path]] = defaultdict(set)
        for p in pairs:
            groups[pairing.group_dir(p.object)].add(p.source)
        return pairs, dict(groups), how
    if "Makefiles" in generator:
        pairs, groups = [], {}
        for info in dependinfo.dependinfo_files(build_dir):
            found = dependinfo.read_dependinfo(info, build_dir)
            groups[pairing.group_dir(info)] = {m.source for m in found}
            pairs += [_Pair(m.source, m.object, m.depfile, m.scanned) for m in found]
        return pairs, groups, "DependInfo"
    raise BuildTreeError(f"{build_dir}: generator {generator!r} is not supported (use Ninja or Unix Makefiles)")


class _Stamps(dict[str, "int | None"]):
    """mtime_ns of each distinct path (None: missing), stat'ed once per model.

    Deps repeat across objects (every object includes the same system headers),
    so each is checked once; plain strings, not pathlib, because this is the hot
    path on a 500-object tree. One per :func:`load`: a later load sees the disk anew.
    """

    def __missing__(self, path: str) -> int | None:
        try:
            value: int | None = os.stat(path).st_mtime_ns
        except OSError:
            value = None
        self[path] = value
        return value


def _same_file(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def _deps_reader(build_dir: Path, generator: str, stamps: _Stamps) -> Callable[[_Pair], tuple[tuple[str, ...], str | None]]:
    """A function giving an object's deps, or why they cannot be trusted."""
    if "Ninja" in generator:
        log_error, log = None, None
        try:
            log = NinjaDeps(build_dir / ".ninja_deps", base=build_dir)
        except BuildTreeError as e:
            log_error = str(e)

        def ninja(pair: _Pair) -> tuple[tuple[str, ...], str | None]:
            if stamps[str(pair.object)] is None:
                return (), NOT_BUILT
            if log is None:
                return (), log_error
            rel = os.path.relpath(pair.object, build_dir)
            record = log.lookup(rel) or log.lookup(str(pair.object))
            if record is None:
                return (), "no deps record in .ninja_deps (object not built by this ninja?)"
            return _checked(pair, record.deps, stale(record, pair.object), stamps)

        return ninja

    def depfile(pair: _Pair) -> tuple[tuple[str, ...], str | None]:
        if stamps[str(pair.object)] is None:
            return (), NOT_BUILT
        rel = os.path.relpath(pair.object, build_dir)
        try:
            if pair.depfile is not None:
                listed = read_depfile(pair.depfile, rel)
            elif pair.scanned is not None:
                listed = read_cmake_scan(pair.scanned, rel)
            else:
                return (), "no depfile and no CMake dependency scan for this object"
        except BuildTreeError as e:
            return (), str(e)
        base = str(build_dir)
        return _checked(pair, tuple(os.path.normpath(os.path.join(base, d)) for d in listed), None, stamps)

    return depfile


def _checked(pair: _Pair, deps: tuple[str, ...], why: str | None, stamps: _Stamps) -> tuple[tuple[str, ...], str | None]:
    if why:
        return deps, why
    source = str(pair.source)
    if source not in deps and not any(_same_file(d, source) for d in deps):
        return deps, f"deps record does not list the object's own source {pair.source}"
    # A dependency that is gone means the object is out of date, or the record is damaged
    # (ninja's log has no checksum over paths): either way, not evidence.
    missing = next((d for d in deps if stamps[d] is None), None)
    if missing is not None:
        return deps, f"deps record lists {missing}, which does not exist"
    return deps, out_of_date(pair.object, deps, stamps)


def out_of_date(obj: Path, deps: Iterable[str], stamps: _Stamps) -> str | None:
    """Why ``obj`` is older than what it was compiled from (a checkout with no rebuild), or None.

    The build tool would recompile it: its kernels are those of files that are
    no longer there, and the map must not name them under today's commit.
    """
    built = stamps[str(obj)]
    if built is None:
        return NOT_BUILT
    newest = max(deps, key=lambda d: stamps[d] or 0, default=None)
    if newest is not None and (stamps[newest] or 0) > built:
        return f"out of date: {newest} is newer than the object (rebuild before mapping)"
    return None


def _device_links(
    build_dir: Path, generator: str, built_by: dict[str, list[TreeObject]], links: dict[str, tuple[str, ...]],
    stamps: _Stamps, config: str | None = None,
) -> list[TreeObject]:
    """Each target's ``cmake_device_link.o``, whose deps are those of every CUDA object it may link.

    That is the target's own CUDA objects and those of every target it depends
    on, transitively: a shared library with host sources only still
    device-links the relocatable device code of the static libraries it links
    (``CUDA_RESOLVE_DEVICE_SYMBOLS``). Counting every CUDA object of those
    targets, relocatable or not, can only widen the deps.
    """
    group_of = {t: {pairing.group_dir(o.object) for o in objs} for t, objs in built_by.items() if objs}
    manifest = generatorfiles.manifest(build_dir, config or "", config is not None)
    found = pairing.device_link_objects(build_dir, generator, set().union(*group_of.values()) if group_of else set(),
                                        manifest)
    out = []
    for target, groups in group_of.items():
        linked = [o for t in (target, *closure(links, target)) for o in built_by.get(t, ()) if o.language == "CUDA"]
        for obj in sorted(p for p in found if pairing.group_dir(p) in groups):
            errors = [f"{o.object.name}: {o.error}" for o in linked if o.error]
            deps = tuple(sorted({d for o in linked for d in o.deps} | {str(o.source) for o in linked if o.source}))
            error = "; ".join(errors) if errors else out_of_date(obj, deps, stamps)
            out.append(TreeObject(target, obj, None, "CUDA", deps, error, device_link=True))
    return out


def closure(links: dict[str, tuple[str, ...]], target: str) -> list[str]:
    """Every target ``target`` depends on, directly or not, in a stable order."""
    seen: dict[str, None] = {}
    todo = list(links.get(target, ()))
    while todo:
        t = todo.pop(0)
        if t not in seen and t != target:
            seen[t] = None
            todo += links.get(t, ())
    return list(seen)
