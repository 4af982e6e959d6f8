"""One interpreter's recording: kernel names by scope, written to a part file at exit.

Scopes are what kernels are attributed to: the CI step (``record``), or a
test or fixture scope (the pytest plugin). The plugin pushes a CUPTI
external correlation id for each; a kernel whose launch carried none belongs
to the process's default scope. Kernels come in through :meth:`take`, the
function CUPTI's buffer-completed callback calls.

Each process first writes ``<token>.started``, then ``<token>.json`` when it
exits; a started process with no part file died before flushing, and the
merge marks the recording incomplete. Nothing here claims completeness it
cannot show: no CUPTI, dropped records, or an interrupted run all say
``complete: false`` with a reason.

Every process this one starts is watched (:mod:`.spawns`): each start
writes ``<token>-<n>.spawn``, an expectation that the child claims in its
``.started`` when it is Python with the hook; one nobody claims is a process
no recorder saw, and it ends only when nothing it may have left running
lives below the root, the process that runs the tests (:mod:`.tree`). A
child of a pytest run also notes where the plugin's tests log
(:mod:`.timeline`) stood at its start and its end, so that a persistent
worker's kernels go to every test that ran while it lived.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from .. import _atomic
from . import libraries, native, spawns, timeline, tree
from .hostcoverage import HostCoverage
from .profilers import ProfilerWatch
from .pycoverage import ROOT_VARIABLE, PythonCoverage
from .environment import FOLDER_VARIABLE, SCOPE_VARIABLE, SPAWN_VARIABLE, TESTS_VARIABLE

KERNEL_KINDS = ("CONCURRENT_KERNEL", "KERNEL")
_UNMATCHED_LIMIT = 1 << 20  # records kept while waiting for their partner: memory stays bounded
_FORK_HOOKED = False


class ProcessRecorder:
    """The recording of this process; at most one, made by :meth:`start_current`."""

    current: ClassVar[ProcessRecorder | None] = None

    def __init__(self, folder: Path, scope: str, backend: Any = None, log: Path | None = None,
                 follows_log: bool = False) -> None:
        self.folder = folder
        self.log = log  # the tests log: where this process's spawns and (when it follows it) its life fall
        self.window: tuple[int, int] | None = None  # (start, end) in the log, for a process that follows it
        self.follows_log = follows_log
        self._spawns = 0
        self._open: set[str] = set()  # spawns not yet seen to end (see spawns.alive and .tree)
        self.subreaper = False  # this process is the root: orphans below it are reparented to it (see .tree)
        self._release = False  # it made itself one, and stops being one when it finishes
        self._parents: dict[tuple[int, str], int] = {}  # (pid, start) -> parent, as last seen below it (root)
        self.pid = os.getpid()
        self.default_scope = scope
        self.token = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.kernels: dict[str, set[str]] = defaultdict(set)
        self.libraries: dict[str, set[str]] | None = defaultdict(set)  # None: the loader could not be asked
        self.scopes: dict[int, str] = {}  # external correlation id -> scope
        self._next_id = 1
        self._pending: dict[int, str] = {}  # correlation id -> kernel, until its external id is known
        self._external: dict[int, int] = {}  # correlation id -> external id, until its kernel arrives
        self._lock = threading.Lock()
        self.problems: list[str] = []
        self.unfollowed = False  # see .spawns.Watcher
        self.backend = backend
        self.python: PythonCoverage | None = None  # the project's Python code each scope ran (when asked)
        self.finished = False
        self.lost: dict[str, list[str]] = {}  # scope -> why its launches may have gone to another CUPTI client
        self._taken = ""  # why another CUPTI client holds this process's records now, until reclaim
        self._foreign = ""  # another client was seen: it may disable CUPTI's kinds whenever it stops
        self.profilers: ProfilerWatch | None = None
        self.host = HostCoverage(scope)  # the host functions each scope ran (a build with host coverage)
        self._host_scope = scope  # the innermost scope being attributed to

    # -- life cycle -------------------------------------------------------

    @classmethod
    def start_current(cls, folder: str | os.PathLike[str], scope: str, backend: Any = None,
                      own_log: Path | None = None, forked: bool = False, root: bool = False) -> ProcessRecorder:
        """Start recording this process (once); CUPTI failing to start is recorded, not raised.

        ``own_log``: the tests log this process writes (the plugin); else the
        one in the environment, which this process follows (a child).
        ``root``: this process runs the tests, and becomes the child
        subreaper that every orphan below it goes to (see :mod:`.tree`).
        """
        if cls.current is not None and not cls.current.finished:
            return cls.current
        followed = os.environ.get(TESTS_VARIABLE)
        log = own_log if own_log is not None else Path(followed) if followed else None
        recorder = cls(Path(folder), scope, log=log, follows_log=own_log is None and log is not None)
        recorder._begin(backend, forked, root)
        cls.current = recorder
        atexit.register(recorder.finish)
        spawns.watch(lambda: cls.current)
        global _FORK_HOOKED
        if not _FORK_HOOKED:
            os.register_at_fork(before=_before_fork, after_in_child=_restart_in_child)
            _FORK_HOOKED = True
        return recorder

    def _begin(self, backend: Any, forked: bool = False, root: bool = False) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if root:
            already = tree.was_subreaper()
            self.subreaper = already or tree.become_subreaper()
            self._release = self.subreaper and not already
        if self.log is not None and self.follows_log:
            self.window = (timeline.position(self.log), -1)
        injection = native.injection_library()
        if injection is not None and os.environ.get(native.DRIVER_VARIABLE) == injection:
            # This interpreter records its kernels itself: the driver must not inject a second CUPTI client here
            # (CUPTI takes one); its children get the injection again.
            os.environ.pop(native.DRIVER_VARIABLE)
        exes, by_multiprocessing = spawns.identity()
        (self.folder / f"{self.token}.started").write_text(json.dumps({
            "pid": os.getpid(), "ppid": os.getppid(), "start": spawns.started(os.getpid()),
            "scope": self.default_scope, "argv": sys.argv[:3],
            "spawn": os.environ.pop(SPAWN_VARIABLE, ""), "exe": exes, "forked": forked,  # the claim (see .spawns)
            "multiprocessing": by_multiprocessing, "subreaper": self.subreaper}))
        if os.environ.get(ROOT_VARIABLE) or PythonCoverage.current is not None:
            self.python = PythonCoverage.start()
        if backend is None:
            from .activity import Activity

            backend = Activity(self.take, self.taken)
        self.backend = backend
        try:
            backend.start()
        except Exception as e:  # noqa: BLE001 - any CUPTI failure means "not observed", said in the part file
            self.problems.append(f"CUPTI could not start: {e}")
            self.backend = None
            return
        self.profilers = ProfilerWatch(self.taken, self.problems.append, lambda: self.reclaim(force=True))

    def taken(self, why: str) -> None:
        """Another CUPTI client took this process's activity records (a profiler started): what is ours so far
        is delivered to us first, and the current scope's record is incomplete, until :meth:`reclaim`."""
        if not self._taken:
            self._flush()
        self._taken = self._foreign = why
        self._lose(os.environ.get(SCOPE_VARIABLE) or self.default_scope)

    def _flush(self) -> None:
        """Have CUPTI deliver every record it holds (to whichever client is registered)."""
        if self.backend is not None:
            try:
                dropped = self.backend.flush()
                if dropped:
                    self.problems.append(f"CUPTI dropped {dropped} activity records")
            except Exception as e:  # noqa: BLE001 - a flush that fails loses records: incomplete
                self.problems.append(f"CUPTI flush failed: {e}")

    def _lose(self, scope: str) -> None:
        with self._lock:
            whys = self.lost.setdefault(scope, [])
            if self._taken not in whys:
                whys.append(self._taken)

    def reclaim(self, force: bool = False) -> None:
        """Register with CUPTI again, and enable its kinds again, once another client was seen (the plugin: when
        a test's call ends, and at its end; a profiler, when it stops), so that later tests are complete."""
        if not (self._taken or self._foreign or force) or self.backend is None:
            return
        try:
            self.backend.reclaim()
        except Exception as e:  # noqa: BLE001 - not taken back: every later launch may be unseen
            self.problems.append(f"CUPTI could not be taken back from another client: {e}")
        self._taken = ""

    def finish(self, interrupted: bool = False) -> Path | None:
        """Flush CUPTI and write this process's part file (once, and only in the process that started it)."""
        if self.finished or os.getpid() != self.pid:  # a forked child inherits the parent's atexit
            return None
        self.finished = True
        self._flush()
        if interrupted:
            self.problems.append("the process was interrupted")
        if self._taken:
            self.problems.append(f"{self._taken}, and the recorder did not register again before the process ended")
        self.settle()
        if self._release:
            tree.release()
        if self.window is not None and self.log is not None:
            self.window = (self.window[0], timeline.end(self.log))
        python = self.python.finish(self.default_scope) if self.python is not None else {}
        self.host.take(self.default_scope)
        self.note_libraries(self.default_scope, new_only=True)
        with self._lock:
            for name in self._pending.values():  # launches that carried no external id
                self.kernels[self.default_scope].add(name)
            self._pending.clear()
            part = {
                "pid": os.getpid(),
                "token": self.token,
                "scope": self.default_scope,
                "complete": not self.problems,
                "reason": "; ".join(self.problems),
                # Whether its reason is about its own launches only (CUPTI's): then only the tests it lived
                # in need it. A process it started that went unseen may outlive it.
                "own_launches": not self.unfollowed,
                "kernels": {scope: sorted(names) for scope, names in sorted(self.kernels.items())},
                "lost": self.lost,
            }
            part.update(python)
            part.update(self.host.part())
            if self.libraries is not None:
                part["libraries"] = {scope: sorted(names) for scope, names in sorted(self.libraries.items())}
            if self.window is not None:
                part["window"] = {"log": str(self.log), "start": self.window[0], "end": self.window[1]}
        path = self.folder / f"{self.token}.json"
        _atomic.replace(path, json.dumps(part, separators=(",", ":")).encode())
        return path

    def note_libraries(self, scope: str, new_only: bool = False) -> None:
        """The images this process holds now served ``scope`` (with ``new_only``: those no other scope has).

        The plugin notes them at each test's end: what was loaded by then is code the test could run. At
        the end of the process, what no test had gone to its default scope: every test, for the plugin's.
        """
        names = libraries.loaded()
        with self._lock:
            if self.libraries is None:
                return
            if names is None:
                self.libraries = None
                return
            if new_only:
                names = names.difference(*self.libraries.values())
            self.libraries[scope].update(names)

    # -- the processes it starts ---------------------------------------------

    def expect(self, exe: str, argv: list[str], replaces: bool) -> dict[str, str]:
        """Write the expectation for a process about to start (``replaces``: an exec of this one).

        Returns the variables its environment must carry to record and claim it.
        """
        self.settle()
        with self._lock:
            self._spawns += 1
            spawn = f"{self.token}-{self._spawns}"
        scope = os.environ.get(SCOPE_VARIABLE) or self.default_scope
        spawns.write(self.folder, spawn, self.token, self.pid, exe, argv, replaces, scope, str(self.log or ""),
                     timeline.position(self.log) if self.log is not None else 0)
        carry = {FOLDER_VARIABLE: str(self.folder), SCOPE_VARIABLE: scope, SPAWN_VARIABLE: spawn}
        if self.log is not None:
            carry[TESTS_VARIABLE] = str(self.log)
        return carry

    def trace(self, spawn: str) -> None:
        """``spawn`` carries its id in its environment: :meth:`settle` can see it end."""
        with self._lock:
            self._open.add(spawn)

    def settle(self) -> None:
        """Note where the tests log stood when each traced spawn was seen to have ended (``<id>.ended``)."""
        with self._lock:
            open_ = set(self._open)
        if not open_:
            return
        started: list[tuple[set[tuple[int, str]], set[tuple[int, str]]]] = []  # the *.started files, read once

        def recorded_and_roots() -> tuple[set[tuple[int, str]], set[tuple[int, str]]]:
            if not started:
                started.append(self._started())
            return started[0]

        ended = open_ - spawns.alive(open_, lambda: recorded_and_roots()[0])
        # No carrier is not enough: what it left running may have cleared its environment. (The root looks
        # below itself at every settle, also to wait for the orphans it adopted.)
        if (ended or self.subreaper) and not self._quiet(*recorded_and_roots()):
            ended = set()
        at = timeline.end(self.log) if self.log is not None else 0
        for spawn in sorted(ended):
            _atomic.replace(self.folder / f"{spawn}.ended", json.dumps({"end": at, "ns": time.monotonic_ns()}).encode())
        with self._lock:
            self._open -= ended

    def _quiet(self, recorded: set[tuple[int, str]], roots: set[tuple[int, str]]) -> bool:
        """Nothing a spawn may have left running lives below the root, whatever its environment (:mod:`.tree`).

        Recorded processes are seen by their recorders; multiprocessing's resource tracker is stdlib code.
        """
        return tree.quiet(recorded, roots, self._parents, spawns.tracker)

    def _started(self) -> tuple[set[tuple[int, str]], set[tuple[int, str]]]:
        """The processes of this recording that record themselves, and those of them that are roots."""
        found, roots = set(), set()
        for path in self.folder.glob("*.started"):
            try:
                data = json.loads(path.read_text())
                key = (int(data["pid"]), str(data.get("start", "")))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: not known to be recorded, so whatever it carries counts
            found.add(key)
            if data.get("subreaper") is True:
                roots.add(key)
        return found, roots

    # -- attribution --------------------------------------------------------

    def external_id(self, scope: str) -> int:
        """A new external correlation id that attributes launches to ``scope``."""
        with self._lock:
            ext, self._next_id = self._next_id, self._next_id + 1
            self.scopes[ext] = scope
        return ext

    @contextmanager
    def attributing(self, scope: str) -> Iterator[None]:
        """Launches from this thread inside the block belong to ``scope``."""
        ext = self.external_id(scope)
        if self._taken:  # another client holds CUPTI's records: this scope's launches go to it too
            self._lose(scope)
        pushed = self.backend is not None and self.backend.push(ext)
        outer, self._host_scope = self._host_scope, scope
        self.host.take(outer)  # the host functions that ran before the block: where they ran
        try:
            if self.python is not None:
                with self.python.attributing(scope):
                    yield
            else:
                yield
        finally:
            self.host.take(scope)
            self._host_scope = outer
            if pushed:
                self.backend.pop()

    def take(self, activities: Iterable[Any]) -> None:
        """CUPTI's buffer-completed callback: kernel records and external correlation records."""
        with self._lock:
            for a in activities:
                kind = kind_name(a.kind)
                if kind in KERNEL_KINDS:
                    ext = self._external.pop(a.correlation_id, None)
                    if ext is not None:
                        self.kernels[self.scopes.get(ext, self.default_scope)].add(a.name)
                    elif not self.scopes:  # `record`: nothing is ever pushed, so nothing waits
                        self.kernels[self.default_scope].add(a.name)
                    else:
                        self._pending[a.correlation_id] = a.name
                        if len(self._pending) > _UNMATCHED_LIMIT:  # launches from threads with no test: every test
                            for corr in sorted(self._pending)[: _UNMATCHED_LIMIT // 2]:
                                self.kernels[self.default_scope].add(self._pending.pop(corr))
                elif kind == "EXTERNAL_CORRELATION":
                    name = self._pending.pop(a.correlation_id, None)
                    if name is None:
                        self._external[a.correlation_id] = a.external_id
                        if len(self._external) > _UNMATCHED_LIMIT:  # other API calls' ids: drop the oldest half
                            for corr in sorted(self._external)[: _UNMATCHED_LIMIT // 2]:
                                del self._external[corr]
                    else:
                        self.kernels[self.scopes.get(a.external_id, self.default_scope)].add(name)


def kind_name(kind: Any) -> str:
    """``CONCURRENT_KERNEL`` for CUPTI's ActivityKind enum, for its plain int, or for a test's string."""
    if isinstance(kind, str):
        return kind
    name = getattr(kind, "name", None)
    return name if name is not None else _int_kind_name(int(kind))


@lru_cache(maxsize=None)  # once per kind, not once per record: this runs for every launch
def _int_kind_name(kind: int) -> str:
    from .activity import kind_name_of_int

    return kind_name_of_int(kind)


def _restart_in_child() -> None:
    """A forked child records on its own: a new part file, and CUPTI started again."""
    parent = ProcessRecorder.current
    if parent is None or parent.finished:
        return
    ProcessRecorder.current = None
    ProcessRecorder.start_current(parent.folder, os.environ.get(SCOPE_VARIABLE, parent.default_scope), forked=True)


def _before_fork() -> None:
    """A multiprocessing fork worker ends in os._exit(): atexit never runs there, its finalizers do.

    multiprocessing clears the finalizers a child inherits, then runs its
    after-fork callbacks; one of those registers the child's finish.
    """
    if "multiprocessing" in sys.modules:
        from multiprocessing import util

        util.register_after_fork(ProcessRecorder, _finish_with_multiprocessing)


def _finish_with_multiprocessing(_cls: type) -> None:
    from multiprocessing import util

    child = ProcessRecorder.current
    if child is not None:
        util.Finalize(child, child.finish, exitpriority=100)
