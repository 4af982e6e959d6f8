"""ROCm end to end: a CMake HIP project (clang-15, two archs) mapped exactly on both CMakes and generators."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import BUILD_IDS
from projects import Build, both_models, model_key

from kernel_symbol_map import mapformat, read_kernels
from kernel_symbol_map.cli import main

SHA = "c1" + "0" * 38  # a full SHA: select refuses any other name

SCALE_F, SCALE_I = "_Z12scale_kernelIfEvPT_S0_", "_Z12scale_kernelIiEvPT_S0_"
EXPECTED = {  # source: (target, kernels)
    "csrc/act.hip": ("hk", {"_Z10act_kernelPf", SCALE_F}),
    "csrc/attn.hip": ("hk", {"_Z11attn_kernelPf", SCALE_F}),
    "csrc/host.cpp": ("hk", set()),
    "csrc/rdc_a.hip": ("hrdc", {"_Z12rdc_a_kernelPi", SCALE_I}),  # -fgpu-rdc: from the bitcode
    "csrc/rdc_b.hip": ("hrdc", {"_Z12rdc_b_kernelPi"}),
}


def build_map(b: Build, tmp: Path, *extra: str) -> dict[str, Any]:
    out = tmp / f"{b.id}.json.gz"
    assert main(["build", "--build-dir", str(b.build), "--out", str(out), "--commit", SHA, *extra]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert mapformat.problems(doc) == [] and mapformat.schema_problems(doc) == []
    return doc


@pytest.mark.parametrize("build_id", BUILD_IDS)
def test_hip_project_is_mapped_exactly(hip_builds: dict[str, Build], build_id: str, tmp_path: Path) -> None:
    b = hip_builds[build_id]
    doc = build_map(b, tmp_path)
    assert "reason" not in doc, doc.get("reason")
    assert doc["backend"] == "rocm"
    found = {o["source"]: (o["target"], set(o["symbols"])) for o in doc["objects"]}
    assert found == EXPECTED
    by_source = {o["source"]: o for o in doc["objects"]}
    for source in ("csrc/act.hip", "csrc/attn.hip", "csrc/rdc_a.hip"):
        assert "include/common.hpp" in by_source[source]["deps"]
        assert by_source[source]["archs"] == ["gfx1030", "gfx90a"] and by_source[source]["device"]
    scanned = {o["source"] for o in doc["objects"] if o.get("deps_from") == "cmake-scan"}
    preprocessed = {o["source"] for o in doc["objects"]
                    if o.get("deps_from") in ("device-scan-deps", "device-preprocessor")}
    # clang-15's own clang-scan-deps (clang-tools-15) answers every object in one process; without it, one run each.
    method = "device-scan-deps" if shutil.which("clang-scan-deps-15") else "device-preprocessor"
    assert {o.get("deps_from") for o in doc["objects"] if o["source"] in preprocessed} <= {method}
    if b.generator == "Unix Makefiles":  # no compiler depfile for HIP: CMake's scan, project headers only
        assert scanned == {s for s in EXPECTED if s.endswith(".hip")} and not preprocessed
        assert any("project headers only" in n for n in doc["notes"])
    else:  # clang's -MD holds the host job only: the device side is preprocessed per architecture
        assert not scanned and preprocessed == {s for s in EXPECTED if s.endswith(".hip")}
        assert any(d.startswith("/usr/") for d in by_source["csrc/act.hip"]["deps"])  # the compiler's -MD
    # Device-only and one-architecture includes are deps, whichever way they were found.
    assert "include/device_only.hpp" in by_source["csrc/act.hip"]["deps"]
    assert "include/arch_only.hpp" in by_source["csrc/attn.hip"]["deps"]


@pytest.mark.parametrize("build_id", BUILD_IDS)
def test_hip_generator_model_equals_the_reply_s(hip_builds: dict[str, Build], build_id: str) -> None:
    from_reply, from_generator = both_models(hip_builds[build_id].build)
    assert model_key(from_generator) == model_key(from_reply)
    assert {o.language for o in from_reply.objects} == {"HIP", "CXX"}


def test_a_changed_hip_header_selects_the_right_tests(hip_builds: dict[str, Build], tmp_path: Path) -> None:
    doc = build_map(hip_builds["newest-ninja"], tmp_path)
    path = tmp_path / "map.json.gz"
    mapformat.write(doc, path)
    recs = tmp_path / "r.jsonl"
    recs.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": SHA}) + "\n" for t, k in
                            {"test_act": ["_Z10act_kernelPf"], "test_rdc": ["_Z12rdc_b_kernelPi"]}.items()))
    from kernel_symbol_map.consumer.maps.kernelmap import load
    from kernel_symbol_map.consumer.select.recordings import read
    from kernel_symbol_map.consumer.select.selection import select

    s = select(load(path), read([recs]), ["include/common.hpp"])
    assert s.to_run == ["test_act"] and s.fallback is None


def _bundler() -> str:
    clang = shutil.which("clang-19")
    return str(Path(clang or "").resolve().parent / "clang-offload-bundler")


def test_native_reader_agrees_with_llvm_readelf(hip_builds: dict[str, Build], tmp_path: Path) -> None:
    """No cuobjdump for AMD: unbundle each code object and list its `.kd` symbols with llvm-readelf."""
    readelf = str(Path(_bundler()).parent / "llvm-readelf")
    checked = 0
    for b in hip_builds.values():
        for obj in sorted(b.build.rglob("*.o")):  # one bundle each; a linked .so holds one per unit
            result = read_kernels(obj)
            if not result.device:
                continue  # host code
            fatbin = tmp_path / "fatbin"
            subprocess.run(["objcopy", f"--dump-section=.hip_fatbin={fatbin}", str(obj), str(tmp_path / "x.o")],
                           check=False, capture_output=True)
            if not fatbin.exists():
                continue  # -fgpu-rdc objects hold bitcode: test_hip.py checks those against llvm-dis
            for arch in result.archs:
                code = tmp_path / f"{arch}.co"
                subprocess.run([_bundler(), "--unbundle", "--type=o", f"--input={fatbin}", f"--output={code}",
                                f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}"], check=True, capture_output=True)
                out = subprocess.run([readelf, "--symbols", "-W", str(code)], capture_output=True, text=True,
                                     check=True).stdout
                reference = {line.split()[-1][: -len(".kd")] for line in out.splitlines()
                             if line.split() and line.split()[-1].endswith(".kd") and " UND " not in line}
                assert set(result.kernels[arch]) == reference, (obj, arch)
                checked += 1
            fatbin.unlink()
    print(f"\nnative reader == llvm-readelf on {checked} code objects")
    assert checked == 4 * 2 * 2  # 4 builds x 2 non-rdc objects x 2 archs


def test_backend_is_mixed_when_a_map_holds_cuda_and_amd_code(hip_builds: dict[str, Build],
                                                             kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    out = tmp_path / "both.json.gz"
    hip, cuda = hip_builds["newest-ninja"], kernel_builds["newest-ninja"]
    assert main(["build", "--build-dir", str(hip.build), "--build-dir", str(cuda.build), "--out", str(out),
                 "--commit", SHA, "--no-cache"]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["backend"] == "mixed" and "reason" not in doc


@pytest.fixture(scope="module")
def hipcc_cxx_builds(tmp_path_factory: pytest.TempPathFactory) -> list[Build]:
    """tests/projects/hipcxx: hipcc as CMAKE_CXX_COMPILER, kernels in .cpp (HIP_PLATFORM=amd throughout)."""
    import os

    import projects
    import toolchains

    hipcc = toolchains.require(toolchains.hipcc(), "hipcc")
    cmakes = {c.label: c for c in projects.cmakes()}
    saved = os.environ.get("HIP_PLATFORM")
    os.environ["HIP_PLATFORM"] = "amd"
    try:
        return [projects.configure_and_build("hipcxx", tmp_path_factory.mktemp(f"hipcxx-{label}"), cmakes[label],
                                             generator, f"-DCMAKE_CXX_COMPILER={hipcc}")
                for label, generator in (("3.25", "Ninja"), ("newest", "Unix Makefiles"))]
    finally:
        if saved is None:
            os.environ.pop("HIP_PLATFORM")
        else:
            os.environ["HIP_PLATFORM"] = saved


def test_hipcc_as_the_cxx_compiler(hipcc_cxx_builds: list[Build], tmp_path: Path) -> None:
    for b in hipcc_cxx_builds:
        doc = build_map(b, tmp_path)
        found = {o["source"]: (o["device"], o["symbols"], o["archs"]) for o in doc["objects"]}
        assert found == {"kern.cpp": (True, ["_Z10cxx_kernelPf"], ["gfx1030", "gfx90a"]), "host.cpp": (False, [], [])}
        assert doc["backend"] == "rocm"
