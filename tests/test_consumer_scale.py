"""Issue 29.5: the consumers' fast paths return exactly what the plain ones do, good input and bad.

The map decoder (:mod:`kernel_symbol_map.mapformat.plainjson`) splits the big
string arrays of a map as ``encode`` writes it and leaves the rest to
``json.loads``; where it cannot be sure it says None and the map is decoded
whole. So for any text, it is None or ``json.loads``'s document, and
``decode_bytes`` gives the same document, or the same error, either way.
"""

from __future__ import annotations

import gzip
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_symbol_map import mapformat
from kernel_symbol_map.errors import MapError
from kernel_symbol_map.mapformat import plainjson

SHA = "c" * 40


def _map(objects: list[dict[str, Any]], **head: Any) -> dict[str, Any]:
    return {"version": 1, "commit": SHA, "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
            "incomplete": False, "errors": [], "stats": {"objects": len(objects)}, **head, "objects": objects}


def _object(i: int, deps: list[str], **more: Any) -> dict[str, Any]:
    return {"source": f"csrc/k{i}.cu", "target": "t", "object": f"k{i}.o", "device": True,
            "symbols": [f"_Z1k{i}v"], "deps": deps, **more}


def _layout(document: dict[str, Any]) -> bytes:
    """The text encode writes for ``document``: compact, ASCII, the objects last."""
    head = {k: v for k, v in document.items() if k != "objects"}
    text = json.dumps(head, separators=(",", ":"))[:-1] + ("," if head else "") + '"objects":['
    return (text + ",".join(json.dumps(o, separators=(",", ":")) for o in document["objects"]) + "]}").encode()


def _pieces(text: bytes, rng: random.Random) -> list[bytes]:
    """``text`` cut at random places, as inflating hands it over (a separator may fall between two pieces)."""
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randrange(0, 12))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def _agrees(text: bytes, rng: random.Random | None = None) -> Any:
    """decode_map's answer for ``text`` (whole and in pieces): None, or exactly json.loads's document."""
    found = plainjson.decode_map([text])
    if found is not None:
        assert found == json.loads(text) and list(found) == list(json.loads(text))  # the same keys, in order
    for seed in range(3):
        assert plainjson.decode_map(_pieces(text, rng or random.Random(seed))) == found
    return found


