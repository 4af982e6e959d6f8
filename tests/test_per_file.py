"""Issue 28: a real pull request's files, each decided on its own; Python files by per-test coverage.

The project is tests/projects/selection (CUDA kernels, built with nvcc and
Ninja) with a Python package that "launches" them, its own pytest suite, docs
and a data file, in a git repository. Its suite runs once under the real
plugin (``pytest --kernel-record``, CUPTI replaced by the stand-in package of
tests/test_recorder_processes.py, in child processes too), so the recordings hold each test's kernels and
the Python code it executed. Each case clones the project, changes it as a pull
request would, and runs ``select --diff HEAD`` as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_symbol_map.consumer.select.pythonfiles import tests_of_file as of_test_file
from kernel_symbol_map.consumer.select.recordings import Recording

import pytest
from native_programs import build_driver
from test_recorder_processes import FAKE_CUPTI
from test_selection_safety import A_K, B_K, GIT_ID, commit_and_map, ksm, selection_project

TEST_A, TEST_B = "tests/test_a.py::test_a", "tests/test_b.py::test_b"
SCALE, CONST = "tests/test_util.py::test_scale", "tests/test_util.py::test_const"
TABLE, PLAIN = "tests/test_table.py::test_table", "tests/test_plain.py::test_plain"
REGISTRY, CHILD = "tests/test_registry.py::test_registry", "tests/test_child.py::test_child"
REUSE = "tests/test_reuse.py::test_reuse"
OPTIONAL, VERSION = "tests/test_optional.py::test_optional", "tests/test_version.py::test_version"
DOC, LAZY, USES = "tests/test_util.py::test_doc", "tests/test_lazy.py::test_imports", "tests/test_lazy.py::test_uses"
FLAGS = "tests/test_flags.py::test_flags"
EVERY = {TEST_A, TEST_B, SCALE, CONST, TABLE, PLAIN, REGISTRY, CHILD, REUSE, OPTIONAL, VERSION, DOC, LAZY, USES,
         FLAGS}
RULES = {"rules": [{"paths": ["docs/**", "*.md"], "tests": []}]}
# Swaps the tracer around each test's call and puts it back, as profilers and timeout tools do.
SWAP_TRACER = """
import sys

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = sys.gettrace()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(before)
"""
# Starts a coverage.py measurement of its own after the recorder's: it pauses the recorder's tracing.
OWN_COVERAGE = """
def pytest_configure(config):
    import coverage

    own = coverage.Coverage(data_file=None, config_file=False)
    own.start()
    own.stop()
