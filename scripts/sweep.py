#!/usr/bin/env python3
"""Break every decision point of one module, one mutant at a time, and run its tests against each.

    .venv/bin/python scripts/sweep.py recorder/parts.py --list
    .venv/bin/python scripts/sweep.py recorder/parts.py [--only=3,17] [--start=40] -- TEST...

The mutants are mechanical: each ``if``/``while`` condition always true and
always false, each operand of ``and``/``or`` dropped, each comparison
flipped, each conditional expression negated, each comprehension filter
dropped, each call statement and augmented assignment dropped, ``continue``
and ``break`` made ``pass``, ``any``/``all`` and ``min``/``max`` swapped.
Each runs the TESTs (pytest arguments; the first failure stops them) and
prints one line: KILLED, or SURVIVED (a test is missing, or the mutant is
equivalent: judge it). The file is restored after each run. Numbers are
positions in ``--list``; they hold while the module is unchanged.

``scripts/mutants.py`` keeps, for each survivor that a test now kills, the
break and its test; this finds them. Not part of the suite. Each mutant
holds ``$KSM_MUTANT_LOCK`` (default ``/tmp/ksm-mutants.lock``) while it is
in the file, so a test run beside a sweep can wait for a clean tree with
``flock -s``.
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "kernel_symbol_map"
LOCK = os.environ.get("KSM_MUTANT_LOCK", "/tmp/ksm-mutants.lock")
FLIPPED = {ast.Eq: "!=", ast.NotEq: "==", ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">",
           ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is"}
SWAPPED = {"any": "all", "all": "any", "min": "max", "max": "min"}


@dataclass(frozen=True)
class Mutant:
    line: int
    what: str
    start: int  # byte offsets of the replaced text
    end: int
    new: str


def mutants(source: bytes) -> list[tuple[Mutant, bytes]]:
    """Each mutant of ``source`` that compiles, with the source it makes, in file order, each text once."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def span(node: ast.AST) -> tuple[int, int]:
        return (starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset)

    def text(node: ast.AST) -> str:
        a, b = span(node)
        return source[a:b].decode()

    found: list[Mutant] = []

    def add(node: ast.AST, new: str, what: str) -> None:
        found.append(Mutant(node.lineno, what, *span(node), new))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.While)):
            kind = type(node).__name__.lower()
            add(node.test, "True", f"{kind}: always")
            add(node.test, "False", f"{kind}: never")
        elif isinstance(node, ast.IfExp):
            add(node.test, f"not ({text(node.test)})", "ifexp: negate")
        elif isinstance(node, ast.comprehension):
            for condition in node.ifs:
                add(condition, "True", "comp-if: drop")
        elif isinstance(node, ast.BoolOp):
            joiner = " and " if isinstance(node.op, ast.And) else " or "
            for i in range(len(node.values)):
                rest = [f"({text(v)})" for j, v in enumerate(node.values) if j != i]
                add(node, joiner.join(rest), f"boolop: drop operand {i}")
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPPED:
            add(node, f"{text(node.left)} {FLIPPED[type(node.ops[0])]} {text(node.comparators[0])}", "compare: flip")
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, bool):
            add(node.value, str(not node.value.value), "return: flip bool")
        elif isinstance(node, (ast.Continue, ast.Break)):
            add(node, "pass", f"{type(node).__name__.lower()}->pass")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in SWAPPED:
            add(node.func, SWAPPED[node.func.id], f"{node.func.id}->{SWAPPED[node.func.id]}")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and "\n" not in text(node):
            add(node, "pass", "drop call statement")
        elif isinstance(node, ast.AugAssign):
            add(node, "pass", "drop augmented assignment")
    made: list[tuple[Mutant, bytes]] = []
    seen = {source}
    for m in sorted(found, key=lambda m: (m.start, m.what)):
        changed = source[:m.start] + m.new.encode() + source[m.end:]
        if changed in seen:
            continue
        try:
            compile(changed, "<mutant>", "exec")
        except SyntaxError:
            continue
        seen.add(changed)
        made.append((m, changed))
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a file of the package, e.g. recorder/parts.py")
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--only", default="", help="comma-separated mutant numbers")
    parser.add_argument("--start", type=int, default=0, help="the first mutant number to run")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    tests = argv[cut + 1:]  # pytest's arguments, after --
    path = PACKAGE / args.module
    source = path.read_bytes()
    only = {int(n) for n in args.only.split(",") if n}
    survived = 0
    for number, (m, changed) in enumerate(mutants(source)):
        old = source[m.start:m.end].decode()
        label = f"{number} L{m.line} {m.what}: {old[:70]!r} -> {m.new[:50]!r}"
        if args.list or not tests:
            print(label)
            continue
        if number < args.start or (only and number not in only):
            continue
        began = time.monotonic()
        with open(LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                path.write_bytes(changed)
                run = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                                     cwd=ROOT, capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            finally:
                path.write_bytes(source)
        survived += run.returncode == 0
        verdict = "SURVIVED" if run.returncode == 0 else "KILLED  "
        print(f"{verdict} {label} ({time.monotonic() - began:.0f} s)", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
