"""What readable kernel names cost (issue 30): demangling, shortening and matching a library's kernels.

    .venv/bin/python bench/bench_names.py [LIBRARY] [--repeat 3]

LIBRARY defaults to cuBLASLt from .cache (``bench/bench_emitted_ggml.py`` fetches it), 14,871 kernels.
Rows, CPU seconds of this process, medians of rounds (each round in a fresh cache): ``full`` (every
name demangled once), ``readable`` (the 80-column label, first time and from the cache), ``name_filter``
for a substring and a regex over every name. Also how many labels are distinct, and how many were cut.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kernel_symbol_map.consumer.maps import names
from kernel_symbol_map.readers.devicecode import read_kernels

ROOT = Path(__file__).resolve().parents[1]
CUBLAS = ROOT / ".cache/ggml/deps/cublas/nvidia/cu13/lib/libcublasLt.so.13"


def cpu(step) -> float:
    start = time.process_time()
    step()
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", nargs="?", type=Path, default=CUBLAS)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    symbols = sorted(read_kernels(args.library).symbols)
    rows: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for cached in (names.full, names.readable, names._clean, names._label):
            cached.cache_clear()
        rows.setdefault("full, every name", []).append(cpu(lambda: [names.full(s) for s in symbols]))
        rows.setdefault("readable, first time", []).append(cpu(lambda: [names.readable(s) for s in symbols]))
        rows.setdefault("readable, cached", []).append(cpu(lambda: [names.readable(s) for s in symbols]))
        for label, pattern in (("name_filter, substring", "gemm"), ("name_filter, regex", r"^xmma::.*kernel")):
            keep = names.name_filter(pattern)
            rows.setdefault(label, []).append(cpu(lambda: [keep(s) for s in symbols]))
    print(f"{args.library.name}: {len(symbols):,} kernels; {args.repeat} rounds, CPU seconds (median, min-max)")
    for label, times in rows.items():
        print(f"  {label:24} {statistics.median(times):7.3f}  ({min(times):.3f}-{max(times):.3f})")
    labels = [names.readable(s) for s in symbols]
    print(f"  labels: {len(set(labels)):,} distinct of {len(labels):,}; {sum(label.endswith(names.ELLIPSIS) for label in labels):,} "
          f"cut to {names.WIDTH} columns; longest {max(map(len, labels))}")


if __name__ == "__main__":
    main()
