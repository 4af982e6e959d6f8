"""Issue 21: ``size`` against our own symbol reading, and per-kernel totals against cubloaty.

    .venv/bin/python bench/bench_size.py LIB.so... [--runs 5] [--cubloaty PATH] [--wheel W.whl] [--xelf]

Speed: ``size LIB...`` and ``symbols LIB...`` in fresh processes, run in
turns (so that load beside the bench hits both alike); prints each one's
seconds and peak memory (min and median) and the ratio of the medians. The
budget is 1.5x. With ``--wheel``, also ``size`` on the whole wheel (each
library unpacked to a temporary file and measured, then joined with the
map the wheel ships, if any).

Agreement (``--xelf``): the cubins cuobjdump 13.5 ``-xelf`` extracts from
each library, read with pyelftools, against ``size``'s own reading: the
multiset of (architecture, kernel, ``.text.<kernel>`` bytes) and of cubin
sizes must be equal (the test suite does the same on every file of its
corpus, with :func:`independent`).

cubloaty (``--cubloaty`` names its executable, PyPI ``cubloaty``): for each
library, its JSON per kernel against ours. Its ``code`` category is a
kernel's ``.text`` bytes, which must equal our machine code per kernel;
its total also charges a kernel with its symbol-table entry, its name's
bytes in the string tables, and sections linked to it by ``sh_info``, which
we count as image overhead. The bench prints how many kernels agree on code
and on the total, and the categories where the totals differ.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from _run import KSM, timed


# The floor (issue 29): what any reader of these libraries' kernel sizes must do at least, in a fresh process:
# find every fatbin entry and inflate each cubin (PTX is left compressed, as size leaves it).
FLOOR = """
import sys
from kernel_symbol_map.readers import fatbin
from kernel_symbol_map.readers._blob import OpenFile
from kernel_symbol_map.readers.devicecode import CUDA_SECTIONS
from kernel_symbol_map.readers.elf import ElfFile
for path in sys.argv[1:]:
    with OpenFile(path) as blob:
        elf = ElfFile(blob)
        for name in CUDA_SECTIONS:
            section = elf.section(name)
            if section is not None:
                window = elf.window(section)
                for entry in fatbin.iter_entries(window):
                    if entry.kind is fatbin.EntryKind.CUBIN:
                        entry.payload(window)
                break
