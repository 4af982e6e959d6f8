"""Issue 22: every field checked before use, with its JSON path; every text reader bounded.

The fuzz corpus (test_fuzz_corpus.py) replays what the fuzzers found; these
tests pin each bound and each message on its own, so that removing one fails
here by name.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kernel_symbol_map import mapformat
from kernel_symbol_map.buildtree import ninjafile
from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps.kernelmap import load
from kernel_symbol_map.consumer.select.recordings import read
from kernel_symbol_map.errors import BuildTreeError, MapError, RecordingError

SHA = "c" * 40
OBJECT = {"source": "csrc/a.cu", "target": "t", "object": "a.o", "device": True, "symbols": ["_Z1kv"],
          "deps": ["csrc/a.cu", "include/h.cuh"]}
MAP: dict[str, Any] = {"version": 1, "commit": SHA, "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
                       "incomplete": False, "errors": [], "stats": {"objects": 4},
                       "objects": [{**OBJECT, "object": f"{i}.o"} for i in range(4)]}


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(MAP))  # no list shared between objects
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _gz(doc: Any) -> bytes:
    return gzip.compress(json.dumps(doc).encode(), mtime=0)


# (where, value, the message's start): one per kind of field
BAD_FIELDS = [
    (("objects", 3, "deps", 1), 7, "objects[3].deps[1]: expected a string, not a number"),
    (("objects", 0, "symbols", 0), ["_Z1kv"], "objects[0].symbols[0]: expected a string, not a list"),
    (("objects", 2, "source"), None, "objects[2].source: expected a string, not null"),
    (("objects", 1, "device"), "yes", "objects[1].device: expected true or false, not a string"),
    (("objects", 1, "unity_sources"), ["a.cu", 3], "objects[1].unity_sources[1]: expected a string"),
    (("objects", 0, "deps_from"), "guess", "objects[0].deps_from: expected one of cmake-scan, device-scan-deps, device-preprocessor"),
    (("build_dirs",), ["build", 7], "build_dirs[1]: expected a string, not a number"),
    (("commit",), 5, "commit: expected a string, not a number"),
    (("stats", "objects"), "4", "stats.objects: expected a count, not a string"),
    (("stats", "objects"), -1, "stats.objects: expected a count"),
    (("errors",), {"object": "x"}, "errors: expected a list, not an object"),
    (("objects", 0, "deps", 0), "x" * 5000, "objects[0].deps[0]: a string of 5000 characters"),
    (("target_links",), {"t": [1]}, "target_links.t[0]: expected a string, not a number"),
    (("unmapped_targets",), [{"target": "g"}], "unmapped_targets[0].outputs: missing"),
    (("version",), True, "version: unknown map version True"),  # true == 1 in Python, not in a map
    (("digests",), True, "digests: expected one of 1, 2, 3, 4, 5, not True"),  # a scheme is a number of its own type
    (("digests",), 3.0, "digests: expected one of 1, 2, 3, 4, 5, not 3.0"),
    (("stats", "objects"), True, "stats.objects: expected a count, not a boolean"),
    (("objects", 3, "archs"), ["sm_90", 9], "objects[3].archs[1]: expected a string"),  # one record's optional
    (("objects", 3, "compiled_from"), "x" * 5000, "objects[3].compiled_from: a string of 5000 characters"),
    (("objects", 2), ["a.o"], "objects[2]: expected an object, not a list"),
]


@pytest.mark.parametrize(("where", "value", "message"), BAD_FIELDS, ids=[m.split(":")[0] for _, _, m in BAD_FIELDS])
def test_a_bad_field_is_named_by_its_json_path(where: tuple[Any, ...], value: Any, message: str) -> None:
    problems = mapformat.problems(_changed(where, value))
    assert problems and problems[0].startswith(message), problems


def test_an_errors_entry_is_checked_like_an_object() -> None:
    doc = {**MAP, "incomplete": True, "reason": "1 unreadable", "objects": [],
           "errors": [{"object": "b.o", "source": "csrc/b.cu"}, {"object": "c.o", "source": 7, "error": "x"}]}
    assert mapformat.problems(doc) == ["errors[0].error: missing", "errors[1].source: expected a string, not a number"]


def test_the_validator_stops_at_its_limit_of_problems() -> None:
    doc = _changed(("objects", 0, "deps"), list(range(1000)))
    assert len(mapformat.problems(doc)) == 20


COMMANDS = [
    ["show", "{bad}"], ["show", "--json", "{bad}"], ["query", "{bad}", "csrc/a.cu"], ["validate", "{bad}"],
    ["diff", "{good}", "{bad}"], ["merge", "{out}", "{good}", "{bad}"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_one_validator_serves_every_command(command: list[str], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Each command refuses the map with the same one line, and select falls back on it, exit 0."""
    bad, good = tmp_path / "bad.json.gz", tmp_path / "good.json.gz"
    bad.write_bytes(_gz(_changed(("objects", 3, "deps", 1), 7)))
    good.write_bytes(_gz(MAP))
    argv = [a.format(bad=bad, good=good, out=tmp_path / "out.json.gz") for a in command]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err == f"ERROR {bad}: objects[3].deps[1]: expected a string, not a number\n"
    recording = tmp_path / "t.jsonl"
    recording.write_text(json.dumps({"test": "t", "kernels": ["_Z1kv"], "complete": True, "commit": SHA}) + "\n")
    assert main(["select", "--map", str(bad), "--recordings", str(recording), "--changed", "include/h.cuh"]) == 0
    out = capsys.readouterr().out
    assert "objects[3].deps[1]: expected a string" in out and "RUN  t" in out


