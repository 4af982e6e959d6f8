"""``select --base-map``: output mode's decisions on maps with digests (issue 27), each rule on its own.

The maps are written here in the form ``build`` writes (mapformat.digests);
what real builds emit is checked in test_digests.py and against the per-kernel
oracle in test_selection_oracle.py.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map.consumer.select.emitted import Emitted
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import Recording
from kernel_symbol_map.consumer.select.rules import StaticRules
from kernel_symbol_map.consumer.select.selection import Options, select
from kernel_symbol_map.mapformat import digests as map_digests

BASE = "a" * 40
TOOLCHAIN = {"CUDA": "NVIDIA 13.0.88", "CXX": "GNU 12.2.0"}


def _object(source: str, symbols: list[str], deps: list[str], host: str, code: list[str], target: str = "ops",
            ) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": source, "target": target, "object": f"CMakeFiles/{target}.dir/{source}.o",
                             "device": bool(symbols), "symbols": symbols, "deps": sorted({source, *deps}),
                             "digests": {"covers": {"host": "digested", "kernels": len(symbols)}, "host": host}}
    if symbols:
        entry["archs"] = ["sm_80"]
        entry["digests"]["code"] = {"sm_80": code}
    return entry


def _map(objects: list[dict[str, Any]], commit: str = BASE, **extra: Any) -> dict[str, Any]:
    return {"version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": ["$BUILD"],
            "incomplete": False, "errors": [], "objects": objects, "stats": {}, "backend": "cuda",
            "digests": map_digests.SCHEME,
            "toolchain": dict(TOOLCHAIN), "configure_inputs": ["CMakeLists.txt"], **extra}


def base_map() -> dict[str, Any]:
    return _map([
        _object("csrc/many.cu", ["k0", "k1", "k2"], ["csrc/common.cuh"], "h-many", ["d0", "d1", "d2"]),
        _object("csrc/other.cu", ["o0"], ["csrc/common.cuh"], "h-other", ["e0"]),
        _object("csrc/bind.cpp", [], ["csrc/common.cuh"], "h-bind", [], target="bindings"),
    ])


def _tests() -> list[Recording]:
    return [Recording(f"test_{k}", frozenset({k}), True, BASE, "rec") for k in ("k0", "k1", "k2", "o0")] + \
        [Recording("test_host", frozenset(), True, BASE, "rec")]


def _select(new: dict[str, Any], changed: list[str], base: dict[str, Any] | None = None,
            tests: list[Recording] | None = None, **options: Any):
    """Output mode over ``tests`` (default :func:`_tests`); the change's build is of another commit (a pull
    request's), as in CI."""
    new = {**new, "commit": new["commit"] if new["commit"] != BASE else "c" * 40}
    return select(KernelMap(new), _tests() if tests is None else tests, changed, options=Options(**options),
                  base=[KernelMap(base or base_map())])


def _edit(doc: dict[str, Any], source: str, *, host: str | None = None, code: dict[int, str] | None = None) -> None:
    o = next(o for o in doc["objects"] if o["source"] == source)
    if host is not None:
        o["digests"]["host"] = host
    for i, d in (code or {}).items():
        o["digests"]["code"]["sm_80"][i] = d


def test_a_kernel_whose_code_changed_runs_its_tests_and_no_other() -> None:
    new = base_map()
    _edit(new, "csrc/many.cu", code={1: "d1-new"})
    s = _select(new, ["csrc/many.cu"])
    assert s.mode == "output" and s.fallback is None
    assert s.to_run == ["test_k1"]
    assert "device code changed (sm_80)" in next(d.why for d in s.decisions if d.test == "test_k1")
    assert s.emitted is not None and s.emitted.kernels == {"k1": "changed (sm_80)"}


def test_a_header_every_object_includes_runs_only_what_its_change_emitted() -> None:
    """Source mode runs everything here (the header reaches a host-only object); output mode asks the build."""
    new = base_map()
    _edit(new, "csrc/other.cu", code={0: "e0-new"})
    assert _select(new, ["csrc/common.cuh"]).to_run == ["test_o0"]
    source = select(KernelMap(base_map()), _tests(), ["csrc/common.cuh"])
    assert source.fallback == "host-file"


def test_nothing_emitted_differently_skips_every_recorded_test() -> None:
    s = _select(base_map(), ["csrc/many.cu"])  # a comment-only edit: the same code
    assert s.to_run == [] and s.mode == "output"


