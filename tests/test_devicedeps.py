"""The device side's includes of clang-driven objects: commands rewritten, and real preprocessor runs,
one clang-scan-deps process for every object, and the per-object runs it falls back to."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import projects
import pytest
import toolchains
from toolchains import require

from kernel_symbol_map.buildtree import scandeps
from kernel_symbol_map.buildtree.compdb import Command
from kernel_symbol_map.buildtree.compdb import commands as compdb_commands
from kernel_symbol_map.buildtree.devicedeps import (
    PREPROCESSOR,
    SCAN_DEPS,
    arch_commands,
    archs,
    device_command,
    device_deps,
    is_clang_offload,
)
from kernel_symbol_map.cli import main

SOURCE = """#include <hip/hip_runtime.h>
#ifdef __HIP_DEVICE_COMPILE__
#include "device_only.h"
#endif
#if defined(__gfx90a__)
#include "gfx90a_only.h"
#endif
__global__ void k(int* x) { x[0] = 1; }
"""


def test_a_compile_command_becomes_one_device_preprocessing_run() -> None:
    command = Command(Path("/b"), ("ccache", "/usr/bin/clang++-15", "-DX", "-Iinc", "--offload-arch=gfx90a",
                                   "--offload-arch", "gfx1030", "-MD", "-MT", "o.o", "-MF", "o.o.d", "-x", "hip",
                                   "-c", "/s/k.hip", "-o", "o.o", "-MFjoined.d"))
    assert is_clang_offload(command)
    assert archs(command.arguments) == [("--offload-arch", "gfx90a"), ("--offload-arch", "gfx1030")]
    assert device_command(command) == ["/usr/bin/clang++-15", "-DX", "-Iinc", "--offload-arch=gfx90a",
                                       "--offload-arch", "gfx1030", "-x", "hip", "/s/k.hip", "--cuda-device-only", "-M"]
    assert archs(["--cuda-gpu-arch=sm_80,sm_90"]) == [("--cuda-gpu-arch", "sm_80"), ("--cuda-gpu-arch", "sm_90")]
    assert not is_clang_offload(Command(Path("/b"), ("/usr/local/cuda/bin/nvcc", "-c", "k.cu", "-o", "k.o")))
    assert not is_clang_offload(Command(Path("/b"), ("/usr/bin/clang++", "-c", "host.cpp", "-o", "host.o")))


@pytest.mark.hip
@pytest.mark.parametrize("compiler", ["hipcc", "clang-19"])
def test_device_only_and_one_architecture_includes_are_found(tmp_path: Path, compiler: str) -> None:
    """The host job's depfile misses both headers; the device side's runs find each where it is taken."""
    source = tmp_path / "k.hip"
    source.write_text(SOURCE)
    for name in ("device_only.h", "gfx90a_only.h"):
        (tmp_path / name).write_text("#pragma once\n")
    if compiler == "hipcc":
        exe = require(toolchains.hipcc(), "hipcc (Debian package hipcc)")
        args = [exe]
    else:
        exe = require(shutil.which("clang++", path="/usr/lib/llvm-19/bin"), "clang-19 (Debian package clang-19)")
        args = [exe, "-x", "hip", f"--rocm-device-lib-path={toolchains.HIP_DEVICE_LIBS}"]
    obj = tmp_path / "k.o"
    obj.write_bytes(b"")  # only its stat key is used: the cache's key
    command = Command(tmp_path, (*args, "--offload-arch=gfx90a", "--offload-arch=gfx1030", "-MD", "-c", str(source),
                                 "-o", str(obj)))
    assert is_clang_offload(command)
    (deps, error, _method), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    assert {str(tmp_path / "device_only.h"), str(tmp_path / "gfx90a_only.h"), str(source)} <= set(deps)
    broken = Command(tmp_path, (*args, "--offload-arch=gfx90a", "-c", str(tmp_path / "missing.hip"), "-o", str(obj)))
    (_, error, _method), = device_deps(tmp_path, {obj: broken}, "test", use_cache=False).values()
    assert error and error.startswith("device-side includes unknown: the preprocessor failed")


# Every architecture's device side, with no HIP installation: clang's own driver, -nogpuinc -nogpulib.
PER_ARCH = """#ifdef __HIP_DEVICE_COMPILE__
#include "device_only.h"
#endif
#if defined(__gfx90a__)
#include "gfx90a_only.h"
#endif
#if defined(__gfx1030__)
#include "gfx1030_only.h"
#endif
#ifdef EXTRA
#include "extra.h"
#endif
__attribute__((global)) void k(int* x) { x[0] = 1; }
"""
HEADERS = ("device_only.h", "gfx90a_only.h", "gfx1030_only.h", "extra.h", "added.h")


def _clang(version: str) -> str:
    return require(shutil.which("clang++", path=f"/usr/lib/llvm-{version}/bin"),
                   f"clang-{version} (Debian package clang-{version})")


def _project(where: Path) -> tuple[Path, Path]:
    source = where / "k.hip"
    source.write_text(PER_ARCH)
    for name in HEADERS:
        (where / name).write_text("#pragma once\n")
    obj = where / "k.o"
    obj.write_bytes(b"object")
    return source, obj


def _command(where: Path, exe: str, source: Path, obj: Path, *flags: str) -> Command:
    return Command(where, (exe, "-x", "hip", "-nogpuinc", "-nogpulib", *flags, "-MD", "-MF", f"{obj}.d", "-c",
                           str(source), "-o", str(obj)))


def test_a_comma_list_of_architectures_is_kept_whole() -> None:
    """clang takes ``--offload-arch=a,b`` (and ``--cuda-gpu-arch=a,b``) as both: the device run must too."""
    command = Command(Path("/b"), ("/usr/bin/clang++-19", "-x", "hip", "--offload-arch=gfx90a,gfx1030",
                                   "--cuda-gpu-arch=sm_80,sm_90", "-c", "k.hip", "-o", "k.o"))
    assert device_command(command) == ["/usr/bin/clang++-19", "-x", "hip", "--offload-arch=gfx90a,gfx1030",
                                       "--cuda-gpu-arch=sm_80,sm_90", "k.hip", "--cuda-device-only", "-M"]
    assert [a for _, a in archs(command.arguments)] == ["gfx90a", "gfx1030", "sm_80", "sm_90"]


@pytest.mark.parametrize("version", ["15", "19"])
@pytest.mark.parametrize("spelled", [("--offload-arch=gfx90a,gfx1030",), ("--offload-arch=gfx1030,gfx90a",),
                                     ("--offload-arch=gfx90a", "--offload-arch=gfx1030")])
def test_every_architecture_of_the_command_is_preprocessed(tmp_path: Path, version: str,
                                                           spelled: tuple[str, ...]) -> None:
    """A header taken for one architecture only is found whichever place that architecture has in the list."""
    source, obj = _project(tmp_path)
    command = _command(tmp_path, _clang(version), source, obj, *spelled)
    assert is_clang_offload(command)
    (deps, error, _method), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    found = {Path(d).name for d in deps if Path(d).parent == tmp_path}
    assert found == {"k.hip", "device_only.h", "gfx90a_only.h", "gfx1030_only.h"}


def test_the_cache_is_used_only_while_its_key_holds(tmp_path: Path) -> None:
    """Cached includes stand for an object only while its stat key and its command are what they were."""
    source, obj = _project(tmp_path)
    exe = _clang("19")
    command = _command(tmp_path, exe, source, obj, "--offload-arch=gfx90a")

    def deps(cmd: Command = command) -> tuple[set[str], str | None]:
        (found, error, _method), = device_deps(tmp_path, {obj: cmd}, "test").values()
        return {Path(d).name for d in found if Path(d).parent == tmp_path}, error

    assert deps() == ({"k.hip", "device_only.h", "gfx90a_only.h"}, None)
    # The source now includes another header under device compilation, and the object was not rebuilt:
    # its key holds, so the cache answers (the model fails closed on an object older than its deps).
    source.write_text('#ifdef __HIP_DEVICE_COMPILE__\n#include "added.h"\n#endif\n' + PER_ARCH)
    assert deps() == ({"k.hip", "device_only.h", "gfx90a_only.h"}, None)
    # Rebuilt: a new stat key, so the cached includes are stale and the preprocessor runs again.
    obj.unlink()
    obj.write_bytes(b"rebuilt object")
    assert deps() == ({"k.hip", "added.h", "device_only.h", "gfx90a_only.h"}, None)
    # The same object under another command (a define that takes extra.h): run again too.
    extra = _command(tmp_path, exe, source, obj, "--offload-arch=gfx90a", "-DEXTRA")
    everything = {"k.hip", "added.h", "device_only.h", "gfx90a_only.h", "extra.h"}
    assert deps(extra) == (everything, None)
    # A missing source behind an unchanged key is never looked at: the cache answers...
    source.unlink()
    assert deps(extra) == (everything, None)
    # ... until the key changes (here the command), and then the preprocessor's failure is the answer.
    found, error = deps()
    assert found == set() and error and error.startswith("device-side includes unknown: the preprocessor failed")
    # A failure is never cached: asked again, the preprocessor runs again, and fails again.
    assert deps() == (set(), error)


@pytest.mark.parametrize("flags", [("-x", "hip"), ()])
def test_a_clang_offload_compile_with_no_architecture_named_is_preprocessed(tmp_path: Path,
                                                                           flags: tuple[str, ...]) -> None:
    """No ``--offload-arch``: clang compiles for its default architecture, and its device side still takes
    headers the host job does not. ``-x hip`` or a ``.hip`` source says it is an offload compile."""
    source, obj = _project(tmp_path)
    if flags:  # the language given, the source named as a C++ file
        source = source.rename(tmp_path / "k.cpp")
    command = Command(tmp_path, (_clang("19"), *flags, "-nogpuinc", "-nogpulib", "-c", str(source), "-o", str(obj)))
    assert archs(command.arguments) == [] and is_clang_offload(command)
    (deps, error, _method), = device_deps(tmp_path, {obj: command}, "test", use_cache=False).values()
    assert error is None, error
    assert {Path(d).name for d in deps if Path(d).parent == tmp_path} == {source.name, "device_only.h"}
    assert not is_clang_offload(Command(tmp_path, (_clang("19"), "-c", "host.cpp", "-o", "host.o")))


def test_hipcc_is_clang_whatever_the_source_is_called() -> None:
    """hipcc as CMake's C++ compiler (kernels in ``.cpp``) drives clang: its depfile is the host job's too."""
    command = Command(Path("/b"), ("ccache", "/opt/rocm/bin/hipcc", "--offload-arch=gfx90a", "-c", "k.cpp",
                                   "-o", "k.o"))
    assert is_clang_offload(command)
    assert device_command(command) == ["/opt/rocm/bin/hipcc", "--offload-arch=gfx90a", "k.cpp",
                                       "--cuda-device-only", "-M"]


# --- clang-scan-deps: one process for every object, held to the per-object runs' answers -------------------

SHA = "c1" + "0" * 38


@pytest.fixture(scope="module", params=["15", "19"])
def hip_project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(clang version, build folder) of tests/projects/hip under CMake's HIP language, gfx90a and gfx1030: a
    header under ``__HIP_DEVICE_COMPILE__`` (act.hip) and one for gfx90a only (attn.hip), built (the map's
    objects are read) with Debian's clang-15 (hipcc's) and with clang-19."""
    version = request.param
    cmake = require(next((c for c in projects.cmakes() if c.label == "newest"), None), "PyPI's cmake")
    where = tmp_path_factory.mktemp(f"hip-scan-deps-{version}")
    language = toolchains.hip_cmake_args("newest", where, clang=version)
    source, build = where / "src", where / "build"
    shutil.copytree(projects.PROJECTS / "hip", source)
    toolchains.run([cmake.cmake, "-S", str(source), "-B", str(build), "-G", "Ninja",
                    f"-DCMAKE_MAKE_PROGRAM={cmake.ninja}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *language])
    toolchains.run([cmake.ninja, "-C", str(build)])
    return version, build


def _hip_commands(build: Path) -> dict[Path, Command]:
    data = json.loads((build / "compile_commands.json").read_text())
    found = {o: c for o, c in compdb_commands(data, "compile_commands.json", build).items() if is_clang_offload(c)}
    assert len(found) == 4, found  # act, attn, rdc_a, rdc_b: host.cpp is the C++ compiler's
    return found


def _scan_deps_of(version: str) -> str:
    return require(shutil.which(f"clang-scan-deps-{version}"), f"clang-scan-deps-{version} (Debian package "
                                                                f"clang-tools-{version})")


class _Runs:
    """Every subprocess.run of the code under test: the clang-scan-deps runs (with their entries) and the
    per-object preprocessor runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scans: list[list[dict[str, Any]]] = []
        self.per_object: list[list[str]] = []
        real = subprocess.run

        def run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            if "-compilation-database" in argv:
                self.scans.append(json.loads(Path(argv[argv.index("-compilation-database") + 1]).read_text()))
            elif argv[-1] == "-M":
                self.per_object.append(list(argv))
            return real(argv, *args, **kwargs)

        monkeypatch.setattr(subprocess, "run", run)


def test_one_scan_deps_process_gives_each_object_its_per_object_include_set(
        hip_project: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every object of a real HIP project (two offload architectures) goes to one clang-scan-deps process, one
    entry per architecture; each object's include set is exactly what one ``clang -M`` per object gives: the
    device-only header, the one-architecture header, and the compiler's own headers in its own spelling."""
    version, build = hip_project
    _scan_deps_of(version)
    commands = _hip_commands(build)
    reference = device_deps(build, commands, "test", use_cache=False, scan_deps=False)
    runs = _Runs(monkeypatch)
    scanned = device_deps(build, commands, "test", use_cache=False)
    assert len(runs.scans) == 1 and runs.per_object == []
    assert len(runs.scans[0]) == 2 * len(commands)  # one device job each: gfx90a, gfx1030
    assert {Path(e["arguments"][0]).name for e in runs.scans[0]} == {Path(c.arguments[0]).name
                                                                    for c in commands.values()}
    for obj in commands:
        assert reference[obj].method == PREPROCESSOR and reference[obj].error is None, reference[obj]
        assert scanned[obj].method == SCAN_DEPS and scanned[obj].error is None, scanned[obj]
        assert scanned[obj].deps == reference[obj].deps, (obj, set(scanned[obj].deps) ^ set(reference[obj].deps))
    act, attn = (next(d for o, d in scanned.items() if o.name.startswith(name)) for name in ("act.hip", "attn.hip"))
    assert any(d.endswith("include/device_only.hpp") for d in act.deps)
    assert any(d.endswith("include/arch_only.hpp") for d in attn.deps)
    resource = subprocess.run([commands[next(iter(commands))].arguments[0], "-print-resource-dir"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert any(d.startswith(resource + os.sep) for d in act.deps)  # the compiler's spelling, not the tool's


def _map(build: Path, out: Path) -> dict[str, Any]:
    assert main(["build", "--build-dir", str(build), "--out", str(out), "--commit", SHA, "--no-cache"]) == 0
    return json.loads(gzip.decompress(out.read_bytes()))


def test_the_map_says_which_way_device_includes_came(hip_project: tuple[str, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``deps_from`` per object and for the tree: device-scan-deps, and device-preprocessor where no matching
    clang-scan-deps exists; the deps are the same either way."""
    version, build = hip_project
    _scan_deps_of(version)
    scanned = _map(build, tmp_path / "scanned.json.gz")
    monkeypatch.setattr(scandeps, "TOOL", "clang-scan-deps-not-installed")  # none beside clang nor on PATH
    fallback = _map(build, tmp_path / "fallback.json.gz")
    hip = {o["source"] for o in scanned["objects"] if o["source"].endswith(".hip")}
    assert {o["source"]: o.get("deps_from") for o in scanned["objects"] if o["source"] in hip} == \
        dict.fromkeys(hip, "device-scan-deps")
    assert {o["source"]: o.get("deps_from") for o in fallback["objects"] if o["source"] in hip} == \
        dict.fromkeys(hip, "device-preprocessor")
    assert scanned["deps_from"] == "ninja_deps+device-scan-deps"
    assert fallback["deps_from"] == "ninja_deps+device-preprocessor"
    assert {o["object"]: o["deps"] for o in scanned["objects"]} == {o["object"]: o["deps"] for o in fallback["objects"]}


def _wrapper(folder: Path, compiler: str) -> str:
    """A compiler at a path with no clang-scan-deps of its own beside it (a script that runs clang)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "clang++"
    script.write_text(f'#!/bin/sh\nexec {compiler} "$@"\n')
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("found", ["absent", "another version"])
def test_no_matching_scan_deps_means_one_preprocessor_run_per_object(tmp_path: Path, found: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """clang-15 with no clang-scan-deps-15 anywhere: a clang-scan-deps-19 beside it is never taken (it models
    clang-19's driver); each object is preprocessed on its own, its method says so, and the log says why."""
    clang15 = _clang("15")
    bin_dir = tmp_path / "bin"
    exe = _wrapper(bin_dir, clang15)
    if found == "another version":
        (bin_dir / "clang-scan-deps").symlink_to(_scan_deps_of("19"))
        (bin_dir / "clang-scan-deps-19").symlink_to(_scan_deps_of("19"))
    monkeypatch.setenv("PATH", str(bin_dir))
    source, obj = _project(tmp_path)
    command = _command(tmp_path, exe, source, obj, "--offload-arch=gfx90a", "--offload-arch=gfx1030")
    said: list[str] = []
    runs = _Runs(monkeypatch)
    (deps, error, method), = device_deps(tmp_path, {obj: command}, "test", use_cache=False, log=said.append).values()
    assert error is None and method == PREPROCESSOR and runs.scans == [] and len(runs.per_object) == 1
    assert {Path(d).name for d in deps if Path(d).parent == tmp_path} == \
        {"k.hip", "device_only.h", "gfx90a_only.h", "gfx1030_only.h"}
    assert said == [f"device-side includes: {exe}: no clang-scan-deps of Debian 15.0.6 beside it or on PATH "
                    "(clang-scan-deps-15, Debian package clang-tools-15); preprocessing its objects one by one"]


def test_an_object_the_tool_answers_in_part_is_preprocessed_on_its_own(tmp_path: Path) -> None:
    """One architecture's entry fails (an architecture clang refuses), the other's succeeds: the object is
    not given the half, it is preprocessed alone (and fails, as the build would); the other object keeps the
    tool's answer."""
    _scan_deps_of("19")
    good_source, good = _project(tmp_path)
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"object")
    commands = {good: _command(tmp_path, _clang("19"), good_source, good, "--offload-arch=gfx90a"),
                bad: _command(tmp_path, _clang("19"), good_source, bad, "--offload-arch=gfx90a",
                              "--offload-arch=gfx_bogus")}
    said: list[str] = []
    found = device_deps(tmp_path, commands, "test", use_cache=False, log=said.append)
    assert found[good].method == SCAN_DEPS and found[good].error is None
    assert found[bad].method == PREPROCESSOR and found[bad].deps == ()
    assert found[bad].error and found[bad].error.startswith("device-side includes unknown: the preprocessor failed")
    assert len(said) == 1 and "1 of 3 entries unanswered (exit 1)" in said[0] and "1 object(s)" in said[0]


def test_a_cached_answer_keeps_its_method_and_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run with the object unchanged reads device-deps.json: no process, the same includes and method;
    an entry from before methods were kept came from a per-object run."""
    _scan_deps_of("19")
    source, obj = _project(tmp_path)
    command = _command(tmp_path, _clang("19"), source, obj, "--offload-arch=gfx90a")
    first = device_deps(tmp_path, {obj: command}, "test")[obj]
    assert first.method == SCAN_DEPS and first.error is None
    runs = _Runs(monkeypatch)
    assert device_deps(tmp_path, {obj: command}, "test")[obj] == first
    assert runs.scans == [] and runs.per_object == []
    from kernel_symbol_map import _statefile

    path = tmp_path / _statefile.FOLDER / "device-deps.json"
    stored = _statefile.read(path, "test", print)
    del stored[str(obj)]["method"]
    _statefile.write(path, "test", stored, print)
    assert device_deps(tmp_path, {obj: command}, "test")[obj] == first._replace(method=PREPROCESSOR)


def test_commands_are_split_per_architecture_only_where_read_safely() -> None:
    """One entry per architecture, clang's own spelling; hipcc, hipcc's spellings, --no-offload-arch and
    response files keep the object on its per-object run."""
    base = ("/usr/bin/clang++-19", "-x", "hip", "-Iinc", "-MD", "-MF", "k.o.d", "-c", "/s/k.hip", "-o", "k.o")
    split = arch_commands(Command(Path("/b"), (*base, "--offload-arch=gfx90a,gfx1030", "--offload-arch", "gfx90a")))
    assert split == [["/usr/bin/clang++-19", "-x", "hip", "-Iinc", "/s/k.hip", "--cuda-device-only",
                      f"--offload-arch={arch}"] for arch in ("gfx90a", "gfx1030")]
    assert arch_commands(Command(Path("/b"), base)) == [["/usr/bin/clang++-19", "-x", "hip", "-Iinc", "/s/k.hip",
                                                         "--cuda-device-only"]]
    for extra in (("--amdgpu-target=gfx90a",), ("--offload-arch=gfx90a", "--no-offload-arch=gfx90a"),
                  ("@flags.rsp",)):
        assert arch_commands(Command(Path("/b"), (*base, *extra))) is None, extra
    assert arch_commands(Command(Path("/b"), ("/opt/rocm/bin/hipcc", "--offload-arch=gfx90a", "-c", "k.cpp"))) is None


FAKE_TOOL = """#!{python}
import json, os, signal, sys
entries = json.load(open(sys.argv[sys.argv.index("-compilation-database") + 1]))
mode = {mode!r}
for i, e in enumerate(entries):
    target = e["arguments"][-1]
    if mode == "empty" and i == 0:
        print(target + ":")
    elif not (mode == "exit 1" and i == 0):
        print(target + ": " + e["file"] + " inc/h" + str(i) + ".h")
if mode == "stray":
    print("other.o: inc/h.h")
sys.stdout.flush()
if mode == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(1 if mode == "exit 1" else 0)
"""


@pytest.mark.parametrize(("mode", "kept", "problem"), [
    ("ok", {"t0", "t1", "t2"}, None),
    ("exit 1", {"t1", "t2"}, "1 of 3 entries unanswered (exit 1)"),
    ("empty", {"t1", "t2"}, "1 of 3 entries unanswered (exit 0)"),
    ("stray", set(), "printed a rule for 'other.o', which no entry asked for"),
    ("killed", set(), "was killed (signal 9)"),
])
def test_only_whole_rules_of_the_entries_are_kept(tmp_path: Path, mode: str, kept: set[str],
                                                  problem: str | None) -> None:
    """A rule is kept only when its target is an entry's and it lists something; output the run cannot
    vouch for (a stray rule, a killed run) keeps nothing."""
    tool = tmp_path / "clang-scan-deps"
    tool.write_text(FAKE_TOOL.format(python=sys.executable, mode=mode))
    tool.chmod(0o755)
    entries = [scandeps.Entry(tmp_path, ("clang++", "-x", "hip", "k.hip", "-M", "-MT", f"t{i}"), f"t{i}", "k.hip")
               for i in range(3)]
    result = scandeps.scan(str(tool), entries, 2)
    assert set(result.rules) == kept
    assert all(result.rules[t] == ("k.hip", f"inc/h{t[1:]}.h") for t in kept)
    assert (result.problem is None) if problem is None else (result.problem and problem in result.problem)


def test_a_compiler_s_version_is_asked_once_per_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The finder runs each ``--version`` once, however many objects name the compiler."""
    _scan_deps_of("19")
    calls: list[list[str]] = []
    real: Callable[..., Any] = subprocess.run

    def run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
        calls.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    finder = scandeps.Finder()
    matches = {finder.match(_clang("19"), tmp_path) for _ in range(3)}
    assert len(matches) == 1 and None not in matches
    assert sum(a[-1] == "--version" for a in calls) == 2  # the compiler's and the tool's


@pytest.mark.parametrize("text", [
    "t0: /a/k.hip \\\n  /usr/include/x.h /a/b.h\nt1: /a/k.hip\n",
    "t0 t1: a.h\tb.h \\\r\n c.h\n\nt0: d.h\n",
    "t0: /a/with\\ space.h /a/dollar$$.h /a/hash\\#.h\n",  # escapes: the general parser
    "no rule here\n: orphan.h\n",
])
def test_the_fast_rule_reader_reads_what_the_depfile_parser_reads(text: str) -> None:
    from kernel_symbol_map.buildtree.makedeps import parse_depfile

    assert scandeps.rules_of(text) == parse_depfile(text)
