"""The recorder without a GPU: the start-up hook in real children, part files, crashes, CUPTI failing to
start, and the pytest plugin's attribution fed through the function CUPTI's buffer callback calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import timeit
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernel_symbol_map.recorder import environment, parts
from kernel_symbol_map.recorder.process import ProcessRecorder

ROOT = Path(__file__).resolve().parents[1]
PTH = ROOT / "python" / "kernel_symbol_map_record.pth"

CHILDREN = """
import multiprocessing as mp, subprocess, sys

def work():
    pass

if __name__ == "__main__":
    for method in ("spawn", "fork", "forkserver"):
        p = mp.get_context(method).Process(target=work)
        p.start()
        p.join()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


def _cupti_starts() -> bool:
    """Whether CUPTI starts on this machine (a GPU and its driver): the tests hold either way."""
    probe = "from kernel_symbol_map.recorder.activity import Activity; Activity(lambda a: None).start()"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


CUPTI_STARTS = _cupti_starts()


def assert_observed_as_cupti_allows(rec: dict[str, Any], processes: int) -> None:
    """Every process recorded: complete where CUPTI starts, else incomplete with CUPTI's reason for each."""
    assert rec["processes"] == processes, rec
    if CUPTI_STARTS:
        assert rec["complete"] and rec["reason"] == "", rec
    else:
        reasons = rec["reason"].split("; ")
        assert not rec["complete"] and len(reasons) == processes, rec
        assert all("CUPTI could not start" in r for r in reasons), reasons


def record(tmp: Path, script: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    path = tmp / "script.py"
    path.write_text(textwrap.dedent(script))
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "record", "--step", "step", "--out",
                           str(tmp / "rec"), "--commit", "c1", *extra, "--", sys.executable, str(path)],
                          capture_output=True, text=True, check=False)
    return proc, json.loads((tmp / "rec" / "step.jsonl").read_text())


def test_the_hook_starts_in_spawned_forked_and_subprocess_children(tmp_path: Path) -> None:
    proc, rec = record(tmp_path, CHILDREN)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # main, the spawn child, the fork child, the fork server and the child it forked, the subprocess: each wrote
    # a part (the server when the command's exit ended it; the resource tracker runs no user code, and lives as
    # long as its parent: it is not recorded)
    assert_observed_as_cupti_allows(rec, 6)
    assert rec["kernels"] == [] and rec["commit"] == "c1"
    assert not list((tmp_path / "rec").glob(".parts-*"))


@pytest.mark.skipif(CUPTI_STARTS, reason="CUPTI starts on this machine")
def test_cupti_failing_to_start_is_an_incomplete_recording_with_its_error(tmp_path: Path) -> None:
    proc, rec = record(tmp_path, "pass\n")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert rec["processes"] == 1 and not rec["complete"] and rec["kernels"] == []
    assert "CUPTI could not start" in rec["reason"]
    assert "INCOMPLETE" in proc.stdout and "never lets select skip" in proc.stderr


def test_a_crashed_child_makes_the_recording_incomplete(tmp_path: Path) -> None:
    crash = """
    import os, signal, subprocess, sys
    subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    """
    proc, rec = record(tmp_path, crash)
    assert proc.returncode == 0
    assert "died before writing its part file" in rec["reason"] and not rec["complete"]


def test_a_step_of_which_nothing_was_recorded_or_expected_is_never_complete(tmp_path: Path) -> None:
    rec = parts.step_record(tmp_path, "step", "c1")
    assert not rec["complete"] and rec["reason"] == "no process was recorded", rec


def test_a_native_command_is_complete_only_when_the_audit_library_followed_it(tmp_path: Path) -> None:
    """`record -- true`: a native command that loaded no GPU driver and exited could not launch a kernel; without
    the audit library (turned off here) nothing says so, and the step must not read as complete and empty."""
    def step(**env: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "record", "--step", "cpp", "--out",
                               str(tmp_path / "rec"), "--commit", "c1", "--", "true"],
                              capture_output=True, text=True, check=False, env=dict(os.environ, **env))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr
        return json.loads((tmp_path / "rec" / "cpp.jsonl").read_text())

    rec = step()
    assert rec["complete"] and rec["processes"] == 0 and "true" in rec["libraries"], rec
    rec = step(KERNEL_SYMBOL_MAP_AUDIT="off")
    assert not rec["complete"] and rec["processes"] == 0 and "no audit record" in rec["reason"], rec


