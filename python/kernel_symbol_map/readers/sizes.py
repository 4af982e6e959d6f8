"""What each kernel costs in bytes, per architecture: its machine code and the sections it owns (issue 21).

Figures, for every device image of an input (an object, a library, an
archive's members, a fatbin, a cubin, an offload bundle or a code object):

- **code** of a kernel: its machine code. CUDA: the size of its
  ``.text.<kernel>`` section (SASS), as ``readelf -S`` shows it in the cubin
  ``cuobjdump -xelf`` extracts. HIP: the ``st_size`` of its function symbol
  in the AMDGPU code object (every kernel shares one ``.text``).
- **owned** by a kernel: CUDA: every other section that holds file bytes and
  whose name ends in ``.<kernel>`` (``.nv.info.<k>``, ``.nv.constant0.<k>``,
  ``.rel.text.<k>``...; ``.nv.shared.<k>`` is ``NOBITS`` and costs no byte).
  HIP: its ``<kernel>.kd`` descriptor.
- **overhead** of an image: its size less what its kernels own: headers,
  symbol and string tables, ``.nv.info``, device functions no kernel owns.
- **stored**: the bytes the container holds for the image, compressed or
  not (a fatbin entry; a bundle's entry, or its share of a compressed bundle).
- **PTX**: the uncompressed and stored bytes of each PTX entry, per
  ``compute_XX`` architecture; PTX names no kernel sizes.

:func:`measure` gives every image; :meth:`Image.record` is the form the map
stores per object and architecture (``sizes``, format v1, added). Bitcode
(``-fgpu-rdc``, LTO-IR) is not final code and has no sizes here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from . import _decompress, archive, fatbin, hip, offloading
from ._blob import Blob, OpenFile
from .cuda import STO_CUDA_ENTRY
from .devicecode import CUDA_SECTIONS, HIP_SECTION, OFFLOADING_SECTION, cubin_arch
from .elf import EM_AMDGPU, EM_CUDA, SHN_UNDEF, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB, STT_FUNC, ElfFile, is_elf

TEXT = b".text"  # a kernel's machine code: .text.<kernel>
# What comes before ".<name>" in a section of the whole module (.nv.info, .nv.global.init, .nv.uft.entry,
# .nv.merc.symtab, .note.nv.cuinfo): never a kernel's, even of an extern "C" kernel called info or init.
MODULE_PREFIXES = frozenset({b"", b".nv", b".note", b".note.nv", b".nv.global", b".nv.uft", b".nv.merc",
                             b".nv.callgraph", b".nv.prototype", b".nv.rel", b".nv.resolvedrela"})
CUBIN, CODE_OBJECT, PTX = "cubin", "code object", "ptx"


@dataclass(frozen=True)
class Image:
    """One device image: a cubin or AMDGPU code object (with its kernels' sizes), or a PTX entry."""

    arch: str
    kind: str  # CUBIN, CODE_OBJECT or PTX
    size: int  # uncompressed bytes
    stored: int  # bytes in the file
    code: dict[str, int] = field(default_factory=dict)  # kernel -> its machine code's bytes
    owned: dict[str, int] = field(default_factory=dict)  # kernel -> its other sections' bytes

    @property
    def overhead(self) -> int:
        return self.size - sum(self.code.values()) - sum(self.owned.values())

    def record(self) -> dict[str, Any]:
        """The map's form (an object's ``sizes[arch]``): only what is not zero or empty."""
        record: dict[str, Any] = {"image": self.size, "stored": self.stored}
        if self.kind == PTX:
            record["ptx"] = True
        if self.code:
            record["code"] = dict(sorted(self.code.items()))
        if self.owned:
            record["owned"] = dict(sorted(self.owned.items()))
        return record


def merged(records: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``(arch, record)`` pairs as one record per architecture: an object with two images of one
    architecture (``ld -r`` of two objects) sums them."""
    out: dict[str, dict[str, Any]] = {}
    for arch, record in records:
        into = out.get(arch)
        if into is None:
            out[arch] = {**record, **{k: dict(record[k]) for k in ("code", "owned") if k in record}}
            continue
        into["image"] += record["image"]
        into["stored"] += record["stored"]
        for key in ("code", "owned"):
            for kernel, n in record.get(key, {}).items():
                into.setdefault(key, {})[kernel] = into.get(key, {}).get(kernel, 0) + n
    return dict(sorted(out.items()))


def measure(path: str | os.PathLike[str]) -> tuple[Image, ...]:
    """Every device image of the file at ``path``; a :class:`FormatError` if it cannot be read."""
    with OpenFile(path) as blob:
        return tuple(images(blob))


def images(blob: Blob) -> Iterator[Image]:
    """Every device image in ``blob``: an archive's members, a host ELF's device sections, a fatbin, a
    cubin, a bundle, a code object."""
    if archive.is_archive(blob):
        for _, member in archive.iter_members(blob):
            yield from images(member)
    elif fatbin.is_fatbin(blob):
        yield from _from_fatbin(blob)
    elif hip.is_bundle(blob):
        yield from _from_bundles(blob)
    elif is_elf(blob):
        yield from _from_elf(blob)
    else:
        raise blob.error("not an ELF file, ar archive, fatbin, offload bundle or cubin")


def _from_elf(blob: Blob) -> Iterator[Image]:
    elf = ElfFile(blob)
    if elf.machine == EM_CUDA:
        yield cubin(elf, blob.size)
        return
    if elf.machine == EM_AMDGPU:
        yield code_object(elf, "", blob.size)
        return
    for name in CUDA_SECTIONS:  # cuobjdump's choice: .nv_fatbin, else __nv_relfatbin
        section = elf.section(name)
        if section is not None:
            yield from _from_fatbin(elf.window(section))
            break
    hip_section = elf.section(HIP_SECTION)
    if hip_section is not None:
        yield from _from_bundles(elf.window(hip_section))
    offload = elf.section(OFFLOADING_SECTION)
    if offload is not None:
        for image in offloading.iter_images(elf.window(offload)):
            if image.kind in (offloading.ImageKind.OBJECT, offloading.ImageKind.CUBIN):
                inner = ElfFile(image.blob)
                if inner.machine == EM_CUDA:
                    yield cubin(inner, image.blob.size)
                elif inner.machine == EM_AMDGPU:
                    yield code_object(inner, image.arch, image.blob.size)
            elif image.kind is offloading.ImageKind.FATBINARY:
                yield from images(image.blob)


def _from_fatbin(blob: Blob) -> Iterator[Image]:
    for entry in fatbin.iter_entries(blob):
        if entry.kind is fatbin.EntryKind.CUBIN:
            payload = Blob.from_bytes(f"{blob.name} [{entry.arch} cubin]", entry.payload(blob))
            yield cubin(ElfFile(payload), entry.compressed_size, entry.arch)  # sm_90a: the entry says "a"
        elif entry.kind is fatbin.EntryKind.PTX:
            yield Image(entry.arch, PTX, _ptx_size(blob, entry), entry.compressed_size)


def _ptx_size(blob: Blob, entry: fatbin.FatbinEntry) -> int:
    """A PTX entry's text bytes: its payload, or, compressed, what its header claims once the claim is
    found plausible. PTX is not decompressed here: vLLM's three largest libraries hold 880 MB of it."""
    if not entry.flags & fatbin.COMPRESSION_MASK:
        return entry.compressed_size  # the payload as stored (iter_entries checked it against the container)
    if not _decompress.plausible(entry.uncompressed_size, entry.compressed_size):
        raise blob.error(f"{entry.arch} PTX claims {entry.uncompressed_size} bytes from {entry.compressed_size}",
                         entry.offset)
    return entry.uncompressed_size


def _from_bundles(blob: Blob) -> Iterator[Image]:
    """Code objects of each bundle; a compressed bundle's bytes are shared out by the entries' sizes."""
    for bundle, stored, compressed in hip.iter_stored_bundles(blob):
        entries = [e for e in hip.iter_entries(bundle) if e.kind != "host" and e.size]
        total = sum(e.size for e in entries)
        shares = [stored * e.size // total if compressed else e.size for e in entries]
        if compressed and entries:  # a compressed bundle's bytes, headers too, and rounding's: the shares add up
            shares[0] += stored - sum(shares)
        for entry, share in zip(entries, shares):
            if is_elf(entry.blob):  # bitcode is not final code
                yield code_object(ElfFile(entry.blob), entry.arch, share)


def cubin(elf: ElfFile, stored: int, arch: str = "") -> Image:
    """A cubin's kernels (STO_CUDA_ENTRY functions) and what each owns, from its section headers."""
    if elf.machine != EM_CUDA:
        raise elf.blob.error(f"cubin has e_machine {elf.machine}, expected {EM_CUDA} (CUDA)")
    table = elf.symbol_table(SHT_SYMTAB)
    kernels = {s.name for s in (elf.iter_symbols(table, other_mask=STO_CUDA_ENTRY) if table else ())
               if s.type == STT_FUNC and s.shndx != SHN_UNDEF}
    by_name = {k.encode(): k for k in kernels}  # section names are compared undecoded
    dotted = any(b"." in k for k in by_name)  # else only the tail after a name's last dot can be a kernel
    code: dict[str, int] = {}
    owned: dict[str, int] = dict.fromkeys(kernels, 0)
    end = elf.blob.size
    get = by_name.get
    for name, kind, offset, size in elf.headers():
        if kind == SHT_NOBITS:
            continue
        if offset + size > end:  # a size is a claim: check it
            elf.blob.check(offset, size, f"section {name.decode(errors='replace')}")
        if dotted:
            at, kernel = _longest_tail(name, by_name)
        else:
            at = name.rfind(b".")
            kernel = get(name[at + 1 :]) if at >= 1 else None
        if kernel is None:
            continue
        prefix = name[:at]  # what the section is, for this kernel: .text, .nv.info, .nv.constant0...
        if prefix == TEXT:
            code[kernel] = size
        elif prefix not in MODULE_PREFIXES:
            owned[kernel] += size
    missing = kernels - code.keys()
    if missing:
        raise FormatError(elf.blob.name, f"kernel {min(missing)} has no .text.<kernel> section")
    return _checked(Image(arch or cubin_arch(elf), CUBIN, elf.blob.size, stored, code, {k: v for k, v in owned.items() if v}),
                    elf.blob)


def code_object(elf: ElfFile, arch: str, stored: int) -> Image:
    """An AMDGPU code object: each kernel ``K`` has a defined ``K.kd`` descriptor; its code is ``K``'s
    function symbol's size, its descriptor's size is what it owns."""
    if elf.machine != EM_AMDGPU:
        raise elf.blob.error(f"code object has e_machine {elf.machine}, expected {EM_AMDGPU} (AMDGPU)")
    table = elf.symbol_table(SHT_SYMTAB, SHT_DYNSYM)
    defined = {s.name: s for s in (elf.iter_symbols(table) if table else ()) if s.shndx != SHN_UNDEF}
    cut = len(hip.KERNEL_DESCRIPTOR_SUFFIX)
    kernels = [n[:-cut] for n in defined if n.endswith(hip.KERNEL_DESCRIPTOR_SUFFIX)]
    code = {k: defined[k].size for k in kernels if k in defined and defined[k].type == STT_FUNC}
    missing = set(kernels) - code.keys()
    if missing:
        raise FormatError(elf.blob.name, f"kernel {min(missing)} has a descriptor but no function symbol")
    owned = {k: defined[k + hip.KERNEL_DESCRIPTOR_SUFFIX].size for k in kernels}
    return _checked(Image(arch or "amdgcn", CODE_OBJECT, elf.blob.size, stored, code,
                          {k: v for k, v in owned.items() if v}), elf.blob)


def _checked(image: Image, blob: Blob) -> Image:
    """Overlapping sections, or symbol sizes that are claims, may add up to more than the image."""
    if image.overhead < 0:
        raise blob.error(f"its kernels' sizes add up to {image.size - image.overhead} bytes, more than the "
                         f"{image.size} of the image")
    return image


def _longest_tail(name: bytes, kernels: dict[bytes, str]) -> tuple[int, str | None]:
    """Where the kernel's name starts (its dot), and the kernel a section is named for, when kernel names
    hold dots: each tail after a dot, longest first (``.nv.info.a.b``: ``nv.info.a.b``, ``info.a.b``,
    ``a.b``), never after a module's prefix."""
    at = name.find(b".", 1)
    while at >= 0:
        kernel = kernels.get(name[at + 1 :])
        if kernel is not None and name[:at] not in MODULE_PREFIXES:
            return at, kernel
        at = name.find(b".", at + 1)
    return -1, None
