"""The README's adoption steps, run literally: a new project, a fresh virtual environment, no index
that holds this package.

The CMake lines, the ``[build-system]`` table and the shell steps are read out
of README.md (the blocks after ``<!-- adoption:... -->``), so the README
cannot drift from what works. The projects around them are the smallest a
user would write: one CUDA extension module installed into ``my_pkg``, a git
repository with its files committed. The steps must leave it clean: ``select
--diff`` counts untracked files as changes, so a wheel built into the
checkout would make every test run.

Two projects: one that calls ``kernel_symbol_map()`` (the README's CMake lines), and one that
does not (the retrofit: kernel-symbol-map in ``build-system.requires`` and nothing else), whose
kernel is a Thrust algorithm over a functor of its own, so that ``show``, ``query`` by a
demangled name and ``size`` are read on CUB's template kernels. Below them, the retrofit's
rules one by one, on plain ``cmake`` configures and on scikit-build-core builds.
"""

from __future__ import annotations

import base64
import configparser
import csv
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import regex
import toolchains
from toolchains import ROOT, require, run

from kernel_symbol_map import __version__
from kernel_symbol_map.cmakedir import RETROFIT_VARIABLE, cmake_include, scikit_build_defaults

README = ROOT / "README.md"
# The checkout's own include: the editable install's copy in site-packages is as old as its last install.
INCLUDE = ROOT / "cmake" / "KernelSymbolMapTopLevelInclude.cmake"

PROJECT_CMAKE = """cmake_minimum_required(VERSION 3.25)
project(my_pkg LANGUAGES CXX CUDA)
{adoption}
add_library(_kernels MODULE k.cu)
set_target_properties(_kernels PROPERTIES PREFIX "")
install(TARGETS _kernels DESTINATION my_pkg)
"""
PROJECT_TOML = """{adoption}
[project]
name = "my-pkg"
version = "0.1"

[tool.scikit-build]
wheel.packages = []
"""
KERNEL = '__global__ void my_kernel(float* x) { x[threadIdx.x] *= 2.0f; }\n'
# Thrust's transform over a functor of the project's own: the kernels are CUB templates, named
# under CUB's version namespace, with process_cube_op only inside their template arguments.
THRUST_KERNEL = """#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>

struct process_cube_op {
  __host__ __device__ float operator()(float x) const { return x * x * x; }
};

void process_cube(float* data, int n) {
  thrust::device_ptr<float> p(data);
  thrust::transform(thrust::device, p, p + n, p, process_cube_op{});
}
"""
# What a reader must not see in a readable name: a mangled symbol, or CCCL's version namespaces.
UNREADABLE = regex.compile(r"\b_Z\w+|\bCUB_\d+\w*|\bTHRUST_\d+\w*")


def readme_block(name: str) -> str:
    """The fenced block that follows ``<!-- adoption:NAME -->`` in the README."""
    text = README.read_text()
    marker = f"<!-- adoption:{name} -->"
    assert text.count(marker) == 1, marker
    after = text.split(marker, 1)[1].lstrip("\n")
    assert after.startswith("```"), f"{marker} must be followed by a fenced block"
    return after.split("\n", 1)[1].split("\n```", 1)[0] + "\n"


def git(project: Path, *args: str) -> str:
    who = ["-c", "user.name=me", "-c", "user.email=me@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", "-C", str(project), *who, *args], check=True, capture_output=True, text=True).stdout


def write_project(where: Path, cmake: str, kernel: str = KERNEL) -> Path:
    """The project, as a git repository with every file committed (and no .gitignore: nothing is hidden)."""
    where.mkdir()
    (where / "CMakeLists.txt").write_text(PROJECT_CMAKE.format(adoption=cmake))
    (where / "pyproject.toml").write_text(PROJECT_TOML.format(adoption=readme_block("pyproject")))
    (where / "k.cu").write_text(kernel)
    git(where, "init", "-q")
    git(where, "add", "CMakeLists.txt", "pyproject.toml", "k.cu")
    git(where, "commit", "-q", "-m", "my_pkg")
    return where


