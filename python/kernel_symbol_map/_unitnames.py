"""nvcc's hash of a translation unit's path, in the names of its internal-linkage code.

nvcc names an anonymous namespace ``_GLOBAL__N__<hash>_<n>_<file>_...``, a
file-static function or variable in device code ``_INTERNAL_<hash>_<n>_<file>_...``
(and so a kernel templated on one: ``_Z7appliedIXadL_ZN34_INTERNAL_...``) and,
under ``-rdc``, a static function ``__nv_static_<n>__<hash>_<n>_<file>_...``,
the unit's module id ``_<hash>_<n>_<file>_...`` and its registration
(``__fatbinwrap_<hash>_...``, ``__cudaRegisterLinkedBinary_<hash>_...``),
where ``<hash>`` (8 hex digits) is made from the path the file was compiled
at: the same file built in another folder names the same code otherwise.
One translation unit has one such hash. Masking it (at its length, so every
offset keeps its meaning) where a file holds exactly one makes two builds in
two folders name the same code alike; a file with several (a device link of
many units) is left as it is, and differs, the safe way.
"""

from __future__ import annotations

import re
from collections import Counter

import regex

# ``_INTERNAL_`` is found where it is mangled (``N34_INTERNAL_``): a user's ``cfg_INTERNAL_20240101_1_x``
# is no unit's name. The others hold ``__``, which no user's name may.
_NAMED = rb"_GLOBAL__N__|\d_INTERNAL_|__nv_static_\d{1,6}__|__fatbinwrap_|__cudaRegisterLinkedBinary_"
UNIT = regex.compile(rb"(?<=" + _NAMED + rb")[0-9a-f]{8}(?=_\d+_)")  # where a unit's hash is found
UNIT_TEXT = regex.compile(UNIT.pattern.decode())
MASK = b"xxxxxxxx"
MARKERS = (b"_GLOBAL__N__", b"_INTERNAL_", b"__nv_static_", b"__fatbinwrap_", b"__cudaRegisterLinkedBinary_")
_ANY_MARKER = re.compile(b"|".join(map(re.escape, MARKERS)))  # the standard module: literals, at memchr-like speed


def unit_hash(data: bytes) -> bytes | None:
    """The one unit hash ``data`` holds; None when it holds none, or several."""
    # The markers in one pass, not one per marker. Where one marker's match hides another's (text that
    # runs two together), the first is not followed by a hash there, and the counts below send the search
    # to the whole regex.
    present = Counter(_ANY_MARKER.findall(data))  # marker -> how many times it occurs (its matches)
    if not present:
        return None
    first = UNIT.search(data, min(data.find(m) for m in present))
    if first is None:
        return None
    # The usual case, without a regex pass over the whole of a large image: every marker but __nv_static_'s
    # is followed by the hash, so when each is followed by the first match's wherever it occurs, no match
    # of UNIT can find another.
    hash_ = first.group()
    if b"__nv_static_" not in present and all(n == data.count(m + hash_) for m, n in present.items()):
        return hash_
    found = set(UNIT.findall(data))
    return found.pop() if len(found) == 1 else None


def masked(data: bytes, unit: bytes | None) -> bytes:
    """``data`` with ``unit``'s hash masked wherever a name of the unit holds it, as found or as its module
    id (``_<hash>_<n>_<file>``): the hash then ``_<digits>_`` (nothing when ``unit`` is None)."""
    if unit is None or unit not in data:
        return data
    return regex.sub(rb"(?<![0-9a-f])" + unit + rb"(?=_\d+_)", MASK, data)


def canonical(names: list[str]) -> list[str] | None:
    """``names`` (one object's kernels) with their one unit hash masked; None when they hold none or several."""
    found = {h for n in names for h in UNIT_TEXT.findall(n)}
    if len(found) != 1:
        return None
    return [spelled(n) for n in names]


def spelled(name: str) -> str:
    """``name`` with every unit hash in it masked: the same code as another folder's build names it."""
    return UNIT_TEXT.sub(MASK.decode(), name)


_MASKED = regex.compile(r"(?<![0-9a-f])xxxxxxxx(?=_\d+_)")


def unmasked(names: dict[str, str], unit: bytes | None) -> dict[str, str]:
    """A digest table keyed by masked names, keyed by the names ``unit``'s hash gave them again."""
    if unit is None:
        return names
    text = unit.decode()
    return {_MASKED.sub(text, name): digest for name, digest in names.items()}


_TMPXFT = regex.compile(r"tmpxft_[0-9a-fx]{8}_[0-9a-fx]{8}")  # as nvcc names it, or as a map masked it
# GCC's copies of one function: its cold part, constant-propagated and scalar-replaced clones, a part split
# off. Each is the function's code, and their numbers may differ between two builds.
_CLONE = regex.compile(r"(?:\.(?:cold|constprop|isra|part|lto_priv|localalias|specialized|clone)(?:\.\d+)*)+$")


def host_function(name: str) -> str:
    """A host function's name as any build of the same code names it: nvcc's unit hash and temporary file
    name masked, and a GCC clone's suffix (``.constprop.0``, ``.cold``) dropped, so that a function and its
    clones are one."""
    name = _CLONE.sub("", name)
    if "tmpxft_" in name:
        name = _TMPXFT.sub("tmpxft", name)
    return spelled(name)
