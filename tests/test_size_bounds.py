"""Issue 26: size's figures add up, and its readers are total (wheels and gzip maps bounded before they inflate).

No nvcc here: the binaries are the committed ``tests/data/fuzz/objects``
(real nvcc output), read or deliberately corrupted, and pyelftools says
what they hold. Each test names the mutant of ``scripts/mutants.py`` it
kills.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kernel_symbol_map import mapformat
from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps import kernelmap, wheels
from kernel_symbol_map.consumer.size import sizereport, treemap
from kernel_symbol_map.errors import FormatError, MapError
from kernel_symbol_map.mapformat import sizes as map_sizes
from kernel_symbol_map.mapformat import validation
from kernel_symbol_map.readers import sizes

OBJECTS = Path(__file__).resolve().parent / "data" / "fuzz" / "objects"


def _record(kernels: dict[str, int], image: int, stored: int | None = None) -> dict:
    return {"image": image, "stored": image if stored is None else stored, "code": kernels}


def _object(name: str, kernels: dict[str, int], image: int, stored: int | None = None, **extra: object) -> dict:
    symbols = sorted(kernels)
    return {"source": f"csrc/{name}.cu", "target": "t", "object": f"{name}.o", "device": True, "symbols": symbols,
            "deps": [], "sizes": map_sizes.pack(symbols, {"sm_90": _record(kernels, image, stored)}), **extra}


def _document(*objects: dict) -> dict:
    return {"version": 1, "commit": "", "cuda": "", "generated_at": "", "build_dirs": [], "incomplete": False,
            "errors": [], "objects": list(objects), "stats": {}}


def _write_map(path: Path, document: dict) -> Path:
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    return path


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR "), captured.err
    assert "Traceback" not in captured.out + captured.err
    return lines[0]


# --------------------------------------------------------------------------------------------- figures


def test_a_sizes_list_shorter_than_its_symbols_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.1: zip() would drop the symbols past the list's end, and their bytes with them."""
    obj = _object("a", {"K": 100, "L": 200}, 1000)
    obj["sizes"]["sm_90"]["code"] = obj["sizes"]["sm_90"]["code"][:1]
    with pytest.raises(MapError, match=r"objects\[0\]\.sizes\.sm_90\.code: 1 sizes for 2 symbols"):
        map_sizes.unpack(obj["symbols"], obj["sizes"], "m: objects[0]")
    path = _write_map(tmp_path / "short.json.gz", _document(obj))
    assert main(["size", str(path)]) == 1
    assert "1 sizes for 2 symbols" in _one_error(capsys)


def test_a_wheels_versioned_library_is_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.2: ``libk.so.1`` is a shared library as much as ``libk.so`` is."""
    wheel = tmp_path / "k-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(OBJECTS / "cuda.o", "k/libk.so.1")
        z.writestr("k/__init__.py", "")
    assert main(["size", "--json", str(wheel)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (image,) = sizes.measure(OBJECTS / "cuda.o")
    assert doc["totals"]["code"] == sum(image.code.values()) > 0
    assert doc["totals"]["bytes"] == image.size


@pytest.mark.parametrize("definers", [2, 3])
def test_a_split_kernels_remainder_is_charged(definers: int) -> None:
    """26s.3: a device-linked kernel's 301 bytes (777 stored of 1,001) split among its definers add up exactly."""
    link = _object("dlink", {"K": 301}, 1001, 777, device_link=True)
    objects = [_object(f"d{i}", {"K": 301}, 900) for i in range(definers)]
    found = sizereport.from_map(_document(*objects, link), "m").pieces
    kernel = [p for p in found if p.kernel == "K"]
    assert len(kernel) == definers
    assert sum(p.bytes for p in kernel) == 301
    share, rest = divmod(301, definers)
    assert sorted(p.bytes for p in kernel) == sorted([share] * (definers - 1) + [share + rest])
    assert sum(p.bytes for p in found) == 1001 and sum(p.stored for p in found) == 777
    totals = sizereport.totals(found)
    assert (totals["bytes"], totals["stored"]) == (1001, 777)


