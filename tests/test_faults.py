"""Faults while mapping: killed runs, a full disk, a read-only tree, concurrent runs, a build still running.

In every case the map on disk is the complete old one or a complete new one,
never a torn file, and no temporary file of ours outlives the next run.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from projects import Build

from kernel_symbol_map import _statefile, mapformat

KSM = [sys.executable, "-m", "kernel_symbol_map"]


def _decode(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _leftovers(*folders: Path) -> list[Path]:
    return [p for f in folders if f.is_dir() for p in f.iterdir() if p.name.endswith(".tmp")]


def _build(b: Build, out: Path, *extra: str) -> list[str]:
    return [*KSM, "build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
            "--commit", "new", *extra]


def _forget_cache(b: Build) -> None:
    for name in ("cache.json", "last-run.json"):
        (b.build / _statefile.FOLDER / name).unlink(missing_ok=True)


@pytest.fixture
def good(kernel_builds: dict[str, Build], tmp_path: Path) -> dict[str, Any]:
    """The complete map of the shared 3.25-ninja build, to compare every outcome with."""
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "good.json.gz"
    subprocess.run(_build(b, out, "--no-cache"), check=True, capture_output=True)
    return _decode(out)


def test_kill_9_at_many_points_leaves_the_old_or_the_new_map(
    kernel_builds: dict[str, Build], good: dict[str, Any], tmp_path: Path
) -> None:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "maps" / "kernel_symbol_map.json.gz"
    old = dict(good, commit="old")
    outcomes = {"old": 0, "new": 0}
    # 0 to 0.78 s (imports, the model, reading, writing, after), then one run left to finish
    points: list[float | None] = [i * 0.02 for i in range(40)] + [None]
    for delay in points:
        # What is on disk before this kill: without SOURCE_DATE_EPOCH gzip stamps the time, so each
        # rewrite of the old map has bytes of its own, and the verdict must compare against these.
        mapformat.write(old, out)
        old_bytes = out.read_bytes()
        _forget_cache(b)  # so that every run reads objects and writes its cache
        proc = subprocess.Popen(_build(b, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if delay is not None:
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        if out.read_bytes() == old_bytes:
            outcomes["old"] += 1
            continue
        doc = _decode(out)  # never a torn file: this decodes, validates and is complete
        assert mapformat.problems(doc) == [] and doc["objects"] == good["objects"] and doc["commit"] == "new"
        outcomes["new"] += 1
    print(f"\nkill -9 at {len(points) - 1} points, then a run to the end: {outcomes['old']} left the old map, "
          f"{outcomes['new']} the new one")
    assert sum(outcomes.values()) == len(points) and outcomes["old"] and outcomes["new"]
    subprocess.run(_build(b, out), check=True, capture_output=True)  # the next run cleans up after the killed ones
    assert _leftovers(out.parent, b.build / _statefile.FOLDER) == []
    assert _decode(out)["objects"] == good["objects"]


def _unshare_works() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode == 0


needs_mounts = pytest.mark.skipif(not _unshare_works(), reason="needs root and mount namespaces (unshare -m)")


@needs_mounts
def test_a_full_disk_keeps_the_old_map(kernel_builds: dict[str, Build], good: dict[str, Any], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    disk = tmp_path / "disk"
    disk.mkdir()
    old = tmp_path / "old.json.gz"
    mapformat.write(dict(good, commit="old", objects=good["objects"][:1]), old)
    out = disk / "kernel_symbol_map.json.gz"
    script = f"""
        set -e
        mount -t tmpfs -o size=64k tmpfs {disk}
        cp {old} {out}
        dd if=/dev/zero of={disk}/filler bs=1k count=1000 2>/dev/null || true
        set +e
        {' '.join(_build(b, out, '--no-cache'))}
        echo "rc=$?"
        cmp {old} {out} && echo same
        ls -a {disk}
    """
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, check=False)
    assert "rc=1" in proc.stdout and "same" in proc.stdout, proc.stdout + proc.stderr
    assert ".tmp" not in proc.stdout  # the half-written temporary file went with the failure
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "previous map is untouched" in errors[0]
    assert "Traceback" not in proc.stderr


@needs_mounts
def test_a_read_only_build_tree_is_still_mapped(kernel_builds: dict[str, Build], good: dict[str, Any], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "map.json.gz"
    _forget_cache(b)
    script = f"""
        set -e
        mount --bind {b.build} {b.build}
        mount -o remount,ro,bind {b.build}
        {' '.join(_build(b, out))}
    """
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = _decode(out)
    assert doc["objects"] == good["objects"]
    assert any("read-only" in n for n in doc.get("notes", [])) or "cannot write cache" in proc.stdout
    assert not (b.build / _statefile.FOLDER / "cache.json").exists()


def test_two_builds_at_once_give_a_valid_map_and_cache(
    kernel_builds: dict[str, Build], good: dict[str, Any], tmp_path: Path
) -> None:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path / "map.json.gz"
    for _ in range(4):
        _forget_cache(b)
        procs = [subprocess.Popen(_build(b, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        results = [p.communicate() for p in procs]
        assert [p.returncode for p in procs] == [0, 0], results
        assert _decode(out)["objects"] == good["objects"]
        cache = _statefile.read(b.build / _statefile.FOLDER / "cache.json", _tool(), lambda m: pytest.fail(m))
        assert isinstance(cache, dict) and len(cache) == len(good["objects"])
    assert _leftovers(out.parent, b.build / _statefile.FOLDER) == []


def _tool() -> str:
    from kernel_symbol_map._version import __version__

    return f"{__version__}/native"


# A compiler launcher that stops ninja at the two moments a map must never trust: the object half
# written, then whole but not yet in .ninja_deps. Each stop is announced by a file and held until
# the test creates the next gate, so the test maps at exactly those moments, whatever the load.
LAUNCHER = r"""#!/usr/bin/env python3
import os, subprocess, sys, time
args = sys.argv[1:]
gates = os.environ.get("KSM_TEST_GATES")
if not gates:
    sys.exit(subprocess.call(args))
