"""What each kernel costs in bytes, per architecture: its machine code and the sections it owns.

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

With ``digests``, the same walk also gives each image's per-kernel digests:
:mod:`.cubindigest` for cubins, :mod:`.ptxdigest` for PTX (which is
then decompressed), and one digest of the whole image for AMDGPU code objects
and bitcode (``per_kernel`` False), whose kernels' code is not told apart yet.

:func:`measure` gives every image; :meth:`Image.record` is the form the map
stores per object and architecture (``sizes``, format v1, added). Bitcode
(``-fgpu-rdc``, LTO-IR) is not final code and has no sizes here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import add
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from .. import _unitnames as unitnames
from . import _decompress, archive, bitcode, cuda, fatbin, hip, offloading
from ._blob import Blob, OpenFile
from ._digest import new as new_digest
from .cubindigest import CubinSymbols, kernel_digests
from .cuda import STO_CUDA_ENTRY
from .devicecode import (CUDA_SECTIONS, HIP_BUNDLE_SECTION_PREFIX, HIP_SECTION, OFFLOADING_SECTION, cubin_arch,
                         cubin_kernels)
from .ptxdigest import entry_digests, image_digest
from .cubinsections import TEXT, Namer
from .folders import NONE, Folders
from .elf import (ET_REL, EM_AMDGPU, EM_CUDA, SHN_UNDEF, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB, STT_FUNC, ElfFile, Header,
                  is_elf)

CUBIN, CODE_OBJECT, PTX, BITCODE = "cubin", "code object", "ptx", "bitcode"  # bitcode: with digests only


@dataclass(frozen=True)
class Image:
    """One device image: a cubin or AMDGPU code object (with its kernels' sizes), or a PTX entry."""

    arch: str
    kind: str  # CUBIN, CODE_OBJECT or PTX
    size: int  # uncompressed bytes
    stored: int  # bytes in the file
    code: dict[str, int] = field(default_factory=dict)  # kernel -> its machine code's bytes
    owned: dict[str, int] = field(default_factory=dict)  # kernel -> its other sections' bytes
    digests: dict[str, str] = field(default_factory=dict)  # kernel -> its device code's digest (digests=True)
    per_kernel: bool = True  # False: every kernel has the whole image's digest
    relocatable: str = ""  # -rdc (a relocatable cubin, bitcode): the whole image's digest, for what links it
    # PTX beside a cubin of its architecture (compute_80 beside sm_80): the image's digest, whole; its kernels
    # are digested one by one in the cubin, and ``digests`` is empty
    beside_cubin: str = ""

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


def measure(path: str | os.PathLike[str], digests: bool = False) -> tuple[Image, ...]:
    """Every device image of the file at ``path``; a :class:`FormatError` if it cannot be read."""
    with OpenFile(path) as blob:
        return tuple(images(blob, digests))


def images(blob: Blob, digests: bool = False, folders: Folders = NONE) -> Iterator[Image]:
    """Every device image in ``blob``: an archive's members, a host ELF's device sections, a fatbin, a
    cubin, a bundle, a code object; with ``digests``, bitcode too, and each image's digests (``folders``:
    the build's, masked in CUDA's literals)."""
    if archive.is_archive(blob):
        for _, member in archive.iter_members(blob):
            yield from images(member, digests, folders)
    elif fatbin.is_fatbin(blob):
        yield from _from_fatbin(blob, digests, folders)
    elif hip.is_bundle(blob):
        yield from _from_bundles(blob, digests)
    elif is_elf(blob):
        yield from _from_elf(blob, digests, folders)
    else:
        raise blob.error("not an ELF file, ar archive, fatbin, offload bundle or cubin")


def _from_elf(blob: Blob, digests: bool, folders: Folders) -> Iterator[Image]:
    elf = ElfFile(blob)
    if elf.machine == EM_CUDA:
        yield cubin(elf, blob.size, digests=digests, folders=folders)
        return
    if elf.machine == EM_AMDGPU:
        yield code_object(elf, "", blob.size, digests)
        return
    for name in CUDA_SECTIONS:  # cuobjdump's choice: .nv_fatbin, else __nv_relfatbin
        section = elf.section(name)
        if section is not None:
            yield from _from_fatbin(elf.window(section), digests, folders)
            break
    hip_section = elf.section(HIP_SECTION)
    if hip_section is not None:
        yield from _from_bundles(elf.window(hip_section), digests)
    if digests and elf.has_section_name_containing(HIP_BUNDLE_SECTION_PREFIX.encode()):  # -fgpu-rdc: bitcode
        for section in elf.sections:
            if section.name.startswith(HIP_BUNDLE_SECTION_PREFIX) and "host-" not in section.name:
                arch = hip.target_id(section.name[len(HIP_BUNDLE_SECTION_PREFIX) :])
                yield _bitcode(elf.window(section), arch)
    offload = elf.section(OFFLOADING_SECTION)
    if offload is not None:
        for image in offloading.iter_images(elf.window(offload)):
            if image.kind in (offloading.ImageKind.OBJECT, offloading.ImageKind.CUBIN):
                inner = ElfFile(image.blob)
                if inner.machine == EM_CUDA:
                    yield cubin(inner, image.blob.size, digests=digests, folders=folders)
                elif inner.machine == EM_AMDGPU:
                    yield code_object(inner, image.arch, image.blob.size, digests)
            elif image.kind is offloading.ImageKind.FATBINARY:
                yield from images(image.blob, digests, folders)
            elif digests and image.kind is offloading.ImageKind.PTX:
                text = image.blob.read(0, image.blob.size, "PTX image")
                yield _ptx(image.blob, image.arch, text, len(text), len(text), folders)
            elif digests and image.kind is offloading.ImageKind.BITCODE and image.strings.get("triple", "").startswith("amdgcn"):
                yield _bitcode(image.blob, image.arch)


def _from_fatbin(blob: Blob, digests: bool, folders: Folders = NONE) -> Iterator[Image]:
    entries = list(fatbin.iter_entries(blob))
    # The cubins' architectures, by container: a library's section holds one container for each compile
    cubins = {(e.container, e.arch.removeprefix("sm_")) for e in entries if e.kind is fatbin.EntryKind.CUBIN}
    for entry in entries:
        if entry.kind is fatbin.EntryKind.CUBIN:
            payload = Blob.from_bytes(f"{blob.name} [{entry.arch} cubin]", entry.payload(blob))
            image = cubin(ElfFile(payload), entry.compressed_size, entry.arch, digests, folders)  # sm_90a: "a"
            # Its kernels (every one has code), for the kernels' walk of the same file (devicecode)
            cubin_kernels(blob, entry, lambda: frozenset(image.code))
            yield image
        elif entry.kind is fatbin.EntryKind.PTX and digests:
            beside = (entry.container, entry.arch.removeprefix("compute_")) in cubins
            yield _ptx(blob, entry.arch, entry.payload(blob), _ptx_size(blob, entry), entry.compressed_size, folders,
                       beside)
        elif entry.kind is fatbin.EntryKind.PTX:
            yield Image(entry.arch, PTX, _ptx_size(blob, entry), entry.compressed_size)


def _ptx(blob: Blob, arch: str, text: bytes, size: int, stored: int, folders: Folders = NONE,
         beside_cubin: bool = False) -> Image:
    """A PTX image, decompressed for its digests: its entries' (as many as its .entry directives), or, beside
    a cubin of its architecture, whose kernels are digested one by one, the whole image's (one pass)."""
    if beside_cubin:
        return Image(arch, PTX, size, stored, beside_cubin=image_digest(text, folders))
    found, per_entry = entry_digests(text, folders)
    return Image(arch, PTX, size, stored, digests=found, per_kernel=per_entry)


def _bitcode(blob: Blob, arch: str) -> Image:
    """Bitcode (``-fgpu-rdc``): no final code, so no sizes; one digest of the module for its kernels."""
    whole = new_digest(blob.read(0, blob.size, "bitcode")).hexdigest()
    kernels = bitcode.amdgpu_kernels(blob) if blob.startswith(bitcode.MAGIC) else frozenset()
    return Image(arch, BITCODE, blob.size, blob.size, digests=dict.fromkeys(sorted(kernels), whole), per_kernel=False,
                 relocatable=whole)


def _ptx_size(blob: Blob, entry: fatbin.FatbinEntry) -> int:
    """A PTX entry's text bytes: its payload, or, compressed, what its header claims once the claim is
    found plausible. PTX is not decompressed here: vLLM's three largest libraries hold 880 MB of it."""
    if not entry.flags & fatbin.COMPRESSION_MASK:
        return entry.compressed_size  # the payload as stored (iter_entries checked it against the container)
    if not _decompress.plausible(entry.uncompressed_size, entry.compressed_size):
        raise blob.error(f"{entry.arch} PTX claims {entry.uncompressed_size} bytes from {entry.compressed_size}",
                         entry.offset)
    return entry.uncompressed_size


def _from_bundles(blob: Blob, digests: bool) -> Iterator[Image]:
    """Code objects of each bundle; a compressed bundle's bytes are shared out by the entries' sizes."""
    for bundle, stored, compressed in hip.iter_stored_bundles(blob):
        entries = [e for e in hip.iter_entries(bundle) if e.kind != "host" and e.size]
        total = sum(e.size for e in entries)
        shares = [stored * e.size // total if compressed else e.size for e in entries]
        if compressed and entries:  # a compressed bundle's bytes, headers too, and rounding's: the shares add up
            shares[0] += stored - sum(shares)
        for entry, share in zip(entries, shares):
            if is_elf(entry.blob):  # bitcode is not final code
                yield code_object(ElfFile(entry.blob), entry.arch, share, digests)
            elif digests:
                yield _bitcode(entry.blob, entry.arch)


def cubin(elf: ElfFile, stored: int, arch: str = "", digests: bool = False, folders: Folders = NONE) -> Image:
    """A cubin's kernels (STO_CUDA_ENTRY functions) and what each owns, from its section headers."""
    if elf.machine != EM_CUDA:
        raise elf.blob.error(f"cubin has e_machine {elf.machine}, expected {EM_CUDA} (CUDA)")
    table = elf.symbol_table(SHT_SYMTAB)
    rows = names = None  # with digests, every symbol, parsed once for the kernels and kernel_digests
    if digests:
        try:
            rows, names = elf.symbol_rows(table) if table else ([], [])
        except FormatError:
            pass  # the walk of the kernels' symbols below meets its error, if one is theirs; kernel_digests the rest
    if rows is None or names is None:  # only the STO_CUDA_ENTRY symbols, as iter_symbols(other_mask=) walks them
        rows, names = elf.symbol_rows(table, STO_CUDA_ENTRY) if table else ([], [])
        digest_rows = False
    else:
        digest_rows = True
    kernels = {names[i] for i, r in enumerate(rows) if r[2] & STO_CUDA_ENTRY and r[1] & 0xF == STT_FUNC
               and r[3] != SHN_UNDEF}
    symbols = owners = None
    if not digest_rows:
        section_names, types, offsets, sizes = elf.section_columns()
    else:  # the headers, and each section's function, as kernel_digests walks them
        full = elf.header_list()
        columns = list(zip(*full)) or [()] * len(Header._fields)  # Header's fields, by column
        section_names, types, offsets, sizes = list(columns[0]), columns[1], columns[3], columns[4]
        symbols = CubinSymbols(full, table, rows, names)
        if not symbols.dotted and "" not in kernels and kernels <= symbols.functions.keys():
            # No name has a dot (a section's is the tail after its last), and every kernel is a function:
            # a section's kernel is its function, when that is a kernel.
            owners = list(map(dict(zip(kernels, kernels)).get, symbols.section_owner))
    _check_sections(elf.blob, section_names, types, offsets, sizes)
    if owners is None:
        owners, prefixes = Namer(dict(zip(map(str.encode, kernels), kernels))).split(section_names)
    else:  # owners[i] is a function, so its section's name has a dot: rpartition's prefix is name[:at]
        prefixes = [name.rpartition(b".")[0] for name in section_names]
    code: dict[str, int] = {}
    owned: dict[str, int] = dict.fromkeys(kernels, 0)
    for kernel, prefix, kind, size in zip(owners, prefixes, types, sizes):
        if kernel is None or kind == SHT_NOBITS:
            continue
        if prefix == TEXT:  # what the section is, for this kernel: .text, .nv.info, .nv.constant0...
            code[kernel] = size
        else:
            owned[kernel] += size
    missing = kernels - code.keys()
    if missing:
        raise FormatError(elf.blob.name, f"kernel {min(missing)} has no .text.<kernel> section")
    found = kernel_digests(elf, symbols, folders) if digests else {}
    relocatable = _whole(elf.blob.read(0, elf.blob.size, "cubin")) if digests and elf.type == ET_REL else ""
    return _checked(Image(arch or cubin_arch(elf), CUBIN, elf.blob.size, stored, code,
                          {k: v for k, v in owned.items() if v}, found, relocatable=relocatable), elf.blob)


def _whole(raw: bytes) -> str:
    """A relocatable cubin's whole-image digest, its unit's path hash masked (:mod:`.._unitnames`)."""
    return new_digest(unitnames.masked(raw, unitnames.unit_hash(raw))).hexdigest()


def _check_sections(blob: Blob, names: list[bytes], types: Sequence[int], offsets: Sequence[int],
                    sizes: Sequence[int]) -> None:
    """A section's size is a claim: every section with file bytes must lie in the cubin. The largest end
    of those, found in one pass at C speed, within the cubin: then every one is (the usual case); else the
    first that runs past is named, as a walk of them in order would."""
    ends = compress(map(add, offsets, sizes), map(SHT_NOBITS.__ne__, types))  # NOBITS holds no byte
    if max(ends, default=0) <= blob.size:
        return
    for name, kind, offset, size in zip(names, types, offsets, sizes):
        if kind != SHT_NOBITS and offset + size > blob.size:
            blob.check(offset, size, f"section {name.decode(errors='replace')}")


def code_object(elf: ElfFile, arch: str, stored: int, digests: bool = False) -> Image:
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
    whole = new_digest(elf.blob.read(0, elf.blob.size, "code object")).hexdigest() if digests else ""
    return _checked(Image(arch or "amdgcn", CODE_OBJECT, elf.blob.size, stored, code,
                          {k: v for k, v in owned.items() if v}, dict.fromkeys(sorted(code), whole) if digests else {},
                          per_kernel=False), elf.blob)


def _checked(image: Image, blob: Blob) -> Image:
    """Overlapping sections, or symbol sizes that are claims, may add up to more than the image."""
    if image.overhead < 0:
        raise blob.error(f"its kernels' sizes add up to {image.size - image.overhead} bytes, more than the "
                         f"{image.size} of the image")
    return image
