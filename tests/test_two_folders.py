"""Two clean builds of one commit, in two folders, as two CI runners build it: output mode sees no change.

tests/projects/twofolders is built clean twice, at two paths of different
lengths, with what a release build of an extension uses (RelWithDebInfo's
``-g``, ``-lineinfo``, ``-ffunction-sections -fdata-sections``), and holds
what writes the folder into the code (a device ``assert``, a host check that
throws ``__FILE__``, a static initializer). The base map is the first folder's;
each change is made in the second folder's checkout and rebuilt there, and
``select --base-map`` compares the two maps, as CI compares a pull request's
build with main's. What must run comes from :mod:`kernel_oracle` and
:mod:`oracle`, comparing the second folder's objects before and after the
change: a truth with no folder in it, never read from a map.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kernel_oracle
import oracle
import projects
import pytest
import toolchains
from elftools.elf.elffile import ELFFile
from toolchains import require

from kernel_symbol_map.consumer.select.hostscope import stem
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import Recording
from kernel_symbol_map.consumer.select.rules import StaticRules
from kernel_symbol_map.consumer.select.selection import Options, select

BASE, CHANGE = "a" * 40, "c" * 40
SHORT, LONG = "a", "a-second-runner-with-a-much-longer-folder"
# Each kernel by the end of its mangled name: an anonymous namespace's name holds a hash of the file's path.
KERNELS = {"checked": "_Z7checkedPi", "plain": "_Z5plainPi", "message": "_Z7messagePi", "hidden": "6hiddenEPi",
           "applied": "5twiceEiEEEvPi", "biased": "_Z6biasedPi"}
# One edit each, made in the second folder's checkout (file, old, new); the others are undone first.
EDITS = {
    "comment": ("csrc/kernels.cu", "int registry_size()", "// a comment, and nothing else\nint registry_size()"),
    "body": ("csrc/kernels.cu", "x[threadIdx.x] *= 2;", "x[threadIdx.x] *= 3;"),
    "assert": ("csrc/kernels.cu", '"x must not be negative"', '"x must be zero or more"'),
    "host": ("csrc/kernels.cu", '"x is null"', '"x is missing"'),
    "hidden": ("csrc/kernels.cu", "x[threadIdx.x] -= 1;", "x[threadIdx.x] -= 2;"),
    "internal": ("csrc/kernels.cu", "return 2 * v;", "return 3 * v;"),
    "launcher": ("csrc/launcher.cpp", "n must be positive", "n must be one or more"),
    "version": ("csrc/version.cpp", '"1.0.0"', '"1.0.1"'),
    "jit": ("csrc/jit_config.h", "#define OPS_UNROLL 4", "#define OPS_UNROLL 8"),  # the run-time compile's only
}


@dataclass
class Builds:
    maps: dict[str, Path] = field(default_factory=dict)  # "short", "long" (both base), and each edit's
    names: dict[str, str] = field(default_factory=dict)  # KERNELS as the base's build (the short folder) names them
    truth: dict[str, kernel_oracle.KernelDifference] = field(default_factory=dict)  # each edit's, from oracles
    hosts: dict[str, list[str]] = field(default_factory=dict)  # each edit's objects whose host code changed


def _objects(build: Path) -> dict[str, Path]:
    return {p.relative_to(build).as_posix(): p for p in sorted(build.rglob("*.o"))
            if p.relative_to(build).as_posix().startswith("CMakeFiles/")}


def _map(build: Path, out: Path, commit: str) -> Path:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "build", "--build-dir", str(build), "--out",
                           str(out), "--commit", commit], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    require(toolchains.nvcc(), "nvcc")
    cmake = projects.cmakes()[-1]
    where = tmp_path_factory.mktemp("two")
    found = Builds()
    trees = {label: projects.configure_and_build("twofolders", where / label, cmake, "Ninja",
                                                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo")
             for label in (SHORT, LONG)}
    found.maps["short"] = _map(trees[SHORT].build, where / "short.json.gz", BASE)
    found.maps["long"] = _map(trees[LONG].build, where / "long.json.gz", CHANGE)
    symbols = [s for o in _load(found.maps["short"])["objects"] for s in o["symbols"]]
    found.names = {k: next(s for s in symbols if s.endswith(v)) for k, v in KERNELS.items()}
    assert "_GLOBAL__N__" in found.names["hidden"] and "_INTERNAL_" in found.names["applied"]
    tree = trees[LONG]
    before = kernel_oracle.snapshot_all(_objects(tree.build))
    pristine = {f: (tree.source / f).read_text() for f, _, _ in EDITS.values()}
    for name, (file, old, new) in EDITS.items():
        for f, text in pristine.items():
            (tree.source / f).write_text(text)
        text = pristine[file]
        assert old in text, (file, old)
        (tree.source / file).write_text(text.replace(old, new))
        tree.run_build()
        found.maps[name] = _map(tree.build, where / f"{name}.json.gz", CHANGE)
        after = kernel_oracle.snapshot_all(_objects(tree.build))
        found.truth[name] = kernel_oracle.compare(before, after)
        found.hosts[name] = [o for o in sorted(before) if before[o].host != after[o].host]
    return found


def _load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _names(obj: Path) -> bytes:
    """The names of an object's host symbols."""
    with obj.open("rb") as f:
        elf = ELFFile(f)
        return b"\0".join(s.name.encode() for s in elf.get_section_by_name(".symtab").iter_symbols())


