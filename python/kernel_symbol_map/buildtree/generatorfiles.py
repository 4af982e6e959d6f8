"""Targets, objects and sources from what the generator already wrote: read-only, no configure.

Used when a build tree has no current file-API reply (a retrofit, or CMake
older than 3.27 before its next configure). The answer is as exact as the
reply's, because it is what the build itself runs:

* **Ninja** (and Ninja Multi-Config, one ``build-<config>.ninja`` per
  configuration): each object's ``build`` statement names its rule,
  ``<LANG>_COMPILER__<target>[_unscanned]_<config>`` (the target encoded as
  CMake's ``EncodeRuleName`` does: every character but ``[A-Za-z0-9_-]`` as
  ``.xx``; ``_unscanned`` on CMake 3.28+ for sources that need no module
  scan), its source as the explicit input, and
  ``cmake_object_order_depends_target_<target>`` as an order-only input.
* **Unix Makefiles**: ``CMakeFiles/Makefile2`` maps each target's name to
  its object directory (``<name>: <dir>/rule``), which
  ``CMakeFiles/TargetDirectories.txt`` lists; each directory's
  ``DependInfo.cmake`` gives (source, object, depfile), and its
  ``build.make`` says which language compiled each object.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import regex

from ..errors import BuildTreeError
from . import compdb, dependinfo, ninjafile
from .compdb import absolute

ORDER_DEPENDS = "cmake_object_order_depends_target_"
UNSCANNED = "_unscanned"
_COMPILE_RULE = regex.compile(r"^([A-Za-z0-9]+)_COMPILER__([A-Za-z0-9_.-]+)$")
_RULE_ESCAPE = regex.compile(r"\.([0-9a-fA-F]{2})")
_MAKE_TARGET = regex.compile(r"^([^\s:#][^\s:]*): (\S+)/rule$", regex.M)
_MAKE_BUILDING = regex.compile(r'"Building (\w+) object (.+?)"')
_MAKE_ALL = regex.compile(r"^(\S+)/all:(?: (\S+)/all)?$", regex.M)
_MAKE_COMPILE = regex.compile(r'"Building \w+ object (.+?)"\n\t(?:cd (\S+) && )?(.+)$', regex.M)
_MAKE_VARIABLE = regex.compile(r"^(\w+) = (.*)$", regex.M)
_MAKE_REFERENCE = regex.compile(r"\$\((\w+)\)")
_MAKE_DEPENDS = regex.compile(r"set\(CMAKE_MAKEFILE_DEPENDS\s+(.*?)\)", regex.S)
_QUOTED = regex.compile(r'"((?:[^"\\]|\\.)*)"')
RERUN = "RERUN_CMAKE"


@dataclass(frozen=True)
class Generated:
    """What the generator's files say: every compiled object, and which targets each target depends on."""

    objects: list[GeneratedObject]
    dependencies: dict[str, set[str]]  # target -> targets built before it (link and object-library deps)


@dataclass(frozen=True)
class GeneratedObject:
    target: str
    object: Path
    source: Path
    language: str
    depfile: Path | None = None
    scanned: Path | None = None


def decode_rule_name(encoded: str) -> str:
    """Undo CMake's ``EncodeRuleName``: ``.xx`` is the character with hex code ``xx``."""
    return _RULE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), encoded)


def manifest(build_dir: Path, config: str, multi_config: bool) -> Path:
    """``build.ninja``, or Ninja Multi-Config's ``build-<config>.ninja``."""
    return build_dir / (f"build-{config}.ninja" if multi_config else "build.ninja")


def from_ninja(build_dir: Path, config: str, multi_config: bool = False) -> Generated:
    """Every object the manifest of ``config`` compiles, with its target, source and language.

    Ninja Multi-Config spells the order-only target with the configuration in
    capitals (``cmake_object_order_depends_target_ops_RELEASE``). Target
    dependencies are the order-only inputs of those phony targets.
    """
    path = manifest(build_dir, config, multi_config)
    suffix = f"_{config}"
    order_suffix = f"_{config.upper()}" if multi_config else ""
    found = []
    dependencies: dict[str, set[str]] = {}
    for st in ninjafile.read(path, build_dir):
        if st.rule == "phony" and len(st.outputs) == 1 and st.outputs[0].startswith(ORDER_DEPENDS):
            target = st.outputs[0][len(ORDER_DEPENDS):].removesuffix(order_suffix)
            dependencies[target] = {o[len(ORDER_DEPENDS):].removesuffix(order_suffix)
                                    for o in st.order_only if o.startswith(ORDER_DEPENDS)}
            continue
        m = _COMPILE_RULE.match(st.rule)
        if not m or not m.group(2).endswith(suffix) or not st.inputs:
            continue
        language, encoded = m.group(1), m.group(2)[: len(m.group(2)) - len(suffix)]
        decoded = decode_rule_name(encoded)
        named = [o[len(ORDER_DEPENDS):].removesuffix(order_suffix) for o in st.order_only if o.startswith(ORDER_DEPENDS)]
        target = named[0] if len(named) == 1 else decoded.removesuffix(UNSCANNED)
        if decoded not in (target, target + UNSCANNED):
            raise BuildTreeError(f"{path}: {st.outputs[0]} is built by rule {st.rule} but ordered after target {target}")
        found.append(GeneratedObject(target, absolute(st.outputs[0], build_dir), absolute(st.inputs[0], build_dir),
                                     language))
    if not found:
        raise BuildTreeError(f"{path}: no compile statements for configuration {config!r}")
    return Generated(found, dependencies)


