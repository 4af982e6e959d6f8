"""Which tests actually ran, from pytest's reports: a record is complete only for a test that did.

A test's recording may clear it only when it shows everything the test
launches: its setup, call and teardown all ran, and the call passed. A test
that was skipped (no sm_100 GPU on the recording runner), failed, errored,
xfailed, or never ran (``-x``, ``--maxfail``, Ctrl-C) launched less than it
would have; its record says so, with a reason, and ``select`` never skips it
on that evidence. With ``pytest-rerunfailures`` the attempts' kernels are
united (they are attributed to one node id) and the last attempt decides.

Pure bookkeeping: fed report fields, so it works the same in one process
and in an ``xdist`` controller, which receives every worker's reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASES = ("setup", "call", "teardown")
RERUN = "rerun"  # pytest-rerunfailures' outcome for an attempt that another attempt follows


@dataclass
class _Test:
    phases: dict[str, str] = field(default_factory=dict)  # phase -> "passed" | "failed" | "skipped"
    xfailed: bool = False
    skip_reason: str = ""
    attempts: int = 1


@dataclass
class Outcomes:
    """Node id -> what its phases reported; ``verdict`` says whether the test ran whole."""

    tests: dict[str, _Test] = field(default_factory=dict)

    def report(self, nodeid: str, when: str, outcome: str, wasxfail: bool = False, skip_reason: str = "") -> None:
        test = self.tests.setdefault(nodeid, _Test())
        if outcome == RERUN:  # another attempt follows: the last one decides
            self.tests[nodeid] = _Test(attempts=test.attempts + 1)
            return
        if when not in PHASES:
            return
        test.phases[when] = outcome
        test.xfailed = test.xfailed or (wasxfail and outcome in ("skipped", "failed"))
        if outcome == "skipped" and skip_reason:
            test.skip_reason = skip_reason

    def verdict(self, nodeid: str) -> str:
        """"" when the test ran whole and passed, else why its recording cannot clear it."""
        test = self.tests.get(nodeid)
        if test is None or not test.phases:
            return "the test never ran (the session stopped early: -x, --maxfail, or an interrupt)"
        phases = test.phases
        if test.xfailed:
            return "the test xfailed: it stopped where it failed"
        if phases.get("setup") == "skipped" or phases.get("call") == "skipped":
            return f"the test was skipped{': ' + test.skip_reason if test.skip_reason else ''}"
        if phases.get("setup") == "failed":
            return "the test's setup errored"
        if "call" not in phases:
            return "the test's call never ran"
        if phases["call"] == "failed":
            return "the test failed" + (f" (the last of {test.attempts} attempts)" if test.attempts > 1 else "")
        if phases.get("teardown") == "failed":
            return "the test's teardown errored"
        if "teardown" not in phases:
            return "the test's teardown never ran (interrupted)"
        return ""
