"""The consumer side: load a map and ask it questions, each answer with its reasons.

``load()`` takes a map file, a wheel that contains one, or an installed
package's name. Joins always use mangled names; :func:`demangle` is for people.
The consumer rules are the seed's (facts.md): a file's reach is the symbols of
every object whose source or deps contain it; a file touched by an object with
no symbols is "host", by an object with an error "unknown"; a map with a
``reason`` or no objects is "no evidence".
"""

from __future__ import annotations

import importlib.machinery
import io
import os
import shutil
import subprocess
import sys
import zipfile
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, BinaryIO

from .. import mapformat
from ..errors import MapError, MapNotFound

MAP_NAME = "kernel_symbol_map.json.gz"


@dataclass(frozen=True)
class Link:
    """How a file reaches an object: as its ``source`` or through its ``deps``."""

    object: str
    source: str
    target: str
    via: str  # "source", "deps", or "configure-generated" (reached by every change that reaches the map)
    symbols: tuple[str, ...]
    error: str | None = None


@dataclass(frozen=True)
class Reach:
    path: str
    status: str  # "kernels", "host", "unknown", "configure", "not-in-map", "no-evidence"
    symbols: frozenset[str]
    links: tuple[Link, ...] = ()
    note: str = ""  # what the map does not cover, when that may be why

    @property
    def clearable(self) -> bool:
        """Known to the map and only ever compiled into objects with kernels."""
        return self.status == "kernels"

    def explain(self) -> str:
        if self.status == "no-evidence":
            return f"{self.path}: the map holds no evidence"
        if self.status == "not-in-map":
            return f"{self.path}: no object of the map has it as source or dependency" + \
                (f"; {self.note}" if self.note else "")
        if self.status == "configure":
            return f"{self.path}: the project's configure reads it (CMakeLists, a configure_file input): " \
                "a change to it may change any object"
        kinds = {"host": "host-only object", "unknown": "object whose kernels are unknown"}
        bad = [lk for lk in self.links if (lk.error if self.status == "unknown" else not lk.symbols)] \
            if self.status in kinds else []
        parts = [f"{_plural(len(self.symbols), 'kernel')} through {_plural(len(self.links) - len(bad), 'object')}"]
        if self.status in kinds:
            named = ", ".join(f"{lk.object} (from {lk.source})" for lk in bad[:3]) + (" ..." if len(bad) > 3 else "")
            noun = kinds[self.status]
            parts.append(f"also compiled into {_plural(len(bad), noun, noun.replace('object', 'objects'))}: {named}")
        return f"{self.path}: " + "; ".join(parts)


def _plural(count: int, noun: str, many: str | None = None) -> str:
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


@dataclass(frozen=True)
class Origin:
    symbol: str
    source: str
    target: str
    object: str


