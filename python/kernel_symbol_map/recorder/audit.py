"""The audit library's records: which libraries each native process loaded, and whether its record is whole.

The library (``native/kernel_symbol_map_audit.c``) writes one file per
process image, ``<spawn>.<pid>.<ns>.audit``, and one per forked child
before it execs, ``<spawn>.<pid>.<start>.fork.audit``. Each is text, a
line per fact, tab-separated::

    begin  exec|fork  PID  PPID  START  NS  EXE
    lib    PATH                      (every object mapped, dlopen included)
    exec   KIND  NS  PATH            (an exec; KIND as native.kind says)
    exec-failed
    spawn  KIND  CHILD-PID  PATH     (posix_spawn, posix_spawnp)
    shell  KIND  NS  /bin/sh         (system, popen)
    lost   PID                       (a forked child whose own record could not be made)
    end                              (exit, _exit)

A tab, a newline or a backslash in a path is written ``\011``, ``\012`` or
``\134``. Any other line (a field that did not fit, a NUL byte) makes the
record unreadable, and so not whole.

A spawn no recorder saw (see :mod:`.spawns`) is *followed* when its records
show every process it started, each one whole, and none that loaded a GPU
driver: it could not have launched a kernel, so it leaves its tests'
records complete. Anything else is a reason, in words: a driver loaded
(no CUPTI recorder saw that process), a process that did not exit (killed,
or still running when the recording ended), a program the audit library
did not follow (a setuid one, an environment without ``LD_AUDIT``, a
loader that refused the library), or a record that cannot be read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from . import native
from .libraries import file_names

DRIVERS = re.compile(rf"^({'|'.join(map(re.escape, native.DRIVER_LIBRARIES))})\.so(\.|$)")
UNTAGGED = "-"  # records of processes that carried no spawn id
_ESCAPED = re.compile(r"\\([0-7]{3})")
_NAMED_BY_CALLER = ("/proc/", "/dev/fd/")  # paths that mean one thing in the caller and another here
_SHOWN = 3  # reasons named per spawn; the rest are counted


@dataclass(frozen=True)
class Event:
    what: str  # exec, exec-failed, spawn, shell
    kind: str = ""  # of the program it starts (native.kind)
    number: int = 0  # ns for exec and shell; the child's pid for spawn
    path: str = ""


@dataclass
class Image:
    """One program image of one process, or a forked child's life before it execs (``how == "fork"``)."""

    how: str
    pid: int
    ppid: int
    start: str
    ns: int
    exe: str
    libraries: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    ended: bool = False
    broken: str = ""  # why the record cannot be read

    @property
    def process(self) -> tuple[int, str]:
        return self.pid, self.start


@dataclass(frozen=True)
class Verdict:
    problems: tuple[str, ...]
    libraries: frozenset[str]
    late: bool  # a process of the spawn began after it was seen to end: its end is not known


def read(folder: Path) -> dict[str, list[Image]]:
    """Every record in ``folder``, by the spawn id the process carried (:data:`UNTAGGED` for none)."""
    found: dict[str, list[Image]] = {}
    for path in folder.glob("*.audit"):
        spawn = path.name.split(".", 1)[0]
        found.setdefault(spawn, []).append(_image(path))
    return found


def _image(path: Path) -> Image:
    try:
        lines = path.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    except OSError as e:
        return Image("exec", 0, 0, "", 0, str(path), broken=f"{path.name}: {e.strerror or e}")
    if lines[-1] != "":
        lines.append("")  # a line cut short by a kill: the record has no end either
        cut = True
    else:
        cut = False
    head = lines[0].split("\t")
    try:
        if head[0] != "begin" or len(head) != 7 or head[1] not in ("exec", "fork") or "\0" in lines[0]:
            raise ValueError("no begin line")
        image = Image(head[1], int(head[2]), int(head[3]), head[4], int(head[5]), _unescape(head[6]))
    except (ValueError, IndexError):
        return Image("exec", 0, 0, "", 0, path.name, broken=f"{path.name}: not an audit record")
    for line in lines[1:-1]:
        fields = line.split("\t")
        try:
            if fields[0] == "lib" and len(fields) == 2:
                image.libraries.append(_unescape(fields[1]))
            elif fields[0] in ("exec", "shell", "spawn") and len(fields) == 4:
                image.events.append(Event(fields[0], fields[1], int(fields[2]), _unescape(fields[3])))
            elif fields[0] == "lost" and len(fields) == 2:
                image.broken = f"{path.name}: the record of its forked child {int(fields[1])} could not be written"
            elif fields == ["exec-failed"]:
                image.events.append(Event("exec-failed"))
            elif fields == ["end"]:
                image.ended = True
            else:
                raise ValueError(line)
        except ValueError:
            image.broken = f"{path.name}: a line that is not an audit record ({line[:80]!r})"
    if cut:
        image.ended = False
    return image


