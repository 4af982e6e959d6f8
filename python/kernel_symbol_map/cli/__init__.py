"""``kernel-symbol-map``: the command line.

Each subcommand lives in its own module with ``populate_parser`` and ``run``;
:func:`main` is separate from the parser so tests call ``main([...])``.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence

from .._version import __version__
from ..cmakedir import cmake_dir, cmake_include
from . import _output, build, demo, diffmaps, evaluate, merge, query, record, select, show, size, symbols, validate

COMMANDS = (symbols, build, show, query, select, record, evaluate, merge, diffmaps, validate, size, demo)

EPILOG = """\
examples:
  kernel-symbol-map symbols build/CMakeFiles/_C.dir/csrc/ops.cu.o
  kernel-symbol-map symbols --json --per-arch libkernels.so
  kernel-symbol-map symbols --cross-check build/**/*.o
  kernel-symbol-map build --build-dir build --out dist/kernel_symbol_map.json.gz
  kernel-symbol-map show dist/kernel_symbol_map.json.gz
  kernel-symbol-map query dist/kernel_symbol_map.json.gz csrc/attention/attn.cu
  kernel-symbol-map select --map dist/kernel_symbol_map.json.gz --recordings kernels/*.txt --diff origin/main
  kernel-symbol-map demo
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernel-symbol-map",
        description="Which source file produced each GPU kernel.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--cmake-dir",
        action="store_true",
        help="print the folder of the CMake package (for -DKernelSymbolMap_DIR=...) and exit",
    )
    parser.add_argument(
        "--cmake-include",
        action="store_true",
        help="print the file that maps an unmodified project (for -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=...) and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.populate_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(sys.stdout, "reconfigure"):  # each line as it happens, also in a CI log's pipe
        sys.stdout.reconfigure(line_buffering=True)
    parser = build_parser()
    args_list = list(sys.argv[1:] if argv is None else argv)
    with _output.reporting_errors() as status:
        _check_options(parser, args_list)  # a mistyped flag is named before argparse asks for required ones
    if status.code:
        return status.code
    args = parser.parse_args(args_list)
    if args.cmake_dir or args.cmake_include:
        with _output.reporting_errors() as status:
            print(cmake_include() if args.cmake_include else cmake_dir())
        return status.code
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    with _output.reporting_errors() as status:
        status.code = args.run(args)
    return status.code


def _check_options(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """An unknown ``--option`` of the chosen subcommand is a usage error that suggests the closest one."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = next((a for a in argv if not a.startswith("-")), None)
    chosen = sub.choices.get(command) if command else None
    known = set(parser._option_string_actions) | (set(chosen._option_string_actions) if chosen else set())
    for arg in argv[: argv.index("--")] if "--" in argv else argv:
        if arg.startswith("--") and arg.split("=", 1)[0] not in known:
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, sorted(k for k in known if k.startswith("--")), n=1)
            where = f"{command} " if chosen else ""
            raise _output.UsageError(f"{where}has no option {name}",
                                     f"did you mean {close[0]}?" if close else f"kernel-symbol-map {where}--help")
