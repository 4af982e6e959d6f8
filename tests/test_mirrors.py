"""Hipified copies traced back to their originals: the renames of torch's hipify, undone."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_symbol_map.producer.mirrors import Mirror, Mirrors, parse


@pytest.mark.parametrize(("original", "copy"), [
    ("csrc/moe/topk.cu", "csrc/moe/topk.hip"),  # .cu -> .hip
    ("csrc/ops.h", "csrc/ops.h"),  # unchanged
    ("csrc/cuda_utils.cuh", "csrc/hip_utils.cuh"),  # "cuda" -> "hip" in the name
    ("csrc/quant/cuda_compat.h", "csrc/quant/hip_compat.h"),
    ("csrc/attention/attention_kernels.cuh", "csrc/attention/attention_kernels_hip.cuh"),  # the _hip suffix
    ("csrc/cuda/kernel.cu", "csrc/hip/kernel.hip"),  # folder names too
    ("csrc/CUDAGuard.h", "csrc/HIPGuard.h"),
])
def test_hipify_renames_are_undone(tmp_path: Path, original: str, copy: str) -> None:
    source, build = tmp_path / "src", tmp_path / "build" / "hipified"
    (source / original).parent.mkdir(parents=True)
    (source / original).write_text("")
    mirrors = Mirrors((parse(f"{build}={source}", tmp_path),))
    assert mirrors.resolve(str(build / copy)) == (str(source / original), str(build / copy))


def test_the_same_path_wins_and_a_copy_without_original_stays(tmp_path: Path) -> None:
    source, build = tmp_path / "src", tmp_path / "hipified"
    (source / "csrc").mkdir(parents=True)
    for name in ("hip_ops.h", "cuda_ops.h"):
        (source / "csrc" / name).write_text("")
    mirrors = Mirrors((Mirror(str(build), str(source)),))
    assert mirrors.resolve(str(build / "csrc/hip_ops.h"))[0] == str(source / "csrc/hip_ops.h")
    only_copy = str(build / "csrc/generated_hip_only.h")
    assert mirrors.resolve(only_copy) == (only_copy, None) and mirrors.orphans == {only_copy}
    outside = str(tmp_path / "elsewhere.h")
    assert mirrors.resolve(outside) == (outside, None) and outside not in mirrors.orphans


def test_a_bad_mirror_is_a_usage_error(tmp_path: Path) -> None:
    from kernel_symbol_map.cli import main

    assert main(["build", "--build-dir", str(tmp_path), "--mirror", "no-equals-sign"]) == 2
