"""The consumer: a map of a real build, recordings written here, and every fallback rule."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import nsys
import pytest
from projects import Build

from kernel_symbol_map.cli import main
from kernel_symbol_map.cli.validate import problems
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap, demangle, load
from kernel_symbol_map.consumer.select.recordings import Recording, read
from kernel_symbol_map.consumer.select.selection import select
from kernel_symbol_map.errors import MapError, RecordingError

SILU = "_ZN7kernels11silu_kernelEPfPKfi"
SCALE_F = "_ZN7kernels12scale_kernelIfEEvPT_PKS1_S1_i"
ATTENTION = "_ZN7kernels16attention_kernelEPfPKfi"
GEMM = "_ZN7kernels11gemm_kernelEPfPKfS2_i"
HEADER = "include/kernels/shared_kernel.cuh"
COMMIT = "c0ffee0000000000000000000000000000000000"


@pytest.fixture(scope="module")
def map_file(kernel_builds: dict[str, Build], tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path_factory.mktemp("consumer") / "kernel_symbol_map.json.gz"
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
                 "--commit", COMMIT]) == 0
    return out


@pytest.fixture
def kmap(map_file: Path) -> KernelMap:
    return load(map_file)


def rec(test: str, *kernels: str, complete: bool = True, commit: str = COMMIT) -> Recording:
    return Recording(test, frozenset(kernels), complete, commit, "test")


RECORDINGS = [rec("test_activation", SILU, SCALE_F), rec("test_attention", ATTENTION), rec("test_gemm", GEMM)]


def test_our_map_validates_against_the_shipped_schema(map_file: Path) -> None:
    assert problems(json.loads(gzip.decompress(map_file.read_bytes()))) == []
    assert main(["validate", str(map_file)]) == 0


def test_header_reaches_both_sources_that_instantiate_it(kmap: KernelMap) -> None:
    reach = kmap.kernels_for(HEADER)
    assert reach.status == "kernels"
    assert {lk.source for lk in reach.links} == {"csrc/ops/activation.cu", "csrc/attention/attn.cu"}
    assert {SILU, SCALE_F, ATTENTION} <= reach.symbols
    assert {lk.target for lk in reach.links} == {"ops", "attention"}


def test_sources_for_a_symbol(kmap: KernelMap) -> None:
    origins = kmap.sources_for(SCALE_F)
    assert {(o.source, o.target) for o in origins} == {("csrc/ops/activation.cu", "ops"), ("csrc/attention/attn.cu", "attention")}
    assert demangle(SCALE_F) == "void kernels::scale_kernel<float>(float*, float const*, float, int)"
    assert "csrc/host_only.cpp" in kmap.host_files and not kmap.unknown_files
    assert set(kmap.targets) == {"attention", "core", "fetched_ops", "ops", "rdc_ops"}


def test_select_by_evidence(kmap: KernelMap) -> None:
    s = select(kmap, RECORDINGS, [HEADER])
    assert s.fallback is None
    assert s.to_run == ["test_activation", "test_attention"]
    skipped = next(d for d in s.decisions if d.test == "test_gemm")
    assert not skipped.run and "launched none" in skipped.why


@pytest.mark.parametrize(
    ("changed", "code"),
    [
        (["csrc/host_only.cpp"], "host-file"),
        (["include/kernels/common.h"], "host-file"),  # also compiled into the host-only object
        (["docs/index.md"], "file-not-in-map"),
    ],
)
def test_unclearable_files_fall_back(kmap: KernelMap, changed: list[str], code: str) -> None:
    s = select(kmap, RECORDINGS, changed)
    assert s.fallback == code
    assert s.to_run == ["test_activation", "test_attention", "test_gemm"]


def test_an_object_with_an_error_makes_the_map_no_evidence(kmap: KernelMap) -> None:
    doc = json.loads(json.dumps(kmap.document))
    broken = next(o for o in doc["objects"] if o["source"] == "csrc/core/gemm.cu")
    broken["error"] = "unreadable"
    s = select(KernelMap(doc), RECORDINGS, ["csrc/a/util.cu"])
    assert s.fallback == "map-incomplete" and len(s.to_run) == 3


def test_incomplete_recording_never_removes_its_test(kmap: KernelMap) -> None:
    recordings = [rec("test_activation", SILU), rec("test_gemm", GEMM, complete=False), rec("test_other")]
    s = select(kmap, recordings, [HEADER])
    decided = {d.test: (d.run, d.reason) for d in s.decisions}
    assert decided == {
        "test_activation": (True, "launched"),
        "test_gemm": (True, "recording-incomplete"),
        "test_other": (False, "not-reached"),  # its own complete recording still counts
    }


def test_commit_mismatch_falls_back(kmap: KernelMap) -> None:
    s = select(kmap, [rec("test_gemm", GEMM, commit="other")], [HEADER])
    assert s.fallback == "commit-mismatch" and s.to_run == ["test_gemm"]
    mixed = select(kmap, [rec("test_gemm", GEMM, commit="other"), rec("test_x")], [HEADER])
    assert {d.test: d.reason for d in mixed.decisions} == {"test_gemm": "commit-mismatch", "test_x": "not-reached"}


def test_map_with_reason_falls_back(kmap: KernelMap) -> None:
    doc = dict(kmap.document, objects=[], incomplete=True, reason="1 objects unreadable")
    s = select(KernelMap(doc), RECORDINGS, [HEADER])
    assert s.fallback == "map-incomplete" and len(s.to_run) == 3
    assert select(None, RECORDINGS, [HEADER]).fallback == "no-map"


def test_static_rules_instead_of_everything(map_file: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"paths": ["csrc/*.cpp"], "tests": ["test_gemm"]}]}))
    recs = tmp_path / "r.jsonl"
    recs.write_text("".join(json.dumps({"test": r.test, "kernels": sorted(r.kernels), "complete": True, "commit": COMMIT}) + "\n" for r in RECORDINGS))
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "select", "--map", str(map_file),
                           "--recordings", str(recs), "--changed", "csrc/host_only.cpp", "--rules", str(rules), "--json"],
                          capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout)
    # Per file: the map knows csrc/host_only.cpp but cannot clear it (host-only), so the rules decide it.
    assert doc["fallback"] is None and doc["run"] == ["test_gemm"]
    assert doc["files"][0]["decided_by"] == "rules" and doc["files"][0]["status"] == "host"
    whole = subprocess.run([*proc.args, "--whole-change"], capture_output=True, text=True, check=True)
    doc = json.loads(whole.stdout)
    assert doc["fallback"] == "host-file" and doc["run"] == ["test_gemm"]


def test_recorder_text_files(tmp_path: Path) -> None:
    full = tmp_path / "test_activation.txt"
    full.write_text(f"{SILU}\n{SCALE_F}\n# dropped=0\n# end records=7 unique=2 dropped=0\n")
    dropped = tmp_path / "proc-2.txt"
    dropped.write_text(f"# test=test_gemm\n{GEMM}\n# dropped=3\n# end records=9 unique=1 dropped=3\n")
    unfinished = tmp_path / "test_attention.txt"
    unfinished.write_text(f"{ATTENTION}\n")
    found = {r.test: r for r in read([full, dropped, unfinished], commit=COMMIT)}
    assert found["test_activation"].complete and found["test_activation"].kernels == tuple(sorted({SILU, SCALE_F}))
    assert not found["test_gemm"].complete and "3 records dropped" in found["test_gemm"].why_incomplete
    assert not found["test_attention"].complete and "footer" in found["test_attention"].why_incomplete
    assert all(r.commit == COMMIT for r in found.values())


def test_malformed_recording_lines_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{SILU}\nnot a kernel name\n")
    with pytest.raises(RecordingError, match=rf"{bad}:2: not a mangled kernel name"):
        read([bad])
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"test": "a", "kernels": [], "complete": true}\n{"test": "b", "kernels": "x", "complete": true}\n')
    with pytest.raises(RecordingError, match=rf"{jsonl}:2: \"kernels\" must be a list"):
        read([jsonl])


def test_nsight_systems_export(tmp_path: Path) -> None:
    export = tmp_path / "run.sqlite"
    nsys.sequential(export, {"test_activation": [SILU, SCALE_F], "test_gemm": [GEMM]})
    found = {r.test: set(r.kernels) for r in read([export], commit=COMMIT)}
    # Kernels run after their NVTX range closed; the launch call, on the same thread, is what counts.
    assert found == {"test_activation": {SILU, SCALE_F}, "test_gemm": {GEMM}}


def _bad_maps(tmp: Path, good: dict[str, Any]) -> dict[str, Path]:
    maps = {
        "not a gzip file": b"{}",
        "not JSON": gzip.compress(b"{not json"),
        "unknown map version 2": gzip.compress(json.dumps(dict(good, version=2)).encode()),
        "objects: expected a list, not an object": gzip.compress(json.dumps(dict(good, objects={})).encode()),
    }
    paths = {}
    for reason, data in maps.items():
        paths[reason] = tmp / f"{len(paths)}.json.gz"
        paths[reason].write_bytes(data)
    return paths


def test_bad_maps_get_one_line_errors(map_file: Path, tmp_path: Path) -> None:
    good = json.loads(gzip.decompress(map_file.read_bytes()))
    for reason, path in _bad_maps(tmp_path, good).items():
        with pytest.raises(MapError, match=reason):
            load(path)
        proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "query", str(path), HEADER],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and reason in proc.stderr


def test_load_from_wheel_and_installed_package(map_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.write(map_file, "pkg/kernel_symbol_map.json.gz")
    assert load(wheel).commit == COMMIT
    site = tmp_path / "site"
    (site / "kernel_pkg").mkdir(parents=True)
    (site / "kernel_pkg" / "__init__.py").write_text("")
    (site / "kernel_pkg" / "kernel_symbol_map.json.gz").write_bytes(map_file.read_bytes())
    monkeypatch.syspath_prepend(str(site))
    assert load("kernel_pkg").kernels_for(HEADER).status == "kernels"
    with pytest.raises(MapError, match="no installed package of that name ships one"):
        load("no_such_package_here")


def test_diff_between_maps(map_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(gzip.decompress(map_file.read_bytes()))
    for o in doc["objects"]:
        if o["source"] == "csrc/core/gemm.cu":
            o["symbols"] = ["_Z9new_kernelv"]
        if o["source"] == "csrc/a/util.cu":
            o["source"] = "csrc/a/util_renamed.cu"
    new = tmp_path / "new.json.gz"
    new.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert main(["diff", str(map_file), str(new), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["schema"] == "kernel-symbol-map/diff/2"
    assert result["added"] == [{"symbol": "_Z9new_kernelv", "sources": ["csrc/core/gemm.cu"]}]
    assert result["removed"] == [{"symbol": GEMM, "sources": ["csrc/core/gemm.cu"]}]
    assert result["moved"] == [{"symbol": "_Z13util_a_kernelPi", "from": ["csrc/a/util.cu"], "to": ["csrc/a/util_renamed.cu"]}]


def test_select_cli_text(map_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = tmp_path / "r.jsonl"
    recs.write_text("".join(json.dumps({"test": r.test, "kernels": sorted(r.kernels), "complete": True}) + "\n" for r in RECORDINGS))
    assert main(["select", "--map", str(map_file), "--recordings", str(recs), "--recordings-commit", COMMIT,
                 "--changed", HEADER]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("RUN  test_activation: launched 2 reached kernels")
    assert out[2].startswith("SKIP test_gemm:") and out[-1] == "2 of 3 known tests to run; any test no recording knows runs too"


def test_changed_files_from_git_diff(tmp_path: Path) -> None:
    from kernel_symbol_map.consumer.select.changes import changed_files

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "a.cu").write_text("1\n")
    (tmp_path / "README").write_text("1\n")
    git("add", "-A")
    git("commit", "-qm", "base")
    (tmp_path / "csrc" / "a.cu").write_text("2\n")
    assert changed_files(tmp_path, ["HEAD"], tmp_path).paths == ("csrc/a.cu",)


def test_a_test_no_recording_knows_always_runs(kmap: KernelMap) -> None:
    """A rules file may name a test that no recording knows: with nothing recorded, it is never skipped."""
    from kernel_symbol_map.consumer.select.selection import StaticRules

    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": ["test_unrecorded"]}]})
    s = select(kmap, RECORDINGS, [HEADER], rules)
    decided = {d.test: (d.run, d.reason) for d in s.decisions}
    assert s.fallback is None and decided["test_unrecorded"] == (True, "recording-incomplete")
    assert decided["test_gemm"] == (False, "not-reached")


def test_each_build_marker_resolves_to_its_own_folder() -> None:
    from kernel_symbol_map.mapformat import unspell

    folders = ["/b0", "/b1", "/b2"]
    assert [unspell(p, folders) for p in ("$BUILD/x.cu", "$BUILD1/x.cu", "$BUILD2/gen/y.cu")] == \
        ["/b0/x.cu", "/b1/x.cu", "/b2/gen/y.cu"]
    assert unspell("$BUILD3/x.cu", folders) == "$BUILD3/x.cu"  # a folder the consumer does not have
    assert unspell("$BUILDING/x.cu", folders) == "$BUILDING/x.cu"  # not a marker at all


@pytest.mark.parametrize("ignore", ["all", "dirty", "none"])
def test_changed_files_see_into_submodules(tmp_path: Path, ignore: str) -> None:
    """Whatever a submodule's ``ignore`` says: its edits, and a bumped gitlink expanded into its files."""
    from kernel_symbol_map.consumer.select.changes import changed_files

    def git(where: Path, *args: str) -> str:
        return subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t",
                               "-c", "protocol.file.allow=always", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    sub, top = tmp_path / "sub", tmp_path / "top"
    for repo in (sub, top):
        repo.mkdir()
        git(repo, "init", "-q")
    (sub / "h.cuh").write_text("1\n")
    (sub / "old.cuh").write_text("1\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "s1")
    (top / "k.cu").write_text("1\n")
    git(top, "submodule", "add", "-q", str(sub), "third_party/sub")
    git(top, "config", "-f", ".gitmodules", "submodule.third_party/sub.ignore", ignore)
    git(top, "add", "-A")
    git(top, "commit", "-qm", "base")
    base = git(top, "rev-parse", "HEAD")
    inner = top / "third_party" / "sub"
    (inner / "h.cuh").write_text("2\n")  # an edit inside the submodule, not committed
    assert changed_files(top, [base], top).paths == ("third_party/sub/h.cuh",)
    git(inner, "commit", "-qam", "s2")  # committed there, and the gitlink bumped here
    (inner / "new.cuh").write_text("1\n")  # untracked inside the submodule
    git(top, "add", "third_party/sub")
    git(top, "commit", "-qm", "bump")
    assert changed_files(top, [base], top).paths == ("third_party/sub/h.cuh", "third_party/sub/new.cuh")
    assert changed_files(top / "third_party", [base], top).paths == ("third_party/sub/h.cuh",
                                                                      "third_party/sub/new.cuh")
