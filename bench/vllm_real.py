"""vLLM's real build, configured here, mapped, and compared: the truest test this project has (issue 20).

    .venv/bin/python bench/vllm_real.py [--work .cache/vllm] [--deps DIR] [--venv DIR] [--objects 6]

Opt-in, never part of ``scripts/test``: it downloads vLLM's source release and
torch (a CUDA 13.0 build, several GB), and takes about 15 minutes. Steps:

1. a virtual environment with vLLM's build requirements (``--venv`` reuses one);
2. vLLM 0.33.0's source release from PyPI, unpacked and committed to a new git
   repository (an sdist has no .git), so that what the configure writes is untracked;
3. every FetchContent dependency from a local folder, through vLLM's own
   variables (``VLLM_CUTLASS_SRC_DIR``...): ``--deps DIR`` holds ``cutlass``,
   ``flash-attention``, ``flashmla``, ``deepgemm`` and ``qutlass`` (checkouts,
   or snapshots; without it they are cloned at vLLM's pinned revisions), and
   DeepSelect, FlashKDA, fmha_sm100, tml-fa4 and triton_kernels get stubs;
4. a merged CUDA toolkit folder: nvcc's ``bin/``, the include and lib folders
   of the system CUDA and of the venv's ``nvidia/cu13``, unversioned ``.so``
   links, and an empty ``lib/stubs/libcuda.so``;
5. configure for sm_90 with clang-19 as the C, C++ and CUDA host compiler
   (Debian's GCC 12 fails vLLM's ``GCC >= 13`` check), with this package's
   retrofit include (``CMAKE_PROJECT_TOP_LEVEL_INCLUDES``): the tree gets the
   file-API query and the package's own ``kernel_symbol_map`` command;
6. build the ``--objects`` smallest CUDA objects and the host-only targets;
7. map the tree by hand (``build``), with the retrofit's own command, and by
   hand for the targets that are fully built (``--targets``); compare the built
   objects' kernels with cuobjdump (``symbols --cross-check``);
8. print a short report, and write it to ``<work>/report.txt``.

One ninja at a time in the build folder: two corrupt ``.ninja_deps``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run import checked  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.33.0"
TORCH = os.environ.get("KSM_VLLM_TORCH", "torch==2.14.0")  # a CUDA 13.0 build on PyPI
BUILD_REQUIREMENTS = ["cmake>=3.26.1", "ninja", "packaging>=24.2", "setuptools>=77,<81", "setuptools-scm>=8",
                      "wheel", "jinja2", "regex", "numpy"]
# FetchContent dependency -> (vLLM's variable, folder under --deps, the repository to clone without --deps)
DEPENDENCIES = {
    "cutlass": ("VLLM_CUTLASS_SRC_DIR", "cutlass", "https://github.com/nvidia/cutlass.git"),
    "flash-attn": ("VLLM_FLASH_ATTN_SRC_DIR", "flash-attention", "https://github.com/vllm-project/flash-attention.git"),
    "flashmla": ("FLASH_MLA_SRC_DIR", "flashmla", "https://github.com/vllm-project/FlashMLA"),
    "deepgemm": ("DEEPGEMM_SRC_DIR", "deepgemm", "https://github.com/vllm-project/DeepGEMM.git"),
    "qutlass": ("QUTLASS_SRC_DIR", "qutlass", "https://github.com/IST-DASLab/qutlass.git"),
}
STUBS = {"DEEPSELECT_SRC_DIR": "deepselect", "FLASH_KDA_SRC_DIR": "flashkda", "FMHA_SM100_SRC_DIR": "fmha_sm100",
         "TML_FA4_SRC_DIR": "tml_fa4", "TRITON_KERNELS_SRC_DIR": "triton_kernels"}
HOST_TARGETS = ["cumem_allocator", "fs_io_C", "spinloop"]
MISSING_SOURCE = regex.compile(r"Cannot find source file:\s+(\S+)")
NAMED_SOURCE = regex.compile(r"\$\{(\w+)_SOURCE_DIR\}/([\w./+-]+\.(?:cu|cpp|cc|c|h|hpp|cuh|py))")


def log(message: str) -> None:
    print(f"vllm_real: {message}", flush=True)


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return checked("vllm_real", command, **kwargs)


def venv(work: Path, given: Path | None) -> Path:
    if given:
        return given
    folder = work / "venv"
    python = folder / "bin" / "python"
    if not python.exists():
        log(f"making {folder} with {TORCH} and vLLM's build requirements (downloads several GB)")
        run([sys.executable, "-m", "venv", folder])
        run([python, "-m", "pip", "install", "-q", TORCH, *BUILD_REQUIREMENTS])
    return folder


def sdist(work: Path) -> Path:
    source = work / f"vllm-{VERSION}"
    if source.is_dir():
        return source
    archive = work / f"vllm-{VERSION}.tar.gz"
    if not archive.exists():
        index = "https://pypi.org/simple/vllm/"
        request = urllib.request.Request(index, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=120) as r:
            files = json.load(r)["files"]
        (url,) = [f["url"] for f in files if f["filename"] == f"vllm-{VERSION}.tar.gz"]
        log(f"downloading {url}")
        with urllib.request.urlopen(url, timeout=600) as r, archive.open("wb") as f:
            shutil.copyfileobj(r, f)
    with tarfile.open(archive) as t:
        t.extractall(work, filter="data")
    # An sdist has no .git: commit what it ships, before any configure, as a checkout would have it, so that the
    # sources the configure writes into csrc/ (marlin, machete) are the untracked ones (configure_generated).
    for command in (["git", "init", "-q"], ["git", "add", "-A"],
                    ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "sdist"]):
        run(command, cwd=source)
    return source


def dependencies(work: Path, deps: Path | None, source: Path) -> dict[str, str]:
    """vLLM's environment variables, each naming a local folder."""
    env = {}
    for name, (variable, folder, url) in DEPENDENCIES.items():
        path = deps / folder if deps else work / "deps" / folder
        if not path.is_dir():
            log(f"cloning {url} for {name}")
            run(["git", "clone", "--depth", "1", url, path])
        env[variable] = str(path)
    for variable, folder in STUBS.items():  # what this check never builds: a non-empty folder each
        stub = work / "stubs" / folder
        stub.mkdir(parents=True, exist_ok=True)
        (stub / "README").write_text("a stub for vllm_real.py\n")
        env[variable] = str(stub)
    return env


