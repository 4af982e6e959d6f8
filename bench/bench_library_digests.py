"""Reading released GPU libraries whole: kernels, sizes and digests against ``cuobjdump -symbols``, in CPU seconds.

    .venv/bin/python bench/bench_library_digests.py LIB.so... [--runs 3] [--cuobjdump EXE]

What ``build`` does with each object, done to a prebuilt library (vLLM's wheel holds five large ones:
``pip download --no-deps vllm==0.33.0``, then unzip their ``.so`` files). Each row is a fresh process with
bytecode cached, rounds interleaved:

- ``cuobjdump -symbols`` (the toolkit's listing of every cubin's symbols: kernels only, no sizes or digests);
- ours: the producer's read of the file (``_read_and_measure``: kernels, sizes, per-kernel digests), which
  also counts how many device images it inflated and how many inflations it did.

Prints each one's median CPU seconds (user + sys), ours over cuobjdump's, and the inflations: each image
once is the goal, whatever the memo keeps of payloads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import old_cuobjdump  # noqa: E402

PYTHON = sys.executable
# Ours, in a fresh process: every inflation counted by the payload it inflated.
OURS = """
import json, sys
from collections import Counter
from pathlib import Path
from kernel_symbol_map.producer.extract import _read_and_measure
from kernel_symbol_map.readers import fatbin
from kernel_symbol_map.readers.devicecode import read_kernels
from kernel_symbol_map.readers._blob import OpenFile
from kernel_symbol_map.readers.elf import ElfFile
calls = Counter()
for method, inflate in list(fatbin._DECOMPRESSORS.items()):
    def counted(raw, size, _inflate=inflate):
        calls["inflations"] += 1
        return _inflate(raw, size)
    fatbin._DECOMPRESSORS[method] = counted
result, sizes, digests = _read_and_measure(read_kernels, Path(sys.argv[1]))
with OpenFile(sys.argv[1]) as blob:  # the compressed images the file holds, by where they are
    elf = ElfFile(blob)
    section = elf.section(".nv_fatbin") or elf.section("__nv_relfatbin")
    window = elf.window(section) if section is not None else None
    images = sum(1 for e in fatbin.iter_entries(window) if e.flags & fatbin.COMPRESSION_MASK) if window else 0
print(json.dumps({"kernels": len(result.symbols), "error": result.error, "digests": digests is not None,
                  "images": images, "inflations": calls["inflations"]}))
"""


def timed(command: list[str]) -> tuple[float, str]:
    """CPU seconds of one run of ``command`` (its children's rusage, read around it) and its output."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"bench_library_digests: {' '.join(command)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libraries", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cuobjdump", help="cuobjdump to compare with (default: the bench's 13.4)")
    args = ap.parse_args()
    cuobjdump = args.cuobjdump or old_cuobjdump()
    times: dict[tuple[str, str], list[float]] = {}
    found: dict[str, dict] = {}
    for _ in range(args.runs):
        for lib in args.libraries:
            seconds, _ = timed([cuobjdump, "-symbols", str(lib)])
            times.setdefault((lib.name, "cuobjdump"), []).append(seconds)
            seconds, out = timed([PYTHON, "-c", OURS, str(lib)])
            times.setdefault((lib.name, "ours"), []).append(seconds)
            found[lib.name] = json.loads(out)
    total = {"cuobjdump": 0.0, "ours": 0.0}
    print(f"{'library':40} {'MB':>6} {'cuobjdump':>10} {'ours':>8} {'ratio':>6}  compressed images, inflations (kernels)")
    for lib in args.libraries:
        c, o = (statistics.median(times[(lib.name, who)]) for who in ("cuobjdump", "ours"))
        total["cuobjdump"] += c
        total["ours"] += o
        f = found[lib.name]
        print(f"{lib.name:40} {lib.stat().st_size / 1e6:6.0f} {c:9.2f}s {o:7.2f}s {o / c:5.2f}x  "
              f"{f['images']}, {f['inflations']} ({f['kernels']} kernels{', error: ' + f['error'] if f['error'] else ''}"
              f"{'' if f['digests'] else ', no digests'})")
    print(f"{'all':40} {'':6} {total['cuobjdump']:9.2f}s {total['ours']:7.2f}s "
          f"{total['ours'] / total['cuobjdump']:5.2f}x  (medians of {args.runs}; load average "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
