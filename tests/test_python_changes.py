"""Changed Python files decided by the tests' recorded Python coverage, and where that coverage cannot decide.

A small pure-Python suite runs once under the real plugin (``pytest --kernel-record``, CUPTI replaced by the
stand-in package of tests/test_recorder_processes.py, real coverage.py, a Python child process too). Each case
clones the recorded commit, changes it as a pull request would, and asks the Python decider about one file.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from native_programs import build_driver
from test_native_children import _cupti_package

from kernel_symbol_map.consumer.select import recordings as recs
from kernel_symbol_map.consumer.select.pythonfiles import FileDecision, PythonDecider, PythonTree
from kernel_symbol_map.mapformat import pyblocks

GIT = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
LICENCE = "# Copyright 2024 Example Corp.\n# SPDX-License-Identifier: Apache-2.0\n\n"
FILES = {
    "pkg/__init__.py": "",
    "pkg/util.py": '''import sys


def double(x):
    return x * 2


def triple(x):
    return x * 3


def helper():
    return "helped"


def scaled(x, factor):
    if factor != 1:
        x = x * factor
        x = round(x, 3)
    return x


def speedups():
    try:
        import fastmath  # an optional top-level module, not in the checkout
    except ImportError:
        return None
    return fastmath


# Two definitions of one name in one scope: which one a test ran is told by its position among them.
if sys.version_info >= (3, 8):
    def flavour():
        return "new"
else:
    def flavour():
        return "old"
''',
    "pkg/ops.py": '''def accelerated():
    try:
        from . import accel  # an optional package, not in the checkout
    except ImportError:
        return None
    return accel


def backend():
    from .backends import cpu

    return cpu.NAME


def tuned():
    try:
        from . import fast  # an optional module, not in the checkout
    except ImportError:
        return None
    return fast
''',
    "pkg/backends/cpu.py": 'NAME = "cpu"\n',  # pkg/backends/ has no __init__.py: a namespace package
    "pkg/cli.py": "def main():\n    print('cli')\n",  # a console script: no test runs it
    # A licence header above the first statement; imported by one test, read by a later one.
    "pkg/lazy.py": LICENCE + "X = 1\n",
    "tests/test_util.py": '''from pkg import ops, util


def test_double():
    assert util.double(2) == 4


def test_speedups():
    assert util.speedups() is None


def test_accelerated():
    assert ops.accelerated() is None


def test_backend():
    assert ops.backend() == "cpu"


def test_tuned():
    assert ops.tuned() is None


def test_flavour():
    assert util.flavour() == "new"


def test_scaled():
    assert util.scaled(0.1, 3) == 0.3
''',
    # Runs pkg/util.py in a child process from an installed copy (COPY_DIR), not from the checkout.
    "tests/test_copy.py": '''import os
import subprocess
import sys


def test_copy():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.environ["COPY_DIR"], os.environ["PYTHONPATH"]]))
    out = subprocess.run([sys.executable, "-P", "-c", "from pkg import util; print(util.helper(), util.__file__)"],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert out.startswith("helped ") and out.split()[1].startswith(os.environ["COPY_DIR"])
''',
    "tests/test_a.py": "LIMIT = 3\n\n\ndef limit():\n    return LIMIT\n\n\ndef test_a():\n    assert LIMIT == 3\n",
    # Imports names from another test module: what that module's import left is this test's too, and it runs a
    # function of that module (whose import-time code was test_a's alone).
    "tests/test_reuse.py": "from test_a import LIMIT, limit\n\n\ndef test_reuse():\n    assert limit() == LIMIT\n",
    "tests/test_lazy.py": '''def test_imports():
    from pkg import lazy

    assert lazy.X == 1


def test_uses():
    from pkg import lazy  # imported already: runs none of its code

    assert lazy.X == 1
''',
}
DOUBLE, SPEEDUPS = "tests/test_util.py::test_double", "tests/test_util.py::test_speedups"
ACCELERATED, BACKEND = "tests/test_util.py::test_accelerated", "tests/test_util.py::test_backend"
TUNED, COPY = "tests/test_util.py::test_tuned", "tests/test_copy.py::test_copy"
TEST_A, REUSE = "tests/test_a.py::test_a", "tests/test_reuse.py::test_reuse"
IMPORTS, USES = "tests/test_lazy.py::test_imports", "tests/test_lazy.py::test_uses"
FLAVOUR, SCALED = "tests/test_util.py::test_flavour", "tests/test_util.py::test_scaled"
EVERY = {DOUBLE, SPEEDUPS, ACCELERATED, BACKEND, TUNED, COPY, TEST_A, REUSE, IMPORTS, USES, FLAVOUR, SCALED}


@dataclass(frozen=True)
class Suite:
    repo: Path
    commit: str
    recordings: list[recs.Recording]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *GIT, *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def committed(repo: Path, files: dict[str, str]) -> str:
    """A new git repository at ``repo`` whose one commit holds ``files`` (path -> text): that commit."""
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Suite:
    where = tmp_path_factory.mktemp("pychanges")
    repo = where / "repo"
    commit = committed(repo, FILES)
    shutil.copytree(repo / "pkg", where / "site" / "pkg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    env["PYTHONPATH"] = os.pathsep.join([str(_cupti_package(where)), str(repo)])
    env["FAKE_CUDA_DRIVER"] = str(build_driver(where))  # what the stand-in's launches load
    env["COPY_DIR"] = str(where / "site")
    out = where / "rec"
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kernel-record",
                           str(out), "--kernel-record-commit", commit],
                          cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recordings = recs.read([out / "pytest.jsonl"], commit)
    assert {r.test for r in recordings} == EVERY
    assert all(r.python is not None for r in recordings), [r.python_why for r in recordings]
    assert git(repo, "status", "--porcelain") == ""  # the run left the checkout clean
    return Suite(repo, commit, recordings)


def clone_with(suite: Suite, tmp_path: Path, edits: dict[str, str]) -> Path:
    """A clone of the suite's commit with ``edits`` (file -> new text), as a pull request's checkout."""
    clone = tmp_path / "pr"
    subprocess.run(["git", "clone", "-q", str(suite.repo), str(clone)], check=True)
    for rel, text in edits.items():
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        (clone / rel).write_text(text)
    return clone


def decide(suite: Suite, tmp_path: Path, edits: dict[str, str], path: str,
           configure_inputs: tuple[str, ...] = ()) -> FileDecision:
    """The Python decider's word on ``path`` in a clone of the suite's commit with ``edits`` (file -> new text),
    the build's configure reading ``configure_inputs``."""
    clone = clone_with(suite, tmp_path, edits)
    return PythonDecider(suite.recordings, PythonTree(clone, suite.commit), configure_inputs).decide(path)