def toolkit(work: Path, python_venv: Path) -> Path:
    """A CUDA root CMake and vLLM accept: the system's nvcc and headers, and the venv's cu13 libraries."""
    root = work / "cuda"
    if (root / "bin" / "nvcc").exists():
        return root
    system = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")).resolve()
    wheels = next((python_venv / "lib").glob("python3*/site-packages/nvidia/cu13"))
    shutil.copytree(system / "bin", root / "bin", symlinks=True)
    for item in sorted(system.iterdir()):  # nvvm/ (cicc), targets/, share/...: as the toolkit has them
        if item.name not in ("bin", "include", "lib", "lib64"):
            (root / item.name).symlink_to(item)
    for kind in ("include", "lib"):
        (root / kind).mkdir(parents=True, exist_ok=True)
        for origin in (system / "targets" / "x86_64-linux" / kind, system / kind, wheels / kind):
            for item in sorted(origin.iterdir()) if origin.is_dir() else []:
                if not (root / kind / item.name).exists():
                    (root / kind / item.name).symlink_to(item)
    for versioned in sorted((root / "lib").glob("lib*.so.*")):  # libcublas.so.13 -> libcublas.so
        plain = root / "lib" / (versioned.name.split(".so")[0] + ".so")
        if not plain.exists():
            plain.symlink_to(versioned)
    (root / "lib64").symlink_to("lib")
    (root / "lib" / "stubs").mkdir(exist_ok=True)
    empty = root / "lib" / "stubs" / "empty.c"
    empty.write_text("")
    run(["gcc", "-shared", "-o", root / "lib" / "stubs" / "libcuda.so", empty])
    return root


def fill_named_sources(source: Path, env: dict[str, str]) -> None:
    """Every ``${<dep>_SOURCE_DIR}/file`` vLLM's CMake names, as an empty file where the folder lacks it.

    A snapshot at another revision than vLLM pins, or a stub, lacks some; the
    configure needs them to exist, and this check builds none of those targets.
    """
    folders = {_plain(Path(env[v]).name): Path(env[v]) for v in [*STUBS, *(d[0] for d in DEPENDENCIES.values())]}
    for cmake_file in sorted((source / "cmake" / "external_projects").glob("*.cmake")):
        for prefix, rel in NAMED_SOURCE.findall(cmake_file.read_text()):
            folder = folders.get(_plain(prefix))
            if folder is not None and not (folder / rel).exists() and "*" not in rel and "$" not in rel:
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).touch()


