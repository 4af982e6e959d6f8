"""Which tests a change needs: changed files -> the kernels they reach -> the tests that launched them.

Evidence may only remove a test when all of these hold: the map has evidence;
every changed file is clearable (known to the map, and only ever compiled into
objects with kernels); and that test's recording is complete and from the
map's commit. Completeness and commit are judged per test. Anything else falls
back to running everything (or to the user's static rules), with a reason code.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kernelmap import KernelMap, Reach
from ..errors import KernelSymbolMapError
from .recordings import Recording

# Why evidence could not remove tests.
NO_MAP = "no-map"
MAP_INCOMPLETE = "map-incomplete"
COMMIT_MISMATCH = "commit-mismatch"
FILE_NOT_IN_MAP = "file-not-in-map"
HOST_FILE = "host-file"
UNKNOWN_FILE = "unknown-file"
RECORDING_INCOMPLETE = "recording-incomplete"
_FILE_CODES = {"not-in-map": FILE_NOT_IN_MAP, "host": HOST_FILE, "unknown": UNKNOWN_FILE}


@dataclass(frozen=True)
class Decision:
    test: str
    run: bool
    reason: str  # a code for fallbacks, "launched" or "not-reached" for evidence
    why: str


@dataclass
class Selection:
    decisions: list[Decision]
    fallback: str | None = None  # a reason code when evidence was set aside for every test
    fallback_why: str = ""
    files: list[Reach] = field(default_factory=list)

    @property
    def to_run(self) -> list[str]:
        return [d.test for d in self.decisions if d.run]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "kernel-symbol-map/selection/1",
            "fallback": self.fallback,
            "fallback_why": self.fallback_why,
            "run": self.to_run,
            "skip": [d.test for d in self.decisions if not d.run],
            "decisions": [{"test": d.test, "run": d.run, "reason": d.reason, "why": d.why} for d in self.decisions],
            "files": [{"path": r.path, "status": r.status, "kernels": len(r.symbols)} for r in self.files],
        }


@dataclass(frozen=True)
class StaticRules:
    """The user's fallback: ``{"rules": [{"paths": [globs], "tests": [names]}]}``; no match means everything."""

    rules: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]

    @classmethod
    def read(cls, path: Path) -> StaticRules:
        try:
            data = json.loads(path.read_text())
            rules = tuple((tuple(r["paths"]), tuple(r["tests"])) for r in data["rules"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise KernelSymbolMapError(f"{path}: not a rules file ({e})") from None
        return cls(rules)

    def tests_for(self, changed: list[str]) -> set[str] | None:
        """Tests the rules name for ``changed``, or None when some file matches no rule."""
        found: set[str] = set()
        for path in changed:
            hits = [tests for globs, tests in self.rules if any(fnmatch.fnmatch(path, g) for g in globs)]
            if not hits:
                return None
            found.update(t for tests in hits for t in tests)
        return found


def select(
    kmap: KernelMap | None,
    recordings: list[Recording],
    changed: list[str],
    rules: StaticRules | None = None,
) -> Selection:
    tests = sorted({r.test for r in recordings} | ({t for _, ts in rules.rules for t in ts} if rules else set()))
    if kmap is None:
        return _fallback(tests, changed, rules, NO_MAP, "no map was given", [])
    if not kmap.has_evidence:
        return _fallback(tests, changed, rules, MAP_INCOMPLETE, f"the map holds no evidence: {kmap.reason}", [])
    if recordings and all(r.commit != kmap.commit for r in recordings):
        commits = ", ".join(sorted({r.commit or "(unknown)" for r in recordings}))
        return _fallback(tests, changed, rules, COMMIT_MISMATCH,
                         f"the map is of {kmap.commit or '(unknown)'}, every recording of {commits}", [])
    files = kmap.reach(*changed)
    blocking = [r for r in files if not r.clearable]
    if blocking:
        first = blocking[0]
        return _fallback(tests, changed, rules, _FILE_CODES[first.status],
                         "; ".join(r.explain() for r in blocking), files)
    reached = frozenset().union(*(r.symbols for r in files)) if files else frozenset()
    by_test = {r.test: r for r in recordings}
    decisions = []
    for test in tests:
        rec = by_test.get(test)
        launched = sorted(rec.kernels & reached) if rec else []
        if launched:
            origin = next(r for r in files if launched[0] in r.symbols)
            decisions.append(Decision(test, True, "launched",
                                      f"launched {len(launched)} reached kernels, e.g. {launched[0]} (reached from {origin.path})"))
        elif rec is None:
            decisions.append(Decision(test, True, RECORDING_INCOMPLETE, "no recording of this test"))
        elif not rec.complete:
            decisions.append(Decision(test, True, RECORDING_INCOMPLETE, f"its recording is incomplete: {rec.why_incomplete}"))
        elif rec.commit != kmap.commit:
            decisions.append(Decision(test, True, COMMIT_MISMATCH,
                                      f"recorded at {rec.commit or '(unknown)'}, the map is of {kmap.commit or '(unknown)'}"))
        else:
            decisions.append(Decision(test, False, "not-reached",
                                      f"its complete recording launched none of the {len(reached)} kernels the change reaches"))
    return Selection(decisions, files=files)


def _fallback(
    tests: list[str], changed: list[str], rules: StaticRules | None, code: str, why: str, files: list[Reach]
) -> Selection:
    chosen = rules.tests_for(changed) if rules else None
    if chosen is None:
        decisions = [Decision(t, True, code, why) for t in tests]
    else:
        decisions = [Decision(t, t in chosen, code, f"{why}; static rules {'select' if t in chosen else 'skip'} it") for t in tests]
    return Selection(decisions, code, why, files)
