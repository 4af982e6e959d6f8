"""Issue 2's figures: native reader against cuobjdump, side by side in one run.

    .venv/bin/python bench/bench_symbols.py [--small 200] [--cuobjdump EXE]

Prints wall times and ratios for (1) many small objects and (2) one large
library (libcublasLt from PyPI), the native reader's peak memory against the
budget (largest decompressed cubin + 100 MB), and the cost of pyelftools
against our struct-based ELF reader on the same cubins.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _corpus  # noqa: E402

from kernel_symbol_map import read_kernels  # noqa: E402
from kernel_symbol_map.buildtree.toolchain import find_cuobjdump, find_nvcc  # noqa: E402
from kernel_symbol_map.readers._blob import Blob, OpenFile  # noqa: E402
from kernel_symbol_map.readers.cuda import cubin_kernels  # noqa: E402
from kernel_symbol_map.readers.cuobjdump import Cuobjdump  # noqa: E402
from kernel_symbol_map.readers.devicecode import CUDA_SECTIONS  # noqa: E402
from kernel_symbol_map.readers.elf import ElfFile  # noqa: E402
from kernel_symbol_map.readers.fatbin import EntryKind, iter_entries  # noqa: E402

# VmHWM, not ru_maxrss: the latter keeps the forking parent's pages as its high-water mark.
PEAK_SCRIPT = """
import sys
from kernel_symbol_map import read_kernels
r = read_kernels(sys.argv[1])
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(int(hwm.split()[1]) * 1024, len(r.symbols), r.error)
"""


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def fatbin_cubins(path: Path):
    """Decompressed cubins of a host binary, one at a time."""
    with OpenFile(path) as blob:
        elf = ElfFile(blob)
        section = next(elf.section(n) for n in CUDA_SECTIONS if elf.section(n))
        window = elf.window(section)
        for entry in iter_entries(window):
            if entry.kind is EntryKind.CUBIN:
                yield entry, entry.payload(window)


def largest_cubin(path: Path) -> int:
    with OpenFile(path) as blob:
        elf = ElfFile(blob)
        section = next(elf.section(n) for n in CUDA_SECTIONS if elf.section(n))
        return max(
            (e.uncompressed_size or e.compressed_size) for e in iter_entries(elf.window(section))
            if e.kind is EntryKind.CUBIN
        )


def elf_readers(cubins: list[bytes]) -> tuple[float, float]:
    from elftools.elf.elffile import ELFFile

    def ours() -> int:
        return sum(len(cubin_kernels(Blob.from_bytes("c", c))) for c in cubins)

    def pyelftools() -> int:
        # The same work through pyelftools: every symbol decoded, entries kept.
        # pyelftools does not expose st_other's CUDA bit, so this counts defined
        # functions: a lower bound on its cost.
        total = 0
        for c in cubins:
            symtab = ELFFile(io.BytesIO(c)).get_section_by_name(".symtab")
            total += sum(
                1 for s in symtab.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF" and s.name
            )
        return total

    t_ours, _ = timed(ours, 5)
    t_elftools, _ = timed(pyelftools, 3)
    return t_ours, t_elftools


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=200, help="number of small objects")
    ap.add_argument("--cuobjdump", help="cuobjdump to compare with (default: search)")
    ap.add_argument("--skip-large", action="store_true")
    args = ap.parse_args()
    cuobjdump = Cuobjdump(find_cuobjdump(args.cuobjdump) or sys.exit("no cuobjdump: pip install '.[bench]'"))
    nvcc = find_nvcc() or sys.exit("no nvcc")
    objects = _corpus.build_small(args.small, nvcc)
    figures: dict[str, object] = {"small_objects": len(objects)}

    t_native, native = timed(lambda: [read_kernels(o) for o in objects], 3)
    t_cuo, reference = timed(lambda: [cuobjdump.read_kernels(o) for o in objects])
    same = all(a.symbols == b.symbols for a, b in zip(native, reference, strict=True))
    n_symbols = sum(len(r.symbols) for r in native)
    figures.update(small_native_s=t_native, small_cuobjdump_s=t_cuo, small_ratio=t_cuo / t_native,
                   small_symbols=n_symbols, small_same=same)
    print(f"{len(objects)} small objects, {n_symbols} kernel symbols, identical: {same}")
    print(f"  native     {t_native:8.3f} s  ({1e3 * t_native / len(objects):.2f} ms/object)")
    print(f"  cuobjdump  {t_cuo:8.3f} s  ({1e3 * t_cuo / len(objects):.2f} ms/object)")
    print(f"  ratio      {t_cuo / t_native:8.1f}x faster (target >= 3x)")

    cubins = [c for o in objects[:60] for _, c in fatbin_cubins(o)]
    t_ours, t_elftools = elf_readers(cubins)
    figures.update(elf_ours_s=t_ours, elf_pyelftools_s=t_elftools, elf_ratio=t_elftools / t_ours)
    print(f"ELF symbol tables of {len(cubins)} cubins: struct reader {1e3 * t_ours:.1f} ms, "
          f"pyelftools {1e3 * t_elftools:.1f} ms: pyelftools costs {t_elftools / t_ours:.1f}x (budget 1.5x)")

    if not args.skip_large:
        lib = _corpus.large_library()
        size = lib.stat().st_size
        t_lib, lib_native = timed(lambda: read_kernels(lib))
        t_lib_cuo, lib_ref = timed(lambda: cuobjdump.read_kernels(lib))
        same = lib_native.symbols == lib_ref.symbols and lib_native.error is None
        out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(lib)], capture_output=True, text=True, check=True)
        peak = int(out.stdout.split()[0])
        largest = largest_cubin(lib)
        budget = largest + (100 << 20)
        figures.update(large=lib.name, large_mb=size / 2**20, large_native_s=t_lib, large_cuobjdump_s=t_lib_cuo,
                       large_ratio=t_lib_cuo / t_lib, large_symbols=len(lib_native.symbols), large_same=same,
                       peak_rss_mb=peak / 2**20, largest_cubin_mb=largest / 2**20, budget_mb=budget / 2**20)
        print(f"{lib.name} ({size / 2**20:.0f} MB), {len(lib_native.symbols)} kernel symbols, identical: {same}")
        print(f"  native     {t_lib:8.2f} s")
        print(f"  cuobjdump  {t_lib_cuo:8.2f} s")
        print(f"  ratio      {t_lib_cuo / t_lib:8.1f}x faster (target >= 2x)")
        print(f"  peak RSS   {peak / 2**20:8.0f} MB  (budget: largest cubin {largest / 2**20:.0f} MB + 100 MB "
              f"= {budget / 2**20:.0f} MB)")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
