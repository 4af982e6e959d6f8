"""Kernel recordings: which mangled kernels each test (or CI step) launched.

Three formats:

* the vLLM CI CUPTI-injection recorder's per-process text files: one mangled
  name a line, ``# dropped=N`` and a ``# end records=R unique=U dropped=D``
  footer; the test is ``# test=NAME`` when present, else the file's stem;
* JSON Lines, one record per test: ``{"test", "kernels", "complete", "commit"}``; a pytest run that
  failed to collect a file or did not get through its tests starts the file with a ``{"run": {...}}``
  line (its exit status and counts: :func:`doubts`);
* an Nsight Systems SQLite export: the kernel table's mangled names, joined to
  the NVTX ranges (named after tests) that enclose their launches.

A recording with dropped records, or without its end footer, is incomplete
and can never justify skipping a test; so is an Nsight kernel that cannot be
put inside exactly the tests whose ranges hold its launch. A JSON Lines
record is complete only when its writer says so: the pytest plugin says so
only for a test that ran whole and passed (not skipped, failed, errored,
xfailed or stopped early), ``record`` only for a step whose command
succeeded and whose every Python process was recorded. Every kernel name,
in every format, must be mangled: a demangled name is an error, since it
could never match the map. Formats that carry no commit take
``--recordings-commit``. :func:`read_each` keeps going past an unreadable
file and says which tests it would have covered.
"""

from __future__ import annotations

import json
import operator
import re
import sqlite3
import string
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import regex

from ..._unitnames import host_function
from ..._words import plural
from ...errors import RecordingError
from ...mapformat import plainjson, pyblocks, runline

_FOOTER = regex.compile(r"^# end records=(\d+) unique=(\d+) dropped=(\d+)$")
_DROPPED = regex.compile(r"^# dropped=(\d+)$")
_TEST = regex.compile(r"^# test=(\S.*)$")
_NAME = regex.compile(r"^[A-Za-z_$.][\w$.]*$")
MAX_NAME = 1 << 16  # characters in one kernel name (C++ templates make long ones; not this long)


@dataclass(frozen=True, slots=True)  # no __dict__: 50,000 of them are read at once
class Recording:
    test: str
    # The kernels it launched, each once: read, a sorted tuple (a fifth of a frozenset's memory; 50,000 tests
    # launching 40 kernels each are 110 MB of frozensets). Only ever compared by set operations that take any
    # collection, so a frozenset built by hand does as well.
    kernels: Collection[str]
    complete: bool
    commit: str
    where: str  # file, and line for JSONL
    why_incomplete: str = ""
    # The project's Python code it executed: file -> block digests (see mapformat.pyblocks); None when the
    # recording cannot say (not measured, or measured by another block scheme), with why.
    python: Mapping[str, frozenset[str]] | None = None
    python_why: str = "its recording has no Python coverage"
    python_copies: frozenset[str] = frozenset()  # project files it ran from elsewhere (an installed copy)
    rootdir: str | None = None  # pytest's rootdir, relative to the git top level: where its node id is spelled from
    # The file names of the images (executable, shared libraries) its processes had loaded; None: not recorded.
    libraries: frozenset[str] | None = None
    # Kernels a JIT named after a Python function it launched (Triton): kernel -> "file:qualname" of each.
    jit_kernels: Mapping[str, frozenset[str]] = field(default_factory=dict)
    jit_sources: frozenset[str] = frozenset()  # source files compiled at run time for it (cpp_extension.load)
    # The host functions it ran, per library file name, each by the name any build gives it
    # (_unitnames.host_function): every library compiled with host coverage that its processes loaded is
    # listed, one that ran nothing with none. None: not recorded (a build without host coverage, a process
    # whose coverage could not be read).
    host_functions: Mapping[str, frozenset[str]] | None = None


@dataclass(frozen=True)
class Unreadable:
    """A recording file that could not be read; ``tests`` is None when its tests cannot be known."""

    path: Path
    why: str
    tests: frozenset[str] | None


