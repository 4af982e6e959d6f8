"""The audit library's records as the recorder reads them: every way a record can fail to clear a process.

Records here are written by hand in the library's format (``recorder/audit.py``), each one a case the
real processes of tests/test_native_children.py cannot make on demand: a line cut by a kill, a malformed
line, a posix_spawn child with no record, a system() shell matched to the right child. ELF files are cut
and corrupted to check that only a well-formed one without ``PT_INTERP`` reads as static.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map.consumer.select.recordings import read
from kernel_symbol_map.errors import RecordingError
from kernel_symbol_map.recorder import audit, native, parts
from kernel_symbol_map.recorder.environment import SPAWN_VARIABLE

BY = 100  # the recorded process that started the spawn


def _write(folder: Path, name: str, *lines: str, newline: bool = True) -> None:
    (folder / name).write_text("\n".join(lines) + ("\n" if newline else ""))


def _begin(how: str, pid: int, ppid: int, ns: int, exe: str = "/bin/prog") -> str:
    return f"begin\t{how}\t{pid}\t{ppid}\t77\t{ns}\t{exe}"


def _judge(folder: Path, loader: str = native.DYNAMIC, recorded: frozenset[tuple[int, str]] = frozenset(),
           ended_ns: int | None = None) -> audit.Verdict:
    return audit.judge(audit.read(folder).get("s", []), loader=loader, root=("ppid", BY), recorded=set(recorded),
                       ended_ns=ended_ns)


def test_a_whole_record_with_no_driver_clears_the_spawn(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/lib/libc.so.6", "end")
    verdict = _judge(tmp_path)
    assert verdict.problems == () and {"prog", "libc.so.6"} <= verdict.libraries


@pytest.mark.parametrize(("lines", "newline", "why"), [
    # killed between two lines, or in the middle of one: no end
    ((_begin("exec", 200, BY, 1), "lib\t/lib/libc.so.6"), True, "did not exit"),
    ((_begin("exec", 200, BY, 1), "lib\t/lib/libc.so.6", "end"), False, "did not exit"),
    ((_begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1", "end"), True, "loaded the GPU driver (libcuda.so.1)"),
    ((_begin("exec", 200, BY, 1), "lib\t/opt/rocm/lib/libamdhip64.so.6", "end"), True, "libamdhip64.so.6"),
    ((_begin("exec", 200, BY, 1), "lib\t/opt/rocm/lib/libhsa-runtime64.so", "end"), True, "libhsa-runtime64.so"),
    ((_begin("exec", 200, BY, 1), "lob\t/x", "end"), True, "not an audit record"),
    (("nothing like a begin", "end"), True, "not an audit record"),
    ((_begin("exec", 200, BY, 1), "exec\tdynamic\t5\t/bin/next"), True, "ran /bin/next, which the audit library"),
    ((_begin("exec", 200, BY, 1), "exec\tsetuid\t5\t/bin/su"), True, "a setuid program"),
    ((_begin("exec", 200, BY, 1), "exec\tunknown\t5\tnext"), True, "ran next, which the audit library"),
    ((_begin("exec", 200, BY, 1), "spawn\tdynamic\t201\t/bin/x", "end"), True, "started /bin/x, which the audit"),
    ((_begin("exec", 200, BY, 1), "shell\tdynamic\t5\t/bin/sh", "end"), True, "ran /bin/sh, which the audit"),
])
def test_a_record_that_may_hide_a_launch_says_why(tmp_path: Path, lines: tuple[str, ...], newline: bool,
                                                  why: str) -> None:
    _write(tmp_path, "s.200.1.audit", *lines, newline=newline)
    problems = "; ".join(_judge(tmp_path).problems)
    assert why in problems, problems


def test_an_exec_of_a_static_program_ends_a_record_whole(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "exec\tstatic\t5\t/sbin/ldconfig")
    assert _judge(tmp_path).problems == ()
    # ... but an exec that failed does not: the image went on, and its end was never written
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "exec\tstatic\t5\t/sbin/x", "exec-failed")
    assert "did not exit" in "; ".join(_judge(tmp_path).problems)


def test_an_exec_is_followed_into_the_next_image_of_the_same_process(tmp_path: Path) -> None:
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "exec\tdynamic\t2\t/bin/ls")
    _write(tmp_path, "s.201.4.audit", _begin("exec", 201, 200, 4, os.path.realpath("/bin/ls")),
           "lib\t/opt/libcuda.so", "end")
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "end")
    problems = _judge(tmp_path).problems
    assert len(problems) == 1 and "process 201 (ls) loaded the GPU driver" in problems[0], problems
    (tmp_path / "s.201.4.audit").unlink()  # what it exec'd left no record: the environment lost LD_AUDIT
    assert "ran /bin/ls, which the audit library did not follow" in "; ".join(_judge(tmp_path).problems)


def test_an_exec_whose_program_carries_another_spawn_id_is_followed_there(tmp_path: Path) -> None:
    """A recorded interpreter's forked child notes its exec under the id it started with; the program carries
    the id the interpreter's recorder gave it, and is judged with that spawn."""
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "end")
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "exec\tdynamic\t2\t/bin/true")
    assert "ran /bin/true, which the audit library did not follow" in "; ".join(_judge(tmp_path).problems)
    _write(tmp_path, "t.201.4.audit", _begin("exec", 201, 200, 4, "/bin/true"), "end")
    records = audit.read(tmp_path)
    verdict = audit.judge(records["s"], loader=native.DYNAMIC, root=("ppid", BY), recorded=set(),
                          index=audit.Index(records))
    assert verdict.problems == ()
    _write(tmp_path, "t.201.4.audit", _begin("exec", 201, 200, 1, "/bin/true"), "end")  # began before the exec
    records = audit.read(tmp_path)
    verdict = audit.judge(records["s"], loader=native.DYNAMIC, root=("ppid", BY), recorded=set(),
                          index=audit.Index(records))
    assert verdict.problems != ()


