"""Issues 5 and 11: load a vLLM-sized map and select tests for three changes, each in under 1 s.

    .venv/bin/python bench/bench_select.py [--objects 600] [--deps 1000]

The map is synthetic but shaped like vLLM's: --objects objects, each with about
--deps header deps drawn mostly from a shared pool (torch, CUDA, cutlass), ~18
kernels each; 300 recorded tests, each launching 40 kernels. The changes: 50
files (sources and widely shared headers), one ``.cu`` file, and one header
included by three objects. For each, the fraction of tests skipped (safety
must not turn into "always run everything"), the library call's time with
canonical paths, and the whole CLI's.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import CACHE, ROOT  # noqa: E402

from kernel_symbol_map import mapformat  # noqa: E402
from kernel_symbol_map.consumer.maps.canonical import Canonical  # noqa: E402
from kernel_symbol_map.consumer.maps.kernelmap import load  # noqa: E402
from kernel_symbol_map.consumer.select.recordings import read  # noqa: E402
from kernel_symbol_map.consumer.select.selection import Options, select  # noqa: E402

FEW = "csrc/include/few.cuh"  # included by three objects only
COMMIT = "ab" * 20  # a full SHA: select refuses any other name


def synthetic_map(objects: int, deps: int, rng: random.Random, kernels: int = 18) -> dict:
    """A valid version-1 map: ``objects`` objects of ``kernels`` kernels and ~``deps`` deps (bench_consumers too)."""
    shared = [f"/usr/local/lib/python3.12/site-packages/torch/include/h{i:05d}.h" for i in range(2 * deps)]
    project = [f"csrc/include/p{i:04d}.cuh" for i in range(400)]
    entries = []
    for i in range(objects):
        source = f"csrc/ops/k{i:04d}.cu"
        own = rng.sample(project, 40) + rng.sample(shared, deps - 41) + ([FEW] if i < 3 else [])
        entries.append({
            "source": source, "target": f"_C{i % 8}", "object": f"CMakeFiles/_C.dir/{source}.o", "device": True,
            "symbols": sorted(f"_Z{len(source)}k{i}_{j}Pf" for j in range(kernels)), "deps": sorted([source, *own]),
            "archs": ["sm_80", "sm_90", "sm_100"],
        })
    return {"version": 1, "commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
            "incomplete": False, "errors": [], "objects": entries, "stats": {}, "backend": "cuda"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=600)
    ap.add_argument("--deps", type=int, default=1000)
    args = ap.parse_args()
    rng = random.Random(7)
    folder = CACHE / "select"
    folder.mkdir(parents=True, exist_ok=True)
    doc = synthetic_map(args.objects, args.deps, rng)
    path = folder / "map.json.gz"
    mapformat.write(doc, path)
    all_kernels = [s for o in doc["objects"] for s in o["symbols"]]
    recordings = folder / "recordings.jsonl"
    with recordings.open("w") as f:
        for t in range(300):
            f.write(json.dumps({"test": f"test_{t:03d}", "kernels": rng.sample(all_kernels, 40), "complete": True,
                                "commit": COMMIT}) + "\n")
    fifty = sorted({rng.choice(doc["objects"])["source"] for _ in range(30)} |
                   set(rng.sample([d for d in doc["objects"][0]["deps"] if d.startswith("csrc/include/p")], 20)))[:50]
    changes = {"50 files": fifty, "one .cu": [doc["objects"][7]["source"]], "one header, 3 objects": [FEW]}

    t0 = time.perf_counter()
    kmap = load(path)
    t1 = time.perf_counter()
    recorded = read([recordings])
    print(f"map: {args.objects} objects x ~{args.deps} deps, {path.stat().st_size / 2**20:.1f} MB gzipped; "
          f"300 recorded tests; load {t1 - t0:.3f} s")
    for name, changed in changes.items():
        t2 = time.perf_counter()
        selection = select(kmap, recorded, changed, options=Options(canonical=Canonical(ROOT)))
        t3 = time.perf_counter()
        cli = [sys.executable, "-m", "kernel_symbol_map", "select", "--map", str(path), "--recordings",
               str(recordings), "--json", "--source-root", str(ROOT), "--changed", *changed]
        subprocess.run(cli, check=True, capture_output=True)
        t4 = time.perf_counter()
        skipped = len(selection.decisions) - len(selection.to_run)
        print(f"  {name:22} {len(changed):3} files: skips {skipped:3} of 300 ({skipped / 3:5.1f}%)"
              f"  select {t3 - t2:6.3f} s  load + select {t1 - t0 + t3 - t2:6.3f} s (target < 1 s)"
              f"  whole CLI {t4 - t3:6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