def test_the_commands_exit_status_is_kept_and_a_failed_step_is_not_complete(tmp_path: Path) -> None:
    """A step that failed may have stopped early (pytest -x): its record cannot clear it."""
    proc, rec = record(tmp_path, "import sys; sys.exit(3)\n")
    assert proc.returncode == 3 and rec["test"] == "step"
    assert not rec["complete"] and "the command failed (exit 3)" in rec["reason"]


def test_a_command_that_is_not_there_exits_127_as_env_does(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "record", "--step", "s", "--out", str(tmp_path),
                           "--", str(tmp_path / "missing")], capture_output=True, text=True, check=False)
    assert proc.returncode == 127 and proc.stderr.startswith("ERROR cannot run") and "Traceback" not in proc.stderr


def test_the_hook_costs_one_lookup_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: with recording off, the line makes only the environment lookup's calls."""
    line = PTH.read_text().strip()
    assert line.startswith("import ") and "\n" not in line  # site runs an `import` line of a .pth
    monkeypatch.delenv(environment.FOLDER_VARIABLE, raising=False)
    code = compile(line, str(PTH), "exec")
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            calls.append(getattr(arg, "__qualname__", None) or frame.f_code.co_qualname)

    exec(code, {})  # `import os` is already done; count the steady state, as every start after site's
    sys.setprofile(profile)
    try:
        exec(code, {})
    finally:
        sys.setprofile(None)
    lookup: list[str] = []
    sys.setprofile(lambda frame, event, arg: lookup.append(getattr(arg, "__qualname__", None) or
                                                         frame.f_code.co_qualname) if event in ("call", "c_call") else None)
    try:
        os.environ.get(environment.FOLDER_VARIABLE)
    finally:
        sys.setprofile(None)
    # exec, the .pth line's own code, then exactly what one os.environ.get costs: nothing is imported or started
    assert calls[:-1] == ["exec", "<module>", *lookup[:-1]], (calls, lookup)
    runs = 100_000
    seconds = timeit.timeit(lambda: exec(code, {}), number=runs)  # a figure for docs/figures.md, never asserted
    print(f"\n.pth hook, recording off: {seconds / runs * 1e6:.2f} us per interpreter start, calls {calls}")
    out = subprocess.run([sys.executable, "-c", "import sys; print(any(m.split('.')[0] == 'kernel_symbol_map' for m in sys.modules))"],
                         capture_output=True, text=True, check=True, env={k: v for k, v in os.environ.items()
                                                                           if k != environment.FOLDER_VARIABLE})
    assert out.stdout.strip() == "False"  # nothing of the package is imported at start-up


class FakeCupti:
    """Stands in for CUPTI in the process: a stack of external ids, and activity delivered to ``take``."""

    def __init__(self, take: Any) -> None:
        self.take = take
        self.stack: list[int] = []
        self.correlation = 0

    def start(self) -> None:
        pass

    def push(self, external_id: int) -> bool:
        self.stack.append(external_id)
        return True

    def pop(self) -> None:
        self.stack.pop()

    def flush(self) -> int:
        return 0

    def launch(self, name: str) -> None:
        """What CUPTI would deliver for one launch on this thread, in the order it may arrive."""
        self.correlation += 1
        records = [SimpleNamespace(kind="CONCURRENT_KERNEL", name=name, correlation_id=self.correlation)]
        if self.stack:
            records.insert(self.correlation % 2, SimpleNamespace(kind="EXTERNAL_CORRELATION", correlation_id=self.correlation,
                                                                 external_id=self.stack[-1]))
        self.take(records)


def test_part_files_merge_into_one_step_record(tmp_path: Path) -> None:
    for kernels in (["_Z1av", "_Z1bv"], ["_Z1bv", "_Z1cv"]):
        r = ProcessRecorder(tmp_path, "step")
        r._begin(FakeCupti(lambda a, r=r: r.take(a)))
        for k in kernels:
            r.backend.launch(k)
        r.finish()
    rec = parts.step_record(tmp_path, "step", "c1")
    loaded = rec.pop("libraries")
    assert {os.path.basename(os.path.realpath(sys.executable)), "libc.so.6"} <= set(loaded), loaded
    assert rec == {"test": "step", "kernels": ["_Z1av", "_Z1bv", "_Z1cv"], "complete": True, "commit": "c1",
                   "reason": "", "processes": 2}