out = args[args.index("-o") + 1]
args[args.index("-o") + 1] = out + ".whole"
code = subprocess.call(args)
if code:
    sys.exit(code)
def stop(name):
    open(os.path.join(gates, name + ".reached"), "w").close()
    deadline = time.monotonic() + 600
    while not os.path.exists(os.path.join(gates, name + ".go")):
        if time.monotonic() > deadline:
            sys.exit("launcher: no go for " + name)
        time.sleep(0.02)
data = open(out + ".whole", "rb").read()
with open(out, "wb") as f:
    f.write(data[: len(data) // 2])
stop("half")
with open(out, "wb") as f:
    f.write(data)
os.unlink(out + ".whole")
stop("whole")
"""

GATED = """
cmake_minimum_required(VERSION 3.25)
project(gated LANGUAGES CUDA)
add_library(gated STATIC k.cu other.cu)
"""


def _wait_for(path: Path, ninja: subprocess.Popen[bytes]) -> None:
    while not path.exists():
        assert ninja.poll() is None, "ninja ended before the launcher reached its gate"
        time.sleep(0.02)


def test_mapping_while_ninja_still_compiles_fails_closed(tmp_path: Path) -> None:
    """Forced, not hoped for: a half-written object, then a whole one ninja has not recorded yet."""
    import projects
    from toolchains import require

    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake, "system CMake 3.25")
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(GATED)
    (source / "k.cu").write_text("__global__ void gated_kernel(int* x) { x[0] = 1; }\n")
    (source / "other.cu").write_text("__global__ void other_kernel(int* x) { x[0] = 2; }\n")
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    b = projects.configure_and_build_at(source, tmp_path / "build", cmake, "Ninja",
                                        f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}")
    obj = b.build / "CMakeFiles" / "gated.dir" / "k.cu.o"
    before = _decode_map(b, tmp_path / "before.json.gz")
    assert before["objects"] and not before["incomplete"]

    (source / "k.cu").write_text("__global__ void gated_kernel(int* x) { x[0] = 3; }\n")
    gates = tmp_path / "gates"
    gates.mkdir()
    ninja = subprocess.Popen([b.cmake.ninja, "-C", str(b.build), "-j", "1"], stdout=subprocess.DEVNULL,
                             env=dict(os.environ, KSM_TEST_GATES=str(gates)))
    try:
        for stage in ("half", "whole"):
            _wait_for(gates / f"{stage}.reached", ninja)
            if stage == "half":
                assert 0 < obj.stat().st_size < (obj.with_name("k.cu.o.whole")).stat().st_size
            during = _decode_map(b, tmp_path / f"{stage}.json.gz")
            assert during["incomplete"] and during["objects"] == [] and during["reason"], stage
            assert [e["object"] for e in during["errors"]] == ["CMakeFiles/gated.dir/k.cu.o"], during["errors"]
            (gates / f"{stage}.go").touch()
        assert ninja.wait() == 0
    finally:
        for stage in ("half", "whole"):
            (gates / f"{stage}.go").touch()
        ninja.wait()
    after = _decode_map(b, tmp_path / "after.json.gz")
    assert not after["incomplete"] and [o["symbols"] for o in after["objects"]] == \
        [o["symbols"] for o in before["objects"]]


def _decode_map(b: Build, out: Path) -> dict[str, Any]:
    proc = subprocess.run([*KSM, "build", "--build-dir", str(b.build), "--out", str(out), "--commit", "c"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return _decode(out)
