"""Nsight Systems SQLite exports written by the tests: the tables the recording reader joins."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, correlationId INT, mangledName INT, globalPid INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, correlationId INT, globalTid INT);
CREATE TABLE NVTX_EVENTS (start INT, end INT, text TEXT, textId INT, eventType INT, globalTid INT);
"""


@dataclass(frozen=True)
class Launch:
    kernel: str
    at: int | None  # the launch call's time; None: no runtime row for it
    tid: int  # the launching thread
    start: int  # the kernel's execution on the GPU
    end: int


@dataclass(frozen=True)
class Range:
    test: str
    start: int
    end: int
    tid: int


def write_export(path: Path, launches: list[Launch], ranges: list[Range]) -> None:
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    strings: dict[str, int] = {}
    for corr, launch in enumerate(launches, 1):
        sid = strings.setdefault(launch.kernel, len(strings) + 1)
        db.execute("INSERT OR IGNORE INTO StringIds VALUES (?, ?)", (sid, launch.kernel))
        if launch.at is not None:
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?)",
                       (launch.at, launch.at + 1, corr, launch.tid))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, 1)", (launch.start, launch.end, corr, sid))
    for r in ranges:
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, NULL, 59, ?)", (r.start, r.end, r.test, r.tid))
    db.commit()
    db.close()


def sequential(path: Path, tests: dict[str, list[str]], tid: int = 7) -> None:
    """Each test's kernels launched in turn inside its range, on one thread; each runs after its range closed."""
    launches, ranges = [], []
    clock = 1000
    for test, kernels in tests.items():
        start = clock
        for k in kernels:
            launches.append(Launch(k, clock + 1, tid, clock + 500, clock + 600))
            clock += 10
        ranges.append(Range(test, start, clock, tid))
        clock += 10
    write_export(path, launches, ranges)
