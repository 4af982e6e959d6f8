"""The command line, called in-process through ``main([...])``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import toolchains

from kernel_symbol_map import __version__
from kernel_symbol_map.cli import main


def test_symbols_text_is_sorted_and_unique(cuda_corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["symbols", str(cuda_corpus["gencode3.o"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{cuda_corpus['gencode3.o']}: 5 kernels [sm_100 sm_80 sm_90]"
    names = [line.strip() for line in lines[1:]]
    assert names == sorted(set(names)) and len(names) == 5


def test_symbols_json_record_per_file(cuda_corpus: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(cuda_corpus["gencode3.o"]), str(cuda_corpus["lto_only.o"]), str(cuda_corpus["static.a"])]
    assert main(["symbols", "--json", "--per-arch", *paths]) == 1
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["schema"] == "kernel-symbol-map/symbols/1"
    assert doc["tool"] == f"kernel-symbol-map {__version__}"
    first, lto, archive = doc["files"]
    assert set(first) == {"path", "archs", "symbols", "error", "per_arch"}
    assert first["archs"] == ["sm_100", "sm_80", "sm_90"] and first["error"] is None
    assert all(v == first["symbols"] for v in first["per_arch"].values())
    assert lto["symbols"] == [] and "before device link" in lto["error"]
    assert [Path(m["path"]).name for m in archive["members"]][-1] == "static.a(host.o)"
    assert captured.err.strip().splitlines() == [f"ERROR {paths[1]}: {lto['error']}"]


def test_backend_cuobjdump(cuda_corpus: dict[str, Path], cuobjdumps: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    obj = str(cuda_corpus["gencode3.o"])
    assert main(["symbols", obj]) == 0
    native = capsys.readouterr().out
    assert main(["symbols", "--backend", "cuobjdump", "--cuobjdump", cuobjdumps["13.4"], obj]) == 0
    assert capsys.readouterr().out == native


def test_cross_check_agrees(cuda_corpus: dict[str, Path], cuobjdumps: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(cuda_corpus[n]) for n in ("gencode3.o", "static.a", "shared.so", "ptx_only.o")]
    assert main(["symbols", "--cross-check", "--json", "--cuobjdump", cuobjdumps["13.5"], *paths]) == 0
    assert json.loads(capsys.readouterr().out)["differences"] == []


def test_cross_check_reports_a_difference(
    hip_corpus: dict[str, Path], cuobjdumps: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    hip = str(hip_corpus["hipcc.o"])
    assert main(["symbols", "--cross-check", "--cuobjdump", cuobjdumps["13.5"], hip]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR differs: {hip}: native error: None; cuobjdump error:")


def test_missing_cuobjdump_is_an_input_error(
    cuda_corpus: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("kernel_symbol_map.buildtree.toolchain.find_cuobjdump", lambda explicit: None)
    assert main(["symbols", "--backend", "cuobjdump", str(cuda_corpus["gencode3.o"])]) == 1  # the machine's lack
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ERROR cuobjdump: not found" and err[1].startswith("TIP ")


@pytest.mark.parametrize(
    "argv", [["symbols"], ["symbols", "--backend", "nope", "x.o"], ["symbols", "--bogus", "x.o"], ["nope"], []]
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        code = main(argv)
        raise SystemExit(code)
    assert exc.value.code == 2


def test_module_entry_point_and_version() -> None:
    out = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"kernel-symbol-map {__version__}"


def test_demo_builds_the_example_wheel(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    toolchains.require(toolchains.nvcc(), "nvcc")
    assert main(["demo", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ships cuda_ext/kernel_symbol_map.json.gz" in out
    assert "_ops: 3 objects, 4 kernels" in out and "_reduce: 1 object, 2 kernels" in out
    assert "  csrc/attention.cu\n" in out and "duplicates: 1 kernel compiled into more than one object" in out


def test_messages_end_their_lines_when_stdout_and_stderr_share_a_pipe(tmp_path: Path) -> None:
    """show's NO EVIDENCE line, and build's "(up to date)" summary, never run into the next message."""
    folder = tmp_path / "empty-build"
    folder.mkdir()
    (folder / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\n")
    out = tmp_path / "m.json.gz"
    ksm = [sys.executable, "-m", "kernel_symbol_map"]
    for _ in range(2):  # the second run is the "(up to date)" one
        merged = subprocess.run([*ksm, "build", "--build-dir", str(folder), "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True).stdout
        lines = merged.splitlines()
        assert any(line.startswith(("kernel_symbol_map: wrote", "kernel_symbol_map: nothing to do (up to date)"))
                   for line in lines)
        assert any(line.startswith("ERROR no evidence") for line in lines) and merged.endswith("\n")
    assert "(up to date)" in merged
    run = subprocess.run([*ksm, "show", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=False)
    assert run.returncode == 1  # no evidence, as query and size
    shown = run.stdout
    assert any(line.startswith("  NO EVIDENCE: ") for line in shown.splitlines()) and shown.endswith("\n")
