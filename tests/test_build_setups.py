"""Builds set up the way teams build them: unity builds, and Ninja Multi-Config."""

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
import toolchains
from toolchains import require

SHA = "c1" + "0" * 38  # a full SHA: select refuses any other name

KSM = [sys.executable, "-m", "kernel_symbol_map"]


def _newest() -> projects.CMake:
    cmake = next((c for c in projects.cmakes() if c.label == "newest"), None)
    require(cmake and cmake.cmake, "PyPI's cmake")
    assert cmake is not None
    return cmake


def _map(build: Path, out: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([*KSM, "build", "--build-dir", str(build), "--out", str(out), "--commit", SHA, *extra],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(gzip.decompress(out.read_bytes()))


@pytest.fixture(scope="module")
def unity_build(tmp_path_factory: pytest.TempPathFactory) -> projects.Build:
    where = tmp_path_factory.mktemp("unity")
    shutil.copytree(projects.PROJECTS / "selection", where / "src")
    (where / "src" / "include" / "alias.cuh").symlink_to("shared.cuh")
    return projects.configure_and_build_at(where / "src", where / "build", _newest(), "Ninja",
                                           "-DCMAKE_UNITY_BUILD=ON")


def test_unity_objects_name_their_real_sources(unity_build: projects.Build, tmp_path: Path) -> None:
    doc = _map(unity_build.build, tmp_path / "u.json.gz")
    assert "reason" not in doc
    found = {(o["target"], tuple(o.get("unity_sources", ()))): (o["device"], set(o["symbols"])) for o in doc["objects"]}
    anon = next(s for o in doc["objects"] for s in o["symbols"] if "anon_kernel" in s)
    assert found == {
        ("ka", ("csrc/a.cu", "csrc/a2.cu")): (True, {"_Z8a_kernelPf", "_Z9a2_kernelPi", "_Z13shared_kernelIfEvPT_"}),
        ("ka", ("csrc/host.cpp",)): (False, set()),  # a host-only constituent still counts as a host file
        ("kb", ("csrc/anon.cu", "csrc/b.cu")): (True, {"_Z8b_kernelPi", "_Z13shared_kernelIiEvPT_", anon}),
    }
    assert all(o["source"].startswith("$BUILD/") and "/Unity/unity_0_" in o["source"] for o in doc["objects"])


def test_a_changed_constituent_is_a_changed_source(unity_build: projects.Build, tmp_path: Path) -> None:
    out = tmp_path / "u.json.gz"
    _map(unity_build.build, out)
    answer = json.loads(subprocess.run([*KSM, "query", str(out), "csrc/a2.cu", "--json"], capture_output=True,
                                       text=True, check=True).stdout)["answers"][0]
    assert answer["status"] == "kernels" and {v["via"] for v in answer["via"]} == {"source"}
    recs = tmp_path / "r.jsonl"
    recs.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": SHA}) + "\n"
                            for t, k in {"test_a2": ["_Z9a2_kernelPi"], "test_b": ["_Z8b_kernelPi"]}.items()))
    result = json.loads(subprocess.run([*KSM, "select", "--map", str(out), "--recordings", str(recs), "--changed",
                                        "csrc/a2.cu", "--json"], capture_output=True, text=True, check=True).stdout)
    assert result["run"] == ["test_a2"] and result["skip"] == ["test_b"]
    host = json.loads(subprocess.run([*KSM, "select", "--map", str(out), "--recordings", str(recs), "--changed",
                                      "csrc/host.cpp", "--json"], capture_output=True, text=True, check=True).stdout)
    assert host["fallback"] == "host-file"
    shown = subprocess.run([*KSM, "show", str(out)], capture_output=True, text=True, check=True).stdout
    assert "(unity of csrc/a.cu, csrc/a2.cu)" in shown


@pytest.fixture(scope="module")
def multi_config(tmp_path_factory: pytest.TempPathFactory) -> projects.Build:
    """tests/projects/selection with Ninja Multi-Config, Release built (Debug is built by the test that wants it)."""
    where = tmp_path_factory.mktemp("multi")
    shutil.copytree(projects.PROJECTS / "selection", where / "src")
    (where / "src" / "include" / "alias.cuh").symlink_to("shared.cuh")
    b = projects.configure_and_build_at(where / "src", where / "build", _newest(), "Ninja Multi-Config", build=False)
    subprocess.run([b.cmake.cmake, "--build", str(b.build), "--config", "Release"], check=True, capture_output=True)
    return b


