"""Every process a recorded interpreter starts, so that none launches kernels unseen.

An audit hook (:func:`sys.addaudithook`) sees each process this interpreter
starts through Python: ``subprocess`` (``subprocess.Popen``), ``os.exec*``
(``os.exec``), ``os.spawn*`` (``os.spawn``, or ``os.fork`` then
``os.exec``), ``os.posix_spawn`` and ``os.system``. For each one the
recorder writes an expectation (see :meth:`.process.ProcessRecorder.expect`)
and the child's environment gets the recorder's variables, even an
environment the test built from nothing (``env={"PATH": ...}``). A child
that is Python with the ``.pth`` hook claims its expectation when it starts;
the merge makes an expectation nobody claimed (a native program, a shell, an
interpreter without the hook, an environment that could not be changed) an
incomplete record that names the executable: for every test from its start
on, or, when the recorder saw it end, for the tests that ran while it lived.
It ends when no live process carries its id in its environment
(:func:`alive`) and no process it may have left running, whatever its
environment, lives below the recording's root (:mod:`.tree`).

Only ``subprocess`` and ``os.system`` read the environment after the audit
event, so only there, or where the child takes this process's own
environment, can the variables be carried; ``os.posix_spawn`` and
``os.execve`` with an environment of their own get none, their children
cannot claim, and their end is never assumed.

``os.fork`` needs no expectation: the child is this interpreter, and records
itself (:mod:`.process`). ``multiprocessing``'s spawn and forkserver start
``sys.executable`` below Python's audit events; those children record
themselves through the inherited environment, and never claim an
expectation (see :func:`identity`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any, Protocol

from .. import _atomic
from . import native, tree
from .environment import FOLDER_VARIABLE, SCOPE_VARIABLE, SPAWN_VARIABLE

EVENTS = frozenset({"subprocess.Popen", "os.exec", "os.spawn", "os.posix_spawn", "os.system"})
SHELL = "/bin/sh"  # what os.system runs
_ARG_CHARACTERS = 200
# A process between exec and its new stack is read again this often, for at most this long (then it may carry
# anything): the window is microseconds of the kernel's work, longer only while the machine gives it no CPU.
_SETTLE_PAUSE = 0.001
_SETTLE_SECONDS = 5.0
_watching = False


class Watcher(Protocol):
    finished: bool
    pid: int
    problems: list[str]
    unfollowed: bool  # a process it started may have gone unseen: its problems reach past its own life

    def expect(self, exe: str, argv: list[str], replaces: bool) -> dict[str, str]: ...

    def trace(self, spawn: str) -> None: ...


def watch(current: Callable[[], Watcher | None]) -> None:
    """Install the audit hook (once per interpreter: a hook cannot be removed, so it asks ``current`` each time)."""
    global _watching
    if _watching:
        return
    _watching = True

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event not in EVENTS:  # every open and import comes here: leave at once
            return
        recorder = current()
        if recorder is None or recorder.finished or recorder.pid != os.getpid():
            return
        try:
            seen(recorder, event, args, sys._getframe(1).f_code.co_filename)
        except Exception as e:  # noqa: BLE001 - never stop the process start; never trust the record either
            recorder.problems.append(f"could not follow a process it started ({event}): {e!r}")
            recorder.unfollowed = True

    sys.addaudithook(audit)


def seen(recorder: Watcher, event: str, args: tuple[Any, ...], caller: str = "") -> None:
    """Write the expectation for one process start, and carry the recorder's variables into its environment."""
    cwd: Any = None
    if event == "subprocess.Popen":
        executable, argv, cwd, env = args
    elif event == "os.posix_spawn":
        if caller == getattr(sys.modules.get("subprocess"), "__file__", None):
            return  # subprocess's own posix_spawn: already seen as subprocess.Popen
        executable, argv, env = args
    elif event == "os.exec":
        executable, argv, env = args
    elif event == "os.spawn":
        _mode, executable, argv, env = args
    else:  # os.system
        executable, argv, env = SHELL, [SHELL, "-c", _text(args[0])], None
    argv = [argv] if isinstance(argv, (str, bytes, os.PathLike)) else list(argv)
    carry = recorder.expect(resolve(executable, env, cwd), [_text(a)[:_ARG_CHARACTERS] for a in argv[:8]],
                            event == "os.exec")
    if not (event in ("subprocess.Popen", "os.system") or env is None):
        return  # the environment was read before the event: nothing can be carried, and its end is never known
    target = os.environ if env is None else env
    try:
        for key, value in carry.items():
            target[key] = value
        audited(target)  # a native child is followed (see .audit); a Python one records itself too
    except (TypeError, AttributeError):
        return  # an environment that cannot change: the child cannot claim its expectation, so it stays unseen
    if event != "os.exec":
        recorder.trace(carry[SPAWN_VARIABLE])


