"""``[tool.kernel-symbol-map]`` in pyproject.toml: select's maps, recordings, rules and external kernels
kept once, as pytest and testmon users keep theirs (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import Build
from test_selection_evidence import A_K, ONE, jsonl, write_map

from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps import config, inputs

COMMIT = "c0ffee0000000000000000000000000000000000"
ATTENTION = "_ZN7kernels16attention_kernelEPfPKfi"
GEMM = "_ZN7kernels11gemm_kernelEPfPKfS2_i"
EXTERNAL = "_Z15nccl_dev_kernelv"  # launched by test_gemm, compiled by no object of the map


@pytest.fixture(scope="module")
def map_file(kernel_builds: dict[str, Build], tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path_factory.mktemp("config") / inputs.MAP_NAME
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
                 "--commit", COMMIT]) == 0
    return out


@pytest.fixture
def project(tmp_path: Path, map_file: Path) -> Path:
    """A project whose pyproject names its map, its recordings and its rules by relative paths."""
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / inputs.MAP_NAME).write_bytes(map_file.read_bytes())
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "r.jsonl").write_text("".join(
        json.dumps({"test": t, "kernels": k, "complete": True, "commit": COMMIT}) + "\n"
        for t, k in (("test_attention", [ATTENTION]), ("test_gemm", [GEMM, EXTERNAL]))))
    (tmp_path / "ci" / "rules.json").write_text(json.dumps({"rules": [{"paths": ["docs/**"], "tests": []}]}))
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\n\n[tool.kernel-symbol-map]\nmap = "dist/"\nrecordings = ["ci/r.jsonl"]\n'
        f'rules = "ci/rules.json"\nexternal-kernels = ["{EXTERNAL}"]\n')
    return tmp_path


def _selection(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    assert main(["select", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_select_takes_what_pyproject_names(project: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--map", str(project / "dist"), "--recordings", str(project / "ci" / "r.jsonl"),
             "--rules", str(project / "ci" / "rules.json"), "--external-kernels", EXTERNAL,
             "--source-root", str(project)]
    changed = ["--changed", "csrc/attention/attn.cu", "docs/index.md"]
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")  # found from below, up to the project's top
    from_flags = _selection(capsys, *flags, *changed)
    from_table = _selection(capsys, "--source-root", str(project), *changed)
    assert from_table["run"] == from_flags["run"] == ["test_attention"]
    assert from_table["skip"] == from_flags["skip"] == ["test_gemm"]
    assert [f["decided_by"] for f in from_table["files"]] == [f["decided_by"] for f in from_flags["files"]]
    assert "rules" in {f["decided_by"] for f in from_table["files"]}  # docs/index.md: the table's rules


def test_a_flag_replaces_its_key(project: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(project)
    empty = project / "none.jsonl"
    empty.write_text("")
    doc = _selection(capsys, "--recordings", str(empty), "--changed", "csrc/attention/attn.cu")
    assert doc["run"] == [] and doc["skip"] == []  # not the table's recordings


def test_the_table_is_said_in_a_note(project: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(project)
    assert main(["select", "--changed", "csrc/attention/attn.cu"]) == 0
    err = capsys.readouterr().err
    assert f"NOTE {project / 'pyproject.toml'}: map, external-kernels, recordings, rules from [tool.kernel-symbol-map]" in err


@pytest.mark.parametrize(("table", "message"), [
    ('recording = ["r"]', "has no key 'recording' (did you mean recordings?)"),
    ("map = 3", "map must be a string or a non-empty list of strings"),
    ("map = []", "map must be a string or a non-empty list of strings"),
    ("rules = []", "rules must be a path (a string)"),
    ("jit-sources = []", "jit-sources must be a string or a non-empty list of strings"),
    ('jit-decorators = ["pkg.jitlib"]', "jit-decorators must be a list of 'module:name' strings"),
    ('jit-decorators = ["pkg.jitlib:"]', "jit-decorators must be a list of 'module:name' strings"),
    ("[tool.kernel-symbol-map.x]", "has no key 'x'"),
])
def test_a_bad_table_is_one_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], table: str, message: str) -> None:
    body = table if table.startswith("[") else f"[tool.kernel-symbol-map]\n{table}"
    (tmp_path / "pyproject.toml").write_text(body + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["select", "--changed", "a.cu"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("ERROR ") and message in err[0], err


def test_without_recordings_anywhere_select_says_where_to_give_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["select", "--changed", "a.cu"]) == 2
    assert "select needs --recordings (or recordings in [tool.kernel-symbol-map]" in capsys.readouterr().err


def test_the_search_stops_at_the_project_top(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kernel-symbol-map]\nmap = 'x'\n")
    top = tmp_path / "proj"
    (top / "a").mkdir(parents=True)
    assert config.find(top / "a", top) is None  # above the top: another project's
    (top / "pyproject.toml").write_text("")
    assert config.find(top / "a", top) == top / "pyproject.toml"
    assert config.load(top / "a", top) == config.Config()
    assert config.find(tmp_path, top) is None  # from outside the project: not even its own folder's


def test_a_tool_that_is_not_a_table_is_one_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("tool = 3\n")
    monkeypatch.chdir(tmp_path)
    assert main(["select", "--changed", "a.cu", "--recordings", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"ERROR {tmp_path / 'pyproject.toml'}: [tool] must be a table"]


@pytest.mark.parametrize(("flag", "value", "run"), [
    ("--rules", "ci/other-rules.json", ["test_attention", "test_gemm"]),  # docs/**: test_gemm, not no test
    ("--map", "other/", ["test_attention", "test_gemm"]),  # no map there: every test
    ("--external-kernels", "_Z5otherv", ["test_attention", "test_gemm"]),  # test_gemm's kernel is unknown again
])
def test_each_flag_replaces_its_key(project: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str], flag: str, value: str, run: list[str]) -> None:
    """The table names the project's; a flag names this run's, alone (never the table's beside it)."""
    (project / "ci" / "other-rules.json").write_text(json.dumps({"rules": [{"paths": ["docs/**"], "tests": ["test_gemm"]}]}))
    (project / "other").mkdir()
    monkeypatch.chdir(project)
    changed = ["--changed", "csrc/attention/attn.cu", "docs/index.md"]
    assert _selection(capsys, *changed)["run"] == ["test_attention"]
    given = value if flag == "--external-kernels" else str(project / value)
    assert sorted(_selection(capsys, flag, given, *changed)["run"]) == run


def test_a_table_path_spelled_as_a_name_is_a_path_when_that_file_is_there(tmp_path: Path) -> None:
    """``map = "dist"`` beside a dist/ folder is that folder (as ``--map dist`` is); a name with nothing of
    that name beside the pyproject is an installed package's."""
    (tmp_path / "dist").mkdir()
    (tmp_path / "rules").write_text('{"rules": []}')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-symbol-map]\nmap = ["dist", "my_kernels"]\nrecordings = "recorded"\nrules = "rules"\n')
    found = config.load(tmp_path, tmp_path)
    assert found.get("map") == [str(tmp_path / "dist"), "my_kernels"]
    assert found.get("recordings") == ["recorded"]
    assert found.rules == str(tmp_path / "rules")


