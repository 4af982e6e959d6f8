"""What attributing JIT kernels by name costs ``select``, on a tree the size of a real project's.

    .venv/bin/python bench/bench_jit_select.py [--tests 2000] [--repeat 3] [--keep]

A temporary git repository holds the Python files of the installed torch and triton packages (about
2,400 files; torch's Inductor holds real ``@triton.jit`` helpers), at one commit. ``--tests`` recordings,
with Python coverage, each launched one compiled kernel of a small map and one kernel named after a
``@triton.jit`` function of the tree, as Triton names them, none attributed by the record (as a recorder
that did not see the launch writes them). The change edits the body of one of those functions.

Rows, each the median of ``--repeat`` runs in this process:

1. the floor: ``select`` of the same recordings without the Triton-named kernels (nothing to attribute,
   no index built);
2. ``select`` with the kernels attributed by name: the checkout's JIT'd functions indexed, the
   candidates' blocks joined to the tests' coverage.

Printed, never asserted: each row's seconds, the tests each selection runs, and row 2 over row 1.
"""

from __future__ import annotations

import argparse
import ast
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernel_symbol_map.consumer.select.jitkernels import _Index
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.pythonfiles import PythonTree
from kernel_symbol_map.consumer.select.recordings import Recording
from kernel_symbol_map.consumer.select.selection import Options, select
from kernel_symbol_map.mapformat import pyblocks


def tree(root: Path) -> str:
    """The installed torch's and triton's Python files, committed in ``root``: the commit."""
    import torch
    import triton

    for package in (torch, triton):
        source = Path(package.__file__).parent
        for path in source.rglob("*.py"):
            target = root / package.__name__ / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ksm-jit-select-"))
    try:
        root = scratch / "repo"
        commit = tree(root)
        checkout = PythonTree(root, commit)
        index = _Index(checkout, [], frozenset({"jit"}))
        functions = [f for rel in checkout.files if rel.startswith("torch/_inductor/") for f in index.functions_in(rel)]
        assert functions, "no @triton.jit function in torch's Inductor: another torch than this bench knows"
        files = len(checkout.files)
        kmap = KernelMap({"version": 1, "commit": commit, "cuda": "13.0", "generated_at": "", "build_dirs": [],
                          "incomplete": False, "errors": [], "stats": {},
                          "objects": [{"source": f"csrc/k{i}.cu", "target": "t", "object": f"k{i}.o",
                                       "device": True, "symbols": [f"_Z2k{i}v"], "deps": [f"csrc/k{i}.cu"]}
                                      for i in range(50)]})
        rng = random.Random(0)
        chosen = [functions[rng.randrange(len(functions))] for _ in range(args.tests)]
        module = {f.file: pyblocks.split((root / f.file).read_bytes()).digests[0] for f in chosen}
        recordings = [Recording(f"tests/test_{i // 50}.py::test_{i}", frozenset({f"_Z2k{i % 50}v", f.function}),
                                True, commit, "bench", python={f.file: frozenset({module[f.file]})})
                      for i, f in enumerate(chosen)]
        target = chosen[0]
        path = root / target.file
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)
                    and n.name == target.function and n.lineno > 0)
        last = node.body[-1]  # a statement of its own block (a docstring would be the enclosing one's)
        body = last.lineno - 1
        indent = " " * last.col_offset
        lines.insert(body, f"{indent}pass  # the change\n")
        path.write_text("".join(lines))
        plain = [Recording(r.test, frozenset(k for k in r.kernels if k.startswith("_Z")), True, commit, "bench",
                           python=r.python) for r in recordings]

        def timed(run: object) -> tuple[float, object]:
            found = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                result = run()  # type: ignore[operator]
                found.append(time.perf_counter() - start)
            return statistics.median(found), result

        floor, before = timed(lambda: select(kmap, plain, [target.file], options=Options(source_root=root)))
        attributed, after = timed(lambda: select(kmap, recordings, [target.file],
                                                 options=Options(source_root=root)))
        print(f"tree: {files} Python files, {len(functions)} @triton.jit functions in torch's Inductor; "
              f"{args.tests} recordings; the change: {target.file}:{target.function}")
        print(f"{'row':58} {'seconds':>8} {'tests run':>10}")
        print(f"{'1. floor: the recordings without Triton-named kernels':58} {floor:8.2f} {len(before.to_run):>10}")
        print(f"{'2. attributed by name':58} {attributed:8.2f} {len(after.to_run):>10}")
        why = sorted({d.why for d in after.decisions if d.run}, key=len)
        print(f"why they run (of {len(why)} distinct): {why[0][:150]}")
        print(f"ratio 2/1: {attributed / floor:.2f}; tests a change of {target.function} reaches: "
              f"{sum(1 for f in chosen if f.function == target.function)} launched a kernel of its name")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"kept {scratch}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
