"""``diff``: kernels added, removed, moved or changed between two maps, each with its sources.

"changed" is cccl's SASS-diff question answered from two maps: the
kernels whose device code differs in some architecture, by the maps' digests.
Maps without digests (or of two schemes, or by other compilers) say so and list
no changed kernels. ``host`` lists the objects whose host code differs and,
where both maps split it by function, the host functions that differ, by
their demangled names (``--json`` adds the mangled ones).

Two maps are of one project when they share a target or a source: the map
names no project, and a diff of two projects' maps would list every kernel as
added and removed, an answer that looks like one. That, or a map without
evidence, is an ERROR and exit 1, with nothing on stdout.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import MapError
from ._commands import summary_of
from ._output import EXIT_OK, plural, write_json

if TYPE_CHECKING:
    from ..consumer.maps.kernelmap import KernelMap

# 2: "added" and "removed" name each kernel's sources ({"symbol", "sources"}), not the bare name.
# Added since: "changed" (device code differs, by digests), "changed_unknown" (why it cannot be told), "host"
# (objects whose host code differs: {"object", "target", "source", "how", "functions", "also"}).
JSON_SCHEMA = "kernel-symbol-map/diff/2"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "diff", help=summary_of("diff"),
        description="Compare two maps (for example main's and a pull request's): the kernels only NEW has, "
        "those only OLD has, those whose sources changed, and those whose device code changed (by the maps' "
        "digests), each with the sources that define it. Kernels print as short demangled names (--mangled: in full). "
        "Exit 1 when a map holds no evidence, or the two are "
        "maps of different projects (no target or source in common).",
        allow_abbrev=False,
    )
    p.add_argument("old", metavar="OLD", help="map file, wheel, folder holding one, or installed package")
    p.add_argument("new", metavar="NEW", help="the same, for the newer build")
    p.add_argument("--mangled", action="store_true",
                   help="print kernels by their mangled names, in full (--json always has them)")
    p.add_argument("--json", action="store_true", help=f"machine-readable ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def _sources(kmap: KernelMap) -> tuple[dict[str, set[str]], dict[str, str]]:
    """Each kernel's sources, by the name it has in any folder (nvcc's hash of a file's path in an anonymous
    namespace masked, where the object holds one); and that name -> the name this map spells."""
    from .. import _unitnames as unitnames  # at run time: --help imports this command's module only

    found: dict[str, set[str]] = defaultdict(set)
    spelled: dict[str, str] = {}
    for o in kmap.objects:
        names = list(o["symbols"])
        for name, s in zip(unitnames.canonical(names) or names, names):
            found[name].add(o["source"])
            spelled.setdefault(name, s)
    return found, spelled


def compare(old: KernelMap, new: KernelMap) -> dict[str, Any]:
    from ..consumer.select import emitted
    from ..consumer.maps.names import full

    (a, old_names), (b, new_names) = _sources(old), _sources(new)
    why = emitted.unusable([old], [new])
    found = emitted.compare([old], [new]) if why is None else None
    canonical = {spelled: name for names in (old_names, new_names) for name, spelled in names.items()}
    kernels = found.kernels.items() if found else ()
    changed = {canonical.get(s, s): how for s, how in kernels if how.startswith("changed")}
    changed = {c: how for c, how in changed.items() if c in b}  # each once, as the new map spells it
    return {
        "added": [{"symbol": new_names[s], "sources": sorted(b[s])} for s in sorted(set(b) - set(a))],
        "removed": [{"symbol": old_names[s], "sources": sorted(a[s])} for s in sorted(set(a) - set(b))],
        "moved": [{"symbol": new_names[s], "from": sorted(a[s]), "to": sorted(b[s])}
                  for s in sorted(set(a) & set(b)) if a[s] != b[s]],
        "changed": [{"symbol": new_names[c], "sources": sorted(b[c]), "how": how}
                    for c, how in sorted(changed.items())],
        "changed_unknown": why[1] if why else "",
        "host": [{"object": h.object, "target": h.target, "source": h.source, "how": h.how,
                  "functions": [{"symbol": n, "name": full(n), "how": how} for n, how in h.functions.items()],
                  "also": h.whole} for h in (found.hosts if found else ())],
    }


def comparable(old: KernelMap, new: KernelMap) -> None:
    """Raise when the two maps cannot be diffed: one holds no evidence, or they are of two projects."""
    for kmap in (old, new):
        if not kmap.has_evidence:
            raise MapError(f"no evidence in {kmap.where}: {kmap.reason}; nothing to compare")
    targets = [{o["target"] for o in m.objects} for m in (old, new)]
    sources = [{o["source"] for o in m.objects} for m in (old, new)]
    if not (targets[0] & targets[1]) and not (sources[0] & sources[1]):
        raise MapError(f"{old.where} and {new.where} are maps of different projects: no target or source in "
                       f"common (targets {', '.join(sorted(targets[0])[:3])} against "
                       f"{', '.join(sorted(targets[1])[:3])}); diff compares two builds of one project")


def _names(symbols: list[str], mangled: bool) -> Callable[[str], str]:
    """How a kernel is printed: its short demangled name, made distinct among those printed (names.labels),
    or with ``mangled`` the name itself."""
    if mangled:
        return str
    from ..consumer.maps.names import labels

    return labels(symbols).__getitem__


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps.kernelmap import load

    old, new = load(args.old), load(args.new)
    comparable(old, new)
    result = compare(old, new)
    if args.json:
        write_json(JSON_SCHEMA, result)
        return EXIT_OK
    name = _names([k["symbol"] for key in ("added", "removed", "moved", "changed") for k in result[key]],
                  args.mangled)
    for sign, key in (("+", "added"), ("-", "removed")):
        for k in result[key]:
            print(f"{sign} {name(k['symbol'])} ({', '.join(k['sources'])})")
    for m in result["moved"]:
        print(f"~ {name(m['symbol'])}: {', '.join(m['from'])} -> {', '.join(m['to'])}")
    for c in result["changed"]:
        print(f"* {name(c['symbol'])} ({', '.join(c['sources'])}): device code {c['how']}")
    if result["changed_unknown"]:
        print(f"changed kernels cannot be told: {result['changed_unknown']}")
    for h in result["host"]:
        also = f"; {h['also']}" if h["also"] else ""
        print(f"# {h['object']} ({h['source']}): host code {h['how']}{also}")
        for f in h["functions"]:
            print(f"    {f['how']}: {f['name']}")
    total = sum(len(result[k]) for k in ("added", "removed", "moved", "changed"))
    functions = sum(len(h["functions"]) for h in result["host"])
    print(f"{len(result['added'])} added, {len(result['removed'])} removed, {len(result['moved'])} moved, "
          f"{len(result['changed'])} changed ({plural(total, 'kernel')}); host code of "
          f"{plural(len(result['host']), 'object')} differs ({plural(functions, 'function')})")
    return EXIT_OK
