"""``record``: run a command and record every CUDA kernel it and its Python descendants launched.

The command runs with the recording variables set; the ``.pth`` hook starts
CUPTI in every Python process below it (``subprocess``, ``multiprocessing``
spawn and fork). When it exits, each process's part file is merged into
``OUT/<step>.jsonl``, one record that ``select`` reads. The exit status is
the command's, so a CI step still fails when its tests do; a command that
cannot be started exits 127 (not found) or 126 (not executable), as ``env``,
``nice`` and ``timeout`` do, and writes no recording (nothing ran).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .._commit import resolve_commit
from ._commands import summary_of
from ._output import EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SIGNAL, UsageError, error, plural, warning


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "record",
        help=summary_of("record"),
        description="Run COMMAND; record every CUDA kernel launched by it and by its Python descendants "
        "(CUPTI Activity API, through `pip install 'kernel-symbol-map[record]'`); write OUT/STEP.jsonl. "
        "Native processes are followed by the loader's audit interface: one that loads no GPU driver keeps the "
        "step complete; one that does (a C++ test binary) makes it incomplete. Exit status: COMMAND's "
        "(128+N when signal N killed it); 127 when COMMAND is not found, 126 when it cannot be run, as env does.",
        allow_abbrev=False,
    )
    p.add_argument("--step", required=True, help="the CI step's name: the recording's test name")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for STEP.jsonl")
    p.add_argument("--commit", help="commit the run is of (default: CI variables, then git)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND...", help="what to run")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..recorder import parts, spawns

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("record needs a command after --", "kernel-symbol-map record --step unit --out rec -- pytest")
    if os.sep in args.step or args.step.startswith("."):
        raise UsageError(f"--step {args.step!r}: a name, not a path")
    args.out.mkdir(parents=True, exist_ok=True)
    # Absolute: children that run in another folder (a compiler with cwd=) write here too.
    folder = Path(tempfile.mkdtemp(prefix=f".parts-{args.step}-", dir=args.out.resolve()))
    env = dict(os.environ)
    spawns.expect_command(folder, command, env, args.step)  # claimed by Python with the hook, else followed
    interrupted = ""
    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        missing = isinstance(e, FileNotFoundError)
        error(f"cannot run {command[0]}: {'not found' if missing else e.strerror or e}; no recording written")
        return EXIT_NOT_FOUND if missing else EXIT_NOT_EXECUTABLE
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
        interrupted = "the command was interrupted"
    if code < 0:
        interrupted = f"the command was killed by signal {-code}"
    elif code > 0 and not interrupted:  # a step that failed may have stopped early (pytest -x): not all it runs
        interrupted = f"the command failed (exit {code})"
    commit = resolve_commit(args.commit, Path.cwd())
    record = parts.step_record(folder, args.step, commit, interrupted)
    out = args.out / f"{args.step}.jsonl"
    parts.write_jsonl(out, [record])
    shutil.rmtree(folder, ignore_errors=True)
    state = "complete" if record["complete"] else f"INCOMPLETE ({record['reason']})"
    print(f"kernel_symbol_map: recorded {plural(len(record['kernels']), 'kernel')} from "
          f"{plural(record['processes'], 'process', 'processes')} "
          f"into {out}: {state}")
    if not record["complete"]:
        warning("an incomplete recording never lets select skip this step's tests")
    return code if code >= 0 else EXIT_SIGNAL - code
