"""One way to name an input, for every command (issue 30, item 2).

A map file, a wheel, a folder of either, an installed package, a quoted glob:
each command resolves them through ``consumer.maps.inputs``, says which file it
chose when a spelling named several, and fails alike when nothing matches.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
from projects import Build

from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps import inputs
from kernel_symbol_map.errors import MapError

ATTENTION = "_ZN7kernels16attention_kernelEPfPKfi"


@pytest.fixture(scope="module")
def map_file(kernel_builds: dict[str, Build], tmp_path_factory: pytest.TempPathFactory) -> Path:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path_factory.mktemp("inputs") / inputs.MAP_NAME
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out)]) == 0
    return out


def wheel(path: Path, map_bytes: bytes, mtime: float) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"my_pkg/{inputs.MAP_NAME}", map_bytes)
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def dist(tmp_path: Path, map_file: Path) -> Path:
    """dist/ after two ``pip wheel`` runs: the older wheel's map is corrupt, so reading it fails."""
    folder = tmp_path / "dist"
    folder.mkdir()
    wheel(folder / "my_pkg-1.0-py3-none-any.whl", b"not gzip", 1_000_000)
    wheel(folder / "my_pkg-1.1-py3-none-any.whl", map_file.read_bytes(), 2_000_000)
    return folder


