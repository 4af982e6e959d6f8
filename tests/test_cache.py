"""The per-object cache never serves a stale answer, and a corrupt cache never changes the map."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from projects import Build

from kernel_symbol_map.cli import main

OLD, NEW = b"_Z13util_a_kernelPi", b"_Z13util_z_kernelPi"  # same length: the object keeps its size


def _map(b: Build, out: Path, *extra: str) -> dict[str, Any]:
    assert main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(out), *extra]) == 0
    return json.loads(gzip.decompress(out.read_bytes()))


def _symbols(doc: dict[str, Any], source: str) -> list[str]:
    return next(o["symbols"] for o in doc["objects"] if o["source"] == source)


@pytest.fixture
def util_object(kernel_builds: dict[str, Build], request: pytest.FixtureRequest) -> Iterator[tuple[Build, Path]]:
    """csrc/a/util.cu's object, put back exactly (bytes and times) after the test."""
    b = kernel_builds[request.param]
    obj = b.build / "CMakeFiles" / "core.dir" / "csrc" / "a" / "util.cu.o"
    saved, st = obj.read_bytes(), obj.stat()
    assert OLD in saved  # nvcc's default build leaves the cubin uncompressed
    yield b, obj
    obj.write_bytes(saved)
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))
    (b.build / ".kernel_symbol_map" / "cache.json").unlink(missing_ok=True)


