"""An object's host-code digest: every section but the device-code containers (issue 27).

What ``tests/oracle.py`` compares as host code, the same noise normalised and
nothing more: nvcc names its temporary files ``tmpxft_<pid>_<n>-...``, and that
name lands in a host ``STT_FILE`` symbol (masked in the string table, at its
length); and the device containers' place and size show in their symbols'
values and sizes, which are device code's. The symbol table is digested as
it is otherwise, so relocation entries (which name symbols by index) and
symbols (which name sections by index) are digested as they are: the same
tables give them the same meaning.
Section offsets are layout, never compared.
"""

from __future__ import annotations

import regex

from ._digest import feed, new
from .elf import SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB, ElfFile, Elf64_Sym

TMPXFT = regex.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")
MASKED = b"tmpxft_xxxxxxxx_xxxxxxxx"  # as long as the name it masks: string offsets keep their meaning
DEVICE_SEGMENTS = frozenset({b".nvFatBinSegment", b".hipFatBinSegment"})  # each points at its container


def host_digest(elf: ElfFile, device_sections: frozenset[bytes], device_prefix: bytes) -> str:
    """The digest (hex) of ``elf``'s host code: sections named in ``device_sections``, starting with
    ``device_prefix``, or in :data:`DEVICE_SEGMENTS`, and relocations of those, are left out."""
    headers = elf.all_headers()

    def device(index: int) -> bool:
        if not 0 <= index < len(headers):
            return False
        name = headers[index].name
        return name in device_sections or name in DEVICE_SEGMENTS or name.startswith(device_prefix)

    h = new(elf.ident, elf.type, elf.machine, elf.flags)
    tables = [i for i, x in enumerate(headers) if x.type in (SHT_SYMTAB, SHT_DYNSYM)]
    skip = {0, elf.names_index, *tables, *(headers[i].link for i in tables)}
    hidden = {i for i in range(len(headers)) if device(i)}
    for i in tables:  # the table as it is, but where a container starts and how long it is: device code
        table = elf.section_at(i)
        if table.size % Elf64_Sym.size:
            raise elf.blob.error(f"symbol table {table.name} size is not a multiple of 24")
        entries = [(n, info, other, shndx, 0, 0) if shndx in hidden else (n, info, other, shndx, value, size)
                   for n, info, other, shndx, value, size in Elf64_Sym.iter_unpack(elf.read(table))]
        strings = elf.read(elf.section_at(table.link))
        feed(h, b"".join(Elf64_Sym.pack(*e) for e in entries), TMPXFT.sub(MASKED, strings))
    for i, x in enumerate(headers):
        if i in skip or device(i) or (x.type in (SHT_REL, SHT_RELA) and device(x.info)):
            continue
        contents = b"" if x.type == SHT_NOBITS else elf.blob.read(x.offset, x.size, f"section {x.name!r}")
        feed(h, x.name, x.type, x.flags, x.entsize, x.size, contents)
    return h.hexdigest()
