"""Another CUPTI client in a test cannot silence the recorder: the test it takes CUPTI in is incomplete, with the
reason, and the next test is complete again.

CUPTI delivers activity records to one registrant per process. The suite runs under the plugin with CUPTI's
stand-in, which keeps one registrant as CUPTI does: a test that registers a second client (as a profiler
through cupti-python does) takes the records from the recorder. torch's profilers (real torch, on CPU) are
seen when they start a trace with a device activity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_per_file import run_suite

SUITE = {
    "test_second_client.py": '''
import pytest

from cupti import cupti


def test_before():
    cupti.launch("_Z6beforev")


def test_profiled():
    cupti.launch("_Z4seenv")
    cupti.activity_register_callbacks(lambda: (1, 0), lambda records: None)  # a second registrant takes them
    cupti.launch("_Z6unseenv")


def test_after():
    cupti.launch("_Z5afterv")


@pytest.fixture
def traced():
    cupti.activity_register_callbacks(lambda: (1, 0), lambda records: None)  # a profiler starts
    yield
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)  # and stops: Kineto disables the kinds


def test_traced_by_a_fixture(traced):
    cupti.launch("_Z6tracedv")


def test_after_the_fixture():
    cupti.launch("_Z10afterfixv")
''',
    "test_child.py": '''
import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
CHILD = """
import os, time, torch
from cupti import cupti
while not os.path.exists("go"):
    time.sleep(0.01)
profile = torch.autograd.profiler.profile()
profile.kineto_activities = {torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA}
with profile:  # a trace of the GPU, started and stopped: the recorder registers again after it
    cupti.launch("_Z5childv")
"""
started = []


def test_starts_a_worker():
    started.append(subprocess.Popen([sys.executable, "-c", CHILD]))  # it lives on, into the next test


def test_while_the_worker_traces():
    open("go", "w").close()
    assert started[0].wait(timeout=120) == 0
    os.remove("go")
''',
    "test_torch_profilers.py": '''
import pytest

from cupti import cupti

torch = pytest.importorskip("torch")


def test_cpu_trace():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        cupti.launch("_Z3cpuv")


def test_gpu_trace():
    profile = torch.autograd.profiler.profile()
    # what a GPU machine's torch asks Kineto for (this torch has no CUDA: Kineto leaves the activity out)
    profile.kineto_activities = {torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA}
    with profile:
        cupti.launch("_Z3gpuv")


def test_torch_profiler_on_cpu():  # torch.profiler's trace is the autograd profiler's: on this CPU, of the CPU
    with torch.profiler.profile():
        cupti.launch("_Z5torchv")


def test_then():
    cupti.launch("_Z4thenv")
''',
}


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    where = tmp_path_factory.mktemp("profilers")
    repo = where / "repo"
    repo.mkdir()
    for name, text in SUITE.items():
        (repo / name).write_text(text)
    out = run_suite(repo, where / "rec")
    found = [json.loads(line) for line in (out / "pytest.jsonl").read_text().splitlines()]
    return {r["test"].rsplit("::", 1)[-1]: r for r in found}


def test_a_second_cupti_client_makes_its_test_incomplete_and_the_next_is_complete(
        records: dict[str, dict[str, Any]]) -> None:
    assert (records["test_before"]["complete"], records["test_before"]["kernels"]) == (True, ["_Z6beforev"])
    profiled = records["test_profiled"]
    assert not profiled["complete"] and "another CUPTI client registered" in profiled["reason"], profiled
    assert profiled["kernels"] == ["_Z4seenv"]  # what came before the second client is the recorder's
    assert (records["test_after"]["complete"], records["test_after"]["kernels"]) == (True, ["_Z5afterv"])


def test_a_client_that_disables_cupti_when_it_stops_leaves_the_next_test_complete(
        records: dict[str, dict[str, Any]]) -> None:
    """A profiler fixture stops in the teardown, and disables CUPTI's kernel records as Kineto does: the
    recorder enables them again before the next test."""
    assert not records["test_traced_by_a_fixture"]["complete"]
    after = records["test_after_the_fixture"]
    assert (after["complete"], after["kernels"]) == (True, ["_Z10afterfixv"]), after


def test_a_torch_trace_of_the_gpu_makes_its_test_incomplete(records: dict[str, dict[str, Any]]) -> None:
    pytest.importorskip("torch", reason="torch is not installed: its profilers cannot be checked")
    for test in ("test_cpu_trace", "test_torch_profiler_on_cpu"):  # a trace of the CPU leaves CUPTI alone
        assert records[test]["complete"], records[test]
    gpu = records["test_gpu_trace"]
    assert not gpu["complete"] and "torch.autograd.profiler.profile started a trace of the GPU" in gpu["reason"], gpu
    assert (records["test_then"]["complete"], records["test_then"]["kernels"]) == (True, ["_Z4thenv"])


SETUP_TAKES = '''
import pytest

from cupti import cupti


@pytest.fixture
def taken():
    cupti.activity_register_callbacks(lambda: (1, 0), lambda records: None)
    raise RuntimeError("the fixture fails: the test's call never runs, its teardown does")


def test_taken_in_setup(taken):
    pass


def test_later():
    cupti.launch("_Z5laterv")
'''


def test_a_client_that_holds_cupti_into_the_teardown_makes_every_test_incomplete(
        tmp_path: Path) -> None:
    """The teardown phase's launches are every test's: while another client holds CUPTI there, none is complete."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_setup.py").write_text(SETUP_TAKES)
    out = run_suite(repo, tmp_path / "rec", check=False)
    found = {r["test"].rsplit("::", 1)[-1]: r for r in map(json.loads, (out / "pytest.jsonl").read_text().splitlines())}
    assert all(not r["complete"] and "another CUPTI client" in r["reason"] for r in found.values()), found
    assert found["test_later"]["kernels"] == ["_Z5laterv"]  # taken back at the end of the test that lost it


def test_a_worker_that_traced_the_gpu_makes_the_tests_it_served_incomplete(records: dict[str, dict[str, Any]]) -> None:
    """A Python child started in one test traced the GPU while a later test ran: both tests lost its kernels."""
    pytest.importorskip("torch", reason="torch is not installed: its profilers cannot be checked")
    for test in ("test_starts_a_worker", "test_while_the_worker_traces"):
        assert not records[test]["complete"] and "started a trace of the GPU" in records[test]["reason"], records[test]
        assert "did not register again" not in records[test]["reason"]  # it did, when the trace stopped
