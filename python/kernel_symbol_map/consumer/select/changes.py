"""Which files a change touches, from git: every side of it, spelled as the map spells paths.

``git diff --name-only --relative BASE`` loses files four ways: untracked files,
paths outside the folder it runs in, (with rename detection) the old side
of a rename, and changes inside submodules (their ``ignore`` setting, and a
bumped gitlink that names no file). Each of those can hide a test's reach, so here the diff runs at
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

from ...errors import KernelSymbolMapError
from ...mapformat import relpath


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


def head(repo: Path) -> str:
    """The commit checked out (full SHA)."""
    return _git(repo, "rev-parse", "HEAD").strip()


def has_commit(repo: Path, commit: str) -> bool:
    try:
        _git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
    except ChangeError:
        return False
    return True


def changed_files(where: Path, bases: Sequence[str], source_root: Path) -> Changes:
    """Files changed between each of ``bases`` and the working tree, untracked ones and submodules' included."""
    top = toplevel(where)
    root = os.path.abspath(source_root)
    found = _changed(top, list(bases))
    return Changes(tuple(sorted({relpath(os.path.join(top, p), root) for p in found})), tuple(bases))


def _changed(repo: Path, bases: list[str], depth: int = 0) -> set[str]:
    """Paths (relative to ``repo``) changed since any of ``bases``; submodules expanded into their files.

    ``git diff`` follows each submodule's ``ignore`` setting, and reports a
    bumped submodule as one path; here ``--ignore-submodules=none`` sees every
    submodule change, and each is expanded: the files its own history changed
    since the gitlink each base recorded, plus its uncommitted and untracked
    files, recursively. A submodule whose old commit is not fetched, or that
    is not checked out, stays as its own path: no map knows it, so everything runs.
    """
    found: set[str] = set()
    for base in bases:
        found.update(_git(repo, "diff", "--name-only", "--no-renames", "--ignore-submodules=none", "-z", base,
                          "--").split("\0"))
    found.update(_git(repo, "ls-files", "--others", "--exclude-standard", "-z").split("\0"))
    found.discard("")
    for sub in sorted(_submodules(repo) & found):
        inner = repo / sub
        if depth >= _SUBMODULE_DEPTH or not (inner / ".git").exists():
            continue  # not checked out: the gitlink path itself stays, and matches no map
        old = [_gitlink(repo, base, sub) for base in bases]
        if None in old:  # the submodule is new since a base: all of its files are
            files = set(_git(inner, "ls-files", "-z").split("\0")) - {""}
        elif not all(has_commit(inner, c) for c in old if c):
            continue
        else:
            files = _changed(inner, [c for c in old if c], depth + 1)
        found.discard(sub)
        found.update(f"{sub}/{f}" for f in files)
    return found


_SUBMODULE_DEPTH = 8  # nested submodules followed this deep


def _submodules(repo: Path) -> set[str]:
    """Paths of the submodules in ``repo``'s index (gitlinks: mode 160000)."""
    staged = _git(repo, "ls-files", "--stage", "-z").split("\0")
    return {line.split("\t", 1)[1] for line in staged if line.startswith("160000 ") and "\t" in line}


def _gitlink(repo: Path, base: str, path: str) -> str | None:
    """The commit ``base`` records for the submodule at ``path``, or None when it had none."""
    listed = _git(repo, "ls-tree", "-z", base, "--", path).split("\0")
    for line in listed:
        meta, _, name = line.partition("\t")
        if name == path and meta.startswith("160000 commit "):
            return meta.split()[2]
    return None


def exists_at(repo: Path, commit: str, path: str) -> bool | None:
    """Whether ``path`` (relative to the top level) was in ``commit``; None when git cannot say."""
    command = ["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{path}"]
    try:
        proc = subprocess.run(command, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode == 0:
        return True
    return False if has_commit(repo, commit) else None


def python_files(repo: Path) -> list[str]:
    """The checkout's Python files (tracked, or untracked and not ignored), relative to the top level."""
    out = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py")
    return sorted({p for p in out.split("\0") if p})


def show(repo: Path, commit: str, path: str) -> bytes | None:
    """``path`` (relative to the top level) as ``commit`` has it; None when it had none, or git cannot say."""
    command = ["git", "-C", str(repo), "show", f"{commit}:{path}"]
    try:
        proc = subprocess.run(command, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def is_link_at(repo: Path, commit: str, path: str) -> bool | None:
    """Whether ``path`` was a symbolic link in ``commit``; None when git cannot say."""
    command = ["git", "-C", str(repo), "ls-tree", "-z", commit, "--", path]
    try:
        proc = subprocess.run(command, capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.startswith(b"120000 ") if proc.returncode == 0 else None
