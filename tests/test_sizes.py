"""Issue 21: sizes measured, stored in the map, attributed, compared, gated and drawn.

- Every file of the CUDA corpus (objects, -rdc, compressed, a fatbin, a
  cubin, a shared library, an executable, an archive): the cubins cuobjdump
  13.5 extracts, read with pyelftools, give the same multiset of
  (architecture, kernel, ``.text.<kernel>`` bytes) and of cubin sizes as the
  native reader. HIP: the code objects clang-offload-bundler extracts, the
  same per kernel (function symbol and descriptor sizes).
- The example project's wheel, built by pip, and the same project where
  ``attention.cu`` instantiates one more template kernel: the wheel's bytes
  are charged to the map's sources; the template in two ``.cu`` files is a
  duplicate; the diff names the source and the kernel with the bytes
  pyelftools reads; ``--max-mb`` names them; the treemap fills a Chromium
  window of any width, and a diff's treemap colours growth and shrinking.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import toolchains
from conftest import example_wheel
from elftools.elf.elffile import ELFFile

from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.size import sizeinputs, sizereport
from kernel_symbol_map.errors import FormatError
from kernel_symbol_map.mapformat import validation
from kernel_symbol_map.readers import sizes
from kernel_symbol_map.readers._blob import Blob

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_size import independent  # noqa: E402 - cuobjdump's cubins read by pyelftools, as the bench does


def test_sass_sizes_equal_cuobjdump_xelf_read_by_pyelftools(cuda_corpus: dict[str, Path],
                                                            cuobjdumps: dict[str, str], tmp_path: Path) -> None:
    checked = 0
    for name, path in cuda_corpus.items():
        images = [i for i in sizes.measure(path) if i.kind == "cubin"]  # every file reads: none is skipped
        if name.endswith(".cubin"):
            cubins = [tmp_path / f"{name}.sm_90.cubin"]
            cubins[0].write_bytes(path.read_bytes())
        else:
            out = tmp_path / name
            out.mkdir()
            subprocess.run([cuobjdumps["13.5"], "-xelf", "all", str(path)], cwd=out, capture_output=True, check=False)
            cubins = sorted(out.glob("*.cubin"))
        kernels, files = independent(cubins)
        ours_kernels = Counter((i.arch, k, n) for i in images for k, n in i.code.items())
        ours_files = Counter((i.arch, i.size) for i in images)
        assert ours_kernels == kernels, name
        assert ours_files == files, name
        checked += bool(images)
    assert checked == len(cuda_corpus) - 3  # all but host.o, lto_only.o and ptx_only.o hold cubins


def test_what_a_cubin_holds_adds_up(cuda_corpus: dict[str, Path]) -> None:
    for image in sizes.measure(cuda_corpus["gencode3.o"]):
        if image.kind == "cubin":
            assert image.code and image.overhead > 0
            assert sum(image.code.values()) + sum(image.owned.values()) + image.overhead == image.size
            found = sizereport.pieces(sizereport.Origin("", "", "", "x"), image.arch, image.record())
            assert sum(p.bytes for p in found) == image.size and sum(p.stored for p in found) == image.stored
            assert all(p.stored >= 0 for p in found)
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
    assert doc["totals"]["code"] == sum(n for i in images for n in i.code.values())
    assert {r["key"] for r in doc["rows"]} == {k for i in images for k in i.code}
    assert {d["kernel"] for d in doc["duplicates"]} == set(images[0].code)
    first = images[0]
    assert sum(d["bytes"] for d in doc["duplicates"]) == sum(first.code.values()) + sum(first.owned.values())
    assert main(["size", str(one), "/nonexistent.o"]) == 1
    assert "ERROR" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- HIP


def _code_objects(path: Path, out: Path) -> list[Path]:
    """The code objects clang-offload-bundler unbundles from ``path`` (an object's .hip_fatbin, a raw bundle)."""
    if path.read_bytes()[:4] == b"\x7fELF" and ELFFile(path.open("rb")).header["e_machine"] == "EM_AMDGPU":
        return [path]
    bundler = toolchains.require(shutil.which("clang-offload-bundler-19"), "clang-offload-bundler-19 (clang-19)")
    raw = out / f"{path.name}.hipfb"
    if path.suffix == ".hipfb":
        raw.write_bytes(path.read_bytes())
    else:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(path), str(raw)], check=True)
    listed = subprocess.run([bundler, "--list", "--type=o", f"--input={raw}"], capture_output=True, text=True,
                            check=True).stdout.split()
    found = []
    for target in (t for t in listed if not t.startswith("host-")):
        co = out / f"{path.name}.{target.rsplit('-', 1)[1]}.co"
        subprocess.run([bundler, "--unbundle", "--type=o", f"--input={raw}", f"--targets={target}", f"--output={co}"],
                       check=True)
        found.append(co)
    return found


