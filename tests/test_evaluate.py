"""Shadow mode never reports a miss as none (issue 26): node ids as pytest cuts them, every result file, total readers.

Real pytest writes the JUnit XML where the point is how pytest writes it;
the selection comes from the real ``select``; ``evaluate`` runs through
``main([...])``, so a traceback fails the test instead of printing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.select.junit import junit_key, read, unprefixed
from test_ci_recipes import GELU, SILU, pytest_run, selection_for

PARAMETRIZED = '''
import pytest

@pytest.mark.parametrize("where", ["a::b", "x/y.py::z", "[c]"])
def test_param(where):
    assert where != "a::b", "a regression the change caused"

class TestC:
    @pytest.mark.parametrize("where", ["p::q"])
    def test_m(self, where):
        assert False, "a regression in a method"
'''


def evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["evaluate", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def test_a_parametrize_id_that_holds_colons_is_one_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pytest cuts a node id at its first ``[`` before it splits at ``::``: so must the match with JUnit."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_p.py").write_text(PARAMETRIZED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    results = tmp_path / "results.xml"
    pytest_run(tmp_path, "tests", f"--junitxml={results}")
    ids = ["tests/test_p.py::test_param[a::b]", "tests/test_p.py::test_param[x/y.py::z]",
           "tests/test_p.py::test_param[[c]]", "tests/test_p.py::TestC::test_m[p::q]"]
    selection = selection_for(tmp_path, {t: [SILU] for t in ids}, "csrc/gelu.cu")  # reaches none: all skipped
    code, found, err = evaluate(capsys, "--selection", str(selection), "--junit", str(results))
    assert found["not_in_results"] == [] and found["ran"] == 4, found
    assert sorted(m["test"] for m in found["misses"]) == [ids[3], ids[0]]
    assert code == 1 and "ERROR miss: tests/test_p.py::test_param[a::b]" in err
    assert junit_key(ids[3]) == ("tests.test_p.TestC", "test_m[p::q]")
    assert junit_key("tests/test_p.py") == ("", "tests.test_p")  # a module's collection error, as pytest names it


RUNNERS = '''
import os
import pytest

@pytest.fixture
def device():
    if os.environ["RUNNER"] == "old-driver":
        raise RuntimeError("the kernel faults on this driver")

def test_a(device):
    pass

def test_b():
    pass

def test_new():  # no recording knows it: it ran, and counts
    pass
'''


def test_a_failure_on_any_runner_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One test on two runners: an error on one (pytest's ``<error>``, in setup) is a miss, in either order."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_r.py").write_text(RUNNERS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    xml = {}
    for runner in ("old-driver", "new-driver"):
        xml[runner] = tmp_path / f"{runner}.xml"
        monkeypatch.setenv("RUNNER", runner)
        pytest_run(tmp_path, "tests", f"--junitxml={xml[runner]}")
    assert "<error" in xml["old-driver"].read_text()
    recorded = {"tests/test_r.py::test_a": [SILU], "tests/test_r.py::test_b": [GELU]}
    selection = selection_for(tmp_path, recorded, "csrc/gelu.cu")  # test_a skipped
    for order in (["old-driver", "new-driver"], ["new-driver", "old-driver"]):
        code, found, err = evaluate(capsys, "--selection", str(selection),
                                    *(a for r in order for a in ("--junit", str(xml[r]))))
        assert code == 1, (order, found)
        assert [m["test"] for m in found["misses"]] == ["tests/test_r.py::test_a"]
        assert "the kernel faults on this driver" in found["misses"][0]["message"]
        assert found["ran"] == 3 and found["would_skip"] == ["tests/test_r.py::test_a"]


PREFIXED = '''
import os

def test_k():
    assert not os.environ.get("FAIL"), "a regression the change caused"

def test_ok():
    pass
'''


def prefixed_project(tmp_path: Path) -> tuple[Path, Path]:
    """tests/test_p.py in a project; a change that skips test_k (it fails, when FAIL is set) and runs test_ok."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_p.py").write_text(PREFIXED)
    (project / "pytest.ini").write_text("[pytest]\n")
    recorded = {"tests/test_p.py::test_k": [SILU], "tests/test_p.py::test_ok": [GELU]}
    selection = selection_for(tmp_path, recorded, "csrc/gelu.cu")
    assert json.loads(selection.read_text())["skip"] == ["tests/test_p.py::test_k"]
    return project, selection


