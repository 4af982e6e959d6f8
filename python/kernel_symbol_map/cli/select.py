"""``select``: the tests a change needs, each with why.

Bad evidence never blocks CI: a map or recording that cannot be read is
reported and the tests it would have cleared run, with exit 0. ``--strict``
makes such input exit 1 instead, for pipelines that want to know.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import KernelSymbolMapError, MapError
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, warning

if TYPE_CHECKING:
    from ..consumer.kernelmap import KernelMap
    from ..consumer.selection import Selection


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "select",
        help="choose the tests a change needs, from maps and kernel recordings",
        description="Print the tests or CI steps to run for a change and, for each, why. Evidence only "
        "removes a test when every map has evidence and the same known commit, every changed file is "
        "clearable, and that test's recording is complete, of that commit, and names only known kernels; "
        "otherwise it runs (or --rules decide). CI must run every test except those skipped: a test no "
        "recording knows is never listed, so never skipped.",
        allow_abbrev=False,
    )
    p.add_argument("--map", action="append", default=[], metavar="MAP",
                   help="map file, wheel, or installed package; repeat for wheel variants or shards "
                   "(evidence is their union; none given or missing: fall back, no-map)")
    p.add_argument("--recordings", nargs="+", type=Path, required=True, metavar="FILE",
                   help="recorder text files, JSON Lines, or Nsight Systems SQLite exports")
    changes = p.add_mutually_exclusive_group(required=True)
    changes.add_argument("--changed", nargs="+", metavar="FILE", help="changed files, as the map spells them")
    changes.add_argument("--diff", metavar="BASE",
                         help="changed files from git: everything changed since the map's commit and since "
                         "BASE, to the working tree, untracked files and both sides of renames included")
    p.add_argument("--allow-empty", action="store_true",
                   help="an empty change set is real (default: it is no evidence, and everything runs)")
    p.add_argument("--recordings-commit", default="", help="commit of recordings that do not carry one")
    p.add_argument("--rules", type=Path, help="static fallback rules (JSON) instead of running everything")
    p.add_argument("--source-root", type=Path,
                   help="the project the map's relative paths are in (default: the git top level of .)")
    p.add_argument("--build-dir", action="append", default=[], type=Path, metavar="DIR",
                   help="the build folder(s) the map's $BUILD paths are in, in the map's order: changed "
                   "files may then be given as build-tree paths too")
    p.add_argument("--whole-target", action="store_true",
                   help="conservative: a changed file reaches every test that launched any kernel of "
                   "its CMake targets (host code in .cu files called without launching its kernels)")
    p.add_argument("--external-kernels", action="append", default=[], metavar="REGEX",
                   help="kernels that come from outside the project (e.g. 'at::native::.*|.*cublas.*' "
                   "mangled); a recording may name them without blocking a skip")
    p.add_argument("--strict", action="store_true", help="exit 1 on an unreadable map or recording")
    p.add_argument("--json", action="store_true", help="machine-readable output for CI")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer import changes
    from ..consumer.canonical import Canonical
    from ..consumer.recordings import read_each
    from ..consumer.selection import (
        MAP_COMMIT_MISSING,
        MAP_UNREADABLE,
        NO_MAP,
        Options,
        StaticRules,
        all_tests,
        everything,
        select,
    )

    rules = StaticRules.read(args.rules) if args.rules else None
    recordings, unreadable = read_each(args.recordings, args.recordings_commit)
    for u in unreadable:
        warning(f"{u.why}; {'its tests run' if u.tests else 'every test runs'} (recording-unreadable)")
    source_root = args.source_root or _default_root(args.diff is not None)
    kmaps, bad_map = _load_maps(args.map)
    canonical = Canonical(source_root, args.build_dir)
    options = Options(rules, args.allow_empty, args.whole_target, canonical, tuple(args.external_kernels))
    tests = all_tests(recordings, unreadable, rules)

    if bad_map:
        selection = everything(tests, args.changed or [], MAP_UNREADABLE, bad_map, rules)
    elif not kmaps:
        selection = everything(tests, args.changed or [], NO_MAP, "no map was given", rules)
    elif args.diff is not None:
        commit = kmaps[0].commit
        if commit and not changes.has_commit(source_root, commit):
            selection = everything(tests, [], MAP_COMMIT_MISSING,
                                   f"the map's commit {commit} is not in this repository (fetch it, or deepen the clone)")
        else:
            found = changes.changed_files(source_root, [c for c in (commit, args.diff) if c], source_root)
            selection = select(kmaps, recordings, list(found.paths), options=options, unreadable=unreadable)
    else:
        selection = select(kmaps, recordings, args.changed, options=options, unreadable=unreadable)
    _print(selection, args.json)
    return EXIT_INPUT if args.strict and (bad_map or unreadable) else EXIT_OK


def _default_root(for_git: bool) -> Path:
    from ..consumer import changes

    try:
        return changes.toplevel(Path.cwd())
    except KernelSymbolMapError:
        if for_git:
            raise UsageError("--diff needs a git repository; run inside one or give --source-root") from None
        return Path.cwd()


def _load_maps(sources: list[str]) -> tuple[list[KernelMap], str]:
    """The maps that load, and why the first one that would not did ("" when all did)."""
    from ..consumer.kernelmap import load

    kmaps = []
    for source in sources:
        if not Path(source).exists() and Path(source).suffix in (".gz", ".whl"):
            warning(f"{source}: no such map; falling back (no-map)")
            return [], ""
        try:
            kmaps.append(load(source))
        except MapError as e:
            error(f"{e}; every test runs (map-unreadable)")
            return [], str(e)
    return kmaps, ""


def _print(selection: Selection, as_json: bool) -> None:
    if as_json:
        json.dump(selection.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    if selection.fallback:
        print(f"FALLBACK {selection.fallback}: {selection.fallback_why}")
    for d in selection.decisions:
        print(f"{'RUN ' if d.run else 'SKIP'} {d.test}: {d.why}")
    print(f"{len(selection.to_run)} of {len(selection.decisions)} tests to run")
