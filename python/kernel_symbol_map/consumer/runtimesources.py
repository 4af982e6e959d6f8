"""Sources the package compiles at run time: decided by source, in output mode too.

A package may compile CUDA sources when it runs (FlashInfer's JIT,
``torch.utils.cpp_extension.load``), often the build's own sources and
headers with a macro of its own (``-DOPS_JIT``). A change inside
``#ifdef OPS_JIT`` changes nothing the build emits, so output mode alone
would skip the tests of the kernels the run-time compile makes; and those
kernels are named as the build's, or are in no map at all. So a changed file
the package compiles at run time is decided by source, in both modes. It
runs:

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
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from .jitkernels import JitKernels
from .kernelmap import KernelMap
from .perfile import Verdict
from .pythonfiles import PythonTree

BY = "run-time"  # how a Verdict of this module is named
SUFFIXES = (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inc", ".inl", ".hip")


def decide(changed: Sequence[str], kmaps: Sequence[KernelMap], jit: JitKernels, globs: Sequence[str],
           tree: PythonTree | None, canonical: Callable[[str], str] | None = None) -> dict[str, Verdict]:
    """A verdict for each changed file the package compiles at run time; ``kmaps`` are of the recordings' commit."""
    recordings = jit.recordings
    compiled = frozenset().union(*(r.jit_sources for r in recordings))
    declared = pathspec.PathSpec.from_lines(GitIgnoreSpecPattern, globs)  # as the rules' (.rules) if globs else None
    inputs = _inputs_of(kmaps, compiled)
    found: dict[str, Verdict] = {}
    known: frozenset[str] | None = None
    for path in changed:
        spellings = _spellings(path, tree, canonical)
        why = _why(spellings, declared, compiled, inputs, tree)
        if why is None:
            continue
        if known is None:
            known = frozenset().union(*(m.symbols for m in kmaps))
        reached = frozenset().union(*(r.symbols for m in kmaps for r in m.reach(path, canonical=canonical)))
        tests: dict[str, str] = {}
        for r in recordings:
            if spellings & r.jit_sources:
                tests[r.test] = f"it compiled {path} at run time"
            elif hit := sorted(r.kernels & reached):
                tests[r.test] = f"it launched {hit[0]}, of an object compiled from or including {path}"
            elif unknown := sorted(k for k in r.kernels - known if jit.owner(r, k) is None):
                tests[r.test] = f"it launched {unknown[0]}, a kernel no map knows: a run-time compile of {path} " \
                    "may have made it"
        found[path] = Verdict(path, BY, f"the package compiles it at run time ({why}): decided by source, "
                              f"{len(tests)} tests", tests)
    return found


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
