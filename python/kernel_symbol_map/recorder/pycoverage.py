"""Which of the project's Python code each scope executed: coverage.py's dynamic contexts, as block digests.

One measurement per process, started by the pytest plugin before the initial
conftests load (the way pytest-cov starts) and in every Python child that
records (the ``.pth`` hook). Its contexts are the recorder's scopes: the
plugin switches them with the kernel scopes, so Python code is attributed
exactly as kernels are (a test, a fixture scope, every test). At the end each
scope's executed lines become the digests of the blocks that hold them
(:mod:`..mapformat.pyblocks`), per file, relative to the project's root (the
git top level).

What cannot be seen is said, never guessed:

* files of the project loaded from elsewhere (an installed copy in
  site-packages), or compiled into an extension module (mypyc, Cython's pure
  Python mode): ``copies``; ``select`` cannot clear them from this recording;
* project modules imported before the measurement started: every block of
  theirs counts for every test;
* no coverage.py, another tracer already running (pytest-cov, a debugger),
  or no git checkout: no Python evidence at all (``problem``).

Code a JIT compiles (``torch.compile``, numba, Triton, a source-text
decorator) never runs in the interpreter: :mod:`.jit` notes it as run by the
scope that ran it, and it joins the scope's lines here.

Test modules' own import-time code runs while pytest collects them; the plugin
attributes it to the module's tests (:meth:`collecting`). Every other file's
lines executed then belong to every test: a module is imported once, and any
later test may read what its import left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import threading
import types
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from ..mapformat import pyblocks
from .jit import JitWatch, decorators_from_environment

ROOT_VARIABLE = "KERNEL_SYMBOL_MAP_RECORD_PYTHON"  # the project's root: measure Python code under it

_DEFAULT = ""  # coverage's context before any switch: the process's default scope


class PythonCoverage:
    """This process's measurement (at most one)."""

    current: ClassVar[PythonCoverage | None] = None

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.problem = ""
        self.cov: Any = None
        self.own: dict[str, tuple[str, str]] = {}  # context -> (its own file, the scope its lines go to)
        self._stack: list[str] = []
        self.preimported: set[str] = set()
        self.pid = os.getpid()
        self._tracer: Any = None
        self._own_tracers: tuple[str, ...] = ()
        self._stopping = False
        self.context = _DEFAULT  # the scope lines go to now
        self.noted: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))  # context -> file -> lines
        self.frames: dict[tuple[str, int], set[types.CodeType]] = defaultdict(set)  # a compiled frame's first line
        self.jit: JitWatch | None = None
        self._noted_codes: set[tuple[str, types.CodeType]] = set()
        # (context, kernel) -> (file, qualname) of each function it is named after
        self.kernels: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
        self._launched: set[tuple[str, types.FunctionType]] = set()
        self.sources: dict[str, set[str]] = defaultdict(set)  # context -> files compiled at run time

    @classmethod
    def start(cls, root: Path | None = None) -> PythonCoverage:
        """Start measuring this process under ``root`` (default: the environment's); once per process."""
        if cls.current is not None:
            if cls.current.pid != os.getpid() and cls.current.cov is not None:  # forked: go on measuring here
                cls.current.pid = os.getpid()  # (the parent's lines so far come along: attributed as there)
            if cls.current.pid == os.getpid():
                return cls.current
        named = os.environ.get(ROOT_VARIABLE)
        found = cls(root if root is not None else Path(named) if named else None)
        cls.current = found
        found._begin()
        return found

    def _begin(self) -> None:
        if self.root is None or not self.root.is_dir():
            self.problem = "no project root to measure Python code in (not a git checkout)"
            return
        if sys.gettrace() is not None:
            self.problem = "another tracer (pytest-cov, coverage, a debugger) is running: Python code was not measured"
            return
        try:
            import coverage
        except ImportError:
            self.problem = "coverage.py is not installed (pip install 'kernel-symbol-map[record]')"
            return
        if coverage.Coverage.current() is not None:
            self.problem = "another coverage measurement (pytest-cov) is running: Python code was not measured"
            return
        root = str(self.root.resolve()) + os.sep
        self.preimported = {f for f in map(_module_file, list(sys.modules.values())) if f and f.startswith(root)}
        self.cov = coverage.Coverage(data_file=None, config_file=False, branch=False, include=[f"{root}*"],
                                     omit=["*/site-packages/*", "*/dist-packages/*"], messages=False)
        # Dynamic contexts need a tracing core: coverage.py's sys.monitoring core (COVERAGE_CORE=sysmon) has
        # none, and would attribute every line to the first test.
        self.cov.set_option("run:core", "ctrace" if _has_ctracer() else "pytrace")
        try:
            self.cov.start()
        except Exception as e:  # noqa: BLE001 - a measurement that fails to start is no evidence, said so
            self.problem = f"coverage.py could not start: {e}"
            self.cov = None
            return
        if not getattr(getattr(self.cov, "_core", None), "supports_dynamic_contexts", False):
            self.cov.stop()
            self.cov = None
            self.problem = "coverage.py's core cannot switch contexts per test (COVERAGE_CORE=sysmon?)"
            return
        self._watch()
        self.jit = JitWatch(self.note, self.compiled, [*decorators_from_environment(), *_decorators(self.root)],
                            self.launched, self.built)
        self.jit.start()

    def built(self, sources: Sequence[str]) -> None:
        """Source files compiled at run time (``torch.utils.cpp_extension.load``) in the current scope."""
        if self.cov is not None:
            self.sources[self.context].update(os.path.realpath(os.fspath(s)) for s in sources)

    def launched(self, function: types.FunctionType) -> None:
        """A JIT launched a kernel named after ``function`` (as Triton names them) in the current scope."""
        key = (self.context, function)
        if self.cov is None or key in self._launched:
            return  # a hot loop's launches cost a set lookup each
        self._launched.add(key)
        self.kernels[(self.context, function.__name__)].add(
            (os.path.realpath(function.__code__.co_filename), function.__qualname__))

    def note(self, code: types.CodeType, context: str | None = None) -> None:
        """A JIT ran ``code`` in the current scope (or ``context``): its lines count as executed there."""
        key = (self.context if context is None else context, code)
        if self.cov is None or key in self._noted_codes:
            return  # a hot loop's calls cost a set lookup each
        self._noted_codes.add(key)
        self.noted[key[0]][os.path.realpath(code.co_filename)].update(
            line for _, _, line in code.co_lines() if line is not None)

    def compiled(self, code: types.CodeType, traced: Sequence[types.CodeType]) -> None:
        """Dynamo compiled a frame of ``code``, tracing ``traced`` into it: a scope that ran the frame's first
        line ran them all."""
        path = os.path.realpath(code.co_filename)
        self.frames[(path, code.co_firstlineno)].update(traced)
        self.note(code)  # compiled here: the frame runs here too
        for c in traced:
            self.note(c)
        if self.root is not None and not path.startswith(str(self.root.resolve()) + os.sep):
            # A frame coverage does not measure (torch's nn.Sequential, a functools.partial): a later run of it
            # cannot be seen, so the project code traced into it is every test's.
            for c in traced:
                self.note(c, _DEFAULT)

    def _watch(self) -> None:
        """Know when tracing was taken from us: another coverage.py measurement pauses ours when it starts
        (its collector calls our collector's ``pause``), and ``sys.settrace`` replaces our tracer."""
        import coverage

        self._tracer = sys.gettrace()
        # who may call sys.settrace while we measure: coverage.py itself, and threading starting a thread's tracer
        self._own_tracers = (os.path.dirname(coverage.__file__) + os.sep, threading.__file__ or "threading.py")
        collector = getattr(self.cov, "_collector", None)
        pause = getattr(collector, "pause", None)
        if pause is None:
            self.problem = "coverage.py's collector is not the one this recorder knows: Python code was not measured"
            return

        def paused() -> None:
            if not self._stopping:
                self.problem = self.problem or ("another coverage measurement (pytest-cov, a test's own coverage.py) "
                                                "paused this one: Python code ran unseen")
            pause()

        collector.pause = paused
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        """``sys.settrace`` from anything but coverage.py itself (or threading installing its tracer) takes
        tracing away from this measurement, if only for a while: a tool that swaps the tracer and restores it
        before the next test would otherwise hide what ran meanwhile."""
        if event != "sys.settrace" or self.cov is None or self._stopping or self.problem:
            return
        caller = sys._getframe(1).f_code.co_filename
        if not caller.startswith(self._own_tracers):
            self.problem = f"sys.settrace was called by {caller} during the run: Python code may have run unseen"

    # -- scopes ---------------------------------------------------------------------------------

    def switch(self, scope: str) -> None:
        if self.cov is not None:
            if sys.gettrace() is not self._tracer and not self.problem:
                self.problem = "another tracer replaced this recorder's (a debugger, sys.settrace): Python code ran unseen"
            self.cov.switch_context(scope)
            self.context = scope

    @contextmanager
    def attributing(self, scope: str) -> Iterator[None]:
        """Lines executed inside the block belong to ``scope``; the scope outside is restored after."""
        self._stack.append(scope)
        self.switch(scope)
        try:
            yield
        finally:
            self._stack.pop()
            self.switch(self._stack[-1] if self._stack else _DEFAULT)

    @contextmanager
    def collecting(self, path: Path, scope: str) -> Iterator[None]:
        """pytest imports the test module ``path``: its own lines go to ``scope`` (its tests), others' to every test."""
        context = f"collect:{path}"
        self.own[context] = (str(path.resolve()), scope)
        with self.attributing(context):
            yield

    # -- the result -------------------------------------------------------------------------------

    def finish(self, default_scope: str) -> dict[str, Any]:
        """``{"python": {scope: {file: [digests]}}, "python_copies": [files]}``, or the problem with no evidence."""
        if self.cov is None or os.getpid() != self.pid:
            return {"python": None, "python_problem": self.problem or "Python code was not measured"}
        if PythonCoverage.current is self:
            PythonCoverage.current = None  # the next measurement in this process (a test's own run) is a new one
        try:
            self._stopping = True
            self.cov.stop()
            data = self.cov.get_data()
            measured = data.measured_files()
        except Exception as e:  # noqa: BLE001 - whatever coverage.py raises, this process's Python is unknown
            return {"python": None, "python_problem": f"coverage.py failed: {e}"}
        problem = self.problem or (self.jit.problem if self.jit is not None else "")
        if problem:
            return {"python": None, "python_problem": problem}
        assert self.root is not None  # measured only under a root
        root = self.root.resolve()
        tracked = _tracked(root)
        found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        imported: set[str] = set()
        per_context: dict[str, tuple[dict[str, set[int]], pyblocks.Blocks]] = {}  # rel -> its lines by context
        lines, covered = self._lines(data, measured)
        for path, by_context in lines.items():
            rel = _relative(path, root)
            if rel is None or rel not in tracked:
                continue  # a build output, a virtual environment inside the root: no changed file is these
            blocks = _blocks(Path(path))
            for context, lines in by_context.items():
                found[self._scope(context, path, default_scope)][rel].update(blocks.executed(lines))
                if blocks.first in covered[path].get(context, ()) and not context.startswith("collect:"):
                    imported.add(context)  # the module's first statement ran here: it was imported in this scope
            per_context[rel] = by_context, blocks
        # A scope in which some module was imported (a test's lazy import, a fixture's) ran that import's code
        # for every later test: the code a module's import runs, in any file, cannot be told from the rest of
        # the scope's, so all of that scope's code is every test's too.
        for rel, (by_context, blocks) in per_context.items():
            for context in imported & by_context.keys():
                found[default_scope][rel].update(blocks.executed(by_context[context]))
        for path in self.preimported:  # imported before we could see them: all of it, for every test
            rel = _relative(path, root)
            if rel is not None and rel in tracked:
                found[default_scope][rel].update(_blocks(Path(path)).digests)
        return {"python": {scope: {rel: sorted(d) for rel, d in sorted(files.items())}
                           for scope, files in sorted(found.items())},
                "python_copies": _copies(root, tracked), "pyblocks": pyblocks.SCHEME,
                "jit_kernels": self._jit_kernels(root, default_scope),
                "jit_sources": {scope: sorted(files)
                                for scope, files in sorted(self._jit_sources(root, default_scope).items())}}

    def _jit_sources(self, root: Path, default_scope: str) -> dict[str, set[str]]:
        """scope -> the files compiled at run time there, relative to the root (absolute outside it)."""
        found: dict[str, set[str]] = defaultdict(set)
        for context, files in self.sources.items():
            for path in files:
                found[self._scope(context, path, default_scope)].add(_relative(path, root) or path)
        return found

    def _jit_kernels(self, root: Path, default_scope: str) -> dict[str, dict[str, list[str]]]:
        """scope -> kernel -> the JIT'd functions (``file:qualname``, ``file`` relative to the root, or absolute
        outside it) it is named after."""
        found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for (context, kernel), functions in self.kernels.items():
            for path, qualname in functions:
                rel = _relative(path, root)
                found[self._scope(context, path, default_scope)][kernel].add(f"{rel or path}:{qualname}")
        return {scope: {k: sorted(f) for k, f in sorted(kernels.items())} for scope, kernels in sorted(found.items())}

    def _lines(self, data: Any, measured: Iterable[str]) -> tuple[dict[str, dict[str, set[int]]],
                                                                    dict[str, dict[str, set[int]]]]:
        """File -> context -> the lines executed there: coverage's and those the JITs ran (:mod:`.jit`), and
        coverage's alone (what an import ran is told by them). A compiled frame run again shows to coverage by
        its first line alone: a test (or fixture) scope in which that line ran also ran the code traced into the
        frame (import's and collection's are not such a run)."""
        covered: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        for path in measured:
            for line, contexts in data.contexts_by_lineno(path).items():
                for context in contexts:
                    covered[os.path.realpath(path)][context].add(line)
        for (path, first), traced in self.frames.items():
            for context, ran in covered.get(path, {}).items():
                if first in ran and context != _DEFAULT and not context.startswith("collect:"):
                    for code in traced:
                        self.note(code, context)
        found: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        for path, by_context in covered.items():
            for context, ran in by_context.items():
                found[path][context].update(ran)
        for context, files in self.noted.items():
            for path, noted in files.items():
                found[path][context].update(noted)
        return found, covered

    def _scope(self, context: str, path: str, default_scope: str) -> str:
        if not context:
            return default_scope
        own = self.own.get(context)
        if own is not None:
            return own[1] if os.path.realpath(path) == own[0] else default_scope
        return context


