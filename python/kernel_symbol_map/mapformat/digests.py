"""An object's ``digests`` as the map stores them (issue 27), aligned with ``symbols`` like ``sizes``.

``{"host": hex, "code": {arch: [hex, ...]}, "whole": [arch, ...]}``:

- ``host``: the digest of the object's host code (:mod:`..readers.hostdigest`);
  absent for an input with no host ELF (a raw cubin or fatbin).
- ``code[arch]``: per kernel, in the order of the object's ``symbols``, the
  digest of everything its device code can run or read in that architecture's
  image (``sm_90``; ``compute_90`` for PTX), ``""`` where the architecture
  lacks the kernel. Two images of one architecture (``ld -r``) give a kernel
  found in both the digest of its two digests.
- ``whole``: the architectures whose digests are of the whole image, the same
  for each of its kernels (AMDGPU code objects, bitcode, PTX that did not split
  into entries): a change to one kernel there changes all.
- ``relocatable[arch]``: for relocatable device code (``-rdc`` cubins,
  ``-fgpu-rdc`` bitcode), the digest of the whole image: its device functions
  reach kernels of other objects once linked, where no map may see the link (a
  device link outside CMake, clang's link of bitcode into the library).

The map says which digests it holds with a top-level ``digests`` field, the
scheme's version (:data:`SCHEME`): maps of two schemes are never compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hashlib

from ..errors import MapError

SCHEME = 2
# A precompiled header's object ends in one of these (the build-tree model's PCH_SUFFIXES): its digests are
# ``{}``, since its code shows in the objects compiled with it. No other object's may be.
PRECOMPILED_HEADERS = (".gch", ".pch")


@dataclass(frozen=True)
class ImageDigests:
    """One image's digests, as the reader gives them."""

    arch: str
    kernels: Mapping[str, str]
    per_kernel: bool
    relocatable: str = ""  # the whole image's digest, for relocatable device code


def pack(symbols: Sequence[str], images: Iterable[ImageDigests], host: str | None) -> dict[str, Any] | None:
    """The map's form; None when an image names a kernel ``symbols`` lacks (the reader that listed the
    symbols and the one that digested disagree: no digests rather than wrong ones)."""
    index = {s: i for i, s in enumerate(symbols)}
    per_arch: dict[str, dict[str, list[str]]] = {}
    whole: set[str] = set()
    relocatable: dict[str, list[str]] = {}
    for image in images:
        if image.relocatable:
            relocatable.setdefault(image.arch, []).append(image.relocatable)
        if not image.kernels.keys() <= index.keys():
            return None
        found = per_arch.setdefault(image.arch, {})
        for kernel, digest in image.kernels.items():
            found.setdefault(kernel, []).append(digest)
        if not image.per_kernel:
            whole.add(image.arch)
    out: dict[str, Any] = {} if host is None else {"host": host}
    code = {}
    for arch, found in sorted(per_arch.items()):
        column = [""] * len(symbols)
        for kernel, digests in found.items():
            column[index[kernel]] = digests[0] if len(digests) == 1 else _combined(digests)
        code[arch] = column
    if code:
        out["code"] = code
    if whole:
        out["whole"] = sorted(whole)
    if relocatable:
        out["relocatable"] = {a: d[0] if len(d) == 1 else _combined(d) for a, d in sorted(relocatable.items())}
    return out


def _combined(digests: list[str]) -> str:
    """One kernel's digest from those of its images (of one architecture), in any order."""
    first = digests[0]
    return hashlib.blake2b("\0".join(sorted(digests)).encode(), digest_size=len(first) // 2).hexdigest()


def kernel_digests(symbols: Sequence[str], digests: Mapping[str, Any], where: str) -> dict[str, dict[str, str]]:
    """Kernel -> arch -> digest, the architectures that lack a kernel left out; a :class:`MapError` naming
    ``where`` if a list does not match the symbols."""
    out: dict[str, dict[str, str]] = {s: {} for s in symbols}
    for arch, column in (digests.get("code") or {}).items():
        if len(column) != len(symbols):
            raise MapError(f"{where}.digests.code.{arch}: {len(column)} digests for {len(symbols)} symbols")
        for kernel, digest in zip(symbols, column):
            if digest:
                out[kernel][arch] = digest
    return out
