"""Sources the package compiles at run time: decided by source, in output mode too.

A package may compile CUDA sources when it runs (FlashInfer's JIT,
``torch.utils.cpp_extension.load``), often the build's own sources and
headers with a macro of its own (``-DOPS_JIT``). A change inside
``#ifdef OPS_JIT`` changes nothing the build emits, so output mode alone
would skip the tests of the kernels the run-time compile makes; and those
kernels are named as the build's, or are in no map at all. So a changed file
the package compiles at run time is also decided by source, in both modes:
what else decides it (the builds' outputs, the map, the rules, or running
everything for a file no map knows) still does, and it adds:

* the tests that launched kernels of the objects that include it (the map's
  reach, as in source mode);
* the tests that launched a kernel no map knows (what a run-time compile
  makes), a JIT'd Python function's aside (:mod:`.jitkernels`), declared
  external or not;
* the tests whose records name it among the files compiled for them at run
  time (``jit_sources``, recorded from ``torch.utils.cpp_extension.load``).

A file is one the package compiles at run time when:

* a ``jit-sources`` glob names it (``[tool.kernel-symbol-map]``, or
  ``--jit-sources``; git's globs, from the top level);
* it is a C, C++ or CUDA source or header inside a Python package (a folder
  with ``__init__.py``): package data, which a wheel ships to be compiled;
* a record names it as compiled at run time, or it is an input (in any map)
  of an object compiled from such a file: the run-time compile includes what
  the build's does.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern  # git's globs, as the rules'

from .jitkernels import JitKernels
from ..maps.kernelmap import KernelMap
from .perfile import Verdict
from .pythonfiles import PythonTree
from .recordings import Recording

BY = "run-time"  # how a Verdict of this module is named
SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inc", ".inl", ".hip")


def decide(changed: Sequence[str], kmaps: Sequence[KernelMap], jit: JitKernels, globs: Sequence[str],
           tree: PythonTree | None, canonical: Callable[[str], str] | None = None) -> dict[str, Verdict]:
    """For each changed file the package compiles at run time, the tests that change reaches as one (to add to
    whatever else decides the file); ``kmaps`` are of the recordings' commit."""
    recordings = jit.recordings
    compiled = frozenset().union(*(r.jit_sources for r in recordings))
    declared = pathspec.PathSpec.from_lines(GitIgnoreSpecPattern, globs) if globs else None
    inputs = _inputs_of(kmaps, compiled)
    found: dict[str, Verdict] = {}
    # Found once for every file: the tests that launched kernels no map knows, with those kernels, and the
    # recordings that compiled something at run time (few, in a suite of thousands).
    unknown: list[tuple[Recording, list[str]]] | None = None
    compilers = [r for r in recordings if r.jit_sources]
    for path in changed:
        spellings = _spellings(path, tree, canonical)
        why = _why(spellings, declared, compiled, inputs, tree)
        if why is None:
            continue
        if unknown is None:
            known = frozenset().union(*(m.symbols for m in kmaps))
            unknown = [(r, sorted(k for k in r.kernels if k not in known)) for r in recordings
                       if not known.issuperset(r.kernels)]
        text = _text(path, tree)
        reached = frozenset().union(*(r.symbols for m in kmaps for r in m.reach(path, canonical=canonical)))
        tests: dict[str, str] = {r.test: f"it compiled {path} at run time" for r in compilers
                                 if spellings & r.jit_sources}
        if reached:
            for r in recordings:
                if r.test not in tests and (hit := sorted(reached.intersection(r.kernels))):
                    tests[r.test] = f"it launched {hit[0]}, of an object compiled from or including {path}"
        for r, kernels in unknown:
            # a kernel a JIT'd Python function is named after is that function's, unless the file names it
            if r.test not in tests and (made := [k for k in kernels if jit.owner(r, k) is None or k in text]):
                tests[r.test] = f"it launched {made[0]}, a kernel no map knows: a run-time compile of {path} " \
                    "may have made it"
        found[path] = Verdict(path, BY, f"the package compiles it at run time ({why}): {len(tests)} tests", tests)
    return found


def _text(path: str, tree: PythonTree | None) -> str:
    """The file's text now and at the recordings' commit, as far as they can be read."""
    rel = tree.key(path) if tree is not None else None
    if tree is None or rel is None:
        return ""
    return b"\n".join(t for t in (tree.read(rel), tree.base_source(rel)) if t).decode("utf-8", "replace")


def _spellings(path: str, tree: PythonTree | None, canonical: Callable[[str], str] | None) -> frozenset[str]:
    """``path`` as given (normalised), relative to the top level, and as the file it really is."""
    found = {posixpath.normpath(path)}
    if tree is not None and (rel := tree.key(path)) is not None:
        found.add(rel)
    if canonical is not None:
        found.add(canonical(path))
    return frozenset(found)


def _inputs_of(kmaps: Sequence[KernelMap], compiled: frozenset[str]) -> dict[str, str]:
    """The inputs of the objects compiled from a file compiled at run time too: input -> that file."""
    found: dict[str, str] = {}
    if compiled:
        for m in kmaps:
            for o in m.objects:
                if o["source"] in compiled:
                    for dep in o.get("deps", ()):
                        found.setdefault(dep, o["source"])
    return found


def _why(spellings: frozenset[str], declared: pathspec.PathSpec | None, compiled: frozenset[str],
         inputs: dict[str, str], tree: PythonTree | None) -> str | None:
    """Why the file so spelled is compiled at run time; None when nothing says it is."""
    if any(s.endswith(".py") for s in spellings):
        return None  # Python: its coverage decides it (a JIT's Python is the recorder's, see .jit)
    for spelled in sorted(spellings):
        if declared is not None and declared.match_file(spelled):
            return "jit-sources names it"
        if spelled in compiled:
            return "a recorded test compiled it"
        if spelled in inputs:
            return f"{inputs[spelled]}, which a recorded test compiled at run time, includes it"
        if spelled.endswith(SUFFIXES) and tree is not None and _in_package(spelled, tree):
            return "a source inside a Python package, which its wheel ships"
    return None


def _in_package(rel: str, tree: PythonTree) -> bool:
    if tree.top is None or rel.startswith(("/", "../")):
        return False
    folder = posixpath.dirname(rel)
    while folder:
        if (tree.top / folder / "__init__.py").is_file():
            return True
        folder = posixpath.dirname(folder)
    return False
