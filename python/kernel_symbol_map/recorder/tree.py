"""The processes below the recording's root, whatever their environment: a native daemon cannot hide.

A spawn no recorder saw ends when nothing it may have left running still
runs. Its id in the environment (:func:`.spawns.alive`) is not enough: a
program may clear its environment (``env -i``, a daemon's own reset). So
the process that runs the tests (the pytest plugin's, each ``xdist``
worker) makes itself a child subreaper (Linux ``prctl``): every orphan
below it (``cmd &`` in a shell, a double fork, ``setsid``) is reparented to
it instead of to init, and stays in its tree in ``/proc`` while it lives.
A recorded process finds its root by walking up its ancestors.

Elsewhere (no ``prctl``, no ``/proc``) there is no root, and such a spawn is
never taken to have ended. Processes that another service starts on the
test's behalf (``systemd-run``, a container engine) are outside the tree.

An adopted orphan that dies is a zombie of the root until it is waited
for. The root waits only for one it saw below another parent first: never
one it may have started itself (``subprocess`` would read a stolen status as
exit 0). Other zombies hold only a pid until the session ends; they are
not alive, so they never keep a spawn open.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PF_KTHREAD = 0x00200000  # include/linux/sched.h: in the flags (stat's ninth field) of a kernel thread


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: str  # clock ticks since boot: with the pid, this process and no later one
    live: bool  # not a zombie (a zombie leader whose other threads still run is live)
    kernel: bool = False  # a kernel thread: it has no memory, so no environment or command line, ever


def _prctl(option: int, value: int | ctypes.c_int | ctypes._Pointer) -> int:  # type: ignore[type-arg]
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, value, 0, 0, 0))


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything below it; False where that cannot be done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return _prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0
    except (OSError, AttributeError, TypeError):
        return False


def was_subreaper() -> bool:
    """Whether this process is a child subreaper already (someone else's setting, kept when recording ends)."""
    if not sys.platform.startswith("linux"):
        return False
    flag = ctypes.c_int(0)
    try:
        return _prctl(_PR_GET_CHILD_SUBREAPER, ctypes.pointer(flag)) == 0 and flag.value != 0
    except (OSError, AttributeError, TypeError):
        return False


def release() -> None:
    """Stop being a child subreaper (orphans go on to the next one up, or init)."""
    try:
        _prctl(_PR_SET_CHILD_SUBREAPER, 0)
    except (OSError, AttributeError, TypeError):
        pass


def stat(pid: int) -> Proc | None:
    """``pid`` from /proc/PID/stat (readable for every user's process); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        state, threads = fields[0], int(fields[17])
        return Proc(pid, int(fields[1]), fields[19].decode(), not (state in (b"Z", b"X") and threads <= 1),
                    bool(int(fields[6]) & _PF_KTHREAD))
    except (OSError, ValueError, IndexError):
        return None


def processes() -> dict[int, Proc] | None:
    """Every process now, by pid; None without /proc.

    A process whose parent vanished while the table was read has been
    reparented since: it is read again, so that it is found below its new
    parent (a subreaper) and not lost between the two.
    """
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    table = {p.pid: p for p in map(stat, pids) if p is not None}
    for proc in [p for p in table.values() if p.ppid not in table]:
        again = stat(proc.pid)
        if again is not None:
            table[proc.pid] = again
    return table


def root(roots: set[tuple[int, str]], table: dict[int, Proc]) -> int | None:
    """The nearest of ``roots`` (pid, start) that is this process or one of its ancestors, alive; else None."""
    pid, seen = os.getpid(), set()
    while pid in table and pid not in seen:
        seen.add(pid)
        proc = table[pid]
        if proc.live and (proc.pid, proc.start) in roots:
            return pid
        pid = proc.ppid
    return None


def below(top: int, table: dict[int, Proc]) -> list[Proc]:
    """Every process below ``top`` in ``table``, zombies included; and, to be safe, any whose parent is unknown."""
    children: dict[int, list[Proc]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc)
    found: dict[int, Proc] = {}
    todo = [top]
    while todo:
        for proc in children.get(todo.pop(), ()):
            if proc.pid != top and proc.pid not in found:
                found[proc.pid] = proc
                todo.append(proc.pid)
    # A parent still missing after the second read: where the process hangs is not known, so it counts,
    # unless it is older than ``top`` (then it cannot be below it).
    since = int(table[top].start) if top in table and table[top].start.isdigit() else 0
    for proc in table.values():
        if proc.ppid not in table and proc.ppid > 1 and proc.pid not in found and int(proc.start or 0) >= since:
            found[proc.pid] = proc
    return list(found.values())


def quiet(recorded: set[tuple[int, str]], roots: set[tuple[int, str]], parents: dict[tuple[int, str], int],
          ignored: Callable[[int], bool]) -> bool:
    """No live process, but ``recorded`` and ``ignored`` ones, below the nearest of ``roots`` (pid, start).

    False without /proc, or with no root above this process. The root
    itself also waits for the zombies it adopted: each one that
    ``parents``, what it saw at its last look (updated here), put below
    another parent.
    """
    table = processes()
    top = None if table is None else root(roots, table)
    if table is None or top is None:
        return False
    procs = below(top, table)
    if top == os.getpid():
        for proc in procs:
            before = parents.get((proc.pid, proc.start))
            if not proc.live and proc.ppid == top and before is not None and before != top:
                reap(proc)
        parents.clear()
        parents.update({(p.pid, p.start): p.ppid for p in procs})
    return not any(p.live and (p.pid, p.start) not in recorded and not ignored(p.pid) for p in procs)


def reap(proc: Proc) -> None:
    """Wait for ``proc``, a zombie this process adopted, through a pidfd: exactly that process, or none."""
    if not (hasattr(os, "pidfd_open") and hasattr(os, "P_PIDFD")):
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:
        return
    try:
        now = stat(proc.pid)
        if now is not None and not now.live and now.start == proc.start and now.ppid == os.getpid():
            os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG)
    except OSError:
        pass
    finally:
        os.close(fd)
