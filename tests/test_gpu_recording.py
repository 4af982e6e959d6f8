"""On a GPU: the names CUPTI reports at run time are exactly the map's symbols (skipped without one).

The claim the whole design rests on. examples/cuda_ext is built with CMake
and its own map; a small pytest file calls its kernels under ``record`` and
under the plugin. Every recorded name must be a symbol of the map, each
test's kernels exactly the ones its code launches, and ``select`` on a
changed ``.cu`` file must pick exactly the tests that reach it. Prints the
recorder's overhead on a launch-bound loop.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import toolchains

from kernel_symbol_map.cmakedir import cmake_dir


def _gpus() -> int:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except OSError:
        return 0


pytestmark = pytest.mark.skipif(_gpus() == 0, reason="needs an NVIDIA GPU and its driver")

ROOT = Path(__file__).resolve().parents[1]
SHA = "c1" + "0" * 38  # a full SHA: select refuses any other name
SILU = {"_ZN4demo11silu_kernelEPfPKfi", "_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i"}
ATTENTION = {"_ZN4demo16attention_kernelILi64EEEvPfPKfi", "_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i"}
REDUCE = {"sum_kernel", "_ZN4demo12scale_kernelIdEEvPT_PKS1_S1_i"}
TESTS = """
import cuda_ext

def test_silu():
    cuda_ext.silu()

def test_attention():
    cuda_ext.attention(head_dim=64)

def test_reduce():
    cuda_ext.reduce()

def test_nothing():
    pass
"""
PARTIAL = """
import pytest
import cuda_ext

@pytest.mark.skipif(True, reason="stands for a GPU this runner lacks")
def test_skipped():
    cuda_ext.silu()

def test_failed():
    cuda_ext.attention(head_dim=64)
    assert False
"""
LOOP = "import cuda_ext, sys, time\nt = time.perf_counter()\nfor _ in range({n}): cuda_ext.reduce(1)\n" \
       "print(time.perf_counter() - t)\n"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(folder holding an importable cuda_ext, its map), built with CMake for this GPU."""
    nvcc = toolchains.require(toolchains.nvcc(), "nvcc")
    where = tmp_path_factory.mktemp("gpu")
    build = where / "build"
    subprocess.run(["cmake", "-S", str(ROOT / "examples" / "cuda_ext"), "-B", str(build), "-G", "Ninja",
                    f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DCMAKE_CUDA_ARCHITECTURES=native",
                    f"-DKernelSymbolMap_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}"], check=True)
    subprocess.run(["cmake", "--build", str(build)], check=True)
    package = where / "site" / "cuda_ext"
    shutil.copytree(ROOT / "examples" / "cuda_ext" / "cuda_ext", package)
    for lib in build.glob("lib*.so"):
        shutil.copy(lib, package)
    (where / "test_kernels.py").write_text(textwrap.dedent(TESTS))
    (where / "test_partial.py").write_text(textwrap.dedent(PARTIAL))
    (where / "pytest.ini").write_text("[pytest]\n")
    return where, build / "kernel_symbol_map.json.gz"


def _run(where: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(where / "site"))
    proc = subprocess.run(list(command), cwd=where, env=env, capture_output=True, text=True, check=False)
    print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_recorded_names_are_the_maps_symbols(example: tuple[Path, Path]) -> None:
    where, map_file = example
    symbols = {s for o in json.loads(gzip.decompress(map_file.read_bytes()))["objects"] for s in o["symbols"]}
    ksm = [sys.executable, "-m", "kernel_symbol_map"]
    proc = _run(where, *ksm, "record", "--step", "gpu", "--out", "rec", "--commit", SHA, "--",
                sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kernels.py")
    assert proc.returncode == 0
    (step,) = [json.loads(line) for line in (where / "rec" / "gpu.jsonl").read_text().splitlines()]
    assert step["complete"], step["reason"]
    assert set(step["kernels"]) == SILU | ATTENTION | REDUCE and set(step["kernels"]) <= symbols

    proc = _run(where, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kernels.py",
                "--kernel-record", "rec", "--kernel-record-commit", SHA)
    assert proc.returncode == 0
    found = {r["test"]: r for r in map(json.loads, (where / "rec" / "pytest.jsonl").read_text().splitlines())}
    assert all(r["complete"] for r in found.values()), found
    assert {t.split("::")[1]: set(r["kernels"]) for t, r in found.items()} == {
        "test_silu": SILU, "test_attention": ATTENTION, "test_reduce": REDUCE, "test_nothing": set()}

    doc = json.loads(gzip.decompress(map_file.read_bytes()))
    doc["commit"] = SHA  # the recordings' commit: one build, one run
    (where / "map.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    proc = _run(where, *ksm, "select", "--map", "map.json.gz", "--recordings", "rec/pytest.jsonl",
                "--changed", "csrc/reduce.cu", "--json")
    assert json.loads(proc.stdout)["run"] == ["test_kernels.py::test_reduce"]
    (where / "selection.json").write_text(proc.stdout)
    proc = _run(where, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_kernels.py",
                "--kernel-select", "selection.json")  # exactly the skipped ids are deselected
    assert proc.returncode == 0 and "PASSED test_kernels.py::test_reduce" in proc.stdout
    assert "3 deselected" in proc.stdout


def test_records_are_complete_only_for_tests_that_ran_whole(example: tuple[Path, Path]) -> None:
    """A skipped test and a failed one launch real kernels (or none): their records never clear them."""
    where, _ = example
    for extra in ([], ["-n", "2"]):  # one process, and pytest-xdist's workers joined
        proc = _run(where, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_partial.py",
                    "test_kernels.py", "--kernel-record", "rec-partial", "--kernel-record-commit", SHA, *extra)
        assert proc.returncode == 1  # test_failed fails
        found = {r["test"].split("::")[1]: r for r in
                 map(json.loads, (where / "rec-partial" / "pytest.jsonl").read_text().splitlines())}
        assert not found["test_skipped"]["complete"] and found["test_skipped"]["kernels"] == []
        assert not found["test_failed"]["complete"] and set(found["test_failed"]["kernels"]) == ATTENTION
        assert found["test_reduce"]["complete"] and set(found["test_reduce"]["kernels"]) == REDUCE, extra


def test_recorder_overhead_on_a_launch_bound_loop(example: tuple[Path, Path]) -> None:
    where, _ = example
    n = 3000
    (where / "loop.py").write_text(LOOP.format(n=n))
    plain = min(float(_run(where, sys.executable, "loop.py").stdout) for _ in range(3))
    t0 = time.perf_counter()
    recorded = min(float(_run(where, sys.executable, "-m", "kernel_symbol_map", "record", "--step", "loop",
                              "--out", "rec", "--", sys.executable, "loop.py").stdout.split()[0]) for _ in range(3))
    print(f"\nlaunch-bound loop, {2 * n} launches: {plain / (2 * n) * 1e6:.2f} us per launch unrecorded, "
          f"{recorded / (2 * n) * 1e6:.2f} us recorded: +{(recorded / plain - 1) * 100:.1f}% "
          f"(whole record run {time.perf_counter() - t0:.1f} s for 3 runs); target < 5%")
    # A figure, not an assertion: a test never depends on timing or load.
