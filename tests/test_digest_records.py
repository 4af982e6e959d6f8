"""An object's digest record as the map stores it (mapformat.digests): what ``pack`` writes from a reader's
digests, and what ``uncovered`` lets a consumer compare. Real builds' records are tests/test_digests.py's."""

from __future__ import annotations

from typing import Any

import pytest

from kernel_symbol_map.errors import MapError
from kernel_symbol_map.mapformat.digests import (
    DEVICE_IMAGE,
    ImageDigests,
    kernel_digests,
    pack,
    precompiled_header,
    uncovered,
)

SYMBOLS = ["k0", "k1", "k2"]


def test_each_kernel_s_digest_sits_at_its_symbol_s_place_and_a_missing_one_is_empty() -> None:
    record = pack(SYMBOLS, [ImageDigests("sm_80", {"k2": "c2", "k0": "c0"}, True),
                            ImageDigests("sm_90", {"k1": "d1"}, True)], "host1")
    assert record == {"covers": {"host": "digested", "kernels": 3}, "host": "host1",
                      "code": {"sm_80": ["c0", "", "c2"], "sm_90": ["", "d1", ""]}}
    assert uncovered({"symbols": SYMBOLS, "object": "a.o", "digests": record}) == ""


def test_a_kernel_in_two_images_of_one_architecture_has_the_digest_of_both() -> None:
    """``ld -r`` of two objects: either image's kernel change must show, in any order of the images."""
    one = pack(["k0", "k1"], [ImageDigests("sm_80", {"k0": "aa" * 8, "k1": "b1"}, True),
                              ImageDigests("sm_80", {"k0": "cc" * 8}, True)], "h")
    other = pack(["k0", "k1"], [ImageDigests("sm_80", {"k0": "cc" * 8}, True),
                                ImageDigests("sm_80", {"k0": "aa" * 8, "k1": "b1"}, True)], "h")
    changed = pack(["k0", "k1"], [ImageDigests("sm_80", {"k0": "aa" * 8, "k1": "b1"}, True),
                                  ImageDigests("sm_80", {"k0": "dd" * 8}, True)], "h")
    assert one is not None and other is not None and changed is not None
    k0 = one["code"]["sm_80"][0]
    assert k0 not in ("aa" * 8, "cc" * 8) and len(k0) == 16 and one["code"]["sm_80"][1] == "b1"
    assert other["code"]["sm_80"][0] == k0 and changed["code"]["sm_80"][0] != k0


def test_relocatable_code_is_one_digest_per_architecture_of_every_image() -> None:
    record = pack(["k0"], [ImageDigests("sm_80", {"k0": "a"}, True, relocatable="r" * 16),
                           ImageDigests("sm_80", {}, True, relocatable="s" * 16),
                           ImageDigests("sm_90", {"k0": "b"}, True, relocatable="t" * 16)], "h")
    assert record is not None
    assert record["relocatable"]["sm_90"] == "t" * 16
    assert record["relocatable"]["sm_80"] not in ("r" * 16, "s" * 16)
    alone = pack(["k0"], [ImageDigests("sm_80", {"k0": "a"}, True, relocatable="r" * 16)], "h")
    assert alone is not None and alone["relocatable"] == {"sm_80": "r" * 16}


def test_an_image_digested_whole_says_so_and_one_digested_per_kernel_does_not() -> None:
    record = pack(["k0"], [ImageDigests("gfx90a", {"k0": "w"}, False), ImageDigests("sm_80", {"k0": "a"}, True)],
                  "h")
    assert record is not None and record["whole"] == ["gfx90a"]
    per_kernel = pack(["k0"], [ImageDigests("sm_80", {"k0": "a"}, True)], "h")
    assert per_kernel is not None and "whole" not in per_kernel and "relocatable" not in per_kernel


def test_an_image_naming_a_kernel_the_symbols_lack_gives_no_record() -> None:
    """The reader that listed the symbols and the one that digested disagree: no digests, not wrong ones."""
    assert pack(["k0"], [ImageDigests("sm_80", {"k0": "a", "k9": "b"}, True)], "h") is None