def write(folder: Path, spawn: str, by: str, pid: int, exe: str, argv: list[str], replaces: bool, scope: str,
          log: str = "", at: int = 0) -> None:
    """The expectation ``<spawn>.spawn``: a process ``by`` (pid ``pid``) is about to start."""
    record = {"spawn": spawn, "by": by, "pid": pid, "exe": exe, "argv": argv, "replaces": replaces,
              "loader": native.kind(exe), "scope": scope, "log": log, "at": at}
    _atomic.replace(folder / f"{spawn}.spawn", json.dumps(record).encode())


def audited(env: MutableMapping[str, str]) -> None:
    """Put the audit library in ``env``'s ``LD_AUDIT`` (a native child is followed) and the CUPTI injection in its
    ``CUDA_INJECTION64_PATH`` (a native CUDA child records its kernels), where they are installed.

    An injection the environment names already (a profiler's) is left alone: a child that loads the driver
    then stays unseen, and says so.
    """
    library = native.audit_library()
    if library is not None:
        env[native.LOADER_VARIABLE] = native.with_audit(env.get(native.LOADER_VARIABLE), library)
    injection = native.injection_library()
    if injection is not None and not env.get(native.DRIVER_VARIABLE):
        env[native.DRIVER_VARIABLE] = injection
        cupti = native.cupti_library()
        if cupti is not None and not env.get(native.CUPTI_VARIABLE):
            env[native.CUPTI_VARIABLE] = cupti


def expect_command(folder: Path, argv: list[str], env: dict[str, str], scope: str) -> None:
    """``record``'s command, started by this process: expected as a recorder's child is, and carrying what it
    needs to claim the expectation (Python with the hook) or to be followed (a native program)."""
    spawn = f"command-{os.getpid()}"
    write(folder, spawn, "kernel-symbol-map record", os.getpid(), resolve(argv[0], env, None), [_text(a)[:_ARG_CHARACTERS]
                                                                                for a in argv[:8]], False, scope)
    env.update({FOLDER_VARIABLE: str(folder), SCOPE_VARIABLE: scope, SPAWN_VARIABLE: spawn})
    audited(env)


def alive(ids: set[str], recorded: Callable[[], set[tuple[int, str]]]) -> set[str]:
    """Those of ``ids`` that a live process still carries in its environment (all of them without /proc).

    Not carried is not ended: a process may clear its environment; the
    caller also asks :mod:`.tree` whether anything still runs below the root.

    A child and whatever it left running (a daemon, a server) inherit the
    id; a zombie's environment reads empty. A process of another user (a
    setuid program) cannot be read, and one that cleared its environment
    carries nothing: neither is seen. A ``recorded`` process (pid, start
    time) is seen by its own recorder, whatever it carries (a
    multiprocessing child inherits its parent's last id). A process caught
    in exec is read once it has its new environment (:func:`_environ`).
    """
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return set(ids)
    prefix = f"{SPAWN_VARIABLE}=".encode()
    found: set[str] = set()
    known: set[tuple[int, str]] | None = None
    for pid in pids:
        try:
            environ = _environ(pid)
        except OSError:
            continue
        if environ is None:  # never settled: it may carry any of them
            carried = set(ids)
        else:
            carried = {e[len(prefix):].decode(errors="replace") for e in environ.split(b"\0") if e.startswith(prefix)}
        if not carried & ids or tracker(pid):
            continue
        known = recorded() if known is None else known
        if (pid, started(pid)) not in known:
            found |= carried
    return ids & found


