"""``build``: write the map for one or more CMake build trees.

Also a drop-in for the seed script: ``--build-root/--source-root/--out/--jobs/
--cuobjdump/--commit`` are accepted and the same format is written.

A re-run on an unchanged tree returns before the readers are even imported:
the last run's fingerprint (every input's size, mtime_ns and inode, the deps'
existence, the options, the map file itself) is checked first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .._commit import resolve_commit
from .._version import __version__
from ..producer import cache
from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error, plural, tip, write_json

if TYPE_CHECKING:
    from ..producer.mirrors import Mirror

DEFAULT_OUT = "kernel_symbol_map.json.gz"
JSON_SCHEMA = "kernel-symbol-map/build/1"
INSIDE_BUILD_ENV = "KERNEL_SYMBOL_MAP_INSIDE_BUILD"  # set by the CMake package's command


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "build",
        help=summary_of("build"),
        description="Read CMake build trees (targets, objects, header deps) and every object's "
        "kernel symbols; write the map atomically and print a one-line summary. "
        "A failure still writes a map with a `reason` and exits 0, unless --strict.",
        allow_abbrev=False,
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--build-dir", type=Path, action="append", dest="build_dirs", metavar="DIR",
                       help="a CMake build tree (repeatable)")
    where.add_argument("--build-root", type=Path, metavar="DIR",
                       help="seed-compatible: every CMake build tree under DIR")
    p.add_argument("--source-root", type=Path, help="paths inside it are written relative (default: the project's)")
    p.add_argument("--out", type=Path, help=f"map file (default: <first build dir>/{DEFAULT_OUT})")
    p.add_argument("--targets", nargs="+", metavar="T", default=[], help="only these CMake targets")
    p.add_argument("--exclude-targets", nargs="+", metavar="T", default=[],
                   help="targets the build never builds (EXCLUDE_FROM_ALL): left out, and not counted as missing")
    p.add_argument("--backend", choices=("native", "cuobjdump"), default="native", help="kernel reader")
    p.add_argument("--cuobjdump", metavar="EXE", help="cuobjdump for --backend cuobjdump")
    p.add_argument("--commit", help="commit the build is of (default: CI variables, then git)")
    p.add_argument("--jobs", type=int, default=1,
                   help="read objects in N processes (default 1: measured fastest on 2 cores)")
    p.add_argument("--no-cache", action="store_true", help="read every object again; ignore and keep no cache")
    p.add_argument("--strict", action="store_true", help="exit 1 when the map is not complete")
    p.add_argument("--config", metavar="NAME",
                   help="Ninja Multi-Config: the configuration to map (default: the one that is built)")
    p.add_argument("--mirror", action="append", default=[], metavar="COPY=ORIGINAL",
                   help="sources compiled from a (hipified) copy under COPY are mapped to their originals "
                   "under ORIGINAL (repeatable; vLLM-style ROCm builds)")
    p.add_argument("--reconfigure", action="store_true",
                   help="re-run the project's CMake configure when no file-API reply is current (by default "
                   "build never runs it: targets then come from build.ninja or the Makefiles)")
    p.add_argument("--json", action="store_true", help=f"the summary, machine-readable ({JSON_SCHEMA})")
    p.add_argument("--inside-build", action="store_true", default=bool(os.environ.get(INSIDE_BUILD_ENV)),
                   help=argparse.SUPPRESS)  # set by the CMake package: never re-run CMake
    p.set_defaults(run=run)


def build_dirs_under(root: Path) -> list[Path]:
    """CMake build trees under ``root`` (the seed's --build-root), without FetchContent sub-builds."""
    if not root.is_dir():
        raise UsageError(f"--build-root {root}: not a directory")
    found = {c.parent for c in root.rglob("CMakeCache.txt") if not c.parent.name.endswith("-subbuild")}
    return sorted(found)


def _summary(args: argparse.Namespace, out: Path, size: int, stats: dict, reason: str | None,
             checked: float | None = None) -> None:
    """``checked``: an up-to-date run's own seconds; ``stats`` (and its seconds) are then the last build's."""
    if args.json:
        extra = {} if checked is None else {"checked_seconds": checked}
        write_json(JSON_SCHEMA, {"out": str(out), "bytes": size, "up_to_date": checked is not None,
                                 "evidence": not reason, "reason": reason, "stats": stats, **extra})
    else:
        # What the build compiled, then what the map holds (nothing when it failed closed); an up-to-date run
        # wrote nothing, and its time is this check's, not the last build's.
        done = (f"wrote {out}" if checked is None else f"nothing to do (up to date): {out}") + f" ({size // 1024} KiB)"
        took = f"{stats['seconds']} s" if checked is None else f"checked in {checked:.2f} s"
        print(f"kernel_symbol_map: {done}: {plural(stats['objects'], 'object')} compiled; "
              f"the map holds {plural(stats['device_objects'], 'device object')} and "
              f"{plural(stats['symbols'], 'symbol')}; {plural(stats['errors'], 'error')}, {took}", flush=True)
    if reason:
        error(f"no evidence in {out}: {reason}")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    mirrors = _mirrors(args.mirror)  # usage errors first
    build_dirs = [b.resolve() for b in (args.build_dirs or build_dirs_under(args.build_root))]
    not_trees = [b for b in build_dirs if not (b / "CMakeCache.txt").is_file()]
    if not_trees and args.out is None:
        # Never litter a folder that is not a build tree; exit as the seed does (0), unless --strict.
        what = "no such folder" if not not_trees[0].exists() else "not a CMake build tree (no CMakeCache.txt)"
        error(f"{not_trees[0]}: {what}; no map written (--out writes one that says why)")
        return EXIT_INPUT if args.strict else EXIT_OK
    out = (args.out or (build_dirs[0] / DEFAULT_OUT if build_dirs else Path(DEFAULT_OUT))).resolve()
    root = args.source_root.resolve() if args.source_root else None
    # Resolved once, here, in the project's repository: the no-op check must see a new HEAD.
    commit = resolve_commit(args.commit, root or (_home(build_dirs[0]) if build_dirs else Path.cwd()))
    fingerprint_options = {
        "build_dirs": [str(b) for b in build_dirs], "source_root": str(root), "targets": args.targets,
        "exclude_targets": args.exclude_targets,
        "mirrors": [[m.copy, m.original] for m in mirrors], "config": args.config,
        "backend": args.backend, "commit": commit, "epoch": os.environ.get("SOURCE_DATE_EPOCH", ""),
    }
    tool = f"{__version__}/{args.backend}"
    use_cache = not args.no_cache and bool(build_dirs) and not not_trees  # nothing of ours in a non-tree
    if use_cache:
        last = cache.up_to_date(build_dirs[0], tool, fingerprint_options, out)
        if last is not None:
            _summary(args, out, out.stat().st_size, last["stats"], last.get("reason"),
                     checked=round(time.perf_counter() - started, 2))
            return EXIT_INPUT if args.strict and last.get("reason") else EXIT_OK
    return _extract(args, build_dirs, out, root, commit, tool, fingerprint_options, use_cache, mirrors)


def _home(build_dir: Path) -> Path:
    """The project a build tree was configured from (CMakeCache's CMAKE_HOME_DIRECTORY), else the tree.

    String operations on one file: this runs on the no-op path, before any
    reader or model is imported.
    """
    try:
        text = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return build_dir
    for line in text.splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.partition("=")[2])
    return build_dir


