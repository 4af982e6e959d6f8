"""A recording is evidence only when it says it is whole (issue 26's audit of consumer/select/recordings.py).

Real files on disk, read by the reader ``select`` uses; each case is also fed
to ``select`` with a change its kernels never reach: an incomplete record
must still run its test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import Recording, read, read_each
from kernel_symbol_map.consumer.select.selection import select
from kernel_symbol_map.errors import RecordingError

COMMIT = "c" * 40


def _map() -> KernelMap:
    objects = [{"source": s, "target": "t", "object": f"{s}.o", "device": True, "symbols": k, "deps": [s]}
               for s, k in (("csrc/a.cu", ["_Z1av"]), ("csrc/y.cu", ["_Z1yv"]))]
    return KernelMap({"version": 1, "commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": [],
                      "incomplete": False, "errors": [], "stats": {}, "objects": objects})


def _runs(recordings: list[Recording], test: str) -> bool:
    selection = select(_map(), recordings, ["csrc/y.cu"])
    return next(d for d in selection.decisions if d.test == test).run


def _jsonl(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_one_tests_records_merge_incomplete_when_one_part_is(tmp_path: Path) -> None:
    """Two shards recorded the same test: one whole, one not. The merge is not whole."""
    whole = _jsonl(tmp_path / "a.jsonl", {"test": "t::x", "kernels": ["_Z1av"], "complete": True, "commit": COMMIT})
    partial = _jsonl(tmp_path / "b.jsonl", {"test": "t::x", "kernels": [], "complete": False, "commit": COMMIT,
                                            "reason": "the test failed"})
    (merged,) = read([whole, partial])
    assert not merged.complete and merged.why_incomplete == "the test failed" and merged.kernels == ("_Z1av",)
    assert _runs([merged], "t::x")


def _text(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_dropped_line_makes_a_text_recording_incomplete(tmp_path: Path) -> None:
    """CUPTI said it dropped records mid-run; the footer's own dropped count is 0."""
    path = _text(tmp_path / "t.txt", "# test=t::x", "_Z1av", "# dropped=3", "# end records=1 unique=1 dropped=0")
    (rec,) = read([path], COMMIT)
    assert not rec.complete and rec.why_incomplete == "3 records dropped"
    assert _runs([rec], "t::x")


def test_a_footer_whose_unique_count_disagrees_is_not_trusted(tmp_path: Path) -> None:
    """The footer counted two kernels; the file holds one: a name was lost (a truncated write)."""
    path = _text(tmp_path / "t.txt", "# test=t::x", "_Z1av", "# end records=2 unique=2 dropped=0")
    (rec,) = read([path], COMMIT)
    assert not rec.complete and rec.why_incomplete == "footer says 2 unique kernels, file has 1"
    assert _runs([rec], "t::x")
    agrees = _text(tmp_path / "u.txt", "# test=t::x", "_Z1av", "# end records=2 unique=1 dropped=0")
    assert read([agrees], COMMIT)[0].complete


def test_a_jsonl_record_without_complete_is_refused(tmp_path: Path) -> None:
    """A writer that never said "complete" never said the record is whole."""
    path = _jsonl(tmp_path / "a.jsonl", {"test": "t::x", "kernels": ["_Z1av"], "commit": COMMIT})
    with pytest.raises(RecordingError, match='"complete" must be true or false'):
        read([path])


def test_one_tests_records_from_two_commits_are_not_evidence(tmp_path: Path) -> None:
    """Both parts whole, but recorded at two commits: there is no one commit to hold the map against."""
    other = "d" * 40
    a = _jsonl(tmp_path / "a.jsonl", {"test": "t::x", "kernels": ["_Z1av"], "complete": True, "commit": COMMIT})
    b = _jsonl(tmp_path / "b.jsonl", {"test": "t::x", "kernels": ["_Z1av"], "complete": True, "commit": other})
    (merged,) = read([a, b])
    assert not merged.complete and merged.commit == "" and merged.why_incomplete == (
        f"recorded at several commits ({COMMIT}, {other})")
    assert _runs([merged], "t::x")


RECORD = {"test": "t::x", "kernels": ["_Z1av"], "complete": True, "commit": COMMIT}


@pytest.mark.parametrize(("lines", "says"), [
    ([], "no test's record"),
    ([{"run": {"exit_status": 2, "tests_collected": 3, "collection_errors": 1}}, RECORD],
     "1 file of its pytest run failed to collect"),
    ([{"run": {"exit_status": 2, "tests_collected": 3, "collection_errors": 0}}, RECORD], "was interrupted"),
    ([{"run": {"exit_status": 5, "tests_collected": 0, "collection_errors": 0}}], "collected no tests"),
    ([{"run": {"exit_status": 1, "tests_collected": 1, "collection_errors": 0}}, RECORD], None),
    ([RECORD], None),
])
def test_a_recording_that_doubts_its_run_says_so_and_keeps_its_records(tmp_path: Path, lines: list[dict[str, object]],
                                                                      says: str | None) -> None:
    path = _jsonl(tmp_path / "r.jsonl", *lines)
    recordings, unreadable, doubts = read_each([path])
    assert not unreadable and [r.test for r in recordings] == (["t::x"] if RECORD in lines else [])
    assert any(says in d for d in doubts) if says is not None else doubts == [], doubts


@pytest.mark.parametrize("run", [[], {"exit_status": "2"}, {"exit_status": -1}, {"collection_errors": 1.5}])
def test_a_malformed_run_line_makes_the_file_unreadable(tmp_path: Path, run: object) -> None:
    path = _jsonl(tmp_path / "r.jsonl", {"run": run}, RECORD)
    recordings, unreadable, _ = read_each([path])
    assert not recordings and len(unreadable) == 1 and '"run" must hold' in unreadable[0].why
