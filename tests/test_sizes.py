"""Issue 21's measure: per-kernel SASS and cubin sizes, against cuobjdump -xelf and pyelftools.

Every file of the CUDA corpus (objects, -rdc, compressed, a fatbin, a
cubin, a shared library, an executable, an archive): the cubins cuobjdump
13.5 extracts, read with pyelftools, give the same multiset of
(architecture, kernel, ``.text.<kernel>`` bytes) and of cubin sizes as the
native reader.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kernel_symbol_map.errors import FormatError
from kernel_symbol_map.readers import sizes

STO_CUDA_ENTRY = 0x10


def _independent(cubins: list[Path]) -> tuple[Counter[tuple[str, str, int]], Counter[tuple[str, int]]]:
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


def test_sass_sizes_equal_cuobjdump_xelf_read_by_pyelftools(cuda_corpus: dict[str, Path],
                                                            cuobjdumps: dict[str, str], tmp_path: Path) -> None:
    checked = 0
    for name, path in cuda_corpus.items():
        try:
            images = [i for i in sizes.measure(path) if i.kind == "cubin"]
        except FormatError:
            continue  # host-only inputs: nothing to size
        if name.endswith(".cubin"):
            cubins = [tmp_path / f"{name}.sm_90.cubin"]
            cubins[0].write_bytes(path.read_bytes())
        else:
            out = tmp_path / name
            out.mkdir()
            subprocess.run([cuobjdumps["13.5"], "-xelf", "all", str(path)], cwd=out, capture_output=True, check=False)
            cubins = sorted(out.glob("*.cubin"))
        kernels, files = _independent(cubins)
        ours_kernels = Counter((i.arch, k, n) for i in images for k, n in i.sass.items())
        ours_files = Counter((i.arch, i.size) for i in images)
        assert ours_kernels == kernels, name
        assert ours_files == files, name
        checked += bool(images)
    assert checked >= 10


def test_what_a_cubin_holds_adds_up(cuda_corpus: dict[str, Path]) -> None:
    for image in sizes.measure(cuda_corpus["gencode3.o"]):
        if image.kind == "cubin":
            assert image.sass and image.overhead > 0
            assert sum(image.sass.values()) + sum(image.owned.values()) + image.overhead == image.size
            assert sum(image.apportioned().values()) <= image.stored
        else:
            assert image.kind == "ptx" and image.size >= image.stored > 0


def test_a_file_with_no_device_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("hello")
    with pytest.raises(FormatError, match="not an ELF file"):
        sizes.measure(path)


def test_size_sums_by_kernel_and_reports_duplicates(cuda_corpus: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The same kernels compiled into two objects: each is a duplicate, costing one copy's bytes."""
    import json

    from kernel_symbol_map.cli import main

    one, two = cuda_corpus["compress_size.o"], cuda_corpus["compress_default.o"]
    assert main(["size", "--json", str(one), str(two)]) == 0
    doc = json.loads(capsys.readouterr().out)
    images = [i for p in (one, two) for i in sizes.measure(p) if i.kind == "cubin"]
    assert doc["schema"] == "kernel-symbol-map/size/1"
    assert doc["totals"]["sass"] == sum(n for i in images for n in i.sass.values())
    assert {r["key"] for r in doc["rows"]} == {k for i in images for k in i.sass}
    assert {d["kernel"] for d in doc["duplicates"]} == set(images[0].sass)
    first = images[0]
    assert sum(d["bytes"] for d in doc["duplicates"]) == sum(first.sass.values()) + sum(first.owned.values())
    assert main(["size", str(one), "/nonexistent.o"]) == 1
    assert "ERROR" in capsys.readouterr().err