def _amdgpu_kernels(co: Path) -> Counter[tuple[str, int, int]]:
    """(kernel, function bytes, descriptor bytes) per kernel, read by pyelftools."""
    with co.open("rb") as f:
        symbols = {s.name: s for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols()}
    return Counter((n[:-3], symbols[n[:-3]]["st_size"], s["st_size"]) for n, s in symbols.items()
                   if n.endswith(".kd") and s["st_shndx"] != "SHN_UNDEF")


def test_hip_sizes_equal_clang_offload_bundler_read_by_pyelftools(hip_corpus: dict[str, Path], tmp_path: Path) -> None:
    for name in ("hipcc.o", "clang.o", "clang_zstd.o", "clang_zlib.o", "raw.hipfb", "gfx90a.o"):
        images = sizes.measure(hip_corpus[name])
        assert images and all(i.kind == sizes.CODE_OBJECT for i in images), name
        cos = _code_objects(hip_corpus[name], tmp_path)
        theirs = sum((_amdgpu_kernels(co) for co in cos), Counter())
        ours = Counter((k, n, i.owned[k]) for i in images for k, n in i.code.items())
        assert ours == theirs and ours, name
        assert Counter(i.size for i in images) == Counter(co.stat().st_size for co in cos), name
        if name.startswith("clang_z"):  # compressed: the bundle's stored bytes are shared out
            assert sum(i.stored for i in images) < sum(i.size for i in images)


# --------------------------------------------------------------------------------------------- the example


EXAMPLE = toolchains.DATA.parent.parent / "examples" / "cuda_ext"
ADDED = "_ZN4demo16attention_kernelILi256EEEvPfPKfi"
SCALE_FLOAT = "_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i"


