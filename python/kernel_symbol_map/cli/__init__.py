"""``kernel-symbol-map``: the command line.

Each subcommand lives in its own module with ``populate_parser`` and ``run``;
:func:`main` is separate from the parser so tests call ``main([...])``. Only
the module of the command that runs is imported (:mod:`._commands`): the
others appear in ``--help`` by their summaries alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .._version import __version__
from . import _output
from ._commands import COMMANDS

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


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the full parser of command ``chosen`` (of every command: ``"*"``); the others are
    listed by name and summary only."""
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
        help="print the file that maps an unmodified project (for -DCMAKE_PROJECT_TOP_LEVEL_INCLUDES=...) and exit; "
        "scikit-build-core 1.1+ needs no flag: the package's scikit-build-core.config.default entry point names it "
        "in every build whose environment holds kernel-symbol-map (KERNEL_SYMBOL_MAP_RETROFIT=0 turns that off)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if chosen in (name, "*"):
            importlib.import_module(f".{module}", __name__).populate_parser(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def _command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top level's take no value)."""
    return next((a for a in (argv[: argv.index("--")] if "--" in argv else argv) if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    if hasattr(sys.stdout, "reconfigure"):  # each line as it happens, also in a CI log's pipe
        sys.stdout.reconfigure(line_buffering=True)
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(args_list))
    with _output.reporting_errors() as status:
        _check_options(parser, args_list)  # a mistyped flag is named before argparse asks for required ones
    if status.code:
        return status.code
    args = parser.parse_args(args_list)
    if args.cmake_dir or args.cmake_include:
        from ..cmakedir import cmake_dir, cmake_include

        with _output.reporting_errors() as status:
            print(cmake_include() if args.cmake_include else cmake_dir())
        return status.code
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _print_notes()
    with _output.reporting_errors() as status:
        status.code = args.run(args)
    return status.code


def _print_notes() -> None:
    """What the layers below log at INFO (an input that named several files, and the one read) is printed
    as a ``NOTE`` line on stderr, once however often ``main`` runs in a process."""
    import logging  # here: --version and --help never log

    class Notes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            _output._say("NOTE", "96", record.getMessage())

    logger = logging.getLogger("kernel_symbol_map")
    if not any(getattr(h, "_ksm_notes", False) for h in logger.handlers):
        handler = Notes(logging.INFO)
        handler._ksm_notes = True  # type: ignore[attr-defined] - marks ours among handlers others may add
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _check_options(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """A mistyped command, ``--option`` of the chosen command, or value of an option with choices is a usage
    error that suggests the closest one (argparse would list them all, or none)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command = _command(argv)
    chosen = sub.choices.get(command) if command else None
    if command is not None and chosen is None:
        raise _output.UsageError(f"no command {command!r}",
                                 _closest(command, list(sub.choices), "kernel-symbol-map --help"))
    known = dict(parser._option_string_actions) | (dict(chosen._option_string_actions) if chosen else {})
    where = f"{command} " if chosen else ""
    words = argv[: argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(words):
        if not arg.startswith("--"):
            continue
        name, given, value = arg.partition("=")
        action = known.get(name)
        if action is None:
            options = sorted(k for k in known if k.startswith("--"))
            raise _output.UsageError(f"{where}has no option {name}",
                                     _closest(name, options, f"kernel-symbol-map {where}--help"))
        if action.choices is None or action.nargs is not None or action.type is not None:
            continue  # a value argparse converts first, or that may be left out, is argparse's to check
        value = value if given else (words[i + 1] if i + 1 < len(words) else None)
        if value is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise _output.UsageError(f"{where}{name} has no choice {value!r}",
                                     _closest(value, choices, f"choose from {', '.join(choices)}"))


def _closest(word: str, candidates: list[str], otherwise: str) -> str:
    import difflib  # only for a mistake: the start-up path stays light

    close = difflib.get_close_matches(word, candidates, n=1)
    return f"did you mean {close[0]}?" if close else otherwise
