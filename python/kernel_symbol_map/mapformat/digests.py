"""An object's ``digests`` as the map stores them, aligned with ``symbols`` like ``sizes``.

``{"covers": {"host": ..., "kernels": n}, "host": hex, "code": {arch: [hex, ...]}, "whole": [arch, ...]}``:

- ``covers``: what the record covers, said by the writer, so that a record
  with something left out never reads as "nothing changed":
  ``host`` is ``"digested"`` (the ``host`` field holds the object's host
  code's digest), ``"device image"`` (the object is device code alone, a raw
  cubin, fatbin or PTX file: it has no host code) or ``"precompiled header"``
  (no code of its own: its effect shows in the objects compiled with it);
  absent when the host code could not be digested. ``kernels`` counts the
  kernels of ``symbols`` that have a digest in some architecture.
- ``host``: the digest of the object's host code (:mod:`..readers.hostdigest`).
- ``code[arch]``: per kernel, in the order of the object's ``symbols``, the
  digest of everything its device code can run or read in that architecture's
  image (``sm_90``; ``compute_90`` for PTX), ``""`` where the architecture
  lacks the kernel. Two images of one architecture (``ld -r``) give a kernel
  found in both the digest of its two digests.
- ``whole``: the architectures whose digests are of the whole image, the same
  for each of its kernels (AMDGPU code objects, bitcode, PTX that did not split
  into entries): a change to one kernel there changes all.
- ``host_parts``: the host code by parts (:mod:`..readers.hostfunctions`),
  in an object compiled with host coverage, where it splits: ``functions`` (each host function's name, nvcc's unit
  hash and temporary file name masked, -> its digest), ``init`` (the names of its static initialisers
  and finalisers), ``data`` (the digest of the rest) and, for an object
  compiled with host coverage, ``unseen`` (the functions it does not see run:
  a recording's ``host_functions`` cannot clear them). Absent, the host code is
  compared whole.
- ``ptx[arch]``: a PTX image beside a cubin of its architecture (``compute_80``
  beside ``sm_80``, what CMake's ``80`` and nvcc's ``-arch=sm_80`` build): the
  digest of the whole image, normalised as per-entry digests are. Its kernels
  are digested one by one in the cubin, from which ptxas compiled that text,
  so ``code`` has no column for it. A consumer reads a change to it as a
  change of the kernels whose code in the cubin changed, or, where none did,
  of every kernel of the object.
- ``relocatable[arch]``: for relocatable device code (``-rdc`` cubins,
  ``-fgpu-rdc`` bitcode), the digest of the whole image: its device functions
  reach kernels of other objects once linked, where no map may see the link (a
  device link outside CMake, clang's link of bitcode into the library).

The map says which digests it holds with a top-level ``digests`` field, the
scheme's version (:data:`SCHEME`): maps of two schemes are never compared.
:func:`uncovered` is the one reading of a record a consumer may compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hashlib

from ..errors import MapError

SCHEME = 5
# A precompiled header's object ends in one of these (the build-tree model's PCH_SUFFIXES): its code shows
# in the objects compiled with it. No other object may say it has no code of its own.
PRECOMPILED_HEADERS = (".gch", ".pch")
# covers.host: how the record covers the object's host code (absent: it does not).
DIGESTED, DEVICE_IMAGE, PRECOMPILED_HEADER = "digested", "device image", "precompiled header"
HOST_COVERAGE = (DIGESTED, DEVICE_IMAGE, PRECOMPILED_HEADER)


@dataclass(frozen=True)
class ImageDigests:
    """One image's digests, as the reader gives them."""

    arch: str
    kernels: Mapping[str, str]
    per_kernel: bool
    relocatable: str = ""  # the whole image's digest, for relocatable device code
    beside_cubin: str = ""  # PTX beside a cubin of its architecture: the whole image's digest (no per-kernel ones)


