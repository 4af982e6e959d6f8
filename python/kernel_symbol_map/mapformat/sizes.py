"""An object's ``sizes`` as the map stores them: per architecture, kernel bytes aligned with ``symbols``.

In memory (what ``readers.sizes.Image.record`` gives, what ``size`` sums) a
record names its kernels: ``{"image", "stored", "code": {kernel: bytes},
"owned": {kernel: bytes}}`` or ``{"image", "stored", "ptx": true}``. In the
map, ``code`` and ``owned`` are lists in the order of the object's
``symbols``, 0 where the architecture lacks the kernel: the names are
already in the object once, and a map of vLLM's size would otherwise carry
every mangled name three times more (the map of 120 generated sources
gzipped: 28 KB without sizes, 58 KB with named ones, 37 KB with lists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import MapError

LISTS = ("code", "owned")


def pack(symbols: Sequence[str], records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]] | None:
    """The map's form of ``records``; None when a record names a kernel ``symbols`` lacks (the reader that
    listed the symbols and the one that measured disagree: no sizes rather than wrong ones)."""
    index = {s: i for i, s in enumerate(symbols)}
    out: dict[str, dict[str, Any]] = {}
    for arch, record in records.items():
        packed = {k: v for k, v in record.items() if k not in LISTS}
        for key in LISTS:
            table = record.get(key)
            if not table:
                continue
            if not table.keys() <= index.keys():
                return None
            column = [0] * len(symbols)
            for kernel, n in table.items():
                column[index[kernel]] = n
            packed[key] = column
        out[arch] = packed
    return out


def unpack(symbols: Sequence[str], sizes: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, dict[str, Any]]:
    """The in-memory form of an object's ``sizes``; a :class:`MapError` naming ``where`` if a list does not
    match the symbols."""
    out: dict[str, dict[str, Any]] = {}
    for arch, record in sizes.items():
        unpacked = {k: v for k, v in record.items() if k not in LISTS}
        for key in LISTS:
            column = record.get(key)
            if column is None:
                continue
            if len(column) != len(symbols):
                raise MapError(f"{where}.sizes.{arch}.{key}: {len(column)} sizes for {len(symbols)} symbols")
            unpacked[key] = {s: n for s, n in zip(symbols, column) if n}
        out[arch] = unpacked
    return out
