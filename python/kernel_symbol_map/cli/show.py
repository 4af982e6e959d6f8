"""``show``: a human summary of a map, per target and per source."""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from typing import Any

from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, error, plural, write_json

JSON_SCHEMA = "kernel-symbol-map/show/1"
EXAMPLES = 10  # errors listed of a map without evidence; the rest are counted


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "show", help=summary_of("show"),
        description="Summarise a map: its commit, build and counts; then per target, each source's kernels, "
        "deps and most shared project headers. A map without evidence says why, and exits 1 (as query and size).",
        allow_abbrev=False,
    )
    p.add_argument("map", metavar="MAP", help="map file, wheel, folder holding one, or installed package")
    p.add_argument("--headers", type=int, default=3, metavar="N", help="top project headers per source (default 3)")
    p.add_argument("--json", action="store_true", help=f"machine-readable summary ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def summary(doc: dict[str, Any], headers: int) -> dict[str, Any]:
    """What ``show`` prints, as data: the map's header, and per target its sources."""
    objects = doc["objects"]
    # Fan-in: how many objects include each project header (a relative path no object is compiled from); the
    # most shared come first. The project headers are picked from the map's distinct deps, then each object's
    # from its deps at C speed: a vLLM map's 4.5 million deps are mostly toolkit headers.
    sources = {o["source"] for o in objects}
    project = {d for d in set().union(*(o["deps"] for o in objects)) if not d.startswith("/")} - sources
    own = [list(filter(project.__contains__, o["deps"])) for o in objects]
    fan_in: Counter[str] = Counter()
    for mine in own:
        fan_in.update(set(mine))
    rank = {d: i for i, d in enumerate(sorted(fan_in, key=lambda d: (-fan_in[d], d)))}
    by_target: dict[str, list[tuple[dict[str, Any], list[str]]]] = defaultdict(list)
    for o, mine in zip(objects, own, strict=True):
        by_target[o["target"]].append((o, mine))
    targets = []
    for target in sorted(by_target):
        members = [o for o, _ in by_target[target]]
        entries = []
        for o, mine in by_target[target]:
            top = sorted(mine, key=rank.__getitem__)[:headers]
            kind = "device-link" if o.get("device_link") else ("device" if o["device"] else "host")
            entries.append({"source": o["source"], "object": o["object"], "kind": kind,
                            "kernels": len(o["symbols"]), "deps": len(o["deps"]), "top_headers": top,
                            "unity_sources": o.get("unity_sources", [])})
        targets.append({"target": target, "objects": len(members),
                        "kernels": len({s for o in members for s in o["symbols"]}), "sources": entries})
    stats = doc["stats"]
    return {
        "commit": doc["commit"], "backend": doc.get("backend", "cuda"), "cuda": doc["cuda"],
        "generated_at": doc["generated_at"], "tool": doc.get("tool", ""), "build_dirs": doc["build_dirs"],
        "generator": doc.get("generator", ""), "cmake_version": doc.get("cmake_version", ""),
        "objects": len(objects), "device_objects": sum(1 for o in objects if o["device"]),
        "kernels": len({s for o in objects for s in o["symbols"]}),
        "errors": stats.get("errors", len(doc["errors"])) if isinstance(stats, dict) else len(doc["errors"]),
        "evidence": "reason" not in doc and bool(objects),
        "reason": doc.get("reason"),
        "error_examples": [{"object": e.get("object"), "error": e.get("error")} for e in doc["errors"][:EXAMPLES]],
        "error_examples_left_out": max(0, len(doc["errors"]) - EXAMPLES),
        "not_built": dict(Counter(e.get("target", "?") for e in doc["errors"] if str(e.get("error", "")).startswith(
            "not built"))),
        "third_party": doc.get("third_party", []),
        "dirty": doc.get("dirty", []),
        "unmapped_targets": [{"target": u.get("target"), "sources": len(u.get("sources", []))}
                             for u in doc.get("unmapped_targets", [])],
        "notes": doc.get("notes", []),
        "targets": targets,
    }


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps.kernelmap import read_document

    doc, where = read_document(args.map)
    found = summary(doc, args.headers)
    if args.json:
        write_json(JSON_SCHEMA, {"map": where, **found})
        return _evidence(found, where)
    print(f"{where}: version {doc['version']}, commit {found['commit'] or '(none)'}, "
          f"{found['backend']} {found['cuda']}".rstrip())
    print(f"  generated {found['generated_at']} by {found['tool'] or '?'} from {', '.join(found['build_dirs'])}"
          f" ({found['generator'] or '?'}, CMake {found['cmake_version'] or '?'})")
    print(f"  {plural(found['objects'], 'object')}, {plural(found['device_objects'], 'device object')}, "
          f"{plural(found['kernels'], 'kernel')}, {plural(found['errors'], 'error')}")
    if found["dirty"]:
        names = ", ".join(found["dirty"][:EXAMPLES]) + (" ..." if len(found["dirty"]) > EXAMPLES else "")
        differ = "differs" if len(found["dirty"]) == 1 else "differ"
        print(f"  DIRTY: built from a tree where {plural(len(found['dirty']), 'mapped file')} {differ} from commit "
              f"{found['commit'] or '(none)'}: {names}; select clears no test with it")
    if found["third_party"]:
        print(f"  third-party (spelled $DEP/<name>/...): {', '.join(found['third_party'])}")
    for u in found["unmapped_targets"]:
        print(f"  NOT MAPPED: {u['target'] or '(a custom command)'} compiles {plural(u['sources'], 'source')} "
              "outside CMake's compile model: its kernels are in no map")
    if not found["evidence"]:
        print(f"  NO EVIDENCE: {found['reason'] or 'the map lists no objects'}")
        for target, n in sorted(found["not_built"].items(), key=lambda i: (-i[1], i[0])):
            print(f"    {target}: {plural(n, 'object')} not built")
        for e in found["error_examples"]:
            print(f"    {e['object']}: {e['error']}")
        if found["error_examples_left_out"]:
            print(f"    ... and {plural(found['error_examples_left_out'], 'more error')} (the map's `errors` lists "
                  "them all)")
        return _evidence(found, where)
    for t in found["targets"]:
        print(f"\n{t['target']}: {plural(t['objects'], 'object')}, {plural(t['kernels'], 'kernel')}")
        for e in t["sources"]:
            kind = {"device-link": " (device link)", "host": " (host)"}.get(e["kind"], "")
            if e["unity_sources"]:
                kind += f" (unity of {', '.join(e['unity_sources'])})"
            top = f"; top headers: {', '.join(e['top_headers'])}" if e["top_headers"] else ""
            print(f"  {e['source']}{kind}: {plural(e['kernels'], 'kernel')}, {plural(e['deps'], 'file')} read{top}")
    return EXIT_OK


def _evidence(found: dict[str, Any], where: str) -> int:
    """A map without evidence is an input that answers nothing: exit 1, as query and size do."""
    if found["evidence"]:
        return EXIT_OK
    error(f"no evidence in {where}: {found['reason'] or 'the map lists no objects'}")
    return EXIT_INPUT