def _decorators(root: Path | None) -> list[str]:
    """``jit-decorators`` of ``[tool.kernel-symbol-map]`` in the project's top-level ``pyproject.toml``."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        table = tomllib.loads((root / "pyproject.toml").read_text()) if root is not None else {}
    except (OSError, ValueError):
        return []
    tool = table.get("tool")
    ours = tool.get("kernel-symbol-map") if isinstance(tool, dict) else None
    value = ours.get("jit-decorators") if isinstance(ours, dict) else None
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _has_ctracer() -> bool:
    try:
        from coverage.tracer import CTracer  # noqa: F401
    except ImportError:
        return False
    return True


def _module_file(module: Any) -> str:
    path = getattr(module, "__file__", None)
    return os.path.realpath(path) if isinstance(path, str) and path.endswith(".py") else ""


def _relative(path: str, root: Path) -> str | None:
    try:
        return Path(os.path.realpath(path)).relative_to(root).as_posix()
    except ValueError:
        return None


def _blocks(path: Path) -> pyblocks.Blocks:
    try:
        return pyblocks.split(path.read_bytes())
    except OSError:
        return pyblocks.split(b"\0 unreadable")  # one block whose digest no checkout's file will have


def _tracked(root: Path) -> frozenset[str]:
    """The project's Python files git knows (tracked, or untracked and not ignored)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--", "*.py"], capture_output=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p)


