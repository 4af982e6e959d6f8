"""A size report as a picture: a squarified treemap, target -> source -> kernel, in SVG or HTML.

Both files are self-contained: nothing to fetch (no script or style sheet
file, font or image), so they open from disk in any browser, with no server
and no network. The layout is Bruls, Huizing and van Wijk's squarified
treemap (2000).

- The SVG has a fixed size, laid out here in Python (:func:`squarify`).
- The HTML page carries the tree as JSON and a small inline script that lays
  it out in the browser at the window's size, and again on every resize:
  a squarified layout depends on the rectangle's aspect ratio, so a layout
  made for one size and stretched (relative units) turns squares into
  slivers in a narrow window; and which part of a label fits is a question
  of pixels, which only the browser can measure. Python decides everything
  else: colours, the label candidates (a source's path, shortened from the
  left so that its file name stays), tooltips, what was removed.
- :func:`diff_html` draws NEW's layout, each box coloured by its change
  against OLD; what OLD held and NEW does not has no area, so it is listed.

``squarify`` on PyPI implements the same rule; the tests hold both layouts
(Python's and the page's) to it. It is not used here: it recurses once per
row and re-lays a row out for every candidate, over 20 times slower on a
source of 20,000 kernels, and this package is a build requirement, where each
dependency is one more download for every build.
"""

from __future__ import annotations

import colorsys
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import NamedTuple

from ..maps.names import ELLIPSIS as CUT
from ..maps.names import full, readable
from .sizereport import Piece

WIDTH, HEIGHT = 1200, 720  # the SVG's
HEADER = (18, 15)  # label band of a target, of a source
PAD = 2
FONT = 11
CHAR = 6.4  # px per character at FONT, for deciding what fits (the SVG's; the page measures)
MIN_AREA = 2.0  # px^2: smaller boxes are left out of the picture (their bytes stay in their parents)
ELLIPSIS = "\u2026"


@dataclass
class Node:
    label: str
    value: int = 0
    kernel: str = ""  # a kernel's leaf: its mangled name (the label is names.readable's)
    children: dict[str, Node] = field(default_factory=dict)
    fill: str = "#cccccc"
    note: str = ""  # a diff's line for the tooltip: what it was
    added: bool = False  # in a diff: NEW has it, OLD had not

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
    """target -> source -> kernel; overhead and PTX are leaves of their source. Coloured by target."""
    root = Node("all")
    for p in found:
        if not p.bytes:
            continue
        # by its kind: a code or owned piece is a kernel's, even one whose name is empty (a binary's claim)
        leaf = SHARED[p.kind] if p.kind in SHARED else readable(p.kernel, None) or UNNAMED
        target, source = p.origin.target or "(no target)", p.origin.source or p.origin.file or "(no source)"
        node = root
        node.value += p.bytes
        for key, label in ((target, target), (source, source), (p.kernel or leaf, leaf)):  # overloads apart
            node = node.child(key, label)
            node.value += p.bytes
        node.kernel = p.kernel
    for index, target in enumerate(_ranked(root)):
        _paint(target, 1, (index * 0.618034) % 1.0)  # the golden angle: neighbours never share a hue
    return root


SHARED = {"overhead": "(image overhead)", "ptx": "(PTX)"}  # the pieces that name no kernel
UNNAMED = "(a kernel with no name)"


def _ranked(node: Node) -> list[Node]:
    return sorted(node.children.values(), key=lambda n: (-n.value, n.label))


def _paint(node: Node, depth: int, hue: float) -> None:
    shared = depth == 3 and not node.kernel  # overhead and PTX: greyed, so that kernels stand out
    light = {1: 0.55, 2: 0.7, 3: 0.84}[min(depth, 3)]
    node.fill = _rgb(hue, 0.9 if shared else light, 0.15 if shared else 0.55)
    for child in node.children.values():
        _paint(child, depth + 1, hue)


def _rgb(hue: float, light: float, saturation: float) -> str:
    red, green, blue = colorsys.hls_to_rgb(hue, light, saturation)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


# ---------------------------------------------------------------------------------------------- a diff

