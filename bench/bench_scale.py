"""Issue 6's figures on the vLLM-sized generated tree, side by side in one run.

    .venv/bin/python bench/bench_scale.py [--sources 500]

(a) the seed approach (cuobjdump -symbols per object on 8 threads, `ninja -t
deps`), (b) our full extraction with a cold cache, (c) re-extraction after
touching one .cu and rebuilding, (d) a no-op re-run; the gzipped map sizes and
our peak memory. Bytecode is cached, as in an installed wheel.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _corpus import CACHE  # noqa: E402
from _run import KSM, timed  # noqa: E402
from _seed_approach import seed_map  # noqa: E402
from bench_build import old_cuobjdump  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=500, help="size of the generated tree (docs/figures.md: 500)")
    args = ap.parse_args()
    src, build = gen_tree.build_tree(args.sources)
    out = CACHE / "maps"
    out.mkdir(parents=True, exist_ok=True)
    ours = out / "scale.json.gz"
    command = [*KSM, "build", "--build-dir", str(build), "--out", str(ours)]
    cache = build / ".kernel_symbol_map"
    timed([*command, "--no-cache"])  # warm up: bytecode, page cache

    t_seed = seed_map(build, src, out / "seed.json.gz", old_cuobjdump())
    for stale in cache.glob("*.json"):  # every cache file; the package's object lists live below it
        stale.unlink()
    t_cold, peak_cold, _ = timed(command)
    touched = src / "csrc" / "misc" / "k0009.cu"
    touched.write_text(touched.read_text())
    subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True)
    t_one, peak_one, _ = timed(command)
    t_noop, peak_noop, said = timed(command)
    assert "(up to date)" in said

    seed_kib = (out / "seed.json.gz").stat().st_size / 1024
    ours_kib = ours.stat().st_size / 1024
    print(f"tree: {build} ({args.sources} .cu, 3 archs, 200 shared headers)")
    print(f"  (a) seed approach              {t_seed:6.2f} s")
    print(f"  (b) full extraction, cold      {t_cold:6.2f} s   {t_seed / t_cold:5.1f}x faster than (a) (target >= 10x)")
    print(f"  (c) one .cu touched, rebuilt   {t_one:6.2f} s   (target < 0.5 s)")
    print(f"  (d) no-op re-run               {t_noop:6.2f} s   (target < 0.2 s)")
    print(f"  peak memory                    {max(peak_cold, peak_one, peak_noop) / 2**20:6.0f} MB  (target < 300 MB)")
    print(f"  map size, gzipped              ours {ours_kib:.0f} KiB, seed {seed_kib:.0f} KiB (target: ours <= seed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
