"""Which tests a recording's kernels and Python code go to.

The merge cases write a recording's part files by hand, in the format the
recorder writes them (``recorder/parts.py``): a process per file, with the
scope it was started in, the window of tests it lived through (the tests
log), and what it ran in each scope. Each one is a decision the merge takes
for a process that real runs make only with effort: a worker that could not
measure Python, a process started outside any test, processes of two recorder
versions, a process that lost some of its own launches. The last cases run the
real plugin on small projects: one whose own pytest plugin (``-p``) imports
project code before the measurement starts, one whose ``jit-decorators`` names
a decorator that is not there, one whose test takes tracing away.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_native_children import _cupti_package

from kernel_symbol_map.errors import RecordingError
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
          lived: tuple[int, int] | None = None, lost: str = "") -> None:
    """A process's part file; ``lived``: the lines of the tests log it lived between; ``lost``: why some of its
    own launches went unrecorded (it is incomplete)."""
    data: dict[str, Any] = {"pid": 1, "token": token, "scope": scope, "complete": not lost, "reason": lost,
                            "own_launches": True, "kernels": kernels or {}, "python": python, "pyblocks": scheme}
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


def test_a_process_that_lost_launches_leaves_every_scope_it_recorded_kernels_in_incomplete(tmp_path: Path) -> None:
    """A process that scopes its own launches (one that runs tests itself, as a pytest run in a child does) and
    lost some of them may have lost a launch of any scope it recorded: a module fixture's reaches the module's
    later tests, though the process ended within the first."""
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"]})
    _part(tmp_path, "runner", FIRST, kernels={"scope::tests/test_m.py": ["_Z6modulev"]}, lived=(0, 2),
          lost="CUPTI dropped 3 activity records")
    records = _records(tmp_path)
    for test in (FIRST, SECOND):
        assert not records[test]["complete"], records[test]
        assert records[test]["reason"] == "process runner: CUPTI dropped 3 activity records", records[test]
        assert "_Z6modulev" in records[test]["kernels"], records[test]
    assert records[THIRD]["complete"], records[THIRD]


def test_launches_another_cupti_client_took_make_that_scopes_tests_incomplete(tmp_path: Path) -> None:
    """A profiler held CUPTI's records while the first test ran: its launches there are unknown."""
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"], SECOND: ["_Z6secondv"]})
    data = json.loads((tmp_path / "root.json").read_text())
    (tmp_path / "root.json").write_text(json.dumps({**data, "lost": {FIRST: ["another CUPTI client took them"]}}))
    records = _records(tmp_path)
    assert not records[FIRST]["complete"] and "another CUPTI client took them" in records[FIRST]["reason"], records
    assert records[SECOND]["complete"] and records[THIRD]["complete"], records


def test_a_ci_steps_record_is_incomplete_when_a_process_lost_launches_in_its_window(tmp_path: Path) -> None:
    """A step's record is every process's: what a test's window would have kept to itself is the step's."""
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"]})
    _part(tmp_path, "runner", FIRST, kernels={FIRST: ["_Z6runnerv"]}, lived=(0, 2),
          lost="CUPTI dropped 3 activity records")
    record = parts.step_record(tmp_path, "step", "c")
    assert not record["complete"] and record["reason"] == "process runner: CUPTI dropped 3 activity records", record


def test_a_part_that_gives_no_reason_for_unmeasured_python_says_so(tmp_path: Path) -> None:
    _part(tmp_path, "worker", "scope::", python=None)
    data = json.loads((tmp_path / "worker.json").read_text())
    del data["python_problem"]
    (tmp_path / "worker.json").write_text(json.dumps(data))
    record = _records(tmp_path)[FIRST]
    assert record["python"] is None and record["python_problem"] == "process worker: Python code was not measured"


@pytest.mark.parametrize(("exe", "named"), [(["/usr/bin/python3", "x"], "process runner (/usr/bin/python3): "),
                                             ("/usr/bin/python3", "process runner: "), ([], "process runner: ")])
