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

import mmap
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
# A program header's (p_type, p_offset, p_filesz), its other fields skipped; a dynamic entry's (d_tag, d_val).
_PHDR64 = {"<": struct.Struct("<I4xQ16xQ"), ">": struct.Struct(">I4xQ16xQ")}
_PHDR32 = {"<": struct.Struct("<II8xI"), ">": struct.Struct(">II8xI")}
_DYN64 = {"<": struct.Struct("<qQ"), ">": struct.Struct(">qQ")}
_DYN32 = {"<": struct.Struct("<iI"), ">": struct.Struct(">iI")}
_PT_DYNAMIC, _PT_INTERP = 2, 3
_DT_NULL, _DT_NEEDED, _DT_SONAME = 0, 1, 14
_MAX_PROGRAM_HEADERS = 4096
_MAX_DYNAMIC_BYTES = 1 << 20
# The libraries through which a process launches kernels: CUDA's driver, and ROCm's HIP runtime and HSA.
DRIVER_LIBRARIES = ("libcuda", "libamdhip64", "libhsa-runtime64")
DRIVER_NAMES = tuple(f"{name}.so".encode() for name in DRIVER_LIBRARIES)  # as a program passes them to dlopen


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
    (``#!``: its interpreter runs) or UNKNOWN (unreadable, not ELF, malformed, or not one that can be trusted
    as static: see :func:`_static`)."""
    try:
        st = os.stat(path)
    except OSError:
        return UNKNOWN
    # The same file (as its inode and times tell) is read once per process: a suite starts the same few
    # programs again and again, and a static one is scanned whole.
    return _kind(path, st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@lru_cache(maxsize=1024)
def _kind(path: str, mode: int, *identity: int) -> str:
    try:
        if mode & (stat.S_ISUID | stat.S_ISGID) or _capabilities(path):
            return SETUID
        with open(path, "rb") as f:
            head = f.read(64)
            if head.startswith(b"#!"):
                return SCRIPT
            interpreted, linked = _program_headers(f, head)
            if interpreted:
                return DYNAMIC
            return STATIC if not linked and _static(f) else UNKNOWN
    except (OSError, RecordingError, ValueError, OverflowError):  # (an offset past what a file can hold)
        return UNKNOWN


def _static(f: BinaryIO) -> bool:
    """Whether a program with no interpreter can be trusted not to load a GPU driver: it names none.

    glibc's static ``dlopen`` loads shared objects all the same; a static program that loads the driver has
    the library's name in it (what it passes to ``dlopen``).
    """
    try:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return not any(data.find(name) >= 0 for name in DRIVER_NAMES)
    except (OSError, ValueError):  # empty, or not a mappable file
        return False


def _capabilities(path: str) -> bool:
    """File capabilities also make the loader run in secure mode."""
    try:
        return bool(os.getxattr(path, "security.capability"))
    except (OSError, AttributeError):
        return False


def _program_headers(f: BinaryIO, head: bytes) -> tuple[bool, bool]:
    """Whether the ELF file has a ``PT_INTERP`` program header, and whether its dynamic section names a
    ``DT_SONAME`` or a ``DT_NEEDED`` (the loader itself, or a library run directly: whatever it runs may load
    anything). RecordingError when it is not ELF or is cut short.

    Read by hand, not with pyelftools: this runs in a recorded process at every process start, where loading
    pyelftools would cost more than the start itself; the few fields read here are checked one by one.
    """
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
    program_header = (_PHDR64 if klass == _ELFCLASS64 else _PHDR32)[order]
    if phnum == 0 or phnum > _MAX_PROGRAM_HEADERS or phentsize < program_header.size:
        raise RecordingError("no program headers")
    table = _read(f, phoff, phentsize * phnum, "program headers")
    headers = [program_header.unpack_from(table, i * phentsize) for i in range(phnum)]
    if any(h[0] == _PT_INTERP for h in headers):
        return True, False
    entry = (_DYN64 if klass == _ELFCLASS64 else _DYN32)[order]
    for h in headers:
        if h[0] == _PT_DYNAMIC:
            offset, size = h[1], h[2]
            if size > _MAX_DYNAMIC_BYTES:
                raise RecordingError("dynamic section too large")
            dynamic = _read(f, offset, size - size % entry.size, "dynamic section")
            for tag, _value in entry.iter_unpack(dynamic):
                if tag == _DT_NULL:
                    break
                if tag in (_DT_NEEDED, _DT_SONAME):
                    return False, True
    return False, False


def _read(f: BinaryIO, offset: int, size: int, what: str) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise RecordingError(f"{what} cut short")
    return data
