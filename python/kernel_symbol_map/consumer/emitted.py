"""What the build emitted: two builds' digests compared, kernel by kernel and object by object (issue 27).

The base maps are of the commit the recordings were made at; the new maps of
the change's own build. A kernel *changed* when the set of its digests (one per
architecture and object holding it: a device-link image as well as the object
compiling it) differs between the two: its code changed in some architecture,
it appeared, or it went away. An object's *host changed* when its host digest
differs, or the object is in one build only.

Nothing here reads sources or deps: this is the build's own answer, as good as
the build. :func:`unusable` says when two sets of maps cannot be compared: a
map without digests, digests of another scheme, or an object with device code
whose digests do not cover its kernels (then the comparison falls back to
sources); or maps built by other compilers (then every digest would differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..mapformat import digests as map_digests
from .kernelmap import KernelMap

NO_DIGESTS = "no-digests"  # compare sources instead
TOOLCHAIN = "toolchain"  # every digest would differ: everything runs


@dataclass(frozen=True)
class HostChange:
    object: str
    target: str
    source: str
    how: str  # "changed", "added" or "removed"
    kernels: frozenset[str]  # the object's kernels, in either build


@dataclass
class Emitted:
    """Kernels whose device code changed (kernel -> how, with the architectures), and host changes."""

    kernels: dict[str, str] = field(default_factory=dict)
    hosts: list[HostChange] = field(default_factory=list)
    compared: int = 0  # kernels in either build

    def summary(self) -> str:
        how = [h for h in ("changed", "added", "removed") if any(v.startswith(h) for v in self.kernels.values())]
        counts = ", ".join(f"{sum(1 for v in self.kernels.values() if v.startswith(h))} {h}" for h in how)
        return (f"{len(self.kernels)} of {self.compared} kernels' device code differs ({counts or 'none'}); "
                f"{len(self.hosts)} objects' host code differs")


def unusable(base: Sequence[KernelMap], new: Sequence[KernelMap]) -> tuple[str, str] | None:
    """Why the two builds' digests cannot be compared, as (code, why); None when they can."""
    for side, kmaps in (("base", base), ("change's", new)):
        for m in kmaps:
            scheme = m.document.get("digests")
            if scheme != map_digests.SCHEME:
                what = "no digests (a map written before issue 27)" if scheme is None else f"digests of scheme {scheme}"
                return NO_DIGESTS, f"the {side} map {m.where or ''} holds {what}".replace("  ", " ")
            for o in m.objects:
                gap = _undigested(o)
                if gap:
                    return NO_DIGESTS, f"the {side} map's object {o['object']} {gap}"
    before, after = _toolchains(base), _toolchains(new)
    if before and after and before != after:
        differ = ", ".join(f"{lang}: {before.get(lang, '(none)')} -> {after.get(lang, '(none)')}"
                           for lang in sorted(set(before) | set(after)) if before.get(lang) != after.get(lang))
        return TOOLCHAIN, f"the change was built by other compilers than the base ({differ}): every digest differs"
    return None


def _undigested(o: dict) -> str:
    """What an object's digests leave out, or "" when they cover it: its host code (a precompiled header
    has none of its own: ``{}``), and each of its kernels in some architecture."""
    digests = o.get("digests")
    if digests is None:
        return "has no digests (its code could not be digested)"
    if not digests:
        return "has kernels but empty digests (a malformed map)" if o["symbols"] else ""
    columns = (digests.get("code") or {}).values()
    if any(len(column) != len(o["symbols"]) for column in columns):
        return f"has digest lists that do not match its {len(o['symbols'])} symbols (a malformed map)"
    covered = {k for column in columns for k, d in zip(o["symbols"], column) if d}
    if "host" not in digests:
        return "has no host digest"
    missing = sorted(set(o["symbols"]) - covered)
    return f"has no digest of kernel {missing[0]} in any architecture" if missing else ""


def _toolchains(kmaps: Sequence[KernelMap]) -> dict[str, str]:
    found: dict[str, set[str]] = {}
    for m in kmaps:
        for lang, compiler in (m.document.get("toolchain") or {}).items():
            found.setdefault(lang, set()).add(compiler)
    return {lang: ", ".join(sorted(c)) for lang, c in found.items()}


def compare(base: Sequence[KernelMap], new: Sequence[KernelMap]) -> Emitted:
    """The kernels and objects whose code differs between the two builds (see the module docstring)."""
    before, after = _kernel_digests(base), _kernel_digests(new)
    found = Emitted(compared=len(before.keys() | after.keys()))
    for kernel in sorted(before.keys() | after.keys()):
        a, b = before.get(kernel), after.get(kernel)
        if a is None:
            found.kernels[kernel] = "added"
        elif b is None:
            found.kernels[kernel] = "removed"
        elif a != b:
            archs = sorted({arch for arch, _ in a ^ b})
            found.kernels[kernel] = f"changed ({', '.join(archs)})"
    hosts_before, hosts_after = _hosts(base), _hosts(new)
    for key in sorted(hosts_before.keys() | hosts_after.keys()):
        a, b = hosts_before.get(key), hosts_after.get(key)
        if a is not None and b is not None and a[0] == b[0]:
            continue
        how = "added" if a is None else "removed" if b is None else "changed"
        kernels = frozenset((a[2] if a else frozenset()) | (b[2] if b else frozenset()))
        found.hosts.append(HostChange(key[1], key[0], (b or a)[1], how, kernels))  # type: ignore[index]
    return found


def _kernel_digests(kmaps: Sequence[KernelMap]) -> dict[str, frozenset[tuple[str, str]]]:
    """Kernel -> every (architecture, digest) the maps hold for it."""
    found: dict[str, set[tuple[str, str]]] = {}
    for m in kmaps:
        for i, o in enumerate(m.objects):
            table = map_digests.kernel_digests(o["symbols"], o.get("digests") or {}, f"{m.where}: objects[{i}]")
            for kernel, archs in table.items():
                found.setdefault(kernel, set()).update(archs.items())
    return {k: frozenset(v) for k, v in found.items()}


def _hosts(kmaps: Sequence[KernelMap]) -> dict[tuple[str, str], tuple[str | None, str, frozenset[str]]]:
    """(target, object) -> (host digest, source, kernels), for objects with host code of their own."""
    found = {}
    for m in kmaps:
        for o in m.objects:
            digests = o.get("digests")
            if digests:  # {}: a precompiled header, whose effect shows in the objects compiled with it
                found[(o["target"], o["object"])] = (digests.get("host"), o["source"], frozenset(o["symbols"]))
    return found
