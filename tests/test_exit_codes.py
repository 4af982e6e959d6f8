"""One exit-code contract for every command (issue 30): its success and failure codes, command by command.

The codes are cli._output's constants, never literals, so that the contract,
the code and the README's "Exit codes" table cannot drift apart. Commands run
through ``main([...])`` on a real map of tests/projects/kernels; ``record`` runs
real commands. ``demo`` is left out: it builds a project of its own (minutes),
and its exit is ``build``'s and ``select``'s.
"""

from __future__ import annotations

import gzip
import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from projects import Build
from test_ci_recipes import GELU, SILU, selection_for

from kernel_symbol_map import _words
from kernel_symbol_map.cli import _output, main
from kernel_symbol_map.cli._output import (
    EXIT_CANNOT_TELL,
    EXIT_CODES,
    EXIT_INPUT,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SIGNAL,
    EXIT_USAGE,
)

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "c0ffee0000000000000000000000000000000000"
GEMM = "csrc/core/gemm.cu"
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="module")
def built(kernel_builds: dict[str, Build], tmp_path_factory: pytest.TempPathFactory) -> tuple[Build, Path]:
    """A real build tree and its map (``build`` exiting 0 is the first success it checks)."""
    b = kernel_builds["3.25-ninja"]
    out = tmp_path_factory.mktemp("exit-codes") / "kernel_symbol_map.json.gz"
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
                 "--commit", COMMIT]) == EXIT_OK
    return b, out


