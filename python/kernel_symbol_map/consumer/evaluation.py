"""Shadow mode: what a selection would have skipped, against what a full run actually did.

Before a team lets ``select`` skip anything, it runs everything, selects
anyway, and compares (vLLM's selector ran like this for weeks; Launchable
calls it observation mode). For a selection (``select --json``) and the
results of the full run (JUnit XML), this says:

* every **miss**: a test that failed although the selection would have
  skipped it, with the change and the evidence that led to the skip. There
  must be none: a miss is an unsafe skip caught before it shipped;
* the skip fraction, and the time the skips would have saved, from the run's
  own durations.

Tests are matched by pytest node id (``select`` names them so) to JUnit's
``classname`` and ``name``, cut as pytest's ``junitxml`` cuts them; a
step-level selection (``record --step``) matches whole result files instead,
one or more per step (a step's shards). A test (or step) in several result
files (runners, shards, reruns) failed if it failed in any of them.

A selection that is not the shape ``select --json`` writes is a
:class:`SelectionError`: a report on it could only be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import KernelSymbolMapError
from .junit import Result, junit_key

SCHEMA = "kernel-symbol-map/evaluate/1"
SELECTION_SCHEMA = "kernel-symbol-map/selection/1"


class SelectionError(KernelSymbolMapError):
    """A selection is not a ``select --json`` document (kernel-symbol-map/selection/1)."""


@dataclass(frozen=True)
class Miss:
    test: str
    message: str
    why: str  # why the selection skipped it


@dataclass
class Evaluation:
    selected: int  # tests the selection named
    skipped: list[str]  # of those, the ones it would skip that the run ran
    ran: int  # tests (or steps) in the run's results
    seconds_total: float
    seconds_skipped: float
    misses: list[Miss]
    unmatched: list[str] = field(default_factory=list)  # skipped by the selection, absent from the results
    fallback: str | None = None
    changed: list[str] = field(default_factory=list)

    @property
    def skip_fraction(self) -> float:
        return len(self.skipped) / self.ran if self.ran else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "misses": [{"test": m.test, "message": m.message, "why": m.why} for m in self.misses],
            "selected": self.selected, "ran": self.ran, "would_skip": self.skipped,
            "skip_fraction": round(self.skip_fraction, 4),
            "seconds_total": round(self.seconds_total, 3), "seconds_saved": round(self.seconds_skipped, 3),
            "not_in_results": self.unmatched, "fallback": self.fallback, "changed": self.changed,
        }

    def markdown(self) -> str:
        """A PR comment."""
        head = ("**kernel-symbol-map shadow run: {n} miss{es}**" if self.misses else
                "**kernel-symbol-map shadow run: no miss**").format(n=len(self.misses),
                                                                     es="" if len(self.misses) == 1 else "es")
        saved = f"{self.seconds_skipped:.0f} s of {self.seconds_total:.0f} s" if self.seconds_total else "0 s"
        lines = [head, "", f"The selection would have skipped {len(self.skipped)} of {self.ran} tests "
                 f"({self.skip_fraction:.0%}), saving {saved}."]
        if self.fallback:
            lines.append(f"It fell back (`{self.fallback}`): every test it knew would have run.")
        if self.misses:
            lines += ["", "| test that failed but would have been skipped | failure | why it would have been skipped |",
                      "| --- | --- | --- |"]
            lines += [f"| `{m.test}` | {_cell(m.message)} | {_cell(m.why)} |" for m in self.misses]
            changed = ", ".join(f"`{c}`" for c in self.changed[:10]) + (" ..." if len(self.changed) > 10 else "")
            lines += ["", f"Changed files: {changed or '(none)'}"]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:200]


def check_selection(selection: Any) -> None:
    """Raise :class:`SelectionError` unless ``selection`` has the shape ``select --json`` writes."""
    def bad(what: str) -> SelectionError:
        return SelectionError(f"not a {SELECTION_SCHEMA} document ({what})")

    if not isinstance(selection, dict) or selection.get("schema") != SELECTION_SCHEMA:
        raise bad("no such schema")
    for key in ("skip", "changed"):
        if not _strings(selection.get(key)):
            raise bad(f'"{key}" is not a list of strings')
    decisions = selection.get("decisions")
    if not isinstance(decisions, list):
        raise bad('"decisions" is not a list')
    for at, d in enumerate(decisions):
        if not isinstance(d, dict) or not isinstance(d.get("test"), str):
            raise bad(f"decisions[{at}] names no test")
    if not isinstance(selection.get("fallback"), (str, type(None))):
        raise bad('"fallback" is neither null nor a string')


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _combined(results: list[Result]) -> tuple[str, float, str]:
    """One test's (or step's) outcome over every result file it is in: a failure in any is a failure."""
    failed = [r for r in results if r.outcome == "failed"]
    if failed:
        outcome = "failed"
    elif any(r.outcome == "passed" for r in results):
        outcome = "passed"
    else:
        outcome = "skipped" if results else "passed"
    return outcome, sum(r.seconds for r in results), failed[0].message if failed else ""


def evaluate(selection: dict[str, Any], results: list[Result], steps: dict[str, list[Result]] | None = None) \
        -> Evaluation:
    """Compare ``selection`` (``select --json``) with a full run's ``results`` (or per-step result files)."""
    check_selection(selection)
    decisions = {d["test"]: d for d in selection["decisions"]}
    skip = list(dict.fromkeys(selection["skip"]))
    outcomes: dict[str, tuple[str, float, str]] = {}
    if steps:
        for step, cases in steps.items():
            failed = [c for c in cases if c.outcome == "failed"]
            message = f"{len(failed)} failed, e.g. {failed[0].classname}::{failed[0].name}: {failed[0].message}" \
                if failed else ""
            outcomes[step] = ("failed" if failed else "passed", sum(c.seconds for c in cases), message)
    else:
        by_key: dict[tuple[str, str], list[Result]] = {}
        for r in results:
            by_key.setdefault((r.classname, r.name), []).append(r)
        for test in decisions:
            found = by_key.get(junit_key(test))
            if found:
                outcomes[test] = _combined(found)
        known = {junit_key(t) for t in decisions}
        for key, found in by_key.items():  # tests no recording knows: they always run
            if key not in known:
                outcomes[f"{key[0]}::{key[1]}"] = _combined(found)
    skipped = [t for t in skip if t in outcomes]
    misses = [Miss(t, outcomes[t][2], str(decisions.get(t, {}).get("why", ""))) for t in skipped
              if outcomes[t][0] == "failed"]
    return Evaluation(
        selected=len(decisions), skipped=skipped, ran=len(outcomes),
        seconds_total=sum(s for _, s, _ in outcomes.values()),
        seconds_skipped=sum(outcomes[t][1] for t in skipped), misses=misses,
        unmatched=[t for t in skip if t not in outcomes], fallback=selection.get("fallback"),
        changed=list(selection["changed"]),
    )
