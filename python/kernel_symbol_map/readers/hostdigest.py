"""An object's host-code digest: every section but the device-code containers and debug information.

What ``tests/oracle.py`` compares as host code, with what is provably noise
normalised and nothing more, so that two clean builds of one commit, in two
folders, give one digest:

* nvcc names its temporary files ``tmpxft_<pid>_<n>-...``, and that name lands
  in a host ``STT_FILE`` symbol (masked in the string table, at its length),
  with ``-ffunction-sections`` in the names of the sections of a file's static
  initializers (``.text.startup._GLOBAL__sub_I_tmpxft_...``), and in strings;
* nvcc's hash of the file's path in the names of its anonymous namespace and
  ``-rdc`` statics (:mod:`.._unitnames`), at its length, wherever it is;
* the build's folders in string literals (``__FILE__``, :mod:`.folders`): a
  string section (``.rodata.str1.1``) is digested as its strings, masked, and
  a relocation that points into it by which string and where in it, not by
  the section offset that a longer path moves;
* debug information (``.debug_*``, what ``-g`` adds, with the folders in it)
  and a build id: no instruction reads them;
* the device containers' place and size show in their symbols' values and
  sizes, which are device code's.

The symbol table is digested as it is otherwise, so relocation entries (which
name symbols by index) and symbols (which name sections by index) are
digested as they are: the same tables give them the same meaning. Section
offsets are layout, never compared.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from bisect import bisect_left, bisect_right

import regex

from ..errors import FormatError

from ._digest import new
from .elf import (
    SHN_UNDEF, SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB, STT_SECTION, ElfFile, Elf64_Rela, Elf64_Sym,
    Header,
)
from .. import _unitnames as unitnames
from .folders import NONE, Folders
from .._unitnames import unit_hash

TMPXFT = regex.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")
_TMPXFT_TEXT = regex.compile(TMPXFT.pattern.decode())
MASKED = b"tmpxft_xxxxxxxx_xxxxxxxx"  # as long as the name it masks: string offsets keep their meaning
DEVICE_SEGMENTS = frozenset({b".nvFatBinSegment", b".hipFatBinSegment"})  # each points at its container
_SHNDX = struct.Struct("<6xH16x")  # a symbol's st_shndx
SHF_STRINGS = 0x20
SHF_MERGE = 0x10
SHT_GROUP = 17
_STR_ALIGN = regex.compile(rb"\.str1\.\d+$")  # .rodata.str1.8: strings aligned to 8, of one set with .str1.1
_NUMBERED = regex.compile(r"\.\d+$")  # a local object's number, in the order GCC made it (CSWTCH.9473)
NOT_CODE = (b".debug_", b".zdebug_", b".gnu_debuglink", b".note.gnu.build-id")
BEFORE = 8  # a PC-relative relocation's addend points up to 8 bytes before its string (x86-64: -4, -5...)
WHOLE = 1 << 20  # an ELF up to this size is read once and sliced per section; a larger one section by section
_FED: dict[int, bytes] = {}  # an int field as feed feeds it (its length, its digits): types, flags, sizes repeat
_FED_LIMIT = 1 << 14


def feed(h: hashlib.blake2b, *fields: bytes | str | int) -> None:
    """What ``_digest.feed`` feeds, each field length-prefixed, in one update: the same digest, cheaper."""
    parts: list[bytes] = []
    for f in fields:
        if f.__class__ is int:
            fed = _FED.get(f)  # type: ignore[call-overload]
            if fed is None:
                digits = str(f).encode()
                fed = len(digits).to_bytes(8, "little") + digits
                if len(_FED) < _FED_LIMIT:
                    _FED[f] = fed  # type: ignore[index]
            parts.append(fed)
        else:
            data = f if isinstance(f, bytes) else str(f).encode()
            parts += (len(data).to_bytes(8, "little"), data)
    h.update(b"".join(parts))


def host_digest(elf: ElfFile, device_sections: frozenset[bytes], device_prefix: bytes,
                folders: Folders = NONE) -> str:
    """The digest (hex) of ``elf``'s host code: sections named in ``device_sections``, starting with
    ``device_prefix``, or in :data:`DEVICE_SEGMENTS`, debug information, and relocations of those, are
    left out; ``folders`` are masked in strings."""
    headers = elf.all_headers()
    hidden = {i for i, x in enumerate(headers)  # device containers, by index (out of range: no section's)
              if x.name in device_sections or x.name in DEVICE_SEGMENTS or x.name.startswith(device_prefix)}
    unread = {i for i, x in enumerate(headers) if x.name.startswith(NOT_CODE)}

    h = new(elf.ident, elf.type, elf.machine, elf.flags)
    tables = [i for i, x in enumerate(headers) if x.type in (SHT_SYMTAB, SHT_DYNSYM)]
    skip = {0, elf.names_index, *tables, *(headers[i].link for i in tables), *unread}
    blob = elf.blob
    try:
        whole = blob.read(0, blob.size, "ELF file") if blob.size <= WHOLE else b""  # one read, sliced
    except FormatError:
        whole = b""  # a file that shrank: each section's own read says so

    def raw(x: Header) -> bytes:
        if x.type == SHT_NOBITS:
            return b""
        if x.offset + x.size <= len(whole):
            return whole[x.offset : x.offset + x.size]
        # a larger file's, or past the end: the read's own check names it
        return blob.read(x.offset, x.size, f"section {x.name!r}")

    unit = _unit(elf, headers, tables, hidden, unread, raw)

    def contents(x: Header) -> bytes:
        return unitnames.masked(raw(x), unit)

    def named(x: Header) -> bytes:
        return section_name(x, unit)

    kept = [i for i, x in enumerate(headers)
            if not (i in skip or i in hidden or (x.type in (SHT_REL, SHT_RELA) and x.info in hidden | unread))]
    texts = [i for i in kept if headers[i].flags & SHF_STRINGS and headers[i].entsize <= 1
             and headers[i].type != SHT_NOBITS]  # string sections
    if any(_masks(contents(headers[i]), folders) for i in texts):
        # A longer path moves strings, and may move one into a section of its own: every index by name.
        strings = {i: _masked_strings(contents(headers[i]), folders) for i in texts}
        return _by_names(elf, headers, kept, hidden, strings, contents, named, unit, h)
    for i in tables:  # the table as it is, but where a container starts and how long it is: device code
        table = elf.section_at(i)
        if table.size % Elf64_Sym.size:
            raise elf.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        entries = bytearray(elf.read(table))  # packed again as unpacked: only a container's symbols change
        for at in [at for at, (shndx,) in enumerate(_SHNDX.iter_unpack(entries)) if shndx in hidden]:
            entries[at * Elf64_Sym.size + 8 : (at + 1) * Elf64_Sym.size] = bytes(16)  # st_value, st_size: 0
        names = unitnames.masked(elf.read(elf.section_at(table.link)), unit)
        feed(h, bytes(entries), TMPXFT.sub(MASKED, names) if b"tmpxft_" in names else names)
    for i in kept:
        x = headers[i]
        feed(h, named(x), x.type, x.flags, x.entsize, x.size, contents(x))
    return h.hexdigest()


def section_name(x: Header, unit: bytes | None) -> bytes:
    """A section's name as another folder's build names it: nvcc's temporary name and the unit's hash masked
    (``.text.startup._GLOBAL__sub_I_tmpxft_...``)."""
    return unitnames.masked(TMPXFT.sub(MASKED, x.name) if b"tmpxft_" in x.name else x.name, unit)


def _unit(elf: ElfFile, headers: list[Header], tables: list[int], hidden: set[int], unread: set[int],
          raw: Callable[[Header], bytes]) -> bytes | None:
    """The unit's hash, from the symbols' names and the host's strings: a file-static device variable's
    registered name (_INTERNAL_<hash>_...) may be a string no symbol is named after."""
    return unit_hash(b"\0".join([*(elf.read(elf.section_at(headers[i].link)) for i in tables),
                                  *(raw(x) for i, x in enumerate(headers) if x.flags & SHF_STRINGS
                                    and i not in hidden and i not in unread)]))


def unit_of(elf: ElfFile, headers: list[Header], hidden: set[int]) -> bytes | None:
    """The unit hash of ``elf``'s host code, as :func:`host_digest` finds it (``hidden``: device sections)."""
    tables = [i for i, x in enumerate(headers) if x.type in (SHT_SYMTAB, SHT_DYNSYM)]
    unread = {i for i, x in enumerate(headers) if x.name.startswith(NOT_CODE)}
    return _unit(elf, headers, tables, hidden, unread, lambda x: _read(elf, x))


