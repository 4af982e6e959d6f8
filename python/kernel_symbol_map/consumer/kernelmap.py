"""The consumer side: load a map and ask it questions, each answer with its reasons.

``load()`` takes a map file, a wheel that contains one, or an installed
package's name. Joins always use mangled names; :func:`demangle` is for people.
The consumer rules are the seed's (facts.md): a file's reach is the symbols of
every object whose source or deps contain it; a file touched by an object with
no symbols is "host", by an object with an error "unknown"; a map with a
``reason`` or no objects is "no evidence".
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
import shutil
import subprocess
import zipfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from .. import mapformat
from ..errors import MapError

MAP_NAME = "kernel_symbol_map.json.gz"


@dataclass(frozen=True)
class Link:
    """How a file reaches an object: as its ``source`` or through its ``deps``."""

    object: str
    source: str
    target: str
    via: str  # "source" or "deps"
    symbols: tuple[str, ...]
    error: str | None = None


@dataclass(frozen=True)
class Reach:
    path: str
    status: str  # "kernels", "host", "unknown", "not-in-map", "no-evidence"
    symbols: frozenset[str]
    links: tuple[Link, ...] = ()

    @property
    def clearable(self) -> bool:
        """Known to the map and only ever compiled into objects with kernels."""
        return self.status == "kernels"

    def explain(self) -> str:
        if self.status == "no-evidence":
            return f"{self.path}: the map holds no evidence"
        if self.status == "not-in-map":
            return f"{self.path}: no object of the map has it as source or dependency"
        kinds = {"host": "host-only objects", "unknown": "objects whose kernels are unknown"}
        parts = [f"{len(self.symbols)} kernels through {len(self.links)} objects"]
        if self.status in kinds:
            bad = [lk for lk in self.links if (lk.error if self.status == "unknown" else not lk.symbols)]
            parts.append(f"also compiled into {kinds[self.status]}: {', '.join(lk.source for lk in bad[:3])}")
        return f"{self.path}: " + "; ".join(parts)


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

    @property
    def only_targets(self) -> tuple[str, ...]:
        """The targets a subset map covers (``build --targets``); empty for a whole build."""
        return tuple(self.document.get("only_targets", ()))

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
        return [self._reach(p, sorted({h for s in spellings[p] for h in index.get(s, [])})) for p in paths]

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
            return Reach(path, "not-in-map", frozenset())
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


def load(source: str | Path) -> KernelMap:
    """A map file, a wheel holding one, or the name of an installed package that ships one."""
    path = Path(source)
    if path.suffix == ".whl" and path.is_file():
        return KernelMap(_from_wheel(path), str(path))
    if path.exists():
        return KernelMap(mapformat.read(path), str(path))
    name = str(source)
    if not name.isidentifier():
        raise MapError(f"{source}: no such file, wheel or installed package")
    try:
        resource = importlib.resources.files(name) / MAP_NAME
    except ModuleNotFoundError:
        raise MapError(f"{name}: no such file, wheel or installed package") from None
    if not resource.is_file():
        raise MapError(f"{name}: the installed package ships no {MAP_NAME}")
    with importlib.resources.as_file(resource) as real:
        return KernelMap(mapformat.read(real), f"{name}/{MAP_NAME}")


def _from_wheel(wheel: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(wheel) as z:
            members = [n for n in z.namelist() if n.endswith("/" + MAP_NAME) or n == MAP_NAME]
            if len(members) != 1:
                raise MapError(f"{wheel}: holds {len(members)} {MAP_NAME} files, expected one")
            raw = z.read(members[0])
    except (zipfile.BadZipFile, OSError) as e:
        raise MapError(f"{wheel}: not a readable wheel ({e})") from None
    try:
        document = json.loads(gzip.decompress(raw))
    except (OSError, EOFError, ValueError) as e:
        raise MapError(f"{wheel}!{members[0]}: not a gzipped JSON map ({e})") from None
    mapformat.validate(document, f"{wheel}!{members[0]}")
    return document


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
    try:
        import cxxfilt

        return cxxfilt.demangle(symbol)
    except Exception:  # noqa: BLE001 - cxxfilt raises its own types; a name we cannot demangle stays mangled
        return symbol
