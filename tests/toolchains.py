"""Compilers and reference tools the tests build with, found once per session.

Missing tools skip the tests that need them on a developer's machine, and fail
them under CI (``CI`` set), where ``scripts/test`` installs everything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernel_symbol_map.buildtree.toolchain import find_cuobjdump, find_nvcc

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
VENV_OPT = Path(sys.prefix) / "opt"


def require(tool: str | None, what: str) -> str:
    if tool:
        return tool
    message = f"{what} not found; scripts/test installs it"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def nvcc() -> str | None:
    return find_nvcc()


def cuobjdumps() -> dict[str, str]:
    """Version label -> executable: PyPI's 13.5 (the test extra) and 13.4 installed beside it."""
    found = {}
    default = find_cuobjdump()
    if default:
        found[_version(default)] = default
    for folder in sorted(VENV_OPT.glob("cuobjdump-*")):
        exe = next(folder.rglob("bin/cuobjdump"), None)
        if exe:
            found[_version(str(exe))] = str(exe)
    return found


def _version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout
    for word in out.replace(",", " ").split():
        if word[:1].isdigit() and word.count(".") >= 1:
            return ".".join(word.split(".")[:2])
    return "unknown"


def hipcc() -> str | None:
    return shutil.which("hipcc")


def clang_hip() -> str | None:
    """A clang new enough for --offload-compress (LLVM 19, Debian's clang-19)."""
    return shutil.which("clang-19")


def run(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}")


def run_all(commands: list[list[str]], cwd: Path, env: dict[str, str] | None = None) -> None:
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda c: run(c, cwd, env), commands))
