"""``demo``: build the bundled example as a wheel, as a user would, and show the map it shipped."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ._commands import summary_of
from ._output import UsageError

DESCRIPTION = """\
Build the bundled example as a user would, and show the map its wheel ships:
  1. build this checkout's wheel;
  2. in a fresh virtual environment, pip wheel the example (build isolation on;
     this package reachable through --find-links, as the README's adoption steps do);
  3. show the map inside the example's wheel, and the device code's bytes by source.
Needs a source checkout (for the example) and nvcc. --workdir keeps the wheels."""

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cuda_ext"
MAP_IN_WHEEL = "cuda_ext/kernel_symbol_map.json.gz"


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help=summary_of("demo"),
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--example", type=Path, default=EXAMPLE, help="example project folder")
    p.add_argument("--workdir", type=Path, help="keep wheels and the map here (default: a temporary folder)")
    p.add_argument("--archs", default="80", help="CMAKE_CUDA_ARCHITECTURES (default: 80)")
    p.set_defaults(run=run)


def _run(command: list[str], what: str) -> None:
    from ..errors import ToolError

    print(f"demo: {what}", flush=True)
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise ToolError(command, lines[-1] if lines else "failed", proc.returncode)


def run(args: argparse.Namespace) -> int:
    import tempfile

    from ..buildtree.toolchain import find_nvcc

    if not (args.example / "pyproject.toml").is_file() or not (ROOT / "pyproject.toml").is_file():
        raise UsageError(f"no example project at {args.example}", "run the demo from a source checkout, or pass --example")
    nvcc = find_nvcc()
    if nvcc is None:
        raise UsageError("nvcc not found", "set CUDA_HOME, or `pip install nvidia-cuda-nvcc`")
    with tempfile.TemporaryDirectory(prefix="ksm-demo-") as tmp:
        work = args.workdir or Path(tmp)
        wheels, venv = work / "wheels", work / "venv"
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
             "building kernel-symbol-map's wheel")
        _run([sys.executable, "-m", "venv", str(venv)], "making a clean virtual environment")
        _run([str(venv / "bin" / "pip"), "wheel", "-q", str(args.example), "--find-links", str(wheels),
              "-w", str(work / "dist"), "-C", f"cmake.define.CMAKE_CUDA_ARCHITECTURES={args.archs}",
              "-C", f"cmake.define.CMAKE_CUDA_COMPILER={nvcc}"],
             f"pip wheel {args.example.name} (scikit-build-core, build isolation on)")
        wheel = max((work / "dist").glob("*.whl"), key=lambda w: w.stat().st_mtime_ns)
        kept = f"kept in {work}" if args.workdir else "a temporary folder, removed when the demo ends (--workdir keeps it)"
        print(f"demo: {wheel.name} ships {MAP_IN_WHEEL} ({kept})\n", flush=True)
        code = _command("show", str(wheel), "--headers", "3")
        print(f"\ndemo: the device code {wheel.name} ships, by source (kernel-symbol-map size)", flush=True)
        return max(code, _command("size", str(wheel), "--by", "source", "--top", "10"))


def _command(*argv: str) -> int:
    """A command as the command line runs it: its parser's defaults, so no option is left out."""
    from . import build_parser

    args = build_parser(argv[0]).parse_args(list(argv))
    return int(args.run(args))
