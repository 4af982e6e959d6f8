"""Kernel recordings: which mangled kernels each test (or CI step) launched.

Three formats:

* the vLLM CI CUPTI-injection recorder's per-process text files: one mangled
  name a line, ``# dropped=N`` and a ``# end records=R unique=U dropped=D``
  footer; the test is ``# test=NAME`` when present, else the file's stem;
* JSON Lines, one record per test: ``{"test", "kernels", "complete", "commit"}``;
* an Nsight Systems SQLite export: the kernel table's mangled names, joined to
  the NVTX ranges (named after tests) that enclose their launches.

A recording with dropped records, or without its end footer, is incomplete
and can never justify skipping a test. Formats that carry no commit take
``--recordings-commit``.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import regex

from ..errors import RecordingError

_FOOTER = regex.compile(r"^# end records=(\d+) unique=(\d+) dropped=(\d+)$")
_DROPPED = regex.compile(r"^# dropped=(\d+)$")
_TEST = regex.compile(r"^# test=(\S.*)$")
_NAME = regex.compile(r"^[A-Za-z_$.][\w$.]*$")


@dataclass(frozen=True)
class Recording:
    test: str
    kernels: frozenset[str]
    complete: bool
    commit: str
    where: str  # file, and line for JSONL
    why_incomplete: str = ""


def read(paths: Iterable[Path], commit: str = "") -> list[Recording]:
    """Every recording in ``paths``; one test's records from several files are merged."""
    found: list[Recording] = []
    for path in paths:
        if path.suffix == ".jsonl":
            found += _jsonl(path, commit)
        elif path.suffix in (".sqlite", ".db"):
            found += _nsys(path, commit)
        else:
            found.append(_text(path, commit))
    return merge(found)


def merge(recordings: list[Recording]) -> list[Recording]:
    """Per test: kernels united, complete only if every part is, one commit or an error."""
    by_test: dict[str, list[Recording]] = defaultdict(list)
    for r in recordings:
        by_test[r.test].append(r)
    merged = []
    for test, parts in by_test.items():
        if len(parts) == 1:
            merged.append(parts[0])
            continue
        commits = {p.commit for p in parts}
        if len(commits) > 1:
            raise RecordingError(f"{test}: recorded at several commits ({', '.join(sorted(commits))})")
        whys = [p.why_incomplete for p in parts if not p.complete]
        merged.append(Recording(
            test, frozenset().union(*(p.kernels for p in parts)), not whys, commits.pop(),
            ", ".join(p.where for p in parts), "; ".join(whys),
        ))
    return sorted(merged, key=lambda r: r.test)


def _open(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise RecordingError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None


def _text(path: Path, commit: str) -> Recording:
    names: set[str] = set()
    test, dropped, footer = path.stem, 0, None
    for number, raw in enumerate(_open(path), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _FOOTER.match(line):
            footer = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif m := _DROPPED.match(line):
            dropped += int(m.group(1))
        elif m := _TEST.match(line):
            test = m.group(1)
        elif line.startswith("#"):
            continue
        elif _NAME.match(line):
            names.add(line)
        else:
            raise RecordingError(f"{path}:{number}: not a mangled kernel name: {line[:80]!r}")
    why = ""
    if footer is None:
        why = "no end footer (the recorder did not finish)"
    elif footer[2] or dropped:
        why = f"{max(footer[2], dropped)} records dropped"
    elif footer[1] != len(names):
        why = f"footer says {footer[1]} unique kernels, file has {len(names)}"
    return Recording(test, frozenset(names), not why, commit, str(path), why)


def _jsonl(path: Path, default_commit: str) -> list[Recording]:
    found = []
    for number, raw in enumerate(_open(path), 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(raw)
        except ValueError as e:
            raise RecordingError(f"{where}: not JSON ({e.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("test"), str):
            raise RecordingError(f"{where}: a record needs a string \"test\"")
        kernels = record.get("kernels")
        if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
            raise RecordingError(f"{where}: \"kernels\" must be a list of strings")
        complete = record.get("complete")
        if not isinstance(complete, bool):
            raise RecordingError(f"{where}: \"complete\" must be true or false")
        commit = record.get("commit", default_commit)
        if not isinstance(commit, str):
            raise RecordingError(f"{where}: \"commit\" must be a string")
        found.append(Recording(record["test"], frozenset(kernels), complete, commit, where,
                               "" if complete else "the recorder marked it incomplete"))
    return found


_NSYS_JOIN = """
SELECT k.correlationId, s.value, k.start, r.start, r.globalTid
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN StringIds AS s ON s.id = k.mangledName
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
"""
_NSYS_RANGES = """
SELECT n.start, n.end, COALESCE(n.text, s.value), n.globalTid
FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId
WHERE n.end IS NOT NULL
"""


def _nsys(path: Path, commit: str) -> list[Recording]:
    """Kernels attributed to the NVTX range (a test) around their launch call, on the launching thread."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            launches = db.execute(_NSYS_JOIN).fetchall()
            ranges = db.execute(_NSYS_RANGES).fetchall()
        finally:
            db.close()
    except sqlite3.Error as e:
        raise RecordingError(f"{path}: not an Nsight Systems export ({e})") from None
    kernels: dict[str, set[str]] = defaultdict(set)
    for _corr, name, k_start, launch_start, tid in launches:
        at = launch_start if launch_start is not None else k_start
        for start, end, text, range_tid in ranges:
            if start <= at <= end and (launch_start is None or range_tid == tid) and text:
                kernels[text].add(name)
    return [Recording(test, frozenset(names), True, commit, str(path)) for test, names in sorted(kernels.items())]