def test_changed_host_code_of_a_kernel_object_runs_its_kernels__tests() -> None:
    new = base_map()
    _edit(new, "csrc/many.cu", host="h-many-new")
    assert _select(new, ["csrc/many.cu"]).to_run == ["test_k0", "test_k1", "test_k2"]


def test_changed_host_code_of_an_object_without_kernels_runs_everything() -> None:
    new = base_map()
    _edit(new, "csrc/bind.cpp", host="h-bind-new")
    s = _select(new, ["csrc/bind.cpp"])
    assert s.fallback == "host-changed" and len(s.to_run) == len(s.decisions)
    assert "bind.cpp" in s.fallback_why


def test_whole_target_widens_a_host_change_to_its_targets_kernels() -> None:
    new = base_map()
    _edit(new, "csrc/other.cu", host="h-other-new")
    assert _select(new, ["csrc/other.cu"]).to_run == ["test_o0"]
    assert _select(new, ["csrc/other.cu"], whole_target=True).to_run == ["test_k0", "test_k1", "test_k2", "test_o0"]


def _kernels(o: dict[str, Any], digests: dict[str, str]) -> None:
    """The object's kernels become ``digests``' (kernel -> its sm_80 digest), as a build writes them."""
    o["symbols"], o["digests"]["code"]["sm_80"] = list(digests), list(digests.values())
    o["digests"]["covers"]["kernels"] = len(digests)


def test_kernels_that_appear_or_go_away_run_their__tests() -> None:
    new = base_map()
    _kernels(new["objects"][0], {"k0": "d0", "k1": "d1"})  # k2 went away
    s = _select(new, ["csrc/many.cu"])
    assert s.to_run == ["test_k2"]
    _kernels(new["objects"][1], {"o0": "e0", "o_new": "e9"})
    assert _select(new, ["csrc/other.cu"]).emitted.kernels == {"k2": "removed", "o_new": "added"}


def test_an_object_in_one_build_only_is_compared_as_added_and_removed() -> None:
    """A source renamed (other.cu -> other2.cu, the same code): the old object went away and a new one
    appeared. Their kernels' tests run, and both objects' host code counts as changed."""
    new = base_map()
    o = new["objects"][1]
    o["source"], o["object"], o["deps"] = "csrc/other2.cu", "CMakeFiles/ops.dir/csrc/other2.cu.o", \
        ["csrc/common.cuh", "csrc/other2.cu"]
    s = _select(new, ["csrc/other.cu", "csrc/other2.cu"])
    assert s.to_run == ["test_o0"], s.to_run
    assert s.emitted is not None and s.emitted.kernels == {"o0": "removed"}  # in its first object's order
    assert sorted((h.source, h.how) for h in s.emitted.hosts) == [("csrc/other.cu", "removed"),
                                                                  ("csrc/other2.cu", "added")]


def test_a_kernel_changed_only_in_the_device_link_image_runs_its_tests() -> None:
    """-rdc: the compiling object names its callee unresolved; the device-link object holds the call."""
    def with_link(digest: str) -> dict[str, Any]:
        doc = base_map()
        link = _object("$BUILD/CMakeFiles/ops.dir/cmake_device_link.o", ["k0", "k1", "k2", "o0"], [], "h-link",
                       ["l0", "l1", "l2", "l3"])
        link["digests"]["code"]["sm_80"][0] = digest
        link["device_link"] = True
        doc["objects"].append(link)
        return doc
    s = _select(with_link("l0-new"), ["csrc/many.cu"], base=with_link("l0"))
    assert s.to_run == ["test_k0"]


def test_digests_are_compared_object_by_object() -> None:
    """One template kernel in two objects whose codes swap (a per-file define moved): its set of digests is
    the same, but each object's code changed."""
    def two(first: str, second: str) -> dict[str, Any]:
        return _map([_object("csrc/a.cu", ["tk"], [], "h-a", [first]), _object("csrc/b.cu", ["tk"], [], "h-b", [second])])
    recs = [Recording("test_tk", frozenset({"tk"}), True, BASE, "rec")]
    s = select(KernelMap({**two("slow", "fast"), "commit": "c" * 40}), recs, ["csrc/a.cu", "csrc/b.cu"],
               base=[KernelMap(two("fast", "slow"))])
    assert s.to_run == ["test_tk"] and s.emitted.kernels == {"tk": "changed (sm_80)"}


