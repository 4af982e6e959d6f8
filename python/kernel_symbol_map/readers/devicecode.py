"""The native device-code reader: which kernel entry symbols does a binary define?

:func:`read_kernels` takes a host object (nvcc with or without ``-rdc``, hipcc,
clang), a static archive, a shared library or executable, a raw ``.fatbin`` or
``.cubin``, or a raw offload bundle, and returns a :class:`Result`: the kernels
per architecture, and an error when the input cannot be read. Bad input never
raises; it becomes ``Result.error``.

Which code counts, per input (see ``../shared/reference/facts.md``):

* ``.nv_fatbin`` when present, else ``__nv_relfatbin`` (cuobjdump's choice);
  ``.hip_fatbin`` and ``__CLANG_OFFLOAD_BUNDLE__*`` sections for HIP;
  ``.llvm.offloading`` for clang's new offload driver.
* Final code (cubins, AMDGPU code objects) gives the kernels. PTX ``.entry``
  names are used only when an input has PTX but no final code.
* AMDGPU bitcode (``-fgpu-rdc``) names its kernels exactly: defined
  functions with the ``amdgpu_kernel`` calling convention (:mod:`.bitcode`).
* Any other input with only LTO-IR or bitcode is an error: its kernels cannot be
  listed before the device link, and unknown is not kernel-free.
"""

from __future__ import annotations

import os
import struct
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import FormatError
from . import archive, bitcode, cuda, fatbin, hip, offloading
from ._blob import Blob, OpenFile
from .elf import EM_AMDGPU, EM_CUDA, ElfFile, is_elf

CUDA_SECTIONS = (".nv_fatbin", "__nv_relfatbin")  # in cuobjdump's order of preference
HIP_SECTION = ".hip_fatbin"
HIP_BUNDLE_SECTION_PREFIX = "__CLANG_OFFLOAD_BUNDLE__"  # -fgpu-rdc objects
OFFLOADING_SECTION = ".llvm.offloading"
BEFORE_LINK = "no kernels can be listed before device link"
_EFLAGS = struct.Struct("<I")
_CLANG_SECTION_MARKERS = (HIP_SECTION, HIP_BUNDLE_SECTION_PREFIX, OFFLOADING_SECTION)


@dataclass(frozen=True)
class Result:
    """Kernels of one input: per architecture, or the reason they are unknown."""

    path: str
    kernels: Mapping[str, frozenset[str]] = field(default_factory=dict)
    error: str | None = None
    device: bool = False  # the input holds device code (kernels or not)
    members: tuple[Result, ...] = ()  # archive members, each read on its own

    @property
    def archs(self) -> tuple[str, ...]:
        found = set(self.kernels)
        for m in self.members:
            found.update(m.archs)
        return tuple(sorted(found))

    @property
    def symbols(self) -> tuple[str, ...]:
        """Sorted unique kernel names across architectures (and members)."""
        found: set[str] = set().union(*self.kernels.values())
        for m in self.members:
            found.update(m.symbols)
        return tuple(sorted(found))

    @property
    def failures(self) -> tuple[Result, ...]:
        """This result and any members whose kernels are unknown."""
        own = (self,) if self.error is not None else ()
        return own + tuple(f for m in self.members for f in m.failures)

    def to_json(self, per_arch: bool = False) -> dict[str, Any]:
        record: dict[str, Any] = {
            "path": self.path,
            "archs": list(self.archs),
            "symbols": list(self.symbols),
            "error": self.error,
        }
        if per_arch:
            record["per_arch"] = {a: sorted(s) for a, s in sorted(self.kernels.items())}
        if self.members:
            record["members"] = [m.to_json(per_arch) for m in self.members]
        return record


def read_kernels(path: str | os.PathLike[str]) -> Result:
    """The kernel entry symbols of one file; never raises on bad input."""
    name = os.fspath(path)
    try:
        with OpenFile(name) as blob:
            return read_blob(blob)
    except FormatError as e:
        return failed(name, e)