SUFFIXES = (".jsonl", ".txt", ".sqlite", ".db")
_NONE: frozenset[str] = frozenset()  # one for every record without the field (an empty frozenset is 216 bytes)


def expand(paths: Iterable[Path]) -> list[Path]:
    """``paths`` with each folder replaced by the recordings in it (``*.jsonl``, ``*.txt``, Nsight exports)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and not p.name.startswith(".")
                            and p.is_file())
        else:
            found.append(path)
    return found


def read(paths: Iterable[Path], commit: str = "") -> list[Recording]:
    """Every recording in ``paths``; one test's records from several files are merged."""
    names = _Names()
    with plainjson.bulk():
        return merge([r for path in paths for r in _read_one(path, commit, names)])


def read_each(paths: Iterable[Path], commit: str = "") -> tuple[list[Recording], list[Unreadable], list[str]]:
    """Like :func:`read`, but an unreadable file is set aside with the tests it names, not raised; and what
    a readable file says against the run that wrote it (:func:`doubts`), a line each."""
    found: list[Recording] = []
    bad: list[Unreadable] = []
    said: list[str] = []
    names = _Names()
    with plainjson.bulk():
        for path in paths:
            runs: list[dict[str, int]] = []
            try:
                read_here = _read_one(path, commit, names, runs)
            except RecordingError as e:
                bad.append(Unreadable(path, str(e), _tests_named(path)))
                continue
            found += read_here
            said += doubts(path, len(read_here), runs)
        return merge(found), bad, said


def doubts(path: Path, records: int, runs: list[dict[str, int]]) -> list[str]:
    """What a recording says against itself: no test's record at all, or a run (its ``"run"`` line, written
    by the pytest plugin) that did not collect or run every test. Its records are still evidence for their
    own tests; a test that was never collected has no record, and no recording can skip it."""
    found = []
    for run in runs:
        status, errors = run.get("exit_status", 0), run.get("collection_errors", 0)
        if errors:
            found.append(f"{path}: {plural(errors, 'file')} of its pytest run failed to collect: their tests have "
                         "no records")
        if status in runline.ENDED:
            found.append(f"{path}: its pytest run {runline.ENDED[status]} (exit status {status})")
    if not records:
        found.append(f"{path}: no test's record")
    return found


def _is_name(text: str) -> bool:
    """What _bad_name takes: one name _NAME matches, of MAX_NAME characters at most."""
    return len(text) <= MAX_NAME and _NAME.match(text) is not None


@dataclass
class _Names:
    """The kernel names of one read, one ``str`` each (50,000 tests repeat 50,000 kernels 2 million times;
    :mod:`.plainjson` interns a map's symbols too, so the two are one object), each checked once, when
    first met."""

    interned: plainjson.Interned = field(default_factory=lambda: plainjson.Interned(_is_name))


def _read_one(path: Path, commit: str, names: _Names | None = None,
              runs: list[dict[str, int]] | None = None) -> list[Recording]:
    """The records of ``path``; ``runs`` gets each ``"run"`` line a JSON Lines file holds."""
    if path.suffix == ".jsonl":
        return _jsonl(path, commit, names or _Names(), [] if runs is None else runs)
    if path.suffix in (".sqlite", ".db"):
        return _nsys(path, commit)
    return [_text(path, commit)]


