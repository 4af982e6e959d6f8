"""A size report as a picture: a squarified treemap, target -> source -> kernel, in SVG or HTML (issue 21).

The file is self-contained: no script, no style sheet, no font or image to
fetch, so it opens from disk in any browser, with no server and no network.
Every rectangle has a ``<title>`` (the browser's tooltip) with its path and
bytes. The layout is Bruls, Huizing and van Wijk's squarified treemap
(2000), written here because no kept Python library lays one out without a
plotting stack.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape

from .kernelmap import demangle_fast, short_name
from .sizereport import Piece

WIDTH, HEIGHT = 1200, 720
HEADER = (18, 15)  # label band of a target, of a source
PAD = 2
FONT = 11
CHAR = 6.4  # px per character at FONT, for deciding what fits
MIN_AREA = 2.0  # px^2: smaller boxes are left out of the picture (their bytes stay in their parents)


@dataclass
class Node:
    label: str
    value: int = 0
    kernel: str = ""  # a kernel's leaf: its mangled name (the label is the demangled one, shortened)
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, key: str, label: str) -> Node:
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = Node(label)
        return node


@dataclass(frozen=True)
class Box:
    node: Node
    path: tuple[str, ...]
    depth: int  # 1 target, 2 source, 3 kernel
    x: float
    y: float
    w: float
    h: float
    fill: str


def tree(found: Iterable[Piece]) -> Node:
    """target -> source -> kernel; overhead and PTX are leaves of their source."""
    root = Node("all")
    for p in found:
        if not p.bytes:
            continue
        # by its kind: a code or owned piece is a kernel's, even one whose name is empty (a binary's claim)
        leaf = SHARED[p.kind] if p.kind in SHARED else short_name(demangle_fast(p.kernel)) or UNNAMED
        target, source = p.origin.target or "(no target)", p.origin.source or p.origin.file or "(no source)"
        node = root
        node.value += p.bytes
        for key, label in ((target, target), (source, source), (p.kernel or leaf, leaf)):  # overloads apart
            node = node.child(key, label)
            node.value += p.bytes
        node.kernel = p.kernel
    return root


SHARED = {"overhead": "(image overhead)", "ptx": "(PTX)"}  # the pieces that name no kernel
UNNAMED = "(a kernel with no name)"


def squarify(values: list[int], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles for ``values`` (largest first) filling ``(x, y, w, h)``, each as close to square as the
    greedy row rule allows; areas are proportional to the values."""
    total = sum(values)
    if total <= 0 or w <= 0 or h <= 0:
        return [(x, y, 0.0, 0.0)] * len(values)
    areas = [v * w * h / total for v in values]
    out: list[tuple[float, float, float, float]] = []
    i = 0
    while i < len(areas):
        side = min(w, h)
        start, first = i, areas[i]
        total_row, smallest, largest = first, first, first  # the row's sum, min and max: no re-summing
        i += 1
        while i < len(areas):
            a = areas[i]
            grown = _worst(total_row + a, min(smallest, a), max(largest, a), side)
            if grown > _worst(total_row, smallest, largest, side):
                break
            total_row, smallest, largest = total_row + a, min(smallest, a), max(largest, a)
            i += 1
        row = areas[start:i]
        thick = total_row / side
        at = 0.0
        for a in row:
            length = a / thick if thick else 0.0
            out.append((x, y + at, thick, length) if w >= h else (x + at, y, length, thick))
            at += length
        if w >= h:  # wider than high: the row is a column along the left, the short side
            x, w = x + thick, w - thick
        else:  # a band across the top
            y, h = y + thick, h - thick
    return out


def _worst(total: float, smallest: float, largest: float, side: float) -> float:
    """The worst aspect ratio in a row of areas with this sum, min and max, laid along ``side``."""
    if not total or not side or smallest <= 0:
        return float("inf")
    return max(side * side * largest / (total * total), (total * total) / (side * side * smallest))