def test_an_exec_is_followed_only_into_the_program_it_started(tmp_path: Path) -> None:
    """A program exec'd with no LD_AUDIT that execs a followed one in turn: the later record is not the first
    program's."""
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "exec\tdynamic\t2\t/bin/true")
    _write(tmp_path, "s.200.4.audit", _begin("exec", 200, BY, 4, "/bin/ls"), "end")
    assert "ran /bin/true, which the audit library did not follow" in "; ".join(_judge(tmp_path).problems)
    _write(tmp_path, "s.200.4.audit", _begin("exec", 200, BY, 4, os.path.realpath("/bin/true")), "end")
    assert _judge(tmp_path).problems == ()
    # A script (or a bare name) runs as another program: the next image is taken as it; so where the path
    # meant the caller itself, or is gone by now.
    for path in ("unknown\t2\t/opt/run.sh", "dynamic\t2\t/proc/self/exe", f"dynamic\t2\t{tmp_path}/gone/python"):
        _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), f"exec\t{path}")
        assert _judge(tmp_path).problems == (), path


def test_a_path_with_a_newline_cannot_forge_an_end(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/tmp/x\\012end\\011\\134y")
    verdict = _judge(tmp_path)
    assert "did not exit" in "; ".join(verdict.problems) and "x\nend\t\\y" in verdict.libraries, verdict


@pytest.mark.parametrize(("lines", "why"), [
    ((_begin("exec", 200, BY, 1), "lib\t/lib/lib\0c.so", "end"), "not an audit record"),
    ((_begin("exec", 200, BY, 1, "/bin/pr\0og"), "end"), "not an audit record"),
    ((_begin("exec", 200, BY, 1), "lost\t201", "end"), "the record of its forked child 201 could not be written"),
    ((_begin("exec", 200, BY, 1), "unreadable\tlib", "end"), "not an audit record"),
    ((_begin("exec", 200, BY, 1), "exec\tdynamic\t2\t/bin/x\\000y"), "not an audit record"),
])
def test_a_record_with_a_line_lost_or_unreadable_is_not_whole(tmp_path: Path, lines: tuple[str, ...],
                                                                why: str) -> None:
    _write(tmp_path, "s.200.1.audit", *lines)
    assert why in "; ".join(_judge(tmp_path).problems)


def test_a_forked_child_that_never_execs_holds_the_driver_its_parent_had_loaded(tmp_path: Path) -> None:
    """A recorded parent (CUPTI speaks for it) with the driver mapped; its child, forked below Python, is not
    recorded and its own record lists nothing."""
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1", "end")
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "end")
    recorded = frozenset({(200, "77")})
    assert "process 201 (prog) loaded the GPU driver (libcuda.so.1)" in "; ".join(_judge(tmp_path, recorded=recorded)
                                                                              .problems)
    # forked to exec: it ran only its way there, even when the exec failed
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "exec\tdynamic\t4\t/nowhere",
           "exec-failed", "end")
    assert _judge(tmp_path, recorded=recorded).problems == ()


