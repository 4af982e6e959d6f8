"""The plugin's records under the ways a suite is really run: a ``forkserver``, xdist's distributions, a test that
pytest-timeout stops. (pytest-rerunfailures: tests/test_plugin_records.py.)

Each case is a real pytest run in a process of its own, with the real plugins. CUPTI is simulated as in
tests/test_plugin_records.py (a fake backend the test project's conftest installs) or, where child processes
launch kernels, as in tests/test_recorder_processes.py (a stand-in ``cupti`` package every process imports).
Every recording is also given to ``select``: a test whose record is incomplete always runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from native_programs import Programs
from test_plugin_records import CONFTEST, COMMIT, _never_skipped_when_incomplete, _recorded, _state
from test_recorder_processes import _fake_cupti

FORKSERVER = '''
import multiprocessing

from cupti import cupti


def work(name):
    cupti.launch(name)


def in_a_child(name):
    child = multiprocessing.get_context("forkserver").Process(target=work, args=(name,))
    child.start()
    child.join()
    assert child.exitcode == 0


def test_before():
    cupti.launch("_Z6beforev")


def test_starts_the_server():
    in_a_child("_Z5firstv")


def test_uses_it_again():
    in_a_child("_Z6secondv")


def test_after():
    cupti.launch("_Z5afterv")
'''


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["test"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_a_forkserver_s_children_are_recorded_and_the_server_does_not_outlive_the_recording(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, native_programs: Programs) -> None:
    """The fork server is a recorded interpreter that would live as long as pytest, so its part would come after
    the merge and every record would read incomplete; the plugin lets it end first. Each child it forks records
    itself: its kernels go to the test it ran in (and to the test that started the server, whose scope the server
    and so its children carry)."""
    for key, value in _fake_cupti(pytester.mkdir("fake-cupti"), native_programs).items():
        monkeypatch.setenv(key, value)
    pytester.makepyfile(test_forkserver=FORKSERVER)
    out = pytester.path / "rec"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kernel-record", str(out),
                                           "--kernel-record-commit", COMMIT)
    result.assert_outcomes(passed=4)
    path = out / "pytest.jsonl"
    records = _never_skipped_when_incomplete(path, _records(path))
    assert _state(records) == {"test_before": (True, ["_Z6beforev"]),
                               "test_starts_the_server": (True, ["_Z5firstv", "_Z6secondv"]),
                               "test_uses_it_again": (True, ["_Z6secondv"]),
                               "test_after": (True, ["_Z5afterv"])}
    assert {r["processes"] for r in records.values()} == {4}  # pytest's, the server's, and its two children's


SCOPES = '''
import pytest
from kernel_symbol_map.recorder.process import ProcessRecorder


def launch(name):
    ProcessRecorder.current.backend.launch(name)


@pytest.fixture(scope="module")
def model():
    launch("_Z6modulev")


class TestWeights:
    @pytest.fixture(scope="class")
    def weights(self):
        launch("_Z5classv")

    def test_load(self, weights):
        launch("_Z4loadv")

    def test_use(self, weights, model):
        launch("_Z3usev")


@pytest.mark.xdist_group("gpu")
def test_grouped(model):
    launch("_Z7groupedv")


@pytest.mark.xdist_group(name="gpu")
@pytest.mark.parametrize("n", [1, 2])
def test_grouped_too(n):
    launch(f"_Z5group{n}v")


def test_fails():
    launch("_Z5failsv")
    assert False
'''

OTHER = '''
from kernel_symbol_map.recorder.process import ProcessRecorder


def test_elsewhere():
    ProcessRecorder.current.backend.launch("_Z9elsewherev")
'''


@pytest.mark.parametrize("dist", ["no", "loadscope", "loadgroup"])
def test_every_xdist_distribution_gives_each_test_its_own_kernels(pytester: pytest.Pytester, dist: str) -> None:
    """--dist loadscope sends a module's or a class's tests to one worker, loadgroup an xdist_group's: the records
    are those of one process, whichever worker ran what. A test is named as the run reports it (xdist may add
    ``@group`` to a grouped test's id), so --kernel-select and evaluate find it under that name."""
    if dist != "no":
        pytest.importorskip("xdist")
    pytester.makepyfile(test_scopes=SCOPES, test_other=OTHER)
    workers = ["-n", "2", "--dist", dist] if dist != "no" else []
    records, result = _recorded(pytester, "-rA", *workers)
    reported = set(re.findall(r"^(?:PASSED|FAILED) (\S+)", result.stdout.str(), re.MULTILINE))
    assert set(records) == reported
    module = ["_Z6modulev"]  # a module-scoped fixture's set-up: every test of its module
    assert {t.split("::")[-1].partition("@")[0]: state for t, state in _state(records).items()} == {
        "test_load": (True, ["_Z4loadv", "_Z5classv", *module]),
        "test_use": (True, ["_Z3usev", "_Z5classv", *module]),
        "test_grouped": (True, [*module, "_Z7groupedv"]),
        "test_grouped_too[1]": (True, ["_Z5group1v", *module]),
        "test_grouped_too[2]": (True, ["_Z5group2v", *module]),
        "test_fails": (False, ["_Z5failsv", *module]),
        "test_elsewhere": (True, ["_Z9elsewherev"]),
    }
    assert {r["processes"] for r in records.values()} == {2 if workers else 1}  # each worker's part, joined


EACH_CONFTEST = CONFTEST + '''
import os
from pathlib import Path


def pytest_runtest_logreport(report):
    """In the controller: gw0's failed call has been received (gw1's test waits for this before it passes)."""
    if report.when == "call" and report.failed and getattr(report, "worker_id", "") == "gw0":
        Path(os.environ["GW0_FAILED"]).touch()
'''

EACH = '''
import os
import time
from pathlib import Path


def test_on_every_worker(launch):
    launch("_Z4bothv")
    if os.environ["PYTEST_XDIST_WORKER"] == "gw0":
        launch("_Z3gw0v")
        assert False, "fails on gw0 only"
    deadline = time.monotonic() + 300
    while not Path(os.environ["GW0_FAILED"]).exists():  # an order, not a race: gw1's pass reaches the controller last
        assert time.monotonic() < deadline, "the controller never got gw0's failure"
        time.sleep(0.01)
'''


def test_under_dist_each_a_test_that_failed_on_one_worker_is_incomplete(pytester: pytest.Pytester,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """--dist each runs every test on every worker (one per GPU, say): the test failed on gw0, where it stopped
    early, and passed on gw1 later. Its record unites both runs' kernels, and cannot clear it."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("GW0_FAILED", str(pytester.path / "gw0-failed"))
    pytester.makepyfile(test_each=EACH)
    records, result = _recorded(pytester, "-n", "2", "--dist", "each", conftest=EACH_CONFTEST)
    result.assert_outcomes(passed=1, failed=1)
    assert _state(records) == {"test_on_every_worker": (False, ["_Z3gw0v", "_Z4bothv"])}
    assert records["test_each.py::test_on_every_worker"]["reason"] == "the test failed"


TIMEOUT = '''
import time

import pytest


def test_before(launch):
    launch("_Z6beforev")


@pytest.mark.timeout(3)  # this test only: --timeout-method says how
def test_hangs(launch):
    launch("_Z5hangsv")
    time.sleep(600)
    launch("_Z5neverv")


def test_after(launch):
    launch("_Z5afterv")
'''


def test_a_test_pytest_timeout_stopped_by_signal_is_incomplete_and_the_next_one_is_not(
        pytester: pytest.Pytester) -> None:
    """The signal method fails the test where it hangs: its record holds what it launched before, and cannot clear
    it; the tests after it are recorded as usual."""
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_timeout=TIMEOUT)
    records, result = _recorded(pytester, "--timeout-method", "signal")
    result.assert_outcomes(passed=2, failed=1)
    assert _state(records) == {"test_before": (True, ["_Z6beforev"]), "test_hangs": (False, ["_Z5hangsv"]),
                               "test_after": (True, ["_Z5afterv"])}
    assert records["test_timeout.py::test_hangs"]["reason"] == "the test failed"


def _recording(pytester: pytest.Pytester, *args: str) -> Path:
    pytester.makeconftest(CONFTEST)
    out = pytester.path / "rec"
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--kernel-record", str(out),
                                  "--kernel-record-commit", COMMIT, *args)
    return out / "pytest.jsonl"


def test_a_run_pytest_timeout_ended_by_thread_leaves_no_recording_not_an_earlier_one(
        pytester: pytest.Pytester) -> None:
    """The thread method ends the whole process (os._exit): nothing is written. A recording an earlier run left
    under that name is gone too, so no one reads it as this run's."""
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_timeout=TIMEOUT)
    earlier = _recording(pytester, "-k", "not hangs")
    assert len(earlier.read_text().splitlines()) == 2
    assert not _recording(pytester, "--timeout-method", "thread").exists()


def test_a_worker_pytest_timeout_ended_by_thread_leaves_its_test_incomplete(pytester: pytest.Pytester) -> None:
    """Under xdist the thread method ends the worker, and xdist carries on: the test it stopped is incomplete, and
    so is every other, for the worker's part (what its earlier tests launched) died with it."""
    pytest.importorskip("pytest_timeout")
    pytest.importorskip("xdist")
    pytester.makepyfile(test_timeout=TIMEOUT)
    records, _ = _recorded(pytester, "-n", "2", "--timeout-method", "thread")
    hung = records["test_timeout.py::test_hangs"]
    assert not hung["complete"] and "_Z5neverv" not in hung["kernels"], hung
    assert all(not r["complete"] and "died before writing its part file" in r["reason"] for r in records.values())
