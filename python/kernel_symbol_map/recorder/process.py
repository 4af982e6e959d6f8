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
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from .. import _atomic
from .hook import SCOPE_VARIABLE

KERNEL_KINDS = ("CONCURRENT_KERNEL", "KERNEL")
_UNMATCHED_LIMIT = 1 << 20  # records kept while waiting for their partner: memory stays bounded
_FORK_HOOKED = False


class ProcessRecorder:
    """The recording of this process; at most one, made by :meth:`start_current`."""

    current: ClassVar[ProcessRecorder | None] = None

    def __init__(self, folder: Path, scope: str, backend: Any = None) -> None:
        self.folder = folder
        self.pid = os.getpid()
        self.default_scope = scope
        self.token = f"{os.getpid()}-{os.urandom(4).hex()}"
        self.kernels: dict[str, set[str]] = defaultdict(set)
        self.scopes: dict[int, str] = {}  # external correlation id -> scope
        self._next_id = 1
        self._pending: dict[int, str] = {}  # correlation id -> kernel, until its external id is known
        self._external: dict[int, int] = {}  # correlation id -> external id, until its kernel arrives
        self._lock = threading.Lock()
        self.problems: list[str] = []
        self.backend = backend
        self.finished = False

    # -- life cycle -------------------------------------------------------

    @classmethod
    def start_current(cls, folder: str | os.PathLike[str], scope: str, backend: Any = None) -> ProcessRecorder:
        """Start recording this process (once); CUPTI failing to start is recorded, not raised."""
        if cls.current is not None and not cls.current.finished:
            return cls.current
        recorder = cls(Path(folder), scope)
        recorder._begin(backend)
        cls.current = recorder
        atexit.register(recorder.finish)
        global _FORK_HOOKED
        if not _FORK_HOOKED:
            os.register_at_fork(before=_before_fork, after_in_child=_restart_in_child)
            _FORK_HOOKED = True
        return recorder

    def _begin(self, backend: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{self.token}.started").write_text(json.dumps({"pid": os.getpid(), "scope": self.default_scope,
                                                                      "argv": sys.argv[:3]}))
        if backend is None:
            from .activity import Activity

            backend = Activity(self.take)
        self.backend = backend
        try:
            backend.start()
        except Exception as e:  # noqa: BLE001 - any CUPTI failure means "not observed", said in the part file
            self.problems.append(f"CUPTI could not start: {e}")
            self.backend = None

    def finish(self, interrupted: bool = False) -> Path | None:
        """Flush CUPTI and write this process's part file (once, and only in the process that started it)."""
        if self.finished or os.getpid() != self.pid:  # a forked child inherits the parent's atexit
            return None
        self.finished = True
        if self.backend is not None:
            try:
                dropped = self.backend.flush()
                if dropped:
                    self.problems.append(f"CUPTI dropped {dropped} activity records")
            except Exception as e:  # noqa: BLE001 - a flush that fails loses records: incomplete
                self.problems.append(f"CUPTI flush failed: {e}")
        if interrupted:
            self.problems.append("the process was interrupted")
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
                "kernels": {scope: sorted(names) for scope, names in sorted(self.kernels.items())},
            }
        path = self.folder / f"{self.token}.json"
        _atomic.replace(path, json.dumps(part, separators=(",", ":")).encode())
        return path

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
        pushed = self.backend is not None and self.backend.push(ext)
        try:
            yield
        finally:
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
    ProcessRecorder.start_current(parent.folder, os.environ.get(SCOPE_VARIABLE, parent.default_scope))


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