def test_an_incomplete_process_costs_its_window_only_for_its_own_launches(tmp_path: Path) -> None:
    """CUPTI's reasons are about the process's own launches, which go where its kernels go; a process it could
    not follow may outlive it, and costs every test."""
    log = tmp_path / "tests.log"
    log.write_text('+"t1"\n-"t1"\n+"t2"\n-"t2"\n')
    (tmp_path / "root.json").write_text(json.dumps({"pid": 1, "token": "root", "scope": "scope::",
                                                    "complete": True, "reason": "", "kernels": {}}))
    kid = {"pid": 2, "token": "kid", "scope": "t1", "complete": False, "kernels": {},
           "window": {"log": str(log), "start": 0, "end": 2}}
    for own, reason, costs in ((True, "CUPTI could not start: no GPU", {"t1"}),
                               (False, "could not follow a process it started (subprocess.Popen): OSError()",
                                {"t1", "t2"}),
                               (None, "CUPTI could not start: no GPU", {"t1", "t2"})):  # not said: every test
        (tmp_path / "kid.json").write_text(json.dumps({**kid, "reason": reason,
                                                       **({} if own is None else {"own_launches": own})}))
        records = parts.test_records(tmp_path, ["t1", "t2"], "c")
        assert {r["test"] for r in records if not r["complete"]} == costs, (own, records)
        assert all(reason in r["reason"] for r in records if not r["complete"])


FAILING_WATCHER = """
import json
import os
import subprocess
from kernel_symbol_map.recorder import spawns

class Watcher:  # a recorder whose expectation cannot be written (its folder went away)
    finished, unfollowed, problems, pid = False, False, [], os.getpid()

    def expect(self, exe, argv, replaces):
        raise OSError("the recording folder is gone")

    def trace(self, spawn):
        pass

watcher = Watcher()
spawns.watch(lambda: watcher)
subprocess.run(["true"], check=True)  # the start itself goes on
print(json.dumps([watcher.unfollowed, watcher.problems]))
"""


def test_a_start_the_recorder_could_not_follow_says_its_launches_are_not_all_its_own() -> None:
    """Its child may outlive the recorder's own process: the part says its launches are not all its own."""
    proc = subprocess.run([sys.executable, "-c", FAILING_WATCHER], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == [True, ["could not follow a process it started (subprocess.Popen): "
                                              "OSError('the recording folder is gone')"]], proc.stdout + proc.stderr


COUNTING_WATCHER = """
import json
import os
import subprocess
import sys
from kernel_symbol_map.recorder import spawns

class Watcher:  # a recorder that keeps what it was told
    finished, unfollowed, problems, pid = False, False, [], os.getpid()
    expected, traced = [], []

    def expect(self, exe, argv, replaces):
        self.expected.append([exe, argv, replaces])
        print(json.dumps(["expected", exe, argv, replaces]), file=sys.stderr, flush=True)
        return {spawns.SPAWN_VARIABLE: f"s{len(self.expected)}"}

    def trace(self, spawn):
        self.traced.append(spawn)
        print(f"traced {spawn}", file=sys.stderr, flush=True)

watcher = Watcher()
spawns.watch(lambda: watcher)
exec(sys.argv[1])
print(json.dumps([watcher.expected, watcher.traced, watcher.problems]))
"""


def _watched(snippet: str) -> tuple[list[list[Any]], list[str], list[str], list[str]]:
    """What a recorder is told of the process starts ``snippet`` makes, and what its children printed."""
    proc = subprocess.run([sys.executable, "-c", COUNTING_WATCHER, snippet], capture_output=True, text=True,
                          check=True)
    *printed, told = proc.stdout.splitlines()
    expected, traced, problems = json.loads(told)
    return expected, traced, problems, printed


def test_a_recorder_is_told_of_each_start_once_however_often_it_watches() -> None:
    expected, traced, problems, _ = _watched("spawns.watch(lambda: watcher)\nsubprocess.run(['true'], check=True)")
    assert [e[1:] for e in expected] == [[["true"], False]] and traced == ["s1"] and problems == [], expected


def test_a_finished_recorder_is_told_of_no_start() -> None:
    assert _watched("watcher.finished = True\nsubprocess.run(['true'], check=True)")[0] == []


@pytest.mark.parametrize(("snippet", "argv", "traced"), [
    # subprocess's own posix_spawn (close_fds=False lets it use one) is its Popen's start, told once
    ("subprocess.run(['/bin/true'], close_fds=False, check=True)", ["/bin/true"], ["s1"]),
    ("os.system('true')", ["/bin/sh", "-c", "true"], ["s1"]),
    # the environment was read before the event: nothing carried, nothing traced, its end never assumed
    ("os.waitpid(os.posix_spawn('/bin/true', ['true'], dict(os.environ)), 0)", ["true"], []),
    # an environment that cannot change: the child cannot claim, so nothing is traced
    ("import types\nsubprocess.run(['true'], env=types.MappingProxyType(dict(os.environ)), check=True)",
     ["true"], []),
])
def test_each_kind_of_start_is_told_once_and_traced_only_where_its_environment_carries_the_id(
        snippet: str, argv: list[str], traced: list[str]) -> None:
    expected, got, problems, _ = _watched(snippet)
    assert [e[1] for e in expected] == [argv] and got == traced and problems == [], (expected, got, problems)


def test_a_forked_child_does_not_tell_its_parents_recorder_of_its_starts() -> None:
    """The child has a recorder of its own (see .process): the parent's, copied into it, is not told."""
    expected, _, _, printed = _watched(
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    subprocess.run(['true'], check=True)\n"
        "    print(json.dumps(watcher.expected), flush=True)\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)")
    assert expected == [] and printed == ["[]"], (expected, printed)


def test_an_exec_carries_the_id_into_the_program_that_replaces_the_process() -> None:
    """Nothing is traced: the process goes on, as the new program, and its recorder (if any) speaks for it."""
    printenv = shutil.which("printenv")
    proc = subprocess.run([sys.executable, "-c", COUNTING_WATCHER,
                           f"os.execv({printenv!r}, ['printenv', {SPAWN_VARIABLE!r}])"],
                          capture_output=True, text=True, check=True)
    assert proc.stdout == "s1\n" and "traced" not in proc.stderr, proc.stdout + proc.stderr
    told = json.dumps(["expected", printenv, ["printenv", SPAWN_VARIABLE], True])
    assert proc.stderr.splitlines() == [told], proc.stderr


def test_a_start_with_an_environment_of_its_own_still_carries_the_id() -> None:
    """``env={"PATH": ...}``: the child gets the recorder's variables all the same, so it can claim."""
    child = f"import os; print(os.environ.get({SPAWN_VARIABLE!r}))"
    expected, traced, _, printed = _watched(
        f"subprocess.run([sys.executable, '-c', {child!r}], env={{'PATH': os.environ['PATH']}}, check=True)")
    assert len(expected) == 1 and traced == ["s1"] and printed == ["s1"], (expected, traced, printed)


def test_a_forked_child_that_exits_through_underscore_exit_is_whole(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "end")
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "end")
    assert _judge(tmp_path).problems == ()
    _write(tmp_path, "s.201.77.fork.audit", _begin("fork", 201, 200, 3), "lib\t/opt/libcuda.so.1")
    assert "loaded the GPU driver" in "; ".join(_judge(tmp_path).problems)


