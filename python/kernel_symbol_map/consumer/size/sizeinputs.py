"""``size``'s inputs, measured: maps, wheels and binaries as :mod:`.sizereport` pieces.

Each input is named as every command names one (:func:`.inputs.resolve`), plus
binaries, which the caller's ``read_binary`` measures (the readers are not the
consumer's to import: the command line passes ``readers.sizes``). What a file weighs is kept apart from what its libraries weigh, and
the two are never divided by each other: a wheel's ``file_bytes`` are zipped,
its libraries' ``library_bytes`` are not; a binary's are the same bytes; a map
stores device images only.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...errors import FormatError, KernelSymbolMapError, MapError, MapNotFound
from . import sizereport
from ..maps.inputs import Input, map_bytes, resolve
from .sizereport import Piece
from ..maps.wheels import WHEEL_ERRORS, copy_member, is_library, wheel_members

MIB = 1 << 20


class MixedInputs(KernelSymbolMapError):
    """Inputs that do not go together (``--map`` with maps or wheels): a usage error."""


@dataclass
class Measured:
    """One input read: its pieces, what the file weighs, and what was not read."""

    name: str
    kind: str  # "map", "wheel" or "binary"
    pieces: list[Piece] = field(default_factory=list)
    file_bytes: int = 0  # the file on disk: a wheel zipped, a binary as it is, a map's stored device images
    library_bytes: int = 0  # a wheel's shared libraries unzipped, a binary's own bytes; 0 for a map
    libraries: int = 0  # a wheel's shared libraries
    mapped: bool = False  # bytes charged to a map's sources
    unsized: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    relocatable: int = 0  # -rdc images a map's device-link images replace

    @property
    def stored(self) -> int:
        """The bytes its device images take where they are stored (in a library, or the map's objects)."""
        return sum(p.stored for p in self.pieces)


@dataclass
class Measurement:
    """What ``size INPUT...`` read: the inputs, and whether they are OLD and NEW of one comparison."""

    inputs: list[Measured]
    diff: bool

    @property
    def shown(self) -> list[Measured]:
        """What the picture and the budget are of: NEW in a comparison, else every input."""
        return self.inputs[1:] if self.diff else self.inputs

    @property
    def mapped(self) -> bool:
        return any(i.mapped for i in self.inputs)

    def only(self, keep: Callable[[str], bool]) -> Measurement:
        """The same inputs with only the pieces of the kernels ``keep`` (on mangled names) keeps: what a
        report shows under ``--filter``; a budget weighs the whole files."""
        return Measurement([replace(i, pieces=[p for p in i.pieces if p.kernel and keep(p.kernel)])
                            for i in self.inputs], self.diff)


ReadBinary = Callable[[Path], list[tuple[str, dict[str, Any]]]]  # (arch, size record) per image; FormatError


def measure(spellings: Sequence[str], read_binary: ReadBinary, map_spelling: str | None = None) -> Measurement:
    """Read every input. Two maps or two wheels are OLD and NEW; binaries are joined with the map
    ``map_spelling`` names, if any."""
    from ..maps.kernelmap import read_document

    found = [resolve(s, binaries=True) for s in spellings]
    kinds = [_kind(f) for f in found]
    diff = len(found) == 2 and kinds[0] == kinds[1] and kinds[0] in ("map", "wheel")
    if map_spelling is not None and any(k != "binary" for k in kinds):
        raise MixedInputs("--map joins binaries with a map; maps and wheels bring their own")
    document = read_document(map_spelling)[0] if map_spelling is not None else None
    measured = [_read(f, k, None if diff else document, read_binary) for f, k in zip(found, kinds)]
    return Measurement(measured, diff)


def _kind(found: Input) -> str:
    return "map" if found.kind == "package" else found.kind


def _read(found: Input, kind: str, document: Mapping[str, Any] | None, read_binary: ReadBinary) -> Measured:
    from ..maps.kernelmap import KernelMap, read_document

    if kind == "map":
        document, where = read_document(found.path if found.kind != "package" else found.spelled)
        reason = KernelMap(document, where).reason
        if reason is not None:  # as show and query: no evidence is no answer, never 0 bytes
            return Measured(found.name, kind, failed=[f"no evidence in {where}: {reason}"])
        joined = sizereport.from_map(document, where)
        out = Measured(found.name, kind, joined.pieces, mapped=True, unsized=joined.unsized,
                       relocatable=joined.relocatable)
        out.file_bytes = out.stored
        return out
    if kind == "wheel":
        return _wheel(found, read_binary)
    size = _file_size(found.path)
    out = Measured(found.name, kind, file_bytes=size, library_bytes=size, mapped=document is not None)
    records = _records(read_binary, found.path, found.name, out)
    if records is not None:
        out.pieces = sizereport.join([(found.name, records)], document).pieces
    return out


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _records(read_binary: ReadBinary, path: Path, name: str, into: Measured) -> list[tuple[str, dict[str, Any]]] | None:
    try:
        return read_binary(path)
    except FormatError as e:
        into.failed.append(str(e).replace(str(path), name, 1))  # a wheel's member: named, not its temporary copy
        return None


def _wheel(found: Input, read_binary: ReadBinary) -> Measured:
    """A wheel's libraries, measured one at a time from a temporary file (memory stays bounded by the
    largest device image), charged to the map the wheel ships; without one, per kernel as binaries are."""
    path = found.path
    try:
        from ..maps.kernelmap import read_document

        document, _ = read_document(path)
    except MapNotFound:
        document = None
    out = Measured(found.name, "wheel", file_bytes=_file_size(path), mapped=document is not None)
    binaries = []
    try:
        with zipfile.ZipFile(path) as z:
            libraries = wheel_members(z, path, is_library)  # every member bounded before one is inflated
            out.libraries = len(libraries)
            out.library_bytes = sum(i.file_size for i in libraries)
            with tempfile.TemporaryDirectory(prefix="ksm-size-") as tmp:
                for info in libraries:
                    local = Path(tmp) / "member"
                    with local.open("wb") as dst:
                        copy_member(z, info, dst, path)
                    records = _records(read_binary, local, f"{path}!{info.filename}", out)
                    if records:
                        binaries.append((info.filename, records))
                    os.unlink(local)
    except WHEEL_ERRORS as e:
        raise MapError(f"{path}: not a readable wheel ({e})") from None
    out.pieces = sizereport.join(binaries, document).pieces
    return out


# --------------------------------------------------------------------------------------------- the budget


def mib(n: float, *, apart_from: float | None = None) -> str:
    """``n`` bytes in MiB, with two decimals, or as many more as it takes (up to six) for a figure that
    is not ``apart_from`` (MiB) to read differently from it: never "2.4 MiB above the budget of 2.4"."""
    value = n / MIB
    digits = 2
    while apart_from is not None and digits < 6 and value != apart_from and \
            f"{value:.{digits}f}" == f"{apart_from:.{digits}f}":
        digits += 1
    return f"{value:.{digits}f}"


def growth(n: int) -> str:
    """A change in bytes people can read: ``+1.25 MiB``, or ``+1,234 B`` below a hundredth of a MiB (where
    "+0.00 MiB" would hide it)."""
    return f"{n / MIB:+.2f} MiB" if abs(n) >= MIB // 100 else f"{n:+,} B"


def amount(n: int) -> str:
    """Bytes people can read, as :func:`growth` but unsigned: ``1.25 MiB``, ``1,004 B``."""
    return f"{n / MIB:.2f} MiB" if n >= MIB // 100 else f"{n:,} B"


@dataclass(frozen=True)
class OverBudget:
    """Why ``--max-mb`` fails: the bytes it weighed and what they are, the largest rows, and in a
    comparison the largest growth."""

    weighed: str  # whose bytes: "a + b"
    bytes: int
    what: str  # "stored device bytes", "file bytes (zipped)", "file bytes"
    budget: float
    by: str
    largest: list[tuple[str, int]]
    grown: list[tuple[str, int]] | None  # None: no OLD to grow from

    def message(self, label: Callable[[str], str] = str) -> str:
        largest = ", ".join(f"{label(k)} {amount(n)}" for k, n in self.largest) or "none"
        text = (f"{self.weighed}: {mib(self.bytes, apart_from=self.budget)} MiB of {self.what}, above the budget of "
                f"{self.budget:g} MiB; the largest {self.by}s: {largest}")
        if self.grown is not None:
            text += "; the largest growth: " + (", ".join(f"{label(k)} {growth(n)}" for k, n in self.grown) or "none")
        return text


def over_budget(max_mb: float, measurement: Measurement, by: str | None = None) -> OverBudget | None:
    """The budget's verdict on what is shown (NEW in a comparison), naming its largest rows by ``by``
    (default: source when mapped, else kernel): None within it."""
    measured = measurement.shown
    weight = sum(i.file_bytes for i in measured)
    if weight <= max_mb * MIB:
        return None
    found = [p for i in measured for p in i.pieces]
    by = by or ("source" if any(i.mapped for i in measured) else "kernel")
    largest = [(r.key, r.bytes) for r in sizereport.rows(found, by)[:5]]
    kinds = {i.kind for i in measured}
    what = "stored device bytes" if kinds == {"map"} else "file bytes (zipped)" if kinds == {"wheel"} else "file bytes"
    grown = None
    if measurement.diff:
        old = measurement.inputs[0]
        grown = [(c.key, c.delta) for c in sizereport.changes(old.pieces, found, by) if c.delta > 0][:5]
    return OverBudget(" + ".join(i.name for i in measured), weight, what, max_mb, by, largest, grown)
