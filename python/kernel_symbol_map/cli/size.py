"""``size``: which sources, targets and kernels make the device code big, and which made it grow (issue 21).

Inputs: maps (their objects' ``sizes``), wheels (each shared library
measured, charged to the map the wheel ships), and plain binaries (objects,
archives, libraries, fatbins, cubins, bundles; joined with ``--map`` if
given). Two maps or two wheels are compared: ``size OLD NEW``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, plural, warning, write_json

JSON_SCHEMA = "kernel-symbol-map/size/1"
DIFF_SCHEMA = "kernel-symbol-map/size-diff/1"
MIB = 1 << 20
DIFF_BY = ("source", "target", "kernel")


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from ..consumer.sizereport import BY

    p = sub.add_parser(
        "size",
        help=summary_of("size"),
        description="Sum each kernel's machine code (SASS, AMDGPU ISA), the sections it owns, each image's "
        "overhead and PTX, by source, target, kernel, family, architecture, kind or file, for maps, wheels "
        "(their libraries charged to the map they ship) and binaries. Two maps or two wheels: what grew, "
        "what was added and removed. Exit 0 when every input was read, 1 if not or above --max-mb.",
        allow_abbrev=False,
    )
    p.add_argument("paths", nargs="+", metavar="INPUT", help="a map, a wheel, or binaries; OLD NEW to compare")
    p.add_argument("--map", metavar="MAP", help="charge the binaries' bytes to this map's sources")
    p.add_argument("--by", choices=BY, help="what to sum by (default: source with a map, else kernel)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to print (default 20; 0: all)")
    p.add_argument("--max-mb", type=float, metavar="N",
                   help="exit 1 when the input (NEW's, in a diff) is above N MiB, naming the largest sources "
                        "and growth: a wheel's file size, binaries' file sizes, a map's stored device bytes")
    p.add_argument("--html", metavar="FILE", help="write a treemap, target -> source -> kernel (.svg: SVG only)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help=f"one JSON document ({JSON_SCHEMA}, {DIFF_SCHEMA})")
    output.add_argument("--csv", action="store_true", help="every row as CSV")
    p.set_defaults(run=run)


@dataclass
class Input:
    """One input read: its pieces, what the file weighs, and what was not read."""

    name: str
    kind: str  # "map", "wheel" or "binary"
    pieces: list[Any] = field(default_factory=list)
    file_bytes: int = 0
    mapped: bool = False  # bytes charged to a map's sources
    unsized: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    relocatable: int = 0  # -rdc images a map's device-link images replace


def run(args: argparse.Namespace) -> int:
    from ..consumer import sizereport
    from ..consumer.kernelmap import read_document

    if args.max_mb is not None and not (0 < args.max_mb < float("inf")):
        raise UsageError(f"--max-mb {args.max_mb:g}: a budget is a positive number of MiB")
    kinds = [_kind(Path(p)) for p in args.paths]
    diff = len(args.paths) == 2 and kinds[0] == kinds[1] and kinds[0] in ("map", "wheel")
    if args.map and any(k != "binary" for k in kinds):
        raise UsageError("--map joins binaries with a map; maps and wheels bring their own")
    document = read_document(args.map)[0] if args.map else None
    if diff:
        old, new = (_read(Path(p), k, None) for p, k in zip(args.paths, kinds))
        inputs = [old, new]
    else:
        inputs = [_read(Path(p), k, document) for p, k in zip(args.paths, kinds)]
    for i in inputs:
        for message in i.failed:
            error(message)
        if i.unsized:
            warning(f"{i.name}: {plural(len(i.unsized), 'device object')} without sizes (a map written before "
                    f"maps kept sizes, or bitcode only): their bytes are not counted, e.g. {i.unsized[0]}")
    if all(not i.pieces and i.failed for i in inputs):
        return EXIT_INPUT
    mapped = any(i.mapped for i in inputs) or args.map is not None
    by = args.by or ("source" if mapped else "kernel")
    if diff:
        code = _report_diff(args, inputs[0], inputs[1], sizereport)
    else:
        code = EXIT_OK
        _report(args, by, [p for i in inputs for p in i.pieces], inputs, sizereport)
    shown = inputs[1:] if diff else inputs  # the picture and the budget are of NEW in a diff
    if args.html:
        _treemap(Path(args.html), [p for i in shown for p in i.pieces], [i.name for i in shown])
    gate = EXIT_OK if args.max_mb is None else _gate(args.max_mb, shown, inputs[0] if diff else None, sizereport)
    return max(code, gate, EXIT_INPUT if any(i.failed for i in inputs) else EXIT_OK)


def _kind(path: Path) -> str:
    from ..consumer.kernelmap import is_wheel

    if is_wheel(path):
        return "wheel"
    if path.name.endswith((".json", ".json.gz")) or path.is_dir():
        return "map"
    return "binary"


def _read(path: Path, kind: str, document: dict[str, Any] | None) -> Input:
    from ..consumer import sizereport
    from ..consumer.kernelmap import read_document

    if kind == "map":
        document, where = read_document(path)
        found = sizereport.from_map(document, where)
        stored = sum(p.stored for p in found.pieces)
        return Input(str(path), kind, found.pieces, stored, True, found.unsized, relocatable=found.relocatable)
    if kind == "wheel":
        return _wheel(path)
    out = Input(str(path), kind, file_bytes=_file_size(path), mapped=document is not None)
    records = _measured(path, str(path), out)
    if records is not None:
        out.pieces = sizereport.join([(str(path), records)], document).pieces
    return out


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _measured(path: Path, name: str, into: Input) -> list[tuple[str, dict[str, Any]]] | None:
    from ..errors import FormatError
    from ..readers.sizes import measure

    try:
        return [(i.arch, i.record()) for i in measure(path)]
    except FormatError as e:
        into.failed.append(str(e).replace(str(path), name, 1))  # a wheel's member: named, not its temporary copy
        return None


def _wheel(path: Path) -> Input:
    """A wheel's libraries, measured one at a time from a temporary file (memory stays bounded by the
    largest device image), charged to the map the wheel ships; without one, per kernel as binaries are."""
    from ..consumer import sizereport
    from ..consumer.kernelmap import WHEEL_ERRORS, copy_member, read_document, wheel_members
    from ..errors import MapError, MapNotFound

    try:
        document, _ = read_document(path)
    except MapNotFound:
        document = None
    out = Input(str(path), "wheel", file_bytes=_file_size(path), mapped=document is not None)
    binaries = []
    try:
        with zipfile.ZipFile(path) as z:
            libraries = wheel_members(z, path, _is_library)  # every member bounded before one is inflated
            with tempfile.TemporaryDirectory(prefix="ksm-size-") as tmp:
                for info in libraries:
                    local = Path(tmp) / "member"
                    with local.open("wb") as dst:
                        copy_member(z, info, dst, path)
                    records = _measured(local, f"{path}!{info.filename}", out)
                    if records:
                        binaries.append((info.filename, records))
                    os.unlink(local)
    except WHEEL_ERRORS as e:
        raise MapError(f"{path}: not a readable wheel ({e})") from None
    out.pieces = sizereport.join(binaries, document).pieces
    return out


def _is_library(name: str) -> bool:
    """A shared library, by its name: ``lib.so``, and a versioned ``lib.so.1``."""
    base = name.rsplit("/", 1)[-1]
    return base.endswith(".so") or ".so." in base


# ------------------------------------------------------------------------------------------- one build


def _report(args: argparse.Namespace, by: str, found: list[Any], inputs: list[Input], sizereport: Any) -> None:
    ranked = sizereport.rows(found, by)
    totals = sizereport.totals(found)
    duplicates = sizereport.duplicates(found)
    if args.json:
        write_json(JSON_SCHEMA, {
            "by": by, "inputs": [{"input": i.name, "kind": i.kind, "file_bytes": i.file_bytes,
                                  "unsized_objects": len(i.unsized), "relocatable_left_out": i.relocatable}
                                 for i in inputs],
            "totals": totals, "rows": [r.to_json() for r in ranked],
            "duplicates": [{"kernel": d.kernel, "arch": d.arch, "bytes": d.waste,
                            "copies": [{"source": s, "image": u, "bytes": n} for s, u, n in d.copies]}
                           for d in duplicates],
        })
        return
    if args.csv:
        out = csv.writer(sys.stdout)
        out.writerow([by, "bytes", *sizereport.KINDS, "stored"])
        out.writerows([r.key, r.bytes, *r.kinds.values(), r.stored] for r in ranked)
        return
    shown = ranked if args.top <= 0 else ranked[: args.top]
    print(f"{'bytes':>12} {'code':>12} {'owned':>10} {'overhead':>10} {'ptx':>10} {'stored':>12}  {by}")
    for r in shown:
        k = r.kinds
        print(f"{r.bytes:>12,} {k['code']:>12,} {k['owned']:>10,} {k['overhead']:>10,} {k['ptx']:>10,} "
              f"{r.stored:>12,}  {r.key}")
    if len(ranked) > len(shown):
        print(f"... {len(ranked) - len(shown)} more (--top 0 for all)")
    print(_totals_line(totals))
    relocatable = sum(i.relocatable for i in inputs)
    if relocatable:
        print(f"{plural(relocatable, 'relocatable (-rdc) image')} left out: the map's device-link images hold "
              "their kernels, and are what loads")
    files = [i for i in inputs if i.kind != "map"]
    if files:  # what else the files hold: host code and data, and device code outside the fatbin sections
        weight = sum(i.file_bytes for i in files)
        stored = sum(p.stored for i in files for p in i.pieces)
        print(f"files: {weight:,} B, of which device images store {stored:,} B ({stored / weight:.0%}); the rest is "
              "host code and data (and any device code kept outside .nv_fatbin, which cuobjdump lists neither)"
              if weight else "files: empty")
    if duplicates:
        waste = sum(d.waste for d in duplicates)
        top = duplicates[0]
        print(f"duplicates: {plural(len(duplicates), 'kernel')} compiled into more than one "
              f"{'object' if any(i.mapped for i in inputs) else 'image'}, {waste:,} B beyond one copy of each; "
              f"the largest: {top.kernel} ({top.arch}, {len(top.copies)} copies: {_some(s or u for s, u, _ in top.copies)})")


def _some(names: Any, most: int = 3) -> str:
    """``a, b, c and 1,121 more``: a list people read in one line."""
    found = sorted(set(names))
    shown = ", ".join(found[:most])
    return shown if len(found) <= most else f"{shown} and {len(found) - most:,} more"


def _totals_line(t: dict[str, int]) -> str:
    return (f"device code {t['bytes']:,} B: machine code {t['code']:,}, owned by kernels {t['owned']:,}, "
            f"image overhead {t['overhead']:,}, PTX {t['ptx']:,}; stored in the files: {t['stored']:,} B")


# ------------------------------------------------------------------------------------------- two builds


def _report_diff(args: argparse.Namespace, old: Input, new: Input, sizereport: Any) -> int:
    tables = {by: sizereport.changes(old.pieces, new.pieces, by) for by in DIFF_BY}
    before, after = sizereport.kernel_sources(old.pieces), sizereport.kernel_sources(new.pieces)
    kernel_bytes = {c.key: c.new for c in tables["kernel"]}  # an added kernel's bytes: its change
    old_bytes = {c.key: c.old for c in tables["kernel"]}
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    t_old, t_new = sizereport.totals(old.pieces), sizereport.totals(new.pieces)
    if args.json:
        write_json(DIFF_SCHEMA, {
            "old": {"input": old.name, "file_bytes": old.file_bytes, "totals": t_old},
            "new": {"input": new.name, "file_bytes": new.file_bytes, "totals": t_new},
            "change": t_new["bytes"] - t_old["bytes"],
            "by": {by: [c.to_json() for c in rows] for by, rows in tables.items()},
            "added": [{"kernel": k, "sources": sorted(after[k]), "bytes": kernel_bytes.get(k, 0)} for k in added],
            "removed": [{"kernel": k, "sources": sorted(before[k]), "bytes": old_bytes.get(k, 0)} for k in removed],
        })
        return EXIT_OK
    if args.csv:
        out = csv.writer(sys.stdout)
        out.writerow(["by", "key", "old", "new", "change"])
        out.writerows([by, c.key, c.old, c.new, c.delta] for by, rows in tables.items() for c in rows)
        return EXIT_OK
    change = t_new["bytes"] - t_old["bytes"]
    print(f"device code: {t_old['bytes']:,} B -> {t_new['bytes']:,} B ({change:+,} B)"
          + (f"; files: {old.file_bytes:,} B -> {new.file_bytes:,} B ({new.file_bytes - old.file_bytes:+,} B)"
             if old.kind == "wheel" else ""))
    for by, rows in tables.items():
        shown = rows if args.top <= 0 else rows[: args.top]
        print(f"\nby {by}: {plural(len(rows), 'change')}")
        for c in shown:
            print(f"{c.delta:>+12,} {c.old:>12,} -> {c.new:>12,}  {c.key}")
        if len(rows) > len(shown):
            print(f"... {len(rows) - len(shown)} more (--top 0 for all)")
    for label, names, sources, sizes in (("added", added, after, kernel_bytes), ("removed", removed, before, old_bytes)):
        if names:
            print(f"\nkernels {label}: {len(names)}")
            for k in names[: args.top if args.top > 0 else None]:
                print(f"{sizes.get(k, 0):>12,}  {k}  ({', '.join(sorted(sources[k]))})")
    return EXIT_OK


# ------------------------------------------------------------------------------------------- gate, picture


def _gate(max_mb: float, measured: list[Input], old: Input | None, sizereport: Any) -> int:
    """Exit 1 above the budget, saying which sources are largest and, in a diff, which grew most."""
    weight = sum(i.file_bytes for i in measured)
    if weight <= max_mb * MIB:
        return EXIT_OK
    found = [p for i in measured for p in i.pieces]
    by = "source" if any(i.mapped for i in measured) else "kernel"
    largest = ", ".join(f"{r.key} {r.bytes / MIB:.1f} MiB" for r in sizereport.rows(found, by)[:5])
    what = "stored device bytes" if all(i.kind == "map" for i in measured) else "file bytes"
    message = (f"{' + '.join(i.name for i in measured)}: {weight / MIB:.1f} MiB of {what}, above the budget of "
               f"{max_mb:g} MiB; the largest {by}s: {largest or 'none'}")
    if old is not None:
        grown = [c for c in sizereport.changes(old.pieces, found, by) if c.delta > 0][:5]
        message += "; the largest growth: " + (", ".join(f"{c.key} {c.delta / MIB:+.2f} MiB" for c in grown) or "none")
    error(message)
    return EXIT_INPUT


def _treemap(path: Path, found: list[Any], names: list[str]) -> None:
    from .. import _atomic
    from ..consumer import sizereport, treemap

    title = f"device code of {names[0]}" if len(names) == 1 else f"device code of {len(names)} inputs"
    if path.suffix == ".svg":
        text = treemap.svg(found, title) + "\n"
    else:
        summary = [_totals_line(sizereport.totals(found))]
        summary += [f"target {r.key}: {r.bytes:,} B" for r in sizereport.rows(found, "target")[:10]]
        text = treemap.html(found, title, summary)
    try:
        _atomic.replace(path, text.encode(), mode=0o644)
    except OSError as e:
        raise UsageError(f"--html {path}: {e.strerror or e}") from None
