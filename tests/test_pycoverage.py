"""One process's Python measurement (``recorder/pycoverage.py``), driven by hand in a fresh interpreter.

The plugin switches scopes around each test; here a script does it, on a
small git project, so that each rule of the measurement is seen on its own:
which scope a line goes to, what an import in a scope costs, what counts as
the project's, and each way the measurement declines to be evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map.mapformat import pyblocks
from kernel_symbol_map.recorder.pycoverage import ROOT_VARIABLE

A = '''\
"""A module with two functions."""
import os


def f():
    return 1


def g():
    return 2
'''
FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": A,
    "pkg/pre.py": "def h():\n    return 3\n",
    "pkg/lazy.py": "X = 1\n\n\ndef k():\n    return X\n\n\n"
                   "def opened(path):\n    with open(path) as f:\n        return f.read()\n",
    "pkg/frame.py": "Y = 1\n\n\ndef z():\n    return Y\n",
    "tests/test_m.py": "import pkg.a\n\nVALUE = pkg.a.f()\n",
    "tests/test_frames.py": "import pkg.lazy\n\n\ndef run():\n    return pkg.lazy.k()\n",
    "tools/select.py": "",  # named as standard library modules are
    "tools/queue.py": "",
    "build/gen.py": "def made():\n    return 4\n",  # a build output: ignored by git
    ".gitignore": "build/\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _measured(root: Path, body: str, *, before: str = "", start: str = "PythonCoverage.start(root)",
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """What the measurement finishes with, after ``before`` (run before it starts) and ``body`` (``cov`` is it)."""
    script = textwrap.dedent("""\
        import json, os, sys
        from pathlib import Path
        root = Path(sys.argv[1])
        sys.path.insert(0, str(root))
        {before}
        from kernel_symbol_map.recorder.pycoverage import PythonCoverage
        cov = {start}
        {body}
        print(json.dumps(cov.finish("scope::")))
        """).format(before=textwrap.dedent(before), body=textwrap.dedent(body), start=start)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("COV_", "COVERAGE", "KERNEL_SYMBOL_MAP"))},
           **(env or {})}
    proc = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _names(root: Path, scopes: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, set[str]]]:
    """The measurement's digests as block names: scope -> file -> names."""
    found: dict[str, dict[str, set[str]]] = {}
    for scope, files in scopes.items():
        for rel, digests in files.items():
            blocks = pyblocks.split((root / rel).read_bytes())
            named = dict(zip(blocks.digests, blocks.names, strict=True))
            found.setdefault(scope, {})[rel] = {named.get(d, d) for d in digests}
    return found


def test_each_scope_gets_the_blocks_it_ran_and_what_ran_before_the_measurement_is_every_tests(
        project: Path) -> None:
    result = _measured(project, """\
        import pkg.a
        with cov.attributing("t1"):
            pkg.a.f()
        with cov.attributing("t2"):
            pkg.a.g()
        """, before="import pkg.pre")
    assert result["pyblocks"] == pyblocks.SCHEME and result["python_copies"] == []
    assert _names(project, result["python"]) == {
        "scope::": {"pkg/__init__.py": {"<module>"}, "pkg/a.py": {"<module>"}, "pkg/pre.py": {"<module>", "h"}},
        "t1": {"pkg/a.py": {"f"}},
        "t2": {"pkg/a.py": {"g"}},
    }


def test_a_scope_that_imported_a_module_is_every_tests(project: Path) -> None:
    """What a lazy import ran cannot be told from the rest of the scope's code: all of it is every test's."""
    result = _measured(project, """\
        import pkg.a
        with cov.attributing("t1"):
            pkg.a.f()
        with cov.attributing("t2"):
            pkg.a.g()
            import pkg.lazy
            pkg.lazy.k()
        """)
    names = _names(project, result["python"])
    assert names["scope::"]["pkg/a.py"] == {"<module>", "g"} and names["scope::"]["pkg/lazy.py"] == {"<module>", "k"}
    assert names["t1"] == {"pkg/a.py": {"f"}}, names


