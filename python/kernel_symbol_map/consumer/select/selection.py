"""Which tests a change needs: changed files -> the kernels they reach -> the tests that launched them.

``select`` exists to skip tests, and its one unforgivable bug is an unsafe
skip. Evidence removes a test only when every one of these holds:

* there is at least one map, and every map has evidence (valid, complete,
  no errors, objects listed) and a known commit (a full SHA), the same in
  all of them;
* the maps cover every target: a map of a subset (``build --targets``) can
  miss the other objects a changed file is compiled into, so subsets count
  only when together they cover every target the build compiles;
* the change set is not empty (unless the caller says an empty one is real);
* every changed file is clearable in the maps: known to at least one, and
  only ever compiled into objects with kernels;
* that test's recording is readable, complete, of the maps' commit, and
  names only kernels the maps know, kernels a JIT named after a function of
  the project (:mod:`.jitkernels`: decided by that function's Python code),
  or kernels the caller declared external.

A changed file the package compiles at run time is decided by source, in
output mode too (:mod:`.runtimesources`).

Anything else runs the test, or falls back to running everything (or to the
user's static rules), each with a reason code. The JSON names every test of
every recording with whether it runs and why; CI runs every test except
those in ``skip``, so a test no recording knows is never lost.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from ..._graph import reachable
from ..._words import plural
from ...errors import KernelSymbolMapError
from ...mapformat import is_full_sha, plainjson
from . import emitted, runtimesources
from ..maps.kernelmap import KernelMap, Link, Reach
from .hostscope import FUNCTIONS, HostScope
from .jitkernels import JitKernels, attribute
from .perfile import PerFile, Verdict
from .pythonfiles import PythonTree
from .recordings import Recording, Unreadable
from .rules import Patterns, StaticRules

__all__ = ["Decision", "Options", "Selection", "StaticRules", "Verdict", "select"]

# Why evidence could not remove tests.
NO_MAP = "no-map"
MAP_UNREADABLE = "map-unreadable"
MAP_INCOMPLETE = "map-incomplete"
MAP_SUBSET = "map-subset"
COMMIT_MISMATCH = "commit-mismatch"
MAP_COMMIT_MISSING = "map-commit-missing"
MAP_DIRTY = "map-dirty"  # built from a tree that is not its commit's
NO_CHANGES = "no-changes"
FILE_NOT_IN_MAP = "file-not-in-map"
HOST_FILE = "host-file"
UNKNOWN_FILE = "unknown-file"
CONFIGURE_INPUT = "configure-input"
RECORDING_INCOMPLETE = "recording-incomplete"
RECORDING_UNREADABLE = "recording-unreadable"
UNKNOWN_KERNEL = "unknown-kernel"
TRACKED_UNKNOWN = "tracked-files-unknown"  # git could not say which sources the configure wrote
TOOLCHAIN_CHANGED = "toolchain-changed"  # output mode: the change was built by other compilers than the base
HOST_CHANGED = "host-changed"  # output mode: an object with no kernels has other host code
_FILE_CODES = {"not-in-map": FILE_NOT_IN_MAP, "host": HOST_FILE, "unknown": UNKNOWN_FILE,
               "configure": CONFIGURE_INPUT}
# Fallbacks because the evidence itself could not be used (missing, unreadable, partial, of another
# commit), as opposed to answers about the change (a host file, a file no map knows, no change at all).
# --strict exits 1 on these.
EVIDENCE_FALLBACKS = frozenset({NO_MAP, MAP_UNREADABLE, MAP_INCOMPLETE, MAP_SUBSET, COMMIT_MISMATCH, TRACKED_UNKNOWN,
                                MAP_COMMIT_MISSING, RECORDING_UNREADABLE, MAP_DIRTY})


@dataclass(frozen=True, slots=True)  # one per test: no __dict__ each
class Decision:
    test: str
    run: bool
    reason: str  # a code for fallbacks, "launched" or "not-reached" for evidence
    why: str
    kernels: tuple[str, ...] = ()  # the names behind unknown-kernel


@dataclass
class Selection:
    decisions: list[Decision]
    fallback: str | None = None  # a reason code when evidence was set aside for every test
    fallback_why: str = ""
    files: list[Reach] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # the change set, as select was given it
    mode: str = "source"  # "output": decided by what two builds emitted (select --base-map)
    mode_why: str = ""  # why output mode was asked for and not used
    emitted: emitted.Emitted | None = None
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # changed file -> how it was decided
    notes: list[str] = field(default_factory=list)  # what the user should know of how their options were taken

    @property
    def to_run(self) -> list[str]:
        return [d.test for d in self.decisions if d.run]

    def summary(self) -> str:
        """The last line people read: how many tests run, and of what."""
        known, run = len(self.decisions), len(self.to_run)
        unknown = [v.path for v in self.verdicts.values() if v.by == "everything"]
        if self.fallback and run == known:
            why = f": {self.fallback_why}" if self.mode == "output" else ""  # output mode says why it was not used
            if unknown:  # the files no decider knew, by name
                why = f": {', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''} " \
                    f"{'is' if len(unknown) == 1 else 'are'} known to no decider"
            return f"every test runs ({self.fallback}{why}); {known} known to the recordings"
        how = f" (static rules, {self.fallback})" if self.fallback else ""
        found = f"; {self.emitted.summary()}" if self.emitted else ""
        by = Counter(v.by for v in self.verdicts.values())
        files = "; files decided by " + ", ".join(f"{n} {b}" for b, n in sorted(by.items())) \
            if set(by) - {"map", "emitted"} else ""  # said when some file was decided on its own
        return f"{run} of {known} known tests to run{how}{found}{files}; any test no recording knows runs too"

    def _file_json(self, r: Reach) -> dict[str, Any]:
        entry: dict[str, Any] = {"path": r.path, "status": r.status, "kernels": len(r.symbols)}
        v = self.verdicts.get(r.path)
        if v is not None:
            # the tests it makes run; None where that is not per file (everything; output mode's objects)
            entry.update({"decided_by": v.by, "why": v.why,
                          "runs": len(v.tests) if v.by not in ("everything", "emitted") else None})
        return entry

    def to_json(self) -> dict[str, Any]:
        decisions = []
        for d in self.decisions:
            entry: dict[str, Any] = {"test": d.test, "run": d.run, "reason": d.reason, "why": d.why}
            if d.kernels:
                entry["kernels"] = list(d.kernels)
            decisions.append(entry)
        return {
            "fallback": self.fallback,
            "fallback_why": self.fallback_why,
            "run": self.to_run,
            "skip": [d.test for d in self.decisions if not d.run],
            "decisions": decisions,
            "files": [self._file_json(r) for r in self.files],
            "changed": self.changed,
            "mode": self.mode,
            "mode_why": self.mode_why,
            "notes": self.notes,
            **({"emitted": {"kernels": self.emitted.kernels, "compared": self.emitted.compared,
                            "hosts": [{"object": h.object, "target": h.target, "source": h.source, "how": h.how}
                                      for h in self.emitted.hosts]}} if self.emitted else {}),
            "summary": self.summary(),
        }


@dataclass(frozen=True)
class Options:
    rules: StaticRules | None = None
    allow_empty: bool = False  # an empty change set is real: skip every test evidence clears
    whole_target: bool = False  # a changed device source reaches every kernel of its targets
    canonical: Callable[[str], str] | None = None  # a Canonical: compare paths with symlinks resolved
    external_kernels: tuple[str, ...] = ()  # regexes of kernels from outside the project (torch, cuBLAS)
    per_file: bool = True  # each file the map does not clear decided on its own (False: any one runs everything)
    source_root: Path | None = None  # the checkout: changed Python files are read (and git asked) there
    host_scope: str = FUNCTIONS  # output mode: a host change reaches the tests that ran a changed function
    # where the recordings say (else, as with "libraries", those that loaded it; or, "kernels", those that
    # launched its object's kernels)
    jit_decorators: tuple[str, ...] = ()  # "module:name" of the project's source-text JITs (jit-decorators)
    jit_sources: tuple[str, ...] = ()  # globs of the files the package compiles at run time (jit-sources)


def select(
    maps: KernelMap | Sequence[KernelMap] | None,
    recordings: list[Recording],
    changed: Sequence[str],
    rules: StaticRules | None = None,
    *,
    options: Options | None = None,
    unreadable: Sequence[Unreadable] = (),
    base: Sequence[KernelMap] | None = None,
) -> Selection:
    """The decision for every test; ``rules`` is shorthand for ``Options(rules=...)``.

    Without ``base`` (source mode), ``maps`` are of the recordings' commit and a
    changed file reaches the kernels of the objects compiled from it. With
    ``base`` (output mode), ``maps`` are of the change's own build and
    ``base`` of the recordings' commit: files that objects compile are decided by
    what the two builds emitted (:mod:`.emitted`), the others as in source mode.
    """
    if options is None:
        options = Options(rules=rules)
    elif rules is not None:
        options = dataclasses.replace(options, rules=rules)
    with plainjson.bulk():  # a decision per test, none of them a cycle
        return _select(maps, recordings, changed, options, unreadable, base)


def _select(maps: KernelMap | Sequence[KernelMap] | None, recordings: list[Recording], changed: Sequence[str],
            options: Options, unreadable: Sequence[Unreadable], base: Sequence[KernelMap] | None) -> Selection:
    rules = options.rules
    kmaps = [] if maps is None else [maps] if isinstance(maps, KernelMap) else list(maps)
    tests = all_tests(recordings, unreadable, rules)

    def fallback(code: str, why: str, files: list[Reach] | None = None) -> Selection:
        found = everything(tests, changed, code, why, rules, files or [], options.canonical)
        return found if base is None else dataclasses.replace(found, mode="output")  # asked for, and why not

    if any(u.tests is None for u in unreadable):
        u = next(u for u in unreadable if u.tests is None)
        return fallback(RECORDING_UNREADABLE, f"{u.why}; the tests it covered cannot be known")
    evidence = list(base) if base is not None else kmaps
    problem = _without_evidence(evidence, recordings, tracked=base is None)
    if problem is None and base is not None:
        problem = _without_evidence(kmaps, [], tracked=False, commits=False, side="the change's ")
    if problem is None and base is not None and changed and any(m.document == b.document for m in kmaps for b in base):
        problem = COMMIT_MISMATCH, "the change's map (--map) is the base map (--base-map): it is not the change's build"
    if problem is not None:
        return fallback(*problem)
    if not changed and not options.allow_empty:
        return fallback(NO_CHANGES, "the change set is empty; an empty diff is never evidence (--allow-empty)")
    tree = PythonTree(options.source_root, evidence[0].commit) if options.source_root is not None else None
    jit = attribute(recordings, frozenset().union(*(m.symbols for m in evidence)), tree, changed,
                    options.jit_decorators)
    notes = _external_jit(jit, options.external_kernels)
    if base is None:
        found = _by_sources(kmaps, tests, jit, changed, options, unreadable, fallback, tree)
        return dataclasses.replace(found, notes=notes)
    why = emitted.unusable(evidence, kmaps)
    if why is not None and why[0] == emitted.TOOLCHAIN:
        return fallback(TOOLCHAIN_CHANGED, why[1])
    if why is not None:  # compare sources, with the base's maps
        found = _by_sources(evidence, tests, jit, changed, options, unreadable, fallback, tree)
        return dataclasses.replace(found, mode="source", mode_why=f"output mode cannot be used: {why[1]}", notes=notes)
    found = _by_output(evidence, kmaps, tests, jit, changed, options, unreadable, fallback, tree)
    return dataclasses.replace(found, notes=notes)


def _external_jit(jit: JitKernels, patterns: Sequence[str]) -> list[str]:
    """A note for each kernel ``--external-kernels`` matches that is a JIT'd function's: it is decided by the
    function's Python code instead, never skipped as external."""
    external = external_patterns(patterns)
    if not external:
        return []
    # only the kernels a JIT could be named after: those the records attribute, and those found by name
    named = {k: owner for r in jit.recordings
             for k in (r.jit_kernels.keys() | jit.by_name.keys()).intersection(r.kernels)
             if (owner := jit.owner(r, k)) is not None}
    return [f"--external-kernels matches {k}, a kernel named after the JIT'd function {owner}: it is decided by "
            "that function's Python code, not as external" for k, owner in sorted(named.items())
            if any(p.fullmatch(k) for p in external)]