def test_kernels_not_in_the_map_are_no_duplicates() -> None:
    """26s.4: a kernel no object of the map defines, in two libraries' device-linked images, has no object to be a
    copy of: it is charged to (not in the map), and only the map's kernels are duplicates."""
    document = _document(_object("a", {"K": 300}, 1000))
    libraries = [(f"pkg/lib{n}.so", [("sm_90", _record({"K": 300, "X": 200}, 2000))]) for n in "ab"]
    found = sizereport.join(libraries, document).pieces
    assert {p.origin.source for p in found if p.kernel == "X"} == {sizereport.NOT_IN_MAP}
    (dup,) = sizereport.duplicates(found)
    assert dup.kernel == "K"
    # without a map, every image is a unit of its own, and X is a duplicate too
    assert {d.kernel for d in sizereport.duplicates(sizereport.join(libraries, None).pieces)} == {"K", "X"}


def _section(data: bytes, name: str) -> tuple[int, int, int]:
    """(the offset of its header, of its name in .shstrtab, its size) of section ``name``."""
    import io

    elf = ELFFile(io.BytesIO(data))
    strtab = elf.get_section(elf["e_shstrndx"])["sh_offset"]
    for i, s in enumerate(elf.iter_sections()):
        if s.name == name:
            return elf["e_shoff"] + i * elf["e_shentsize"], strtab + s["sh_name"], s["sh_size"]
    raise AssertionError(name)


def test_a_kernel_without_its_text_section_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.5: a cubin whose entry function has no ``.text.<kernel>`` (renamed ``.Text.``): its code cannot be
    measured, and 0 bytes would be a wrong figure, so the file is refused (pyelftools reads it as it is)."""
    data = bytearray((OBJECTS / "k.cubin").read_bytes())
    _, name, _ = _section(bytes(data), ".text._Z5childPi")
    data[name + 1 : name + 2] = b"T"
    bad = tmp_path / "no_text.cubin"
    bad.write_bytes(bytes(data))
    with bad.open("rb") as f:
        assert ".Text._Z5childPi" in [s.name for s in ELFFile(f).iter_sections()]
    with pytest.raises(FormatError, match=r"kernel _Z5childPi has no \.text\.<kernel> section"):
        sizes.measure(bad)
    assert main(["size", str(bad)]) == 1
    assert "has no .text.<kernel> section" in _one_error(capsys)


def test_two_images_of_one_architecture_sum_their_stored_bytes(tmp_path: Path) -> None:
    """26s.6: ``ld -r`` of a plain and a compressed build of one source holds two sm_80 images: the map's record
    sums both their image and their stored bytes (and each kernel's, twice)."""
    ld = shutil.which("ld")
    if ld is None:
        pytest.skip("ld (binutils)")
    both = tmp_path / "both.o"
    parts = [OBJECTS / "cuda.o", OBJECTS / "cuda_zstd.o"]
    subprocess.run([ld, "-r", "-z", "muldefs", *map(str, parts), "-o", str(both)], check=True)  # host code twice
    images = sizes.measure(both)
    (plain,), (compressed,) = (sizes.measure(p) for p in parts)
    assert sorted((i.arch, i.size, i.stored) for i in images) == sorted(
        (i.arch, i.size, i.stored) for i in (plain, compressed))
    assert compressed.stored < compressed.size
    (record,) = sizes.merged([(i.arch, i.record()) for i in images]).values()
    assert record["image"] == plain.size + compressed.size
    assert record["stored"] == plain.stored + compressed.stored
    assert record["code"] == {k: 2 * n for k, n in plain.code.items()}


def test_a_no_bits_section_costs_no_byte(tmp_path: Path) -> None:
    """26s.F1 (fresh pass): a kernel's NOBITS section (``.nv.shared.<k>`` mostly is) has a size but no file bytes."""
    data = bytearray((OBJECTS / "k.cubin").read_bytes())
    header, _, size = _section(bytes(data), ".nv.constant0._Z5childPi")
    data[header + 4 : header + 8] = (8).to_bytes(4, "little")  # sh_type = SHT_NOBITS
    path = tmp_path / "nobits.cubin"
    path.write_bytes(bytes(data))
    (before,) = sizes.measure(OBJECTS / "k.cubin")
    (image,) = sizes.measure(path)
    assert image.owned["_Z5childPi"] == before.owned["_Z5childPi"] - size
    assert image.overhead == before.overhead + size


def test_kernels_that_outweigh_their_cubin_are_refused(tmp_path: Path) -> None:
    """26s.F2 (fresh pass): three ``.text`` sections each claiming the rest of the file (in bounds, so overlapping):
    their sum is more than the cubin, a claim, refused rather than a negative overhead."""
    data = bytearray((OBJECTS / "k.cubin").read_bytes())
    for kernel in ("_Z5childPi", "_Z4fillILi2EEvPi", "_Z4fillILi1EEvPi"):
        header, _, _ = _section(bytes(data), f".text.{kernel}")
        offset = int.from_bytes(data[header + 24 : header + 32], "little")
        data[header + 32 : header + 40] = (len(data) - offset).to_bytes(8, "little")
    path = tmp_path / "overlap.cubin"
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="more than the 6184 of the image"):
        sizes.measure(path)


