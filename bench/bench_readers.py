"""Issue 22: every text reader's speed and memory, on sound inputs and on the worst shapes we know.

    .venv/bin/python bench/bench_readers.py [--mb 32] [--shape bomb]

Each reader reads each input in a fresh process; the figures are its time
(MB/s of text, the budget is 10 MB/s) and its peak memory above the
process's own after imports (as a multiple of the input, the budget is 10x
plus 64 MB). A map's input is its JSON (the file is gzip; what the reader
holds grows with the JSON, which is bounded at 256x the gzip); a refused
input counts too: refusing is reading. Shapes:

- maps: a vLLM-like map; one with the shortest strings a map's fields allow;
  containers at the density the reader allows; a gzip bomb (its peak is
  also given against its bound, the most JSON the reader accepts from it:
  inflated a MiB at a time, it holds no more, issue 26);
- recordings: JSON Lines of many records, and of one huge record; text of
  long names, and of the shortest names;
- build.ninja: CMake's shape (vLLM's statements, about 1 KB each), the
  shortest compile statements, one statement continued 7 million times,
  lines of escapes only, and a control character (refused); "every reader"
  is what a build without CMake's file API runs on it (the statements, then
  the objects, the configure inputs and the custom commands: two reads, and
  a pathlib Path for each object and source).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run import ENV  # noqa: E402

LETTERS = [chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"\\']
BUDGET_MB_S = 10
BUDGET_RATIO, BUDGET_CONSTANT = 10, 64 << 20

CHILD = r"""
import json, sys, time
from pathlib import Path
from kernel_symbol_map.errors import KernelSymbolMapError
from kernel_symbol_map.consumer.maps.kernelmap import load
from kernel_symbol_map.consumer.select.recordings import read as read_recordings
from kernel_symbol_map.buildtree import buildrules, generatorfiles, ninjafile, thirdparty
from kernel_symbol_map.errors import BuildTreeError

def every_reader(path):  # what a build runs on build.ninja when CMake's file API has no reply
    generatorfiles.from_ninja(path.parent, "Release")
    try:
        generatorfiles.configure_inputs(path.parent, "Ninja")
    except BuildTreeError:
        pass  # no RERUN_CMAKE statement in a synthetic manifest
    thirdparty.custom_compiles(path.parent, "Ninja")
    buildrules.read(path.parent, "Ninja")  # issue 26: what each generated file is made from

readers = {"map": load, "recording": lambda p: read_recordings([p]), "build.ninja": ninjafile.read,
           "every reader": every_reader}

def peak():  # this process's own high-water mark: ru_maxrss would count the parent's, from before exec
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) * 1024

read = readers[sys.argv[1]]
path = Path(sys.argv[2])
before = peak()
t0 = time.perf_counter()
try:
    read(path)
    outcome = "read"
except KernelSymbolMapError as e:
    outcome = "refused: " + str(e).split(": ", 1)[-1][:60]
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "extra": peak() - before, "outcome": outcome}))
"""


def _vllm_like(mb: int) -> bytes:
    objects, deps = [], [f"/usr/local/lib/python3.12/site-packages/torch/include/ATen/h{i:04d}.h" for i in range(400)]
    size, i = 0, 0
    while size < mb << 20:
        o = {"source": f"csrc/quantization/kernel_{i:05d}.cu", "target": "_C",
             "object": f"CMakeFiles/_C.dir/csrc/quantization/kernel_{i:05d}.cu.o", "device": True,
             "symbols": [f"_ZN4vllm6kernelILi{j}EEEvPKfPfi{i}" for j in range(18)], "deps": deps[i % 50:][:350]}
        size += len(json.dumps(o))
        objects.append(o)
        i += 1
    return json.dumps(_map(objects)).encode()


def _map(objects: list[dict[str, object]]) -> dict[str, object]:
    return {"version": 1, "commit": "c" * 40, "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
            "incomplete": False, "errors": [], "stats": {}, "objects": objects}


def _short_strings(mb: int) -> bytes:
    """One-letter deps, random so that gzip cannot shrink them past its bound."""
    rng = random.Random(22)
    n = (mb << 20) // 4
    return json.dumps(_map([{"source": "a", "target": "t", "object": "o", "device": True, "symbols": [],
                             "deps": rng.choices(LETTERS, k=n)}]), separators=(",", ":")).encode()


def _dense_containers(mb: int) -> bytes:
    """Object records as small as a map's fields allow (one-letter, random), three containers each."""
    rng = random.Random(22)
    objects = []
    size = 0
    while size < mb << 20:
        a, t, o = rng.choices(LETTERS, k=3)
        objects.append({"source": a, "target": t, "object": o, "device": True, "symbols": [], "deps": []})
        size += 75
    return json.dumps(_map(objects), separators=(",", ":")).encode()


