"""The seed script's approach, re-expressed for side-by-side timing (never imported by the package).

The seed (../shared/reference/seed-kernel_symbol_map.txt) is stored without its
indentation, so it cannot run as it is. This does what it does, in the same
shape: rglob ``*.o`` under the build root, one ``cuobjdump -symbols`` process
per object on 8 threads, ``ninja -t deps`` for header deps, one gzipped JSON.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import subprocess
import time
from pathlib import Path

from kernel_symbol_map.readers.cuobjdump import parse_symbols


def _deps(build_dir: Path) -> dict[str, list[str]]:
    out = subprocess.run(["ninja", "-C", str(build_dir), "-t", "deps"], capture_output=True, text=True).stdout
    deps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line and not line.startswith(" ") and ": #deps" in line:
            current = deps.setdefault(line.split(":", 1)[0], [])
        elif current is not None and line.startswith("    "):
            current.append(line.strip())
        else:
            current = None
    return deps


def _symbols(cuobjdump: str, obj: Path) -> tuple[list[str], str | None]:
    proc = subprocess.run([cuobjdump, "-symbols", str(obj)], capture_output=True, text=True)
    if proc.returncode != 0:
        return [], (proc.stderr or proc.stdout).strip().splitlines()[-1:][0] if (proc.stderr or proc.stdout) else "failed"
    found = parse_symbols(proc.stdout)
    return sorted({s for m in found.values() for names in m.elf.values() for s in names}), None


def seed_map(build_root: Path, source_root: Path, out: Path, cuobjdump: str, jobs: int = 8) -> float:
    """Write the seed-style map; returns the wall time in seconds."""
    t0 = time.perf_counter()
    build_dirs = sorted({p.parent for p in build_root.rglob("build.ninja")})
    work, all_deps = [], {}
    for bd in build_dirs:
        all_deps[bd] = _deps(bd)
        for obj in bd.rglob("*.o"):
            rel = obj.relative_to(bd).as_posix()
            if "CompilerId" not in rel and ("/CMakeFiles/" in f"/{rel}" or rel.startswith(".o/")):
                work.append((bd, rel, obj))

    def one(job: tuple[Path, str, Path]) -> dict:
        bd, rel, obj = job
        deps = all_deps[bd].get(rel, [])
        syms, err = _symbols(cuobjdump, obj)
        entry = {"source": deps[0] if deps else rel, "target": "", "object": rel, "device": rel.endswith(".cu.o"),
                 "symbols": syms, "deps": sorted({str(Path(d)) for d in deps})}
        if err:
            entry["error"] = err
        return entry

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        objects = sorted(pool.map(one, work), key=lambda e: (e["source"], e["object"]))
    doc = {"version": 1, "commit": "", "cuda": "", "generated_at": "", "build_dirs": [str(b) for b in build_dirs],
           "incomplete": False, "errors": [], "objects": objects, "stats": {}}
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    return time.perf_counter() - t0