def test_a_process_is_named_by_the_program_its_start_file_names(tmp_path: Path, exe: object, named: str) -> None:
    """Only a list of executables names one; any other start file still counts, unnamed."""
    _part(tmp_path, "runner", "scope::", lost="CUPTI dropped 3 activity records")
    (tmp_path / "runner.started").write_text(json.dumps({"pid": 1, "start": "1", "spawn": "", "exe": exe}))
    record = parts.step_record(tmp_path, "step", "c")
    assert record["reason"] == named + "CUPTI dropped 3 activity records", record


@pytest.mark.parametrize("started", ["[]", '"text"', "{"])
def test_a_start_file_that_is_not_an_object_is_a_clear_error(tmp_path: Path, started: str) -> None:
    _part(tmp_path, "root", "scope::")
    (tmp_path / "root.started").write_text(started)
    with pytest.raises(RecordingError, match=r"root\.started: not a recorder file"):
        parts.test_records(tmp_path, TESTS, "c")


def test_a_start_file_that_carries_no_spawn_id_claims_nothing(tmp_path: Path) -> None:
    """The command's own process (or a recorder that wrote none) carries no id: it is not a claim, and no error."""
    _part(tmp_path, "root", "scope::")
    (tmp_path / "root.started").write_text(json.dumps({"pid": 1, "ppid": 0, "start": "1", "exe": ["/bin/prog"]}))
    assert parts.read_unseen(tmp_path) == []
    assert all(r["complete"] for r in _records(tmp_path).values())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("merge", ["step", "tests"])
def test_a_process_still_writing_its_part_is_waited_for_and_one_that_never_does_is_not_forever(
        tmp_path: Path, merge: str) -> None:
    """A process that outlives the command (multiprocessing's resource tracker) writes its part late: the
    merge waits for it while it lives. One that lives on without writing is waited for only so long."""
    _part(tmp_path, "root", "scope::")
    (tmp_path / "late.started").write_text(json.dumps({"pid": os.getpid(), "start": "1", "exe": ["/bin/prog"]}))
    (tmp_path / "gone.started").write_text(json.dumps({"pid": _dead_pid(), "start": "1", "exe": ["/bin/prog"]}))
    writer = threading.Timer(0.3, _write_late, (tmp_path,))
    writer.start()
    try:
        # one straggler died: the other is waited for still
        record = parts.step_record(tmp_path, "step", "c") if merge == "step" else _records(tmp_path)[FIRST]
    finally:
        writer.join()
    assert record["kernels"] == ["_Z4latev"], record
    assert record["reason"] == "process gone died before writing its part file", record
    (tmp_path / "late.json").unlink()
    parts.wait_for_stragglers(tmp_path, seconds=0.2)  # this process lives on: it returns all the same


def _write_late(folder: Path) -> None:
    """The late process's part, written whole at once, as the recorder writes one."""
    staging = folder / "staging"
    staging.mkdir()
    _part(staging, "late", "scope::", kernels={FIRST: ["_Z4latev"]})
    os.replace(staging / "late.json", folder / "late.json")


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_process_that_died_unwritten_is_the_whole_reason(tmp_path: Path) -> None:
    """It was recorded (it started), so the record does not also say that no process was."""
    (tmp_path / "gone.started").write_text(json.dumps({"pid": _dead_pid(), "start": "1", "exe": ["/bin/prog"]}))
    record = parts.step_record(tmp_path, "step", "c")
    assert not record["complete"] and record["reason"] == "process gone died before writing its part file", record


def test_a_process_that_lost_launches_and_has_no_window_leaves_every_test_incomplete(tmp_path: Path) -> None:
    """Without a window nothing says which tests it served: a worker started in the first test may serve any."""
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"]})
    _part(tmp_path, "worker", FIRST, kernels={FIRST: ["_Z6workerv"]}, lost="CUPTI dropped 3 activity records")
    for test, record in _records(tmp_path).items():
        assert record["reason"] == "process worker: CUPTI dropped 3 activity records", (test, record)  # once


def test_a_scope_that_is_one_test_s_own_goes_to_that_test_alone(tmp_path: Path) -> None:
    _part(tmp_path, "root", "scope::", kernels={f"scope::{FIRST}": ["_Z5firstv"]})
    records = _records(tmp_path)
    assert [t for t in TESTS if records[t]["kernels"]] == [FIRST], records


