"""What a build takes from elsewhere: FetchContent dependencies, and code compiled outside CMake's model.

**FetchContent sources** (CUTLASS, flash-attention, FlashMLA in vLLM) live
wherever the build put them: ``<build>/_deps/<name>-src``, a
``FETCHCONTENT_BASE_DIR`` such as vLLM's ``.deps`` in the source root, or a
folder an environment variable named (``VLLM_CUTLASS_SRC_DIR``). A map spells
them ``$DEP/<name>/...`` so that it does not depend on where they were, and
says they are third-party. Every dependency the configure declared leaves
``FETCHCONTENT_UPDATES_DISCONNECTED_<NAME>`` in the cache; its folder is the
user's override (``FETCHCONTENT_SOURCE_DIR_<NAME>``), the ``SOURCE_DIR`` its
populate sub-build was given, or the default ``<base>/<name>-src``.

**Custom commands that compile** (vLLM's DeepGEMM extension: a Python build
run by ``add_custom_command``) make objects that no compile rule, file-API
reply or deps log knows: their kernels can be in no map. They are found as
custom commands whose inputs include C, C++, CUDA or HIP sources, and named
in the map's ``unmapped_targets``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import regex

from ..errors import BuildTreeError
from . import generatorfiles, ninjafile
from .compdb import absolute

_SOURCE_DIR = regex.compile(r'^\s*SOURCE_DIR\s+"([^"]+)"', regex.M)
_COMPILED = (".c", ".cc", ".cpp", ".cxx", ".cu", ".hip")
_MAKE_RULE = regex.compile(r"^(\S+): (\S+)$", regex.M)
_OWN_OUTPUTS = (".o", ".obj", ".i", ".s", ".gch", ".pch")  # CMake's own compile rules, in the model already


def fetched(build_dir: Path, cache: dict[str, str], source_root: Path) -> dict[str, Path]:
    """FetchContent name (lower case, as its folders are named) -> the folder its sources are in.

    A dependency inside the source root that git tracks (a submodule, a vendored
    copy) is the project's own as far as a diff can tell: it keeps its relative
    paths, so that an edit there reaches what it compiles into.
    """
    prefix = "FETCHCONTENT_UPDATES_DISCONNECTED_"
    names = sorted(k[len(prefix):] for k in cache if k.startswith(prefix))
    base = Path(cache.get("FETCHCONTENT_BASE_DIR") or build_dir / "_deps")
    found = {}
    for name in names:
        lower = name.lower()
        override = cache.get(f"FETCHCONTENT_SOURCE_DIR_{name}", "")
        candidates = [Path(override)] if override else []
        subbuild = base / f"{lower}-subbuild" / "CMakeLists.txt"
        try:
            declared = _SOURCE_DIR.search(subbuild.read_text(errors="replace"))
        except OSError:
            declared = None
        if declared:
            candidates.append(Path(declared.group(1)))
        candidates.append(base / f"{lower}-src")
        folder = next((absolute(str(c), build_dir) for c in candidates if c.is_dir()), None)
        if folder is not None and not _tracked(source_root, folder):
            found[lower] = folder
    return found


def _tracked(source_root: Path, folder: Path) -> bool:
    """Whether git tracks anything in ``folder``, a folder inside the source root (else: False).

    Both are compared as the files they really are: a project configured through a symlink, or a
    dependency folder named through one, is still inside (or outside) the same repository.
    """
    root, real = os.path.realpath(source_root), os.path.realpath(folder)
    if not real.startswith(root + os.sep):
        return False
    try:
        proc = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", os.path.relpath(real, root)],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and bool(proc.stdout)


@dataclass(frozen=True)
class CustomCompile:
    """A custom command that compiles sources: what it makes is outside every map."""

    target: str  # the utility target that runs it ("" when no target names it)
    outputs: tuple[str, ...]
    sources: tuple[str, ...]  # the C, C++, CUDA or HIP files among its inputs


def custom_compiles(build_dir: Path, generator: str, manifest: Path | None = None,
                    statements: list[ninjafile.BuildStatement] | None = None) -> list[CustomCompile]:
    """Every custom command whose inputs include sources to compile, with the target that runs it
    (``statements``: the manifest's, when the caller has read them already)."""
    if "Ninja" in generator:
        return _from_ninja(statements if statements is not None else
                           ninjafile.read(manifest or build_dir / "build.ninja", build_dir), build_dir)
    if generator == "Unix Makefiles":
        return _from_makefiles(build_dir)
    return []


def _from_ninja(statements: list[ninjafile.BuildStatement], build_dir: Path) -> list[CustomCompile]:
    commands = [st for st in statements if st.rule == "CUSTOM_COMMAND"
                and any(i.endswith(_COMPILED) for i in (*st.inputs, *st.implicit))]
    if not commands:
        return []
    owner: dict[str, str] = {}  # custom command output -> the utility target that depends on it
    for st in statements:
        if st.rule == "phony" and len(st.outputs) == 1 and "/" not in st.outputs[0]:
            for i in (*st.inputs, *st.implicit):
                owner.setdefault(i, st.outputs[0])
    found = []
    for st in commands:
        outputs = tuple(str(absolute(o, build_dir)) for o in st.outputs if not o.startswith("$"))
        target = next((owner[o] for o in st.outputs if o in owner), "")
        sources = tuple(sorted(str(absolute(i, build_dir)) for i in (*st.inputs, *st.implicit) if i.endswith(_COMPILED)))
        found.append(CustomCompile(target, outputs, sources))
    return found


def _from_makefiles(build_dir: Path) -> list[CustomCompile]:
    makefile2 = build_dir / "CMakeFiles" / "Makefile2"
    try:
        names = generatorfiles.make_target_names(makefile2.read_text(errors="replace"), build_dir)
    except OSError as e:
        raise BuildTreeError(f"{makefile2}: {e.strerror or e}") from None
    found = []
    for directory, name in sorted(names.items()):
        build_make = directory / "build.make"
        try:
            text = build_make.read_text(errors="replace")
        except OSError:
            continue
        rules: dict[str, list[str]] = {}
        for output, source in _MAKE_RULE.findall(text):
            rules.setdefault(output, []).append(source)
        for output, inputs in rules.items():
            sources = tuple(sorted(str(absolute(i, build_dir)) for i in inputs if i.endswith(_COMPILED)))
            if sources and not output.endswith(_OWN_OUTPUTS) and "CMakeFiles/" not in output:
                found.append(CustomCompile(name, (str(absolute(output, build_dir)),), sources))
    return found