def _digests(path: Path) -> dict[str, Any]:
    return {o["source"]: o.get("digests") for o in _load(path)["objects"]}


SYSTEM = {"python3.11", "libc.so.6", "libstdc++.so.6", "libcudart.so.13", "libtorch_cpu.so"}
# What each test launched, and the files its processes had loaded (the recorder's "libraries").
LOADED = {
    "test_checked": ({"checked"}, {"libops.so"}),
    "test_plain": ({"plain"}, {"libops.so"}),
    "test_message": ({"message"}, {"libops.so"}),
    "test_launcher": ({"checked"}, {"liblaunchers.so", "libops.so"}),  # run_checked, then ops' kernel
    "test_registry": (set(), {"libops.so"}),  # host code of ops only: registry_size()
    "test_hidden": ({"hidden"}, {"libops.so"}),
    "test_applied": ({"applied"}, {"libops.so"}),
    "test_biased": ({"biased"}, {"libops.so"}),
    "test_version": (set(), {"libinfo.so.1"}),  # by its SONAME
}


def _tests(builds: Builds, libraries: bool = True, rename: dict[str, str] | None = None) -> list[Recording]:
    """Every test of LOADED, as the base's build names its kernels; without ``libraries``, recorded as before
    they were (the kernels-launched rule)."""
    rename = rename or {}
    return [Recording(test, frozenset(builds.names[k] for k in kernels), True, BASE, "rec",
                      libraries=frozenset({rename.get(n, n) for n in files} | SYSTEM) if libraries else None)
            for test, (kernels, files) in LOADED.items()]


def _selection(builds: Builds, change: str, changed: list[str], tests: list[Recording] | None = None,
               **options: Any) -> Any:
    return select(KernelMap(_load(builds.maps[change])), tests or _tests(builds), changed, options=Options(**options),
                  base=[KernelMap(_load(builds.maps["short"]))])


def _ran(builds: Builds, change: str, changed: list[str], tests: list[Recording] | None = None,
         **options: Any) -> set[str]:
    s = _selection(builds, change, changed, tests, **options)
    assert s.mode == "output" and not s.fallback, (s.fallback, s.fallback_why)
    return set(s.to_run)


def test_two_clean_builds_in_two_folders_have_equal_digests(builds: Builds) -> None:
    short, long = _load(builds.maps["short"]), _load(builds.maps["long"])
    assert [o["source"] for o in short["objects"]] == [o["source"] for o in long["objects"]]
    assert _digests(builds.maps["short"]) == _digests(builds.maps["long"])
    assert all(d and d.get("host") for d in _digests(builds.maps["short"]).values())
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "diff", "--json", str(builds.maps["short"]),
                           str(builds.maps["long"])], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["changed"] == [] and report["added"] == [] and report["removed"] == []


def test_what_the_folders_wrote_is_in_the_objects(builds: Builds) -> None:
    """The noise this checks is there: each object spells its folder, in code and in debug information,
    and nvcc names the anonymous namespace after it."""
    long_names = {s for o in _load(builds.maps["long"])["objects"] for s in o["symbols"]}
    assert builds.names["hidden"] not in long_names and builds.names["applied"] not in long_names
    for label in ("short", "long"):
        build = builds.maps[label].parent / (SHORT if label == "short" else LONG) / "build"
        source = build.parent / "src"
        data = (build / "CMakeFiles/ops.dir/csrc/kernels.cu.o").read_bytes()
        assert str(source).encode() in data
        assert b"_GLOBAL__sub_I_tmpxft_" in data
        biased = build / "CMakeFiles/ops.dir/csrc/biased.cu.o"
        assert b"_INTERNAL_" in biased.read_bytes() and b"_INTERNAL_" not in _names(biased)


