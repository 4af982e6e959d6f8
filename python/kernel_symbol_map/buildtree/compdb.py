"""Exact (source, object) pairs, and compile commands, from a compilation database.

Two producers: ``compile_commands.json`` (its ``output`` key exists since
CMake 3.26) and ``ninja -t compdb``, which reads build.ninja and never writes
ninja's logs, so it is safe inside a running build. Commands are read only
where they are needed: to re-run clang's preprocessor for the device side
(:mod:`.devicedeps`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import BuildTreeError

OBJECT_SUFFIXES = (".o", ".obj", ".gch", ".pch")  # objects, and CMake's precompiled headers


@dataclass(frozen=True)
class CompileEntry:
    source: Path  # absolute, normalised
    object: Path  # absolute, normalised


@dataclass(frozen=True)
class Command:
    """How one object was compiled: the working directory and the argument vector."""

    directory: Path
    arguments: tuple[str, ...]


@lru_cache(maxsize=None)
def absolute(path: str, base: Path) -> Path:
    """``path`` made absolute against ``base`` and normalised; cached, as the same paths recur."""
    return Path(os.path.normpath(os.path.join(base, path)))


def _entries(data: object, where: str, build_dir: Path) -> list[CompileEntry]:
    if not isinstance(data, list):
        raise BuildTreeError(f"{where}: expected a JSON list")
    found = []
    for i, e in enumerate(data):
        if not isinstance(e, dict) or not isinstance(e.get("file"), str):
            raise BuildTreeError(f"{where}: entry {i} has no file")
        output = e.get("output")
        if not isinstance(output, str) or not output.endswith(OBJECT_SUFFIXES) or e["file"].endswith(OBJECT_SUFFIXES):
            continue  # links, device links, phony edges
        directory = Path(e["directory"]) if isinstance(e.get("directory"), str) else build_dir
        found.append(CompileEntry(absolute(e["file"], directory), absolute(output, directory)))
    return found


def from_compile_commands(build_dir: Path) -> list[CompileEntry] | None:
    """Pairs from compile_commands.json, or None when it is absent or predates ``output``."""
    path = build_dir / "compile_commands.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise BuildTreeError(f"{path}: not readable JSON: {e}") from None
    if isinstance(data, list) and data and not all(isinstance(e, dict) and "output" in e for e in data):
        return None
    return _entries(data, str(path), build_dir)


def from_ninja(build_dir: Path, ninja: str) -> list[CompileEntry]:
    return _entries(_ninja_compdb(build_dir, ninja), "ninja -t compdb", build_dir)


def commands(data: object, where: str, build_dir: Path) -> dict[Path, Command]:
    """Object -> its compile command, from a compilation database's entries (``output``, else ``-o``)."""
    if not isinstance(data, list):
        raise BuildTreeError(f"{where}: expected a JSON list")
    found = {}
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise BuildTreeError(f"{where}: entry {i} is not an object")
        directory = Path(e["directory"]) if isinstance(e.get("directory"), str) else build_dir
        try:
            if isinstance(e.get("arguments"), list) and all(isinstance(a, str) for a in e["arguments"]):
                arguments = tuple(e["arguments"])
            elif isinstance(e.get("command"), str):
                arguments = tuple(shlex.split(e["command"]))
            else:
                continue
        except ValueError as err:
            raise BuildTreeError(f"{where}: entry {i}: the command does not parse ({err})") from None
        output = e.get("output")
        if not isinstance(output, str) and "-o" in arguments[:-1]:
            output = arguments[arguments.index("-o") + 1]
        if isinstance(output, str) and output.endswith(OBJECT_SUFFIXES):
            found[absolute(output, directory)] = Command(directory, arguments)
    return found


def read_commands(build_dir: Path, ninja: str | None) -> dict[Path, Command]:
    """Every object's compile command: compile_commands.json, else (Ninja) ``ninja -t compdb``; {} without."""
    path = build_dir / "compile_commands.json"
    if path.is_file():
        try:
            return commands(json.loads(path.read_text()), str(path), build_dir)
        except (OSError, ValueError) as e:
            raise BuildTreeError(f"{path}: not readable JSON: {e}") from None
    if ninja is None:
        return {}
    return commands(_ninja_compdb(build_dir, ninja), "ninja -t compdb", build_dir)


def _ninja_compdb(build_dir: Path, ninja: str) -> object:
    command = [ninja, "-C", str(build_dir), "-t", "compdb"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildTreeError(f"{' '.join(command)}: {e}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        raise BuildTreeError(f"{' '.join(command)} (exit {proc.returncode}): {tail[0]}")
    try:
        return json.loads(proc.stdout)
    except ValueError as e:
        raise BuildTreeError(f"{' '.join(command)}: not JSON: {e}") from None
