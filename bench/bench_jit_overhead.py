"""What watching JITs costs the pytest plugin: a CPU suite of tests that run torch.compile'd and numba code.

    .venv/bin/python bench/bench_jit_overhead.py [--tests 200] [--calls 20] [--repeat 3] [--keep]

A temporary git repository holds ``pkg/jitted.py`` (a ``torch.compile`` function, ``aot_eager``, that
calls a helper Dynamo inlines; a numba ``@njit`` function that calls another; a function compiled from
its source text by a ``jit-decorators`` entry) and ``--tests`` tests, each calling the three ``--calls``
times (the first test of each compiles). Each row is a whole ``python -m pytest -q`` run in a fresh
process, ``--repeat`` rounds, rows interleaved within a round:

1. plain pytest (the plugin installed, inactive);
2. ``--kernel-record DIR --kernel-record-python off``: kernels only (no coverage, no JIT watch);
3. ``--kernel-record DIR``: kernels, Python coverage and the JIT watch (the default);
4. as 3, with the JIT watch kept from starting (a ``sitecustomize``): coverage alone, to isolate it.

Printed: each row's median and min wall seconds and per-test milliseconds, and the per-test cost of
(3) over (1) and of (3) over (4), the JIT watch's own. The figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]
from bench_plugin_overhead import CONFTEST  # noqa: E402  the fake CUPTI backend and the launch fixture

JITTED = '''import torch
from numba import njit

from pkg.jitlib import jit


def helper(x):
    return x * 2


@torch.compile(backend="aot_eager")
def compiled(x):
    return helper(x) + 1


@njit
def inner(x):
    return x * 3


@njit
def jitted(x):
    return inner(x) + 1


@jit
def from_text(x, y):
    return x + y
'''
JITLIB = '''import inspect
import textwrap


class Compiled:
    def __init__(self, fn):
        text = "\\n".join(l for l in textwrap.dedent(inspect.getsource(fn)).splitlines() if not l.startswith("@"))
        namespace = {}
        exec(compile(text, "<jit>", "exec"), fn.__globals__, namespace)
        self.fn = namespace[fn.__name__]

    def __call__(self, *args):
        return self.fn(*args)


def jit(fn):
    return Compiled(fn)
'''
HEADER = "import torch\n\nfrom pkg import jitted\n\nX = torch.ones(4)\n"
TEST = '''

def test_{n}():
    for _ in range({calls}):
        assert jitted.compiled(X).tolist() == [3.0] * 4
        assert jitted.jitted(2) == 7
        assert jitted.from_text(1, 2) == 3
'''
# Row 4's process: the JIT watch never starts (a sitecustomize on its PYTHONPATH), all else as row 3.
UNWATCHED = "from kernel_symbol_map.recorder.jit import JitWatch\nJitWatch.start = lambda self: None\n"


def write(root: Path, tests: int, calls: int) -> None:
    files = {"pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n'
                               '[tool.kernel-symbol-map]\njit-decorators = ["pkg.jitlib:jit"]\n',
             "pkg/__init__.py": "", "pkg/jitlib.py": JITLIB, "pkg/jitted.py": JITTED,
             "tests/conftest.py": CONFTEST}
    for n in range(tests):
        rel = f"tests/test_{n // 20}.py"
        files[rel] = files.get(rel, HEADER) + TEST.format(n=n, calls=calls)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ksm-jit-bench-"))
    root = scratch / "project"
    write(root, args.tests, args.calls)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_SYMBOL_MAP")}
    env.update(PYTHONPATH=str(root), NUMBA_CACHE_DIR=str(scratch / "numba"), PYTHONDONTWRITEBYTECODE="")
    rows = {
        "plain pytest": ([], {}),
        "kernels only": (["--kernel-record", "{out}", "--kernel-record-python", "off"], {}),
        "kernels, Python, JIT watch": (["--kernel-record", "{out}"], {}),
        "kernels, Python, no JIT watch": (["--kernel-record", "{out}"],
                                          {"PYTHONPATH": os.pathsep.join([str(scratch / "unwatched"), str(root)])}),
    }
    (scratch / "unwatched").mkdir()
    (scratch / "unwatched" / "sitecustomize.py").write_text(UNWATCHED)
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    print(f"bench_jit_overhead: {args.tests} tests, {args.calls} calls of each JIT'd function per test, "
          f"load {os.getloadavg()[0]:.1f}")
    for _ in range(args.repeat + 1):  # the first round warms bytecode and the compilers' caches up, unkept
        for name, (flags, extra) in rows.items():
            out = scratch / "rec"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       *[f.format(out=out) for f in flags]]
            started = time.perf_counter()
            proc = subprocess.run(command, cwd=root, env=dict(env, **extra), capture_output=True, text=True,
                                  check=False)
            took = time.perf_counter() - started
            if proc.returncode != 0:
                raise SystemExit(f"bench_jit_overhead: {name} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
            seconds[name].append(took)
    medians = {name: statistics.median(s[1:]) for name, s in seconds.items()}
    print("| run | median s | min s | ms per test |")
    print("| --- | --- | --- | --- |")
    for name, s in seconds.items():
        print(f"| {name} | {medians[name]:.2f} | {min(s[1:]):.2f} | {1000 * medians[name] / args.tests:.1f} |")
    full, plain = medians["kernels, Python, JIT watch"], medians["plain pytest"]
    unwatched = medians["kernels, Python, no JIT watch"]
    print(f"recording with the JIT watch: +{1000 * (full - plain) / args.tests:.2f} ms per test over plain pytest "
          f"({full / plain:.2f}x); the JIT watch's own: {1000 * (full - unwatched) / args.tests:+.2f} ms per test; "
          f"load {os.getloadavg()[0]:.1f}")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