@pytest.mark.parametrize("change,expected", [
    ("comment", set()),
    ("body", {"test_plain"}),
    ("hidden", {"test_hidden"}),  # named after another folder in each build: matched all the same
    ("internal", {"test_applied"}),  # so is a kernel templated on a file-static function
    ("assert", {"test_checked", "test_message", "test_launcher"}),  # checked and message read the bank of
    # the addresses of the assert's strings
])
def test_a_kernel_edit_runs_what_its_rebuild_changed(builds: Builds, change: str, expected: set[str]) -> None:
    truth = builds.truth[change]
    must = {t.test for t in _tests(builds) if t.kernels & truth.kernels_changed}
    assert must <= expected
    ran = _ran(builds, change, ["csrc/kernels.cu"])
    assert must <= ran, f"{change}: skipped {must - ran}, which its rebuild changed"
    assert ran == expected
    assert builds.hosts[change] == []  # a kernel's edit is device code only


def test_a_host_edit_changes_host_code_only(builds: Builds) -> None:
    assert builds.truth["host"].kernels_changed == set()
    assert builds.hosts["host"] == ["CMakeFiles/ops.dir/csrc/kernels.cu.o"]
    new, base = _digests(builds.maps["host"]), _digests(builds.maps["short"])
    assert new["csrc/kernels.cu"]["host"] != base["csrc/kernels.cu"]["host"]
    assert new["csrc/kernels.cu"]["code"] == base["csrc/kernels.cu"]["code"]


def test_the_cli_spells_the_host_scopes_as_the_consumer_does() -> None:
    from kernel_symbol_map.cli.select import HOST_SCOPES
    from kernel_symbol_map.consumer.select.hostscope import SCOPES

    assert HOST_SCOPES == SCOPES


def test_the_map_knows_which_files_each_target_went_into(builds: Builds) -> None:
    artefacts = _load(builds.maps["short"])["artefacts"]
    assert artefacts["ops"] == ["libops.so"] and artefacts["launchers"] == ["liblaunchers.so"]
    assert artefacts["info"] == ["libinfo.so"]  # the real file is libinfo.so.1.0.0, loaded as libinfo.so.1
    assert stem("libinfo.so.1") == stem("libinfo.so.1.0.0") == "libinfo.so" != stem("libinfo.so1")


def test_a_host_edit_in_a_launcher_runs_the_tests_that_loaded_it(builds: Builds) -> None:
    """launcher.cpp has no kernels; test_launcher called it and launched ops' kernel: it runs, no flag needed."""
    assert builds.hosts["launcher"] == ["CMakeFiles/launchers.dir/csrc/launcher.cpp.o"]
    s = _selection(builds, "launcher", ["csrc/launcher.cpp"])
    assert set(s.to_run) == {"test_launcher"}
    why = next(d for d in s.decisions if d.test == "test_launcher")
    assert why.reason == "loaded" and "liblaunchers.so" in why.why, why


def test_a_version_edit_runs_the_tests_that_loaded_its_library_by_its_soname(builds: Builds) -> None:
    assert _ran(builds, "version", ["csrc/version.cpp"]) == {"test_version"}


def test_a_host_edit_in_a_kernel_file_runs_every_test_that_loaded_its_library(builds: Builds) -> None:
    loaded = {t for t, (_, files) in LOADED.items() if "libops.so" in files}
    assert _ran(builds, "host", ["csrc/kernels.cu"]) == loaded
    # The narrower rule, asked for: only the tests that launched its kernels (test_registry's limit; test_biased
    # launched biased.cu's).
    assert _ran(builds, "host", ["csrc/kernels.cu"], host_scope="kernels") == loaded - {"test_registry", "test_biased"}


