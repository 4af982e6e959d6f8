"""Merge the part files of one recording into the JSON Lines that ``select`` reads.

Each record is ``{"test", "kernels", "complete", "commit", "reason",
"processes", "libraries"}``: ``reason`` says why it is incomplete,
``processes`` how many Python processes were recorded, ``libraries`` the
file names of the images its processes had loaded (absent when one could
not say), and, when some process ran code built with host coverage,
``host_functions``: image file name -> the host functions the test ran there,
attributed as kernels are (absent when a process that served the test could
not say; an image a native child loaded is left out, as what it ran there is
unknown). Incomplete when any contributing process was
incomplete (no CUPTI, dropped records, interrupted), when a process started
but never wrote its part file (it died), when the command was interrupted,
or when no process was recorded at all; and, for the tests from its start
on, when a recorded process started one that no recorder saw (a native
program, a shell, Python without the hook: an expectation, ``.spawn``,
that no ``.started`` claimed) and that the audit library's records do not
clear (:mod:`.audit`: a static program, or dynamic ones that exited whole
without loading a GPU driver, are cleared). A child's kernels go to the scope it was
started in and to every test that ran while it lived (its ``window`` in the
tests log), so a persistent worker's launches reach the tests that used it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _atomic
from ..errors import RecordingError
from ..mapformat import pyblocks
from . import audit, native, spawns, timeline

SESSION = "scope::"  # the plugin's widest scope: every test


@dataclass(frozen=True)
class Part:
    token: str
    scope: str
    complete: bool
    reason: str
    kernels: dict[str, tuple[str, ...]]
    window: tuple[str, int, int] | None = None  # (tests log, start, end): the tests that ran while it lived
    python: PythonPart | None = None  # the Python code it ran, when Python was measured (see .pycoverage)
    libraries: dict[str, tuple[str, ...]] | None = None  # scope -> the images it had loaded (see .libraries)
    program: str = ""  # its executable, as its start said, to name it by
    own_launches: bool = False  # its reason is about its own launches only (not a process it failed to follow)
    lost: dict[str, tuple[str, ...]] = field(default_factory=dict)  # scope -> why its launches went unseen
    # scope -> image file name -> the host functions it ran (see .hostcoverage); None when it could not say
    host_functions: dict[str, dict[str, tuple[str, ...]]] | None = None

    def name(self) -> str:
        return f"process {self.token} ({self.program})" if self.program else f"process {self.token}"


@dataclass(frozen=True)
class PythonPart:
    """One process's Python coverage: scope -> file -> block digests; ``scopes`` None when it could not measure."""

    scopes: dict[str, dict[str, tuple[str, ...]]] | None
    problem: str
    copies: tuple[str, ...]
    scheme: int
    jit_kernels: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # scope -> kernel -> functions
    jit_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # scope -> files compiled at run time


@dataclass(frozen=True)
class Unseen:
    """A process a recorded one started that no recorder saw: followed by the audit library, or not."""

    by: str  # the token of the process that started it
    exe: str
    argv: tuple[str, ...]
    scope: str
    log: str  # the tests log at its start ("" for a step)
    at: int
    end: int | None  # where the log stood when it was seen to have ended; None: it may still run
    problems: tuple[str, ...] = ()  # why it may have launched a kernel unseen; () when its records rule it out
    libraries: frozenset[str] = frozenset()
    claimed: bool = False  # a recorder saw the process itself; the problems are about what it started

    def why(self) -> str:
        started = f"process {self.by} started {self.exe} ({' '.join(self.argv)[:160]})" if self.by else \
            "a process that carried no spawn id"
        seen = "which a recorder saw, but not all it started" if self.claimed else "which no recorder saw"
        return f"{started}, {seen}: {audit.summary(self.problems)}"