def test_changed_relocatable_code_reaches_the_kernels_linked_with_it() -> None:
    """-rdc / -fgpu-rdc: a device function's object (no kernels) changed; the kernels of relocatable code in
    its target and the targets linked to it may call it, those elsewhere or of final code may not."""
    def rdc(helper: str) -> dict[str, Any]:
        objects = [_object("csrc/helper.cu", [], [], "h-helper", [], target="dev"),
                   _object("csrc/caller.cu", ["k0"], [], "h-caller", ["d0"], target="dev"),
                   _object("csrc/user.cu", ["k1"], [], "h-user", ["d1"], target="app"),
                   _object("csrc/far.cu", ["k2"], [], "h-far", ["d2"], target="far"),
                   _object("csrc/final.cu", ["o0"], [], "h-final", ["e0"], target="dev")]
        for o, r in zip(objects, [helper, "r-caller", "r-user", "r-far", ""]):
            if r:
                o["digests"]["relocatable"] = {"sm_80": r}
        return _map(objects, target_links={"app": ["dev"]})
    s = _select(rdc("r-helper-2"), ["csrc/helper.cu"], base=rdc("r-helper-1"))
    assert s.fallback is None and s.to_run == ["test_k0", "test_k1"]
    assert "relocatable device code of dev differs" in next(d.why for d in s.decisions if d.test == "test_k1")
    assert _select(rdc("r-helper-1"), ["csrc/helper.cu"], base=rdc("r-helper-1")).to_run == []


def test_changed_relocatable_code_reaches_a_linked_kernel_as_the_recordings_build_named_it() -> None:
    """The two builds ran in two folders: nvcc's hash of the path differs in the name of caller's kernel (an
    anonymous namespace's), and the recordings name it as the base build did."""
    def named(unit: str) -> str:
        return f"_ZN12_GLOBAL__N__{unit}_9_caller_cu_2k0Ev"

    def rdc(helper: str, unit: str) -> dict[str, Any]:
        objects = [_object("csrc/helper.cu", [], [], "h-helper", [], target="dev"),
                   _object("csrc/caller.cu", [named(unit), "_Z2k9v"], [], "h-caller", ["d0", "d9"], target="dev")]
        for o, r in zip(objects, [helper, "r-caller"]):
            o["digests"]["relocatable"] = {"sm_80": r}
        return _map(objects)
    tests = [Recording("test_k0", frozenset({named("1a2b3c4d")}), True, BASE, "rec"),
             Recording("test_k9", frozenset({"_Z2k9v"}), True, BASE, "rec")]
    s = select(KernelMap({**rdc("r-helper-2", "5e6f7a8b"), "commit": "c" * 40}), tests, ["csrc/helper.cu"],
               options=Options(), base=[KernelMap(rdc("r-helper-1", "1a2b3c4d"))])
    assert s.fallback is None and s.to_run == ["test_k0", "test_k9"], s.decisions


def test_relocatable_code_that_appears_reaches_the_kernels_linked_with_it() -> None:
    """An -rdc object new in the change's build (a file added to the target, with a kernel of its own): its
    device functions may be linked into the target's relocatable kernels and those of targets linked to it."""
    def rdc(added: bool) -> dict[str, Any]:
        objects = [_object("csrc/caller.cu", ["k0"], [], "h-caller", ["d0"], target="dev"),
                   _object("csrc/user.cu", ["k1"], [], "h-user", ["d1"], target="app"),
                   _object("csrc/far.cu", ["k2"], [], "h-far", ["d2"], target="far")]
        if added:
            objects.append(_object("csrc/added.cu", ["n0"], [], "h-added", ["n0d"], target="dev"))
        for o in objects:
            o["digests"]["relocatable"] = {"sm_80": "r-" + o["source"]}
        return _map(objects, target_links={"app": ["dev"]})
    s = _select(rdc(True), ["csrc/added.cu"], base=rdc(False))
    assert s.fallback is None and s.to_run == ["test_k0", "test_k1", "test_o0"], (s.to_run, s.fallback_why)
    assert "relocatable device code of dev differs" in next(d.why for d in s.decisions if d.test == "test_k1")


