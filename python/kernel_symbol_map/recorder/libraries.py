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
    walked = _walk(_last[0] if _last is not None else None)
    if walked is None:
        return None
    counters, paths = walked
    if paths is None:
        return _last[1]  # type: ignore[index]
    paths[0:1] = [_executable()]  # the first image is the program, named "" by the loader
    names = frozenset(file_names(paths))
    if counters is not None:
        _last = (counters, names)
    return names


def loaded_paths() -> list[str]:
    """The paths of the shared objects this process holds now, as the loader names them (no executable)."""
    global _last_paths
    walked = _walk(_last_paths[0] if _last_paths is not None else None)
    if walked is None:
        return []
    counters, paths = walked
    if paths is None:
        return _last_paths[1]  # type: ignore[index]
    paths = [p for p in paths if p and p not in _NOT_FILES]
    if counters is not None:
        _last_paths = (counters, paths)
    return paths


def _walk(last: tuple[int, int] | None) -> tuple[tuple[int, int] | None, list[str] | None] | None:
    """(the loader's load and unload counters, every image's name as the loader has it, in its order); the
    names None when the counters are ``last`` (nothing loaded or unloaded since); None when the loader
    cannot be asked."""
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
            if last is not None and last == counters[0]:
                return 1  # nothing loaded or unloaded since the last look: stop here
        paths.append(os.fsdecode(entry.dlpi_name or b""))
        return 0

    stopped = iterate(_CALLBACK(each), None)
    return (counters[0] if counters else None), (None if stopped and last is not None else paths)


def _executable() -> str:
    try:
        return os.readlink("/proc/self/exe")
    except OSError:
        return sys.executable or ""
