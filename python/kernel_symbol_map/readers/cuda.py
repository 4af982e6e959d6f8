"""Kernel entry names in CUDA device code: cubin symbol tables and PTX ``.entry`` directives."""

from __future__ import annotations

import regex

from ._blob import Blob
from .elf import EM_CUDA, SHN_UNDEF, SHT_SYMTAB, STT_FUNC, ElfFile

STO_CUDA_ENTRY = 0x10

# `.entry name(` or `.entry name` at the start of a (possibly `.visible`/`.weak`) directive.
_PTX_ENTRY = regex.compile(rb"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([\w$%.]+)", regex.M)


def cubin_kernels(blob: Blob) -> frozenset[str]:
    """Defined ``STT_FUNC`` symbols marked STO_CUDA_ENTRY: what the driver can launch."""
    elf = ElfFile(blob)
    if elf.machine != EM_CUDA:
        raise blob.error(f"cubin has e_machine {elf.machine}, expected {EM_CUDA} (CUDA)")
    table = elf.symbol_table(SHT_SYMTAB)
    if table is None:
        return frozenset()
    return frozenset(
        s.name
        for s in elf.iter_symbols(table, other_mask=STO_CUDA_ENTRY)
        if s.type == STT_FUNC and s.shndx != SHN_UNDEF
    )


def ptx_entries(blob: Blob, text: bytes) -> frozenset[str]:
    """Names of ``.entry`` directives in PTX text, which equal the cubin's entry symbols."""
    names = set()
    for m in _PTX_ENTRY.finditer(text):
        try:
            names.add(m.group(1).decode())
        except UnicodeDecodeError:
            raise blob.error("PTX entry name is not UTF-8", m.start()) from None
    return frozenset(names)