def read_parts(folder: Path) -> tuple[list[Part], list[str]]:
    """The part files in ``folder``, and the started processes that never wrote one."""
    parts = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            window = data.get("window")
            parts.append(Part(str(data["token"]), str(data["scope"]), bool(data["complete"]), str(data["reason"]),
                              {str(k): tuple(v) for k, v in data["kernels"].items()},
                              None if window is None else (str(window["log"]), int(window["start"]),
                                                           int(window["end"])),
                              _python_part(data) if "python" in data else None,
                              None if data.get("libraries") is None else
                              {str(k): tuple(map(str, v)) for k, v in data["libraries"].items()},
                              _program(folder / f"{data['token']}.started"), data.get("own_launches") is True,
                              {str(k): tuple(map(str, v)) for k, v in data.get("lost", {}).items()},
                              None if data.get("host_functions") is None else
                              {str(scope): {str(n): tuple(map(str, f)) for n, f in images.items()}
                               for scope, images in data["host_functions"].items()}))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise RecordingError(f"{path}: not a recorder part file ({e})") from None
    return parts, _unwritten(folder)


def _python_part(data: dict[str, Any]) -> PythonPart:
    scopes = data["python"]
    if scopes is None:
        return PythonPart(None, str(data.get("python_problem") or "Python code was not measured"), (), 0)
    return PythonPart({str(scope): {str(f): tuple(map(str, d)) for f, d in files.items()}
                       for scope, files in scopes.items()},
                      "", tuple(map(str, data.get("python_copies", ()))), int(data["pyblocks"]),
                      {str(scope): {str(k): tuple(map(str, f)) for k, f in kernels.items()}
                       for scope, kernels in data.get("jit_kernels", {}).items()},
                      {str(scope): tuple(map(str, files)) for scope, files in data.get("jit_sources", {}).items()})


def _program(started: Path) -> str:
    """The executable a process's start file names; "" where it is unreadable (the part still counts)."""
    try:
        exe = json.loads(started.read_text()).get("exe")
        return str(exe[0]) if isinstance(exe, list) and exe else ""
    except (OSError, ValueError, AttributeError):
        return ""


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RecordingError(f"{path}: not a recorder file ({e})") from None
    if not isinstance(data, dict):
        raise RecordingError(f"{path}: not a recorder file")
    return data


def read_unseen(folder: Path) -> list[Unseen]:
    """The expectations (``*.spawn``) that no started process claimed, each judged by its audit records.

    A claim needs the expectation's id, the executable it named, and the
    right parent: the spawner (its pid for an exec). A forked or
    multiprocessing child never claims: it inherited its parent's
    environment, and with it maybe an id meant for another process.
    An unclaimed one is followed when the audit library's records show
    that none of its processes could have launched a kernel (:mod:`.audit`);
    its ``problems`` say why not otherwise. A claimed one speaks for its
    own launches, but what it started outside Python (``posix_spawn`` or
    ``system`` through ``ctypes``, an extension module's ``fork``) is
    still judged by its records: it is returned too, ``claimed``, with
    problems only where those records do not clear it.
    """
    claims: dict[str, list[dict[str, Any]]] = {}
    recorded: set[tuple[int, str]] = set()
    for path in folder.glob("*.started"):
        data = _json(path)
        recorded.add((int(data.get("pid", 0)), str(data.get("start", ""))))
        if data.get("spawn") and not data.get("forked") and not data.get("multiprocessing"):
            claims.setdefault(str(data["spawn"]), []).append(data)
    recorded |= spawns.trackers(folder)
    records = audit.read(folder)
    index = audit.Index(records)
    unseen = []
    for path in sorted(folder.glob("*.spawn")):
        s = _json(path)
        try:
            parent = "pid" if s["replaces"] else "ppid"
            claimed = any(s["exe"] in c.get("exe", ()) and c.get(parent) == s["pid"]
                          for c in claims.get(s["spawn"], ()))
            ended = path.with_suffix(".ended")
            end_record = _json(ended) if ended.exists() else None
            end = int(end_record["end"]) if end_record is not None else None
            verdict = audit.judge(records.get(str(s["spawn"]), ()), loader=str(s.get("loader", native.UNKNOWN)),
                                  root=None if claimed else (parent, int(s["pid"])), recorded=recorded,
                                  ended_ns=None if end_record is None else end_record.get("ns"), index=index)
            unseen.append(Unseen(str(s["by"]), str(s["exe"]), tuple(map(str, s["argv"])), str(s["scope"]),
                                 str(s["log"]), int(s["at"]), None if verdict.late else end, verdict.problems,
                                 verdict.libraries, claimed))
        except (KeyError, TypeError, ValueError) as e:
            raise RecordingError(f"{path}: not a recorder spawn file ({e})") from None
    untagged = records.get(audit.UNTAGGED)
    if untagged:  # processes that lost their spawn id: whatever they did, every test may have seen it
        verdict = audit.judge(untagged, loader=native.UNKNOWN, root=None, recorded=recorded, index=index)
        unseen.append(Unseen("", "", (), "", "", 0, None, verdict.problems, verdict.libraries))
    return unseen