def read_blob(blob: Blob) -> Result:
    """:func:`read_kernels` of a file already open (the producer reads kernels, sizes and digests in one
    open); never raises on bad input."""
    try:
        return _read(blob)
    except FormatError as e:
        return failed(blob.name, e)


def failed(name: str, e: FormatError) -> Result:
    """A result for an input that could not be read; the reason names a nested part if one failed."""
    return Result(name, error=e.reason if e.path == name else str(e))


def _read(blob: Blob) -> Result:
    if blob.size == 0:
        raise blob.error("empty file")
    if archive.is_archive(blob):
        return Result(blob.name, members=tuple(_read_member(m) for _, m in archive.iter_members(blob)))
    code = _DeviceCode()
    if is_elf(blob):
        _from_elf(blob, code)
    elif fatbin.is_fatbin(blob):
        _from_fatbin(blob, code)
    elif hip.is_bundle(blob):
        _from_bundles(blob, code)
    else:
        raise blob.error("not an ELF file, ar archive, fatbin or offload bundle")
    return Result(blob.name, code.kernels(blob), device=code.found)


def _read_member(member: Blob) -> Result:
    try:
        return _read(member)
    except FormatError as e:
        return failed(member.name, e)


class _DeviceCode:
    """Device code found in one input, sorted by how final it is."""

    def __init__(self) -> None:
        self.final: dict[str, set[str]] = defaultdict(set)
        self.ptx: list[tuple[str, Callable[[], frozenset[str]]]] = []  # read only if needed
        self.unlinked: set[str] = set()

    @property
    def found(self) -> bool:
        return bool(self.final or self.ptx or self.unlinked)

    def kernels(self, blob: Blob) -> dict[str, frozenset[str]]:
        if self.final:
            return {arch: frozenset(names) for arch, names in self.final.items()}
        if self.ptx:
            merged: dict[str, set[str]] = defaultdict(set)
            for arch, read in self.ptx:
                merged[arch].update(read())
            return {arch: frozenset(names) for arch, names in merged.items()}
        if self.unlinked:
            raise blob.error(unlinked_reason(self.unlinked))
        return {}


def unlinked_reason(archs: set[str]) -> str:
    """Why an input with only LTO-IR or bitcode has no kernel list (both backends say the same)."""
    return f"only LTO-IR or bitcode device code ({', '.join(sorted(archs))}): {BEFORE_LINK}"


def is_clang_offload_section(name: str) -> bool:
    """A section of HIP or clang offload code, which only this reader (not cuobjdump) understands."""
    return name in (HIP_SECTION, OFFLOADING_SECTION) or name.startswith(HIP_BUNDLE_SECTION_PREFIX)


def _from_elf(blob: Blob, code: _DeviceCode) -> None:
    elf = ElfFile(blob)
    if elf.machine == EM_CUDA:
        code.final[cubin_arch(elf)].update(cuda.cubin_kernels(blob))
        return
    if elf.machine == EM_AMDGPU:
        code.final["amdgcn"].update(hip.code_object_kernels(blob))
        return
    for name in CUDA_SECTIONS:
        section = elf.section(name)
        if section is not None:
            _from_fatbin(elf.window(section), code)
            break
    if not any(elf.has_section_name_containing(n.encode()) for n in _CLANG_SECTION_MARKERS):
        return
    for section in elf.sections:
        if section.name == HIP_SECTION:
            _from_bundles(elf.window(section), code)
        elif section.name.startswith(HIP_BUNDLE_SECTION_PREFIX):
            entry_id = section.name[len(HIP_BUNDLE_SECTION_PREFIX) :]
            if not entry_id.startswith("host-"):
                _from_hip_image(elf.window(section), hip.target_id(entry_id), code)
        elif section.name == OFFLOADING_SECTION:
            _from_offloading(elf.window(section), code)