def test_a_window_over_tests_this_merge_does_not_record_is_read_for_those_it_does(tmp_path: Path) -> None:
    """The tests log of a run may name tests that have no record here (another shard's, a test run twice):
    a process that lived through them reaches those of this merge, and only those."""
    other = "tests/test_m.py::test_other"
    log = tmp_path / "tests.log"
    log.write_text("".join(f"+{json.dumps(t)}\n-{json.dumps(t)}\n" for t in (FIRST, other, SECOND)))
    (tmp_path / "worker.json").write_text(json.dumps(
        {"pid": 1, "token": "worker", "scope": FIRST, "complete": False, "reason": "CUPTI dropped 1 record",
         "own_launches": True, "kernels": {FIRST: ["_Z6workerv"]}, "libraries": {FIRST: ["libw.so"]},
         "lost": {FIRST: ["another CUPTI client took them"]}, "window": {"log": str(log), "start": 0, "end": 6},
         "python": {FIRST: {"pkg/w.py": ["w0"]}}, "pyblocks": pyblocks.SCHEME}))
    records = _records(tmp_path)
    assert set(records) == set(TESTS)
    for test in (FIRST, SECOND):
        assert records[test]["kernels"] == ["_Z6workerv"] and records[test]["libraries"] == ["libw.so"], records
        assert "CUPTI dropped 1 record" in records[test]["reason"] and "took them" in records[test]["reason"]
        assert records[test]["python"] == {"pkg/w.py": ["w0"]}, records[test]
    assert records[THIRD]["complete"] and records[THIRD]["kernels"] == [], records


def test_a_step_record_holds_every_kernel_of_every_scope_of_every_process(tmp_path: Path) -> None:
    """A CI step's record is the step's: whichever test or fixture of a process launched a kernel."""
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"], SECOND: ["_Z6secondv", "_Z5firstv"]})
    _part(tmp_path, "child", "scope::", kernels={"scope::": ["_Z5childv"], THIRD: ["_Z5thirdv"]})
    record = parts.step_record(tmp_path, "step", "c")
    assert record["kernels"] == ["_Z5childv", "_Z5firstv", "_Z5thirdv", "_Z6secondv"], record
    assert record["complete"] and record["processes"] == 2, record


def test_a_step_record_names_libraries_only_where_every_process_could_say(tmp_path: Path) -> None:
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"]})
    assert "libraries" not in parts.step_record(tmp_path, "step", "c")
    data = json.loads((tmp_path / "root.json").read_text())
    (tmp_path / "root.json").write_text(json.dumps({**data, "libraries": {FIRST: ["libops.so"]}}))
    assert parts.step_record(tmp_path, "step", "c")["libraries"] == ["libops.so"]


def test_per_test_records_name_libraries_only_where_every_process_could_say(tmp_path: Path) -> None:
    _part(tmp_path, "root", "scope::", kernels={FIRST: ["_Z5firstv"]})
    _part(tmp_path, "child", FIRST)
    assert all("libraries" not in r for r in _records(tmp_path).values())
    data = json.loads((tmp_path / "root.json").read_text())
    (tmp_path / "root.json").write_text(json.dumps({**data, "libraries": {FIRST: ["libops.so"]}}))
    assert all("libraries" not in r for r in _records(tmp_path).values())  # the child could not say
    data = json.loads((tmp_path / "child.json").read_text())
    (tmp_path / "child.json").write_text(json.dumps({**data, "libraries": {}}))
    assert _records(tmp_path)[FIRST]["libraries"] == ["libops.so"]


