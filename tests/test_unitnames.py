"""nvcc's hash of a file's path in its internal names: found where nvcc writes it, and nowhere else.

The names here are nvcc 13's (tests/test_two_folders.py builds them for real); a user's name that happens
to look like one must not be masked: two builds would then agree where the code differs.
"""

from __future__ import annotations

import pytest

from kernel_symbol_map._unitnames import canonical, masked, unit_hash

NVCC = [
    b"_ZN12_GLOBAL__N__1a2b3c4d_10_kernels_cu_9f8e7d6c6hiddenEPi",  # an anonymous namespace
    b"_Z7appliedIXadL_ZN34_INTERNAL_1a2b3c4d_10_kernels_cu_7c1ac3ae5twiceEiEEEvPi",  # a file-static function
    b"_ZN41_INTERNAL_1a2b3c4d_10_kernels_cu_c748103021bicubic_interpolation1aE",  # a file-static variable
    b"__nv_static_51__1a2b3c4d_10_kernels_cu_9f8e7d6c__Z4stepPi",  # -rdc's static function
]


@pytest.mark.parametrize("name", NVCC)
def test_nvccs_names_hold_the_units_hash(name: bytes) -> None:
    assert unit_hash(name) == b"1a2b3c4d"
    assert masked(name, b"1a2b3c4d") == masked(name.replace(b"1a2b3c4d", b"99999999"), b"99999999")


@pytest.mark.parametrize("name", [b"cfg_INTERNAL_20240101_1_x", b"k_INTERNAL_00000001_1_x", b"GLOBAL_N_1a2b3c4d_1_x"])
def test_a_users_name_like_one_is_no_units(name: bytes) -> None:
    assert unit_hash(name) is None
    assert canonical([name.decode()]) is None


@pytest.mark.parametrize("second", [NVCC[1].replace(b"1a2b3c4d", b"5e6f7a8b"), NVCC[0].replace(b"1a2b3c4d", b"5e6f7a8b")])
def test_a_file_with_two_units_hashes_has_none(second: bytes) -> None:
    """A device link of two units: every name after the first that holds another unit's hash counts, however
    many names of the first come before it."""
    assert unit_hash(b"\0".join([*NVCC[:3] * 50, second, NVCC[2]])) is None
    assert unit_hash(b"\0".join(NVCC[:3] * 50)) == b"1a2b3c4d"
