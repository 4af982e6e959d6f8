"""Which tests ran while a child process lived: the tests log the pytest plugin appends to.

Each process that runs tests (the plugin's, or each ``xdist`` worker's)
appends ``+<node id>`` when a test's protocol begins and ``-<node id>`` when
it ends, to one log in the parts folder (``O_APPEND``: one ``write`` a line,
so the workers' lines never interleave). A line's index is a shared clock
for every process of the run, with no timestamps: a child (a persistent
worker, a server) notes where the log stood when it started and when it
finished, and its kernels go to every test begun in between, and to every
test still running when it started. That is conservative and needs nothing
of the child but its start and its end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

BEGIN, END = "+", "-"


def append(log: Path, sign: str, nodeid: str) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{sign}{json.dumps(nodeid)}\n".encode())
    finally:
        os.close(fd)


def _lines(log: Path, partial: bool) -> list[str]:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    except FileNotFoundError:
        return []
    return lines if partial and lines[-1] else lines[:-1]  # a last line without "\n" is being written


def position(log: Path) -> int:
    """Where a process starting now begins: the earliest test begun and not ended, else the next line."""
    running: dict[str, int] = {}
    lines = _lines(log, partial=False)
    for index, line in enumerate(lines):
        if line.startswith(BEGIN):
            running.setdefault(line[1:], index)
        else:
            running.pop(line[1:], None)
    return min(running.values(), default=len(lines))


def end(log: Path) -> int:
    """Where a process finishing now ends: every line written so far, a partial one included."""
    return len(_lines(log, partial=True))


def begun(log: Path, first: int, last: int | None = None) -> list[str]:
    """The node ids of the tests begun at lines ``first`` to ``last`` (exclusive; None: to the end).

    Raises OSError and ValueError for a log that cannot be read.
    """
    lines = log.read_text(encoding="utf-8").split("\n")
    return [json.loads(line[1:]) for line in lines[first:last] if line.startswith(BEGIN)]
