"""Builds set up the way teams build: unity builds (and, below, Ninja Multi-Config)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import projects
import pytest
from toolchains import require

KSM = [sys.executable, "-m", "kernel_symbol_map"]


def _newest() -> projects.CMake:
    cmake = next((c for c in projects.cmakes() if c.label == "newest"), None)
    require(cmake and cmake.cmake, "PyPI's cmake")
    assert cmake is not None
    return cmake


def _map(build: Path, out: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([*KSM, "build", "--build-dir", str(build), "--out", str(out), "--commit", "c1", *extra],
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
    recs.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": "c1"}) + "\n"
                            for t, k in {"test_a2": ["_Z9a2_kernelPi"], "test_b": ["_Z8b_kernelPi"]}.items()))
    result = json.loads(subprocess.run([*KSM, "select", "--map", str(out), "--recordings", str(recs), "--changed",
                                        "csrc/a2.cu", "--json"], capture_output=True, text=True, check=True).stdout)
    assert result["run"] == ["test_a2"] and result["skip"] == ["test_b"]
    host = json.loads(subprocess.run([*KSM, "select", "--map", str(out), "--recordings", str(recs), "--changed",
                                      "csrc/host.cpp", "--json"], capture_output=True, text=True, check=True).stdout)
    assert host["fallback"] == "host-file"
    shown = subprocess.run([*KSM, "show", str(out)], capture_output=True, text=True, check=True).stdout
    assert "(unity of csrc/a.cu, csrc/a2.cu)" in shown