def fresh_environment(tmp_path: Path) -> dict[str, str]:
    """A new virtual environment, activated the way a shell would, for the steps to run in."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_FIND_LINKS"))}
    env.pop(RETROFIT_VARIABLE, None)
    # The folders the steps write into outside the checkout (mktemp's and the user's cache), here under
    # tmp_path: a wheel of kernel-symbol-map left in the real cache by another checkout is not this one's.
    # pip keeps its own cache where it was (it is not the steps' output).
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    pip_cache = env.get("PIP_CACHE_DIR") or str(Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pip")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(env_dir), KSM_CHECKOUT=str(ROOT),
        CUDACXX=nvcc, CUDAARCHS="80",  # the user's own toolkit and GPU: not part of the steps
        PIP_DISABLE_PIP_VERSION_CHECK="1", TMPDIR=str(tmp), XDG_CACHE_HOME=str(cache), PIP_CACHE_DIR=pip_cache,
    )
    return env


def run_steps(block: str, project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, env=env, capture_output=True,
                          text=True, check=False)


def shipped_map(wheel: Path) -> dict:
    with zipfile.ZipFile(wheel) as z:
        return json.loads(gzip.decompress(z.read("my_pkg/kernel_symbol_map.json.gz")))


def assert_steps_left_it_clean(project: Path, proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    # Nothing the steps built is in the checkout: no untracked file (nor an ignored one: there is no .gitignore).
    left = git(project, "status", "--porcelain", "--untracked-files=all", "--ignored")
    assert left == "", f"the steps left files in the checkout, changes to select --diff:\n{left}"


@pytest.mark.parametrize("steps", ["steps", "no-isolation"])
def test_the_readme_adoption_steps_work_as_written(tmp_path: Path, steps: str) -> None:
    env = fresh_environment(tmp_path)
    project = write_project(tmp_path / "my_pkg", readme_block("cmake"))
    proc = run_steps(readme_block(steps), project, env)
    assert_steps_left_it_clean(project, proc)
    (wheel,) = (tmp_path / "tmp").rglob("my_pkg-*.whl")  # the folder mktemp made, outside the checkout
    if steps == "steps":  # kernel-symbol-map's own wheel, where PIP_FIND_LINKS points: outside it too
        assert len(list((tmp_path / "cache" / "kernel-symbol-map" / "wheels").glob("kernel_symbol_map-*.whl"))) == 1
    # One object, once: the project's own call stood and the retrofit, in the same build, stepped aside.
    doc = shipped_map(wheel)
    (obj,) = doc["objects"]
    assert (obj["source"], obj["target"], obj["symbols"]) == ("k.cu", "_kernels", ["_Z9my_kernelPf"])
    assert not doc["incomplete"] and "reason" not in doc
    if steps == "steps":  # the last step showed the map inside the wheel
        assert "_kernels: 1 object, 1 kernel" in proc.stdout, proc.stdout


# The retrofit, end to end: the README's steps on a Thrust project that never calls kernel_symbol_map().


@dataclass(frozen=True)
class Adopted:
    project: Path
    wheel: Path
    steps: subprocess.CompletedProcess[str]
    look: dict[str, subprocess.CompletedProcess[str]]  # each line of the "look" block, by its command


@pytest.fixture(scope="session")
def thrust_retrofit(tmp_path_factory: pytest.TempPathFactory) -> Adopted:
    """The steps and the look block, once per session (one nvcc build of Thrust, sm_80 only)."""
    tmp_path = tmp_path_factory.mktemp("retrofit")
    env = fresh_environment(tmp_path)
    project = write_project(tmp_path / "my_pkg", cmake="", kernel=THRUST_KERNEL)
    steps = run_steps(readme_block("steps"), project, env)
    assert steps.returncode == 0, steps.stdout[-3000:] + steps.stderr[-3000:]
    (wheel,) = (tmp_path / "tmp").rglob("my_pkg-*.whl")
    look = {}
    for line in readme_block("look").splitlines():  # `dist` is the steps' folder, as in the user's shell
        look[line.split()[1]] = run_steps(line, project, {**env, "dist": str(wheel.parent)})
    return Adopted(project, wheel, steps, look)


def test_the_build_requirement_alone_ships_a_map(thrust_retrofit: Adopted) -> None:
    assert "kernel_symbol_map" not in (thrust_retrofit.project / "CMakeLists.txt").read_text()
    assert_steps_left_it_clean(thrust_retrofit.project, thrust_retrofit.steps)
    doc = shipped_map(thrust_retrofit.wheel)
    (obj,) = doc["objects"]
    assert (obj["source"], obj["target"]) == ("k.cu", "_kernels")
    assert any("15process_cube_op" in symbol for symbol in obj["symbols"]), obj["symbols"]
    assert not doc["incomplete"] and "reason" not in doc


def test_show_reads_the_retrofit_map(thrust_retrofit: Adopted) -> None:
    (obj,) = shipped_map(thrust_retrofit.wheel)["objects"]
    assert f"_kernels: 1 object, {len(obj['symbols'])} kernels" in thrust_retrofit.steps.stdout


def test_query_by_a_demangled_name_finds_the_thrust_kernels(thrust_retrofit: Adopted) -> None:
    proc = thrust_retrofit.look["query"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "from k.cu (target _kernels" in proc.stdout
    (obj,) = shipped_map(thrust_retrofit.wheel)["objects"]
    named = [line for line in proc.stdout.splitlines() if line and not line.startswith(" ")]
    assert len(named) == sum("15process_cube_op" in s for s in obj["symbols"]) >= 1, proc.stdout
    assert not UNREADABLE.search("\n".join(named)), proc.stdout


def test_size_by_kernel_prints_readable_names(thrust_retrofit: Adopted) -> None:
    proc = thrust_retrofit.look["size"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = regex.findall(r"(?m)^ *[\d,]+ +[\d.]+% +(?:[\d,]+ +){5}(.+)$", proc.stdout)
    (obj,) = shipped_map(thrust_retrofit.wheel)["objects"]
    assert len(rows) == len(obj["symbols"]), proc.stdout  # one row per kernel
    assert not UNREADABLE.search("\n".join(rows)), proc.stdout
    assert sum(row.startswith("cub::") for row in rows) == len(rows), rows


# The retrofit's rules, on plain configures of the checkout's include (the editable install's copy is stale).


def configure(tmp_path: Path, cmakelists: str, *defines: str, files: dict[str, str] | None = None,
              include: bool = True) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src"
    for name, text in {"CMakeLists.txt": cmakelists, "k.cu": KERNEL, "h.cpp": "int h() { return 1; }\n",
                       **(files or {})}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    nvcc = require(toolchains.nvcc(), "nvcc")
    command = ["cmake", "-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja", f"-DCMAKE_CUDA_COMPILER={nvcc}",
               "-DCMAKE_CUDA_ARCHITECTURES=80", f"-DPython_EXECUTABLE={sys.executable}", *defines]
    if "find_package" in cmakelists:  # the project's own find_package, of the checkout's package
        command.append(f"-DKernelSymbolMap_DIR={INCLUDE.parent}")
    if include:
        command.append(f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={INCLUDE}")
    return subprocess.run(command, capture_output=True, text=True, check=False)


def map_rules(tmp_path: Path) -> list[str]:
    """The extractor's command lines in build.ninja: one per kernel_symbol_map() that took effect."""
    return regex.findall(r"kernel_symbol_map build .*", (tmp_path / "b" / "build.ninja").read_text())