def test_jit_sources_in_the_table_are_the_files_the_package_compiles_at_run_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``jit-sources`` in the table declares csrc/jit/** compiled at run time, as ``--jit-sources`` does: a
    change there runs the test that launched a kernel no map knows (the run-time compile may have made it),
    though the rules name no test for the file and that kernel is declared external."""
    jitted = "_Z6jittedv"
    write_map(tmp_path / "map.json.gz", ONE)
    jsonl(tmp_path / "r.jsonl", {"test_a": [A_K], "test_made": [jitted]})
    (tmp_path / "rules.json").write_text(json.dumps({"rules": [{"paths": ["csrc/jit/**"], "tests": []}]}))
    table = ('[tool.kernel-symbol-map]\nmap = "map.json.gz"\nrecordings = "r.jsonl"\nrules = "rules.json"\n'
             f'external-kernels = ["{jitted}"]\n')
    (tmp_path / "pyproject.toml").write_text(table + 'jit-sources = ["csrc/jit/**"]\n')
    monkeypatch.chdir(tmp_path)
    changed = ["--source-root", str(tmp_path), "--changed", "csrc/jit/kernel.cu"]
    from_table = _selection(capsys, *changed)
    assert from_table["run"] == ["test_made"] and from_table["skip"] == ["test_a"]
    assert [f["decided_by"] for f in from_table["files"]] == ["run-time"]
    assert _selection(capsys, *changed, "--jit-sources", "csrc/jit/**")["run"] == ["test_made"]
    (tmp_path / "pyproject.toml").write_text(table)  # undeclared: the rules' word alone
    assert _selection(capsys, *changed)["run"] == []
