"""The CI loop closed exactly (issue 19): exact deselection, shadow-mode evaluation, and Buildkite's steps.

Real pytest runs in subprocesses; the selection comes from the real
``select`` command, on a map and recordings written here.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SELECT_STEPS = ROOT / "examples" / "ci" / "buildkite" / "select_steps.py"
COMMIT = "b" * 40
SILU, GELU, OTHER = "_Z4siluPf", "_Z4geluPf", "_Z5otherPf"

MAIN_TESTS = '''
def test_silu():
    pass

def test_gelu():
    pass
'''
PR_TESTS = '''
import pytest

def test_silu():
    pass

def test_silu_fp8():  # new in the pull request: no recording knows it
    pass

@pytest.mark.parametrize("n", [1, 2])  # parametrized in the pull request: new node ids
def test_gelu(n):
    pass
'''


def ksm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          cwd=cwd, check=False)


def pytest_run(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", *args],
                          capture_output=True, text=True, cwd=where, check=False)


def write_map(path: Path) -> Path:
    objects = [{"source": s, "target": "ops", "object": f"{s}.o", "device": True, "symbols": [k], "deps": [s]}
               for s, k in (("csrc/silu.cu", SILU), ("csrc/gelu.cu", GELU), ("csrc/other.cu", OTHER))]
    doc = {"version": 1, "commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": [],
           "incomplete": False, "errors": [], "stats": {}, "objects": objects}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def selection_for(tmp: Path, recorded: dict[str, list[str]], changed: str) -> Path:
    recordings = tmp / "recordings.jsonl"
    recordings.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": COMMIT}) + "\n"
                                  for t, k in recorded.items()))
    proc = ksm("select", "--map", str(write_map(tmp / "map.json.gz")), "--recordings", str(recordings),
               "--changed", changed, "--json")
    assert proc.returncode == 0, proc.stderr
    path = tmp / "selection.json"
    path.write_text(proc.stdout)
    return path


def outcomes(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Node id -> PASSED/FAILED/..., from pytest's -rA summary."""
    found = {}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED") and "::" in rest:
            found[rest.split(" - ")[0]] = word
    return found