def _tests_named(path: Path) -> frozenset[str] | None:
    """The tests an unreadable file was about, when that much can still be told."""
    if path.suffix in (".jsonl", ".sqlite", ".db"):
        return None  # any line or row could have named any test
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return frozenset({path.stem})
    named = [m.group(1) for line in lines if (m := _TEST.match(line.strip()))]
    return frozenset(named[-1:] or [path.stem])


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
        whys = [p.why_incomplete for p in parts if not p.complete]
        if len(commits) > 1:  # no single commit to compare with the map's: never evidence
            whys.append(f"recorded at several commits ({', '.join(sorted(c or '(unknown)' for c in commits))})")
        python, python_why = _merged_python(parts)
        merged.append(Recording(
            test, tuple(sorted(frozenset().union(*(p.kernels for p in parts)))), not whys,
            commits.pop() if len(commits) == 1 else "",
            ", ".join(p.where for p in parts), "; ".join(whys), python, python_why,
            frozenset().union(*(p.python_copies for p in parts)),
            parts[0].rootdir if len({p.rootdir for p in parts}) == 1 else None,
            None if any(p.libraries is None for p in parts) else frozenset().union(*(p.libraries or () for p in parts)),
            {k: frozenset().union(*(p.jit_kernels.get(k, ()) for p in parts))
             for k in sorted({k for p in parts for k in p.jit_kernels})},
            frozenset().union(*(p.jit_sources for p in parts)),
            _merged_host_functions(parts),
        ))
    return sorted(merged, key=operator.attrgetter("test"))


def _merged_python(parts: list[Recording]) -> tuple[Mapping[str, frozenset[str]] | None, str]:
    """One test's Python coverage over several records: the union, or None when any part cannot say."""
    missing = next((p for p in parts if p.python is None), None)
    if missing is not None:
        return None, missing.python_why
    files: dict[str, frozenset[str]] = {}
    for p in parts:
        assert p.python is not None
        for rel, digests in p.python.items():
            files[rel] = files.get(rel, frozenset()) | digests
    return files, ""


def _open(path: Path) -> list[str]:
    return _read(path).splitlines()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RecordingError(f"{path}: not UTF-8 text") from None
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None


# A text recording at C speed, whatever its size: its comment lines (few) are read one by one; the rest,
# one name a line, is checked by whole-text passes for anything _NAME refuses, then split.
_COMMENT_LINE = regex.compile(r"^[^\S\n]*+(#[^\n]*)", regex.MULTILINE)
_TWO_WORDS = re.compile(r"\S[^\S\n]+\S")
_LINE_SPACES = " \t\r\f\v\x1c\x1d\x1e\x1f"  # the ASCII whitespace str.split splits at, but for "\n"
_BAD_FIRST = re.compile(r"[ \t\r\f\v]*[^A-Za-z_$.\s]")  # a line that starts as no name does: the first,
_BAD_START = re.compile(r"\n[ \t\r\f\v]*[^A-Za-z_$.\s]")  # and any other (found from its "\n", to search fast)
_NAME_CHARACTERS = str.maketrans("", "", string.ascii_letters + string.digits + "_$." + string.whitespace)


def _text(path: Path, commit: str) -> Recording:
    text = _read(path)

    def where(at: int) -> str:  # a line number, counted only for an error
        return f"{path}:{text.count(chr(10), 0, at) + 1}"

    names = _names(_COMMENT_LINE.sub("", text), path)  # blanked comments keep their lines
    test, dropped, footer = path.stem, 0, None
    for comment in _COMMENT_LINE.finditer(text):
        line = comment.group(1).rstrip()
        if m := _FOOTER.match(line):
            footer = tuple(_count(m.group(i), where, comment.start()) for i in (1, 2, 3))
        elif m := _DROPPED.match(line):
            dropped += _count(m.group(1), where, comment.start())
        elif (m := _TEST.match(line)) and _clean(m.group(1)):
            test = m.group(1)
    why = ""
    if footer is None:
        why = "no end footer (the recorder did not finish)"
    elif footer[2] or dropped:
        why = f"{max(footer[2], dropped)} records dropped"
    elif footer[1] != len(names):
        why = f"footer says {footer[1]} unique kernels, file has {len(names)}"
    return Recording(test, tuple(sorted(names)), not why, commit, str(path), why)


def _names(lines: str, path: Path) -> frozenset[str]:
    """The names of a text recording without its comments; any other line is an error that names it."""
    at = _first_bad(lines)
    if at < 0:
        names = frozenset(lines.split())
        if max(map(len, names), default=0) <= MAX_NAME:
            return names
        at = lines.find(max(names, key=len))
    start = lines.rfind("\n", 0, at) + 1
    end = lines.find("\n", at)
    line = lines[start : end if end >= 0 else len(lines)].strip()
    raise RecordingError(f"{path}:{lines.count(chr(10), 0, start) + 1}: not a mangled kernel name: {line[:80]!r}")