"""

FILES = {
    "pkg/__init__.py": "",
    "pkg/ops.py": f'''from . import plugins, util

A_KERNEL = "{A_K}"
B_KERNEL = "{B_K}"


def run_a(launch):
    launch(A_KERNEL)
    return util.scale(1)


def run_b(launch):
    launch(B_KERNEL)
    return 2


def run_c():
    try:
        from . import accel  # an optional module, not in the checkout yet
    except ImportError:
        return "slow"
    return accel.NAME


def version():
    from .version import VERSION

    return VERSION
''',
    # Python the configure reads too (CMakeLists.txt copies it): a change may change the build.
    "pkg/version.py": 'VERSION = "1.0"\n',
    "tests/test_optional.py": '''from pkg import ops


def test_optional():
    assert ops.run_c() == "slow"
''',
    "tests/test_version.py": '''from pkg import ops


def test_version():
    assert ops.version() == "1.0"
''',
    "pkg/util.py": '''SCALE = 2


def scale(x):
    return x * SCALE


def helper():
    return "helped"


def greet():
    """Say hello."""
    return "hello"
''',
    "pkg/lazy.py": "X = 1\n",
    # Imported inside a test, not at collection: its import-time code still serves every later test.
    "tests/test_lazy.py": '''def test_imports():
    from pkg import lazy

    assert lazy.X == 1


def test_uses():
    from pkg import lazy  # imported already: runs none of its code

    assert lazy.X == 1
''',
    # Build scripts: what setup.py imports, what the CMake files run. No test runs them.
    "setup.py": "from tools import flags\n\nflags.flags()\n",
    "tools/flags.py": "def flags():\n    return []\n",
    "tests/test_flags.py": "from tools import flags\n\n\ndef test_flags():\n    assert flags.flags() == []\n",
    "tools/gen.py": "print('generated nothing')\n",
    # Code no test runs: pkg/extra.py is imported only by pkg/entry.py, which no test imports.
    "pkg/entry.py": "from . import extra\n",
    "pkg/extra.py": "Y = 1\n",
    "pkg/registry.py": '''ENTRIES = []


def register(name):
    ENTRIES.append(name)
''',
    # Import-time code that changes another module: why import-time code counts for every test.
    "pkg/plugins.py": '''from .registry import register

register("fast-path")
''',
    "pkg/table.py": '''import json
from pathlib import Path


def load():
    return json.loads((Path(__file__).parents[1] / "data" / "table.json").read_text())
''',
    "tests/conftest.py": '''import pytest


@pytest.fixture
def launch():
    from cupti import cupti  # the stand-in of tests/test_recorder_processes.py, in every process

    return cupti.launch
''',
    "tests/test_a.py": '''from pkg import ops


def helper_value():
    return 1


def test_a(launch):
    assert ops.run_a(launch) == 2
''',
    # A test file another test file imports: its code serves tests beyond its own.
    "tests/test_reuse.py": '''from test_a import helper_value


def test_reuse():
    assert helper_value() == 1
''',
    "tests/test_b.py": '''from pkg import ops


def test_b(launch):
    assert ops.run_b(launch) == 2
''',
    "tests/test_util.py": '''from pkg import util


def test_scale():
    assert util.scale(3) == 6


def test_const():
    assert util.SCALE == 2


def test_doc():
    assert util.greet.__doc__ == "Say hello."
''',
    "tests/test_table.py": '''from pkg import table


def test_table():
    assert table.load()["k"] == 1
''',
    "tests/test_plain.py": '''def test_plain():
    assert 1 + 1 == 2
''',
    "tests/test_registry.py": '''from pkg import registry


def test_registry():
    assert registry.ENTRIES == ["fast-path"]
''',
    # A Python child process: its code counts as the recorder counts its kernels (the test it ran in).
    "tests/test_child.py": '''import subprocess
import sys


def test_child():
    out = subprocess.run([sys.executable, "-c", "from pkg import util; print(util.helper())"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "helped"
''',
    "data/table.json": '{"k": 1}\n',
    "docs/guide.md": "# Guide\n",
    "NOTES.md": "Notes.\n",
    "pyproject.toml": '[project]\nname = "pkg"\nversion = "0"\n\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
}


@dataclass(frozen=True)
class Project:
    repo: Path
    map: Path
    recordings: Path  # with Python coverage
    kernels_only: Path  # the same suite recorded with --kernel-record-python off
    copied: Path  # the same suite, its package imported from a copy outside the checkout
    paused: Path  # the same suite, with a plugin whose own coverage.py measurement paused the recorder's
    swapped: Path  # the same suite, with a plugin that swaps the tracer out around each test's call
    rules: Path
    commit: str


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def run_suite(repo: Path, out: Path, *extra: str, pythonpath: Path | None = None, check: bool = True) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    cupti = out.parent / "fake-cupti"
    if not cupti.exists():
        (cupti / "cupti").mkdir(parents=True)
        (cupti / "cupti" / "__init__.py").write_text("")
        (cupti / "cupti" / "cupti.py").write_text(FAKE_CUPTI)
        (cupti / "own_coverage.py").write_text(OWN_COVERAGE)
        (cupti / "swap_tracer.py").write_text(SWAP_TRACER)
        build_driver(cupti)
    env["FAKE_CUDA_DRIVER"] = str(cupti / "libcuda.so.1")  # what the stand-in's launches load
    env["PYTHONPATH"] = os.pathsep.join([str(cupti), str(pythonpath or repo)])
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kernel-record",
                           str(out), *extra], cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 or not check, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    where = tmp_path_factory.mktemp("perfile")
    src = selection_project(where)
    with (src / "CMakeLists.txt").open("a") as f:
        f.write("configure_file(pkg/version.py version_copy.py COPYONLY)\n"
                "execute_process(COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tools/gen.py)\n")
    for rel, text in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    commit, _, out = commit_and_map(src, where)
    recordings = run_suite(src, where / "rec")
    kernels_only = run_suite(src, where / "rec-kernels", "--kernel-record-python", "off")
    copy = where / "site"
    shutil.copytree(src / "pkg", copy / "pkg")
    shutil.copytree(src / "data", copy / "data")  # what pkg/table.py reads, beside its copy
    shutil.copytree(src / "tools", copy / "tools")
    copied = run_suite(src, where / "rec-copied", pythonpath=copy)
    paused = run_suite(src, where / "rec-paused", "-p", "own_coverage")
    swapped = run_suite(src, where / "rec-swapped", "-p", "swap_tracer")
    rules = where / "rules.json"
    rules.write_text(json.dumps(RULES))
    assert git(src, "status", "--porcelain") == ""  # the suite's runs left the checkout clean
    return Project(src, out, recordings, kernels_only, copied, paused, swapped, rules, commit)


def change(project: Project, tmp_path: Path, edits: dict[str, str | None]) -> Path:
    """A clone of the project at its commit with ``edits`` (file -> new text, or None to delete) made."""
    repo = tmp_path / "pr"
    subprocess.run(["git", "clone", "-q", str(project.repo), str(repo)], check=True)
    for rel, text in edits.items():
        if text is None:
            (repo / rel).unlink()
        else:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
    return repo


def select(project: Project, repo: Path, recordings: Path | None = None, *extra: str) -> dict[str, Any]:
    proc = ksm("select", "--map", str(project.map), "--recordings", str(recordings or project.recordings),
               "--diff", "HEAD", "--rules", str(project.rules), "--json", *extra, cwd=repo)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def edited(rel: str, old: str, new: str) -> dict[str, str]:
    text = FILES[rel]
    assert old in text
    return {rel: text.replace(old, new)}


def by(result: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["decided_by"] for f in result["files"]}


def test_the_recordings_hold_kernels_and_python_code(project: Project) -> None:
    records = [json.loads(line) for line in (project.recordings / "pytest.jsonl").read_text().splitlines()]
    assert {r["test"] for r in records} == EVERY and all(r["complete"] for r in records)
    mine = {r["test"]: r for r in records}
    assert mine[TEST_A]["kernels"] == [A_K] and mine[TEST_B]["kernels"] == [B_K]
    assert "pkg/util.py" in mine[PLAIN]["python"]  # imported while collecting test_a: every test's
    assert "tests/test_a.py" not in mine[PLAIN]["python"]  # a test module's own import: its tests'
    assert "pkg/util.py" in mine[CHILD]["python"]  # the child process ran helper()
    off = [json.loads(line) for line in (project.kernels_only / "pytest.jsonl").read_text().splitlines()]
    assert all("python" not in r for r in off)


def test_a_kernel_and_two_docs_run_only_that_kernel_s_tests(project: Project, tmp_path: Path) -> None:
    repo = change(project, tmp_path, {"csrc/a.cu": (project.repo / "csrc/a.cu").read_text() + "// tuned\n",
                                      "docs/guide.md": "# Guide, revised\n", "NOTES.md": "More notes.\n"})
    result = select(project, repo)
    assert result["fallback"] is None and set(result["run"]) == {TEST_A}
    assert by(result) == {"csrc/a.cu": "map", "docs/guide.md": "rules", "NOTES.md": "rules"}
    # a file no rule matches (NOTES.md, with rules for docs/ only): every test, and the summary names it
    (tmp_path / "none.json").write_text(json.dumps({"rules": [{"paths": ["docs/**"], "tests": []}]}))
    result = select(project, repo, None, "--rules", str(tmp_path / "none.json"))
    assert set(result["run"]) == EVERY and "NOTES.md is known to no decider" in result["summary"]


def test_a_function_body_runs_only_the_tests_that_executed_it(project: Project, tmp_path: Path) -> None:
    repo = change(project, tmp_path, edited("pkg/util.py", "return x * SCALE", "return SCALE * x"))
    result = select(project, repo)
    assert result["fallback"] is None and set(result["run"]) == {TEST_A, SCALE}
    assert by(result) == {"pkg/util.py": "python"}
    why = {d["test"]: d for d in result["decisions"]}
    assert why[SCALE]["reason"] == "python" and "pkg/util.py" in why[SCALE]["why"]
    assert why[PLAIN]["run"] is False


def test_a_child_process_s_python_code_counts_for_its_test(project: Project, tmp_path: Path) -> None:
    repo = change(project, tmp_path, edited("pkg/util.py", 'return "helped"', 'return "helped!"'))
    assert set(select(project, repo)["run"]) == {CHILD}


def test_a_module_level_constant_runs_every_test_that_imported_it(project: Project, tmp_path: Path) -> None:
    """Import-time code ran before any test: every test of the run may read what it left (all of them here)."""
    repo = change(project, tmp_path, edited("pkg/util.py", "SCALE = 2", "SCALE = 2  # tuned\nLIMIT = 4"))
    result = select(project, repo)
    assert set(result["run"]) == EVERY and result["fallback"] is None


def test_import_time_code_of_one_module_reaches_tests_that_never_imported_it(project: Project, tmp_path: Path) -> None:
    """pkg/plugins.py registers into pkg/registry.py when pkg/ops.py imports it: test_registry imports only the
    registry, and still sees the change. (Attributing import-time code to importers alone would skip it.)"""
    repo = change(project, tmp_path, edited("pkg/plugins.py", 'register("fast-path")', 'register("slow-path")'))
    assert REGISTRY in select(project, repo)["run"]


def test_a_test_file_runs_its_tests(project: Project, tmp_path: Path) -> None:
    repo = change(project, tmp_path, edited("tests/test_b.py", "== 2", "== 1 + 1"))
    result = select(project, repo)
    assert set(result["run"]) == {TEST_B} and by(result) == {"tests/test_b.py": "python"}
    # recorded without Python coverage, the test file decides it: its tests
    result = select(project, repo, project.kernels_only)
    assert set(result["run"]) == {TEST_B} and by(result) == {"tests/test_b.py": "test-file"}


@pytest.mark.parametrize("rel", ["tests/conftest.py", "pyproject.toml", "data/table.json"])
def test_what_no_decider_knows_runs_everything(project: Project, tmp_path: Path, rel: str) -> None:
    """conftest.py (its fixtures serve every test), pyproject.toml, a data file read at runtime: everything."""
    text = FILES[rel] + ("\n# changed\n" if not rel.endswith(".json") else "")
    repo = change(project, tmp_path, {rel: text if not rel.endswith(".json") else '{"k": 2}\n'})
    result = select(project, repo)
    assert set(result["run"]) == EVERY and result["fallback"] == "file-not-in-map"
    assert by(result) == {rel: "everything"} and f"{rel} is known to no decider" in result["summary"]


def test_a_new_module_runs_the_tests_of_the_code_that_imports_it(project: Project, tmp_path: Path) -> None:
    edits = edited("pkg/ops.py", "    launch(B_KERNEL)\n", "    from . import fast\n    launch(fast.KERNEL)\n")
    edits["pkg/fast.py"] = f'KERNEL = "{B_K}"\n'
    result = select(project, change(project, tmp_path, edits))
    assert set(result["run"]) == {TEST_B} and by(result) == {"pkg/ops.py": "python", "pkg/fast.py": "python"}
    # a new module no file imports or names: run as a script, by the build, read as data? Coverage cannot say
    result = select(project, change(project, tmp_path / "2", {"pkg/unused.py": "X = 1\n"}))
    assert set(result["run"]) == EVERY and by(result) == {"pkg/unused.py": "everything"}
    # a new top-level module may shadow an installed one: not coverage's to decide
    result = select(project, change(project, tmp_path / "3", {"helpers.py": "X = 1\n"}))
    assert set(result["run"]) == EVERY and by(result) == {"helpers.py": "everything"}


def test_a_deleted_module_runs_every_test_that_executed_it(project: Project, tmp_path: Path) -> None:
    result = select(project, change(project, tmp_path, {"pkg/table.py": None}))
    assert TABLE in result["run"] and by(result) == {"pkg/table.py": "python"}


def test_a_package_run_from_an_installed_copy_is_never_cleared_by_coverage(project: Project, tmp_path: Path) -> None:
    """The suite imported pkg from outside the checkout: the recordings never saw pkg/util.py run."""
    records = [json.loads(line) for line in (project.copied / "pytest.jsonl").read_text().splitlines()]
    assert all("pkg/util.py" in r.get("python_copies", ()) for r in records)
    repo = change(project, tmp_path, edited("pkg/util.py", "return x * SCALE", "return SCALE * x"))
    result = select(project, repo, project.copied)
    assert set(result["run"]) == EVERY and by(result) == {"pkg/util.py": "everything"}
    assert "installed copy" in result["fallback_why"]


def test_a_build_output_in_the_change_is_named(project: Project, tmp_path: Path) -> None:
    repo = change(project, tmp_path, {"wheels/pkg-0-py3-none-any.whl": "PK"})
    proc = ksm("select", "--map", str(project.map), "--recordings", str(project.recordings), "--diff", "HEAD",
               cwd=repo)
    assert proc.returncode == 0 and "looks like a build output" in proc.stderr
    assert "every test runs" in proc.stdout.splitlines()[-1]



def test_a_test_file_other_tests_import(project: Project, tmp_path: Path) -> None:
    """tests/test_reuse.py imports a helper from tests/test_a.py: coverage sees it; without coverage, the test file's
    own tests are not enough, so the rules (none here) or everything decide."""
    repo = change(project, tmp_path, edited("tests/test_a.py", "return 1", "return 2 - 1"))
    assert set(select(project, repo)["run"]) == {REUSE}
    result = select(project, repo, project.kernels_only)
    assert set(result["run"]) == EVERY and "tests/test_reuse.py imports" in result["fallback_why"]


def test_a_test_whose_recording_has_no_python_coverage_runs(project: Project, tmp_path: Path) -> None:
    """A CI step recorded by `record` (no Python coverage) beside the plugin's records: a .py change runs it."""
    step = tmp_path / "step.jsonl"
    step.write_text(json.dumps({"test": "step-x", "kernels": [], "complete": True, "commit": project.commit}) + "\n")
    repo = change(project, tmp_path, edited("pkg/util.py", "return x * SCALE", "return SCALE * x"))
    proc = ksm("select", "--map", str(project.map), "--recordings", str(project.recordings / "pytest.jsonl"),
               str(step), "--diff", "HEAD", "--json", cwd=repo)
    result = json.loads(proc.stdout)
    assert set(result["run"]) == {TEST_A, SCALE, "step-x"}
    assert "no Python coverage" in next(d["why"] for d in result["decisions"] if d["test"] == "step-x")