@pytest.mark.parametrize(("host", "coverage", "covers"), [
    ("h", DEVICE_IMAGE, {"host": "digested", "kernels": 1}),
    (None, DEVICE_IMAGE, {"host": "device image", "kernels": 1}),
    (None, None, {"kernels": 1}),  # the host code could not be digested
    (None, "digested", {"kernels": 1}),  # no digest is never "digested"
])
def test_what_a_record_covers_of_the_host_code_is_what_it_holds(host: str | None, coverage: str | None,
                                                                covers: dict[str, Any]) -> None:
    record = pack(["k0"], [ImageDigests("sm_80", {"k0": "a"}, True)], host, coverage)
    assert record is not None and record["covers"] == covers and ("host" in record) == (host is not None)


def test_a_record_without_kernels_has_no_code_and_covers_none() -> None:
    assert pack([], [], "h") == {"covers": {"host": "digested", "kernels": 0}, "host": "h"}
    record = pack(["k0", "k1"], [ImageDigests("sm_80", {"k1": "a"}, True)], "h")
    assert record is not None and record["covers"]["kernels"] == 1  # k0 has no digest anywhere


def _object(digests: dict[str, Any] | None, symbols: list[str] = SYMBOLS, **extra: Any) -> dict[str, Any]:
    o = {"symbols": symbols, "object": "CMakeFiles/t.dir/a.cu.o", "device": bool(symbols), **extra}
    if digests is not None:
        o["digests"] = digests
    return o


FULL = {"covers": {"host": "digested", "kernels": 3}, "host": "h", "code": {"sm_80": ["a", "b", "c"]}}


@pytest.mark.parametrize(("o", "why"), [
    (_object(None), "has no digests"),
    (_object({"covers": 1}), "do not say what they cover"),
    (_object({**FULL, "code": {"sm_80": ["a", "b"]}}), "do not match its 3 symbols"),
    (_object({**FULL, "code": {"sm_80": ["a", "b", "c"], "sm_90": ["a", "b", "c", "d"]}}), "do not match its 3"),
    (_object({k: v for k, v in FULL.items() if k != "host"}),
     "holds no host digest"),
    (_object({**FULL, "covers": {"kernels": 3}}), "has host code that was not digested"),
    (_object({**FULL, "covers": {"host": "elsewhere", "kernels": 3}}), "has host code that was not digested"),
    (_object({**FULL, "code": {"sm_80": ["a", "", "c"], "sm_90": ["a", "", ""]}}), "no digest of kernel k1"),
    (_object({**FULL, "covers": {"host": "digested", "kernels": 2}}), "cover 2 of its 3 kernels"),
    (_object({"covers": {"host": "precompiled header", "kernels": 0}}, [], object="CMakeFiles/t.dir/a.cu.o"),
     "says it is a precompiled header"),
    (_object({"covers": {"host": "precompiled header", "kernels": 0}}, ["k0"], object="t.dir/cmake_pch.hxx.gch"),
     "says it is a precompiled header"),
    (_object({"covers": {"host": "device image", "kernels": 0}}, [], device=False), "holds no device code"),
])
def test_a_record_that_leaves_something_out_says_what(o: dict[str, Any], why: str) -> None:
    assert why in uncovered(o), uncovered(o)


@pytest.mark.parametrize("o", [
    _object(FULL),
    _object({"covers": {"host": "digested", "kernels": 0}, "host": "h"}, []),
    _object(precompiled_header(), [], object="CMakeFiles/t.dir/cmake_pch.hxx.pch"),
    _object({"covers": {"host": "device image", "kernels": 1}, "code": {"sm_80": ["a"]}}, ["k0"]),
])
def test_a_record_that_covers_its_object_may_be_compared(o: dict[str, Any]) -> None:
    assert uncovered(o) == ""


def test_a_record_s_table_by_kernel_leaves_out_the_architectures_that_lack_one() -> None:
    table = kernel_digests(SYMBOLS, {"code": {"sm_80": ["a", "", "c"], "sm_90": ["", "", "f"]}}, "m")
    assert table == {"k0": {"sm_80": "a"}, "k1": {}, "k2": {"sm_80": "c", "sm_90": "f"}}
    assert kernel_digests(SYMBOLS, {}, "m") == {"k0": {}, "k1": {}, "k2": {}}
    with pytest.raises(MapError, match=r"m\.digests\.code\.sm_80: 2 digests for 3 symbols"):
        kernel_digests(SYMBOLS, {"code": {"sm_80": ["a", "b"]}}, "m")