def built_configurations(build_dir: Path, configs: list[str]) -> list[str]:
    """The configurations of a Ninja Multi-Config tree whose objects exist on disk."""
    built = []
    for config in configs:
        try:
            objects = from_ninja(build_dir, config, multi_config=True).objects
        except BuildTreeError:
            continue
        if any(o.object.exists() for o in objects):
            built.append(config)
    return built


def make_target_names(makefile2: str, build_dir: Path) -> dict[Path, str]:
    """Target directory (``<build>/CMakeFiles/<target>.dir``) -> target name, from ``Makefile2``'s text."""
    return {absolute(d, build_dir): n for n, d in _MAKE_TARGET.findall(makefile2)}


def from_makefiles(build_dir: Path) -> Generated:
    """Every object the Makefiles compile, with its target, source, language and depfile.

    Target dependencies are ``Makefile2``'s ``<dir>/all: <other dir>/all`` lines.
    """
    makefile2 = build_dir / "CMakeFiles" / "Makefile2"
    listed = build_dir / "CMakeFiles" / "TargetDirectories.txt"
    try:
        text = makefile2.read_text(errors="replace")
        names = make_target_names(text, build_dir)
        directories = [Path(line) for line in listed.read_text(errors="replace").splitlines() if line.strip()]
    except OSError as e:
        raise BuildTreeError(f"{e.filename}: {e.strerror or e}") from None
    dependencies: dict[str, set[str]] = {}
    for before, after in _MAKE_ALL.findall(text):
        target = names.get(absolute(before, build_dir))
        if target is not None:
            dependencies.setdefault(target, set())
            if after and (other := names.get(absolute(after, build_dir))) is not None:
                dependencies[target].add(other)
    found = []
    for directory in directories:
        info = directory / "DependInfo.cmake"
        if not info.is_file():
            continue  # a utility target: nothing compiled
        objects = dependinfo.read_dependinfo(info, build_dir)
        if not objects:
            continue
        name = names.get(directory)
        if name is None:
            raise BuildTreeError(f"{makefile2}: no target is built in {directory}")
        languages = _make_languages(directory / "build.make", build_dir)
        for o in objects:
            found.append(GeneratedObject(name, o.object, o.source, languages.get(o.object, ""), o.depfile, o.scanned))
    if not found:
        raise BuildTreeError(f"{listed}: no target compiles any object")
    return Generated(found, dependencies)


def _make_languages(build_make: Path, build_dir: Path) -> dict[Path, str]:
    try:
        text = build_make.read_text(errors="replace")
    except OSError as e:
        raise BuildTreeError(f"{build_make}: {e.strerror or e}") from None
    return {absolute(obj, build_dir): lang for lang, obj in _MAKE_BUILDING.findall(text)}


def configure_inputs(build_dir: Path, generator: str) -> tuple[Path, ...]:
    """Every file the project's configure read: a change to one re-runs CMake, and may change anything.

    Ninja: the implicit inputs of ``build build.ninja: RERUN_CMAKE``. Unix
    Makefiles: ``CMAKE_MAKEFILE_DEPENDS`` in ``CMakeFiles/Makefile.cmake``.
    ``configure_file`` inputs are among them: their build-tree copies are what
    objects include, so the originals must never look clearable.
    """
    if "Ninja" in generator:
        path = build_dir / "build.ninja"
        statement = ninjafile.find(path, RERUN, build_dir)  # Multi-Config: in an included common.ninja
        if statement is None:
            raise BuildTreeError(f"{path}: no RERUN_CMAKE statement, in it or the files it includes")
        names = statement.inputs + statement.implicit
    elif generator == "Unix Makefiles":
        path = build_dir / "CMakeFiles" / "Makefile.cmake"
        found = _MAKE_DEPENDS.search(_read(path))
        if found is None:
            raise BuildTreeError(f"{path}: no CMAKE_MAKEFILE_DEPENDS")
        names = tuple(m.group(1) for m in _QUOTED.finditer(found.group(1)))
    else:
        return ()
    return tuple(absolute(n, build_dir) for n in names)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None


def make_commands(build_dir: Path) -> dict[Path, compdb.Command]:
    """Object -> compile command, from the Makefiles: each ``build.make`` recipe with ``flags.make``'s
    variables (``$(HIP_FLAGS)``...) expanded; for trees without compile_commands.json."""
    listed = build_dir / "CMakeFiles" / "TargetDirectories.txt"
    found: dict[Path, compdb.Command] = {}
    for line in _read(listed).splitlines():
        directory = Path(line.strip())
        build_make = directory / "build.make"
        if not line.strip() or not build_make.is_file():
            continue
        flags = directory / "flags.make"
        variables = dict(_MAKE_VARIABLE.findall(_read(flags))) if flags.is_file() else {}
        for obj, cwd, recipe in _MAKE_COMPILE.findall(_read(build_make)):
            expanded = _MAKE_REFERENCE.sub(lambda m: variables.get(m.group(1), ""), recipe)
            try:
                arguments = tuple(shlex.split(expanded))
            except ValueError as e:
                raise BuildTreeError(f"{build_make}: the command for {obj} does not parse ({e})") from None
            found[absolute(obj, build_dir)] = compdb.Command(Path(cwd) if cwd else build_dir, arguments)
    return found
