"""``diff``: kernels added, removed or moved between two maps."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import TYPE_CHECKING

from ._output import EXIT_OK

if TYPE_CHECKING:
    from ..consumer.kernelmap import KernelMap


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diff", help="kernels added, removed or moved between two maps", allow_abbrev=False)
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _sources(kmap: KernelMap) -> dict[str, set[str]]:
    found: dict[str, set[str]] = defaultdict(set)
    for o in kmap.objects:
        for s in o["symbols"]:
            found[s].add(o["source"])
    return found


def compare(old: KernelMap, new: KernelMap) -> dict[str, list]:
    a, b = _sources(old), _sources(new)
    return {
        "added": sorted(set(b) - set(a)),
        "removed": sorted(set(a) - set(b)),
        "moved": [{"symbol": s, "from": sorted(a[s]), "to": sorted(b[s])} for s in sorted(set(a) & set(b)) if a[s] != b[s]],
    }


def run(args: argparse.Namespace) -> int:
    from ..consumer.kernelmap import load

    result = compare(load(args.old), load(args.new))
    if args.json:
        json.dump({"schema": "kernel-symbol-map/diff/1", **result}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    for s in result["added"]:
        print(f"+ {s}")
    for s in result["removed"]:
        print(f"- {s}")
    for m in result["moved"]:
        print(f"~ {m['symbol']}: {', '.join(m['from'])} -> {', '.join(m['to'])}")
    print(f"{len(result['added'])} added, {len(result['removed'])} removed, {len(result['moved'])} moved")
    return EXIT_OK