def test_a_test_modules_collection_goes_to_its_tests_and_what_it_imported_to_every_test(project: Path) -> None:
    result = _measured(project, """\
        with cov.collecting(root / "tests" / "test_m.py", "scope::tests/test_m.py"):
            import importlib.util
            spec = importlib.util.spec_from_file_location("test_m", root / "tests" / "test_m.py")
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        """)
    names = _names(project, result["python"])
    assert names["scope::tests/test_m.py"] == {"tests/test_m.py": {"<module>"}}, names
    assert "tests/test_m.py" not in names["scope::"], names  # though an import ran in its collection
    # pkg.a was imported, and f run, by the collection: every test's, not the module's alone
    assert names["scope::"]["pkg/a.py"] == {"<module>", "f"}, names


def test_files_git_does_not_track_and_files_outside_the_project_are_left_out(project: Path,
                                                                              tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("def o():\n    return 5\n")
    result = _measured(project, f"""\
        sys.path.insert(0, {str(tmp_path)!r})
        with cov.attributing("t1"):
            import gen, outside
            gen.made()
            outside.o()
        """, before="sys.path.insert(0, str(root / 'build'))\nimport gen")  # imported before, too
    files = {rel for scope in result["python"].values() for rel in scope}
    assert "build/gen.py" not in files and not any("outside" in f for f in files), files


def test_a_project_module_run_from_an_installed_copy_is_named(project: Path, tmp_path: Path) -> None:
    (tmp_path / "site" / "pkg").mkdir(parents=True)
    (tmp_path / "site" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "site" / "pkg" / "a.py").write_text(A)
    result = _measured(project, f"""\
        sys.path.insert(0, {str(tmp_path / "site")!r})
        import pkg.a
        with cov.attributing("t1"):
            pkg.a.f()
        """)
    assert result["python_copies"] == ["pkg/__init__.py", "pkg/a.py"], result
    assert "pkg/a.py" not in {rel for scope in result["python"].values() for rel in scope}, result


def test_a_project_module_compiled_into_an_extension_is_named_and_the_standard_librarys_never_are(
        project: Path, tmp_path: Path) -> None:
    """mypyc and Cython compile a project's .py files into extension modules: what they ran no coverage sees.
    The standard library's own modules (``select`` compiled, ``queue`` in Python) share names with project
    files, and are never copies of them."""
    site = tmp_path / "site" / "pkg"
    result = _measured(project, f"""\
        import queue, select, sysconfig, types
        installed = sysconfig.get_path("stdlib") + "/site-packages/pkg/a.py"  # an interpreter's own site-packages
        for name, file in [("pkg", {str(site)!r} + "/__init__.cpython-311-x86_64-linux-gnu.so"),
                           ("pkg.lazy", {str(site)!r} + "/lazy.cpython-311-x86_64-linux-gnu.so"), ("pkg.a", installed)]:
            sys.modules[name] = types.ModuleType(name)
            sys.modules[name].__file__ = file
        """)
    assert result["python_copies"] == ["pkg/__init__.py", "pkg/a.py", "pkg/lazy.py"], result


@pytest.mark.parametrize(("body", "before", "problem"), [
    # started, its tracer since taken away: still the current measurement
    ("", "import coverage\nother = coverage.Coverage(data_file=None)\nother.start()\nsys.settrace(None)",
     "another coverage measurement (pytest-cov) is running"),
    ("", "sys.settrace(lambda *a: None)", "another tracer (pytest-cov, coverage, a debugger) is running"),
    ("sys.settrace(sys.gettrace())", "", "sys.settrace was called by <string>"),
    # the first problem is the one told
    ('sys.settrace(None)\nwith cov.attributing("t1"):\n    pass', "", "sys.settrace was called by <string>"),
    ("sys.settrace(sys.gettrace())\nimport coverage\nother = coverage.Coverage(data_file=None)\nother.start()\n"
     "other.stop()", "", "sys.settrace was called by <string>"),
    ('with cov.attributing("t1"):\n    import coverage\n    other = coverage.Coverage(data_file=None)\n'
     '    other.start()\n    other.stop()', "", "another coverage measurement (pytest-cov, a test's own coverage.py)"),
])
def test_a_measurement_that_tracing_was_taken_from_is_no_evidence(project: Path, body: str, before: str,
                                                                  problem: str) -> None:
    result = _measured(project, body, before=before)
    assert result["python"] is None and result["python_problem"].startswith(problem), result


def test_no_project_root_is_no_evidence(tmp_path: Path) -> None:
    result = _measured(tmp_path / "missing", "")
    assert result == {"python": None,
                      "python_problem": "no project root to measure Python code in (not a git checkout)"}


def _forked(root: Path, tmp_path: Path, *, parent: str, child: str, before: str = ""
            ) -> tuple[dict[str, Any], bool, dict[str, Any]]:
    """A measured process runs ``parent`` (one line) and forks; the child runs ``child`` (one line), starts
    measuring, and runs ``pkg.a.g()`` in the scope "child". The parent's result; whether the child went on
    with the parent's measurement, and the child's result."""
    out = tmp_path / "child.json"
    result = _measured(root, f"""\
        {parent}
        pid = os.fork()
        if pid == 0:
            {child}
            again = PythonCoverage.start(root)
            with again.attributing("child"):
                import pkg.a; pkg.a.g()
            Path({str(out)!r}).write_text(json.dumps([again is cov, again.finish("scope::")]))
            os._exit(0)
        os.waitpid(pid, 0)
        """, before=before)
    same, measured = json.loads(out.read_text())
    return result, same, measured


def test_a_forked_child_goes_on_measuring_with_its_parents_measurement(project: Path, tmp_path: Path) -> None:
    """The same measurement, now this process's: what the child ran is its own result."""
    _, same, child = _forked(project, tmp_path, parent="import pkg.a", child="pass")
    assert same and _names(project, child["python"])["child"] == {"pkg/a.py": {"g"}}, child


def test_the_project_root_is_the_environments_where_none_is_given(project: Path) -> None:
    body = 'with cov.attributing("t1"):\n    import pkg.a\n    pkg.a.f()\n'
    result = _measured(project, body, start="PythonCoverage.start()", env={ROOT_VARIABLE: str(project)})
    assert _names(project, result["python"])["t1"]["pkg/a.py"] == {"<module>", "f"}, result
    assert _measured(project, body, start="PythonCoverage.start()")["python_problem"] == (
        "no project root to measure Python code in (not a git checkout)")


def test_a_forked_child_of_a_process_that_could_not_measure_starts_a_measurement_of_its_own(
        project: Path, tmp_path: Path) -> None:
    """The parent's tracer kept it from measuring; the child, rid of it, measures."""
    result, same, child = _forked(project, tmp_path, parent="pass", child="sys.settrace(None)",
                                  before="sys.settrace(lambda *a: None)")
    assert result["python"] is None, result
    assert not same and _names(project, child["python"])["child"]["pkg/a.py"] == {"<module>", "g"}, child


def test_what_a_jit_ran_built_and_launched_goes_to_the_scope_it_ran_in(project: Path) -> None:
    """A JIT tells the measurement what coverage cannot see: code it compiled (and traced into a frame), kernels
    it launched, files it compiled at run time."""
    result = _measured(project, """\
        import json, pkg.a
        with cov.attributing("t1"):
            cov.built([root / "csrc" / "k.cu", "/opt/other/x.cu"])
            cov.launched(pkg.a.f)
            cov.launched(pkg.a.f)
            import pkg.lazy
            cov.note(pkg.lazy.opened.__code__)  # a with statement: instructions of no line
            cov.compiled(pkg.a.f.__code__, [pkg.a.g.__code__])  # f's frame, with g traced into it
            frame = root / "pkg" / "frame.py"
            cov.compiled(compile(frame.read_text(), str(frame), "exec"), [pkg.a.g.__code__])
        with cov.attributing("t2"):
            import pkg.frame  # the compiled frame runs again (its first line): g with it
            cov.launched(pkg.a.f)  # launched again in a later test: that test's too
        with cov.attributing("t5"):
            pkg.frame.z()  # another line of the frame's file: not the frame
            cov.launched(json.dumps)  # a kernel named after a function outside the project
        """)
    assert result["jit_sources"] == {"t1": ["/opt/other/x.cu", "csrc/k.cu"]}, result
    assert result["jit_kernels"] == {"t1": {"f": ["pkg/a.py:f"]}, "t2": {"f": ["pkg/a.py:f"]},
                                     "t5": {"dumps": [f"{os.path.realpath(json.__file__)}:dumps"]}}, result
    names = _names(project, result["python"])
    assert names["t1"]["pkg/a.py"] == {"<module>", "f", "g"}, names  # a code object's lines start at its def
    assert "opened" in names["t1"]["pkg/lazy.py"], names
    assert "g" in names["t2"]["pkg/a.py"] and "f" not in names["t2"]["pkg/a.py"], names
    assert names["t5"] == {"pkg/frame.py": {"z"}}, names
    result = _measured(project, """\
        import json, pkg.a
        import pkg.lazy
        with cov.attributing("t3"):
            cov.compiled(json.dumps.__code__, [pkg.a.g.__code__])  # a frame no one measures: g is every test's
        with cov.attributing("t4"):
            cov.compiled(pkg.a.f.__code__, [pkg.lazy.k.__code__])  # a frame of the project's: k is t4's alone
        """)
    names = _names(project, result["python"])
    assert "g" in names["t3"]["pkg/a.py"] and "g" in names["scope::"]["pkg/a.py"], names
    assert "k" in names["t4"]["pkg/lazy.py"] and "k" not in names["scope::"]["pkg/lazy.py"], names


def test_a_scope_inside_another_gives_the_outer_one_back_when_it_ends(project: Path) -> None:
    result = _measured(project, """\
        import pkg.a, pkg.lazy
        with cov.attributing("module"):
            with cov.attributing("test"):
                pkg.a.g()
            pkg.a.f()
        pkg.lazy.k()
        """)
    names = _names(project, result["python"])
    assert names["test"] == {"pkg/a.py": {"g"}} and names["module"] == {"pkg/a.py": {"f"}}, names
    assert "k" in names["scope::"]["pkg/lazy.py"], names


def test_a_measurement_after_one_finished_is_a_new_one(project: Path) -> None:
    """A test that runs pytest itself (pytester, in process) starts and finishes a measurement of its own."""
    result = _measured(project, """\
        import pkg.a
        with cov.attributing("t1"):
            pkg.a.f()
        first, old = cov.finish("scope::"), cov
        cov = PythonCoverage.start(root)
        assert cov is not old and first["python"]["t1"], first
        with cov.attributing("t2"):
            pkg.a.g()
        """)
    names = _names(project, result["python"])
    assert "t1" not in names and names["t2"] == {"pkg/a.py": {"g"}}, names
    assert names["scope::"]["pkg/a.py"] == {"<module>", "f", "g"}, names  # imported before this one started


def test_a_compiled_frames_def_line_run_by_an_import_or_a_collection_is_no_run_of_the_frame(project: Path) -> None:
    """A function's frame shows to coverage by its first line, its ``def``: a module's import runs that line
    too, without calling the function."""
    result = _measured(project, """\
        import pkg.lazy
        source = root / "tests" / "test_frames.py"
        module = compile(source.read_text(), str(source), "exec")
        run = next(c for c in module.co_consts if getattr(c, "co_name", "") == "run")
        with cov.attributing("t1"):
            cov.compiled(run, [pkg.lazy.k.__code__])
        with cov.collecting(source, "scope::tests/test_frames.py"):
            exec(module, {"__name__": "test_frames"})
        exec(module, {"__name__": "test_frames_again"})
        """)
    names = _names(project, result["python"])
    assert "k" in names["t1"]["pkg/lazy.py"], names
    assert "k" not in names["scope::"]["pkg/lazy.py"] and "pkg/lazy.py" not in names["scope::tests/test_frames.py"]


@pytest.mark.parametrize(("pyproject", "decorators"), [
    ('[tool.kernel-symbol-map]\njit-decorators = ["pkg.jit.kernel", 3, "other.jit"]\n',
     ["pkg.jit.kernel", "other.jit"]),
    ('[tool.kernel-symbol-map]\njit-decorators = "pkg.jit.kernel"\n', []),
    ('[tool.kernel-symbol-map]\n', []),
    ('tool = 1\n', []),
    ('[tool\n', []),
    (None, []),
])
def test_jit_decorators_are_read_from_the_projects_pyproject(tmp_path: Path, pyproject: str | None,
                                                             decorators: list[str]) -> None:
    """Only a list's strings name decorators; anything else in the table, or no readable file, names none."""
    from kernel_symbol_map.recorder.pycoverage import _decorators

    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    assert _decorators(tmp_path) == decorators
    assert _decorators(None) == []
