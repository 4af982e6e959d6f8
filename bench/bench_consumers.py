"""Issue 29, item 5: the consumers (select, show, validate) on a map 10x vLLM's, in CPU seconds and peak RSS.

    .venv/bin/python bench/bench_consumers.py [--scale 10] [--repeat 3] [--checkout DIR...]

The map is bench_select's synthetic one, shaped like vLLM's and scaled: 450
objects per unit of --scale, ~11 kernels each, ~1,000 header deps each drawn
mostly from a shared pool (torch, CUDA); 5,000 recorded tests per unit of
--scale, in JSON Lines files of 5,000 records each as the pytest plugin writes
them, each test launching 40 kernels. It is generated once into
``.cache/bench/consumers-<params>``. Each row is the CLI in a fresh process
(``.venv/bin/kernel-symbol-map``, bytecode cached): ``select`` for a change
of 1% of the sources and a header three objects include, ``show`` and
``validate``; CPU is user + sys of that child (``os.wait4``), RSS its peak
(``ru_maxrss``); medians of --repeat rounds, the rows interleaved.
``--checkout DIR`` (repeatable) times the package under ``DIR/python`` too (a
copy of another commit: ``git archive <commit> python | tar -x -C DIR``), with
the same interpreter, in the same rounds: before and after on one machine, and
their selections must agree.

Before (issue 29's baseline: commit 93166e9, CPU seconds under a load average of 9 on 2 cores, Python 3.11):

    scale 10 (4,500 objects, 49,500 kernels, 50,000 tests; map 13.0 MB gzipped)
      select    6.27 s CPU   1377 MB   (32,753 of 50,000 tests skipped)
      show      2.81 s CPU   1106 MB
      validate 17.57 s CPU   1106 MB   (6.3x show)
    scale 1 (450 objects, 4,950 kernels, 5,000 tests; map 1.3 MB gzipped)
      select    0.60 s CPU    164 MB   (2,697 of 5,000 skipped)
      show      0.35 s CPU    130 MB
      validate  1.83 s CPU    130 MB   (5.2x show)

After (this bench with --checkout of 93166e9, the same rounds, a quiet machine: load 0.8):

    scale 10                         after                  before
      select                    2.76 s CPU   247 MB     6.01 s   1377 MB
      show                      1.51 s CPU    85 MB     2.80 s   1106 MB
      validate                  1.23 s CPU    84 MB    17.19 s   1106 MB   (0.8x show; was 6.2x)
    scale 1
      select                    0.34 s CPU    52 MB     0.57 s    164 MB
      show                      0.20 s CPU    27 MB     0.33 s    130 MB
      validate                  0.21 s CPU    27 MB     1.85 s    130 MB

Of select's 2.76 s at scale 10, writing its JSON (the CLI's json.dump with an
indent: a million writes) is 0.5 s; one json.dumps and one write make it 0.2 s.

Targets: at scale 10, select <= 2.5 s CPU and 500 MB, show <= 1.5 s and 500
MB, validate within 2x show; nothing slower at scale 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import CACHE, ROOT  # noqa: E402
from bench_select import COMMIT, FEW, synthetic_map  # noqa: E402

from kernel_symbol_map import mapformat  # noqa: E402

CLI = str(ROOT / ".venv" / "bin" / "kernel-symbol-map")
OBJECTS, TESTS = 450, 5_000  # per unit of scale: vLLM's map has ~450 objects; its CI a few thousand tests
KERNELS, DEPS, LAUNCHED = 11, 1_000, 40  # per object, per object, per test
PER_FILE = 5_000  # tests per JSON Lines file: one pytest run's recording
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode cached, as installed
# The CLI of another copy of the package: the editable install's finder (first on sys.meta_path) set aside.
OTHER = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'ScikitBuild' not in type(f).__name__]; "
         "where = sys.argv.pop(1); sys.path.insert(0, where); import kernel_symbol_map; "
         "assert kernel_symbol_map.__file__.startswith(where), kernel_symbol_map.__file__; "
         "from kernel_symbol_map.cli import main; sys.exit(main())")


def inputs(scale: int) -> tuple[Path, Path, list[str]]:
    """(the map, the recordings' folder, the change) at ``scale``, generated once."""
    objects, tests = OBJECTS * scale, TESTS * scale
    folder = CACHE / f"consumers-o{objects}-k{KERNELS}-d{DEPS}-t{tests}"
    path, recordings, change = folder / "kernel_symbol_map.json.gz", folder / "recordings", folder / "change.json"
    if change.exists():
        return path, recordings, json.loads(change.read_text())
    print(f"generating {folder} (once)", file=sys.stderr)
    rng = random.Random(29)
    doc = synthetic_map(objects, DEPS, rng, KERNELS)
    doc["stats"] = mapformat.stats(objects, doc["objects"], doc["errors"])
    found = mapformat.problems(doc)
    assert not found, found  # a valid version-1 map, or the bench measures an error path
    recordings.mkdir(parents=True, exist_ok=True)
    mapformat.write(doc, path)
    kernels = [s for o in doc["objects"] for s in o["symbols"]]
    for first in range(0, tests, PER_FILE):
        records = [{"test": f"tests/kernels/test_k{t // 100:04d}.py::test_case[{t % 100}]",
                    "kernels": sorted(rng.sample(kernels, LAUNCHED)), "complete": True, "commit": COMMIT,
                    "reason": "", "processes": 1} for t in range(first, min(first + PER_FILE, tests))]
        (recordings / f"step{first // PER_FILE:03d}.jsonl").write_text(
            "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    # 1% of the sources and a header three objects include: a third to a half of the tests run, so both a test that
    # launched a reached kernel and one whose whole recording must be checked are measured.
    changed = sorted(rng.sample([o["source"] for o in doc["objects"]], objects // 100)) + [FEW]
    change.write_text(json.dumps(changed))
    return path, recordings, changed


def measure(command: list[str], out: Path) -> tuple[float, float, int]:
    """(CPU seconds, user + sys; wall seconds; peak RSS in bytes) of one run of ``command``, which must succeed."""
    with out.open("wb") as stdout, tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=ENV, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"bench_consumers: {' '.join(command)} exited {proc.returncode}: "
                             f"{stderr.read()[-600:]!r}")
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=10, help="times vLLM's map (450 objects) and 5,000 tests")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checkout", type=Path, action="append", default=[],
                    help="also time the package in DIR/python (another commit's copy), in the same rounds")
    args = ap.parse_args()
    path, recordings, changed = inputs(args.scale)
    clis = {"this checkout": [CLI], **{str(c): [sys.executable, "-c", OTHER, str(c.resolve() / "python")]
                                       for c in args.checkout}}
    rows = {(who, name): [*cli, *command] for who, cli in clis.items() for name, command in {
        "select": ["select", "--map", str(path), "--recordings", str(recordings), "--source-root", str(ROOT),
                   "--json", "--changed", *changed],
        "show": ["show", str(path)],
        "validate": ["validate", str(path)],
    }.items()}
    figures: dict[tuple[str, str], list[tuple[float, float, int]]] = {row: [] for row in rows}
    with tempfile.TemporaryDirectory() as scratch:
        outs = {row: Path(scratch) / f"{i}.out" for i, row in enumerate(rows)}
        for _ in range(args.repeat):  # every row once a round: a load that comes and goes meets them all
            for row, command in rows.items():
                figures[row].append(measure(command, outs[row]))
        selections = {who: json.loads(outs[(who, "select")].read_text()) for who in clis}
    print(f"scale {args.scale} ({OBJECTS * args.scale:,} objects, {OBJECTS * args.scale * KERNELS:,} kernels, "
          f"{TESTS * args.scale:,} tests; map {path.stat().st_size / 2**20:.1f} MB gzipped); load average "
          f"{os.getloadavg()[0]:.2f}; medians of {args.repeat}")
    for who in clis:
        selection = selections[who]
        print(f"{who}: select skips {len(selection['skip']):,} of {len(selection['decisions']):,} tests "
              f"({len(changed)} files changed, fallback {selection['fallback']})")
        cpu = {name: statistics.median(f[0] for f in found) for (w, name), found in figures.items() if w == who}
        for (w, name), found in figures.items():
            if w != who:
                continue
            wall = statistics.median(f[1] for f in found)
            peak = statistics.median(f[2] for f in found) / 2**20
            ratio = f"   ({cpu[name] / cpu['show']:.1f}x show)" if name == "validate" else ""
            print(f"  {name:9} {cpu[name]:5.2f} s CPU  {wall:5.2f} s wall  {peak:5.0f} MB{ratio}")
    if len(clis) > 1 and len({json.dumps(s["decisions"]) for s in selections.values()}) > 1:
        print("the selections differ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