def test_a_process_that_never_said_whether_it_measured_python_leaves_its_tests_without_python_evidence(
        tmp_path: Path) -> None:
    _part(tmp_path, "root", "scope::", python={"scope::": {"pkg/a.py": ["a0"]}})
    _part(tmp_path, "child", FIRST)
    data = json.loads((tmp_path / "child.json").read_text())
    (tmp_path / "child.json").write_text(json.dumps({k: v for k, v in data.items() if not k.startswith("py")}))
    (tmp_path / "root.json").rename(tmp_path / "root.json.away")
    assert all("python" not in r for r in _records(tmp_path).values())  # no process said: no Python entry at all
    (tmp_path / "root.json.away").rename(tmp_path / "root.json")
    records = _records(tmp_path)
    assert records[FIRST]["python"] is None, records[FIRST]
    assert records[FIRST]["python_problem"] == "process child: a process did not measure Python code"
    assert records[SECOND]["python"] == {"pkg/a.py": ["a0"]}, records[SECOND]


def test_copies_and_what_ran_through_a_jit_go_where_the_python_code_goes(tmp_path: Path) -> None:
    """An installed copy a test ran, the kernels a JIT built from Python functions, and files compiled at run
    time go to the tests of the scope they were seen in, and to the tests a worker lived through."""
    _part(tmp_path, "root", "scope::", python={"scope::": {"pkg/a.py": ["a0"]}})
    _part(tmp_path, "worker", FIRST, python={FIRST: {"pkg/b.py": ["b0"]}}, lived=(0, 3))
    data = json.loads((tmp_path / "worker.json").read_text())
    (tmp_path / "worker.json").write_text(json.dumps(
        {**data, "python_copies": ["site-packages/pkg/b.py"], "jit_kernels": {FIRST: {"triton_k": ["pkg/b.py:k"]}},
         "jit_sources": {FIRST: ["kernels/k.cu"]}}))
    records = _records(tmp_path)
    for test in (FIRST, SECOND):
        assert records[test]["python_copies"] == ["site-packages/pkg/b.py"], records[test]
        assert records[test]["jit_kernels"] == {"triton_k": ["pkg/b.py:k"]}, records[test]
        assert records[test]["jit_sources"] == ["kernels/k.cu"], records[test]
    assert not {"python_copies", "jit_kernels", "jit_sources"} & set(records[THIRD]), records[THIRD]


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