def _plain(name: str) -> str:
    return regex.sub(r"[^a-z0-9]", "", name.lower())


def configure(work: Path, source: Path, build: Path, cmake: Path, ninja: Path, python: Path, cuda: Path,
              include: str, env: dict[str, str]) -> None:
    """Configure for sm_90 with clang-19; a source a dependency snapshot or stub lacks gets an empty file.

    Stubs and snapshots at other revisions than vLLM pins may lack a file its
    CMakeLists names: configure cannot finish without it, and this check never
    builds those targets.
    """
    log("configuring (about a minute)")
    fill_named_sources(source, env)
    started = time.perf_counter()
    for _ in range(40):  # CMake names a few missing files a run
        proc = subprocess.run([cmake, "-S", source, "-B", build, "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
                               "-DCMAKE_BUILD_TYPE=Release", f"-DVLLM_PYTHON_EXECUTABLE={python}",
                               f"-DFETCHCONTENT_BASE_DIR={source / '.deps'}", f"-DCMAKE_CUDA_COMPILER={cuda}/bin/nvcc",
                               "-DCMAKE_C_COMPILER=clang-19", "-DCMAKE_CXX_COMPILER=clang++-19",
                               "-DCMAKE_CUDA_HOST_COMPILER=clang++-19", "-DCMAKE_CUDA_ARCHITECTURES=90",
                               f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={include}",
                               f"-DKernelSymbolMap_PYTHON_EXECUTABLE={sys.executable}"],
                              capture_output=True, text=True, env=env, check=False)
        (work / "configure.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode == 0:
            log(f"configured in {time.perf_counter() - started:.0f} s")
            return
        missing = [Path(p) for p in MISSING_SOURCE.findall(proc.stderr)
                   if str(work) in p and source not in Path(p).parents]
        if not missing:
            break
        for path in missing:
            log(f"an empty {path}: the snapshot or stub lacks it, and this check never builds it")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    raise SystemExit(f"vllm_real: configure failed; see {work / 'configure.log'}:\n{proc.stderr[-3000:]}")


def generated_sources(work: Path, source: Path) -> list[Path]:
    """Files in csrc/ that the source release does not hold: the configure's generators wrote them."""
    with tarfile.open(work / f"vllm-{VERSION}.tar.gz") as t:
        shipped = {source.parent / m.name for m in t.getmembers() if m.isfile()}
    return sorted(p for p in (source / "csrc").rglob("*") if p.is_file() and p not in shipped)


def ninja_targets_of(build: Path, ninja: Path, suffix: str) -> list[str]:
    return [line.split(":")[0] for line in run([ninja, "-C", build, "-t", "targets", "all"]).stdout.splitlines()
            if line.split(":")[0].endswith(suffix)]


def timed(command: list[str], **kwargs: object) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *map(str, command)], capture_output=True, text=True,
                          check=False, **kwargs)
    peak = int(proc.stderr.strip().splitlines()[-1]) * 1024 if proc.stderr.strip() else 0
    return time.perf_counter() - started, peak, proc


