"""Issue 27's cost figure: `build`'s cold and no-op times and the map's size, before and after the digests.

    .venv/bin/python bench/bench_digest_cost.py [--sources 120] [--runs 3] [--before cf1e6f2] [--after HEAD]

The tree is gen_tree.py's (``--sources`` CUDA sources, 3 architectures, built
once and cached). Each side is the package as committed at a revision, taken
out with ``git archive`` into ``.cache/bench/revisions/<sha>`` and run from
there (the editable install's finder set aside, so the archive's code is the
one imported), each in a fresh process with bytecode cached, as
bench_build_times.py measures: cold is ``build`` with the tree's cache
(``.kernel_symbol_map/``) emptied, so every object is read; no-op is the same
command again, answered by the last run's fingerprint. The runs alternate
between the two sides. "before" defaults to cf1e6f2, the last commit without
digests; "after" to HEAD. Prints every run, the medians, and after/before;
the map's size is its gzipped bytes as written (and its JSON's).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen_tree  # noqa: E402
from _corpus import CACHE, ROOT  # noqa: E402
from _run import timed  # noqa: E402

# Runs kernel_symbol_map from the folder in sys.argv[1], not the editable install (whose finder comes
# before sys.path): sys.argv[2:] are the command's arguments.
LAUNCH = ("import runpy, sys; "
          "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; "
          "sys.path.insert(0, sys.argv.pop(1)); "
          "runpy.run_module('kernel_symbol_map', run_name='__main__', alter_sys=True)")
WHERE = "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]; " \
        "sys.path.insert(0, sys.argv[1]); import kernel_symbol_map; print(kernel_symbol_map.__file__)"


def revision(rev: str) -> tuple[str, Path]:
    """(the commit, the folder holding its python/ tree), archived once."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", f"{rev}^{{commit}}"], capture_output=True, text=True,
                         check=True).stdout.strip()
    folder = CACHE / "revisions" / sha
    if not (folder / "python" / "kernel_symbol_map" / "__init__.py").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "python"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    package = folder / "python"
    found = subprocess.run([sys.executable, "-c", WHERE, str(package)], capture_output=True, text=True,
                           check=True).stdout.strip()
    if not found.startswith(str(package)):
        raise SystemExit(f"{rev}: imported {found}, not the archive's package")
    return sha, package


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=int, default=120)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--before", default="cf1e6f2", help="revision without digests (default: cf1e6f2)")
    ap.add_argument("--after", default="HEAD", help="revision with digests (default: HEAD)")
    args = ap.parse_args()
    _, build = gen_tree.build_tree(args.sources)
    sides = {}
    for name, rev in (("before", args.before), ("after", args.after)):
        sha, package = revision(rev)
        out = CACHE / "maps" / f"cost-{args.sources}-{name}.json.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-c", LAUNCH, str(package), "build", "--build-dir", str(build), "--out", str(out)]
        sides[name] = {"rev": f"{rev} ({sha[:9]})", "command": command, "out": out, "cold": [], "noop": []}
        timed(command)  # warm: bytecode, page cache
    for _ in range(args.runs):
        for side in sides.values():
            shutil.rmtree(build / ".kernel_symbol_map", ignore_errors=True)
            seconds, _, said = timed(side["command"])
            side["cold"].append(seconds)
            side["said"] = said.strip()
            seconds, _, again = timed(side["command"])
            assert "(up to date)" in again, again
            side["noop"].append(seconds)
        for side in sides.values():
            side["gz"] = side["out"].stat().st_size
            side["json"] = len(gzip.decompress(side["out"].read_bytes()))
    print(f"{args.sources}-source CUDA tree (nvcc, 3 archs): {sides['after']['said']}")
    for name, side in sides.items():
        print(f"  {name:6} {side['rev']}: cold {' '.join(f'{s:.2f}' for s in side['cold'])} s, "
              f"no-op {' '.join(f'{s:.3f}' for s in side['noop'])} s")
    before, after = sides["before"], sides["after"]
    rows = [("cold (s, median)", statistics.median(before["cold"]), statistics.median(after["cold"]), "{:.2f}"),
            ("no-op (s, median)", statistics.median(before["noop"]), statistics.median(after["noop"]), "{:.3f}"),
            ("map, gzipped bytes", before["gz"], after["gz"], "{:,}"),
            ("map, JSON bytes", before["json"], after["json"], "{:,}")]
    print(f"  {'':20} {'before':>12} {'after':>12} {'after/before':>13}")
    for label, b, a, fmt in rows:
        print(f"  {label:20} {fmt.format(b):>12} {fmt.format(a):>12} {a / b:12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