def test_kernel_select_deselects_exactly_the_listed_tests(tmp_path: Path) -> None:
    """A recording knows test_silu and test_gelu; the PR adds test_silu_fp8 and parametrizes test_gelu."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    recorded = {"tests/test_k.py::test_silu": [SILU], "tests/test_k.py::test_gelu": [GELU]}
    selection = selection_for(tmp_path, recorded, "csrc/other.cu")  # reaches neither: both in skip
    assert json.loads(selection.read_text())["skip"] == sorted(recorded)
    (project / "tests" / "test_k.py").write_text(PR_TESTS)
    (project / "pytest.ini").write_text("[pytest]\n")  # node ids are relative to the project, as in CI
    proc = pytest_run(project, "tests", "--kernel-select", str(selection))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outcomes(proc) == {"tests/test_k.py::test_silu_fp8": "PASSED", "tests/test_k.py::test_gelu[1]": "PASSED",
                              "tests/test_k.py::test_gelu[2]": "PASSED"}  # test_silu alone is not run
    assert "kernel_symbol_map: --kernel-select skipped 1 tests" in proc.stdout
    # What the old recipe did: --deselect takes prefixes, and drops every new test with the old ones.
    prefixes = [a for t in recorded for a in ("--deselect", t)]
    assert outcomes(pytest_run(project, "tests", *prefixes)) == {}


@pytest.mark.parametrize("content", [None, "{not json", '{"schema": "other"}'])
def test_kernel_select_with_no_usable_selection_runs_everything(tmp_path: Path, content: str | None) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_k.py").write_text(PR_TESTS)
    selection = tmp_path / "selection.json"
    if content is not None:
        selection.write_text(content)
    proc = pytest_run(tmp_path, "tests", "--kernel-select", str(selection))
    assert proc.returncode == 0 and len(outcomes(proc)) == 4
    assert "kernel_symbol_map: --kernel-select" in proc.stdout and "every test runs" in proc.stdout


EVALUATED = '''
def test_a():
    assert False, "a regression the change caused"

def test_b():
    assert False, "a regression in a test that ran"

def test_c():
    pass
'''


def test_evaluate_reports_a_failure_in_a_skipped_test_as_a_miss(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_e.py").write_text(EVALUATED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # test_a and test_c launched only silu, test_b gelu: a change to gelu.cu skips test_a and test_c.
    recorded = {"tests/test_e.py::test_a": [SILU], "tests/test_e.py::test_b": [GELU], "tests/test_e.py::test_c": [SILU]}
    selection = selection_for(tmp_path, recorded, "csrc/gelu.cu")
    assert json.loads(selection.read_text())["skip"] == ["tests/test_e.py::test_a", "tests/test_e.py::test_c"]
    results = tmp_path / "results.xml"
    pytest_run(tmp_path, "tests", f"--junitxml={results}")
    proc = ksm("evaluate", "--selection", str(selection), "--junit", str(results), "--json",
               "--markdown", str(tmp_path / "comment.md"))
    assert proc.returncode == 1, proc.stderr  # a miss is never quiet
    found: dict[str, Any] = json.loads(proc.stdout)
    assert [m["test"] for m in found["misses"]] == ["tests/test_e.py::test_a"]  # test_b ran: not a miss
    assert "a regression the change caused" in found["misses"][0]["message"]
    assert "launched none of the 1 kernels the change reaches" in found["misses"][0]["why"]
    assert found["would_skip"] == ["tests/test_e.py::test_a", "tests/test_e.py::test_c"] and found["ran"] == 3
    assert found["skip_fraction"] == round(2 / 3, 4) and found["changed"] == ["csrc/gelu.cu"]
    comment = (tmp_path / "comment.md").read_text()
    assert "1 miss**" in comment and "`tests/test_e.py::test_a`" in comment and "`csrc/gelu.cu`" in comment
    assert "ERROR miss: tests/test_e.py::test_a" in proc.stderr and "Traceback" not in proc.stderr


def test_evaluate_on_steps_and_bad_input(tmp_path: Path) -> None:
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")
    passed = tmp_path / "kernels.xml"
    passed.write_text('<testsuites><testsuite><testcase classname="t" name="a" time="2.5"/></testsuite></testsuites>')
    failed = tmp_path / "models.xml"
    failed.write_text('<testsuite><testcase classname="t" name="b" time="1"><failure message="boom"/></testcase>'
                      "</testsuite>")
    proc = ksm("evaluate", "--selection", str(selection), "--junit-step", f"kernels={passed}",
               "--junit-step", f"models={failed}", "--json")
    found = json.loads(proc.stdout)
    assert proc.returncode == 0 and found["misses"] == [] and found["would_skip"] == ["kernels"]
    assert found["seconds_saved"] == 2.5 and found["seconds_total"] == 3.5
    bad = tmp_path / "bad.xml"
    bad.write_text('<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite>&a;</testsuite>')
    proc = ksm("evaluate", "--selection", str(selection), "--junit", str(bad))
    assert proc.returncode == 1 and proc.stderr.startswith("ERROR") and "Traceback" not in proc.stderr
    assert ksm("evaluate", "--selection", str(selection)).returncode == 2  # no results given


def steps(mode: str, *args: str, where: Path) -> dict[str, Any]:
    pipeline = where / "steps.json"
    pipeline.write_text((ROOT / "examples" / "ci" / "buildkite" / "steps.json").read_text())
    proc = subprocess.run([sys.executable, str(SELECT_STEPS), mode, str(pipeline), *args], capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


def test_buildkite_drops_exactly_the_skipped_steps(tmp_path: Path) -> None:
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")
    kept = [s.get("key", s.get("label")) for s in steps("select", str(selection), where=tmp_path)["steps"]]
    assert kept == ["models", "entrypoints", ":lint-roller: lint"]  # kernels skipped; unknown steps kept
    everything = steps("select", str(tmp_path / "missing.json"), where=tmp_path)["steps"]
    assert len(everything) == 4
    recorded = steps("record", where=tmp_path)["steps"]
    kernels = next(s for s in recorded if isinstance(s, dict) and s.get("key") == "kernels")
    assert kernels["command"].startswith("kernel-symbol-map record --step kernels --out recordings -- ")
    assert kernels["artifact_paths"] == ["recordings/kernels.jsonl"]
    shadow = steps("shadow", where=tmp_path)["steps"]
    assert "kernel-symbol-map evaluate --selection selection.json" in shadow[-1]["command"]
    assert "--junit-step kernels=junit/kernels.xml" in shadow[-1]["command"]
