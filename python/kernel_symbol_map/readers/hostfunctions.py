"""An object's host code, function by function: each function's digest, its static initialisers, and its data.

What ``select --base-map`` compares to find *which* host functions a change
touched, so that a host change reaches the tests that ran one of them (a
record's ``host_functions``) rather than every test that loaded the library.
Normalised as :mod:`.hostdigest` normalises the whole object (nvcc's
temporary names, its unit hash, the build's folders in strings), so that two
clean builds in two folders give the same digests:

* a **function** (a defined ``STT_FUNC`` symbol of a host code section; the
  names at one address share one digest) is its bytes and its relocations,
  each by what it points at: a symbol by its name, a string by its text and
  the offset in it, a mergeable constant by the bytes around it, a place in
  code by the function there and the offset in it, anything else by its
  section's name and the offset. A function inlined into another shows in its
  caller's bytes. With ``-ffunction-sections`` every call is a relocation;
  without it a call inside one section is a displacement in the caller's
  bytes, so a function that moves changes its callers' digests too (more
  tests, never fewer);
* the **static initialisers** (and finalisers) are the functions that
  ``.init_array``, ``.fini_array``, ``.ctors`` or ``.dtors`` point at: their
  code runs in every process that loads the library;
* where the object was compiled with host coverage (``-finstrument-functions``:
  a function calls :data:`ENTRY` as it starts), the functions that do not
  (``unseen``): no recording can say whether a test ran one;
* the **data** is everything else that is not layout: data sections and the
  relocations in them, the symbols of data, the types an exception handler
  catches. Unwind tables, string and constant pools (each reference to them
  is digested where it is made) and undefined symbols (a function's digest
  names what it calls) are left to the functions.

When the functions do not account for the code (a relocation outside every
function, code no symbol covers), :func:`host_parts` says why and the object
is compared whole.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from ._digest import new
from .elf import SHF_EXECINSTR, SHT_NOBITS, SHT_RELA, SHT_SYMTAB, STT_FUNC, STT_SECTION, ElfFile, Elf64_Rela, Header
from .hostdigest import (
    DEVICE_SEGMENTS, MASKED, NOT_CODE, SHF_MERGE, SHF_STRINGS, TMPXFT, _masked_strings, _STR_ALIGN, data_digest,
    feed, section_name, unit_of, _NUMBERED,
)
from .folders import NONE, Folders
from .. import _unitnames as unitnames

SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY = 14, 15, 16
_STARTERS = (b".init_array", b".fini_array", b".preinit_array", b".ctors", b".dtors")
# x86-64's PC-relative relocations (PC32, PLT32, GOTPCREL, GOTPCRELX, REX_GOTPCRELX): the place is the addend
# plus the distance from the field to the instruction's end, 4 bytes or a few more.
_PC_RELATIVE = frozenset({2, 4, 9, 41, 42})
_AFTER = 12  # how far past a PC-relative addend its place may lie (the field, an immediate after it)
ENTRY = "__cyg_profile_func_enter"  # what -finstrument-functions calls as each function starts
STB_LOCAL = 0
PADDING = 64  # code between two functions no longer than this may be alignment...
# ...when made of these bytes: x86-64's one- and multi-byte no-ops and int3, AArch64's nop (d503201f), zeros
_FILL = bytes({0x00, 0x0F, 0x1F, 0x2E, 0x40, 0x44, 0x66, 0x80, 0x84, 0x90, 0xCC, 0x20, 0x03, 0xD5})


@dataclass(frozen=True)
class HostParts:
    """An object's host code by parts: ``functions`` (name -> digest), ``init`` (the names of its static
    initialisers and finalisers), ``data`` (the digest of the rest). Names are the object's with nvcc's
    unit hash and temporary file name masked, as another folder's build spells them."""

    functions: dict[str, str]
    init: frozenset[str]
    data: str
    # Compiled with host coverage (a function calls ENTRY): the functions that do not, whose runs no coverage
    # sees (a GCC clone's cold part, a no_instrument_function); None when no function calls it.
    unseen: frozenset[str] | None = None


@dataclass(frozen=True, order=True)
class _Function:
    shndx: int
    start: int
    size: int
    names: tuple[str, ...]