def test_posix_spawn_and_system_children_are_found_by_pid_and_by_time(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "spawn\tdynamic\t201\t/bin/x",
           "shell\tdynamic\t50\t/bin/sh", "end")
    _write(tmp_path, "s.201.10.audit", _begin("exec", 201, 200, 10, "/bin/x"), "end")
    # the posix_spawn child began after the shell call too, but it is the spawn's: the shell's is missing
    assert "ran /bin/sh, which the audit library did not follow" in "; ".join(_judge(tmp_path).problems)
    _write(tmp_path, "s.202.40.audit", _begin("exec", 202, 200, 40, "/bin/dash"), "end")  # began before the call
    assert "ran /bin/sh" in "; ".join(_judge(tmp_path).problems)
    _write(tmp_path, "s.203.60.audit", _begin("exec", 203, 200, 60, "/bin/dash"), "end")
    assert _judge(tmp_path).problems == ()
    _write(tmp_path, "s.201.10.audit", _begin("exec", 201, 999, 10, "/bin/x"), "end")  # not this parent's child
    assert "started /bin/x" in "; ".join(_judge(tmp_path).problems)
    _write(tmp_path, "s.201.10.audit", _begin("exec", 201, 200, 0, "/bin/x"), "end")  # its pid, used before
    assert "started /bin/x" in "; ".join(_judge(tmp_path).problems)


def test_a_dynamic_spawn_needs_its_own_first_record_a_static_one_does_not(tmp_path: Path) -> None:
    _write(tmp_path, "s.300.1.audit", _begin("exec", 300, 299, 1), "end")  # a descendant, not the spawn's child
    assert "no audit record" in "; ".join(_judge(tmp_path).problems)
    assert "no audit record" in "; ".join(_judge(tmp_path, loader=native.SCRIPT).problems)
    assert _judge(tmp_path, loader=native.STATIC).problems == ()
    assert "a setuid program" in "; ".join(_judge(tmp_path, loader=native.SETUID).problems)
    replaced = audit.judge(audit.read(tmp_path)["s"], loader=native.DYNAMIC, root=("pid", 300), recorded=set())
    assert replaced.problems == ()