@dataclass
class KernelMap:
    document: dict[str, Any]
    where: str = ""
    _index: dict[str, list[int]] = field(default_factory=dict, repr=False)

    @property
    def commit(self) -> str:
        return self.document["commit"]

    @property
    def backend(self) -> str:
        return self.document.get("backend", "cuda")

    @cached_property
    def reason(self) -> str | None:
        """Why the map holds no evidence, or None when it does (computed once: every reach asks).

        ``load`` already rejects maps that break the fail-closed rules; the
        same rules from :mod:`mapformat` hold a document built in memory too.
        """
        doc = self.document
        if "reason" in doc:
            return doc["reason"]
        broken = mapformat.fail_closed_problems(doc)
        if broken:
            return broken[0]
        if not doc["objects"]:
            return "the map lists no objects"
        return None

    @cached_property
    def _unmapped_sources(self) -> dict[str, str]:
        """Source -> the target whose custom command compiles it outside CMake's model (unmapped_targets)."""
        return {src: u.get("target") or "a custom command" for u in self.document.get("unmapped_targets", [])
                for src in u.get("sources", [])}

    @cached_property
    def _coverage(self) -> str:
        """What a map built for some targets leaves out, or "" for a whole build's map."""
        if not self.only_targets:
            return ""
        left_out = sorted(set(self.all_targets) - set(self.only_targets))
        return (f"the map covers only targets {', '.join(self.only_targets)} (of {len(self.all_targets)}); "
                f"it leaves out {', '.join(left_out[:10])}{' ...' if len(left_out) > 10 else ''}")

    @property
    def only_targets(self) -> tuple[str, ...]:
        """The targets a subset map covers (``build --targets``); empty for a whole build."""
        return tuple(self.document.get("only_targets", ()))

    @property
    def target_links(self) -> dict[str, list[str]]:
        """Target -> the mapped targets it depends on directly (links, object libraries)."""
        return self.document.get("target_links", {})

    @property
    def all_targets(self) -> tuple[str, ...]:
        """With ``only_targets``: every target of the build that compiles objects."""
        return tuple(self.document.get("all_targets", ()))

    @cached_property
    def symbols(self) -> frozenset[str]:
        """Every kernel the map knows."""
        return frozenset(s for o in self.objects for s in o["symbols"])

    @property
    def has_evidence(self) -> bool:
        return self.reason is None

    @property
    def objects(self) -> list[dict[str, Any]]:
        return self.document["objects"]

    @cached_property
    def _paths(self) -> dict[str, list[tuple[int, str]]]:
        """path -> [(object index, "source" | "deps")], built once."""
        index: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for i, o in enumerate(self.objects):
            sources = _sources(o)
            for src in sources:
                index[src].append((i, "source"))
            for d in o["deps"]:
                if d not in sources:
                    index[d].append((i, "deps"))
        return index

    def _scan(self, paths: set[str]) -> dict[str, list[tuple[int, str]]]:
        """Like ``_paths`` for a few paths: one pass of C-speed set intersections, no full index."""
        found: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for i, o in enumerate(self.objects):
            sources = _sources(o)
            for src in paths.intersection(sources):
                found[src].append((i, "source"))
            for d in paths.intersection(o["deps"]):
                if d not in sources:
                    found[d].append((i, "deps"))
        return found

    def kernels_for(self, path: str) -> Reach:
        """The reach of ``path`` (a source or header, as the map spells it) and how."""
        return self.reach(path)[0]

    def reach(self, *paths: str, canonical: Callable[[str], str] | None = None) -> list[Reach]:
        """The reach of each of ``paths``, in one pass over the map.

        With ``canonical`` (see :class:`.canonical.Canonical`), a path also
        reaches every object that spells the same file another way, such as a
        header included through a symlink.
        """
        if not self.has_evidence:
            return [Reach(p, "no-evidence", frozenset()) for p in paths]
        spellings = {p: {p} for p in paths}
        if canonical is not None:
            aliases = self._aliases(canonical)
            for p in paths:
                spellings[p] |= aliases.get(canonical(p), set())
        index = self.__dict__.get("_paths") or self._scan(set().union(*spellings.values()) if paths else set())
        configured = self._configured(canonical)
        found = []
        for p in paths:
            hits = sorted({h for s in spellings[p] for h in index.get(s, [])})
            if hits and self._configure_generated:  # a file the map knows may be an input the configure read
                seen = {i for i, _ in hits}
                hits += [(i, "configure-generated") for i in self._configure_generated if i not in seen]
            reach = self._reach(p, hits)
            if spellings[p] & configured or (canonical is not None and canonical(p) in configured):
                reach = Reach(p, "configure", reach.symbols, reach.links)
            found.append(reach)
        return found

    @cached_property
    def _configure_generated(self) -> list[int]:
        """Objects compiled from files the configure wrote: their inputs are unknown, so any change may be one.

        Only a file the map knows reaches them this way; one it does not know
        is ``not-in-map`` already, and a consumer runs everything for it.
        """
        return [i for i, o in enumerate(self.objects) if o.get("configure_generated")]

    def generated_reach(self, path: str) -> Reach | None:
        """What ``path`` reaches in this map only because the configure wrote some of its objects, or None."""
        if not self.has_evidence or not self._configure_generated:
            return None
        return self._reach(path, [(i, "configure-generated") for i in self._configure_generated])

    def _configured(self, canonical: Callable[[str], str] | None) -> set[str]:
        """The map's configure inputs, as spelled and (with ``canonical``) as the files they are."""
        spelled = set(self.document.get("configure_inputs", ()))
        return spelled | {canonical(p) for p in spelled} if canonical is not None else spelled

    def _aliases(self, canonical: Callable[[str], str]) -> dict[str, set[str]]:
        """Canonical key -> every spelling of that file in the map; once per ``canonical``."""
        cached = self.__dict__.get("_alias_cache")
        if cached is not None and cached[0] is canonical:
            return cached[1]
        distinct = {s for o in self.objects for s in _sources(o)}.union(*(o["deps"] for o in self.objects))
        aliases: dict[str, set[str]] = defaultdict(set)
        for p in distinct:
            aliases[canonical(p)].add(p)
        self.__dict__["_alias_cache"] = (canonical, aliases)
        return aliases

    def _reach(self, path: str, hits: list[tuple[int, str]]) -> Reach:
        if not hits:
            unmapped = self._unmapped_sources.get(path)
            note = f"{unmapped} compiles it outside CMake's compile model: no map knows its kernels" if unmapped \
                else self._coverage
            return Reach(path, "not-in-map", frozenset(), note=note)
        links = tuple(
            Link(o["object"], o["source"], o["target"], via, tuple(o["symbols"]), o.get("error"))
            for i, via in hits
            for o in (self.objects[i],)
        )
        symbols = frozenset(s for lk in links for s in lk.symbols)
        if any(lk.error for lk in links):
            status = "unknown"
        elif any(not lk.symbols for lk in links):
            status = "host"
        else:
            status = "kernels"
        return Reach(path, status, symbols, links)

    @cached_property
    def _origins(self) -> dict[str, list[Origin]]:
        found: dict[str, list[Origin]] = defaultdict(list)
        for o in self.objects:
            for s in o["symbols"]:
                found[s].append(Origin(s, o["source"], o["target"], o["object"]))
        return found

    def sources_for(self, symbol: str) -> list[Origin]:
        """Every object (source, target) whose device code defines ``symbol``."""
        return list(self._origins.get(symbol, []))

    @cached_property
    def targets(self) -> dict[str, list[str]]:
        """Target -> the sources of its objects."""
        found: dict[str, list[str]] = defaultdict(list)
        for o in self.objects:
            found[o["target"]].append(o["source"])
        return dict(found)

    @cached_property
    def host_files(self) -> frozenset[str]:
        return frozenset(p for p, hits in self._paths.items() if any(not self.objects[i]["symbols"] for i, _ in hits))

    @cached_property
    def unknown_files(self) -> frozenset[str]:
        from_objects = {p for p, hits in self._paths.items() if any("error" in self.objects[i] for i, _ in hits)}
        return frozenset(from_objects | {e["source"] for e in self.document["errors"]})


