"""Timing a command as a user would see it: a fresh process, bytecode cached (as installed wheels have)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
KSM = [sys.executable, "-m", "kernel_symbol_map"]


def checked(who: str, command: list[object], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``command``, its output captured; a failure ends the bench with ``who``'s name and the output's tail."""
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise SystemExit(f"{who}: {' '.join(map(str, command))} failed ({proc.returncode}):\n"
                         f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def timed(command: list[str], cwd: Path | None = None) -> tuple[float, int, str]:
    """(seconds, peak RSS in bytes, stdout) of one run; peak from /usr/bin/time's max RSS."""
    wrapper = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
    t0 = time.perf_counter()
    proc = subprocess.run(wrapper + command, capture_output=True, text=True, env=ENV, cwd=cwd, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout}\n{proc.stderr}")
    peak = int(proc.stderr.strip().splitlines()[-1]) * 1024 if wrapper else 0
    return seconds, peak, proc.stdout
