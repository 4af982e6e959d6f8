"""What a rebuild actually changed, object by object: the ground truth ``select`` is checked against.

Nothing here reads a map. An object's host code is every section of its ELF
file but the device-code containers, read with pyelftools (independent of the
package's own ELF reader); its device code is each image in those containers
(a cubin, PTX, an AMDGPU code object or bitcode), decompressed, with the
kernels it defines; LTO IR (``-dlto``), which nvcc stores scrambled and which
names no kernel before the device link, by its stored bytes. Comparing two
snapshots of a build gives:

* objects whose host code changed (or that appeared or went away);
* kernels whose device code changed in any architecture, or that appeared or
  went away. An image is compared whole, so a change to a device function a
  kernel calls counts for every kernel of that image.

Noise, and only noise, is normalised, each shown by compiling twice:
nvcc names its temporary files ``tmpxft_<pid>_<n>-...`` and that name lands
in a host ``STT_FILE`` symbol and, with ``-ffunction-sections``, in the names
of a file's static-initializer sections (tests/test_digests.py,
``test_a_static_initializers_section_names_are_not_code``); debug information
(``.debug_*``, what ``-g`` adds, with the temporary name in it) and a build id
are no code. The build's folder is not: a snapshot is compared with one of the
same folder (tests/test_two_folders.py builds the change where its truth's base
was built).
Section layout (offsets, sizes of the device containers in symbol sizes) is
not compared: sections are compared by name and contents, symbols and
relocations by what they name.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import regex
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from kernel_symbol_map.readers import bitcode, cuda, fatbin, hip
from kernel_symbol_map.readers._blob import Blob
from kernel_symbol_map.readers.devicecode import CUDA_SECTIONS, HIP_BUNDLE_SECTION_PREFIX, HIP_SECTION, OFFLOADING_SECTION
from kernel_symbol_map.readers.elf import ElfFile

TMPXFT = regex.compile(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}")
NOT_CODE = (".debug_", ".zdebug_", ".gnu_debuglink", ".note.gnu.build-id")


def _device_section(name: str) -> bool:
    return name in CUDA_SECTIONS or name in (HIP_SECTION, OFFLOADING_SECTION) or \
        name.startswith(HIP_BUNDLE_SECTION_PREFIX) or name == ".nvFatBinSegment" or name == ".hipFatBinSegment"


@dataclass(frozen=True)
class Image:
    key: str  # architecture, kind and place: the same in two snapshots of one object
    digest: str
    kernels: frozenset[str]


@dataclass(frozen=True)
class Snapshot:
    host: str
    images: dict[str, Image] = field(default_factory=dict)

    @property
    def kernels(self) -> frozenset[str]:
        return frozenset().union(*(i.kernels for i in self.images.values()))


def snapshot(path: Path) -> Snapshot:
    data = path.read_bytes()
    elf = ELFFile(io.BytesIO(data))
    return Snapshot(_host(elf), _images(path, data))


def _host(elf: ELFFile) -> str:
    """Every host section by name and contents; symbols and relocations by what they name."""
    h = hashlib.sha256()
    names = {i: _unnamed(s.name) for i, s in enumerate(elf.iter_sections())}
    symbols: list[str] = []
    table = elf.get_section_by_name(".symtab")
    if isinstance(table, SymbolTableSection):
        for s in table.iter_symbols():
            shndx = s["st_shndx"]
            where = names.get(shndx, "") if isinstance(shndx, int) else str(shndx)
            name = TMPXFT.sub(b"tmpxft", s.name.encode()).decode() or (where if s["st_info"]["type"] == "STT_SECTION"
                                                                       else "")
            symbols.append(name)
            device = _device_section(where)  # where the fatbin starts and how long it is: device code
            h.update(repr((name, s["st_info"]["type"], s["st_info"]["bind"], where,
                           0 if device else s["st_value"], 0 if device else s["st_size"])).encode())
    for section in elf.iter_sections():
        if section.name in (".symtab", ".strtab", ".shstrtab") or _device_section(section.name) or \
                section.name.startswith(NOT_CODE):
            continue
        if isinstance(section, RelocationSection):
            target = names.get(section["sh_info"], "")
            if _device_section(target) or target.startswith(NOT_CODE):
                continue
            for r in section.iter_relocations():
                i = r["r_info_sym"]
                h.update(repr((_unnamed(section.name), r["r_offset"], r["r_info_type"],
                               symbols[i] if i < len(symbols) else i,
                               r["r_addend"] if r.is_RELA() else 0)).encode())
            continue
        contents = section.data() if section["sh_type"] != "SHT_NOBITS" else str(section["sh_size"]).encode()
        h.update(_unnamed(section.name).encode() + b"\0" + contents)
    return h.hexdigest()


def _unnamed(name: str) -> str:
    """A name with nvcc's temporary file name masked."""
    return TMPXFT.sub(b"tmpxft", name.encode()).decode()