def _without_evidence(kmaps: Sequence[KernelMap], recordings: Sequence[Recording], *, tracked: bool,
                      commits: bool = True, side: str = "") -> tuple[str, str] | None:
    """Why these maps (of the recordings' commit, with ``commits``) clear no test, as (code, why)."""
    if not kmaps:
        return NO_MAP, f"no {side}map was given"
    for m in kmaps:
        if not m.has_evidence:
            return MAP_INCOMPLETE, f"{side}{m.where or 'a map'} holds no evidence: {m.reason}"
    if all(m.only_targets for m in kmaps):
        covered = set().union(*(m.only_targets for m in kmaps))
        needed = set().union(*(m.all_targets for m in kmaps))
        if not needed or not needed <= covered:
            missing = ", ".join(sorted(needed - covered)) or "(unknown: the maps do not list them)"
            return MAP_SUBSET, f"the {side}maps cover only targets {', '.join(sorted(covered))}; not {missing}"
    if not commits:
        return None
    found = {m.commit for m in kmaps}
    if "" in found or len(found) > 1:
        return COMMIT_MISMATCH, ("the maps' commit is unknown" if "" in found
                                 else f"the maps are of several commits: {', '.join(sorted(found))}")
    (commit,) = found
    if not is_full_sha(commit):  # a name that moves (HEAD, a branch) is no commit at all
        return COMMIT_MISMATCH, f"the maps' commit {commit!r} is not a full SHA"
    blind = next((m for m in kmaps if m.document.get("tracked_files_unknown")), None) if tracked else None
    if blind is not None:
        return TRACKED_UNKNOWN, (f"{blind.where or 'a map'} was built where git could not list the source root's "
                                 "files: the sources the configure wrote, reached by any change, are unknown")
    dirty = next((m for m in kmaps if m.document.get("dirty")), None)
    if dirty is not None:
        files = dirty.document["dirty"]
        return MAP_DIRTY, (f"{dirty.where or 'a map'} was built from a tree whose mapped files differ from its "
                           f"commit {commit} ({plural(len(files), 'file')}, e.g. {files[0]}): it is no evidence "
                           "for that commit")
    if recordings and all(r.commit != commit for r in recordings):
        seen = ", ".join(sorted({r.commit or "(unknown)" for r in recordings}))
        return COMMIT_MISMATCH, f"the map is of {commit}, every recording of {seen}"
    return None