def _unescape(field: str) -> str:
    """A path as the audit library writes it (a tab, a newline, a backslash as three octal digits);
    ValueError for one it never writes (a NUL byte)."""
    text = _ESCAPED.sub(lambda m: chr(int(m[1], 8)), field) if "\\" in field else field
    if "\0" in text:
        raise ValueError("a NUL byte in a path")
    return text


def names(image: Image) -> set[str]:
    """The file names an image loaded (see :mod:`.libraries`)."""
    return file_names([image.exe, *image.libraries])


class Index:
    """Every process of a recording's records, whatever spawn id each image carried.

    A process's images may carry two ids: a recorded interpreter's forked
    child notes its exec under the id its audit library started with, and
    the program it execs carries the id the recorder gave it. Whether an
    exec was followed, or a started child has a record, is looked up here.
    """

    def __init__(self, records: dict[str, list[Image]]) -> None:
        self.images: dict[tuple[int, str], list[Image]] = {}
        self.by_pid: dict[int, list[Image]] = {}  # every image of any process that had this pid
        for images in records.values():
            for image in images:
                self.images.setdefault(image.process, []).append(image)
                self.by_pid.setdefault(image.pid, []).append(image)
        self.children: dict[int, list[tuple[int, str]]] = {}
        for key in sorted(self.images, key=lambda k: self.first(k).ns):
            self.children.setdefault(self.first(key).ppid, []).append(key)

    def execed(self, key: tuple[int, str], exec_: Event) -> bool:
        """Whether the program image process ``key`` began next, after ``exec_`` (its ns), has a record: the
        program that exec started, where its path tells (an absolute path to a dynamic program)."""
        later = [i for i in self.images.get(key, ()) if i.how == "exec" and i.ns >= exec_.number]
        if not later:
            return False
        return _became(exec_, min(later, key=lambda i: i.ns))

    def first(self, key: tuple[int, str]) -> Image:
        return min(self.images[key], key=lambda i: (i.how != "fork", i.ns))


def judge(images: Iterable[Image], *, loader: str, root: tuple[str, int] | None,
          recorded: set[tuple[int, str]], ended_ns: int | None = None, index: Index | None = None) -> Verdict:
    """Whether a spawn's processes, as their records show them, could have launched a kernel unseen.

    ``loader``: :func:`.native.kind` of the program started; ``root``: how its
    first process is found (``("ppid", pid)`` of the spawner, or ``("pid",
    pid)`` for an exec that replaced it; None: no first process is needed,
    as when a recorder saw it).
    ``recorded`` processes (pid, start) record themselves: their part files
    say what they launched and whether they died. ``ended_ns``: when the
    spawn was seen to end. ``index``: every record of the recording (for a
    process whose images carry another id); by default only these.
    """
    processes: dict[tuple[int, str], list[Image]] = {}
    for image in images:
        processes.setdefault(image.process, []).append(image)
    for chain in processes.values():
        chain.sort(key=lambda i: (i.how != "fork", i.ns))  # a forked child's life comes before what it execs
    index = index if index is not None else Index({"": [i for c in processes.values() for i in c]})
    problems: list[str] = []
    libraries: set[str] = set()
    late = False
    if loader == native.SETUID and root is not None:
        problems.append("a setuid program: the loader ignores LD_AUDIT there")
    elif root is not None and loader != native.STATIC:
        how, pid = root
        if not any(getattr(chain[0], how) == pid for chain in processes.values()):
            problems.append("no audit record: its environment lost LD_AUDIT, the loader refused the audit library, "
                            "or it is not a glibc program")
    # A shell that system() started is matched to the caller's first child not otherwise accounted for that
    # began after the call; posix_spawn's children are known by their pids.
    used = {child for chain in processes.values() for image in chain for event in image.events
            if event.what == "spawn" and (child := _spawned(event, image, index)) is not None}
    for key, chain in sorted(processes.items(), key=lambda kv: kv[1][0].ns):
        late = late or (ended_ns is not None and chain[0].ns > ended_ns)
        for image in chain:
            libraries |= names(image)
        problems += _whole(chain, index, used, recorded=key in recorded)
    return Verdict(tuple(problems), frozenset(libraries), late)


