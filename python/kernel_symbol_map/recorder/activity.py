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
    """Kernel activity for this process, delivered to ``take``."""

    def __init__(self, take: Callable[[Iterable[Any]], None]) -> None:
        self.take = take
        self.cupti: Any = None

    def start(self) -> None:
        cupti = _cupti()
        try:
            cupti.activity_register_callbacks(lambda: (BUFFER_BYTES, 0), self.take)
            cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
            cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
        except cupti.cuptiError as e:
            raise RuntimeError(str(e)) from None
        self.cupti = cupti

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
