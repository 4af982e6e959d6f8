"""``merge``: one map from the maps of one commit built on several machines (shards)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, error, plural, write_json

JSON_SCHEMA = "kernel-symbol-map/merge/1"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "merge",
        help=summary_of("merge"),
        description="Write OUT, one map from the maps of one commit built on several machines or with "
        "--targets subsets. It fails closed: any input without evidence, maps of different commits, or one "
        "object mapped two ways give a map with no evidence and a reason (exit 0, as build: the map says why; "
        "1 with --strict).",
        allow_abbrev=False,
    )
    p.add_argument("out", type=Path, metavar="OUT", help="the merged map file")
    p.add_argument("maps", nargs="+", metavar="MAP", help="map file, wheel, folder holding one, or installed package")
    p.add_argument("--strict", action="store_true", help="exit 1 when the merged map holds no evidence (as build)")
    p.add_argument("--json", action="store_true", help=f"machine-readable summary ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps.kernelmap import read_document

    read = [read_document(m) for m in args.maps]
    from .. import mapformat

    merged = mapformat.merge([doc for doc, _ in read], [where for _, where in read])
    size = mapformat.write(merged, args.out)
    if args.json:
        write_json(JSON_SCHEMA, {"out": str(args.out), "bytes": size, "inputs": [w for _, w in read],
                                 "objects": len(merged["objects"]), "evidence": "reason" not in merged,
                                 "reason": merged.get("reason")})
    else:
        state = "NO EVIDENCE" if "reason" in merged else plural(len(merged["objects"]), "object")
        print(f"kernel_symbol_map: merged {plural(len(args.maps), 'map')} into {args.out} ({size // 1024} KiB): "
              f"{state}")
    if "reason" not in merged:
        return EXIT_OK
    error(f"no evidence in {args.out}: {merged['reason']}")  # as build says it
    return EXIT_INPUT if args.strict else EXIT_OK