def test_a_link_image_whose_kernels_the_map_lacks_is_not_in_the_map() -> None:
    """26s.F3, F4 (fresh pass): a device-linked image none of whose kernels the map defines (a third party's) is charged
    to (not in the map), its overhead too; one with a kernel of the map keeps its overhead, under the target
    of the kernels' objects."""
    document = _document(_object("a", {"K": 300}, 1000))
    found = sizereport.join([("pkg/lib.so", [("sm_90", _record({"X": 200}, 2000))])], document).pieces
    assert {(p.kind, p.origin.source) for p in found} == {("code", sizereport.NOT_IN_MAP),
                                                          ("overhead", sizereport.NOT_IN_MAP)}
    found = sizereport.join([("pkg/lib.so", [("sm_90", _record({"K": 300, "X": 200}, 2000))])], document).pieces
    (overhead,) = [p for p in found if p.kind == "overhead"]
    assert (overhead.origin.source, overhead.origin.target, overhead.bytes) == (sizereport.DEVICE_LINK, "t", 1500)


def test_an_images_stored_bytes_are_shared_out_whole() -> None:
    """26s.F5 (fresh pass): rounding each kernel's share of the stored bytes down leaves a remainder: the overhead's."""
    found = sizereport.pieces(sizereport.Origin("s", "t", "o", "f"), "sm_90", _record({"K": 333, "L": 333}, 1000, 7))
    assert sum(p.stored for p in found) == 7
    assert [p.stored for p in found if p.kind == "code"] == [2, 2]


# --------------------------------------------------------------------------------------------- an empty kernel name


def test_an_empty_kernel_name_is_refused_by_the_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.8: an empty string names no kernel. The validator refuses such a map (select then holds it as no
    evidence, failing closed), and size says so in one line, before the treemap that failed on it is drawn."""
    document = _document(_object("a", {"": 100, "K": 200}, 1000))
    assert validation.problems(document) == ["objects[0].symbols[0]: an empty string is no kernel's name"]
    assert main(["validate", str(_write_map(tmp_path / "empty.json.gz", document))]) != 0
    capsys.readouterr()
    page = tmp_path / "size.html"
    assert main(["size", str(tmp_path / "empty.json.gz"), "--html", str(page)]) == 1
    assert "an empty string is no kernel's name" in _one_error(capsys)
    assert not page.exists()


def test_the_treemap_draws_a_kernel_with_no_name() -> None:
    """26s.7: a binary's entry function with an empty name is a kernel's leaf, labelled as nameless."""
    origin = sizereport.Origin("csrc/a.cu", "t", "a.o", "lib.so")
    found = sizereport.pieces(origin, "sm_90", _record({"": 100, "K": 200}, 1000))
    html = treemap.html(found, "device code", [])
    assert treemap.UNNAMED in html and "(image overhead)" in html
    leaves = {b.node.label: b.node.value for b in treemap.layout(treemap.tree(found)) if b.depth == 3}
    assert leaves == {treemap.UNNAMED: 100, "K": 200, "(image overhead)": 700}


# --------------------------------------------------------------------------------------------- wheels, bounded


def _zeros_member(z: zipfile.ZipFile, name: str, mib: int) -> None:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with z.open(info, "w", force_zip64=True) as f:  # streamed: never mib MiB in memory
        chunk = bytes(1 << 20)
        for _ in range(mib):
            f.write(chunk)


def _bomb_wheel(path: Path, member: str, first: Path | None = None) -> Path:
    """A wheel whose ``member`` is 64 MiB of zeros: some 64 KiB deflated, 1,000x (a real library is 2-5x)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        if first is not None:
            z.write(first, "k/liba.so")
        _zeros_member(z, member, 64)
    return path


