"""The pytest plugin's records are honest (issue 19): complete only for a test that ran whole and passed.

Each case is a real pytest run in a subprocess (so that xdist's workers and
rerunfailures work as in CI), with CUPTI simulated by a fake backend that
the test project's conftest installs: the kernels each test "launches" are
delivered through the function CUPTI's buffer callback calls. Every
recording is then fed to ``select`` with a change that reaches none of the
recorded kernels: a test whose record is incomplete must still run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map import mapformat
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import read, read_each
from kernel_symbol_map.consumer.select.selection import select

COMMIT = "a" * 40

CONFTEST = '''
from types import SimpleNamespace

import pytest

from kernel_symbol_map.recorder.process import ProcessRecorder
from kernel_symbol_map.recorder.pytest_plugin import KernelRecorder


class FakeCupti:
    """Stands in for CUPTI: a stack of external ids, and activity delivered to ``take``."""

    def __init__(self, take):
        self.take, self.stack, self.correlation = take, [], 0

    def start(self):
        pass

    def push(self, external_id):
        self.stack.append(external_id)
        return True

    def pop(self):
        self.stack.pop()

    def flush(self):
        return 0

    def launch(self, name):
        self.correlation += 1
        records = [SimpleNamespace(kind="CONCURRENT_KERNEL", name=name, correlation_id=self.correlation)]
        if self.stack:
            records.append(SimpleNamespace(kind="EXTERNAL_CORRELATION", correlation_id=self.correlation,
                                           external_id=self.stack[-1]))
        self.take(records)


KernelRecorder.backend_factory = FakeCupti


@pytest.fixture
def launch():
    return lambda name: ProcessRecorder.current.backend.launch(name)


@pytest.fixture
def broken():
    raise RuntimeError("the fixture's setup fails")
'''

OUTCOMES = '''
import pytest

@pytest.mark.slow
def test_slow(launch):
    launch("_Z4slowv")

def test_keep(launch):
    launch("_Z4keepv")

def test_other_k(launch):
    launch("_Z5otherv")

def test_deselected(launch):
    launch("_Z10deselectedv")

@pytest.mark.skipif(True, reason="no sm_100 GPU here")
def test_skipped(launch):
    launch("_Z7skippedv")

def test_failed(launch):
    launch("_Z6failedv")
    assert False

def test_errored(broken, launch):
    launch("_Z7erroredv")

@pytest.mark.xfail(reason="known bug")
def test_xfailed(launch):
    launch("_Z7xfailedv")
    assert False
'''

STOPPED = '''
def test_first(launch):
    launch("_Z5firstv")

def test_boom(launch):
    launch("_Z4boomv")
    raise SystemExit("stop")

def test_never(launch):
    launch("_Z5neverv")
'''

RERUNS = '''
import pytest

def first_time(tmp_path_factory, name):
    """True on the first attempt only (the folder above every xdist worker's own)."""
    marker = tmp_path_factory.getbasetemp().parent / name
    first = not marker.exists()
    marker.touch()
    return first

def test_flaky(launch, tmp_path_factory):
    first = first_time(tmp_path_factory, "flaky-attempt")
    launch("_Z8attempt1v" if first else "_Z8attempt2v")
    assert not first

@pytest.fixture
def fails_first(launch, tmp_path_factory):
    first = first_time(tmp_path_factory, "setup-attempt")
    launch("_Z6setup1v" if first else "_Z6setup2v")
    assert not first, "the fixture's first setup fails"

def test_flaky_setup(fails_first, launch):
    launch("_Z4bodyv")

def test_broken(launch):
    launch("_Z6brokenv")
    assert False
'''

KERNELS = ["_Z4slowv", "_Z4keepv", "_Z5otherv", "_Z10deselectedv", "_Z7skippedv", "_Z6failedv", "_Z7erroredv",
           "_Z7xfailedv", "_Z5firstv", "_Z4boomv", "_Z5neverv", "_Z8attempt1v", "_Z8attempt2v", "_Z6brokenv",
           "_Z4bodyv", "_Z8teardownv", "_Z4thenv", "_Z5stopsv", "_Z10notreachedv", "_Z4warmv"]


def _map(kernels: list[str] | None = None) -> KernelMap:
    """Every kernel above (or ``kernels``) from csrc/x.cu; the change below touches only csrc/y.cu's kernel."""
    objects = [{"source": s, "target": "t", "object": f"{s}.o", "device": True, "symbols": k, "deps": [s]}
               for s, k in (("csrc/x.cu", kernels or KERNELS), ("csrc/y.cu", ["_Z1yv"]))]
    return KernelMap({"version": 1, "commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": [],
                      "incomplete": False, "errors": [], "stats": {}, "objects": objects})


def _run(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, Any]]:
    return _recorded(pytester, *args)[0]


def _recorded(pytester: pytest.Pytester, *args: str, conftest: str = CONFTEST
              ) -> tuple[dict[str, dict[str, Any]], pytest.RunResult]:
    """Run pytest with the plugin in a process of its own: each test's record, and the run's result."""
    pytester.makeconftest(conftest)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    out = pytester.path / "rec"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kernel-record", str(out),
                                           "--kernel-record-commit", COMMIT, *args)
    path = out / "pytest.jsonl"
    records = {r["test"]: r for r in map(json.loads, path.read_text().splitlines()) if "run" not in r}
    return _never_skipped_when_incomplete(path, records), result


def _run_line(pytester: pytest.Pytester) -> dict[str, int] | None:
    """The recording's ``"run"`` line, written only for a run that did not collect or get through its tests."""
    first = json.loads((pytester.path / "rec" / "pytest.jsonl").read_text().splitlines()[0])
    return first.get("run")


FINE = '''
def test_fine(launch):
    launch("_Z4finev")
'''


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_run_that_failed_to_collect_says_so_and_select_warns(pytester: pytest.Pytester, keep_going: bool,
                                                               tmp_path: Path) -> None:
    """A file that fails to collect leaves its tests without records: the recording says so in a "run" line,
    select warns (and fails with --strict), and the plugin's summary line is a line of its own."""
    pytester.makepyfile(test_fine=FINE, test_broken="def test_x(:\n    pass\n")
    records, result = _recorded(pytester, *(["--continue-on-collection-errors"] if keep_going else []))
    run = _run_line(pytester)
    assert run is not None and run["collection_errors"] == 1, run
    assert run["exit_status"] == (1 if keep_going else 2)
    assert any(line.startswith("kernel_symbol_map: recorded ") and "1 file failed to collect" in line
               for line in result.outlines), result.outlines
    path = pytester.path / "rec" / "pytest.jsonl"
    recordings, unreadable, doubts = read_each([path])
    assert not unreadable and any("1 file of its pytest run failed to collect" in d for d in doubts), doubts
    assert records["test_fine.py::test_fine"]["complete"] == keep_going  # collected, run only with keep-going
    doc_map = tmp_path / "m.json.gz"
    mapformat.write(_map(list(KERNELS)).document, doc_map)
    argv = ["select", "--map", str(doc_map), "--recordings", str(path), "--changed", "csrc/y.cu"]
    quiet = subprocess.run([sys.executable, "-m", "kernel_symbol_map", *argv], capture_output=True, text=True)
    assert quiet.returncode == 0 and "WARNING" in quiet.stderr and "recording-doubtful" in quiet.stderr
    strict = subprocess.run([sys.executable, "-m", "kernel_symbol_map", *argv, "--strict"], capture_output=True,
                            text=True)
    assert strict.returncode == 1, strict.stderr


def test_a_run_that_went_through_writes_no_run_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fine=FINE)
    records, result = _recorded(pytester)
    assert _run_line(pytester) is None and list(records) == ["test_fine.py::test_fine"]
    summary = [line for line in result.outlines if "kernel_symbol_map: recorded" in line]
    assert summary == [f"kernel_symbol_map: recorded 1 test into {pytester.path / 'rec' / 'pytest.jsonl'}"]


def _never_skipped_when_incomplete(path: Path, records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Asked about a change that reaches none of the recorded kernels, select runs exactly the incomplete ones."""
    recordings = read([path])
    kernels = sorted(set(KERNELS).union(*(r["kernels"] for r in records.values())))
    selection = select(_map(kernels), recordings, ["csrc/y.cu"])
    for test, r in records.items():
        decision = next(d for d in selection.decisions if d.test == test)
        assert decision.run == (not r["complete"]), (test, r, decision)  # never skipped on a partial record
    return records


def _state(records: dict[str, dict[str, Any]]) -> dict[str, tuple[bool, list[str]]]:
    return {t.split("::")[-1]: (r["complete"], r["kernels"]) for t, r in records.items()}


UNMEASURED = '''
from kernel_symbol_map.recorder.pycoverage import PythonCoverage


def test_unmeasured():
    assert PythonCoverage.current is None
'''


def test_python_code_is_measured_only_for_a_recording_that_asks_for_it(pytester: pytest.Pytester) -> None:
    """The plugin is installed wherever the package is: a plain run, or a recording without Python, never
    traces (a tracer costs every line, and would take the place of the project's own coverage run)."""
    pytester.makepyfile(test_unmeasured=UNMEASURED)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kernel-record", str(pytester.path / "rec"),
                                  "--kernel-record-python", "off").assert_outcomes(passed=1)


def test_a_dist_mode_without_workers_records_in_this_process(pytester: pytest.Pytester) -> None:
    """``--dist`` in a project's addopts, run without ``-n``: xdist runs no workers, and this process is no
    controller: its tests record here."""
    pytester.makepyfile(test_outcomes=OUTCOMES)
    records = _run(pytester, "--dist", "loadscope", "-k", "keep")
    assert _state(records) == {"test_keep": (True, ["_Z4keepv"])}, records


def test_a_run_that_dies_before_it_writes_leaves_no_earlier_recording(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    out = pytester.path / "rec"
    out.mkdir()
    (out / "pytest.jsonl").write_text(json.dumps({"test": "test_dies.py::test_dies", "kernels": [],
                                                  "complete": True, "commit": COMMIT}) + "\n")
    pytester.makepyfile(test_dies="import os\n\n\ndef test_dies():\n    os._exit(1)\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kernel-record", str(out))
    assert not (out / "pytest.jsonl").exists()


def test_what_the_test_process_starts_from_native_code_is_followed_by_the_audit_library(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child started through ctypes or an extension module inherits this process's environment, and with it
    the audit library, first among any the run had; without one the run's own is left as it was."""
    pytester.makepyfile(test_loader='''import os


def test_loader():
    print("LD_AUDIT=" + os.environ.get("LD_AUDIT", "<unset>"))
''')
    monkeypatch.setenv("LD_AUDIT", "/opt/profiler/audit.so")
    for audit, expected in (("/opt/ksm/audit.so", "/opt/ksm/audit.so:/opt/profiler/audit.so"),
                            ("off", "/opt/profiler/audit.so")):
        monkeypatch.setenv("KERNEL_SYMBOL_MAP_AUDIT", audit)
        _, result = _recorded(pytester, "-s")
        result.stdout.fnmatch_lines([f"*LD_AUDIT={expected}*"])


def test_a_recorded_run_inside_a_longer_process_gives_the_environment_back(pytester: pytest.Pytester) -> None:
    """``pytest.main`` called by a script (or an IDE) that goes on: LD_AUDIT is what it was before the run."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    script = '''import os, sys
import pytest
for before in ("/opt/profiler/audit.so", None):
    if before is None:
        os.environ.pop("LD_AUDIT", None)
    else:
        os.environ["LD_AUDIT"] = before
    assert pytest.main(["-q", "-p", "no:cacheprovider", "--kernel-record", "rec"]) == 0
    print("after:", os.environ.get("LD_AUDIT", "<unset>"))
'''
    env = {**os.environ, "KERNEL_SYMBOL_MAP_AUDIT": "/opt/ksm/audit.so"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=pytester.path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("after:")] == [
        "after: /opt/profiler/audit.so", "after: <unset>"], proc.stdout


def test_deselected_tests_get_no_record_and_unfinished_ones_an_incomplete_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_outcomes=OUTCOMES)
    records = _run(pytester, "-m", "not slow", "-k", "not other_k", "--deselect",
                   "test_outcomes.py::test_deselected")
    assert _state(records) == {
        "test_keep": (True, ["_Z4keepv"]),
        "test_skipped": (False, []),
        "test_failed": (False, ["_Z6failedv"]),
        "test_errored": (False, []),
        "test_xfailed": (False, ["_Z7xfailedv"]),
    }
    reasons = {t.split("::")[-1]: r["reason"] for t, r in records.items()}
    assert reasons["test_skipped"] == "the test was skipped: no sm_100 GPU here"
    assert reasons["test_failed"] == "the test failed"
    assert reasons["test_errored"] == "the test's setup errored"
    assert reasons["test_xfailed"].startswith("the test xfailed")


def test_a_run_stopped_early_leaves_the_rest_incomplete(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stopped=STOPPED)
    records = _run(pytester, "-x")
    assert _state(records) == {"test_first": (True, ["_Z5firstv"]), "test_boom": (False, ["_Z4boomv"]),
                               "test_never": (False, [])}
    assert records["test_stopped.py::test_never"]["reason"].startswith("the test never ran")


def test_xdist_workers_join_one_recording(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_outcomes=OUTCOMES)
    records = _run(pytester, "-n", "2", "-m", "not slow", "--deselect", "test_outcomes.py::test_deselected")
    assert _state(records) == {
        "test_keep": (True, ["_Z4keepv"]),
        "test_other_k": (True, ["_Z5otherv"]),
        "test_skipped": (False, []),
        "test_failed": (False, ["_Z6failedv"]),
        "test_errored": (False, []),
        "test_xfailed": (False, ["_Z7xfailedv"]),
    }
    assert {r["processes"] for r in records.values()} == {2}  # the two workers' parts, joined


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_reruns_unite_the_attempts_and_the_last_one_decides(pytester: pytest.Pytester, workers: list[str]) -> None:
    """A flaky test's first attempt launched one kernel and its second another: both are the test's. Under xdist
    the controller, which gets every attempt's reports, decides as one process does."""
    pytest.importorskip("pytest_rerunfailures")
    if workers:
        pytest.importorskip("xdist")
    pytester.makepyfile(test_reruns=RERUNS)
    records = _run(pytester, "--reruns", "2", *workers)
    assert _state(records) == {"test_flaky": (True, ["_Z8attempt1v", "_Z8attempt2v"]),
                               "test_flaky_setup": (True, ["_Z4bodyv", "_Z6setup1v", "_Z6setup2v"]),
                               "test_broken": (False, ["_Z6brokenv"])}
    assert records["test_reruns.py::test_broken"]["reason"] == "the test failed (the last of 3 attempts)"


HELD_BACK = '''
import pytest
from kernel_symbol_map.recorder.process import ProcessRecorder

def launch(name):
    ProcessRecorder.current.backend.launch(name)

@pytest.fixture(scope="module")
def model():
    launch("_Z5setupv")
    yield
    launch("_Z8teardownv")

def test_first(model):
    launch("_Z5firstv")

def test_no_fixture():
    launch("_Z4lonev")

@pytest.mark.flaky(reruns=1, condition=lambda error: isinstance(error, ConnectionError))
def test_last_user(model):
    launch("_Z4lastv")
    raise ValueError("not an error the test is re-run for")
'''


def test_a_wider_fixture_rerunfailures_held_back_ends_in_a_teardown_every_tests(pytester: pytest.Pytester) -> None:
    """The last user of a module fixture failed: rerunfailures holds the module's teardown back for a re-run, then
    finds the error is not one it re-runs for, and ends the fixture while it makes the teardown's report. That is a
    teardown still: what it launches is every test's, as any teardown's is."""
    pytest.importorskip("pytest_rerunfailures")
    pytester.makepyfile(test_held=HELD_BACK)
    records = _run(pytester)
    assert _state(records) == {"test_first": (True, ["_Z5firstv", "_Z5setupv", "_Z8teardownv"]),
                               "test_no_fixture": (True, ["_Z4lonev", "_Z5setupv", "_Z8teardownv"]),
                               "test_last_user": (False, ["_Z4lastv", "_Z5setupv", "_Z8teardownv"])}


TEARDOWN = '''
import pytest

@pytest.fixture
def leaks(launch):
    yield
    launch("_Z8teardownv")
    raise RuntimeError("the fixture's teardown fails")

def test_teardown_errored(leaks, launch):
    launch("_Z4bodyv")

def test_then(launch):
    launch("_Z4thenv")
'''

NEVER = '''
import pytest

def test_stops(launch):
    launch("_Z5stopsv")
    assert False, "--maxfail=1 ends the session here"

def test_not_reached(launch):
    launch("_Z10notreachedv")
'''


def test_a_test_whose_teardown_errored_is_incomplete(pytester: pytest.Pytester) -> None:
    """Its call passed, but it did not end as it was written to: what its teardown would still launch is unknown."""
    pytester.makepyfile(test_teardown=TEARDOWN)
    records = _run(pytester)
    assert _state(records) == {"test_teardown_errored": (False, ["_Z4bodyv", "_Z8teardownv"]),
                               "test_then": (True, ["_Z4thenv", "_Z8teardownv"])}  # a teardown: every test's
    assert records["test_teardown.py::test_teardown_errored"]["reason"] == "the test's teardown errored"


def test_a_test_that_never_ran_is_incomplete(pytester: pytest.Pytester) -> None:
    """--maxfail=1 (not an interrupt): the next test was collected, has a record, and it says it never ran."""
    pytester.makepyfile(test_never=NEVER)
    records = _run(pytester, "--maxfail=1")
    assert _state(records) == {"test_stops": (False, ["_Z5stopsv"]), "test_not_reached": (False, [])}
    assert records["test_never.py::test_not_reached"]["reason"] == (
        "the test never ran (the session stopped early: -x, --maxfail, or an interrupt)")


def test_a_package_fixtures_kernels_go_to_every_test_in_its_folders(pytester: pytest.Pytester) -> None:
    """A package-scoped fixture warms a kernel up once, for the tests of the package and of its sub-packages."""
    pytester.makepyfile(**{
        "pkg/__init__.py": "",
        "pkg/conftest.py": "import pytest\nfrom kernel_symbol_map.recorder.process import ProcessRecorder\n\n"
                           "@pytest.fixture(scope='package')\ndef warm():\n"
                           "    ProcessRecorder.current.backend.launch('_Z4warmv')\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/test_deep.py": "def test_deep(warm):\n    pass\n",
        "pkg/test_top.py": "def test_top(warm):\n    pass\n",
        "test_outside.py": "def test_outside():\n    pass\n",
    })
    records = _run(pytester)
    assert _state(records) == {"test_deep": (True, ["_Z4warmv"]), "test_top": (True, ["_Z4warmv"]),
                               "test_outside": (True, [])}
