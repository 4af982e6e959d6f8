"""``select``: the tests a change needs, each with why.

Bad evidence never blocks CI: a map or recording that cannot be read is
reported and the tests it would have cleared run, with exit 0. ``--strict``
makes such input exit 1 instead, for pipelines that want to know.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import KernelSymbolMapError, MapError, MapNotFound
from ._commands import summary_of
from ._common import MAP_HELP, default_source_root
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, plural, warning, write_json

if TYPE_CHECKING:
    from ..consumer.maps.kernelmap import KernelMap
    from ..consumer.select.selection import Selection

JSON_SCHEMA = "kernel-symbol-map/selection/1"
# consumer.select.hostscope.SCOPES, spelled here: parsing loads no consumer
HOST_SCOPES = ("functions", "libraries", "kernels")
# A mangled kernel name inside an explanation (an Itanium name; not ending in a sentence's full stop).
MANGLED = re.compile(r"\b_Z[\w$.]*[\w$]")


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "select",
        help=summary_of("select"),
        description="Print the tests or CI steps to run for a change and, for each, why. Evidence only "
        "removes a test when every map has evidence and the same known commit, every changed file is "
        "clearable, and that test's recording is complete, of that commit, and names only known kernels; "
        "otherwise it runs (or --rules decide). CI must run every test except those skipped: a test no "
        "recording knows is never listed, so never skipped.",
        allow_abbrev=False,
    )
    p.add_argument("--map", action="append", default=[], metavar="MAP",
                   help=f"{MAP_HELP}; repeat for wheel variants or shards "
                   "(evidence is their union; none given or missing: fall back, no-map)")
    p.add_argument("--base-map", action="append", default=[], metavar="MAP",
                   help=f"output mode: {MAP_HELP}, of the commit the recordings were made at, while --map is the "
                   "change's own build; a kernel whose device code differs between the two reaches the tests that "
                   "launched it (repeat for shards; a base map without digests: source mode, with a note)")
    p.add_argument("--recordings", nargs="+", type=Path, metavar="FILE|DIR",
                   help="recorder text files, JSON Lines, or Nsight Systems SQLite exports; a folder means "
                   "every recording in it (required, here or as recordings in [tool.kernel-symbol-map])")
    changes = p.add_mutually_exclusive_group(required=True)
    changes.add_argument("--changed", nargs="+", metavar="FILE", help="changed files, as the map spells them")
    changes.add_argument("--diff", metavar="BASE",
                         help="changed files from git: everything changed since the map's commit and since "
                         "BASE, to the working tree, untracked files and both sides of renames included")
    p.add_argument("--allow-empty", action="store_true",
                   help="an empty change set is real (default: it is no evidence, and everything runs)")
    p.add_argument("--recordings-commit", default="", help="commit of recordings that do not carry one")
    p.add_argument("--rules", type=Path,
                   help="path rules (JSON: {\"rules\": [{\"paths\": [globs], \"tests\": [patterns]}]}) for files "
                   "no map, Python coverage or test file decides; a rule may name no test (docs)")
    p.add_argument("--whole-change", action="store_true",
                   help="one changed file that the map does not clear runs everything (or the rules decide the "
                   "whole change), as before per-file decisions; default: each file is decided on its own")
    p.add_argument("--source-root", type=Path,
                   help="the project the map's relative paths are in (default: the git top level of .)")
    p.add_argument("--build-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="the build folder(s) the map's $BUILD paths are in, in the map's order: changed "
                   "files may then be given as build-tree paths too")
    p.add_argument("--whole-target", action="store_true",
                   help="conservative: a changed file reaches every test that launched any kernel of "
                   "its CMake targets (host code in .cu files called without launching its kernels)")
    p.add_argument("--host-scope", choices=HOST_SCOPES, default=HOST_SCOPES[0],
                   help="with --base-map, which tests a changed object's host code reaches: 'functions' "
                   "(default) where both maps split it by function and only functions changed, the tests whose "
                   "recording lists one of them as run (host_functions, from a build with host coverage), and "
                   "otherwise as 'libraries'; 'libraries' every test whose recording lists a library or "
                   "executable it is linked into, and every test if none does; 'kernels' only the tests that "
                   "launched the object's own kernels (limit: skips a test that called its host code and "
                   "launched another object's kernel), every test for an object with none")
    p.add_argument("--external-kernels", action="append", default=[], metavar="REGEX",
                   help="kernels that come from outside the project: a regex that must match a whole "
                   "mangled name (e.g. '_ZN2at6native.*|.*cublas.*'); a recording may name them without "
                   "blocking a skip (never a kernel named after a JIT'd function of the project)")
    p.add_argument("--jit-sources", action="append", default=[], metavar="GLOB",
                   help="files the package compiles at run time (git's globs, from the top level): decided by "
                   "source in output mode too; sources inside a Python package, and those a recorded test "
                   "compiled, are without it")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when evidence could not be used: no-map, map-unreadable, map-incomplete, "
                   "map-subset, commit-mismatch, map-commit-missing, map-dirty, recording-unreadable, and "
                   "recording-doubtful (a recording of no test, or of a pytest run that failed to collect or "
                   "did not get through)")
    p.add_argument("--json", action="store_true", help=f"machine-readable output for CI ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def _configured(args: argparse.Namespace) -> None:
    """Options the command line left out, from ``[tool.kernel-symbol-map]`` (consumer/maps/config.py): a flag
    given replaces its key. Said in a NOTE when the table gave any."""
    import logging

    from ..consumer.maps import config

    try:
        found = config.load(Path.cwd(), args.source_root or default_source_root())
    except config.ConfigError as e:
        raise UsageError(str(e)) from None
    used = []
    for key, dest in (("map", "map"), ("base-map", "base_map"), ("external-kernels", "external_kernels"),
                      ("jit-sources", "jit_sources")):
        if not getattr(args, dest) and found.get(key):
            setattr(args, dest, found.get(key))
            used.append(key)
    if args.recordings is None and found.get("recordings"):
        args.recordings = [Path(p) for p in found.get("recordings")]
        used.append("recordings")
    if args.rules is None and found.rules:
        args.rules = Path(found.rules)
        used.append("rules")
    args.jit_decorators = found.get("jit-decorators")  # the recorder's too: how a JIT's kernels are named
    if used:
        logging.getLogger("kernel_symbol_map.config").info("%s: %s from [tool.%s]", found.source,
                                                            ", ".join(used), config.TABLE)
    if args.recordings is None:
        raise UsageError("select needs --recordings (or recordings in [tool.kernel-symbol-map] of pyproject.toml)")


def run(args: argparse.Namespace) -> int:
    from ..consumer.select import changes
    from ..consumer.maps.canonical import Canonical
    from ..consumer.maps.inputs import project_paths
    from ..consumer.select.perfile import looks_built
    from ..consumer.select.recordings import expand, read_each
    from ..consumer.select.selection import (
        EVIDENCE_FALLBACKS,
        COMMIT_MISMATCH,
        MAP_COMMIT_MISSING,
        Options,
        StaticRules,
        all_tests,
        everything,
        external_patterns,
        select,
    )

    _configured(args)
    try:  # a pattern that is no regex is the user's mistake, named before any evidence is read
        external_patterns(args.external_kernels)
    except KernelSymbolMapError as e:
        raise UsageError(str(e)) from None
    rules = StaticRules.read(args.rules) if args.rules else None
    paths = expand(args.recordings)
    for folder in (p for p in args.recordings if p.is_dir() and not any(q.parent == p for q in paths)):
        warning(f"{folder}: a folder with no recordings (*.jsonl, *.txt, *.sqlite)")
    recordings, unreadable, doubts = read_each(paths, args.recordings_commit)
    for u in unreadable:
        warning(f"{u.why}; {'its tests run' if u.tests else 'every test runs'} (recording-unreadable)")
    for doubt in doubts:  # its records still count for their tests; a test with none is in no decision
        warning(f"{doubt} (recording-doubtful{': --strict fails' if args.strict else ''})")
    source_root = args.source_root or default_source_root(args.diff is not None)
    kmaps, bad_map = _load_maps(args.map)
    base_maps, bad_base = _load_maps(args.base_map, "--base-map") if args.base_map else (None, None)
    bad_map = bad_map or bad_base
    canonical = Canonical(source_root, args.build_dir)
    options = Options(rules, args.allow_empty, args.whole_target, canonical, tuple(args.external_kernels),
                      per_file=not args.whole_change, source_root=source_root, host_scope=args.host_scope,
                      jit_decorators=tuple(args.jit_decorators), jit_sources=tuple(args.jit_sources))
    tests = all_tests(recordings, unreadable, rules)

    changed: list[str] = [p for c in args.changed or [] for p in project_paths(c, source_root)]  # here, and top
    commit_missing = ""
    if args.diff is not None:  # diffed whatever the evidence: the static rules need the change set too
        commit = (base_maps or kmaps)[0].commit if (base_maps or kmaps) else ""
        if commit and not changes.has_commit(source_root, commit):
            commit_missing = f"the map's commit {commit} is not in this repository (fetch it, or deepen the clone)"
            commit = ""
        changed = list(changes.changed_files(source_root, [c for c in (commit, args.diff) if c], source_root).paths)
    for path in changed:
        built = looks_built(path)
        if built:
            warning(f"{path} looks like a build output ({built}) and is in the change set: build outside the "
                    "repository or add it to .gitignore, or it runs every test no rule clears")
    not_this_build = _not_this_build(kmaps, base_maps, source_root) if args.diff is not None else ""
    if bad_map:
        selection = everything(tests, changed, *bad_map, rules, canonical=canonical)
    elif not_this_build:
        selection = dataclasses.replace(everything(tests, changed, COMMIT_MISMATCH, not_this_build, rules,
                                                   canonical=canonical), mode="output")
    elif commit_missing:
        selection = everything(tests, changed, MAP_COMMIT_MISSING, commit_missing, rules, canonical=canonical)
    else:
        selection = select(kmaps, recordings, changed, options=options, unreadable=unreadable, base=base_maps)
    del recordings, kmaps, base_maps  # the output needs none of them: their memory is free for its text
    _print(selection, args.json)
    evidence_failed = selection.fallback in EVIDENCE_FALLBACKS or bool(unreadable) or bool(doubts)
    return EXIT_INPUT if args.strict and evidence_failed else EXIT_OK


def _not_this_build(kmaps: list[KernelMap], base: list[KernelMap] | None, source_root: Path) -> str:
    """Output mode with --diff: why --map is not the build of this checkout ("" when it is): its commit must be
    the one checked out (a map of main passed as --map would see no change at all)."""
    from ..consumer.select import changes

    if not base or not kmaps:
        return ""
    try:
        here = changes.head(source_root)
    except KernelSymbolMapError:
        return ""  # --diff itself reports a checkout git cannot read
    other = sorted({m.commit for m in kmaps} - {here})
    if other:
        return (f"the change's map (--map) is of {', '.join(c or '(unknown)' for c in other)}, but the checkout is "
                f"at {here}: it is not this checkout's build")
    return ""


def _load_maps(sources: list[str], flag: str = "--map") -> tuple[list[KernelMap], tuple[str, str] | None]:
    """The maps that load, or (the fallback code, why) for the first one that would not."""
    from ..consumer.maps.kernelmap import load
    from ..consumer.select.selection import MAP_UNREADABLE, NO_MAP

    if not sources:
        return [], (NO_MAP, f"no map was given ({flag})")
    kmaps = []
    for source in sources:
        try:
            kmaps.append(load(source, newest=False))  # never a map chosen by a file's time
        except MapNotFound as e:
            warning(f"{e}; every test runs (no-map)")
            return [], (NO_MAP, str(e))
        except MapError as e:
            error(f"{e}; every test runs (map-unreadable)")
            return [], (MAP_UNREADABLE, str(e))
    return kmaps, None


def _print(selection: Selection, as_json: bool) -> None:
    if as_json:
        write_json(JSON_SCHEMA, selection.to_json())
        return
    if selection.mode_why:
        print(f"NOTE {_readable(selection.mode_why)}")
    for note in selection.notes:
        print(f"NOTE {_readable(note)}")
    if selection.fallback:
        print(f"FALLBACK {selection.fallback}: {_readable(selection.fallback_why)}")
    for v in (v for v in selection.verdicts.values() if v.by not in ("map", "emitted")):  # those say it per test
        runs = "every test" if v.by == "everything" else plural(len(v.tests), "test")
        print(f"FILE {v.path} [{v.by}, {runs}]: {_readable(v.why)}")
    for d in selection.decisions:
        print(f"{'RUN ' if d.run else 'SKIP'} {d.test}: {_readable(d.why)}")
    print(_readable(selection.summary()))


def _readable(why: str) -> str:
    """``why`` with each mangled kernel it names written as people read it (``--json`` keeps them mangled:
    scripts join on them). The explanations are built in consumer.select.selection, for both outputs."""
    from ..consumer.maps.names import full, readable

    return MANGLED.sub(lambda m: readable(m.group()) if full(m.group()) != m.group() else m.group(), why)
