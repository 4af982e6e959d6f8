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

When a test the selection skips is absent from the results and some
failure in them matches no test of the selection, the two may be the same
test under another name (``pytest --junit-prefix``, another rootdir): then
the evaluation **cannot tell** whether there is a miss, and says so, never
"no miss". ``prefix`` undoes ``pytest --junit-prefix`` exactly.

A selection that is not the shape ``select --json`` writes (a test in
``skip`` that no decision skips among them) is a :class:`SelectionError`:
a report on it could only be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..._words import plural
from ...errors import KernelSymbolMapError
from .junit import Result, junit_key, unprefixed

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
    failed_unknown: list[str] = field(default_factory=list)  # failed in the results, named by no selection entry
    prefix_hint: str | None = None  # a --junit-prefix that would name an unmatched test as a failure does

    @property
    def skip_fraction(self) -> float:
        return len(self.skipped) / self.ran if self.ran else 0.0

    @property
    def cannot_tell(self) -> bool:
        """A skipped test is not in the results, and a failure names no test: it may be that test, failing."""
        return bool(self.unmatched and self.failed_unknown)

    def cannot_tell_why(self) -> str:
        return (f"{_count(len(self.unmatched), 'skipped test is', 'skipped tests are')} not in the results and "
                f"{_count(len(self.failed_unknown), 'failure matches', 'failures match')} no selected test "
                f"(e.g. {self.unmatched[0]} skipped, {self.failed_unknown[0]} failed)")

    def to_json(self) -> dict[str, Any]:
        return {
            "misses": [{"test": m.test, "message": m.message, "why": m.why} for m in self.misses],
            "selected": self.selected, "ran": self.ran, "would_skip": self.skipped,
            "skip_fraction": round(self.skip_fraction, 4),
            "seconds_total": round(self.seconds_total, 3), "seconds_saved": round(self.seconds_skipped, 3),
            "not_in_results": self.unmatched, "fallback": self.fallback, "changed": self.changed,
            "cannot_tell": self.cannot_tell, "failed_unknown": self.failed_unknown,
            "prefix_hint": self.prefix_hint,
        }

    def markdown(self) -> str:
        """A PR comment."""
        head = ("**kernel-symbol-map shadow run: {n} miss{es}**" if self.misses else
                "**kernel-symbol-map shadow run: cannot tell whether there is a miss**" if self.cannot_tell else
                "**kernel-symbol-map shadow run: no miss**").format(n=len(self.misses),
                                                                     es="" if len(self.misses) == 1 else "es")
        saved = f"{_seconds(self.seconds_skipped)} of {_seconds(self.seconds_total)}" if self.seconds_total else "0 s"
        lines = [head, "", f"The selection would have skipped {len(self.skipped)} of {plural(self.ran, 'test')} "
                 f"({self.skip_fraction:.0%}), saving {saved}."]
        if self.fallback:
            lines.append(f"It fell back (`{self.fallback}`): every test it knew would have run.")
        if self.cannot_tell:
            lines += ["", f"Cannot tell: {self.cannot_tell_why()}; each such failure may be a miss under another "
                      "name (`pytest --junit-prefix`, another rootdir)."
                      + (f" The run may have used `pytest --junit-prefix {self.prefix_hint}`: give `evaluate "
                         f"--junit-prefix {self.prefix_hint}`." if self.prefix_hint
                         else "")]
            lines += ["", "Skipped by the selection, not in the results: " + _some(self.unmatched),
                      "", "Failed, and matching no selected test: " + _some(self.failed_unknown)]
        if self.misses:
            lines += ["", "| test that failed but would have been skipped | failure | why it would have been skipped |",
                      "| --- | --- | --- |"]
            lines += [f"| `{m.test}` | {_cell(m.message)} | {_cell(m.why)} |" for m in self.misses]
            changed = ", ".join(f"`{c}`" for c in self.changed[:10]) + (" ..." if len(self.changed) > 10 else "")
            lines += ["", f"Changed files: {changed or '(none)'}"]
        return "\n".join(lines) + "\n"


def _seconds(seconds: float) -> str:
    """A duration to two significant digits or more: 3.5 s of 4.7 s is not "4 s of 5 s"."""
    return f"{seconds:.1f} s" if seconds < 9.95 else f"{seconds:.0f} s"


def _count(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _some(tests: list[str]) -> str:
    return ", ".join(f"`{_cell(t)}`" for t in tests[:10]) + (" ..." if len(tests) > 10 else "")


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
    skipped_by_decision = {d["test"] for d in decisions if d.get("run") is False}
    for test in selection["skip"]:  # select writes skip from the decisions: one it has no word on is not its
        if test not in skipped_by_decision:
            raise bad(f'"skip" lists {test!r}, which no decision skips')
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


def evaluate(selection: dict[str, Any], results: list[Result], steps: dict[str, list[Result]] | None = None,
             prefix: str | None = None) -> Evaluation:
    """Compare ``selection`` (``select --json``) with a full run's ``results`` (or per-step result files).

    ``prefix``: the run's ``pytest --junit-prefix``, cut off every classname that carries it.
    """
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
            by_key.setdefault((unprefixed(r.classname, prefix), r.name), []).append(r)
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
    unmatched = [t for t in skip if t not in outcomes]
    failed_unknown = [t for t, (outcome, _, _) in outcomes.items() if t not in decisions and outcome == "failed"]
    return Evaluation(
        selected=len(decisions), skipped=skipped, ran=len(outcomes),
        seconds_total=sum(s for _, s, _ in outcomes.values()),
        seconds_skipped=sum(outcomes[t][1] for t in skipped), misses=misses,
        unmatched=unmatched, fallback=selection.get("fallback"),
        changed=list(selection["changed"]), failed_unknown=failed_unknown,
        prefix_hint=None if steps else _prefix_hint(unmatched, failed_unknown),
    )


def _prefix_hint(unmatched: list[str], failed_unknown: list[str]) -> str | None:
    """The prefix that, cut off a failure's classname, names a skipped test the results lack; None if none does.

    Only a hint, for the message: ``evaluate`` never guesses a prefix (a
    project may have both ``gpu/tests/`` and ``tests/``).
    """
    failed = [t.partition("::") for t in failed_unknown]  # a classname holds no "::"; a name may
    for test in unmatched:
        classname, name = junit_key(test)
        for other, _, other_name in failed:
            if other_name != name:
                continue
            if classname and other.endswith("." + classname):
                return other[: -len(classname) - 1]
            if not classname and other:  # a module-level case: its classname is the prefix alone
                return other
    return None
