"""``select`` checked against what a rebuild actually changes (issue 18): a ground truth without the map.

For each project, built once: a git repository at a base commit, its map (the
CMake package's, and one by hand), and recordings in which each test
launches one known kernel. For each change of the corpus, a copy of that
tree at the same absolute path gets the change and is rebuilt (from clean under
clang, whose depfile, and ninja with it, misses device-only includes; by ninja
under nvcc, whose depfile is complete: ``Tree.rebuild``), and every object is
compared with its base snapshot (:mod:`oracle`, which never reads a map):

* an object's host code changed (or it appeared, or went away): if it has no
  kernels, every test must run; if it has kernels, every test that launched
  one of them (what a recording can show; a test that calls a ``.cu`` file's
  host code without launching its kernels is the documented limit, docs/selecting-tests.md),
  and under ``--whole-target`` every test that launched a kernel of its
  target or of the targets linked to it, either way;
* a kernel's device code changed in any architecture, or it appeared or
  went away: every test that launched it must run.

``select`` then runs as CI would (``--diff`` from the base, in the changed
checkout), in one or more variants of how the evidence reaches it, and its
run set (every test but those skipped) must contain that must-run set. The
corpus covers issue 18's nine classes, issue 11's nine and issue 26's two generators, and six
shapes of builds and device code (``SHAPE_CLASSES``: a ``-dlto`` device link, libraries linked into
two targets, a renamed kernel, texture and surface objects, ``__constant__`` data of another
object, a table of kernel pointers); ``CORPUS`` names each change's classes, and the last test
checks that every class has a change.

Output mode (issue 27, ``select --base-map``) runs on every change too: the
rebuilt tree is mapped, and select compares that map with the base build's. Its
must-run set is the same rule kernel by kernel (:mod:`kernel_oracle`, from
cuobjdump's listings, never a map): a kernel whose SASS, PTX, resources, or the
functions and module data it reaches changed. On HIP trees it is the image
oracle's (HIP's digests are per image). The corpus's target ``many`` (22
kernels in one file) measures output mode's precision too: a one-kernel edit
runs at most 2 tests, a comment none that launched a kernel.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kernel_oracle
import nsys
import oracle
import projects
import pytest
import toolchains
from toolchains import require

from kernel_symbol_map.cmakedir import cmake_dir

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]
LINKS = {"devconsumer": {"devlib"}, "ylib": {"xlib"}, "arc_a": {"arclib"}, "arc_b": {"arclib"},
         "obj_a": {"objlib"}, "obj_b": {"objlib"}}  # what tests/projects/oracle links, as its CMakeLists says


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def ksm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          cwd=cwd, check=False)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


@dataclass
class Tree:
    """A project built at its base commit; ``fresh()`` puts that exact tree back at the same path."""

    where: Path
    cmake: projects.CMake
    kind: str = "cuda"  # "cuda" (nvcc) or "hip" (clang)
    base_commit: str = ""
    base: dict[str, oracle.Snapshot] = field(default_factory=dict)
    kernel_base_: dict[str, kernel_oracle.ObjectSnapshot] | None = None
    maps: dict[str, Path] = field(default_factory=dict)
    tests: dict[str, set[str]] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)  # object -> target (CMake's default object paths)

    @property
    def src(self) -> Path:
        return self.where / "work" / "src"

    @property
    def build(self) -> Path:
        return self.where / "work" / "build"

    def freeze(self) -> None:
        subprocess.run(["cp", "-a", str(self.where / "work"), str(self.where / "pristine")], check=True)

    def fresh(self) -> None:
        shutil.rmtree(self.where / "work")
        subprocess.run(["cp", "-a", str(self.where / "pristine"), str(self.where / "work")], check=True)

    def rebuild(self, reconfigure: bool = False, configure: tuple[str, ...] = (), clean: bool = False) -> None:
        """The change built. Under clang every object is compiled again: the truth may not trust the
        build's own dependency records (clang's depfile misses device-only includes, and ninja with it).
        Under nvcc ninja decides: nvcc's depfile is complete (it lists the includes of the device passes
        as well as the host's: an ``#ifdef __CUDA_ARCH__`` include is in it), ninja rebuilds what a new
        command line compiles, the configure-time generator writes only the files that change, and a
        clean rebuild of this tree with no change changes no object
        (``test_kernel_oracle_clean_rebuild_changes_nothing``): the incremental build is the clean
        one, in seconds instead of half a minute. ``KSM_ORACLE_CLEAN=1`` rebuilds clean anyway.
        ``reconfigure`` first runs the configure (with ``configure``'s arguments), as a pull request's
        clean CI build does: what it generates is then the change's."""
        if reconfigure or configure:
            proc = subprocess.run([self.cmake.cmake, *configure, str(self.build)], capture_output=True, text=True,
                                  check=False)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        clean = clean or self.kind != "cuda" or os.environ.get("KSM_ORACLE_CLEAN") == "1"
        proc = subprocess.run([self.cmake.cmake, "--build", str(self.build), "--parallel", "2",
                               *(["--clean-first"] if clean else [])], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    def objects(self, build: Path | None = None) -> dict[str, Path]:
        """Every object of the build (compiled and device-link objects), by build path.

        Precompiled headers are not objects of the product: GCC's differ between two builds of the
        same header, and what they change shows in the objects compiled with them.
        """
        build = build or self.build
        found = {}
        for path in sorted(build.rglob("*.o")):
            rel = path.relative_to(build).as_posix()
            if not rel.startswith("CMakeFiles/") or "/CMakeFiles/" in rel[1:] or rel.split("/")[1][:1].isdigit() \
                    or "CMakeScratch" in rel:
                continue
            found[rel] = path
            self.targets[rel] = rel.split("/")[1].removesuffix(".dir")
        return found

    def snapshot(self) -> dict[str, oracle.Snapshot]:
        return {rel: oracle.snapshot(path) for rel, path in self.objects().items()}

    def kernel_snapshot(self, build: Path | None = None) -> dict[str, kernel_oracle.ObjectSnapshot]:
        """Every object, kernel by kernel (:mod:`kernel_oracle`)."""
        exe = require(kernel_oracle.cuobjdump(), "cuobjdump 13.5 with nvdisasm (the test extra)")
        return kernel_oracle.snapshot_all(self.objects(build), exe)

    def kernel_base(self) -> dict[str, kernel_oracle.ObjectSnapshot]:
        """The base build, kernel by kernel: read from the frozen copy on first use."""
        if self.kernel_base_ is None:
            self.kernel_base_ = self.kernel_snapshot(self.where / "pristine" / "build")
        return self.kernel_base_

    def host_reaches(self, whole_target: bool) -> dict[str, set[str]]:
        """Object -> the tests a change to its host code can reach (see the module docstring)."""
        found = {}
        everyone = set(self.tests)
        for obj, snap in self.base.items():
            kernels = snap.kernels
            if not kernels:
                found[obj] = everyone
                continue
            if whole_target:
                group = _linked({self.targets[obj]})
                kernels = frozenset().union(*(s.kernels for o, s in self.base.items() if self.targets[o] in group))
            found[obj] = {t for t, launched in self.tests.items() if launched & kernels}
        return found

    def recordings(self, folder: Path, commit: str, rename: dict[str, str] | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "tests.jsonl"
        rename = rename or {}
        path.write_text("".join(json.dumps({"test": t, "kernels": sorted(rename.get(k, k) for k in ks),
                                            "complete": True, "commit": commit}) + "\n"
                                for t, ks in sorted(self.tests.items())))
        return path


def _linked(targets: set[str]) -> set[str]:
    """``targets`` and every target linked to them, either way, transitively (LINKS, from the CMakeLists)."""
    found = set(targets)
    while True:
        more = {b for a, bs in LINKS.items() for b in bs if a in found} | {a for a, bs in LINKS.items() if bs & found}
        if more <= found:
            return found
        found |= more


def _init_repo(tree: Tree, sub_source: Path | None) -> None:
    git(tree.src, "init", "-q")
    if sub_source is not None:
        git(tree.src, "submodule", "add", "-q", str(sub_source), "third_party/sub")
        git(tree.src, "config", "-f", ".gitmodules", "submodule.third_party/sub.ignore", "all")
    git(tree.src, "add", "-A")
    git(tree.src, "commit", "-qm", "base")
    tree.base_commit = git(tree.src, "rev-parse", "HEAD")


def _tests_for(base: dict[str, oracle.Snapshot]) -> dict[str, set[str]]:
    """One test per kernel, launching exactly it; one that launches nothing; one that launches the
    first kernels of the first two device objects that start with different kernels (an archive's
    kernel starts each device link of it; in the Nsight run, the second from a worker thread)."""
    kernels = sorted(frozenset().union(*(s.kernels for s in base.values())))
    tests = {f"test_{i:02d}_{k[-24:]}": {k} for i, k in enumerate(kernels)}
    tests["test_nothing"] = set()
    firsts = list(dict.fromkeys(min(s.kernels) for _, s in sorted(base.items()) if s.kernels))
    tests["test_pair"] = set(firsts[:2])
    return tests


@pytest.fixture(scope="session")
def cuda_tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """tests/projects/oracle with nvcc, Ninja and CMake 3.25, mapped by the CMake package and by hand."""
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake, "system CMake 3.25")
    require(toolchains.nvcc(), "nvcc")
    where = tmp_path_factory.mktemp("oracle-cuda")
    tree = Tree(where, cmake)
    shutil.copytree(projects.PROJECTS / "oracle", tree.src)
    (tree.src / "include" / "alias.cuh").symlink_to("real.cuh")  # issue 11, 3: a header through a link
    sub = where / "sub-origin"
    sub.mkdir()
    (sub / "sub.cuh").write_text("#pragma once\n__device__ inline int sub_value() { return 5; }\n")
    git(sub, "init", "-q")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "sub")
    _init_repo(tree, sub)
    projects.configure_and_build_at(
        tree.src, tree.build, cmake, "Ninja", f"-DKernelSymbolMap_DIR={cmake_dir()}",
        f"-DPython_EXECUTABLE={sys.executable}", f"-DCMAKE_CUDA_COMPILER={_nvcc_with_lto(where)}", query=False)
    tree.maps["package"] = where / "package.json.gz"
    shutil.copy(tree.build / "kernel_symbol_map.json.gz", tree.maps["package"])
    return _mapped_by_hand(tree, where)


def _nvcc_with_lto(where: Path) -> str:
    """nvcc, or the same nvcc seen through a folder of links in which its ``-dlto`` device links work.

    nvlink loads libnvvm from ``nvvm/lib64`` of the toolkit nvcc was started from (nvcc names the
    toolkit after the path it was started by), where NVIDIA's installers put it; PyPI's wheels put it in
    ``lib``, and nvlink then fails (``elfLink linker library load error``). For such a toolkit, ``where``
    gets a view of it: a link to each of its parts and ``nvvm/lib64/libnvvm.so``, the same compilers."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    dry = subprocess.run([nvcc, "-dryrun", "-c", "none.cu"], capture_output=True, text=True, check=False)
    top = next((Path(line.partition("=")[2]).resolve() for line in dry.stderr.splitlines()
                if line.startswith("#$ TOP=")), None)
    assert top is not None, dry.stderr
    libnvvm = next((top / d / "libnvvm.so" for d in ("lib64", "lib") if (top / d / "libnvvm.so").exists()), None)
    if (top / "nvvm" / "lib64" / "libnvvm.so").exists() or libnvvm is None:
        return nvcc
    view = where / "cuda-view"
    (view / "nvvm" / "lib64").mkdir(parents=True)
    (view / "bin").mkdir()
    for part in top.iterdir():
        if part.name not in ("bin", "nvvm"):
            (view / part.name).symlink_to(part)
    for folder in ("bin", "nvvm"):
        for part in (top / folder).iterdir():
            if part.name != "lib64":
                (view / folder / part.name).symlink_to(part)
    (view / "nvvm" / "lib64" / "libnvvm.so").symlink_to(libnvvm)
    return str(view / "bin" / "nvcc")


def _mapped_by_hand(tree: Tree, where: Path) -> Tree:
    """The built tree's map by hand, its snapshot and the tests of its recordings, frozen for the session."""
    tree.maps["by hand"] = where / "hand.json.gz"
    assert ksm("build", "--build-dir", str(tree.build), "--out", str(tree.maps["by hand"])).returncode == 0
    tree.base = tree.snapshot()
    tree.tests = _tests_for(tree.base)
    tree.freeze()
    return tree


def _hip_tree(tmp_path_factory: pytest.TempPathFactory, clang: str) -> Tree:
    label = "3.25" if clang == "15" else "newest"
    cmake = next((c for c in projects.cmakes() if c.label == label), None)
    require(cmake, f"CMake {label}")
    where = tmp_path_factory.mktemp(f"oracle-hip-clang{clang}")
    tree = Tree(where, cmake, kind="hip")
    shutil.copytree(projects.PROJECTS / "hip", tree.src)
    _init_repo(tree, None)
    projects.configure_and_build_at(tree.src, tree.build, cmake, "Ninja",
                                    *toolchains.hip_cmake_args(label, where, clang=clang))
    return _mapped_by_hand(tree, where)


@pytest.fixture(scope="session")
def hip_trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tree]:
    """tests/projects/hip with CMake's HIP language: clang-15 (CMake 3.25) and clang-19 (the newest CMake)."""
    require(shutil.which("clang++-15"), "clang++-15 (Debian package hipcc)")
    return {clang: _hip_tree(tmp_path_factory, clang) for clang in ("15", "19")}


