"""The CI loop closed exactly (issue 19): exact deselection, shadow-mode evaluation, and Buildkite's steps.

Real pytest runs in subprocesses; the selection comes from the real
``select`` command, on a map and recordings written here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map.mapformat.digests import SCHEME

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


def write_map(path: Path, commit: str = COMMIT) -> Path:
    objects = [{"source": s, "target": "ops", "object": f"{s}.o", "device": True, "symbols": [k], "deps": [s]}
               for s, k in (("csrc/silu.cu", SILU), ("csrc/gelu.cu", GELU), ("csrc/other.cu", OTHER))]
    doc = {"version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": [],
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
    assert "kernel_symbol_map: --kernel-select skipped 1 test (" in proc.stdout
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


# ---- issue 26: Buildkite's shards, list commands, and a selection that must be select's own ----------------------

def pipeline(mode: str, steps_json: dict[str, Any], *args: str, where: Path) -> dict[str, Any]:
    path = where / "steps.json"
    path.write_text(json.dumps(steps_json))
    proc = subprocess.run([sys.executable, str(SELECT_STEPS), mode, str(path), *args], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def job(command: str | list[str], where: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One Buildkite job of a step: upload turns ``$$`` into ``$``; a list runs as one ``bash -e`` script."""
    script = "\n".join(command) if isinstance(command, list) else command
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])  # kernel-symbol-map, python
    return subprocess.run(["bash", "-e", "-c", script.replace("$$", "$")], cwd=where, capture_output=True, text=True,
                          env={**os.environ, "PATH": path, "BUILDKITE_BUILD_CHECKOUT_PATH": str(where), **env},
                          check=False)


def step(steps: dict[str, Any], key: str) -> dict[str, Any]:
    return next(s for s in steps["steps"] if isinstance(s, dict) and s.get("key") == key)


SHARDED = {"steps": [{"key": "kernels", "command": "true", "parallelism": 2}, {"key": "models", "command": "true"}]}


def test_buildkite_shards_record_to_files_of_their_own_and_select_sees_every_one(tmp_path: Path) -> None:
    """Two parallel jobs of one step: each keeps its recording; select unites them, so neither shard is lost."""
    project = tmp_path / "project"
    project.mkdir()
    recorded = pipeline("record", SHARDED, where=tmp_path)
    kernels = step(recorded, "kernels")
    for n in ("0", "1"):
        proc = job(kernels["command"], project, BUILDKITE_PARALLEL_JOB=n)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert job(step(recorded, "models")["command"], project).returncode == 0
    recordings = project / "recordings"
    assert sorted(p.name for p in recordings.iterdir()) == ["kernels.0.jsonl", "kernels.1.jsonl", "models.jsonl"]
    assert kernels["artifact_paths"] == ["recordings/kernels.*.jsonl"]
    assert [json.loads(line)["test"] for line in (recordings / "kernels.1.jsonl").read_text().splitlines()] \
        == ["kernels"]
    # What the shards launched (written as record writes it, complete: this machine has no GPU to record):
    # only shard 1 reached gelu. A change to gelu.cu must keep the step.
    for name, kernels_launched in (("kernels.0", [SILU]), ("kernels.1", [GELU]), ("models", [SILU])):
        (recordings / f"{name}.jsonl").write_text(json.dumps(
            {"test": name.split(".")[0], "kernels": kernels_launched, "complete": True, "commit": COMMIT}) + "\n")
    proc = ksm("select", "--map", str(write_map(tmp_path / "map.json.gz")), "--recordings", str(recordings),
               "--changed", "csrc/gelu.cu", "--json")
    selection = tmp_path / "selection.json"
    selection.write_text(proc.stdout)
    assert json.loads(proc.stdout)["skip"] == ["models"], proc.stderr
    kept = [s["key"] for s in pipeline("select", SHARDED, str(selection), where=tmp_path)["steps"]]
    assert kept == ["kernels"]
    # main's keep step: a sharded step with a shard's recording missing keeps none of them, so it always runs
    agent = tmp_path / "bin" / "buildkite-agent"  # artifact download: the files are already where it puts them
    agent.parent.mkdir()
    agent.write_text("#!/bin/sh\nexit 0\n")
    agent.chmod(0o755)
    (project / "dist").mkdir()
    keep = step(recorded, "kernel-symbol-map-keep")["command"]
    for lost, kept_files in ((None, ["kernels.0.jsonl", "kernels.1.jsonl", "models.jsonl"]),
                             ("kernels.1.jsonl", ["models.jsonl"])):
        if lost:
            (recordings / lost).unlink()
        evidence = tmp_path / f"evidence-{lost}"
        proc = job(keep, project, KSM_EVIDENCE=str(evidence), PATH=f"{agent.parent}{os.pathsep}{os.environ['PATH']}")
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in (evidence / "recordings").iterdir()) == kept_files


