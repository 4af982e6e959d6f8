"""``merge``: one map from the maps of one commit built on several machines (shards)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import mapformat
from ._output import EXIT_OK


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "merge",
        help="merge maps of one commit (shards) into one; any incomplete input makes it incomplete",
        allow_abbrev=False,
    )
    p.add_argument("out", type=Path, metavar="OUT")
    p.add_argument("maps", nargs="+", type=Path, metavar="MAP")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    merged = mapformat.merge([mapformat.read(m) for m in args.maps], [str(m) for m in args.maps])
    size = mapformat.write(merged, args.out)
    state = f"NO EVIDENCE: {merged['reason']}" if "reason" in merged else f"{len(merged['objects'])} objects"
    print(f"kernel_symbol_map: merged {len(args.maps)} maps into {args.out} ({size // 1024} KiB): {state}")
    return EXIT_OK
