"""``size``: what each kernel costs in bytes, per architecture, for binaries (issue 21, first step).

Without a map, as cubloaty does for one library, but for any number of
objects, archives, libraries, fatbins and cubins: SASS and owned bytes per
kernel, summed by kernel, family (the template without its arguments),
architecture or file, with each cubin's overhead, PTX bytes, the bytes the
fatbins store, and kernels compiled into more than one input (duplicates).
Maps, wheels and diffs are the next steps of issue 21.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from ._output import EXIT_INPUT, EXIT_OK, error, write_json

JSON_SCHEMA = "kernel-symbol-map/size/1"
BY = ("kernel", "family", "arch", "file")


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "size",
        help="bytes per kernel, family, architecture or file, for binaries",
        description="Sum each kernel's SASS (its .text.<kernel> section) and the sections it owns, per "
        "architecture, over objects, archives, libraries, fatbins and cubins; report cubin overhead, PTX "
        "bytes and kernels compiled into more than one input. Exit 0 when every input was read, 1 if not.",
        allow_abbrev=False,
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--by", choices=BY, default="kernel", help="what to sum by (default: kernel)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows to print (default 20; 0: all)")
    output = p.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one versioned JSON document")
    output.add_argument("--csv", action="store_true", help="every row as CSV")
    p.set_defaults(run=run)


@dataclass
class Row:
    key: str
    sass: int = 0
    owned: int = 0
    stored: int = 0  # the fatbin's stored bytes, apportioned
    instances: set[tuple[str, str]] = field(default_factory=set)  # (file, arch)

    @property
    def total(self) -> int:
        return self.sass + self.owned


def run(args: argparse.Namespace) -> int:
    from ..consumer.kernelmap import demangle_fast, family
    from ..errors import FormatError
    from ..readers.sizes import measure

    rows: dict[str, Row] = {}
    where: dict[tuple[str, str], set[str]] = defaultdict(set)  # (kernel, arch) -> files
    per_kernel: dict[tuple[str, str], int] = {}
    totals = {"sass": 0, "owned": 0, "overhead": 0, "ptx": 0, "stored": 0, "cubins": 0}
    failed = 0
    for path in args.paths:
        try:
            images = measure(path)
        except FormatError as e:
            error(str(e))
            failed += 1
            continue
        for image in images:
            totals["stored"] += image.stored
            if image.kind == "ptx":
                totals["ptx"] += image.size
                continue
            totals["cubins"] += 1
            totals["overhead"] += image.overhead
            stored = image.apportioned()
            for kernel, sass in image.sass.items():
                owned = image.owned.get(kernel, 0)
                totals["sass"] += sass
                totals["owned"] += owned
                where[(kernel, image.arch)].add(path)
                per_kernel[(kernel, image.arch)] = sass + owned
                key = (kernel if args.by == "kernel" else image.arch if args.by == "arch"
                       else path if args.by == "file" else family(demangle_fast(kernel)))
                row = rows.setdefault(key, Row(key))
                row.sass += sass
                row.owned += owned
                row.stored += stored.get(kernel, 0)
                row.instances.add((path, image.arch))
    if failed == len(args.paths):
        return EXIT_INPUT  # nothing was read: the ERROR lines say why
    duplicates = sorted(((k, a, sorted(files), (len(files) - 1) * per_kernel[(k, a)])
                         for (k, a), files in where.items() if len(files) > 1), key=lambda d: (-d[3], d[0], d[1]))
    ranked = sorted(rows.values(), key=lambda r: (-r.total, r.key))
    shown = ranked if args.top <= 0 else ranked[: args.top]
    if args.json:
        write_json(JSON_SCHEMA, {
            "by": args.by, "totals": totals,
            "rows": [{"key": r.key, "sass": r.sass, "owned": r.owned, "stored": r.stored,
                      "instances": len(r.instances)} for r in ranked],
            "duplicates": [{"kernel": k, "arch": a, "files": f, "bytes": b} for k, a, f, b in duplicates],
        })
    elif args.csv:
        out = csv.writer(sys.stdout)
        out.writerow([args.by, "sass", "owned", "stored", "instances"])
        out.writerows([r.key, r.sass, r.owned, r.stored, len(r.instances)] for r in ranked)
    else:
        _table(args.by, shown, len(ranked), totals, duplicates)
    return EXIT_INPUT if failed else EXIT_OK


def _table(by: str, shown: list[Row], count: int, totals: dict[str, int],
           duplicates: list[tuple[str, str, list[str], int]]) -> None:
    print(f"{'bytes':>10} {'sass':>10} {'owned':>9} {'stored':>9}  {by}")
    for r in shown:
        print(f"{r.total:>10,} {r.sass:>10,} {r.owned:>9,} {r.stored:>9,}  {r.key}")
    if count > len(shown):
        print(f"... {count - len(shown)} more (--top 0 for all)")
    print(f"{totals['cubins']} cubins: SASS {totals['sass']:,} B, owned by kernels {totals['owned']:,} B, "
          f"overhead {totals['overhead']:,} B; PTX {totals['ptx']:,} B; the fatbins store {totals['stored']:,} B")
    if duplicates:
        waste = sum(d[3] for d in duplicates)
        print(f"duplicates: {len(duplicates)} kernels compiled into more than one input, {waste:,} B beyond one "
              f"copy each; the largest: {duplicates[0][0]} ({duplicates[0][1]}, {len(duplicates[0][2])} inputs)")