Fallback = Callable[[str, str, "list[Reach] | None"], Selection]


def _by_sources(kmaps: Sequence[KernelMap], tests: list[str], jit: JitKernels, changed: Sequence[str],
                options: Options, unreadable: Sequence[Unreadable], fallback: Fallback,
                tree: PythonTree | None) -> Selection:
    """Source mode: each changed file reaches the kernels of every object compiled from it."""
    recordings = jit.recordings
    files = [_combine(path, _with_generated(kmaps, path, reaches)) for path, *reaches in
             zip(changed, *(m.reach(*changed, canonical=options.canonical) for m in kmaps), strict=True)]
    launched = _tests_launching(recordings, [r.symbols for r in files if r.clearable])
    verdicts = {r.path: Verdict(r.path, "map", r.explain(), tests)
                for r, tests in zip([r for r in files if r.clearable], launched, strict=True)}
    undecided = _decide_others([r for r in files if not r.clearable], verdicts, tests, recordings, options, kmaps,
                               tree)
    _with_run_time(verdicts, runtimesources.decide(changed, kmaps, jit, options.jit_sources, tree, options.canonical))
    if undecided:
        return _with_verdicts(fallback(*_everything_for(undecided), files), verdicts)
    reached: dict[str, str] = {}
    for r in files:
        for k in r.symbols if r.clearable else ():
            reached.setdefault(k, f"reached from {r.path}")
    targets = {lk.target for r in files if r.clearable for lk in r.links}
    widened = _whole_targets(kmaps, targets) - reached.keys() if options.whole_target else frozenset()
    decisions = _decisions(kmaps, tests, jit, unreadable, options, reached, widened, _named(verdicts),
                           _rules_only(verdicts))
    return Selection(decisions, files=files, changed=list(changed), verdicts=verdicts)