def _mirrors(specs: list[str]) -> tuple[Mirror, ...]:
    from ..producer.mirrors import parse

    try:
        return tuple(parse(spec, Path.cwd()) for spec in specs)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _extract(args, build_dirs, out, root, commit, tool, fingerprint_options, use_cache, mirrors) -> int:  # noqa: ANN001
    from .. import mapformat
    from ..producer.extract import Options, build_map

    reader = {}
    if args.backend == "cuobjdump":
        from ..errors import ToolError
        from .symbols import cuobjdump_backend

        try:
            reader = {"read": cuobjdump_backend(args.cuobjdump).read_kernels}
        except ToolError as e:  # no reader, no evidence: a map that says why, as any failed run (not a crash)
            return _no_evidence(args, out, commit, f"the cuobjdump backend cannot run: {e}", getattr(e, "hint", None))
    options = Options(
        build_dirs=tuple(build_dirs), out=out, source_root=root, targets=tuple(args.targets),
        exclude_targets=tuple(args.exclude_targets), backend=args.backend,
        commit=commit, inside_build=args.inside_build, reconfigure=args.reconfigure, use_cache=use_cache,
        jobs=max(1, args.jobs or 1), mirrors=mirrors, config=args.config, **reader,
    )
    stream = sys.stderr if args.json else sys.stdout  # --json: stdout holds the one JSON document
    log = lambda m: print(f"kernel_symbol_map: {m}", file=stream, flush=True)  # noqa: E731
    extraction = None
    try:
        extraction = build_map(options, log=log)
        document = extraction.document
    except Exception as e:  # noqa: BLE001 - the build-hook entry point: a bug becomes "no evidence"
        # The one broad except (see house style): a bug must not fail the user's
        # build, and must never leave a partial map. It becomes a map with a reason.
        error(f"internal error, writing a map with no evidence: {e!r}")
        return _no_evidence(args, out, commit, f"internal error in kernel-symbol-map: {e!r}")
    size = mapformat.write(document, out)
    reason = document.get("reason")
    _summary(args, out, size, document["stats"], reason)
    if reason and document["errors"]:
        tip("each object is listed in the map's `errors`; build the missing targets first, or map the fully "
            "built ones with --targets (a map that says what it leaves out)")
    if use_cache and extraction is not None:
        run_print = cache.fingerprint(extraction.inputs, extraction.deps, fingerprint_options, out)
        cache.remember_run(build_dirs[0], tool, run_print, {"stats": document["stats"], "reason": reason})
    return EXIT_INPUT if args.strict and reason else EXIT_OK


def _no_evidence(args: argparse.Namespace, out: Path, commit: str, reason: str, hint: str | None = None) -> int:
    """Write a map that holds no evidence and says why; exit as build does (0, unless --strict)."""
    from .. import mapformat
    from ..producer.extract import Options, build_map

    document = build_map(Options(build_dirs=(), out=out, commit=commit, use_cache=False)).document
    document["incomplete"] = True
    document["reason"] = reason
    size = mapformat.write(document, out)
    _summary(args, out, size, document["stats"], reason)
    if hint:
        tip(hint)
    return EXIT_INPUT if args.strict else EXIT_OK