def cubin_arch(elf: ElfFile) -> str:
    flags = elf.blob.unpack(_EFLAGS, 0x30, "ELF flags")[0]
    # CUDA 12.8+ cubins keep the SM in bits 8-15; older ones in bits 0-7.
    sm = (flags >> 8) & 0xFF if flags & 0xFF < 0x14 else flags & 0xFF
    return f"sm_{sm}"


def cubin_kernels(blob: Blob, entry: fatbin.FatbinEntry, make: Callable[[], frozenset[str]]) -> frozenset[str]:
    """A fatbin cubin's kernels, made once per file opened with a memo (:meth:`Blob.cached`), and kept
    whatever the payloads took of it (a few names a cubin): the sizes walk (:mod:`.sizes`), which inflates
    the cubin, leaves them there, and this walk inflates it no more."""
    key = ("cubin kernels", entry.flags, entry.compressed_size, entry.uncompressed_size)
    return blob.cached(entry.offset, key, make, lambda _kernels: 0)


def _from_fatbin(blob: Blob, code: _DeviceCode) -> None:
    for entry in fatbin.iter_entries(blob):
        if entry.kind is fatbin.EntryKind.CUBIN:
            code.final[entry.arch].update(cubin_kernels(blob, entry, lambda e=entry: cuda.cubin_kernels(
                Blob.from_bytes(f"{blob.name} [{e.arch} cubin]", e.payload(blob)))))
        elif entry.kind is fatbin.EntryKind.PTX:
            code.ptx.append((entry.arch, _ptx_reader(blob, entry)))
        else:
            code.unlinked.add(entry.arch)


def _ptx_reader(blob: Blob, entry: fatbin.FatbinEntry) -> Callable[[], frozenset[str]]:
    return lambda: cuda.ptx_entries(blob, entry.payload(blob))


def _from_bundles(blob: Blob, code: _DeviceCode) -> None:
    for bundle in hip.iter_bundles(blob):
        for entry in hip.iter_entries(bundle):
            if entry.kind != "host" and entry.size:
                _from_hip_image(entry.blob, entry.arch, code)


def _from_hip_image(blob: Blob, arch: str, code: _DeviceCode) -> None:
    if blob.startswith(bitcode.MAGIC):  # -fgpu-rdc: the module still names its kernels exactly
        code.final[arch].update(bitcode.amdgpu_kernels(blob))
    elif hip.is_bitcode(blob):
        code.unlinked.add(arch)
    elif is_elf(blob):
        code.final[arch].update(hip.code_object_kernels(blob))
    else:
        raise blob.error(f"offload bundle entry for {arch} is neither a code object nor bitcode")


def _from_offloading(blob: Blob, code: _DeviceCode) -> None:
    kinds = offloading.ImageKind
    for image in offloading.iter_images(blob):
        if image.kind is kinds.BITCODE and image.strings.get("triple", "").startswith("amdgcn"):
            code.final[image.arch].update(bitcode.amdgpu_kernels(image.blob))
        elif image.kind is kinds.BITCODE:
            code.unlinked.add(image.arch)
        elif image.kind is kinds.PTX:
            text = image.blob.read(0, image.blob.size, "PTX image")
            code.ptx.append((image.arch, lambda b=image.blob, t=text: cuda.ptx_entries(b, t)))
        elif image.kind in (kinds.OBJECT, kinds.CUBIN):
            elf = ElfFile(image.blob)
            reader = cuda.cubin_kernels if elf.machine == EM_CUDA else hip.code_object_kernels
            code.final[image.arch].update(reader(image.blob))
        elif image.kind is kinds.FATBINARY and fatbin.is_fatbin(image.blob):
            _from_fatbin(image.blob, code)
        elif image.kind is kinds.FATBINARY and hip.is_bundle(image.blob):
            _from_bundles(image.blob, code)
        else:
            raise blob.error(f"offload image of kind {image.kind.name} is not readable")