def test_a_measurement_another_coverage_paused_is_no_evidence(project: Project, tmp_path: Path) -> None:
    records = [json.loads(line) for line in (project.paused / "pytest.jsonl").read_text().splitlines()]
    assert all(r["python"] is None and "paused" in r["python_problem"] for r in records)
    repo = change(project, tmp_path, edited("pkg/util.py", "return x * SCALE", "return SCALE * x"))
    assert set(select(project, repo, project.paused)["run"]) == EVERY


def test_a_new_module_where_modules_are_imported_by_computed_names(project: Project, tmp_path: Path) -> None:
    """pkg/loader.py imports modules by name at run time: a new module may be loaded without being named."""
    edits = {"pkg/loader.py": "import importlib\n\n\ndef load(name):\n    return importlib.import_module(name)\n",
             "pkg/fast.py": "X = 1\n"}
    result = select(project, change(project, tmp_path, edits))
    assert set(result["run"]) == EVERY and by(result)["pkg/fast.py"] == "everything"
    assert "pkg/loader.py:5 imports modules by computed names" in result["fallback_why"]


def test_rules_name_a_file_s_tests(project: Project, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [*RULES["rules"], {"paths": ["data/*.json"], "tests": ["tests/test_table.py"]}]}))
    repo = change(project, tmp_path, {"data/table.json": '{"k": 2}\n', "NOTES.md": "x\n"})
    result = select(project, repo, None, "--rules", str(rules))
    assert set(result["run"]) == {TABLE} and by(result) == {"data/table.json": "rules", "NOTES.md": "rules"}