def _recorded(tmp_path: Path, files: dict[str, str], *pytest_args: str) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The project ``files`` in a new git checkout, its tests run under the recorder (CUPTI's stand-in, real
    coverage.py): the checkout, and its records by test."""
    repo = tmp_path / "repo"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    env["PYTHONPATH"] = os.pathsep.join([str(_cupti_package(tmp_path)), str(repo)])
    out = tmp_path / "rec"
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args,
                           "--kernel-record", str(out), "--kernel-record-commit", "c" * 40],
                          cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return repo, {r["test"]: r for r in map(json.loads, (out / "pytest.jsonl").read_text().splitlines())}


def test_modules_imported_before_the_measurement_started_count_whole_for_every_test(tmp_path: Path) -> None:
    """Their import ran unseen, and any test may read what it left behind: every block of theirs, for every
    test, the test that never called them too."""
    repo, records = _recorded(tmp_path, PROJECT, "-p", "pkg.testing")
    assert set(records) == {"tests/test_uses.py::test_uses", "tests/test_other.py::test_other"}
    for rel in ("pkg/testing.py", "pkg/helpers.py"):
        every = set(pyblocks.split((repo / rel).read_bytes()).digests)
        for test, record in records.items():
            assert record["python"] is not None, record
            assert every <= set(record["python"].get(rel, ())), (rel, test, record["python"])


def test_modules_a_conftest_imports_are_measured_and_count_only_where_they_ran(tmp_path: Path) -> None:
    """The measurement starts before the initial conftests load: what they import is seen, its functions
    count for the tests that called them, and its import-time code for every test."""
    files = {**PROJECT, "tests/conftest.py": "from pkg import helpers  # noqa: F401\n"}
    repo, records = _recorded(tmp_path, files)
    blocks = pyblocks.split((repo / "pkg/helpers.py").read_bytes())
    digest = dict(zip(blocks.names, blocks.digests, strict=True))
    uses, other = (records[f"tests/test_{name}.py::test_{name}"]["python"] for name in ("uses", "other"))
    assert set(uses["pkg/helpers.py"]) == {digest["<module>"], digest["double"]}, uses
    assert other["pkg/helpers.py"] == [digest["<module>"]], other
    # a test module's own import-time code is its tests', and node ids are spelled from the checkout's top
    assert "tests/test_uses.py" in uses and "tests/test_uses.py" not in other, (uses, other)
    assert all(r["rootdir"] == "." for r in records.values()), records


def test_a_python_child_measures_its_project_code_for_the_test_that_started_it(tmp_path: Path) -> None:
    files = {**PROJECT, "tests/test_child.py": '''import subprocess
import sys


def test_child():
    subprocess.run([sys.executable, "-c", "from pkg import helpers; helpers.label('x')"], check=True)
'''}
    repo, records = _recorded(tmp_path, files)
    blocks = pyblocks.split((repo / "pkg/helpers.py").read_bytes())
    digest = dict(zip(blocks.names, blocks.digests, strict=True))
    record = records["tests/test_child.py::test_child"]
    assert record["python"] is not None and digest["label"] in record["python"]["pkg/helpers.py"], record


# -- what the measurement could not see ----------------------------------------------------------------------

# A project's own plugin that starts a coverage measurement that needs no trace function (as coverage.py's
# sys.monitoring core on Python 3.12 and later): the recorder's measurement would share the process with it.
OTHER_COVERAGE = {
    "covstart.py": '''import sys

import coverage

measurement = coverage.Coverage(data_file=None)
measurement.start()
sys.settrace(None)  # what a measurement without a tracer leaves
''',
    "tests/test_other.py": "def test_other():\n    pass\n",
}


def test_another_coverage_measurement_leaves_every_test_without_python_evidence(tmp_path: Path) -> None:
    _, records = _recorded(tmp_path, OTHER_COVERAGE, "-p", "covstart")
    for test, record in records.items():
        assert record["python"] is None and "another coverage measurement" in record["python_problem"], record


UNWATCHED_JIT = {
    # jit-decorators names a decorator its module does not have (a typo, or one renamed since): code it
    # compiles would run unseen.
    "pyproject.toml": '[tool.kernel-symbol-map]\njit-decorators = ["pkg.jitlib:compile"]\n',
    "pkg/__init__.py": "",
    "pkg/jitlib.py": '''def jit(fn):
    return fn
''',
    "tests/test_jit.py": '''from pkg import jitlib


def test_jit():
    assert jitlib.jit(len)("ab") == 2
''',
    "tests/test_other.py": '''def test_other():
    pass
''',
}


def test_a_jit_decorator_that_cannot_be_watched_leaves_every_test_without_python_evidence(tmp_path: Path) -> None:
    """What the named decorator compiles never runs in the interpreter, and it cannot be watched: no test may be
    cleared by Python coverage, and each record says why."""
    _, records = _recorded(tmp_path, UNWATCHED_JIT)
    assert set(records) == {"tests/test_jit.py::test_jit", "tests/test_other.py::test_other"}
    for test, record in records.items():
        assert record["python"] is None, (test, record)
        assert "jit-decorators names pkg.jitlib:compile, which is not there" in record["python_problem"], record


TRACER_TAKEN = {
    "pkg/__init__.py": "",
    "tests/test_taken.py": '''import sys
import threading


def _elsewhere(frame, event, arg):
    return None


def test_takes_tracing():
    # Installed from threading's own code, as threading.settrace_all_threads (Python 3.12) installs it: the
    # recorder's tracer is replaced, and everything after runs unseen.
    threading.Thread(target=sys.settrace, args=(_elsewhere,)).run()


def test_after():
    pass
''',
}


def test_a_tracer_that_replaced_the_recorders_is_found_at_the_next_scope(tmp_path: Path) -> None:
    """However the recorder's tracer was replaced, the plugin's next scope switch finds another in its place:
    the code that ran meanwhile was not measured, so no test has Python evidence."""
    _, records = _recorded(tmp_path, TRACER_TAKEN)
    assert set(records) == {"tests/test_taken.py::test_takes_tracing", "tests/test_taken.py::test_after"}
    for test, record in records.items():
        assert record["python"] is None, (test, record)
        assert "another tracer replaced this recorder's" in record["python_problem"], record