def test_changed_relocatable_code_reaches_the_kernels_of_the_targets_it_links() -> None:
    """The other way along a link: app's relocatable code changed, and app links dev, whose relocatable
    kernels its device link may now resolve differently (o0 is a kernel no map knows: it runs)."""
    def rdc(user: str) -> dict[str, Any]:
        objects = [_object("csrc/caller.cu", ["k0"], [], "h-caller", ["d0"], target="dev"),
                   _object("csrc/user.cu", ["k1"], [], "h-user", ["d1"], target="app"),
                   _object("csrc/far.cu", ["k2"], [], "h-far", ["d2"], target="far")]
        for o, r in zip(objects, ["r-caller", user, "r-far"]):
            o["digests"]["relocatable"] = {"sm_80": r}
        return _map(objects, target_links={"app": ["dev"]})
    s = _select(rdc("r-user-2"), ["csrc/user.cu"], base=rdc("r-user-1"))
    assert s.fallback is None and s.to_run == ["test_k0", "test_k1", "test_o0"], (s.to_run, s.fallback_why)
    assert "relocatable device code of app differs" in next(d.why for d in s.decisions if d.test == "test_k0")


def test_a_kernel_named_by_its_folder_that_did_not_change_is_not_taken_for_added_and_removed() -> None:
    """Two builds in two folders: nvcc's hash of the path differs in an anonymous namespace's kernel name, and
    its code is the same; only the kernel whose code changed runs its tests."""
    def named(unit: str) -> str:
        return f"_ZN12_GLOBAL__N__{unit}_8_many_cu_2k0Ev"

    def build(unit: str, k1: str) -> dict[str, Any]:
        return _map([_object("csrc/many.cu", [named(unit), "k1"], [], "h-many", ["d0", k1])])
    tests = [Recording("test_k0", frozenset({named("1a2b3c4d")}), True, BASE, "rec"),
             Recording("test_k1", frozenset({"k1"}), True, BASE, "rec")]
    s = _select(build("5e6f7a8b", "d1-new"), ["csrc/many.cu"], base=build("1a2b3c4d", "d1"), tests=tests)
    assert s.mode == "output" and s.to_run == ["test_k1"], (s.to_run, s.emitted.kernels if s.emitted else None)


def test_what_the_comparison_found_is_summed_up_by_kind() -> None:
    found = Emitted({"a": "changed (sm_80)", "b": "added", "c": "removed", "d": "added"}, compared=9,
                    linked={"e": "relocatable code of dev differs"})
    assert found.summary() == ("4 of 9 kernels' device code differs (1 changed, 2 added, 1 removed); 0 objects' "
                               "host code differs; 1 kernels linked with relocatable code that differs")
    assert Emitted(compared=3).summary() == "0 of 3 kernels' device code differs (none); 0 objects' host code differs"


def test_the_base_map_passed_as_the_changes_map_is_no_evidence() -> None:
    s = select(KernelMap(base_map()), _tests(), ["csrc/many.cu"], base=[KernelMap(base_map())])
    assert s.fallback == "commit-mismatch" and s.mode == "output" and "is the base map" in s.fallback_why
    # shards: one of the base's passed again among the change's is enough
    shards = [_map([o]) for o in base_map()["objects"]]
    s = select([KernelMap(d) for d in shards], _tests(), ["csrc/many.cu"], base=[KernelMap(d) for d in shards])
    assert s.fallback == "commit-mismatch", (s.fallback, s.to_run)
    # an empty change set the user says is real: two identical builds are what it should give
    s = select(KernelMap(base_map()), _tests(), [], options=Options(allow_empty=True), base=[KernelMap(base_map())])
    assert s.fallback is None and s.mode == "output" and s.to_run == [], (s.fallback, s.fallback_why)


def test_cli_the_changes_map_must_be_of_the_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "csrc").mkdir(parents=True)
    (repo / "csrc" / "many.cu").write_text("// base\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    (repo / "csrc" / "many.cu").write_text("// changed\n")
    base = {**base_map(), "commit": head}
    rec = tmp_path / "rec.jsonl"
    rec.write_text("".join(json.dumps({"test": r.test, "kernels": sorted(r.kernels), "complete": True,
                                       "commit": head}) + "\n" for r in _tests()))

    def run(new_commit: str) -> dict[str, Any]:
        new = {**base_map(), "commit": new_commit, "generated_at": "later"}
        _edit(new, "csrc/many.cu", code={0: "d0-new"})
        proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "select", "--recordings", str(rec),
                               "--map", str(_write(tmp_path / "new.json.gz", new)), "--base-map",
                               str(_write(tmp_path / "base.json.gz", base)), "--diff", head, "--json"],
                              capture_output=True, text=True, check=False, cwd=repo)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)
    assert run(head)["run"] == ["test_k0"]  # the working tree's build: of the commit checked out
    stale = run("d" * 40)
    assert stale["fallback"] == "commit-mismatch" and "not this checkout's build" in stale["fallback_why"]


