"""What the build emitted: two builds' digests compared, kernel by kernel and object by object.

The base maps are of the commit the recordings were made at; the new maps of
the change's own build. Objects are matched by target and path. A kernel
*changed* when its digests differ in some object that holds it (a device-link
image as well as the object compiling it), in some architecture, or it
appeared in or went away from an object (a kernel that moves between files
changed; an object's kernels are matched by the names they have in any folder,
nvcc's hash of the file's path in an anonymous namespace's name masked). PTX
beside a cubin of its architecture (``compute_80`` beside ``sm_80``) is
digested whole: where it differs, the change is the kernels whose code in that
cubin differs (ptxas compiled it from that text), or, where none does, every
kernel of the object. An
object's *host changed* when its host digest differs, or the
object is in one build only. Where both builds split its host code by parts
(``host_parts``), the change says which: the functions whose digests differ
(by the name any build gives them, :func:`.._unitnames.host_function`), and
whether its data or a static initialiser differs; where they do not, or the
parts explain nothing of the difference, it is ``whole``. Relocatable device code (``-rdc``, ``-fgpu-rdc``)
that differs reaches every kernel of relocatable code in its target and the
targets linked to it, either way: its device functions are linked into them
where no map may see the link.

Nothing here reads sources or deps: this is the build's own answer, as good as
the build. :func:`unusable` says when two sets of maps cannot be compared: a
map without digests, digests of another scheme, or an object whose digests do
not cover its host code and each of its kernels, as the record itself says
(``mapformat.digests.uncovered``: ``{}`` covers nothing), then the comparison
falls back to sources; or maps built by other compilers (then every digest
would differ).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ... import _unitnames as unitnames
from ..._graph import reachable
from ...mapformat import digests as map_digests
from ..maps.kernelmap import KernelMap

NO_DIGESTS = "no-digests"  # compare sources instead
TOOLCHAIN = "toolchain"  # every digest would differ: everything runs


@dataclass(frozen=True)
class HostChange:
    object: str
    target: str
    source: str
    how: str  # "changed", "added" or "removed"
    kernels: frozenset[str]  # the object's kernels, in either build
    # Which parts differ (where both builds split the host code): function (by unitnames.host_function) ->
    # "changed", "added" or "removed"; and what else differs, "" when nothing else: "data", "static
    # initialiser <name>", or why the object is compared whole.
    functions: dict[str, str] = field(default_factory=dict)
    whole: str = "its host code is not split into functions in both builds"
    # The base's functions that host coverage does not see run (by unitnames.host_function); None when the
    # base was not compiled with host coverage.
    unseen: frozenset[str] | None = None


@dataclass
class Emitted:
    """Kernels whose device code changed (kernel -> how, with the architectures), and host changes."""

    kernels: dict[str, str] = field(default_factory=dict)
    hosts: list[HostChange] = field(default_factory=list)
    compared: int = 0  # kernels in either build
    linked: dict[str, str] = field(default_factory=dict)  # kernel -> the relocatable code that changed

    def summary(self) -> str:
        how = [h for h in ("changed", "added", "removed") if any(v.startswith(h) for v in self.kernels.values())]
        counts = ", ".join(f"{sum(1 for v in self.kernels.values() if v.startswith(h))} {h}" for h in how)
        linked = f"; {len(self.linked)} kernels linked with relocatable code that differs" if self.linked else ""
        return (f"{len(self.kernels)} of {self.compared} kernels' device code differs ({counts or 'none'}); "
                f"{len(self.hosts)} objects' host code differs{linked}")


def unusable(base: Sequence[KernelMap], new: Sequence[KernelMap]) -> tuple[str, str] | None:
    """Why the two builds' digests cannot be compared, as (code, why); None when they can."""
    for side, kmaps in (("base", base), ("change's", new)):
        for m in kmaps:
            scheme = m.document.get("digests")
            if scheme != map_digests.SCHEME:
                what = "no digests (a map from a version that wrote none)" if scheme is None else \
                    f"digests of scheme {scheme} (this version compares scheme {map_digests.SCHEME})"
                return NO_DIGESTS, f"the {side} map {m.where or ''} holds {what}".replace("  ", " ")
            for o in m.objects:
                gap = map_digests.uncovered(o)
                if gap:
                    return NO_DIGESTS, f"the {side} map's object {o['object']} {gap}"
    before, after = _toolchains(base), _toolchains(new)
    if before and after and before != after:
        differ = ", ".join(f"{lang}: {before.get(lang, '(none)')} -> {after.get(lang, '(none)')}"
                           for lang in sorted(set(before) | set(after)) if before.get(lang) != after.get(lang))
        return TOOLCHAIN, f"the change was built by other compilers than the base ({differ}): every digest differs"
    return None


