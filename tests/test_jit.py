"""Python code a JIT compiles reaches the tests that ran it: torch.compile, numba, a source-text JIT.

A small real suite runs under the plugin (CUPTI's stand-in, real coverage.py, real torch on CPU with
Dynamo, real numba). A change inside each JIT'd function, or in a callee the JIT compiled into it, must
reach the test that ran it, and must not reach a control test in another module that imported the same
module and ran none of it. The source-text JIT compiles the function from its text and never runs its
code object, as Triton does on a GPU.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from native_programs import build_driver
from test_native_children import _cupti_package

from kernel_symbol_map.consumer.select import recordings as recs
from kernel_symbol_map.consumer.select.jitkernels import attribute
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.pythonfiles import PythonDecider, PythonTree
from kernel_symbol_map.consumer.select.rules import StaticRules
from kernel_symbol_map.consumer.select.selection import Options, Selection, select

pytest.importorskip("torch", reason="torch is not installed: torch.compile cannot be checked")
pytest.importorskip("numba", reason="numba is not installed: its dispatchers cannot be checked")

GIT = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
JITLIB = '''import inspect
import textwrap


class Compiled:
    """Compiles a function from its source text, as Triton does: the function's own code never runs."""

    def __init__(self, fn):
        text = textwrap.dedent(inspect.getsource(fn))
        text = "\\n".join(line for line in text.splitlines() if not line.lstrip().startswith("@"))
        namespace = {}
        exec(compile(text, "<jit " + fn.__name__ + ">", "exec"), fn.__globals__, namespace)
        self.fn = namespace[fn.__name__]

    def __getitem__(self, grid):
        from cupti import cupti

        cupti.launch(self.fn.__name__)  # a launch: a kernel named after the function, as Triton names them
        return self.fn

    def __call__(self, *args):
        return self.fn(*args)


def jit(fn, num_warps=4):
    return Compiled(fn)


class Kernel(Compiled):
    """The same, as a decorator that is a class (a user may check isinstance)."""
'''
KERNELS = '''import torch
from numba import cuda, njit, vectorize

from pkg import ops, pure
from pkg.jitlib import Kernel, jit


def helper(x):
    return x * 2


@torch.compile(backend="aot_eager")
def compiled(x):
    return helper(x) + 1


@torch.compile(backend="aot_eager")
def squared(x):
    return pure.sq(x) + 1


@njit
def inner(x):
    return x * 3


@njit
def jitted(x):
    return inner(x) + 1


@jit
def add_kernel(x, y):
    return x + y


def with_options(x):
    return x * 7


with_options = jit(with_options, num_warps=8)


@Kernel
def class_kernel(x):
    return x - 1


class Scaled(torch.nn.Module):
    def forward(self, x):
        return helper2(x)


def helper2(x):
    return x * 6


sequential = torch.compile(torch.nn.Sequential(Scaled()), backend="aot_eager")


def make(f):
    @njit
    def g(x):
        return f(x) + 1
    return g


@njit
def fa(x):
    return x * 10


@njit
def fb(x):
    return x * 11


ga, gb = make(fa), make(fb)


@njit
def apply(f, x):
    return f(x)


@njit
def passed(x):
    return x * 13


@vectorize
def vplus(x):
    return x + 100


@jit
def fused_kernel(x, y):
    return ops.combine(x, y) * 2


@cuda.jit(device=True)
def cuda_helper(v):
    return v + 1


@cuda.jit
def cuda_kernel(x):
    x[0] = cuda_helper(x[0])
'''
TRITON = '''import triton
import triton.language as tl


