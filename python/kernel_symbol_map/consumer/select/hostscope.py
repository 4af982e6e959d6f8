"""Which tests an object's changed host code reaches, in output mode (``select --base-map``).

Host code runs in a test only if a process of that test loaded the file it
was linked into. The map says which files those are for each target
(``artefacts``: a library's or executable's own; a static or object
library's, what links it), and a recording says which files its processes
had loaded (``libraries``). So by default (``--host-scope libraries``) a host
change reaches:

* every test whose recording lists a file its object went into, whatever
  kernels it launched (a launcher in another file, an argument check);
* every test that launched one of the object's own kernels (it loaded it);
* every test whose recording lists no ``libraries`` (made before they were
  recorded): as with ``--host-scope kernels``, below, for that test.

A file is matched by the name it was loaded under, a shared library's
version suffixes aside (``libggml.so.0`` is ``libggml.so.0.21.0`` and
``libggml.so``). Names no map knows (libc, libpython, torch) are not the
project's. A test may have loaded a copy under another name, though (an
install rule's ``RENAME``). Every test runs, and says so, when that is seen:
no recording lists any of the object's files though some list libraries, or
a test launched a kernel linked into one of those files while listing no
file that kernel is in (it loaded one under another name, and a test that
launched none may have loaded it too). A renamed copy that no test launched
a kernel of, loaded beside the original in other tests, is not seen; nor is
one beside a library of the original's name (a system ``libcommon.so``).

When the map does not know the object's files (a tree read without a
file-API reply, a target nothing links), an object with kernels keeps the
narrower rule below, and one without runs every test.

By default (``--host-scope functions``) a host change is narrower still where
it can be: when both builds split the object's host code by function (the
map's ``host_parts``), only functions differ, and the base was compiled with
host coverage that sees each of them run, a test that loaded one of its
files is reached only if its recording lists one of those functions as run
in that file (``host_functions``, recorded from a build with host coverage).
A test whose recording has no ``host_functions``, or lists none for that file
(the file was not built with host coverage), is reached as above, as is every
test that loaded a file when the object's data or a static initialiser
differs (they run in every process that loads it), or the object is compared
whole. A changed function no recording lists was run by no recorded test.

``--host-scope libraries`` keeps the library rule above for every test.

``--host-scope kernels`` is the narrower rule: only the tests that launched the
object's own kernels, and every test for an object with none. It skips a test
that called the object's host code and launched another object's kernel.

A path rule that matches the object's source (``{"paths": ["csrc/version.cpp"],
"tests": []}``) decides its host change instead, the tests it names, when that
source is the only one of the object's inputs that changed (a changed header
it includes is not the rule's to decide).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import regex

from ..._unitnames import spelled as _spelled
from .emitted import HostChange
from ..maps.kernelmap import KernelMap
from ..maps.names import full
from .recordings import Recording
from .rules import Patterns, StaticRules

FUNCTIONS, LIBRARIES, KERNELS = "functions", "libraries", "kernels"
SCOPES = (FUNCTIONS, LIBRARIES, KERNELS)
LOADED = "loaded"  # a decision's reason: its recording lists a file the changed host code went into
RAN = "ran"  # a decision's reason: its recording lists a changed host function as run
_VERSION = regex.compile(r"(\.so)(?:\.\d+)+$")  # libggml.so.0.21.0 -> libggml.so


def stem(name: str) -> str:
    """A library's file name without its version suffixes: what its symlinks and SONAME share."""
    return _VERSION.sub(r"\1", name)


@dataclass
class HostReach:
    """What one host change reaches: the tests that launched ``kernels``, those in ``tests`` (test ->
    (reason, why)), and every test when ``everything`` says why."""

    kernels: frozenset[str] = frozenset()
    tests: dict[str, tuple[str, str]] = field(default_factory=dict)
    everything: str = ""
    rule: str = ""  # how a path rule decided it