def test_a_zip_bomb_library_is_refused_by_its_header_before_anything_inflates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.9: the bomb is the second library; it is refused by what its header claims, before the first is read."""
    wheel = _bomb_wheel(tmp_path / "bomb-1.0-py3-none-any.whl", "k/libbomb.so", OBJECTS / "cuda.o")
    assert main(["size", str(wheel)]) == 1
    line = _one_error(capsys)
    assert "k/libbomb.so: claims 67,108,864 bytes from" in line and "a zip bomb, not read" in line


def test_a_zip_bomb_map_in_a_wheel_is_refused_by_its_header(tmp_path: Path) -> None:
    """26s.9: the map member too: never inflated into memory to be found no gzip."""
    wheel = _bomb_wheel(tmp_path / "bomb-1.0-py3-none-any.whl", f"k/{kernelmap.MAP_NAME}")
    with pytest.raises(MapError, match="claims 67,108,864 bytes from .*a zip bomb"):
        kernelmap.load(wheel)


def test_a_wheel_of_too_many_members_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """26s.10: the count is bounded (here at 10, monkeypatched) before any member is read."""
    monkeypatch.setattr(wheels, "WHEEL_MAX_MEMBERS", 10)
    wheel = tmp_path / "many-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for i in range(11):
            z.writestr(f"k/m{i}.py", "")
    assert main(["size", str(wheel)]) == 1
    assert "11 members, more than a wheel holds (10)" in _one_error(capsys)


def test_a_wheels_libraries_are_bounded_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """26s.11: each library within its bounds, together past the total (monkeypatched to 30 KB): refused whole."""
    monkeypatch.setattr(wheels, "WHEEL_MAX_TOTAL", 30_000)
    wheel = tmp_path / "two-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(OBJECTS / "cuda.o", "k/liba.so")
        z.write(OBJECTS / "cuda.o", "k/libb.so")
    assert main(["size", str(wheel)]) == 1
    assert f"its members claim {2 * (OBJECTS / 'cuda.o').stat().st_size:,} bytes together" in _one_error(capsys)


# --------------------------------------------------------------------------------------------- gzip maps, streamed


@pytest.mark.parametrize("inflater", ["zlib-ng", "zlib"])
def test_a_gzip_bomb_map_holds_no_more_than_its_bound_while_refused(inflater: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Inflated a piece at a time and checked after each, a bomb costs its bound, not twice (the standard
    library's ``decompress(max_length)`` gathers its output in blocks, then joins them; zlib-ng's does not,
    and a map is inflated by either). tracemalloc counts bytes allocated, not time: the figure does not
    depend on the machine."""
    import zlib

    if inflater == "zlib":
        monkeypatch.setattr(mapformat.file, "_inflating", zlib)
    else:
        assert mapformat.file._inflating is not zlib
    bomb = gzip.compress(b" " * (64 << 20), compresslevel=9)
    limit = min(mapformat.MAX_JSON, mapformat.MAX_RATIO * len(bomb) + (1 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(MapError, match="decompresses to more than"):
            mapformat.decode_bytes(bomb, "m")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert limit < peak < limit * 1.25 + (2 << 20)


def test_a_wheel_with_two_maps_is_refused(tmp_path: Path) -> None:
    """26s.F6 (fresh pass): which of two maps would be the wheel's? Neither: one error."""
    wheel = tmp_path / "two-1.0-py3-none-any.whl"
    raw = _write_map(tmp_path / "m.json.gz", _document(_object("a", {"K": 300}, 1000))).read_bytes()
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"a/{kernelmap.MAP_NAME}", raw)
        z.writestr(f"b/{kernelmap.MAP_NAME}", raw)
    with pytest.raises(MapError, match=f"holds 2 {kernelmap.MAP_NAME} files, expected one"):
        kernelmap.load(wheel)


def test_a_wheels_unreadable_library_is_named_by_its_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """26s.F7 (fresh pass): the error names ``wheel!member``, never the temporary copy size measured."""
    wheel = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("k/libx.so", b"not an ELF file at all")
    assert main(["size", str(wheel)]) == 1
    line = _one_error(capsys)
    assert line.startswith(f"ERROR {wheel}!k/libx.so: not an ELF file") and "ksm-size-" not in line
