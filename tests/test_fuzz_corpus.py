"""Replay the fuzz corpus (tests/data/fuzz): seeds, and every crash bench/fuzz.py ever found.

Each file goes through its reader as it is, truncated, and with a few bytes
flipped; the only exceptions allowed are this package's error types.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from kernel_symbol_map.errors import KernelSymbolMapError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fuzz  # noqa: E402

CASES = sorted((t, p) for t in fuzz.TARGETS for p in (fuzz.SEEDS / t).iterdir() if p.is_file())


def variants(data: bytes) -> list[bytes]:
    flipped = bytearray(data)
    for i in range(0, len(flipped), max(1, len(flipped) // 7)):
        flipped[i] ^= 0xA5
    return [data, data[: len(data) // 2], data[:-1], bytes(flipped), b""]


def test_every_target_has_seeds() -> None:
    assert {t for t, _ in CASES} == set(fuzz.TARGETS)


def _hang(_signum: int, _frame: object) -> None:
    raise AssertionError("a reader took over 5 s (a hang bench/fuzz.py would report)")


@pytest.mark.parametrize(("target", "seed"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_replay(target: str, seed: Path, tmp_path: Path) -> None:
    read = fuzz._reader(target)
    signal.signal(signal.SIGALRM, _hang)
    signal.alarm(5 * len(variants(b"")))
    try:
        _replay(target, seed, read, tmp_path)
    finally:
        signal.alarm(0)


def _replay(target: str, seed: Path, read: object, tmp_path: Path) -> None:
    for i, data in enumerate(variants(seed.read_bytes())):
        path = tmp_path / f"{i}{fuzz.SUFFIX[target]}"
        path.write_bytes(data)
        try:
            result = read(path)  # type: ignore[operator]
        except KernelSymbolMapError:
            continue
        if target == "objects" and i == 0 and not seed.name.startswith(("crash", "hang")):
            assert result.error is None and result.symbols, seed.name  # the seeds themselves read cleanly
