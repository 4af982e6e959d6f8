"""Native processes a recorded test starts are judged by what they loaded (the audit library), real ones only.

A native child that loaded no GPU driver and exited whole leaves its test complete, and its libraries in
the record; one that loaded the (stand-in) driver with no recorder in it, one the audit library could not
follow (a cleared environment, a setuid program, a library the loader refused), and one killed mid-run
leave it incomplete, each with its reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from native_programs import Programs

from kernel_symbol_map.recorder import audit, native

COMMIT = "c" * 40
pytestmark = pytest.mark.skipif(native.audit_library() is None, reason="the audit library is not installed")

CASES = '''
import os, subprocess, sys

P = {programs!r}


def test_quiet():
    pass


def test_ldconfig():
    subprocess.run(["/sbin/ldconfig", "-p"], check=True, stdout=subprocess.DEVNULL)


def test_find_library():
    import ctypes.util
    ctypes.util.find_library("m")


def test_gxx(tmp_path):
    (tmp_path / "t.cc").write_text("int main() {{ return 0; }}\\n")
    subprocess.run(["g++", "t.cc", "-o", "t"], cwd=tmp_path, check=True)
    subprocess.run(["g++", "--version"], check=True, stdout=subprocess.DEVNULL)


def test_static():
    subprocess.run([P["static_true"]], check=True)


def test_python_in_a_shell_starts_a_child():
    # The interpreter records itself; its child's exec is noted under the shell's spawn id, and the program it
    # became carries the id the interpreter gave it.
    subprocess.run(["sh", "-c", sys.executable + " -c 'import subprocess; subprocess.run([\\"true\\"])'"], check=True)


def test_shell_runs_static():
    subprocess.run(["sh", "-c", P["static_true"] + "; true"], check=True)


def test_exit_through_underscore_exit():
    subprocess.run([P["exit_true"]], check=True)


# Another tool's CUPTI injection (a profiler's) is left alone: the driver is loaded with no recorder in it.
OTHER = dict(os.environ, CUDA_INJECTION64_PATH="/opt/other-profiler/injection.so")


def test_driver():
    subprocess.run([P["load_driver"], P["driver"]], check=True, env=OTHER)


def test_driver_in_a_shell():
    subprocess.run(["sh", "-c", P["load_driver"] + " " + P["driver"]], check=True, env=OTHER)


def test_injected():
    subprocess.run([P["load_driver"], P["driver"], "_Z6nativev", "_Z7native2v"], check=True)


def test_injected_in_a_shell():
    subprocess.run(["sh", "-c", P["load_driver"] + " " + P["driver"] + " _Z5shellv"], check=True)


def test_another_cupti_client():
    # A process with CUPTI loaded already (its own profiler): the injection steps aside, CUPTI takes one client.
    cupti = os.environ.get("KERNEL_SYMBOL_MAP_CUPTI", "")
    subprocess.run([P["load_driver"], P["driver"], "_Z5otherv"], check=True, env=dict(os.environ, LD_PRELOAD=cupti))


def test_python_child_drops_the_injection():
    inner = "import os; print(os.environ.get('CUDA_INJECTION64_PATH'))"
    outer = f"import os, subprocess, sys; print(os.environ.get('CUDA_INJECTION64_PATH')); " \\
            f"subprocess.run([sys.executable, '-S', '-c', {{inner!r}}], check=True)"
    seen = subprocess.run([sys.executable, "-c", outer], capture_output=True, text=True, check=True).stdout.split()
    assert seen == ["None", P["injection"]], seen  # the recorded one records itself; its child gets it again


def test_cleared_environment():
    subprocess.run([P["clean_exec"], P["load_driver"], P["driver"], "_Z7clearedv"], check=True)


def test_cleared_environment_through_the_loader():
    # The loader run directly has no PT_INTERP, as a static program has none; what it runs may load anything.
    subprocess.run([P["clean_exec"], "/lib64/ld-linux-x86-64.so.2", P["load_driver"], P["driver"]], check=True)


def test_static_dlopen():
    subprocess.run([P["static_dlopen"], P["driver"]], check=True)


def test_cleared_environment_static_dlopen():
    subprocess.run([P["clean_exec"], P["static_dlopen"], P["driver"]], check=True)


def test_ctypes_spawn_in_a_recorded_child():
    # A recorded interpreter starts a program outside Python, with an empty environment: not followed.
    code = ("import ctypes, os; libc = ctypes.CDLL(None); pid = ctypes.c_int(); "
            "argv = (ctypes.c_char_p * 2)(b'/bin/true', None); envp = (ctypes.c_char_p * 1)(None); "
            "assert libc.posix_spawn(ctypes.byref(pid), b'/bin/true', None, None, argv, envp) == 0; "
            "os.waitpid(pid.value, 0)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ctypes_spawn_followed_in_a_recorded_child():
    code = ("import ctypes, os; libc = ctypes.CDLL(None); pid = ctypes.c_int(); "
            "argv = (ctypes.c_char_p * 2)(b'/bin/true', None); "
            "env = [k.encode() + b'=' + v.encode() for k, v in os.environ.items()]; "
            "envp = (ctypes.c_char_p * (len(env) + 1))(*env, None); "
            "assert libc.posix_spawn(ctypes.byref(pid), b'/bin/true', None, None, argv, envp) == 0; "
            "os.waitpid(pid.value, 0)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ctypes_system_in_the_test_process():
    # This process is not audited, but what it starts from native code inherits LD_AUDIT.
    import ctypes
    assert ctypes.CDLL(None).system(b"true; " + P["static_true"].encode()) == 0


def test_ctypes_system_of_the_driver_in_the_test_process():
    import ctypes
    assert ctypes.CDLL(None).system((P["load_driver"] + " " + P["driver"]).encode()) == 0


def test_killed():
    assert subprocess.run([P["killed"]]).returncode == -9


def test_setuid():
    subprocess.run([P["setuid_true"]], check=True)


def test_loads_in_process():
    import _testbuffer  # noqa: F401 - an extension module nothing else here loads


def test_after():
    pass
'''


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory, native_programs: Programs) -> dict[str, dict[str, Any]]:
    return _run(tmp_path_factory.mktemp("native-cases"), native_programs, "-k", "not of_the_driver_in_the_test")


def _run(where: Path, programs: Programs, *select: str, **env: str) -> dict[str, dict[str, Any]]:
    """CASES under the plugin, the tests' own process recording through the stand-in ``cupti`` package and a
    native child's injection through the stand-in libcupti (where CUPTI's header was there to build it)."""
    env = {"PYTHONPATH": str(_cupti_package(where)), "FAKE_CUDA_DRIVER": str(programs.driver),
           **({"KERNEL_SYMBOL_MAP_CUPTI": str(programs.cupti)} if programs.cupti else {}), **env}
    setuid = where / "setuid_true"
    shutil.copy(programs.exit_true, setuid)
    setuid.chmod(0o4755)
    paths = {"static_true": str(programs.static_true), "exit_true": str(programs.exit_true),
             "load_driver": str(programs.load_driver), "driver": str(programs.driver),
             "static_dlopen": str(programs.static_dlopen),
             "clean_exec": str(programs.clean_exec), "killed": str(programs.killed), "setuid_true": str(setuid),
             "injection": str(native.injection_library())}
    (where / "test_cases.py").write_text(CASES.format(programs=paths))
    out = where / "rec"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(where),
                           "test_cases.py", "--kernel-record", str(out), "--kernel-record-commit", COMMIT,
                           "--kernel-record-python", "off", *select],
                          cwd=where, capture_output=True, text=True, check=False, env=dict(os.environ, **env))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = map(json.loads, (out / "pytest.jsonl").read_text().splitlines())
    return {r["test"].split("::")[-1]: r for r in records}


def _cupti_package(where: Path) -> Path:
    """The stand-in ``cupti`` package (tests/test_recorder_processes.py) in ``where/cupti``: its PYTHONPATH entry."""
    from test_recorder_processes import FAKE_CUPTI

    (where / "cupti" / "cupti").mkdir(parents=True)
    (where / "cupti" / "cupti" / "__init__.py").write_text("")
    (where / "cupti" / "cupti" / "cupti.py").write_text(FAKE_CUPTI)
    return where / "cupti"


@pytest.mark.parametrize("test", ["test_ldconfig", "test_find_library", "test_gxx", "test_static",
                                  "test_python_in_a_shell_starts_a_child",
                                  "test_shell_runs_static", "test_exit_through_underscore_exit",
                                  "test_ctypes_spawn_followed_in_a_recorded_child",
                                  "test_ctypes_system_in_the_test_process", "test_after"])
def test_a_native_child_that_loaded_no_driver_leaves_its_test_complete(cases: dict[str, dict[str, Any]],
                                                                      test: str) -> None:
    assert cases[test]["reason"] == "", cases[test]


def test_records_list_what_each_tests_native_children_loaded(cases: dict[str, dict[str, Any]]) -> None:
    assert {"cc1plus", "collect2", "libgmp.so.10"} <= set(cases["test_gxx"]["libraries"])
    assert "cc1plus" not in cases["test_static"]["libraries"]  # a waited-for child goes to its own test only
    assert {"load_driver", "libcuda.so.1"} <= set(cases["test_driver"]["libraries"])
    # This process's own images are there too, as at the test's end: what it had loaded by then.
    assert os.path.basename(os.path.realpath(sys.executable)) in cases["test_after"]["libraries"]
    extension = next(n for n in cases["test_loads_in_process"]["libraries"] if n.startswith("_testbuffer."))
    assert extension in cases["test_after"]["libraries"]  # loaded is loaded: later tests could call it
    assert extension not in cases["test_ldconfig"]["libraries"]  # an earlier test could not


@pytest.mark.parametrize(("test", "why"), [
    ("test_driver", "(load_driver) loaded the GPU driver (libcuda.so.1), and no CUPTI recorder saw it"),
    ("test_driver_in_a_shell", "(load_driver) loaded the GPU driver (libcuda.so.1)"),
    ("test_cleared_environment", "(clean_exec) ran {load_driver}, which the audit library did not follow (its "
                                 "environment lost LD_AUDIT, or the loader refused the library)"),
    ("test_cleared_environment_through_the_loader", "(clean_exec) ran /lib64/ld-linux-x86-64.so.2, which the "
                                                    "audit library did not follow"),
    ("test_static_dlopen", "no audit record"),
    ("test_cleared_environment_static_dlopen", "(clean_exec) ran {static_dlopen}, which the audit library did "
                                               "not follow"),
    ("test_killed", "(killed) did not exit: it was killed, or still ran when the recording ended"),
    ("test_setuid", "a setuid program: the loader ignores LD_AUDIT there"),
])
def test_a_native_child_that_may_have_launched_unseen_keeps_its_test_incomplete(
        cases: dict[str, dict[str, Any]], native_programs: Programs, test: str, why: str) -> None:
    reason = cases[test]["reason"]
    assert not cases[test]["complete"] and "which no recorder saw" in reason, cases[test]
    assert why.format(load_driver=native_programs.load_driver, static_dlopen=native_programs.static_dlopen) in reason, \
        reason
    # Each was seen to end within its own test: the next one keeps its record.
    assert cases["test_after"]["reason"] == ""


def test_a_driver_the_test_process_started_from_native_code_makes_every_test_incomplete(
        tmp_path: Path, native_programs: Programs) -> None:
    """Its records carry no spawn id: no test can be told apart from another. (After a child the hook saw
    inherit this process's environment, they carry that child's id, and count from its start on.)"""
    cases = _run(tmp_path, native_programs, "-k", "quiet or of_the_driver_in_the_test or after",
                 KERNEL_SYMBOL_MAP_INJECTION="off")
    for test in ("test_quiet", "test_ctypes_system_of_the_driver_in_the_test_process", "test_after"):
        assert not cases[test]["complete"], cases[test]
        assert "a process that carried no spawn id, which no recorder saw" in cases[test]["reason"], cases[test]
        assert "(load_driver) loaded the GPU driver (libcuda.so.1)" in cases[test]["reason"], cases[test]


def test_what_a_recorded_child_started_outside_python_is_judged_by_its_records(
        cases: dict[str, dict[str, Any]]) -> None:
    """A recorded interpreter's posix_spawn through ctypes, with an empty environment: its own recorder saw it,
    but not the program it started."""
    reason = cases["test_ctypes_spawn_in_a_recorded_child"]["reason"]
    assert "which a recorder saw, but not all it started" in reason, reason
    assert "started /bin/true, which the audit library did not follow" in reason, reason


needs_injection = pytest.mark.skipif(native.injection_library() is None,
                                     reason="the CUPTI injection library is not installed (no CUDA headers at build)")


@needs_injection
def test_a_native_cuda_child_records_its_own_kernels_through_the_injection(
        cases: dict[str, dict[str, Any]], native_programs: Programs) -> None:
    if native_programs.cupti is None:
        pytest.skip("no CUPTI header to build the stand-in libcupti with")
    assert cases["test_injected"]["complete"], cases["test_injected"]
    assert cases["test_injected"]["kernels"] == ["_Z6nativev", "_Z7native2v"]
    assert cases["test_injected_in_a_shell"]["complete"] and cases["test_injected_in_a_shell"]["kernels"] == \
        ["_Z5shellv"], cases["test_injected_in_a_shell"]
    assert "libcuda.so.1" in cases["test_injected"]["libraries"]
    other = cases["test_another_cupti_client"]
    assert not other["complete"] and "(load_driver) loaded the GPU driver" in other["reason"], other
    # An injection only where the recorder's environment reached: no LD_AUDIT, no CUDA_INJECTION64_PATH either.
    assert "_Z7clearedv" not in cases["test_cleared_environment"]["kernels"]
    for test in ("test_killed", "test_after"):
        assert cases[test]["kernels"] == [], cases[test]


@needs_injection
@pytest.mark.parametrize(("env", "why"), [
    ({"KERNEL_SYMBOL_MAP_INJECTION": "off"}, "(load_driver) loaded the GPU driver (libcuda.so.1), and no CUPTI"),
    ({"KERNEL_SYMBOL_MAP_CUPTI": "libm.so.6"}, "CUPTI could not start: libcupti lacks the Activity API"),
    ({"FAKE_CUPTI_DROPPED": "2"}, "CUPTI dropped 2 activity records"),
])
def test_a_native_cuda_child_the_injection_could_not_record_keeps_its_test_incomplete(
        tmp_path: Path, native_programs: Programs, env: dict[str, str], why: str) -> None:
    if native_programs.cupti is None:
        pytest.skip("no CUPTI header to build the stand-in libcupti with")
    cases = _run(tmp_path, native_programs, "-k", "injected or after", **env)
    for test in ("test_injected", "test_injected_in_a_shell"):
        assert not cases[test]["complete"] and why in cases[test]["reason"], cases[test]
        assert str(native_programs.load_driver) in cases[test]["reason"], cases[test]  # the program is named
    if "FAKE_CUPTI_DROPPED" not in env:  # (which the tests' own process, with the stand-in cupti, drops too)
        assert cases["test_after"]["reason"] == ""  # each ended within its own test: no later test needs it


def test_an_audit_library_the_loader_refuses_leaves_the_test_incomplete(
        tmp_path: Path, native_programs: Programs) -> None:
    bad = tmp_path / "not-a-library.so"
    bad.write_bytes(b"\x7fELF garbage")
    cases = _run(tmp_path, native_programs, KERNEL_SYMBOL_MAP_AUDIT=str(bad))
    for test in ("test_gxx", "test_exit_through_underscore_exit", "test_driver"):
        assert "no audit record" in cases[test]["reason"], cases[test]
    assert cases["test_static"]["reason"] == ""  # a static program needs no audit library


TORCH_CASES = '''
import ctypes.util
import torch


def test_eager():
    assert float(torch.ones(3).sum()) == 3.0


def test_inductor():
    f = torch.compile(lambda x: (x * 2).sin() + 1, backend="inductor")
    assert torch.allclose(f(torch.ones(8)), (torch.ones(8) * 2).sin() + 1)


def test_driver_lookup():
    ctypes.util.find_library("cuda")  # what torch's CUDA library lookup does: `ldconfig -p`


def test_after():
    pass
'''


def test_a_torch_suite_that_compiles_with_inductor_records_every_test_complete(
        tmp_path: Path, native_programs: Programs) -> None:
    """`import torch` (ldconfig), torch.compile with inductor on CPU (g++, openssl), from a cold cache, under the
    stand-in CUPTI: nothing launched a kernel unseen, so every record is complete."""
    pytest.importorskip("torch", reason="torch is not installed (scripts/setup installs torch==2.13.0, CPU)")
    (tmp_path / "test_torch_cases.py").write_text(TORCH_CASES)
    env = dict(os.environ, PYTHONPATH=str(_cupti_package(tmp_path)), FAKE_CUDA_DRIVER=str(native_programs.driver),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor-cache"))
    out = tmp_path / "rec"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           "test_torch_cases.py", "--kernel-record", "rec", "--kernel-record-commit", COMMIT,
                           "--kernel-record-python", "off"],
                          cwd=tmp_path, capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r["test"].split("::")[-1]: r for r in map(json.loads, (out / "pytest.jsonl").read_text().splitlines())}
    assert set(records) == {"test_eager", "test_inductor", "test_driver_lookup", "test_after"}
    for test, rec in records.items():
        assert rec["complete"], rec
        assert "libtorch_cpu.so" in rec["libraries"], (test, rec["libraries"][:20])
    assert {"cc1plus", "openssl"} <= set(records["test_inductor"]["libraries"])
    assert "cc1plus" not in records["test_eager"]["libraries"]


@needs_injection
def test_record_of_a_native_cuda_program_is_complete_with_its_kernels(tmp_path: Path,
                                                                    native_programs: Programs) -> None:
    """`record -- ./cuda_test_binary`: the step's command itself is native; the injection records it."""
    if native_programs.cupti is None:
        pytest.skip("no CUPTI header to build the stand-in libcupti with")

    def step(*command: str, **env: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "record", "--step", "s", "--out", "rec",
                               "--commit", COMMIT, "--", *command], cwd=tmp_path, capture_output=True, text=True,
                              check=False, env=dict(os.environ, KERNEL_SYMBOL_MAP_CUPTI=str(native_programs.cupti),
                                                    **env))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        return json.loads((tmp_path / "rec" / "s.jsonl").read_text())

    rec = step(str(native_programs.load_driver), str(native_programs.driver), "_Z4stepv")
    assert rec["complete"] and rec["kernels"] == ["_Z4stepv"] and rec["processes"] == 1, rec
    assert {"load_driver", "libcuda.so.1"} <= set(rec["libraries"])
    rec = step(str(native_programs.load_driver), str(native_programs.driver), "_Z4stepv",
               KERNEL_SYMBOL_MAP_INJECTION="off")
    assert not rec["complete"] and "(load_driver) loaded the GPU driver" in rec["reason"], rec
    rec = step("sh", "-c", "true")  # a shell that ran only what the audit library followed
    assert rec["complete"] and rec["processes"] == 0 and "dash" in rec["libraries"], rec
