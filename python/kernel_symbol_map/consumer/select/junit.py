"""Test results in JUnit XML, as pytest (``--junitxml``), Buildkite's test analytics and most runners write them.

Each ``<testcase classname=... name=... time=...>`` becomes a :class:`Result`
with its outcome (``failed`` for ``<failure>`` or ``<error>``, ``skipped``,
else ``passed``), seconds, and the first line of its message. Parsed with
``defusedxml``: a results file comes from a CI run, and entity tricks must
not cost memory. A file that is not JUnit XML is a :class:`ResultsError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from ...errors import KernelSymbolMapError


class ResultsError(KernelSymbolMapError):
    """A test-results file cannot be read as JUnit XML."""


@dataclass(frozen=True)
class Result:
    classname: str
    name: str
    outcome: str  # "passed", "failed", "skipped"
    seconds: float
    message: str = ""


def read(path: Path) -> list[Result]:
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError, DefusedXmlException, ValueError) as e:
        raise ResultsError(f"{path}: not JUnit XML ({e})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ResultsError(f"{path}: not JUnit XML (the root is <{root.tag}>, not <testsuites> or <testsuite>)")
    found = []
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = (child.get("message") or (child.text or "")).strip().splitlines()[:1]
                message = message[0] if message else child.tag
                break
            if child.tag == "skipped":
                outcome = "skipped"
        try:
            seconds = float(case.get("time") or 0.0)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds < 0:
            raise ResultsError(f"{path}: testcase {case.get('name')!r} has time={case.get('time')!r}")
        found.append(Result(case.get("classname") or "", case.get("name") or "", outcome, seconds, message))
    return found


def junit_key(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit report gives a node id: ``a/b.py::C::t[1]`` is ``("a.b.C", "t[1]")``.

    As pytest's ``junitxml`` cuts it (``mangle_test_address``): the
    parameters, from the first ``[``, belong to the name whatever they hold
    (``t[a::b]`` is one test), and only the rest splits at ``::``.
    """
    address, bracket, params = nodeid.partition("[")
    names = address.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    return ".".join(names[:-1]), names[-1] + bracket + params


def unprefixed(classname: str, prefix: str | None) -> str:
    """``classname`` as pytest wrote it before ``--junit-prefix prefix``, which puts ``prefix.`` before every one.

    A module-level case (a collection error, classname ``""``) becomes
    ``prefix`` itself. A classname without the prefix is left as it is.
    """
    if not prefix:
        return classname
    if classname == prefix:
        return ""
    return classname.removeprefix(prefix + ".")
