"""Issues 10 and 22's fuzz campaign: mutated inputs through every reader, with atheris (libFuzzer).

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python bench/fuzz.py [--runs 100000] [--only objects map ...]
    .venv/bin/python bench/fuzz.py --cli 1000       # every subcommand that reads a map or a recording
    .venv/bin/python bench/fuzz.py --make-seeds     # rebuild tests/data/fuzz (needs nvcc, clang-19)

The text and JSON targets (map, jsonl, text, build_ninja) mutate with the
structure of their format half of the time (:mod:`_mutators`: a JSON value
swapped for another type at any path, deep nesting, huge numbers, NUL and
lone surrogates, ``include`` cycles, very long and long-continued lines), and
byte by byte the other half. The map and recording targets then go through
everything a consumer does with them: load, reach, select, show's summary,
merge and diff.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "tests" / "data" / "fuzz"
WORK = ROOT / ".cache" / "bench" / "fuzz"
TARGETS = ("objects", "map", "text", "jsonl", "nsys", "ninja_deps", "depfile", "build_ninja")
RSS_LIMIT_MB = 512  # Python, atheris and the largest seed's working set stay far below
MAX_LEN = 1 << 20  # inputs up to 1 MiB: long lines and deep nesting need room


def _reader(target: str):  # noqa: ANN202 - returns the reader of one file, typed per target
    """The reader ``target`` fuzzes: a function of a file path that may raise only our errors."""
    if target == "objects":
        from kernel_symbol_map.readers.devicecode import read_kernels

        return read_kernels
    if target == "map":
        return _consume_map
    if target in ("text", "jsonl", "nsys"):
        return _consume_recording
    if target == "ninja_deps":
        from kernel_symbol_map.buildtree.ninjadeps import NinjaDeps

        return lambda p: NinjaDeps(p, base=Path("/b"))
    if target == "depfile":
        from kernel_symbol_map.buildtree.makedeps import read_depfile

        return lambda p: read_depfile(p, "a.o")
    if target == "build_ninja":
        return _consume_manifest
    raise SystemExit(f"unknown target {target}")


def _consume_map(path: Path) -> None:
    """Everything a consumer does with a map."""
    from kernel_symbol_map import mapformat
    from kernel_symbol_map.cli.diffmaps import compare
    from kernel_symbol_map.cli.show import summary
    from kernel_symbol_map.consumer.canonical import Canonical
    from kernel_symbol_map.consumer.kernelmap import kernels_named, load
    from kernel_symbol_map.consumer.recordings import Recording
    from kernel_symbol_map.consumer.selection import Options, StaticRules, select

    kmap = load(path)
    canonical = Canonical(path.parent, [path.parent])
    kmap.reach("csrc/a.cu", "include/h.cuh", "$BUILD/gen/x.cu", canonical=canonical)
    kmap.sources_for("_Z1kv")
    kernels_named(kmap, "k")
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": ["t"]}]})
    recordings = [Recording("t", frozenset({"_Z1kv"}), True, kmap.commit, "fuzz")]
    for whole in (False, True):
        select([kmap, kmap], recordings, ["csrc/a.cu", "include/h.cuh"],
               options=Options(rules=rules, whole_target=whole, canonical=canonical)).to_json()
    summary(kmap.document, 3)
    mapformat.merge([kmap.document, kmap.document], ["a", "b"])
    compare(kmap, kmap)


def _consume_recording(path: Path) -> None:
    from kernel_symbol_map.consumer.kernelmap import KernelMap
    from kernel_symbol_map.consumer.recordings import read_each
    from kernel_symbol_map.consumer.selection import select

    recordings, unreadable = read_each([path], "c" * 40)
    doc = {"version": 1, "commit": "c" * 40, "cuda": "", "generated_at": "", "build_dirs": [], "incomplete": False,
           "errors": [], "stats": {}, "objects": [{"source": "csrc/a.cu", "target": "t", "object": "a.o",
                                                  "device": True, "symbols": ["_Z1kv"], "deps": ["csrc/a.cu"]}]}
    selection = select(KernelMap(doc), recordings, ["csrc/a.cu"], unreadable=unreadable)
    selection.to_json()
    selection.summary()


def _consume_manifest(path: Path) -> None:
    """A build tree's build.ninja through every reader of it: statements, objects, configure inputs, custom commands."""
    from kernel_symbol_map.buildtree import generatorfiles, ninjafile, thirdparty
    from kernel_symbol_map.errors import BuildTreeError

    ninjafile.read(path, path.parent)
    for read in (lambda: generatorfiles.from_ninja(path.parent, "Release"),
                 lambda: generatorfiles.configure_inputs(path.parent, "Ninja"),
                 lambda: thirdparty.custom_compiles(path.parent, "Ninja")):
        try:
            read()
        except BuildTreeError:
            pass


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
    path = scratch / ("build.ninja" if target == "build_ninja" else f"input{SUFFIX[target]}")

    from _mutators import MUTATORS

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

    structured = MUTATORS.get(target)

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        """Half the time by the format's structure, half byte by byte (libFuzzer's own mutations)."""
        if structured is not None and seed % 2:
            return structured(data, seed)[:max_size]
        return atheris.Mutate(data, max_size)

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input, custom_mutator=mutate)
    atheris.Fuzz()


def campaign(target: str, runs: int) -> dict[str, object]:
    seeds = SEEDS / target
    work = WORK / target
    corpus = work / "corpus"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(seeds, corpus)
    command = [sys.executable, __file__, "--worker", target, "--", str(corpus), f"-runs={runs}", "-timeout=5",
               f"-rss_limit_mb={RSS_LIMIT_MB}", f"-max_len={MAX_LEN}", "-print_final_stats=1",
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