def test_a_file_no_object_compiles_decides_as_in_source_mode() -> None:
    new = base_map()
    assert _select(new, ["tests/test_ops.py"]).fallback == "file-not-in-map"
    assert _select(new, ["CMakeLists.txt"]).fallback == "configure-input"
    new["objects"].append(_object("csrc/added.cu", ["n0"], [], "h-added", ["n0d"]))
    s = _select(new, ["csrc/added.cu", "csrc/many.cu"])
    assert s.to_run == []  # known to the change's build: its output decides
    assert [(f["path"], f["status"]) for f in s.to_json()["files"]] == [("csrc/added.cu", "kernels"),
                                                                         ("csrc/many.cu", "kernels")]


def test_a_base_map_without_digests_falls_back_to_source_mode_and_says_so() -> None:
    base = base_map()
    del base["digests"]
    new = base_map()
    _edit(new, "csrc/many.cu", code={1: "d1-new"})
    s = select(KernelMap({**new, "commit": "c" * 40}), _tests(), ["csrc/many.cu"],
               base=[KernelMap(base, where="maps/base.json")])
    assert s.mode == "source" and "the base map maps/base.json holds no digests" in s.mode_why, s.mode_why
    assert s.to_run == ["test_k0", "test_k1", "test_k2"]  # what source mode reaches from many.cu


def test_an_object_without_digests_falls_back_to_source_mode() -> None:
    new = base_map()
    del new["objects"][1]["digests"]
    s = _select(new, ["csrc/other.cu"])
    assert s.mode == "source" and "csrc/other.cu" in s.mode_why and "could not be digested" in s.mode_why
    new = base_map()
    new["objects"][0]["digests"]["code"]["sm_80"][2] = ""  # a kernel no architecture digested
    assert _select(new, ["csrc/other.cu"]).mode == "source"


def test_a_map_of_another_scheme_is_never_compared_even_when_its_records_read_alike() -> None:
    """A newer writer's map (scheme SCHEME + 1): its records may look like these, but their digests may mean
    something else, so sources decide, and the note names the scheme."""
    newer = base_map()
    newer["digests"] = map_digests.SCHEME + 1
    _edit(newer, "csrc/many.cu", code={1: "d1-new"})
    for new, base in ((newer, None), (base_map(), newer)):
        s = _select(new, ["csrc/many.cu"], base=base)
        assert s.mode == "source" and f"scheme {map_digests.SCHEME + 1}" in s.mode_why, s.mode_why


def test_another_toolchain_runs_everything_and_says_why() -> None:
    new = base_map()
    new["toolchain"]["CUDA"] = "NVIDIA 12.8.93"
    s = _select(new, ["csrc/many.cu"])
    assert s.fallback == "toolchain-changed" and len(s.to_run) == len(s.decisions)
    assert "12.8.93" in s.summary() and "13.0.88" in s.summary() and "CXX" not in s.summary()


@pytest.mark.parametrize("side", ["base", "change's"])
def test_a_map_that_names_no_toolchain_is_compared_by_its_digests(side: str) -> None:
    """A map written without its compilers (an older writer, a hand-made map) cannot say they changed."""
    base, new = base_map(), base_map()
    del (base if side == "base" else new)["toolchain"]
    _edit(new, "csrc/many.cu", code={1: "d1-new"})
    s = _select(new, ["csrc/many.cu"], base=base)
    assert s.mode == "output" and s.fallback is None and s.to_run == ["test_k1"], (s.mode_why, s.fallback_why)


def test_the_base_map_must_be_of_the_recordings_commit_and_the_new_one_complete() -> None:
    new = base_map()
    other = base_map()
    other["commit"] = "b" * 40
    assert _select(new, ["csrc/many.cu"], base=other).fallback == "commit-mismatch"
    broken = base_map()
    broken.update(incomplete=True, objects=[], reason="2 objects unreadable")
    s = _select(broken, ["csrc/many.cu"])
    assert s.fallback == "map-incomplete" and "the change's" in s.fallback_why
    new["commit"] = "c" * 40  # the change's own build: any commit, even the working tree's
    assert _select(new, ["csrc/many.cu"]).fallback is None


def test_an_output_mode_fallback_before_any_comparison_says_so() -> None:
    """Output mode was asked for: a fallback on the evidence is output mode's answer, with why."""
    stale = base_map()
    stale.update(incomplete=True, objects=[], reason="2 objects are older than their sources")
    s = _select(base_map(), ["csrc/many.cu"], base=stale)
    assert s.mode == "output" and s.fallback == "map-incomplete" and "older than" in s.summary()
    s = _select(base_map(), [])
    assert s.mode == "output" and s.fallback == "no-changes"
    base = base_map()
    del base["digests"]
    s = _select(base_map(), ["tests/test_ops.py"], base=base)  # sources decide, and fall back
    assert s.mode == "source" and s.fallback == "file-not-in-map" and "no digests" in s.mode_why


