"""Which host functions a test ran, from the coverage runtime of a build with host coverage.

A library or executable built with ``kernel_symbol_map(HOST_COVERAGE)`` holds
its own copy of the runtime (``native/kernel_symbol_map_coverage.c``): a set
of the addresses of the functions entered since it was last asked, read and
emptied by its one exported function, ``kernel_symbol_map_coverage_take``.
:class:`HostCoverage` finds each copy among the images the process has
loaded, asks every copy at each boundary of a scope (:meth:`take`), and names
each address by its image's file name and the function symbol at it, from the
image's own symbol table (``.symtab``: a stripped image names no static
function, and its tests list no host functions).

A scope's entry lists every image with a runtime known by then, an image
that ran nothing with no function: a consumer tells "ran none" from "was not
built with host coverage" that way. What ran in a window in which an image
with a runtime was first found is every test's as well: that image's static
initialisers ran then, and their effects outlive the window. Nothing is ever
listed that did not run; what cannot be told makes the part say so
(``problem``), and its tests then list no host functions at all: an
address in no symbol, a runtime that lost addresses (more distinct functions
in one window than its table holds).
"""

from __future__ import annotations

import _ctypes
import bisect
import ctypes
import os
from dataclasses import dataclass, field

from ..errors import FormatError
from ..readers._blob import OpenFile
from ..readers.elf import SHT_SYMTAB, STT_FUNC, ElfFile
from . import libraries

TAKE = "kernel_symbol_map_coverage_take"
CAPACITY = "kernel_symbol_map_coverage_capacity"
ET_EXEC = 2  # symbols hold addresses; a shared object's (ET_DYN) hold offsets from where it is loaded


class _DlInfo(ctypes.Structure):
    """``Dl_info`` (dlfcn.h)."""

    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


@dataclass
class _Image:
    """One loaded image with a runtime: its file names, where it is loaded, and its function symbols."""

    names: tuple[str, ...]
    base: int
    starts: list[int] = field(default_factory=list)  # sorted symbol values
    symbols: list[tuple[str, ...]] = field(default_factory=list)  # the names at each start


