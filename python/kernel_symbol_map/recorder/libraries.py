"""The ELF images a process has loaded, by file name: what a record's ``libraries`` lists.

A name is the file's as it was loaded and, where that is a link (a SONAME
such as ``libggml.so.0``), the file's it resolves to as well, so that a map
that knows either finds it. The images are the executable and every shared
object the loader holds now (``dl_iterate_phdr``, which sees ``dlopen`` too);
native children report theirs through the audit library (:mod:`.audit`).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from functools import lru_cache

_NOT_FILES = frozenset({"linux-vdso.so.1", "linux-gate.so.1"})


class _PhdrInfo(ctypes.Structure):
    """``struct dl_phdr_info`` (link.h), up to the load and unload counters."""

    _fields_ = [("dlpi_addr", ctypes.c_size_t), ("dlpi_name", ctypes.c_char_p), ("dlpi_phdr", ctypes.c_void_p),
                ("dlpi_phnum", ctypes.c_uint16), ("dlpi_adds", ctypes.c_ulonglong), ("dlpi_subs", ctypes.c_ulonglong)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_PhdrInfo), ctypes.c_size_t, ctypes.c_void_p)
_last: tuple[tuple[int, int], frozenset[str]] | None = None
_last_paths: tuple[tuple[int, int], list[str]] | None = None


def file_names(paths: Iterable[str]) -> set[str]:
    """Each path's file name, and its target's where it is a link."""
    found = set()
    for path in paths:
        if path and path not in _NOT_FILES:
            found.add(os.path.basename(path))
            found.add(os.path.basename(_real(path)))
    return found


@lru_cache(maxsize=4096)
def _real(path: str) -> str:
    return os.path.realpath(path)


def loaded() -> frozenset[str] | None:
    """This process's images by file name; None where the loader cannot be asked (not an ELF platform)."""
    global _last
    try:
        iterate = ctypes.CDLL(None).dl_iterate_phdr
    except (OSError, AttributeError):
        return None
    paths: list[str] = []
    counters: list[tuple[int, int]] = []

    def each(info: ctypes._Pointer, size: int, _data: ctypes.c_void_p) -> int:  # type: ignore[type-arg]
        entry = info.contents
        if not counters and size >= ctypes.sizeof(_PhdrInfo):
            counters.append((entry.dlpi_adds, entry.dlpi_subs))
            if _last is not None and _last[0] == counters[0]:
                return 1  # nothing loaded or unloaded since the last look: stop here
        paths.append(os.fsdecode(entry.dlpi_name or b""))
        return 0

    stopped = iterate(_CALLBACK(each), None)
    if stopped and _last is not None:
        return _last[1]
    paths[0:1] = [_executable()]  # the first image is the program, named "" by the loader
    names = frozenset(file_names(paths))
    if counters:
        _last = (counters[0], names)
    return names


def loaded_paths() -> list[str]:
    """The paths of the shared objects this process holds now, as the loader names them (no executable)."""
    try:
        iterate = ctypes.CDLL(None).dl_iterate_phdr
    except (OSError, AttributeError):
        return []
    global _last_paths
    paths: list[str] = []
    counters: list[tuple[int, int]] = []

    def each(info: ctypes._Pointer, size: int, _data: ctypes.c_void_p) -> int:  # type: ignore[type-arg]
        entry = info.contents
        if not counters and size >= ctypes.sizeof(_PhdrInfo):
            counters.append((entry.dlpi_adds, entry.dlpi_subs))
            if _last_paths is not None and _last_paths[0] == counters[0]:
                return 1  # nothing loaded or unloaded since the last look
        name = os.fsdecode(entry.dlpi_name or b"")
        if name and name not in _NOT_FILES:
            paths.append(name)
        return 0

    if iterate(_CALLBACK(each), None) and _last_paths is not None:
        return _last_paths[1]
    if counters:
        _last_paths = (counters[0], paths)
    return paths


def _executable() -> str:
    try:
        return os.readlink("/proc/self/exe")
    except OSError:
        return sys.executable or ""
