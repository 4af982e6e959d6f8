"""Configure and build the test projects under ``tests/projects`` with real CMake, nvcc and generators."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toolchains

from kernel_symbol_map.buildtree.fileapi import write_query

PROJECTS = Path(__file__).resolve().parent / "projects"
ROOT_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cuda_ext"
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class CMake:
    label: str  # "3.25" (the system's) or "newest" (PyPI's)
    cmake: str
    ninja: str


def cmakes() -> list[CMake]:
    """System CMake 3.25 with system ninja, and PyPI's newest CMake with PyPI's ninja."""
    found = []
    if shutil.which("cmake", path="/usr/bin"):
        found.append(CMake("3.25", "/usr/bin/cmake", shutil.which("ninja", path="/usr/bin") or "ninja"))
    if (VENV_BIN / "cmake").exists():
        found.append(CMake("newest", str(VENV_BIN / "cmake"), str(VENV_BIN / "ninja")))
    return found


@dataclass(frozen=True)
class Build:
    cmake: CMake
    generator: str
    source: Path
    build: Path

    @property
    def id(self) -> str:
        return f"{self.cmake.label}-{self.generator.split()[0].lower()}"

    def run_build(self, *targets: str) -> str:
        command = [self.cmake.cmake, "--build", str(self.build), "--parallel", "2"]
        for t in targets:
            command += ["--target", t]
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout


def configure_and_build(
    project: str, where: Path, cmake: CMake, generator: str, *extra: str, build: bool = True
) -> Build:
    """Copy ``project`` (tests may edit it), configure it and build it."""
    source = where / "src"
    shutil.copytree(PROJECTS / project, source)
    return configure_and_build_at(source, where / "build", cmake, generator, *extra, build=build)


def configure_and_build_at(
    source: Path, build_dir: Path, cmake: CMake, generator: str, *extra: str, build: bool = True,
    query: bool = True, env: dict[str, str] | None = None,
) -> Build:
    """Configure the project in ``source`` into ``build_dir``, and build it.

    ``query``: write our file-API query first, as the CMake package does; without it the
    tree is what a project that never heard of this package has.
    """
    _checkout(source)
    if query:
        write_query(build_dir)  # the configure below answers it
    nvcc = toolchains.require(toolchains.nvcc(), "nvcc")
    command = [
        cmake.cmake, "-S", str(source), "-B", str(build_dir), "-G", generator,
        f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DCMAKE_CUDA_ARCHITECTURES=80", "-DCMAKE_BUILD_TYPE=Release",
        *extra,
    ]
    if generator == "Ninja":
        command.append(f"-DCMAKE_MAKE_PROGRAM={cmake.ninja}")
    proc = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = Build(cmake, generator, source, build_dir)
    if build:
        result.run_build()
    return result


def _checkout(source: Path) -> None:
    """Make ``source`` a git repository with every file committed, as a checkout is, unless it is in one
    already: the map tells the files the configure wrote by what git tracks (issue 26)."""
    inside = subprocess.run(["git", "-C", str(source), "rev-parse", "--is-inside-work-tree"], capture_output=True,
                            text=True, check=False)
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        return
    git = ["git", "-C", str(source), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], check=True, capture_output=True)


def both_models(build_dir: Path) -> tuple[Any, Any]:
    """(the model from the file-API reply, the model read-only from the generator's files)."""
    from unittest import mock

    from kernel_symbol_map.buildtree import fileapi, model

    from_reply = model.load(build_dir)
    with mock.patch.object(fileapi, "reply_is_current", return_value=False):
        return from_reply, model.load(build_dir)


def model_key(tree: Any) -> list[tuple[Any, ...]]:
    """Everything a model says about its objects and targets, comparable between two models."""
    return sorted((o.target, str(o.object), str(o.source), o.language, o.deps, o.error, o.device_link, o.scanned,
                   o.unity_sources) for o in tree.objects) + [("links", sorted(tree.links.items()))]
