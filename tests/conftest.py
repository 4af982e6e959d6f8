"""Session fixtures: real objects compiled once per test session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import toolchains
from toolchains import DATA, require, run, run_all

# Three gencode archs with PTX, as issue 2's matrix asks.
GENCODE3 = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_100,code=[sm_100,compute_100]",
]
SM80 = ["-gencode=arch=compute_80,code=[sm_80,compute_80]"]


@dataclass(frozen=True)
class Case:
    name: str
    path: Path


CUDA_OBJECTS: dict[str, list[str]] = {
    # name: nvcc arguments (relative to the data folder), output is <name>
    "gencode3.o": ["-c", "k.cu", *GENCODE3],
    "ptx_only.o": ["-c", "k.cu", "-gencode=arch=compute_90,code=compute_90"],
    "lto_only.o": ["-c", "k.cu", "-rdc=true", "-gencode=arch=compute_90,code=lto_90"],
    "rdc.o": ["-c", "k.cu", "-rdc=true", *SM80],
    "rdc_extern.o": ["-c", "dp.cu", "-rdc=true", *SM80],
    "compress_default.o": ["-c", "k.cu", *SM80, "--compress-mode=default"],
    "compress_size.o": ["-c", "k.cu", *SM80, "--compress-mode=size"],
    "compress_speed.o": ["-c", "k.cu", *SM80, "--compress-mode=speed"],
    "compress_balance.o": ["-c", "k.cu", *SM80, "--compress-mode=balance"],
    "compress_none.o": ["-c", "k.cu", *SM80, "--compress-mode=none"],
    "compress_all.o": ["-c", "k.cu", *SM80, "-Xfatbin=-compress-all"],
    "debug.o": ["-c", "k.cu", "-G", *SM80],
    "k2.o": ["-c", "k2.cu", *SM80],
    "raw.fatbin": ["-fatbin", "k.cu", *GENCODE3],
    "raw.cubin": ["-cubin", "k.cu", "-arch=sm_90"],
    "shared.so": ["-shared", "-Xcompiler=-fPIC", "k.cu", "k2.cu", *GENCODE3],
    "shared_rdc.so": ["-shared", "-Xcompiler=-fPIC", "-rdc=true", "dp.cu", "k2.cu", *SM80],
    "executable": ["main.cu", "k.cu", *SM80],
}


@pytest.fixture(scope="session")
def cuda_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every CUDA case of the issue's matrix, compiled once with the real nvcc."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    out = tmp_path_factory.mktemp("cuda")
    run_all(
        [[nvcc, *args, "-o", str(out / name)] for name, args in CUDA_OBJECTS.items()]
        + [["c++", "-c", "host.cpp", "-o", str(out / "host.o")]],
        cwd=DATA,
    )
    run(["ar", "rcs", str(out / "static.a"), "gencode3.o", "rdc.o", "k2.o", "host.o"], cwd=out)
    return {p.name: p for p in sorted(out.iterdir())}


@pytest.fixture(scope="session")
def cuobjdumps() -> dict[str, str]:
    found = toolchains.cuobjdumps()
    require("13.4" in found and "13.5" in found and "x", "cuobjdump 13.4 and 13.5")
    return found
