"""Merge the part files of one recording into the JSON Lines that ``select`` reads.

Each record is ``{"test", "kernels", "complete", "commit", "reason",
"processes"}``: ``reason`` says why it is incomplete, ``processes`` how many
Python processes were recorded. Incomplete when any contributing process was
incomplete (no CUPTI, dropped records, interrupted), when a process started
but never wrote its part file (it died), when the command was interrupted,
or when no process was recorded at all.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _atomic
from ..errors import RecordingError

SESSION = "scope::"  # the plugin's widest scope: every test


@dataclass(frozen=True)
class Part:
    token: str
    scope: str
    complete: bool
    reason: str
    kernels: dict[str, tuple[str, ...]]


def read_parts(folder: Path) -> tuple[list[Part], list[str]]:
    """The part files in ``folder``, and the started processes that never wrote one."""
    parts = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            parts.append(Part(str(data["token"]), str(data["scope"]), bool(data["complete"]), str(data["reason"]),
                              {str(k): tuple(v) for k, v in data["kernels"].items()}))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise RecordingError(f"{path}: not a recorder part file ({e})") from None
    return parts, _unwritten(folder)


def _unwritten(folder: Path) -> list[str]:
    """Tokens of processes that started but wrote no part file (by file names alone)."""
    return sorted(p.stem for p in folder.glob("*.started") if not (folder / f"{p.stem}.json").exists())


def wait_for_stragglers(folder: Path, seconds: float = 10.0) -> None:
    """Give processes that outlive the command (multiprocessing's resource tracker) time to write their part."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(folder / f"{token}.started") for token in _unwritten(folder)):
            return
        time.sleep(0.05)


def _alive(started: Path) -> bool:
    try:
        pid = int(json.loads(started.read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _problems(parts: list[Part], died: list[str], interrupted: str) -> list[str]:
    found = [f"process {p.token}: {p.reason}" for p in parts if not p.complete]
    found += [f"process {token} died before writing its part file" for token in died]
    if interrupted:
        found.append(interrupted)
    if not parts and not died:
        found.append("no Python process was recorded")
    return found


def step_record(folder: Path, step: str, commit: str, interrupted: str = "") -> dict[str, Any]:
    """One record for a whole CI step: every kernel of every recorded process."""
    wait_for_stragglers(folder)
    parts, died = read_parts(folder)
    problems = _problems(parts, died, interrupted)
    kernels = sorted({k for p in parts for names in p.kernels.values() for k in names})
    return {"test": step, "kernels": kernels, "complete": not problems, "commit": commit,
            "reason": "; ".join(problems), "processes": len(parts) + len(died)}


def in_scope(test: str, scope: str) -> bool:
    """Whether ``test`` (a pytest node id) runs under the fixture scope ``scope::<node id>``."""
    node = scope[len(SESSION):]
    return node == "" or test == node or test.startswith((node + "::", node + "/"))


def test_records(folder: Path, tests: list[str], commit: str, interrupted: str = "") -> list[dict[str, Any]]:
    """One record per test: its own kernels, and those of every fixture scope it runs under.

    A kernel attributed to a scope goes to every test of that scope, so a
    fixture that warms a kernel up never hides it from a test that needs it.
    """
    wait_for_stragglers(folder)
    parts, died = read_parts(folder)
    problems = _problems(parts, died, interrupted)
    found: dict[str, set[str]] = {t: set() for t in tests}
    for part in parts:
        for scope, names in part.kernels.items():
            if scope.startswith(SESSION):
                targets = [t for t in tests if in_scope(t, scope)]
            elif scope in found:
                targets = [scope]
            else:  # a scope no test knows (a process outside any test): every test
                targets = tests
            for t in targets:
                found[t].update(names)
    return [{"test": t, "kernels": sorted(found[t]), "complete": not problems, "commit": commit,
             "reason": "; ".join(problems), "processes": len(parts) + len(died)} for t in tests]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    _atomic.replace(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode())