def test_a_recorded_process_speaks_for_itself_and_a_late_one_reopens_the_spawn(tmp_path: Path) -> None:
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1")
    assert _judge(tmp_path, recorded=frozenset({(200, "77")})).problems == ()
    assert _judge(tmp_path, recorded=frozenset({(200, "78")})).problems != ()  # another process with that pid
    assert not _judge(tmp_path, ended_ns=5).late
    assert _judge(tmp_path, ended_ns=0).late  # it began after the spawn was seen to end


def test_what_a_recorded_process_started_is_still_looked_for(tmp_path: Path) -> None:
    """Its part file speaks for its own launches and its end, not for a child it started below the recorder."""
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1",
           "spawn\tsetuid\t201\t/bin/su")
    problems = "; ".join(_judge(tmp_path, recorded=frozenset({(200, "77")})).problems)
    assert "started /bin/su" in problems and "loaded the GPU driver" not in problems and "did not exit" not in problems


def _spawn(folder: Path, spawn: str, ended: dict[str, int] | None, scope: str = "scope::", log: str = "",
           at: int = 0) -> None:
    (folder / f"{spawn}.spawn").write_text(json.dumps(
        {"spawn": spawn, "by": "100-x", "pid": BY, "exe": "/bin/prog", "argv": ["prog"], "replaces": False,
         "loader": native.DYNAMIC, "scope": scope, "log": log, "at": at}))
    if ended is not None:
        (folder / f"{spawn}.ended").write_text(json.dumps(ended))


def test_a_process_that_began_after_its_spawn_was_seen_to_end_reopens_it(tmp_path: Path) -> None:
    """A spawn's id left in an environment (os.system's, kept by the recorder's own process) reaches a process
    started later: what it did is not the spawn's window's alone."""
    _spawn(tmp_path, "s", {"end": 3, "ns": 50})
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "end")
    _write(tmp_path, "s.300.90.audit", _begin("exec", 300, 1, 90), "lib\t/opt/libcuda.so.1", "end")
    (unseen,) = parts.read_unseen(tmp_path)
    assert unseen.problems and unseen.end is None
    (tmp_path / "s.300.90.audit").unlink()
    (unseen,) = parts.read_unseen(tmp_path)
    assert not unseen.problems and unseen.end == 3


def test_a_process_no_recorder_saw_makes_the_test_that_started_it_incomplete(tmp_path: Path) -> None:
    """Started and ended within the first test (after its line in the tests log): no test began in its life,
    but the test it was started in is its own."""
    first, second = "tests/test_m.py::test_first", "tests/test_m.py::test_second"
    log = tmp_path / "tests.log"
    log.write_text("".join(f"+{json.dumps(t)}\n-{json.dumps(t)}\n" for t in (first, second)))
    _spawn(tmp_path, "s", {"end": 1, "ns": 50}, scope=first, log=str(log), at=1)
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1", "end")
    (tmp_path / "100-x.json").write_text(json.dumps(  # the recorded process that started it
        {"pid": BY, "token": "100-x", "scope": "scope::", "complete": True, "reason": "", "kernels": {}}))
    records = {r["test"]: r for r in parts.test_records(tmp_path, [first, second], "c")}
    assert not records[first]["complete"] and "loaded the GPU driver" in records[first]["reason"], records[first]
    assert records[second]["complete"], records[second]


def test_a_recorded_process_claims_a_spawn_only_as_the_program_it_was_to_run(tmp_path: Path) -> None:
    """The spawn's program, process 200, loaded the driver unseen; process 201, a recorded Python process the
    same parent started with the id left in its environment, is another program: its claim does not stand for
    200. Where 201 is the spawn's program, 200 is another process, and the claim stands."""
    _spawn(tmp_path, "s", {"end": 3, "ns": 50})
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1", "end")
    claim = {"pid": 201, "ppid": BY, "start": "88", "spawn": "s", "forked": False}
    for exe, claimed in ((["/usr/bin/python3"], False), (["/bin/prog"], True)):
        (tmp_path / "201-x.started").write_text(json.dumps({**claim, "exe": exe}))
        (unseen,) = parts.read_unseen(tmp_path)
        assert unseen.claimed == claimed, (exe, unseen)
        assert claimed or "loaded the GPU driver" in unseen.why(), (exe, unseen)


def test_multiprocessings_resource_tracker_is_a_process_the_recorder_accounts_for(tmp_path: Path) -> None:
    """The tracker writes no part file but a ``.tracker`` one: its records do not reopen the spawn that made it."""
    _spawn(tmp_path, "s", {"end": 3, "ns": 50})
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1")
    (unseen,) = parts.read_unseen(tmp_path)
    assert unseen.problems, unseen
    (tmp_path / "200-t.tracker").write_text(json.dumps({"pid": 200, "start": "77"}))
    (unseen,) = parts.read_unseen(tmp_path)
    assert unseen.problems == (), unseen


