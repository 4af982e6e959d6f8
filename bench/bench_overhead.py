"""Issue 4's figures: what the CMake package's map adds to a no-op build and to a one-file rebuild.

    .venv/bin/python bench/bench_overhead.py

The generated tree is configured without the map, then with it
(WITH_KERNEL_SYMBOL_MAP, the package found through --cmake-dir); each time a
no-op `ninja` and a rebuild after touching one .cu are timed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _run import ENV  # noqa: E402

from kernel_symbol_map.cmakedir import cmake_dir  # noqa: E402


def ninja(build: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True, env=ENV)
    return time.perf_counter() - t0


def measure(src: Path, build: Path, touched: Path) -> tuple[float, float]:
    ninja(build)
    noop = min(ninja(build) for _ in range(5))
    rebuilds = []
    for _ in range(2):
        touched.write_text(touched.read_text())
        rebuilds.append(ninja(build))
    return noop, min(rebuilds)


def configure(src: Path, build: Path, on: bool) -> None:
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), f"-DWITH_KERNEL_SYMBOL_MAP={'ON' if on else 'OFF'}",
                    f"-DKernelSymbolMap_DIR={cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}"],
                   check=True, capture_output=True, env=ENV)


def main() -> int:
    src, build = gen_tree.build_tree()
    touched = src / "csrc" / "misc" / "k0029.cu"  # a heavy kernel file (gen_tree.HEAVY_AT)
    try:
        configure(src, build, False)
        noop_off, one_off = measure(src, build, touched)
        configure(src, build, True)
        noop_on, one_on = measure(src, build, touched)
    finally:
        configure(src, build, False)
    print("tree: 500 .cu, 3 archs; ninja on 2 cores")
    print(f"  no-op build      without map {noop_off:6.3f} s, with map {noop_on:6.3f} s: "
          f"+{noop_on - noop_off:.3f} s (target < 0.3 s)")
    print(f"  one-file rebuild without map {one_off:6.2f} s, with map {one_on:6.2f} s: "
          f"+{one_on - one_off:.2f} s = {100 * (one_on - one_off) / one_off:.1f}% (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
