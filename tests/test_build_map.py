"""`build` on real CMake builds of tests/projects/kernels: exact sources, targets, symbols and deps."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from conftest import BUILD_IDS
from projects import Build

from kernel_symbol_map.cli import main
from kernel_symbol_map.cli.validate import problems

SCALE_F = "_ZN7kernels12scale_kernelIfEEvPT_PKS1_S1_i"
SCALE_D = "_ZN7kernels12scale_kernelIdEEvPT_PKS1_S1_i"
# source (relative to the project, or to the build folder, "$BUILD/..."): (target, kernels, project headers)
EXPECTED: dict[str, tuple[str, set[str], set[str]]] = {
    "csrc/core/gemm.cu": ("core", {"_ZN7kernels11gemm_kernelEPfPKfS2_i"},
                          {"include/kernels/common.h", "include/kernels/device_only.cuh"}),
    "csrc/a/util.cu": ("core", {"_Z13util_a_kernelPi"}, set()),
    "csrc/b/util.cu": ("ops", {"_Z13util_b_kernelPi"}, set()),
    "csrc/ops/activation.cu": ("ops", {"_ZN7kernels11silu_kernelEPfPKfi", SCALE_F},
                               {"include/kernels/shared_kernel.cuh", "include/kernels/common.h"}),
    "csrc/host_only.cpp": ("ops", set(), {"include/kernels/common.h"}),
    "$BUILD/gen/generated_kernels.cu": ("ops", {"_Z16generated_kernelPf"}, set()),
    "csrc/attention/attn.cu": ("attention", {"_ZN7kernels16attention_kernelEPfPKfi", SCALE_F, SCALE_D},
                               {"include/kernels/shared_kernel.cuh"}),
    "third_party/fetched/src/fetched.cu": ("fetched_ops", {"_Z14fetched_kernelPi"},
                                           {"third_party/fetched/src/fetched.cuh"}),
    "csrc/rdc/producer.cu": ("rdc_ops", {"_Z9rdc_childPi"}, set()),
    "csrc/rdc/consumer.cu": ("rdc_ops", {"_Z10rdc_parentPi"}, set()),
}


def build_map(b: Build, tmp: Path, *extra: str, expect: int = 0) -> dict[str, Any]:
    out = tmp / f"{b.id}.json.gz"
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out), *extra]) == expect
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert problems(doc) == []  # every map our writer makes, complete or not, validates
    return doc


def by_source(doc: dict[str, Any], b: Build) -> dict[str, dict[str, Any]]:
    build_prefix = b.build.resolve().as_posix()
    assert build_prefix not in json.dumps(doc)  # no absolute build-tree path anywhere: "$BUILD/..." instead
    return {o["source"]: o for o in doc["objects"] if not o.get("device_link")}


@pytest.fixture(params=BUILD_IDS)
def built(request: pytest.FixtureRequest, kernel_builds: dict[str, Build]) -> Build:
    return kernel_builds[request.param]


def test_every_object_exactly(built: Build, tmp_path: Path) -> None:
    doc = build_map(built, tmp_path)
    assert "reason" not in doc and doc["errors"] == [] and not doc["incomplete"]
    objects = by_source(doc, built)
    assert set(objects) == set(EXPECTED)
    for source, (target, kernels, headers) in EXPECTED.items():
        o = objects[source]
        assert (o["target"], set(o["symbols"])) == (target, kernels), source
        assert o["device"] == source.endswith(".cu")
        assert o["symbols"] == sorted(o["symbols"])
        assert headers <= set(o["deps"]), (source, headers - set(o["deps"]))
        assert o["source"] in o["deps"] or o["source"].startswith("/")
    # The header kernel is reached from two targets; device-only includes are listed.
    assert "include/kernels/shared_kernel.cuh" not in objects["csrc/core/gemm.cu"]["deps"]
    assert doc["generator"] == built.generator
    assert doc["backend"] == "cuda" and doc["cuda"].count(".") == 1


def test_device_link_object_is_mapped(built: Build, tmp_path: Path) -> None:
    links = [o for o in build_map(built, tmp_path)["objects"] if o.get("device_link")]
    assert len(links) == 1 and links[0]["target"] == "rdc_ops"
    assert links[0]["object"].endswith("cmake_device_link.o")
    assert {"_Z9rdc_childPi", "_Z10rdc_parentPi"} <= set(links[0]["symbols"])
    assert {"csrc/rdc/producer.cu", "csrc/rdc/consumer.cu"} <= set(links[0]["deps"])


def test_stale_object_on_disk_is_not_mapped(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    stray = b.build / "CMakeFiles" / "ops.dir" / "csrc" / "removed_kernel.cu.o"
    shutil.copy(b.build / "CMakeFiles" / "ops.dir" / "csrc" / "b" / "util.cu.o", stray)
    try:
        doc = build_map(b, tmp_path)
    finally:
        stray.unlink()
    assert not any("removed_kernel" in o["object"] for o in doc["objects"])
    assert len(doc["objects"]) == len(EXPECTED) + 1


def test_hashed_object_names_are_paired_exactly(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["newest-ninja"]
    objects = by_source(build_map(b, tmp_path), b)
    assert all(o["object"].startswith(".o/") for o in objects.values())
    assert objects["csrc/a/util.cu"]["target"] == "core" and objects["csrc/b/util.cu"]["target"] == "ops"


def test_seed_consumer_rules(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    """The real consumer's rules (facts.md) applied to our map, as it reads the seed's."""
    doc = build_map(kernel_builds["3.25-ninja"], tmp_path)
    reach: dict[str, set[str]] = {}
    host: set[str] = set()
    unknown: set[str] = set()
    for o in doc["objects"]:
        for path in {o["source"], *o["deps"]}:
            reach.setdefault(path, set()).update(o["symbols"])
            if not o["symbols"]:
                host.add(path)
            if "error" in o:
                unknown.add(path)
    assert reach["include/kernels/shared_kernel.cuh"] == {
        "_ZN7kernels11silu_kernelEPfPKfi", SCALE_F, SCALE_D, "_ZN7kernels16attention_kernelEPfPKfi"
    }
    assert reach["include/kernels/device_only.cuh"] == {"_ZN7kernels11gemm_kernelEPfPKfS2_i"}
    assert "_Z9rdc_childPi" in reach["csrc/rdc/producer.cu"]
    assert "csrc/host_only.cpp" in host and reach["csrc/host_only.cpp"] == set()
    assert not unknown
    assert "csrc/not_in_the_build.cu" not in reach
    # the compilers, as the configure found them: output mode compares only builds of the same ones
    assert doc["toolchain"]["CUDA"].startswith("NVIDIA ") and doc["toolchain"]["CXX"], doc.get("toolchain")


def test_touching_a_header_changes_only_its_objects(tmp_path_factory: pytest.TempPathFactory, kernel_builds: dict[str, Build]) -> None:
    import projects

    b = projects.configure_and_build("kernels", tmp_path_factory.mktemp("edit"), kernel_builds["3.25-ninja"].cmake, "Ninja")
    tmp = tmp_path_factory.mktemp("maps")
    before = by_source(build_map(b, tmp), b)
    header = b.source / "include" / "kernels" / "shared_kernel.cuh"
    header.write_text(header.read_text() + "\n__global__ void header_added_kernel(int* p) { p[0] = 9; }\n")
    log = b.run_build()
    assert log.count("Building CUDA object") == 2, log
    after = by_source(build_map(b, tmp), b)
    changed = {s for s in before if before[s] != after[s]}
    assert changed == {"csrc/ops/activation.cu", "csrc/attention/attn.cu"}
    for s in changed:
        assert set(after[s]["symbols"]) - set(before[s]["symbols"]) == {"_Z19header_added_kernelPi"}


def _damage(data: bytes, how: str) -> bytes:
    if how == "truncate":  # mid-record, as a killed ninja leaves it
        return data[: len(data) // 2 + 3]
    if how == "header":
        return b"# ninjadepz\n" + data[12:]
    if how == "checksum":  # the first path record's ~id, its last 4 bytes; the path text stays intact
        (size,) = struct.unpack_from("<I", data, 16)
        assert not size & 0x8000_0000, "the log starts with a path record"
        at = 16 + 4 + size - 4
        return data[:at] + bytes(b ^ 0xFF for b in data[at : at + 4]) + data[at + 4 :]
    # a header path changed in place: the structure is intact, the path is wrong
    return data.replace(b"shared_kernel.cuh", b"shared_kernel.cuX")


@pytest.mark.parametrize("damage", ["truncate", "header", "checksum", "path"])
def test_damaged_ninja_deps_gives_a_reason_not_wrong_deps(
    kernel_builds: dict[str, Build], tmp_path: Path, damage: str
) -> None:
    b = kernel_builds["3.25-ninja"]
    log = b.build / ".ninja_deps"
    original = log.read_bytes()
    try:
        log.write_bytes(_damage(original, damage))
        doc = build_map(b, tmp_path)
    finally:
        log.write_bytes(original)
    assert doc["objects"] == [] and doc["incomplete"] and doc["errors"]
    expected = {"truncate": "truncated", "header": "not a ninja deps log", "checksum": "path record checksum mismatch",
                "path": "shared_kernel.cuX"}
    assert expected[damage] in doc["reason"]


@pytest.mark.parametrize("newer_ns", [1_000_000, 5_000_000_000])  # 1 ms: no tolerance hides a rewrite
def test_stale_deps_record_fails_closed(kernel_builds: dict[str, Build], tmp_path: Path, newer_ns: int) -> None:
    b = kernel_builds["3.25-ninja"]
    obj = b.build / "CMakeFiles" / "core.dir" / "csrc" / "a" / "util.cu.o"
    st = obj.stat()
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns + newer_ns))
    try:
        doc = build_map(b, tmp_path)
        strict = build_map(b, tmp_path, "--strict", expect=1)
    finally:
        os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert doc["objects"] == [] and "STALE" in doc["reason"]
    assert [e["source"] for e in doc["errors"]] == ["csrc/a/util.cu"]
    assert strict["reason"] == doc["reason"]


@pytest.mark.parametrize("build_id", ["3.25-ninja", "3.25-unix"])
def test_objects_older_than_their_sources_fail_closed(kernel_builds: dict[str, Build], tmp_path: Path,
                                                      build_id: str) -> None:
    """A checkout with no rebuild: git gives changed files a new mtime, and the objects are out of date."""
    b = kernel_builds[build_id]
    header = b.source / "include" / "kernels" / "device_only.cuh"
    st = header.stat()
    newest = max(p.stat().st_mtime_ns for p in b.build.rglob("*.o"))
    os.utime(header, ns=(st.st_atime_ns, newest + 1_000_000_000))  # a second after every object
    try:
        doc = build_map(b, tmp_path, "--no-cache")
    finally:
        os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert doc["objects"] == [] and doc["incomplete"] and "out of date" in doc["reason"]
    assert all("device_only.cuh is newer than the object" in e["error"] for e in doc["errors"])
    users = {e["source"] for e in doc["errors"]}
    assert users and "csrc/host_only.cpp" not in users  # only the objects that include it
    assert build_map(b, tmp_path, "--no-cache")["objects"]  # once rebuilt (here: the mtime put back), evidence


def test_missing_depfile_fails_closed(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["3.25-unix"]
    depfile = b.build / "CMakeFiles" / "attention.dir" / "csrc" / "attention" / "attn.cu.o.d"
    saved = depfile.read_bytes()
    depfile.unlink()
    try:
        doc = build_map(b, tmp_path)
    finally:
        depfile.write_bytes(saved)
    assert doc["objects"] == [] and "depfile missing" in doc["reason"]


def test_reply_is_refreshed_only_with_reconfigure(kernel_builds: dict[str, Build], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = kernel_builds["newest-unix"]
    shutil.rmtree(b.build / ".cmake" / "api" / "v1" / "reply")
    doc = build_map(b, tmp_path, "--no-cache")
    assert "re-ran" not in capsys.readouterr().out and "reason" not in doc
    assert doc["pairing"] == "Makefile2+DependInfo"
    doc = build_map(b, tmp_path, "--no-cache", "--reconfigure")  # and the shared build has its reply again
    assert "re-running the project's configure" in capsys.readouterr().out and doc["pairing"] == "DependInfo"


def test_reproducible_with_source_date_epoch(kernel_builds: dict[str, Build], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = kernel_builds["3.25-ninja"]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    monkeypatch.setenv("GITHUB_SHA", "0123abc")
    first, second = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    for out in (first, second):
        assert main(["build", "--build-dir", str(b.build), "--out", str(out)]) == 0
    assert first.read_bytes() == second.read_bytes()
    doc = json.loads(gzip.decompress(first.read_bytes()))
    assert doc["generated_at"] == "2023-11-14T22:13:20+00:00" and doc["commit"] == "0123abc"
    assert first.read_bytes()[4:8] == bytes(4)  # gzip MTIME


def test_commit_precedence(kernel_builds: dict[str, Build], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = kernel_builds["3.25-ninja"]
    monkeypatch.setenv("BUILDKITE_COMMIT", "from-buildkite")
    assert build_map(b, tmp_path, "--commit", "explicit")["commit"] == "explicit"
    assert build_map(b, tmp_path)["commit"] == "from-buildkite"


def test_seed_command_line(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    """The seed's flags: --build-root finds every build tree under it."""
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "seed.json.gz"
    assert main(["build", "--build-root", str(b.build.parent), "--source-root", str(b.source), "--out", str(out),
                 "--jobs", "8", "--commit", "abc"]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["commit"] == "abc" and len(doc["objects"]) == len(EXPECTED) + 1


def test_jobs_pool_gives_each_object_its_own_kernels(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    """--jobs with a cold cache, so the process pool really reads; its map equals the serial one."""
    b = kernel_builds["3.25-ninja"]
    serial = build_map(b, tmp_path / "serial", "--no-cache", "--commit", "abc")
    pooled = build_map(b, tmp_path / "pooled", "--no-cache", "--jobs", "2", "--commit", "abc")
    assert len({tuple(o["symbols"]) for o in serial["objects"]}) > 3  # objects differ, so a mix-up shows
    assert pooled["objects"] == serial["objects"]


def test_targets_filter_and_unknown_target(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    doc = build_map(b, tmp_path, "--targets", "attention", "core")
    assert {o["target"] for o in doc["objects"]} == {"attention", "core"}
    doc = build_map(b, tmp_path, "--targets", "nope")
    assert doc["objects"] == [] and "unknown target(s) nope" in doc["reason"]


def test_failed_write_leaves_the_old_map(kernel_builds: dict[str, Build], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "map.json.gz"
    out.write_bytes(b"old map")

    def broken(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    assert main(["build", "--build-dir", str(b.build), "--out", str(out)]) == 1
    assert out.read_bytes() == b"old map"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.json.gz"]


def test_show(kernel_builds: dict[str, Build], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = kernel_builds["3.25-ninja"]
    build_map(b, tmp_path)
    capsys.readouterr()
    assert main(["show", str(tmp_path / f"{b.id}.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "attention: 1 object, 3 kernels" in out
    assert "csrc/ops/activation.cu: 2 kernels" in out and "include/kernels/shared_kernel.cuh" in out
    assert "csrc/host_only.cpp (host): 0 kernels" in out