def _tests_launching(recordings: Sequence[Recording], reaches: Sequence[frozenset[str]]) -> list[dict[str, str]]:
    """For each set of kernels in ``reaches``, the tests whose recordings launched any of them (test -> "", in
    the recordings' order): one pass, each recording met with the union of all of them (C-speed), and only
    a recording that launched some reached kernel looked at again."""
    found: list[dict[str, str]] = [{} for _ in reaches]
    owners: dict[str, list[int]] = {}  # kernel -> the reaches holding it
    for i, kernels in enumerate(reaches):
        for k in kernels:
            owners.setdefault(k, []).append(i)
    reached = frozenset(owners)
    for r in recordings:
        hit = reached.intersection(r.kernels)
        if hit:
            for i in sorted({i for k in hit for i in owners[k]}):
                found[i][r.test] = ""
    return found


def _decide_others(blocking: list[Reach], verdicts: dict[str, Verdict], tests: list[str],
                   recordings: list[Recording], options: Options, kmaps: Sequence[KernelMap],
                   tree: PythonTree | None) -> list[Verdict]:
    """Decide the files the map did not clear on their own (into ``verdicts``); those that run everything."""
    if not blocking:
        return []
    if not options.per_file:  # the whole change falls back on the first of them
        verdicts.update({r.path: Verdict(r.path, "everything", r.explain(), code=_FILE_CODES[r.status])
                         for r in blocking})
        return [verdicts[r.path] for r in blocking]
    configure_inputs = [c for m in kmaps for c in m.document.get("configure_inputs", ())]
    deciders = PerFile(recordings, tests, options.rules, tree, options.canonical, configure_inputs)
    for r in blocking:
        verdicts[r.path] = deciders.decide(r, _FILE_CODES[r.status])
    return [v for v in verdicts.values() if v.by == "everything"]