def test_an_unseen_process_s_window_over_tests_this_merge_does_not_record_is_read_for_those_it_does(
        tmp_path: Path) -> None:
    first, other, second = "tests/test_m.py::test_first", "tests/test_m.py::test_other", "tests/test_m.py::test_second"
    log = tmp_path / "tests.log"
    log.write_text("".join(f"+{json.dumps(t)}\n-{json.dumps(t)}\n" for t in (first, other, second)))
    _spawn(tmp_path, "s", None, scope=first, log=str(log), at=1)  # no end seen: every test from its start on
    _write(tmp_path, "s.200.1.audit", _begin("exec", 200, BY, 1), "lib\t/opt/libcuda.so.1", "end")
    (tmp_path / "100-x.json").write_text(json.dumps(
        {"pid": BY, "token": "100-x", "scope": "scope::", "complete": True, "reason": "", "kernels": {}}))
    records = {r["test"]: r for r in parts.test_records(tmp_path, [first, second], "c")}
    assert all(not r["complete"] and "loaded the GPU driver" in r["reason"] for r in records.values()), records


def test_where_proc_cannot_be_listed_every_spawn_may_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not carried is not ended: without /proc nothing says a process is gone, so its window stays open."""
    from kernel_symbol_map.recorder import spawns

    def unlisted(path: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(spawns.os, "scandir", unlisted)
    assert spawns.alive({"s1", "s2"}, set) == {"s1", "s2"}


def test_a_spawn_lives_while_a_process_carries_its_id_as_the_variable_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_symbol_map.recorder import spawns

    entry = type("Entry", (), {"name": "4242"})
    monkeypatch.setattr(spawns.os, "scandir", lambda path: iter([entry()]))
    monkeypatch.setattr(spawns, "tracker", lambda pid: False)
    monkeypatch.setattr(spawns, "started", lambda pid: "1")
    variable = f"{SPAWN_VARIABLE}=".encode()
    for environ, alive in [(b"PATH=/bin\0" + variable + b"s1\0", {"s1"}),
                           (b"X" * len(variable) + b"s1\0", set()),  # another variable that holds the id there
                           (b"PATH=/bin\0", set())]:
        monkeypatch.setattr(spawns, "_environ", lambda pid, environ=environ: environ)
        assert spawns.alive({"s1", "s2"}, set) == alive, environ
        assert spawns.alive({"s1"}, lambda: {(4242, "1")}) == set()  # its own recorder speaks for it


@pytest.mark.parametrize(("before", "libraries", "after"), [
    ({}, ("/a.so", "/i.so", "/c.so"),
     {native.LOADER_VARIABLE: "/a.so", native.DRIVER_VARIABLE: "/i.so", native.CUPTI_VARIABLE: "/c.so"}),
    # a profiler's injection is left alone, and with it the CUPTI it chose
    ({native.DRIVER_VARIABLE: "/profiler.so"}, ("/a.so", "/i.so", "/c.so"),
     {native.LOADER_VARIABLE: "/a.so", native.DRIVER_VARIABLE: "/profiler.so"}),
    ({native.CUPTI_VARIABLE: "/mine.so"}, ("/a.so", "/i.so", "/c.so"),
     {native.LOADER_VARIABLE: "/a.so", native.DRIVER_VARIABLE: "/i.so", native.CUPTI_VARIABLE: "/mine.so"}),
    ({native.LOADER_VARIABLE: "/other.so"}, ("/a.so", "/i.so", None),
     {native.LOADER_VARIABLE: "/a.so:/other.so", native.DRIVER_VARIABLE: "/i.so"}),
    ({}, (None, None, "/c.so"), {}),
])
def test_a_child_s_environment_gets_the_audit_library_and_the_injection_where_they_are_installed(
        monkeypatch: pytest.MonkeyPatch, before: dict[str, str], libraries: tuple[str | None, ...],
        after: dict[str, str]) -> None:
    from kernel_symbol_map.recorder import spawns

    audit_library, injection, cupti = libraries
    monkeypatch.setattr(native, "audit_library", lambda: audit_library)
    monkeypatch.setattr(native, "injection_library", lambda: injection)
    monkeypatch.setattr(native, "cupti_library", lambda: cupti)
    env = dict(before)
    spawns.audited(env)
    assert env == after


@pytest.mark.parametrize(("reads", "proc", "environ"), [
    ([(b"K=v", b"")], "live", b"K=v"),  # an environment, though the command line reads empty
    ([(b"", b"prog\0")], "live", b""),  # settled: a program that cleared its environment
    ([(b"", b"")], None, b""),  # gone
    ([(b"", b"")], "zombie", b""),
    ([(b"", b"")], "kernel", b""),
    ([(b"", b""), (b"", b""), (b"K=v", b"prog\0")], "live", b"K=v"),  # caught in exec: read again until it settles
    ([(b"", b"")] * 1000, "live", None),  # never settles: it may carry anything
])
def test_a_process_caught_between_exec_and_its_new_stack_is_read_again(
        monkeypatch: pytest.MonkeyPatch, reads: list[tuple[bytes, bytes]], proc: str | None,
        environ: bytes | None) -> None:
    from kernel_symbol_map.recorder import spawns, tree

    left = list(reads)

    def read(pid: int, name: str) -> bytes:
        now = left[0] if name == "environ" else left.pop(0)
        return now[0] if name == "environ" else now[1]

    found = None if proc is None else tree.Proc(4242, 1, "1", proc != "zombie", proc == "kernel")
    monkeypatch.setattr(spawns, "_read", read)
    monkeypatch.setattr(spawns.tree, "stat", lambda pid: found)
    monkeypatch.setattr(spawns, "_SETTLE_SECONDS", 0.05)
    assert spawns._environ(4242) == environ


def test_a_started_program_is_named_as_exec_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_symbol_map.recorder import spawns

    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (tmp_path / "link").symlink_to(tool)
    monkeypatch.chdir(tmp_path)
    path = {"PATH": str(tool.parent)}
    assert spawns.resolve(str(tmp_path / "link"), None, None) == str(tool)  # absolute: resolved
    assert spawns.resolve("bin/tool", None, "/elsewhere") == "/elsewhere/bin/tool"  # relative to its cwd
    assert spawns.resolve(b"./link", None, None) == str(tool)  # relative to ours
    assert spawns.resolve("tool", path, None) == str(tool)  # a bare name: through the child's PATH
    assert spawns.resolve("link", path, None) == "link"  # not found: as it was given
    (tool.parent / "alias").symlink_to(tool)  # python3 -> python3.11 on PATH: the file it runs is the target
    assert spawns.resolve("alias", path, None) == str(tool)


def test_multiprocessings_resource_tracker_is_told_by_its_command_line() -> None:
    from kernel_symbol_map.recorder import spawns

    program = "from multiprocessing.resource_tracker import main; import sys; print(flush=True); sys.stdin.read()"
    with subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == b"\n"  # it runs the program
            assert spawns.tracker(child.pid)
        finally:
            child.communicate(b"")
    assert not spawns.tracker(os.getpid())
    assert not spawns.tracker(child.pid)  # gone: its command line cannot be read


IDENTITY = "import json; from kernel_symbol_map.recorder import spawns; print(json.dumps(spawns.identity()))"


def test_an_interpreter_names_itself_by_its_binary_and_by_the_script_its_shebang_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a start expects is the file exec ran: the binary, however the interpreter was called, and a
    ``#!`` script (with options before it); ``-c`` and ``-m`` run no script of their own."""
    import kernel_symbol_map

    binary = os.path.realpath("/proc/self/exe")  # this interpreter: the children below run the same binary
    script = tmp_path / "tool"
    script.write_text(f"#!/usr/bin/env python3\n{IDENTITY}\n")
    env = {**os.environ, "PYTHONPATH": str(Path(kernel_symbol_map.__file__).parents[1])}

    def identity(*argv: str, argv0: str = sys.executable) -> tuple[list[str], bool]:
        out = subprocess.run([argv0, *argv], executable=sys.executable, capture_output=True, text=True, env=env,
                             check=True).stdout
        exes, spawned = json.loads(out)
        return exes, spawned

    exes, spawned = identity("-c", IDENTITY, argv0="/elsewhere/python3")  # sys.executable names no file
    assert binary in exes and not spawned, exes
    exes, _ = identity("-u", str(script))
    assert exes == sorted({binary, os.path.realpath(sys.executable), str(script)}), exes
    exes, spawned = identity("-c", IDENTITY, "--multiprocessing-fork")
    assert str(script) not in exes and spawned
    plain = tmp_path / "plain.py"  # no #! line: python ran it, not exec
    plain.write_text(IDENTITY + "\n")
    assert str(plain) not in identity(str(plain))[0]
    # an option's value read as the script names no file: nothing is added
    assert identity("-X", "utf8", str(plain))[0] == sorted({binary, os.path.realpath(sys.executable)})
    assert identity("-c", f"from multiprocessing import util; {IDENTITY}")[1]  # forkserver's and spawn's programs
    # -c and -m run no script, though a #! file of the program's or the module's name lies in the folder
    (tmp_path / "mod.py").write_text(IDENTITY + "\n")
    for name in ("mod", IDENTITY):
        (tmp_path / name).write_text(f"#!/usr/bin/env python3\n{IDENTITY}\n")
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert identity("-m", "mod")[0] == identity("-c", IDENTITY)[0] == sorted({binary, os.path.realpath(sys.executable)})