@pytest.fixture(scope="module")
def wheels(our_wheel: Path, clean_pip: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example's wheel, and the wheel of a copy where attention.cu instantiates attention_kernel<256>."""
    out = tmp_path_factory.mktemp("size-wheels")
    old = example_wheel(clean_pip, our_wheel, EXAMPLE, out / "old")
    grown = out / "grown"
    shutil.copytree(EXAMPLE, grown)
    attention = grown / "csrc" / "attention.cu"
    text = attention.read_text()
    before = "  else attention_kernel<128><<<tokens, 128>>>(out, q, tokens);"
    assert before in text
    attention.write_text(text.replace(before, "  else if (head_dim == 128) attention_kernel<128><<<tokens, 128>>>(out, q, "
                                      "tokens);\n  else attention_kernel<256><<<tokens, 256>>>(out, q, tokens);"))
    return old, example_wheel(clean_pip, our_wheel, grown, out / "new")


def _size_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["size", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _wheel_cubins(wheel: Path, out: Path, cuobjdumps: dict[str, str]) -> dict[tuple[str, str], tuple[int, int]]:
    """(arch, kernel) -> (SASS, owned bytes) of every cubin in the wheel's libraries: cuobjdump -xelf, pyelftools."""
    out.mkdir()
    with zipfile.ZipFile(wheel) as z:
        libraries = [n for n in z.namelist() if n.endswith(".so")]
        z.extractall(out, libraries)
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for library in libraries:
        subprocess.run([cuobjdumps["13.5"], "-xelf", "all", str(out / library)], cwd=out, capture_output=True,
                       check=True)
    for cubin in out.glob("*.cubin"):
        arch = "sm_" + cubin.name.rsplit(".sm_", 1)[1].split(".")[0]
        with cubin.open("rb") as f:
            elf = ELFFile(f)
            names = [(s.name, s["sh_size"], s["sh_type"]) for s in elf.iter_sections()]
        for name, size, _ in names:
            if name.startswith(".text."):
                kernel = name[len(".text."):]
                owned = sum(n for other, n, kind in names if other.endswith("." + kernel) and other != name
                            and kind != "SHT_NOBITS")
                key = (arch, kernel)
                code0, owned0 = found.get(key, (0, 0))
                found[key] = (code0 + size, owned0 + owned)
    return found


def test_a_wheel_is_charged_to_the_sources_of_the_map_it_ships(wheels: tuple[Path, Path], tmp_path: Path,
                                                              cuobjdumps: dict[str, str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = wheels
    doc = _size_json(capsys, str(old), "--by", "source")
    assert {r["key"] for r in doc["rows"]} == {"csrc/activation.cu", "csrc/attention.cu", "csrc/reduce.cu"}
    theirs = _wheel_cubins(old, tmp_path / "x", cuobjdumps)
    kernels = {r["key"]: r for r in _size_json(capsys, str(old), "--by", "kernel")["rows"]}
    assert {k: (r["code"], r["owned"]) for k, r in kernels.items()} == {
        k: tuple(sum(v[i] for (a, kk), v in theirs.items() if kk == k) for i in (0, 1)) for _, k in theirs}
    # the map it ships holds the same bytes, per object and architecture
    from_map = {r["key"]: r["bytes"] for r in _size_json(capsys, str(old.parent / "build" / "kernel_symbol_map.json.gz"),
                                                         "--by", "source")["rows"]}
    assert from_map == {r["key"]: r["bytes"] for r in doc["rows"]}


def test_a_template_instantiated_in_two_sources_is_a_duplicate(wheels: tuple[Path, Path], tmp_path: Path,
                                                               cuobjdumps: dict[str, str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = wheels
    doc = _size_json(capsys, str(old))
    (dup,) = doc["duplicates"]
    assert (dup["kernel"], dup["arch"]) == (SCALE_FLOAT, "sm_80")
    assert sorted(c["source"] for c in dup["copies"]) == ["csrc/activation.cu", "csrc/attention.cu"]
    theirs = _wheel_cubins(old, tmp_path / "x", cuobjdumps)[("sm_80", SCALE_FLOAT)]
    assert dup["bytes"] == sum(theirs) // 2  # two equal copies: one is waste
    assert main(["size", str(old)]) == 0
    assert (f"duplicates: 1 kernel compiled into more than one object, {sum(theirs) // 2:,} B beyond one copy of each"
            in capsys.readouterr().out)


def test_the_diff_names_the_source_and_the_kernel_that_grew(wheels: tuple[Path, Path], tmp_path: Path,
                                                            cuobjdumps: dict[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    old, new = wheels
    doc = _size_json(capsys, str(old), str(new))
    assert doc["schema"] == "kernel-symbol-map/size-diff/1"
    code, owned = _wheel_cubins(new, tmp_path / "x", cuobjdumps)[("sm_80", ADDED)]
    assert doc["added"] == [{"kernel": ADDED, "sources": ["csrc/attention.cu"], "bytes": code + owned}]
    assert doc["removed"] == []
    (source,) = doc["by"]["source"]
    assert source["key"] == "csrc/attention.cu" and source["change"] == doc["change"] > code + owned
    assert [c["key"] for c in doc["by"]["target"]] == ["_ops"]
    assert doc["by"]["kernel"] == [{"key": ADDED, "old": 0, "new": code + owned, "change": code + owned}]
    # the maps the wheels ship give the same diff
    maps = [str(w.parent / "build" / "kernel_symbol_map.json.gz") for w in wheels]
    assert _size_json(capsys, *maps)["by"] == doc["by"]
    assert main(["size", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert f"{code + owned:>12,}  demo::attention_kernel<256>  (csrc/attention.cu)" in out  # names people read
    assert main(["size", str(old), str(new), "--mangled"]) == 0
    assert f"{code + owned:>12,}  {ADDED}  (csrc/attention.cu)" in capsys.readouterr().out


def test_max_mb_fails_above_the_budget_and_names_the_growth(wheels: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    old, new = wheels
    assert main(["size", str(old), str(new), "--max-mb", "1000"]) == 0
    assert main(["size", str(old), str(new), "--max-mb", f"{(new.stat().st_size + 1) / (1 << 20)}"]) == 0  # NEW's
    capsys.readouterr()
    budget = (new.stat().st_size - 1) / (1 << 20)
    assert main(["size", str(old), str(new), "--max-mb", f"{budget}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ERROR") and "above the budget" in err[0]
    assert "the largest sources: csrc/attention.cu" in err[0]
    assert "the largest growth: csrc/attention.cu +" in err[0]


def test_a_wheels_zipped_and_unzipped_bytes_are_named_apart(wheels: tuple[Path, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: a wheel's file bytes are zipped, its libraries' are not; device bytes are a share of the
    libraries' only (the old line divided unzipped by zipped: "169%")."""
    old, _ = wheels
    with zipfile.ZipFile(old) as z:
        libraries = [i for i in z.infolist() if i.filename.endswith(".so") or ".so." in i.filename]
    unzipped = sum(i.file_size for i in libraries)
    (wheel,) = _size_json(capsys, str(old))["inputs"]
    assert (wheel["file_bytes"], wheel["library_bytes"]) == (old.stat().st_size, unzipped)
    assert 0 < wheel["stored_bytes"] <= unzipped
    assert main(["size", str(old)]) == 0
    line = next(t for t in capsys.readouterr().out.splitlines() if t.startswith("wheel: "))
    share = f"{wheel['stored_bytes'] / unzipped:.1%}"
    assert len(libraries) == 2  # the extension and its kernels' library
    assert line.startswith(f"wheel: {old.stat().st_size:,} B zipped; 2 shared libraries in it: {unzipped:,} B unzipped, "
                           f"of which device images store {wheel['stored_bytes']:,} B ({share})")


def test_a_budget_line_never_reads_a_figure_as_its_budget() -> None:
    """Issue 30: "2.4 MiB above the budget of 2.4 MiB", "+0.00 MiB": enough digits, or bytes."""
    mib = 1 << 20
    assert sizeinputs.mib(int(2.4 * mib) + 1, apart_from=2.4) == "2.400001"
    assert sizeinputs.mib(int(2.45 * mib), apart_from=2.4) == "2.45"
    assert sizeinputs.mib(3 * mib, apart_from=2.4) == "3.00"
    assert sizeinputs.growth(1234) == "+1,234 B" and sizeinputs.growth(-mib) == "-1.00 MiB"


def test_the_filter_keeps_the_kernels_whose_demangled_name_matches(wheels: tuple[Path, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = wheels
    every = {r["key"] for r in _size_json(capsys, str(old), "--by", "kernel")["rows"]}
    kept = {r["key"] for r in _size_json(capsys, str(old), "--by", "kernel", "--filter", "scale_kernel<float>")["rows"]}
    assert kept == {SCALE_FLOAT} and SCALE_FLOAT in every and len(every) > 1
    regex = {r["key"] for r in _size_json(capsys, str(old), "--by", "kernel", "--filter", "^demo::scale_k")["rows"]}
    assert SCALE_FLOAT in regex and regex < every
    assert main(["size", str(old), "--by", "kernel", "--filter", "scale_kernel<float>"]) == 0
    out = capsys.readouterr().out
    assert "demo::scale_kernel<float>" in out and SCALE_FLOAT not in out
    assert "only kernels matching 'scale_kernel<float>': 1 kernel" in out


def test_size_old_new_html_draws_the_diff_page_and_says_where(wheels: tuple[Path, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    old, new = wheels
    page = tmp_path / "diff.html"
    assert main(["size", str(old), str(new), "--html", str(page)]) == 0
    assert capsys.readouterr().err.splitlines() == [f"wrote {page}"]
    text = page.read_text()
    assert "grew (+" in text and f"OLD {old}: device code" in text and f"NEW {new}: device code" in text
    assert main(["size", str(new), "--html", str(page)]) == 0  # one input: its own treemap, no legend of growth
    assert "grew (+" not in page.read_text() and capsys.readouterr().err.splitlines() == [f"wrote {page}"]


def _chromium(page: Path, width: int, height: int, shot: Path) -> tuple[Any, dict[tuple[str, ...], dict]]:
    """The page's screenshot in a ``width`` x ``height`` window, and its boxes as the page laid them out for
    that window, by path: a real browser, from disk, with networking off."""
    from PIL import Image

    chromium = toolchains.require(shutil.which("chromium"), "chromium (Debian package chromium)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--proxy-server=127.0.0.1:9"]

    def dom(window_height: int) -> tuple[str, list[float]]:
        out = subprocess.run([*flags, f"--window-size={width},{window_height}", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        (viewport,) = re.findall(r'data-viewport="([^"]*)"', out)
        return out, [float(v) for v in viewport.split()]

    # --dump-dom's viewport is the window less the browser's frame, the screenshot's the whole window (the page
    # draws at load, then again on the resize): the frame learnt from one dump, the second is the screenshot's
    _, (_, first, _) = dom(height)
    text, (w, h, top) = dom(2 * height - int(first))
    assert (w, h) == (width, height)
    subprocess.run([*flags, f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (width, height)
    boxes = {}
    for found, label in _Boxes.of(text):
        depth, x, y, bw, bh = (float(v) for v in found["data-box"].split())
        fill = re.search(r"background: rgb\((\d+), (\d+), (\d+)\)", found["style"])
        red, green, blue = (int(v) for v in fill.groups())
        path = tuple(found["title"].split("\n")[0].rsplit(": ", 1)[0].split(" / "))
        boxes[path] = {"depth": int(depth), "x": x, "y": y + top, "w": bw, "h": bh, "rgb": (red, green, blue),
                       "title": found["title"], "label": label, "class": found["class"].split(), "top": top}
    return image, boxes


class _Boxes(HTMLParser):
    """The treemap's boxes in a DOM: (attributes, label) of each ``<div data-box>``. A parser, not a pattern:
    Chromium writes a ``<`` or ``>`` in an attribute (``attention_kernel<256>``) as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[dict[str, str], str]] = []
        self.open = False

    @classmethod
    def of(cls, text: str) -> list[tuple[dict[str, str], str]]:
        parser = cls()
        parser.feed(text)
        parser.close()
        return parser.found

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.open = tag == "div" and "data-box" in found
        if self.open:
            self.found.append((found, ""))

    def handle_data(self, data: str) -> None:
        if self.open:
            found, label = self.found[-1]
            self.found[-1] = (found, label + data)

    def handle_endtag(self, tag: str) -> None:
        self.open = False


def _near(image: Any, x: float, y: float, rgb: tuple[int, int, int], tolerance: int = 3) -> bool:
    return max(abs(a - b) for a, b in zip(image.getpixel((int(x), int(y))), rgb)) <= tolerance


def _example_pieces(wheel: Path) -> list[sizereport.Piece]:
    document = json.loads(gzip.decompress(zipfile.ZipFile(wheel).read("cuda_ext/kernel_symbol_map.json.gz")))
    return sizereport.join(_library_records(wheel), document).pieces


@pytest.mark.parametrize("width", [800, 1600])
def test_the_treemap_fills_the_window_at_any_width(wheels: tuple[Path, Path], tmp_path: Path, width: int) -> None:
    """Issue 30: the page lays itself out at the window's size (an 800 and a 1,600 px window), as the
    ``squarify`` package lays those values out, and the browser draws each box in its colour."""
    import squarify

    from kernel_symbol_map.consumer.size import treemap

    old, _ = wheels
    page = tmp_path / "size.html"
    assert main(["size", str(old), "--html", str(page)]) == 0
    image, boxes = _chromium(page, width, 600, tmp_path / "shot.png")
    targets = sorted((b for b in boxes.values() if b["depth"] == 1), key=lambda b: (b["x"], b["y"]))
    assert {p for p, b in boxes.items() if b["depth"] == 1} == {("_ops",), ("_reduce",)}
    top = targets[0]["top"]
    assert 0 < top < 100  # the title's line; the map is the rest of the window
    assert min(b["x"] for b in targets) == 0 and max(b["x"] + b["w"] for b in targets) == pytest.approx(width)
    assert max(b["y"] + b["h"] for b in targets) == pytest.approx(600)
    # the layout of each level, the package's for the rectangle it was given
    pieces = _example_pieces(old)
    root = treemap.tree(pieces)
    levels = [((), root, 0.0, top, float(width), 600 - top)]
    for path, node, x, y, w, h in levels:
        children = sorted(node.children.values(), key=lambda n: (-n.value, n.label))
        rects = squarify.squarify(squarify.normalize_sizes([c.value for c in children], w, h), x, y, w, h)
        for child, rect in zip(children, rects):
            box = boxes[(*path, child.label)]
            assert (box["x"], box["y"], box["w"], box["h"]) == pytest.approx(
                (rect["x"], rect["y"], rect["dx"], rect["dy"]), abs=1e-6)
            if child.children and len(path) < 2:
                band = treemap.HEADER[len(path)] if box["h"] > 3 * treemap.HEADER[len(path)] else 0
                levels.append(((*path, child.label), child, box["x"] + treemap.PAD, box["y"] + band + treemap.PAD,
                               box["w"] - 2 * treemap.PAD, box["h"] - band - 2 * treemap.PAD))
    assert len(levels) == 1 + 2 + 3  # both targets, and the three sources, laid out inside
    # the browser's pixels: the window's edges in the targets' colours, each large kernel in its own
    for box in targets:
        middle = box["y"] + box["h"] / 2
        if box["x"] == 0:
            assert _near(image, 1, middle, box["rgb"]), box["title"]
        if box["x"] + box["w"] == pytest.approx(width):
            assert _near(image, width - 2, middle, box["rgb"]), box["title"]
    leaves = [b for b in boxes.values() if b["depth"] == 3 and b["w"] > 20 and b["h"] > 20]
    assert len(leaves) >= 4
    for box in leaves:  # a point inside, below the label: the leaf's own fill
        assert _near(image, box["x"] + box["w"] / 2, box["y"] + box["h"] - 5, box["rgb"]), box["title"]
    for path, box in boxes.items():  # labels: a source's keeps its file name, a kernel's is its short name
        if box["depth"] == 2 and box["label"]:
            assert any(box["label"] == c or box["label"].startswith(c + " ") for c in treemap.path_labels(path[1]))
            assert path[1].rsplit("/", 1)[-1] in box["label"]
    kernels = [b["label"] for b in boxes.values() if b["depth"] == 3]
    assert any(k.startswith("demo::silu_kernel") for k in kernels)
    assert any(k.startswith("demo::attention_kernel<") for k in kernels)
    below = image.crop((0, 0, width, int(top)))  # the title: dark text on white
    assert min(below.getextrema()[0][0], below.getextrema()[1][0]) < 100


def test_the_diff_treemap_colours_growth_red_and_shrinking_green(wheels: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue 30: NEW's treemap coloured by its change against OLD, both ways round: attention.cu grew by
    attention_kernel<256> (an added, outlined box; its target red, the unchanged one grey); the other way round
    attention.cu is green, and the kernel, with no area, is listed with its bytes."""
    from kernel_symbol_map.consumer.size import treemap

    old, new = (_example_pieces(w) for w in wheels)
    (added,) = [c for c in sizereport.changes(old, new, "kernel")]
    assert (added.key, added.old) == (ADDED, 0)
    shots = {}
    for name, (a, b) in (("grew", (old, new)), ("shrank", (new, old))):
        page = tmp_path / f"{name}.html"
        page.write_text(treemap.diff_html(a, b, f"diff {name}", []))
        shots[name] = (page.read_text(), *_chromium(page, 1200, 800, tmp_path / f"{name}.png"))

    def band(image: Any, box: dict) -> bool:  # the label band's right end: no text there
        return _near(image, box["x"] + box["w"] - 4, box["y"] + 8, box["rgb"])

    text, image, boxes = shots["grew"]
    (kernel,) = [b for b in boxes.values() if ADDED in b["title"]]
    assert "added" in kernel["class"] and kernel["rgb"] == tuple(int(treemap.ADDED[i:i + 2], 16) for i in (1, 3, 5))
    assert f"{added.new:,} bytes" in kernel["title"] and "added: not in OLD" in kernel["title"]
    assert _near(image, kernel["x"] + kernel["w"] / 2, kernel["y"] + kernel["h"] - 4, kernel["rgb"])
    grown = boxes[("_ops", "csrc/attention.cu")]
    red, green, blue = grown["rgb"]
    assert red > green + 40 and red > blue + 40 and band(image, grown)
    unchanged = boxes[("_reduce",)]
    assert unchanged["rgb"] == tuple(int(treemap.UNCHANGED[1][i:i + 2], 16) for i in (1, 3, 5))
    assert band(image, unchanged)
    assert "Removed" not in text

    text, image, boxes = shots["shrank"]
    shrunk = boxes[("_ops", "csrc/attention.cu")]
    red, green, blue = shrunk["rgb"]
    assert green > red + 20 and green > blue + 20 and band(image, shrunk)
    assert not any(ADDED in b["title"] for b in boxes.values())
    label = treemap.tree(new).children["_ops"].children["csrc/attention.cu"].children[ADDED].label
    assert (f'<tr title="{ADDED}"><td>{added.new:,} bytes</td><td>_ops / csrc/attention.cu / '
            f"{escape(label)}</td></tr>") in text
    # the totals, OLD -> NEW
    t_old, t_new = sizereport.totals(old)["bytes"], sizereport.totals(new)["bytes"]
    assert f"{t_new:,} -&gt; {t_old:,} bytes ({t_old - t_new:+,}" in text


def _library_records(wheel: Path) -> list[tuple[str, list[tuple[str, dict]]]]:
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in (n for n in z.namelist() if n.endswith(".so")):
            blob = Blob.from_bytes(name, z.read(name))
            out.append((name, [(i.arch, i.record()) for i in sizes.images(blob)]))
    return out


# --------------------------------------------------------------------------------------------- the map's field


def test_the_map_field_is_validated_and_bad_sizes_are_one_error_line(wheels: tuple[Path, Path], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = wheels
    document = json.loads(gzip.decompress((old.parent / "build" / "kernel_symbol_map.json.gz").read_bytes()))
    assert validation.problems(document) == []
    index, obj = next((i, o) for i, o in enumerate(document["objects"]) if "sizes" in o)
    record = obj["sizes"]["sm_80"]
    image = record["image"]
    for bad in ("big", 10.5, float("inf"), 10**400, -1, True):
        record["image"] = bad
        assert validation.problems(document) == [
            f"objects[{index}].sizes.sm_80.image: expected a whole number of bytes, not {validation._show(bad)}"]
    record["image"] = image
    record["code"].append(1)  # one size more than the object has symbols
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert main(["size", str(path)]) == 1
    assert f"objects[{index}].sizes.sm_80.code: {len(obj['symbols']) + 1} sizes for" in capsys.readouterr().err
    record["code"].pop()
    record["image"] = 10  # less than its kernels' bytes
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert main(["size", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"objects[{index}]: sizes.sm_80: its kernels' bytes add up to more" in err[0]
    for o in document["objects"]:  # a map from before issue 21: no sizes, said so
        o.pop("sizes", None)
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert main(["size", str(path)]) == 0
    assert "3 device objects without sizes" in capsys.readouterr().err


def test_a_family_keeps_the_anonymous_namespace() -> None:
    from kernel_symbol_map.consumer.maps.kernelmap import family

    assert family("void (anonymous namespace)::ak<int>(int*)") == "(anonymous namespace)::ak"
    assert family("(anonymous namespace)::ak()") == "(anonymous namespace)::ak"
    assert family("void ns::k<(anonymous namespace)::T>(int)") == "ns::k"


def test_a_section_size_past_the_end_of_the_cubin_is_refused(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    """A section's size is a claim: one running past the cubin is an error, never bytes counted."""
    data = bytearray(cuda_corpus["raw.cubin"].read_bytes())
    with cuda_corpus["raw.cubin"].open("rb") as f:
        elf = ELFFile(f)
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name.startswith(".text."))
        header = elf["e_shoff"] + index * elf["e_shentsize"]
    data[header + 32:header + 40] = (len(data) * 2).to_bytes(8, "little")  # sh_size
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="runs past the end"):
        sizes.measure(bad)
    assert main(["size", str(bad)]) == 1


def test_squarify_fills_the_rectangle_without_overlap() -> None:
    """Bruls, Huizing and van Wijk's own example (6, 6, 4, 3, 2, 2, 1 in 6 x 4), and 2,000 random values."""
    import itertools
    import random

    from kernel_symbol_map.consumer.size.treemap import squarify

    paper = squarify([6, 6, 4, 3, 2, 2, 1], 0, 0, 6, 4)
    assert [tuple(round(v, 3) for v in r) for r in paper[:2]] == [(0, 0, 3, 2), (0, 2, 3, 2)]
    rng = random.Random(21)
    for values, (w, h) in (([6, 6, 4, 3, 2, 2, 1], (6, 4)),
                           (sorted((rng.randint(1, 10**6) for _ in range(2000)), reverse=True), (1200, 720))):
        rects = squarify(values, 0, 0, w, h)
        assert sum(a * b for _, _, a, b in rects) == pytest.approx(w * h)
        for (x, y, a, b), v in zip(rects, values):
            assert -1e-6 <= x and x + a <= w + 1e-6 and -1e-6 <= y and y + b <= h + 1e-6
            assert a * b == pytest.approx(v * w * h / sum(values))
        if len(values) < 100:
            for p, q in itertools.combinations(rects, 2):
                overlap_x = min(p[0] + p[2], q[0] + q[2]) - max(p[0], q[0])
                overlap_y = min(p[1] + p[3], q[1] + q[3]) - max(p[1], q[1])
                assert overlap_x <= 1e-9 or overlap_y <= 1e-9


# --------------------------------------------------------------------------------------------- the review's cases


def test_sections_of_the_module_are_not_a_kernels_that_shares_their_name(cuda_corpus: dict[str, Path]) -> None:
    """``.nv.info`` is the module's, beside an extern "C" kernel called ``info``; ``.nv.info.info`` is the kernel's."""
    (image,) = sizes.measure(cuda_corpus["module_names.cubin"])
    with cuda_corpus["module_names.cubin"].open("rb") as f:
        found = {s.name: s["sh_size"] for s in ELFFile(f).iter_sections() if s["sh_type"] != "SHT_NOBITS"}
    assert ".nv.info" in found
    for kernel in ("info", "init", "entry"):
        assert image.code[kernel] == found[f".text.{kernel}"]
        assert image.owned[kernel] == sum(n for name, n in found.items()
                                          if name.endswith("." + kernel) and name.count(".") >= 3)


def test_a_compressed_ptx_entry_that_claims_too_much_is_refused(cuda_corpus: dict[str, Path], tmp_path: Path) -> None:
    from fatbin_patch import patched, read_field

    data = cuda_corpus["compress_default.o"].read_bytes()
    ptx = next(i for i in range(4) if read_field(data, "entry.kind", i) == 1)
    bad = tmp_path / "claims.o"
    bad.write_bytes(patched(data, "entry.uncompressed_size", 1 << 60, ptx))
    with pytest.raises(FormatError, match="PTX claims"):
        sizes.measure(bad)
    ours = [i for i in sizes.measure(cuda_corpus["compress_default.o"]) if i.kind == sizes.PTX]
    assert [i.size for i in ours] == [read_field(data, "entry.uncompressed_size", ptx)]


def _record(kernels: dict[str, int], image: int) -> dict:
    return {"image": image, "stored": image, "code": kernels}


def _object(name: str, target: str, kernels: dict[str, int], image: int, **extra: object) -> dict:
    from kernel_symbol_map.mapformat import sizes as map_sizes

    symbols = sorted(kernels)
    return {"source": f"csrc/{name}.cu", "target": target, "object": f"{name}.o", "device": True,
            "symbols": symbols, "deps": [], "sizes": map_sizes.pack(symbols, {"sm_90": _record(kernels, image)}),
            **extra}


def _document(*objects: dict) -> dict:
    return {"version": 1, "incomplete": False, "objects": list(objects), "errors": []}


def test_two_libraries_with_equal_images_are_charged_to_two_objects() -> None:
    """One object's image is in one library: the second equal image is the other object's, by its target."""
    document = _document(_object("a", "liba", {"K": 300}, 1000), _object("b", "libb", {"K": 300}, 1000))
    libraries = [("pkg/libb.so", [("sm_90", _record({"K": 300}, 1000))]),
                 ("pkg/liba.so", [("sm_90", _record({"K": 300}, 1000))])]
    found = sizereport.join(libraries, document).pieces
    assert {r.key: r.bytes for r in sizereport.rows(found, "source")} == {"csrc/a.cu": 1000, "csrc/b.cu": 1000}
    assert {(p.origin.target, p.origin.file) for p in found} == {("liba", "pkg/liba.so"), ("libb", "pkg/libb.so")}
    (dup,) = sizereport.duplicates(found)
    assert dup.waste == 300
    # a third copy, in a library of neither: charged to one of them, and a duplicate of three
    found = sizereport.join([*libraries, ("pkg/libc.so", [("sm_90", _record({"K": 300}, 1000))])], document).pieces
    assert sum(r.bytes for r in sizereport.rows(found, "source")) == 3000
    assert [len(d.copies) for d in sizereport.duplicates(found)] == [3]


def test_a_kernel_split_among_its_definers_is_one_copy() -> None:
    """A device-linked image holds K once: charged half to each object defining it, it is no duplicate."""
    link = _object("dlink", "t", {"K": 300}, 1000, device_link=True)
    document = _document(_object("a", "t", {"K": 300}, 900), _object("b", "t", {"K": 300}, 900), link)
    attribution = sizereport.from_map(document, "m")
    assert attribution.relocatable == 2  # a.o's and b.o's -rdc images: the link's inputs, not what loads
    found = attribution.pieces
    assert {r.key: r.bytes for r in sizereport.rows(found, "source")} == {"csrc/a.cu": 150, "csrc/b.cu": 150,
                                                                         "csrc/dlink.cu": 700}
    assert sizereport.duplicates(found) == []
    assert sizereport.duplicates(sizereport.join([("lib.so", [("sm_90", _record({"K": 300}, 1000))])],
                                                 document).pieces) == []


def test_a_diff_lists_growth_then_shrinking_largest_first() -> None:
    def piece(source: str, n: int) -> sizereport.Piece:
        return sizereport.Piece(sizereport.Origin(source, "t", "o", "f"), "sm_90", "code", "K" + source, n, n, "o")

    old = [piece("a", 100), piece("b", 100), piece("c", 1000), piece("d", 10)]
    new = [piece("a", 150), piece("b", 99), piece("c", 1), piece("d", 20)]
    assert [(c.key, c.delta) for c in sizereport.changes(old, new, "source")] == [
        ("a", 50), ("d", 10), ("c", -999), ("b", -1)]


def test_overloaded_kernels_are_two_leaves_of_the_treemap() -> None:
    from kernel_symbol_map.consumer.size import treemap

    origin = sizereport.Origin("csrc/k.cu", "t", "k.o", "m")
    found = [sizereport.Piece(origin, "sm_90", "code", "_Z1kPf", 100, 100, "k.o"),
             sizereport.Piece(origin, "sm_90", "code", "_Z1kPi", 900, 900, "k.o")]
    leaves = [b for b in treemap.layout(treemap.tree(found)) if b.depth == 3]
    assert sorted((b.node.kernel, b.node.value) for b in leaves) == [("_Z1kPf", 100), ("_Z1kPi", 900)]


def test_a_compressed_bundles_shares_add_up(hip_corpus: dict[str, Path]) -> None:
    import struct

    ccob = hip_corpus["zstd.hipfb"].read_bytes()
    total = struct.unpack_from("<I", ccob, 8)[0]  # CCOB version 2: magic, version, method, total size
    assert sum(i.stored for i in sizes.measure(hip_corpus["clang_zstd.o"])) == total


def test_bad_budgets_and_bad_wheels_are_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("bad/lib.so", bytes(range(256)) * 64)
    data = bytearray(wheel.read_bytes())
    start = data.find(b"bad/lib.so") + len("bad/lib.so")  # the member's deflate stream follows its local header
    data[start + 10:start + 40] = b"\xff" * 30
    wheel.write_bytes(bytes(data))
    for argv, code in ((["size", str(wheel)], 1), (["size", str(wheel), "--max-mb", "-1"], 2),
                       (["size", str(wheel), "--max-mb", "nan"], 2)):
        assert main(argv) == code
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) in (1, 2) and err[0].startswith("ERROR"), err  # a usage error may add a TIP


def test_a_map_and_its_libraries_agree_per_target_with_rdc(kernel_builds: dict, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """tests/projects/kernels (nvcc, -rdc rdc_ops with its device link, a static and a shared library): per
    target, the map's bytes equal the libraries' bytes charged to it, the relocatable images left out."""
    b = next(b for i, b in kernel_builds.items() if i.endswith("-ninja"))
    out = tmp_path / "m.json.gz"
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["size", str(out), "--by", "target"]) == 0
    assert "relocatable (-rdc) images left out" in capsys.readouterr().out
    from_map = {r["key"]: r["bytes"] for r in _size_json(capsys, str(out), "--by", "target")["rows"]}
    libraries = [str(p) for p in sorted(b.build.glob("lib*.*")) if p.suffix in (".so", ".a")]
    measured = {r["key"]: r["bytes"] for r in
                _size_json(capsys, *libraries, "--map", str(out), "--by", "target")["rows"]}
    assert {"ops", "attention", "rdc_ops"} <= measured.keys()
    assert {t: measured[t] for t in ("ops", "attention", "rdc_ops")} == {t: from_map[t] for t in
                                                                          ("ops", "attention", "rdc_ops")}


def test_with_a_dotted_function_name_the_modules_sections_stay_the_modules() -> None:
    """A name with a dot (clang's ``.omp`` suffixes) makes the walk take every tail: ``.nv.info`` is still
    the module's beside a function called ``info``, and ``.text.k.omp`` is ``k.omp``'s."""
    from kernel_symbol_map.readers.cubinsections import Namer

    namer = Namer({b"k.omp": "k.omp", b"info": "info"})
    assert namer.dotted
    assert namer.owner(b".nv.info") == (-1, None)
    assert namer.owner(b".nv.info.info") == (8, "info")
    assert namer.owner(b".text.k.omp") == (5, "k.omp")
    assert namer.split([b".nv.info", b".text.k.omp"])[0] == [None, "k.omp"]
    assert namer.owners([b".nv.info", b".nv.info.info"], "") == ["", "info"]