def _bomb(mb: int) -> bytes:
    return b" " * (mb << 25)  # 32x --mb of whitespace: gzip makes it a thousandth of that


def _jsonl_many(mb: int) -> bytes:
    line = json.dumps({"test": "tests/kernels/test_attention.py::test_paged[128-float16]",
                       "kernels": [f"_ZN4vllm6kernelILi{j}EEEvPKfPfi" for j in range(20)], "complete": True,
                       "commit": "c" * 40}).encode() + b"\n"
    return line * ((mb << 20) // len(line))


def _jsonl_one_huge(mb: int) -> bytes:
    n = (mb << 20) // 8
    return json.dumps({"test": "t", "kernels": [f"_Z{i:05x}" for i in range(n)], "complete": True,
                       "commit": "c" * 40}).encode() + b"\n"


def _text_long(mb: int) -> bytes:
    names = b"".join(b"_ZN4vllm6kernelILi%dEEEvPKfPfiN3c108BFloat16E\n" % i for i in range(20_000))
    return names * ((mb << 20) // len(names))


def _text_short(mb: int) -> bytes:
    n = (mb << 20) // 8
    return b"".join(b"_Z%05x\n" % (i & 0xFFFFF) for i in range(n))


def _ninja_cmake(mb: int) -> bytes:
    """Compile statements as CMake writes vLLM's (about 1 KB each with their bindings)."""
    one = (b"build CMakeFiles/_C.dir/csrc/k%d.cu.o: CUDA_COMPILER___C_unscanned_Release /src/csrc/k%d.cu || "
           b"cmake_object_order_depends_target__C\n  CONFIG = Release\n"
           b"  DEFINES = -DPy_LIMITED_API=0x030b0000 -DTORCH_EXTENSION_NAME=_C -DUSE_C10D_GLOO -DUSE_C10D_NCCL "
           b"-DUSE_DISTRIBUTED -DUSE_RPC -DUSE_TENSORPIPE -D_C_EXPORTS\n"
           b"  DEP_FILE = CMakeFiles/_C.dir/csrc/k%d.cu.o.d\n"
           b"  FLAGS = -O3 -DNDEBUG -std=c++17 -Xcompiler=-fPIC --expt-relaxed-constexpr -gencode arch=compute_90,"
           b"code=sm_90 -DENABLE_FP8 --threads=1 -D_GLIBCXX_USE_CXX11_ABI=1\n"
           b"  INCLUDES = -I/src/csrc -isystem /usr/include/python3.11 -isystem /venv/lib/python3.11/site-packages/"
           b"torch/include -isystem /venv/lib/python3.11/site-packages/torch/include/torch/csrc/api -isystem "
           b"/usr/local/cuda/include -I/src/third_party/cutlass/include\n"
           b"  OBJECT_DIR = CMakeFiles/_C.dir\n  OBJECT_FILE_DIR = CMakeFiles/_C.dir/csrc\n")
    n = (mb << 20) // len(one % (1, 1, 1))
    return b"".join(one % (i, i, i) for i in range(n))


def _ninja_tiny(mb: int) -> bytes:
    """Compile statements as short as a manifest can spell them: a statement per 40 bytes."""
    one = b"build o%d.o: CUDA_COMPILER__t_Release s%d.cu\n"
    n = (mb << 20) // len(one % (100000, 100000))
    return b"".join(one % (i, i) for i in range(n))


def _ninja_continued(mb: int) -> bytes:
    return b"build a.o: r" + b" x $\n" * ((mb << 20) // 5) + b"\n"


def _ninja_escapes(mb: int) -> bytes:
    return b"build a$$.o: r " + b"$$$ $:" * ((mb << 20) // 6) + b"\n"


def _ninja_markers(mb: int) -> bytes:
    """Escapes beside the characters the reader marks them with: no manifest holds one."""
    return b"build a\x01.o: r " + b"x$$\x02 " * ((mb << 20) // 6) + b"\n"


SHAPES: list[tuple[str, str, Callable[[int], bytes]]] = [
    ("map", "vLLM-like", _vllm_like), ("map", "shortest strings", _short_strings),
    ("map", "densest records", _dense_containers), ("map", "gzip bomb (32x --mb)", _bomb),
    ("recording", "JSON Lines, many records", _jsonl_many), ("recording", "JSON Lines, one huge record", _jsonl_one_huge),
    ("recording", "text, long names", _text_long), ("recording", "text, shortest names", _text_short),
    ("build.ninja", "CMake's shape", _ninja_cmake), ("every reader", "CMake's shape", _ninja_cmake),
    ("build.ninja", "tiny statements", _ninja_tiny), ("every reader", "tiny statements", _ninja_tiny), ("build.ninja", "continued lines", _ninja_continued),
    ("build.ninja", "escapes", _ninja_escapes), ("build.ninja", "a control character", _ninja_markers),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=32, help="size of each input's text, in MB (default 32)")
    ap.add_argument("--shape", default="", help="only the shapes whose reader or input holds this text")
    args = ap.parse_args()
    from kernel_symbol_map.mapformat import MAX_JSON, MAX_RATIO
    print(f"{'reader':12} {'input':28} {'MB':>6} {'MB/s':>7} {'extra MB':>9} {'x input':>8} {'budget':>6}  outcome")
    outside = []
    shapes = [(r, s, m) for r, s, m in SHAPES if args.shape in f"{r} {s}"]
    with tempfile.TemporaryDirectory(prefix="ksm-readers-") as tmp:
        for reader, shape, make in shapes:
            text = make(args.mb)
            name = {"map": "map.json.gz", "build.ninja": "build.ninja", "every reader": "build.ninja"}.get(reader)
            if name is None:
                name = "r.jsonl" if text[:1] == b"{" else "test_x.txt"
            path = Path(tmp) / f"{reader}-{shape}".replace(" ", "_").replace(",", "").replace("'", "") / name
            path.parent.mkdir()
            path.write_bytes(gzip.compress(text, compresslevel=6, mtime=0) if reader == "map" else text)
            proc = subprocess.run([sys.executable, "-c", CHILD, reader, str(path)],
                                  capture_output=True, text=True, env=ENV, check=False)
            if proc.returncode:
                print(f"{reader:12} {shape:28} failed:\n{proc.stderr[-2000:]}")
                outside.append(f"{reader} ({shape})")
                continue
            r = json.loads(proc.stdout)
            mb_s = len(text) / 1e6 / max(r["seconds"], 1e-9)
            within = mb_s >= BUDGET_MB_S and r["extra"] <= BUDGET_RATIO * len(text) + BUDGET_CONSTANT
            if not within:
                outside.append(f"{reader} ({shape})")
            print(f"{reader:12} {shape:28} {len(text) / 1e6:>6.1f} {mb_s:>7.1f} {r['extra'] / 1e6:>9.1f} "
                  f"{r['extra'] / len(text):>8.2f} {'ok' if within else 'OUT':>6}  {r['outcome'][:60]}")
            if reader == "map" and r["outcome"].startswith("refused: decompresses"):  # a bomb: against its bound
                bound = min(MAX_JSON, MAX_RATIO * path.stat().st_size + (1 << 20))
                print(f"{'':12} {'':28} its bound (256x its {path.stat().st_size / 1e6:.1f} MB): {bound / 1e6:.1f} MB "
                      f"of JSON; the peak is {r['extra'] / bound:.2f}x it (issue 26: the bound and a MiB)")
    print(f"budget: >= {BUDGET_MB_S} MB/s and <= {BUDGET_RATIO}x the input + {BUDGET_CONSTANT >> 20} MB; "
          f"{len(shapes) - len(outside)} of {len(shapes)} inside; outside: {', '.join(outside) or 'none'}")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