def _everything_for(undecided: list[Verdict]) -> tuple[str, str]:
    """The fallback's (code, why) when files no decider knew make every test run: each file named."""
    return undecided[0].code, "; ".join(v.why for v in undecided)


def _with_verdicts(selection: Selection, verdicts: dict[str, Verdict]) -> Selection:
    return dataclasses.replace(selection, verdicts=verdicts)


def _rules_only(verdicts: dict[str, Verdict]) -> bool:
    """Every changed file was decided by the rules: as under a whole-change fallback, they choose alone."""
    return bool(verdicts) and all(v.by == "rules" for v in verdicts.values())


def _named(verdicts: dict[str, Verdict]) -> dict[str, tuple[str, str]]:
    """test -> (reason, why) for the tests that files decided by coverage, test files or rules make run."""
    found: dict[str, tuple[str, str]] = {}
    for v in verdicts.values():
        if v.by in ("map", "emitted"):
            continue  # their tests run by the kernels they launched (launched)
        for test, why in v.tests.items():
            found.setdefault(test, (v.by, why))
    return found


def _by_output(base: Sequence[KernelMap], new: Sequence[KernelMap], tests: list[str], jit: JitKernels,
               changed: Sequence[str], options: Options, unreadable: Sequence[Unreadable],
               fallback: Fallback, tree: PythonTree | None) -> Selection:
    """Output mode: a file no object compiles (a CMakeLists, a Python file, one no map knows) is decided on its
    own, as in source mode; the rest is what the two builds emitted."""
    recordings = jit.recordings
    before = [_combine(p, rs) for p, *rs in zip(changed, *(m.reach(*changed, canonical=options.canonical)
                                                          for m in base), strict=True)]
    after = [_combine(p, rs) for p, *rs in zip(changed, *(m.reach(*changed, canonical=options.canonical)
                                                         for m in new), strict=True)]
    files = [b if b.status != "not-in-map" else a for b, a in zip(before, after, strict=True)]
    blocking = [r for b, a in zip(before, after, strict=True) if (r := _not_emitted(b, a)) is not None]
    verdicts = {f.path: Verdict(f.path, "emitted", "decided by what the two builds emitted")
                for f in files if f.path not in {r.path for r in blocking}}
    undecided = _decide_others(blocking, verdicts, tests, recordings, options, base, tree)
    # whatever the builds emitted, what the package compiles at run time may differ
    _with_run_time(verdicts, runtimesources.decide(changed, base, jit, options.jit_sources, tree, options.canonical))
    if undecided:
        return _with_verdicts(_in_output_mode(fallback(*_everything_for(undecided), files), None), verdicts)
    found = emitted.compare(base, new)
    scope = HostScope([*base, *new], tests, recordings, options.host_scope, options.rules, options.canonical,
                      changed)
    reaches = [(h, scope.reach(h)) for h in found.hosts]
    everyone = [r.everything for _, r in reaches if r.everything]
    if everyone:
        more = f" (and {len(everyone) - 1} more host changes)" if len(everyone) > 1 else ""
        return _with_verdicts(_in_output_mode(fallback(HOST_CHANGED, everyone[0] + more, files), found), verdicts)
    reached = {k: f"its device code {how}" for k, how in found.kernels.items()}
    named = _named(verdicts)
    for h, r in reaches:
        if r.rule and h.source in verdicts:
            verdicts[h.source] = dataclasses.replace(verdicts[h.source], why=f"{verdicts[h.source].why}; {r.rule}")
        for k in sorted(r.kernels):
            reached.setdefault(k, f"the host code of {h.object} (from {h.source}) {h.how}")
        for test, why in r.tests.items():
            named.setdefault(test, why)
    for k, why in found.linked.items():
        reached.setdefault(k, why)
    widened = frozenset()
    if options.whole_target:
        widened = _whole_targets([*base, *new], {h.target for h in found.hosts}) - reached.keys()
    functions = sorted({f for h in found.hosts for f in h.functions})
    ran_none = f", nor ran any of the {len(functions)} host functions whose code differs" if functions else ""
    decisions = _decisions(base, tests, jit, unreadable, options, reached, widened, named,
                           _rules_only(verdicts), ran_none)
    return _in_output_mode(Selection(decisions, files=files, changed=list(changed), verdicts=verdicts), found)


