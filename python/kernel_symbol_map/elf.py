"""A small ELF64 little-endian reader: headers, sections and symbol tables.

Hand-written on purpose: pyelftools builds a construct object per symbol, and
``bench/bench_elf.py`` measured it at several times the cost of these
``struct.iter_unpack`` loops on cubin symbol tables (the figure is in the
README), above the 1.5x budget issue 2 set. We need four structures, so the
reader stays small. Layouts follow the System V gABI names.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import NamedTuple

from ._blob import Blob

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1

EM_CUDA = 190
EM_AMDGPU = 224

SHT_SYMTAB = 2
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_XINDEX = 0xFFFF

STT_OBJECT = 1
STT_FUNC = 2

# e_ident[16], e_type, e_machine, e_version, e_entry, e_phoff, e_shoff,
# e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
Elf64_Ehdr = struct.Struct("<16sHHIQQQIHHHHHH")
# sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
# sh_addralign, sh_entsize
Elf64_Shdr = struct.Struct("<IIQQQQIIQQ")
# st_name, st_info, st_other, st_shndx, st_value, st_size
Elf64_Sym = struct.Struct("<IBBHQQ")


class Section(NamedTuple):
    index: int
    name: str
    type: int
    offset: int
    size: int
    link: int


class Symbol(NamedTuple):
    name: str
    info: int
    other: int
    shndx: int

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
    def sections(self) -> tuple[Section, ...]:
        if not self._shoff:
            return ()
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
        names = self.blob.read(names_hdr[4], names_hdr[5], "section name table")
        return tuple(
            Section(i, _cstring(self.blob, names, h[0], "section name"), h[1], h[4], h[5], h[6])
            for i, h in enumerate(raw)
        )

    @cached_property
    def _by_name(self) -> dict[str, Section]:
        found: dict[str, Section] = {}
        for s in self.sections:
            found.setdefault(s.name, s)
        return found

    def section(self, name: str) -> Section | None:
        return self._by_name.get(name)

    def window(self, section: Section) -> Blob:
        if section.type == SHT_NOBITS:
            raise self.blob.error(f"section {section.name} has no file contents")
        return self.blob.window(section.offset, section.size, f"section {section.name}")

    def read(self, section: Section) -> bytes:
        return self.window(section).read(0, section.size, f"section {section.name}")

    def symbol_table(self, *types: int) -> Section | None:
        """The first section of one of ``types`` (e.g. SHT_SYMTAB, then SHT_DYNSYM)."""
        for wanted in types:
            for s in self.sections:
                if s.type == wanted:
                    return s
        return None

    def iter_symbols(
        self, table: Section, where: Callable[[int, int, int], bool] | None = None
    ) -> Iterator[Symbol]:
        """Symbols of ``table``; ``where(info, other, shndx)`` filters before names are decoded."""
        if table.size % Elf64_Sym.size:
            raise self.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        if not 0 <= table.link < len(self.sections):
            raise self.blob.error(f"symbol table {table.name} links to missing section {table.link}")
        data = self.read(table)
        strings = self.read(self.sections[table.link])
        for name, info, other, shndx, _value, _size in Elf64_Sym.iter_unpack(data):
            if where is None or where(info, other, shndx):
                yield Symbol(_cstring(self.blob, strings, name, "symbol name"), info, other, shndx)


def _cstring(blob: Blob, table: bytes, offset: int, what: str) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise blob.error(f"{what} offset {offset} outside its string table")
    try:
        return table[offset:end].decode()
    except UnicodeDecodeError:
        raise blob.error(f"{what} at string offset {offset} is not UTF-8") from None
