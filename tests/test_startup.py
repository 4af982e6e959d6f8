"""Start-up imports only what a command uses (issue 29): checked by the modules a run leaves in ``sys.modules``.

Seconds depend on the machine and its load, so the test counts imports, not
time; ``bench/bench_startup.py`` prints the seconds. ``--version`` and
``--help`` import no command module; a command's ``--help`` imports its own
module only; a no-op ``build`` (answered by the last run's fingerprint)
imports no reader, no build-tree model, no map format or schema, no
decompressor.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from projects import Build

from kernel_symbol_map import mapformat
from kernel_symbol_map.cli._commands import COMMANDS, SCHEMA_FILE, summary_of

# What a light start-up must not pay for: the readers, the models, the map format, the consumers, and the
# libraries behind them.
HEAVY = ("kernel_symbol_map.readers", "kernel_symbol_map.buildtree", "kernel_symbol_map.mapformat",
         "kernel_symbol_map.consumer", "kernel_symbol_map.recorder", "kernel_symbol_map.producer.extract",
         "zstandard", "lz4", "jsonschema", "regex", "gzip", "elftools", "pathspec", "concurrent.futures")
# What no command's --help needs: the device-code readers and the libraries of binary formats and schemas.
READERS = ("kernel_symbol_map.readers", "zstandard", "lz4", "jsonschema", "regex", "elftools")
COMMAND_MODULES = tuple(f"kernel_symbol_map.cli.{module}" for module, _ in COMMANDS.values())

PROBE = """
import json, sys
from kernel_symbol_map.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:  # argparse's --version and --help
    code = e.code
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def loaded(*argv: str, cwd: Path | None = None) -> tuple[int, set[str]]:
    """(exit code, every module imported) of one CLI run in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=cwd, check=False)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def heavy(modules: set[str], also: tuple[str, ...] = ()) -> list[str]:
    return sorted(m for m in modules if m.startswith(HEAVY + also))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_the_top_level_imports_no_command(argv: list[str]) -> None:
    code, modules = loaded(*argv)
    assert code in (0, 2)  # no command: the help, on stderr, exit 2
    assert heavy(modules, COMMAND_MODULES) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_help_imports_its_own_module_only(command: str) -> None:
    code, modules = loaded(command, "--help")
    assert code == 0
    own = f"kernel_symbol_map.cli.{COMMANDS[command][0]}"
    assert own in modules
    assert sorted(m for m in modules if m in COMMAND_MODULES and m != own) == []
    assert sorted(m for m in modules if m.startswith(READERS)) == []


def test_the_top_level_help_lists_every_command_by_its_summary() -> None:
    proc = subprocess.run([sys.executable, "-m", "kernel_symbol_map", "--help"], capture_output=True, text=True,
                          check=True)
    listed = " ".join(proc.stdout.split())  # argparse wraps long summaries
    for name in COMMANDS:
        assert f"{name} {summary_of(name)}" in listed, name
    assert SCHEMA_FILE == mapformat.SCHEMA  # validate's summary names the schema file that ships


def test_a_no_op_build_imports_no_reader_model_or_map_format(kernel_builds: dict[str, Build], tmp_path: Path) -> None:
    b = kernel_builds["3.25-ninja"]
    argv = ["build", "--build-dir", str(b.build), "--source-root", str(b.source), "--out", str(tmp_path / "m.json.gz")]
    code, first = loaded(*argv)
    assert code == 0 and "kernel_symbol_map.producer.extract" in first  # the cold run reads everything
    code, again = loaded(*argv)
    assert code == 0
    assert heavy(again) == []