def test_records_that_carry_no_spawn_id_are_judged_for_every_test(tmp_path: Path) -> None:
    _write(tmp_path, "-.300.1.audit", _begin("exec", 300, 1, 1, "/opt/app"), "lib\t/opt/libcuda.so.1", "end")
    (unseen,) = parts.read_unseen(tmp_path)
    assert "a process that carried no spawn id" in unseen.why() and "(app) loaded the GPU driver" in unseen.why()
    records = parts.test_records(tmp_path, ["t1", "t2"], "c")
    assert all(not r["complete"] and "loaded the GPU driver" in r["reason"] for r in records), records


def test_native_kind_reads_static_only_from_a_whole_elf_file(tmp_path: Path) -> None:
    static = shutil.copy("/sbin/ldconfig", tmp_path / "static")
    assert native.kind(str(static)) == native.STATIC
    assert native.kind("/bin/ls") == native.DYNAMIC
    data = Path(static).read_bytes()
    for name, text in [("cut-header", data[:40]), ("cut-table", data[:70]), ("not-elf", b"MZ" + data[2:]),
                       ("no-headers", data[:0x38] + b"\0\0" + data[0x3A:]),
                       ("far-headers", data[:0x20] + struct.pack("<Q", 1 << 63) + data[0x28:])]:
        (tmp_path / name).write_bytes(text)
        assert native.kind(str(tmp_path / name)) == native.UNKNOWN, name
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert native.kind(str(tmp_path / "script")) == native.SCRIPT
    setuid = shutil.copy("/bin/ls", tmp_path / "setuid")
    Path(setuid).chmod(0o4755)
    assert native.kind(str(setuid)) == native.SETUID
    assert native.kind(str(tmp_path / "missing")) == native.UNKNOWN
    assert struct.unpack_from("<H", data, 0x38)[0] > 0  # e_phnum, which no-headers zeroed