@pytest.fixture
def ksm(capsys: pytest.CaptureFixture[str]) -> Run:
    """``main(argv)`` -> (exit code, stdout, stderr); argparse's own usage errors exit through SystemExit."""

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else EXIT_USAGE
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _doc(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _write(doc: dict[str, Any], path: Path) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def no_evidence(map_file: Path, where: Path, errors: int = 0) -> Path:
    """A copy of a real map that failed closed, as the format marks it: incomplete, a reason, no objects."""
    doc = _doc(map_file)
    doc.update(incomplete=True, objects=[], reason=f"{errors} objects unreadable (a test's copy)",
               errors=[{"object": f"$BUILD/x{i}.o", "source": f"csrc/x{i}.cu", "target": "x", "error": f"bad {i}"}
                       for i in range(errors)])
    return _write(doc, where)


def other_project(map_file: Path, where: Path) -> Path:
    """The same kernels, built by a project that shares no target and no source with the map's."""
    doc = _doc(map_file)
    for o in doc["objects"]:
        o["target"], o["source"] = f"other_{o['target']}", f"elsewhere/{o['source']}"
    doc.pop("target_links", None)
    doc.pop("all_targets", None)
    doc.pop("only_targets", None)
    return _write(doc, where)


def errors_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ERROR ")]


# ---- the contract itself ------------------------------------------------------------------------------


def test_the_contract_has_one_meaning_per_code() -> None:
    codes = [code for code, _ in EXIT_CODES]
    assert len(codes) == len(set(codes))
    assert {EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_CANNOT_TELL, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND} <= \
        {int(c) for c in codes if c.isdigit()}
    assert (EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SIGNAL) == (126, 127, 128)  # what env, nice, timeout exit


def markdown_table(rows: tuple[tuple[str, str], ...]) -> str:
    """The table as the README holds it (what the lead pastes under "## Exit codes")."""
    return "| code | meaning |\n| --- | --- |\n" + "".join(f"| `{code}` | {meaning} |\n" for code, meaning in rows)


def table_under_exit_codes(text: str) -> list[tuple[str, str]] | None:
    """The rows of the first table under the "Exit codes" heading of ``text``, or None while there is none."""
    heading = re.search(r"^#+\s+Exit codes\s*$", text, re.MULTILINE)
    if heading is None:
        return None
    rows = []
    for line in text[heading.end():].splitlines():
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and not set(cells[0]) <= set("-: "):
            rows.append((cells[0].strip("`"), cells[1]))
    return rows[1:] if rows else None  # the first row is the header


def test_the_table_reader_reads_the_contract_back() -> None:
    text = f"# Tool\n\n## Exit codes\n\nEvery command:\n\n{markdown_table(EXIT_CODES)}\nAfter.\n\n## Next\n| a | b |\n"
    assert table_under_exit_codes(text) == list(EXIT_CODES)
    assert table_under_exit_codes(text.replace("127", "1")) != list(EXIT_CODES)
    assert table_under_exit_codes("# Tool\n\n## Commands\n| a | b |\n") is None


def test_the_readme_table_is_the_contract() -> None:
    rows = table_under_exit_codes((ROOT / "README.md").read_text())
    if rows is None:
        pytest.skip("README.md has no 'Exit codes' table yet (the lead adds it from cli._output.EXIT_CODES)")
    assert rows == list(EXIT_CODES)


def test_plural_is_shared_by_every_layer() -> None:
    assert _output.plural is _words.plural
    assert (_words.plural(1, "test"), _words.plural(3, "test"), _words.plural(2, "process", "processes")) == \
        ("1 test", "3 tests", "2 processes")


# ---- per command ------------------------------------------------------------------------------------------


def test_symbols(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    b, _ = built
    obj = next(b.build.rglob("gemm.cu.o"))
    assert ksm("symbols", str(obj))[0] == EXIT_OK
    code, _, err = ksm("symbols", str(obj), str(tmp_path / "missing.o"))
    assert code == EXIT_INPUT and "missing.o" in err
    assert ksm("symbols", "--bogus", str(obj))[0] == EXIT_USAGE
    assert ksm("symbols")[0] == EXIT_USAGE


@pytest.mark.parametrize("case", ["missing", "not executable", "a folder"])
def test_a_wrong_cuobjdump_is_named_never_a_difference(built: tuple[Build, Path], tmp_path: Path, ksm: Run,
                                                       case: str) -> None:
    b, _ = built
    obj = next(b.build.rglob("gemm.cu.o"))
    exe = {"missing": tmp_path / "nonexistent", "not executable": tmp_path / "cuobjdump", "a folder": tmp_path}[case]
    if case == "not executable":
        exe.write_text("#!/bin/sh\n")
        exe.chmod(stat.S_IRUSR | stat.S_IWUSR)
    why = {"missing": "not found", "not executable": "not executable", "a folder": "a folder, not a program"}[case]
    for argv in (["--cross-check"], ["--backend", "cuobjdump"]):
        code, out, err = ksm("symbols", *argv, "--cuobjdump", str(exe), str(obj))
        assert code == EXIT_INPUT and out == ""
        assert errors_of(err) == [f"ERROR {exe}: {why}"], err
        assert "differs" not in err


def test_build(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    b, map_file = built
    again = ["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(map_file),
             "--commit", COMMIT]
    code, out, _ = ksm(*again)
    assert code == EXIT_OK
    # Nothing was written: the line says so, and its time is this check's (the build's seconds are in stats).
    assert out.startswith(f"kernel_symbol_map: nothing to do (up to date): {map_file} (") and "wrote" not in out
    assert re.search(r", checked in \d+\.\d\d s\n$", out), out
    code, out, _ = ksm(*again, "--json")
    assert code == EXIT_OK and json.loads(out)["up_to_date"] is True and "checked_seconds" in json.loads(out)
    nothing = tmp_path / "not-a-tree"
    nothing.mkdir()
    assert ksm("build", "--build-dir", str(nothing))[0] == EXIT_OK  # never fails a build...
    assert ksm("build", "--build-dir", str(nothing), "--strict")[0] == EXIT_INPUT  # ... unless asked to
    assert ksm("build")[0] == EXIT_USAGE
    assert ksm("build", "--build-dir", str(b.build), "--mirror", "no-equals-sign")[0] == EXIT_USAGE


def test_build_with_a_wrong_cuobjdump_writes_a_map_that_says_why(built: tuple[Build, Path], tmp_path: Path,
                                                                ksm: Run) -> None:
    b, _ = built
    out, missing = tmp_path / "m.json.gz", tmp_path / "nonexistent"
    argv = ["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
            "--backend", "cuobjdump", "--cuobjdump", str(missing), "--no-cache"]
    code, _, err = ksm(*argv)
    assert code == EXIT_OK
    assert errors_of(err) == [f"ERROR no evidence in {out}: the cuobjdump backend cannot run: {missing}: not found"]
    doc = _doc(out)
    assert doc["incomplete"] and doc["objects"] == [] and f"{missing}: not found" in doc["reason"]
    assert ksm(*argv, "--strict")[0] == EXIT_INPUT


def test_show(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    assert ksm("show", str(map_file))[0] == EXIT_OK
    assert ksm("show", str(map_file), "--json")[0] == EXIT_OK
    empty = no_evidence(map_file, tmp_path / "empty.json.gz", errors=13)
    code, out, err = ksm("show", str(empty))
    assert code == EXIT_INPUT, "a map without evidence answers nothing: as query and size"
    assert "  NO EVIDENCE: 13 objects unreadable" in out
    assert errors_of(err) == [f"ERROR no evidence in {empty}: 13 objects unreadable (a test's copy)"]
    listed = [line for line in out.splitlines() if line.startswith("    $BUILD/x")]
    assert len(listed) == 10 and out.splitlines()[-1] == "    ... and 3 more errors (the map's `errors` lists them all)"
    code, out, _ = ksm("show", str(empty), "--json")
    assert code == EXIT_INPUT and json.loads(out)["evidence"] is False
    assert json.loads(out)["error_examples_left_out"] == 3
    assert ksm("show", str(tmp_path / "missing.json.gz"))[0] == EXIT_INPUT
    assert ksm("show")[0] == EXIT_USAGE


def test_query(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    assert ksm("query", str(map_file), GEMM, "--source-root", str(tmp_path))[0] == EXIT_OK
    assert ksm("query", str(map_file), GEMM, "no_such_kernel", "--source-root", str(tmp_path))[0] == EXIT_INPUT
    empty = no_evidence(map_file, tmp_path / "empty.json.gz")
    assert ksm("query", str(empty), GEMM, "--source-root", str(tmp_path))[0] == EXIT_INPUT
    assert ksm("query", str(tmp_path / "missing.json.gz"), GEMM)[0] == EXIT_INPUT
    assert ksm("query", str(map_file))[0] == EXIT_USAGE


def test_select(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    recordings = tmp_path / "r.jsonl"
    recordings.write_text(json.dumps({"test": "test_gemm", "kernels": [], "complete": True, "commit": COMMIT}) + "\n")
    base = ["select", "--recordings", str(recordings), "--source-root", str(tmp_path), "--changed", GEMM]
    assert ksm(*base, "--map", str(map_file))[0] == EXIT_OK
    missing = ["--map", str(tmp_path / "missing.json.gz")]
    assert ksm(*base, *missing)[0] == EXIT_OK  # a fallback that runs everything is a complete, safe answer...
    assert ksm(*base, *missing, "--strict")[0] == EXIT_INPUT  # ... and a failure when asked to be one
    assert ksm("select", "--map", str(map_file), "--recordings", str(recordings))[0] == EXIT_USAGE


def test_record(tmp_path: Path, ksm: Run) -> None:
    out = tmp_path / "rec"
    record = ["record", "--step", "unit", "--out", str(out), "--"]
    assert ksm(*record, "sh", "-c", "exit 0")[0] == EXIT_OK
    assert ksm(*record, "sh", "-c", "exit 5")[0] == 5  # the command's own status
    assert ksm(*record, "sh", "-c", "kill -TERM $$")[0] == EXIT_SIGNAL + 15
    (out / "unit.jsonl").unlink()
    code, _, err = ksm(*record, "nosuchcmd-kernel-symbol-map")
    assert code == EXIT_NOT_FOUND and errors_of(err) == [
        "ERROR cannot run nosuchcmd-kernel-symbol-map: not found; no recording written"]
    assert not (out / "unit.jsonl").exists()
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\n")
    assert ksm(*record, str(script))[0] == EXIT_NOT_EXECUTABLE
    assert ksm("record", "--step", "unit", "--out", str(out))[0] == EXIT_USAGE
    assert ksm("record", "--out", str(out), "--", "true")[0] == EXIT_USAGE


def _junit(path: Path, cases: list[tuple[str, str, float, bool]]) -> Path:
    body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}">' + ('<failure message="boom"/>' if failed else "")
                   + "</testcase>" for c, n, t, failed in cases)
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


def test_evaluate(tmp_path: Path, ksm: Run) -> None:
    recorded = {"tests/test_k.py::test_silu": [SILU], "tests/test_k.py::test_gelu": [GELU]}
    selection = selection_for(tmp_path, recorded, "csrc/gelu.cu")  # runs test_gelu, skips test_silu
    run = ["evaluate", "--selection", str(selection), "--junit"]
    passed = _junit(tmp_path / "ok.xml", [("tests.test_k", "test_silu", 3.5, False),
                                          ("tests.test_k", "test_gelu", 1.2, False)])
    markdown = tmp_path / "comment.md"
    assert ksm(*run, str(passed), "--markdown", str(markdown))[0] == EXIT_OK
    assert "skipped 1 of 2 tests (50%), saving 3.5 s of 4.7 s." in markdown.read_text()  # not "4 s of 5 s"
    missed = _junit(tmp_path / "miss.xml", [("tests.test_k", "test_silu", 3.5, True),
                                            ("tests.test_k", "test_gelu", 1.2, False)])
    assert ksm(*run, str(missed))[0] == EXIT_INPUT
    renamed = _junit(tmp_path / "renamed.xml", [("ci.tests.test_k", "test_silu", 3.5, True),
                                                ("tests.test_k", "test_gelu", 1.2, False)])
    assert ksm(*run, str(renamed))[0] == EXIT_CANNOT_TELL
    assert ksm("evaluate", "--selection", str(tmp_path / "missing.json"), "--junit", str(passed))[0] == EXIT_INPUT
    assert ksm("evaluate", "--selection", str(selection))[0] == EXIT_USAGE


def test_merge(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    out = tmp_path / "merged.json.gz"
    assert ksm("merge", str(out), str(map_file))[0] == EXIT_OK
    empty = no_evidence(map_file, tmp_path / "empty.json.gz")
    code, _, err = ksm("merge", str(out), str(map_file), str(empty))
    assert code == EXIT_OK and errors_of(err)[0].startswith(f"ERROR no evidence in {out}: ")  # as build...
    assert ksm("merge", str(out), str(map_file), str(empty), "--strict")[0] == EXIT_INPUT  # ... unless --strict
    assert ksm("merge", str(out), str(tmp_path / "missing.json.gz"))[0] == EXIT_INPUT
    assert ksm("merge", str(out))[0] == EXIT_USAGE


def test_diff(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    assert ksm("diff", str(map_file), str(map_file))[0] == EXIT_OK
    other = other_project(map_file, tmp_path / "other.json.gz")
    for old, new in ((map_file, other), (other, map_file)):
        for json_flag in ([], ["--json"]):
            code, out, err = ksm("diff", str(old), str(new), *json_flag)
            assert code == EXIT_INPUT and out == ""
            (line,) = errors_of(err)
            assert line.startswith(f"ERROR {old} and {new} are maps of different projects: ")
    empty = no_evidence(map_file, tmp_path / "empty.json.gz")
    code, out, err = ksm("diff", str(map_file), str(empty))
    assert code == EXIT_INPUT and out == "" and errors_of(err)[0].startswith(f"ERROR no evidence in {empty}")
    assert ksm("diff", str(map_file), str(tmp_path / "missing.json.gz"))[0] == EXIT_INPUT
    assert ksm("diff", str(map_file))[0] == EXIT_USAGE


def test_validate(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    assert ksm("validate", str(map_file))[0] == EXIT_OK
    broken = _doc(map_file)
    broken["version"] = 2
    assert ksm("validate", str(map_file), str(_write(broken, tmp_path / "v2.json.gz")))[0] == EXIT_INPUT
    assert ksm("validate", str(tmp_path / "missing.json.gz"))[0] == EXIT_INPUT
    assert ksm("validate")[0] == EXIT_USAGE


def test_size(built: tuple[Build, Path], tmp_path: Path, ksm: Run) -> None:
    _, map_file = built
    assert ksm("size", str(map_file))[0] == EXIT_OK
    assert ksm("size", str(map_file), "--max-mb", "0.000001")[0] == EXIT_INPUT  # over the budget
    assert ksm("size", str(tmp_path / "missing.o"))[0] == EXIT_INPUT
    assert ksm("size", str(map_file), "--max-mb", "0")[0] == EXIT_USAGE
    empty = no_evidence(map_file, tmp_path / "empty.json.gz")
    code, out, err = ksm("size", str(empty), "--max-mb", "1")  # no evidence is no answer, never 0 B within budget
    assert code == EXIT_INPUT and errors_of(err) == [f"ERROR no evidence in {empty}: 0 objects unreadable (a test's copy)"]
    code, _, err = ksm("size", str(map_file), "--filter", "no_such_kernel", "--max-mb", "0.000001")
    assert code == EXIT_INPUT and "the largest sources: none" not in err  # the budget weighs whole files


def test_a_mistyped_command_is_a_usage_error(ksm: Run) -> None:
    assert ksm("shwo")[0] == EXIT_USAGE
    assert ksm()[0] == EXIT_USAGE
