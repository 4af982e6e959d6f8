"""Which files a change touches, from git: every side of it, spelled as the map spells paths.

``git diff --name-only --relative BASE`` loses files three ways: untracked files,
paths outside the folder it runs in, and (with rename detection) the old side
of a rename. Each of those can hide a test's reach, so here the diff runs at
the repository's top level with ``--no-renames`` (a rename is its deletion and
its addition), untracked files are added from ``git ls-files --others``, and
every base is diffed against the working tree. The paths are then written as
the map writes them: relative to the source root when inside it, else absolute.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import KernelSymbolMapError
from ..mapformat import relpath


class ChangeError(KernelSymbolMapError):
    """git could not say what changed (not a repository, an unknown commit)."""


@dataclass(frozen=True)
class Changes:
    paths: tuple[str, ...]  # as the map spells them
    bases: tuple[str, ...]  # the commits they were diffed from


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), *args]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise ChangeError(f"{' '.join(command)}: {e}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise ChangeError(f"{' '.join(command)}: {last}")
    return proc.stdout


def toplevel(where: Path) -> Path:
    return Path(_git(where, "rev-parse", "--show-toplevel").strip())


def has_commit(repo: Path, commit: str) -> bool:
    try:
        _git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
    except ChangeError:
        return False
    return True


def changed_files(where: Path, bases: Sequence[str], source_root: Path) -> Changes:
    """Files changed between each of ``bases`` and the working tree, untracked ones included."""
    top = toplevel(where)
    found: set[str] = set()
    for base in bases:
        found.update(_git(top, "diff", "--name-only", "--no-renames", "-z", base, "--").split("\0"))
    found.update(_git(top, "ls-files", "--others", "--exclude-standard", "-z").split("\0"))
    found.discard("")
    root = os.path.abspath(source_root)
    return Changes(tuple(sorted({relpath(os.path.join(top, p), root) for p in found})), tuple(bases))