def _copies(root: Path, tracked: frozenset[str]) -> list[str]:
    """Project files whose module ran from another place (an installed copy, or an extension compiled from them by
    mypyc or Cython): this recording never saw them run."""
    by_suffix: dict[str, list[str]] = defaultdict(list)
    for rel in tracked:
        parts = rel.split("/")
        for i in range(len(parts)):
            by_suffix["/".join(parts[i:])].append(rel)
    # The standard library's modules are never copies of a project file, whatever their names (select, queue).
    stdlib = os.path.realpath(sysconfig.get_path("stdlib")) + os.sep
    found = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        path = os.path.realpath(path) if isinstance(path, str) and path else ""  # source or compiled
        if not path or _relative(path, root) in tracked or not name or name == "__main__":
            continue  # the project's own file, or no file at all
        if path.startswith(stdlib) and not {"site-packages", "dist-packages"} & set(Path(path).parts):
            continue
        package = os.path.basename(path).startswith("__init__.")
        key = name.replace(".", "/") + ("/__init__.py" if package else ".py")
        found.update(by_suffix.get(key, ()))
    return sorted(found)


def project_root(path: Path) -> Path | None:
    """The git top level of ``path``: the root ``select`` spells changed files from; None outside git."""
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "--show-toplevel"], capture_output=True,
                             check=True, timeout=60, text=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out) if out else None