def edited(rel: str, old: str, new: str) -> dict[str, str]:
    assert old in FILES[rel]
    return {rel: FILES[rel].replace(old, new)}


# -- changed files coverage saw run ---------------------------------------------------------------------------

def test_two_functions_that_swap_bodies_reach_the_tests_that_ran_them(suite: Suite, tmp_path: Path) -> None:
    """Each body is still in the file, under the other name: a test that called double() now gets triple's."""
    edits = edited("pkg/util.py", "    return x * 2\n\n\ndef triple(x):\n    return x * 3\n",
                   "    return x * 3\n\n\ndef triple(x):\n    return x * 2\n")
    found = decide(suite, tmp_path, edits, "pkg/util.py")
    assert found.known and set(found.tests) == {DOUBLE, COPY}  # no test ran triple(); test_copy ran a copy


def test_a_statement_moved_out_of_an_if_block_reaches_the_tests_that_ran_its_function(suite: Suite,
                                                                                     tmp_path: Path) -> None:
    """Only the indentation changed: scaled() now rounds whatever the factor."""
    edits = edited("pkg/util.py", "        x = round(x, 3)\n", "    x = round(x, 3)\n")
    found = decide(suite, tmp_path, edits, "pkg/util.py")
    assert found.known and set(found.tests) == {SCALED, COPY}


