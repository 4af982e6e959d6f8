"""What each command tells people and scripts: every misleading output of issue 17, one test each.

Run through the CLI in a fresh process, as a user or a CI step would, on a
real map of tests/projects/kernels.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from projects import Build

from kernel_symbol_map.cli import COMMANDS, build_parser
from kernel_symbol_map.consumer.maps.names import readable

SCALE_F = "_ZN7kernels12scale_kernelIfEEvPT_PKS1_S1_i"
SCALE_H = "_ZN7kernels12scale_kernelIdEEvPT_PKS1_S1_i"
SILU = "_ZN7kernels11silu_kernelEPfPKfi"
GEMM = "_ZN7kernels11gemm_kernelEPfPKfS2_i"
COMMIT = "c0ffee0000000000000000000000000000000000"


def ksm(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_symbol_map", *args], capture_output=True, text=True,
                          cwd=cwd, check=False)


@pytest.fixture(scope="module")
def built(kernel_builds: dict[str, Build], tmp_path_factory: pytest.TempPathFactory) -> tuple[Build, Path]:
    b = kernel_builds["3.25-ninja"]
    out = tmp_path_factory.mktemp("outputs") / "kernel_symbol_map.json.gz"
    proc = ksm("build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out),
               "--commit", COMMIT)
    assert proc.returncode == 0, proc.stderr
    return b, out


def recording(folder: Path, tests: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "step.jsonl"
    path.write_text("".join(json.dumps({"test": t, "kernels": k, "complete": True, "commit": COMMIT}) + "\n"
                            for t, k in tests.items()))
    return path


def wheel_of(map_file: Path, where: Path) -> Path:
    wheel = where / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.write(map_file, "pkg/kernel_symbol_map.json.gz")
    return wheel


TESTS = {"test_silu": [SILU], "test_gemm": [GEMM]}


def test_a_fallback_summary_says_every_test_runs(built: tuple[Build, Path], tmp_path: Path) -> None:
    _, map_file = built
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    proc = ksm("select", "--map", str(map_file), "--recordings", str(bad), "--changed", "csrc/core/gemm.cu")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stdout.splitlines()[-1] == "every test runs (recording-unreadable); 0 known to the recordings"
    assert "0 of 0" not in proc.stdout


def test_strict_exits_1_on_a_missing_map(built: tuple[Build, Path], tmp_path: Path) -> None:
    rec = recording(tmp_path, TESTS)
    proc = ksm("select", "--map", str(tmp_path / "missing.json.gz"), "--recordings", str(rec), "--changed",
               "csrc/core/gemm.cu", "--strict")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "FALLBACK no-map: " in proc.stdout and "missing.json.gz" in proc.stdout
    assert "no map was given" not in proc.stdout
    lenient = ksm("select", "--map", str(tmp_path / "missing.json.gz"), "--recordings", str(rec), "--changed", "x")
    assert lenient.returncode == 0


@pytest.mark.parametrize("code", ["map-incomplete", "commit-mismatch", "recording-unreadable"])
def test_strict_covers_every_evidence_fallback(built: tuple[Build, Path], tmp_path: Path, code: str) -> None:
    _, map_file = built
    doc = json.loads(gzip.decompress(map_file.read_bytes()))
    recording(tmp_path, TESTS)  # the folder select reads
    if code == "map-incomplete":
        doc.update(incomplete=True, objects=[], reason="1 objects unreadable")
    elif code == "commit-mismatch":
        doc["commit"] = ""
    else:
        (tmp_path / "broken.jsonl").write_text("[]\n")
    path = tmp_path / "m.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    args = ["select", "--map", str(path), "--recordings", str(tmp_path), "--changed", "csrc/core/gemm.cu", "--json"]
    lenient, strict = ksm(*args), ksm(*args, "--strict")
    assert json.loads(lenient.stdout)["fallback"] == code and lenient.returncode == 0
    assert strict.returncode == 1


def test_a_host_file_change_is_an_answer_not_an_evidence_failure(built: tuple[Build, Path], tmp_path: Path) -> None:
    _, map_file = built
    rec = recording(tmp_path, TESTS)
    proc = ksm("select", "--map", str(map_file), "--recordings", str(rec), "--changed", "csrc/host_only.cpp",
               "--strict")
    assert proc.returncode == 0 and "FALLBACK host-file" in proc.stdout


def test_a_folder_of_recordings_is_read_not_named_as_a_test(built: tuple[Build, Path], tmp_path: Path) -> None:
    _, map_file = built
    folder = tmp_path / "recordings"
    recording(folder, TESTS)
    result = json.loads(ksm("select", "--map", str(map_file), "--recordings", str(folder), "--changed",
                            "csrc/core/gemm.cu", "--json").stdout)
    assert {d["test"] for d in result["decisions"]} == {"test_silu", "test_gemm"}
    assert result["run"] == ["test_gemm"] and result["skip"] == ["test_silu"]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = ksm("select", "--map", str(map_file), "--recordings", str(empty), "--changed", "csrc/core/gemm.cu")
    assert "a folder with no recordings" in proc.stderr and "empty" not in proc.stdout.split("\n", 1)[0].split()


@pytest.mark.parametrize("command", ["show", "query", "validate", "diff", "select", "merge"])
def test_every_command_takes_a_map_a_wheel_or_a_folder(built: tuple[Build, Path], tmp_path: Path,
                                                       command: str) -> None:
    _, map_file = built
    wheels = tmp_path / "dist"
    wheels.mkdir()
    wheel = wheel_of(map_file, wheels)
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "kernel_symbol_map.json.gz").write_bytes(map_file.read_bytes())
    rec = recording(tmp_path / "rec", TESTS)
    for spelling in (map_file, wheel, wheels, folder):
        args = {
            "show": ["show", str(spelling)],
            "query": ["query", str(spelling), GEMM],
            "validate": ["validate", str(spelling)],
            "diff": ["diff", str(spelling), str(map_file)],
            "select": ["select", "--map", str(spelling), "--recordings", str(rec), "--changed", "csrc/core/gemm.cu",
                       "--strict"],
            "merge": ["merge", str(tmp_path / "merged.json.gz"), str(spelling)],
        }[command]
        proc = ksm(*args)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (spelling, proc.stdout, proc.stderr)


def test_query_resolves_paths_from_the_git_top_level_as_select_does(built: tuple[Build, Path], tmp_path: Path) -> None:
    b, map_file = built
    made = not (b.source / ".git").exists()  # the session's shared build is a checkout already (issue 26)
    if made:
        subprocess.run(["git", "init", "-q", str(b.source)], check=True)
    try:
        inside = b.source / "csrc" / "core"
        answer = json.loads(ksm("query", str(map_file), "csrc/core/gemm.cu", "--json", cwd=inside).stdout)
        assert answer["answers"][0]["status"] == "kernels"
    finally:
        if made:  # never remove the repository later users of the shared build rely on
            subprocess.run(["rm", "-rf", str(b.source / ".git")], check=True)


def test_a_folder_never_shadows_an_installed_package(built: tuple[Build, Path], tmp_path: Path) -> None:
    """``query vllm`` in vLLM's checkout means the installed package, not the source folder ``vllm/``."""
    _, map_file = built
    site = tmp_path / "site" / "kernel_pkg"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    (site / "kernel_symbol_map.json.gz").write_bytes(map_file.read_bytes())
    checkout = tmp_path / "checkout"
    (checkout / "kernel_pkg").mkdir(parents=True)
    (checkout / "kernel_pkg" / "__init__.py").write_text("")  # the project's own source folder: no map
    env = dict(os.environ, PYTHONPATH=str(site.parent))
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "query", "kernel_pkg", GEMM], cwd=checkout,
                          env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "csrc/core/gemm.cu" in proc.stdout, proc.stderr


