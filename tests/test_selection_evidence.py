"""``select`` on small maps and recordings written here: the evidence rules that need no build, one at a time.

Each test runs the command as a user types it (``main([...])``, in process, so
a traceback fails the test) on a map document written as ``build`` writes one
and recordings in the recorder's formats.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from test_emitted import BASE, _tests, base_map
from test_selection_safety import git

from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap, Reach
from kernel_symbol_map.consumer.select.recordings import Recording, Unreadable
from kernel_symbol_map.consumer.select.selection import (
    COMMIT_MISMATCH,
    EVIDENCE_FALLBACKS,
    Decision,
    Options,
    Selection,
    StaticRules,
    Verdict,
    select,
)
from kernel_symbol_map.errors import KernelSymbolMapError

ONE, TWO = "1" * 40, "2" * 40  # two commits, full SHAs
A_K, B_K = "_Z8a_kernelv", "_Z8b_kernelv"
EXTERNAL = "_Z16external_kernelv"  # a kernel from outside the project, as a recording names it


def document(commit: str) -> dict[str, Any]:
    """A whole build's map: csrc/a.cu (kernel A_K, including include/a.cuh) and csrc/b.cu (B_K)."""
    return {
        "version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": ["$BUILD"],
        "incomplete": False, "errors": [], "stats": {},
        "objects": [
            {"source": "csrc/a.cu", "target": "ops", "object": "$BUILD/a.cu.o", "device": True, "symbols": [A_K],
             "deps": ["csrc/a.cu", "include/a.cuh"]},
            {"source": "csrc/b.cu", "target": "ops", "object": "$BUILD/b.cu.o", "device": True, "symbols": [B_K],
             "deps": ["csrc/b.cu"]},
        ],
    }


def write_map(path: Path, commit: str) -> Path:
    path.write_bytes(gzip.compress(json.dumps(document(commit)).encode()))
    return path


def jsonl(path: Path, tests: dict[str, list[str]], commit: str = ONE) -> Path:
    path.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": commit}) + "\n"
                            for t, k in tests.items()))
    return path


def run_select(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    """(exit code, the --json answer, stderr) of ``select ARGS --json``."""
    code = main(["select", *args, "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, json.loads(out), err


def test_maps_of_two_commits_are_a_commit_mismatch_and_every_test_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two variants' maps of different commits are no evidence together: a fallback, never a traceback."""
    one, two = write_map(tmp_path / "one.json.gz", ONE), write_map(tmp_path / "two.json.gz", TWO)
    rec = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_b": [B_K]})
    args = ["--map", str(one), "--map", str(two), "--recordings", str(rec), "--changed", "csrc/b.cu"]
    code, answer, _ = run_select(capsys, *args)
    assert code == 0
    assert answer["fallback"] == COMMIT_MISMATCH and ONE in answer["fallback_why"] and TWO in answer["fallback_why"]
    assert set(answer["run"]) == {"test_a", "test_b"} and answer["skip"] == []
    assert COMMIT_MISMATCH in EVIDENCE_FALLBACKS
    code, _, _ = run_select(capsys, *args, "--strict")
    assert code == 1
    # The same maps in the library: the same fallback.
    recordings = [Recording("test_a", frozenset({A_K}), True, ONE, "")]
    result = select([KernelMap(document(ONE)), KernelMap(document(TWO))], recordings, ["csrc/b.cu"])
    assert result.fallback == COMMIT_MISMATCH and result.to_run == ["test_a"]


@pytest.mark.parametrize(("pattern", "cleared"), [
    (EXTERNAL, True),
    ("_Z16external_.*", True),
    (".*external.*|_Z3foo", True),  # an alternation is matched whole too
    ("_Z16external", False),  # a prefix of the name is not the name
    ("external_kernel", False),  # nor is a part of it
    ("_Z16external_kernelvX?_Z3bar", False),
])
def test_external_kernels_match_the_whole_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               pattern: str, cleared: bool) -> None:
    """docs/selecting-tests.md: ``--external-kernels REGEX`` is a full match on the mangled name; anything less keeps the test."""
    kmap = write_map(tmp_path / "map.json.gz", ONE)
    rec = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_b": [B_K, EXTERNAL]})
    code, answer, _ = run_select(capsys, "--map", str(kmap), "--recordings", str(rec), "--changed", "csrc/a.cu",
                                 "--external-kernels", pattern)
    assert code == 0 and answer["fallback"] is None
    decision = next(d for d in answer["decisions"] if d["test"] == "test_b")
    if cleared:
        assert answer["skip"] == ["test_b"] and decision["reason"] == "not-reached"
    else:
        assert "test_b" in answer["run"] and decision["reason"] == "unknown-kernel"
        assert decision["kernels"] == [EXTERNAL]


@pytest.mark.parametrize("pattern", ["(", "[a-", "*x"])
def test_a_bad_external_kernels_pattern_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          pattern: str) -> None:
    kmap = write_map(tmp_path / "map.json.gz", ONE)
    rec = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K]})
    code = main(["select", "--map", str(kmap), "--recordings", str(rec), "--changed", "csrc/a.cu",
                 "--external-kernels", "at::.*", "--external-kernels", pattern])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("ERROR") and repr(pattern) in line and "--external-kernels" in line