def _first_bad(lines: str) -> int:
    """Where the first line of ``lines`` that is neither blank nor one name _NAME accepts goes wrong, or -1."""
    spaced = not lines.isascii() or any(c in lines for c in _LINE_SPACES)  # else no line holds two words
    found = [m.start() for m in (_TWO_WORDS.search(lines) if spaced else None, _BAD_FIRST.match(lines)) if m]
    if start := _BAD_START.search(lines):
        found.append(start.start() + 1)
    others = lines.translate(_NAME_CHARACTERS)  # what is left: letters beyond ASCII are \w, the rest are not
    if others and not others.isalnum():
        found.append(lines.find(next(c for c in others if not c.isalnum())))
    return min(found, default=-1)


def _bad_name(names: list[str]) -> str | None:
    """The first of ``names`` that _NAME refuses: checked as the lines of one text when they are plain
    ASCII (each line one name, no spaces), else one by one."""
    lines = "\n".join(names)
    plain = lines.isascii() and lines.count("\n") == len(names) - 1 and not any(c in lines for c in _LINE_SPACES)
    if plain and min(map(len, names), default=1) and max(map(len, names), default=0) <= MAX_NAME:
        if _first_bad(lines) < 0:
            return None
    return next((n for n in names if len(n) > MAX_NAME or not _NAME.match(n)), None)


def _clean(text: str) -> bool:
    """Printable as UTF-8, and of a sane length: a name people and CI logs will read."""
    if len(text) > MAX_NAME or "\0" in text:
        return False
    if text.isascii():  # O(1): no surrogate (a record's test, commit and reason, 50,000 times over)
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, from a JSON escape
        return False
    return True


def _count(digits: str, where: Callable[[int], str], at: int) -> int:
    """A count in a footer; more digits than any recorder writes is a corrupt file, not a big number."""
    if len(digits) > 18:
        raise RecordingError(f"{where(at)}: a count of {len(digits)} digits")
    return int(digits)


def _jsonl(path: Path, default_commit: str, names: _Names, runs: list[dict[str, int]]) -> list[Recording]:
    found = []
    commits: dict[str, str] = {}  # each commit checked once, one str for every record of it
    shared: dict[str, str] = {}  # one str per distinct Python file and block digest: records repeat them
    loaded: dict[tuple[str, ...], frozenset[str]] = {}  # tests of one process list the same images: each list once
    ran: dict[str, frozenset[str]] = {}  # a host function's name -> as any build names it, worked out once
    spelled = str(path)
    for number, raw in enumerate(_open(path), 1):
        if not raw or raw.isspace():
            continue
        where = f"{spelled}:{number}"
        try:
            record, kernels = _record(raw, names.interned)
        except RecursionError:
            raise RecordingError(f"{where}: JSON nested too deep to be a record") from None
        except ValueError as e:
            raise RecordingError(f"{where}: not JSON ({getattr(e, 'msg', e)})") from None
        if type(record) is dict and "run" in record and "test" not in record:
            runs.append(_run(record["run"], where))
            continue
        if not isinstance(record, dict) or not isinstance(record.get("test"), str) or not _clean(record["test"]):
            raise RecordingError(f"{where}: a record needs a \"test\" name (a string with no NUL or lone surrogate)")
        if kernels is None:  # as json.loads made them: checked here (split ones were, each once, when first met)
            listed = record.get("kernels")
            if not isinstance(listed, list) or not set(map(type, listed)) <= {str}:
                raise RecordingError(f"{where}: \"kernels\" must be a list of strings")
            bad = _bad_name(listed)
            if bad is not None:
                raise RecordingError(f"{where}: not a mangled kernel name: {bad[:80]!r}")
            kernels = _launched(names.interned.intern(listed))
        complete = record.get("complete")
        if not isinstance(complete, bool):
            raise RecordingError(f"{where}: \"complete\" must be true or false")
        commit = record.get("commit", default_commit)
        if not isinstance(commit, str) or (commit not in commits and not _clean(commit)):
            raise RecordingError(f"{where}: \"commit\" must be a string")
        commit = commits.setdefault(commit, commit)
        why = ""
        if not complete:
            reason = record.get("reason")
            why = reason if isinstance(reason, str) and _clean(reason) else "the recorder marked it incomplete"
        python, python_why, copies = _python(record, where, shared)
        rootdir = record.get("rootdir")
        if rootdir is not None and not (isinstance(rootdir, str) and _clean(rootdir) and rootdir):
            raise RecordingError(f"{where}: \"rootdir\" must be a folder name")
        found.append(Recording(record["test"], kernels, complete, commit, where, why, python, python_why, copies,
                               rootdir, _libraries(record, where, loaded), _jit_kernels(record, where),
                               _jit_sources(record, where), _host_functions(record, where, ran)))
    return found