def test_a_junit_prefix_is_cut_off_and_unknown_it_is_never_no_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``pytest --junit-prefix gpu`` writes ``gpu.tests.test_p``: the skipped test's failure is not "no miss"."""
    project, selection = prefixed_project(tmp_path)
    results, comment = tmp_path / "results.xml", tmp_path / "comment.md"
    monkeypatch.setenv("FAIL", "1")
    pytest_run(project, "tests", f"--junitxml={results}", "--junit-prefix=gpu")
    assert 'classname="gpu.tests.test_p"' in results.read_text()
    code, found, err = evaluate(capsys, "--selection", str(selection), "--junit", str(results),
                                "--markdown", str(comment))
    assert code == 3 and found["misses"] == [] and found["cannot_tell"] is True, (code, found)
    assert found["not_in_results"] == ["tests/test_p.py::test_k"]
    assert found["failed_unknown"] == ["gpu.tests.test_p::test_k"] and found["prefix_hint"] == "gpu"
    text = comment.read_text()
    assert "no miss" not in text and "cannot tell whether there is a miss" in text, text
    assert "1 skipped test is not in the results and 1 failure matches no selected test" in text
    assert "ERROR cannot tell whether there is a miss" in err and "--junit-prefix gpu" in err
    # given the prefix, the same results say what they hold: a miss
    code, found, err = evaluate(capsys, "--selection", str(selection), "--junit", str(results),
                                "--junit-prefix", "gpu", "--markdown", str(comment))
    assert code == 1 and [m["test"] for m in found["misses"]] == ["tests/test_p.py::test_k"], (code, found)
    assert found["cannot_tell"] is False and found["not_in_results"] == [] and found["failed_unknown"] == []
    assert found["ran"] == 2 and "1 miss**" in comment.read_text()
    assert unprefixed("gpu", "gpu") == "" and unprefixed("gpux.t", "gpu") == "gpux.t"  # a module's case; a package
    # a step's results are matched by its key: a prefix there would be ignored
    code = main(["evaluate", "--selection", str(selection), "--junit-step", f"kernels={results}",
                 "--junit-prefix", "gpu"])
    assert code == 2 and "--junit-prefix is for --junit" in capsys.readouterr().err


def test_results_from_another_rootdir_cannot_say_no_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest run with tests/ as its rootdir names test_p.py::test_k: no prefix maps it back, and nothing is assumed."""
    project, selection = prefixed_project(tmp_path)
    (project / "tests" / "pytest.ini").write_text("[pytest]\n")
    results = tmp_path / "results.xml"
    monkeypatch.setenv("FAIL", "1")
    pytest_run(project / "tests", f"--junitxml={results}")
    assert 'classname="test_p"' in results.read_text()
    capsys.readouterr()
    code = main(["evaluate", "--selection", str(selection), "--junit", str(results),
                 "--markdown", str(tmp_path / "comment.md")])
    out, err = capsys.readouterr()
    assert code == 3 and "CANNOT TELL whether there is a miss: 1 skipped test is not in the results" in out, out
    assert "ERROR cannot tell" in err and "ERROR miss" not in err
    assert "no miss" not in (tmp_path / "comment.md").read_text()
    code, found, _ = evaluate(capsys, "--selection", str(selection), "--junit", str(results))
    assert code == 3 and found["failed_unknown"] == ["test_p::test_k"] and found["prefix_hint"] is None
    # the same run with nothing failing: the skipped test is still not in the results, but nothing can be a miss
    monkeypatch.delenv("FAIL")
    pytest_run(project / "tests", f"--junitxml={results}")
    code, found, _ = evaluate(capsys, "--selection", str(selection), "--junit", str(results))
    assert code == 0 and found["cannot_tell"] is False and found["not_in_results"] == ["tests/test_p.py::test_k"]


def junit(path: Path, *cases: tuple[str, float, str]) -> Path:
    """A result file: (name, seconds, "" or "failure" or "error") per test case."""
    body = "".join(f'<testcase classname="tests.test_k" name="{n}" time="{s}">'
                   + (f'<{how} message="{n} broke"/>' if how else "") + "</testcase>" for n, s, how in cases)
    path.write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>")
    return path


def test_a_step_failed_if_any_case_of_any_shard_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every shard's file counts, and every case in it (the failure is neither first nor in the last file)."""
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")  # kernels skipped
    shard1 = junit(tmp_path / "kernels.1.xml", ("t1", 1.0, ""), ("t2", 2.0, ""), ("t3", 4.0, "error"))
    shard0 = junit(tmp_path / "kernels.0.xml", ("t0", 8.0, ""))
    models = junit(tmp_path / "models.xml", ("m", 16.0, "failure"))  # ran: not a miss
    code, found, _ = evaluate(capsys, "--selection", str(selection), "--junit-step", f"kernels={shard1}",
                              "--junit-step", f"kernels={shard0}", "--junit-step", f"models={models}")
    assert code == 1 and [m["test"] for m in found["misses"]] == ["kernels"]
    assert "1 failed, e.g. tests.test_k::t3: t3 broke" == found["misses"][0]["message"]
    assert found["seconds_saved"] == 15.0 and found["seconds_total"] == 31.0 and found["ran"] == 2
    # the same shards, each passing: no miss, and still every case's time
    shard1 = junit(tmp_path / "kernels.1.xml", ("t1", 1.0, ""), ("t2", 2.0, ""), ("t3", 4.0, ""))
    code, found, _ = evaluate(capsys, "--selection", str(selection), "--junit-step", f"kernels={shard1}",
                              "--junit-step", f"kernels={shard0}", "--junit-step", f"models={models}")
    assert code == 0 and found["misses"] == [] and found["seconds_saved"] == 15.0


