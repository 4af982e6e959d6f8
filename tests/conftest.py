"""Session fixtures: real objects compiled once per test session."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import native_programs as native_programs_module
import projects
import pytest
import toolchains
from toolchains import DATA, require, run, run_all

ROOT = Path(__file__).resolve().parents[1]
# The test projects' own suites (tests/projects/*/tests) run only where a test builds and records them.
collect_ignore_glob = ["projects/*"]
pytest_plugins = ["pytester"]  # the recorder's plugin is tested in a pytest run of its own

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
    "arch_specific.o": ["-c", "k.cu", "-gencode=arch=compute_90a,code=sm_90a"],  # the fatbin entry says "a"
    "module_names.cubin": ["-cubin", "names.cu", "-arch=sm_90"],  # kernels called info, init, entry
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


HIP_ARCHS = ["--offload-arch=gfx90a", "--offload-arch=gfx1030"]
CLANG_BARE = ["-x", "hip", "-nogpulib", "-nogpuinc", "-c", "h_bare.hip", *HIP_ARCHS]


@pytest.fixture(scope="session")
def hip_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """HIP objects from Debian's hipcc (clang-15) and clang-19, plus bundles rebuilt by the test.

    clang-19 compiles ``h_bare.hip`` without HIP headers (Debian's match
    clang-15); it is what can write compressed bundles and the new driver's
    ``.llvm.offloading`` section.
    """
    hipcc = require(toolchains.hipcc(), "hipcc (Debian package hipcc)")
    clang = require(toolchains.clang_hip(), "clang-19 (Debian packages clang-19, lld-19)")
    out = tmp_path_factory.mktemp("hip")
    env = {"HIP_PLATFORM": "amd"}
    o = lambda name: ["-o", str(out / name)]  # noqa: E731
    run_all(
        [
            [hipcc, "-c", "h.hip", *HIP_ARCHS, *o("hipcc.o")],
            [hipcc, "-shared", "-fPIC", "h.hip", "h2.hip", "--offload-arch=gfx90a", *o("hipcc.so")],
            [clang, *CLANG_BARE, *o("clang.o")],
            [clang, *CLANG_BARE, "--offload-compress", *o("clang_zstd.o")],
            [clang, *CLANG_BARE, "-fgpu-rdc", *o("clang_rdc.o")],
            [clang, *CLANG_BARE, "-fgpu-rdc", "--offload-new-driver", *o("clang_new_driver_rdc.o")],
            [clang, "-x", "hip", "-nogpulib", "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output", "-c", "h_bare.hip",
             "--offload-arch=gfx90a", *o("gfx90a.o")],
            ["c++", "-c", "host.cpp", *o("host.o")],
        ],
        cwd=DATA,
        env=env,
    )
    objcopy = "objcopy"
    # A raw bundle file: the .hip_fatbin section on its own.
    run([objcopy, "-O", "binary", "--only-section=.hip_fatbin", "hipcc.o", "raw.hipfb"], cwd=out)
    # zlib CCOB: clang-19 writes only zstd, so recompress its bundle.
    run([objcopy, "-O", "binary", "--only-section=.hip_fatbin", "clang_zstd.o", "zstd.hipfb"], cwd=out)
    (out / "zlib.hipfb").write_bytes(recompress_ccob_zlib((out / "zstd.hipfb").read_bytes()))
    run([objcopy, "--update-section", ".hip_fatbin=zlib.hipfb", "clang_zstd.o", "clang_zlib.o"], cwd=out)
    # .llvm.offloading holding a finished code object, as clang-offload-packager writes it.
    packager = str(Path(clang).resolve().parent / "clang-offload-packager")
    run([packager, "-o", "image.bin",
         "--image=file=gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"], cwd=out)
    run([objcopy, "--add-section", ".llvm.offloading=image.bin", "host.o", "offloading.o"], cwd=out)
    return {p.name: p for p in sorted(out.iterdir())}


def recompress_ccob_zlib(ccob: bytes) -> bytes:
    """The same bundle as a version-2 CCOB with method 0 (zlib)."""
    import struct
    import zlib

    import zstandard

    magic, version, method, total, size, digest = struct.unpack_from("<4sHHIIQ", ccob)
    assert (magic, version, method) == (b"CCOB", 2, 1)
    plain = zstandard.ZstdDecompressor().decompress(ccob[24:total], max_output_size=size)
    stream = zlib.compress(plain)
    return struct.pack("<4sHHIIQ", magic, 2, 0, 24 + len(stream), size, digest) + stream


def _build_configs() -> list[tuple[str, str, tuple[str, ...]]]:
    """(cmake label, generator, extra args): both generators on CMake 3.25 and on the newest CMake,
    the newest with CMAKE_INTERMEDIATE_DIR_STRATEGY=SHORT (hashed object names)."""
    short = ("-DCMAKE_INTERMEDIATE_DIR_STRATEGY=SHORT",)
    return [
        ("3.25", "Ninja", ()),
        ("3.25", "Unix Makefiles", ()),
        ("newest", "Ninja", short),
        ("newest", "Unix Makefiles", short),
    ]


BUILD_IDS = [f"{label}-{gen.split()[0].lower()}" for label, gen, _ in _build_configs()]


def _builds(tmp_path_factory: pytest.TempPathFactory, project: str, hip: bool = False) -> dict[str, projects.Build]:
    """``project`` built once per configuration, each from its own copy of the sources."""
    cmakes = {c.label: c for c in projects.cmakes()}
    require("3.25" in cmakes and "newest" in cmakes and "x", "system CMake 3.25 and PyPI's cmake")
    builds = {}
    for label, generator, extra in _build_configs():
        where = tmp_path_factory.mktemp(f"{project}-{label}-{generator.split()[0].lower()}")
        language = toolchains.hip_cmake_args(label, where) if hip else []
        b = projects.configure_and_build(project, where, cmakes[label], generator, *extra, *language)
        builds[b.id] = b
    return builds


@pytest.fixture(scope="session")
def kernel_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, projects.Build]:
    """tests/projects/kernels, per configuration."""
    return _builds(tmp_path_factory, "kernels")


@pytest.fixture(scope="session")
def hip_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, projects.Build]:
    """tests/projects/hip with CMake's HIP language (clang-15, gfx90a and gfx1030), per configuration."""
    return _builds(tmp_path_factory, "hip", hip=True)


