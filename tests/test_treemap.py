"""Issue 30: the size treemap's page, without a browser (tests/test_sizes.py opens it in Chromium).

- A source's label keeps its file name: the page carries the path shortened
  from the left (``…/attention/attn.cu``), and the script shows the first
  that fits; a kernel's is names.readable's.
- Python's squarified layout (the SVG's; the page's script is its twin) is
  the ``squarify`` package's, an independent implementation on PyPI.
- A diff colours each box of NEW by its change against OLD and lists what
  NEW lost, with its bytes.
"""

from __future__ import annotations

import json
import random
import re

import pytest
import squarify as pypi_squarify

from kernel_symbol_map.consumer.maps import names
from kernel_symbol_map.consumer.size import sizereport, treemap
from kernel_symbol_map.consumer.size.sizereport import Origin, Piece


def _piece(source: str, kernel: str, n: int, target: str = "_ops", kind: str = "code") -> Piece:
    return Piece(Origin(source, target, source + ".o", "map"), "sm_90", kind, kernel, n, n, source + ".o")


def _page_data(page: str) -> dict:
    (payload,) = re.findall(r'<script type="application/json" id="treemap-data">(.*?)</script>', page, re.S)
    return json.loads(payload)


def test_a_source_label_keeps_its_file_name() -> None:
    assert treemap.path_labels("src/models/attention/attn.cu") == [
        "src/models/attention/attn.cu", "\u2026/models/attention/attn.cu", "\u2026/attention/attn.cu",
        "\u2026/attn.cu", "attn.cu"]
    assert treemap.path_labels("k.cu") == ["k.cu"]
    found = [_piece("src/models/attention/attn.cu", "_Z4attnPf", 900), _piece("k.cu", "_Z1kPf", 100),
             _piece("", "", 50, kind="overhead")]
    data = _page_data(treemap.html(found, "device code", []))
    (target,) = data["tree"]
    assert data["total"] == target[1] == 1050
    sources = {s[0][0]: s for s in target[4]}
    assert sources["src/models/attention/attn.cu"][0][-2:] == ["\u2026/attn.cu", "attn.cu"]
    assert sources["map"][0] == ["map"]  # a piece with no source is named by its file, as a whole
    (kernel,) = sources["src/models/attention/attn.cu"][4]
    assert kernel[0] == ["attn"] and kernel[3].splitlines() == ["attn(float*)", "_Z4attnPf"]  # label; tooltip
    # the SVG, laid out here, keeps the file name too, where the path does not fit
    assert treemap._fit(treemap.path_labels("src/models/attention/attn.cu"), "900 B", 80) == "\u2026/attn.cu"
    assert treemap._fit(["a_very_long_kernel_name"], "9 B", 80) == "a_very_long\u2026"


def test_a_kernel_is_labelled_by_its_readable_name() -> None:
    """names.readable's label, then folded ones to fall back on (not cut ones: the page cuts to the pixel);
    the full and the mangled name in the tooltip."""
    scale, attention = "_ZN4demo12scale_kernelIfEEvPT_PKS1_S1_i", "_ZN4demo16attention_kernelILi256EEEvPfPKfi"
    data = _page_data(treemap.html([_piece("a.cu", scale, 20), _piece("a.cu", attention, 10)], "t", []))
    leaves = {leaf[3].splitlines()[-1]: leaf for leaf in data["tree"][0][4][0][4]}
    assert leaves[scale][0] == ["demo::scale_kernel<float>", "demo::scale_kernel<...>"]
    assert leaves[attention][0] == ["demo::attention_kernel<256>"]  # folded, it would not fit 24 either
    assert names.readable(attention, 24).endswith("...")
    assert leaves[attention][3] == "void demo::attention_kernel<256>(float*, float const*, int)\n" + attention


def test_the_page_fetches_nothing_and_no_name_closes_its_script() -> None:
    """Names hold ``<`` (templates): the JSON is escaped so that ``</script>`` in one cannot end the data."""
    found = [_piece("a</script><script>alert(1)</script>.cu", "_Z1kPf", 10)]
    page = treemap.html(found, "t", ["x"])
    assert page.count("<script") == 2 and page.count("</script>") == 2
    for fetch in ("src=", "href=", "url(", "@import", "http:", "https:"):
        assert fetch not in page
    assert _page_data(page)["tree"][0][4][0][0][0] == "a</script><script>alert(1)</script>.cu"