def test_a_new_module_an_unchanged_file_imports_runs_the_tests_that_ran_that_import(project: Project,
                                                                                  tmp_path: Path) -> None:
    """pkg/ops.py's run_c tries `from . import accel` and falls back: adding pkg/accel.py changes what run_c does."""
    result = select(project, change(project, tmp_path, {"pkg/accel.py": 'NAME = "fast"\n'}))
    assert set(result["run"]) == {OPTIONAL} and by(result) == {"pkg/accel.py": "python"}


def test_python_the_configure_reads_is_the_map_s(project: Project, tmp_path: Path) -> None:
    """pkg/version.py is a configure input (configure_file): the map knows it, coverage never decides it."""
    repo = change(project, tmp_path, edited("pkg/version.py", '"1.0"', '"1.1"'))
    result = select(project, repo)
    assert set(result["run"]) == EVERY and result["fallback"] == "configure-input"
    assert by(result) == {"pkg/version.py": "everything"}


def test_a_symbolic_link_is_not_coverage_s_to_decide(project: Project, tmp_path: Path) -> None:
    """A link's target is what runs (and is recorded); the link itself may change what it names."""
    repo = change(project, tmp_path, {})
    (repo / "pkg" / "fast.py").symlink_to("util.py")
    result = select(project, repo)
    assert set(result["run"]) == EVERY and "symbolic link" in result["fallback_why"]