SHARD_TESTS = '''
import os

def test_k0():
    pass

def test_k1():
    assert os.environ["BUILDKITE_PARALLEL_JOB"] != "1", "fails on the second shard only"
'''


def test_buildkite_shadow_keeps_a_list_a_list_and_evaluates_every_shard(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "tests" / "test_k.py").write_text(SHARD_TESTS)
    (project / "tests" / "test_m.py").write_text("def test_m():\n    pass\n")
    pytest = "python -m pytest -q -p no:cacheprovider"
    commands = ["echo preparing", f"{pytest} tests/test_k.py", f"cd tests && {pytest} test_m.py"]
    steps_json = {"steps": [{"key": "kernels", "commands": commands, "parallelism": 2},
                            {"key": "models", "command": f"{pytest} tests/test_m.py"}, "wait"]}
    shadow = pipeline("shadow", steps_json, where=tmp_path)
    kernels = step(shadow, "kernels")
    assert isinstance(kernels["commands"], list) and kernels["commands"][0] == "echo preparing"
    assert kernels["commands"][1].startswith(f"{pytest} tests/test_k.py --junitxml=")
    assert kernels["commands"][2].startswith(f"cd tests && {pytest} test_m.py --junitxml=")
    for n in ("0", "1"):
        proc = job(kernels["commands"], project, BUILDKITE_PARALLEL_JOB=n)
        assert proc.returncode == (1 if n == "1" else 0), proc.stdout + proc.stderr
    assert job(step(shadow, "models")["command"], project).returncode == 0
    assert len(list((project / "junit").iterdir())) == 5  # 2 shards x 2 pytest runs, and models
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")  # kernels skipped
    (project / "selection.json").write_text(selection.read_text())
    evaluate = step(shadow, "kernel-symbol-map-evaluate")["command"].split(" && ")[-1]  # after the downloads
    proc = job(evaluate, project)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ERROR miss: kernels failed" in proc.stderr
    comment = (project / "evaluation.md").read_text()
    assert "tests.test_k::test_k1: AssertionError: fails on the second shard only" in comment


def tampered(selection: dict[str, Any], how: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(selection))
    if how == "another version":
        doc["schema"] = "kernel-symbol-map/selection/2"
    elif how == "no schema":
        del doc["schema"]
    elif how == "no decisions":
        del doc["decisions"]
    elif how == "skips a step it decided to run":
        doc["skip"].append("models")
    elif how == "a decision's run is not a bool":
        doc["decisions"][0]["run"] = "no"
    elif how == "no run list":
        del doc["run"]
    return doc


@pytest.mark.parametrize("how", ["another version", "no schema", "no decisions", "skips a step it decided to run",
                                 "a decision's run is not a bool", "no run list"])
