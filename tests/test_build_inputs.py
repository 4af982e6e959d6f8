"""What the build model takes from the tree besides compile rules: FetchContent folders git tracks, and the
files the configure read, on small C++ projects (fast to configure and build: both rules are about the tree).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import projects
import pytest
from toolchains import require

KSM = [sys.executable, "-m", "kernel_symbol_map"]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]

FETCHING = """
cmake_minimum_required(VERSION 3.25)
project(fetching LANGUAGES CXX)
include(FetchContent)
FetchContent_Declare(kernels_dep SOURCE_DIR ${DEP_DIR})
FetchContent_MakeAvailable(kernels_dep)
add_library(app STATIC app.cpp)
target_link_libraries(app PRIVATE dep_ops)
"""
DEP = """
cmake_minimum_required(VERSION 3.25)
project(kernels_dep LANGUAGES CXX)
add_library(dep_ops STATIC ops.cpp)
target_include_directories(dep_ops PUBLIC include)
"""
CONFIGURED = """
cmake_minimum_required(VERSION 3.25)
project(configured LANGUAGES CXX)
include(cmake/options.cmake)
configure_file(config.h.in ${CMAKE_CURRENT_BINARY_DIR}/config.h)
add_library(app STATIC app.cpp)
target_include_directories(app PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
"""


def _cmake() -> projects.CMake:
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake and cmake.cmake, "system CMake 3.25")
    assert cmake is not None
    return cmake


def _build(source: Path, build: Path, generator: str, *extra: str, query: bool = True) -> None:
    cmake = _cmake()
    if query:
        from kernel_symbol_map.buildtree.fileapi import write_query

        write_query(build)
    command = [cmake.cmake, "-S", str(source), "-B", str(build), "-G", generator, *extra]
    if generator == "Ninja":
        command.append(f"-DCMAKE_MAKE_PROGRAM={cmake.ninja}")
    subprocess.run(command, check=True, capture_output=True)
    subprocess.run([cmake.cmake, "--build", str(build)], check=True, capture_output=True)


def _map(build: Path, out: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([*KSM, "build", "--build-dir", str(build), "--out", str(out), "--commit", "c" * 40,
                           *extra], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(gzip.decompress(out.read_bytes()))


def _select(kmap: Path, tmp: Path, *changed: str) -> dict[str, Any]:
    rec = tmp / "r.jsonl"
    rec.write_text(json.dumps({"test": "test_app", "kernels": [], "complete": True, "commit": "c" * 40}) + "\n")
    proc = subprocess.run([*KSM, "select", "--map", str(kmap), "--recordings", str(rec), "--changed", *changed,
                           "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def _commit(source: Path) -> None:
    """``source`` as a checkout: a git repository with everything committed."""
    subprocess.run([*GIT, "init", "-q", str(source)], check=True)
    subprocess.run([*GIT, "-C", str(source), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(source), "commit", "-qm", "A"], check=True)


def _dependency(folder: Path) -> None:
    (folder / "include").mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(DEP)
    (folder / "include" / "dep.h").write_text("#pragma once\ninline int dep() { return 1; }\n")
    (folder / "ops.cpp").write_text('#include "dep.h"\nint ops() { return dep(); }\n')


@pytest.mark.parametrize("how", ["tracked", "untracked", "tracked, the project configured through a symlink",
                                 "tracked, the folder named through a symlink"])
def test_a_fetched_folder_git_tracks_in_the_source_root_is_the_project_s_own(tmp_path: Path, how: str) -> None:
    """A dependency vendored into the repository is spelled as a source path, so that an edit there (as
    ``--diff`` or ``--changed`` names it) reaches what it is compiled into; one git does not track (a
    fetch into an ignored ``.deps``) is third-party, spelled ``$DEP/<name>/...``. A symlink on the way to
    either folder changes neither."""
    tracked = how.startswith("tracked")
    real = tmp_path / "real"
    source = real / "src"
    source.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    (source / "CMakeLists.txt").write_text(FETCHING)
    (source / "app.cpp").write_text('#include "dep.h"\nint app() { return dep() + 1; }\n')
    (source / ".gitignore").write_text(".deps/\n")
    relative = f"{'third_party' if tracked else '.deps'}/kernels_dep"
    _dependency(source / relative)
    _commit(source)
    through = tmp_path / "link" / "src"
    configured, dep = (through, source / relative) if "project configured" in how else \
        (source, through / relative) if "folder named" in how else (source, source / relative)
    _build(configured, tmp_path / "build", "Ninja", f"-DDEP_DIR={dep}")
    doc = _map(tmp_path / "build", tmp_path / "map.json.gz")
    sources = {o["source"]: o for o in doc["objects"]}
    spelled = relative if tracked else "$DEP/kernels_dep"
    assert set(sources) == {"app.cpp", f"{spelled}/ops.cpp"}
    assert f"{spelled}/include/dep.h" in sources["app.cpp"]["deps"]
    assert doc.get("third_party", []) == ([] if tracked else ["kernels_dep"])
    answer = _select(tmp_path / "map.json.gz", tmp_path, f"{relative}/include/dep.h")
    # Host code only here: the header is in the map (host-file) when tracked; an edit to a fetched copy is
    # no change of this repository's, and no map spelling of it matches.
    assert answer["fallback"] == ("host-file" if tracked else "file-not-in-map")


@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_every_file_the_configure_read_is_a_configure_input_without_a_reply(tmp_path: Path,
                                                                             generator: str) -> None:
    """With no file-API reply, build.ninja's ``RERUN_CMAKE`` statement (its implicit inputs, after ``|``) or
    Makefile.cmake says what the configure read: CMakeLists, included modules, configure_file inputs."""
    source = tmp_path / "src"
    (source / "cmake").mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(CONFIGURED)
    (source / "cmake" / "options.cmake").write_text("set(APP_VALUE 3)\n")
    (source / "config.h.in").write_text("#define APP_VALUE @APP_VALUE@\n")
    (source / "app.cpp").write_text('#include "config.h"\nint app() { return APP_VALUE; }\n')
    _commit(source)
    build = tmp_path / "build"
    _build(source, build, generator, query=False)
    assert not (build / ".cmake" / "api" / "v1" / "reply").exists()
    if generator == "Ninja":
        rerun = next(line for line in (build / "build.ninja").read_text().splitlines() if ": RERUN_CMAKE" in line)
        assert " | " in rerun  # what the configure read is all implicit
    doc = _map(build, tmp_path / "map.json.gz", "--source-root", str(source))
    assert {"CMakeLists.txt", "cmake/options.cmake", "config.h.in"} <= set(doc["configure_inputs"])
    assert not any(os.path.isabs(p) and p.startswith(str(source)) for p in doc["configure_inputs"])
    answer = _select(tmp_path / "map.json.gz", tmp_path, "config.h.in")
    assert answer["fallback"] == "configure-input" and answer["run"] == ["test_app"]
