"""Kernels a JIT names after a Python function: the function's, decided by its Python code.

Triton names a kernel after its ``@triton.jit`` function (``add_kernel``;
older Tritons add a signature suffix, ``add_kernel_0d1d2de``; an autotuner's
variants share the name). No map knows such a kernel: no compiled object
holds it. Left at that, a test that launched one would always run (an
unknown kernel), or, listed in ``--external-kernels``, never, even when the
function changed. So a kernel named after a JIT'd function of the project is
that function's: its test runs when the function, or a JIT'd function it
names (compiled into it), changes. The function is known:

* from the recording: the pytest plugin saw which function a JIT launched
  (``jit_kernels``), and recorded its code, and what it compiled in, as run
  by the test;
* by name, at select time: every function of the checkout that a JIT
  decorator (``jit``, ``autotune``, ``heuristics``, or a ``jit-decorators``
  entry's name) decorates and whose name the kernel is, with the JIT'd
  functions it names, transitively, every candidate where several are. Their
  blocks, as the recordings' commit had them, join the test's Python
  coverage.

Either way the test's Python coverage decides; a test whose recording has
none runs on any change to a Python file. A kernel attributed so is never
external: ``--external-kernels`` does not apply to it, and the selection
says so.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import regex

from ...mapformat import pyblocks
from .pythonfiles import PythonTree
from .recordings import Recording

JIT_DECORATORS = frozenset({"jit", "autotune", "heuristics"})  # triton.jit and its wrappers, by their last name
# Older Triton's signature suffix, after the function's name and a "_": per argument its index and what it
# was specialised on (d: divisible by 16, c: constant, e: by 8, i: int). Possessive: linear on any name.
_SUFFIX = regex.compile(r"(?:\d++[cdei]*+)++")


def _names_of(kernel: str) -> list[str]:
    """The function names ``kernel`` may be: itself, and without an older Triton's suffix."""
    if not kernel.isidentifier():
        return []
    name, _, suffix = kernel.rpartition("_")
    return [kernel, name] if name.isidentifier() and _SUFFIX.fullmatch(suffix) else [kernel]


@dataclass(frozen=True)
class JitFunction:
    file: str  # relative to the git top level
    function: str  # its name, which the kernel has
    name: str  # its block's name (the enclosing block's when it has none of its own)
    digest: str  # its block's digest at the recordings' commit (the enclosing one's when it has none)
    names: frozenset[str]  # the names its body uses: the JIT'd functions among them are compiled into it

    def __str__(self) -> str:
        return f"{self.file}:{self.function}"


@dataclass
class JitKernels:
    """The kernels of the recordings that no map knows and a JIT named after a function of the project."""

    recordings: list[Recording]  # with the by-name functions' blocks joined to their Python coverage
    unknown: frozenset[str]  # every kernel the recordings name that no map knows, JIT'd or not
    by_name: dict[str, list[JitFunction]] = field(default_factory=dict)  # kernel -> its candidates (and callees)

    def owner(self, recording: Recording, kernel: str) -> str | None:
        """The function(s) ``kernel`` is attributed to, for this recording, as people read them; None: not a JIT's."""
        recorded = _recorded(recording, kernel)
        if recorded:
            return ", ".join(recorded)
        found = self.by_name.get(kernel)
        return ", ".join(map(str, found)) if found else None


def attribute(recordings: list[Recording], known: frozenset[str], tree: PythonTree | None, changed: Sequence[str],
              decorators: Sequence[str] = ()) -> JitKernels:
    """The recordings' kernels no map (``known``) holds, attributed to the JIT'd functions they are named after;
    ``changed`` are the change's files (their text at the recordings' commit is what the kernels came from)."""
    unknown = frozenset().union(*(r.kernels for r in recordings)) - known
    # A C++ kernel's mangled name (_Z...) is no Python function's: only the others are looked for.
    named = sorted(k for k in unknown if not k.startswith("_Z"))
    if not named or tree is None or tree.top is None:
        return JitKernels(recordings, unknown)
    index = _Index(tree, changed, JIT_DECORATORS | {d.rpartition(":")[2] for d in decorators})
    by_name = {k: found for k in named if (found := index.reach(k))}
    if not by_name:
        return JitKernels(recordings, unknown)
    joined = []
    for r in recordings:  # a kernel the recording attributes itself needs no guess by name
        hits = [f for k in by_name.keys() & r.kernels if not _recorded(r, k) for f in by_name[k]]
        if hits and r.python is not None:
            python = dict(r.python)
            for f in hits:
                python[f.file] = python.get(f.file, frozenset()) | {f.digest}
            r = dataclasses.replace(r, python=python)
        joined.append(r)
    return JitKernels(joined, unknown, by_name)


