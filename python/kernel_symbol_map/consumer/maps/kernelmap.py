"""The consumer side: load a map and ask it questions, each answer with its reasons.

``load()`` takes a map file, a wheel that contains one, or an installed
package's name. Joins always use mangled names; :func:`demangle` is for people.
The consumer rules are the seed's (facts.md): a file's reach is the symbols of
every object whose source or deps contain it; a file touched by an object with
no symbols is "host", by an object with an error "unknown"; a map with a
``reason`` or no objects is "no evidence".
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ... import mapformat
from . import inputs
from .inputs import MAP_NAME  # noqa: F401 - its first home: importers keep it
# The names people read live in .names; these stay importable from here, where they were.
from .names import demangle, family, full, name_of, short_name, unversioned  # noqa: F401 - first home


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
    def artefacts(self) -> dict[str, list[str]] | None:
        """Target -> the file names of the libraries and executables its objects end up in; None: unknown."""
        return self.document.get("artefacts")

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


def load(source: str | os.PathLike[str], *, newest: bool = True) -> KernelMap:
    """A map file, a wheel holding one, a folder holding either, or an installed package that ships one
    (``newest``: see :func:`inputs.resolve`)."""
    document, where = read_document(source, newest=newest)
    return KernelMap(document, where)


def read_document(source: str | os.PathLike[str], *, validated: bool = True, newest: bool = True) -> tuple[Any, str]:
    """The map document ``source`` names (any spelling :func:`inputs.resolve` takes), and where it was
    found; every command reads maps through here.

    ``validated=False`` returns what decodes, for ``validate`` to report every problem.
    """
    raw, where = inputs.map_bytes(inputs.resolve(os.fspath(source), newest=newest))
    document = mapformat.decode_bytes(raw, where)
    if validated:
        mapformat.validate(document, where)
    return document, where


def kernels_named(kmap: KernelMap, name: str) -> list[str]:
    """The map's mangled kernels a person's ``name`` means: the whole demangled name, the name with its
    template arguments (``ns::scale_kernel<float>``), its family (``ns::scale_kernel``), or the family's
    last part (``scale_kernel``); each with or without CUB's and Thrust's version namespaces."""
    found = []
    for symbol in sorted(kmap.symbols):
        whole = full(symbol)
        fam = family(whole)
        if name in (whole, name_of(whole), name_of(unversioned(whole)), short_name(whole), fam) \
                or fam.endswith("::" + name):
            found.append(symbol)
    return found