def _toolchains(kmaps: Sequence[KernelMap]) -> dict[str, str]:
    found: dict[str, set[str]] = {}
    for m in kmaps:
        for lang, compiler in (m.document.get("toolchain") or {}).items():
            found.setdefault(lang, set()).add(compiler)
    return {lang: ", ".join(sorted(c)) for lang, c in found.items()}


def compare(base: Sequence[KernelMap], new: Sequence[KernelMap]) -> Emitted:
    """The kernels and objects whose code differs between the two builds (see the module docstring)."""
    before, after = _objects(base), _objects(new)
    found = Emitted(compared=len({k for side in (before, after) for o in side.values() for k in o.kernels}))
    relocated: set[str] = set()  # targets whose relocatable device code differs
    for key in sorted(before.keys() | after.keys()):
        a, b = before.get(key), after.get(key)
        ka, kb = _by_unit(a), _by_unit(b)
        for kernel in sorted(ka.keys() | kb.keys()):
            if kernel not in ka:
                how = "added"
            elif kernel not in kb:
                how = "removed"
            elif ka[kernel][1] != kb[kernel][1]:
                how = f"changed ({', '.join(sorted({arch for arch, _ in ka[kernel][1] ^ kb[kernel][1]}))})"
            else:
                continue
            for side in (ka, kb):  # as each build spells it: recordings name the one their build had
                if kernel in side:
                    found.kernels.setdefault(side[kernel][0], how)
        for arch in _ptx_alone(a, b, ka, kb):  # PTX that differs where the cubin ptxas made of it does not
            for side in (ka, kb):
                for name, _ in side.values():
                    found.kernels.setdefault(name, f"changed ({arch}: its object's PTX differs)")
        if a is None or b is None or a.host != b.host:
            how = "added" if a is None else "removed" if b is None else "changed"
            functions, whole = _parts(a, b)
            found.hosts.append(HostChange(key[1], key[0], (b or a).source, how,  # type: ignore[union-attr]
                                          frozenset(a.kernels if a else ()) | frozenset(b.kernels if b else ()),
                                          functions, whole, _unseen(a.parts) if a is not None else None))
        if (a.relocatable if a else {}) != (b.relocatable if b else {}):
            relocated.add(key[0])
    if relocated:
        targets = _linked([*base, *new], relocated)
        why = f"relocatable device code of {', '.join(sorted(relocated))} differs, and may be linked with it"
        for side in (before, after):
            for (target, _obj), o in side.items():
                if target in targets and o.relocatable:
                    for kernel in o.kernels:
                        found.linked.setdefault(kernel, why)
    return found


@dataclass(frozen=True)
class _Object:
    source: str
    host: str | None
    kernels: dict[str, frozenset[tuple[str, str]]]  # kernel -> its (architecture, digest) pairs
    relocatable: dict[str, str]
    parts: map_digests.HostParts | None = None
    ptx: dict[str, str] = field(default_factory=dict)  # arch -> the digest of PTX beside a cubin of its arch


def _ptx_alone(a: _Object | None, b: _Object | None, ka: Mapping[str, tuple[str, frozenset[tuple[str, str]]]],
               kb: Mapping[str, tuple[str, frozenset[tuple[str, str]]]]) -> list[str]:
    """The PTX architectures of an object in both builds whose whole-image digest differs while no kernel's
    code in the cubin of that architecture does: a change there is every kernel's. Where a kernel's cubin
    code changed too, the PTX is the text ptxas compiled it from, and the change is that kernel's."""
    if a is None or b is None:
        return []
    found = []
    for arch in sorted(a.ptx.keys() | b.ptx.keys()):
        if a.ptx.get(arch) == b.ptx.get(arch):
            continue
        cubin = "sm_" + arch.removeprefix("compute_")
        if all(_digest_in(ka.get(k), cubin) == _digest_in(kb.get(k), cubin) for k in ka.keys() | kb.keys()):
            found.append(arch)
    return found