def _recorded(recording: Recording, kernel: str) -> list[str]:
    """The project's functions the recording says ``kernel`` is named after (one outside the project, written
    with its absolute path, is not the project's code)."""
    return sorted(f for f in recording.jit_kernels.get(kernel, ()) if not f.startswith("/"))


class _Index:
    """The checkout's JIT'd functions by name, as the recordings' commit had them: a file the change touched is
    read from git at that commit, the others from the checkout (they are the same there).

    Found lazily: one pass over every file's bytes finds the files that hold a JIT decorator's line
    (``@triton.jit``, ``@jit(...)``) and where each name is defined in them (``def name``); only the files that
    define a name asked for are parsed."""

    _DEF = regex.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", regex.MULTILINE)

    def __init__(self, tree: PythonTree, changed: Sequence[str], decorators: frozenset[str]) -> None:
        self.tree, self.decorators = tree, decorators
        names = b"|".join(regex.escape(d.encode()) for d in sorted(decorators))
        # A decorator whose last name is one of them (what _last_name reads), as Python lets it be spelt:
        # ``@triton.jit``, ``@ tl . jit(...)``, ``@(jit)``, a comment after it. A superset of what the parse
        # finds: a file it passes over holds no JIT'd function.
        self._decorated = regex.compile(rb"^[ \t]*@[ \t(]*(?:\w+[ \t]*\.[ \t]*)*(?:" + names + rb")\b",
                                        regex.MULTILINE)
        self.touched = {rel for path in changed if path.endswith(".py") and (rel := tree.key(path)) is not None}
        self._defined: dict[str, list[str]] | None = None
        self._parsed: dict[str, list[JitFunction]] = {}
        self._sources: dict[str, bytes] = {}
        # A changed file whose text at the recordings' commit cannot be read may have held any candidate: no
        # kernel is attributed by name then (each stays unknown, and runs).
        self.blind = any(tree.base_source(rel) is None and tree.existed(rel) is not False for rel in self.touched)

    def _source(self, rel: str) -> bytes:
        if rel not in self._sources:
            self._sources[rel] = (self.tree.base_source(rel) if rel in self.touched else self.tree.read(rel)) or b""
        return self._sources[rel]

    def defined(self) -> dict[str, list[str]]:
        """name -> the files with a JIT decorator that define a function of that name (JIT'd or not)."""
        if self._defined is None:
            found: dict[str, list[str]] = {}
            for rel in sorted(set(self.tree.files) | self.touched):
                source = self._source(rel)
                if self._decorated.search(source):
                    for name in set(self._DEF.findall(source)):
                        found.setdefault(name.decode("ascii", "replace"), []).append(rel)
            self._defined = found
        return self._defined

    def functions(self, name: str) -> list[JitFunction]:
        """The JIT'd functions called ``name``."""
        return [f for rel in self.defined().get(name, ()) for f in self.functions_in(rel) if f.function == name]

    def functions_in(self, rel: str) -> list[JitFunction]:
        """The JIT'd functions of one file (parsed once)."""
        if rel not in self._parsed:
            self._parsed[rel] = list(self._parse(rel, self._source(rel)))
        return self._parsed[rel]

    def _parse(self, rel: str, source: bytes) -> Iterable[JitFunction]:
        try:
            module = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        jitted = [node for node in ast.walk(module) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and any(_last_name(d) in self.decorators for d in node.decorator_list)]
        if not jitted:
            return
        blocks = pyblocks.split(source)
        # the names the module imports under another (from .u import helper as h): h is helper
        aliases = {a.asname: a.name.rpartition(".")[2] for n in ast.walk(module)
                   if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names if a.asname}
        for node in jitted:
            line = node.body[-1].lineno
            block = blocks.lines[line] if 0 < line < len(blocks.lines) else 0
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
                {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            used |= {aliases[n] for n in used if n in aliases}
            yield JitFunction(rel, node.name, blocks.names[block], blocks.digests[block], frozenset(used))

    def reach(self, kernel: str) -> list[JitFunction]:
        """The functions ``kernel`` may be named after, and the JIT'd functions they name, transitively."""
        if self.blind:
            return []
        todo = [f for name in _names_of(kernel) for f in self.functions(name)]
        found: dict[tuple[str, str, str], JitFunction] = {}
        while todo:
            f = todo.pop()
            key = (f.file, f.function, f.digest)
            if key not in found:
                found[key] = f
                todo += [g for name in f.names if name in self.defined() for g in self.functions(name)]
        return sorted(found.values(), key=str)


def _last_name(decorator: ast.expr) -> str:
    """``triton.jit``, ``triton.autotune(configs=...)``, ``jit``: the name the decorator is called by, last part."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr
    return decorator.id if isinstance(decorator, ast.Name) else ""
