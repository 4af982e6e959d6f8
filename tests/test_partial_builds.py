"""What vLLM's real build showed (issue 20), on small projects: FetchContent sources, code compiled by custom
commands, trees built in part, and the messages that say what to do next.

The projects are C++ only (fast to configure and build): every rule here is
about the build tree, not the device code.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import projects
import pytest
from toolchains import require

KSM = [sys.executable, "-m", "kernel_symbol_map"]

FETCHING = """
cmake_minimum_required(VERSION 3.25)
project(fetching LANGUAGES CXX)
include(FetchContent)
FetchContent_Declare(kernels_dep SOURCE_DIR ${DEP_DIR})
FetchContent_MakeAvailable(kernels_dep)
add_library(app STATIC app.cpp)
target_include_directories(app PRIVATE ${DEP_DIR}/include)
"""
DEP = """
cmake_minimum_required(VERSION 3.25)
project(kernels_dep LANGUAGES CXX)
add_library(dep_ops STATIC ops.cpp)
target_include_directories(dep_ops PUBLIC include)
"""
CUSTOM = """
cmake_minimum_required(VERSION 3.25)
project(custom LANGUAGES CXX)
add_library(mapped STATIC mapped.cpp)
# A library built by a custom command, as vLLM's DeepGEMM extension is (a Python build there):
# CMake's compile model never sees its objects.
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/libext.so
  COMMAND ${CMAKE_CXX_COMPILER} -shared -fPIC ${CMAKE_CURRENT_SOURCE_DIR}/ext/ext.cpp -o ${CMAKE_CURRENT_BINARY_DIR}/libext.so
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/ext/ext.cpp)
add_custom_target(ext_lib ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/libext.so)
"""
TWO_TARGETS = """
cmake_minimum_required(VERSION 3.25)
project(two LANGUAGES CXX)
add_library(small STATIC small.cpp)
add_library(big STATIC big1.cpp big2.cpp)
"""


def _cmake(label: str = "3.25") -> projects.CMake:
    cmake = next((c for c in projects.cmakes() if c.label == label), None)
    require(cmake, f"CMake {label}")
    assert cmake is not None
    return cmake


def _configure(source: Path, build: Path, generator: str = "Ninja", *extra: str, targets: list[str] | None = None,
               reply: bool = True) -> None:
    cmake = _cmake()
    if reply:
        from kernel_symbol_map.buildtree.fileapi import write_query

        write_query(build)
    command = [cmake.cmake, "-S", str(source), "-B", str(build), "-G", generator, *extra]
    if generator == "Ninja":
        command.append(f"-DCMAKE_MAKE_PROGRAM={cmake.ninja}")
    subprocess.run(command, check=True, capture_output=True)
    build_command = [cmake.cmake, "--build", str(build)]
    for t in targets or []:
        build_command += ["--target", t]
    subprocess.run(build_command, check=True, capture_output=True)


def _map(build: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run([*KSM, "build", "--build-dir", str(build), "--out", str(out), *extra],
                          capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(gzip.decompress(out.read_bytes()))


def _fetching_tree(where: Path) -> Path:
    dep = where / "elsewhere" / "kernels_dep"
    (dep / "include").mkdir(parents=True)
    (dep / "CMakeLists.txt").write_text(DEP)
    (dep / "include" / "dep.h").write_text("#pragma once\ninline int dep() { return 1; }\n")
    (dep / "ops.cpp").write_text('#include "dep.h"\nint ops() { return dep(); }\n')
    source = where / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(FETCHING)
    (source / "app.cpp").write_text('#include "dep.h"\nint app() { return dep() + 1; }\n')
    build = where / "build"
    _configure(source, build, "Ninja", f"-DDEP_DIR={dep}")
    return build


def test_fetchcontent_sources_are_spelled_portably_and_marked(tmp_path: Path) -> None:
    """The same project and dependency at two different places give byte-identical maps."""
    import os

    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", GITHUB_SHA="c" * 40)
    maps = []
    for where in (tmp_path / "one", tmp_path / "two" / "deeper"):
        where.mkdir(parents=True)
        build = _fetching_tree(where)
        doc = _map(build, where / "map.json.gz", env=env)
        maps.append((where / "map.json.gz").read_bytes())
    assert maps[0] == maps[1]
    assert doc["third_party"] == ["kernels_dep"]
    sources = {o["source"]: o for o in doc["objects"]}
    assert set(sources) == {"app.cpp", "$DEP/kernels_dep/ops.cpp"}
    assert "$DEP/kernels_dep/include/dep.h" in sources["app.cpp"]["deps"]
    assert not any(str(tmp_path) in d for o in doc["objects"] for d in o["deps"])
    shown = subprocess.run([*KSM, "show", str(tmp_path / "one" / "map.json.gz")], capture_output=True, text=True,
                           check=True).stdout
    assert "third-party (spelled $DEP/<name>/...): kernels_dep" in shown


@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_a_library_built_by_a_custom_command_is_named_unmapped(tmp_path: Path, generator: str) -> None:
    source = tmp_path / "src"
    (source / "ext").mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(CUSTOM)
    (source / "mapped.cpp").write_text("int mapped() { return 1; }\n")
    (source / "ext" / "ext.cpp").write_text("int ext() { return 2; }\n")
    _configure(source, tmp_path / "build", generator)
    doc = _map(tmp_path / "build", tmp_path / "map.json.gz")
    assert "reason" not in doc and [o["source"] for o in doc["objects"]] == ["mapped.cpp"]
    (unmapped,) = doc["unmapped_targets"]
    assert (unmapped["target"], unmapped["sources"]) == ("ext_lib", ["ext/ext.cpp"])
    assert any("custom commands compile code outside CMake's compile model (ext_lib)" in n for n in doc["notes"])
    answer = json.loads(subprocess.run([*KSM, "query", str(tmp_path / "map.json.gz"), "ext/ext.cpp", "--json",
                                        "--source-root", str(source)], capture_output=True, text=True).stdout)
    assert "ext_lib compiles it outside CMake's compile model" in answer["answers"][0]["why"]
    shown = subprocess.run([*KSM, "show", str(tmp_path / "map.json.gz")], capture_output=True, text=True).stdout
    assert "NOT MAPPED: ext_lib compiles 1 source outside CMake's compile model" in shown


@pytest.fixture
def half_built(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(TWO_TARGETS)
    for name in ("small", "big1", "big2"):
        (source / f"{name}.cpp").write_text(f"int {name}() {{ return 1; }}\n")
    _configure(source, tmp_path / "build", targets=["small"])
    return tmp_path / "build"


def test_unbuilt_objects_are_counted_per_target(half_built: Path, tmp_path: Path) -> None:
    doc = _map(half_built, tmp_path / "map.json.gz")
    assert doc["incomplete"] and doc["objects"] == []
    assert doc["reason"].startswith("2 of 3 objects are not built (big: 2 of 2), e.g. CMakeFiles/big.dir/")
    assert {(e["target"], e["error"]) for e in doc["errors"]} == {("big", "not built: the object file does not exist")}
    assert doc["stats"]["objects"] == 3 and doc["stats"]["symbols"] == 0 and "cuobjdump_errors" not in doc["stats"]
    shown = subprocess.run([*KSM, "show", str(tmp_path / "map.json.gz")], capture_output=True, text=True).stdout
    assert "big: 2 objects not built" in shown


def test_a_map_of_the_built_targets_is_complete_and_says_what_it_leaves_out(half_built: Path, tmp_path: Path) -> None:
    doc = _map(half_built, tmp_path / "map.json.gz", "--targets", "small")
    assert not doc["incomplete"] and [o["target"] for o in doc["objects"]] == ["small"]
    assert (doc["only_targets"], doc["all_targets"]) == (["small"], ["big", "small"])
    assert any("covers 1 of 2 targets (--targets); leaves out big" in n for n in doc["notes"])
    recordings = tmp_path / "r.jsonl"
    recordings.write_text(json.dumps({"test": "t", "kernels": [], "complete": True, "commit": doc["commit"] or "x"}))
    result = json.loads(subprocess.run([*KSM, "select", "--map", str(tmp_path / "map.json.gz"), "--recordings",
                                        str(recordings), "--changed", "small.cpp", "--json"],
                                       capture_output=True, text=True).stdout)
    assert result["fallback"] in ("map-subset", "commit-mismatch") and result["skip"] == []  # alone it clears nothing
    answer = json.loads(subprocess.run([*KSM, "query", str(tmp_path / "map.json.gz"), "big1.cpp", "--json"],
                                       capture_output=True, text=True).stdout)["answers"][0]
    assert answer["status"] == "not-in-map" and "the map covers only targets small (of 2); it leaves out big" \
        in answer["why"]


def test_a_damaged_ninja_log_says_how_to_recover(half_built: Path, tmp_path: Path) -> None:
    log = half_built / ".ninja_deps"
    saved = log.read_bytes()
    log.write_bytes(saved[:-3] + b"\xff\xff\xff")
    try:
        doc = _map(half_built, tmp_path / "map.json.gz", "--targets", "small", "--no-cache")
    finally:
        log.write_bytes(saved)
    assert "two ninja processes in one build folder" in doc["reason"] and "truncate -s" in doc["reason"]


def test_a_failed_reconfigure_names_its_log_and_what_to_do(half_built: Path, tmp_path: Path) -> None:
    shutil.rmtree(half_built / ".cmake" / "api" / "v1" / "reply")
    source = tmp_path / "src"
    (source / "CMakeLists.txt").write_text(TWO_TARGETS + "message(FATAL_ERROR \"this configure fails\")\n")
    doc = _map(half_built, tmp_path / "map.json.gz", "--reconfigure", "--no-cache")
    log = half_built / ".kernel_symbol_map" / "reconfigure.log"
    assert f"the whole output is in {log}" in doc["reason"] and "run your own configure" in doc["reason"]
    assert "this configure fails" in log.read_text()
