"""Native processes a recorded one starts: what their executable is, and the audit library that follows them.

A process launches kernels only through a GPU driver library (``libcuda``,
``libamdhip64``, ``libhsa-runtime64``). A statically linked executable (no
``PT_INTERP``) cannot load one, which :func:`kind` reads from the file. A
dynamic one is followed by glibc's loader through the audit library this
package ships (``LD_AUDIT``, ``native/kernel_symbol_map_audit.c``): it
writes which libraries each process image loaded, and how it ended; see
:mod:`.audit` for how those records are read.

A native process that does load a driver records its own kernels through
the CUPTI injection library this package ships
(``CUDA_INJECTION64_PATH``, ``native/kernel_symbol_map_inject.c``): the
CUDA driver loads it when the process initialises CUDA, and it writes the
part file a recorded interpreter writes. libcupti comes from
``KERNEL_SYMBOL_MAP_CUPTI``, else from ``cupti-python``'s
``nvidia-cuda-cupti``, else the loader's search path.

``KERNEL_SYMBOL_MAP_AUDIT`` and ``KERNEL_SYMBOL_MAP_INJECTION`` name
another library, or ``off`` turns one off: native children are then judged
as unseen (no audit), or a native CUDA child is (no injection).
"""

from __future__ import annotations

import os
import stat
import struct
import sys
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from ..errors import RecordingError

AUDIT_VARIABLE = "KERNEL_SYMBOL_MAP_AUDIT"  # another audit library's path, or "off"
LOADER_VARIABLE = "LD_AUDIT"
LIBRARY = "libkernel_symbol_map_audit.so"
INJECTION_VARIABLE = "KERNEL_SYMBOL_MAP_INJECTION"  # another injection library's path, or "off"
DRIVER_VARIABLE = "CUDA_INJECTION64_PATH"  # what the CUDA driver loads at cuInit
INJECTION = "libkernel_symbol_map_inject.so"
CUPTI_VARIABLE = "KERNEL_SYMBOL_MAP_CUPTI"  # the libcupti the injection opens

# What a process start will run: only STATIC is taken on trust (it cannot load a driver).
STATIC, DYNAMIC, SETUID, SCRIPT, UNKNOWN = "static", "dynamic", "setuid", "script", "unknown"

# ELF, as the System V ABI names it: e_ident, then the header's fields; a program header's p_type.
_IDENT = struct.Struct("<4sBBB9x")  # magic, class, data, version
_HEADER64 = {"<": struct.Struct("<HHIQQQIHHHHHH"), ">": struct.Struct(">HHIQQQIHHHHHH")}
_HEADER32 = {"<": struct.Struct("<HHIIIIIHHHHHH"), ">": struct.Struct(">HHIIIIIHHHHHH")}
_ELFCLASS32, _ELFCLASS64 = 1, 2
_ELFDATA = {1: "<", 2: ">"}
_PT_INTERP = 3
_MAX_PROGRAM_HEADERS = 4096


def audit_library() -> str | None:
    """The audit library to put in a child's ``LD_AUDIT``; None where there is none (or it is turned off)."""
    return _chosen(AUDIT_VARIABLE, LIBRARY)


def injection_library() -> str | None:
    """The CUPTI injection library to put in a child's ``CUDA_INJECTION64_PATH``; None where there is none."""
    return _chosen(INJECTION_VARIABLE, INJECTION)


def _chosen(variable: str, name: str) -> str | None:
    chosen = os.environ.get(variable, "")
    if chosen.strip().lower() == "off":
        return None
    if chosen:
        return chosen  # taken as it is: a library that cannot be loaded leaves the child unseen, and it says so
    return _installed(name)


@lru_cache(maxsize=None)
def _installed(name: str) -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    here = Path(__file__).resolve().parents[1]
    # An editable install keeps the Python files in the checkout and what CMake built in site-packages.
    for folder in [here, *(Path(entry) / "kernel_symbol_map" for entry in sys.path if entry)]:
        candidate = folder / "lib" / name
        if candidate.is_file():
            return str(candidate)
    return None


@lru_cache(maxsize=None)
def cupti_library() -> str | None:
    """libcupti as ``cupti-python`` has it (NVIDIA's ``nvidia-cuda-cupti``: ``nvidia/cu*/lib``); None if absent."""
    for entry in sys.path:
        for found in sorted(Path(entry or ".").glob("nvidia/cu*/lib/libcupti.so*"), reverse=True):
            return str(found)
    return None


def with_audit(current: str | None, library: str) -> str:
    """``LD_AUDIT``'s new value: ``library`` first, and whatever audit libraries were there already."""
    others = [entry for entry in (current or "").split(":") if entry and entry != library]
    return ":".join([library, *others])


def kind(path: str) -> str:
    """What ``path`` is to the loader: STATIC, DYNAMIC, SETUID (secure execution: no ``LD_AUDIT``), SCRIPT
    (``#!``: its interpreter runs) or UNKNOWN (unreadable, not ELF, malformed)."""
    try:
        st = os.stat(path)
        if st.st_mode & (stat.S_ISUID | stat.S_ISGID) or _capabilities(path):
            return SETUID
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"#!"):
                return SCRIPT
            return DYNAMIC if _interpreted(f, head) else STATIC
    except (OSError, RecordingError):
        return UNKNOWN


def _capabilities(path: str) -> bool:
    """File capabilities also make the loader run in secure mode."""
    try:
        return bool(os.getxattr(path, "security.capability"))
    except (OSError, AttributeError):
        return False


def _interpreted(f: BinaryIO, head: bytes) -> bool:
    """Whether the ELF file has a ``PT_INTERP`` program header (RecordingError when it is not ELF or is cut)."""
    if len(head) < _IDENT.size:
        raise RecordingError("not an ELF file")
    magic, klass, data, _version = _IDENT.unpack_from(head)
    if magic != b"\x7fELF" or klass not in (_ELFCLASS32, _ELFCLASS64) or data not in _ELFDATA:
        raise RecordingError("not an ELF file")
    order = _ELFDATA[data]
    layout = (_HEADER64 if klass == _ELFCLASS64 else _HEADER32)[order]
    if len(head) < _IDENT.size + layout.size:
        raise RecordingError("ELF header cut short")
    fields = layout.unpack_from(head, _IDENT.size)
    phoff, phentsize, phnum = fields[4], fields[8], fields[9]
    if phnum == 0 or phnum > _MAX_PROGRAM_HEADERS or phentsize < 4:
        raise RecordingError("no program headers")
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    if len(table) != phentsize * phnum:
        raise RecordingError("program headers cut short")
    p_type = struct.Struct(order + "I")
    return any(p_type.unpack_from(table, i * phentsize)[0] == _PT_INTERP for i in range(phnum))