def _read(elf: ElfFile, x: Header) -> bytes:
    return b"" if x.type == SHT_NOBITS else elf.blob.read(x.offset, x.size, f"section {x.name!r}")


def data_digest(elf: ElfFile, headers: list[Header], hidden: set[int], code: set[int], unit: bytes | None,
                located: Callable[[int, int], tuple[object, ...]], folders: Folders = NONE) -> str:
    """The digest of what :mod:`.hostfunctions` calls an object's data: its host code but the sections in
    ``code`` and the functions in them, unwind tables, string and constant pools (digested where code
    refers to them: a pool a data relocation points into stays), undefined symbols, and of exception
    tables only the types they catch. Every index is named, as :func:`_by_names` names them, and a place
    in code as ``located`` names it."""
    unread = {i for i, x in enumerate(headers) if x.name.startswith(NOT_CODE)}
    tables = [i for i, x in enumerate(headers) if x.type in (SHT_SYMTAB, SHT_DYNSYM)]
    skip = {0, elf.names_index, *tables, *(headers[i].link for i in tables), *unread}
    handlers = {i for i, x in enumerate(headers) if x.name.startswith(b".gcc_except_table")}
    dropped = code | handlers | {i for i, x in enumerate(headers) if x.name.startswith(b".eh_frame")}
    texts = [i for i, x in enumerate(headers) if x.flags & SHF_STRINGS and x.entsize <= 1
             and x.type != SHT_NOBITS and i not in hidden and i not in skip]
    pools = {i for i, x in enumerate(headers) if x.flags & SHF_MERGE and x.entsize and i not in texts}

    def contents(x: Header) -> bytes:
        return unitnames.masked(_read(elf, x), unit)

    def named(x: Header) -> bytes:
        return section_name(x, unit)

    relocations = [i for i, x in enumerate(headers) if x.type == SHT_RELA and x.link in tables]
    rows = {t: elf.symbol_rows(elf.section_at(t)) for t in tables}
    caught: set[str] = set()
    for i in relocations:  # a data relocation into a constant pool keeps the pool; a handler's, its type
        x = headers[i]
        if x.info in dropped - handlers or x.info in hidden or x.info in unread:
            continue
        data = _read(elf, x)
        if len(data) % Elf64_Rela.size:
            raise elf.blob.error(f"relocation section {x.name!r} is not a whole number of entries")
        symbols, names = rows[x.link]
        for _offset, info, _addend in Elf64_Rela.iter_unpack(data):
            index = info >> 32
            if index >= len(symbols):
                raise elf.blob.error(f"{x.name!r} names symbol {index}, past its symbol table")
            if x.info in handlers:
                caught.add(names[index])
            elif symbols[index][3] in pools:
                pools.discard(symbols[index][3])
    dropped |= pools
    kept = [i for i, x in enumerate(headers)
            if not (i in skip or i in hidden or i in dropped
                    or (x.type in (SHT_REL, SHT_RELA) and (x.info in hidden | unread | dropped)))]
    strings = {i: _masked_strings(contents(headers[i]), folders) for i in texts}
    h = new(elf.ident, elf.type, elf.machine, elf.flags, b"data")
    feed(h, b"caught", *sorted(unitnames.masked(n.encode(), unit) for n in caught))
    return _by_names(elf, headers, kept, hidden, strings, contents, named, unit, h, dropped=dropped,
                     located=located)