def _run(run: Any, where: str) -> dict[str, int]:
    """A ``"run"`` line's summary of the pytest run that wrote the file: its counts, each a whole number."""
    counts = runline.COUNTS
    if not isinstance(run, dict) or not all(type(run.get(k, 0)) is int and run.get(k, 0) >= 0 for k in counts):
        raise RecordingError(f"{where}: \"run\" must hold {', '.join(counts)} as whole numbers")
    return {k: run[k] for k in counts if k in run}


def _host_functions(record: dict[str, Any], where: str, seen: dict[str, frozenset[str]]
                    ) -> dict[str, frozenset[str]] | None:
    """A record's ``"host_functions"``: library file name -> the host functions the test ran in it (mangled
    names); None when the record has none."""
    listed = record.get("host_functions")
    if listed is None:
        return None
    if not isinstance(listed, dict) or not all(
            isinstance(lib, str) and lib and "/" not in lib and _clean(lib) and isinstance(names, list)
            and all(isinstance(n, str) and n and _clean(n) for n in names) for lib, names in listed.items()):
        raise RecordingError(f"{where}: test {record['test'][:200]!r}: \"host_functions\" must map library file "
                             "names to lists of function names")
    found = {}
    for lib, names in listed.items():
        for n in names:
            if n not in seen:
                seen[n] = frozenset({host_function(n)})
        found[lib] = frozenset().union(*(seen[n] for n in names))
    return found


def _merged_host_functions(parts: list[Recording]) -> dict[str, frozenset[str]] | None:
    """The host functions of a test's parts, each library's united; None unless every part has them."""
    if any(p.host_functions is None for p in parts):
        return None
    found: dict[str, set[str]] = {}
    for p in parts:
        for lib, names in (p.host_functions or {}).items():
            found.setdefault(lib, set()).update(names)
    return {lib: frozenset(names) for lib, names in found.items()}


def _jit_sources(record: dict[str, Any], where: str) -> frozenset[str]:
    """A record's ``"jit_sources"``: the files compiled at run time for the test."""
    if "jit_sources" not in record:
        return _NONE
    listed = record["jit_sources"]
    if not isinstance(listed, list) or not all(isinstance(f, str) and f and _clean(f) for f in listed):
        raise RecordingError(f"{where}: \"jit_sources\" must be a list of file names")
    return frozenset(listed) if listed else _NONE


def _jit_kernels(record: dict[str, Any], where: str) -> dict[str, frozenset[str]]:
    """A record's ``"jit_kernels"``: kernel -> the ``file:qualname`` of each JIT'd function it is named after."""
    if "jit_kernels" not in record:
        return {}
    listed = record["jit_kernels"]
    if not isinstance(listed, dict) or not all(
            isinstance(k, str) and _is_name(k) and isinstance(f, list) and f and
            all(isinstance(x, str) and _clean(x) and ":" in x for x in f) for k, f in listed.items()):
        raise RecordingError(f"{where}: \"jit_kernels\" must map kernel names to lists of \"file:function\"")
    return {k: frozenset(f) for k, f in listed.items()}