def pack(symbols: Sequence[str], images: Iterable[ImageDigests], host: str | None,
         host_coverage: str | None = DIGESTED, parts: HostParts | None = None) -> dict[str, Any] | None:
    """The map's form; None when an image names a kernel ``symbols`` lacks (the reader that listed the
    symbols and the one that digested disagree: no digests rather than wrong ones). ``host`` is the host
    code's digest; where there is none, ``host_coverage`` says why (``DEVICE_IMAGE``), or is None when the
    host code could not be digested. ``parts``: the host code by parts, where it splits."""
    index = {s: i for i, s in enumerate(symbols)}
    per_arch: dict[str, dict[str, list[str]]] = {}
    whole: set[str] = set()
    relocatable: dict[str, list[str]] = {}
    ptx: dict[str, list[str]] = {}
    for image in images:
        if image.relocatable:
            relocatable.setdefault(image.arch, []).append(image.relocatable)
        if image.beside_cubin:
            ptx.setdefault(image.arch, []).append(image.beside_cubin)
            continue
        if not image.kernels.keys() <= index.keys():
            return None
        found = per_arch.setdefault(image.arch, {})
        for kernel, digest in image.kernels.items():
            found.setdefault(kernel, []).append(digest)
        if not image.per_kernel:
            whole.add(image.arch)
    covers: dict[str, Any] = {}
    if host is not None:
        covers["host"] = DIGESTED
    elif host_coverage not in (None, DIGESTED):
        covers["host"] = host_coverage
    out: dict[str, Any] = {"covers": covers}
    if host is not None:
        out["host"] = host
        if parts is not None:
            out["host_parts"] = {"functions": dict(sorted(parts.functions.items())), "init": sorted(parts.init),
                                 "data": parts.data}
            if parts.unseen is not None:
                out["host_parts"]["unseen"] = sorted(parts.unseen)
    code = {}
    for arch, found in sorted(per_arch.items()):
        column = [""] * len(symbols)
        for kernel, digests in found.items():
            column[index[kernel]] = digests[0] if len(digests) == 1 else _combined(digests)
        code[arch] = column
    if code:
        out["code"] = code
    covers["kernels"] = sum(1 for i in range(len(symbols)) if any(column[i] for column in code.values()))
    if whole:
        out["whole"] = sorted(whole)
    if ptx:
        out["ptx"] = {a: d[0] if len(d) == 1 else _combined(d) for a, d in sorted(ptx.items())}
    if relocatable:
        out["relocatable"] = {a: d[0] if len(d) == 1 else _combined(d) for a, d in sorted(relocatable.items())}
    return out


def precompiled_header() -> dict[str, Any]:
    """The record of a precompiled header: no code of its own."""
    return {"covers": {"host": PRECOMPILED_HEADER, "kernels": 0}}


def uncovered(o: Mapping[str, Any]) -> str:
    """What the map object ``o``'s digests leave out, or "" when they cover its host code and each of its
    kernels in some architecture. Only what the record says it covers, and holds, counts: a record that
    says nothing (``{}``, a writer of another scheme) or less than the object has is never "no change"."""
    digests = o.get("digests")
    if digests is None:
        return "has no digests (its code could not be digested)"
    covers = digests.get("covers")
    if not isinstance(covers, Mapping):
        return "has digests that do not say what they cover (a malformed map)"
    symbols = o["symbols"]
    columns = (digests.get("code") or {}).values()
    if any(len(column) != len(symbols) for column in columns):
        return f"has digest lists that do not match its {len(symbols)} symbols (a malformed map)"
    host = covers.get("host")
    if host == DIGESTED:
        if "host" not in digests:
            return "says its host code is digested but holds no host digest (a malformed map)"
    elif host == PRECOMPILED_HEADER:
        if symbols or not o["object"].endswith(PRECOMPILED_HEADERS):
            return "says it is a precompiled header, which it is not (a malformed map)"
    elif host == DEVICE_IMAGE:
        if not o.get("device"):
            return "says it is a device image but holds no device code (a malformed map)"
    else:
        return "has host code that was not digested"
    covered = {k for column in columns for k, d in zip(symbols, column) if d}
    missing = sorted(set(symbols) - covered)
    if missing:
        return f"has no digest of kernel {missing[0]} in any architecture"
    if covers.get("kernels") != len(symbols):
        return f"says its digests cover {covers.get('kernels')} of its {len(symbols)} kernels (a malformed map)"
    return ""


@dataclass(frozen=True)
class HostParts:
    """An object's host code by parts (the map's ``host_parts``)."""

    functions: Mapping[str, str]
    init: frozenset[str]
    data: str
    unseen: frozenset[str] | None = None  # None: not compiled with host coverage


def host_parts(digests: Mapping[str, Any], where: str) -> HostParts | None:
    """The record's ``host_parts``; None where it has none; a :class:`MapError` naming ``where`` when they are
    not what the map format says."""
    parts = digests.get("host_parts")
    if parts is None:
        return None
    functions, init, data, unseen = (parts.get(k) for k in ("functions", "init", "data", "unseen")) \
        if isinstance(parts, Mapping) else (None, None, None, None)
    if not (isinstance(functions, Mapping) and all(isinstance(n, str) and isinstance(d, str)
                                                   for n, d in functions.items())
            and _names(init) and isinstance(data, str) and (unseen is None or _names(unseen))):
        raise MapError(f"{where}.digests.host_parts: not {{\"functions\": {{name: digest}}, \"init\": [name], "
                       "\"data\": digest, \"unseen\": [name]}")
    return HostParts(functions, frozenset(init), data, None if unseen is None else frozenset(unseen))


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


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