def _sources(o: dict[str, Any]) -> tuple[str, ...]:
    """What an object is compiled from: its source, and a unity object's real sources."""
    return (o["source"], *o.get("unity_sources", ()))


def load(source: str | os.PathLike[str]) -> KernelMap:
    """A map file, a wheel holding one, a folder holding either, or an installed package that ships one."""
    document, where = read_document(source)
    return KernelMap(document, where)


def read_document(source: str | os.PathLike[str], *, validated: bool = True) -> tuple[Any, str]:
    """The map document ``source`` names, and where it was found; every command reads maps through here.

    ``validated=False`` returns what decodes, for ``validate`` to report every problem.
    """
    raw, where = _locate(os.fspath(source))
    document = mapformat.decode_bytes(raw, where)
    if validated:
        mapformat.validate(document, where)
    return document, where


def _locate(source: str) -> tuple[bytes, str]:
    """(the gzipped map's bytes, where they came from) for each spelling ``load`` accepts.

    A path is tried first. A bare name that is not a map path names an installed
    package, found on ``sys.path`` without the current folder, so that a project
    folder of the same name never shadows it.
    """
    path = Path(source)
    if path.is_file():
        return _from_wheel(path) if is_wheel(path) else (_read(path), source)
    looked = []
    if path.is_dir():
        inside = path / MAP_NAME
        if inside.is_file():
            return _read(inside), str(inside)
        wheels = sorted(w for w in path.glob("*.whl") if w.is_file())
        if len(wheels) == 1:
            return _from_wheel(wheels[0])
        if len(wheels) > 1:
            raise MapError(f"{source}: a folder with {len(wheels)} wheels; name the one to read")
        looked.append(f"the folder holds no {MAP_NAME} and no wheel")
    if source.isidentifier():
        found = _package_map(source)
        if found is not None:
            return found
        looked.append("no installed package of that name ships one")
    elif not path.exists():
        looked.append("no such file or folder")
    raise MapNotFound(f"{source}: not a map ({'; '.join(looked)}); give a {MAP_NAME}, a wheel, a folder "
                      "holding one, or an installed package's name")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise MapError(f"{path}: {e.strerror or e}") from None