def _decode(raw: bytes) -> Any:
    return mapformat.decode_bytes(raw, "m")


def test_a_gzip_bomb_stops_at_its_ratio() -> None:
    bomb = gzip.compress(b" " * (64 << 20))  # 64 MiB of JSON whitespace from some 64 KiB
    with pytest.raises(MapError, match=r"decompresses to more than \d+ MiB \(256x its size"):
        _decode(bomb)


def test_more_containers_than_a_map_has_is_refused_before_parsing() -> None:
    with pytest.raises(MapError, match="more JSON objects and lists than a map has"):
        _decode(gzip.compress(b"[" + b"{}," * 100_000 + b"{}]"))


@pytest.mark.parametrize("escape", [r"\u0000", r"\ud800", r"\udfff", r"\uDC80x"])
def test_a_nul_or_half_a_surrogate_pair_is_refused(escape: str) -> None:
    with pytest.raises(MapError, match="a NUL or half a surrogate pair"):
        _decode(gzip.compress(b'{"p": "a%sb"}' % escape.encode()))


def test_a_whole_surrogate_pair_is_a_character() -> None:
    assert _decode(gzip.compress(rb'{"p": "\ud83d\ude00"}')) == {"p": "\U0001F600"}


@pytest.mark.parametrize(("raw", "message"), [
    (gzip.compress(b'{"p": "\xff"}', mtime=0), "not UTF-8"),
    (gzip.compress(b'{"p": "\xed\xa0\x80"}', mtime=0), "not UTF-8"),  # a surrogate spelled in UTF-8 bytes
    (gzip.compress((b"[" + b" " * 16) * 5000, mtime=0), "nested too deep"),
    (gzip.compress(b"{}", mtime=0)[:-4], "not a gzip file"),
    (b"", "not a gzip file"),
    (gzip.compress(b'{"a": 1', mtime=0), "not JSON"),
])
def test_undecodable_maps_say_why(raw: bytes, message: str) -> None:
    with pytest.raises(MapError, match=message):
        _decode(raw)


def test_concatenated_gzip_members_are_one_map() -> None:
    assert _decode(gzip.compress(b'{"a": ') + gzip.compress(b"1}")) == {"a": 1}


GZIP_CASES = {
    "whole": gzip.compress(b'{"a": [1, 2]}'),
    "two members": gzip.compress(b'{"a": ') + gzip.compress(b"1}"),
    "a member and junk": gzip.compress(b"{}") + b"junk",
    "cut short": gzip.compress(b"{}")[:-4],
    "its CRC wrong": (lambda g: g[:-8] + bytes([g[-8] ^ 1]) + g[-7:])(gzip.compress(b"{}")),
    "its header flags a CRC it lacks": (lambda g: g[:3] + bytes([g[3] | 2]) + g[4:])(gzip.compress(b"{}")),
    "longer than a piece": gzip.compress(b'{"a": "' + b"x" * (3 * mapformat.INFLATE_OUT) + b'"}'),
}


