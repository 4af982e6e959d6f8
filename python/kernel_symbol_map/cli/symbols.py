"""``symbols``: list the kernel entry symbols of binaries."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, error

if TYPE_CHECKING:
    from ..readers.cuobjdump import Cuobjdump
    from ..readers.devicecode import Result

JSON_SCHEMA = "kernel-symbol-map/symbols/1"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "symbols",
        help=summary_of("symbols"),
        description="Print each file's unique kernel entry symbols, sorted. "
        "Exit 0 when every input was read, 1 when some input (or cuobjdump) is missing or unreadable, or "
        "--cross-check finds a difference, 2 on usage errors.",
        allow_abbrev=False,
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one machine-readable record per file")
    p.add_argument("--per-arch", action="store_true", help="group symbols by GPU architecture")
    p.add_argument(
        "--backend",
        choices=("native", "cuobjdump"),
        default="native",
        help="reader to use (default: native, which needs no CUDA toolkit)",
    )
    p.add_argument(
        "--cross-check",
        action="store_true",
        help="run both readers and report every difference (exit 1 if any)",
    )
    p.add_argument("--cuobjdump", metavar="EXE", help="cuobjdump to use (default: search)")
    p.set_defaults(run=run)


def cuobjdump_backend(explicit: str | None) -> Cuobjdump:
    """The cuobjdump backend, or a ToolError (exit 1: a tool is an input) naming what is missing."""
    from ..buildtree.toolchain import find_cuobjdump
    from ..errors import ToolError
    from ..readers.cuobjdump import Cuobjdump, unusable

    exe = find_cuobjdump(explicit)
    why = "not found" if exe is None else unusable(exe)
    if why is not None:
        hint = ("install it with `pip install nvidia-cuda-cuobjdump`, or pass --cuobjdump" if explicit is None
                else "--cuobjdump names the cuobjdump to run: a path, or a name on PATH")
        problem = ToolError([exe or "cuobjdump"], why)
        problem.hint = hint  # type: ignore[attr-defined]  # reporting_errors prints it as a TIP
        raise problem
    return Cuobjdump(exe)


def run(args: argparse.Namespace) -> int:
    from ..readers.crosscheck import compare
    from ..readers.devicecode import read_kernels

    need_cuobjdump = args.backend == "cuobjdump" or args.cross_check
    tool = cuobjdump_backend(args.cuobjdump) if need_cuobjdump else None
    reader = tool.read_kernels if tool and args.backend == "cuobjdump" else read_kernels
    results = [reader(p) for p in args.paths]
    differences = []
    if args.cross_check and tool is not None:
        other = tool.read_kernels if args.backend == "native" else read_kernels
        second = "cuobjdump" if args.backend == "native" else "native"
        for result in results:
            for d in compare(result, other(result.path)):
                differences.append(d.describe(args.backend, second))

    if args.json:
        document: dict[str, Any] = {
            "schema": JSON_SCHEMA,
            "tool": f"kernel-symbol-map {__version__}",
            "backend": args.backend,
            "files": [r.to_json(args.per_arch) for r in results],
        }
        if args.cross_check:
            document["differences"] = differences
        json.dump(document, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for r in results:
            print_result(r, args.per_arch)

    failures = [f for r in results for f in r.failures]
    for f in failures:
        error(f"{f.path}: {f.error}")
    for d in differences:
        error(f"differs: {d}")
    return EXIT_INPUT if failures or differences else EXIT_OK


def print_result(result: Result, per_arch: bool, indent: str = "") -> None:
    if result.error is not None:
        return
    symbols = result.symbols
    archs = " ".join(result.archs)
    print(f"{indent}{result.path}: {len(symbols)} kernels" + (f" [{archs}]" if archs else ""))
    if result.members:
        for m in result.members:
            print_result(m, per_arch, indent + "  ")
        return
    if per_arch:
        for arch in sorted(result.kernels):
            print(f"{indent}  {arch}:")
            for name in sorted(result.kernels[arch]):
                print(f"{indent}    {name}")
    else:
        for name in symbols:
            print(f"{indent}  {name}")
