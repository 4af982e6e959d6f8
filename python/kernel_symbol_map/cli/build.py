"""``build``: write the map for one or more CMake build trees.

Also a drop-in for the seed script: ``--build-root/--source-root/--out/--jobs/
--cuobjdump/--commit`` are accepted and the same format is written.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import mapfile
from ..buildtree import INSIDE_BUILD_ENV
from ..cuobjdump import Cuobjdump
from ..extract import Options, build_map
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, tip
from .symbols import find_cuobjdump

DEFAULT_OUT = "kernel_symbol_map.json.gz"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "build",
        help="write the kernel symbol map of CMake build trees",
        description="Read CMake build trees (targets, objects, header deps) and every object's "
        "kernel symbols; write the map atomically and print a one-line summary. "
        "A failure still writes a map with a `reason` and exits 0, unless --strict.",
        allow_abbrev=False,
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--build-dir", type=Path, action="append", dest="build_dirs", metavar="DIR",
                       help="a CMake build tree (repeatable)")
    where.add_argument("--build-root", type=Path, metavar="DIR",
                       help="seed-compatible: every CMake build tree under DIR")
    p.add_argument("--source-root", type=Path, help="paths inside it are written relative (default: the project's)")
    p.add_argument("--out", type=Path, help=f"map file (default: <first build dir>/{DEFAULT_OUT})")
    p.add_argument("--targets", nargs="+", metavar="T", default=[], help="only these CMake targets")
    p.add_argument("--backend", choices=("native", "cuobjdump"), default="native", help="kernel reader")
    p.add_argument("--cuobjdump", metavar="EXE", help="cuobjdump for --backend cuobjdump")
    p.add_argument("--commit", help="commit the build is of (default: CI variables, then git)")
    p.add_argument("--jobs", type=int, default=None, help="accepted for the seed's command line")
    p.add_argument("--strict", action="store_true", help="exit 1 when the map is not complete")
    p.add_argument("--inside-build", action="store_true", default=bool(os.environ.get(INSIDE_BUILD_ENV)),
                   help=argparse.SUPPRESS)  # set by the CMake package: never re-run CMake
    p.set_defaults(run=run)


def build_dirs_under(root: Path) -> list[Path]:
    """CMake build trees under ``root`` (the seed's --build-root), without FetchContent sub-builds."""
    if not root.is_dir():
        raise UsageError(f"--build-root {root}: not a directory")
    found = {c.parent for c in root.rglob("CMakeCache.txt") if not c.parent.name.endswith("-subbuild")}
    return sorted(found)


def run(args: argparse.Namespace) -> int:
    build_dirs = args.build_dirs or build_dirs_under(args.build_root)
    out = args.out or (build_dirs[0] / DEFAULT_OUT if build_dirs else Path(DEFAULT_OUT))
    reader = None
    if args.backend == "cuobjdump":
        exe = find_cuobjdump(args.cuobjdump)
        if exe is None:
            raise UsageError("cuobjdump not found", "install it with `pip install nvidia-cuda-cuobjdump`")
        reader = Cuobjdump(exe).read_kernels
    options = Options(
        build_dirs=tuple(build_dirs),
        out=out,
        source_root=args.source_root,
        targets=tuple(args.targets),
        backend=args.backend,
        commit=args.commit,
        inside_build=args.inside_build,
        **({"read": reader} if reader else {}),
    )
    try:
        document = build_map(options, log=lambda m: print(f"kernel_symbol_map: {m}", flush=True))
    except Exception as e:  # noqa: BLE001 - the build-hook entry point: a bug becomes "no evidence"
        # The one broad except (see house style): a bug must not fail the user's
        # build, and must never leave a partial map. It becomes a map with a reason.
        error(f"internal error, writing a map with no evidence: {e!r}")
        document = build_map(Options(build_dirs=(), out=out, commit=args.commit))
        document["incomplete"] = True
        document["reason"] = f"internal error in kernel-symbol-map: {e!r}"
    size = mapfile.write(document, out)
    stats = document["stats"]
    print(
        f"kernel_symbol_map: wrote {out} ({size // 1024} KiB): {stats['objects']} objects, "
        f"{stats['device_objects']} device objects, {stats['symbols']} symbols, "
        f"{stats['errors']} errors, {stats['seconds']} s",
        flush=True,
    )
    if "reason" in document:
        error(f"no evidence in {out}: {document['reason']}")
        if document["errors"]:
            tip("each unreadable object is listed in the map's `errors`")
        return EXIT_INPUT if args.strict else EXIT_OK
    return EXIT_OK