def host_parts(elf: ElfFile, device_sections: frozenset[bytes], device_prefix: bytes,
               folders: Folders = NONE) -> HostParts | str:
    """``elf``'s host code by parts, or why it cannot be split (the object is then compared whole).
    Sections named in ``device_sections``, starting with ``device_prefix``, or in :data:`DEVICE_SEGMENTS`
    are device code's, as :func:`.hostdigest.host_digest` has them."""
    headers = elf.header_list()
    hidden = {i for i, x in enumerate(headers)
              if x.name in device_sections or x.name in DEVICE_SEGMENTS or x.name.startswith(device_prefix)}
    tables = [i for i, x in enumerate(headers) if x.type == SHT_SYMTAB]
    if len(tables) != 1:
        return "it has no symbol table" if not tables else "it has several symbol tables"
    code = {i for i, x in enumerate(headers) if x.flags & SHF_EXECINSTR and x.type != SHT_NOBITS
            and i not in hidden and not x.name.startswith(NOT_CODE)}
    unit = unit_of(elf, headers, hidden)
    rows, names = elf.symbol_rows(elf.section_at(tables[0]))

    spelled: dict[str, str] = {}  # a name as any build spells it: each worked out once

    def named(name: str) -> str:
        found = spelled.get(name)
        if found is None:
            masked = TMPXFT.sub(MASKED, name.encode()) if "tmpxft_" in name else name.encode()
            found = spelled[name] = unitnames.masked(masked, unit).decode()
        return found

    def section_key(i: int) -> bytes:
        return section_name(headers[i], unit) if i < len(headers) else b"%d" % i

    at: dict[tuple[int, int], list[str]] = {}
    sizes: dict[tuple[int, int], int] = {}
    for (_, info, _other, shndx, value, size), name in zip(rows, names):
        if info & 0xF == STT_FUNC and shndx in code and size:
            if value + size > headers[shndx].size:
                raise elf.blob.error(f"function {name} runs past the end of its section")
            at.setdefault((shndx, value), []).append(name)
            sizes[(shndx, value)] = max(size, sizes.get((shndx, value), 0))
    functions = sorted(_Function(s, v, sizes[(s, v)], tuple(sorted(n))) for (s, v), n in at.items())
    by_section: dict[int, list[_Function]] = {}
    for f in functions:
        by_section.setdefault(f.shndx, []).append(f)
    starts = {i: [f.start for f in fs] for i, fs in by_section.items()}

    def function_at(shndx: int, place: int) -> tuple[_Function, int] | None:
        """The function holding ``place`` in section ``shndx``, and the offset in it."""
        k = bisect.bisect_right(starts.get(shndx, []), place) - 1
        if k < 0:
            return None
        f = by_section[shndx][k]
        return (f, place - f.start) if place < f.start + f.size else None

    contents: dict[int, bytes] = {}

    def raw(i: int) -> bytes:
        if i not in contents:
            x = headers[i]
            contents[i] = b"" if x.type == SHT_NOBITS else elf.blob.read(x.offset, x.size, f"section {x.name!r}")
        return contents[i]

    gap = _uncovered(headers, code, by_section, raw)
    if gap:
        return gap

    strings = {i: _masked_strings(unitnames.masked(raw(i), unit), folders) for i, x in enumerate(headers)
               if x.flags & SHF_STRINGS and x.entsize <= 1 and x.type != SHT_NOBITS and i not in hidden}

    def target(kind: int, index: int, addend: int) -> tuple[object, ...]:
        """What a relocation points at, by name (see the module docstring)."""
        if index >= len(rows):
            raise elf.blob.error(f"a relocation names symbol {index}, past the symbol table")
        _, info, _other, shndx, value, _size = rows[index]
        pooled = shndx in strings or shndx < len(headers) and headers[shndx].flags & SHF_MERGE
        if info & 0xF != STT_SECTION and not pooled:  # a label in a pool (.LC0) is the entry it labels
            name = named(names[index])
            if info >> 4 == STB_LOCAL and info & 0xF != STT_FUNC:  # CSWTCH.9473: numbered in the order made
                name = _NUMBERED.sub("", name)
            return ("symbol", name, addend)
        place = value + addend
        ahead = range(place, place + _AFTER + 1) if kind in _PC_RELATIVE else range(place, place + 1)
        if shndx in strings:
            starts_, texts = strings[shndx]
            for p in ahead:
                k = bisect.bisect_right(starts_, p) - 1
                if k >= 0 and p - starts_[k] <= len(texts[k]):
                    return ("string", _STR_ALIGN.sub(b".str", section_key(shndx)), texts[k], p - starts_[k])
        if shndx in code:
            for p in ahead:
                hit = function_at(shndx, p)
                if hit is not None and hit[1] == 0:
                    return ("function", named(hit[0].names[0]), p - place)
            hit = function_at(shndx, place)
            if hit is not None:
                return ("in function", named(hit[0].names[0]), hit[1])
        if shndx < len(headers) and headers[shndx].flags & SHF_MERGE and headers[shndx].entsize:
            data = raw(shndx)  # a constant: the bytes it may be, whatever its place
            return ("constant", section_key(shndx), data[max(place - 8, 0): place + headers[shndx].entsize + _AFTER])
        return ("section", section_key(shndx), place)

    def owner(shndx: int, place: int) -> _Function | None:
        """The function a place in code belongs to: the last one to start at or before it (a jump table's
        entry points into its function, at an offset that may also count the entry's place in the table)."""
        k = bisect.bisect_right(starts.get(shndx, []), place) - 1
        return by_section[shndx][k] if k >= 0 else None

    relocated: dict[int, list[tuple[int, int, int, int]]] = {}  # code section -> its relocations
    starters: list[tuple[int, int, int]] = []  # what .init_array and the like point at
    found: dict[_Function, list[tuple[object, ...]]] = {f: [] for f in functions}
    for i, x in enumerate(headers):
        if x.type != SHT_RELA or x.link != tables[0] or x.info in hidden or x.info >= len(headers) \
                or headers[x.info].name.startswith((*NOT_CODE, b".eh_frame", b".gcc_except_table")):
            continue
        data = raw(i)
        if len(data) % Elf64_Rela.size:
            raise elf.blob.error(f"relocation section {x.name!r} is not a whole number of entries")
        entries = [(o, info & 0xFFFFFFFF, info >> 32, a) for o, info, a in Elf64_Rela.iter_unpack(data)]
        if x.info in code:
            relocated.setdefault(x.info, []).extend(entries)
            continue
        if _starter(headers, x.info):
            starters.extend((kind, index, addend) for _o, kind, index, addend in entries)
        for _offset, _kind, index, addend in sorted(entries):  # data that points into code: a jump table
            if index >= len(rows):
                raise elf.blob.error(f"{x.name!r} names symbol {index}, past the symbol table")
            _, info, _other, shndx, value, _size = rows[index]
            f = owner(shndx, value + addend) if info & 0xF == STT_SECTION and shndx in code else None
            if f is not None:  # its entries' places in the function are the function's, by the table's order
                found[f].append(("pointed at from", section_key(x.info), value + addend - f.start))

    # Each function's relocations, in the order of their places in it: a section's, sorted by offset, sliced
    # at its functions' bounds (a relocation between two functions is in none).
    relocations: dict[_Function, list[tuple[object, ...]]] = {}
    for shndx, entries in relocated.items():
        entries.sort()
        offsets = [e[0] for e in entries]
        claimed = 0
        pointed = {key: target(*key) for key in {(k, i, a) for _o, k, i, a in entries}}  # calls to one repeat
        for f in by_section.get(shndx, []):
            lo, hi = bisect.bisect_left(offsets, f.start), bisect.bisect_left(offsets, f.start + f.size)
            relocations[f] = [(o - f.start, k, *pointed[k, i, a]) for o, k, i, a in entries[lo:hi]]
            claimed += hi - lo
        if claimed != len(entries):
            stray = next(o for o in offsets if function_at(shndx, o) is None)
            return f"a relocation at {stray:#x} in {headers[shndx].name.decode(errors='replace')} is in no function"
    entered = {f for f, refs in relocations.items() if any(r[2:4] == ("symbol", ENTRY) for r in refs)} \
        if ENTRY in names else set()  # an object that names no ENTRY is not instrumented
    digests: dict[str, str] = {}
    for f in functions:
        h = new(b"host function")
        feed(h, raw(f.shndx)[f.start : f.start + f.size], repr(relocations.get(f, [])),
             repr(sorted(found[f], key=repr)))
        digest = h.hexdigest()
        for name in f.names:
            digests[named(name)] = digest
    init: set[str] = set()
    for kind, index, addend in starters:
        _, info, _other, shndx, value, _size = rows[index] if index < len(rows) else (0,) * 6
        hit = function_at(shndx, value + (addend if info & 0xF == STT_SECTION else 0))
        if hit is None or hit[1]:
            return f"a static initialiser points at {target(kind, index, addend)[1]!r}, which is no function's start"
        init.update(named(n) for n in hit[0].names)

    def located(shndx: int, place: int) -> tuple[object, ...]:
        """A place in code as data refers to it: a function's start, or a place in one (its digest has where)."""
        f = owner(shndx, place)
        if f is None:
            return ("section", section_key(shndx), place)
        return ("function", named(f.names[0])) if place == f.start else ("in function", named(f.names[0]))

    unseen = frozenset(named(n) for f in functions if f not in entered for n in f.names) if entered else None
    return HostParts(digests, frozenset(init), data_digest(elf, headers, hidden, code, unit, located, folders), unseen)


