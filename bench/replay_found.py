"""Issue 22's crashes (tests/data/fuzz/*/crash-*, hang-*, oom-*) replayed against any installed version.

    .venv/bin/python bench/replay_found.py                       # this checkout
    .venv/bin/python bench/replay_found.py --python OLD/bin/python  # a version from before the fix

Each seed goes through the commands that read it, each in its own process
as CI runs them, under a 2 GiB address-space limit and a 10 s timeout:
maps through show, query, select, merge, diff and validate; recordings
through select; build.ninja through the manifest reader. A traceback, a
``MemoryError``, a timeout or an undocumented exit code is a crash. Prints a
line per seed and the count; exits 1 if any seed crashed.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz  # noqa: E402

MEMORY = 2 << 30
TIMEOUT = 10
MANIFEST = """
import sys
from pathlib import Path
from kernel_symbol_map.buildtree import ninjafile
from kernel_symbol_map.errors import BuildTreeError
try:
    ninjafile.read(Path(sys.argv[1]))
except BuildTreeError as e:
    print(f"ERROR {e}")
    sys.exit(1)
"""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _run(python: str, argv: list[str]) -> tuple[int | None, str]:
    try:
        proc = subprocess.run([python, *argv], capture_output=True, text=True, errors="replace", timeout=TIMEOUT,
                              preexec_fn=_limit, check=False)
    except subprocess.TimeoutExpired:
        return None, f"over {TIMEOUT} s"
    return proc.returncode, proc.stdout + proc.stderr


def replay(python: str, name: str, work: Path) -> str | None:
    """Why seed ``name`` (``target/file``) crashes ``python``'s kernel-symbol-map, or None."""
    target = name.split("/")[0]
    bad = work / target / fuzz.input_name(target)
    bad.parent.mkdir(exist_ok=True)
    bad.write_bytes(fuzz.prepare(target, (fuzz.SEEDS / name).read_bytes()))
    if target == "build_ninja":
        runs = [("read", ["-c", MANIFEST, str(bad)])]
    else:
        good_map, good_recording = work / "good.json.gz", work / "good.jsonl"
        good_map.write_bytes(fuzz.prepare("map", (fuzz.SEEDS / "map" / "map.json").read_bytes()))
        good_recording.write_bytes((fuzz.SEEDS / "jsonl" / "r.jsonl").read_bytes())
        runs = [(n, ["-m", "kernel_symbol_map", *argv])
                for n, argv in fuzz.cli_cases(target, bad, good_map, good_recording, work)]
    for command, argv in runs:
        code, output = _run(python, argv)
        if code is None:
            return f"{command}: a hang ({output})"
        if "MemoryError" in output:
            return f"{command}: MemoryError under {MEMORY >> 30} GiB"
        problem = fuzz.cli_problem(command, code, output)
        if problem:
            last = [x for x in output.splitlines() if x.strip()][-1:] or [""]
            return f"{problem.splitlines()[0]}: {last[0][:160]}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the Python whose kernel_symbol_map is replayed")
    args = ap.parse_args()
    crashed = 0
    with tempfile.TemporaryDirectory(prefix="ksm-replay-") as tmp:
        for name in sorted(fuzz.found()):
            why = replay(args.python, name, Path(tmp))
            crashed += why is not None
            print(f"{name:58} {'CRASH ' + why if why else 'ok'}", flush=True)
    print(f"{crashed} of {len(fuzz.found())} seeds crash {args.python}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