CLANG_CUDA_MODES = {  # object: clang-19 flags, beyond the CUDA 12 root and sm_80
    "clang_default.o": [],
    "clang_new_driver.o": ["--offload-new-driver"],
    "clang_rdc.o": ["-fgpu-rdc"],
    "clang_new_driver_rdc.o": ["--offload-new-driver", "-fgpu-rdc"],  # .llvm.offloading with a cubin image
}


@pytest.fixture(scope="session")
def clang_cuda_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tests/data/k.cu compiled by clang-19 as a CUDA compiler, against PyPI's CUDA 12."""
    clang = require(toolchains.clang_hip(), "clang-19 (Debian package clang-19)")
    out = tmp_path_factory.mktemp("clang-cuda")
    root = toolchains.clang_cuda_root(out)
    base = [clang, "-x", "cuda", f"--cuda-path={root}", "--cuda-gpu-arch=sm_80", "-Wno-unknown-cuda-version", "-c", "k.cu"]
    run_all([[*base, *flags, "-o", str(out / name)] for name, flags in CLANG_CUDA_MODES.items()], cwd=DATA)
    return {name: out / name for name in CLANG_CUDA_MODES}


@pytest.fixture(scope="session")
def native_programs(tmp_path_factory: pytest.TempPathFactory) -> native_programs_module.Programs:
    """Real native programs for the recorder: a stand-in driver library, static and dynamic executables."""
    return native_programs_module.build(tmp_path_factory.mktemp("native-programs"))


@pytest.fixture(scope="session")
def our_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)])
    (wheel,) = out.glob("kernel_symbol_map-*-py3-none-*.whl")  # plain C inside (the audit library): no Python ABI
    return wheel


@pytest.fixture(scope="session")
def clean_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip in a fresh venv: build isolation then sees only our wheel, not this checkout."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(venv)])
    return venv / "bin" / "pip"


def example_wheel(pip: Path, our_wheel: Path, project: Path, out: Path, *config: str) -> Path:
    """``pip wheel`` of an example project (sm_80, the real nvcc), its build folder kept in ``out/build``."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    run([str(pip), "wheel", "-q", str(project), "--find-links", str(our_wheel.parent), "-w", str(out),
         "-C", "cmake.define.CMAKE_CUDA_ARCHITECTURES=80", "-C", f"cmake.define.CMAKE_CUDA_COMPILER={nvcc}",
         "-C", f"build-dir={out / 'build'}", *config])
    (wheel,) = out.glob("cuda_ext-*.whl")
    return wheel