def ours(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of kernel_symbol_map()'s messages (each starts so), as CMake printed them."""
    return [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if "kernel_symbol_map():" in line]


CUDA_PROJECT = "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES CXX CUDA)\nadd_library(k STATIC k.cu)\n"
FIND = "find_package(KernelSymbolMap CONFIG REQUIRED)\n"


def test_the_include_maps_every_target_when_the_project_does_not_call_it(tmp_path: Path) -> None:
    proc = configure(tmp_path, CUDA_PROJECT + "add_library(h STATIC h.cpp)\n")
    assert proc.returncode == 0, proc.stderr
    (rule,) = map_rules(tmp_path)
    assert "--targets" not in rule  # every target that compiles, the host-only one too
    assert ours(proc) == []  # no line of its own when it maps


def test_the_include_steps_aside_for_the_projects_own_call(tmp_path: Path) -> None:
    proc = configure(tmp_path, CUDA_PROJECT + "add_library(h STATIC h.cpp)\n" + FIND + "kernel_symbol_map(TARGETS k)\n")
    assert proc.returncode == 0, proc.stderr
    (rule,) = map_rules(tmp_path)
    assert rule.split("--targets", 1)[1].split() == ["k"]  # the project's options stand


@pytest.mark.parametrize("value", ["OFF", "0", "FALSE"])
def test_the_include_is_turned_off_by_its_variable(tmp_path: Path, value: str) -> None:
    proc = configure(tmp_path, CUDA_PROJECT, f"-DKERNEL_SYMBOL_MAP_RETROFIT={value}")
    assert proc.returncode == 0, proc.stderr
    assert map_rules(tmp_path) == []
    assert ours(proc) == [f"-- kernel_symbol_map(): KERNEL_SYMBOL_MAP_RETROFIT is {value}; no map"]


def test_a_project_without_cuda_or_hip_is_left_as_it_was(tmp_path: Path) -> None:
    proc = configure(tmp_path, "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES CXX)\n"
                               "add_library(h STATIC h.cpp)\n")
    assert proc.returncode == 0, proc.stderr
    assert ours(proc) == ["-- kernel_symbol_map(): no CUDA or HIP language in this project; no map"]
    build = tmp_path / "b"
    assert "kernel_symbol_map" not in (build / "build.ninja").read_text()
    assert not (build / ".cmake").exists()  # no file-API query
    assert "KernelSymbolMap_DIR" not in (build / "CMakeCache.txt").read_text()  # nothing found, nothing cached


def test_on_maps_a_project_whose_gpu_code_cmake_does_not_see(tmp_path: Path) -> None:
    proc = configure(tmp_path, "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES CXX)\n"
                               "add_library(h STATIC h.cpp)\n", "-DKERNEL_SYMBOL_MAP_RETROFIT=ON")
    assert proc.returncode == 0, proc.stderr
    (rule,) = map_rules(tmp_path)
    assert "--targets" not in rule and ours(proc) == []  # mapped as any project is: every target that compiles


def called_twice(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0
    said = " ".join(proc.stderr.split())  # CMake wraps its messages
    found = regex.search(r"kernel_symbol_map\(\): called twice, (.*?); call it once and list every target in TARGETS",
                         said)
    assert found, proc.stderr
    return found[1]


def test_called_twice_in_one_file_names_both_lines(tmp_path: Path) -> None:
    proc = configure(tmp_path, CUDA_PROJECT + FIND + "kernel_symbol_map(TARGETS k)\n\nkernel_symbol_map()\n",
                     include=False)
    assert called_twice(proc) == f"at {tmp_path / 'src' / 'CMakeLists.txt'}:5,7"


def test_called_twice_in_two_files_names_both(tmp_path: Path) -> None:
    top = CUDA_PROJECT + FIND + "add_subdirectory(sub)\n  kernel_symbol_map()\n"
    proc = configure(tmp_path, top, files={"sub/CMakeLists.txt": "\n# kernel_symbol_map() below\nkernel_symbol_map()\n"})
    src = tmp_path / "src"
    assert called_twice(proc) == f"at {src / 'sub' / 'CMakeLists.txt'}:3 and at {src / 'CMakeLists.txt'}:6"


def test_called_after_the_include_names_the_include(tmp_path: Path) -> None:
    # A project's call deferred past the end of its directory comes after the include's: both are named.
    proc = configure(tmp_path, CUDA_PROJECT + FIND + "cmake_language(DEFER CALL kernel_symbol_map)\n")
    assert called_twice(proc) == (f"by the retrofit {INCLUDE} (in CMAKE_PROJECT_TOP_LEVEL_INCLUDES) "
                                  f"and at {tmp_path / 'src' / 'CMakeLists.txt'}")


# The entry point that names the include (scikit-build-core >= 1.1), and scikit-build-core builds with it.


def test_the_entry_point_names_the_include() -> None:
    table = scikit_build_defaults(env={})
    assert table == {"cmake": {"define": {"CMAKE_PROJECT_TOP_LEVEL_INCLUDES": str(cmake_include())}}}
    assert cmake_include().name == INCLUDE.name and cmake_include().is_file()
    assert scikit_build_defaults(env={RETROFIT_VARIABLE: "1"}) == table


@pytest.mark.parametrize("value", ["0", "off", "FALSE", " no "])
def test_the_environment_turns_the_entry_point_off(value: str) -> None:
    assert scikit_build_defaults(env={RETROFIT_VARIABLE: value}) == {}


def record_row(data: bytes) -> list[str]:
    """A RECORD row's hash and size for a member's bytes (sha256, urlsafe base64 without padding)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [f"sha256={digest}", str(len(data))]


def test_the_wheel_declares_the_entry_point(our_wheel: Path) -> None:
    # scikit-build-core refuses its own group's name in [project.entry-points]: our build backend
    # (build_backend/kernel_symbol_map_backend.py) adds it to the wheel's own dist-info.
    dist_info = f"kernel_symbol_map-{__version__}.dist-info"
    with zipfile.ZipFile(our_wheel) as z:
        names = z.namelist()
        entry_points = z.read(f"{dist_info}/entry_points.txt")
        record = {row[0]: row[1:] for row in csv.reader(io.StringIO(z.read(f"{dist_info}/RECORD").decode()))}
        members = {name: z.read(name) for name in names if name != f"{dist_info}/RECORD"}
    groups = configparser.ConfigParser(delimiters=["="])
    groups.optionxform = str  # entry-point names keep their case
    groups.read_string(entry_points.decode())
    assert dict(groups["scikit-build-core.config.default"]) == {
        "kernel-symbol-map": "kernel_symbol_map.cmakedir:scikit_build_defaults"}
    # The groups scikit-build-core wrote are still there.
    assert dict(groups["console_scripts"]) == {"kernel-symbol-map": "kernel_symbol_map.cli:main"}
    assert {"console_scripts", "pytest11", "cmake.prefix"} <= set(groups.sections())
    # One distribution: one .dist-info (pip's rule) and no .egg-info beside it.
    assert {n.split("/")[0] for n in names if n.split("/")[0].endswith((".dist-info", ".egg-info"))} == {dist_info}
    # The rewritten wheel's RECORD holds every member, each with its hash and size.
    assert record.keys() == {*members, f"{dist_info}/RECORD"}
    assert {name: record[name] for name in members} == {name: record_row(data) for name, data in members.items()}
    assert "kernel_symbol_map_backend.py" not in {n.rsplit("/", 1)[-1] for n in names}  # a build tool: sdist only


# Run in the fresh environment: every distribution it holds, with those kernel-symbol-map's requirements
# reach (extras aside, markers ignored: a superset), and our entry points.
INSTALLED = """import importlib.metadata as m, json, re
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
dists = {norm(d.metadata["Name"]): d for d in m.distributions()}
reach, todo = set(), ["kernel-symbol-map"]
while todo:
    name = todo.pop()
    if name in reach or name not in dists:
        continue
    reach.add(name)
    todo += [norm(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in dists[name].requires or [] if "extra ==" not in r]
eps = [(e.name, e.value, e.dist.name) for e in m.entry_points(group="scikit-build-core.config.default")]
print(json.dumps({"reach": sorted(reach), "entry_points": eps}))
"""


def test_the_installed_wheel_is_one_distribution(tmp_path: Path, our_wheel: Path) -> None:
    where = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(where)
    python = str(where / "bin" / "python")
    run([python, "-m", "pip", "install", "-q", str(our_wheel)])

    def installed() -> dict:
        return json.loads(subprocess.run([python, "-c", INSTALLED], capture_output=True, text=True, check=True).stdout)

    def freeze() -> list[str]:
        out = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
        return [regex.sub(r"[-_.]+", "-", regex.split(r"\s*(?:==|@)", line, maxsplit=1)[0]).lower()
                for line in out.splitlines() if line]

    found = installed()
    assert found["entry_points"] == [["kernel-symbol-map", "kernel_symbol_map.cmakedir:scikit_build_defaults",
                                      "kernel-symbol-map"]]
    # pip freeze names kernel-symbol-map and what it depends on, nothing else: `pip install -r` of it works.
    names = freeze()
    assert "kernel-symbol-map" in names and set(names) <= set(found["reach"]), names
    run([python, "-m", "pip", "uninstall", "-y", "kernel-symbol-map"])
    assert installed()["entry_points"] == []
    assert "kernel-symbol-map" not in freeze()
    (site,) = where.glob("lib/python*/site-packages")
    assert [p.name for p in site.iterdir() if p.name.startswith("kernel_symbol_map")] == []


HOST_CMAKE = "cmake_minimum_required(VERSION 3.25)\nproject(host_pkg LANGUAGES CXX)\n" \
             "add_library(_host MODULE h.cpp)\nset_target_properties(_host PROPERTIES PREFIX \"\")\n" \
             "install(TARGETS _host DESTINATION host_pkg)\n"
HOST_TOML = """[build-system]
requires = ["scikit-build-core>=1.1", "kernel-symbol-map"]
build-backend = "scikit_build_core.build"

[project]
name = "host-pkg"
version = "0.1"

[tool.scikit-build]
wheel.packages = []
{extra}"""
THEIRS = 'message(STATUS "their include ran")\n'


def host_project(where: Path, extra: str = "") -> Path:
    """A scikit-build-core project with no GPU code that lists kernel-symbol-map (a build helper, say)."""
    where.mkdir()
    (where / "CMakeLists.txt").write_text(HOST_CMAKE)
    (where / "pyproject.toml").write_text(HOST_TOML.format(extra=extra))
    (where / "h.cpp").write_text("int h() { return 1; }\n")
    (where / "theirs.cmake").write_text(THEIRS)
    return where


@pytest.fixture(scope="session")
def ksm_env(tmp_path_factory: pytest.TempPathFactory, our_wheel: Path) -> Path:
    """A virtual environment holding this package (its wheel) and scikit-build-core >= 1.1: its bin folder."""
    where = tmp_path_factory.mktemp("ksm-env")
    venv.EnvBuilder(with_pip=True).create(where)
    run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", str(our_wheel), "scikit-build-core>=1.1"])
    return where / "bin"


def pip_wheel(bin_dir: Path, project: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop(RETROFIT_VARIABLE, None)
    proc = subprocess.run([str(bin_dir / "python"), "-m", "pip", "wheel", "-v", "--no-deps", str(project),
                           "-w", str(out), *args], capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def wheel_names(out: Path, pattern: str) -> list[str]:
    (wheel,) = out.glob(pattern)
    with zipfile.ZipFile(wheel) as z:
        return sorted(z.namelist())


def test_a_project_that_sets_the_includes_keeps_its_own(tmp_path: Path, ksm_env: Path, our_wheel: Path) -> None:
    project = tmp_path / "host_pkg"
    theirs = project / "theirs.cmake"
    host_project(project, extra=f'cmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES = "{theirs}"\n')
    proc = pip_wheel(ksm_env, project, tmp_path / "dist", "--find-links", str(our_wheel.parent))
    assert "their include ran" in proc.stdout + proc.stderr  # pip -v prints the backend's output on stderr
    assert ours(proc) == []  # the entry point's default is below pyproject.toml: not listed, not run
    # Listing both (the user's environment's include) runs both: ours steps aside, saying why.
    both = f"-Ccmake.define.CMAKE_PROJECT_TOP_LEVEL_INCLUDES={theirs};{cmake_include_in(ksm_env)}"
    proc = pip_wheel(ksm_env, project, tmp_path / "dist2", "--find-links", str(our_wheel.parent), both)
    assert "their include ran" in proc.stdout + proc.stderr  # pip -v prints the backend's output on stderr
    assert ours(proc) == ["-- kernel_symbol_map(): no CUDA or HIP language in this project; no map"]


def cmake_include_in(bin_dir: Path) -> str:
    """What ``python -m kernel_symbol_map --cmake-include`` prints in that environment."""
    return subprocess.run([str(bin_dir / "python"), "-m", "kernel_symbol_map", "--cmake-include"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_project_without_gpu_code_built_beside_it_is_unchanged(tmp_path: Path, ksm_env: Path) -> None:
    project = host_project(tmp_path / "host_pkg")
    proc = pip_wheel(ksm_env, project, tmp_path / "dist", "--no-build-isolation")
    assert ours(proc) == ["-- kernel_symbol_map(): no CUDA or HIP language in this project; no map"]
    assert [n for n in wheel_names(tmp_path / "dist", "host_pkg-*.whl") if ".dist-info/" not in n] == ["host_pkg/_host.so"]


def test_our_own_wheel_built_beside_an_installed_copy_is_unchanged(tmp_path: Path, ksm_env: Path,
                                                                   our_wheel: Path) -> None:
    proc = pip_wheel(ksm_env, ROOT, tmp_path, "--no-build-isolation")
    assert ours(proc) == ["-- kernel_symbol_map(): no CUDA or HIP language in this project; no map"]
    with zipfile.ZipFile(our_wheel) as z:
        assert wheel_names(tmp_path, "kernel_symbol_map-*.whl") == sorted(z.namelist())