def test_what_a_setup_py_below_the_top_imports_is_the_builds(suite: Suite, tmp_path: Path) -> None:
    """python/setup.py (the package in a subfolder) imports pkg/util.py: the build runs it."""
    found = decide(suite, tmp_path, {"python/setup.py": "from pkg import util\n"}, "pkg/util.py")
    assert not found.known and "python/setup.py imports or names it" in found.why, found.why


def test_a_script_a_cmake_file_names_under_a_variable_folder_is_the_builds(suite: Suite, tmp_path: Path) -> None:
    """``${GEN_DIR}/util.py``: the folder is the configure's to say, the file is pkg/util.py."""
    cmake = "add_custom_command(OUTPUT x.h COMMAND python3 ${GEN_DIR}/util.py)\n"
    found = decide(suite, tmp_path, {"CMakeLists.txt": cmake}, "pkg/util.py", ("CMakeLists.txt",))
    assert not found.known and "CMakeLists.txt:1 names it" in found.why, found.why


def test_methods_of_one_name_and_body_in_two_classes_are_two_blocks_with_two_digests() -> None:
    """A test that ran A.forward is not cleared by B.forward's body when A.forward changes: each block's digest
    holds its qualified name."""
    blocks = pyblocks.split(b"class A:\n    def forward(self):\n        return 1\n\n\n"
                            b"class B:\n    def forward(self):\n        return 1\n")
    digests = dict(zip(blocks.names, blocks.digests, strict=True))
    assert {"A.forward", "B.forward"} <= digests.keys() and digests["A.forward"] != digests["B.forward"]


def test_two_definitions_of_one_name_that_swap_bodies_reach_the_tests_that_ran_them(suite: Suite,
                                                                                    tmp_path: Path) -> None:
    """Both bodies are still in the file, under the same name: the flavour() test_flavour calls now returns "old"."""
    edits = edited("pkg/util.py", '        return "new"\nelse:\n    def flavour():\n        return "old"\n',
                   '        return "old"\nelse:\n    def flavour():\n        return "new"\n')
    found = decide(suite, tmp_path, edits, "pkg/util.py")
    assert found.known and set(found.tests) == {FLAVOUR, COPY}


def test_a_test_that_ran_an_installed_copy_of_the_changed_file_runs(suite: Suite, tmp_path: Path) -> None:
    """test_copy's child ran pkg/util.py from a copy outside the checkout: its coverage never saw helper() run."""
    by_test = {r.test: r for r in suite.recordings}
    assert "pkg/util.py" in by_test[COPY].python_copies and "pkg/util.py" not in by_test[DOUBLE].python_copies
    found = decide(suite, tmp_path, edited("pkg/util.py", 'return "helped"', 'return "helped!"'), "pkg/util.py")
    assert found.known and set(found.tests) == {COPY} and "installed copy" in found.tests[COPY]


def test_a_test_module_s_import_time_code_reaches_the_tests_of_the_files_importing_it(suite: Suite,
                                                                                      tmp_path: Path) -> None:
    """tests/test_a.py ran at its own collection, for its own tests; tests/test_reuse.py imports LIMIT from it."""
    found = decide(suite, tmp_path, edited("tests/test_a.py", "LIMIT = 3", "LIMIT = 4"), "tests/test_a.py")
    assert found.known and set(found.tests) == {TEST_A, REUSE}
    assert "tests/test_reuse.py" in found.tests[REUSE]


def test_a_test_module_whose_change_no_test_ran_reaches_no_test_through_its_importers(suite: Suite,
                                                                                     tmp_path: Path) -> None:
    """A comment added to tests/test_a.py changes no block: test_reuse, which imports it, is not reached."""
    found = decide(suite, tmp_path, {"tests/test_a.py": FILES["tests/test_a.py"] + "# a comment\n"},
                   "tests/test_a.py")
    assert found.known and found.tests == {}, found.tests


