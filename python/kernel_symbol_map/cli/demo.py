"""``demo``: compile the bundled example's sources with nvcc and list their kernels.

This is the README's main command until the example is built as a wheel.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..devicecode import read_kernels
from ..errors import ToolError
from ..toolchain import find_nvcc
from ._output import EXIT_INPUT, EXIT_OK, UsageError, error
from .symbols import print_result

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cuda_ext"
DEFAULT_ARCHS = "80,90"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="compile the bundled example with nvcc and list each object's kernels",
        allow_abbrev=False,
    )
    p.add_argument("--example", type=Path, default=EXAMPLE, help="example project folder")
    p.add_argument("--workdir", type=Path, help="where objects go (default: a temporary folder)")
    p.add_argument("--nvcc", metavar="EXE", help="nvcc to use (default: search)")
    p.add_argument("--archs", default=DEFAULT_ARCHS, help=f"SM numbers (default: {DEFAULT_ARCHS})")
    p.set_defaults(run=run)


def _compile(nvcc: str, source: Path, out: Path, archs: list[str]) -> Path:
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    command = [nvcc, "-c", str(source), "-o", str(out), *gencode]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolError(command, lines[-1] if lines else "failed", proc.returncode)
    return out


def run(args: argparse.Namespace) -> int:
    sources = sorted((args.example / "csrc").glob("*.cu"))
    if not sources:
        raise UsageError(f"no .cu sources under {args.example / 'csrc'}", "pass --example")
    nvcc = find_nvcc(args.nvcc)
    if nvcc is None:
        raise UsageError("nvcc not found", "set CUDA_HOME, or `pip install nvidia-cuda-nvcc`")
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    with tempfile.TemporaryDirectory(prefix="ksm-demo-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor() as pool:
            objects = list(
                pool.map(lambda s: _compile(nvcc, s, workdir / f"{s.name}.o", archs), sources)
            )
        results = [read_kernels(o) for o in objects]
        for r in results:
            print_result(r, per_arch=False)
    failures = [f for r in results for f in r.failures]
    for f in failures:
        error(f"{f.path}: {f.error}")
    return EXIT_INPUT if failures else EXIT_OK