def test_the_layout_is_pypi_squarifys() -> None:
    """Bruls, Huizing and van Wijk's example, and random values, laid out as the ``squarify`` package does."""
    rng = random.Random(30)
    cases = [([6, 6, 4, 3, 2, 2, 1], 6, 4), ([5], 3, 7)]
    cases += [(sorted((rng.randint(1, 10**6) for _ in range(n)), reverse=True), w, h)
              for n, w, h in ((30, 800, 513), (300, 1600, 813), (2000, 1200, 720), (50, 300, 900))]
    for values, w, h in cases:
        ours = treemap.squarify(values, 0, 0, w, h)
        theirs = pypi_squarify.squarify(pypi_squarify.normalize_sizes(values, w, h), 0, 0, w, h)
        assert len(ours) == len(theirs) == len(values)
        for mine, other in zip(ours, theirs):
            assert mine == pytest.approx((other["x"], other["y"], other["dx"], other["dy"]), abs=1e-6 * max(w, h))


def test_a_diff_colours_each_box_by_its_change() -> None:
    old = [_piece("grew.cu", "_Z1gv", 100), _piece("shrank.cu", "_Z1sv", 100), _piece("same.cu", "_Z1uv", 100),
           _piece("gone.cu", "_Z1rv", 40), _piece("grew.cu", "_Z4dropv", 7), _piece("b.cu", "_Z1bv", 5, "_b")]
    new = [_piece("grew.cu", "_Z1gv", 200), _piece("shrank.cu", "_Z1sv", 90), _piece("same.cu", "_Z1uv", 100),
           _piece("added.cu", "_Z1av", 30), _piece("b.cu", "_Z1bv", 5, "_b")]
    diff = treemap.diff_tree(old, new)
    ops = diff.root.children["_ops"]
    fills = {key: node.fill for key, node in ops.children.items()}

    def rgb(fill: str) -> tuple[int, ...]:
        return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))

    red, green, blue = rgb(fills["grew.cu"])
    assert red > green + 60 and red > blue + 60  # +86%: a deep red
    red, green, blue = rgb(fills["shrank.cu"])
    assert green > red + 10 and green > blue + 10  # -10%: a light green
    assert rgb(treemap.change_fill(100, 90, 3))[1] > rgb(treemap.change_fill(100, 10, 3))[1]  # lighter: smaller
    assert fills["same.cu"] == treemap.UNCHANGED[2] and ops.children["same.cu"].note == "unchanged"
    assert fills["added.cu"] == treemap.ADDED and ops.children["added.cu"].added
    assert diff.root.children["_b"].fill == treemap.UNCHANGED[1]
    assert ops.children["grew.cu"].note == "was 107 bytes: +93 (+86.9%)"
    assert (diff.old, diff.root.value) == (352, 425)
    assert diff.removed == [treemap.Removed(("_ops", "gone.cu"), 40, ""),
                            treemap.Removed(("_ops", "grew.cu", "drop"), 7, "_Z4dropv")]
    # the same as sizereport's change of each source
    by_source = {c.key: c for c in sizereport.changes(old, new, "source")}
    assert {k: n.value - by_source[k].old for k, n in ops.children.items() if k in by_source} == {
        k: c.delta for k, c in by_source.items() if k in ops.children}
    page = treemap.diff_html(old, new, "device code of a -> b", ["a line"])
    assert "352 -&gt; 425 bytes (+73, +20.7%)" in page
    assert 'title="_Z4dropv"><td>7 bytes</td><td>_ops / grew.cu / drop</td>' in page
    assert "<td>40 bytes</td><td>_ops / gone.cu</td>" in page
    for text in ("grew (+50% or more: deepest)", "shrank", "unchanged", "added", "<li>a line</li>"):
        assert text in page
    added = _page_data(page)["tree"][0][4]
    assert [s[5] for s in added if s[0][0] == "added.cu"] == ["added"]
    svg = treemap.diff_svg(old, new, "t")
    assert f'fill="{treemap.ADDED}" stroke="{treemap.ADDED}"' in svg and "was 107 bytes: +93 (+86.9%)" in svg
