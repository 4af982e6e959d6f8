"""Issue 6: serial against threads against processes for reading objects' kernels.

    .venv/bin/python bench/bench_parallel.py

Two corpora: the generated tree's ~500 small objects, and libcublasLt split
into its translation units' worth of work (one big file, read per container
by the native reader). zstd releases the GIL; struct parsing does not.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402
import gen_tree  # noqa: E402

from kernel_symbol_map import read_kernels  # noqa: E402


def timed(fn) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    _, build = gen_tree.build_tree()
    objects = sorted(str(p) for p in build.rglob("*.o") if "CompilerId" not in str(p))
    heavy = [str(p) for p in _corpus.CACHE.glob("small-*/*.o")][:200]
    print(f"{os.cpu_count()} cores")
    for name, corpus in (("tree objects", objects), ("small objects", heavy)):
        serial = timed(lambda corpus=corpus: [read_kernels(o) for o in corpus])
        results = [f"{name} ({len(corpus)}): serial {serial:.3f} s"]
        for workers in (2, 4):
            with ThreadPoolExecutor(workers) as pool:
                t = timed(lambda pool=pool, corpus=corpus: list(pool.map(read_kernels, corpus)))
            results.append(f"threads x{workers} {t:.3f} s")
            with ProcessPoolExecutor(workers) as pool:
                t = timed(lambda pool=pool, corpus=corpus: list(pool.map(read_kernels, corpus, chunksize=32)))
            results.append(f"processes x{workers} {t:.3f} s (warm pool)")
        t0 = time.perf_counter()
        with ProcessPoolExecutor(2) as pool:
            list(pool.map(read_kernels, corpus, chunksize=32))
        results.append(f"processes x2 incl. start {time.perf_counter() - t0:.3f} s")
        print("; ".join(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