def is_wheel(path: Path) -> bool:
    """A ``.whl``, or any zip archive: what ``load`` and ``size`` open as a wheel."""
    if path.suffix == ".whl":
        return True
    try:
        with path.open("rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _package_map(name: str) -> tuple[bytes, str] | None:
    """The map an installed package ships, found without the current folder on the path."""
    here = {"", os.getcwd()}
    spec = importlib.machinery.PathFinder.find_spec(name, [p for p in sys.path if p not in here])
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / MAP_NAME
        if candidate.is_file():
            return _read(candidate), f"{name}/{MAP_NAME}"
    return None


def _from_wheel(wheel: Path) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(wheel) as z:
            members = wheel_members(z, wheel, lambda n: n.endswith("/" + MAP_NAME) or n == MAP_NAME)
            if not members:
                raise MapNotFound(f"{wheel}: the wheel ships no {MAP_NAME}")
            if len(members) > 1:
                raise MapError(f"{wheel}: holds {len(members)} {MAP_NAME} files, expected one")
            (info,) = members
            if info.file_size > mapformat.MAX_JSON:  # the map is gzip: far smaller than its JSON
                raise MapError(f"{wheel}!{info.filename}: larger than any map")
            data = io.BytesIO()
            copy_member(z, info, data, wheel)
            return data.getvalue(), f"{wheel}!{info.filename}"
    except WHEEL_ERRORS as e:
        raise MapError(f"{wheel}: not a readable wheel ({e})") from None


# A wheel's members are bounded by their headers before any is inflated, and again while streaming (issue 26).
# Real wheels fit: vLLM's (336 MB) has a few thousand members, its largest library a few hundred MB
# inflated; cuBLASLt's .so is 515 MB; shared libraries deflate 2-5x. A zip bomb (2.5 GiB of zeros in
# 2.6 MB, 1,000x) is refused at once, with nothing written.
WHEEL_MAX_MEMBERS = 100_000  # members listed in the central directory
WHEEL_MAX_MEMBER = 4 << 30  # bytes one member inflates to (zip's own limit without zip64)
WHEEL_MAX_TOTAL = 16 << 30  # bytes the members read inflate to, together
WHEEL_MAX_RATIO = 256  # inflated bytes per stored byte, past the first MiB (deflate can reach 1,032x)


def member_bound(info: zipfile.ZipInfo) -> int:
    """The most bytes ``info`` may inflate to: :data:`WHEEL_MAX_RATIO` times what it stores (plus 1 MiB),
    :data:`WHEEL_MAX_MEMBER` at most."""
    return min(WHEEL_MAX_MEMBER, WHEEL_MAX_RATIO * info.compress_size + (1 << 20))


def wheel_members(z: zipfile.ZipFile, wheel: Path, wanted: Callable[[str], bool]) -> list[zipfile.ZipInfo]:
    """The files of ``z`` whose names are ``wanted``, checked by their headers before any is inflated: a
    :class:`MapError` naming the first member past a bound (count, ratio, bytes)."""
    infos = z.infolist()
    if len(infos) > WHEEL_MAX_MEMBERS:
        raise MapError(f"{wheel}: {len(infos):,} members, more than a wheel holds ({WHEEL_MAX_MEMBERS:,})")
    chosen = [i for i in infos if not i.is_dir() and wanted(i.filename)]
    for info in chosen:
        if info.file_size > member_bound(info):
            raise MapError(f"{wheel}!{info.filename}: claims {info.file_size:,} bytes from {info.compress_size:,} "
                           f"(more than {WHEEL_MAX_RATIO}x, or {WHEEL_MAX_MEMBER >> 30} GiB): a zip bomb, not read")
    total = sum(i.file_size for i in chosen)
    if total > WHEEL_MAX_TOTAL:
        raise MapError(f"{wheel}: its members claim {total:,} bytes together, more than "
                       f"{WHEEL_MAX_TOTAL >> 30} GiB: not read")
    return chosen


def copy_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, into: BinaryIO, wheel: Path) -> None:
    """Inflate ``info`` into ``into`` a MiB at a time, stopping past :func:`member_bound` (zipfile itself
    stops at the header's size and checks the CRC; this holds whatever the header says)."""
    bound, copied = member_bound(info), 0
    with z.open(info) as src:
        while chunk := src.read(1 << 20):
            copied += len(chunk)
            if copied > bound:
                raise MapError(f"{wheel}!{info.filename}: inflates past {bound:,} bytes ({WHEEL_MAX_RATIO}x its "
                               f"{info.compress_size:,}): a zip bomb, not read")
            into.write(chunk)