def test_buildkite_select_trusts_only_what_select_writes(tmp_path: Path, how: str) -> None:
    """A skip list alone is not a selection: anything but ``select --json``'s own shape runs every step."""
    selection = selection_for(tmp_path, {"kernels": [SILU], "models": [GELU]}, "csrc/gelu.cu")
    real = json.loads(selection.read_text())
    assert [s.get("key") for s in steps("select", str(selection), where=tmp_path)["steps"]] \
        == ["models", "entrypoints", None]  # the real one: kernels skipped
    selection.write_text(json.dumps(tampered(real, how)))
    everything = ROOT / "examples" / "ci" / "buildkite" / "steps.json"
    proc = subprocess.run([sys.executable, str(SELECT_STEPS), "select", str(everything), str(selection)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["steps"]) == 4, proc.stderr
    assert "0 of 4 steps skipped" in proc.stderr and "every step runs" in proc.stderr


BAD_STEPS: dict[str, bytes | None] = {
    "missing": None,
    "not JSON": b"{steps",
    "not UTF-8": b'{"steps": ["\xff"]}',
    "nested too deeply": b"[" * 100_000,
    "a list": b"[]",
    "no steps": b"{}",
    "steps an int": b'{"steps": 3}',
    "steps a string": b'{"steps": "pytest"}',
    "a step an int": b'{"steps": [3]}',
    "an int key": b'{"steps": [{"key": 3, "command": "pytest"}]}',
    "a list key": b'{"steps": [{"key": ["k"], "command": "pytest"}]}',
    "a key that is a path": b'{"steps": [{"key": "../k", "command": "pytest"}]}',
    "an int command": b'{"steps": [{"key": "k", "command": 3}]}',
    "a list of ints": b'{"steps": [{"key": "k", "commands": [1, 2]}]}',
    "parallelism a string": b'{"steps": [{"key": "k", "command": "pytest", "parallelism": "2"}]}',
}
BAD_SELECTIONS: dict[str, bytes | None] = {
    "missing": None, "not JSON": b"{", "not UTF-8": b"\xff\xfe", "nested too deeply": b'{"a":' * 100_000,
    "a list": b"[]", "a skip of lists": b'{"schema": "kernel-symbol-map/selection/1", "skip": [["kernels"]]}',
}


@pytest.mark.parametrize("mode", ["record", "shadow", "select"])
def test_select_steps_on_malformed_input_never_tracebacks(tmp_path: Path, mode: str) -> None:
    """Bad steps: one ERROR line, exit 2 (there is no pipeline to upload). A bad selection: every step, exit 0."""
    def run(steps_file: Path, selection_file: Path) -> subprocess.CompletedProcess[str]:
        extra = [str(selection_file)] if mode == "select" else []
        return subprocess.run([sys.executable, str(SELECT_STEPS), mode, str(steps_file), *extra],
                              capture_output=True, text=True, check=False)

    good_steps = ROOT / "examples" / "ci" / "buildkite" / "steps.json"
    good_selection = tmp_path / "selection.json"
    good_selection.write_text('{"schema": "kernel-symbol-map/selection/1", "skip": [], "run": [], "decisions": []}')
    for name, content in BAD_STEPS.items():
        path = tmp_path / f"steps-{len(content or b'')}-{abs(hash(name))}.json"
        if content is not None:
            path.write_bytes(content)
        proc = run(path, good_selection)
        assert proc.returncode == 2 and proc.stdout == "", (name, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("ERROR ") and len(proc.stderr.splitlines()) == 1, (name, proc.stderr)
    if mode == "shadow":  # steps it cannot see every pytest run of: it would evaluate only some of their results
        for name, bad in (("pytest twice in one command", {"key": "k", "command": "pytest a && pytest b"}),
                          ("pytest twice in a list's command", {"key": "k", "commands": ["pytest a; pytest b"]}),
                          ("no pytest in a list", {"key": "k", "commands": ["make test"]})):
            path = tmp_path / "steps.json"
            path.write_text(json.dumps({"steps": [bad]}))
            proc = run(path, good_selection)
            assert proc.returncode == 2 and proc.stderr.startswith("ERROR ") and "pytest" in proc.stderr, name
            assert len(proc.stderr.splitlines()) == 1, (name, proc.stderr)
    if mode != "select":
        return
    for name, content in BAD_SELECTIONS.items():
        path = tmp_path / f"selection-{abs(hash(name))}.json"
        if content is not None:
            path.write_bytes(content)
        proc = run(good_steps, path)
        assert proc.returncode == 0 and len(json.loads(proc.stdout)["steps"]) == 4, (name, proc.stderr)
        assert "Traceback" not in proc.stderr and "every step runs" in proc.stderr, (name, proc.stderr)


# ---- issue 27: the flow that selects after the change's build (output mode, --base-map) -----------------------
# Maps shaped as `build` writes them: map-level "digests" (the scheme) and "toolchain", and per object
# "digests": {"covers": ..., "host": hex, "code": {arch: [hex per symbol, aligned with "symbols"]}}. csrc/act.cu compiles
# three kernels into one object, csrc/bind.cpp is host code only (no kernels).

ACT, BIND = "csrc/act.cu", "csrc/bind.cpp"
KERNELS = (SILU, GELU, OTHER)
EDITED = "f" * 16  # a digest no build below has


def digest(kernel: str, arch: str) -> str:
    return hashlib.blake2b(f"{kernel} {arch}".encode(), digest_size=8).hexdigest()


def digest_map(path: Path, commit: str, *, code: dict[str, str] | None = None, host: str = "a" * 16,
               host_only: str = "b" * 16, kernels: tuple[str, ...] = KERNELS,
               toolchain: str = "NVIDIA 13.0.88") -> Path:
    """A map of ``commit``; ``code`` overrides kernels' sm_80 digests (kernel -> digest)."""
    code = code or {}
    columns = {"compute_80": [digest(k, "compute_80") for k in kernels],
               "sm_80": [code.get(k, digest(k, "sm_80")) for k in kernels]}
    objects = [
        {"source": ACT, "target": "ops", "object": "CMakeFiles/ops.dir/csrc/act.cu.o", "device": True,
         "symbols": list(kernels), "deps": [ACT, "csrc/act.cuh"], "archs": ["sm_80"],
         "digests": {"covers": {"host": "digested", "kernels": len(kernels)}, "host": host, "code": columns}},
        {"source": BIND, "target": "ops", "object": "CMakeFiles/ops.dir/csrc/bind.cpp.o", "device": False,
         "symbols": [], "deps": [BIND, "csrc/act.cuh"], "digests": {"covers": {"host": "digested", "kernels": 0}, "host": host_only}},
    ]
    doc = {"version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": ["$BUILD"],
           "incomplete": False, "errors": [], "stats": {}, "backend": "cuda", "digests": SCHEME,
           "toolchain": {"CUDA": toolchain, "CXX": "GNU 12.2.0"}, "configure_inputs": ["CMakeLists.txt"],
           "objects": objects}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


LAUNCHED = {"tests/test_k.py::test_silu": [SILU], "tests/test_k.py::test_gelu": [GELU],
            "tests/test_k.py::test_other": [OTHER], "tests/test_k.py::test_both": [SILU, GELU]}


def recordings_of(folder: Path, commit: str, launched: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "recorded.jsonl").write_text("".join(
        json.dumps({"test": t, "kernels": k, "complete": True, "commit": commit}) + "\n" for t, k in launched.items()))
    return folder


def select_json(*args: str) -> dict[str, Any]:
    proc = ksm("select", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# Each case: the change's map (what differs from the base), the changed file, and the tests output mode runs.
OUTPUT_CASES = {
    "one kernel's code": (dict(code={GELU: EDITED}), ACT, ["test_both", "test_gelu"]),
    "nothing emitted differs (a comment)": ({}, ACT, []),
    "a kernel went away": (dict(kernels=(SILU, OTHER)), ACT, ["test_both", "test_gelu"]),
    "a kernel appeared": (dict(kernels=(*KERNELS, "_Z3newPf")), ACT, []),  # no test launched it yet
    "the .cu's host code": (dict(host="c" * 16), ACT, ["test_both", "test_gelu", "test_other", "test_silu"]),
    "host code of no kernel's": (dict(host_only="c" * 16), BIND, sorted(t.split("::")[1] for t in LAUNCHED)),
    "a CMakeLists (no object compiles it)": (dict(code={GELU: EDITED}), "CMakeLists.txt",
                                              sorted(t.split("::")[1] for t in LAUNCHED)),
}


@pytest.mark.parametrize("case", list(OUTPUT_CASES))
def test_output_mode_runs_exactly_the_tests_of_what_the_build_emitted(tmp_path: Path, case: str) -> None:
    """Source mode runs every test of act.cu's kernels; output mode only those whose kernels' code differs."""
    differs, changed, expected = OUTPUT_CASES[case]
    base = digest_map(tmp_path / "main" / "kernel_symbol_map.json.gz", COMMIT)
    new = digest_map(tmp_path / "pr" / "kernel_symbol_map.json.gz", "c" * 40, **differs)
    recordings = recordings_of(tmp_path / "recordings", COMMIT, LAUNCHED)
    by_output = select_json("--base-map", str(base.parent), "--map", str(new.parent), "--recordings",
                            str(recordings), "--changed", changed)
    assert by_output["mode"] == "output" and by_output["mode_why"] == "", by_output["mode_why"]
    assert [t.split("::")[1] for t in by_output["run"]] == expected, by_output["summary"]
    assert sorted(by_output["run"] + by_output["skip"]) == sorted(LAUNCHED)
    by_source = select_json("--map", str(base), "--recordings", str(recordings), "--changed", changed)
    assert by_source["mode"] == "source"
    if changed == ACT:  # today's select: the file reaches all three kernels, so every test of them runs
        assert len(by_source["run"]) == 4 and by_source["fallback"] is None
    if case == "one kernel's code":
        assert by_output["emitted"]["kernels"] == {GELU: "changed (sm_80)"}
        assert by_output["emitted"]["compared"] == 3 and by_output["emitted"]["hosts"] == []
    if case == "host code of no kernel's":
        assert by_output["fallback"] == "host-changed"
    if case.startswith("a CMakeLists"):
        assert by_output["fallback"] == "configure-input"


def test_output_mode_with_a_base_it_cannot_compare_says_so(tmp_path: Path) -> None:
    """A main map from before digests decides as source mode (NOTE, mode_why); another nvcc runs everything."""
    recordings = recordings_of(tmp_path / "recordings", COMMIT, LAUNCHED)
    new = digest_map(tmp_path / "pr.json.gz", "c" * 40, code={GELU: EDITED})
    old = write_map(tmp_path / "old.json.gz")  # no digests: issue 19's shape (silu.cu, gelu.cu, other.cu)
    found = select_json("--base-map", str(old), "--map", str(new), "--recordings", str(recordings),
                        "--changed", "csrc/gelu.cu")
    assert found["mode"] == "source" and "no digests" in found["mode_why"]
    assert found["run"] == ["tests/test_k.py::test_both", "tests/test_k.py::test_gelu"]  # by the base's sources
    other = digest_map(tmp_path / "nvcc13.1.json.gz", "c" * 40, toolchain="NVIDIA 13.1.0")
    base = digest_map(tmp_path / "base.json.gz", COMMIT)
    found = select_json("--base-map", str(base), "--map", str(other), "--recordings", str(recordings),
                        "--changed", ACT)
    assert found["fallback"] == "toolchain-changed" and len(found["run"]) == 4
    assert "13.0.88 -> NVIDIA 13.1.0" in found["summary"]


# The recipes themselves, run as CI runs them: in a git checkout of the change, with pip and
# buildkite-agent stubbed (nothing to install or upload here), main's evidence in a folder, the change's
# own map where the build puts it (dist/), and csrc/act.cu edited by the pull request.

ACT_TESTS = '''
def test_silu():
    pass

def test_gelu():
    pass

def test_other():
    pass

def test_both():
    pass
'''


def checkout(tmp: Path, vendored: tuple[str, ...] = (), edit: str = ACT) -> tuple[Path, str]:
    """A git clone of the project at main's commit (also origin/main), with the pull request's edit to ``edit``;
    ``vendored``: files of examples/ci/ the project keeps at the same paths (tracked, as a CI config's are)."""
    project = tmp / "project"
    files = [(ACT, "// silu, gelu, other\n"), (BIND, "// bindings\n"), ("CMakeLists.txt", "project(p)\n"),
             ("tests/test_k.py", ACT_TESTS), ("pytest.ini", "[pytest]\n"), ("csrc/gelu.cu", "// gelu\n")]
    files += [(f"examples/ci/{name}", (ROOT / "examples" / "ci" / name).read_text()) for name in vendored]
    for path, text in files:
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    git = ["git", "-C", str(project), "-c", "user.name=ci", "-c", "user.email=ci@example.invalid"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "main"], ["update-ref", "refs/remotes/origin/main",
                                                                                 "HEAD"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (project / edit).write_text((project / edit).read_text() + "// edited by the pull request\n")
    return project, sha


def stubs(tmp: Path, uploaded: Path) -> str:
    """PATH with pip doing nothing and buildkite-agent writing an uploaded pipeline to ``uploaded``."""
    folder = tmp / "stubs"
    folder.mkdir()
    (folder / "pip").write_text("#!/bin/sh\nexit 0\n")
    (folder / "buildkite-agent").write_text(
        f'#!/bin/sh\nif [ "$1 $2" = "pipeline upload" ]; then cat > {uploaded}; fi\nexit 0\n')
    for tool in folder.iterdir():
        tool.chmod(0o755)
    return os.pathsep.join([str(folder), str(Path(sys.executable).parent), os.environ["PATH"]])


def recipe(command: list[str], where: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A recipe's script; pytest reports every outcome (-rA), and writes no bytecode (an untracked file)."""
    return subprocess.run(command, cwd=where, capture_output=True, text=True, check=False,
                          env={**os.environ, "PATH": path, "KSM_SOURCE": "unused: pip is stubbed",
                               "PYTEST_ADDOPTS": "-rA -p no:cacheprovider", "PYTHONDONTWRITEBYTECODE": "1", **env})


def test_select_sh_select_built_runs_the_tests_of_the_changed_kernel_only(tmp_path: Path) -> None:
    project, sha = checkout(tmp_path)
    evidence = tmp_path / "evidence"
    digest_map(evidence / "dist" / "kernel_symbol_map.json.gz", sha)  # main's wheel, here its map alone
    recordings_of(evidence / "recordings", sha, LAUNCHED)
    digest_map(project / "dist" / "kernel_symbol_map.json.gz", sha, code={GELU: EDITED})  # this build's
    path = stubs(tmp_path, tmp_path / "unused.json")
    script = str(ROOT / "examples" / "ci" / "select.sh")
    proc = recipe(["bash", script, "select-built", str(evidence), "origin/main"], project, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    selection = json.loads((project / "selection.json").read_text())
    assert selection["changed"] == [ACT] and selection["mode"] == "output", selection["summary"]
    assert outcomes(proc) == {"tests/test_k.py::test_gelu": "PASSED", "tests/test_k.py::test_both": "PASSED"}
    # Today's flow on the same change: act.cu reaches all of its kernels, so every test runs.
    proc = recipe(["bash", script, "select", str(evidence), "origin/main"], project, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    selection = json.loads((project / "selection.json").read_text())
    assert selection["mode"] == "source" and selection["changed"] == [ACT] and selection["fallback"] is None
    assert len(outcomes(proc)) == 4


def test_buildkite_after_build_uploads_the_steps_of_the_changed_kernel(tmp_path: Path) -> None:
    project, sha = checkout(tmp_path)
    evidence = tmp_path / "evidence"
    digest_map(evidence / "dist" / "kernel_symbol_map.json.gz", sha)
    recordings_of(evidence / "recordings", sha, {"kernels": [SILU], "models": [GELU]})  # entrypoints: none
    digest_map(project / "dist" / "kernel_symbol_map.json.gz", sha, code={GELU: EDITED})  # the build step's
    uploaded = tmp_path / "pipeline.json"
    path = stubs(tmp_path, uploaded)
    script = str(ROOT / "examples" / "ci" / "buildkite" / "upload.sh")
    env = {"KSM_EVIDENCE": str(evidence), "BUILDKITE_BRANCH": "fix-gelu", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"}
    proc = recipe(["bash", script, "after-build"], project, path, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = [s.get("key", s.get("label")) for s in json.loads(uploaded.read_text())["steps"]]
    assert kept == ["models", "entrypoints", ":lint-roller: lint"]  # kernels launched only silu: skipped
    assert "1 of 4 steps skipped" in proc.stderr
    # pipeline.yml's flow (select from main's map alone): act.cu reaches silu too, so every step runs.
    proc = recipe(["bash", script], project, path, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(json.loads(uploaded.read_text())["steps"]) == 4 and "0 of 4 steps skipped" in proc.stderr
    selection = json.loads((project / "selection.json").read_text())
    assert selection["mode"] == "source" and selection["changed"] == [ACT] and selection["fallback"] is None
    assert recipe(["bash", script, "before"], project, path, **env).returncode == 2


def run_block(workflow: Path, step: str) -> str:
    """The ``run: |`` script of the step named ``step`` (the workflows are plain enough to read by lines)."""
    lines = workflow.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == f"- name: {step}")
    at = next(i for i in range(at, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[at + 1]) - len(lines[at + 1].lstrip())
    block = []
    for line in lines[at + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line[indent:])
    return "\n".join(block) + "\n"


def test_github_actions_after_build_makes_the_matrix_of_the_changed_kernel(tmp_path: Path) -> None:
    project, sha = checkout(tmp_path, ("select_matrix.py", "suites.json", "buildkite/select_steps.py"))
    # What the download-artifact steps put in the checkout: main's evidence and this run's wheel.
    digest_map(project / "evidence" / "dist" / "kernel_symbol_map.json.gz", sha)
    recordings_of(project / "evidence" / "recordings", sha, {"kernels": [SILU], "models": [GELU]})
    digest_map(project / "dist" / "kernel_symbol_map.json.gz", sha, code={GELU: EDITED})
    workflow = ROOT / "examples" / "ci" / "github-actions-after-build.yml"
    script = run_block(workflow, "Select by what the two builds emitted")
    output, summary = tmp_path / "github_output", tmp_path / "summary.md"
    path = stubs(tmp_path, tmp_path / "unused.json")
    proc = recipe(["bash", "-e", "-c", script], project, path,
                  GITHUB_BASE_REF="main", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary),
                  RUNNER_TEMP=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    selection = json.loads((project / "selection.json").read_text())
    assert selection["changed"] == [ACT] and selection["mode"] == "output", selection["summary"]
    (line,) = output.read_text().splitlines()
    assert line.startswith("matrix=")
    matrix = json.loads(line.removeprefix("matrix="))
    assert [s["key"] for s in matrix["include"]] == ["models", "entrypoints"]  # kernels launched only silu
    assert "1 of 2 known tests to run" in summary.read_text()
    # The test job's condition: no kept suite is exactly this output, and the job is skipped.
    assert "needs.select.outputs.matrix != '{\"include\":[]}'" in workflow.read_text()
    recordings_of(project / "evidence" / "recordings", sha, {"kernels": [SILU], "models": [SILU]})
    output.unlink()  # main's recordings of another run: neither suite launched gelu
    assert recipe(["bash", "-e", "-c", script], project, path, GITHUB_BASE_REF="main", GITHUB_OUTPUT=str(output),
                  GITHUB_STEP_SUMMARY=str(summary), RUNNER_TEMP=str(tmp_path)).returncode == 0
    assert output.read_text().strip() == 'matrix={"include":[{"key":"entrypoints","command":"pytest tests/entrypoints"}]}'


def test_github_actions_source_mode_step_selects_from_mains_map(tmp_path: Path) -> None:
    """Today's flow (github-actions.yml's "Select and run"), its downloads in the checkout: they are no change."""
    project, sha = checkout(tmp_path, edit="csrc/gelu.cu")
    (project / "evidence" / "dist").mkdir(parents=True)
    write_map(project / "evidence" / "dist" / "kernel_symbol_map.json.gz", sha)  # silu.cu, gelu.cu, other.cu
    recordings_of(project / "evidence" / "recordings", sha, LAUNCHED)
    (project / "dist").mkdir()
    (project / "dist" / "project-1.0-py3-none-any.whl").write_bytes(b"the wheel this run built")
    script = run_block(ROOT / "examples" / "ci" / "github-actions.yml", "Select and run")
    proc = recipe(["bash", "-e", "-c", script.replace("${{ github.base_ref }}", "main")], project,
                  stubs(tmp_path, tmp_path / "unused.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    selection = json.loads((project / "selection.json").read_text())
    assert selection["changed"] == ["csrc/gelu.cu"] and selection["fallback"] is None, selection["summary"]
    assert outcomes(proc) == {"tests/test_k.py::test_gelu": "PASSED", "tests/test_k.py::test_both": "PASSED"}
