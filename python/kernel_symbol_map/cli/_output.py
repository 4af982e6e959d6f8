"""Messages for people: ``ERROR``/``WARNING``/``TIP`` prefixes, colour when wanted."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._words import plural as plural  # re-exported: the commands import it from here
from ..errors import KernelSymbolMapError

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2


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
    """Machine output: one JSON document on stdout, versioned by ``schema`` (``kernel-symbol-map/<what>/<n>``)."""
    sys.stdout.write(json_text({"schema": schema, **payload}))


def json_text(doc: dict[str, Any]) -> str:
    """``doc`` as JSON a person can read and ``grep``: a line per top-level key, and a list's items a line
    each, each compact. json's ``indent`` would do it in Python, a line per value (a 10x ``select``'s
    50,000 decisions took 1.3 s of its run); this is its C encoder, once per key or item, and one write."""
    import json  # here, not at the top: every command's start-up imports this module

    encode = json.JSONEncoder().encode  # no indent: the C encoder; ensure_ascii, as json.dumps
    lines = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            items = ",\n  ".join(map(encode, value))
            lines.append(f" {encode(key)}: [\n  {items}\n ]")
        else:
            lines.append(f" {encode(key)}: {encode(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n" if lines else "{}\n"


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
        status.code = EXIT_INPUT
    except BrokenPipeError:  # `| head` closed stdout: stop quietly, as coreutils do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status.code = EXIT_INPUT
    except KeyboardInterrupt:
        error("interrupted")
        status.code = 130