class HostScope:
    """Host changes -> the tests they reach, from the maps' ``artefacts`` and the recordings' ``libraries``."""

    def __init__(self, kmaps: Sequence[KernelMap], tests: Sequence[str], recordings: Sequence[Recording],
                 scope: str = FUNCTIONS, rules: StaticRules | None = None,
                 canonical: Callable[[str], str] | None = None, changed: Sequence[str] = ()) -> None:
        self.scope, self.tests = scope, tests
        self.rules, self.canonical = rules, canonical
        self.changed = {f for p in changed for f in self._spellings(p)}
        # (target, object) -> the files it was compiled from, in either build: a rule decides its host change
        # only when the object's source is the one of them that changed.
        self.inputs: dict[tuple[str, str], set[str]] = {}
        if rules is not None:
            for m in kmaps:
                for o in m.objects:
                    self.inputs.setdefault((o["target"], o["object"]), set()).update(
                        f for p in (o["source"], *o.get("deps", ()), *o.get("unity_sources", ()))
                        for f in self._spellings(p))
        known = [m.artefacts for m in kmaps]
        self.artefacts: dict[str, frozenset[str]] | None = None
        if known and all(a is not None for a in known):
            merged: dict[str, set[str]] = {}
            for artefacts in known:
                for target, names in (artefacts or {}).items():
                    merged.setdefault(target, set()).update(names)
            self.artefacts = {t: frozenset(names) for t, names in merged.items()}
        self.loaded = {r.test: None if r.libraries is None else {stem(n): n for n in r.libraries} for r in recordings}
        self.launched = {r.test: r.kernels for r in recordings}
        self.ran = {r.test: None if r.host_functions is None else
                    {stem(lib): names for lib, names in r.host_functions.items()} for r in recordings}
        self.kmaps = kmaps
        self._where: dict[str, set[str]] | None = None

    def where(self, kernel: str) -> set[str]:
        """The files (stems) the objects holding ``kernel`` are linked into: by its name in a map and, when no
        map has that name, by its name with nvcc's unit hash masked (another folder's build named it)."""
        if self._where is None:
            self._where = {}
            for m in self.kmaps:
                for o in m.objects:
                    files = {stem(f) for f in (self.artefacts or {}).get(o["target"], ())}
                    for s in o["symbols"]:
                        self._where.setdefault(s, set()).update(files)
                        self._where.setdefault(_spelled(s), set()).update(files)
        return self._where.get(kernel) or self._where.get(_spelled(kernel)) or set()

    def copy_shown(self, test: str, names: frozenset[str]) -> bool:
        """Whether ``test`` launched a kernel linked into a file of ``names`` while listing none of the files
        that kernel is in: it loaded one under another name, maybe one of ``names``."""
        loaded = self.loaded[test] or {}
        return any((w := self.where(k)) & names and w.isdisjoint(loaded) for k in self.launched[test])

    def _spellings(self, path: str) -> set[str]:
        """A path as written once normalised and, with ``canonical``, as the file it is (symlinks resolved)."""
        spelled = posixpath.normpath(path)
        return {spelled, self.canonical(path)} if self.canonical is not None else {spelled}

    def reach(self, change: HostChange) -> HostReach:
        what = f"the host code of {change.object} (from {change.source}) {change.how}"
        source = self._spellings(change.source)
        inputs = self.inputs.get((change.target, change.object), source)
        if self.rules is not None and (hit := self.changed & inputs) and hit <= source:
            patterns = self.rules.for_file(change.source, self.canonical)
            if patterns is not None:  # the user's word for this source
                chosen = Patterns(patterns).chosen(self.tests)
                rule = f"{what}: the rules decide it ({', '.join(patterns) or 'no test'})"
                return HostReach(tests={t: ("rules", f"{what}, and the rules name it for {change.source}")
                                        for t in chosen}, rule=rule)
        files = self.artefacts.get(change.target) if self.artefacts is not None else None
        if self.scope == KERNELS or not files:
            if not change.kernels:
                unknown = "" if self.scope == KERNELS else "; which files hold it is unknown (" + (
                    "no file-API reply" if self.artefacts is None else "no library or executable links its target") + ")"
                return HostReach(everything=f"{what}, and it has no kernels: any test may call it{unknown}")
            return HostReach(kernels=change.kernels)
        names = frozenset(stem(f) for f in files)
        narrow = self.scope == FUNCTIONS and not change.whole and change.unseen is not None \
            and change.unseen.isdisjoint(change.functions)
        found: dict[str, tuple[str, str]] = {}
        listing = matched = False
        renamed = ""
        for test, loaded in self.loaded.items():
            if loaded is None:  # recorded before libraries were: the narrower rule, for this test
                if not change.kernels:
                    found[test] = (LOADED, f"{what}; its recording lists no libraries, and the object has no "
                                   "kernels")
                elif narrow and (launched := sorted(change.kernels.intersection(self.launched[test]))):
                    found[test] = (LOADED, f"{what}; its recording lists no libraries, and it launched "
                                   f"{launched[0]}, a kernel of that object")
                continue
            listing = True
            hit = sorted(loaded[n] for n in names & loaded.keys())
            if hit:
                matched = True
                why = self._ran(test, sorted(names & loaded.keys()), change) if narrow else \
                    (LOADED, f"it loaded {hit[0]}, which holds {change.object}, whose host code {change.how}")
                if why is not None:
                    found[test] = why
            elif not renamed and self.copy_shown(test, names):
                renamed = test
        if listing and not matched:
            return HostReach(everything=f"{what}, and no recording lists {', '.join(sorted(files))}: a test may "
                             "have loaded a copy under another name (an install rule's RENAME)")
        if renamed:
            return HostReach(everything=f"{what}, and {renamed} launched kernels linked into "
                             f"{', '.join(sorted(files))} without listing a file that holds them: it loaded a copy "
                             "under another name (an install rule's RENAME), which a test that launched none may "
                             "have loaded too")
        return HostReach(kernels=frozenset() if narrow else change.kernels, tests=found)

    def _ran(self, test: str, stems: list[str], change: HostChange) -> tuple[str, str] | None:
        """Why ``test``, which loaded the files ``stems`` of ``change``'s object, is reached when only some of
        the object's functions changed; None when its recording shows it ran none of them."""
        loaded = self.loaded[test] or {}
        ran = self.ran.get(test)
        for s in stems:
            file = loaded[s]
            if ran is None or s not in ran:
                lacks = "no host functions" if ran is None else f"no host functions of {file} (it was not built " \
                    "with host coverage)"
                return (LOADED, f"it loaded {file}, which holds {change.object}, whose host code {change.how}, and "
                        f"its recording lists {lacks}")
            hit = sorted(ran[s] & change.functions.keys())
            if hit:
                return (RAN, f"it ran {full(hit[0])} in {file}, whose code {change.functions[hit[0]]} (in "
                        f"{change.object}, from {change.source})")
        return None