def layout(root: Node, width: int = WIDTH, height: int = HEIGHT) -> list[Box]:
    boxes: list[Box] = []
    targets = sorted(root.children.values(), key=lambda n: (-n.value, n.label))
    for t_index, (target, rect) in enumerate(zip(targets, squarify([n.value for n in targets], 0, 0, width, height))):
        hue = (t_index * 0.618034) % 1.0  # the golden angle: neighbours never share a hue
        _place(target, (target.label,), 1, rect, hue, boxes)
    return boxes


def _place(node: Node, path: tuple[str, ...], depth: int, rect: tuple[float, float, float, float], hue: float,
           boxes: list[Box]) -> None:
    x, y, w, h = rect
    light = {1: 0.55, 2: 0.7, 3: 0.84}[depth]
    shared = depth == 3 and not node.kernel  # overhead and PTX: greyed, so that kernels stand out
    red, green, blue = colorsys.hls_to_rgb(hue, 0.9 if shared else light, 0.15 if shared else 0.55)
    boxes.append(Box(node, path, depth, x, y, w, h, f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"))
    if not node.children or depth >= 3:
        return
    band = HEADER[depth - 1] if h > 3 * HEADER[depth - 1] else 0
    inner = (x + PAD, y + band + PAD, w - 2 * PAD, h - band - 2 * PAD)
    if inner[2] <= 1 or inner[3] <= 1:
        return
    children = sorted(node.children.values(), key=lambda n: (-n.value, n.label))
    for child, sub in zip(children, squarify([c.value for c in children], *inner)):
        _place(child, (*path, child.label), depth + 1, sub, hue, boxes)


def svg(found: Iterable[Piece], title: str, width: int = WIDTH, height: int = HEIGHT, standalone: bool = True) -> str:
    """The treemap as one ``<svg>`` element (with its namespace when ``standalone``)."""
    root = tree(found)
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    out = [f'<svg{ns} width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="sans-serif" font-size="{FONT}">',
           f"<title>{escape(title)}: {root.value:,} bytes</title>",
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>']
    for box in layout(root, width, height):
        if box.w * box.h < MIN_AREA:  # below a pixel or two: invisible, and vLLM has 30,000 of them
            continue
        share = box.node.value / root.value if root.value else 0.0
        tip = " / ".join(box.path) + f": {box.node.value:,} bytes ({share:.1%})"
        if box.node.kernel:
            tip += f"\n{demangle_fast(box.node.kernel)}\n{box.node.kernel}"
        out.append(f'<g><title>{escape(tip)}</title><rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" '
                   f'height="{box.h:.1f}" fill="{box.fill}" stroke="#ffffff" stroke-width="1"/>')
        label = _fit(box.node.label, _human(box.node.value), box.w - 6)
        if label and box.h >= FONT + 4:
            weight = ' font-weight="bold"' if box.depth == 1 else ""
            out.append(f'<text x="{box.x + 3:.1f}" y="{box.y + FONT + 2:.1f}" fill="#111111"{weight}>'
                       f"{escape(label)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _fit(label: str, size: str, room: float) -> str:
    """The label with its size when both fit, else the label, cut with an ellipsis; nothing in a sliver."""
    chars = int(room / CHAR)
    if chars < 4:
        return ""
    if len(label) + 1 + len(size) <= chars:
        return f"{label} {size}"
    return label if len(label) <= chars else label[: chars - 1] + "\u2026"


def html(found: list[Piece], title: str, summary: list[str]) -> str:
    """A page holding the SVG and the summary lines: no script, nothing fetched."""
    lines = "".join(f"<li>{escape(s)}</li>" for s in summary)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title></head>\n"
            '<body style="margin:0;font-family:sans-serif">\n'
            f"{svg(found, title, standalone=False)}\n"
            f'<div style="padding:8px 12px"><h1 style="font-size:16px;margin:4px 0">{escape(title)}</h1>'
            f"<p>Target, then source, then kernel; an area is the bytes of the device code charged to it "
            f"(code, owned sections, overhead, PTX). Hover for the bytes.</p><ul>{lines}</ul></div>\n"
            "</body></html>\n")
