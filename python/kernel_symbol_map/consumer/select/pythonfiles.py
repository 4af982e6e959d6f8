"""Changed Python files, decided by each test's recorded Python coverage (and, for tests, by their file).

A test's record names the digests of the blocks of the project's Python code it
executed, at the recordings' commit (:mod:`..mapformat.pyblocks`). A changed
``.py`` file reaches a test when a block the test executed is no longer the
same in the checkout: changed, renamed, or gone. Import-time code ran before any
test and counts for every test (a module is imported once, and any later test
may read what its import did), except a test module's own, which counts for its
tests (the recorder sees pytest import it for them).

Coverage decides a file only where it saw: never ``conftest.py`` (its hooks
and fixtures serve a whole folder), a build script (``setup.py``), a file some
recording ran from an installed copy, or a file whose recordings have no Python
coverage at all. A test whose own record cannot say (not measured, of another
block scheme, a copy) runs.

A file that did not exist at the recordings' commit was executed by no test, so
what reaches it is what imports it: it is decided by the tests that ran the
files that import or name it (changed or not). That holds only when nothing can
load it without naming it, so a new module is left to the next decider when it
is a top-level module (it may shadow an installed one of the same name), a new
package, or when any file of the project imports by computed names
(``importlib.import_module(name)``, ``pkgutil.iter_modules``, ...).
"""

from __future__ import annotations

import ast
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import regex

from ...mapformat import pyblocks
from . import changes
from .recordings import Recording

# Files coverage never decides: what they do happens outside every test's scope.
NOT_BY_COVERAGE = {
    "conftest.py": "pytest loads it for every test below its folder; its hooks and fixtures serve them all",
    "setup.py": "the build runs it (compile flags, extensions): no test's coverage sees that",
    "sitecustomize.py": "every interpreter runs it at start",
    "usercustomize.py": "every interpreter runs it at start",
}
_DYNAMIC = regex.compile(r"\b(?:import_module|__import__)\s*\(\s*(?![\"'][\w.]+[\"']\s*[,)])"
                         r"|\b(?:iter_modules|walk_packages|spec_from_file_location|run_path|run_module)\b")


def is_test_file(path: str) -> bool:
    """pytest's default test files: ``test_*.py`` and ``*_test.py``."""
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


@dataclass(frozen=True)
class FileDecision:
    """What one decider says of one changed file: ``known`` False leaves it to the next decider."""

    path: str
    known: bool
    why: str
    tests: dict[str, str] = field(default_factory=dict)  # test -> why it runs