def _digest_in(kernel: tuple[str, frozenset[tuple[str, str]]] | None, arch: str) -> str | None:
    return None if kernel is None else next((d for a, d in kernel[1] if a == arch), None)


def _parts(a: _Object | None, b: _Object | None) -> tuple[dict[str, str], str]:
    """Which host functions differ between ``a`` and ``b`` (by the name any build gives them), and what else
    does ("" when nothing else does)."""
    if a is None or b is None:
        return {}, f"the object is in the {'change' if a is None else 'base'} only"
    if a.parts is None or b.parts is None:
        return {}, f"its host code is not split into functions in the {'base' if a.parts is None else 'change'}"
    return compare_parts(a.parts, b.parts)


def compare_parts(a: map_digests.HostParts, b: map_digests.HostParts) -> tuple[dict[str, str], str]:
    """Which host functions differ between two builds' parts of one object (by the name any build gives
    them: function -> "changed", "added" or "removed"), and what else does: "data", "static initialiser
    <name>", that the host code differs outside them, or "" when nothing else does."""
    before, after = _functions(a), _functions(b)
    functions = {n: "added" if n not in before else "removed" if n not in after else "changed"
                 for n in sorted(before.keys() | after.keys()) if before.get(n) != after.get(n)}
    init = {unitnames.host_function(n) for n in a.init | b.init}
    if a.data != b.data:
        return functions, "data"
    if functions.keys() & init:
        return functions, f"static initialiser {sorted(functions.keys() & init)[0]}"
    if not functions:
        return functions, "its host code differs outside its functions and data"
    return functions, ""


def _unseen(parts: map_digests.HostParts | None) -> frozenset[str] | None:
    """The functions (by the name any build gives them) host coverage sees no copy of run: a cold part is seen
    through the function it was split from."""
    if parts is None or parts.unseen is None:
        return None
    seen = {unitnames.host_function(n) for n in parts.functions.keys() - parts.unseen}
    return frozenset(unitnames.host_function(n) for n in parts.unseen) - seen


def _functions(parts: map_digests.HostParts) -> dict[str, frozenset[str]]:
    """Function (by the name any build gives it) -> the digests of its code and its clones' code."""
    found: dict[str, set[str]] = {}
    for name, digest in parts.functions.items():
        found.setdefault(unitnames.host_function(name), set()).add(digest)
    return {n: frozenset(d) for n, d in found.items()}


def _by_unit(o: _Object | None) -> dict[str, tuple[str, frozenset[tuple[str, str]]]]:
    """An object's kernels by the name they have in any folder (nvcc's hash of the file's path masked,
    :mod:`.._unitnames`, where the object holds one): name -> (the name in this build, its digests)."""
    if o is None:
        return {}
    names = list(o.kernels)
    canonical = unitnames.canonical(names) or names
    return {c: (n, o.kernels[n]) for c, n in zip(canonical, names)}


def _objects(kmaps: Sequence[KernelMap]) -> dict[tuple[str, str], _Object]:
    """(target, object) -> its digests, for objects with code of their own (not a precompiled header: its
    effect shows in the objects compiled with it). Only maps :func:`unusable` passed are compared."""
    found = {}
    for m in kmaps:
        for i, o in enumerate(m.objects):
            digests = o["digests"]
            if digests["covers"].get("host") == map_digests.PRECOMPILED_HEADER:
                continue
            table = map_digests.kernel_digests(o["symbols"], digests, f"{m.where}: objects[{i}]")
            found[(o["target"], o["object"])] = _Object(
                o["source"], digests.get("host"), {k: frozenset(a.items()) for k, a in table.items()},
                dict(digests.get("relocatable") or {}), map_digests.host_parts(digests, f"{m.where}: objects[{i}]"),
                dict(digests.get("ptx") or {}))
    return found


def _linked(kmaps: Sequence[KernelMap], start: set[str]) -> set[str]:
    """``start`` and every target linked to them, either way, transitively (the maps' target_links)."""
    edges: dict[str, set[str]] = {}
    for m in kmaps:
        for target, deps in m.target_links.items():
            for d in deps:
                edges.setdefault(target, set()).add(d)
                edges.setdefault(d, set()).add(target)
    return reachable(edges, start)