def _environ(pid: int) -> bytes | None:
    """``pid``'s environment block, once it can be read; None when it never settles (OSError when it cannot be read).

    From exec's point of no return until the new program's stack is laid
    out, the kernel shows a process's environment and command line as
    empty, and ``subprocess.Popen`` has already returned by then.
    Such a process is read again until it settles; one that cleared its
    environment but not its command line (``env -i server``) is settled. A
    process with no memory (a zombie, a kernel thread) reads as an OSError
    on recent kernels and as empty on older ones: settled either way; one
    late in its exit reads empty until it is a zombie.
    """
    deadline = 0.0
    while True:
        environ = _read(pid, "environ")
        if environ:
            return environ
        if _read(pid, "cmdline"):
            return environ
        proc = tree.stat(pid)
        if proc is None or not proc.live or proc.kernel:  # gone, a zombie or a kernel thread: settled, empty
            return environ
        now = time.monotonic()
        deadline = deadline or now + _SETTLE_SECONDS
        if now > deadline:
            return None
        time.sleep(_SETTLE_PAUSE)


def _read(pid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()


def started(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, /proc/PID/stat), to tell it from a later one of that pid."""
    found = tree.stat(pid)
    return found.start if found is not None else ""


_TRACKER = "from multiprocessing.resource_tracker import main;"


def resource_tracker() -> bool:
    """This interpreter is multiprocessing's resource tracker: stdlib code that unlinks semaphores, no user code.

    It lives as long as its parent, so it would never write its part before the merge; it is not recorded,
    and the id it inherited says nothing of the process that id was meant for.
    """
    return _is_tracker(list(getattr(sys, "orig_argv", [])))


def tracker_seen(folder: str) -> None:
    """Mark this interpreter as the resource tracker (``<pid>.tracker``), which runs no user code."""
    me = os.getpid()
    _atomic.replace(Path(folder) / f"{me}.tracker", json.dumps({"pid": me, "start": started(me)}).encode())


def trackers(folder: Path) -> set[tuple[int, str]]:
    """The resource trackers of a recording, as (pid, start)."""
    found = set()
    for path in folder.glob("*.tracker"):
        try:
            data = json.loads(path.read_text())
            found.add((int(data["pid"]), str(data["start"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: not known to be the tracker, so its audit record is judged
    return found


def _program(argv: list[str]) -> str:
    """The program of ``python -c PROGRAM``, or ""."""
    return argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""


def _is_tracker(argv: list[str]) -> bool:
    return _program(argv).startswith(_TRACKER)


def tracker(pid: int) -> bool:
    """Whether ``pid`` is multiprocessing's resource tracker (by its command line)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [os.fsdecode(a) for a in f.read().split(b"\0")]
    except OSError:
        return False
    return _is_tracker(argv)


def resolve(executable: Any, env: Any, cwd: Any) -> str:
    """The file the kernel will run, as exec finds it (through PATH for a bare name), resolved."""
    name = _text(executable)
    if os.path.isabs(name):
        return os.path.realpath(name)
    if os.path.dirname(name):
        base = _text(cwd) if cwd is not None else os.getcwd()
        return os.path.realpath(os.path.join(base, name))
    found = shutil.which(name, path=os.pathsep.join(map(_text, os.get_exec_path(env))))
    return os.path.realpath(found) if found else name


def identity() -> tuple[list[str], bool]:
    """This interpreter as an expectation names it: its executables; and whether multiprocessing started it.

    The executables are the binary and, for a script run through its ``#!``
    line, the script. A multiprocessing child was started below the audit
    events, so it may hold a stale expectation id from its parent's
    environment: it never claims one.
    """
    exes = {os.path.realpath(sys.executable)} if sys.executable else set()
    if os.path.exists("/proc/self/exe"):
        exes.add(os.path.realpath("/proc/self/exe"))
    argv = list(getattr(sys, "orig_argv", []))[1:]
    script = next((a for a in argv if not a.startswith("-")), "")
    if "-c" not in argv and "-m" not in argv and script and _python_script(script):
        exes.add(os.path.realpath(script))
    spawned = "--multiprocessing-fork" in argv or _program(argv).lstrip().startswith("from multiprocessing")
    return sorted(exes), spawned


def _python_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _text(value: Any) -> str:
    if isinstance(value, (bytes, os.PathLike)):
        return os.fsdecode(value)
    return str(value)