class PythonTree:
    """The checkout's Python files, as ``select`` sees them; paths relative to the git top level."""

    def __init__(self, source_root: Path, commit: str) -> None:
        self.source_root = Path(os.path.abspath(source_root))
        self.commit = commit
        try:
            self.top: Path | None = changes.toplevel(self.source_root)
        except changes.ChangeError:
            self.top = None

    def key(self, path: str) -> str | None:
        """``path`` (as select was given it) relative to the top level, or None outside it."""
        if self.top is None:
            return None
        absolute = path if os.path.isabs(path) else os.path.join(self.source_root, path)
        rel = os.path.relpath(os.path.normpath(absolute), self.top)
        return None if rel.startswith("..") else Path(rel).as_posix()

    def read(self, rel: str) -> bytes | None:
        assert self.top is not None
        try:
            return (self.top / rel).read_bytes()
        except OSError:
            return None

    def is_link(self, rel: str) -> bool:
        """``rel`` is a symbolic link in the checkout, or was one at the recordings' commit. (Where git cannot say,
        :meth:`existed` cannot either, and the file is left to the next decider there.)"""
        assert self.top is not None
        return os.path.islink(self.top / rel) or bool(self.commit and changes.is_link_at(self.top, self.commit, rel))

    def existed(self, rel: str) -> bool | None:
        return changes.exists_at(self.top, self.commit, rel) if self.top is not None and self.commit else None

    @cached_property
    def files(self) -> list[str]:
        if self.top is None:
            return []
        try:
            return changes.python_files(self.top)
        except changes.ChangeError:
            return []

    def text(self, rel: str) -> str:
        """``rel``'s text in the checkout, read once: the scans below read every Python file, some twice."""
        texts = self.__dict__.setdefault("_texts", {})
        if rel not in texts:
            data = self.read(rel)
            texts[rel] = data.decode("utf-8", "replace") if data is not None else ""
        return texts[rel]

    def module(self, rel: str) -> str | None:
        """The dotted name ``rel`` imports as, through the packages (folders with ``__init__.py``) above it."""
        modules = self.__dict__.setdefault("_modules", {})
        if rel not in modules:
            modules[rel] = self._module(rel)
        return modules[rel]

    def package(self, rel: str) -> str:
        """The package ``rel``'s relative imports start from: itself for an ``__init__.py``, else the one
        holding it ("" at the top)."""
        module = self.module(rel) or ""
        return module if posixpath.basename(rel) == "__init__.py" else module.rpartition(".")[0]

    def _module(self, rel: str) -> str | None:
        assert self.top is not None
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts.pop()
        folder = posixpath.dirname(rel)
        depth = 0
        while folder and (self.top / folder / "__init__.py").is_file():
            depth += 1
            folder = posixpath.dirname(folder)
        kept = parts[len(parts) - depth - (0 if rel.endswith("/__init__.py") else 1):]
        return ".".join(kept) if kept else None

    def build_inputs(self, configure_inputs: Sequence[str]) -> dict[str, str]:
        """The checkout's Python files the build runs: what ``setup.py`` imports or names, the scripts the CMake
        files name (``execute_process``, custom commands), and what those import, transitively: file -> how."""
        cached = self.__dict__.get("_build_inputs")
        if cached is not None:
            return cached
        found: dict[str, str] = {}
        if self.top is not None:
            queue = [(rel, f"{rel} is a build script") for rel in self.files if posixpath.basename(rel) == "setup.py"]
            mentioned = regex.compile(r"[\w./${}@+-]*\.py\b")
            for spelled in configure_inputs:
                cmake = Path(spelled) if os.path.isabs(spelled) else self.source_root / spelled
                try:
                    text = cmake.read_text(errors="replace")
                except OSError:
                    continue
                for m in mentioned.finditer(text):
                    tail = m.group().rpartition("}")[2].lstrip("/")
                    line = text.count("\n", 0, m.start()) + 1
                    queue += [(rel, f"{spelled}:{line} names it") for rel in self.files
                              if tail and (rel == tail or rel.endswith("/" + tail))]
            while queue:
                rel, how = queue.pop()
                if rel in found:
                    continue
                found[rel] = how
                queue += [(other, f"{rel} imports or names it") for other in self._uses(rel) if other not in found]
        self.__dict__["_build_inputs"] = found
        return found

    def _uses(self, rel: str) -> list[str]:
        """The checkout's Python files that ``rel`` imports or names (a path in a string)."""
        text = self.text(rel)
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
        names, paths = set(), set()
        package = self.package(rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, package)
                names |= {base, *(f"{base}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".py"):
                paths.add(node.value.lstrip("./"))
        return [f for f in self.files if (m := self.module(f)) and any(_names(n, m) for n in names if n)
                or any(f == p or f.endswith("/" + p) for p in paths if p)]

    def dynamic_import(self, skip: str) -> str | None:
        """The first ``file:line`` that imports a module by a computed name, or None."""
        for rel in self.files:
            if rel == skip:
                continue
            text = self.text(rel)
            m = _DYNAMIC.search(text)
            if m:
                return f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
        return None

    def base_source(self, rel: str) -> bytes | None:
        return changes.show(self.top, self.commit, rel) if self.top is not None and self.commit else None

    def importers(self, rel: str, module: str) -> dict[str, list[int]]:
        """Files that import ``module`` (or a name in it), or name it or its path in a string: file -> the lines
        that do (0: anywhere, for a file that does not parse)."""
        last = module.rpartition(".")[2]
        found = {}
        for other in self.files:
            if other == rel:
                continue
            text = self.text(other)
            if last not in text:
                continue
            lines = _imports(text, self.package(other), module, rel)
            if lines:
                found[other] = lines
        return found


def _imports(text: str, package: str, module: str, rel: str) -> list[int]:
    """The lines of ``text`` (whose relative imports start from ``package``) that import or name ``module``; [0]
    when it does not parse (it may, anywhere)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [0]
    parent = module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(_names(a.name, module) for a in node.names):
                found.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if any(_names(f"{base}.{a.name}" if base else a.name, module) for a in node.names) or \
                    _names(base, module) or (_names(base, parent) and any(a.name == "*" for a in node.names)):
                found.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _names(node.value, module) or node.value == rel or node.value.endswith("/" + rel):
                found.append(node.lineno)
    return sorted(set(found))


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module ``from ... import`` names, relative imports resolved against the importer's ``package``."""
    if not node.level:
        return node.module or ""
    up = package.split(".") if package else []
    return ".".join([*up[: max(len(up) - (node.level - 1), 0)], *([node.module] if node.module else [])])


def _names(name: str, module: str) -> bool:
    """``name`` (a dotted import name) is ``module`` or inside it, under any prefix: the package above the
    first ``__init__.py``-less folder (a namespace package) is not part of what :meth:`PythonTree.module`
    computes, so ``ns.pkg.new`` names ``pkg.new``."""
    return bool(module) and (f".{module}." in f".{name}." or f".{name}".endswith(f".{module}"))


class PythonDecider:
    """Decides changed ``.py`` files from the recordings' Python coverage."""

    def __init__(self, recordings: Sequence[Recording], tree: PythonTree, configure_inputs: Sequence[str] = ()) -> None:
        self.recordings = list(recordings)
        self.tree = tree
        self.configure_inputs = tuple(configure_inputs)  # the maps' (their CMake files name build scripts)
        self.measured = [r for r in self.recordings if r.python is not None]

    def decide(self, path: str) -> FileDecision:
        if not path.endswith(".py"):
            return FileDecision(path, False, "not a Python file")
        name = posixpath.basename(path)
        if name in NOT_BY_COVERAGE:
            return FileDecision(path, False, f"{name}: {NOT_BY_COVERAGE[name]}")
        if not self.measured:
            return FileDecision(path, False, "no recording has Python coverage (pytest --kernel-record records it)")
        rel = self.tree.key(path)
        if rel is None:
            return FileDecision(path, False, "outside the git checkout the recordings' paths are relative to")
        if self.tree.is_link(rel):
            return FileDecision(path, False, "a symbolic link (now or at the recordings' commit): the file it "
                                "names is what runs, and that may change without it")
        if all(rel in r.python_copies for r in self.measured):
            return FileDecision(path, False, "every recording ran it from an installed copy, not from the checkout: "
                                "the recordings never saw this file run")
        built = self.tree.build_inputs(self.configure_inputs).get(rel)
        if built is not None:
            return FileDecision(path, False, f"the build runs it ({built}): what it changes is compiled, not tested")
        if any(r.python is not None and rel in r.python for r in self.measured):
            return self._executed(path, rel)
        existed = self.tree.existed(rel)
        if existed is None:
            return FileDecision(path, False, "no test executed it, and git cannot say whether it is new "
                                f"(the recordings' commit {self.tree.commit or '(unknown)'})")
        if existed:  # coverage saw nothing of it: a script, a build step, a file read as data, a module that failed
            return FileDecision(path, False, "no recorded test executed any of it: coverage has no evidence of what "
                                "runs it (a script, the build, a file read as data or that did not compile)")
        return self._new(path, rel, set())

    def _executed(self, path: str, rel: str) -> FileDecision:
        source = self.tree.read(rel)
        now = frozenset(pyblocks.split(source).digests) if source is not None else frozenset()
        tests = {}
        for r in self.measured:
            assert r.python is not None
            ran = r.python.get(rel)
            if ran and not ran <= now:
                gone = len(ran - now)
                tests[r.test] = (f"it executed {gone} block{'s' if gone > 1 else ''} of {path} that the change "
                                 f"{'removed' if source is None else 'altered'}")
        why = f"{len(tests)} recorded tests executed code of it that changed"
        if is_test_file(rel) and tests:
            # a test module's import-time code was its own tests' (see the recorder): the files that import it
            # use what that code left, so the tests that ran them run too
            module = self.tree.module(rel)
            for importer in self.tree.importers(rel, module) if module else {}:
                for r in self.measured:
                    if r.python is not None and importer in r.python:
                        tests.setdefault(r.test, f"it ran {importer}, which imports the changed test module {path}")
        return self._with_unseen(FileDecision(path, True, why, tests), rel)

    def _with_unseen(self, found: FileDecision, rel: str) -> FileDecision:
        """Tests whose own recording cannot say whether they ran ``rel`` run too."""
        tests = dict(found.tests)
        for r in self.recordings:
            if r.test in tests:
                continue
            if r.python is None:
                tests[r.test] = f"{found.path} changed, and {r.python_why}"
            elif rel in r.python_copies:
                tests[r.test] = f"{found.path} changed, and its recording ran an installed copy of it"
        return FileDecision(found.path, found.known, found.why, tests)

    def _new(self, path: str, rel: str, seen: set[str]) -> FileDecision:
        """A file the recordings' commit did not have: the tests of what imports or names it."""
        if is_test_file(rel):
            return FileDecision(path, False, "a new test file: pytest collects it, no file imports it")
        if rel.endswith("/__init__.py") or rel == "__init__.py":
            return FileDecision(path, False, "a new package: its folder's modules change how they import")
        module = self.tree.module(rel)
        if module is None or "." not in module:
            return FileDecision(path, False, "a new top-level module: it may shadow an installed one of its name")
        assert self.tree.top is not None
        if (self.tree.top / rel[:-3]).is_dir():
            return FileDecision(path, False, f"a new module beside the folder {rel[:-3]}/ (a namespace package "
                                "it replaces)")
        dynamic = self.tree.dynamic_import(rel)
        if dynamic is not None:
            return FileDecision(path, False, f"a new module, and {dynamic} imports modules by computed names: "
                                "it may load this one without naming it")
        seen = seen | {rel}
        tests: dict[str, str] = {}
        lines = {i: n for i, n in self.tree.importers(rel, module).items() if i not in seen}
        importers = list(lines)
        for importer in importers:
            inner = self._importer(importer, lines[importer], seen)
            if not inner.known:
                return FileDecision(path, False, f"a new module imported by {importer}, which "
                                    f"cannot be decided: {inner.why}")
            for t, why in inner.tests.items():
                tests.setdefault(t, f"it ran {importer}, which imports the new module {module}" if why == "" else why)
        if not importers:
            return FileDecision(path, False, f"a new module ({module}) that no file imports or names: it may be run "
                                "as a script, by the build, or read as data")
        why = f"a new module ({module}), imported by {', '.join(importers[:3])}" + (" ..." if len(importers) > 3 else "")
        return self._with_unseen(FileDecision(path, True, why, tests), rel)

    def _importer(self, rel: str, lines: list[int], seen: set[str]) -> FileDecision:
        """The tests that executed what in ``rel`` imports a new module: the blocks holding ``lines``, as the
        recordings' commit had them (every block of ``rel`` when one of them is new, or it does not parse)."""
        base = self.tree.base_source(rel)
        ran = [r for r in self.measured if r.python is not None and rel in r.python]
        if base is None and not ran and not self.tree.existed(rel):
            return self._new(rel, rel, seen)
        if not ran:  # no test ran the importer: what runs it (a script, the build) runs the new module too
            return FileDecision(rel, False, f"no recorded test executed {rel}")
        wanted = _blocks_at_base(self.tree.read(rel), base, lines)
        chosen = [r for r in ran if r.python is not None and (wanted is None or r.python[rel] & wanted)]
        return self._with_unseen(FileDecision(rel, True, "", {r.test: "" for r in chosen}), rel)


def _blocks_at_base(head: bytes | None, base: bytes | None, lines: list[int]) -> frozenset[str] | None:
    """The base digests of the blocks that hold ``lines`` in ``head``, found by name; None: any block."""
    if head is None or base is None or 0 in lines:
        return None
    now, then = pyblocks.split(head), pyblocks.split(base)
    names = {now.names[now.lines[n] if 0 < n < len(now.lines) else 0] for n in lines}
    digests = dict(zip(then.names, then.digests, strict=True))
    if not names <= digests.keys():
        return None
    return frozenset(digests[n] for n in names)


def tests_of_file(path: str, recordings: Sequence[Recording]) -> FileDecision:
    """A changed test file (``path`` relative to the top level): the tests defined in it, node ids under
    ``path::`` as spelled from pytest's rootdir, which each record names; new ones no recording knows. A test
    whose record does not say its rootdir (a `record` step) may run this file: it runs."""
    prefixes = tuple(sorted({posixpath.relpath(path, r.rootdir) + "::" for r in recordings if r.rootdir is not None}))
    mine = {r.test: f"it is defined in {path}, which changed" for r in recordings
            if r.rootdir is not None and r.test.startswith(prefixes)}
    mine.update({r.test: f"{path} changed, and its recording does not say which test files it ran (no rootdir)"
                 for r in recordings if r.rootdir is None})
    why = f"a test file: its {len(mine)} recorded tests" if mine else \
        "a test file no recording knows: its tests are new, and every test no recording knows runs"
    return FileDecision(path, True, why, mine)