def _objects(doc: dict[str, Any]) -> dict[str, tuple[str, str, frozenset[str]]]:
    return {o["source"]: (o["target"], o["object"], frozenset(o["symbols"])) for o in doc["objects"]}


def test_multi_config_maps_the_configuration_that_was_built(multi_config: projects.Build, tmp_path: Path) -> None:
    doc = _map(multi_config.build, tmp_path / "one.json.gz")
    assert "reason" not in doc and doc["config"] == "Release"
    assert doc["pairing"] == "build-Release.ninja, checked against the file-API reply"
    objects = _objects(doc)
    assert set(objects) == {"csrc/a.cu", "csrc/a2.cu", "csrc/b.cu", "csrc/anon.cu", "csrc/host.cpp"}
    assert all(o[1].split("/")[2] == "Release" for o in objects.values())  # CMakeFiles/<t>.dir/Release/...
    assert objects["csrc/a2.cu"][2] == {"_Z9a2_kernelPi"}


def test_multi_config_with_two_configurations_built(multi_config: projects.Build, tmp_path: Path) -> None:
    subprocess.run([multi_config.cmake.cmake, "--build", str(multi_config.build), "--config", "Debug"], check=True,
                   capture_output=True)
    ambiguous = _map(multi_config.build, tmp_path / "two.json.gz", "--no-cache")
    assert ambiguous["objects"] == [] and "configurations Debug, Release are all built" in ambiguous["reason"]
    assert "--config" in ambiguous["reason"]
    debug = _map(multi_config.build, tmp_path / "debug.json.gz", "--config", "Debug")
    release = _map(multi_config.build, tmp_path / "release.json.gz", "--config", "Release")
    assert debug["config"] == "Debug" and release["config"] == "Release"
    assert {s: o[2] for s, o in _objects(debug).items()} == {s: o[2] for s, o in _objects(release).items()}
    assert all("/Debug/" in o[1] for o in _objects(debug).values())
    assert "no configuration 'Nope'" in _map(multi_config.build, tmp_path / "x.json.gz", "--config", "Nope")["reason"]


def test_multi_config_through_the_cmake_package(tmp_path: Path) -> None:
    """Inside a build, the package's target passes $<CONFIG>."""
    from kernel_symbol_map.cmakedir import cmake_dir

    cmake = _newest()
    build = tmp_path / "build"
    subprocess.run([cmake.cmake, "-S", str(projects.ROOT_EXAMPLE), "-B", str(build), "-G", "Ninja Multi-Config",
                    f"-DCMAKE_MAKE_PROGRAM={cmake.ninja}", "-DCMAKE_CUDA_ARCHITECTURES=80",
                    f"-DCMAKE_CUDA_COMPILER={require(toolchains.nvcc(), 'nvcc')}",
                    f"-DKernelSymbolMap_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}"],
                   check=True, capture_output=True)
    for config in ("Release", "Debug"):
        subprocess.run([cmake.cmake, "--build", str(build), "--config", config], check=True, capture_output=True)
        doc = json.loads(gzip.decompress((build / "kernel_symbol_map.json.gz").read_bytes()))
        assert "reason" not in doc and doc["config"] == config
        assert {o["source"] for o in doc["objects"]} == {"csrc/activation.cu", "csrc/attention.cu",
                                                          "csrc/host_only.cpp", "csrc/reduce.cu"}


def test_a_project_configured_through_a_symlink_is_mapped_with_relative_paths(tmp_path: Path) -> None:
    """``cmake -S /link``: the compilers spell every path through the link; the map still says csrc/..."""
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake, "system CMake 3.25")
    real = tmp_path / "real"
    shutil.copytree(projects.PROJECTS / "plain_skbuild", real)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    b = projects.configure_and_build_at(link, tmp_path / "build", cmake, "Ninja", "-DSKBUILD_PROJECT_NAME=plain_ext")
    for root in (None, real, link):  # the tree's own idea of its project, and either spelling given
        doc = _map(b.build, tmp_path / "m.json.gz", "--no-cache", *(["--source-root", str(root)] if root else []))
        paths = {p for o in doc["objects"] for p in (o["source"], *o["deps"])}
        project = {p for p in paths if not p.startswith("/usr")}
        assert {"csrc/plain.cu", "csrc/plain.h", "csrc/host.cpp"} <= project, root
        assert not {p for p in project if str(tmp_path) in p}, (root, sorted(project))
