"""Exact (source, object) pairs from a compilation database.

Two producers: ``compile_commands.json`` (its ``output`` key exists since
CMake 3.26) and ``ninja -t compdb``, which reads build.ninja and never writes
ninja's logs, so it is safe inside a running build.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import BuildTreeError

OBJECT_SUFFIXES = (".o", ".obj")


@dataclass(frozen=True)
class CompileEntry:
    source: Path  # absolute, normalised
    object: Path  # absolute, normalised


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
    command = [ninja, "-C", str(build_dir), "-t", "compdb"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildTreeError(f"{' '.join(command)}: {e}") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        raise BuildTreeError(f"{' '.join(command)} (exit {proc.returncode}): {tail[0]}")
    try:
        data = json.loads(proc.stdout)
    except ValueError as e:
        raise BuildTreeError(f"{' '.join(command)}: not JSON: {e}") from None
    return _entries(data, "ninja -t compdb", build_dir)
