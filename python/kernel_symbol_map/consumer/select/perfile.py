"""Each changed file on its own: the first decider that knows it says which tests it reaches.

The map decides compiled sources, headers and configure inputs (in
:mod:`.selection`, by sources or by what the builds emitted). A file the map
does not know, in order:

1. per-test Python coverage, for ``.py`` files (:mod:`.pythonfiles`);
2. a test file: the tests defined in it, when no other file imports it;
3. the user's rules (:mod:`.rules`), which may name no test at all;

and a file none of them knows makes every test run, named in the summary. A
file the map knows but cannot clear (compiled into a host-only object, one
whose kernels are unknown, a configure input) is left to the rules, and
otherwise runs everything, as before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..maps.kernelmap import Reach
from .pythonfiles import FileDecision, PythonDecider, PythonTree, is_test_file, tests_of_file
from .recordings import Recording
from .rules import Patterns, StaticRules

# Paths a build writes: inside the repository (and not ignored), every change lists them.
_BUILT_DIRS = ("wheels", "dist", "build", "_skbuild", "wheelhouse", "CMakeFiles", ".kernel_symbol_map")
_BUILT_SUFFIXES = (".whl", ".o", ".obj", ".so", ".a", ".cubin", ".fatbin", ".ninja_deps", ".ninja_log")


def looks_built(path: str) -> str:
    """Why ``path`` looks like a build output ("" when it does not)."""
    parts = path.split("/")
    folder = next((p for p in parts[:-1] if p in _BUILT_DIRS or p.endswith(".egg-info")), None)
    if folder is not None:
        return f"it is under {folder}/, a build's output folder"
    if path.endswith(_BUILT_SUFFIXES):
        return f"a {posixpath.splitext(path)[1]} file is a build's output"
    return ""


@dataclass(frozen=True)
class Verdict:
    """How one changed file was decided: ``by`` names the decider ("everything" when none knew it)."""

    path: str
    by: str  # "map", "emitted", "python", "test-file", "rules", "everything"
    why: str
    tests: dict[str, str] = field(default_factory=dict)  # the tests it makes run -> why
    code: str = ""  # for "everything": the reason code (file-not-in-map, host-file, ...)


@dataclass
class PerFile:
    """The deciders after the map, for one selection."""

    recordings: Sequence[Recording]
    tests: Sequence[str]
    rules: StaticRules | None
    tree: PythonTree | None
    canonical: Callable[[str], str] | None = None
    configure_inputs: Sequence[str] = ()  # the maps': the CMake files that may name build scripts

    def __post_init__(self) -> None:
        self.python = PythonDecider(self.recordings, self.tree, self.configure_inputs) \
            if self.tree is not None else None

    def decide(self, reach: Reach, code: str) -> Verdict:
        """A file the map did not clear; ``code`` is what running everything for it is called."""
        path = reach.path
        notes = [reach.explain()]
        if reach.status == "not-in-map":
            found = self._python(path)
            if found.known:
                return Verdict(path, "python", found.why, found.tests)
            notes.append(found.why)
            found = self._test_file(path)
            if found.known:
                return Verdict(path, "test-file", found.why, found.tests)
            if found.why:
                notes.append(found.why)
        if self.rules is not None:
            patterns = self.rules.for_file(path, self.canonical)
            if patterns is not None:
                chosen = Patterns(patterns).chosen(self.tests)
                why = f"the rules name {', '.join(patterns)}" if patterns else "the rules name no test for it"
                return Verdict(path, "rules", why, {t: f"the rules name it for {path}" for t in chosen})
            notes.append("no rule matches it")
        built = looks_built(path)
        if built:
            notes.append(f"it looks like a build output ({built}): build outside the repository, or ignore it")
        return Verdict(path, "everything", "; ".join(n for n in notes if n), code=code)

    def _python(self, path: str) -> FileDecision:
        if self.python is None:
            return FileDecision(path, False, "" if not path.endswith(".py") else
                                "no checkout to read changed Python files from")
        return self.python.decide(path)

    def _test_file(self, path: str) -> FileDecision:
        if not is_test_file(path):
            return FileDecision(path, False, "")
        if self.tree is None:
            return FileDecision(path, False, "a test file, and no checkout to see what imports it")
        rel = self.tree.key(path)
        module = self.tree.module(rel) if rel is not None and self.tree.top is not None else None
        if module is None:
            return FileDecision(path, False, "a test file outside the git checkout")
        users = list(self.tree.importers(rel, module))
        if users:
            return FileDecision(path, False, f"a test file that {users[0]} imports: its code may serve other tests")
        return tests_of_file(rel, self.recordings)