@pytest.mark.parametrize("util_object", ["3.25-ninja"], indirect=True)
def test_same_size_and_mtime_but_a_new_inode(util_object: tuple[Build, Path], tmp_path: Path) -> None:
    b, obj = util_object
    assert _symbols(_map(b, tmp_path / "a.json.gz"), "csrc/a/util.cu") == [OLD.decode()]
    st = obj.stat()
    replacement = obj.with_name("util.cu.o.new")
    replacement.write_bytes(obj.read_bytes().replace(OLD, NEW))
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(replacement, obj)
    assert (obj.stat().st_size, obj.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert obj.stat().st_ino != st.st_ino
    assert _symbols(_map(b, tmp_path / "b.json.gz"), "csrc/a/util.cu") == [NEW.decode()]


@pytest.mark.parametrize("util_object", ["3.25-unix"], indirect=True)
def test_rewritten_in_place_with_a_new_mtime(util_object: tuple[Build, Path], tmp_path: Path) -> None:
    """Makefiles: depfiles carry no mtime, so a newer object is not STALE and must be read again."""
    b, obj = util_object
    assert _symbols(_map(b, tmp_path / "a.json.gz"), "csrc/a/util.cu") == [OLD.decode()]
    inode = obj.stat().st_ino
    with obj.open("r+b") as f:
        data = f.read().replace(OLD, NEW)
        f.seek(0)
        f.write(data)
    assert obj.stat().st_ino == inode
    assert _symbols(_map(b, tmp_path / "b.json.gz"), "csrc/a/util.cu") == [NEW.decode()]


@pytest.mark.parametrize("util_object", ["3.25-ninja"], indirect=True)
def test_rewritten_in_place_with_its_mtime_put_back(util_object: tuple[Build, Path], tmp_path: Path) -> None:
    """``cp -p`` onto an object: same path, size, mtime and inode; only the ctime tells, and it must."""
    b, obj = util_object
    assert _symbols(_map(b, tmp_path / "a.json.gz"), "csrc/a/util.cu") == [OLD.decode()]
    st = obj.stat()
    with obj.open("r+b") as f:
        data = f.read().replace(OLD, NEW)
        f.seek(0)
        f.write(data)
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = obj.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert now.st_ctime_ns != st.st_ctime_ns
    assert _symbols(_map(b, tmp_path / "b.json.gz"), "csrc/a/util.cu") == [NEW.decode()]


@pytest.mark.parametrize("damage", ["garbage", "edited"])
def test_a_corrupt_cache_never_changes_the_map(
    kernel_builds: dict[str, Build], tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    b = kernel_builds["newest-ninja"]
    truth = _map(b, tmp_path / "truth.json.gz", "--no-cache")
    _map(b, tmp_path / "warm.json.gz")
    cache = b.build / ".kernel_symbol_map" / "cache.json"
    if damage == "garbage":
        cache.write_bytes(b"\x00not a cache")
    else:  # structurally valid, one kernel renamed: only the checksum can tell
        cache.write_bytes(cache.read_bytes().replace(b"_Z13util_a_kernelPi", b"_Z13util_q_kernelPi"))
    capsys.readouterr()
    again = _map(b, tmp_path / "again.json.gz")
    assert "ignoring corrupt cache" in capsys.readouterr().out
    assert again["objects"] == truth["objects"]


def test_no_op_rerun_is_up_to_date_and_a_deleted_cache_is_harmless(kernel_builds: dict[str, Build], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    b = kernel_builds["newest-unix"]
    out = tmp_path / "m.json.gz"
    first = _map(b, out)
    capsys.readouterr()
    assert _map(b, out) == first
    assert "(up to date)" in capsys.readouterr().out
    (b.build / ".kernel_symbol_map" / "cache.json").unlink()
    (b.build / ".kernel_symbol_map" / "last-run.json").unlink()
    assert _map(b, out)["objects"] == first["objects"]
    assert "(up to date)" not in capsys.readouterr().out


def test_no_cache_writes_no_cache(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    folder = b.build / ".kernel_symbol_map"
    for name in ("cache.json", "last-run.json"):
        (folder / name).unlink(missing_ok=True)
    _map(b, tmp_path / "m.json.gz", "--no-cache")
    assert not (folder / "cache.json").exists() and not (folder / "last-run.json").exists()


def _tampered_cache_is_read_again(b: Build, tmp_path: Path, tamper: Callable[[dict[str, Any]], None]) -> None:
    """Map ``b`` with a warm cache whose entries ``tamper`` rewrote: the map equals one made without a cache."""
    from kernel_symbol_map.producer.cache import ObjectCache

    truth = _map(b, tmp_path / "truth.json.gz", "--no-cache")
    _map(b, tmp_path / "warm.json.gz")
    path = b.build / ".kernel_symbol_map" / "cache.json"
    cache = ObjectCache(b.build, json.loads(path.read_text().splitlines()[0])["tool"])  # as this version wrote it
    assert cache.entries
    for entry in cache.entries.values():
        tamper(entry["value"])
    cache.changed = True
    cache.save(cache.entries)
    (b.build / ".kernel_symbol_map" / "last-run.json").unlink()
    again = _map(b, tmp_path / "again.json.gz")
    assert again["objects"] == truth["objects"]


def test_digests_cached_by_another_scheme_are_taken_again(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    """A cache written when digests meant something else (another scheme) is never served: its entries hold
    old digests, and an old record says less than a new one must."""
    def as_an_older_version_wrote_it(value: dict[str, Any]) -> None:
        value.pop("scheme", None)
        if value["digests"]:
            value["digests"] = {"host": "0" * 16}

    _tampered_cache_is_read_again(kernel_builds["newest-ninja"], tmp_path, as_an_older_version_wrote_it)


def test_digests_cached_with_other_folders_masked_are_taken_again(kernel_builds: dict[str, Build],
                                                                   tmp_path: Path) -> None:
    """Digests mask the build's folders (a device assert's path): a cache written while other folders were
    masked holds digests of other bytes, and is never served."""
    def as_a_run_masking_other_folders_wrote_it(value: dict[str, Any]) -> None:
        value["folders"] = "0" * 16
        if value["digests"]:
            value["digests"]["host"] = "0" * 16

    _tampered_cache_is_read_again(kernel_builds["newest-ninja"], tmp_path, as_a_run_masking_other_folders_wrote_it)


@pytest.mark.parametrize("util_object", ["3.25-ninja"], indirect=True)
def test_an_object_that_could_not_be_read_is_never_served_from_the_cache(util_object: tuple[Build, Path],
                                                                           tmp_path: Path) -> None:
    """A truncated object makes the map incomplete; mapped again, unchanged, it is read again and still does:
    its failure is never remembered as an object with nothing in it."""
    b, obj = util_object
    st = obj.stat()
    obj.write_bytes(obj.read_bytes()[: st.st_size // 2])
    os.utime(obj, ns=(st.st_atime_ns, st.st_mtime_ns))  # as the build left it: the reader, not the build, says
    main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(tmp_path / "a.json.gz")])
    main(["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(tmp_path / "b.json.gz")])
    for name in ("a", "b"):
        doc = json.loads(gzip.decompress((tmp_path / f"{name}.json.gz").read_bytes()))
        assert doc["incomplete"] and "util.cu.o" in doc["reason"] and "past the end" in doc["reason"], \
            (name, doc.get("reason"))
