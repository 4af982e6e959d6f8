"""Host changes as narrow as the code a test ran: host coverage, recorded per test, against per-function digests.

``tests/projects/hostfuncs`` built with ``-DKERNEL_SYMBOL_MAP_HOST_COVERAGE=ON``
by real CMake and nvcc: ``pipeline()`` in ``a.cu`` checks its argument and
launches ``b.cu``'s kernel through ``launch_scale()``; ``host_only.cpp`` holds
``version()``. Its own tests run under the recorder (CUPTI simulated: each
test that launches says so), calling the library through ctypes on the CPU.
The base is built in one folder; the changes in another, longer one, edited
and rebuilt there, as two CI runners build them.

The truth reads no map: each function's disassembly, with its relocations,
in the base's object and the change's (``objdump``; ``-ffunction-sections``
puts each function in a section of its own, at offset 0), and the functions
each test's record says it ran.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import toolchains
from projects import PROJECTS, cmakes, configure_and_build_at
from test_plugin_records import CONFTEST

from kernel_symbol_map.cmakedir import cmake_dir
from kernel_symbol_map.consumer.kernelmap import KernelMap
from kernel_symbol_map.consumer.recordings import read
from kernel_symbol_map.consumer.selection import Options, select
from kernel_symbol_map.errors import RecordingError

COMMIT = "c" * 40
TESTS = ["tests/test_ops.py::test_pipeline", "tests/test_ops.py::test_pipeline_rejects",
         "tests/test_ops.py::test_scale", "tests/test_ops.py::test_version", "tests/test_ops.py::test_loaded"]
PIPELINE, VERSION = "_Z8pipelinePfi", "_Z7versionv"
EDITS = {  # a change -> (file, text, replacement)
    "pipeline": ("csrc/a.cu", "  if (n <= 0) {", "  if (n <= 0 || n > (1 << 30)) {"),
    "version": ("csrc/host_only.cpp", "return 3;", "return 4;"),
}


@dataclass(frozen=True)
class Built:
    base: Path  # the base's map
    twin: Path  # the base's map, built in the other folder
    changes: dict[str, Path]  # change -> its map
    recording: Path
    objects: dict[str, tuple[Path, Path]]  # change -> (base object, changed object)


def _configure(source: Path, build: Path) -> None:
    configure_and_build_at(source, build, cmakes()[0], "Ninja", f"-DKernelSymbolMap_DIR={cmake_dir()}",
                           f"-DPython_EXECUTABLE={sys.executable}", "-DKERNEL_SYMBOL_MAP_HOST_COVERAGE=ON")


def _rebuild(build: Path) -> None:
    proc = subprocess.run([cmakes()[0].cmake, "--build", str(build)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _record(source: Path, build: Path, out: Path) -> Path:
    (source / "tests" / "conftest.py").write_text(CONFTEST)
    env = {**os.environ, "HOSTFUNCS_LIB": str(build / "libops.so")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--kernel-record", str(out), "tests/test_ops.py"], cwd=source, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(out.glob("*.jsonl"))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    toolchains.require(toolchains.nvcc(), "nvcc")
    where = tmp_path_factory.mktemp("hostcov")
    base = where / "a" / "src"
    shutil.copytree(PROJECTS / "hostfuncs", base)
    _configure(base, where / "a" / "build")
    recording = _record(base, where / "a" / "build", where / "rec")
    change = where / "a-second-runner-with-a-longer-folder" / "src"
    shutil.copytree(PROJECTS / "hostfuncs", change)
    build = change.parent / "build"
    _configure(change, build)
    maps = {"twin": where / "twin.json.gz"}
    shutil.copy(build / "kernel_symbol_map.json.gz", maps["twin"])
    objects = {}
    for name, (path, text, replacement) in EDITS.items():
        original = (change / path).read_text()
        (change / path).write_text(original.replace(text, replacement))
        _rebuild(build)
        maps[name] = where / f"{name}.json.gz"
        shutil.copy(build / "kernel_symbol_map.json.gz", maps[name])
        obj = f"CMakeFiles/ops.dir/{path}.o"
        kept = where / f"{name}.o"
        shutil.copy(build / obj, kept)
        objects[name] = (where / "a" / "build" / obj, kept)
        (change / path).write_text(original)
    _rebuild(build)
    return Built(where / "a" / "build" / "kernel_symbol_map.json.gz", maps["twin"],
                 {n: maps[n] for n in EDITS}, recording, objects)


def _load(path: Path) -> KernelMap:
    return KernelMap(json.loads(gzip.decompress(path.read_bytes())), str(path))


def _ran(built: Built, change: str, **options: object) -> set[str]:
    s = select(_load(built.changes[change]), read([built.recording]), [EDITS[change][0]], options=Options(**options),
               base=[_load(built.base)])
    assert s.mode == "output" and not s.fallback, (s.fallback, s.fallback_why)
    return set(s.to_run)


def _disassembly(obj: Path) -> dict[str, str]:
    """Function -> its section's disassembly with relocations (nvcc's names for the file masked)."""
    out = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    found: dict[str, str] = {}
    for block in re.split(r"\nDisassembly of section ", out)[1:]:
        section, _, body = block.partition(":\n")
        if section.startswith(".text."):
            found[section.removeprefix(".text.")] = re.sub(r"tmpxft_\w+|_[0-9a-f]{8}_\d+_", "_", body)
    return found


def _truth(built: Built, change: str) -> set[str]:
    """The tests whose record lists a function whose code differs between the two builds' objects."""
    before, after = (_disassembly(o) for o in built.objects[change])
    changed = {f for f in before.keys() | after.keys() if before.get(f) != after.get(f)}
    assert changed, "the edit changed no function"
    return {r.test for r in read([built.recording])
            if r.host_functions is not None and changed & set().union(*r.host_functions.values())}


