"""What the recorder's audit library costs a process start, and what a test's library snapshot costs.

    .venv/bin/python bench/bench_audit.py [--starts 100] [--rounds 3]

Rows, each the median of ``--starts`` starts of one small dynamic executable (built here with cc, linked
to libc and libm), in wall seconds and CPU seconds (user + sys of the children), rounds interleaved so that
a load that comes and goes hits every row alike:

- ``plain``: no LD_AUDIT (the floor);
- ``audited, not recording``: LD_AUDIT set but no recording folder (the library steps aside at once);
- ``audited, recording``: what a native child of a recorded test pays (a record file per image);
- ``g++ -c``: one real compile (g++ and cc1plus, about 40 objects loaded) without and with the audit.

Then the per-test snapshot of this process's images (``recorder.libraries.loaded``): the first look, and
an unchanged one, with torch imported when it is installed (several hundred images); and what telling a
program's kind costs at each start a recorded process makes (``recorder.native.kind``): a dynamic one (its
program headers), and a static one (its dynamic section, and its bytes scanned for a driver's name).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from kernel_symbol_map.recorder import libraries, native  # noqa: E402

HELLO = "#include <math.h>\n#include <stdio.h>\nint main(void) { printf(\"%f\\n\", sqrt(2.0)); return 0; }\n"


def start(command: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    library = native.audit_library()
    if library is None:
        raise SystemExit("bench_audit: the audit library is not installed (scripts/setup builds it)")
    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    try:
        (work / "hello.c").write_text(HELLO)
        subprocess.run(["cc", "-O2", "-o", "hello", "hello.c", "-lm"], cwd=work, check=True)
        (work / "t.cc").write_text("int main() { return 0; }\n")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("KERNEL_SYMBOL_MAP", "LD_AUDIT"))}
        folder = work / "records"
        folder.mkdir()
        envs = {
            "plain": base,
            "audited, not recording": dict(base, LD_AUDIT=library),
            "audited, recording": dict(base, LD_AUDIT=library, KERNEL_SYMBOL_MAP_RECORD=str(folder),
                                       KERNEL_SYMBOL_MAP_RECORD_SPAWN="bench"),
        }
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
        rows.update({"g++ -c, plain": [], "g++ -c, audited": []})
        for _ in range(args.rounds):
            for _ in range(args.starts):
                for name, env in envs.items():
                    rows[name].append(start([str(work / "hello")], env))
            for name, env in (("g++ -c, plain", envs["plain"]), ("g++ -c, audited", envs["audited, recording"])):
                rows[name].append(start(["g++", "-c", "t.cc", "-o", "t.o"], env, work))
            shutil.rmtree(folder)
            folder.mkdir()
        floor = statistics.median(w for w, _ in rows["plain"])
        print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds of {args.starts} starts")
        print(f"{'row':28} {'wall median':>12} {'CPU median':>12} {'wall over plain':>16}")
        for name, values in rows.items():
            wall = statistics.median(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            over = f"+{(wall - floor) * 1e3:.2f} ms" if not name.startswith("g++") else ""
            print(f"{name:28} {wall * 1e3:9.2f} ms {cpu * 1e3:9.2f} ms {over:>16}")
        gxx = [statistics.median(w for w, _ in rows[n]) for n in ("g++ -c, plain", "g++ -c, audited")]
        print(f"g++ -c audited / plain: {gxx[1] / gxx[0]:.3f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    try:
        import torch  # noqa: F401
        what = "with torch imported"
    except ImportError:
        what = "without torch"
    t = time.perf_counter()
    names = libraries.loaded()
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(100):
        libraries.loaded()
    again = (time.perf_counter() - t) / 100
    print(f"library snapshot ({what}, {len(names or ())} names): first {first * 1e3:.2f} ms, "
          f"unchanged {again * 1e6:.1f} us")
    for program in (shutil.which("g++") or "/bin/ls", "/sbin/ldconfig", shutil.which("go") or ""):
        if not program or not os.path.exists(program):
            continue
        firsts = []
        for _ in range(50):
            native._kind.cache_clear()  # noqa: SLF001 - the first look at a file, as each process makes it
            t = time.perf_counter()
            found = native.kind(program)
            firsts.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(200):
            native.kind(program)
        again = (time.perf_counter() - t) / 200
        print(f"kind of {program} ({os.path.getsize(program) >> 10} KiB): {found}, first "
              f"{statistics.median(firsts) * 1e6:.0f} us, again {again * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