def _with_run_time(verdicts: dict[str, Verdict], run_time: dict[str, Verdict]) -> None:
    """Each file the package compiles at run time runs the tests its run-time compile reaches too, besides those
    of the verdict it has (a file that runs everything still does)."""
    for path, extra in run_time.items():
        v = verdicts.get(path)
        if v is not None and v.by == "everything":
            continue
        verdicts[path] = extra if v is None else Verdict(path, extra.by, f"{v.why}; {extra.why}",
                                                         {**extra.tests, **v.tests})


def _not_emitted(before: Reach, after: Reach) -> Reach | None:
    """The reach that leaves a file to the other deciders in output mode: a configure input (in either build:
    it may change what is linked or installed, not only compiled), or a file in neither build's map."""
    if "configure" in (before.status, after.status):
        return before if before.status == "configure" else after
    return before if before.status == after.status == "not-in-map" else None


def _in_output_mode(selection: Selection, found: emitted.Emitted | None) -> Selection:
    return dataclasses.replace(selection, mode="output", emitted=found)


def _decisions(kmaps: Sequence[KernelMap], tests: list[str], jit: JitKernels,
               unreadable: Sequence[Unreadable], options: Options, reached: dict[str, str],
               widened: frozenset[str], named: dict[str, tuple[str, str]], rules_only: bool = False,
               ran_none: str = "") -> list[Decision]:
    """Each test's decision: it runs if it launched a reached kernel (``reached``: kernel -> how), a changed file
    decided on its own names it (``named``: test -> (reason, why)), or its recording cannot show it did not
    need to; else it is skipped (``ran_none`` says which host functions it ran none of). A kernel no map knows that a JIT named after a function of the project
    (``jit``) is that function's, decided with the Python files: neither unknown nor external."""
    recordings = jit.recordings
    commit = kmaps[0].commit
    external = external_patterns(options.external_kernels)
    unreadable_tests = {t: u for u in unreadable for t in (u.tests or ())}
    by_test = {r.test: r for r in recordings}
    outside = sorted({u.get("target") or "a custom command" for m in kmaps
                      for u in m.document.get("unmapped_targets", [])})
    unmapped = f" (kernels of {', '.join(outside)}, built outside CMake's compile model, are in no map)" \
        if outside else ""
    # The kernels some recording launched that no map knows, found once (by attribute): a test's own are then
    # those of its kernels among them (none, most often), not a lookup of each in the maps' tens of thousands.
    unknown_anywhere = jit.unknown
    reached_kernels = frozenset(reached)
    not_reached = f"its complete recording launched none of the {len(reached)} kernels the change reaches{ran_none}"
    decisions = []
    for test in tests:
        rec = by_test.get(test)
        if rec is not None and (hits := reached_kernels.intersection(rec.kernels)):
            launched = sorted(hits)
            decisions.append(Decision(test, True, "launched", f"launched {len(launched)} reached kernels, "
                                      f"e.g. {launched[0]} ({reached[launched[0]]})"))
        elif test in named:
            decisions.append(Decision(test, True, *named[test]))
        elif rules_only and not reached and not widened:  # the user's word for every file: no evidence needed
            decisions.append(Decision(test, False, "rules", "the rules decide every changed file, and name no "
                                      "test of theirs for this one"))
        elif test in unreadable_tests:
            decisions.append(Decision(test, True, RECORDING_UNREADABLE, unreadable_tests[test].why))
        elif rec is None:
            decisions.append(Decision(test, True, RECORDING_INCOMPLETE, "no recording of this test"))
        elif not rec.complete:
            decisions.append(Decision(test, True, RECORDING_INCOMPLETE, f"its recording is incomplete: {rec.why_incomplete}"))
        elif rec.commit != commit or not rec.commit:
            decisions.append(Decision(test, True, COMMIT_MISMATCH,
                                      f"recorded at {rec.commit or '(unknown)'}, the map is of {commit}"))
        elif unknown_anywhere and (unknown := sorted(k for k in unknown_anywhere.intersection(rec.kernels)
                                                     if jit.owner(rec, k) is None
                                                     and not any(p.fullmatch(k) for p in external))):
            decisions.append(Decision(test, True, UNKNOWN_KERNEL, f"it launched {len(unknown)} kernels no map "
                                      f"knows, e.g. {unknown[0]}{unmapped}", tuple(unknown)))
        elif widened and (hit := sorted(widened.intersection(rec.kernels))):
            decisions.append(Decision(test, True, "same-target", f"launched {len(hit)} kernels of a changed "
                                      f"file's target, e.g. {hit[0]} (--whole-target)"))
        else:
            decisions.append(Decision(test, False, "not-reached", not_reached))
    return decisions