UNCHANGED = {1: "#a3a3a3", 2: "#c2c2c2", 3: "#e0e0e0"}  # greys, darker for the bands of targets and sources
ADDED = "#a50f15"  # a deep red, and outlined
FULL = 0.5  # a change of 50% or more gets the deepest shade


def change_fill(old: int, new: int, depth: int) -> str:
    """Red for growth, green for shrinking, deeper the larger the change relative to ``old``; grey unchanged."""
    if old == new:
        return UNCHANGED[min(depth, 3)]
    if not old:
        return ADDED
    strength = min(1.0, abs(new - old) / old / FULL)
    return _rgb(0.0 if new > old else 1 / 3, 0.88 - 0.3 * strength, 0.7)


class Removed(NamedTuple):
    path: tuple[str, ...]  # target, source, kernel: the labels, down to the highest level missing from NEW
    bytes: int  # OLD's
    kernel: str  # a kernel's mangled name, else ""


@dataclass
class Diff:
    root: Node  # NEW's tree, coloured by change
    old: int  # OLD's total bytes
    removed: list[Removed]  # what OLD held and NEW does not, largest first


def diff_tree(old: Iterable[Piece], new: Iterable[Piece]) -> Diff:
    """NEW's tree, each node coloured and noted by its change against OLD's node of the same path (target,
    source, kernel); OLD's nodes without one in NEW, at the highest level they are missing, as removed."""
    before, after = tree(old), tree(new)
    removed: list[Removed] = []
    _compare(after, before, 0, (), removed)
    return Diff(after, before.value, sorted(removed, key=lambda r: (-r.bytes, r.path)))


def _compare(new: Node, old: Node | None, depth: int, path: tuple[str, ...],
             removed: list[Removed]) -> None:
    was = old.value if old else 0
    new.fill, new.added = change_fill(was, new.value, depth), old is None
    if old is None:
        new.note = "added: not in OLD"
    elif was == new.value:
        new.note = "unchanged"
    else:
        new.note = f"was {was:,} bytes: {new.value - was:+,} ({(new.value - was) / was:+.1%})"
    for key, child in new.children.items():
        _compare(child, old.children.get(key) if old else None, depth + 1, (*path, child.label), removed)
    for key, child in old.children.items() if old else ():
        if key not in new.children:
            removed.append(Removed((*path, child.label), child.value, child.kernel))


# ---------------------------------------------------------------------------------------------- layout


def squarify(values: list[int], x: float, y: float, w: float, h: float) -> list[tuple[float, float, float, float]]:
    """Rectangles for ``values`` (largest first) filling ``(x, y, w, h)``, each as close to square as the
    greedy row rule allows; areas are proportional to the values. The page's script is this, in JavaScript."""
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
    targets = _ranked(root)
    for target, rect in zip(targets, squarify([n.value for n in targets], 0, 0, width, height)):
        _place(target, (target.label,), 1, rect, boxes)
    return boxes


def _place(node: Node, path: tuple[str, ...], depth: int, rect: tuple[float, float, float, float],
           boxes: list[Box]) -> None:
    x, y, w, h = rect
    boxes.append(Box(node, path, depth, x, y, w, h, node.fill))
    if not node.children or depth >= 3:
        return
    band = HEADER[depth - 1] if h > 3 * HEADER[depth - 1] else 0
    inner = (x + PAD, y + band + PAD, w - 2 * PAD, h - band - 2 * PAD)
    if inner[2] <= 1 or inner[3] <= 1:
        return
    children = _ranked(node)
    for child, sub in zip(children, squarify([c.value for c in children], *inner)):
        _place(child, (*path, child.label), depth + 1, sub, boxes)


# ---------------------------------------------------------------------------------------------- labels


def path_labels(path: str) -> list[str]:
    """A source's labels, longest first: the path, then with its leading folders replaced by an ellipsis one
    at a time (``…/attention/attn.cu``, ``…/attn.cu``), then the file name alone; the picture shows the
    first that fits, so the file name is the last part to go."""
    parts = path.split("/")
    out = [path]
    out += [ELLIPSIS + "/" + "/".join(parts[i:]) for i in range(1, len(parts))]
    if len(parts) > 1:
        out.append(parts[-1])
    return out