# What zipfile raises on a damaged wheel: RuntimeError for an encrypted member, zlib.error for a corrupt one.
WHEEL_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError, zlib.error)


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """For people only: cu++filt where present, else the C++ runtime's demangler."""
    tool = shutil.which("cu++filt")
    if tool:
        try:
            out = subprocess.run([tool, symbol], capture_output=True, text=True, timeout=10, check=False)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return demangle_fast(symbol)


def demangle_fast(symbol: str) -> str:
    """The C++ runtime's demangler in this process (for every kernel of a map at once); mangled on failure."""
    try:
        import cxxfilt

        return cxxfilt.demangle(symbol)
    except Exception:  # noqa: BLE001 - cxxfilt raises its own types; a name we cannot demangle stays mangled
        return symbol


def family(demangled: str) -> str:
    """A demangled kernel's qualified name without return type, template arguments or parameters.

    ``void ns::scale_kernel<float>(float*, int)`` is ``ns::scale_kernel``: the
    family every instantiation of one template kernel shares.
    """
    depth, out = 0, []
    for c in _name(demangled):  # drop template arguments at every level of the qualified name
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def short_name(demangled: str) -> str:
    """``ns::scale_kernel<float>`` of ``void ns::scale_kernel<float>(float*, int)``: for labels."""
    return _name(demangled)


def _name(demangled: str) -> str:
    """``ns::scale_kernel<float>`` of ``void ns::scale_kernel<float>(float*, int)``.

    Written by hand: no kept library parses demangled C++ names, and only
    brackets matter here. The parameter list is the first ``(`` outside
    template arguments; a function template's return type comes first,
    before a space outside them.
    """
    depth, cut, space, i = 0, len(demangled), -1, 0
    while i < len(demangled):
        c = demangled[i]
        if demangled.startswith(ANONYMOUS, i):  # a name, not a parameter list: step over it whole
            i += len(ANONYMOUS)
            continue
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0 and c == "(" and i:
            cut = i
            break
        elif depth == 0 and c == " ":
            space = i
        i += 1
    return demangled[space + 1 : cut]


ANONYMOUS = "(anonymous namespace)"


def kernels_named(kmap: KernelMap, name: str) -> list[str]:
    """The map's mangled kernels a person's ``name`` means: the whole demangled name, the name with its
    template arguments (``ns::scale_kernel<float>``), its family (``ns::scale_kernel``), or the family's
    last part (``scale_kernel``)."""
    found = []
    for symbol in sorted(kmap.symbols):
        full = demangle_fast(symbol)
        fam = family(full)
        if name in (full, _name(full), fam) or fam.endswith("::" + name):
            found.append(symbol)
    return found
