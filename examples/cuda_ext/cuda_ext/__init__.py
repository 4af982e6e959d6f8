"""An example CUDA extension; its wheel carries kernel_symbol_map.json.gz.

Each function launches the kernels of one ``.cu`` file (through ctypes: the
libraries link the CUDA runtime statically) and raises if CUDA fails.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def _library(name: str) -> ctypes.CDLL:
    return ctypes.CDLL(str(next(HERE.glob(f"lib{name}.so*"))))


def _check(rc: int, what: str) -> None:
    if rc:
        raise RuntimeError(f"cuda_ext.{what}: CUDA failed ({'allocation' if rc == 1 else 'launch'})")


def silu(n: int = 1024) -> None:
    """csrc/activation.cu: silu_kernel and scale_kernel<float>."""
    _check(_library("_ops").cuda_ext_silu(n), "silu")


def attention(tokens: int = 8, head_dim: int = 64) -> None:
    """csrc/attention.cu: attention_kernel<head_dim> and scale_kernel<float>."""
    _check(_library("_ops").cuda_ext_attention(tokens, head_dim), "attention")


def reduce(n: int = 256) -> None:
    """csrc/reduce.cu: sum_kernel and scale_kernel<double>."""
    _check(_library("_reduce").cuda_ext_reduce(n), "reduce")


def version() -> int:
    """csrc/host_only.cpp: host code alone."""
    return int(_library("_ops").cuda_ext_version())
