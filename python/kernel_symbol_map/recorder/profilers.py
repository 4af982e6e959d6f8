"""Profilers that take CUPTI from the recorder: seen when they start, so the scope they start in is incomplete.

CUPTI delivers activity records to one registrant per process. A profiler
that registers its own callbacks takes this process's kernel records from
the recorder until the recorder registers again. The recorder sees such a
start, has CUPTI deliver what is its own first, records the scope the start
happened in as incomplete, with the reason, and registers again (and
enables its kinds again) when the trace stops and when the test's call and
the test end (:meth:`.process.ProcessRecorder.reclaim`), so that later tests
are complete.

Seen:

* torch's profilers (``torch.profiler.profile``, ``torch.autograd.profiler``):
  each start of a Kineto trace with a device activity (CPU-only traces leave
  CUPTI alone);
* any later registration through cupti-python (:class:`.activity.Activity`).

Not seen: a client in native code that torch does not start (Nsight
attaching to the process, a library's own CUPTI client). Record without them.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from . import imports

Taken = Callable[[str], None]  # another client took CUPTI's records now: why


class ProfilerWatch:
    """This process's watch over the profilers it imports: ``taken`` when one starts a trace of the GPU,
    ``stopped`` when it ends one (Kineto then disables CUPTI's kernel records: the recorder registers again)."""

    def __init__(self, taken: Taken, problem: Callable[[str], None], stopped: Callable[[], None]) -> None:
        self.taken, self.problem, self.stopped = taken, problem, stopped
        self.finder = imports.watch({"torch.autograd.profiler": self._torch}, self._failed)

    def _failed(self, module: str, error: BaseException) -> None:
        self.problem(f"{module} could not be watched ({type(error).__name__}: {error}): a profiler it starts may "
                     "take CUPTI's kernel records unseen")

    def _torch(self, module: types.ModuleType) -> None:
        profile = module.profile
        prepare, leave = profile._prepare_trace, profile.__exit__  # both of torch's profilers start and stop here
        taken, stopped = self.taken, self.stopped

        def preparing(this: Any, *args: Any, **kwargs: Any) -> Any:
            if _on_device(this):
                taken(f"{type(this).__module__}.{type(this).__qualname__} started a trace of the GPU (Kineto "
                      "registers with CUPTI): this process's kernel records went to it")
            return prepare(this, *args, **kwargs)

        def leaving(this: Any, *args: Any) -> Any:
            try:
                return leave(this, *args)
            finally:
                if _on_device(this):
                    stopped()

        profile._prepare_trace = preparing
        profile.__exit__ = leaving


def _on_device(profile: Any) -> bool:
    """The trace asks Kineto for a device's activity (CUDA, a GPU's): it takes CUPTI. Unreadable: it may."""
    activities = getattr(profile, "kineto_activities", None)
    if activities is None:
        return True
    return any(getattr(a, "name", str(a)) != "CPU" for a in activities)