@pytest.mark.parametrize("case", GZIP_CASES)
def test_maps_inflate_as_the_standard_librarys_zlib_inflates_them(case: str, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """zlib-ng inflates maps where it is installed, the standard library's zlib elsewhere: each map, good or
    bad, reads the same with either."""
    import zlib

    def outcome() -> object:
        try:
            return _decode(GZIP_CASES[case])
        except MapError as e:
            return str(e)

    assert mapformat.file._inflating is not zlib  # installed with the package: else this compares zlib with itself
    fast = outcome()
    monkeypatch.setattr(mapformat.file, "_inflating", zlib)
    assert outcome() == fast


def test_load_refuses_with_the_first_bad_path(tmp_path: Path) -> None:
    path = tmp_path / "m.json.gz"
    path.write_bytes(_gz(_changed(("objects", 3, "deps", 1), 7)))
    with pytest.raises(MapError, match=r"objects\[3\]\.deps\[1\]: expected a string, not a number$"):
        load(path)


# -- build.ninja --------------------------------------------------------------------------------

def _manifests(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path / "build.ninja"


@pytest.mark.parametrize("files", [
    {"build.ninja": "include build.ninja\n"},
    {"build.ninja": "subninja ./sub/../build.ninja\n", "sub/.keep": ""},
    {"build.ninja": "include a.ninja\n", "a.ninja": "build x: r y\ninclude b.ninja\n", "b.ninja": "include a.ninja\n"},
], ids=["itself", "itself-spelled-otherwise", "a-b-a"])
def test_an_include_cycle_is_an_error(files: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(BuildTreeError, match=r"which includes it back \(a cycle\)"):
        ninjafile.read(_manifests(tmp_path, files))


def test_includes_nest_only_so_deep(tmp_path: Path) -> None:
    chain = {f"{i}.ninja": f"include {i + 1}.ninja\n" for i in range(ninjafile.MAX_DEPTH + 1)}
    chain[f"{ninjafile.MAX_DEPTH + 1}.ninja"] = "build x: r y\n"
    root = _manifests(tmp_path, {**chain, "build.ninja": "include 0.ninja\n"})
    with pytest.raises(BuildTreeError, match=f"nests deeper than {ninjafile.MAX_DEPTH} files"):
        ninjafile.read(root)
    chain[f"{ninjafile.MAX_DEPTH - 2}.ninja"] = "build x: r y\n"  # one level less: read
    assert len(ninjafile.read(_manifests(tmp_path, {**chain, "build.ninja": "include 0.ninja\n"}))) == 1


def test_a_tree_reads_only_so_many_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ninjafile, "MAX_FILES", 3)
    root = _manifests(tmp_path, {"build.ninja": "".join(f"subninja {i}.ninja\n" for i in range(3)),
                                 **{f"{i}.ninja": "build x: r y\n" for i in range(3)}})
    with pytest.raises(BuildTreeError, match="more than 3 manifests included"):
        ninjafile.read(root)


def test_a_logical_line_is_bounded_and_named_by_its_first_line(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ninjafile, "MAX_LINE", 1000)
    root = _manifests(tmp_path, {"build.ninja": "# a comment\nbuild a.o: r" + " x $\n" * 400 + "\n"})
    with pytest.raises(BuildTreeError, match=r"build\.ninja:2: a line longer than"):
        ninjafile.read(root)


def test_a_line_continued_many_times_is_one_statement(tmp_path: Path) -> None:
    root = _manifests(tmp_path, {"build.ninja": "build a.o: r" + " x $\n" * 200_000 + " y | z || w\n  FLAGS = -O2\n"})
    (statement,) = ninjafile.read(root)
    assert (len(statement.inputs), statement.implicit, statement.order_only) == (200_001, ("z",), ("w",))


@pytest.mark.parametrize(("text", "message"), [
    ("build a.o r\n", r"build\.ninja:1: a build statement without ':'"),
    ("build : r\n", r"build\.ninja:1: a build statement without outputs or rule"),
    ("\n\ninclude a\0b\n", r"build\.ninja:3: a control character \('\\x00'\): not a manifest"),
    ("build a.o: r $\n  b\ninclude $\n\n", r"build\.ninja:3: include of nothing"),
    ("build a.o: r\n# a comment $\n  X = 1\nbuild b.o: r c$", r"build\.ninja:4: a line ends in a lone '\$'"),
])
def test_a_bad_manifest_line_is_named(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(BuildTreeError, match=message):
        ninjafile.read(_manifests(tmp_path, {"build.ninja": text}))


def test_find_follows_includes_as_multi_config_writes_them(tmp_path: Path) -> None:
    """Ninja Multi-Config's RERUN_CMAKE lives in CMakeFiles/common.ninja, two includes down."""
    root = _manifests(tmp_path, {
        "build.ninja": "build all: phony x\ninclude CMakeFiles/impl-Debug.ninja\n",
        "CMakeFiles/impl-Debug.ninja": "build x: CXX_COMPILER y\ninclude CMakeFiles/common.ninja\n",
        "CMakeFiles/common.ninja": "rule RERUN_CMAKE\n  command = cmake\n"
                                   "build build.ninja: RERUN_CMAKE | a$ b/CMakeLists.txt $\n  c.cmake\n"})
    statement = ninjafile.find(root, "RERUN_CMAKE")
    assert statement is not None and statement.implicit == ("a b/CMakeLists.txt", "c.cmake")
    assert ninjafile.find(root, "RERUN") is None  # a whole rule name, not a prefix
    (tmp_path / "CMakeFiles/impl-Debug.ninja").write_text("include CMakeFiles/impl-Debug.ninja\n")
    with pytest.raises(BuildTreeError, match="a cycle"):
        ninjafile.find(root, "RERUN_CMAKE")


def test_escapes_are_undone(tmp_path: Path) -> None:
    root = _manifests(tmp_path, {"build.ninja": "build a$ b.o a$:c.o | i: r $$x d$\n  e $\n    f g:h |@ v || o | j\n"})
    (statement,) = ninjafile.read(root)
    assert statement.outputs == ("a b.o", "a:c.o", "i") and statement.rule == "r"
    assert (statement.inputs, statement.implicit, statement.order_only) == (("$x", "d", "e", "f", "g:h"), ("j",), ("o",))


# -- recordings ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "text", "message"), [
    ("t.txt", "_Z1kv\n# end records=" + "9" * 5000 + " unique=1 dropped=0\n", "a count of 5000 digits"),
    ("t.txt", "_Z1kv\n# dropped=" + "9" * 19 + "\n", "a count of 19 digits"),
    ("t.txt", "_Z" + "a" * 70_000 + "\n", "not a mangled kernel name"),
    ("t.jsonl", '{"test": "t", "kernels": [], "complete": true, "n": ' + "9" * 5000 + "}\n", "not JSON"),
    ("t.jsonl", "[" * 100_000 + "\n", "nested too deep"),
    ("t.jsonl", '["t"]\n', 'a record needs a "test" name'),
    ("t.jsonl", '{"test": "a\\u0000b", "kernels": [], "complete": true}\n', 'a record needs a "test" name'),
    ("t.jsonl", '{"test": "t", "kernels": [], "complete": true, "commit": "\\ud800"}\n', '"commit" must be a string'),
])
def test_bad_recordings_say_where(name: str, text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RecordingError, match=f"{path.name}:\\d+: .*{message}"):
        read([path])


@pytest.mark.parametrize(("line", "number"), [
    ("_Z1kv _Z2kv", 3), ("9abc", 3), ("_Z1k(v)", 3), ("_Z1k\u00a0v", 3), ("-_Z1kv", 3),
    ("_Z1kv\n\n\u00e9", 5), ("_Z1kv\n# a comment\n_Z2kv\t_Z3kv", 5),
])
def test_a_text_recording_line_that_is_no_name_is_named_by_its_number(line: str, number: int,
                                                                       tmp_path: Path) -> None:
    """The whole-text checks find the same first bad line the line-by-line reader did."""
    path = tmp_path / "test_a.txt"
    path.write_text(f"# test=t\n_Z0kv\n{line}\n_Z9kv\n")
    with pytest.raises(RecordingError, match=f"test_a.txt:{number}: not a mangled kernel name"):
        read([path])


def test_a_jsonl_kernel_that_is_no_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    for bad in ("_Z1k v", "(x)", "_Z1k\u00a0v", ""):
        path.write_text(json.dumps({"test": "t", "kernels": ["_Z1kv", bad], "complete": True}) + "\n")
        with pytest.raises(RecordingError, match="r.jsonl:1: not a mangled kernel name"):
            read([path])


def test_a_text_recording_keeps_only_clean_test_names(tmp_path: Path) -> None:
    path = tmp_path / "test_a.txt"
    path.write_text("# test=\0\n_Z1kv\n# end records=1 unique=1 dropped=0\n")
    (recording,) = read([path])
    assert recording.test == "test_a" and recording.complete
