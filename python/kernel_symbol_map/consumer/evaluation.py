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
``classname`` and ``name``; a step-level selection (``record --step``)
matches whole result files instead, one per step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .junit import Result, junit_key

SCHEMA = "kernel-symbol-map/evaluate/1"


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


def evaluate(selection: dict[str, Any], results: list[Result], steps: dict[str, list[Result]] | None = None) \
        -> Evaluation:
    """Compare ``selection`` (``select --json``) with a full run's ``results`` (or per-step result files)."""
    decisions = {d["test"]: d for d in selection.get("decisions", []) if isinstance(d, dict) and "test" in d}
    skip = [t for t in selection.get("skip", []) if isinstance(t, str)]
    outcomes: dict[str, tuple[str, float, str]] = {}
    if steps:
        for step, cases in steps.items():
            failed = [c for c in cases if c.outcome == "failed"]
            message = f"{len(failed)} failed, e.g. {failed[0].classname}::{failed[0].name}: {failed[0].message}" \
                if failed else ""
            outcomes[step] = ("failed" if failed else "passed", sum(c.seconds for c in cases), message)
    else:
        by_key = {(r.classname, r.name): r for r in results}
        for test in decisions:
            r = by_key.get(junit_key(test))
            if r is not None:
                outcomes[test] = (r.outcome, r.seconds, r.message)
        known = {junit_key(t) for t in decisions}
        for r in results:  # tests no recording knows: they always run
            if (r.classname, r.name) not in known:
                outcomes[f"{r.classname}::{r.name}"] = (r.outcome, r.seconds, r.message)
    skipped = [t for t in skip if t in outcomes]
    misses = [Miss(t, outcomes[t][2], str(decisions.get(t, {}).get("why", ""))) for t in skipped
              if outcomes[t][0] == "failed"]
    return Evaluation(
        selected=len(decisions), skipped=skipped, ran=len(outcomes),
        seconds_total=sum(s for _, s, _ in outcomes.values()),
        seconds_skipped=sum(outcomes[t][1] for t in skipped), misses=misses,
        unmatched=[t for t in skip if t not in outcomes], fallback=selection.get("fallback"),
        changed=[c for c in selection.get("changed", []) if isinstance(c, str)],
    )
