"""``query``: where did this kernel come from; which kernels does this file reach."""

from __future__ import annotations

import argparse
import difflib
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ._commands import summary_of
from ._common import MAP_HELP, default_source_root
from ._output import EXIT_INPUT, EXIT_OK, error, tip, write_json

JSON_SCHEMA = "kernel-symbol-map/query/1"
# An item spelled like a file (a map spells paths with /) is only ever a file: as a pattern, `scan.cu`
# would match `scan_cumsum`; a backslash is a regex's.
PATH_LIKE = re.compile(r"/|\.(cu|cuh|c|cc|cpp|cxx|h|hh|hpp|hxx|inl|inc|py)$")


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "query", help=summary_of("query"),
        description="For a source or header: the kernels it reaches and through which objects. For a kernel "
        "(mangled, as CUPTI reports it, or demangled: 'ns::scale_kernel<float>', 'scale_kernel'): the "
        "sources, targets and objects that define it. A kernel item that names none exactly is a pattern: "
        "every kernel whose demangled name contains it, or that it matches as a regex (so a functor finds "
        "the library kernels instantiated with it). An item that matches nothing is an error, with the "
        "closest names. Kernels print as short demangled names (--mangled: in full). Exit 1 when the map "
        "holds no evidence or an item matches nothing.",
        epilog="examples:\n  kernel-symbol-map query dist/my_pkg-1.0.whl csrc/attention/attn.cu\n"
        "  kernel-symbol-map query build/kernel_symbol_map.json.gz scale_kernel --demangle\n"
        "  kernel-symbol-map query build/kernel_symbol_map.json.gz process_cube_op 'DeviceReduce.*Kernel'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("map", metavar="MAP", help=MAP_HELP)
    p.add_argument("items", nargs="+", metavar="FILE|KERNEL")
    p.add_argument("--demangle", action="store_true", help="also print each kernel's whole demangled name")
    p.add_argument("--mangled", action="store_true",
                   help="print kernels by their mangled names, in full (joins always use them; --json has them)")
    p.add_argument("--source-root", type=Path,
                   help="the project relative paths are in (default: the git top level of ., as select)")
    p.add_argument("--build-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="the build folder(s) the map's $BUILD paths are in: a file may then be a build-tree path")
    p.add_argument("--json", action="store_true", help=f"machine-readable ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def _kernel_answer(kmap: Any, symbol: str, asked: str) -> dict[str, Any]:
    from ..consumer.maps.names import full

    answer = {"symbol": symbol, "demangled": full(symbol),
              "sources": [{"source": o.source, "target": o.target, "object": o.object}
                          for o in kmap.sources_for(symbol)]}
    if asked != symbol:
        answer["asked"] = asked
    return answer


def _closest(kmap: Any, item: str) -> list[str]:
    """What a person may have meant, at most five: the kernel families and project paths that hold ``item``
    (shortest first), then those spelled like it, a path by its file name too (``activation.cu`` from
    another folder finds ``csrc/activation_kernels.cu``)."""
    from ..consumer.maps.names import family, full

    names = {family(full(s)) for s in kmap.symbols}
    names |= {n.rsplit("::", 1)[-1] for n in names}
    paths = {p for o in kmap.objects for p in (o["source"], *o["deps"]) if not p.startswith("/")}
    want = item.rstrip("/").rsplit("/", 1)[-1].lower()
    holding = sorted((c for c in names | paths if want and want in c.lower()), key=lambda c: (len(c), c))
    by_file: dict[str, list[str]] = {}
    for path in sorted(paths):
        by_file.setdefault(path.rsplit("/", 1)[-1].lower(), []).append(path)
    spelled = difflib.get_close_matches(item, sorted(names | paths), n=5, cutoff=0.6)
    same_file = [p for f in difflib.get_close_matches(want, sorted(by_file), n=5, cutoff=0.6) for p in by_file[f]]
    return list(dict.fromkeys([*holding[:5], *spelled, *same_file]))[:5]


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps.canonical import Canonical
    from ..consumer.maps.inputs import project_path
    from ..consumer.maps.kernelmap import load

    kmap = load(args.map)
    if not kmap.has_evidence:
        error(f"no evidence in {kmap.where}: {kmap.reason}")
    root = args.source_root or default_source_root()
    canonical = Canonical(root, args.build_dir)
    answers: list[dict[str, Any]] = []
    unmatched = []
    for item in args.items:
        if kmap.sources_for(item):
            answers.append(_kernel_answer(kmap, item, item))
            continue
        path, _ = project_path(item, root)  # from the current folder when the file is there
        (reach,) = kmap.reach(path, canonical=canonical)
        named = _kernels_meant(kmap, item) if reach.status == "not-in-map" else []
        if named:
            answers += [_kernel_answer(kmap, symbol, item) for symbol in named]
            continue
        answer = {"path": path, "status": reach.status, "why": reach.explain(), "kernels": sorted(reach.symbols),
                  "via": [{"object": lk.object, "source": lk.source, "target": lk.target, "via": lk.via}
                          for lk in reach.links]}
        if reach.status == "not-in-map":
            answer["closest"] = _closest(kmap, item)
            unmatched.append(answer)
        answers.append(answer)
    if args.json:
        write_json(JSON_SCHEMA, {"map": kmap.where, "evidence": kmap.has_evidence, "answers": answers})
    else:
        _print(answers, args.demangle, args.mangled)
    for a in unmatched if kmap.has_evidence else []:
        error(f"{a['path']}: neither a file of the map nor a kernel it defines")
        if a["closest"]:
            tip(f"did you mean {', '.join(a['closest'])}?")
        else:
            tip("a kernel is named mangled, demangled as 'ns::name<T>' or 'name', or by a part of its demangled "
                "name; a file by its path from the current folder or the source root")
    return EXIT_INPUT if unmatched or not kmap.has_evidence else EXIT_OK


def _kernels_meant(kmap: Any, item: str) -> list[str]:
    """The kernels ``item`` names (see ``kernels_named``), else those it matches as a pattern of their
    demangled names; none for an item spelled like a file, or a blank one (it would match every kernel)."""
    from ..consumer.maps.kernelmap import kernels_named
    from ..consumer.maps.names import name_filter

    named = kernels_named(kmap, item)
    if named or not item.strip() or PATH_LIKE.search(item):
        return named
    matched = sorted(filter(name_filter(item), kmap.symbols))
    if len(matched) > 1:  # a pattern, not a name: say how wide it reached
        tip(f"{item}: {len(matched)} kernels hold it in their demangled names or match it as a regex; "
            "a longer part of a name narrows it")
    return matched


def _print(answers: list[dict[str, Any]], demangled: bool, mangled: bool) -> None:
    from ..consumer.maps.names import full, readable

    label = (lambda s: s) if mangled else readable
    for a in answers:
        if "symbol" in a:
            asked = f" (matched {a['asked']!r})" if "asked" in a else ""
            print(f"{label(a['symbol'])}{asked}" + (f"  [{a['demangled']}]" if demangled else ""))
            for s in a["sources"]:
                print(f"  from {s['source']} (target {s['target']}, object {s['object']})")
        else:
            print(a["why"])
            if demangled or mangled:
                for k in sorted(a["kernels"], key=lambda k: (label(k), k)):
                    print(f"  {label(k)}" + (f"  [{full(k)}]" if demangled else ""))
                continue
            same = Counter(label(k) for k in a["kernels"])  # instantiations that fold alike: one line
            for name in sorted(same):
                print(f"  {name}" + (f"  ({same[name]} kernels)" if same[name] > 1 else ""))
    alike = Counter(readable(a["symbol"]) for a in answers if "symbol" in a)
    if not (mangled or demangled) and any(n > 1 for n in alike.values()):
        tip(f"{sum(n for n in alike.values() if n > 1)} kernels read alike once shortened; --mangled prints "
            "each in full, --demangle adds its whole demangled name")