def test_a_recorded_kernel_no_base_map_knows_runs() -> None:
    recs = [*_tests(), Recording("test_foreign", frozenset({"torch_kernel"}), True, BASE, "rec")]
    s = select(KernelMap({**base_map(), "commit": "c" * 40}), recs, ["csrc/many.cu"], base=[KernelMap(base_map())])
    assert s.to_run == ["test_foreign"]


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    rec = tmp_path / "rec.jsonl"
    rec.write_text("".join(json.dumps({"test": r.test, "kernels": sorted(r.kernels), "complete": True,
                                       "commit": BASE}) + "\n" for r in _tests()))
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", "select", "--recordings", str(rec), *args],
                          capture_output=True, text=True, check=False)


def test_cli_output_mode_and_its_json(tmp_path: Path) -> None:
    new = base_map()
    _edit(new, "csrc/many.cu", code={0: "d0-new"})
    proc = _cli(tmp_path, "--map", str(_write(tmp_path / "new.json.gz", new)), "--base-map",
                str(_write(tmp_path / "base.json.gz", base_map())), "--changed", "csrc/many.cu", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["mode"] == "output" and result["run"] == ["test_k0"]
    assert result["emitted"]["kernels"] == {"k0": "changed (sm_80)"}


@pytest.mark.parametrize("problem", ["missing", "corrupt", "bad digests"])
def test_cli_a_bad_base_map_is_one_line_and_runs_everything(tmp_path: Path, problem: str) -> None:
    base = tmp_path / "base.json.gz"
    if problem == "corrupt":
        base.write_bytes(b"not a map")
    elif problem == "bad digests":
        doc = copy.deepcopy(base_map())
        doc["objects"][0]["digests"]["code"]["sm_80"] = ["d0"]  # one digest for three symbols
        _write(base, doc)
    proc = _cli(tmp_path, "--map", str(_write(tmp_path / "new.json.gz", base_map())), "--base-map", str(base),
                "--changed", "csrc/many.cu", "--json")
    assert "Traceback" not in proc.stderr and proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    if problem == "bad digests":  # the map's schema holds, its digests do not match its symbols: sources decide
        assert result["mode"] == "source" and "malformed" in result["mode_why"]
        assert result["run"] == ["test_k0", "test_k1", "test_k2"]
        return
    assert result["skip"] == [] and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_merge_keeps_digests_only_when_every_shard_has_them_and_unites_toolchains() -> None:
    from kernel_symbol_map import mapformat

    a, b = base_map(), base_map()
    b["objects"] = [_object("csrc/shard.cu", ["s0"], [], "h-shard", ["s0d"])]
    assert mapformat.merge([a, b], ["a", "b"])["digests"] == map_digests.SCHEME
    b["toolchain"] = {"CUDA": "NVIDIA 12.8.93"}
    assert mapformat.merge([a, b], ["a", "b"])["toolchain"]["CUDA"] == "NVIDIA 12.8.93, NVIDIA 13.0.88"
    del b["digests"]
    merged = mapformat.merge([a, b], ["a", "b"])
    assert "digests" not in merged
    s = select(KernelMap(base_map()), _tests(), ["csrc/many.cu"], base=[KernelMap(merged)])
    assert s.mode == "source" and "no digests" in s.mode_why


def test_an_object_with_code_and_empty_digests_never_reads_as_unchanged(tmp_path: Path) -> None:
    """A kernel-less object whose digests are ``{}`` in both maps: ``{}`` says nothing of what it covers, so
    the map breaks the format's rules and holds no evidence: every test runs, and the CLI says why."""
    base, new = base_map(), base_map()
    for doc in (base, new):
        next(o for o in doc["objects"] if o["source"] == "csrc/bind.cpp")["digests"] = {}
    s = _select(new, ["csrc/bind.cpp"], base=base)
    assert sorted(s.to_run) == sorted(t.test for t in _tests()) and s.fallback == "map-incomplete"
    assert "objects[2].digests: an object with code must say what its digests cover" in s.fallback_why
    proc = _cli(tmp_path, "--map", str(_write(tmp_path / "new.json.gz", new)), "--base-map",
                str(_write(tmp_path / "base.json.gz", base)), "--changed", "csrc/bind.cpp", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout)["skip"] == [] and "must say what its digests cover" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("record", "why"), [
    ({"covers": {"kernels": 0}}, "has host code that was not digested"),  # an archive's, say
    ({"covers": {"host": "digested", "kernels": 0}}, "holds no host digest"),
    ({"covers": {"host": "precompiled header", "kernels": 0}}, "says it is a precompiled header"),
    ({"covers": {"host": "device image", "kernels": 0}}, "holds no device code"),
    ({"host": "h-bind"}, "do not say what they cover"),  # a writer that does not say
])
def test_digests_that_do_not_cover_an_object_decide_by_sources(record: dict[str, Any], why: str) -> None:
    """A record that leaves out the object's host code, or claims what the object contradicts, is never
    "unchanged": source mode decides, and says why."""
    base, new = base_map(), base_map()
    for doc in (base, new):
        next(o for o in doc["objects"] if o["source"] == "csrc/bind.cpp")["digests"] = copy.deepcopy(record)
    s = _select(new, ["csrc/bind.cpp"], base=base)
    assert s.mode == "source" and why in s.mode_why and "csrc/bind.cpp" in s.mode_why, s.mode_why
    assert sorted(s.to_run) == sorted(t.test for t in _tests())  # a host-only file, in source mode: every test