@pytest.mark.parametrize("spelled", ["{dist}", "{dist}/my_pkg-*.whl"])
def test_a_folder_or_glob_of_several_wheels_reads_the_newest_and_says_so(
        dist: Path, spelled: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", spelled.format(dist=dist)]) == 0
    err = capsys.readouterr().err
    assert f"NOTE {spelled.format(dist=dist)}: {dist}/my_pkg-1.1-py3-none-any.whl, the newest of 2 wheels" in err


def test_the_newest_is_by_time_not_by_name(dist: Path) -> None:
    os.utime(dist / "my_pkg-1.0-py3-none-any.whl", (3_000_000, 3_000_000))
    assert inputs.resolve(str(dist)).path.name == "my_pkg-1.0-py3-none-any.whl"


def test_a_glob_of_several_files_that_are_not_wheels_is_refused(tmp_path: Path, map_file: Path) -> None:
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(map_file, tmp_path / name)
    with pytest.raises(MapError, match=r"matches 2 files \(.*a\.json\.gz, .*b\.json\.gz\); name the one to read"):
        inputs.resolve(str(tmp_path / "*.json.gz"))
    os.unlink(tmp_path / "b.json.gz")
    found = inputs.resolve(str(tmp_path / "*.json.gz"))
    assert (found.kind, found.path) == ("map", tmp_path / "a.json.gz")
    wheel(tmp_path / "p-1.0-py3-none-any.whl", map_file.read_bytes(), 1_000_000)  # a wheel and a map: which?
    with pytest.raises(MapError, match=r"matches 2 files"):
        inputs.resolve(str(tmp_path / "*"))


COMMANDS = [
    ["show", "{x}"], ["query", "{x}", "k"], ["size", "{x}"], ["diff", "{x}", "{x}"], ["validate", "{x}"],
    ["merge", "{out}", "{x}"],
]  # select too, but a map it cannot read makes every test run (exit 0): tests/test_selection_safety.py


@pytest.mark.parametrize("spelled", ["nosuch.json.gz", "no_such_package", "nosuch-*.whl"])
def test_nothing_found_is_the_same_error_for_every_command(
        tmp_path: Path, spelled: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lines = set()
    for command in COMMANDS:
        code = main([a.format(x=spelled, out=str(tmp_path / "out")) for a in command])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1, (command, err)
        lines.add(err[0])
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith(f"ERROR {spelled}: not a map (") and "a quoted glob" in line


def test_an_installed_package_is_an_input_of_size_as_of_show(
        tmp_path: Path, map_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    (site / "my_kernels").mkdir(parents=True)
    (site / "my_kernels" / "__init__.py").write_text("")
    shutil.copy(map_file, site / "my_kernels" / inputs.MAP_NAME)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(tmp_path)
    assert main(["show", "my_kernels"]) == 0
    assert main(["size", "my_kernels", "--by", "target"]) == 0
    assert "device code" in capsys.readouterr().out


def test_a_folder_of_the_same_name_does_not_shadow_the_package(tmp_path: Path, map_file: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    (site / "my_kernels").mkdir(parents=True)
    shutil.copy(map_file, site / "my_kernels" / inputs.MAP_NAME)
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "work" / "my_kernels").mkdir(parents=True)  # a source folder named as the package
    monkeypatch.chdir(tmp_path / "work")
    found = inputs.resolve("my_kernels")  # the folder holds no map: the package's is read, not shadowed
    assert (found.kind, found.path) == ("package", site / "my_kernels" / inputs.MAP_NAME)


@pytest.mark.parametrize("current", ["", "cwd"], ids=["empty-entry", "spelled-out"])
def test_a_source_package_in_the_current_folder_never_stands_for_the_installed_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, current: str) -> None:
    """``python -c`` and some launchers put the current folder on ``sys.path`` (as "" or spelled out): the
    project's source package there (an ``__init__.py``, no map) must not hide the installed one's map."""
    site = tmp_path / "site"
    (site / "my_kernels").mkdir(parents=True)
    (site / "my_kernels" / "__init__.py").write_text("")
    (site / "my_kernels" / inputs.MAP_NAME).write_bytes(b"")  # found, not read
    (tmp_path / "work" / "my_kernels").mkdir(parents=True)
    (tmp_path / "work" / "my_kernels" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path / "work")
    here = os.getcwd() if current == "cwd" else ""
    monkeypatch.setattr(sys, "path", [here, str(site), *sys.path])
    importlib.invalidate_caches()
    found = inputs.resolve("my_kernels")
    assert (found.kind, found.path) == ("package", site / "my_kernels" / inputs.MAP_NAME)


def test_a_path_inside_the_project_is_read_from_the_current_folder_first(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    top = tmp_path / "proj"
    (top / "src" / "mc").mkdir(parents=True)
    (top / "src" / "mc" / "lorensen.cu").write_text("")
    (top / "mc").mkdir()
    monkeypatch.chdir(top / "src")
    assert inputs.project_path("../src/mc/lorensen.cu", top) == (
        "src/mc/lorensen.cu", "../src/mc/lorensen.cu from the current folder: src/mc/lorensen.cu")
    assert inputs.project_path("mc/lorensen.cu", top)[0] == "src/mc/lorensen.cu"  # here before the top
    assert inputs.project_path("mc/other.cu", top) == ("mc/other.cu", "")  # not here: the project's spelling
    monkeypatch.chdir(top)
    assert inputs.project_path("src/mc/lorensen.cu", top) == ("src/mc/lorensen.cu", "")
    monkeypatch.chdir(tmp_path)
    assert inputs.project_path("proj/src/mc/lorensen.cu", top) == \
        ("src/mc/lorensen.cu", "proj/src/mc/lorensen.cu from the current folder: src/mc/lorensen.cu")
    (tmp_path / "outside.cu").write_text("")
    monkeypatch.chdir(top / "src")
    assert inputs.project_path("../../outside.cu", top) == ("../../outside.cu", "")  # there, but not the project's


def test_a_changed_file_both_here_and_at_the_top_is_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """select must not miss the file a person meant: from tools/, csrc/a.cu may be tools/csrc/a.cu or
    csrc/a.cu; both are looked up (a deleted file, in neither, keeps the project's spelling)."""
    top = tmp_path / "proj"
    for folder in (top / "csrc", top / "tools" / "csrc"):
        folder.mkdir(parents=True)
        (folder / "a.cu").write_text("")
    monkeypatch.chdir(top / "tools")
    assert inputs.project_paths("csrc/a.cu", top) == ["tools/csrc/a.cu", "csrc/a.cu"]
    assert inputs.project_paths("csrc/gone.cu", top) == ["csrc/gone.cu"]
    os.unlink(top / "csrc" / "a.cu")  # deleted at the top by the change: git diff still names csrc/a.cu
    assert inputs.project_paths("csrc/a.cu", top) == ["tools/csrc/a.cu", "csrc/a.cu"]
    assert inputs.project_paths("../csrc/a.cu", top) == ["csrc/a.cu"]  # from tools/: no top spelling


@pytest.mark.parametrize("spelled", ["{dist}", "{dist}/my_pkg-*.whl"])
def test_select_never_chooses_a_map_by_its_time(dist: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                spelled: str) -> None:
    """Show reads the newest wheel of dist/; select refuses to choose (a stale map skips tests), and runs
    every test, as for any map it cannot read: a folder or a glob alike."""
    recordings = tmp_path / "r.jsonl"
    recordings.write_text('{"test": "t", "kernels": [], "complete": true}\n')
    assert main(["select", "--map", spelled.format(dist=dist), "--recordings", str(recordings), "--changed", "a.cu",
                 "--json"]) == 0
    captured = capsys.readouterr()
    assert "2 wheels" in captured.err and "name the one to read" in captured.err
    assert '"fallback": "map-unreadable"' in captured.out



def test_a_file_of_any_name_is_a_map_except_where_binaries_are_taken(tmp_path: Path) -> None:
    """``show base.map`` reads a map whatever its name; only ``size`` measures a file not named like a map."""
    renamed = tmp_path / "base.map"
    renamed.write_bytes(b"")
    assert inputs.resolve(str(renamed)).kind == "map"
    assert inputs.resolve(str(renamed), binaries=True).kind == "binary"
    named = tmp_path / "kernel_symbol_map.json.gz"
    named.write_bytes(b"")
    assert inputs.resolve(str(named), binaries=True).kind == "map"
