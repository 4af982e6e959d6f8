"""The package's layers import one way: read every import with ``ast`` and check the rules.

Layers are the package's sub-folders; ``errors``, ``_version``, ``_statefile``, ``_graph``,
``_atomic``, ``_commit``, ``_words``, ``_unitnames`` and ``cmakedir`` are shared by all. The rules (docs/layout.md):

- ``readers`` and ``buildtree`` import nothing of ``producer``, ``consumer``
  or ``cli``, nor of each other;
- ``mapformat`` imports only ``errors``, ``_atomic`` and ``_commit``;
- ``consumer`` imports only ``mapformat``, ``errors``, ``_graph``, ``_words`` and ``_unitnames``; of its
  rooms, ``maps`` imports neither other, ``select`` and ``size`` import ``maps`` and not each other;
- ``producer`` imports neither ``consumer`` nor ``cli``;
- ``recorder`` imports only ``mapformat`` (for the commit), ``readers`` (the ELF reader, to name the host
  functions a test ran), ``errors``, ``_atomic`` and ``_words``;
- nothing imports ``cli`` except ``__main__``;
- no layer imports the package's face (``kernel_symbol_map/__init__.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "kernel_symbol_map"
ROOT = Path(__file__).resolve().parents[1] / "python" / PACKAGE
SHARED = {"errors", "_version", "_statefile", "_atomic", "cmakedir", "_graph", "_commit", "_words", "_unitnames"}
LAYERS = {"readers", "buildtree", "mapformat", "producer", "consumer", "recorder", "cli"}

# layer -> the other parts of the package it may import (itself always allowed)
ALLOWED: dict[str, set[str]] = {
    "readers": SHARED,
    "buildtree": SHARED,
    "mapformat": {"errors", "_atomic", "_commit"},
    "consumer": {"mapformat", "errors", "_graph", "_words", "_unitnames"},
    "producer": SHARED | {"readers", "buildtree", "mapformat"},
    "recorder": {"errors", "_atomic", "mapformat", "readers", "_words"},
    "cli": SHARED | {"readers", "buildtree", "mapformat", "producer", "consumer", "recorder"},
    # shared modules stay at the bottom
    "errors": set(),
    "_version": set(),
    "_statefile": {"_atomic"},
    "_atomic": set(),
    "_commit": set(),
    "cmakedir": {"errors"},
    "_graph": set(),
    "_words": set(),
    "_unitnames": set(),
    # the package's face names the public API lazily; __main__ runs the CLI
    "__init__": SHARED | {"readers", "consumer"},
    "__main__": {"cli"},
}


# the consumer's rooms -> the rooms each may import (itself always allowed)
ROOMS: dict[str, set[str]] = {"maps": set(), "select": {"maps"}, "size": {"maps"}}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import of this package in ``path``, lazy ones included."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from .. import mapformat` imports a module; `from .. import __version__` the package itself
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                is_module = any((root.parent / candidate.replace(".", "/")).with_suffix(s).exists()
                                for s in (".py", "")) or (root.parent / candidate.replace(".", "/")).is_dir()
                found.append((node.lineno, candidate if is_module else target))
    return [(line, name) for line, name in found if name == PACKAGE or name.startswith(PACKAGE + ".")]


def _part(module: str) -> str:
    """The layer or shared module a dotted name belongs to (``__init__`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _room(module: str) -> str:
    """The consumer's room a dotted name belongs to (``__init__`` for the consumer package itself)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        importer = _part(_module_name(path, root))
        if path.parent == root and path.stem == "__init__":
            importer = "__init__"
        for line, name in _imports(path, root):
            imported = _part(name)
            if imported == importer == "consumer":
                room, other = _room(_module_name(path, root)), _room(name)
                if room != other and other not in ROOMS.get(room, set()):
                    out.append(f"{path.relative_to(root)}:{line}: consumer's {room} must not import its {other} "
                               f"({name})")
                continue
            if imported == importer:
                continue
            if importer not in ALLOWED:
                out.append(f"{path.relative_to(root)}: not in a known layer; add it to ALLOWED")
            elif imported not in ALLOWED[importer]:
                what = "the package's face" if imported == "__init__" else imported
                out.append(f"{path.relative_to(root)}:{line}: {importer} must not import {what} ({name})")
    return out


def test_every_module_belongs_to_a_layer_or_is_shared() -> None:
    parts = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"}
    assert parts == LAYERS
    assert modules == SHARED


def test_imports_run_one_way() -> None:
    assert violations() == []


def cycles(root: Path = ROOT) -> list[list[str]]:
    """The package's modules that import one another round a circle, lazy imports included: each circle's
    modules, found as the strongly connected components of the import graph (Tarjan's, iteratively)."""
    graph = {_module_name(p, root): sorted({n for _, n in _imports(p, root)}) for p in sorted(root.rglob("*.py"))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w in graph), None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_modules_import_one_another_round_a_circle() -> None:
    assert cycles() == []


def test_a_circle_is_caught(tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    process = copy / "recorder" / "process.py"  # the start-up hook starts the process recorder: not back
    process.write_text(process.read_text() + "\nfrom .hook import FOLDER_VARIABLE  # noqa: E402\n")
    assert cycles(copy) == [[f"{PACKAGE}.recorder.hook", f"{PACKAGE}.recorder.process"]]


def test_the_consumer_is_rooms_and_each_is_named() -> None:
    consumer = ROOT / "consumer"
    assert {p.stem for p in consumer.glob("*.py")} == {"__init__"}  # every module in a room
    assert {p.name for p in consumer.iterdir() if (p / "__init__.py").exists()} == ROOMS.keys()


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("readers/elf.py", "from ..buildtree import fileapi", "readers must not import buildtree"),
        ("buildtree/model.py", "from ..producer.cache import ObjectCache", "buildtree must not import producer"),
        ("consumer/select/selection.py", "from ...readers import devicecode", "consumer must not import readers"),
        ("consumer/maps/kernelmap.py", "from ..select import recordings", "consumer's maps must not import its select"),
        ("consumer/size/treemap.py", "    from ..select.emitted import compare", "size must not import its select"),
        ("consumer/select/selection.py", "from ..size import sizereport", "select must not import its size"),
        ("producer/extract.py", "from ..cli import build", "producer must not import cli"),
        ("mapformat/__init__.py", "from .._version import __version__", "mapformat must not import _version"),
        ("buildtree/model.py", "from .. import __version__", "buildtree must not import the package's face"),
        ("readers/cuda.py", "    from ..consumer.maps.kernelmap import load", "readers must not import consumer"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path: Path, module: str, line: str, expected: str) -> None:
    """The checker itself can fail: copy the package, add one forbidden import, see it named."""
    import shutil

    copy = tmp_path / PACKAGE
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    body = f"def _added():\n{line}\n" if line.startswith(" ") else f"{line}\n"
    target.write_text(target.read_text() + "\n" + body)
    found = violations(copy)
    assert len(found) == 1 and expected in found[0], found
