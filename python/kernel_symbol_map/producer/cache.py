"""The per-object cache in the build dir, and the last run's fingerprint.

An object's kernels are reused only when its path, size, mtime_ns, inode and
ctime_ns, and this tool's version, are all unchanged. The files are
:mod:`.._statefile`'s checksummed JSON: a cache that does not parse, or whose
checksum does not match, is ignored with a warning and never trusted. Only
this module and ``json`` load before the no-op check, so that an up-to-date
re-run costs little more than Python's start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .._statefile import FOLDER, read, stat_key, write

CACHE_FILE = "cache.json"
RUN_FILE = "last-run.json"


class ObjectCache:
    """Object path -> what the reader said, valid while the object's stat key holds."""

    def __init__(self, build_dir: Path, tool: str, warn: Callable[[str], None] = lambda _m: None) -> None:
        self.path = build_dir / FOLDER / CACHE_FILE
        self.tool = tool
        self.warn = warn
        payload = read(self.path, tool, warn)
        self.entries: dict[str, Any] = payload if isinstance(payload, dict) else {}
        self.changed = False

    def get(self, obj: str, key: list[int] | None) -> Any:
        entry = self.entries.get(obj)
        if key is None or not isinstance(entry, dict) or entry.get("key") != key:
            return None
        return entry.get("value")

    def put(self, obj: str, key: list[int] | None, value: Any) -> None:
        if key is not None:
            self.entries[obj] = {"key": key, "value": value}
            self.changed = True

    def save(self, keep: Iterable[str]) -> None:
        """Write back, keeping only ``keep`` (objects no longer in the build are dropped)."""
        wanted = set(keep)
        kept = {k: v for k, v in self.entries.items() if k in wanted}
        if self.changed or len(kept) != len(self.entries):
            write(self.path, self.tool, kept, self.warn)


def fingerprint(inputs: Iterable[str], deps: Iterable[str], options: dict[str, Any], out: Path) -> dict[str, Any]:
    """Everything a run's map depends on: input files' stat keys, deps' existence, options, the map file."""
    return {
        "inputs": {p: stat_key(p) for p in sorted(set(inputs))},
        "deps": sorted(set(deps)),
        "options": options,
        "out": [str(out), stat_key(out)],
    }


def last_run(build_dir: Path, tool: str) -> Any:
    return read(build_dir / FOLDER / RUN_FILE, tool, lambda _m: None)


def remember_run(build_dir: Path, tool: str, run: dict[str, Any], summary: dict[str, Any]) -> None:
    write(build_dir / FOLDER / RUN_FILE, tool, {"run": run, "summary": summary}, lambda _m: None)


def up_to_date(build_dir: Path, tool: str, options: dict[str, Any], out: Path) -> dict[str, Any] | None:
    """The last run's summary when nothing it depended on changed, else None."""
    last = last_run(build_dir, tool)
    if not isinstance(last, dict) or not isinstance(last.get("run"), dict):
        return None
    run = last["run"]
    if run.get("options") != options or run.get("out") != [str(out), stat_key(out)]:
        return None
    inputs = run.get("inputs")
    if not isinstance(inputs, dict) or any(stat_key(p) != key for p, key in inputs.items()):
        return None
    if not all(os.path.exists(d) for d in run.get("deps", [])):
        return None
    return last.get("summary")