def _unwritten(folder: Path) -> list[str]:
    """Tokens of processes that started but wrote no part file (by file names alone)."""
    return sorted(p.stem for p in folder.glob("*.started") if not (folder / f"{p.stem}.json").exists())


def wait_for_stragglers(folder: Path, seconds: float = 10.0) -> None:
    """Give processes that outlive the command (multiprocessing's resource tracker) time to write their part."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(folder / f"{token}.started") for token in _unwritten(folder)):
            return
        time.sleep(0.05)


def _alive(started: Path) -> bool:
    try:
        pid = int(json.loads(started.read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _problems(parts: list[Part], died: list[str], interrupted: str, unseen: list[Unseen] | None = None,
              windowed: bool = False) -> list[str]:
    """Why every record is incomplete. ``windowed``: an incomplete part whose reason is about its own launches,
    and that lived in a known window of tests, is left out, for those tests to say (see :func:`test_records`)."""
    found = [f"{p.name()}: {p.reason}" for p in parts if not p.complete and not (windowed and _scoped(p))]
    found += [f"process {token} died before writing its part file" for token in died]
    if interrupted:
        found.append(interrupted)
    if not parts and not died and not unseen:  # not even the command was followed: nothing was observed
        found.append("no process was recorded")
    return found


def _scoped(part: Part) -> bool:
    """Whether an incomplete part costs only the tests it lived in: its reason is about its own launches (not
    about a process it started, which may outlive it), and its window is known."""
    return part.own_launches and part.window is not None


def step_record(folder: Path, step: str, commit: str, interrupted: str = "") -> dict[str, Any]:
    """One record for a whole CI step: every kernel of every recorded process.

    Called by ``record`` itself, so the command's own process is a recorded
    one whose parent is this process: else the command is a shell or a
    native program, and what it ran directly no recorder watched.
    """
    wait_for_stragglers(folder)
    parts, died = read_parts(folder)
    unseen = read_unseen(folder)
    problems = _problems(parts, died, interrupted, unseen) + [u.why() for u in unseen if u.problems]
    kernels = sorted({k for p in parts for names in p.kernels.values() for k in names})
    record = {"test": step, "kernels": kernels, "complete": not problems, "commit": commit,
              "reason": "; ".join(problems), "processes": len(parts) + len(died)}
    if all(p.libraries is not None for p in parts):
        record["libraries"] = sorted({n for p in parts for names in (p.libraries or {}).values() for n in names}
                                     .union(*(u.libraries for u in unseen)))
    if _any_host_coverage(parts) and all(p.host_functions is not None for p in parts):
        ran: dict[str, set[str]] = {}
        for p in parts:
            for images in (p.host_functions or {}).values():
                for name, functions in images.items():
                    ran.setdefault(name, set()).update(functions)
        unknown = set().union(*(u.libraries for u in unseen))  # what a native child ran there is not known
        record["host_functions"] = {n: sorted(f) for n, f in sorted(ran.items()) if n not in unknown}
    return record


def _any_host_coverage(parts: list[Part]) -> bool:
    """Whether some process ran code built with host coverage (else records say nothing of host functions)."""
    return any(images for p in parts for images in (p.host_functions or {}).values())


def in_scope(test: str, scope: str) -> bool:
    """Whether ``test`` (a pytest node id) runs under the fixture scope ``scope::<node id>``."""
    node = scope[len(SESSION):]
    return node == "" or test == node or test.startswith((node + "::", node + "/"))


def test_records(folder: Path, tests: list[str], commit: str, interrupted: str = "") -> list[dict[str, Any]]:
    """One record per test: its own kernels, and those of every fixture scope it runs under.

    A kernel attributed to a scope goes to every test of that scope, so a
    fixture that warms a kernel up never hides it from a test that needs it.
    """
    wait_for_stragglers(folder)
    parts, died = read_parts(folder)
    problems = _problems(parts, died, interrupted, windowed=True)
    found: dict[str, set[str]] = {t: set() for t in tests}
    loaded: dict[str, set[str]] = {t: set() for t in tests}  # what their processes had loaded (see .libraries)
    own: dict[str, list[str]] = {t: [] for t in tests}
    for part in parts:
        lived = _begun(*part.window) if part.window is not None else []
        for scope, names in part.kernels.items():
            for t in set(_targets(scope, tests, found)) | {t for t in lived if t in found}:
                found[t].update(names)
        for scope, names in (part.libraries or {}).items():
            for t in set(_targets(scope, tests, found)) | {t for t in lived if t in loaded}:
                loaded[t].update(names)
        for scope, whys in part.lost.items():  # another CUPTI client held its records while the scope ran
            for t in set(_targets(scope, tests, found)) | {t for t in lived if t in own}:
                own[t] += [f"{part.name()}: {why}" for why in whys]
        if not part.complete and _scoped(part):
            # What it failed to record would have gone where its kernels go: its scopes, and the tests it lived in.
            reached = {t for scope in (part.scope, *part.kernels) for t in _targets(scope, tests, found)}
            for t in reached | {t for t in lived if t in own}:
                own[t].append(f"{part.name()}: {part.reason}")
    hosts = _host_functions(parts, tests, found)
    for u in read_unseen(folder):
        later = _begun(u.log, max(u.at, 0), u.end) if u.log else tests  # no end seen: every test from its start on
        for t in set(_targets(u.scope, tests, found)) | {t for t in later if t in own}:
            if u.problems:
                own[t].append(u.why())
            loaded[t].update(u.libraries)
            if hosts is not None and hosts[t] is not None:  # what it ran in them is not known: none listed
                hosts[t] = {n: f for n, f in hosts[t].items() if n not in u.libraries}
    records = [{"test": t, "kernels": sorted(found[t]), "complete": not (problems or own[t]), "commit": commit,
                "reason": "; ".join(problems + own[t]), "processes": len(parts) + len(died)} for t in tests]
    if all(p.libraries is not None for p in parts):  # else some process could not say what it had loaded
        for record in records:
            record["libraries"] = sorted(loaded[record["test"]])
    if any(p.python is not None for p in parts):
        for record, python in zip(records, _python_records(parts, tests, found), strict=True):
            record.update(python)
    for record in records if hosts is not None else ():
        ran = hosts[record["test"]]  # type: ignore[index]
        if ran is not None:
            record["host_functions"] = {n: sorted(f) for n, f in sorted(ran.items())}
    return records


def _host_functions(parts: list[Part], tests: list[str], known: dict[str, Any]
                    ) -> dict[str, dict[str, set[str]] | None] | None:
    """Each test's host functions, image by image, attributed as its kernels are (None for a test a process
    that could not say served); None when no process ran code built with host coverage."""
    if not _any_host_coverage(parts):
        return None
    found: dict[str, dict[str, set[str]] | None] = {t: {} for t in tests}
    for part in parts:
        lived = {t for t in _begun(*part.window) if t in found} if part.window is not None else set()
        if part.host_functions is None:
            for t in set(_targets(part.scope, tests, known)) | lived:
                found[t] = None
            continue
        for scope, images in part.host_functions.items():
            for t in set(_targets(scope, tests, known)) | lived:
                ran = found[t]
                if ran is not None:
                    for name, functions in images.items():
                        ran.setdefault(name, set()).update(functions)
    return found


def _python_records(parts: list[Part], tests: list[str], known: dict[str, Any]) -> list[dict[str, Any]]:
    """Each test's Python coverage, attributed as its kernels are: by scope, and by the window a child lived in.

    A process that could not measure (or one that never said) leaves the tests it may have served with no
    Python evidence at all, and says why.
    """
    files: dict[str, dict[str, set[str]]] = {t: {} for t in tests}
    jit: dict[str, dict[str, set[str]]] = {t: {} for t in tests}  # test -> kernel -> the JIT'd functions
    built: dict[str, set[str]] = {t: set() for t in tests}  # test -> the files compiled at run time for it
    unknown: dict[str, str] = {}
    copies: dict[str, set[str]] = {t: set() for t in tests}
    schemes = set()
    for part in parts:
        lived = {t for t in _begun(*part.window) if t in files} if part.window is not None else set()
        served = set(_targets(part.scope, tests, known)) | lived
        if part.python is None or part.python.scopes is None:
            why = part.python.problem if part.python is not None else "a process did not measure Python code"
            for t in served:
                unknown.setdefault(t, f"process {part.token}: {why}")
            continue
        schemes.add(part.python.scheme)
        for t in served:
            copies[t].update(part.python.copies)
        for scope, ran in part.python.scopes.items():
            for t in set(_targets(scope, tests, known)) | lived:
                mine = files[t]
                for rel, digests in ran.items():
                    mine.setdefault(rel, set()).update(digests)
        for scope, kernels in part.python.jit_kernels.items():
            for t in set(_targets(scope, tests, known)) | lived:
                for kernel, functions in kernels.items():
                    jit[t].setdefault(kernel, set()).update(functions)
        for scope, sources in part.python.jit_sources.items():
            for t in set(_targets(scope, tests, known)) | lived:
                built[t].update(sources)
    scheme = next(iter(schemes)) if len(schemes) == 1 else pyblocks.SCHEME
    found = []
    for t in tests:
        if t in unknown or len(schemes) > 1:
            found.append({"python": None, "python_problem": unknown.get(t, "processes of several block schemes")})
            continue
        entry: dict[str, Any] = {"python": {rel: sorted(d) for rel, d in sorted(files[t].items())},
                                 "pyblocks": scheme}
        if copies[t]:
            entry["python_copies"] = sorted(copies[t])
        if jit[t]:
            entry["jit_kernels"] = {k: sorted(f) for k, f in sorted(jit[t].items())}
        if built[t]:
            entry["jit_sources"] = sorted(built[t])
        found.append(entry)
    return found


def _targets(scope: str, tests: list[str], known: dict[str, Any]) -> list[str]:
    """The tests a kernel attributed to ``scope`` belongs to."""
    if scope.startswith(SESSION):
        return [t for t in tests if in_scope(t, scope)]
    if scope in known:
        return [scope]
    return tests  # a scope no test knows (a process outside any test): every test


def _begun(log: str, start: int, end: int | None = None) -> list[str]:
    try:
        return timeline.begun(Path(log), start, end)
    except (OSError, ValueError) as e:
        raise RecordingError(f"{log}: not a tests log ({e})") from None


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    _atomic.replace(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode())