def test_records_list_the_host_functions_each_test_ran(built: Built) -> None:
    records = {r.test: r for r in read([built.recording])}
    assert sorted(records) == sorted(TESTS) and all(r.complete for r in records.values())
    ran = {t: r.host_functions["libops.so"] for t, r in records.items()}  # type: ignore[index]
    assert PIPELINE in ran[TESTS[0]] and PIPELINE in ran[TESTS[1]] and "_Z12launch_scalePfi" in ran[TESTS[0]]
    assert PIPELINE not in ran[TESTS[2]] and "_Z12launch_scalePfi" in ran[TESTS[2]]
    assert VERSION in ran[TESTS[3]] and all(VERSION not in ran[t] for t in TESTS if t != TESTS[3])
    assert not {PIPELINE, VERSION, "_Z12launch_scalePfi"} & ran[TESTS[4]]
    # the library's static initialisers ran as it was loaded, at collection: every test's
    assert all("_ZL24__sti____cudaRegisterAllv" in names for names in ran.values())


def test_the_map_splits_host_code_by_function_and_sees_the_coverage(built: Built) -> None:
    doc = json.loads(gzip.decompress(built.base.read_bytes()))
    parts = {o["source"]: o["digests"]["host_parts"] for o in doc["objects"]}
    assert PIPELINE in parts["csrc/a.cu"]["functions"] and VERSION in parts["csrc/host_only.cpp"]["functions"]
    assert all("unseen" in p for p in parts.values())  # compiled with host coverage
    assert PIPELINE not in parts["csrc/a.cu"]["unseen"]
    assert any(n.startswith("_GLOBAL__sub_I") or "__sti__" in n for n in parts["csrc/b.cu"]["init"])


def test_two_folders_give_the_same_parts(built: Built) -> None:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "diff", "--json", str(built.base),
                           str(built.twin)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["host"] == []


def test_diff_names_the_changed_host_function(built: Built) -> None:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "diff", str(built.base),
                           str(built.changes["pipeline"])], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "changed: pipeline(float*, int)" in proc.stdout and "version()" not in proc.stdout, proc.stdout


def test_editing_pipeline_runs_the_tests_that_called_it(built: Built) -> None:
    ran = _ran(built, "pipeline")
    assert ran == {TESTS[0], TESTS[1]}  # not test_scale (same kernel, another launcher), version, loaded
    assert ran >= _truth(built, "pipeline")


def test_editing_version_runs_only_the_test_that_called_it(built: Built) -> None:
    assert _ran(built, "version") == {TESTS[3]} == _truth(built, "version")


def test_a_record_without_host_functions_gets_the_library_scope(built: Built, tmp_path: Path) -> None:
    lines = [json.loads(line) for line in built.recording.read_text().splitlines() if line.startswith("{")]
    for record in lines:
        if record["test"] == TESTS[4]:
            del record["host_functions"]
    stripped = tmp_path / "rec.jsonl"
    stripped.write_text("".join(json.dumps(r) + "\n" for r in lines))
    s = select(_load(built.changes["version"]), read([stripped]), [EDITS["version"][0]],
               base=[_load(built.base)])
    assert set(s.to_run) == {TESTS[3], TESTS[4]}
    why = next(d.why for d in s.decisions if d.test == TESTS[4])
    assert "lists no host functions" in why, why
    assert _ran(built, "version", host_scope="libraries") == set(TESTS)


def test_host_functions_that_are_not_a_mapping_of_lists_of_strings_are_an_error(tmp_path: Path) -> None:
    for bad in ([], {"libops.so": "pipeline"}, {"libops.so": [1]}, {"lib/ops.so": []}, {"libops.so": [""]}):
        path = tmp_path / "rec.jsonl"
        path.write_text(json.dumps({"test": "t::x", "kernels": [], "complete": True, "commit": COMMIT,
                                    "host_functions": bad}) + "\n")
        with pytest.raises(RecordingError, match=r"rec\.jsonl:1: test 't::x': \"host_functions\" must map"):
            read([path])