class HostCoverage:
    """This process's host coverage: scope -> image file name -> the functions it ran (mangled names)."""

    def __init__(self, every_test: str) -> None:
        self.every_test = every_test  # the scope of what belongs to every test
        self.scopes: dict[str, dict[str, set[str]]] = {}
        self.problem = ""
        self._checked: set[str] = set()  # image paths looked at for a runtime
        self._runtimes: dict[int, tuple[ctypes._CFuncPtr, str]] = {}  # take's address -> (take, its image)
        self._images: dict[str, _Image] = {}  # path -> image with a runtime
        self._buffer: ctypes.Array[ctypes.c_size_t] | None = None
        try:
            libc = ctypes.CDLL(None)
            self._dladdr = libc.dladdr
            self._dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
            self._dladdr.restype = ctypes.c_int
        except (OSError, AttributeError):
            self._dladdr = None

    def take(self, scope: str) -> None:
        """What every runtime saw run since the last take: ``scope``'s (and every test's, when a runtime was
        first found now)."""
        if self._dladdr is None:
            return
        found = self._find_runtimes()
        addresses: list[int] = []
        for take, image in self._runtimes.values():
            got = take(self._buffer, len(self._buffer))  # type: ignore[arg-type]
            if got < 0:
                self.problem = self.problem or f"host coverage of {image} lost functions (more in one window " \
                    "than its table holds)"
                continue
            addresses.extend(self._buffer[:got])  # type: ignore[index]
        scopes = [scope, self.every_test] if found and scope != self.every_test else [scope]
        for s in scopes:
            entry = self.scopes.setdefault(s, {})
            for image in self._images.values():
                for name in image.names:
                    entry.setdefault(name, set())
        for address in addresses:
            where = self._name(address)
            if where is None:
                continue
            names, functions = where
            for s in scopes:
                for name in names:
                    self.scopes[s].setdefault(name, set()).update(functions)

    def part(self) -> dict[str, object]:
        """What a part file says: ``host_functions`` (scope -> image -> names) or, when it cannot be told,
        None and ``host_problem``."""
        if self.problem:
            return {"host_functions": None, "host_problem": self.problem}
        return {"host_functions": {s: {n: sorted(f) for n, f in sorted(images.items())}
                                   for s, images in sorted(self.scopes.items())}}

    def _find_runtimes(self) -> bool:
        """Look at each image loaded since the last look for a runtime; whether one was found."""
        found = False
        for path in libraries.loaded_paths():
            if path in self._checked:
                continue
            self._checked.add(path)
            try:
                handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            except OSError:
                continue  # not loadable by name (the vDSO)
            try:
                take = getattr(handle, TAKE)
                capacity = getattr(handle, CAPACITY)
            except AttributeError:  # no runtime in reach: the image may be unloaded as if never looked at
                _ctypes.dlclose(handle._handle)
                continue
            address = ctypes.cast(take, ctypes.c_void_p).value or 0
            info = _DlInfo()
            if address in self._runtimes or not self._dladdr(address, ctypes.byref(info)):
                continue  # a runtime found before, through an image that depends on its own
            image = os.fsdecode(info.dli_fname or b"")
            take.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_long]
            take.restype = ctypes.c_long
            capacity.restype = ctypes.c_long
            size = int(capacity())
            if self._buffer is None or len(self._buffer) < size:
                self._buffer = (ctypes.c_size_t * size)()
            self._runtimes[address] = (take, image)
            try:
                self._images[image] = _symbols(image, info.dli_fbase or 0)
            except (OSError, FormatError) as e:
                self.problem = self.problem or f"host coverage: the symbols of {e}"
            found = True
        return found

    def _name(self, address: int) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(the file names of the image holding ``address``, the functions starting there); None, with the
        problem noted, when no function of an image with a runtime starts there."""
        info = _DlInfo()
        if not self._dladdr(address, ctypes.byref(info)):
            self.problem = self.problem or f"host coverage: address {address:#x} is in no loaded image"
            return None
        image = self._images.get(os.fsdecode(info.dli_fname or b""))
        if image is None:  # code of an image whose own runtime is another's (linked statically into two)
            path = os.fsdecode(info.dli_fname or b"")
            try:
                image = self._images[path] = _symbols(path, info.dli_fbase or 0)
            except (OSError, FormatError) as e:
                self.problem = self.problem or f"host coverage: the symbols of {e}"
                return None
        key = address - image.base
        k = bisect.bisect_left(image.starts, key)
        if k == len(image.starts) or image.starts[k] != key:
            self.problem = self.problem or f"host coverage: no function of {image.names[0]} starts at {key:#x}"
            return None
        return image.names, image.symbols[k]


def _symbols(path: str, base: int) -> _Image:
    """The function symbols of the image at ``path``, loaded at ``base``."""
    names = tuple(sorted(libraries.file_names([path])))
    with OpenFile(path) as blob:
        elf = ElfFile(blob)
        table = elf.symbol_table(SHT_SYMTAB)
        if table is None:  # .dynsym names only what it exports: a static function would be in no symbol
            raise FormatError(path, "no symbol table (stripped: with scikit-build-core, -C install.strip=false)")
        rows, symbols = elf.symbol_rows(table)
    at: dict[int, set[str]] = {}
    for (_, info, _other, shndx, value, _size), name in zip(rows, symbols):
        if info & 0xF == STT_FUNC and shndx and name:
            at.setdefault(value, set()).add(name)
    image = _Image(names, 0 if elf.type == ET_EXEC else base)
    for value in sorted(at):
        image.starts.append(value)
        image.symbols.append(tuple(sorted(at[value])))
    return image