@triton.jit
def combine(x, y):
    return x + y


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, combine(tl.load(x_ptr + offs, mask=mask), tl.load(y_ptr + offs, mask=mask)), mask=mask)
'''
FILES = {
    "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n'
                      '[tool.kernel-symbol-map]\njit-decorators = ["pkg.jitlib:jit", "pkg.jitlib:Kernel"]\n',
    "pkg/__init__.py": "",
    "pkg/jitlib.py": JITLIB,
    "pkg/kernels.py": KERNELS,
    "pkg/pure.py": "def sq(x):\n    return x * x\n",  # its first statement is a function's: no import runs it
    "pkg/ops.py": "from pkg.jitlib import jit\n\n\n@jit\ndef combine(x, y):\n    return x + y\n",
    "pkg/spelt.py": "from pkg import jitlib\n\n\n@ jitlib . jit  # as Python lets it be spelt\ndef spelt(x):\n"
                    "    return x\n",
    "pkg/csrc/scale.cuh": "#pragma once\n#define SCALE 2\n",  # package data: the package compiles it at run time
    "csrc/ext.cpp": "#error compiled at run time, and failing at once\n",
    "csrc/jit/add.cu": 'extern "C" __global__ void add_kernel(float* x) { x[0] += 1; }\n',  # NVRTC's, by name
    "pkg/aliased.py": "from pkg.jitlib import jit\nfrom pkg.ops import combine as together\n\n\n@jit\n"
                      "def aliased_kernel(x, y):\n    return together(x, y)\n",
    "pkg/tri.py": TRITON,
    "tests/test_triton.py": '''import pytest

triton = pytest.importorskip("triton")

import torch  # noqa: E402

from pkg import tri  # noqa: E402


def test_triton():
    x = torch.ones(4)
    try:
        tri.add_kernel[(1,)](x, x, x, 4, BLOCK=4)
    except RuntimeError:  # no GPU here: the launch stops at the driver, after Triton was asked to run it
        pass
''',
    "tests/test_a.py": '''import numpy
import torch

from pkg import jitlib, kernels


def test_compiled():
    assert kernels.compiled(torch.ones(2)).tolist() == [3.0, 3.0]


def test_compiled_again():  # the compiled graph, run again: Dynamo compiles nothing now
    assert kernels.compiled(torch.ones(2)).tolist() == [3.0, 3.0]


def test_numba():
    assert kernels.jitted(2) == 7


def test_source_jit():
    assert kernels.add_kernel[(1,)](1, 2) == 3


def test_squared():
    assert kernels.squared(torch.ones(1)).tolist() == [2.0]


def test_with_options():
    assert kernels.with_options[(1,)](1) == 7


def test_class_kernel():
    assert isinstance(kernels.class_kernel, jitlib.Kernel)
    assert kernels.class_kernel[(1,)](3) == 2


def test_sequential():
    assert kernels.sequential(torch.ones(1)).tolist() == [6.0]


def test_sequential_again():
    assert kernels.sequential(torch.ones(1)).tolist() == [6.0]


def test_factory_a():
    assert kernels.ga(1) == 11


def test_factory_b():
    assert kernels.gb(1) == 12


def test_passed():
    assert kernels.apply(kernels.passed, 1) == 13


def test_vectorize():
    assert kernels.vplus(numpy.arange(2)).tolist() == [100, 101]


def test_fused():
    assert kernels.fused_kernel[(1,)](1, 2) == 6


def test_numba_cuda():
    from numba.cuda.cudadrv.error import CudaSupportError

    try:
        kernels.cuda_kernel[1, 1](numpy.zeros(1))
    except CudaSupportError:  # no GPU here: the launch stops at the driver, after numba was asked to run it
        pass


def test_cpp_extension(tmp_path):
    import pytest
    from torch.utils import cpp_extension

    with pytest.raises(RuntimeError):
        cpp_extension.load("ext", ["csrc/ext.cpp"], build_directory=str(tmp_path))
''',
    "tests/test_b.py": '''from pkg import kernels


def test_control():
    assert kernels.helper is not None