def load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=ROOT / ".cache" / "vllm")
    ap.add_argument("--deps", type=Path, help="a folder with cutlass, flash-attention, flashmla, deepgemm, qutlass")
    ap.add_argument("--venv", type=Path, help="a virtual environment with torch and vLLM's build requirements")
    ap.add_argument("--objects", type=int, default=6, help="how many of the smallest CUDA objects to build")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    deps = args.deps.resolve() if args.deps else None  # CMake reads these folders from the source root
    python_venv = venv(work, args.venv)
    python = python_venv / "bin" / "python"
    cmake, ninja = python_venv / "bin" / "cmake", python_venv / "bin" / "ninja"
    source = sdist(work)
    env = dict(os.environ, **dependencies(work, deps, source), TORCH_CUDA_ARCH_LIST="9.0",
               VLLM_TARGET_DEVICE="cuda", MAX_JOBS=str(args.jobs))
    cuda = toolkit(work, python_venv)
    env.update(CUDA_HOME=str(cuda), PATH=f"{cuda / 'bin'}{os.pathsep}{env['PATH']}")
    build = work / "build"
    include = run([sys.executable, "-m", "kernel_symbol_map", "--cmake-include"]).stdout.strip()
    if not (build / "build.ninja").exists():
        configure(work, source, build, cmake, ninja, python, cuda, include, env)
    generated = generated_sources(work, source)

    objects = ninja_targets_of(build, ninja, ".cu.o")
    sized = sorted(objects, key=lambda o: _source_size(build, o))
    chosen = sized[: args.objects]
    log(f"building {len(chosen)} small CUDA objects and {', '.join(HOST_TARGETS)} (minutes, -j{args.jobs})")
    started = time.perf_counter()
    run([ninja, "-C", build, f"-j{args.jobs}", *chosen, *HOST_TARGETS], env=env)
    log(f"built in {time.perf_counter() - started:.0f} s")

    ksm = [sys.executable, "-m", "kernel_symbol_map"]
    hand = work / "by-hand.json.gz"
    seconds, peak, proc = timed([*ksm, "build", "--build-dir", build, "--out", hand, "--no-cache"])
    by_hand = load(hand)
    retrofit_command = run([ninja, "-C", build, "-t", "commands", "kernel_symbol_map"]).stdout.strip().splitlines()[-1]
    retrofit = work / "retrofit.json.gz"
    retrofit_command = retrofit_command.replace(str(build / "kernel_symbol_map.json.gz"), str(retrofit))
    run(["bash", "-c", retrofit_command], cwd=build)
    by_retrofit = load(retrofit)
    subset = work / "built-targets.json.gz"
    run([*ksm, "build", "--build-dir", build, "--out", subset, "--targets", *HOST_TARGETS, "--no-cache"])
    subset_doc = load(subset)
    cross = subprocess.run([*ksm, "symbols", "--cross-check", "--json", *[build / o for o in chosen]],
                           capture_output=True, text=True, check=False)
    files = json.loads(cross.stdout)["files"] if cross.stdout.strip().startswith("{") else []

    def targets(doc: dict) -> set[str]:
        return {e.get("target", "?") for e in doc["errors"]} | {o["target"] for o in doc["objects"]}

    every = subset_doc["all_targets"]
    host_only = sorted(t for t in every if t not in targets(by_hand) or t in HOST_TARGETS)
    flags = "--targets" if " --targets " in retrofit_command else \
        "--exclude-targets" if " --exclude-targets " in retrofit_command else "no target filter"
    lines = [
        f"vLLM {VERSION}, sm_90, CUDA {by_hand.get('cuda')}, CMake {by_hand.get('cmake_version')}, "
        f"{by_hand.get('generator')}",
        f"targets that compile: {len(every)} ({len(host_only)} host-only or fully built: {', '.join(host_only)}); "
        f"objects: {by_hand['stats']['objects']}; sources generated into csrc/ by the configure: {len(generated)}",
        f"third-party (FetchContent, spelled $DEP/...): {', '.join(by_hand.get('third_party', [])) or 'none'}",
        f"unmapped targets: {', '.join(u['target'] for u in by_hand.get('unmapped_targets', [])) or 'none'}",
        f"the whole tree by hand: {by_hand.get('reason', 'complete')}",
        f"retrofit map ({flags}): objects {by_retrofit['stats']['objects']} == by hand "
        f"{by_hand['stats']['objects']}: {by_retrofit['stats']['objects'] == by_hand['stats']['objects']}; "
        f"unbuilt per target equal: {_unbuilt(by_retrofit) == _unbuilt(by_hand)}",
        f"the fully built targets ({', '.join(HOST_TARGETS)}), --targets: "
        f"{len(subset_doc['objects'])} objects, complete: {not subset_doc['incomplete']}",
        f"{len(files)} built CUDA objects against cuobjdump: {sum(len(f['symbols']) for f in files)} kernels, "
        f"{len(json.loads(cross.stdout).get('differences', [])) if files else '?'} differences "
        f"(exit {cross.returncode})",
        f"build (by hand, no cache): {seconds:.2f} s, peak {peak / 2**20:.0f} MB",
    ]
    report = "\n".join(lines) + "\n"
    (work / "report.txt").write_text(report)
    print(report, end="")
    return 0


def _unbuilt(doc: dict) -> dict[str, int]:
    found: dict[str, int] = {}
    for e in doc["errors"]:
        found[e.get("target", "?")] = found.get(e.get("target", "?"), 0) + 1
    return found


def _source_size(build: Path, obj: str) -> int:
    """The size of the source an object is compiled from (CMake names objects <source>.o)."""
    rel = obj.split(".dir/", 1)[-1].removesuffix(".o")
    for root in (build.parent / f"vllm-{VERSION}", build):
        path = root / rel
        if path.is_file():
            return path.stat().st_size
    return 1 << 40


if __name__ == "__main__":
    sys.exit(main())