KERNEL_WIDTHS = (48, 24)  # characters: a kernel's labels after the whole one, its template lists folded to fit


def labels(node: Node, depth: int) -> list[str]:
    """A box's labels, longest first: a source's path shortened (:func:`path_labels`); a kernel's readable
    name, then folded to fit :data:`KERNEL_WIDTHS` (``ns::kernel<...>``; not the ones names cut: the page
    cuts the last label to the pixel); a target's name."""
    if depth == 2 and not node.label.startswith("("):
        return path_labels(node.label)
    if node.kernel:
        folded = (readable(node.kernel, w) for w in KERNEL_WIDTHS)
        return list(dict.fromkeys([node.label, *(f for f in folded if not f.endswith(CUT))]))
    return [node.label]


def _tip(node: Node) -> str:
    """The tooltip's lines below the path and bytes: the change (a diff), the full and the mangled name."""
    lines = [node.note] if node.note else []
    if node.kernel:
        lines += [full(node.kernel), node.kernel]
    return "\n".join(lines)


def _human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _fit(candidates: list[str], size: str, room: float) -> str:
    """The first label that fits, with its size when that fits too, else the last cut with an ellipsis;
    nothing in a sliver. The page's script does this with measured widths."""
    chars = int(room / CHAR)
    if chars < 4:
        return ""
    for label in candidates:
        if len(label) <= chars:
            return f"{label} {size}" if len(label) + 1 + len(size) <= chars else label
    return candidates[-1][: chars - 1] + ELLIPSIS


# ---------------------------------------------------------------------------------------------- SVG


def svg(found: Iterable[Piece], title: str, width: int = WIDTH, height: int = HEIGHT, standalone: bool = True) -> str:
    """The treemap as one ``<svg>`` element (with its namespace when ``standalone``)."""
    return _svg(tree(found), title, width, height, standalone)


def diff_svg(old: Iterable[Piece], new: Iterable[Piece], title: str, width: int = WIDTH, height: int = HEIGHT) -> str:
    """NEW's treemap coloured by the change against OLD (see :func:`change_fill`), as one SVG file."""
    return _svg(diff_tree(old, new).root, title, width, height, True)