def test_a_step_whose_results_come_under_another_key_cannot_say_no_miss(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """--junit-step kernel=... for the step kernels: the skipped step is not in the results, and kernel failed."""
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")  # kernels skipped
    kernel = junit(tmp_path / "kernel.xml", ("t0", 1.0, "failure"))
    models = junit(tmp_path / "models.xml", ("m", 2.0, ""))
    code, found, err = evaluate(capsys, "--selection", str(selection), "--junit-step", f"kernel={kernel}",
                                "--junit-step", f"models={models}")
    assert code == 3 and found["cannot_tell"] is True and found["failed_unknown"] == ["kernel"], (code, found)
    assert found["not_in_results"] == ["kernels"] and "ERROR cannot tell" in err


def test_a_case_with_a_failure_is_failed_whatever_follows_it(tmp_path: Path) -> None:
    """Runners order a case's children as they like: a ``<skipped>`` after the ``<failure>`` does not undo it."""
    path = tmp_path / "results.xml"
    path.write_text('<testsuite><testcase classname="t" name="a"><failure message="boom"/><skipped/></testcase>'
                    '<testcase classname="t" name="b"><skipped/><error message="setup broke"/></testcase>'
                    '<testcase classname="t" name="c"><skipped message="no GPU"/></testcase></testsuite>')
    assert [(r.name, r.outcome, r.message) for r in read(path)] \
        == [("a", "failed", "boom"), ("b", "failed", "setup broke"), ("c", "skipped", "")]


def real_selection(tmp_path: Path) -> dict[str, Any]:
    selection: dict[str, Any] = json.loads(selection_for(tmp_path, {"tests/test_k.py::test_a": [SILU]},
                                                         "csrc/gelu.cu").read_text())
    assert selection["skip"] == ["tests/test_k.py::test_a"]
    return selection


MALFORMED_SELECTIONS: dict[str, Any] = {  # each: what a field of a real selection becomes
    "a list where a node id belongs": ("decisions", [{"test": ["tests/test_k.py::test_a"], "run": False}]),
    "an int node id": ("decisions", [{"test": 7, "run": False}]),
    "an int changed": ("changed", 3),
    "a list of lists to skip": ("skip", [["tests/test_k.py::test_a"]]),
    "an int skip": ("skip", 1),
    "decisions a string": ("decisions", "tests/test_k.py::test_a"),
    "a decision that is a string": ("decisions", ["tests/test_k.py::test_a"]),
    "a fallback that is a dict": ("fallback", {"why": "x"}),
    "another version": ("schema", "kernel-symbol-map/selection/2"),
    "no skip list": ("skip", None),
    "a skip its decisions do not name": ("skip", ["tests/test_k.py::test_b"]),
    "a skip whose decision runs it": ("decisions", [{"test": "tests/test_k.py::test_a", "run": True, "why": "x"}]),
}
MALFORMED_FILES: dict[str, bytes] = {
    "not JSON": b"{not json",
    "not UTF-8": b'{"schema": "kernel-symbol-map/selection/1", "skip": ["\xff"]}',
    "nested too deeply": b"[" * 100_000,
    "a list": b"[]",
    "empty": b"",
}


OTHER_CASES = ["a folder", "missing", "--markdown into a folder that does not exist", "--junit-step with no file",
               "results that are XML but not JUnit", "--junit beside --junit-step"]


@pytest.mark.parametrize("case", [*MALFORMED_SELECTIONS, *MALFORMED_FILES, *OTHER_CASES])
def test_evaluate_on_malformed_input_says_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         case: str) -> None:
    results = junit(tmp_path / "results.xml", ("test_a", 1.0, "failure"))
    selection = tmp_path / "selection.json"  # real_selection writes it: select's own output
    document = real_selection(tmp_path)
    args = ["--junit", str(results)]
    if case in MALFORMED_SELECTIONS:
        key, value = MALFORMED_SELECTIONS[case]
        document[key] = value
        if value is None:
            del document[key]
        selection.write_text(json.dumps(document))
    elif case in MALFORMED_FILES:
        selection.write_bytes(MALFORMED_FILES[case])
    elif case == "a folder":
        selection = tmp_path
    elif case == "missing":
        selection = tmp_path / "missing.json"
    elif case.startswith("--markdown"):
        args += ["--markdown", str(tmp_path / "no" / "such" / "comment.md")]
    elif case == "results that are XML but not JUnit":  # no <testcase> in it: nothing would have failed
        results.write_text("<html><body><p>502 Bad Gateway</p></body></html>")
    elif case == "--junit beside --junit-step":  # one of them would be ignored
        args += ["--junit-step", f"kernels={results}"]
    else:
        args = ["--junit-step", "kernels="]
    capsys.readouterr()
    code = main(["evaluate", "--selection", str(selection), *args])
    out, err = capsys.readouterr()
    assert code != 0 and err.startswith("ERROR ") and len(err.splitlines()) == 1, (code, err)
    if case.startswith("--junit"):
        assert code == 2, err  # a usage error: the command was given something it cannot do
    assert "Traceback" not in err and "ERROR miss" not in err  # the input's fault, named as such: never a report