def test_a_module_s_first_statement_below_a_licence_header_marks_where_it_was_imported(suite: Suite,
                                                                                      tmp_path: Path) -> None:
    """test_imports imported pkg/lazy.py, whose first statement is on line 4; test_uses reads what it left."""
    assert pyblocks.split(FILES["pkg/lazy.py"].encode()).first == 4
    found = decide(suite, tmp_path, edited("pkg/lazy.py", "X = 1", "X = 2"), "pkg/lazy.py")
    assert found.known and {IMPORTS, USES} <= set(found.tests)


# -- new files: decided by what imports them, where nothing else can load them ---------------------------------

def test_a_file_git_cannot_date_is_not_decided_as_new(suite: Suite, tmp_path: Path) -> None:
    """Without the recordings' commit, whether pkg/fast.py is new cannot be told: neither its importers nor
    coverage decide it."""
    clone = clone_with(suite, tmp_path, {"pkg/fast.py": "X = 1\n"})
    found = PythonDecider(suite.recordings, PythonTree(clone, "")).decide("pkg/fast.py")
    assert not found.known and "git cannot say whether it is new" in found.why, found.why


def test_a_file_outside_the_checkout_is_not_coverages_to_decide(suite: Suite, tmp_path: Path) -> None:
    found = PythonDecider(suite.recordings, PythonTree(suite.repo, suite.commit)).decide(str(tmp_path / "x.py"))
    assert not found.known and "outside the git checkout" in found.why, found.why


def test_without_python_coverage_in_any_recording_no_python_file_is_decided(suite: Suite, tmp_path: Path) -> None:
    blind = [dataclasses.replace(r, python=None) for r in suite.recordings]
    found = PythonDecider(blind, PythonTree(suite.repo, suite.commit)).decide("pkg/util.py")
    assert not found.known and found.why.startswith("no recording has Python coverage"), found.why


def test_a_new_module_a_tested_function_imports_runs_that_function_s_tests(suite: Suite, tmp_path: Path) -> None:
    """The decidable case the ones below depart from: pkg/ops.py's tuned() tries `from . import fast`."""
    found = decide(suite, tmp_path, {"pkg/fast.py": "X = 1\n"}, "pkg/fast.py")
    assert found.known and found.tests == {TUNED: "it ran pkg/ops.py, which imports the new module pkg.fast"}


def test_a_new_module_a_file_that_no_longer_parses_names_runs_every_test_that_ran_that_file(suite: Suite,
                                                                                           tmp_path: Path) -> None:
    """Where in tests/test_a.py the new import sits cannot be told: test_reuse ran its limit() and runs too."""
    edits = {"pkg/fresh.py": "X = 1\n",
             "tests/test_a.py": "from pkg import fresh\n" + FILES["tests/test_a.py"].replace("limit():", "limit(:")}
    found = decide(suite, tmp_path, edits, "pkg/fresh.py")
    assert found.known and set(found.tests) == {TEST_A, REUSE}


def test_a_new_module_imported_in_a_block_new_since_the_recordings_runs_every_test_that_ran_its_importer(
        suite: Suite, tmp_path: Path) -> None:
    """pkg/ops.py imports pkg/fast.py in tuned(), and in brand_new(), which no recording knows: where brand_new
    is called from cannot be told, so every test that ran pkg/ops.py runs, not only tuned()'s."""
    edits = {"pkg/fast.py": "X = 1\n",
             "pkg/ops.py": FILES["pkg/ops.py"] + "\n\ndef brand_new():\n    from . import fast\n\n    return fast\n"}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert found.known and {TUNED, ACCELERATED, BACKEND} <= set(found.tests), found.tests