def test_a_record_must_cover_every_kernel_it_lists() -> None:
    """Digests of two of three kernels (the count says so, or a column leaves one out): sources decide."""
    new = base_map()
    new["objects"][0]["digests"]["covers"]["kernels"] = 2
    s = _select(new, ["csrc/many.cu"])
    assert s.mode == "source" and "cover 2 of its 3 kernels" in s.mode_why, s.mode_why
    new = base_map()
    new["objects"][0]["digests"]["code"]["sm_80"][2] = ""
    assert "has no digest of kernel k2" in _select(new, ["csrc/many.cu"]).mode_why


def test_precompiled_headers_and_device_images_need_no_host_digest() -> None:
    """A precompiled header has no code of its own (its code shows in the objects compiled with it); a
    raw cubin, fatbin or PTX file has no host code: neither keeps output mode from deciding."""
    pch = {"source": "csrc/pch.hxx", "target": "ops", "object": "CMakeFiles/ops.dir/cmake_pch.hxx.gch",
           "device": False, "symbols": [], "deps": ["csrc/pch.hxx"], "digests": map_digests.precompiled_header()}
    cubin = {"source": "csrc/raw.cu", "target": "cubins", "object": "CMakeFiles/cubins.dir/csrc/raw.cubin",
             "device": True, "symbols": ["r0"], "deps": ["csrc/raw.cu"], "archs": ["sm_80"],
             "digests": {"covers": {"host": "device image", "kernels": 1}, "code": {"sm_80": ["r0d"]}}}
    base, new = base_map(), base_map()
    for doc in (base, new):
        doc["objects"] += [copy.deepcopy(pch), copy.deepcopy(cubin)]
    _edit(new, "csrc/many.cu", code={1: "d1-new"})
    s = _select(new, ["csrc/many.cu"], base=base)
    assert s.mode == "output" and s.to_run == ["test_k1"], (s.mode_why, s.to_run)
    # a precompiled header only one build has is not an object added or removed: it has no code to compare
    base["objects"].remove(base["objects"][-2])
    s = _select(new, ["csrc/many.cu"], base=base)
    assert s.mode == "output" and s.to_run == ["test_k1"], (s.mode_why, s.to_run)
    # the device image's kernels are compared like any others
    new["objects"][-1]["digests"]["code"]["sm_80"] = ["r0d-new"]
    recs = [*_tests(), Recording("test_r0", frozenset({"r0"}), True, BASE, "rec")]
    s = select(KernelMap({**new, "commit": "c" * 40}), recs, ["csrc/raw.cu", "csrc/many.cu"],
               base=[KernelMap(base)])
    assert s.mode == "output" and s.to_run == ["test_k1", "test_r0"], (s.mode_why, s.to_run)


def test_a_configure_input_only_the_changes_build_reads_runs_everything() -> None:
    """The change adds a CMake include: no object's code differs, but what the configure now does may change what
    is linked or installed, which no digest compares."""
    new = base_map()
    new["configure_inputs"] = ["CMakeLists.txt", "cmake/kernels.cmake"]
    s = _select(new, ["cmake/kernels.cmake"])
    assert s.mode == "output" and s.fallback == "configure-input", s.fallback
    assert s.to_run == ["test_host", "test_k0", "test_k1", "test_k2", "test_o0"]