def _whole(chain: list[Image], index: Index, used: set[tuple[int, str]], recorded: bool) -> list[str]:
    """Why one process's record may hide a launch ([] when it cannot).

    A ``recorded`` process (a Python interpreter with the hook, or one CUPTI
    was injected into) speaks for its own launches and its own end in its
    part file; what it started is still looked for here.
    """
    first, last = chain[0], chain[-1]
    who = f"process {first.pid} ({os.path.basename(last.exe) or '?'})"
    found = [f"{who}: {image.broken}" for image in chain if image.broken]
    for image, following in zip(chain, chain[1:]):
        exec_ = next((e for e in reversed(image.events) if e.what in ("exec", "exec-failed")), None)
        if exec_ is not None and exec_.what == "exec" and not _became(exec_, following):
            found.append(f"{who} ran {exec_.path}, which the audit library did not follow{_because(exec_.kind)}")
    for image in chain:
        drivers = sorted({os.path.basename(lib) for lib in _loaded(image, chain, index)
                          if DRIVERS.match(os.path.basename(lib))})
        if drivers and not recorded:
            found.append(f"{who} loaded the GPU driver ({', '.join(drivers)}), and no CUPTI recorder saw it")
        for event in image.events:
            if event.what == "spawn" and event.kind != native.STATIC:
                if event.kind == native.SETUID or _spawned(event, image, index) is None:
                    found.append(f"{who} started {event.path}, which the audit library did not follow"
                                 f"{_because(event.kind)}")
            elif event.what == "shell" and event.kind != native.STATIC:
                child = next((k for k in index.children.get(image.pid, ()) if k not in used
                              and index.first(k).how == "exec" and index.first(k).ns >= event.number), None)
                if child is None:
                    found.append(f"{who} ran {event.path}, which the audit library did not follow")
                else:
                    used.add(child)
    final = last.events[-1] if last.events else None
    if last.ended:
        pass
    elif final is not None and final.what == "exec" and final.kind == native.STATIC:
        pass  # it became a static program, which cannot load a driver (its children are followed on their own)
    elif final is not None and final.what == "exec" and index.execed(last.process, final) and \
            final.kind != native.SETUID:
        pass  # it became a program whose record carries another spawn id: judged with that spawn
    elif final is not None and final.what == "exec":
        found.append(f"{who} ran {final.path}, which the audit library did not follow{_because(final.kind)}")
    elif not recorded:
        found.append(f"{who} did not exit: it was killed, or still ran when the recording ended")
    return found


def _loaded(image: Image, chain: list[Image], index: Index) -> list[str]:
    """What ``image`` had loaded. A forked child that never tried to exec holds what its parent had loaded by
    then (its record lists only what it loaded itself): a driver the parent mapped, the child can initialise.
    One that forked to exec (as ``subprocess`` does, even when the exec failed) ran only its way there."""
    if image.how != "fork" or any(e.what == "exec" for i in chain for e in i.events):
        return image.libraries
    inherited = [lib for parent in index.by_pid.get(image.ppid, ()) if parent.ns <= image.ns
                 for lib in parent.libraries]
    return [*image.libraries, *inherited]


def _became(exec_: Event, image: Image) -> bool:
    """Whether ``image`` can be the program ``exec_`` started: where the path tells (an absolute path to a
    dynamic program that is still there), the same file; else a program between the two ran unseen. A
    script, or a bare name, runs as another program, and a path that names the caller (``/proc/self/exe``,
    a descriptor) or is gone cannot be told now: the next image is taken as it."""
    if exec_.kind != native.DYNAMIC or not exec_.path.startswith("/") or exec_.path.startswith(_NAMED_BY_CALLER):
        return True
    try:
        if not os.path.exists(exec_.path):
            return True
        return os.path.realpath(exec_.path) == os.path.realpath(image.exe)
    except ValueError:  # a NUL byte: not a path the library wrote
        return False


def _spawned(event: Event, image: Image, index: Index) -> tuple[int, str] | None:
    """The process posix_spawn started, by its pid and parent, begun after the image that started it (a pid
    used again is not taken for it)."""
    return next((k for k in index.children.get(image.pid, ())
                 if k[0] == event.number and index.first(k).ns >= image.ns), None)


def _because(kind: str) -> str:
    if kind == native.SETUID:
        return " (a setuid program: the loader ignores LD_AUDIT there)"
    return " (its environment lost LD_AUDIT, or the loader refused the library)"


def summary(problems: tuple[str, ...]) -> str:
    """The first few reasons, and how many more."""
    shown = "; ".join(problems[:_SHOWN])
    more = len(problems) - _SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")
