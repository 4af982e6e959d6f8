"""The example's own tests: each calls one op of the installed wheel.

On a machine with no CUDA device an op fails at its first CUDA call, the
allocation, and says so: its host code ran all the same, which is what a
build with host coverage records (see docs/selecting-tests.md).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import cuda_ext


def _run(op: Callable[..., None], *args: int) -> None:
    try:
        op(*args)
    except RuntimeError as e:  # no CUDA device here: the allocation fails before any launch
        assert "CUDA failed (allocation)" in str(e)


@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_silu(n: int) -> None:
    _run(cuda_ext.silu, n)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_attention(head_dim: int) -> None:
    _run(cuda_ext.attention, 8, head_dim)


@pytest.mark.parametrize("n", [256, 1024])
def test_reduce(n: int) -> None:
    _run(cuda_ext.reduce, n)


def test_version() -> None:
    assert cuda_ext.version() == 1