def external_patterns(patterns: Sequence[str]) -> list[regex.Pattern[str]]:
    """``--external-kernels``, compiled: each is matched against a whole mangled name (``fullmatch``)."""
    compiled = []
    for p in patterns:
        try:
            compiled.append(regex.compile(p))
        except (regex.error, TypeError) as e:
            raise KernelSymbolMapError(f"--external-kernels {p!r}: not a regular expression ({e})") from None
    return compiled


def all_tests(recordings: Sequence[Recording], unreadable: Sequence[Unreadable] = (),
              rules: StaticRules | None = None) -> list[str]:
    """Every test any input names: recordings, unreadable recordings that still name theirs, and what the rules
    name outright (a CI step no recording knows), unless it names recorded tests (a file's, a folder's)."""
    # in the recordings' order (read sorts them: then the sort is one pass), each once
    known = dict.fromkeys([*(r.test for r in recordings), *(t for u in unreadable for t in (u.tests or ()))])
    named = [t for t in (rules.tests if rules else ()) if t not in known and not Patterns((t,)).chosen(known)]
    return sorted({**known, **dict.fromkeys(named)})


def everything(
    tests: Sequence[str], changed: Sequence[str], code: str, why: str,
    rules: StaticRules | None = None, files: list[Reach] | None = None,
    canonical: Callable[[str], str] | None = None,
) -> Selection:
    """Evidence set aside: run every test, or what the static rules choose for ``changed``."""
    chosen = rules.tests_for(changed, canonical) if rules and changed else None
    if chosen is None:
        decisions = [Decision(t, True, code, why) for t in tests]
    else:
        decisions = [Decision(t, t in chosen, code, f"{why}; static rules {'select' if t in chosen else 'skip'} it")
                     for t in tests]
    return Selection(decisions, code, why, files or [], list(changed))


