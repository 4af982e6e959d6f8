"""The device side's includes of many clang objects from one ``clang-scan-deps`` process.

``clang-scan-deps`` (Debian's ``clang-tools-<N>``) preprocesses every entry of
a compile database in one process, on threads, from sources minimised to their
preprocessor directives. Over 120 HIP objects it gave the same include sets as
one ``clang -M`` per object, at about a sixth of the CPU time (facts.md,
"Measured for the next round"). Each entry here is one device compile job: an
object's command for one offload architecture, ``--cuda-device-only -M``, with
a target named by ``-MT``, so each printed rule goes back to its object
whatever order the threads finish in.

Its version must be the compiler's: the tool models the driver of its own
version (header search, the resource folder), and scan-deps-19 on clang-15
commands gave clang-19's own headers. So a tool is taken only when its
``--version`` names the compiler's vendor and version: beside the compiler's
real path first (``/usr/bin/clang++-15`` is ``/usr/lib/llvm-15/bin/clang``),
then ``clang-scan-deps-<major>`` on ``PATH``. The tool derives the resource
folder from the command's compiler path as spelled (``/usr/bin/../lib/clang``),
where the compiler derives it from its real path: each entry names the
compiler's own (``-print-resource-dir``), so both spell its headers alike.

Nothing here decides what an unanswered object gets: an entry the tool failed,
an empty rule, a rule no entry asked for, a killed or missing tool are all
reported, and the caller preprocesses those objects one by one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .makedeps import parse_depfile

TOOL = "clang-scan-deps"
TIMEOUT = 1800  # one process for every object: the per-object runs' 600 s each would be too tight
# "Debian clang version 15.0.6" (the compiler) and "Debian LLVM version 15.0.6" (its tools): vendor, version.
_VERSION = re.compile(r"^\s*(.*?)\s*\b(?:clang|LLVM) version (\d+(?:\.\d+)+[\w.+~-]*)", re.MULTILINE)


@dataclass(frozen=True)
class Entry:
    """One device compile job of an object: its folder, its argument vector, and the rule target it prints."""

    directory: Path
    arguments: tuple[str, ...]
    target: str
    file: str  # the source, as the database's ``file``: the tool names it in its messages only


@dataclass(frozen=True)
class Scan:
    """What one run answered: target -> its includes as printed (never empty), and why the rest are not there."""

    rules: dict[str, tuple[str, ...]]
    problem: str | None = None  # None when every entry has its rule


@dataclass(frozen=True)
class Match:
    """A compiler's ``clang-scan-deps`` and what its entries need: the compiler's path as the build spelled it
    (the driver finds the GCC and ROCm installations from that folder) and its resource folder."""

    tool: str
    compiler: str
    resource_dir: str


def _version(exe: str) -> tuple[str, str] | None:
    """(vendor, version) from ``exe --version``, or None when it does not run or names none."""
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60, check=False,
                              errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search(proc.stdout) if proc.returncode == 0 else None
    return (found.group(1), found.group(2)) if found else None


def _spelled(compiler: str, directory: Path) -> str | None:
    """The compiler as the build ran it, absolute: looked up on ``PATH`` when bare, as the shell did."""
    if os.sep not in compiler:
        return shutil.which(compiler)
    path = os.path.normpath(os.path.join(directory, compiler))
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


@dataclass
class Finder:
    """A matching ``clang-scan-deps`` per compiler; every ``--version`` is asked once per run."""

    _versions: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    _matches: dict[str, Match | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # compiler -> why it has no match, for one log line

    def version(self, exe: str) -> tuple[str, str] | None:
        if exe not in self._versions:
            self._versions[exe] = _version(exe)
        return self._versions[exe]

    def match(self, compiler: str, directory: Path) -> Match | None:
        """The tool for ``compiler`` (argv[0] of a compile run in ``directory``), or None."""
        spelled = _spelled(compiler, directory)
        if spelled is None:
            return None
        if spelled not in self._matches:
            self._matches[spelled] = self._find(spelled)
        return self._matches[spelled]

    def _find(self, compiler: str) -> Match | None:
        real = os.path.realpath(compiler)
        wanted = self.version(real)
        if wanted is None:
            self.missing[compiler] = "its --version names no clang version"
            return None
        major = wanted[1].split(".")[0]
        beside = [os.path.join(os.path.dirname(real), name) for name in (TOOL, f"{TOOL}-{major}")]
        candidates = [c for c in beside if os.path.isfile(c)] + [shutil.which(f"{TOOL}-{major}") or ""]
        tool = next((c for c in candidates if c and self.version(c) == wanted), None)
        if tool is None:
            self.missing[compiler] = f"no {TOOL} of {' '.join(wanted).strip()} beside it or on PATH " \
                                     f"({TOOL}-{major}, Debian package clang-tools-{major})"
            return None
        resource_dir = _resource_dir(compiler)
        if resource_dir is None:
            self.missing[compiler] = "it prints no -print-resource-dir"
            return None
        return Match(tool, compiler, resource_dir)


def _resource_dir(compiler: str) -> str | None:
    try:
        proc = subprocess.run([compiler, "-print-resource-dir"], capture_output=True, text=True, timeout=60,
                              check=False, errors="surrogateescape")
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[0] if proc.returncode == 0 and len(lines) == 1 and os.path.isabs(lines[0]) else None


def scan(tool: str, entries: Sequence[Entry], jobs: int) -> Scan:
    """Run ``tool`` once over ``entries`` (``-j jobs``): the rules it printed for them, and what went wrong.

    Kept: a non-empty rule whose target is an entry's. A failed entry prints no
    rule (the exit is then 1); the others' rules are whole, as each is printed
    when its scan ends. A rule for a target no entry has means the output is
    not what we read it as, and a killed run may have printed half a rule:
    nothing is kept then.
    """
    wanted = {e.target for e in entries}
    database = [{"directory": str(e.directory), "file": e.file, "arguments": list(e.arguments)} for e in entries]
    try:  # the database in a folder of its own, gone after the run: nothing is written in the build tree
        with tempfile.TemporaryDirectory(prefix="ksm-scan-deps-") as scratch:
            path = Path(scratch) / "compile_commands.json"
            path.write_text(json.dumps(database))
            argv = [tool, "-compilation-database", str(path), "-format=make", "-j", str(max(1, jobs))]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False,
                                  errors="surrogateescape")
    except (OSError, subprocess.SubprocessError) as e:
        return Scan({}, f"{tool}: {e}")
    if proc.returncode < 0:
        return Scan({}, f"{tool} was killed (signal {-proc.returncode})")
    rules = rules_of(proc.stdout)
    stray = sorted(set(rules) - wanted)
    if stray:
        return Scan({}, f"{tool} printed a rule for {stray[0]!r}, which no entry asked for")
    kept = {t: tuple(deps) for t, deps in rules.items() if deps}
    if proc.returncode != 0 or len(kept) < len(wanted):
        last = (proc.stderr.strip().splitlines() or ["no rule printed"])[-1]
        return Scan(kept, f"{len(wanted) - len(kept)} of {len(wanted)} entries unanswered "
                          f"(exit {proc.returncode}): {last}")
    return Scan(kept)



def rules_of(text: str) -> dict[str, list[str]]:
    """:func:`.makedeps.parse_depfile`'s answer, with a fast path for text that escapes nothing.

    One run prints every object's rule, 5 MB for 120 HIP objects: the general
    parser reads it a character at a time (a fifth of the whole ``build``).
    With no backslash but line continuations and no ``$``, make's words are
    runs of characters between spaces and tabs, which ``str.split`` finds.
    """
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    if "\\" in joined or "$" in joined:
        return parse_depfile(text)
    rules: dict[str, list[str]] = {}
    for line in joined.splitlines():
        words = [w for w in line.replace("\t", " ").split(" ") if w]
        colon = next((i for i, w in enumerate(words) if w.endswith(":")), None)
        if colon is None:
            continue
        targets = words[: colon + 1]
        targets[-1] = targets[-1][:-1]
        for target in filter(None, targets):
            rules.setdefault(target, []).extend(words[colon + 1 :])
    return rules
