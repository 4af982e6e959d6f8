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
        path = tmp_path / str(i) / fuzz.input_name(target)
        path.parent.mkdir()
        path.write_bytes(fuzz.prepare(target, data))
        try:
            result = read(path)  # type: ignore[operator]
        except KernelSymbolMapError:
            continue
        if target == "objects" and i == 0 and not seed.name.startswith(("crash", "hang")):
            assert result.error is None and result.symbols, seed.name  # the seeds themselves read cleanly


FOUND = sorted(fuzz.found())
READ_BY_THE_CLI = [(t, p) for t, p in CASES if t in ("map", "jsonl", "text", "objects")]


def test_every_crash_issue_22_found_is_kept() -> None:
    """The seeds bench/fuzz.py --found writes are in the corpus as they are written."""
    found = fuzz.found()
    assert [n for n in FOUND if (fuzz.SEEDS / n).read_bytes() != found[n]] == []


@pytest.mark.parametrize(("target", "seed"), READ_BY_THE_CLI, ids=[f"{t}/{p.name}" for t, p in READ_BY_THE_CLI])
def test_cli_replay(target: str, seed: Path, tmp_path: Path) -> None:
    """Each seed through every command that reads it: no traceback, a documented exit code, select falls back.

    A seed that once crashed (crash-*, oom-*), or is malformed (bad-*), is refused with one line that
    says why: ``ERROR`` from show, query, merge, diff and validate (exit 1),
    and from select a fallback that runs every test it could touch (exit 0).
    """
    good_map, good_recording = tmp_path / "good.json.gz", tmp_path / "good.jsonl"
    good_map.write_bytes(fuzz.prepare("map", (fuzz.SEEDS / "map" / "map.json").read_bytes()))
    good_recording.write_bytes((fuzz.SEEDS / "jsonl" / "r.jsonl").read_bytes())
    bad = tmp_path / "bad" / fuzz.input_name(target)
    bad.parent.mkdir()
    bad.write_bytes(fuzz.prepare(target, seed.read_bytes()))
    signal.signal(signal.SIGALRM, _hang)
    signal.alarm(60)
    try:
        for name, argv in fuzz.cli_cases(target, bad, good_map, good_recording, tmp_path):
            code, output = fuzz.run_cli(argv)
            assert fuzz.cli_problem(name, code, output) is None
            if not seed.name.startswith(("crash", "oom", "bad")):
                continue
            if name.startswith("select"):
                assert "unreadable" in output, (name, output)
            else:  # --json prints its record on stdout first
                lines = output.splitlines()
                assert code == 1 and [x for x in lines if x.startswith("ERROR ")] == lines[-1:], (name, output)
    finally:
        signal.alarm(0)
