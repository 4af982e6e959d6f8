"""``select``: the tests a change needs, each with why."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from ._output import EXIT_OK, UsageError, warning

if TYPE_CHECKING:
    from ..consumer.kernelmap import KernelMap


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "select",
        help="choose the tests a change needs, from a map and kernel recordings",
        description="Print the tests or CI steps to run for a change and, for each, why. Evidence only "
        "removes a test when the map has evidence, every changed file is clearable, and that test's "
        "recording is complete and of the map's commit; otherwise everything runs (or --rules decide).",
        allow_abbrev=False,
    )
    p.add_argument("--map", help="map file, wheel, or installed package (missing: fall back, no-map)")
    p.add_argument("--recordings", nargs="+", type=Path, required=True, metavar="FILE",
                   help="recorder text files, JSON Lines, or Nsight Systems SQLite exports")
    changes = p.add_mutually_exclusive_group(required=True)
    changes.add_argument("--changed", nargs="+", metavar="FILE", help="changed files, as the map spells them")
    changes.add_argument("--diff", metavar="BASE", help="changed files from `git diff --name-only --relative BASE`")
    p.add_argument("--recordings-commit", default="", help="commit of recordings that do not carry one")
    p.add_argument("--rules", type=Path, help="static fallback rules (JSON) instead of running everything")
    p.add_argument("--source-root", type=Path, default=Path.cwd(), help="where git runs for --diff (default: .)")
    p.add_argument("--json", action="store_true", help="machine-readable output for CI")
    p.set_defaults(run=run)


def changed_since(base: str, root: Path) -> list[str]:
    command = ["git", "-C", str(root), "diff", "--name-only", "--relative", base]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UsageError(f"{' '.join(command)}: {proc.stderr.strip().splitlines()[-1:] or ['failed']}")
    return [line for line in proc.stdout.splitlines() if line]


def run(args: argparse.Namespace) -> int:
    from ..consumer.kernelmap import load
    from ..consumer.recordings import read
    from ..consumer.selection import StaticRules, select

    changed = args.changed or changed_since(args.diff, args.source_root)
    kmap: KernelMap | None = None
    if args.map and (Path(args.map).exists() or Path(args.map).suffix not in (".gz", ".whl")):
        kmap = load(args.map)
    elif args.map:
        warning(f"{args.map}: no such map; falling back (no-map)")
    recordings = read(args.recordings, args.recordings_commit)
    rules = StaticRules.read(args.rules) if args.rules else None
    selection = select(kmap, recordings, changed, rules)
    if args.json:
        json.dump(selection.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return EXIT_OK
    if selection.fallback:
        print(f"FALLBACK {selection.fallback}: {selection.fallback_why}")
    for d in selection.decisions:
        print(f"{'RUN ' if d.run else 'SKIP'} {d.test}: {d.why}")
    print(f"{len(selection.to_run)} of {len(selection.decisions)} tests to run")
    return EXIT_OK



