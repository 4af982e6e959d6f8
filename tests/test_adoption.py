"""The README's adoption steps, run literally: a new project, a fresh virtual environment, no index
that holds this package.

The CMake lines, the ``[build-system]`` table and the shell steps are read out
of README.md (the blocks after ``<!-- adoption:... -->``), so the README
cannot drift from what works. The project around them is the smallest a
user would write: one CUDA extension module installed into ``my_pkg``, a git
repository with its files committed. The steps must leave it clean: ``select
--diff`` counts untracked files as changes, so a wheel built into the
checkout would make every test run.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest
import toolchains
from toolchains import ROOT, require

README = ROOT / "README.md"

PROJECT_CMAKE = """cmake_minimum_required(VERSION 3.25)
project(my_pkg LANGUAGES CXX CUDA)
{adoption}
add_library(_kernels MODULE k.cu)
set_target_properties(_kernels PROPERTIES PREFIX "")
install(TARGETS _kernels DESTINATION my_pkg)
"""
PROJECT_TOML = """{adoption}
[project]
name = "my-pkg"
version = "0.1"

[tool.scikit-build]
wheel.packages = []
"""
KERNEL = '__global__ void my_kernel(float* x) { x[threadIdx.x] *= 2.0f; }\n'


def readme_block(name: str) -> str:
    """The fenced block that follows ``<!-- adoption:NAME -->`` in the README."""
    text = README.read_text()
    marker = f"<!-- adoption:{name} -->"
    assert text.count(marker) == 1, marker
    after = text.split(marker, 1)[1].lstrip("\n")
    assert after.startswith("```"), f"{marker} must be followed by a fenced block"
    return after.split("\n", 1)[1].split("\n```", 1)[0] + "\n"


def git(project: Path, *args: str) -> str:
    who = ["-c", "user.name=me", "-c", "user.email=me@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", "-C", str(project), *who, *args], check=True, capture_output=True, text=True).stdout


def write_project(where: Path) -> Path:
    """The project, as a git repository with every file committed (and no .gitignore: nothing is hidden)."""
    where.mkdir()
    (where / "CMakeLists.txt").write_text(PROJECT_CMAKE.format(adoption=readme_block("cmake")))
    (where / "pyproject.toml").write_text(PROJECT_TOML.format(adoption=readme_block("pyproject")))
    (where / "k.cu").write_text(KERNEL)
    git(where, "init", "-q")
    git(where, "add", "CMakeLists.txt", "pyproject.toml", "k.cu")
    git(where, "commit", "-q", "-m", "my_pkg")
    return where


def run_steps(block: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, env=env, capture_output=True,
                          text=True, check=False)


def shipped_map(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as z:
        return json.loads(gzip.decompress(z.read("my_pkg/kernel_symbol_map.json.gz")))


@pytest.mark.parametrize("steps", ["steps", "no-isolation"])
def test_the_readme_adoption_steps_work_as_written(tmp_path: Path, steps: str) -> None:
    nvcc = require(toolchains.nvcc(), "nvcc")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_FIND_LINKS"))}
    # The folders the steps write into outside the checkout (mktemp's and the user's cache), here under
    # tmp_path: a wheel of kernel-symbol-map left in the real cache by another checkout is not this one's.
    # pip keeps its own cache where it was (it is not the steps' output).
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    pip_cache = env.get("PIP_CACHE_DIR") or str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(env_dir), KSM_CHECKOUT=str(ROOT),
        CUDACXX=nvcc, CUDAARCHS="80",  # the user's own toolkit and GPU: not part of the steps
        PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=str(tmp), XDG_CACHE_HOME=str(cache), PIP_CACHE_DIR=pip_cache,
    )
    project = write_project(tmp_path / "my_pkg")
    proc = run_steps(readme_block(steps), project, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # Nothing the steps built is in the checkout: no untracked file (nor an ignored one: there is no .gitignore).
    left = git(project, "status", "--porcelain", "--untracked-files=all", "--ignored")
    assert left == "", f"the steps left files in the checkout, changes to select --diff:\n{left}"
    (wheel,) = tmp.rglob("my_pkg-*.whl")  # the folder mktemp made, outside the checkout
    if steps == "steps":  # kernel-symbol-map's own wheel, where PIP_FIND_LINKS points: outside it too
        assert len(list((cache / "kernel-symbol-map" / "wheels").glob("kernel_symbol_map-*.whl"))) == 1
    doc = shipped_map(wheel)
    (obj,) = doc["objects"]
    assert (obj["source"], obj["target"], obj["symbols"]) == ("k.cu", "_kernels", ["_Z9my_kernelPf"])
    assert not doc["incomplete"] and "reason" not in doc
    if steps == "steps":  # the last step showed the map inside the wheel
        assert "_kernels: 1 object, 1 kernel" in proc.stdout, proc.stdout