def _unreadable_naming(tmp_path: Path, test: str, name: str = "proc-7.txt") -> Path:
    """A recorder text file that names its test, then a line that is no kernel name: unreadable, test known."""
    path = tmp_path / name
    path.write_text(f"# test={test}\n{A_K}\nthis is not a kernel name\n# end records=2 unique=1 dropped=0\n")
    return path


def test_an_unreadable_recording_runs_its_test_even_beside_a_complete_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """test_b's complete JSON Lines recording would clear it; its other recording, unreadable, may have
    launched anything: test_b runs."""
    kmap = write_map(tmp_path / "map.json.gz", ONE)
    complete = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_b": [B_K], "test_c": [B_K]})
    bad = _unreadable_naming(tmp_path, "test_b")
    code, answer, err = run_select(capsys, "--map", str(kmap), "--recordings", str(complete), str(bad),
                                   "--changed", "csrc/a.cu")
    assert code == 0 and answer["fallback"] is None
    reasons = {d["test"]: d["reason"] for d in answer["decisions"]}
    assert reasons == {"test_a": "launched", "test_b": "recording-unreadable", "test_c": "not-reached"}
    assert set(answer["run"]) == {"test_a", "test_b"} and answer["skip"] == ["test_c"]
    assert f"{bad}:3" in err and "its tests run (recording-unreadable)" in err