PLUGIN_TESTS = """
import pytest
from kernel_symbol_map.recorder.process import ProcessRecorder

def launch(name):
    ProcessRecorder.current.backend.launch(name)

@pytest.fixture(scope="session")
def warm():
    launch("_Z11session_warmv")

@pytest.fixture(scope="module")
def model():
    launch("_Z10module_fixv")
    yield
    launch("_Z15module_teardownv")

@pytest.fixture
def buffers():
    launch("_Z9per_testv")

def test_a(warm, model, buffers):
    launch("_Z1av")

def test_b(model):
    launch("_Z1bv")

class TestC:
    def test_c(self):
        launch("_Z1cv")
"""


def test_the_plugin_attributes_each_kernel_to_its_tests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    from kernel_symbol_map.recorder.pytest_plugin import KernelRecorder

    monkeypatch.setattr(KernelRecorder, "backend_factory", FakeCupti)
    monkeypatch.setattr(ProcessRecorder, "current", None)
    pytester.makepyfile(test_module=PLUGIN_TESTS, test_other="def test_d():\n    pass\n")
    out = tmp_path / "rec"
    result = pytester.runpytest_inprocess("--kernel-record", str(out), "--kernel-record-commit", "c1")
    result.assert_outcomes(passed=4)
    found = {r["test"]: r for r in map(json.loads, (out / "pytest.jsonl").read_text().splitlines())}
    kernels = {t: set(r["kernels"]) for t, r in found.items()}
    everywhere = {"_Z11session_warmv", "_Z15module_teardownv"}  # session scope; any teardown phase
    assert kernels == {
        "test_module.py::test_a": {"_Z1av", "_Z9per_testv", "_Z10module_fixv"} | everywhere,
        "test_module.py::test_b": {"_Z1bv", "_Z10module_fixv"} | everywhere,
        "test_module.py::TestC::test_c": {"_Z1cv", "_Z10module_fixv"} | everywhere,
        "test_other.py::test_d": everywhere,
    }
    assert all(r["complete"] and r["commit"] == "c1" for r in found.values())


def test_the_plugin_refuses_to_run_under_record(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("def test_x():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "record", "--step", "s", "--out",
                           str(tmp_path / "rec"), "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_x.py"), "--kernel-record", str(tmp_path / "rec2")],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode != 0 and "cannot run under `kernel-symbol-map record`" in proc.stdout + proc.stderr


def test_memory_stays_bounded_on_a_launch_bound_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Millions of launches must not mean millions of waiting records; none is lost, and none misattributed."""
    from kernel_symbol_map.recorder import process

    monkeypatch.setattr(process, "_UNMATCHED_LIMIT", 64)
    plain = ProcessRecorder(tmp_path, "step")  # `record`: nothing pushed
    plain.take([SimpleNamespace(kind="CONCURRENT_KERNEL", name=f"_Z1k{i % 3}v", correlation_id=i) for i in range(1000)])
    assert not plain._pending and plain.kernels == {"step": {"_Z1k0v", "_Z1k1v", "_Z1k2v"}}
    tests = ProcessRecorder(tmp_path, "scope::")  # the plugin: a test pushed, other threads launch too
    ext = tests.external_id("test_a")
    tests.take([SimpleNamespace(kind="CONCURRENT_KERNEL", name=f"_Z1w{i}v", correlation_id=i) for i in range(200)])
    tests.take([SimpleNamespace(kind="EXTERNAL_CORRELATION", correlation_id=1000, external_id=ext),
                SimpleNamespace(kind="CONCURRENT_KERNEL", name="_Z1av", correlation_id=1000)])
    assert len(tests._pending) <= 64 and tests.kernels["test_a"] == {"_Z1av"}
    tests.finish()
    assert len(tests.kernels["scope::"]) == 200  # every worker launch, conservatively every test's
