"""Bytes, attributed: size records joined with a map's objects, summed, compared.

A *record* is one device image's sizes in the map's form (an object's
``sizes[arch]``, or what ``readers.sizes.Image.record`` gives for a library):
``image`` and ``stored`` bytes, ``code`` and ``owned`` bytes per kernel, or
``ptx: true``. Each record becomes :class:`Piece` s: every kernel's code and
owned bytes, the image's overhead, or its PTX, each with its share of the
stored bytes and the :class:`Origin` it is charged to (source, target,
object, file). Rows, duplicates and diffs are sums of pieces.

Where a piece is charged:

- a map's object: to its source and target. A device-link object's kernels
  go to the sources whose objects define them; its overhead stays with it.
- binaries without a map: each image (``lib.so#3``, the fourth of the
  file) is a unit of its own, so that a kernel in two images is a duplicate.
- a library measured beside its map (a wheel): an image whose kernels and
  size equal one object's is that object's; any other image (device-linked)
  is charged kernel by kernel to the objects defining each kernel, split
  evenly when several do; a kernel no object defines is ``(not in the map)``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ...errors import MapError
from ...mapformat import sizes as map_sizes
from ..maps.names import family, full

KINDS = ("code", "owned", "overhead", "ptx")
BY = ("source", "target", "kernel", "family", "arch", "kind", "file")
NOT_IN_MAP = "(not in the map)"
DEVICE_LINK = "(device link)"


class Origin(NamedTuple):
    source: str
    target: str
    object: str  # the object the bytes were compiled into ("" when no map names one)
    file: str  # the input the bytes were read from: a map, a library, a wheel's member


class Piece(NamedTuple):  # a tuple: a library of 15,000 kernels makes 40,000 of them
    origin: Origin
    arch: str
    kind: str  # one of KINDS
    kernel: str  # "" for overhead and PTX
    bytes: int  # uncompressed
    stored: int  # its share of the bytes the file stores
    image: str  # the image the bytes are in (an object, "lib.so#3"): one copy each, whoever they are charged to


def pieces(origin: Origin, arch: str, record: Mapping[str, Any], where: str = "", image: str = "") -> list[Piece]:
    """A record's pieces; the stored bytes are shared out by size, the remainder of rounding to overhead."""
    size, stored = record["image"], record["stored"]
    unit = image or origin.object or origin.file
    if record.get("ptx"):
        return [Piece(origin, arch, "ptx", "", size, stored, unit)]
    code, owned = record.get("code", {}), record.get("owned", {})
    overhead = size - sum(code.values()) - sum(owned.values())
    if overhead < 0:
        raise MapError(f"{where or origin.file}: sizes.{arch}: its kernels' bytes add up to more than its image")
    out = [_new(Piece, (origin, arch, kind, k, n, stored * n // size if size else 0, unit))
           for kind, table in (("code", code), ("owned", owned)) for k, n in table.items()]
    out.append(Piece(origin, arch, "overhead", "", overhead, stored - sum(map(_STORED, out)), unit))
    return out


_new = tuple.__new__  # a NamedTuple made from its fields' tuple: what Piece(...) makes, without its Python-level __new__
_STORED = attrgetter("stored")
_KERNEL = attrgetter("kernel")


@dataclass
class Attribution:
    pieces: list[Piece] = field(default_factory=list)
    unsized: list[str] = field(default_factory=list)  # device objects whose map holds no sizes
    relocatable: int = 0  # -rdc images left out: a device-link image of the map holds their kernels


def _origin(o: Mapping[str, Any], file: str) -> Origin:
    return Origin(o["source"], o["target"], o["object"], file)


def _complete(document: Mapping[str, Any], where: str) -> None:
    if document.get("incomplete"):
        raise MapError(f"{where}: the map is incomplete, so its sizes are too ({document.get('reason')})")


def from_map(document: Mapping[str, Any], where: str) -> Attribution:
    """Every object's sizes, as the map holds them, but for relocatable images (``-rdc``) whose every
    kernel a device-link image of the map holds: those are the link's inputs, the linked image is what
    loads, and what a library's ``.nv_fatbin`` holds (cubloaty leaves them out of duplicates alike)."""
    _complete(document, where)
    out = Attribution()
    objects = document["objects"]
    definers = _definers(objects, where)
    unpacked = [map_sizes.unpack(o["symbols"], o["sizes"], f"{where}: objects[{i}]") if "sizes" in o else None
                for i, o in enumerate(objects)]
    linked = {(arch, k) for o, sizes in zip(objects, unpacked) if o.get("device_link") and sizes
              for arch, record in sizes.items() for k in record.get("code", ())}
    for i, (o, sizes) in enumerate(zip(objects, unpacked)):
        if sizes is None:
            if o.get("symbols") or (o.get("device") and o.get("archs")):
                out.unsized.append(o["object"])
            continue
        relocatable = not o.get("device_link") and any(
            record.get("code") and all((arch, k) in linked for k in record["code"]) for arch, record in sizes.items())
        for arch, record in sizes.items():
            if relocatable and (record.get("ptx") or all((arch, k) in linked for k in record.get("code", ()))):
                out.relocatable += 1  # its PTX too: a device link keeps none
                continue
            found = pieces(_origin(o, where), arch, record, f"{where}: objects[{i}]")
            out.pieces.extend(_charged(found, definers, _origin(o, where)) if o.get("device_link") else found)
    return out


def _definers(objects: Iterable[Mapping[str, Any]], where: str) -> dict[str, list[Origin]]:
    """kernel -> the origins of the (non device-link) objects that define it."""
    found: dict[str, list[Origin]] = defaultdict(list)
    for o in objects:
        if not o.get("device_link"):
            for symbol in o.get("symbols", ()):
                found[symbol].append(_origin(o, where))
    return found


def _charged(found: list[Piece], definers: Mapping[str, list[Origin]], linked: Origin) -> list[Piece]:
    """A linked image's pieces: each kernel's to the objects defining it, split evenly among several (the
    remainder to the first); a kernel no object defines is :data:`NOT_IN_MAP`. The overhead is ``linked``'s
    when the map defines any of its kernels, else not in the map either."""
    missing = Origin(NOT_IN_MAP, "", "", linked.file)
    known = any(p.kernel in definers for p in found)
    out = []
    for p in found:
        owners = (definers.get(p.kernel) or [missing]) if p.kernel else [linked if known else missing]
        n = len(owners)
        for i, owner in enumerate(owners):
            extra = (p.bytes % n, p.stored % n) if i == 0 else (0, 0)
            out.append(Piece(owner, p.arch, p.kind, p.kernel, p.bytes // n + extra[0], p.stored // n + extra[1],
                             p.image))
    return out


def join(binaries: Iterable[tuple[str, list[tuple[str, dict[str, Any]]]]], document: Mapping[str, Any] | None,
         where: str = "") -> Attribution:
    """Images measured in files (``(file, [(arch, record)...])``), charged to the map's objects.

    An image equal to objects' images (same architecture, kernels and size;
    PTX has no kernels) is, first, an object's whose target names the file
    (``_ops`` in ``lib_ops.so``), then the least claimed one's: each object's
    image is in one library, and a second copy is charged to a second object,
    or shows as a duplicate.
    """
    out = Attribution()
    if document is not None:
        _complete(document, where)
    objects = document["objects"] if document else []
    definers = _definers(objects, where)
    exact: dict[tuple[str, frozenset[str], int, bool], list[Origin]] = defaultdict(list)
    for i, o in enumerate(objects):
        for arch, record in map_sizes.unpack(o["symbols"], o.get("sizes") or {}, f"{where}: objects[{i}]").items():
            if not o.get("device_link"):
                exact[_signature(arch, record)].append(_origin(o, where))
    claims: Counter[tuple[Any, Origin]] = Counter()  # (signature, object): each image of an object once
    for file, records in binaries:
        base = file.rsplit("/", 1)[-1]
        here: dict[str, list[Origin]] | None = None  # the definers, as found in this file
        for n, (arch, record) in enumerate(records):
            image = f"{file}#{n}"
            signature = _signature(arch, record)
            candidates = exact.get(signature)
            if candidates:  # compiled as one object: the library holds that object's image as it is
                owner = min(candidates, key=lambda o: (claims[(signature, o)], not (o.target and o.target in base)))
                claims[(signature, owner)] += 1
                out.pieces.extend(pieces(Origin(owner.source, owner.target, owner.object, file), arch, record, file,
                                         image))
            elif document is None:  # each image its own unit: a kernel in two images of a library is a duplicate
                out.pieces.extend(pieces(Origin("", "", image, file), arch, record, file))
            else:
                if here is None:
                    here = {k: [Origin(o.source, o.target, o.object, file) for o in v] for k, v in definers.items()}
                found = pieces(Origin(DEVICE_LINK, "", "", file), arch, record, file, image)
                targets = {o.target for p in found for o in here.get(p.kernel, ())}  # the link's, if one
                linked = Origin(DEVICE_LINK, targets.pop() if len(targets) == 1 else "", "", file)
                out.pieces.extend(_charged(found, here, linked))
    return out


def _signature(arch: str, record: Mapping[str, Any]) -> tuple[str, frozenset[str], int, bool]:
    return arch, frozenset(record.get("code", ())), record["image"], bool(record.get("ptx"))


# ---------------------------------------------------------------------------------------------- summing


@dataclass
class Row:
    key: str
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    stored: int = 0

    @property
    def bytes(self) -> int:
        return sum(self.kinds.values())

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "bytes": self.bytes, **self.kinds, "stored": self.stored}


def key_of(by: str) -> Any:
    """The function giving a piece's row key for ``by``; ``None`` leaves the piece out of the rows
    (overhead and PTX have no kernel)."""
    if by in ("kernel", "family"):
        families: dict[str, str] = {}

        def kernel(p: Piece) -> str | None:
            if not p.kernel:
                return None
            if by == "kernel":
                return p.kernel
            if p.kernel not in families:
                families[p.kernel] = family(full(p.kernel))
            return families[p.kernel]
        return kernel
    if by in ("arch", "kind"):
        return lambda p: getattr(p, by)
    return lambda p: getattr(p.origin, by) or f"({by} unknown)"


def rows(found: Iterable[Piece], by: str) -> list[Row]:
    """Pieces summed by ``by``, largest first."""
    key = key_of(by)
    slot = {kind: i for i, kind in enumerate(KINDS)}
    sums: dict[str, list[int]] = {}  # key -> bytes per kind, then stored: lists, not Rows, in the loop
    found = found if isinstance(found, list) else list(found)
    # By kernel (the default without a map), a piece's key is its kernel, taken at C speed: the same key as
    # key_of's, but where that gives None (no kernel, ""), which is left out below alike.
    keys = map(_KERNEL, found) if by == "kernel" else map(key, found)
    for k, p in zip(keys, found):
        if k is None or (k == "" and by == "kernel"):
            continue
        row = sums.get(k)
        if row is None:
            row = sums[k] = [0] * (len(KINDS) + 1)
        row[slot[p.kind]] += p.bytes
        row[-1] += p.stored
    out = [Row(k, dict(zip(KINDS, row)), row[-1]) for k, row in sums.items()]
    return sorted(out, key=lambda r: (-r.bytes, r.key))


def totals(found: Iterable[Piece]) -> dict[str, int]:
    out = dict.fromkeys((*KINDS, "stored"), 0)
    for p in found:
        out[p.kind] += p.bytes
        out["stored"] += p.stored
    out["bytes"] = sum(out[k] for k in KINDS)
    return out


@dataclass(frozen=True)
class Duplicate:
    kernel: str
    arch: str
    copies: tuple[tuple[str, str, int], ...]  # (sources, image, bytes) of each copy

    @property
    def waste(self) -> int:
        """The bytes beyond one copy: every copy but the largest."""
        return sum(c[2] for c in self.copies) - max(c[2] for c in self.copies)


def duplicates(found: Iterable[Piece]) -> list[Duplicate]:
    """Kernels compiled, for one architecture, into more than one image (an object, an image of a
    library): a template instantiated in several translation units. Largest waste first."""
    per: dict[tuple[str, str, str], int] = defaultdict(int)  # (kernel, arch, image) -> bytes
    for p in found:
        if p.kernel and p.origin.source != NOT_IN_MAP:
            per[(p.kernel, p.arch, p.image)] += p.bytes  # a kernel split among its definers is still one copy
    images = Counter(map(itemgetter(0, 1), per))  # (kernel, arch) -> how many images hold it
    twice = {key for key, n in images.items() if n > 1}
    sources: dict[tuple[str, str, str], set[str]] = defaultdict(set)  # only for the duplicates: a second pass
    for p in found if twice else ():
        if (p.kernel, p.arch) in twice and p.origin.source != NOT_IN_MAP:
            sources[(p.kernel, p.arch, p.image)].add(p.origin.source)
    copies: dict[tuple[str, str], list[tuple[str, str, int]]] = defaultdict(list)
    for (k, a, image), n in per.items():
        if (k, a) in twice:
            copies[(k, a)].append((" + ".join(sorted(sources[(k, a, image)])), image, n))
    out = [Duplicate(k, a, tuple(sorted(found))) for (k, a), found in copies.items()]
    return sorted(out, key=lambda d: (-d.waste, d.kernel, d.arch))


# ---------------------------------------------------------------------------------------------- diffs


@dataclass(frozen=True)
class Change:
    key: str
    old: int
    new: int

    @property
    def delta(self) -> int:
        return self.new - self.old

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "old": self.old, "new": self.new, "change": self.delta}


def changes(old: Iterable[Piece], new: Iterable[Piece], by: str) -> list[Change]:
    """Every key whose bytes changed, largest growth first, then the largest shrinking."""
    before = {r.key: r.bytes for r in rows(old, by)}
    after = {r.key: r.bytes for r in rows(new, by)}
    found = [Change(k, before.get(k, 0), after.get(k, 0)) for k in before.keys() | after.keys()
             if before.get(k, 0) != after.get(k, 0)]
    return sorted(found, key=lambda c: (c.delta < 0, -abs(c.delta), c.key))  # growth, then shrinking, largest first


def kernel_sources(found: Iterable[Piece]) -> dict[str, set[str]]:
    """kernel -> the sources its bytes are charged to."""
    out: dict[str, set[str]] = defaultdict(set)
    for p in found:
        if p.kernel:
            out[p.kernel].add(p.origin.source)
    return out
