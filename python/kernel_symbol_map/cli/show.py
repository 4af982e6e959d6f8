"""``show``: a human summary of a map, per target and per source."""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from pathlib import Path

from .. import mapformat
from ._output import EXIT_OK


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("show", help="summarise a map: per target and per source", allow_abbrev=False)
    p.add_argument("map", type=Path, metavar="MAP")
    p.add_argument("--headers", type=int, default=3, metavar="N", help="top project headers per source (default 3)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    doc = mapformat.read(args.map)
    stats = doc["stats"]
    print(f"{args.map}: version {doc['version']}, commit {doc['commit'] or '(none)'}, "
          f"{doc.get('backend', 'cuda')} {doc['cuda'] or ''}".rstrip())
    print(f"  generated {doc['generated_at']} by {doc.get('tool', '?')} from {', '.join(doc['build_dirs'])}"
          f" ({doc.get('generator', '?')}, CMake {doc.get('cmake_version', '?')})")
    print(f"  {stats.get('objects', 0)} objects, {stats.get('device_objects', 0)} device objects, "
          f"{stats.get('symbols', 0)} symbols, {stats.get('errors', len(doc['errors']))} errors")
    if "reason" in doc:
        print(f"  NO EVIDENCE: {doc['reason']}")
        for e in doc["errors"][:10]:
            print(f"    {e['object']}: {e['error']}")
        return EXIT_OK
    objects = doc["objects"]
    # Fan-in: how many objects include each project header; the most shared come first.
    sources = {o["source"] for o in objects}
    fan_in = Counter(d for o in objects for d in set(o["deps"]) if not d.startswith("/") and d not in sources)
    by_target: dict[str, list[dict]] = defaultdict(list)
    for o in objects:
        by_target[o["target"]].append(o)
    for target in sorted(by_target):
        members = by_target[target]
        kernels = {s for o in members for s in o["symbols"]}
        print(f"\n{target}: {len(members)} objects, {len(kernels)} kernels")
        for o in members:
            headers = sorted((d for d in o["deps"] if d in fan_in), key=lambda d: (-fan_in[d], d))
            top = f"; top headers: {', '.join(headers[: args.headers])}" if headers and args.headers else ""
            kind = " (device link)" if o.get("device_link") else ("" if o["device"] else " (host)")
            if o.get("unity_sources"):
                kind += f" (unity of {', '.join(o['unity_sources'])})"
            print(f"  {o['source']}{kind}: {len(o['symbols'])} kernels, {len(o['deps'])} deps{top}")
    return EXIT_OK
