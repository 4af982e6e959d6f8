"""``size``: which sources, targets and kernels make the device code big, and which made it grow.

Inputs: maps (their objects' ``sizes``), wheels (each shared library
measured, charged to the map the wheel ships), and plain binaries (objects,
archives, libraries, fatbins, cubins, bundles; joined with ``--map`` if
given). Two maps or two wheels are compared: ``size OLD NEW``.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from ._commands import summary_of
from .._words import some
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, plural, warning, write_json

JSON_SCHEMA = "kernel-symbol-map/size/1"
DIFF_SCHEMA = "kernel-symbol-map/size-diff/1"
DIFF_BY = ("source", "target", "kernel")


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from ..consumer.size.sizereport import BY

    p = sub.add_parser(
        "size",
        help=summary_of("size"),
        description="Sum each kernel's machine code (SASS, AMDGPU ISA), the sections it owns, each image's "
        "overhead and PTX, by source, target, kernel, family, architecture, kind or file, for maps, wheels "
        "(their libraries charged to the map they ship) and binaries. Two maps or two wheels: what grew, "
        "what was added and removed. Exit 0 when every input was read, 1 if not, if a map holds no evidence, or "
        "above --max-mb.",
        allow_abbrev=False,
    )
    p.add_argument("paths", nargs="+", metavar="INPUT", help="a map, a wheel, or binaries; OLD NEW to compare")
    p.add_argument("--map", metavar="MAP", help="charge the binaries' bytes to this map's sources")
    p.add_argument("--by", choices=BY, help="what to sum by (default: source with a map, else kernel)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to print (default 20; 0: all)")
    p.add_argument("--max-mb", type=float, metavar="N",
                   help="exit 1 when the input (NEW's, in a diff) is above N MiB, naming the largest sources "
                        "and growth: a wheel's file size (zipped), binaries' file sizes, a map's stored device bytes; "
                        "whole files, whatever --filter shows")
    p.add_argument("--filter", metavar="PATTERN",
                   help="only kernels whose demangled name holds PATTERN, or matches it as a regex (their code "
                        "and owned bytes: image overhead and PTX belong to no kernel)")
    p.add_argument("--mangled", action="store_true",
                   help="print kernels' mangled names in full (default: short demangled names; --json and --csv "
                        "always hold mangled ones)")
    p.add_argument("--html", metavar="FILE", help="write a treemap, target -> source -> kernel (.svg: SVG only); "
                   "OLD NEW: NEW's, each box coloured by its change")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help=f"one JSON document ({JSON_SCHEMA}, {DIFF_SCHEMA})")
    output.add_argument("--csv", action="store_true", help="every row as CSV")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps import names
    from ..consumer.size import sizeinputs

    if args.max_mb is not None and not (0 < args.max_mb < float("inf")):
        raise UsageError(f"--max-mb {args.max_mb:g}: a budget is a positive number of MiB")
    try:
        measured = sizeinputs.measure(args.paths, _binary_records, args.map)
    except sizeinputs.MixedInputs as e:
        raise UsageError(str(e)) from None
    whole = measured  # what the budget weighs: whole files, whatever --filter shows
    if args.filter:
        measured = measured.only(names.name_filter(args.filter))
    inputs = measured.inputs
    for i in inputs:
        for message in i.failed:
            error(message)
        if i.unsized:
            warning(f"{i.name}: {plural(len(i.unsized), 'device object')} without sizes (a map written before "
                    f"maps kept sizes, or bitcode only): their bytes are not counted, e.g. {i.unsized[0]}")
    if all(not i.pieces and i.failed for i in inputs):
        return EXIT_INPUT
    label = _Labels(args.mangled, {p.kernel for i in inputs for p in i.pieces if p.kernel})
    if measured.diff:
        code = _report_diff(args, inputs[0], inputs[1], label)
    else:
        code = EXIT_OK
        _report(args, args.by or ("source" if measured.mapped else "kernel"), inputs, label)
    if args.html:
        _treemap(Path(args.html), measured)
    verdict = None if args.max_mb is None else sizeinputs.over_budget(args.max_mb, whole, args.by)
    if verdict is not None:
        error(verdict.message(label.of(verdict.by)))
    return max(code, EXIT_INPUT if verdict or any(i.failed for i in inputs) else EXIT_OK)


def _binary_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """A binary's device images as (architecture, size record): the readers' answer, for the consumer."""
    from ..readers.sizes import measure

    return [(i.arch, i.record()) for i in measure(path)]


class _Labels:
    """How a row's key reads: a kernel by its short demangled name, distinct from every other kernel's
    (``names.labels``), unless ``--mangled``; computed once, when a kernel is first printed."""

    def __init__(self, mangled: bool, kernels: set[str]) -> None:
        self.mangled = mangled
        self.kernels = kernels
        self._labels: dict[str, str] | None = None

    def of(self, by: str) -> Any:
        if by != "kernel" or self.mangled:
            return str
        if self._labels is None:
            from ..consumer.maps import names

            self._labels = names.labels(self.kernels)
        labels = self._labels
        return lambda kernel: labels.get(kernel, kernel)


# ------------------------------------------------------------------------------------------- one build


def _report(args: argparse.Namespace, by: str, inputs: list[Any], label: _Labels) -> None:
    from ..consumer.size import sizereport

    found = [p for i in inputs for p in i.pieces]
    ranked = sizereport.rows(found, by)
    totals = sizereport.totals(found)
    duplicates = sizereport.duplicates(found)
    if args.json:
        write_json(JSON_SCHEMA, {
            "by": by, "filter": args.filter,
            "inputs": [{"input": i.name, "kind": i.kind, "file_bytes": i.file_bytes,
                        "library_bytes": i.library_bytes, "stored_bytes": i.stored,
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
    name = label.of(by)
    shown = ranked if args.top <= 0 else ranked[: args.top]
    print(f"{'bytes':>12} {'%':>6} {'code':>12} {'owned':>10} {'overhead':>10} {'ptx':>10} {'stored':>12}  {by}")
    for r in shown:
        k = r.kinds
        print(f"{r.bytes:>12,} {_share(r.bytes, totals['bytes']):>6} {k['code']:>12,} {k['owned']:>10,} "
              f"{k['overhead']:>10,} {k['ptx']:>10,} {r.stored:>12,}  {name(r.key)}")
    if len(ranked) > len(shown):
        print(f"... {len(ranked) - len(shown)} more (--top 0 for all)")
    if args.filter:
        print(f"only kernels matching {args.filter!r}: {plural(len({p.kernel for p in found}), 'kernel')} "
              "(their code and owned bytes; image overhead and PTX belong to no kernel)")
    print(_totals_line(totals))
    relocatable = sum(i.relocatable for i in inputs)
    if relocatable:
        print(f"{plural(relocatable, 'relocatable (-rdc) image')} left out: the map's device-link images hold "
              "their kernels, and are what loads")
    for line in [] if args.filter else _weights(inputs):  # a file's weight beside some kernels' would mislead
        print(line)
    if duplicates:
        waste = sum(d.waste for d in duplicates)
        top = duplicates[0]
        print(f"duplicates: {plural(len(duplicates), 'kernel')} compiled into more than one "
              f"{'object' if any(i.mapped for i in inputs) else 'image'}, {waste:,} B beyond one copy of each; "
              f"the largest: {label.of('kernel')(top.kernel)} ({top.arch}, {len(top.copies)} copies: "
              f"{some(sorted({s or u for s, u, _ in top.copies}))})")


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "-"


def _weights(inputs: list[Any]) -> list[str]:
    """What the files weigh beside their device code. A wheel's bytes are zipped and its libraries' are
    not: each is named, and device bytes are a share of the libraries' (unzipped) bytes only."""
    lines = []
    wheels = [i for i in inputs if i.kind == "wheel"]
    if wheels:
        zipped = sum(i.file_bytes for i in wheels)
        unzipped = sum(i.library_bytes for i in wheels)
        stored = sum(i.stored for i in wheels)
        libraries = plural(sum(i.libraries for i in wheels), "shared library", "shared libraries")
        lines.append(f"{'wheel' if len(wheels) == 1 else 'wheels'}: {zipped:,} B zipped; {libraries} in it: "
                     f"{unzipped:,} B unzipped, of which device images store {stored:,} B "
                     f"({_share(stored, unzipped)}); the rest is host code and data")
    binaries = [i for i in inputs if i.kind == "binary"]
    if binaries:
        weight = sum(i.file_bytes for i in binaries)
        stored = sum(i.stored for i in binaries)
        lines.append(f"files: {weight:,} B, of which device images store {stored:,} B ({_share(stored, weight)}); "
                     "the rest is host code and data (and any device code kept outside .nv_fatbin, which "
                     "cuobjdump lists neither)" if weight else "files: empty")
    return lines


