"""Which tests a recording's kernels and Python code go to.

The merge cases write a recording's part files by hand, in the format the
recorder writes them (``recorder/parts.py``): a process per file, with the
scope it was started in, the window of tests it lived through (the tests
log), and what it ran in each scope. Each one is a decision the merge takes
for a process that real runs make only with effort: a worker that could not
measure Python, a process started outside any test, processes of two recorder
versions. The last case runs the real plugin on a project whose own pytest
plugin (``-p``) imports project code before the measurement starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from test_native_children import _cupti_package

from kernel_symbol_map.mapformat import pyblocks
from kernel_symbol_map.recorder import parts

FIRST, SECOND, THIRD = "tests/test_m.py::test_first", "tests/test_m.py::test_second", "tests/test_n.py::test_third"
TESTS = [FIRST, SECOND, THIRD]


def _log(folder: Path) -> Path:
    """The tests log of a run of TESTS, one after another: FIRST begins at line 0, SECOND at 2, THIRD at 4."""
    log = folder / "tests.log"
    log.write_text("".join(f"+{json.dumps(t)}\n-{json.dumps(t)}\n" for t in TESTS))
    return log


def _part(folder: Path, token: str, scope: str, *, kernels: dict[str, list[str]] | None = None,
          python: dict[str, dict[str, list[str]]] | None = None, problem: str = "", scheme: int = pyblocks.SCHEME,
          lived: tuple[int, int] | None = None) -> None:
    """A complete process's part file; ``lived``: the lines of the tests log it lived between."""
    data: dict[str, Any] = {"pid": 1, "token": token, "scope": scope, "complete": True, "reason": "",
                            "kernels": kernels or {}, "python": python, "pyblocks": scheme}
    if python is None:
        data["python_problem"] = problem
    if lived is not None:
        data["window"] = {"log": str(_log(folder)), "start": lived[0], "end": lived[1]}
    (folder / f"{token}.json").write_text(json.dumps(data))


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    return {r["test"]: r for r in parts.test_records(folder, TESTS, "c")}


def test_a_worker_that_could_not_measure_python_leaves_every_test_it_lived_through_without_python_evidence(
        tmp_path: Path) -> None:
    """Started in the first test and used by the second, its Python code ran unseen in both: neither may be
    cleared by Python coverage (a change to any .py file runs them)."""
    _part(tmp_path, "root", "scope::", python={"scope::": {"pkg/a.py": ["a0"]}})
    _part(tmp_path, "worker", FIRST, python=None, problem="coverage.py is not installed", lived=(0, 4))
    records = _records(tmp_path)
    for test in (FIRST, SECOND):
        assert records[test]["python"] is None, records[test]
        assert records[test]["python_problem"] == "process worker: coverage.py is not installed", records[test]
    assert records[THIRD]["python"] == {"pkg/a.py": ["a0"]}, records[THIRD]


def test_a_worker_s_python_code_goes_to_every_test_it_lived_through(tmp_path: Path) -> None:
    """The worker's code ran in its own scope (the test that started it) but served the next test too."""
    _part(tmp_path, "root", "scope::", python={"scope::": {"pkg/a.py": ["a0"]}})
    _part(tmp_path, "worker", FIRST, python={FIRST: {"pkg/worker.py": ["w1"]}}, lived=(0, 4))
    records = _records(tmp_path)
    for test in (FIRST, SECOND):
        assert records[test]["python"] == {"pkg/a.py": ["a0"], "pkg/worker.py": ["w1"]}, records[test]
    assert records[THIRD]["python"] == {"pkg/a.py": ["a0"]}, records[THIRD]


def test_what_ran_outside_any_test_counts_for_every_test_it_could_belong_to(tmp_path: Path) -> None:
    """A session fixture's work is every test's, a module fixture's its module's tests', and a process whose
    scope names no test (started with no scope at all) may have served any test."""
    _part(tmp_path, "root", "scope::", kernels={"scope::": ["_Z7sessionv"], "scope::tests/test_m.py": ["_Z6modulev"]},
          python={"scope::": {"pkg/a.py": ["a0"]}, "scope::tests/test_m.py": {"pkg/m.py": ["m1"]}})
    _part(tmp_path, "outside", "", kernels={"": ["_Z7outsidev"]}, python={"": {"pkg/o.py": ["o1"]}})
    records = _records(tmp_path)
    for test in (FIRST, SECOND):
        assert records[test]["kernels"] == ["_Z6modulev", "_Z7outsidev", "_Z7sessionv"], records[test]
        assert records[test]["python"] == {"pkg/a.py": ["a0"], "pkg/m.py": ["m1"], "pkg/o.py": ["o1"]}, records[test]
    assert records[THIRD]["kernels"] == ["_Z7outsidev", "_Z7sessionv"], records[THIRD]
    assert records[THIRD]["python"] == {"pkg/a.py": ["a0"], "pkg/o.py": ["o1"]}, records[THIRD]


def test_processes_of_two_block_schemes_give_no_test_python_evidence(tmp_path: Path) -> None:
    """A child run by another version of the recorder digests blocks another way: the union of the two would be
    compared with neither scheme's digests of the changed files, so no test is cleared by it."""
    _part(tmp_path, "root", "scope::", python={"scope::": {"pkg/a.py": ["a0"]}})
    _part(tmp_path, "child", FIRST, python={FIRST: {"pkg/b.py": ["b1"]}}, scheme=pyblocks.SCHEME + 1)
    for test, record in _records(tmp_path).items():
        assert record["python"] is None, (test, record)
        assert record["python_problem"] == "processes of several block schemes", (test, record)


# -- modules imported before the measurement started ---------------------------------------------------------

PROJECT = {
    # A project's own pytest plugin, named with -p (or in addopts): pytest imports it, and what it imports,
    # before any plugin's conftest hook, so before the recorder's measurement starts.
    "pkg/__init__.py": "",
    "pkg/testing.py": '''from pkg import helpers

MARK = helpers.label("plugin")
''',
    "pkg/helpers.py": '''PREFIX = "pkg:"


def label(name):
    return PREFIX + name


def double(x):
    return x * 2
''',
    "tests/test_uses.py": '''from pkg import helpers


def test_uses():
    assert helpers.double(2) == 4
''',
    "tests/test_other.py": '''def test_other():
    pass
''',
}


def test_modules_imported_before_the_measurement_started_count_whole_for_every_test(tmp_path: Path) -> None:
    """Their import ran unseen, and any test may read what it left behind: every block of theirs, for every
    test, the test that never called them too."""
    repo = tmp_path / "repo"
    for rel, text in PROJECT.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    env["PYTHONPATH"] = os.pathsep.join([str(_cupti_package(tmp_path)), str(repo)])
    out = tmp_path / "rec"
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pkg.testing",
                           "--kernel-record", str(out), "--kernel-record-commit", "c" * 40],
                          cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r["test"]: r for r in map(json.loads, (out / "pytest.jsonl").read_text().splitlines())}
    assert set(records) == {"tests/test_uses.py::test_uses", "tests/test_other.py::test_other"}
    for rel in ("pkg/testing.py", "pkg/helpers.py"):
        every = set(pyblocks.split((repo / rel).read_bytes()).digests)
        for test, record in records.items():
            assert record["python"] is not None, record
            assert every <= set(record["python"].get(rel, ())), (rel, test, record["python"])
