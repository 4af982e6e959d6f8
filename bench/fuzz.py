"""Issue 10's fuzz campaign: mutated inputs through every reader, with atheris (libFuzzer).

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python bench/fuzz.py [--runs 100000] [--only objects map ...]
    .venv/bin/python bench/fuzz.py --make-seeds     # rebuild tests/data/fuzz (needs nvcc, clang-19)

Each target runs in its own process, coverage-guided from the seed corpus in
``tests/data/fuzz/<target>/``. A crash is any exception other than this
package's error types (device readers: any exception at all, since
``read_kernels`` never raises on bad input); a hang is an input that takes
over 5 s. libFuzzer stops at the first of either and writes it to
``.cache/bench/fuzz/<target>/``; copy it into ``tests/data/fuzz/<target>/``
and ``tests/test_fuzz_corpus.py`` replays it forever after. Prints, per
target: inputs run, speed, crashes, hangs, peak memory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "tests" / "data" / "fuzz"
WORK = ROOT / ".cache" / "bench" / "fuzz"
TARGETS = ("objects", "map", "text", "jsonl", "nsys", "ninja_deps", "depfile", "build_ninja")
RSS_LIMIT_MB = 512  # Python, atheris and the largest seed's working set stay far below


def _reader(target: str):  # noqa: ANN202 - returns the reader of one file, typed per target
    """The reader ``target`` fuzzes: a function of a file path that may raise only our errors."""
    if target == "objects":
        from kernel_symbol_map.readers.devicecode import read_kernels

        return read_kernels
    if target == "map":
        from kernel_symbol_map.consumer.kernelmap import load

        return lambda p: load(p).reach("csrc/a.cu")
    if target in ("text", "jsonl", "nsys"):
        from kernel_symbol_map.consumer.recordings import read

        return lambda p: read([p])
    if target == "ninja_deps":
        from kernel_symbol_map.buildtree.ninjadeps import NinjaDeps

        return lambda p: NinjaDeps(p, base=Path("/b"))
    if target == "depfile":
        from kernel_symbol_map.buildtree.makedeps import read_depfile

        return lambda p: read_depfile(p, "a.o")
    if target == "build_ninja":
        from kernel_symbol_map.buildtree.ninjafile import read

        return read
    raise SystemExit(f"unknown target {target}")


SUFFIX = {"objects": ".o", "map": ".json.gz", "text": ".txt", "jsonl": ".jsonl", "nsys": ".sqlite",
          "ninja_deps": "", "depfile": ".d", "build_ninja": ".ninja"}


def worker(target: str, libfuzzer_args: list[str]) -> None:
    """Runs inside the fuzzing process: instrument the package, then fuzz one reader."""
    import atheris

    read = _reader(target)
    from kernel_symbol_map.errors import KernelSymbolMapError

    # The editable install's loader defeats instrument_imports(); instrument what is loaded instead.
    atheris.instrument_all()

    scratch = Path(tempfile.mkdtemp(prefix=f"ksm-fuzz-{target}-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    path = scratch / f"input{SUFFIX[target]}"

    def one_input(data: bytes) -> None:
        if target == "map":  # mutate the JSON, not only gzip's framing
            data = gzip.compress(data, mtime=0) if data[:1] != b"\x1f" else data
        path.write_bytes(data)
        try:
            result = read(path)
        except KernelSymbolMapError:
            return
        if target == "objects" and result.error is None and not isinstance(result.symbols, tuple):
            raise AssertionError("read_kernels returned no symbol tuple")

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    atheris.Fuzz()


def campaign(target: str, runs: int) -> dict[str, object]:
    seeds = SEEDS / target
    work = WORK / target
    corpus = work / "corpus"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(seeds, corpus)
    command = [sys.executable, __file__, "--worker", target, "--", str(corpus), f"-runs={runs}", "-timeout=5",
               f"-rss_limit_mb={RSS_LIMIT_MB}", "-max_len=65536", "-print_final_stats=1",
               f"-artifact_prefix={work}/", "-seed=1"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    log = proc.stdout + proc.stderr
    (work / "log.txt").write_text(log)
    done = re.search(r"Done (\d+) runs in (\d+) second", log)
    peak = re.search(r"stat::peak_rss_mb:\s+(\d+)", log)
    crashes = sorted(p.name for p in work.glob("crash-*")) + sorted(p.name for p in work.glob("oom-*"))
    hangs = sorted(p.name for p in work.glob("timeout-*"))
    return {"target": target, "runs": int(done.group(1)) if done else 0,
            "seconds": int(done.group(2)) if done else 0, "crashes": crashes, "hangs": hangs,
            "peak_mb": int(peak.group(1)) if peak else 0, "rc": proc.returncode}


def make_seeds() -> None:
    """The committed seed corpus: small real inputs of every format, made by real tools."""
    sys.path.insert(0, str(ROOT / "tests"))
    import nsys
    from toolchains import DATA

    from kernel_symbol_map import mapformat
    from kernel_symbol_map.buildtree.toolchain import find_nvcc

    for t in TARGETS:
        (SEEDS / t).mkdir(parents=True, exist_ok=True)
    nvcc = find_nvcc() or "nvcc"
    objects = SEEDS / "objects"
    sm80 = ["-gencode=arch=compute_80,code=sm_80"]
    for name, args in {
        "cuda.o": ["-c", "k.cu", *sm80, "--compress-mode=none"],
        "cuda_zstd.o": ["-c", "k.cu", *sm80, "--compress-mode=size"],
        "cuda_lz4.o": ["-c", "k.cu", *sm80, "--compress-mode=speed"],
        "cuda_rdc.o": ["-c", "dp.cu", "-rdc=true", *sm80, "--compress-mode=none"],
        "cuda_ptx.o": ["-c", "k2.cu", "-gencode=arch=compute_90,code=compute_90"],
        "k.cubin": ["-cubin", "k2.cu", "-arch=sm_80"],
    }.items():
        subprocess.run([nvcc, *args, "-o", str(objects / name)], cwd=DATA, check=True)
    subprocess.run(["ar", "rc", str(objects / "lib.a"), str(objects / "cuda.o"), str(objects / "cuda_rdc.o")],
                   check=True)
    clang = shutil.which("clang-19") or shutil.which("clang++-19")
    if clang:
        bare = ["-x", "hip", "-nogpulib", "-nogpuinc", "-c", "h_bare.hip", "--offload-arch=gfx90a"]
        subprocess.run([clang, *bare, "-o", str(objects / "hip.o")], cwd=DATA, check=True)
        subprocess.run([clang, *bare, "--offload-compress", "-o", str(objects / "hip_zstd.o")], cwd=DATA, check=True)
        subprocess.run([clang, *bare, "-fgpu-rdc", "-o", str(objects / "hip_rdc.o")], cwd=DATA, check=True)
    doc = {"version": 1, "commit": "c", "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
           "incomplete": False, "errors": [], "stats": {},
           "objects": [{"source": "csrc/a.cu", "target": "t", "object": "a.o", "device": True,
                        "symbols": ["_Z1kv"], "deps": ["csrc/a.cu", "include/h.cuh"]}]}
    (SEEDS / "map" / "map.json").write_text(json.dumps(doc))
    mapformat.write(doc, SEEDS / "map" / "map.json.gz")
    (SEEDS / "text" / "test_a.txt").write_text("# test=test_a\n_Z1kv\n# dropped=0\n# end records=3 unique=1 dropped=0\n")
    (SEEDS / "jsonl" / "r.jsonl").write_text(json.dumps({"test": "t", "kernels": ["_Z1kv"], "complete": True,
                                                         "commit": "c"}) + "\n")
    nsys.sequential(SEEDS / "nsys" / "run.sqlite", {"test_a": ["_Z1kv", "_Z1jv"], "test_b": ["_Z1kv"]})
    paths = [b"a.o", b"/src/a.cu", b"/src/h.cuh"]
    log = bytearray(b"# ninjadeps\n" + struct.pack("<i", 4))
    for i, p in enumerate(paths):
        padded = p + b"\0" * (-len(p) % 4)
        log += struct.pack("<I", len(padded) + 4) + padded + struct.pack("<I", ~i & 0xFFFFFFFF)
    body = struct.pack("<iII", 0, 12, 0) + struct.pack("<2i", 1, 2)
    log += struct.pack("<I", len(body) | 0x8000_0000) + body
    (SEEDS / "ninja_deps" / ".ninja_deps").write_bytes(bytes(log))
    (SEEDS / "depfile" / "a.o.d").write_text("a.o: /src/a.cu \\\n  /src/include\\ dir/h.cuh /src/b.cuh\n")
    (SEEDS / "build_ninja" / "build.ninja").write_text(
        "ninja_required_version = 1.5\n"
        "build cmake_object_order_depends_target_t: phony || CMakeFiles/t.dir\n"
        "build CMakeFiles/t.dir/a.cu.o: CUDA_COMPILER__t_Release /src/a$ b.cu || cmake_object_order_depends_target_t\n"
        "  DEP_FILE = CMakeFiles/t.dir/a.cu.o.d\n  OBJECT_DIR = CMakeFiles/t.dir\n"
        "build libt.so: CUDA_SHARED_LIBRARY_LINKER__t_Release CMakeFiles/t.dir/a.cu.o $\n    | /usr/lib/x.so\n")
    print(f"seeds written to {SEEDS}")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[4:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000, help="inputs per target (default 100,000)")
    ap.add_argument("--only", nargs="+", choices=TARGETS, default=list(TARGETS))
    ap.add_argument("--make-seeds", action="store_true", help="rebuild the seed corpus in tests/data/fuzz")
    args = ap.parse_args()
    if args.make_seeds:
        make_seeds()
        return 0
    failed = False
    print(f"{'target':12} {'inputs':>8} {'seconds':>8} {'per s':>7} {'crashes':>8} {'hangs':>6} {'peak MB':>8}")
    for target in args.only:
        r = campaign(target, args.runs)
        rate = r["runs"] / r["seconds"] if r["seconds"] else float(r["runs"])
        print(f"{target:12} {r['runs']:>8} {r['seconds']:>8} {rate:>7.0f} {len(r['crashes']):>8} "
              f"{len(r['hangs']):>6} {r['peak_mb']:>8}", flush=True)
        for name in [*r["crashes"], *r["hangs"]]:
            print(f"    {WORK / target / name}")
        failed |= bool(r["crashes"] or r["hangs"] or r["rc"] or r["runs"] < args.runs)
    print(f"budget: peak memory < {RSS_LIMIT_MB} MB; every target ran its inputs with no crash and no hang: "
          f"{'NO' if failed else 'yes'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