def instrumented(elf: ElfFile) -> bool:
    """Whether ``elf`` was compiled with host coverage: its symbol table names :data:`ENTRY` (a search of the
    names' bytes, without parsing the table)."""
    table = elf.section(".symtab")
    if table is None or table.link >= len(elf.header_list()):
        return False
    return ENTRY.encode() in elf.read(elf.section_at(table.link))


def _starter(headers: list[Header], i: int) -> bool:
    return i < len(headers) and (headers[i].type in (SHT_INIT_ARRAY, SHT_FINI_ARRAY, SHT_PREINIT_ARRAY)
                                 or headers[i].name.startswith(_STARTERS))


def _uncovered(headers: list[Header], code: set[int], by_section: dict[int, list[_Function]],
               raw: Callable[[int], bytes]) -> str:
    """Why the functions do not account for the code: a section with bytes outside every function that
    are more than alignment (a short run of no-ops, traps or zeros)."""
    for i in sorted(code):
        end, gaps = 0, []
        for f in by_section.get(i, []):
            if f.start > end:
                gaps.append((end, f.start))
            end = max(end, f.start + f.size)
        gaps.append((end, headers[i].size))
        if any(b - a > PADDING or raw(i)[a:b].translate(None, _FILL) for a, b in gaps if b > a):
            return f"its section {headers[i].name.decode(errors='replace')} holds code no function symbol covers"
    return ""