def _whole(raw: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    """decode_bytes without the plain path: the document, or the error's message."""
    with monkeypatch.context() as m:
        m.setattr(plainjson, "decode_map", lambda pieces: None)
        try:
            return mapformat.decode_bytes(raw, "m.json.gz")
        except MapError as e:
            return str(e)


def _decoded(raw: bytes) -> Any:
    try:
        return mapformat.decode_bytes(raw, "m.json.gz")
    except MapError as e:
        return str(e)


def test_encode_writes_the_layout_the_map_decoder_takes() -> None:
    doc = _map([_object(i, [f"csrc/k{i}.cu", "include/a.cuh", "/usr/include/b.h"]) for i in range(3)],
               target_links={"t": []})
    text = gzip.decompress(mapformat.encode(doc))
    assert text == _layout(doc)  # the layout plainjson declares, as encode writes it
    found = plainjson.decode_map([text])
    assert found == doc
    # one str per distinct path, whichever object names it
    assert found["objects"][0]["deps"][1] is found["objects"][2]["deps"][1]


def test_an_empty_map_and_objects_without_deps() -> None:
    assert _agrees(_layout(_map([]))) == _map([])
    assert _agrees(b'{"objects":[]}') == {"objects": []}
    assert _agrees(_layout(_map([_object(0, []), {"source": "a.cu"}, {}]))) is not None


def test_a_text_cut_anywhere_decodes_as_it_does_whole() -> None:
    """Wherever inflating cuts the text, even inside a separator or just after it: the same document."""
    text = _layout(_map([_object(0, ["a.h", "b.h"]), _object(1, ["a.h"], sizes={"sm_90": {"image": 1, "stored": 1}}),
                         _object(2, [])]))
    whole = plainjson.decode_map([text])
    assert whole == json.loads(text)
    for at in range(1, len(text)):
        assert plainjson.decode_map([text[:at], text[at:]]) == whole, at
        assert plainjson.decode_map([text[:at], text[at : at + 3], text[at + 3 :]]) == whole, at


# Texts the decoder must get right, or hand to json.loads: each is a way splitting could go wrong.
TRICKY = {
    "brackets and braces in paths": [_object(0, ["a[1].h", "b{2}.h", "c]", "d},{e", "[", "{"])],
    "a path that starts with ]": [_object(0, ["a.h", "]b.h"]), _object(1, ["]"])],
    "an empty path": [_object(0, ["", "a.h", ""])],
    "deps twice, the last empty": [{**_object(0, ["a.h"]), "x": 1, "deps": []}],
    "deps twice": [{**_object(0, ["a.h"]), "x": 1, "deps": ["b.h"]}],
    "deps a value too": [_object(0, ["a.h"], target="deps")],
    "deps only nested": [{"source": "a.cu", "sizes": {"deps": ["a.h", "b.h"]}}],
    "deps not a list": [_object(0, ["a.h"]), {**_object(1, []), "deps": "a.h"}],
    "deps of numbers": [_object(0, [1, 2, "a.h"])],  # type: ignore[list-item]
    "deps nested lists": [_object(0, [["a.h"], "b.h"])],  # type: ignore[list-item]
    "objects nested": [_object(0, ["a.h"], sizes={"sm_90": {"image": 1, "stored": 1}}),
                       _object(1, ["a.h"], digests={"code": {"sm_90": ["x"]}, "host": "y"})],
    "a quote and a backslash": [_object(0, ['a"b.h', "c\\d.h"])],
    "not ASCII": [_object(0, ["caf\u00e9.h"])],
    "a NUL": [_object(0, ["a\u0000.h"])],
}


@pytest.mark.parametrize("objects", TRICKY.values(), ids=TRICKY.keys())
def test_tricky_objects_decode_as_json_loads_does(objects: list[dict[str, Any]]) -> None:
    _agrees(_layout(_map(objects)))


@pytest.mark.parametrize("again", [b'"deps":[]', b'"deps":["b.h"]', b'"deps":7'])
def test_a_key_given_twice_is_json_loads_last(again: bytes) -> None:
    """A Python dict cannot hold a key twice; a map's text can, and json.loads keeps the last value."""
    text = _layout(_map([_object(0, ["a.h"]), _object(1, ["c.h"])])).replace(b'"k0.o",', b'"k0.o",' + again + b",")
    assert text.count(b'"deps"') == 3
    assert _agrees(text)["objects"][0]["deps"] == ["a.h"]  # the array comes after the repeated key
    text = _layout(_map([_object(0, ["a.h"])]))[: -len(b"}]}")] + b"," + again + b"}]}"
    assert _agrees(text) == json.loads(text) and json.loads(text)["objects"][0]["deps"] == json.loads(b"{" + again + b"}")["deps"]


def test_a_raw_control_character_is_refused_as_json_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _layout(_map([_object(0, ["a.h", "b.h"])])).replace(b"b.h", b"b\t.h")
    assert plainjson.decode_map([text]) is None
    raw = gzip.compress(text)
    assert _decoded(raw) == _whole(raw, monkeypatch) and "not JSON (Invalid control character" in _decoded(raw)


def test_an_escaped_nul_is_refused_as_the_whole_text_refuses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = gzip.compress(_layout(_map([_object(0, ["a.h"], source="a\u0000.cu")])))
    assert _decoded(raw) == _whole(raw, monkeypatch) and "a string holds a NUL" in _decoded(raw)


def test_other_layouts_are_decoded_whole() -> None:
    doc = _map([_object(0, ["a.h"])])
    assert plainjson.decode_map([json.dumps(doc).encode()]) is None  # the default separators: spaces
    assert plainjson.decode_map([json.dumps(doc, indent=1).encode()]) is None
    assert plainjson.decode_map([json.dumps({"objects": doc["objects"], "version": 1}).encode()]) is None
    assert plainjson.decode_map([_layout(doc) + b"\n"]) is None


@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("extra", [0, 1])
def test_the_container_bound_is_the_whole_texts(extra: int, first: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Brackets inside paths count, as the whole path counts them (the first path's first character too): at
    the bound the map decodes, one past it both paths refuse it."""
    base = _layout(_map([_object(0, ["a.h"])]))
    # pad with '[' inside a path until the text holds exactly bound (+ extra) containers
    for n in range(len(base)):
        text = _layout(_map([_object(0, ["[" * n, "a.h"] if first else ["a.h", "[" * n])]))
        bound = len(text) // plainjson.MIN_CONTAINER_BYTES + 64
        if text.count(b"{") + text.count(b"[") == bound + extra:
            break
    else:
        pytest.fail("no padding reaches the bound")
    raw = gzip.compress(text)
    assert _decoded(raw) == _whole(raw, monkeypatch)
    if extra:
        assert plainjson.decode_map([text]) is None and "more JSON objects and lists" in _decoded(raw)
    else:
        assert plainjson.decode_map([text]) == json.loads(text)


BAD_TEXTS = {
    "truncated": _layout(_map([_object(0, ["a.h"])]))[:-2],
    "a trailing comma": _layout(_map([_object(0, ["a.h"])])).replace(b'"]', b'",]'),
    "no closing bracket": _layout(_map([_object(0, ["a.h"])])).replace(b'"a.h"]', b'"a.h"'),
    "a bare word": _layout(_map([_object(0, ["a.h"])])).replace(b"true", b"yes"),
    "two objects glued": _layout(_map([_object(0, ["a.h"]), _object(1, ["b.h"])])).replace(b"},{", b"}{"),
    "deep": b'{"objects":[{"deps":["a"],"x":' + b"[" * 5000 + b"]" * 5000 + b"}]}",
}


@pytest.mark.parametrize("text", BAD_TEXTS.values(), ids=BAD_TEXTS.keys())
def test_bad_text_gets_the_whole_paths_message(text: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    assert plainjson.decode_map([text]) is None
    raw = gzip.compress(text)
    assert _decoded(raw) == _whole(raw, monkeypatch)
    assert isinstance(_decoded(raw), str)


def test_gzip_errors_are_the_inflaters(monkeypatch: pytest.MonkeyPatch) -> None:
    good = gzip.compress(_layout(_map([_object(0, ["a.h"] * 1000)])))
    for raw in (b"", b"not gzip", good[: len(good) // 2], gzip.compress(b"")):
        assert _decoded(raw) == _whole(raw, monkeypatch) and "not a gzip file" in _decoded(raw)
    bomb = gzip.compress(b" " * (8 << 20))  # 1,000x its size: past 256x and the first MiB
    assert _decoded(bomb) == _whole(bomb, monkeypatch) and "decompresses to more than" in _decoded(bomb)


# Mostly plain paths; some of the characters that matter to splitting: delimiters, an escape, a control one
PATHS = st.one_of(st.text(alphabet="ab/.", max_size=6), st.text(alphabet="ab/.[]{},:", max_size=6),
                  st.text(alphabet='ab/.[]{},:"\\\t\u00e9', max_size=4))


@st.composite
def documents(draw: st.DrawFn) -> tuple[bytes, int]:
    objects = []
    for i in range(draw(st.integers(0, 4))):
        o: dict[str, Any] = {"source": draw(PATHS), "deps": draw(st.lists(PATHS, max_size=6))}
        if draw(st.booleans()):
            o = {**o, draw(st.sampled_from(["deps", "x", "sizes"])): draw(st.one_of(
                st.lists(PATHS, max_size=2), st.integers(), st.dictionaries(PATHS, st.lists(PATHS, max_size=2))))}
        if draw(st.booleans()):
            o = {"target": "t", **o}
        objects.append(o)
    text = _layout(_map(objects))
    if draw(st.integers(0, 3)) == 0:  # a byte changed anywhere: most such texts are no JSON at all
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from([b'"', b",", b"]", b"[", b"{", b"}", b"x", b"\\", b" "])) + \
            text[at + 1 :]
    return text, draw(st.integers(0, 2**32))


@given(documents())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_plain_path_is_json_loads_or_nothing(drawn: tuple[bytes, int]) -> None:
    text, seed = drawn
    _agrees(text, random.Random(seed))


def test_an_object_too_big_to_hold_twice_decodes_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plainjson, "MAX_PENDING", 1 << 10)
    text = _layout(_map([_object(0, [f"include/h{i}.cuh" for i in range(100)]), _object(1, ["a.h"])]))
    assert plainjson.decode_map([text]) is None
    assert plainjson.decode_map([text[i : i + 16] for i in range(0, len(text), 16)]) is None  # held a piece at a time


def test_the_bound_is_one_objects_not_the_head_and_an_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plainjson, "MAX_PENDING", 1 << 10)
    text = _layout(_map([_object(i, [f"include/h{j}.cuh" for j in range(30)]) for i in range(3)], cuda="x" * 600))
    head = text.index(b'"objects":[') + len(b'"objects":[')
    assert 600 < head < 1 << 10 and all(600 < len(o) < 1 << 10 for o in text[head:].split(b"},{"))
    assert plainjson.decode_map([text[:head], *(text[i : i + 500] for i in range(head, len(text), 500))]) == \
        json.loads(text)
    monkeypatch.undo()
    assert _agrees(text) == json.loads(text)


# validate: the schema walked with each object's string lists empty where it holds nothing against them
def _schema_walk(document: Any) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(mapformat.schema())
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


SCHEMA_CASES = {
    "valid": {},
    "a number in deps": {"deps": ["a.h", 1]},
    "null in deps": {"deps": [None]},
    "an empty kernel name": {"symbols": ["", "_Z1kv"]},
    "a number for a kernel": {"symbols": [1]},
    "a number in archs": {"archs": [2]},
    "a list in unity_sources": {"unity_sources": ["a.cu", ["b.cu"]]},
    "deps not a list": {"deps": "a.h"},
    "an error in a complete map": {"error": "x"},  # its message quotes the whole object
    "negative sizes": {"sizes": {"sm_90": {"image": -1, "stored": 1}}},
    "another deps_from": {"deps_from": "guess"},
}


@pytest.mark.parametrize("change", SCHEMA_CASES.values(), ids=SCHEMA_CASES.keys())
def test_the_schema_check_is_the_whole_walks(change: dict[str, Any]) -> None:
    doc = _map([_object(0, ["a.h", "b.h"], archs=["sm_90"]), {**_object(1, ["a.h"]), **change}])
    assert mapformat.schema_problems(doc) == _schema_walk(doc)
    for other in ([], None, "x", {"objects": "x"}, {**doc, "incomplete": True}, {**doc, "objects": [[1], *doc["objects"]]}):
        assert mapformat.schema_problems(other) == _schema_walk(other)


# recordings: a JSON Lines record's kernels split where plain, each name checked once, or as json.loads made them
RECORDS = {
    "plain": [{"test": "t::a", "kernels": ["_Z1av", "_Z1bv"], "complete": True, "commit": SHA}],
    "a name twice, in two records": [{"test": "t::a", "kernels": ["_Z1av"], "complete": True},
                                     {"test": "t::b", "kernels": ["_Z1av", "_Z1cv"], "complete": False}],
    "no kernels": [{"test": "t::a", "kernels": [], "complete": True}],
    "a space in a name": [{"test": "t::a", "kernels": ["_Z1av"], "complete": True},
                          {"test": "t::b", "kernels": ["_Z1a v"], "complete": True}],
    "an empty name": [{"test": "t::a", "kernels": ["", "_Z1av"], "complete": True}],
    "a demangled name": [{"test": "t::a", "kernels": ["k(int)"], "complete": True}],
    "a name too long": [{"test": "t::a", "kernels": ["_Z" + "a" * 70000], "complete": True}],
    "a name not ASCII": [{"test": "t::a", "kernels": ["_Z1\u00e9v"], "complete": True}],
    "an escape in the test": [{"test": "t::a[\"x\"]", "kernels": ["_Z1av"], "complete": True}],
    "kernels twice": [{"test": "t::a", "kernels": ["_Z1av"], "complete": True, "x": {"kernels": []}}],
    "a number for a kernel": [{"test": "t::a", "kernels": ["_Z1av", 3], "complete": True}],
    "kernels not a list": [{"test": "t::a", "kernels": "_Z1av", "complete": True}],
    "a bad name, then a bad record": [{"test": "t::a", "kernels": ["(x)"], "complete": True}, {"test": 3}],
    "a bad record, then a bad name": [{"test": "t::a", "kernels": ["_Z1av"]}, {"test": "t::b", "kernels": ["(x)"]}],
    "complete missing after a good name": [{"test": "t::a", "kernels": ["_Z1av"]}],
}


def _read(path: Any) -> Any:
    from kernel_symbol_map.consumer.select.recordings import read
    from kernel_symbol_map.errors import RecordingError

    try:
        return read([path])
    except RecordingError as e:
        return str(e)


@pytest.mark.parametrize("records", RECORDS.values(), ids=RECORDS.keys())
def test_a_recordings_split_kernels_read_as_json_loads_reads_them(records: list[dict[str, Any]], tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_symbol_map.consumer.select import recordings

    path = tmp_path / "r.jsonl"
    lines = [json.dumps(r, separators=(",", ":")) for r in records]
    path.write_text("\n".join(lines + [lines[0].replace('"kernels":[', '"kernels": [')]) + "\n")  # and a spaced one
    fast = _read(path)
    with monkeypatch.context() as m:
        m.setattr(recordings, "_record", lambda raw, interned: (json.loads(raw), None))  # json.loads, checked each
        assert _read(path) == fast


def test_names_in_many_records_are_one_string(tmp_path: Any) -> None:
    from kernel_symbol_map.consumer.select.recordings import read

    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"test": f"t::{i}", "kernels": ["_Z1av", f"_Z{i}bv"], "complete": True},
                                       separators=(",", ":")) + "\n" for i in range(3)))
    a, b, _ = read([path])
    assert next(k for k in a.kernels if k == "_Z1av") is next(k for k in b.kernels if k == "_Z1av")


def test_a_records_kernels_are_kept_sorted_each_once(tmp_path: Any) -> None:
    from kernel_symbol_map.consumer.select.recordings import read

    path = tmp_path / "r.jsonl"
    record = {"kernels": ["_Z1cv", "_Z1av", "_Z1cv", "_Z1bv"], "complete": True}
    path.write_text(json.dumps({"test": "t::split", **record}, separators=(",", ":")) + "\n" +
                    json.dumps({"test": "t::json.loads", **record}) + "\n")  # spaced: json.loads reads it
    assert [r.kernels for r in read([path])] == [("_Z1av", "_Z1bv", "_Z1cv")] * 2


# Canonical: realpath, its folder resolved once per folder
def test_canonical_is_realpath_whatever_the_links(tmp_path: Any) -> None:
    import os

    from kernel_symbol_map.consumer.maps.canonical import Canonical
    from kernel_symbol_map.mapformat import relpath, unspell

    real = tmp_path / "real"
    (real / "include" / "sub").mkdir(parents=True)
    (real / "include" / "h.cuh").write_text("")
    (real / "afile").write_text("")
    os.symlink("real", tmp_path / "root")
    root = tmp_path / "root"
    for link, target in {"inc": "include", "include/alias.cuh": "h.cuh", "include/sub/up.cuh": "../h.cuh",
                         "loop1": "loop2", "loop2": "loop1", "dangling.h": "/nonexistent/x"}.items():
        os.symlink(target, root / link)
    build = tmp_path / "build"

    def realpath(path: str) -> str:  # what Canonical computed before (issue 29): realpath of each path whole
        unmarked = unspell(path, [str(build)])
        absolute = unmarked if os.path.isabs(unmarked) else os.path.join(os.path.abspath(root), unmarked)
        return relpath(os.path.realpath(absolute), os.path.realpath(root))

    canonical = Canonical(root, [build])
    paths = ["include/h.cuh", "inc/h.cuh", "include/alias.cuh", "inc/alias.cuh", "include/sub/up.cuh",
             "inc/sub/../h.cuh", "inc/../inc/sub/x.cuh", "loop1", "loop1/x.h", "dangling.h", "afile/x.h",
             "missing/x.h", "/usr/include/stdio.h", str(root / "inc" / "h.cuh"), "include/", ".", "..", "inc/..",
             "./include/h.cuh", "include//h.cuh", "$BUILD/gen.h", "$BUILD1/x.h"]
    assert {p: canonical(p) for p in paths} == {p: realpath(p) for p in paths}