def test_a_new_module_a_star_import_of_its_package_may_load_runs_the_tests_that_ran_that_import(
        suite: Suite, tmp_path: Path) -> None:
    """``from pkg import *`` loads pkg/fast.py once pkg's ``__all__`` names it."""
    edits = {"pkg/fast.py": "X = 1\n", "pkg/__init__.py": '__all__ = ["fast"]\n',
             "pkg/util.py": "from pkg import *  # noqa: F403\n" + FILES["pkg/util.py"]}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert found.known and TUNED in found.tests and DOUBLE in found.tests, found.tests


def _double_first(*lines: str) -> dict[str, str]:
    """pkg/util.py whose double(), given None, first runs ``lines``."""
    body = "".join(f"        {line}\n" for line in lines)
    return {"pkg/util.py": FILES["pkg/util.py"].replace("def double(x):\n", "def double(x):\n    if x is None:\n" + body)}


def test_a_new_module_a_dotted_name_inside_it_names_runs_the_tests_that_ran_that_name(suite: Suite,
                                                                                     tmp_path: Path) -> None:
    """"pkg.fast.SPEED" (as ``mock.patch`` or ``pkgutil.resolve_name`` is given it) names pkg/fast.py too."""
    edits = {"pkg/fast.py": "SPEED = 1\n",
             **_double_first("return __import__('pkgutil').resolve_name('pkg.fast.SPEED')")}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert found.known and DOUBLE in found.tests, found.tests


def test_a_new_module_a_file_names_by_its_path_runs_the_tests_that_ran_that_file(suite: Suite,
                                                                                 tmp_path: Path) -> None:
    """double() runs pkg/fast.py as a script, named by its path: no import names it."""
    edits = {"pkg/fast.py": "X = 1\n",
             **_double_first("import subprocess", "return subprocess.run([sys.executable, 'pkg/fast.py'], check=True)")}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert found.known and DOUBLE in found.tests, found.tests


def test_a_new_module_where_a_file_imports_by_a_computed_name_with_the_builtin_is_undecided(
        suite: Suite, tmp_path: Path) -> None:
    """``__import__(f"pkg.{name}")`` may load pkg/fast.py, which no file names: what ran it cannot be told."""
    edits = {"pkg/fast.py": "X = 1\n",
             "pkg/util.py": FILES["pkg/util.py"].replace(
                 "def helper():\n", "def plugin(name):\n    return __import__(f'pkg.{name}')\n\n\ndef helper():\n")}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert not found.known and "imports modules by computed names" in found.why, found.why


def test_a_new_test_file_spelled_the_other_way_is_a_test_file(suite: Suite, tmp_path: Path) -> None:
    """pytest collects ``*_test.py`` as it does ``test_*.py``: nothing imports it, pytest runs it."""
    found = decide(suite, tmp_path, {"tests/fast_test.py": "def test_fast():\n    pass\n"}, "tests/fast_test.py")
    assert not found.known and "a new test file" in found.why, found.why


