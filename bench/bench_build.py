"""Issue 3's figure: `kernel-symbol-map build` against the seed's approach on the same tree.

    .venv/bin/python bench/bench_build.py [--sources 500] [--cuobjdump EXE]

The tree comes from gen_tree.py (built once, cached). The seed approach runs
cuobjdump -symbols per object on 8 threads and `ninja -t deps`; it is given
cuobjdump 13.4, since with 13.5 its parser finds no kernels at all.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _corpus import CACHE  # noqa: E402
from _seed_approach import seed_map  # noqa: E402


def old_cuobjdump() -> str:
    found = sorted((Path(sys.prefix) / "opt").glob("cuobjdump-13.4*/nvidia/cu13/bin/cuobjdump"))
    if not found:
        raise SystemExit("cuobjdump 13.4 not found: run scripts/setup")
    return str(found[0])


def ours(build: Path, out: Path, *extra: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kernel_symbol_map", "build", "--build-dir", str(build), "--out", str(out),
                    *extra], check=True, capture_output=True)
    seconds = time.perf_counter() - t0
    return seconds, json.loads(gzip.decompress(out.read_bytes()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=500)
    ap.add_argument("--headers", type=int, default=200)
    ap.add_argument("--cuobjdump", default=None)
    args = ap.parse_args()
    src, build = gen_tree.build_tree(args.sources, args.headers)
    cuobjdump = args.cuobjdump or old_cuobjdump()
    out = CACHE / "maps"
    out.mkdir(parents=True, exist_ok=True)

    ours(build, out / "warmup.json.gz")  # the file-API reply, page cache
    t_seed = seed_map(build, src, out / "seed.json.gz", cuobjdump)
    seed = json.loads(gzip.decompress((out / "seed.json.gz").read_bytes()))
    t_ours, doc = ours(build, out / "ours.json.gz")
    assert "reason" not in doc, doc.get("reason")
    n_seed = sum(len(o["symbols"]) for o in seed["objects"])
    print(f"tree: {doc['stats']['objects']} objects ({doc['stats']['device_objects']} device), "
          f"{doc['stats']['symbols']} symbols; 3 archs; {args.headers} shared headers")
    print(f"  seed approach (cuobjdump x8 threads, ninja -t deps)  {t_seed:7.2f} s  ({len(seed['objects'])} objects, {n_seed} symbols)")
    print(f"  kernel-symbol-map build                            {t_ours:7.2f} s")
    print(f"  ratio                                              {t_seed / t_ours:7.1f}x faster (target >= 10x)")
    print(f"  map size: seed {(out / 'seed.json.gz').stat().st_size / 1024:.0f} KiB, "
          f"ours {(out / 'ours.json.gz').stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
