"""``query``: where did this kernel come from; which kernels does this file reach."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._output import EXIT_INPUT, EXIT_OK


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("query", help="a file's kernels, or a kernel's sources, with the reasons", allow_abbrev=False)
    p.add_argument("map", metavar="MAP", help="map file, wheel, or installed package")
    p.add_argument("items", nargs="+", metavar="FILE|SYMBOL")
    p.add_argument("--demangle", action="store_true", help="also print demangled names (joins stay mangled)")
    p.add_argument("--source-root", type=Path, default=Path.cwd(), help="the project relative paths are in (default: .)")
    p.add_argument("--build-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="the build folder(s) the map's $BUILD paths are in: a file may then be a build-tree path")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer.canonical import Canonical
    from ..consumer.kernelmap import demangle, load

    kmap = load(args.map)
    canonical = Canonical(args.source_root, args.build_dir)
    answers = []
    for item in args.items:
        origins = kmap.sources_for(item)
        if origins:
            answers.append({"symbol": item, "demangled": demangle(item),
                            "sources": [{"source": o.source, "target": o.target, "object": o.object} for o in origins]})
            continue
        (reach,) = kmap.reach(item, canonical=canonical)
        answers.append({"path": item, "status": reach.status, "why": reach.explain(), "kernels": sorted(reach.symbols),
                        "via": [{"object": lk.object, "source": lk.source, "target": lk.target, "via": lk.via}
                                for lk in reach.links]})
    if args.json:
        json.dump({"schema": "kernel-symbol-map/query/1", "answers": answers}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for a in answers:
            if "symbol" in a:
                print(f"{a['symbol']}" + (f"  [{a['demangled']}]" if args.demangle else ""))
                for s in a["sources"]:
                    print(f"  from {s['source']} (target {s['target']}, object {s['object']})")
            else:
                print(a["why"])
                for k in a["kernels"]:
                    print(f"  {k}" + (f"  [{demangle(k)}]" if args.demangle else ""))
    return EXIT_INPUT if not kmap.has_evidence else EXIT_OK
