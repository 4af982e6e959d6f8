"""The deps readers on logs written by the test, for the cases real builds rarely show."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from projects import Build

from kernel_symbol_map.buildtree.makedeps import parse_depfile
from kernel_symbol_map.buildtree.ninjadeps import NinjaDeps, stale
from kernel_symbol_map.cli import main
from kernel_symbol_map.errors import BuildTreeError


def write_ninja_deps(path: Path, records: list[tuple[str, int, list[str]]], version: int = 4) -> None:
    """A .ninja_deps as ninja writes it: path records as names appear, then one deps record each."""
    ids: dict[str, int] = {}
    out = bytearray(b"# ninjadeps\n" + struct.pack("<i", version))

    def path_id(name: str) -> int:
        if name not in ids:
            raw = name.encode()
            raw += b"\0" * (-len(raw) % 4)
            out.extend(struct.pack("<I", len(raw) + 4) + raw + struct.pack("<I", ~len(ids) & 0xFFFFFFFF))
            ids[name] = len(ids)
        return ids[name]

    for output, mtime, deps in records:
        dep_ids = [path_id(d) for d in deps]
        out_id = path_id(output)
        body = struct.pack("<iII", out_id, mtime & 0xFFFFFFFF, mtime >> 32) + struct.pack(f"<{len(dep_ids)}i", *dep_ids)
        out.extend(struct.pack("<I", len(body) | 0x80000000) + body)
    path.write_bytes(bytes(out))


def test_last_record_wins(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_deps"
    write_ninja_deps(log, [("a.o", 10, ["a.cu", "old.h"]), ("b.o", 11, ["b.cu"]), ("a.o", 12, ["a.cu", "new.h"])])
    deps = NinjaDeps(log)
    assert deps.lookup("a.o").deps == ("a.cu", "new.h") and deps.lookup("a.o").mtime_ns == 12
    assert deps.lookup("b.o").deps == ("b.cu",)


def test_mtime_is_64_bit_nanoseconds(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_deps"
    obj = tmp_path / "a.o"
    obj.write_bytes(b"")
    mtime = obj.stat().st_mtime_ns
    write_ninja_deps(log, [(str(obj), mtime, ["a.cu"])])
    record = NinjaDeps(log).lookup(str(obj))
    assert record.mtime_ns == mtime and stale(record, obj) is None
    os.utime(obj, ns=(mtime, mtime + 1))
    assert "STALE" in stale(record, obj)
    obj.unlink()
    assert stale(record, obj) == "object is missing"


@pytest.mark.parametrize("version", [3, 5])
def test_other_versions_are_refused(tmp_path: Path, version: int) -> None:
    log = tmp_path / ".ninja_deps"
    write_ninja_deps(log, [("a.o", 1, ["a.cu"])], version=version)
    with pytest.raises(BuildTreeError, match=f"unsupported deps log version {version}"):
        NinjaDeps(log)


def test_unknown_ids_are_refused(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_deps"
    write_ninja_deps(log, [("a.o", 1, ["a.cu"])])
    data = bytearray(log.read_bytes())
    struct.pack_into("<i", data, len(data) - 4, 99)  # the dep id
    log.write_bytes(data)
    with pytest.raises(BuildTreeError, match="unknown path id"):
        NinjaDeps(log)


def test_depfile_syntax() -> None:
    text = "out/a.o : /src/a\\ b.cu \\\n  /inc/x$$y.h \\\r\n  /inc/z.h\n/inc/z.h:\n"
    rules = parse_depfile(text)
    assert rules["out/a.o"] == ["/src/a b.cu", "/inc/x$y.h", "/inc/z.h"]
    assert rules["/inc/z.h"] == []


def _map(b: Build, out: Path, *extra: str) -> dict:
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out), *extra]) == 0
    return json.loads(gzip.decompress(out.read_bytes()))


def test_record_without_its_source_is_refused(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    """sccache hits have left records with no deps at all: they cannot be trusted."""
    b = kernel_builds["newest-ninja"]
    log = b.build / ".ninja_deps"
    saved = log.read_bytes()
    records = [(out, r.mtime_ns, list(r.deps)) for out, r in NinjaDeps(log).records.items()]
    victim = next(i for i, (out, _, deps) in enumerate(records) if deps and deps[0].endswith("gemm.cu"))
    out, mtime, _ = records[victim]
    records[victim] = (out, mtime, [])
    write_ninja_deps(log, records)
    try:
        doc = _map(b, tmp_path / "m.json.gz")
    finally:
        log.write_bytes(saved)
    assert doc["objects"] == [] and "does not list the object's own source" in doc["reason"]
    assert [e["source"] for e in doc["errors"]] == ["csrc/core/gemm.cu"]


def test_inside_build_uses_the_object_lists(kernel_builds: dict[str, Build], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No reply (first configure on CMake < 3.27): the package's lists (or build.ninja), the compdb and the logs suffice."""
    b = kernel_builds["newest-ninja"]
    full = _map(b, tmp_path / "full.json.gz")
    reply = b.build / ".cmake" / "api" / "v1" / "reply"
    saved = tmp_path / "reply"
    shutil.move(reply, saved)
    lists = b.build / ".kernel_symbol_map" / "targets"
    try:
        without = _map(b, tmp_path / "none.json.gz", "--inside-build")  # build.ninja alone is exact too
        assert without["pairing"] == "build.ninja" and without["objects"] == full["objects"]
        lists.mkdir(parents=True)
        for target in {o["target"] for o in full["objects"]}:
            objects = [str(b.build / o["object"]) for o in full["objects"] if o["target"] == target and not o.get("device_link")]
            (lists / f"{target}.json").write_text(json.dumps({"name": target, "type": "?", "objects": ";".join(objects)}))
        capsys.readouterr()
        inside = _map(b, tmp_path / "inside.json.gz", "--inside-build")
        assert "re-ran" not in capsys.readouterr().out
    finally:
        shutil.rmtree(lists.parent, ignore_errors=True)
        shutil.rmtree(reply, ignore_errors=True)
        shutil.move(saved, reply)
    assert inside["pairing"] == "object-lists+ninja-compdb"
    assert inside["objects"] == full["objects"]