"""


def cpu_timed(command: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, user + sys of the run; wall seconds; peak RSS bytes) of one fresh run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, peak, _ = timed(command)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, seconds, peak


def speed(libraries: list[str], runs: int, wheel: str | None) -> None:
    commands = {"floor (inflate)": [sys.executable, "-c", FLOOR, *libraries],
                "symbols": [*KSM, "symbols", *libraries], "size": [*KSM, "size", *libraries]}
    if wheel:
        commands["size (wheel)"] = [*KSM, "size", wheel]
    figures: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    timed(commands["symbols"])  # warm the page cache
    for _ in range(runs):
        for name, command in commands.items():
            figures[name].append(cpu_timed(command))
    mb = sum(Path(p).stat().st_size for p in libraries) / 1e6
    print(f"{len(libraries)} libraries, {mb:.0f} MB, {runs} runs each, in turns; load average {os.getloadavg()[0]:.1f}")
    cpu = {name: statistics.median(c for c, _, _ in rows) for name, rows in figures.items()}
    for name, rows in figures.items():
        print(f"  {name:<16} CPU {cpu[name]:6.2f} s median ({min(c for c, _, _ in rows):.2f} min), wall "
              f"{statistics.median(w for _, w, _ in rows):6.2f} s median, peak {max(p for _, _, p in rows) / 2**20:.0f} MB"
              + (f"  ({cpu[name] / cpu['floor (inflate)']:.2f}x the floor)" if name != "floor (inflate)" else ""))
    print(f"  size / symbols: {cpu['size'] / cpu['symbols']:.2f}x (CPU medians; the budget is 1.5x); "
          f"size / floor: {cpu['size'] / cpu['floor (inflate)']:.2f}x (issue 29's budget: 1.3x)")


def cubloaty(tool: str, library: str) -> None:
    out = subprocess.run([tool, "--format", "json", "--mangled", "--top", "0", library], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"cubloaty failed on {library}:\n{out.stderr}")
    theirs = [k for k in json.loads(out.stdout)["kernels"] if k["kind"] == "kernel"]
    ours = json.loads(subprocess.run([*KSM, "size", "--json", "--top", "0", "--by", "kernel", library],
                                     capture_output=True, text=True, check=True).stdout)["rows"]
    mine = {r["key"]: r for r in ours}
    same_code = same_total = same_besides = 0
    besides: Counter[str] = Counter()  # what cubloaty charges to kernels that we count elsewhere
    left: Counter[str] = Counter()
    missing = []
    for k in theirs:
        rows = [mine[n] for n in k["mangled"] if n in mine]
        if not rows:
            missing.append(k["mangled"][0])
            continue
        categories = k["by_category"]
        code = sum(r["code"] for r in rows)
        total = sum(r["code"] + r["owned"] for r in rows)
        same_code += code == categories.get("code", 0)
        same_total += total == k["size"]
        elsewhere = {c: categories.get(c, 0) for c in ELSEWHERE}
        besides.update(elsewhere)
        if total == k["size"] - sum(elsewhere.values()):
            same_besides += 1
        else:
            left[k["mangled"][0]] = k["size"] - sum(elsewhere.values()) - total
    print(f"{library}: cubloaty {len(theirs)} kernels, ours {len(mine)}")
    print(f"  machine code per kernel equal: {same_code} of {len(theirs)}; whole totals equal: {same_total}")
    print(f"  totals equal once cubloaty's {' and '.join(ELSEWHERE)} bytes are left out: {same_besides} of "
          f"{len(theirs)} ({', '.join(f'{c} {n:,} B' for c, n in besides.items())} in all)")
    entries = sum(1 for n in left.values() if n % 24 == 0)
    print(f"  of the {len(left)} others, {entries} differ by whole 24-byte Elf64_Sym entries (a kernel's entries in "
          f".nv.merc.symtab, which cubloaty files as 'merc'), {len(left) - entries} by other bytes")
    for name, n in sorted(((k, v) for k, v in left.items() if v % 24), key=lambda kv: -abs(kv[1]))[:3]:
        print(f"  e.g. {name} by {n:+,} B")
    if missing:
        print(f"  kernels cubloaty lists that we do not: {len(missing)}, e.g. {missing[0]}")


# cubloaty charges each kernel its symbol-table entry and name strings, and its PTX; we count the tables
# as the image's overhead and PTX per architecture (PTX names no kernel sizes).
ELSEWHERE = ("symbols", "ptx")


STO_CUDA_ENTRY = 0x10


def independent(cubins: list[Path]) -> tuple[Counter[tuple[str, str, int]], Counter[tuple[str, int]]]:
    """(arch, kernel, .text.<kernel> bytes) and (arch, cubin bytes) of cuobjdump's extracted cubins, read by
    pyelftools: no line of this package's readers."""
    from elftools.elf.elffile import ELFFile

    kernels: Counter[tuple[str, str, int]] = Counter()
    files: Counter[tuple[str, int]] = Counter()
    for path in cubins:
        arch = "sm_" + path.name.rsplit(".sm_", 1)[1].split(".")[0] if ".sm_" in path.name else "?"
        with path.open("rb") as f:
            elf = ELFFile(f)
            sections = {s.name: s["sh_size"] for s in elf.iter_sections()}
            table = elf.get_section_by_name(".symtab")
            raw = table.data() if table else b""  # pyelftools decodes st_other as visibility only: its byte
            for i, sym in enumerate(table.iter_symbols() if table else ()):
                other = raw[i * table["sh_entsize"] + 5]
                if sym["st_info"]["type"] == "STT_FUNC" and other & STO_CUDA_ENTRY and sym["st_shndx"] != "SHN_UNDEF":
                    kernels[(arch, sym.name, sections[f".text.{sym.name}"])] += 1
        files[(arch, path.stat().st_size)] += 1
    return kernels, files


def xelf(cuobjdump: str, library: str) -> None:
    import tempfile

    from kernel_symbol_map.readers import sizes

    with tempfile.TemporaryDirectory(prefix="bench-xelf-") as tmp:
        subprocess.run([cuobjdump, "-xelf", "all", str(Path(library).resolve())], cwd=tmp, capture_output=True,
                       check=True)
        kernels, files = independent(sorted(Path(tmp).glob("*.cubin")))
    images = [i for i in sizes.measure(library) if i.kind == sizes.CUBIN]
    # cuobjdump names a family-specific cubin (its fatbin entry's flag: sm_100f) sm_100 in its file name
    arch = {i.arch: i.arch[:-1] if i.arch.endswith("f") else i.arch for i in images}
    ours = Counter((arch[i.arch], k, n) for i in images for k, n in i.code.items())
    verdict = "equal" if ours == kernels and Counter((arch[i.arch], i.size) for i in images) == files else "DIFFERENT"
    family = sum(1 for i in images if i.arch.endswith("f"))
    print(f"{library}: {sum(files.values())} cubins, {sum(kernels.values())} kernel images from cuobjdump -xelf "
          f"and pyelftools; ours: {len(images)} cubins, {sum(ours.values())}: {verdict}"
          + (f" ({family} family-specific cubins, sm_XXXf in their fatbin entry, sm_XXX in cuobjdump's file names)"
             if family else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("libraries", nargs="+")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--wheel")
    parser.add_argument("--cubloaty", help="cubloaty's executable: compare per-kernel totals")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--xelf", metavar="CUOBJDUMP", help="cross-check SASS sizes with this cuobjdump's -xelf")
    args = parser.parse_args()
    if not args.no_speed:
        speed(args.libraries, args.runs, args.wheel)
    for library in args.libraries if args.xelf else ():
        xelf(args.xelf, library)
    for library in args.libraries if args.cubloaty else ():
        cubloaty(args.cubloaty, library)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
