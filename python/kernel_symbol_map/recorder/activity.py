"""CUPTI's Activity API through NVIDIA's ``cupti-python`` (the ``record`` extra).

Kernel records (``CONCURRENT_KERNEL``) carry the mangled name and the launch's
correlation id; ``EXTERNAL_CORRELATION`` records tie a correlation id to the
external id the plugin pushed for a test. Records arrive on CUPTI's thread,
in buffers, through the recorder's ``take``. Any failure to start (no
``cupti-python``, no driver, no GPU) is raised with CUPTI's own message, and
the recorder writes it down as the reason the recording is incomplete.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from typing import Any

BUFFER_BYTES = 8 << 20


def _cupti() -> Any:
    try:
        from cupti import cupti
    except ImportError as e:
        raise RuntimeError(f"cupti-python is not installed (pip install 'kernel-symbol-map[record]'): {e}") from None
    return cupti


def kind_name_of_int(kind: int) -> str:
    try:
        return _cupti().ActivityKind(kind).name
    except (RuntimeError, ValueError):
        return str(kind)


class Activity:
    """Kernel activity for this process, delivered to ``take``.

    CUPTI delivers activity records to one registrant per process. A client
    that registers after the recorder, through cupti-python (a profiler, a
    test's own tool), takes them: its registration is passed to ``taken``
    first (:mod:`.profilers`), and :meth:`reclaim` registers the recorder
    again.
    """

    def __init__(self, take: Callable[[Iterable[Any]], None], taken: Callable[[str], None] | None = None) -> None:
        self.take = take
        self.taken = taken or (lambda _why: None)
        self.cupti: Any = None
        self._register: Callable[..., Any] | None = None  # cupti-python's own, unwatched

    def start(self) -> None:
        cupti = _cupti()
        # A forked child's module holds its parent's watch: register through cupti-python's own function.
        register = getattr(cupti.activity_register_callbacks, "_kernel_symbol_map_original",
                           cupti.activity_register_callbacks)
        self._registered(cupti, register)
        self.cupti, self._register = cupti, register
        taken = self.taken

        def registering(*args: Any, **kwargs: Any) -> Any:
            taken("another CUPTI client registered its activity callbacks (cupti-python's "
                  "activity_register_callbacks): this process's kernel records went to it")
            return register(*args, **kwargs)

        registering._kernel_symbol_map_original = register  # type: ignore[attr-defined]
        cupti.activity_register_callbacks = registering

    def _registered(self, cupti: Any, register: Callable[..., Any]) -> None:
        try:
            register(lambda: (BUFFER_BYTES, 0), self.take)
            cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
            cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
        except cupti.cuptiError as e:
            raise RuntimeError(str(e)) from None

    def reclaim(self) -> None:
        """Register again, after another client took CUPTI's records (and may have disabled the kinds)."""
        assert self._register is not None
        self._registered(self.cupti, self._register)

    def push(self, external_id: int) -> bool:
        self.cupti.activity_push_external_correlation_id(self.cupti.ExternalCorrelationKind.CUSTOM0, external_id)
        return True

    def pop(self) -> None:
        self.cupti.activity_pop_external_correlation_id(self.cupti.ExternalCorrelationKind.CUSTOM0)

    def flush(self) -> int:
        """Deliver every buffered record; the number of records CUPTI dropped."""
        self.cupti.activity_flush_all(1)
        dropped = ctypes.c_size_t(0)
        self.cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(dropped))
        return dropped.value
