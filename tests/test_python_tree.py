"""How ``select`` reads a checkout's Python files: their module names, what imports or names them, what the
build runs, and which changed files the recordings' Python coverage may decide.

One small git checkout, made once, holds each way of importing or naming a file; the cases ask the tree
(:class:`PythonTree`) about it directly, or the decider with records written here. Decisions over a real
recorded suite are tests/test_python_changes.py's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_python_changes import committed, git

from kernel_symbol_map.consumer.select.pythonfiles import PythonDecider, PythonTree, is_test_file
from kernel_symbol_map.consumer.select.recordings import Recording
from kernel_symbol_map.mapformat import pyblocks

FILES = {
    # The checkout's top is a package too (some projects are): module names still start below it.
    "__init__.py": "from . import gen  # the root of the fast path\n",
    # The build: setup.py imports, and names by path, what it runs; CMakeLists.txt names a top-level script.
    "setup.py": 'from tools import build_helpers\nimport tools.codegen\n\nVERSION = open("__init__.py").read()\n'
                'SCRIPTS = ["gen.py", "tables.py"]\n',
    "CMakeLists.txt": "add_custom_command(OUTPUT t.h COMMAND python3 run_me.py)\n",
    "gen.py": "print('gen')\n",
    "run_me.py": "print('run')\n",
    "tools/__init__.py": "",
    "tools/build_helpers.py": "from . import flags\n",  # relative to the package tools
    "tools/flags.py": "FLAGS = []\n",
    "tools/codegen.py": "CODE = 1\n",
    "tools/tables.py": "TABLES = 1\n",
    "tools/unused.py": "UNUSED = 1\n",  # nothing the build runs names it
    # Each way of importing or naming pkg/fast.py, and two that only look like one.
    "pkg/__init__.py": "from . import fast\n",
    "pkg/fast.py": "SPEED = 1\n",
    "pkg/plain.py": "import os, pkg.fast\n",
    "pkg/several.py": "from pkg import util, fast\n",
    "pkg/by_path.py": 'RUN = "./pkg/fast.py"\n',
    "pkg/star.py": "from os.path import *  # noqa: F403 (not fast)\n",
    "pkg/util.py": "from json import dumps\n",  # the standard library's json, not pkg/json.py
    "pkg/loader.py": "import importlib\n\n\ndef load(name):\n    return importlib.import_module(name)\n",
}
FAST_IMPORTERS = {"pkg/__init__.py": [1], "pkg/plain.py": [1], "pkg/several.py": [1], "pkg/by_path.py": [1]}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    repo = tmp_path_factory.mktemp("tree") / "repo"
    return repo, committed(repo, FILES)


@pytest.fixture
def tree(checkout: tuple[Path, str]) -> PythonTree:
    return PythonTree(*checkout)


def _clone(checkout: tuple[Path, str], tmp_path: Path) -> Path:
    """A clone of the checkout's commit, for a pull request's changes."""
    repo = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(checkout[0]), str(repo)], check=True)
    return repo


def test_test_files_are_pytest_s_default_python_files_only() -> None:
    assert is_test_file("tests/test_a.py") and is_test_file("a_test.py")
    assert not is_test_file("tests/test_data.json") and not is_test_file("tests/helpers.py")


def test_a_folder_git_does_not_know_has_no_files_and_no_paths() -> None:
    plain = PythonTree(Path("/"), "")
    assert plain.top is None and plain.files == []
    assert plain.key("x.py") is None and plain.key(str(Path.cwd() / "x.py")) is None


@pytest.mark.timeout(120)  # a module name walks up the packages: it must stop below the top, a package here too
def test_module_names_follow_the_packages_above_a_file_and_stop_below_the_top(tree: PythonTree) -> None:
    assert tree.module("pkg/fast.py") == "pkg.fast" and tree.module("pkg/__init__.py") == "pkg"
    assert tree.module("gen.py") == "gen" and tree.module("__init__.py") is None


def test_what_the_build_runs_is_what_setup_py_imports_or_names_and_what_cmake_names(tree: PythonTree) -> None:
    """Through a plain import, a relative import in a module or a package's ``__init__.py``, a path in a string
    (at the top, or a file's name below it), and a script a CMake file names; never a file none of them reaches."""
    found = tree.build_inputs(["CMakeLists.txt"])
    assert set(found) == {"setup.py", "__init__.py", "gen.py", "run_me.py", "tools/__init__.py",
                          "tools/build_helpers.py", "tools/flags.py", "tools/codegen.py", "tools/tables.py",
                          "pkg/__init__.py", "pkg/fast.py"}  # "__init__.py" names every one
    assert found["tools/flags.py"] == "tools/build_helpers.py imports or names it"
    assert found["pkg/fast.py"] == "pkg/__init__.py imports or names it"  # relative to the package it begins
    assert found["run_me.py"] == "CMakeLists.txt:1 names it"


def test_the_importers_of_a_module_are_each_import_of_it_and_each_path_to_it(tree: PythonTree) -> None:
    """A package's relative import, a plain import among others, one name among several, a path in a string;
    not a star import of another package, though the file says "fast"."""
    assert tree.importers("pkg/fast.py", "pkg.fast") == FAST_IMPORTERS


def test_an_absolute_import_inside_a_package_is_not_relative_to_it(tree: PythonTree) -> None:
    """pkg/util.py's ``from json import dumps`` is the standard library's json, not a new pkg/json.py."""
    assert tree.importers("pkg/json.py", "pkg.json") == {}


def test_a_new_module_that_computes_imports_itself_does_not_make_the_checkout_dynamic(tree: PythonTree) -> None:
    """What a new module's own code imports cannot load it: only the other files' computed imports count."""
    assert tree.dynamic_import("pkg/loader.py") is None
    assert tree.dynamic_import("pkg/fast.py") == "pkg/loader.py:5"


def test_without_the_recordings_commit_a_staged_file_is_not_taken_to_have_existed(checkout: tuple[Path, str],
                                                                                 tmp_path: Path) -> None:
    """``git cat-file -e :path`` would ask the index: without a commit, whether a file is new cannot be told."""
    repo = _clone(checkout, tmp_path)
    (repo / "pkg" / "new.py").write_text("X = 1\n")
    git(repo, "add", "pkg/new.py")
    assert PythonTree(repo, "").existed("pkg/new.py") is None
    assert PythonTree(repo, checkout[1]).existed("pkg/new.py") is False


def _record(test: str, ran: dict[str, frozenset[str]]) -> Recording:
    """A test's complete record that it executed the blocks ``ran`` names (file -> digests)."""
    return Recording(test, frozenset(), True, "", "x.jsonl:1", python=ran)


def _ran(rel: str) -> Recording:
    """A test's record that it executed a block of ``rel``."""
    return _record("tests/test_x.py::test_x", {rel: frozenset({"b"})})


@pytest.mark.parametrize(("rel", "why"), [
    ("pkg/conftest.py", "conftest.py: pytest loads it"),
    ("pkg/kernel.cu", "not a Python file"),
])
def test_coverage_never_decides_a_conftest_or_a_file_that_is_not_python_though_a_test_ran_it(
        tree: PythonTree, rel: str, why: str) -> None:
    found = PythonDecider([_ran(rel)], tree).decide(rel)
    assert not found.known and found.why.startswith(why), found.why


def _digests(text: str) -> frozenset[str]:
    return frozenset(pyblocks.split(text.encode()).digests)


def test_a_test_that_ran_every_block_of_an_unchanged_file_is_not_reached_by_it(tree: PythonTree) -> None:
    """Nothing it ran changed: ``ran <= now`` holds with equality too."""
    found = PythonDecider([_record("t::every", {"pkg/loader.py": _digests(FILES["pkg/loader.py"])})],
                          tree).decide("pkg/loader.py")
    assert found.known and found.tests == {}, found


def test_what_a_test_ran_that_changed_or_went_away_is_counted_and_named(checkout: tuple[Path, str],
                                                                       tmp_path: Path) -> None:
    repo = _clone(checkout, tmp_path)
    (repo / "pkg" / "loader.py").write_text("import importlib\n\n\ndef load(name):\n    return None\n")
    (repo / "tools" / "unused.py").unlink()
    ran = _digests(FILES["pkg/loader.py"])
    decider = PythonDecider([_record("t::one", {"pkg/loader.py": ran, "tools/unused.py": _digests("UNUSED = 1\n")}),
                             _record("t::two", {"pkg/loader.py": ran | {"gone"}})], PythonTree(repo, checkout[1]))
    found = decider.decide("pkg/loader.py")
    assert found.tests == {"t::one": "it executed 1 block of pkg/loader.py that the change altered",
                           "t::two": "it executed 2 blocks of pkg/loader.py that the change altered"}
    assert decider.decide("tools/unused.py").tests == {
        "t::one": "it executed 1 block of tools/unused.py that the change removed"}


@pytest.mark.parametrize(("commit", "named"), [("", "(unknown)"), ("f" * 40, "f" * 40)])
def test_a_new_file_git_cannot_date_names_the_recordings_commit(checkout: tuple[Path, str], tmp_path: Path,
                                                              commit: str, named: str) -> None:
    repo = _clone(checkout, tmp_path)
    (repo / "pkg" / "new.py").write_text("X = 1\n")
    found = PythonDecider([_record("t::x", {"pkg/fast.py": frozenset({"b"})})], PythonTree(repo, commit)) \
        .decide("pkg/new.py")
    assert not found.known and f"(the recordings' commit {named})" in found.why, found.why