''',
}
TESTS = ("test_compiled", "test_compiled_again", "test_numba", "test_source_jit", "test_squared", "test_with_options",
         "test_class_kernel", "test_sequential", "test_sequential_again", "test_factory_a", "test_factory_b",
         "test_passed", "test_vectorize", "test_fused", "test_numba_cuda", "test_cpp_extension", "test_triton",
         "test_control")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[recs.Recording]]:
    where = tmp_path_factory.mktemp("jit")
    repo = where / "repo"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), *GIT, "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), *GIT, "commit", "-qm", "base"], check=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    env["PYTHONPATH"] = os.pathsep.join([str(_cupti_package(where)), str(repo)])
    env["FAKE_CUDA_DRIVER"] = str(build_driver(where))  # what the stand-in's launches load
    env["NUMBA_CACHE_DIR"] = str(where / "numba-cache")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(where / "inductor-cache")
    out = where / "rec"
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--kernel-record",
                           str(out), "--kernel-record-commit", commit],
                          cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return repo, commit, recs.read([out / "pytest.jsonl"], commit)


def _ran(suite: tuple[Path, str, list[recs.Recording]], old: str, new: str) -> set[str]:
    """The tests a change of ``old`` to ``new`` in pkg/kernels.py reaches, by their Python coverage."""
    repo, commit, recordings = suite
    path = repo / "pkg/kernels.py"
    assert old in KERNELS
    path.write_text(KERNELS.replace(old, new))
    try:
        decision = PythonDecider(recordings, PythonTree(repo, commit)).decide("pkg/kernels.py")
    finally:
        path.write_text(KERNELS)
    assert decision.known, decision.why
    return {t.rsplit("::", 1)[-1] for t in decision.tests}


def test_every_test_is_recorded_with_python_code(suite: tuple[Path, str, list[recs.Recording]]) -> None:
    _, _, recordings = suite
    assert sorted(r.test.rsplit("::", 1)[-1] for r in recordings) == sorted(TESTS)
    assert all(r.python is not None for r in recordings), [r.python_why for r in recordings]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("return helper(x) + 1", "return helper(x) + 2", {"test_compiled", "test_compiled_again"}),
    ("return x * 2", "return x * 4", {"test_compiled", "test_compiled_again"}),  # inlined into the graph
    ("return inner(x) + 1", "return inner(x) + 2", {"test_numba"}),
    ("return x * 3", "return x * 5", {"test_numba"}),  # compiled into jitted
    ("return x + y", "return x - y", {"test_source_jit"}),
    # Dynamo traced pkg/pure.py's function, the file's first statement: that is no import of the file.
    ("return pure.sq(x) + 1", "return pure.sq(x) + 2", {"test_squared"}),
    ("return x * 7", "return x * 8", {"test_with_options"}),  # jit(f, options), launched
    ("return x - 1", "return x - 2", {"test_class_kernel"}),  # a decorator that is a class
    ("return x * 11", "return x * 12", {"test_factory_b"}),  # one factory's two dispatchers, each its own callee
    ("return x * 13", "return x * 14", {"test_passed"}),  # a dispatcher passed in is compiled in
    ("return x + 100", "return x + 101", {"test_vectorize"}),
    ("return v + 1", "return v + 2", {"test_numba_cuda"}),  # a @cuda.jit kernel's device function
    # A compiled frame of torch's own (nn.Sequential): its later runs cannot be seen, so the project code traced
    # into it is every test's.
    ("return x * 6", "return x * 5", set(TESTS)),
])
def test_a_change_inside_a_jit_function_reaches_the_tests_that_ran_it(
        suite: tuple[Path, str, list[recs.Recording]], old: str, new: str, expected: set[str]) -> None:
    assert _ran(suite, old, new) == expected


# -- kernels a JIT names after a function ---------------------------------------------------------------------

def _map(commit: str) -> KernelMap:
    """One compiled object, whose kernel no test here launched: every kernel the suite launched is a JIT's."""
    obj = {"source": "csrc/x.cu", "target": "t", "object": "x.o", "device": True, "symbols": ["_Z1xv"],
           "deps": ["csrc/x.cu"]}
    return KernelMap({"version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": [],
                      "incomplete": False, "errors": [], "stats": {}, "objects": [obj]})


def _select(suite: tuple[Path, str, list[recs.Recording]], edits: dict[str, tuple[str, str]],
            recordings: list[recs.Recording] | None = None, external: tuple[str, ...] = ()) -> Selection:
    """select over the suite's recordings for ``edits`` (file -> (old, new)), made in the checkout meanwhile."""
    repo, commit, recorded = suite
    kept = {rel: (repo / rel).read_text() for rel in edits if rel.endswith(".py")}
    for rel, (old, new) in edits.items():
        if rel in kept:
            assert old in kept[rel], (rel, old)
            (repo / rel).write_text(kept[rel].replace(old, new))
    try:
        options = Options(source_root=repo, external_kernels=external, jit_decorators=("pkg.jitlib:jit", "pkg.jitlib:Kernel"))
        return select(_map(commit), recorded if recordings is None else recordings, list(edits), options=options)
    finally:
        for rel, text in kept.items():
            (repo / rel).write_text(text)


def _runs(selection: Selection) -> set[str]:
    return {t.rsplit("::", 1)[-1] for t in selection.to_run}


def test_the_plugin_records_which_function_a_jit_launched(suite: tuple[Path, str, list[recs.Recording]]) -> None:
    by_test = {r.test.rsplit("::", 1)[-1]: r for r in suite[2]}
    assert by_test["test_source_jit"].kernels == ("add_kernel",)
    assert dict(by_test["test_source_jit"].jit_kernels) == {"add_kernel": {"pkg/kernels.py:add_kernel"}}
    assert dict(by_test["test_class_kernel"].jit_kernels) == {"class_kernel": {"pkg/kernels.py:class_kernel"}}
    assert not by_test["test_control"].jit_kernels
    assert all(r.complete for t, r in by_test.items() if t != "test_triton")  # skipped where Triton is absent


@pytest.mark.parametrize("external", [(), ("add_.*",), (".*_kernel",), ("nccl.*", "add_.*")])
def test_a_jit_kernels_function_changed_runs_its_test_even_when_listed_external(
        suite: tuple[Path, str, list[recs.Recording]], external: tuple[str, ...]) -> None:
    found = _select(suite, {"pkg/kernels.py": ("return x + y", "return x - y")}, external=external)
    assert _runs(found) == {"test_source_jit"}, found.to_json()["decisions"]
    assert bool(found.notes) == bool(external) and all("decided by that function's" in n for n in found.notes)
    noted = [n.split()[2].rstrip(",") for n in found.notes]  # "--external-kernels matches K, a kernel ..."
    assert all(any(re.fullmatch(p, k) for p in external) for k in noted), found.notes  # only those it matches


def test_a_jit_kernel_is_neither_unknown_nor_external(suite: tuple[Path, str, list[recs.Recording]]) -> None:
    found = _select(suite, {"csrc/x.cu": ("", "")})  # a compiled source: no JIT'd function changed
    assert _runs(found) == set(), found.to_json()["decisions"]


def _by_name(recordings: list[recs.Recording], **changes: Any) -> list[recs.Recording]:
    """The recordings as a recorder that did not see the JIT launch them would write them."""
    return [dataclasses.replace(r, jit_kernels={}, **changes) for r in recordings]


def test_without_the_recordings_word_a_jit_kernel_is_its_functions_by_name(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    recorded = _by_name(suite[2])
    # with_options = jit(with_options, ...) decorates nothing: by name, it is no JIT'd function's, and unknown
    assert _runs(_select(suite, {"csrc/x.cu": ("", "")}, recorded)) == {"test_with_options"}
    found = _select(suite, {"pkg/kernels.py": ("return x + y", "return x - y")}, recorded, external=("add_.*",))
    assert _runs(found) == {"test_source_jit", "test_with_options"} and found.notes
    # No Python coverage to decide by: a Python change runs it; a compiled source's still does not.
    blind = _by_name(suite[2], python=None, python_why="not measured")
    assert "test_source_jit" in _runs(_select(suite, {"pkg/ops.py": ("x + y", "x * y")}, blind))
    assert _runs(_select(suite, {"csrc/x.cu": ("", "")}, blind)) == {"test_with_options"}


@pytest.mark.parametrize("kernel", ["fused_kernel", "fused_kernel_0d1d2de"])  # Triton 3, and older's suffix
def test_by_name_a_jit_kernel_reaches_the_jit_functions_its_function_names(
        suite: tuple[Path, str, list[recs.Recording]], kernel: str) -> None:
    """A recording that knows only the kernel's name (its Python coverage holds no block of the function): the
    function is found by name, and the JIT'd function it calls, in another file, with it."""
    _, commit, _ = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({kernel}), True, commit, "here", python={})
    others = suite[2]  # the suite's own: the changed files are decided by coverage, not run for everything
    ran = _runs(_select(suite, {"pkg/ops.py": ("x + y", "x * y")}, [alone, *others]))
    assert ran == {"test_alone", "test_fused"}
    assert _runs(_select(suite, {"pkg/kernels.py": ("ops.combine(x, y) * 2", "ops.combine(x, y) * 3")},
                         [alone, *others])) == {"test_alone", "test_fused"}
    assert _runs(_select(suite, {"pkg/kernels.py": ("return x * 13", "return x * 14")},
                         [alone, *others])) == {"test_passed"}
    unknown = dataclasses.replace(alone, kernels=frozenset({"other_kernel"}))  # no function has its name
    assert _runs(_select(suite, {"pkg/kernels.py": ("return x * 13", "return x * 14")},
                         [unknown, *others])) == {"test_alone", "test_passed"}


def test_by_name_a_decorator_is_read_as_python_spells_it(suite: tuple[Path, str, list[recs.Recording]]) -> None:
    _, commit, _ = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({"spelt"}), True, commit, "here", python={})
    assert _runs(_select(suite, {"csrc/x.cu": ("", "")}, [alone])) == set()  # pkg/spelt.py:spelt's: not unknown


@pytest.mark.parametrize(("kernel", "jit_kernels"), [
    ("helper", {}),  # pkg/kernels.py's helper is no JIT'd function: no JIT names a kernel after it
    ("ext_kernel", {"ext_kernel": frozenset({"/site-packages/ext/k.py:ext_kernel"})}),  # not the project's code
])
def test_a_kernel_no_jit_function_of_the_project_is_named_after_stays_unknown(
        suite: tuple[Path, str, list[recs.Recording]], kernel: str, jit_kernels: dict[str, frozenset[str]]) -> None:
    _, commit, _ = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({kernel}), True, commit, "here", python={},
                           jit_kernels=jit_kernels)
    found = _select(suite, {"csrc/x.cu": ("", "")}, [alone])
    assert [d.reason for d in found.decisions] == ["unknown-kernel"]


# -- sources the package compiles at run time ---------------------------------------------------------------------

def test_the_plugin_records_the_sources_a_test_compiled_at_run_time(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    by_test = {r.test.rsplit("::", 1)[-1]: r for r in suite[2]}
    assert by_test["test_cpp_extension"].jit_sources == {"csrc/ext.cpp"}
    assert not by_test["test_control"].jit_sources


def test_a_source_a_test_compiled_at_run_time_runs_that_test(suite: tuple[Path, str, list[recs.Recording]]) -> None:
    # In no map, and no rule for it: every test runs (another test may call what it compiled, from its cache).
    assert _runs(_select(suite, {"csrc/ext.cpp": ("", "")})) == set(TESTS)
    repo, commit, recorded = suite
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/ext.cpp"], "tests": ["tests/test_b.py::test_control"]}]})
    found = select(_map(commit), recorded, ["csrc/ext.cpp"], options=Options(source_root=repo, rules=rules))
    # The rules' test, and the test that compiled it.
    assert _runs(found) == {"test_control", "test_cpp_extension"} and found.verdicts["csrc/ext.cpp"].by == "run-time"


def test_a_run_time_source_that_names_a_jit_functions_kernel_runs_its_tests(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    """csrc/jit/add.cu's kernel, compiled at run time, has the name of pkg/kernels.py's JIT'd add_kernel: a
    test that launched add_kernel may have run either."""
    repo, commit, recorded = suite
    nvrtc = recs.Recording("tests/test_c.py::test_nvrtc", frozenset({"add_kernel"}), True, commit, "here", python={})
    found = select(_map(commit), [*recorded, nvrtc], ["csrc/jit/add.cu"], options=Options(
        source_root=repo, jit_sources=("csrc/jit/**",), rules=StaticRules.parse(
            {"rules": [{"paths": ["csrc/jit/**"], "tests": []}]})))
    assert _runs(found) == {"test_nvrtc", "test_source_jit"}, found.to_json()["decisions"]


def test_by_name_a_callee_imported_under_another_name_is_followed(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    _, commit, recorded = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({"aliased_kernel"}), True, commit, "here",
                           python={})
    assert _runs(_select(suite, {"pkg/ops.py": ("x + y", "x * y")}, [alone, *recorded])) == {"test_alone",
                                                                                            "test_fused"}


@pytest.mark.parametrize(("path", "globs"), [
    ("pkg/csrc/scale.cuh", ()),  # inside a Python package: its wheel ships it to be compiled
    ("csrc/jit/kernel.cu", ("csrc/jit/**",)),  # declared
])
def test_a_run_time_source_runs_the_tests_of_kernels_no_map_knows(
        suite: tuple[Path, str, list[recs.Recording]], path: str, globs: tuple[str, ...]) -> None:
    _, commit, recorded = suite
    made = recs.Recording("tests/test_c.py::test_made", frozenset({"_Z6jittedv"}), True, commit, "here", python={})
    no_tests = StaticRules.parse({"rules": [{"paths": [path], "tests": []}]})  # in no map: the rules' too
    found = select(_map(commit), [*recorded, made], [path], options=Options(
        source_root=suite[0], jit_sources=globs, external_kernels=("_Z6jittedv",), rules=no_tests))
    # test_made launched a kernel no map knows (declared external, even): the run-time compile may have made it.
    # The suite's own tests launched JIT'd Python functions' kernels only.
    assert _runs(found) == {"test_made"}, found.to_json()["decisions"]
    assert found.verdicts[path].by == "run-time"


# -- Triton itself ------------------------------------------------------------------------------------------------

def _triton_ran(suite: tuple[Path, str, list[recs.Recording]], old: str, new: str,
                recordings: list[recs.Recording] | None = None) -> set[str]:
    repo, commit, recorded = suite
    path = repo / "pkg/tri.py"
    assert old in TRITON
    path.write_text(TRITON.replace(old, new))
    try:
        return _runs(select(_map(commit), recordings or recorded, ["pkg/tri.py"], options=Options(source_root=repo)))
    finally:
        path.write_text(TRITON)


def test_real_triton_a_launched_jit_function_and_its_callee_reach_the_test(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    """Triton's own JITFunction, on its GPU path: the launch is watched before Triton compiles anything."""
    pytest.importorskip("triton", reason="triton is not installed: its JITFunction cannot be checked")
    by_test = {r.test.rsplit("::", 1)[-1]: r for r in suite[2]}
    assert dict(by_test["test_triton"].jit_kernels) == {"add_kernel": {"pkg/tri.py:add_kernel"}}
    assert _triton_ran(suite, "return x + y", "return x - y") == {"test_triton"}  # combine, compiled in
    assert _triton_ran(suite, "mask = offs < n", "mask = offs <= n") == {"test_triton"}
    # A recording that knows only the kernel's name, as Triton before 3.0 spelt it: found by name.
    _, commit, _ = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({"add_kernel_0d1d2d3de"}), True, commit, "here",
                           python={})
    assert _triton_ran(suite, "return x + y", "return x - y", [alone, *suite[2]]) == {"test_triton", "test_alone"}


def test_by_name_nothing_is_attributed_when_a_changed_files_base_cannot_be_read(
        suite: tuple[Path, str, list[recs.Recording]]) -> None:
    """A changed file whose text at the recordings' commit git cannot give may have held any candidate."""
    repo, commit, _ = suite
    alone = recs.Recording("tests/test_c.py::test_alone", frozenset({"fused_kernel"}), True, commit, "here", python={})
    assert attribute([alone], frozenset(), PythonTree(repo, commit), ["pkg/ops.py"]).by_name  # readable: found
    assert not attribute([alone], frozenset(), PythonTree(repo, "f" * 40), ["pkg/ops.py"]).by_name
