"""Issue 11's nine classes of unsafe skip, each on a real map of tests/projects/selection.

The project is built once with nvcc and Ninja in a git repository; each test
clones that repository, changes it as a pull request would, and runs the
command a user would type. A test passes when ``select`` runs every test the
change can reach.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nsys
import projects
import pytest
from toolchains import require

A_K, SH_F, A2_K = "_Z8a_kernelPf", "_Z13shared_kernelIfEvPT_", "_Z9a2_kernelPi"
B_K, SH_I = "_Z8b_kernelPi", "_Z13shared_kernelIiEvPT_"
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


@dataclass(frozen=True)
class Built:
    repo: Path  # the project, a git repository at commit `commit`
    build: Path
    map: Path
    commit: str
    anon: str  # the anonymous-namespace kernel's name in this build

    def clone(self, where: Path) -> Path:
        subprocess.run(["git", "clone", "-q", str(self.repo), str(where)], check=True)
        return where


def selection_project(where: Path) -> Path:
    """tests/projects/selection copied to ``where``/src, with the header symlink its tests change."""
    src = where / "src"
    shutil.copytree(projects.PROJECTS / "selection", src)
    (src / "include" / "alias.cuh").symlink_to("shared.cuh")
    return src


def commit_and_map(src: Path, where: Path) -> tuple[str, projects.Build, Path]:
    """``src`` committed as a new git repository, built with CMake 3.25 and Ninja, and mapped at that commit."""
    cmake = next((c for c in projects.cmakes() if c.label == "3.25"), None)
    require(cmake and cmake.cmake, "system CMake 3.25")
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "A")
    commit = git(src, "rev-parse", "HEAD")
    b = projects.configure_and_build_at(src, where / "build", cmake, "Ninja")
    out = where / "map.json.gz"
    assert ksm("build", "--build-dir", str(b.build), "--out", str(out), "--commit", commit).returncode == 0
    return commit, b, out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    where = tmp_path_factory.mktemp("selection")
    src = selection_project(where)
    commit, b, out = commit_and_map(src, where)
    doc = json.loads(gzip.decompress(out.read_bytes()))
    (anon,) = next(o["symbols"] for o in doc["objects"] if o["source"] == "csrc/anon.cu")
    return Built(src, b.build, out, commit, anon)


def ksm(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, check=False)


def recorded(tmp: Path, commit: str | None, tests: dict[str, list[str]], complete: bool = True) -> Path:
    """A JSON Lines recording, one record per test, as ``record`` writes them."""
    path = tmp / "recorded.jsonl"
    with path.open("w") as f:
        for test, kernels in tests.items():
            record: dict[str, Any] = {"test": test, "kernels": kernels, "complete": complete}
            if commit is not None:
                record["commit"] = commit
            f.write(json.dumps(record) + "\n")
    return path


def everyone(b: Built) -> dict[str, list[str]]:
    return {"test_a": [A_K, SH_F], "test_a2": [A2_K], "test_b": [B_K, SH_I], "test_anon": [b.anon]}


def select(*args: str, cwd: Path | None = None) -> dict[str, Any]:
    proc = ksm("select", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def ran(result: dict[str, Any]) -> set[str]:
    return set(result["run"])


# 1. --diff: untracked files, running from a subfolder, an empty change set


def test_untracked_new_file_is_a_change(built: Built, tmp_path: Path) -> None:
    repo = built.clone(tmp_path / "repo")
    (repo / "csrc" / "new.cu").write_text("__global__ void n() {}\n")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo)
    assert result["fallback"] == "file-not-in-map" and "csrc/new.cu" in result["fallback_why"]
    assert ran(result) == set(everyone(built))


def test_diff_from_a_subfolder_sees_the_whole_repository(built: Built, tmp_path: Path) -> None:
    repo = built.clone(tmp_path / "repo")
    (repo / "tools").mkdir()
    header = repo / "include" / "shared.cuh"
    header.write_text(header.read_text() + "// changed\n")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo / "tools")
    assert result["fallback"] is None
    assert ran(result) == {"test_a", "test_b"}  # test_b through the symlink (class 3)
    assert set(result["skip"]) == {"test_a2", "test_anon"}


def test_an_empty_change_set_is_no_evidence(built: Built, tmp_path: Path) -> None:
    repo = built.clone(tmp_path / "repo")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo)
    assert result["fallback"] == "no-changes" and ran(result) == set(everyone(built))
    allowed = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", "--allow-empty", cwd=repo)
    assert allowed["fallback"] is None and not allowed["run"]


def test_a_rename_is_both_of_its_sides(built: Built, tmp_path: Path) -> None:
    repo = built.clone(tmp_path / "repo")
    git(repo, "mv", "csrc/a2.cu", "csrc/a3.cu")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo)
    assert {"csrc/a2.cu", "csrc/a3.cu"} <= {f["path"] for f in result["files"]}
    assert "test_a2" in ran(result)


# 2. an unknown commit never matches an unknown commit


def test_unknown_commits_never_match(built: Built, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("BUILDKITE_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA",
                                                          "VLLM_BUILD_COMMIT")}
    env["GIT_DIR"] = str(tmp_path / "no-repository")  # as an sdist build: git finds nothing
    no_commit = tmp_path / "no-commit.json.gz"
    assert ksm("build", "--build-dir", str(built.build), "--out", str(no_commit), "--no-cache", env=env).returncode == 0
    assert json.loads(gzip.decompress(no_commit.read_bytes()))["commit"] == ""
    text = tmp_path / "test_a2.txt"  # the text format carries no commit
    text.write_text(f"{A2_K}\n# end records=1 unique=1 dropped=0\n")
    result = select("--map", str(no_commit), "--recordings", str(text), "--changed", "csrc/a.cu")
    assert result["fallback"] == "commit-mismatch" and ran(result) == {"test_a2"}
    with_commit = select("--map", str(built.map), "--recordings", str(text), "--changed", "csrc/a.cu")
    assert with_commit["fallback"] == "commit-mismatch" and ran(with_commit) == {"test_a2"}


# 3. symlinked headers, both ways


@pytest.mark.parametrize(("changed", "expected"), [
    ("include/shared.cuh", {"test_a", "test_b"}),  # the real file; b.cu includes it as alias.cuh
    ("include/alias.cuh", {"test_a", "test_b"}),  # the link; a.cu includes the real name
])
def test_symlinked_headers_reach_every_includer(built: Built, tmp_path: Path, changed: str, expected: set[str]) -> None:
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--changed", changed,
                    "--source-root", str(built.repo))
    assert ran(result) == expected


# 4. recorded kernels the map does not contain


def test_subset_maps_clear_tests_only_when_they_cover_every_target(built: Built, tmp_path: Path) -> None:
    shards = {}
    for target in ("ka", "kb"):
        shards[target] = tmp_path / f"{target}.json.gz"
        assert ksm("build", "--build-dir", str(built.build), "--out", str(shards[target]), "--targets", target,
                   "--commit", built.commit, "--no-cache").returncode == 0
    doc = json.loads(gzip.decompress(shards["ka"].read_bytes()))
    assert doc["only_targets"] == ["ka"] and doc["all_targets"] == ["ka", "kb"]
    rec = recorded(tmp_path, built.commit, everyone(built))
    alone = select("--map", str(shards["ka"]), "--recordings", str(rec), "--changed", "csrc/a2.cu")
    assert alone["fallback"] == "map-subset" and "not kb" in alone["fallback_why"]
    assert ran(alone) == set(everyone(built))
    both = select("--map", str(shards["ka"]), "--map", str(shards["kb"]), "--recordings", str(rec),
                  "--changed", "csrc/a2.cu")
    assert both["fallback"] is None and ran(both) == {"test_a2"}


def test_a_kernel_no_map_knows_is_never_read_as_not_reached(built: Built, tmp_path: Path) -> None:
    rec = recorded(tmp_path, built.commit, dict(everyone(built), test_torch=["_ZN2at6native13vectorized_elementwise_kernelEv"]))
    result = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/a2.cu")
    why = {d["test"]: d for d in result["decisions"]}
    assert why["test_torch"]["reason"] == "unknown-kernel" and "test_torch" in ran(result)
    declared = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/a2.cu",
                      "--external-kernels", "_ZN2at6native.*")
    assert "test_torch" in declared["skip"]


def test_an_anonymous_kernel_from_another_build_path_is_unknown(built: Built, tmp_path: Path) -> None:
    elsewhere = built.anon.replace(built.anon.split("_")[6], "0badf00d")  # the path hash of another checkout
    assert elsewhere != built.anon
    tests = dict(everyone(built), test_anon=[elsewhere])
    rec = recorded(tmp_path, built.commit, tests)
    result = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/anon.cu")
    why = {d["test"]: d["reason"] for d in result["decisions"]}
    assert why["test_anon"] == "unknown-kernel" and "test_anon" in ran(result)


def test_a_demangled_name_in_json_lines_is_an_error_and_everything_runs(built: Built, tmp_path: Path) -> None:
    rec = recorded(tmp_path, built.commit, dict(everyone(built), test_a=["a_kernel(float*)"]))
    args = ["select", "--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/a2.cu", "--json"]
    proc = ksm(*args)
    assert proc.returncode == 0 and "not a mangled kernel name: 'a_kernel(float*)'" in proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    # No test of that file can be known, so none is skipped: CI runs every test except `skip`.
    assert result["fallback"] == "recording-unreadable" and result["skip"] == []
    assert ksm(*args, "--strict").returncode == 1


# 5. maps that admit they are incomplete


def _broken(doc: dict[str, Any], how: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))
    if how == "incomplete, objects left in":
        doc.update(incomplete=True, reason="1 objects unreadable")
    elif how == "a top-level errors list":
        doc["errors"] = [{"object": "x.o", "source": "csrc/x.cu", "error": "unreadable"}]
    elif how == "an object with an error":
        doc["objects"][0]["error"] = "unreadable"
    elif how == "incomplete without a reason":
        doc.update(incomplete=True, objects=[])
    elif how == "a dep that is not a string":
        doc["objects"][0]["deps"].append(7)
    elif how == "a symbol that is not a string":
        doc["objects"][-1]["symbols"].insert(0, None)
    return doc


@pytest.mark.parametrize("how", ["incomplete, objects left in", "a top-level errors list",
                                 "an object with an error", "incomplete without a reason",
                                 "a dep that is not a string", "a symbol that is not a string"])
def test_a_map_that_breaks_the_fail_closed_rules_is_never_evidence(built: Built, tmp_path: Path, how: str) -> None:
    from kernel_symbol_map import mapformat

    bad = _broken(json.loads(gzip.decompress(built.map.read_bytes())), how)
    assert mapformat.problems(bad) and mapformat.schema_problems(bad)  # the rules and the schema agree
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(json.dumps(bad).encode()))
    proc = ksm("validate", str(path))
    assert proc.returncode == 1 and proc.stderr.startswith("ERROR") and proc.stderr.count("\n") == 1
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(path), "--recordings", str(rec), "--changed", "csrc/a2.cu")
    assert result["fallback"] == "map-unreadable" and ran(result) == set(everyone(built))


# 6. --diff BASE is tied to the map's commit


def test_changes_between_the_maps_commit_and_base_are_seen(built: Built, tmp_path: Path) -> None:
    repo = built.clone(tmp_path / "repo")
    a2 = repo / "csrc" / "a2.cu"
    a2.write_text('#include "shared.cuh"\n' + a2.read_text())  # commit B adds an include edge
    git(repo, "commit", "-qam", "B")
    header = repo / "include" / "shared.cuh"
    header.write_text(header.read_text() + "// the pull request's change\n")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo)
    assert "csrc/a2.cu" in {f["path"] for f in result["files"]}
    assert "test_a2" in ran(result)


def test_a_map_commit_missing_from_the_repository_falls_back(built: Built, tmp_path: Path) -> None:
    repo = tmp_path / "other"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "x").write_text("x")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "unrelated")
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--diff", "HEAD", cwd=repo)
    assert result["fallback"] == "map-commit-missing" and ran(result) == set(everyone(built))


# 7. Nsight exports: kernels from other threads, kernels with no launch row


def test_nsight_kernels_launched_off_the_test_thread(built: Built, tmp_path: Path) -> None:
    export = tmp_path / "run.sqlite"
    nsys.write_export(export, [
        nsys.Launch(A_K, 110, tid=1, start=150, end=160),  # on the test's thread
        nsys.Launch(A2_K, 120, tid=2, start=170, end=180),  # a worker thread: no range there
        nsys.Launch(B_K, 310, tid=1, start=320, end=330),
    ], [nsys.Range("test_a", 100, 200, tid=1), nsys.Range("test_b", 300, 400, tid=1)])
    result = select("--map", str(built.map), "--recordings", str(export), "--recordings-commit", built.commit,
                    "--changed", "csrc/a2.cu")
    assert ran(result) == {"test_a"}  # the worker's kernel is attributed to the range enclosing its launch


def test_nsight_kernel_that_fits_no_test_makes_recordings_incomplete(built: Built, tmp_path: Path) -> None:
    export = tmp_path / "run.sqlite"
    nsys.write_export(export, [
        nsys.Launch(A_K, 110, tid=1, start=150, end=160),
        nsys.Launch(A2_K, None, tid=0, start=250, end=260),  # no runtime row, between the tests
        nsys.Launch(B_K, 310, tid=1, start=320, end=330),
    ], [nsys.Range("test_a", 100, 200, tid=1), nsys.Range("test_b", 300, 400, tid=1)])
    result = select("--map", str(built.map), "--recordings", str(export), "--recordings-commit", built.commit,
                    "--changed", "csrc/a2.cu")
    assert ran(result) == {"test_a", "test_b"}
    assert {d["reason"] for d in result["decisions"]} == {"recording-incomplete"}


# 8. rule globs stay within a directory


def test_rule_globs_are_git_globs(built: Built, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"paths": ["csrc/*.cu"], "tests": ["test_a"]},
                                           {"paths": ["include/**"], "tests": ["test_b"]}]}))
    rec = recorded(tmp_path, built.commit, everyone(built))
    deep = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/moe/topk.cu",
                  "--rules", str(rules))
    assert deep["fallback"] == "file-not-in-map" and ran(deep) == set(everyone(built))
    shallow = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/new.cu",
                     "--rules", str(rules))
    assert ran(shallow) == {"test_a"}
    rules.write_text(json.dumps({"rules": [{"paths": "csrc/*.cu", "tests": ["test_a"]}]}))
    proc = ksm("select", "--map", str(built.map), "--recordings", str(rec), "--changed", "x", "--rules", str(rules))
    assert proc.returncode == 1 and "rules[0].paths must be a non-empty list of strings" in proc.stderr


# 9. host code in .cu files: the documented limit, and the conservative mode


def test_host_code_in_a_cu_file_needs_whole_target(built: Built, tmp_path: Path) -> None:
    # test_check calls a_check() (host code in a.cu) and launches only a2_kernel, of the same target.
    rec = recorded(tmp_path, built.commit, dict(everyone(built), test_check=[A2_K]))
    plain = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/a.cu")
    assert "test_check" in plain["skip"]  # the limit docs/selecting-tests.md documents
    wide = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/a.cu", "--whole-target")
    assert ran(wide) == {"test_a", "test_a2", "test_check"}
    assert {d["test"]: d["reason"] for d in wide["decisions"]}["test_check"] == "same-target"


# The output contract, and bad evidence that must not block CI


def test_every_recorded_test_is_named_with_a_reason(built: Built, tmp_path: Path) -> None:
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/b.cu")
    assert {d["test"] for d in result["decisions"]} == set(everyone(built))
    assert set(result["run"]) | set(result["skip"]) == set(everyone(built))
    assert all(d["reason"] and d["why"] for d in result["decisions"])


def test_corrupt_map_and_truncated_recording_run_everything(built: Built, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.json.gz"
    corrupt.write_bytes(built.map.read_bytes()[:100])
    rec = recorded(tmp_path, built.commit, everyone(built))
    proc = ksm("select", "--map", str(corrupt), "--recordings", str(rec), "--changed", "csrc/a2.cu")
    assert proc.returncode == 0 and "map-unreadable" in proc.stdout and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines()[-1] == "every test runs (map-unreadable); 4 known to the recordings"
    assert ksm("select", "--map", str(corrupt), "--recordings", str(rec), "--changed", "x", "--strict").returncode == 1
    truncated = tmp_path / "test_b.txt"
    truncated.write_bytes(f"# test=test_b\n{B_K}\n{SH_I}\n# end records=2 uni".encode())
    text = ksm("select", "--map", str(built.map), "--recordings", str(rec), str(truncated), "--changed", "csrc/a2.cu")
    assert text.returncode == 0, text.stderr
    assert "RUN  test_b: " in text.stdout  # its recording did not finish, so it cannot be cleared
    cut = tmp_path / "cut.jsonl"
    cut.write_text(rec.read_text()[:-20])
    proc = ksm("select", "--map", str(built.map), "--recordings", str(cut), "--changed", "csrc/a2.cu")
    assert proc.returncode == 0 and "not JSON" in proc.stderr
    assert proc.stdout.startswith("FALLBACK recording-unreadable:") and "SKIP" not in proc.stdout


# Several maps: a second --map never replaces the first, and merge fails closed


def test_a_map_without_evidence_beside_a_good_one_runs_everything(built: Built, tmp_path: Path) -> None:
    empty = tmp_path / "empty.json.gz"
    doc = json.loads(gzip.decompress(built.map.read_bytes()))
    doc.update(incomplete=True, objects=[], reason="1 objects unreadable")
    empty.write_bytes(gzip.compress(json.dumps(doc).encode()))
    rec = recorded(tmp_path, built.commit, everyone(built))
    for maps in ([empty, built.map], [built.map, empty]):
        args = [a for m in maps for a in ("--map", str(m))]
        result = select(*args, "--recordings", str(rec), "--changed", "csrc/a2.cu")
        assert result["fallback"] == "map-incomplete" and ran(result) == set(everyone(built))


def test_merge_of_shards_is_the_whole_map_and_fails_closed(built: Built, tmp_path: Path) -> None:
    shards = []
    for target in ("ka", "kb"):
        shards.append(tmp_path / f"{target}.json.gz")
        assert ksm("build", "--build-dir", str(built.build), "--out", str(shards[-1]), "--targets", target,
                   "--commit", built.commit, "--no-cache").returncode == 0
    merged = tmp_path / "merged.json.gz"
    proc = ksm("merge", str(merged), *map(str, shards))
    assert proc.returncode == 0, proc.stderr
    whole, doc = (json.loads(gzip.decompress(p.read_bytes())) for p in (built.map, merged))
    assert doc["objects"] == whole["objects"] and "only_targets" not in doc and not doc["incomplete"]
    assert ksm("validate", str(merged)).returncode == 0
    bad = json.loads(gzip.decompress(shards[1].read_bytes()))
    bad.update(incomplete=True, objects=[], reason="1 objects unreadable")
    shards[1].write_bytes(gzip.compress(json.dumps(bad).encode()))
    assert ksm("merge", str(merged), *map(str, shards)).returncode == 0
    doc = json.loads(gzip.decompress(merged.read_bytes()))
    assert doc["incomplete"] and doc["objects"] == [] and "1 objects unreadable" in doc["reason"]
    other = json.loads(gzip.decompress(shards[0].read_bytes()))
    shards[1].write_bytes(gzip.compress(json.dumps(dict(other, commit="other")).encode()))
    assert ksm("merge", str(merged), *map(str, shards)).returncode == 0
    assert "not one" in json.loads(gzip.decompress(merged.read_bytes()))["reason"]


def test_build_tree_paths_either_spelling(built: Built, tmp_path: Path) -> None:
    """A map names files in the build folder as $BUILD/...; a consumer given the folder accepts either."""
    generated = built.build / "gen.cuh"  # stands for a generated header in the build tree
    doc = json.loads(gzip.decompress(built.map.read_bytes()))
    assert doc["build_dirs"] == ["$BUILD"]
    b_obj = next(o for o in doc["objects"] if o["source"] == "csrc/b.cu")
    b_obj["deps"].append("$BUILD/gen.cuh")
    marked = tmp_path / "marked.json.gz"
    marked.write_bytes(gzip.compress(json.dumps(doc).encode()))
    rec = recorded(tmp_path, built.commit, everyone(built))
    for changed in ("$BUILD/gen.cuh", str(generated)):
        result = select("--map", str(marked), "--recordings", str(rec), "--changed", changed,
                        "--build-dir", str(built.build), "--source-root", str(built.repo))
        assert ran(result) == {"test_b"}, changed
    unknown = select("--map", str(marked), "--recordings", str(rec), "--changed", str(generated),
                     "--source-root", str(built.repo))  # no --build-dir: the absolute path is not in the map
    assert unknown["fallback"] == "file-not-in-map"
    answer = json.loads(ksm("query", str(marked), str(generated), "--build-dir", str(built.build),
                            "--source-root", str(built.repo), "--json").stdout)
    assert answer["answers"][0]["status"] == "kernels" and B_K in answer["answers"][0]["kernels"]


# Issue 18, 6: symbolic commits are resolved where they are written, and refused where they are read


def test_symbolic_commits_are_resolved_when_written(built: Built, tmp_path: Path) -> None:
    decode = lambda p: json.loads(gzip.decompress(p.read_bytes()))  # noqa: E731
    out = tmp_path / "head.json.gz"
    assert ksm("build", "--build-dir", str(built.build), "--out", str(out), "--commit", "HEAD",
               "--no-cache").returncode == 0
    assert decode(out)["commit"] == built.commit
    env = dict(os.environ, BUILDKITE_COMMIT="HEAD")
    assert ksm("build", "--build-dir", str(built.build), "--out", str(out), "--no-cache", env=env).returncode == 0
    assert decode(out)["commit"] == built.commit  # found from the tree's own project, without --source-root
    rec = tmp_path / "rec"
    proc = ksm("record", "--step", "s", "--out", str(rec), "--commit", "HEAD", "--", sys.executable, "-c", "pass",
               cwd=built.repo)
    assert json.loads((rec / "s.jsonl").read_text())["commit"] == built.commit, proc.stderr


def test_a_map_commit_that_is_not_a_full_sha_is_a_mismatch(built: Built, tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress(built.map.read_bytes()))
    rec = recorded(tmp_path, "HEAD", everyone(built))
    for name in ("HEAD", built.commit[:12]):
        path = tmp_path / "m.json.gz"
        path.write_bytes(gzip.compress(json.dumps(dict(doc, commit=name)).encode()))
        result = select("--map", str(path), "--recordings", str(rec), "--changed", "csrc/a2.cu")
        assert result["fallback"] == "commit-mismatch" and ran(result) == set(everyone(built)), name


def test_the_no_op_check_sees_a_new_head(built: Built, tmp_path: Path) -> None:
    """An unchanged tree at a new commit: the map must say the new commit, not the cached one."""
    decode = lambda p: json.loads(gzip.decompress(p.read_bytes()))  # noqa: E731
    out = tmp_path / "m.json.gz"
    args = ("build", "--build-dir", str(built.build), "--out", str(out))  # the project: the tree's own
    assert ksm(*args).returncode == 0 and decode(out)["commit"] == built.commit
    git(built.repo, "commit", "-q", "--allow-empty", "-m", "B")
    try:
        proc = ksm(*args)
        assert "(up to date)" not in proc.stdout
        assert decode(out)["commit"] == git(built.repo, "rev-parse", "HEAD") != built.commit
    finally:
        git(built.repo, "reset", "-q", "--soft", built.commit)


# Issue 18, 9: rules match the path a change really names


def test_rules_match_the_normalised_path(built: Built, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"paths": ["csrc/moe/**"], "tests": ["test_moe"]},
                                           {"paths": ["csrc/attention/**"], "tests": ["test_a"]}]}))
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(built.map), "--recordings", str(rec), "--changed", "csrc/moe/../attention/ops.cu",
                    "--rules", str(rules))
    # no map knows the file: the rules decide it on its own (no fallback), by its normalised path
    assert result["fallback"] is None and "test_a" in ran(result) and "test_moe" not in ran(result)
    assert result["files"][0]["decided_by"] == "rules"


def test_rules_decide_under_diff_too(built: Built, tmp_path: Path) -> None:
    """--diff with a map that cannot be used: the rules still get the change set (they are for exactly this)."""
    repo = built.clone(tmp_path / "repo")
    (repo / "csrc" / "host.cpp").write_text("// changed\n")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"paths": ["csrc/host.cpp"], "tests": ["test_b"]}]}))
    rec = recorded(tmp_path, built.commit, everyone(built))
    result = select("--map", str(tmp_path / "missing.json.gz"), "--recordings", str(rec), "--diff", "HEAD",
                    "--rules", str(rules), cwd=repo)
    assert result["fallback"] == "no-map" and ran(result) == {"test_b"}