def test_recordings_without_libraries_keep_the_kernels_rule(builds: Builds) -> None:
    old = _tests(builds, libraries=False)
    assert _ran(builds, "host", ["csrc/kernels.cu"], old) == {"test_checked", "test_plain", "test_message",
                                                               "test_launcher", "test_hidden", "test_applied"}
    assert _ran(builds, "launcher", ["csrc/launcher.cpp"], old) == set(LOADED)  # no kernels: every test


def test_a_library_no_recording_lists_runs_every_test_and_says_why(builds: Builds) -> None:
    """libinfo installed as another name: no recording lists a file the map knows, so every test runs."""
    s = _selection(builds, "version", ["csrc/version.cpp"], _tests(builds, rename={"libinfo.so.1": "_info.cpython.so"}))
    assert set(s.to_run) == set(LOADED) and s.fallback == "host-changed"
    assert "libinfo.so" in s.fallback_why and "another name" in s.fallback_why


def test_a_test_that_launched_a_librarys_kernels_under_another_name_runs_every_test(builds: Builds) -> None:
    """test_hidden loaded libops.so installed as another name; the others list libops.so. Its kernel is linked
    into libops.so alone, so it had loaded it under that name, and so may a test that launched no kernel of
    it (test_registry, calling its host code): every test runs, and says which test showed the copy."""
    tests = [dataclasses.replace(r, libraries=frozenset({"_ops.cpython.so"} | SYSTEM)) if r.test == "test_hidden"
             else r for r in _tests(builds)]
    s = _selection(builds, "host", ["csrc/kernels.cu"], tests)
    assert set(s.to_run) == set(LOADED) and s.fallback == "host-changed"
    assert "test_hidden launched kernels linked into libops.so" in s.fallback_why


def test_a_path_rule_decides_a_sources_host_change(builds: Builds) -> None:
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/version.cpp"], "tests": []}]})
    s = _selection(builds, "version", ["csrc/version.cpp"], rules=rules)
    assert s.to_run == [] and not s.fallback
    assert "rules" in s.verdicts["csrc/version.cpp"].why
    named = StaticRules.parse({"rules": [{"paths": ["csrc/version.cpp"], "tests": ["test_plain"]}]})
    s = _selection(builds, "version", ["csrc/version.cpp"], rules=named)
    assert s.to_run == ["test_plain"]
    assert next(d for d in s.decisions if d.test == "test_plain").reason == "rules"


def test_static_code_reaches_what_links_it(builds: Builds) -> None:
    """A static library's objects are in the shared library that links it: its host change runs its tests."""
    assert _load(builds.maps["short"])["artefacts"]["common"] == ["liblaunchers.so"]


def test_a_path_rule_decides_a_host_change_only_when_its_source_alone_changed(builds: Builds) -> None:
    """A header the object includes changed too: its host change is not the rule's to decide."""
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": []}]})
    assert _ran(builds, "host", ["csrc/kernels.cu"], rules=rules) == set()
    loaded = {t for t, (_, files) in LOADED.items() if "libops.so" in files}
    assert _ran(builds, "host", ["csrc/kernels.cu", "csrc/ops.h"], rules=rules) >= loaded


def test_a_header_only_the_run_time_compile_reads_is_decided_by_source(builds: Builds) -> None:
    """A change under ``#ifdef OPS_JIT``: the build emits the same, and the tests of the package's run-time
    compile of kernels.cu (which names its kernels as the build does) must run all the same."""
    assert builds.truth["jit"].kernels_changed == set() and builds.hosts["jit"] == []
    jit = Recording("test_jit", frozenset({builds.names["plain"]}), True, BASE, "rec",
                    libraries=frozenset(SYSTEM), jit_sources=frozenset({"csrc/kernels.cu"}))
    unseen = dataclasses.replace(jit, jit_sources=frozenset())  # as a recorder that did not see the compile
    assert _ran(builds, "jit", ["csrc/jit_config.h"], [*_tests(builds), unseen]) == set()  # the emitted alone
    includers = {"test_checked", "test_plain", "test_message", "test_launcher", "test_hidden", "test_applied"}
    # Recorded: kernels.cu was compiled at run time, and jit_config.h is its input.
    assert _ran(builds, "jit", ["csrc/jit_config.h"], [*_tests(builds), jit]) == includers | {"test_jit"}
    # Declared: jit-sources names it.
    assert _ran(builds, "jit", ["csrc/jit_config.h"], [*_tests(builds), unseen],
                jit_sources=("csrc/jit_*.h",)) == includers | {"test_jit"}
