"""A small ELF64 little-endian reader: headers, sections and symbol tables.

Hand-written on purpose: pyelftools builds a construct object per symbol, and
``bench/bench_symbols.py`` measured it at 72x the cost of this reader on the
same cubin symbol tables (docs/figures.md), far above the 1.5x budget we
set. We need four structures, so the reader stays small. Layouts follow the
System V gABI names.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from functools import cached_property, lru_cache
from typing import NamedTuple

from ._blob import Blob

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1

ET_REL = 1  # a relocatable file: -rdc cubins, linked by the device link

EM_CUDA = 190
EM_AMDGPU = 224

SHT_SYMTAB = 2
SHT_RELA = 4
SHT_NOBITS = 8
SHT_REL = 9
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00  # SHN_ABS, SHN_COMMON...: reserved indices, no section
SHN_XINDEX = 0xFFFF

STT_OBJECT = 1
STT_FUNC = 2
STT_SECTION = 3
STT_FILE = 4

SHF_EXECINSTR = 0x4

# e_ident[16], e_type, e_machine, e_version, e_entry, e_phoff, e_shoff,
# e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
Elf64_Ehdr = struct.Struct("<16sHHIQQQIHHHHHH")
# sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
# sh_addralign, sh_entsize
Elf64_Shdr = struct.Struct("<IIQQQQIIQQ")
# st_name, st_info, st_other, st_shndx, st_value, st_size
Elf64_Sym = struct.Struct("<IBBHQQ")
# r_offset, r_info (symbol << 32 | type); RELA adds r_addend
Elf64_Rel = struct.Struct("<QQ")
Elf64_Rela = struct.Struct("<QQq")


class Section(NamedTuple):
    index: int
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int = 0
    flags: int = 0


class Header(NamedTuple):
    """Every field of a section header, the name undecoded (:meth:`ElfFile.all_headers`)."""

    name: bytes
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int


class Relocation(NamedTuple):
    offset: int
    type: int
    symbol: int  # an index into the section's symbol table
    addend: int  # 0 for SHT_REL


class Symbol(NamedTuple):
    name: str
    info: int
    other: int
    shndx: int
    size: int = 0  # st_size: a function's code bytes, an object's data bytes
    value: int = 0  # st_value: an offset in its section (relocatable files), or an address

    @property
    def type(self) -> int:
        return self.info & 0xF


def is_elf(blob: Blob) -> bool:
    return blob.startswith(ELF_MAGIC)


class ElfFile:
    """Headers are read eagerly, section contents lazily."""

    def __init__(self, blob: Blob) -> None:
        self.blob = blob
        header = blob.unpack(Elf64_Ehdr, 0, "ELF header")
        ident, self.machine = header[0], header[2]
        self.ident, self.type, self.flags = ident, header[1], header[7]  # e_ident, e_type, e_flags
        shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
        if ident[:4] != ELF_MAGIC:
            raise blob.error("not an ELF file")
        if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
            raise blob.error("only 64-bit little-endian ELF is supported")
        if shoff and shentsize != Elf64_Shdr.size:
            raise blob.error(f"unexpected section header size {shentsize}", 0x3A)
        self._shoff = shoff
        self._shnum = shnum
        self._shstrndx = shstrndx

    def _raw_header(self, index: int) -> tuple:
        return self.blob.unpack(
            Elf64_Shdr, self._shoff + index * Elf64_Shdr.size, f"section header {index}"
        )

    @cached_property
    def _table(self) -> tuple[list[tuple], bytes]:
        """Raw section headers and the section name table; names are decoded only on demand."""
        if not self._shoff:
            return [], b""
        shnum, shstrndx = self._shnum, self._shstrndx
        if shnum == 0 or shstrndx == SHN_XINDEX:  # counts too large for the ELF header
            first = self._raw_header(0)
            shnum = shnum or first[5]
            shstrndx = first[6] if shstrndx == SHN_XINDEX else shstrndx
        table = self.blob.read(self._shoff, shnum * Elf64_Shdr.size, "section header table")
        raw = list(Elf64_Shdr.iter_unpack(table))
        if not 0 <= shstrndx < shnum:
            raise self.blob.error(f"section name table index {shstrndx} out of range")
        names_hdr = raw[shstrndx]
        return raw, self.blob.read(names_hdr[4], names_hdr[5], "section name table")

    def _section(self, index: int, name: str | None = None) -> Section:
        raw, names = self._table
        if not 0 <= index < len(raw):
            raise self.blob.error(f"section index {index} out of range")
        h = raw[index]
        if name is None:
            name = _cstring(self.blob, names, h[0], "section name")
        return Section(index, name, h[1], h[4], h[5], h[6], h[7], h[2])

    def section_at(self, index: int) -> Section:
        """The section with header ``index``; a :class:`FormatError` when there is none."""
        return self._section(index)

    @property
    def names_index(self) -> int:
        """``e_shstrndx``, resolved: the index of the section name table."""
        raw = self._table[0]
        return self._shstrndx if self._shstrndx != SHN_XINDEX or not raw else raw[0][6]

    @cached_property
    def sections(self) -> tuple[Section, ...]:
        return tuple(self._section(i) for i in range(len(self._table[0])))

    def all_headers(self) -> list[Header]:
        """Every section header with all its fields, by index; names checked as :meth:`section_columns` does."""
        raw, names = self._checked_names()
        find = names.find
        return [_new(Header, (names[h[0]:find(b"\0", h[0])], h[1], h[2], h[4], h[5], h[6], h[7], h[8], h[9]))
                for h in raw]

    def _checked_names(self) -> tuple[list[tuple], bytes]:
        raw, names = self._table
        if raw and (max(raw)[0] >= len(names) or not names.endswith(b"\0")):  # max: the largest name offset
            raise self.blob.error("a section name runs outside the section name table")
        return raw, names

    def section_columns(self) -> tuple[list[bytes], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Every section's name (undecoded), type, offset and size, by column and by index: for walks of a
        cubin's thousands of sections, where a :class:`Section`, or a tuple, each costs more than the walk."""
        raw, names = self._checked_names()
        if not raw:
            return [], (), (), ()
        columns = list(zip(*raw))  # Elf64_Shdr's fields, by column
        find = names.find
        return [names[at : find(b"\0", at)] for at in columns[0]], columns[1], columns[4], columns[5]

    def section(self, name: str) -> Section | None:
        """The first section called ``name``, found without decoding the other names."""
        raw, names = self._table
        wanted = name.encode() + b"\0"
        for i, h in enumerate(raw):
            if names.startswith(wanted, h[0]):
                return self._section(i, name)
        return None

    def has_section_name_containing(self, fragment: bytes) -> bool:
        """A cheap pre-check before walking every section's name."""
        return fragment in self._table[1]

    def window(self, section: Section) -> Blob:
        if section.type == SHT_NOBITS:
            raise self.blob.error(f"section {section.name} has no file contents")
        return self.blob.window(section.offset, section.size, f"section {section.name}")

    def read(self, section: Section) -> bytes:
        return self.window(section).read(0, section.size, f"section {section.name}")

    def symbol_table(self, *types: int) -> Section | None:
        """The first section of one of ``types`` (e.g. SHT_SYMTAB, then SHT_DYNSYM)."""
        raw = self._table[0]
        for wanted in types:
            for i, h in enumerate(raw):
                if h[1] == wanted:
                    return self._section(i)
        return None

    def iter_symbols(self, table: Section, other_mask: int = 0) -> Iterator[Symbol]:
        """Symbols of ``table``; with ``other_mask``, only those whose ``st_other`` has one of its bits.

        The mask is applied to a strided slice of the table at C speed, so a
        cubin's thousands of section symbols cost no Python work.
        """
        if table.size % Elf64_Sym.size:
            raise self.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        data = self.read(table)
        strings = self.read(self._section(table.link))
        if other_mask:
            indices = _matching(data[_ST_OTHER :: Elf64_Sym.size], other_mask)
        else:
            indices = range(len(data) // Elf64_Sym.size)
        for i in indices:
            name, info, other, shndx, value, size = Elf64_Sym.unpack_from(data, i * Elf64_Sym.size)
            yield Symbol(_cstring(self.blob, strings, name, "symbol name"), info, other, shndx, size, value)

    def header_list(self) -> tuple[Header, ...]:
        """:meth:`all_headers`, made once per file and then shared (a cubin's sizes and digests both walk
        them); its errors each time it is asked until it has them."""
        found: tuple[Header, ...] | None = self.__dict__.get("_header_list")
        if found is None:
            found = self.__dict__["_header_list"] = tuple(self.all_headers())
        return found

    def symbol_rows(self, table: Section, other_mask: int = 0) -> tuple[list[tuple[int, int, int, int, int, int]],
                                                                       list[str]]:
        """What :meth:`iter_symbols` gives, its errors too, without a :class:`Symbol` each: every entry's
        raw fields ``(st_name, st_info, st_other, st_shndx, st_value, st_size)``, and its name, each
        decoded on its own as :meth:`iter_symbols` decodes it (one object per entry). With ``other_mask``,
        only the entries whose ``st_other`` has one of its bits (a cubin's kernels, of its thousands). Made
        once per table and mask, and then shared (an object's host digest, its functions and its data each
        walk its symbols): read them, never change them."""
        memo: dict[tuple[int, int], tuple[list[tuple[int, int, int, int, int, int]], list[str]]] = \
            self.__dict__.setdefault("_symbol_rows_memo", {})
        found = memo.get((table.index, other_mask))
        if found is None:
            found = memo[(table.index, other_mask)] = self._symbol_rows(table, other_mask)
        return found

    def _symbol_rows(self, table: Section, other_mask: int) -> tuple[list[tuple[int, int, int, int, int, int]],
                                                                     list[str]]:
        if table.size % Elf64_Sym.size:
            raise self.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        data = self.read(table)
        strings = self.read(self._section(table.link))
        find, size = strings.find, Elf64_Sym.size
        if other_mask:
            unpack = Elf64_Sym.unpack_from
            rows = [unpack(data, i * size) for i in _matching(data[_ST_OTHER::size], other_mask)]
        else:
            rows = list(Elf64_Sym.iter_unpack(data))
        ends = [find(b"\0", row[0]) for row in rows]  # -1 for a name at or past the table's end too
        try:
            if ends and min(ends) < 0:
                raise ValueError("a name outside its table")
            return rows, [strings[row[0] : end].decode() for row, end in zip(rows, ends)]
        except ValueError:  # UnicodeDecodeError too: the walk names the first name outside its table or
            list(self.iter_symbols(table, other_mask))  # not UTF-8
            raise

    def relocations(self, section: Section) -> list[Relocation]:
        """The entries of an SHT_REL or SHT_RELA section."""
        layout = Elf64_Rela if section.type == SHT_RELA else Elf64_Rel
        if section.type not in (SHT_REL, SHT_RELA) or section.size % layout.size:
            raise self.blob.error(f"{section.name} is not a relocation section of {layout.size}-byte entries")
        entries = layout.iter_unpack(self.read(section))
        if layout is Elf64_Rela:
            return [_new(Relocation, (o, i & 0xFFFFFFFF, i >> 32, a)) for o, i, a in entries]
        return [_new(Relocation, (o, i & 0xFFFFFFFF, i >> 32, 0)) for o, i in entries]


_ST_OTHER = 5  # offset of st_other in Elf64_Sym
_new = tuple.__new__  # a NamedTuple made from its fields' tuple: what its __new__ does, without a Python call


@lru_cache(maxsize=8)
def _mask_table(mask: int) -> bytes:
    return bytes(1 if b & mask else 0 for b in range(256))


def _matching(column: bytes, mask: int) -> Iterator[int]:
    """Indices of the bytes in ``column`` that share a bit with ``mask``."""
    flags = column.translate(_mask_table(mask))
    at = flags.find(1)
    while at >= 0:
        yield at
        at = flags.find(1, at + 1)


def _cstring(blob: Blob, table: bytes, offset: int, what: str) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise blob.error(f"{what} offset {offset} outside its string table")
    try:
        return table[offset:end].decode()
    except UnicodeDecodeError:
        raise blob.error(f"{what} at string offset {offset} is not UTF-8") from None