def test_a_file_the_builds_decide_keeps_the_rules_from_deciding_alone() -> None:
    """many.cu is compiled, and compiled alike; the rules decide only docs/a.md (no test). Evidence still
    decides: a test with an incomplete recording runs, as it does when only many.cu changes."""
    rules = StaticRules.parse({"rules": [{"paths": ["docs/**"], "tests": []}]})
    tests = [*_tests(), Recording("test_cut", frozenset(), False, BASE, "rec", why_incomplete="it timed out")]
    s = _select(base_map(), ["csrc/many.cu", "docs/a.md"], tests=tests, rules=rules)
    assert s.mode == "output" and s.to_run == ["test_cut"], (s.to_run, s.decisions)
    assert s.verdicts["csrc/many.cu"].by == "emitted" and s.verdicts["docs/a.md"].by == "rules"


def test_changed_host_code_reaches_the_tests_that_loaded_its_library() -> None:
    """bind.cpp's object (no kernels) went into libbindings.so: the tests that loaded it run, whatever kernels
    they launched, and no other; under --host-scope kernels it has no kernels to narrow by, so every test runs."""
    def build(host: str) -> dict[str, Any]:
        doc = base_map()
        _edit(doc, "csrc/bind.cpp", host=host)
        doc["artefacts"] = {"ops": ["libops.so"], "bindings": ["libbindings.so"]}
        return doc
    loaded = {"test_k0": {"libops.so", "libbindings.so.1"}, "test_k1": {"libops.so"}, "test_host": {"libbindings.so"}}
    tests = [Recording(f"test_{k}", frozenset({k}) if k != "host" else frozenset(), True, BASE, "rec",
                       libraries=frozenset(loaded.get(f"test_{k}", {"libops.so"})))
             for k in ("k0", "k1", "k2", "o0", "host")]
    s = _select(build("h-bind-2"), ["csrc/bind.cpp"], base=build("h-bind"), tests=tests)
    assert s.mode == "output" and s.fallback is None and s.to_run == ["test_host", "test_k0"], (s.to_run, s.fallback_why)
    s = _select(build("h-bind-2"), ["csrc/bind.cpp"], base=build("h-bind"), tests=tests, host_scope="kernels")
    assert s.fallback == "host-changed" and len(s.to_run) == 5, (s.fallback, s.to_run)


def _with_ptx(doc: dict[str, Any], source: str, digest: str) -> dict[str, Any]:
    """``doc`` with ``source``'s object holding PTX beside its sm_80 cubin, digested whole."""
    next(o for o in doc["objects"] if o["source"] == source)["digests"]["ptx"] = {"compute_80": digest}
    return doc


def test_ptx_beside_a_cubin_that_differs_with_its_cubin_code_is_the_changed_kernels_change() -> None:
    """ptxas compiled the cubin from that text: the kernels whose sm_80 code changed are what changed."""
    base = _with_ptx(base_map(), "csrc/many.cu", "p-base")
    new = _with_ptx(base_map(), "csrc/many.cu", "p-new")
    _edit(new, "csrc/many.cu", code={1: "d1-new"})
    assert _select(new, ["csrc/many.cu"], base=base).to_run == ["test_k1"]


def test_ptx_beside_a_cubin_that_differs_alone_is_every_kernel_of_its_objects_change() -> None:
    """No kernel's cubin code explains it: every kernel of the object, and no other object's."""
    base = _with_ptx(base_map(), "csrc/many.cu", "p-base")
    new = _with_ptx(base_map(), "csrc/many.cu", "p-new")
    s = _select(new, ["csrc/many.cu"], base=base)
    assert s.to_run == ["test_k0", "test_k1", "test_k2"]
    assert s.emitted is not None and s.emitted.kernels["k0"] == "changed (compute_80: its object's PTX differs)"
    # A cubin change in another object explains nothing here
    _edit(new, "csrc/other.cu", code={0: "e0-new"})
    assert _select(new, ["csrc/many.cu"], base=base).to_run == ["test_k0", "test_k1", "test_k2", "test_o0"]
    # PTX in one build only (built for PTX beside the cubin in the change alone): the object's every kernel
    assert _select(_with_ptx(base_map(), "csrc/many.cu", "p"), ["csrc/many.cu"]).to_run == \
        ["test_k0", "test_k1", "test_k2"]
