"""Mapping a build tree never changes it, and never runs the project's configure unless asked.

Without a current file-API reply, the model comes read-only from what the
generator wrote (build.ninja, the Makefiles), and must equal the reply's
model exactly, on every test build.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import projects
import pytest
from conftest import BUILD_IDS
from projects import Build, both_models, model_key
from toolchains import require

from kernel_symbol_map.buildtree import fileapi

OURS = (".kernel_symbol_map", os.path.join(".cmake", "api", "v1", "query", "client-kernel_symbol_map"))


def snapshot(tree: Path) -> dict[str, tuple[int, int, str]]:
    """path -> (size, mtime_ns, sha256) of every file, but for the tool's own folder and query."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel, d)) not in OURS]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            st = os.stat(path)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            found[os.path.relpath(path, tree)] = (st.st_size, st.st_mtime_ns, digest)
    return found


@contextmanager
def no_reply(build: Path) -> Iterator[None]:
    """The tree as a retrofit finds it: the file-API reply moved aside (and put back)."""
    reply = build / ".cmake" / "api" / "v1" / "reply"
    hidden = reply.with_name("reply.hidden")
    if reply.exists():
        reply.rename(hidden)
    try:
        yield
    finally:
        if hidden.exists():
            shutil.rmtree(reply, ignore_errors=True)
            hidden.rename(reply)


def ksm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          env=env, check=False)


def no_work(b: Build) -> None:
    if b.generator == "Ninja":
        proc = subprocess.run([b.cmake.ninja, "-C", str(b.build), "-n"], capture_output=True, text=True, check=True)
        assert "no work to do" in proc.stdout, proc.stdout


@pytest.mark.parametrize("build_id", BUILD_IDS)
def test_the_generators_files_give_the_reply_s_model(kernel_builds: dict[str, Build], build_id: str) -> None:
    b = kernel_builds[build_id]
    from_reply, from_generator = both_models(b.build)
    assert from_generator.pairing == ("build.ninja" if b.generator == "Ninja" else "Makefile2+DependInfo")
    assert model_key(from_generator) == model_key(from_reply) and len(from_reply.objects) == 11
    assert (from_generator.source_root, from_generator.cuda_version, from_generator.cmake_version) == \
        (from_reply.source_root, from_reply.cuda_version, from_reply.cmake_version)


@pytest.mark.parametrize("project", ["kernels", "hip"])
@pytest.mark.parametrize("build_id", BUILD_IDS)
def test_build_leaves_the_tree_untouched(request: pytest.FixtureRequest, project: str, build_id: str,
                                         tmp_path: Path) -> None:
    b = request.getfixturevalue({"kernels": "kernel_builds", "hip": "hip_builds"}[project])[build_id]
    out = tmp_path / "map.json.gz"
    with no_reply(b.build):
        before = snapshot(b.build)
        proc = ksm("build", "--build-dir", str(b.build), "--out", str(out), "--commit", "x")
        after = snapshot(b.build)
    assert proc.returncode == 0, proc.stderr
    assert after == before
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["pairing"] in ("build.ninja", "Makefile2+DependInfo") and "reason" not in doc
    assert len(doc["objects"]) == {"kernels": 11, "hip": 5}[project]
    no_work(b)


@pytest.fixture(scope="module")
def env_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake and cmake.cmake, "system CMake 3.25")
    where = tmp_path_factory.mktemp("envflags")
    shutil.copytree(projects.PROJECTS / "envflags", where / "src")
    env = dict(os.environ, KSM_FLAVOUR="1")
    return projects.configure_and_build_at(where / "src", where / "build", cmake, "Ninja", query=False, env=env)


def test_a_changed_environment_never_reaches_the_build(env_build: Build, tmp_path: Path) -> None:
    b = env_build
    changed = dict(os.environ, KSM_FLAVOUR="2")  # CI's post-build step, in another environment
    before = snapshot(b.build)
    proc = ksm("build", "--build-dir", str(b.build), "--out", str(tmp_path / "m.json.gz"), env=changed)
    assert proc.returncode == 0, proc.stderr
    assert snapshot(b.build) == before and "re-ran" not in proc.stdout + proc.stderr
    no_work(b)
    doc = json.loads(gzip.decompress((tmp_path / "m.json.gz").read_bytes()))
    assert doc["pairing"] == "build.ninja" and doc["objects"][0]["symbols"] == ["_Z14flavour_kernelPi"]
    assert any("build.ninja" in n for n in doc["notes"])
    # The query is now in place: the project's next configure answers it.
    assert fileapi.query_file(b.build).is_file()


def test_reconfigure_is_an_explicit_opt_in_that_warns(env_build: Build, tmp_path: Path) -> None:
    b = env_build
    proc = ksm("build", "--build-dir", str(b.build), "--out", str(tmp_path / "m.json.gz"), "--reconfigure",
               "--no-cache", env=dict(os.environ, KSM_FLAVOUR="1"))
    assert proc.returncode == 0, proc.stderr
    assert "WARNING re-running the project's configure" in proc.stdout
    doc = json.loads(gzip.decompress((tmp_path / "m.json.gz").read_bytes()))
    assert doc["pairing"] == "ninja-compdb" and fileapi.reply_is_current(b.build)


def test_no_exact_model_fails_closed_and_says_how_to_get_one(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\nCMAKE_HOME_DIRECTORY:INTERNAL=/nowhere\n")
    proc = ksm("build", "--build-dir", str(build), "--out", str(tmp_path / "m.json.gz"))
    assert proc.returncode == 0
    doc = json.loads(gzip.decompress((tmp_path / "m.json.gz").read_bytes()))
    assert doc["incomplete"] and not doc["objects"]
    assert "build.ninja" in doc["reason"] and "--reconfigure" in doc["reason"]


ODD_NAMES = """
cmake_minimum_required(VERSION 3.25)
project(odd LANGUAGES CXX)
add_library(ops.v2 STATIC a.cpp)
add_library(k++ STATIC b.cpp)
"""


@pytest.mark.parametrize("label", ["3.25", "newest"])
@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_target_names_with_dots_and_pluses(tmp_path: Path, label: str, generator: str) -> None:
    """CMake encodes such names in ninja rule names (``ops.2ev2``, ``k.2b.2b``): the model decodes them."""
    cmake = next((c for c in projects.cmakes() if c.label == label), None)
    require(cmake, f"CMake {label}")
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(ODD_NAMES)
    (source / "a.cpp").write_text("int a() { return 1; }\n")
    (source / "b.cpp").write_text("int b() { return 2; }\n")
    b = projects.configure_and_build_at(source, tmp_path / "build", cmake, generator)
    from_reply, from_generator = both_models(b.build)
    assert {o.target for o in from_generator.objects} == {"ops.v2", "k++"}
    assert model_key(from_generator) == model_key(from_reply)
    assert all(o.error is None for o in from_generator.objects)
