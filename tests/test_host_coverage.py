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
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import read
from kernel_symbol_map.consumer.select.selection import Options, select
from kernel_symbol_map.errors import RecordingError

COMMIT = "c" * 40
TESTS = ["tests/test_ops.py::test_pipeline", "tests/test_ops.py::test_pipeline_rejects",
         "tests/test_ops.py::test_scale", "tests/test_ops.py::test_version", "tests/test_ops.py::test_loaded",
         "tests/test_ops.py::test_child"]
CHILD = TESTS[5]
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
    lazy: Path  # the recording of tests/test_lazy.py, which loads libops.so in a test


def _configure(source: Path, build: Path) -> None:
    configure_and_build_at(source, build, cmakes()[0], "Ninja", f"-DKernelSymbolMap_DIR={cmake_dir()}",
                           f"-DPython_EXECUTABLE={sys.executable}", "-DKERNEL_SYMBOL_MAP_HOST_COVERAGE=ON")


def _rebuild(build: Path) -> None:
    proc = subprocess.run([cmakes()[0].cmake, "--build", str(build)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _record(source: Path, build: Path, out: Path, tests: str) -> Path:
    (source / "tests" / "conftest.py").write_text(CONFTEST)
    env = {**os.environ, "HOSTFUNCS_LIB": str(build / "libops.so")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--kernel-record", str(out), tests], cwd=source, env=env,
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
    recording = _record(base, where / "a" / "build", where / "rec", "tests/test_ops.py")
    lazy = _record(base, where / "a" / "build", where / "lazy", "tests/test_lazy.py")
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
                 {n: maps[n] for n in EDITS}, recording, objects, lazy)


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
    ran = {t: r.host_functions["libops.so"] for t, r in records.items() if t != CHILD}  # type: ignore[index]
    assert PIPELINE in ran[TESTS[0]] and PIPELINE in ran[TESTS[1]] and "_Z12launch_scalePfi" in ran[TESTS[0]]
    assert PIPELINE not in ran[TESTS[2]] and "_Z12launch_scalePfi" in ran[TESTS[2]]
    assert VERSION in ran[TESTS[3]] and all(VERSION not in ran[t] for t in ran if t != TESTS[3])
    assert not {PIPELINE, VERSION, "_Z12launch_scalePfi"} & ran[TESTS[4]]
    # the library's static initialisers ran as it was loaded, at collection: every test's
    assert all("_ZL24__sti____cudaRegisterAllv" in names for names in ran.values())


def test_a_native_child_leaves_its_libraries_out_of_the_record(built: Built) -> None:
    """test_child's child ran version() where no recorder saw it: the record lists no host functions of
    libops.so, and a change to version() runs it (the library scope)."""
    child = next(r for r in read([built.recording]) if r.test == CHILD)
    assert child.complete and "libops.so" in (child.libraries or ()), child
    assert child.host_functions is not None and "libops.so" not in child.host_functions
    assert CHILD in _ran(built, "version")


def test_what_ran_as_a_library_was_first_loaded_is_every_tests(built: Built) -> None:
    """libops.so loaded inside test_load: its static initialisers ran then, and their effects outlive it."""
    records = {r.test.split("::")[1]: r for r in read([built.lazy])}
    assert all(r.complete for r in records.values())
    after = records["test_after"].host_functions
    assert after is not None and "_ZL24__sti____cudaRegisterAllv" in after["libops.so"]


def test_the_map_splits_host_code_by_function_and_sees_the_coverage(built: Built) -> None:
    doc = json.loads(gzip.decompress(built.base.read_bytes()))
    parts = {o["source"]: o["digests"]["host_parts"] for o in doc["objects"]}
    assert PIPELINE in parts["csrc/a.cu"]["functions"] and VERSION in parts["csrc/host_only.cpp"]["functions"]
    assert all("unseen" in p for p in parts.values())  # compiled with host coverage
    assert PIPELINE not in parts["csrc/a.cu"]["unseen"]
    assert any(n.startswith("_GLOBAL__sub_I") or "__sti__" in n for n in parts["csrc/b.cu"]["init"])


def test_an_install_keeps_the_symbols_the_recorder_names_functions_by(built: Built, tmp_path: Path) -> None:
    """scikit-build-core installs with --strip: a build with host coverage keeps the libraries' symbol tables."""
    build = built.base.parent
    proc = subprocess.run([cmakes()[0].cmake, "--install", str(build), "--prefix", str(tmp_path), "--strip"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = next(tmp_path.rglob("libops.so"))
    assert "_Z8pipelinePfi" in subprocess.run(["nm", str(installed)], capture_output=True, text=True,
                                              check=True).stdout


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
    assert ran == {TESTS[0], TESTS[1], CHILD}  # not test_scale (same kernel, another launcher), version, loaded
    assert ran >= _truth(built, "pipeline")


def test_editing_version_runs_only_the_tests_that_called_it(built: Built) -> None:
    assert _ran(built, "version") == {TESTS[3], CHILD}  # the child's, by the library scope
    assert _truth(built, "version") == {TESTS[3]}


def test_a_record_without_host_functions_gets_the_library_scope(built: Built, tmp_path: Path) -> None:
    lines = [json.loads(line) for line in built.recording.read_text().splitlines() if line.startswith("{")]
    for record in lines:
        if record["test"] == TESTS[4]:
            del record["host_functions"]
    stripped = tmp_path / "rec.jsonl"
    stripped.write_text("".join(json.dumps(r) + "\n" for r in lines))
    s = select(_load(built.changes["version"]), read([stripped]), [EDITS["version"][0]],
               base=[_load(built.base)])
    assert set(s.to_run) == {TESTS[3], TESTS[4], CHILD}
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


def test_a_record_names_host_functions_as_any_build_does(tmp_path: Path) -> None:
    """A GCC clone is its function; nvcc's unit hash and temporary file name are masked."""
    path = tmp_path / "rec.jsonl"
    path.write_text(json.dumps({"test": "t::x", "kernels": [], "complete": True, "commit": COMMIT, "host_functions": {
        "libops.so": ["_Z6helperv.constprop.0", "_ZN12_GLOBAL__N__1a2b3c4d_4_a_cu1fEv",
                      "_GLOBAL__sub_I_tmpxft_0000328d_00000000_6_b.cudafe1.cpp"]}}) + "\n")
    assert read([path])[0].host_functions == {"libops.so": frozenset({
        "_Z6helperv", "_ZN12_GLOBAL__N__xxxxxxxx_4_a_cu1fEv", "_GLOBAL__sub_I_tmpxft_6_b.cudafe1.cpp"})}


# -- the decisions, on inputs small enough to read ---------------------------------------------------------


def _object(parts: dict[str, object] | None, host: str = "h") -> dict[str, object]:
    digests: dict[str, object] = {"covers": {"host": "digested", "kernels": 0}, "host": host}
    if parts is not None:
        digests["host_parts"] = parts
    return {"source": "a.cpp", "target": "ops", "object": "a.cpp.o", "device": False, "symbols": [],
            "deps": ["a.cpp"], "digests": digests}


def _compare(before: dict[str, object] | None, after: dict[str, object] | None) -> list[object]:
    from kernel_symbol_map.consumer.select import emitted
    from kernel_symbol_map.mapformat import digests as map_digests

    def kmap(o: dict[str, object] | None) -> KernelMap:
        return KernelMap({"objects": [o] if o is not None else [], "digests": map_digests.SCHEME})

    return emitted.compare([kmap(before)], [kmap(after)]).hosts


PARTS = {"functions": {"_Z1fv": "f1", "_Z1gv": "g1", "_Z1gv.cold": "c1", "_GLOBAL__sub_I_a.cpp": "i1"},
         "init": ["_GLOBAL__sub_I_a.cpp"], "data": "d1", "unseen": ["_Z1gv.cold"]}


def _edited(**changes: object) -> dict[str, object]:
    return {**PARTS, **changes}


def test_parts_say_which_functions_differ_and_what_else_does() -> None:
    def change(parts: dict[str, object]) -> object:
        (found,) = _compare(_object(PARTS), _object(parts, host="h2"))
        return found

    f = change(_edited(functions={**PARTS["functions"], "_Z1fv": "f2"}))  # type: ignore[dict-item]
    assert f.functions == {"_Z1fv": "changed"} and f.whole == "" and f.unseen == frozenset()
    cold = change(_edited(functions={**PARTS["functions"], "_Z1gv.cold": "c2"}))  # type: ignore[dict-item]
    assert cold.functions == {"_Z1gv": "changed"} and cold.unseen == frozenset()  # seen through g
    gone = change(_edited(functions={k: v for k, v in PARTS["functions"].items() if k != "_Z1fv"}))  # type: ignore[attr-defined]
    assert gone.functions == {"_Z1fv": "removed"} and gone.whole == ""
    new = change(_edited(functions={**PARTS["functions"], "_Z1hv": "h1"}))  # type: ignore[dict-item]
    assert new.functions == {"_Z1hv": "added"}
    assert change(_edited(data="d2")).whole == "data"
    init = change(_edited(functions={**PARTS["functions"], "_GLOBAL__sub_I_a.cpp": "i2"}))  # type: ignore[dict-item]
    assert init.whole.startswith("static initialiser")
    assert change(PARTS).whole == "its host code differs outside its functions and data"  # host differs, no part
    unseen = _compare(_object(_edited(unseen=["_Z1gv.cold", "_Z1gv"])), _object(PARTS, host="h2"))[0].unseen
    assert unseen == frozenset({"_Z1gv"})  # no copy of g seen
    uncovered = _compare(_object({k: v for k, v in PARTS.items() if k != "unseen"}), _object(PARTS, host="h2"))
    assert uncovered[0].unseen is None  # the base was built without host coverage


def test_an_object_in_one_build_or_without_parts_is_whole() -> None:
    assert _compare(None, _object(PARTS))[0].whole == "the object is in the change only"
    assert _compare(_object(PARTS), None)[0].whole == "the object is in the base only"
    assert "not split" in _compare(_object(None), _object(PARTS, host="h2"))[0].whole
    assert "not split" in _compare(_object(PARTS), _object(None, host="h2"))[0].whole


def test_one_tests_records_from_two_files_list_host_functions_only_if_both_do(tmp_path: Path) -> None:
    def write(name: str, ran: dict[str, list[str]] | None) -> Path:
        record: dict[str, object] = {"test": "t::x", "kernels": [], "complete": True, "commit": COMMIT}
        if ran is not None:
            record["host_functions"] = ran
        (tmp_path / name).write_text(json.dumps(record) + "\n")
        return tmp_path / name

    a, b = write("a.jsonl", {"libops.so": ["_Z1fv"]}), write("b.jsonl", {"libops.so": ["_Z1gv"], "libx.so": []})
    assert read([a, b])[0].host_functions == {"libops.so": frozenset({"_Z1fv", "_Z1gv"}), "libx.so": frozenset()}
    assert read([a, write("c.jsonl", None)])[0].host_functions is None


def test_a_process_that_could_not_say_leaves_its_tests_without_host_functions(tmp_path: Path) -> None:
    from kernel_symbol_map.recorder import parts

    def part(token: str, scope: str, host: object) -> None:
        (tmp_path / f"{token}.json").write_text(json.dumps({
            "pid": 1, "token": token, "scope": scope, "complete": True, "reason": "", "kernels": {},
            "host_functions": host, **({"host_problem": "lost"} if host is None else {})}))

    part("root", "scope::", {"scope::": {"libops.so": ["_Z4initv"]}, "t1": {"libops.so": ["_Z1fv"]}, "t2": {}})
    part("kid", "t2", {"t2": {"libops.so": ["_Z1gv"]}})
    records = {r["test"]: r for r in parts.test_records(tmp_path, ["t1", "t2"], COMMIT)}
    assert records["t1"]["host_functions"] == {"libops.so": ["_Z1fv", "_Z4initv"]}
    assert records["t2"]["host_functions"] == {"libops.so": ["_Z1gv", "_Z4initv"]}
    part("kid", "t2", None)
    records = {r["test"]: r for r in parts.test_records(tmp_path, ["t1", "t2"], COMMIT)}
    assert "host_functions" in records["t1"] and "host_functions" not in records["t2"]


def test_the_recorder_says_when_it_cannot_name_what_ran(tmp_path: Path) -> None:
    """A runtime that lost addresses, an address at no function's start, a stripped library: the part says so,
    and lists no host functions."""
    import ctypes

    from kernel_symbol_map.recorder.hostcoverage import HostCoverage

    (tmp_path / "f.c").write_text("int f(int x) { return x * 3; }\n")
    for name, strip in (("libf.so", []), ("libstripped.so", ["-s"])):
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *strip, "f.c", "-o", name], cwd=tmp_path, check=True)
    f = ctypes.cast(ctypes.CDLL(str(tmp_path / "libf.so")).f, ctypes.c_void_p).value or 0
    stripped = ctypes.cast(ctypes.CDLL(str(tmp_path / "libstripped.so")).f, ctypes.c_void_p).value or 0
    take_type = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.POINTER(ctypes.c_size_t), ctypes.c_long)
    for returns, addresses, problem in ((-1, [], "lost functions"), (1, [f + 1], "no function of libf.so starts"),
                                        (1, [stripped], "no symbol table (stripped")):
        def take(out: object, capacity: int, addresses: list[int] = addresses, returns: int = returns) -> int:
            for i, a in enumerate(addresses):
                out[i] = a  # type: ignore[index]
            return returns

        coverage = HostCoverage("scope::")
        coverage._find_runtimes = lambda: False  # type: ignore[method-assign]
        coverage._runtimes = {1: (take_type(take), "libfake.so")}  # type: ignore[dict-item]
        coverage._buffer = (ctypes.c_size_t * 4)()
        coverage.take("t1")
        part = coverage.part()
        assert part["host_functions"] is None and problem in str(part["host_problem"]), part
    coverage = HostCoverage("scope::")  # and where it can: the function at the address
    coverage._find_runtimes = lambda: False  # type: ignore[method-assign]
    coverage._runtimes = {1: (take_type(lambda out, _n: [out.__setitem__(0, f), 1][1]), "libf.so")}  # type: ignore[dict-item]
    coverage._buffer = (ctypes.c_size_t * 4)()
    coverage.take("t1")
    assert coverage.part() == {"host_functions": {"t1": {"libf.so": ["f"]}}}