def _libraries(record: dict[str, Any], where: str, seen: dict[tuple[str, ...], frozenset[str]]) -> frozenset[str] | None:
    """A record's ``"libraries"``: file names, each without a folder; None when the record has none."""
    listed = record.get("libraries")
    if listed is None:
        return None
    if not isinstance(listed, list) or not set(map(type, listed)) <= {str}:
        raise RecordingError(f"{where}: \"libraries\" must be a list of file names")
    key = tuple(listed)
    found = seen.get(key)
    if found is None:
        bad = next((n for n in listed if not n or "/" in n or not _clean(n)), None)
        if bad is not None:
            raise RecordingError(f"{where}: \"libraries\" must be a list of file names, not {bad[:80]!r}")
        found = seen[key] = frozenset(listed)
    return found


_KERNELS = '"kernels":['  # a record's one big array, split as a plain string array where it can be


def _record(raw: str, interned: plainjson.Interned) -> tuple[Any, tuple[str, ...] | None]:
    """``json.loads(raw)``, and its kernels as checked names where it could split them: where the line
    escapes nothing and every name of the array is one ``interned`` takes (_NAME; one ``str`` each, checked
    when first met); else None, and the record's kernels are as json.loads made them."""
    at = raw.find(_KERNELS)
    if at >= 0 and "\\" not in raw:  # no escape: no key spelled another way, no quote inside a name
        start = at + len(_KERNELS)  # after the '['
        if raw.startswith("]", start):
            names: list[str] | None = []
            end = start
        else:  # a plain name holds no quote: the first '"]' ends the array, when every name is plain
            end = raw.find('"]', start)
            names = interned.split(raw[start + 1 : end]) if end > start and raw.startswith('"', start) else None
            end += 1
        if names is not None:
            rest = raw[:start] + raw[end:]  # "kernels":[] in the array's place
            record = plainjson.whole(rest) if rest.count('"kernels"') == 1 else None
            if type(record) is dict and type(record.get("kernels")) is list and not record["kernels"]:
                return record, _launched(names)
    return json.loads(raw), None


def _launched(names: list[str]) -> tuple[str, ...]:
    """A record's kernels as :class:`Recording` keeps them: sorted, each once. ``names`` come from one
    :class:`plainjson.Interned`, one ``str`` per name, so a name listed twice is one object, next to itself
    once sorted. A recorder lists them sorted: the sort is then one pass."""
    names.sort()
    if any(map(operator.is_, names, islice(names, 1, None))):
        return tuple(dict.fromkeys(names))
    return tuple(names)


def _python(record: dict[str, Any], where: str,
            interned: dict[str, str]) -> tuple[Mapping[str, frozenset[str]] | None, str, frozenset[str]]:
    """A record's Python coverage: ``"python": {file: [digests]}``, its ``"pyblocks"`` scheme, ``"python_copies"``."""
    if "python" not in record:
        return None, "its recording has no Python coverage (recorded without it)", _NONE
    files = record["python"]
    if files is None:
        problem = record.get("python_problem")
        return None, (f"its Python code was not measured: {problem}" if isinstance(problem, str) and _clean(problem)
                      else "its Python code was not measured"), _NONE
    if not isinstance(files, dict) or not all(
            isinstance(f, str) and _clean(f) and isinstance(d, list) and set(map(type, d)) <= {str}
            for f, d in files.items()):
        raise RecordingError(f"{where}: \"python\" must map file names to lists of block digests")
    copies = record.get("python_copies", [])
    if not isinstance(copies, list) or not all(isinstance(c, str) and _clean(c) for c in copies):
        raise RecordingError(f"{where}: \"python_copies\" must be a list of file names")
    scheme = record.get("pyblocks")
    if scheme != pyblocks.SCHEME:
        return None, (f"its Python coverage is of block scheme {scheme!r}, this select reads "
                      f"{pyblocks.SCHEME}"), frozenset(copies) if copies else _NONE
    # One string per distinct digest and file name: a 1,000-test recording repeats the same ones.
    return ({interned.setdefault(f, f): frozenset(interned.setdefault(x, x) for x in d) for f, d in files.items()},
            "", frozenset(copies) if copies else _NONE)