def _masks(data: bytes, folders: Folders) -> bool:
    """Whether a string section holds a string that a mask changes (the NUL before a string starts a path
    as its start does: the whole section is masked at once)."""
    return b"tmpxft_" in data or bool(folders) and b"/" in data and folders.mask(data) != data


def _masked_strings(data: bytes, folders: Folders) -> tuple[list[int], list[bytes]]:
    """Where each of a string section's strings starts, and the strings with nvcc's temporary names and
    ``folders`` masked."""
    starts, masked, at = [], [], 0
    for t in data.split(b"\0"):
        if t:  # not the NULs that align the next string (.str1.8): how many is layout
            starts.append(at)
            masked.append(folders.mask(TMPXFT.sub(MASKED, t) if b"tmpxft_" in t else t))
        at += len(t) + 1
    return starts, masked


def _by_names(elf: ElfFile, headers: list[Header], kept: list[int], hidden: set[int],
              strings: dict[int, tuple[list[int], list[bytes]]], contents: Callable[[Header], bytes],
              named: Callable[[Header], bytes], unit: bytes | None, h: hashlib.blake2b,
              dropped: set[int] | frozenset[int] = frozenset(),
              located: Callable[[int, int], tuple[object, ...]] | None = None) -> str:
    """The digest of an object whose string sections hold a masked string, every index named.

    GCC puts a string of 32 bytes or more in a section of its own alignment
    (``.rodata.str1.8``), so a longer folder can add a section, and every
    section and symbol index after it moves. Here a section is its name (the
    string sections of one name, ``.str1.<alignment>`` aside, are one set of
    strings), a symbol is its name and its section's, a reference into
    strings is the string it points at and where in it, and a COMDAT group is
    the names of its members.

    With ``dropped`` (:func:`data_digest`), the symbols of those sections,
    undefined symbols and string pools are left out, a group names only
    its members that are not dropped, and sections and symbols are taken in
    the order of what they say, not of where the build put them; ``located`` names a place in a dropped
    section (the function there).
    """
    key = {i: (_STR_ALIGN.sub(b".str", named(x)) if i in strings else named(x)) for i, x in enumerate(headers)}
    pools: dict[bytes, set[bytes]] = {}
    for i, (_, texts) in strings.items():
        pools.setdefault(key[i], set()).update(texts)
    symbols: dict[int, list[tuple[object, ...]]] = {}  # symbol table -> each symbol, by what it names
    unit_text = None if unit is None else unit.decode()

    def where(shndx: int, value: int) -> tuple[object, ...]:
        """A place, by name: a string and the offset in it; a device container's symbol, no place."""
        if shndx in strings:
            starts, texts = strings[shndx]
            k = bisect_left(starts, value)
            if k == len(starts) or starts[k] - value > BEFORE:
                k = max(bisect_right(starts, value) - 1, 0)
            return (key[shndx], texts[k], value - starts[k])
        if shndx in hidden:
            return (key[shndx],)
        if located is not None and shndx in dropped:
            return located(shndx, value)
        return (key.get(shndx, shndx), value)

    for i, x in enumerate(headers):
        if x.type not in (SHT_SYMTAB, SHT_DYNSYM):
            continue
        rows, names = elf.symbol_rows(elf.section_at(i))
        refs: list[tuple[object, ...]] = []
        facts = []
        for (_, info, other, shndx, value, size), name in zip(rows, names):
            masked = _TMPXFT_TEXT.sub("tmpxft", name) if "tmpxft_" in name else name
            if unit_text is not None and unit_text in masked:
                masked = unitnames.masked(masked.encode(), unit).decode()
            if dropped and (shndx in dropped or shndx == SHN_UNDEF or shndx in strings):  # a relocation may still
                # point at it (a label in a string pool, .LC0: the string it labels)
                refs.append(("section", shndx) if info & 0xF == STT_SECTION else ("symbol", masked, shndx, value))
                continue
            if dropped and info >> 4 == 0 and info & 0xF != STT_SECTION:  # a local's number (CSWTCH.9473) is
                masked = _NUMBERED.sub("", masked)  # the order the compiler made it in
            if info & 0xF == STT_SECTION:
                refs.append(("section", shndx))  # where a relocation points, resolved with its addend
                if shndx not in strings:
                    facts.append(("section", key.get(shndx, shndx)))
                continue
            refs.append(("symbol", masked, shndx, value))
            facts.append((masked, info, other, *where(shndx, value), 0 if shndx in hidden else size))
        symbols[i] = refs
        feed(h, b"symbols", repr(sorted(facts, key=repr) if dropped else facts))
    for family, texts in sorted(pools.items()) if not dropped else ():
        feed(h, family, *sorted(texts))
    sections: list[tuple[bytes | str | int, ...]] = []  # data alone: in the order of their names, not the build's
    out = sections.append if dropped else (lambda fields: feed(h, *fields))
    for i in kept:
        x = headers[i]
        if i in strings:
            continue
        data = contents(x)
        if x.type == SHT_GROUP and len(data) % 4 == 0:  # a flag, then its members' section indices
            flag, *members = struct.unpack(f"<{len(data) // 4}I", data)
            members = [m for m in members if m not in dropped and headers[m].info not in dropped] \
                if dropped and all(m < len(headers) for m in members) else members
            if dropped and not members:
                continue  # a group of code alone: the functions' digests have it
            data = repr((flag, [key.get(m, m) for m in members])).encode()
        elif x.type == SHT_RELA and x.link in symbols and len(data) % Elf64_Rela.size == 0:
            refs = symbols[x.link]
            entries = []
            for offset, info, addend in Elf64_Rela.iter_unpack(data):
                index = info >> 32
                ref = refs[index] if index < len(refs) else ("index", index)
                if ref[0] == "section":
                    entries.append((offset, info & 0xFFFFFFFF, *where(ref[1], addend)))  # type: ignore[arg-type]
                elif ref[2] in strings:  # a symbol in strings: where it points, by name
                    _, name, shndx, value = ref  # the symbol marks its string: found by it, the addend kept
                    entries.append((offset, info & 0xFFFFFFFF, name, *where(shndx, value), addend))  # type: ignore[arg-type]
                else:
                    entries.append((offset, info & 0xFFFFFFFF, ref[1], addend))
            data = repr(entries).encode()
            out((key[x.info] if x.info in key else x.info, x.type, data))  # which section it relocates
            continue
        out((key[i], x.type, x.flags, x.entsize, x.size, data))
    for fields in sorted(sections, key=repr):
        feed(h, *fields)
    return h.hexdigest()