def test_a_file_that_was_a_link_at_the_recordings_commit_is_not_coverages_to_decide(suite: Suite,
                                                                                   tmp_path: Path) -> None:
    """pkg/alias.py named pkg/util.py when the tests ran: what ran was util.py's code, under either name. Made a
    file of its own, its coverage says nothing."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "util.py").write_text(FILES["pkg/util.py"])
    (repo / "pkg" / "alias.py").symlink_to("util.py")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    commit = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "alias.py").unlink()
    (repo / "pkg" / "alias.py").write_text("X = 1\n")
    found = PythonDecider(suite.recordings, PythonTree(repo, commit)).decide("pkg/alias.py")
    assert not found.known and "a symbolic link" in found.why, found.why


def test_a_new_module_imported_by_a_new_file_nothing_decides_is_undecided(suite: Suite, tmp_path: Path) -> None:
    """pkg/glue.py is new too, and no file imports it: what runs it (a script, the build) runs pkg/fast.py."""
    edits = {"pkg/fast.py": "X = 1\n", "pkg/glue.py": "from . import fast\n"}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert not found.known and "pkg/glue.py, which cannot be decided" in found.why


def test_a_new_module_a_new_module_imports_runs_the_tests_of_what_imports_that_one(suite: Suite,
                                                                                  tmp_path: Path) -> None:
    """tuned() now imports a new pkg/glue.py, which imports a new pkg/deep.py: the chain ends at code a test ran."""
    edits = {"pkg/deep.py": "X = 1\n", "pkg/glue.py": "from . import deep\n",
             **edited("pkg/ops.py", "from . import fast  # an optional module", "from . import glue  # a module")}
    found = decide(suite, tmp_path, edits, "pkg/deep.py")
    assert found.known and set(found.tests) == {TUNED}, found


def test_two_new_modules_that_import_each_other_are_undecided(suite: Suite, tmp_path: Path) -> None:
    """pkg/fast.py (which tuned() imports) and pkg/glue.py import each other, and nothing else imports
    pkg/glue.py: what runs it may run pkg/fast.py, so neither is decided by importers, and the walk ends."""
    edits = {"pkg/fast.py": "from . import glue\n", "pkg/glue.py": "from . import fast\n"}
    found = decide(suite, tmp_path, edits, "pkg/fast.py")
    assert not found.known and "pkg/glue.py, which cannot be decided" in found.why, found.why


def test_a_new_module_imported_only_by_code_no_test_ran_is_undecided(suite: Suite, tmp_path: Path) -> None:
    """The pull request makes pkg/cli.py, a console script no test runs, import a new pkg/report.py."""
    edits = {"pkg/cli.py": "from . import report\n\n\ndef main():\n    report.show()\n",
             "pkg/report.py": "def show():\n    print('report')\n"}
    found = decide(suite, tmp_path, edits, "pkg/report.py")
    assert not found.known and "no recorded test executed pkg/cli.py" in found.why


def test_a_new_top_level_module_is_undecided_even_where_tested_code_imports_it(suite: Suite,
                                                                               tmp_path: Path) -> None:
    """fastmath.py at the top may shadow an installed fastmath that any code (or a test's tool) imports."""
    found = decide(suite, tmp_path, {"fastmath.py": "X = 1\n"}, "fastmath.py")
    assert not found.known and "top-level module" in found.why


def test_a_new_package_below_the_top_is_undecided_even_where_tested_code_imports_it(suite: Suite,
                                                                                    tmp_path: Path) -> None:
    """pkg/accel/__init__.py makes pkg/accel/ a package: how the modules in its folder import changes."""
    found = decide(suite, tmp_path, {"pkg/accel/__init__.py": "X = 1\n"}, "pkg/accel/__init__.py")
    assert not found.known and "a new package" in found.why


def test_a_new_module_beside_a_folder_of_its_name_is_undecided(suite: Suite, tmp_path: Path) -> None:
    """pkg/backends.py takes the name of the namespace package pkg/backends/, which test_backend imports from."""
    found = decide(suite, tmp_path, {"pkg/backends.py": "X = 1\n"}, "pkg/backends.py")
    assert not found.known and "beside the folder pkg/backends/" in found.why


def test_output_mode_asks_git_about_the_recordings_commit_not_the_changes(suite: Suite, tmp_path: Path) -> None:
    """The change's build is of a commit that adds pkg/fast.py: at the recordings' commit it did not exist, so
    it is new, decided by what imports it (test_tuned's function), though the change's commit has it (where
    it would be a file no test executed, which nothing decides)."""
    from test_emitted import _map, _object

    from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
    from kernel_symbol_map.consumer.select.selection import Options, select

    clone = clone_with(suite, tmp_path, {"pkg/fast.py": "X = 1\n"})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "fast")
    objects = [_object("csrc/bind.cpp", [], [], "h-bind", [])]
    base, change = _map(objects, suite.commit), _map(objects, git(clone, "rev-parse", "HEAD"))
    found = select(KernelMap(change), suite.recordings, ["pkg/fast.py"], options=Options(source_root=clone),
                   base=[KernelMap(base)])
    assert found.mode == "output" and found.to_run == [TUNED], (found.to_run, found.reasons)
