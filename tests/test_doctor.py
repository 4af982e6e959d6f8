"""``doctor`` in a project folder: each reason a wheel build would emit no map, or one select cannot use, is
named with its fix; a project set up the README's way passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = """[build-system]
requires = ["scikit-build-core>=1.1", "kernel-symbol-map"]
build-backend = "scikit_build_core.build"

[tool.kernel-symbol-map]
recordings = ["recordings/"]
"""


def doctor(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", "doctor", str(project), *args],
                          capture_output=True, text=True, env={**base, **env}, check=False)


def _project(where: Path, pyproject: str, ignore_dist: bool) -> Path:
    where.mkdir()
    (where / "pyproject.toml").write_text(pyproject)
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    if ignore_dist:
        (where / ".gitignore").write_text("dist/\n")
    return where


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    (folder / "kernel_symbol_map-0.1.0-py3-none-linux_x86_64.whl").write_bytes(b"")
    return folder


def test_a_project_set_up_the_readme_way_passes(tmp_path: Path, wheels: Path) -> None:
    project = _project(tmp_path / "good", GOOD, ignore_dist=True)
    proc = doctor(project, {"PIP_FIND_LINKS": f"/elsewhere {wheels}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PROBLEM" not in proc.stdout and "0 problems: a wheel build will emit a map" in proc.stdout


@pytest.mark.parametrize(("pyproject", "env", "ignore_dist", "says"), [
    (GOOD.replace(">=1.1", ">=0.10"), "wheels", True, "allows scikit-build-core 1.0.9, older than 1.1"),
    (GOOD.replace(">=1.1", "==0.11.*"), "wheels", True, "allows scikit-build-core 0.11, older than 1.1"),
    (GOOD.replace(', "kernel-symbol-map"', ""), "wheels", True, "requires does not name kernel-symbol-map"),
    (GOOD, "none", True, "no folder in PIP_FIND_LINKS holds its wheel"),
    (GOOD, "empty", True, "no folder in PIP_FIND_LINKS holds its wheel"),
    (GOOD, "wheels", False, "dist/ is not ignored by git"),
    (GOOD.replace("scikit_build_core.build", "setuptools.build_meta"), "wheels", True, "not scikit-build-core"),
])
def test_each_problem_is_named_with_its_fix(tmp_path: Path, wheels: Path, pyproject: str, env: str,
                                            ignore_dist: bool, says: str) -> None:
    project = _project(tmp_path / "p", pyproject, ignore_dist)
    links = {"wheels": str(wheels), "empty": str(tmp_path), "none": None}[env]  # tmp_path: a folder, no wheel
    proc = doctor(project, {"PIP_FIND_LINKS": links} if links else {})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = [line for line in proc.stdout.splitlines() if line.startswith("PROBLEM")]
    assert len(problems) == 1 and says in problems[0], proc.stdout
    assert proc.stdout.splitlines()[proc.stdout.splitlines().index(problems[0]) + 1].strip().startswith("fix: ")


def test_recordings_unset_is_advice_and_json_says_each_finding(tmp_path: Path, wheels: Path) -> None:
    project = _project(tmp_path / "p", GOOD.split("[tool.")[0], ignore_dist=True)
    proc = doctor(project, {"PIP_FIND_LINKS": str(wheels)}, "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"] and doc["schema"] == "kernel-symbol-map/doctor/1"
    (note,) = [f for f in doc["findings"] if f["fix"]]
    assert note["ok"] and "no recordings configured" in note["what"]


def test_a_folder_without_pyproject_is_one_error_line(tmp_path: Path) -> None:
    proc = doctor(tmp_path, {})
    assert proc.returncode == 1 and proc.stderr.startswith("ERROR ") and "no pyproject.toml" in proc.stderr
    assert "Traceback" not in proc.stderr