def test_every_line_is_flushed_as_it_happens(built: tuple[Build, Path]) -> None:
    """In a pipe (a CI log), stdout is line-buffered: progress appears when it happens, not at exit."""
    _, map_file = built
    code = ("import sys; from kernel_symbol_map.cli import main; main(['show', sys.argv[1]]); "
            "print(sys.stdout.line_buffering, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, str(map_file)], capture_output=True, text=True, check=True)
    assert proc.stderr.strip() == "True"


def test_a_mistyped_flag_is_named_with_a_suggestion(built: tuple[Build, Path], tmp_path: Path) -> None:
    _, map_file = built
    proc = ksm("select", "--map", str(map_file), "--recordings", str(tmp_path), "--chnaged", "x.cu")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["ERROR select has no option --chnaged", "TIP did you mean --changed?"]
    passed_on = ksm("record", "--step", "s", "--out", str(tmp_path / "r"), "--", sys.executable, "-c", "pass",
                    "--not-ours")
    assert "has no option" not in passed_on.stderr  # after --, the command's own flags


def test_query_takes_a_demangled_name_or_suggests(built: tuple[Build, Path]) -> None:
    _, map_file = built
    proc = ksm("query", str(map_file), "scale_kernel", "--json")
    answers = json.loads(proc.stdout)["answers"]
    assert {a["symbol"] for a in answers} == {SCALE_F, SCALE_H} and proc.returncode == 0
    exact = json.loads(ksm("query", str(map_file), "kernels::scale_kernel<float>", "--json").stdout)["answers"]
    assert [a["symbol"] for a in exact] == [SCALE_F]
    typo = ksm("query", str(map_file), "scale_kernal")
    assert typo.returncode == 1 and "ERROR scale_kernal: neither a file of the map nor a kernel" in typo.stderr
    assert "TIP did you mean scale_kernel" in typo.stderr
    source = next(o["source"] for o in json.loads(gzip.decompress(map_file.read_bytes()))["objects"] if o["symbols"])
    elsewhere = ksm("query", str(map_file), "somewhere/else/" + source.rsplit("/", 1)[-1])
    assert elsewhere.returncode == 1 and source in elsewhere.stderr.splitlines()[-1], elsewhere.stderr
    assert ksm("query", str(map_file), source).returncode == 0


def test_diff_names_the_sources_of_added_and_removed_kernels(built: tuple[Build, Path], tmp_path: Path) -> None:
    _, map_file = built
    doc = json.loads(gzip.decompress(map_file.read_bytes()))
    for o in doc["objects"]:
        if o["source"] == "csrc/core/gemm.cu":
            o["symbols"] = ["_Z10new_kernelv"]
    new = tmp_path / "new.json.gz"
    new.write_bytes(gzip.compress(json.dumps(doc).encode()))
    lines = ksm("diff", str(map_file), str(new)).stdout.splitlines()  # as people read them
    assert "+ new_kernel (csrc/core/gemm.cu)" in lines, lines
    assert f"- {readable(GEMM)} (csrc/core/gemm.cu)" in lines and readable(GEMM) != GEMM
    lines = ksm("diff", str(map_file), str(new), "--mangled").stdout.splitlines()
    assert "+ _Z10new_kernelv (csrc/core/gemm.cu)" in lines and f"- {GEMM} (csrc/core/gemm.cu)" in lines


@pytest.mark.parametrize("command", ["show", "validate", "build", "merge"])
def test_json_on_every_command_a_script_reads(built: tuple[Build, Path], tmp_path: Path, command: str) -> None:
    b, map_file = built
    args = {
        "show": ["show", str(map_file)],
        "validate": ["validate", str(map_file)],
        "build": ["build", "--build-dir", str(b.build), "--out", str(tmp_path / "m.json.gz"), "--commit", "c"],
        "merge": ["merge", str(tmp_path / "merged.json.gz"), str(map_file)],
    }[command]
    proc = ksm(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out["schema"] == f"kernel-symbol-map/{command}/1"


def test_every_subcommand_has_a_description_without_markup() -> None:
    sub = next(a for a in build_parser("*")._actions if a.__class__.__name__ == "_SubParsersAction")
    assert len(sub.choices) == len(COMMANDS)
    for name, parser in sub.choices.items():
        assert parser.description and len(parser.description) > 40, name
        assert "``" not in parser.format_help() and ":func:" not in parser.format_help(), name


def test_counts_read_as_english_and_host_links_name_objects(built: tuple[Build, Path]) -> None:
    _, map_file = built
    shown = ksm("show", str(map_file)).stdout
    assert "attention: 1 object, 3 kernels" in shown and not re.search(r"(?<!\d)1 (objects|kernels)", shown)
    why = json.loads(ksm("query", str(map_file), "include/kernels/common.h", "--json").stdout)["answers"][0]["why"]
    assert "also compiled into 1 host-only object: CMakeFiles/" in why and "(from csrc/host_only.cpp)" in why


def test_a_build_folder_that_does_not_exist_is_named_so(tmp_path: Path) -> None:
    proc = ksm("build", "--build-dir", str(tmp_path / "buld"))
    assert proc.returncode == 0 and f"{tmp_path / 'buld'}: no such folder" in proc.stderr


@pytest.mark.parametrize("doc", [{}, {"schema": "s", "empty": [], "none": None},
                                 {"items": [1, "é", {"a": [1, 2]}, None, 1.5], "nested": {"k": ["v"]}, "n": -1}])
def test_machine_output_is_the_document_a_line_per_key_and_per_item(doc: dict[str, Any]) -> None:
    """``--json`` text: what json.loads reads back is the document; each top-level key, and each item of a
    top-level list, has a line of its own (grep and diff read it a decision at a time)."""
    from kernel_symbol_map.cli._output import json_text

    text = json_text(doc)
    assert json.loads(text) == doc and text.endswith("\n") and text.isascii()
    lines = text.splitlines()
    expected = sum(1 + (len(v) + 1 if isinstance(v, list) and v else 0) for v in doc.values())
    assert len(lines) == (expected + 2 if doc else 1), text


def test_machine_output_in_pieces_is_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A top-level list is encoded a few items at a time (test names without an encoder set up for each), and
    written as it is encoded: the text is what one encode of each item gives, whatever the pieces."""
    from kernel_symbol_map.cli import _output

    doc = {"run": [f"t::{i}" for i in range(7)], "mixed": ["a", 1, {"b": ["c"]}, "\u00e9", None, "d", 2.5],
           "decisions": [{"test": f"t::{i}", "run": i % 2 == 0} for i in range(5)], "summary": "x"}
    whole = "{\n" + ",\n".join(
        f" {json.dumps(k)}: " + ("[\n  " + ",\n  ".join(map(json.dumps, v)) + "\n ]" if isinstance(v, list) else
                                 json.dumps(v)) for k, v in doc.items()) + "\n}\n"
    for size in (1, 2, 3, 1000):
        monkeypatch.setattr(_output, "ITEMS_A_PIECE", size)
        assert _output.json_text(doc) == whole, size


def _top_headers_counted_plainly(doc: dict[str, Any], headers: int) -> dict[str, list[str]]:
    """Each object's top project headers as show defines them, counted the plain way: per header, the objects
    whose deps hold it; absolute paths and the objects' own sources are no project headers."""
    sources = {o["source"] for o in doc["objects"]}
    fan_in: dict[str, int] = {}
    for o in doc["objects"]:
        for d in set(o["deps"]):
            if not d.startswith("/") and d not in sources:
                fan_in[d] = fan_in.get(d, 0) + 1
    return {o["object"]: sorted((d for d in o["deps"] if d in fan_in), key=lambda d: (-fan_in[d], d))[:headers]
            for o in doc["objects"]}


@pytest.mark.parametrize("seed", range(20))
def test_show_names_each_sources_most_shared_project_headers(seed: int) -> None:
    from kernel_symbol_map.cli.show import summary

    rng = random.Random(seed)
    pool = [f"include/h{i}.cuh" for i in range(12)] + [f"/usr/include/s{i}.h" for i in range(6)] + \
        [f"csrc/k{i}.cu" for i in range(6)]
    objects = []
    for i in range(rng.randrange(1, 7)):
        deps = rng.sample(pool, rng.randrange(0, 10))
        deps += rng.sample(deps, min(len(deps), rng.randrange(0, 2)))  # a dep listed twice: no writer does it
        objects.append({"source": f"csrc/k{i}.cu", "target": f"t{i % 2}", "object": f"k{i}.o", "device": True,
                        "symbols": [f"_Z1k{i}v"], "deps": deps})
    doc = {"commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": [], "errors": [], "stats": {},
           "objects": objects}
    headers = rng.randrange(0, 5)
    shown = {e["object"]: e["top_headers"] for t in summary(doc, headers)["targets"] for e in t["sources"]}
    assert shown == _top_headers_counted_plainly(doc, headers)


@pytest.mark.parametrize(("argv", "lines"), [
    (["shwo", "x"], ["ERROR no command 'shwo'", "TIP did you mean show?"]),
    (["frobnicate"], ["ERROR no command 'frobnicate'", "TIP kernel-symbol-map --help"]),
    (["size", "--by", "sources", "x"], ["ERROR size --by has no choice 'sources'", "TIP did you mean source?"]),
    (["size", "--by=kernal", "x"], ["ERROR size --by has no choice 'kernal'", "TIP did you mean kernel?"]),
    (["build", "--backend", "zzz"], ["ERROR build --backend has no choice 'zzz'",
                                     "TIP choose from native, cuobjdump"]),
])
def test_a_mistyped_command_or_choice_is_named_with_a_suggestion(argv: list[str], lines: list[str]) -> None:
    """Issue 30: argparse's "invalid choice" lists every command, or every value, and suggests none."""
    proc = ksm(*argv)
    assert proc.returncode == 2 and proc.stderr.splitlines() == lines, proc.stderr