def test_import_time_code_of_a_module_a_test_imported_first_is_every_test_s(project: Project, tmp_path: Path) -> None:
    """test_imports imports pkg.lazy; test_uses finds it imported and runs none of its code, yet reads X."""
    result = select(project, change(project, tmp_path, edited("pkg/lazy.py", "X = 1", "X = 2")))
    assert {LAZY, USES} <= set(result["run"])


def test_a_docstring_is_where_the_function_is_defined(project: Project, tmp_path: Path) -> None:
    """``__doc__`` is set when ``def`` runs, at import: a test reading it never runs the body."""
    result = select(project, change(project, tmp_path, edited("pkg/util.py", "Say hello.", "Say hi.")))
    assert DOC in result["run"]


@pytest.mark.parametrize("rel", ["tools/gen.py", "tools/flags.py"])
def test_python_the_build_runs_is_never_cleared_by_coverage(project: Project, tmp_path: Path, rel: str) -> None:
    """tools/gen.py: the CMakeLists runs it (execute_process); tools/flags.py: setup.py imports it, and a test
    runs it too, so coverage alone would run that test only."""
    edits = edited(rel, "return []", 'return ["-O3"]') if rel == "tools/flags.py" else {rel: FILES[rel] + "# x\n"}
    result = select(project, change(project, tmp_path, edits))
    assert set(result["run"]) == EVERY and "the build runs it" in result["fallback_why"]