def _svg(root: Node, title: str, width: int, height: int, standalone: bool) -> str:
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
        extra = _tip(box.node)
        tip += f"\n{extra}" if extra else ""
        stroke = ADDED if box.node.added else "#ffffff"
        out.append(f'<g><title>{escape(tip)}</title><rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" '
                   f'height="{box.h:.1f}" fill="{box.fill}" stroke="{stroke}" stroke-width="1"/>')
        label = _fit(labels(box.node, box.depth), _human(box.node.value), box.w - 6)
        if label and box.h >= FONT + 4:
            weight = ' font-weight="bold"' if box.depth == 1 else ""
            out.append(f'<text x="{box.x + 3:.1f}" y="{box.y + FONT + 2:.1f}" fill="#111111"{weight}>'
                       f"{escape(label)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------- HTML


def data(root: Node) -> dict[str, object]:
    """What the page lays out: ``{"total": bytes, "tree": [node...]}``, a node being ``[labels, bytes, fill,
    tooltip lines, [children...], mark]`` (lists, not objects: vLLM's page holds 30,000 of them)."""
    def node(n: Node, depth: int) -> list[object]:
        children = [node(c, depth + 1) for c in _ranked(n)] if depth < 3 else []
        return [labels(n, depth), n.value, n.fill, _tip(n), children, "added" if n.added else ""]
    return {"total": root.value, "tree": [node(t, 1) for t in _ranked(root)]}


def html(found: Iterable[Piece], title: str, summary: list[str]) -> str:
    """The page: the treemap, filling the window, and the summary lines below it."""
    root = tree(found)
    about = ("Target, then source, then kernel; an area is the bytes of the device code charged to it "
             "(code, owned sections, overhead, PTX). Hover for the bytes and the full names.")
    return _page(root, title, f"{root.value:,} bytes", "", about, summary, [])


def diff_html(old: Iterable[Piece], new: Iterable[Piece], title: str, summary: list[str]) -> str:
    """The page of a diff: NEW's treemap, each box coloured by its change against OLD (red grew, green
    shrank, grey unchanged, outlined deep red added), a legend, the totals OLD -> NEW, and below the map
    what OLD held and NEW does not, with its bytes (it has no area in NEW)."""
    found = diff_tree(old, new)
    total = found.root.value
    change = total - found.old
    totals = f"{found.old:,} -> {total:,} bytes ({change:+,}{f', {change / found.old:+.1%}' if found.old else ''})"
    deepest = round(100 * FULL)  # a kernel of 100 bytes that changed by FULL
    swatches = [(change_fill(100, 100 + deepest, 3), f"grew (+{FULL:.0%} or more: deepest)"),
                (change_fill(100, 100 - deepest, 3), "shrank"), (UNCHANGED[3], "unchanged"),
                (ADDED, "added")]
    legend = "".join(f'<span class="key"><i style="background:{fill}"></i>{escape(text)}</span>'
                     for fill, text in swatches)
    about = ("NEW's treemap, target, then source, then kernel, an area being NEW's bytes; each box is coloured "
             "by its change against the same target, source or kernel in OLD. Hover for the bytes before and "
             "after.")
    return _page(found.root, title, totals, legend, about, summary, found.removed)


_STYLE = """
html,body{margin:0;font-family:sans-serif;font-size:13px}
#head{padding:4px 8px}
#head h1{font-size:15px;margin:0 12px 0 0;display:inline}
.key{margin-left:12px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px;border:1px solid #888}
#map{position:relative;width:100%;height:calc(100vh - 32px);overflow:hidden;background:#fff}
#map div{position:absolute;box-sizing:border-box;overflow:hidden;white-space:nowrap;border:1px solid #fff;
 font-size:11px;line-height:13px;padding:0 2px;color:#111}
#map .d1{font-weight:bold}
#map .added{border:2px solid #a50f15}
#about{padding:8px 12px}
#about h2{font-size:14px}
#about table{border-collapse:collapse}
#about td{padding:1px 8px 1px 0}
"""

# Lays the tree out at the map's size, and again on resize; the squarify and _place of the Python above.
_SCRIPT = """
(function () {
"use strict";
var DATA = JSON.parse(document.getElementById("treemap-data").textContent);
var HEADER = [18, 15], PAD = 2, FONT = 11, MIN_AREA = 2, ELLIPSIS = "\\u2026";
var map = document.getElementById("map"), head = document.getElementById("head");
var pen = document.createElement("canvas").getContext("2d");
function worst(total, smallest, largest, side) {
  if (!total || !side || smallest <= 0) return Infinity;
  return Math.max(side * side * largest / (total * total), (total * total) / (side * side * smallest));
}
function squarify(values, x, y, w, h) {
  var total = 0, out = [], i = 0, k;
  for (k = 0; k < values.length; k++) total += values[k];
  if (total <= 0 || w <= 0 || h <= 0) return values.map(function () { return [x, y, 0, 0]; });
  var areas = values.map(function (v) { return v * w * h / total; });
  while (i < areas.length) {
    var side = Math.min(w, h), start = i, sum = areas[i], lo = areas[i], hi = areas[i];
    i++;
    while (i < areas.length) {
      var a = areas[i];
      if (worst(sum + a, Math.min(lo, a), Math.max(hi, a), side) > worst(sum, lo, hi, side)) break;
      sum += a; lo = Math.min(lo, a); hi = Math.max(hi, a); i++;
    }
    var thick = sum / side, at = 0;
    for (k = start; k < i; k++) {
      var length = thick ? areas[k] / thick : 0;
      out.push(w >= h ? [x, y + at, thick, length] : [x + at, y, length, thick]);
      at += length;
    }
    if (w >= h) { x += thick; w -= thick; } else { y += thick; h -= thick; }
  }
  return out;
}
function human(n) {
  var units = [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
  for (var i = 0; i < units.length; i++) if (n >= units[i][1]) return (n / units[i][1]).toFixed(1) + " " + units[i][0];
  return n + " B";
}
var font = "", least = 0;  // the pen's font, set only when it changes (parsing a font is what costs)
function fit(candidates, size, room, bold) {
  var wanted = (bold ? "bold " : "") + FONT + "px sans-serif";
  if (font !== wanted) { pen.font = font = wanted; least = pen.measureText("abc" + ELLIPSIS).width; }
  if (room < least) return "";
  var wide = function (s) { return pen.measureText(s).width <= room; };
  for (var i = 0; i < candidates.length; i++) {
    if (wide(candidates[i])) return wide(candidates[i] + " " + size) ? candidates[i] + " " + size : candidates[i];
  }
  var last = candidates[candidates.length - 1], n = last.length - 1;
  while (n > 1 && !wide(last.slice(0, n) + ELLIPSIS)) n--;
  return last.slice(0, n) + ELLIPSIS;
}
function place(node, path, depth, x, y, w, h, into) {
  if (w * h < MIN_AREA) return;
  var box = document.createElement("div"), name = node[0][0];
  box.className = "d" + depth + (node[5] ? " " + node[5] : "");
  box.style.cssText = "left:" + x + "px;top:" + y + "px;width:" + w + "px;height:" + h + "px;background:" + node[2];
  box.setAttribute("data-box", [depth, x, y, w, h].join(" "));
  path = path.concat([name]);
  var share = DATA.total ? (100 * node[1] / DATA.total).toFixed(1) : "0.0";
  box.title = path.join(" / ") + ": " + node[1].toLocaleString("en-US") + " bytes (" + share + "%)"
    + (node[3] ? "\\n" + node[3] : "");
  if (h >= FONT + 4) box.textContent = fit(node[0], human(node[1]), w - 6, depth === 1);
  into.appendChild(box);
  var children = node[4];
  if (!children.length) return;
  var band = h > 3 * HEADER[depth - 1] ? HEADER[depth - 1] : 0;
  var iw = w - 2 * PAD, ih = h - band - 2 * PAD;
  if (iw <= 1 || ih <= 1) return;
  var rects = squarify(children.map(function (c) { return c[1]; }), x + PAD, y + band + PAD, iw, ih);
  for (var i = 0; i < children.length; i++) place(children[i], path, depth + 1, rects[i][0], rects[i][1],
                                                  rects[i][2], rects[i][3], into);
}
function draw() {
  map.style.height = Math.max(200, window.innerHeight - head.offsetHeight) + "px";
  var w = map.clientWidth, h = map.clientHeight, into = document.createDocumentFragment();
  var rects = squarify(DATA.tree.map(function (t) { return t[1]; }), 0, 0, w, h);
  for (var i = 0; i < DATA.tree.length; i++) place(DATA.tree[i], [], 1, rects[i][0], rects[i][1], rects[i][2],
                                                   rects[i][3], into);
  map.textContent = "";
  map.appendChild(into);
  map.setAttribute("data-viewport", [innerWidth, innerHeight, map.offsetTop].join(" "));  // what it was drawn for
}
// resize events come at most once a frame, before it is drawn: redrawn at once, nothing waits
window.addEventListener("resize", draw);
draw();
})();
"""


def _page(root: Node, title: str, totals: str, legend: str, about: str, summary: list[str],
          removed: list[Removed]) -> str:
    # JSON in a script element: "<" escaped, so that no name can close the element
    payload = json.dumps(data(root), separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    lines = "".join(f"<li>{escape(s)}</li>" for s in summary)
    gone = ""
    if removed:
        rows = "".join(f'<tr title="{escape(r.kernel)}"><td>{r.bytes:,} bytes</td>'
                       f'<td>{escape(" / ".join(r.path))}</td></tr>' for r in removed)
        gone = (f"<h2>Removed: in OLD, not in NEW ({len(removed)}, {sum(r.bytes for r in removed):,} bytes, "
                f'no area in NEW)</h2><table id="removed">{rows}</table>')
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n"
            f'<div id="head"><h1>{escape(title)}</h1><span id="totals">{escape(totals)}</span>{legend}</div>\n'
            '<div id="map"></div>\n'
            f'<div id="about"><p>{escape(about)}</p><ul>{lines}</ul>{gone}</div>\n'
            f'<script type="application/json" id="treemap-data">{payload}</script>\n'
            f"<script>{_SCRIPT}</script>\n</body></html>\n")
