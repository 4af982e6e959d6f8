"""Messages for people: ``ERROR``/``WARNING``/``TIP`` prefixes, colour when wanted."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._words import plural as plural  # re-exported: the commands import it from here
from ..errors import KernelSymbolMapError

# The exit-code contract, one for every command (README, "Exit codes": tests/test_exit_codes.py keeps the two alike).
EXIT_OK = 0  # done: every input read, the answer complete
EXIT_INPUT = 1  # an input (file, map, folder, tool) is missing, unreadable or without evidence; or a check failed
EXIT_USAGE = 2  # the command line is wrong as written; nothing was read
EXIT_CANNOT_TELL = 3  # evaluate: the results and the selection do not line up
EXIT_NOT_EXECUTABLE = 126  # record: COMMAND is there but cannot be run (as env, nice and timeout exit)
EXIT_NOT_FOUND = 127  # record: COMMAND is not there
EXIT_SIGNAL = 128  # record: COMMAND killed by signal N exits 128 + N, as a shell reports it
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT

# (code, meaning): the README's table, row for row.
EXIT_CODES = (
    (str(EXIT_OK), "done: every input was read and the answer is complete"),
    (str(EXIT_INPUT), "an input (a file, map, folder or tool such as `--cuobjdump`) is not there, cannot be read "
     "or holds no evidence; or a check failed: `symbols --cross-check` differs, `size --max-mb` is exceeded, "
     "`validate` finds a problem, `query` names something the map does not hold, `evaluate` finds a miss, "
     "`select --strict` fell back, `diff` of two projects' maps. `build` and `merge` write a map that says "
     "why and exit 0 instead, and `select` runs every test it "
     "cannot clear and exits 0, unless `--strict`"),
    (str(EXIT_USAGE), "usage: an unknown command, option or choice, a missing or malformed argument, options "
     "that do not go together; nothing was read"),
    (str(EXIT_CANNOT_TELL), "`evaluate` cannot tell whether there is a miss"),
    ("N", "`record -- COMMAND`: COMMAND's own status"),
    (str(EXIT_NOT_EXECUTABLE), "`record`: COMMAND is there but cannot be run"),
    (str(EXIT_NOT_FOUND), "`record`: COMMAND is not found"),
    (f"{EXIT_SIGNAL}+N", "`record`: COMMAND was killed by signal N"),
    (str(EXIT_INTERRUPTED), "interrupted (Ctrl-C)"),
)


def _use_colour() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stderr.isatty()


def _say(prefix: str, colour: str, message: str) -> None:
    label = f"\33[{colour}m{prefix}\33[0m" if _use_colour() else prefix
    print(f"{label} {message}", file=sys.stderr)


def write_json(schema: str, payload: dict[str, Any]) -> None:
    """Machine output: one JSON document on stdout, versioned by ``schema`` (``kernel-symbol-map/<what>/<n>``),
    written as it is encoded (a 10x ``select``'s 50,000 decisions are 11 MB of text, never held whole)."""
    sys.stdout.writelines(json_pieces({"schema": schema, **payload}))


def json_text(doc: dict[str, Any]) -> str:
    """``doc`` as JSON a person can read and ``grep``: a line per top-level key, and a list's items a line
    each, each compact (:func:`json_pieces`, joined)."""
    return "".join(json_pieces(doc))


ITEMS_A_PIECE = 1000  # a top-level list's items encoded, joined and handed on together


def json_pieces(doc: dict[str, Any]) -> Iterator[str]:
    """:func:`json_text`'s text in pieces, each key's or a few hundred KB. json's ``indent`` would do it in
    Python, a line per value (a 10x ``select``'s 50,000 decisions took 1.3 s of its run); this is its C
    encoder, once per key or item."""
    import json  # here, not at the top: every command's start-up imports this module
    from json.encoder import encode_basestring_ascii  # what encode does with a str, without its set-up

    encode = json.JSONEncoder().encode  # no indent: the C encoder; ensure_ascii, as json.dumps
    if not doc:
        yield "{}\n"
        return
    for n, (key, value) in enumerate(doc.items()):
        yield f"{',' if n else '{'}\n {encode(key)}: "
        if isinstance(value, list) and value:
            yield "[\n  "
            for at in range(0, len(value), ITEMS_A_PIECE):
                items = value[at : at + ITEMS_A_PIECE]
                strings = set(map(type, items)) == {str}  # a list of test names: no encoder set up for each
                yield ("" if at == 0 else ",\n  ") + ",\n  ".join(
                    map(encode_basestring_ascii if strings else encode, items))
            yield "\n ]"
        else:
            yield encode(value)
    yield "\n}\n"


def error(message: str) -> None:
    _say("ERROR", "91", message)


def warning(message: str) -> None:
    _say("WARNING", "93", message)


def tip(message: str) -> None:
    _say("TIP", "96", message)


class UsageError(KernelSymbolMapError):
    """A command was asked for something it cannot do as given (exit 2)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class Status:
    """The exit code a ``reporting_errors`` block ends with (a plain class: dataclasses cost start-up)."""

    def __init__(self) -> None:
        self.code = EXIT_OK


@contextmanager
def reporting_errors() -> Iterator[Status]:
    """Turn library errors into one ``ERROR`` line and an exit code, never a traceback."""
    status = Status()
    try:
        yield status
    except UsageError as e:
        error(str(e))
        if e.hint:
            tip(e.hint)
        status.code = EXIT_USAGE
    except KernelSymbolMapError as e:
        error(str(e))
        if getattr(e, "hint", None):  # an input error may say how to fix it too (a missing tool)
            tip(e.hint)  # type: ignore[attr-defined]
        status.code = EXIT_INPUT
    except BrokenPipeError:  # `| head` closed stdout: stop quietly, as coreutils do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status.code = EXIT_INPUT
    except KeyboardInterrupt:
        error("interrupted")
        status.code = EXIT_INTERRUPTED