def test_each_unreadable_recording_runs_the_tests_it_names(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    kmap = write_map(tmp_path / "map.json.gz", ONE)
    complete = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_b": [B_K], "test_c": [B_K]})
    bad = [_unreadable_naming(tmp_path, test, f"proc-{i}.txt") for i, test in enumerate(("test_b", "test_c"))]
    code, answer, _ = run_select(capsys, "--map", str(kmap), "--recordings", str(complete), *map(str, bad),
                                 "--changed", "csrc/a.cu")
    assert code == 0 and set(answer["run"]) == {"test_a", "test_b", "test_c"}, answer["decisions"]


def test_strict_fails_when_a_recording_was_unreadable_even_if_it_named_its_tests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kmap = write_map(tmp_path / "map.json.gz", ONE)
    complete = jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_c": [B_K]})
    bad = _unreadable_naming(tmp_path, "test_b")
    args = ["--map", str(kmap), "--recordings", str(complete), str(bad), "--changed", "csrc/a.cu"]
    code, answer, _ = run_select(capsys, *args)
    assert code == 0 and answer["fallback"] is None and "test_b" in answer["run"]
    code, answer, _ = run_select(capsys, *args, "--strict")
    assert code == 1 and "test_b" in answer["run"] and answer["skip"] == ["test_c"]
    # Without the unreadable file the same evidence passes --strict.
    code, _, _ = run_select(capsys, "--map", str(kmap), "--recordings", str(complete), "--changed", "csrc/a.cu",
                            "--strict")
    assert code == 0


# The fresh pass over select's decision points (issue 26): each rule below had no test that broke with it.

RECORDED = [Recording("test_a", frozenset({A_K}), True, ONE, ""), Recording("test_b", frozenset({B_K}), True, ONE, "")]


@pytest.mark.parametrize("all_targets", [None, []])
def test_a_subset_map_that_does_not_list_the_build_s_targets_is_no_evidence(all_targets: list[str] | None) -> None:
    """``only_targets`` without the targets it is a subset of cannot show that it covers them: map-subset."""
    doc = document(ONE) | {"only_targets": ["ops"]}
    if all_targets is not None:
        doc["all_targets"] = all_targets
    result = select([KernelMap(doc)], RECORDED, ["csrc/a.cu"])
    assert result.fallback == "map-subset" and "unknown" in result.fallback_why
    assert result.to_run == ["test_a", "test_b"]
    # Listed and covered, the same map is evidence.
    result = select([KernelMap(doc | {"all_targets": ["ops"]})], RECORDED, ["csrc/a.cu"])
    assert result.fallback is None and result.to_run == ["test_a"]


def test_a_file_one_map_reads_at_configure_is_never_clearable_by_another_map() -> None:
    """A variant whose configure read include/a.cuh (staged by configure_file) beside one that compiles
    it: the union of the maps is what the change may reach, and the configure may change anything."""
    compiled = KernelMap(document(ONE))
    configured = document(ONE) | {"configure_inputs": ["include/a.cuh"]}
    configured["objects"] = [o for o in configured["objects"] if o["source"] == "csrc/b.cu"]
    result = select([compiled, KernelMap(configured)], RECORDED, ["include/a.cuh"])
    assert result.fallback == "configure-input" and result.to_run == ["test_a", "test_b"]
    result = select([KernelMap(configured), compiled], RECORDED, ["include/a.cuh"])
    assert result.fallback == "configure-input" and result.to_run == ["test_a", "test_b"]


def test_static_rules_never_choose_for_an_empty_change_set() -> None:
    """No change is no evidence (no-changes); rules choose tests for files, and there are none: all run."""
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/a.cu"], "tests": ["test_a"]}]})
    result = select([KernelMap(document(ONE))], RECORDED, [], rules)
    assert result.fallback == "no-changes" and result.to_run == ["test_a", "test_b"]


def test_a_changed_file_no_rule_matches_runs_everything() -> None:
    """A file no map knows is the rules' when one matches it (per file); one no rule matches runs everything."""
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": ["test_a"]}]})
    kmap = KernelMap(document(ONE))
    result = select([kmap], RECORDED, ["csrc/new.cu"], rules)  # csrc/new.cu: in no map
    assert result.fallback is None and result.to_run == ["test_a"]
    assert result.verdicts["csrc/new.cu"].by == "rules"
    result = select([kmap], RECORDED, ["csrc/new.cu", "docs/notes.md"], rules)
    assert result.fallback == "file-not-in-map" and result.to_run == ["test_a", "test_b"]
    assert all("static rules" not in d.why for d in result.decisions)
    assert "docs/notes.md is known to no decider" in result.summary()
    # --whole-change: as before per-file decisions, the rules decide the whole change, under the fallback
    whole = Options(rules=rules, per_file=False)
    result = select([kmap], RECORDED, ["csrc/new.cu"], options=whole)
    assert result.fallback == "file-not-in-map" and result.to_run == ["test_a"]
    result = select([kmap], RECORDED, ["csrc/a.cu", "csrc/new.cu"], options=whole)
    assert result.fallback == "file-not-in-map" and result.to_run == ["test_a"]


def test_rules_decide_each_file_and_may_name_no_test() -> None:
    """Docs need no test; a kernel source beside them is decided by the map alone; patterns name tests."""
    rules = StaticRules.parse({"rules": [{"paths": ["docs/**", "*.md"], "tests": []},
                                         {"paths": ["data/*.json"], "tests": ["test_b*"]}]})
    kmap = KernelMap(document(ONE))
    result = select([kmap], RECORDED, ["csrc/a.cu", "docs/x.rst", "NOTES.md"], rules)
    assert result.fallback is None and result.to_run == ["test_a"]
    assert {p: v.by for p, v in result.verdicts.items()} == {"csrc/a.cu": "map", "docs/x.rst": "rules",
                                                             "NOTES.md": "rules"}
    result = select([kmap], RECORDED, ["NOTES.md", "data/table.json"], rules)
    assert result.to_run == ["test_b"] and result.decisions[1].reason == "rules"
    with pytest.raises(KernelSymbolMapError, match="non-empty"):
        StaticRules.parse({"rules": [{"paths": [], "tests": []}]})


# Several maps of one commit (variants, shards): what any of them says about a changed file counts.

C_K, D_K = "_Z8c_kernelv", "_Z8d_kernelv"


def moe_document(commit: str) -> dict[str, Any]:
    """Another variant's map: target moe compiles csrc/c.cu (kernel C_K, including include/a.cuh too) and
    csrc/d.cu (D_K)."""
    return document(commit) | {"objects": [
        {"source": "csrc/c.cu", "target": "moe", "object": "$BUILD/c.cu.o", "device": True, "symbols": [C_K],
         "deps": ["csrc/c.cu", "include/a.cuh"]},
        {"source": "csrc/d.cu", "target": "moe", "object": "$BUILD/d.cu.o", "device": True, "symbols": [D_K],
         "deps": ["csrc/d.cu"]},
    ]}


def test_whole_target_widens_to_the_targets_of_every_map_that_compiles_the_file() -> None:
    """include/a.cuh is compiled into target ops in one map and target moe in the other: --whole-target runs
    the tests of every kernel of both targets, whichever map comes first."""
    recordings = [Recording(t, frozenset({k}), True, ONE, "")
                  for t, k in (("test_a", A_K), ("test_b", B_K), ("test_c", C_K), ("test_d", D_K))]
    ops, moe = KernelMap(document(ONE)), KernelMap(moe_document(ONE))
    for maps in ([ops, moe], [moe, ops]):
        result = select(maps, recordings, ["include/a.cuh"], options=Options(whole_target=True))
        assert result.fallback is None
        assert {d.test: d.reason for d in result.decisions} == {
            "test_a": "launched", "test_b": "same-target", "test_c": "launched", "test_d": "same-target"}
        # without --whole-target only the kernels compiled from the header run
        assert select(maps, recordings, ["include/a.cuh"]).to_run == ["test_a", "test_c"]


def test_a_script_any_map_s_configure_runs_is_never_cleared_by_python_coverage(tmp_path: Path) -> None:
    """tools/gen.py is run by cmake/gen.cmake, a configure input of one variant's map only: its changes are
    compiled, not tested, so the one test coverage saw run it is not all that runs, whichever map comes
    first. With no map naming the script, coverage decides it."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "cmake").mkdir()
    (repo / "tools" / "gen.py").write_text("def main():\n    return 1\n")
    (repo / "cmake" / "gen.cmake").write_text(
        "execute_process(COMMAND ${Python_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tools/gen.py)\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    commit = git(repo, "rev-parse", "HEAD")
    recordings = [  # test_a ran a block of tools/gen.py that is gone now; test_b ran none of it
        Recording("test_a", frozenset({A_K}), True, commit, "", python={"tools/gen.py": frozenset({"gone"})}),
        Recording("test_b", frozenset({B_K}), True, commit, "", python={}),
    ]
    plain = KernelMap(document(commit))
    generating = KernelMap(document(commit) | {"configure_inputs": ["cmake/gen.cmake"]})
    options = Options(source_root=repo)
    for maps in ([plain, generating], [generating, plain]):
        result = select(maps, recordings, ["tools/gen.py"], options=options)
        assert result.fallback == "file-not-in-map" and result.to_run == ["test_a", "test_b"]
        assert "the build runs it (cmake/gen.cmake:1 names it)" in result.fallback_why
    result = select([plain], recordings, ["tools/gen.py"], options=options)
    assert result.fallback is None and result.to_run == ["test_a"]
    assert result.verdicts["tools/gen.py"].by == "python"


def test_an_empty_change_set_allowed_still_runs_the_tests_evidence_cannot_clear() -> None:
    """--allow-empty: no file changed, so no file was decided by the rules; each test is cleared by its own
    recording or runs (an incomplete recording, one of another commit)."""
    recordings = [Recording("test_a", frozenset({A_K}), True, ONE, ""),
                  Recording("test_b", frozenset({B_K}), False, ONE, "", why_incomplete="the process crashed"),
                  Recording("test_c", frozenset({B_K}), True, TWO, "")]
    rules = StaticRules.parse({"rules": [{"paths": ["docs/**"], "tests": []}]})
    for given in (None, rules):
        result = select([KernelMap(document(ONE))], recordings, [], options=Options(rules=given, allow_empty=True))
        assert result.fallback is None and result.verdicts == {}
        assert {d.test: d.reason for d in result.decisions} == {
            "test_a": "not-reached", "test_b": "recording-incomplete", "test_c": COMMIT_MISMATCH}
        assert result.to_run == ["test_b", "test_c"]


def test_rules_that_decide_every_changed_file_leave_what_the_builds_emitted_to_the_evidence() -> None:
    """Output mode: the rules name no test for CMakeLists.txt, the only file changed, yet the change's build
    emitted kernel k1 differently. The rules' word covers the file, not k1: the test that launched it runs,
    and so does one whose recording is incomplete (it may have launched it); a complete recording that did
    not is skipped. When nothing was emitted differently, the rules alone decide."""
    rules = StaticRules.parse({"rules": [{"paths": ["CMakeLists.txt"], "tests": []}]})
    recordings = [Recording("test_k0", frozenset({"k0"}), True, BASE, ""),
                  Recording("test_k1", frozenset({"k1"}), True, BASE, ""),
                  Recording("test_k2", frozenset({"k2"}), False, BASE, "", why_incomplete="the process crashed")]
    change = "c" * 40  # the pull request's build
    new = base_map() | {"commit": change}  # CMakeLists.txt is a configure input of both builds
    next(o for o in new["objects"] if o["source"] == "csrc/many.cu")["digests"]["code"]["sm_80"][1] = "d1-new"
    result = select(KernelMap(new), recordings, ["CMakeLists.txt"], options=Options(rules=rules),
                    base=[KernelMap(base_map())])
    assert result.mode == "output" and result.fallback is None
    assert result.verdicts["CMakeLists.txt"].by == "rules"
    assert {d.test: d.reason for d in result.decisions} == {
        "test_k0": "not-reached", "test_k1": "launched", "test_k2": "recording-incomplete"}
    assert result.to_run == ["test_k1", "test_k2"]
    same = select(KernelMap(base_map() | {"commit": change}), recordings, ["CMakeLists.txt"],
                  options=Options(rules=rules), base=[KernelMap(base_map())])
    assert same.to_run == [] and {d.reason for d in same.decisions} == {"rules"}


# -- what a selection says of itself ---------------------------------------------------------------------------

def test_a_selection_s_last_line_says_what_runs_and_why() -> None:
    def decisions(*run: bool) -> list[Decision]:
        return [Decision(f"t{i}", r, "launched" if r else "not-reached", "") for i, r in enumerate(run)]
    everything = {p: Verdict(p, "everything", "") for p in ("a.md", "b.md", "c.md", "d.md")}
    assert Selection(decisions(True, True), "no-changes", "the change set is empty").summary() == \
        "every test runs (no-changes); 2 known to the recordings"  # source mode: the code says it
    assert Selection(decisions(True, True), "unknown-file", mode="output", fallback_why="a.md").summary() == \
        "every test runs (unknown-file: a.md); 2 known to the recordings"
    assert Selection(decisions(True), "unknown-file", verdicts=dict(list(everything.items())[:3])).summary() == \
        "every test runs (unknown-file: a.md, b.md, c.md are known to no decider); 1 known to the recordings"
    assert Selection(decisions(True), "unknown-file", verdicts=everything).summary() == \
        "every test runs (unknown-file: a.md, b.md, c.md ... are known to no decider); 1 known to the recordings"
    # every test runs, though no evidence was set aside: the evidence says so
    assert Selection(decisions(True, True)).summary() == \
        "2 of 2 known tests to run; any test no recording knows runs too"
    # static rules over a fallback leave some tests out
    assert Selection(decisions(True, False), "host-file").summary() == \
        "1 of 2 known tests to run (static rules, host-file); any test no recording knows runs too"
    verdicts = {"a.cu": Verdict("a.cu", "map", ""), "b.py": Verdict("b.py", "python", "")}
    assert Selection(decisions(True, False), verdicts=verdicts).summary() == \
        "1 of 2 known tests to run; files decided by 1 map, 1 python; any test no recording knows runs too"
    assert Selection(decisions(True), verdicts={"a.cu": verdicts["a.cu"]}).summary() == \
        "1 of 1 known tests to run; any test no recording knows runs too"


def test_a_selection_s_json_says_per_file_how_many_tests_each_file_runs() -> None:
    files = [Reach("a.cu", "kernels", frozenset({"k"})), Reach("b.py", "not-in-map", frozenset()),
             Reach("c.md", "not-in-map", frozenset()), Reach("d.cu", "kernels", frozenset({"k", "j"}))]
    verdicts = {"a.cu": Verdict("a.cu", "map", "m", {"t0": ""}), "b.py": Verdict("b.py", "python", "p", {}),
                "c.md": Verdict("c.md", "everything", "e", {"t0": ""})}
    found = Selection([Decision("t0", True, "unknown-kernel", "", ("k",)), Decision("t1", False, "not-reached", "")],
                      files=files, verdicts=verdicts).to_json()
    assert found["files"] == [
        {"path": "a.cu", "status": "kernels", "kernels": 1, "decided_by": "map", "why": "m", "runs": 1},
        {"path": "b.py", "status": "not-in-map", "kernels": 0, "decided_by": "python", "why": "p", "runs": 0},
        {"path": "c.md", "status": "not-in-map", "kernels": 0, "decided_by": "everything", "why": "e", "runs": None},
        {"path": "d.cu", "status": "kernels", "kernels": 2}]
    assert found["decisions"] == [{"test": "t0", "run": True, "reason": "unknown-kernel", "why": "", "kernels": ["k"]},
                                  {"test": "t1", "run": False, "reason": "not-reached", "why": ""}]


def test_rules_given_beside_options_are_the_rules_select_uses() -> None:
    rules = StaticRules.parse({"rules": [{"paths": ["docs/**"], "tests": []}]})
    found = select(KernelMap(base_map()), _tests(), ["docs/a.md"], rules, options=Options(allow_empty=True))
    assert found.fallback is None and found.to_run == [] and found.verdicts["docs/a.md"].by == "rules"


def test_an_unreadable_recording_that_cannot_name_its_tests_runs_everything_and_says_so_in_json() -> None:
    found = select(KernelMap(base_map()), _tests(), ["csrc/many.cu"],
                   unreadable=[Unreadable(Path("rec/cut.jsonl"), "rec/cut.jsonl: cut short", frozenset({"test_k0"})),
                               Unreadable(Path("rec/bad.jsonl"), "rec/bad.jsonl: not JSON", None)])
    doc = found.to_json()
    assert doc["fallback"] == "recording-unreadable" and doc["files"] == [] and doc["skip"] == []
    assert doc["fallback_why"] == "rec/bad.jsonl: not JSON; the tests it covered cannot be known"


def test_a_map_built_where_git_could_not_list_the_files_clears_no_test() -> None:
    """Which sources the configure wrote is unknown there: any change may reach them."""
    blind = {**base_map(), "tracked_files_unknown": True}
    found = select(KernelMap(blind, where="blind.json"), _tests(), ["csrc/many.cu"])
    assert found.fallback == "tracked-files-unknown" and len(found.to_run) == len(found.decisions)
    assert found.fallback_why.startswith("blind.json was built where git could not list"), found.fallback_why
    found = select(KernelMap(blind), _tests(), ["csrc/many.cu"])
    assert found.fallback_why.startswith("a map was built where git could not list"), found.fallback_why


def test_a_map_that_holds_no_evidence_is_named_by_where_it_was_read() -> None:
    incomplete = {**base_map(), "incomplete": True}
    found = select(KernelMap(incomplete, where="maps/shard1.json"), _tests(), ["csrc/many.cu"])
    assert found.fallback == "map-incomplete" and found.fallback_why.startswith("maps/shard1.json holds no evidence")
    found = select(KernelMap(incomplete), _tests(), ["csrc/many.cu"])
    assert found.fallback_why.startswith("a map holds no evidence"), found.fallback_why


def test_a_subset_map_beside_a_whole_build_s_map_is_evidence() -> None:
    """A shard built with --targets beside a whole build's map: together they cover every target."""
    subset = document(ONE) | {"only_targets": ["ops"], "all_targets": ["ops", "other"]}
    result = select([KernelMap(document(ONE)), KernelMap(subset)], RECORDED, ["csrc/a.cu"])
    assert result.fallback is None and result.to_run == ["test_a"], result.fallback_why
    result = select([KernelMap(subset)], RECORDED, ["csrc/a.cu"])
    assert result.fallback == "map-subset" and "not other" in result.fallback_why


def test_the_change_s_map_need_not_name_its_commit_and_the_recordings_maps_must() -> None:
    """Output mode compares what the change's build emitted, of whatever commit; the base's commit is what the
    recordings' evidence is of."""
    new = base_map()
    new["objects"][0]["digests"]["code"]["sm_80"][1] = "d1-new"
    found = select(KernelMap({**new, "commit": ""}), _tests(), ["csrc/many.cu"], base=[KernelMap(base_map())])
    assert found.mode == "output" and found.fallback is None and found.to_run == ["test_k1"], found.fallback_why
    found = select(KernelMap(new), _tests(), ["csrc/many.cu"], base=[KernelMap({**base_map(), "commit": ""})])
    assert found.fallback == "commit-mismatch" and found.fallback_why == "the maps' commit is unknown"


def test_what_select_says_of_the_commits_and_of_each_file_the_map_decides() -> None:
    found = select(KernelMap(base_map()), _tests(), ["csrc/many.cu"])
    assert found.verdicts["csrc/many.cu"].tests == {"test_k0": "", "test_k1": "", "test_k2": ""}
    assert found.to_json()["files"][0]["runs"] == 3
    assert select(KernelMap(base_map()), [], ["csrc/many.cu"]).fallback is None  # no recording: nothing to decide
    elsewhere = [Recording("test_k0", frozenset({"k0"}), True, "", "rec"),
                 Recording("test_k1", frozenset({"k1"}), True, "b" * 40, "rec")]
    found = select(KernelMap(base_map()), elsewhere, ["csrc/many.cu"])
    assert found.fallback_why == f"the map is of {BASE}, every recording of (unknown), {'b' * 40}", found.fallback_why
