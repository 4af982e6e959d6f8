"""HIP device code: clang offload bundles in ``.hip_fatbin`` and AMDGPU code objects.

A bundle is plain (``__CLANG_OFFLOAD_BUNDLE__``) or compressed (``CCOB``, zlib or
zstd, header versions 1-3). Hand-written: LLVM's reader is C++ only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import regex

from . import _decompress
from ._blob import Blob
from ._decompress import DecompressError
from .elf import EM_AMDGPU, SHN_UNDEF, SHT_DYNSYM, SHT_SYMTAB, ElfFile

BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")  # raw, and the wrapper header

BundleCount = struct.Struct("<Q")
# offset, size, id length; the id follows
BundleEntry = struct.Struct("<QQQ")
# magic, version, method
CcobPrefix = struct.Struct("<4sHH")
# Per version, what follows the prefix: sizes then a 64-bit hash.
CcobV1 = struct.Struct("<IQ")  # uncompressed size, hash
CcobV2 = struct.Struct("<IIQ")  # total size, uncompressed size, hash
CcobV3 = struct.Struct("<QQQ")  # total size, uncompressed size, hash
_DECOMPRESSORS = {0: _decompress.zlib, 1: _decompress.zstd}
KERNEL_DESCRIPTOR_SUFFIX = ".kd"


@dataclass(frozen=True)
class BundleEntryInfo:
    id: str
    kind: str  # "hipv4", "hip", "host", "openmp"...
    arch: str  # the target id after the triple, e.g. "gfx90a:xnack+"; "" for host
    offset: int
    size: int
    blob: Blob


def is_bundle(blob: Blob) -> bool:
    return blob.startswith(BUNDLE_MAGIC) or blob.startswith(CCOB_MAGIC)


def iter_bundles(blob: Blob) -> Iterator[Blob]:
    """Each bundle in a ``.hip_fatbin`` section (one per translation unit in a linked library)."""
    for bundle, _stored, _compressed in iter_stored_bundles(blob):
        yield bundle


def iter_stored_bundles(blob: Blob) -> Iterator[tuple[Blob, int, bool]]:
    """Each bundle, plain (decompressed if it was stored compressed), the bytes it takes in ``blob``, and
    whether they are compressed."""
    offset = 0
    while True:
        offset = _skip_zeros(blob, offset)
        if offset >= blob.size:
            return
        rest = blob.window(offset, blob.size - offset, "offload bundle")
        compressed = rest.startswith(CCOB_MAGIC)
        if compressed:  # a second walk of the same file decompresses nothing (Blob.cached)
            inner, used = rest.cached(0, "compressed bundle", lambda r=rest: _decompress(r), lambda d: d[0].size)
        elif rest.startswith(BUNDLE_MAGIC):
            inner, used = rest, _plain_size(rest)
        else:
            raise blob.error("expected a clang offload bundle", offset)
        yield inner, used, compressed
        offset += used


def iter_entries(bundle: Blob) -> Iterator[BundleEntryInfo]:
    """Entries of one plain bundle, host entries included."""
    if not bundle.startswith(BUNDLE_MAGIC):
        raise bundle.error("not a clang offload bundle")
    (count,) = bundle.unpack(BundleCount, len(BUNDLE_MAGIC), "bundle entry count")
    at = len(BUNDLE_MAGIC) + BundleCount.size
    for i in range(count):
        offset, size, id_len = bundle.unpack(BundleEntry, at, f"bundle entry {i}")
        raw_id = bundle.read(at + BundleEntry.size, id_len, f"bundle entry {i} id")
        at += BundleEntry.size + id_len
        try:
            entry_id = raw_id.decode("ascii")
        except UnicodeDecodeError:
            raise bundle.error(f"bundle entry {i} id is not ASCII", at) from None
        kind = entry_id.partition("-")[0]
        arch = target_id(entry_id)
        window = bundle.window(offset, size, f"bundle entry {entry_id}")
        yield BundleEntryInfo(entry_id, kind, arch, offset, size, window)


_AMDGCN_ENTRY = regex.compile(r"^\w+-amdgcn-amd-amdhsa--?(.+)$")


def target_id(entry_id: str) -> str:
    """``gfx90a`` (with any ``:feature+``) from a bundle entry id.

    clang-19 writes ``hip-amdgcn-amd-amdhsa--gfx90a`` (an empty environment),
    clang-15 ``hip-amdgcn-amd-amdhsa-gfx90a``; other triples keep what
    follows their ``--``.
    """
    m = _AMDGCN_ENTRY.match(entry_id)
    if m:
        return m.group(1)
    return entry_id.rpartition("--")[2] if "--" in entry_id else ""


def is_bitcode(blob: Blob) -> bool:
    return any(blob.startswith(m) for m in BITCODE_MAGICS)


def code_object_kernels(blob: Blob) -> frozenset[str]:
    """Kernels of an AMDGPU code object: each kernel ``K`` has a defined ``K.kd`` descriptor."""
    elf = ElfFile(blob)
    if elf.machine != EM_AMDGPU:
        raise blob.error(f"code object has e_machine {elf.machine}, expected {EM_AMDGPU} (AMDGPU)")
    table = elf.symbol_table(SHT_SYMTAB, SHT_DYNSYM)
    if table is None:
        return frozenset()
    cut = len(KERNEL_DESCRIPTOR_SUFFIX)
    return frozenset(
        s.name[:-cut]
        for s in elf.iter_symbols(table)
        if s.shndx != SHN_UNDEF and s.name.endswith(KERNEL_DESCRIPTOR_SUFFIX)
    )


def _plain_size(bundle: Blob) -> int:
    """A plain bundle ends where its last entry's payload ends, and never before its own header.

    (Entries of size 0 at offset 0 once made a section of such bundles loop forever: bench/fuzz.py.)
    """
    entries = list(iter_entries(bundle))
    header = len(BUNDLE_MAGIC) + BundleCount.size + sum(BundleEntry.size + len(e.id) for e in entries)
    return max([header, *(e.offset + e.size for e in entries)])


def _decompress(blob: Blob) -> tuple[Blob, int]:
    """``(plain bundle, bytes consumed)`` for a CCOB-compressed bundle."""
    _, version, method = blob.unpack(CcobPrefix, 0, "compressed bundle header")
    layouts = {1: CcobV1, 2: CcobV2, 3: CcobV3}
    if version not in layouts:
        raise blob.error(f"unknown compressed bundle version {version}")
    fields = blob.unpack(layouts[version], CcobPrefix.size, "compressed bundle header")
    header = CcobPrefix.size + layouts[version].size
    if version == 1:
        (uncompressed, _hash), total = fields, blob.size
    else:
        total, uncompressed, _hash = fields
    if total < header or total > blob.size:
        raise blob.error(f"compressed bundle size {total} does not fit its section")
    stream = blob.read(header, total - header, "compressed bundle stream")
    decompress = _DECOMPRESSORS.get(method)
    if decompress is None:
        raise blob.error(f"unknown bundle compression method {method}")
    try:
        data = decompress(stream, uncompressed)
    except DecompressError as e:
        raise blob.error(f"compressed bundle: {e}") from None
    return Blob.from_bytes(blob.name, data), total


def _skip_zeros(blob: Blob, offset: int) -> int:
    """Bundles in a linked library are aligned (to 4 KiB); skip the zero fill between them."""
    while offset < blob.size:
        chunk = blob.read(offset, min(1 << 16, blob.size - offset), "bundle padding")
        stripped = chunk.lstrip(b"\0")
        offset += len(chunk) - len(stripped)
        if stripped:
            return offset
    return offset