def _with_generated(kmaps: Sequence[KernelMap], path: str, reaches: Sequence[Reach]) -> list[Reach]:
    """``reaches`` with what the configure wrote in every map, when any map knows ``path``.

    A map reaches its own configure-generated objects from the files it
    knows; a shard that does not know ``path`` holds such objects too (issue
    26: a header of one target, a generator's output in another shard).
    """
    if all(r.status == "not-in-map" for r in reaches):
        return list(reaches)
    return [(m.generated_reach(path) or r) if r.status == "not-in-map" else r for m, r in zip(kmaps, reaches, strict=True)]


def _combine(path: str, reaches: Sequence[Reach]) -> Reach:
    """One file's reach over several maps: the union, and clearable only if clearable wherever it appears."""
    present = [r for r in reaches if r.status != "not-in-map"]
    if len(present) <= 1:
        return present[0] if present else reaches[0]
    statuses = {r.status for r in present}
    status = next((s for s in ("configure", "unknown", "host") if s in statuses), "kernels")
    links: tuple[Link, ...] = tuple(lk for r in present for lk in r.links)
    return Reach(path, status, frozenset().union(*(r.symbols for r in present)), links)


def _whole_targets(kmaps: Sequence[KernelMap], targets: set[str]) -> frozenset[str]:
    """Every kernel of ``targets`` (those a changed file is compiled into, or whose host code changed), and
    of every target linked to those, either way (host code in .cu files: the map cannot tell which kernels it launches).

    A launcher in target Y may start a kernel of a library X that Y links, and
    a host function of X may be called from Y: so the widening follows the
    maps' ``target_links`` to what those targets depend on and to what depends
    on them, transitively.
    """
    forward: dict[str, set[str]] = {}
    backward: dict[str, set[str]] = {}
    for m in kmaps:
        for target, deps in m.target_links.items():
            forward.setdefault(target, set()).update(deps)
            for d in deps:
                backward.setdefault(d, set()).add(target)
    reached = reachable(forward, targets) | reachable(backward, targets)
    return frozenset(s for m in kmaps for o in m.objects if o["target"] in reached for s in o["symbols"])