_NSYS_JOIN = """
SELECT s.value, k.start, k.end, r.start, r.globalTid
FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
JOIN StringIds AS s ON s.id = k.mangledName
LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = k.correlationId
"""
_NSYS_RANGES = """
SELECT n.start, n.end, COALESCE(n.text, s.value), n.globalTid
FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON s.id = n.textId
WHERE n.end IS NOT NULL
"""


_OPT_INT = (int, type(None))


def _typed(rows: list[tuple[Any, ...]], types: tuple[Any, ...], path: Path) -> list[tuple[Any, ...]]:
    """SQLite columns hold any type; an export whose values are not what nsys writes is not evidence."""
    for row in rows:
        if not all(isinstance(v, t) and not isinstance(v, bool) for v, t in zip(row, types, strict=True)):
            raise RecordingError(f"{path}: unexpected values in the export ({row!r:.80})")
    return rows


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    test: str
    tid: int | None

    def holds(self, at: int) -> bool:
        return self.start <= at <= self.end


def _nsys(path: Path, commit: str) -> list[Recording]:
    """Kernels attributed to the NVTX ranges (tests) around their launches.

    First through the launch's correlation id: the range open on the
    launching thread at the launch call. Failing that (a kernel with no
    runtime row, or launched from a worker thread that holds no range), every
    test range on any thread that holds the launch (else the kernel's start).
    A kernel that still fits no test makes the tests whose ranges overlap its
    execution incomplete, or every test when none does: the export cannot
    show who launched it.
    """
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            launches = _typed(db.execute(_NSYS_JOIN).fetchall(), (str, int, _OPT_INT, _OPT_INT, _OPT_INT), path)
            rows = _typed(db.execute(_NSYS_RANGES).fetchall(), (int, int, (str, type(None)), _OPT_INT), path)
            ranges = [_Range(a, b, text, tid) for a, b, text, tid in rows if text]
        finally:
            db.close()
    except sqlite3.Error as e:
        raise RecordingError(f"{path}: not an Nsight Systems export ({e})") from None
    except UnicodeDecodeError as e:  # a corrupt string table (found by bench/fuzz.py)
        raise RecordingError(f"{path}: a string in the export is not UTF-8 ({e.reason})") from None
    kernels: dict[str, set[str]] = {r.test: set() for r in ranges}
    unplaced: dict[str, list[str]] = defaultdict(list)  # test -> kernels that may have been its own
    orphans: list[str] = []
    for name, k_start, k_end, launch_start, tid in launches:
        if not _NAME.match(name):
            raise RecordingError(f"{path}: not a mangled kernel name: {name[:80]!r}")
        at = launch_start if launch_start is not None else k_start
        owners = [r for r in ranges if r.tid == tid and r.holds(at)] if launch_start is not None else []
        owners = owners or [r for r in ranges if r.holds(at)]
        if owners:
            for r in owners:
                kernels[r.test].add(name)
            continue
        end = k_end if k_end is not None else k_start
        near = [r for r in ranges if r.start <= end and k_start <= r.end]
        if near:
            for r in near:
                unplaced[r.test].append(name)
        else:
            orphans.append(name)
    found = []
    for test, names in sorted(kernels.items()):
        why = ""
        if orphans:
            why = f"{len(orphans)} kernels fit no test's range (e.g. {orphans[0]})"
        elif unplaced.get(test):
            why = f"{len(unplaced[test])} kernels overlap its range but were launched outside every test (e.g. {unplaced[test][0]})"
        found.append(Recording(test, tuple(sorted(names)), not why, commit, str(path), why))
    return found
