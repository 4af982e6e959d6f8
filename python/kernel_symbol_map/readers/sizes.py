"""What each kernel costs in bytes: per architecture, its SASS and the sections it owns (issue 21).

Figures, for every device image of an input (an object, a library, an
archive's members, a fatbin or a cubin):

- **SASS** of a kernel: the size of its ``.text.<kernel>`` section, as
  ``readelf -S`` shows it in the cubin ``cuobjdump -xelf`` extracts.
- **owned** by a kernel: every other section that holds file bytes and whose
  name ends in ``.<kernel>`` (``.nv.info.<k>``, ``.nv.constant0.<k>``,
  ``.rel.text.<k>``...). ``.nv.shared.<k>`` is ``NOBITS``: it costs no byte.
- **overhead** of a cubin: its size less what its kernels own: headers,
  symbol and string tables, ``.nv.info``, device functions that no kernel
  owns by name.
- **stored**: the bytes the fatbin holds for the image, compressed or not;
  :func:`apportioned` splits them over the kernels by their share of the
  cubin.
- **PTX**: the uncompressed and stored bytes of each PTX entry, per
  architecture (a PTX entry names no kernel sizes).

CUDA only for now: HIP code objects are a later step of issue 21.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import FormatError
from . import archive, fatbin
from ._blob import Blob, OpenFile
from .cuda import cubin_kernels
from .devicecode import CUDA_SECTIONS, cubin_arch
from .elf import EM_CUDA, SHT_NOBITS, ElfFile, is_elf

TEXT = ".text."


@dataclass(frozen=True)
class Image:
    """One device image: a cubin (with its kernels' sizes) or a PTX entry (``kernels`` empty)."""

    arch: str
    kind: str  # "cubin" or "ptx"
    size: int  # uncompressed bytes
    stored: int  # bytes in the file
    sass: dict[str, int] = field(default_factory=dict)  # kernel -> .text.<kernel> bytes
    owned: dict[str, int] = field(default_factory=dict)  # kernel -> its other sections' bytes

    @property
    def overhead(self) -> int:
        return self.size - sum(self.sass.values()) - sum(self.owned.values())

    def apportioned(self) -> dict[str, int]:
        """The stored bytes split over the kernels by their share of the uncompressed image (the
        overhead's share stays unassigned); integer bytes, rounded down."""
        if not self.size:
            return {}
        return {k: self.stored * (self.sass[k] + self.owned.get(k, 0)) // self.size for k in self.sass}


def measure(path: str | os.PathLike[str]) -> tuple[Image, ...]:
    """Every device image of the file at ``path``; a :class:`FormatError` if it cannot be read."""
    with OpenFile(path) as blob:
        return tuple(_images(blob))


def _images(blob: Blob) -> Iterator[Image]:
    if archive.is_archive(blob):
        for _, member in archive.iter_members(blob):
            yield from _images(member)
    elif fatbin.is_fatbin(blob):
        yield from _from_fatbin(blob)
    elif is_elf(blob):
        elf = ElfFile(blob)
        if elf.machine == EM_CUDA:
            yield cubin(blob, blob.size)
            return
        for name in CUDA_SECTIONS:
            section = elf.section(name)
            if section is not None:
                yield from _from_fatbin(elf.window(section))
                return
    else:
        raise blob.error("not an ELF file, ar archive, fatbin or cubin")


def _from_fatbin(blob: Blob) -> Iterator[Image]:
    for entry in fatbin.iter_entries(blob):
        if entry.kind is fatbin.EntryKind.CUBIN:
            payload = entry.payload(blob)
            yield cubin(Blob.from_bytes(f"{blob.name} [{entry.arch} cubin]", payload), entry.compressed_size)
        elif entry.kind is fatbin.EntryKind.PTX:
            yield Image(entry.arch, "ptx", entry.uncompressed_size or entry.compressed_size, entry.compressed_size)


def cubin(blob: Blob, stored: int) -> Image:
    """A cubin's kernels and what each owns, from its section headers."""
    elf = ElfFile(blob)
    kernels = cubin_kernels(blob)
    sass: dict[str, int] = {}
    owned: dict[str, int] = dict.fromkeys(kernels, 0)
    for section in elf.sections:
        if section.type == SHT_NOBITS:
            continue
        if section.name.startswith(TEXT) and section.name[len(TEXT):] in owned:
            sass[section.name[len(TEXT):]] = section.size
            continue
        for suffix in _suffixes(section.name):  # the longest kernel name the section's name ends in
            if suffix in owned:
                owned[suffix] += section.size
                break
    missing = kernels - sass.keys()
    if missing:
        raise FormatError(blob.name, f"kernel {min(missing)} has no {TEXT}<kernel> section")
    return Image(cubin_arch(elf), "cubin", blob.size, stored, sass, {k: v for k, v in owned.items() if v})


def _suffixes(name: str) -> Iterator[str]:
    """``.nv.info._Z1kv`` -> ``nv.info._Z1kv``, ``info._Z1kv``, ``_Z1kv``: each tail after a dot."""
    at = name.find(".", 1)
    while at >= 0:
        yield name[at + 1 :]
        at = name.find(".", at + 1)