def test_a_tracer_swapped_out_and_back_is_no_evidence(project: Project, tmp_path: Path) -> None:
    records = [json.loads(line) for line in (project.swapped / "pytest.jsonl").read_text().splitlines()]
    assert all(r["python"] is None and "sys.settrace" in r["python_problem"] for r in records)
    repo = change(project, tmp_path, edited("pkg/util.py", "return x * SCALE", "return SCALE * x"))
    assert set(select(project, repo, project.swapped)["run"]) == EVERY


def test_a_test_file_s_tests_are_spelled_from_pytest_s_rootdir() -> None:
    """Node ids are relative to pytest's rootdir, which each record names; a record that names none may have run
    the file (a `record` step) and runs."""
    recordings = [Recording("tests/test_a.py::test_x", frozenset(), True, "c", "", rootdir="sub"),
                  Recording("tests/test_b.py::test_y", frozenset(), True, "c", "", rootdir="sub"),
                  Recording("step-z", frozenset(), True, "c", "")]
    found = of_test_file("sub/tests/test_a.py", recordings)
    assert found.known and set(found.tests) == {"tests/test_a.py::test_x", "step-z"}


def test_a_file_no_test_executed_is_not_coverage_s_to_decide(project: Project, tmp_path: Path) -> None:
    """Coverage saw nothing of pkg/extra.py: no evidence that no test needs it (the build, a script, data)."""
    result = select(project, change(project, tmp_path, edited("pkg/extra.py", "Y = 1", "Y = 2")))
    assert set(result["run"]) == EVERY and "no recorded test executed any of it" in result["fallback_why"]