def _images(path: Path, data: bytes) -> dict[str, Image]:
    """Every device image of the object, by a key stable across rebuilds of it."""
    blob = Blob.from_bytes(str(path), data)
    elf = ElfFile(blob)
    found: dict[str, Image] = {}

    def add(key: str, payload: bytes, kernels: Iterable[str]) -> None:
        n = sum(1 for k in found if k.startswith(key))
        found[f"{key}#{n}"] = Image(key, hashlib.sha256(payload).hexdigest(), frozenset(kernels))

    for section in elf.sections:
        window = elf.window(section) if section.type != 8 else None
        if window is None:
            continue
        if section.name in CUDA_SECTIONS:
            for entry in fatbin.iter_entries(window):
                if entry.kind is fatbin.EntryKind.LTO_IR:  # stored in a form no reader here inflates: as stored
                    add(f"{section.name}:{entry.arch}:{entry.kind.name}",
                        window.read(entry.offset, entry.compressed_size, "LTO IR"), frozenset())
                    continue
                payload = entry.payload(window)
                sub = Blob.from_bytes(f"{path} [{entry.arch}]", payload)
                if entry.kind is fatbin.EntryKind.CUBIN:
                    kernels = cuda.cubin_kernels(sub)
                elif entry.kind is fatbin.EntryKind.PTX:
                    kernels = cuda.ptx_entries(sub, payload)
                else:
                    kernels = frozenset()
                add(f"{section.name}:{entry.arch}:{entry.kind.name}", payload, kernels)
        elif section.name == HIP_SECTION:
            for bundle in hip.iter_bundles(window):
                for entry in hip.iter_entries(bundle):
                    if entry.kind == "host" or not entry.size:
                        continue
                    payload = entry.blob.read(0, entry.blob.size, "code object")
                    add(f"hip:{entry.arch}", payload, hip.code_object_kernels(entry.blob))
        elif section.name.startswith(HIP_BUNDLE_SECTION_PREFIX) and "host-" not in section.name:
            payload = window.read(0, window.size, "bundle")
            kernels = bitcode.amdgpu_kernels(window) if window.startswith(bitcode.MAGIC) else frozenset()
            add(f"rdc:{section.name}", payload, kernels)
    return found


@dataclass
class Difference:
    host_changed: list[str] = field(default_factory=list)  # objects whose host code changed, appeared or went
    kernels_changed: set[str] = field(default_factory=set)  # device code changed, appeared or went away
    objects_changed: list[str] = field(default_factory=list)  # for messages

    def must_run(self, tests: dict[str, set[str]], host_reaches: dict[str, set[str]]) -> set[str]:
        """Tests the change can reach: those that launched a changed kernel; for a host change, those
        ``host_reaches`` names for that object (every test, for a host-only object)."""
        found = {t for t, launched in tests.items() if launched & self.kernels_changed}
        for obj in self.host_changed:
            found |= host_reaches[obj]
        return found


def compare(before: dict[str, Snapshot], after: dict[str, Snapshot]) -> Difference:
    diff = Difference()
    for obj in sorted(set(before) | set(after)):
        a, b = before.get(obj), after.get(obj)
        if a is None or b is None:
            diff.host_changed.append(obj)
            diff.kernels_changed |= (a or b).kernels  # type: ignore[union-attr]
            diff.objects_changed.append(obj)
            continue
        changed = False
        if a.host != b.host:
            diff.host_changed.append(obj)
            changed = True
        for key in set(a.images) | set(b.images):
            ia, ib = a.images.get(key), b.images.get(key)
            if ia is None or ib is None or ia.digest != ib.digest:
                diff.kernels_changed |= (ia.kernels if ia else frozenset()) | (ib.kernels if ib else frozenset())
                changed = True
        if changed:
            diff.objects_changed.append(obj)
    return diff
