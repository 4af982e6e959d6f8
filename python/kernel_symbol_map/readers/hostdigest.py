"""An object's host-code digest: every section but the device-code containers (issue 27).

What ``tests/oracle.py`` compares as host code, the same noise normalised and
nothing more: nvcc names its temporary files ``tmpxft_<pid>_<n>-...``, and that
name lands in a host ``STT_FILE`` symbol (masked in the string table, at its
length) and, with ``-ffunction-sections``, in the names of the sections of a
file's static initializers (``.text.startup._GLOBAL__sub_I_tmpxft_...``:
masked there too); and the device containers' place and size show in their symbols'
values and sizes, which are device code's. The symbol table is digested as
it is otherwise, so relocation entries (which name symbols by index) and
symbols (which name sections by index) are digested as they are: the same
tables give them the same meaning.
Section offsets are layout, never compared.
"""

from __future__ import annotations

import hashlib
import struct

import regex

from ..errors import FormatError
from ._digest import new
from .elf import SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB, ElfFile, Elf64_Sym

TMPXFT = regex.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")
MASKED = b"tmpxft_xxxxxxxx_xxxxxxxx"  # as long as the name it masks: string offsets keep their meaning
DEVICE_SEGMENTS = frozenset({b".nvFatBinSegment", b".hipFatBinSegment"})  # each points at its container
_SHNDX = struct.Struct("<6xH16x")  # a symbol's st_shndx
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


def host_digest(elf: ElfFile, device_sections: frozenset[bytes], device_prefix: bytes) -> str:
    """The digest (hex) of ``elf``'s host code: sections named in ``device_sections``, starting with
    ``device_prefix``, or in :data:`DEVICE_SEGMENTS`, and relocations of those, are left out."""
    headers = elf.all_headers()
    hidden = {i for i, x in enumerate(headers)  # device containers, by index (out of range: no section's)
              if x.name in device_sections or x.name in DEVICE_SEGMENTS or x.name.startswith(device_prefix)}

    h = new(elf.ident, elf.type, elf.machine, elf.flags)
    tables = [i for i, x in enumerate(headers) if x.type in (SHT_SYMTAB, SHT_DYNSYM)]
    skip = {0, elf.names_index, *tables, *(headers[i].link for i in tables)}
    for i in tables:  # the table as it is, but where a container starts and how long it is: device code
        table = elf.section_at(i)
        if table.size % Elf64_Sym.size:
            raise elf.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        entries = bytearray(elf.read(table))  # packed again as unpacked: only a container's symbols change
        for at in [at for at, (shndx,) in enumerate(_SHNDX.iter_unpack(entries)) if shndx in hidden]:
            entries[at * Elf64_Sym.size + 8 : (at + 1) * Elf64_Sym.size] = bytes(16)  # st_value, st_size: 0
        strings = elf.read(elf.section_at(table.link))
        feed(h, bytes(entries), TMPXFT.sub(MASKED, strings) if b"tmpxft_" in strings else strings)
    blob = elf.blob
    try:
        whole = blob.read(0, blob.size, "ELF file") if blob.size <= WHOLE else b""  # one read, sliced
    except FormatError:
        whole = b""  # a file that shrank: each section's own read says so
    for i, x in enumerate(headers):
        if i in skip or i in hidden or (x.type in (SHT_REL, SHT_RELA) and x.info in hidden):
            continue
        if x.type == SHT_NOBITS:
            contents = b""
        elif x.offset + x.size <= len(whole):
            contents = whole[x.offset : x.offset + x.size]
        else:  # a larger file's, or past the end: the read's own check names it
            contents = blob.read(x.offset, x.size, f"section {x.name!r}")
        name = TMPXFT.sub(MASKED, x.name) if b"tmpxft_" in x.name else x.name
        feed(h, name, x.type, x.flags, x.entsize, x.size, contents)
    return h.hexdigest()