def _totals_line(t: dict[str, int]) -> str:
    return (f"device code {t['bytes']:,} B: machine code {t['code']:,}, owned by kernels {t['owned']:,}, "
            f"image overhead {t['overhead']:,}, PTX {t['ptx']:,}; stored in the files: {t['stored']:,} B")


# ------------------------------------------------------------------------------------------- two builds


def _report_diff(args: argparse.Namespace, old: Any, new: Any, label: _Labels) -> int:
    from ..consumer.size import sizereport

    tables = {by: sizereport.changes(old.pieces, new.pieces, by) for by in DIFF_BY}
    before, after = sizereport.kernel_sources(old.pieces), sizereport.kernel_sources(new.pieces)
    kernel_bytes = {c.key: c.new for c in tables["kernel"]}  # an added kernel's bytes: its change
    old_bytes = {c.key: c.old for c in tables["kernel"]}
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    t_old, t_new = sizereport.totals(old.pieces), sizereport.totals(new.pieces)
    if args.json:
        write_json(DIFF_SCHEMA, {
            "old": {"input": old.name, "file_bytes": old.file_bytes, "library_bytes": old.library_bytes,
                    "totals": t_old},
            "new": {"input": new.name, "file_bytes": new.file_bytes, "library_bytes": new.library_bytes,
                    "totals": t_new},
            "change": t_new["bytes"] - t_old["bytes"], "filter": args.filter,
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
          + (f"; wheel files (zipped): {old.file_bytes:,} B -> {new.file_bytes:,} B "
             f"({new.file_bytes - old.file_bytes:+,} B)" if old.kind == "wheel" else ""))
    kernel = label.of("kernel")
    for by, rows in tables.items():
        name = label.of(by)
        shown = rows if args.top <= 0 else rows[: args.top]
        print(f"\nby {by}: {plural(len(rows), 'change')}")
        for c in shown:
            print(f"{c.delta:>+12,} {c.old:>12,} -> {c.new:>12,}  {name(c.key)}")
        if len(rows) > len(shown):
            print(f"... {len(rows) - len(shown)} more (--top 0 for all)")
    for what, found, sources, sizes in (("added", added, after, kernel_bytes), ("removed", removed, before, old_bytes)):
        if found:
            print(f"\nkernels {what}: {len(found)}")
            for k in found[: args.top if args.top > 0 else None]:
                print(f"{sizes.get(k, 0):>12,}  {kernel(k)}  ({', '.join(sorted(sources[k]))})")
    return EXIT_OK


# ------------------------------------------------------------------------------------------- picture


def _treemap(path: Path, measured: Any) -> None:
    from .. import _atomic
    from ..consumer.size import sizereport, treemap

    if measured.diff:  # NEW's map, each box coloured by its change against OLD
        old, new = measured.inputs
        title = f"device code of {old.name} -> {new.name}"
        if path.suffix == ".svg":
            text = treemap.diff_svg(old.pieces, new.pieces, title) + "\n"
        else:
            summary = [f"OLD {old.name}: {_totals_line(sizereport.totals(old.pieces))}",
                       f"NEW {new.name}: {_totals_line(sizereport.totals(new.pieces))}"]
            text = treemap.diff_html(old.pieces, new.pieces, title, summary)
    else:
        shown = measured.inputs
        found = [p for i in shown for p in i.pieces]
        title = f"device code of {shown[0].name}" if len(shown) == 1 else f"device code of {len(shown)} inputs"
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
    print(f"wrote {path}", file=sys.stderr)