# -- how select is run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One way the evidence reaches select; ``prepare`` returns (map, recordings, extra args)."""

    name: str
    classes: tuple[str, ...]
    prepare: Callable[[Tree, Path, str], tuple[Path, Path, list[str]]]
    whole_target: bool = False
    cwd: str = ""  # a subfolder of the checkout to run select from
    output: bool = False  # output mode: the must-run set from the kernel oracle (CUDA) or the image oracle (HIP)


def _map_with(tree: Tree, tmp: Path, name: str, change: Callable[[dict[str, Any]], None]) -> Path:
    doc = json.loads(gzip.decompress(tree.maps["package" if "package" in tree.maps else "by hand"].read_bytes()))
    change(doc)
    path = tmp / f"{name}.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _default(kind: str) -> Callable[[Tree, Path, str], tuple[Path, Path, list[str]]]:
    def prepare(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
        return tree.maps[kind], tree.recordings(tmp / "rec", commit), []
    return prepare


def _no_commit(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    return _map_with(tree, tmp, "nocommit", lambda d: d.update(commit="")), tree.recordings(tmp / "rec", ""), []


def _head_named(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    return _map_with(tree, tmp, "head", lambda d: d.update(commit="HEAD")), tree.recordings(tmp / "rec", "HEAD"), []


def _subset(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    out = tmp / "subset.json.gz"
    assert ksm("build", "--build-dir", str(tree.build), "--out", str(out), "--targets", "kernels", "--commit",
               commit, "--no-cache").returncode == 0
    return out, tree.recordings(tmp / "rec", commit), []


@functools.cache
def _output_mode() -> bool:
    """Whether this select has output mode (issue 27): until it does, output-mode runs are skipped."""
    return "--base-map" in ksm("select", "--help").stdout


def _output(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    """Output mode: the change's own build mapped after the rebuild, against the base build's map (the
    map of the checkout, for a stale one)."""
    new = tmp / "new.json.gz"
    proc = ksm("build", "--build-dir", str(tree.build), "--out", str(new), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    base = tree.maps.get("stale") or tree.maps["by hand"]
    return new, tree.recordings(tmp / "rec", commit), ["--base-map", str(base)]


def _object_error(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    return _map_with(tree, tmp, "error", lambda d: d["objects"][0].update(error="unreadable")), \
        tree.recordings(tmp / "rec", commit), []


def _anon_elsewhere(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    """The anonymous-namespace kernel as a build at another path names it (its hash embeds the path)."""
    anon = next(k for ks in tree.tests.values() for k in ks if "_GLOBAL__N_" in k)
    return tree.maps["package"], tree.recordings(tmp / "rec", commit, {anon: anon.replace("_GLOBAL__N__", "_GLOBAL__N__0")}), []


def _nsight(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
    """An Nsight export: each test's kernels on its range's thread, test_pair's second kernel from a worker."""
    launches, ranges, clock = [], [], 1000
    pair_worker = max(tree.tests["test_pair"])  # launched from a thread that holds no range
    for test, kernels in sorted(tree.tests.items()):
        start = clock
        for k in sorted(kernels):
            tid = 9 if test == "test_pair" and k == pair_worker else 7
            launches.append(nsys.Launch(k, clock + 1, tid, clock + 500, clock + 600))
            clock += 10
        ranges.append(nsys.Range(test, start, clock, 7))
        clock += 10
    export = tmp / "run.sqlite"
    export.unlink(missing_ok=True)
    nsys.write_export(export, launches, ranges)
    return tree.maps["package"], export, ["--recordings-commit", commit]


def _rules(paths: list[str], changed: list[str]) -> Callable[[Tree, Path, str], tuple[Path, Path, list[str]]]:
    """No usable map (so the static rules decide), rules that name only test_nothing, and the change named."""
    def prepare(tree: Tree, tmp: Path, commit: str) -> tuple[Path, Path, list[str]]:
        rules = tmp / "rules.json"
        rules.write_text(json.dumps({"rules": [{"paths": paths, "tests": ["test_nothing"]}]}))
        return tmp / "missing.json.gz", tree.recordings(tmp / "rec", commit), \
            ["--rules", str(rules), "--changed", *changed]
    return prepare


DEFAULT = Run("package map", ("18.1 host-only targets",), _default("package"))
BY_HAND = Run("map by hand", ("18.1 host-only targets",), _default("by hand"))
SUBSET = Run("a --targets subset", ("11.4 kernels no map knows",), _subset)
ANON = Run("an anonymous kernel from another path", ("11.4 kernels no map knows",), _anon_elsewhere)
HEAD_NAMED = Run("map commit 'HEAD'", ("18.6 symbolic commits",), _head_named)
OUTPUT = Run("output mode", ("27.1 output mode",), _output, output=True)
MANY = "csrc/many/many.cu"
MANY_KERNELS = frozenset({f"_Z7many_{i:02d}Pi" for i in range(16)} | {
    "_Z9many_bodyPi", "_Z14many_pick_userPi", "_Z13many_shared_aPi", "_Z13many_shared_bPi", "_Z15many_table_userPi",
    "_Z16many_define_userPi"})
VARIANTS = [
    Run("no commit anywhere", ("11.2 unknown commits",), _no_commit),
    Run("an object with an error", ("11.5 incomplete maps",), _object_error),
    Run("an Nsight export", ("11.7 Nsight exports",), _nsight),
    Run("rule globs stay in a folder", ("11.8 rule globs",), _rules(["csrc/*.cu"], ["csrc/k/a.cu"])),
    Run("rules match the normalised path", ("18.9 normalised rule paths",),
        _rules(["csrc/y/**"], ["csrc/y/../k/a.cu"])),
    Run("--diff from a subfolder", ("11.1 change sets",), _default("package"), cwd="csrc/k"),
]


# -- the corpus ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    name: str
    classes: tuple[str, ...]
    apply: Callable[[Path], None]  # the pull request's change, in the checkout
    runs: tuple[Run, ...] = (DEFAULT, BY_HAND)
    main: Callable[[Path], None] | None = None  # committed on main after the map: --diff from that commit
    stale: Callable[[Path], None] | None = None  # committed with no rebuild before mapping (a checkout)
    answer: str | None = None  # the first run must decide on evidence, with this code ("" for none): no waste
    reconfigure: bool = False  # the change is seen only by a new configure (what it generates)
    configure: tuple[str, ...] = ()  # the change's build is configured with these arguments too
    kernels: frozenset[str] | None = None  # exactly the kernels the kernel oracle sees changed, if given
    no_effect: bool = False  # the change changes no object (a comment): both oracles must agree
    output_at_most: int | None = None  # precision: output mode runs at most this many tests
    output_skips_kernel_tests: bool = False  # precision: output mode skips every test that launched a kernel
    output_says_why: bool = False  # output mode must say why it did not decide kernel by kernel


def _submodule_edit(src: Path) -> None:
    """The submodule's header, and another file of the pull request (so that no change set is empty)."""
    edit(src / "third_party/sub/sub.cuh", "return 5;", "return 50;")
    edit(src / "csrc/k/anon.cu", "= 7;", "= 9;")


def _submodule_bump(src: Path) -> None:
    _submodule_edit(src)
    git(src / "third_party/sub", "commit", "-qam", "sub moves on")
    git(src, "add", "third_party/sub")
    git(src, "commit", "-qm", "bump the submodule")


def _move_b_kernel_into_a(src: Path) -> None:
    """A kernel moves between files (b.cu -> a.cu), committed: the map is made before any rebuild."""
    b = src / "csrc/k/b.cu"
    edit(b, "__global__ void b_kernel(float* x) { x[threadIdx.x] += real_offset() + pch_value(); }",
         "__global__ void b_kernel(float* x);")
    a = src / "csrc/k/a.cu"
    a.write_text(a.read_text() + '#include "pch_only.h"\n#include "alias.cuh"\n'
                 "__global__ void b_kernel(float* x) { x[threadIdx.x] += real_offset() + pch_value(); }\n")
    git(src, "commit", "-qam", "move b_kernel into a.cu")


CORPUS = [
    Change("a header shared with a host-only target", ("18.1 host-only targets", "27.8 host-only changes"),
           lambda s: edit(s / "include/shared_host.h", "return 1;", "return 10;"), runs=(DEFAULT, BY_HAND, SUBSET)),
    Change("a header precompiled for a host-only target", ("18.1 host-only targets", "wasteful: precompiled headers"),
           lambda s: edit(s / "include/pch_only.h", "return 2;", "return 20;"), answer="host-file"),
    Change("a device function linked across targets", ("18.2 device links across targets",
                                                         "27.10 -rdc device links across objects"),
           lambda s: edit(s / "csrc/dev/dev.cu", "x * 2", "x * 3"), answer="",
           kernels=frozenset({"_Z10dev_kernelPi", "_Z17dev_direct_kernelPi"})),  # by relocations, and the device link
    Change("a header staged by configure_file", ("18.4 staged copies",),
           lambda s: edit(s / "include/staged.cuh", "return 3;", "return 30;")),
    Change("a header linked into the build tree", ("18.4 staged copies",),
           lambda s: edit(s / "include/linked.cuh", "return 4;", "return 40;"), answer=""),
    Change("a submodule's header, edited there (ignore = all)", ("18.7 submodules",), _submodule_edit, answer=""),
    Change("a submodule bumped", ("18.7 submodules",), _submodule_bump, answer=""),
    Change("host code of a launcher in another target", ("18.8 --whole-target across targets", "11.9 host code",
                                                          "27.8 host-only changes"),
           lambda s: edit(s / "csrc/y/launcher.cu", "launch_xk(x, 32)", "launch_xk(x, 64)"),
           runs=(DEFAULT, Run("--whole-target", ("18.8 --whole-target across targets",), _default("package"),
                              whole_target=True))),
    Change("the real header behind a symlink", ("11.3 symlinked headers",),
           lambda s: edit(s / "include/real.cuh", "0.5f", "0.25f")),
    Change("an anonymous-namespace kernel", ("11.4 kernels no map knows",),
           lambda s: edit(s / "csrc/k/anon.cu", "= 7;", "= 8;"), runs=(DEFAULT, ANON)),
    Change("a kernel body", ("11.6 tied to the map's commit",),
           lambda s: edit(s / "csrc/k/a.cu", "= shared_host_value();", "= shared_host_value() + 1;"),
           runs=(DEFAULT, *VARIANTS)),
    Change("main moved on after the map", ("11.6 tied to the map's commit", "18.6 symbolic commits"),
           lambda s: edit(s / "csrc/k/b.cu", "+= real_offset()", "-= real_offset()"),
           main=lambda s: (edit(s / "csrc/x/xk.cu", "= 11;", "= 13;"), git(s, "commit", "-qam", "main")),
           runs=(DEFAULT, BY_HAND, HEAD_NAMED)),
    Change("a kernel's new file, after a checkout with no rebuild", ("18.5 stale objects",),
           lambda s: edit(s / "csrc/k/a.cu", "+= real_offset() + pch_value();", "+= 2 * real_offset();"),
           runs=(Run("map of the checkout", ("18.5 stale objects",), _default("stale")),),
           stale=_move_b_kernel_into_a),
    Change("the input of a build-time generator", ("26.1 build-time generators", "27.9 generators"),
           lambda s: edit(s / "csrc/gen/ops.def", "OP(gelu, 2)", "OP(gelu, 3)"), answer=""),
    Change("the input of a configure-time generator", ("26.2 configure-time generators", "27.9 generators"),
           lambda s: edit(s / "include/tiles.h", "TILE_SCALE 3", "TILE_SCALE 5"), reconfigure=True, answer=""),
    # Output mode's own (issue 27), in tests/projects/oracle's target many: 22 kernels in csrc/many/many.cu.
    Change("one kernel's body among 22", ("27.2 one kernel's body among many",),
           lambda s: edit(s / MANY, "x[threadIdx.x] = 1; }", "x[threadIdx.x] = 2; }"),
           kernels=frozenset({"_Z9many_bodyPi"}), output_at_most=2),
    Change("a comment among 22 kernels", ("27.3 comment-only edits",),
           lambda s: edit(s / MANY, "// Filler: kernels that no change of the corpus reaches.",
                          "// Filler: kernels that no change of the corpus reaches;\n// a line more moves them all."),
           no_effect=True, output_skips_kernel_tests=True),
    Change("a header one kernel of 22 uses", ("27.4 a header reaching one kernel of many",),
           lambda s: edit(s / "include/many_pick.cuh", "return 6;", "return 60;"),
           kernels=frozenset({"_Z14many_pick_userPi"})),
    Change("a __noinline__ device function two kernels call", ("27.5 shared __noinline__ device functions",),
           lambda s: edit(s / MANY, "v * 5 + 1", "v * 7 + 1"),
           kernels=frozenset({"_Z13many_shared_aPi", "_Z13many_shared_bPi"})),
    Change("a __constant__ initialiser one kernel reads", ("27.6 __constant__ initialisers",),
           lambda s: edit(s / MANY, "{3, 5, 7, 9}", "{3, 5, 8, 9}"),
           kernels=MANY_KERNELS),  # module data: the kernel oracle folds it into every kernel of the image
    Change("a compile definition in CMakeLists.txt", ("27.7 compile definitions in CMake",),
           lambda s: edit(s / "CMakeLists.txt", "MANY_FACTOR=3", "MANY_FACTOR=4"), reconfigure=True,
           kernels=frozenset({"_Z16many_define_userPi"})),
    Change("a host function in a file of kernels", ("27.8 host-only changes",),
           lambda s: edit(s / MANY, "return 41;", "return 42;"), kernels=frozenset()),
    # The change's build is configured with other flags than the base map's: every kernel of many
    # differs where the diff names one (-lineinfo: the cubin's ELF flags, PTX's ptxasOptions; the line
    # information itself is not code, to the kernel oracle).
    # The flag is many's alone (ORACLE_MANY_FLAGS): -DCMAKE_CUDA_FLAGS=-lineinfo recompiles every
    # object (a minute more; output mode then ran 43 of 44 tests, all 42 kernels differing).
    Change("a base map built with other flags", ("27.12 a base map built with other flags",),
           lambda s: edit(s / MANY, "x[threadIdx.x] = 1; }", "x[threadIdx.x] = 2; }"),
           configure=("-DORACLE_MANY_FLAGS=-lineinfo",), runs=(OUTPUT,), kernels=MANY_KERNELS,
           output_says_why=True),
    # Shapes of builds and of device code, in tests/projects/oracle's targets dlto, arclib, objlib, shapes, cdata.
    # Source mode runs every test for the two whose changed object names no kernel (LTO IR; data alone).
    Change("a device function a -dlto device link inlines", ("device link-time optimisation (-dlto)",),
           lambda s: edit(s / "csrc/dlto/scale.cu", "x * 2 + 1", "x * 3 + 1"),
           kernels=frozenset({"_Z11dlto_kernelPi"})),  # in the device link's cubin: the objects hold LTO IR
    Change("a kernel of a static archive two libraries device-link", ("a library linked into two targets",),
           lambda s: edit(s / "csrc/arc/arc.cu", "= 15;", "= 25;"), answer="",
           kernels=frozenset({"_Z10arc_kernelPi"})),
    Change("a kernel of an OBJECT library two libraries link", ("a library linked into two targets",),
           lambda s: edit(s / "csrc/obj/obj.cu", "= 16;", "= 26;"), answer="",
           kernels=frozenset({"_Z10obj_kernelPi"})),
    Change("a kernel renamed, its body unchanged", ("renamed kernels",),
           lambda s: edit(s / "csrc/shapes/rename.cu", "rename_before", "rename_after"), answer="",
           kernels=frozenset({"_Z13rename_beforePi", "_Z12rename_afterPi"})),
    Change("a kernel reading a texture object", ("texture and surface objects",),
           lambda s: edit(s / "csrc/shapes/texture.cu", "* 2.0f", "* 3.0f"), answer="",
           kernels=frozenset({"_Z8tex_readyPf"})),
    Change("a __constant__ initialiser of another object (-rdc)", ("__constant__ data of another object (-rdc)",),
           lambda s: edit(s / "csrc/cdata/table.cu", "{2, 4, 6, 8}", "{2, 4, 6, 9}"),
           kernels=frozenset({"_Z11cdata_firstPi", "_Z10cdata_lastPi"})),  # module data: folded into both
    Change("a kernel launched through a table of kernel pointers", ("kernels launched through a table of pointers",),
           lambda s: edit(s / "csrc/shapes/dispatch.cu", "*= 3;", "*= 5;"), answer="",
           kernels=frozenset({"_Z8disp_mulPi"})),
]
CORPUS = [c if OUTPUT in c.runs else dataclasses.replace(c, runs=(*c.runs, OUTPUT)) for c in CORPUS]


def _check(tree: Tree, change: Change, tmp: Path) -> list[str]:
    """Apply ``change`` to a fresh copy of the base tree, rebuild, and check every run; the lines to print.

    Output-mode runs take their must-run set from :mod:`kernel_oracle` on a CUDA tree (kernel by kernel:
    what output mode claims to see) and from :mod:`oracle` on a HIP tree (image by image: HIP's digests
    are of whole images). Until select has output mode they are skipped, after the other runs passed."""
    if not _output_mode() and all(r.output for r in change.runs):
        pytest.skip(f"{change.name}: only output-mode runs, and this select has no --base-map (issue 27)")
    tree.fresh()
    commit, before = tree.base_commit, tree.base
    maps = dict(tree.maps)
    if change.stale is not None:  # the map is of a checkout that was never rebuilt
        change.stale(tree.src)
        commit = git(tree.src, "rev-parse", "HEAD")
        maps["stale"] = tmp / "stale.json.gz"
        assert ksm("build", "--build-dir", str(tree.build), "--out", str(maps["stale"]), "--no-cache").returncode == 0
        tree.rebuild()
        before = tree.snapshot()
    diff_base = commit
    if change.main is not None:
        change.main(tree.src)
        diff_base = git(tree.src, "rev-parse", "HEAD")
    change.apply(tree.src)
    tree.rebuild(change.reconfigure, change.configure)
    diff = oracle.compare(before, tree.snapshot())
    kdiff = None
    if tree.kind == "cuda" and (change.kernels is not None or change.no_effect
                                or (_output_mode() and any(r.output for r in change.runs))):
        # the output-mode base is the build the base map was made of (for a stale map: before the checkout)
        kdiff = kernel_oracle.compare(tree.kernel_base(), tree.kernel_snapshot())
    if change.no_effect:
        assert not diff.objects_changed and not (kdiff and kdiff.objects_changed), \
            (change.name, diff.objects_changed, kdiff and kdiff.why)
    else:
        assert diff.objects_changed, f"{change.name}: the change changed no object; the corpus entry tests nothing"
    if change.kernels is not None:
        assert kdiff is not None and kdiff.kernels_changed == change.kernels, \
            (change.name, sorted(kdiff.kernels_changed) if kdiff else None, kdiff and kdiff.why)
    lines, skipped = [], []
    for run in change.runs:
        if run.output and not _output_mode():
            skipped.append(run.name)
            continue
        saved, tree.maps = tree.maps, maps
        try:
            map_path, recordings, extra = run.prepare(tree, tmp, commit)
        finally:
            tree.maps = saved
        truth: oracle.Difference | kernel_oracle.KernelDifference = kdiff if run.output and kdiff else diff
        must = truth.must_run(tree.tests, tree.host_reaches(run.whole_target))
        args = ["select", "--map", str(map_path), "--recordings", str(recordings), "--json"]
        args += [] if "--changed" in extra else ["--diff", diff_base]
        args += extra + (["--whole-target"] if run.whole_target else [])
        proc = ksm(*args, cwd=tree.src / run.cwd)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (change.name, run.name, proc.stderr)
        result = json.loads(proc.stdout)
        ran = set(tree.tests) - set(result["skip"])
        missed = must - ran
        assert not missed, (f"{change.name} / {run.name}: unsafe skip of {sorted(missed)}; "
                            f"changed objects {truth.objects_changed}, fallback {result['fallback']}, "
                            f"mode {result.get('mode')} ({result.get('mode_why')})"
                            + (f"; kernel digests {_why(kdiff, missed, tree)}" if truth is kdiff else ""))
        if change.answer is not None and run is change.runs[0]:
            assert (result["fallback"] or "") == change.answer, (change.name, result["fallback_why"])
        if run.output:
            _check_output(change, tree, result, ran)
        lines.append(f"{change.name} / {run.name}: must {len(must)}, ran {len(ran)} of {len(tree.tests)}"
                     f" ({result['fallback'] or 'evidence'}{', mode ' + result['mode'] if 'mode' in result else ''})")
    if skipped:
        pytest.skip(f"{change.name}: {', '.join(skipped)} skipped: this select has no --base-map (output mode, "
                    f"issue 27); the other runs passed:\n" + "\n".join(lines))
    return lines


def _why(kdiff: kernel_oracle.KernelDifference | None, missed: set[str], tree: Tree) -> dict[str, list[str]]:
    """For a message: the digests (object, image, before -> after) of the kernels the missed tests launched."""
    kernels = set().union(*(tree.tests[t] for t in missed))
    return {k: kdiff.why.get(k, ["(host change)"]) for k in sorted(kernels)} if kdiff else {}


def _check_output(change: Change, tree: Tree, result: dict[str, Any], ran: set[str]) -> None:
    """Output mode's precision, where the corpus asks for it; and a reason whenever it is not output mode."""
    said = json.dumps({k: v for k, v in result.items() if k not in ("run", "skip", "decisions")})
    if result.get("mode") != "output":
        assert result.get("mode_why"), f"{change.name}: output mode not used, and no mode_why says why: {said}"
    if change.output_at_most is not None:
        assert len(ran) <= change.output_at_most, f"{change.name}: output mode ran {sorted(ran)}: {said}"
    if change.output_says_why:  # a reason not to decide kernel by kernel, or the kernels that differ
        assert result.get("mode_why") or result.get("fallback_why") or (result.get("emitted") or {}).get("kernels"), \
            f"{change.name}: nothing says why: {said}"
    if change.output_skips_kernel_tests:
        kernel_tests = sorted(t for t in ran if tree.tests[t])
        assert not kernel_tests, f"{change.name}: output mode ran kernel tests {kernel_tests}: {said}"


@pytest.mark.parametrize("change", CORPUS, ids=[c.name for c in CORPUS])
def test_select_runs_what_the_rebuild_changed(cuda_tree: Tree, change: Change, tmp_path: Path) -> None:
    for line in _check(cuda_tree, change, tmp_path):
        print(line)


def test_kernel_oracle_clean_rebuild_changes_nothing(cuda_tree: Tree) -> None:
    """The noise proof (:mod:`kernel_oracle`, :mod:`oracle`): the base tree rebuilt from clean, with no change,
    changes no kernel and no object in either oracle; and both oracles see the same kernels in every object."""
    base = cuda_tree.kernel_base()
    assert {o: s.names for o, s in base.items()} == {o: s.kernels for o, s in cuda_tree.base.items()}
    assert MANY_KERNELS <= frozenset().union(*(s.names for s in base.values()))
    cuda_tree.fresh()
    cuda_tree.rebuild(clean=True)
    kdiff = kernel_oracle.compare(base, cuda_tree.kernel_snapshot())
    assert not kdiff.objects_changed and not kdiff.kernels_changed, kdiff.why
    diff = oracle.compare(cuda_tree.base, cuda_tree.snapshot())
    assert not diff.objects_changed, diff.objects_changed


HIP_CORPUS = [
    Change("a header included only by the device compile", ("18.3 device-only includes under clang",
                                                             "27.11 HIP (per-image digests)"),
           lambda s: edit(s / "include/device_only.hpp", "return 0.0f;", "return 1.0f;"), runs=(BY_HAND, OUTPUT)),
    Change("a header included for one architecture", ("18.3 device-only includes under clang",
                                                      "27.11 HIP (per-image digests)"),
           lambda s: edit(s / "include/arch_only.hpp", "return 1.0f;", "return 2.0f;"), runs=(BY_HAND, OUTPUT)),
]


@pytest.mark.hip
@pytest.mark.parametrize("clang", ["15", "19"])
@pytest.mark.parametrize("change", HIP_CORPUS, ids=[c.name for c in HIP_CORPUS])
def test_select_runs_what_the_rebuild_changed_hip(hip_trees: dict[str, Tree], clang: str, change: Change,
                                                  tmp_path: Path) -> None:
    for line in _check(hip_trees[clang], change, tmp_path):
        print(f"clang-{clang}: {line}")


ISSUE_CLASSES = {
    "18.1 host-only targets", "18.2 device links across targets", "18.3 device-only includes under clang",
    "18.4 staged copies", "18.5 stale objects", "18.6 symbolic commits", "18.7 submodules",
    "18.8 --whole-target across targets", "18.9 normalised rule paths",
    "26.1 build-time generators", "26.2 configure-time generators",
    "11.1 change sets", "11.2 unknown commits", "11.3 symlinked headers", "11.4 kernels no map knows",
    "11.5 incomplete maps", "11.6 tied to the map's commit", "11.7 Nsight exports", "11.8 rule globs",
    "11.9 host code",
    "27.1 output mode", "27.2 one kernel's body among many", "27.3 comment-only edits",
    "27.4 a header reaching one kernel of many", "27.5 shared __noinline__ device functions",
    "27.6 __constant__ initialisers", "27.7 compile definitions in CMake", "27.8 host-only changes",
    "27.9 generators", "27.10 -rdc device links across objects", "27.11 HIP (per-image digests)",
    "27.12 a base map built with other flags",
}
SHAPE_CLASSES = {
    "device link-time optimisation (-dlto)", "a library linked into two targets", "renamed kernels",
    "texture and surface objects", "__constant__ data of another object (-rdc)",
    "kernels launched through a table of pointers",
}


def test_the_corpus_covers_every_class() -> None:
    counts: dict[str, int] = {}
    for change in CORPUS + HIP_CORPUS:
        for cls in set(change.classes) | {c for r in change.runs for c in r.classes}:
            counts[cls] = counts.get(cls, 0) + 1
    print("\n" + "\n".join(f"{cls}: {n}" for cls, n in sorted(counts.items())))
    assert ISSUE_CLASSES | SHAPE_CLASSES <= set(counts), sorted((ISSUE_CLASSES | SHAPE_CLASSES) - set(counts))