def test_native_kind_trusts_no_loader_library_or_static_program_that_names_a_driver(tmp_path: Path) -> None:
    """No PT_INTERP is not enough: the loader run directly (``ld.so ./cuda_app``) runs anything, and glibc's
    static dlopen can load the driver, whose name such a program carries."""
    loader = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    assert native.kind(loader) == native.UNKNOWN  # ET_DYN, no PT_INTERP, a DT_SONAME
    libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6") if os.path.exists(p))
    assert native.kind(os.path.realpath(libm)) == native.UNKNOWN  # a library run directly: no PT_INTERP either
    static = tmp_path / "static"
    static.write_bytes(Path("/sbin/ldconfig").read_bytes())
    assert native.kind(str(static)) == native.STATIC
    for name in ("libcuda.so.1", "libamdhip64.so", "libhsa-runtime64.so.1"):
        named = tmp_path / f"names-{name}"
        named.write_bytes(Path("/sbin/ldconfig").read_bytes() + name.encode() + b"\0")
        assert native.kind(str(named)) == native.UNKNOWN, name


@pytest.mark.parametrize("libraries", ['"libc.so.6"', '[1]', '["/lib/libc.so.6"]', '[""]'])
def test_a_record_whose_libraries_are_not_file_names_is_a_clear_error(tmp_path: Path, libraries: str) -> None:
    path = tmp_path / "r.jsonl"
    good = {"test": "t0", "kernels": [], "complete": True, "commit": "", "libraries": ["libc.so.6"]}
    path.write_text(json.dumps(good) + "\n" +
                    '{"test": "t1", "kernels": [], "complete": true, "commit": "", "libraries": ' + libraries + "}\n")
    with pytest.raises(RecordingError, match=rf"r\.jsonl:2: \"libraries\" must be a list of file names"):
        read([path])


def test_libraries_are_read_and_merged_as_one_tests_union(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"test": "t", "kernels": [], "complete": True, "commit": "", "libraries": ["x.so"]}) + "\n")
    b.write_text(json.dumps({"test": "t", "kernels": [], "complete": True, "commit": "", "libraries": ["y.so"]}) + "\n")
    (rec,) = read([a, b])
    assert rec.libraries == {"x.so", "y.so"}
    b.write_text(json.dumps({"test": "t", "kernels": [], "complete": True, "commit": ""}) + "\n")
    (rec,) = read([a, b])
    assert rec.libraries is None  # one part could not say: the test's libraries are not known
