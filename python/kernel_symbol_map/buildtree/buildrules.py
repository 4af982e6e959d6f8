"""What the build's own rules make, and from what: the inputs of generated sources and headers.

A source that a build rule writes (``add_custom_command`` running
``tools/gen_ops.py`` on ``csrc/ops.def`` to make ``$BUILD/gen/gen_ops.cu``)
is compiled from more than the files its compiler's depfile names: a change
to the generator or to what it reads changes the object too. The graph is
read from what the generator wrote, never from a configure:

* **Ninja**: every ``build`` statement's outputs, explicit and implicit,
  against its explicit and implicit inputs (order-only inputs order a build,
  they do not feed it). A ``phony`` statement with no inputs (CMake writes
  one for each configure input, so that a deleted file is no error) makes
  nothing.
* **Unix Makefiles**: the ``<output>: <input>`` rule lines of each target's
  ``build.make``; paths there are relative to the top of the build tree.

:meth:`Rules.upstream` walks back from generated files to the files no rule
makes (transitively: a generated generator's own inputs count too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

import regex

from ..errors import BuildTreeError
from . import ninjafile

# A Makefile rule line as CMake writes it: one prerequisite per line, spaces and '#' escaped with '\'.
_MAKE_RULE = regex.compile(r"^((?:[^\s:\\]|\\.)+): ((?:[^\s\\]|\\.)+)$", regex.M)
_MAKE_UNESCAPE = regex.compile(r"\\(.)")
_MAKE_SPECIAL = ("cmake_force", ".PHONY", ".SUFFIXES", ".NOTPARALLEL")


class Rules:
    """Output -> the inputs of the rule that makes it, as the generator spelled them.

    CMake writes clean paths: relative to the build folder inside it,
    absolute elsewhere. They are made absolute only where asked (a large
    manifest's link statements list every object), by joining, not by
    ``normpath``, unless a path holds ``.`` or ``..`` segments.
    """

    def __init__(self, made_from: dict[str, tuple[str, ...]], base: str, also: tuple[str, ...] = ()) -> None:
        """``also``: other spellings of ``base`` (the folder as configured, through a symlink), which the
        compilers' deps may use for the same generated files."""
        self._raw = made_from
        self._prefix = base.rstrip(os.sep) + os.sep
        self._spelled = {self._absolute(o): o for o in made_from}  # absolute -> as spelled
        for other in {a.rstrip(os.sep) + os.sep for a in also} - {self._prefix}:
            self._spelled.update({os.path.normpath(other + o): o for o in made_from if not o.startswith(os.sep)})

    def _absolute(self, path: str) -> str:
        found = path if path.startswith(os.sep) else self._prefix + path
        return os.path.normpath(found) if "/." in found or "//" in found else found

    @cached_property
    def outputs(self) -> frozenset[str]:
        """Every file a rule makes, absolute."""
        return frozenset(self._spelled)

    @property
    def made_from(self) -> dict[str, tuple[str, ...]]:
        """Output -> inputs, all absolute (for people and tests: the walk below needs only a few)."""
        return {a: tuple(self._absolute(i) for i in self._raw[s]) for a, s in self._spelled.items()}

    def upstream(self, paths: Iterable[str]) -> tuple[set[str], set[str]]:
        """(the files no rule makes that ``paths`` are made from, the generated files on the way)."""
        leaves: set[str] = set()
        generated: set[str] = set()
        todo = [p for p in paths if p in self._spelled]
        while todo:
            path = todo.pop()
            if path in generated:
                continue
            generated.add(path)
            for i in map(self._absolute, self._raw[self._spelled[path]]):
                if i in self._spelled:
                    todo.append(i)
                else:
                    leaves.add(i)
        return leaves, generated


def read(build_dir: Path, generator: str, manifest: Path | None = None,
         statements: list[ninjafile.BuildStatement] | None = None, also: tuple[str, ...] = ()) -> Rules:
    """The build's rules, from ``manifest`` (Ninja, default ``build.ninja``; or its ``statements``, read
    already) or the Makefiles; ``also``: see :class:`Rules`."""
    if "Ninja" in generator:
        return _from_ninja(build_dir, statements if statements is not None else
                           ninjafile.read(manifest or build_dir / "build.ninja", build_dir), also)
    if generator == "Unix Makefiles":
        return _from_makefiles(build_dir, also)
    return Rules({}, str(build_dir))


def _from_ninja(build_dir: Path, statements: list[ninjafile.BuildStatement], also: tuple[str, ...]) -> Rules:
    made_from: dict[str, tuple[str, ...]] = {}
    for st in statements:
        inputs = st.inputs + st.implicit if st.implicit else st.inputs
        if st.rule == "phony" and not inputs:
            continue
        # `${x}` references (CMake's `${cmake_ninja_workdir}` before an implicit output) are not paths; a
        # path's own `$` was written `$$`, and ninjafile has undone that already
        if any("${" in i for i in inputs):
            inputs = tuple(i for i in inputs if "${" not in i)
        for output in st.outputs:
            if "${" not in output:
                made_from[output] = inputs
    return Rules(made_from, str(build_dir), also)


def _from_makefiles(build_dir: Path, also: tuple[str, ...]) -> Rules:
    base = str(build_dir)
    listed = build_dir / "CMakeFiles" / "TargetDirectories.txt"
    try:
        directories = [Path(line.strip()) for line in listed.read_text(errors="replace").splitlines() if line.strip()]
    except OSError as e:
        raise BuildTreeError(f"{listed}: {e.strerror or e}") from None
    found: dict[str, list[str]] = {}
    for directory in directories:
        build_make = directory / "build.make"
        try:
            text = build_make.read_text(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            continue  # a target with nothing to make
        except (OSError, ValueError) as e:  # ValueError: a NUL in a listed folder's name
            raise BuildTreeError(f"{build_make}: {getattr(e, 'strerror', None) or e}") from None
        for output, source in _MAKE_RULE.findall(text):
            if output in _MAKE_SPECIAL or source in _MAKE_SPECIAL:
                continue
            found.setdefault(_unescape(output), []).append(_unescape(source))
    return Rules({o: tuple(i) for o, i in found.items()}, base, also)


def _unescape(path: str) -> str:
    path = path.replace("$$", "$")
    return _MAKE_UNESCAPE.sub(r"\1", path) if "\\" in path else path
