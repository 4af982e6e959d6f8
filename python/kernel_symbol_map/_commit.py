"""Which commit a build or a recording is of: a full SHA, resolved once where it is made.

Shared, and light on purpose: ``build``'s no-op path resolves the commit
before it knows whether anything changed, so this imports no map code.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

COMMIT_VARIABLES = ("BUILDKITE_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA", "VLLM_BUILD_COMMIT")


def resolve_commit(explicit: str | None, source_root: Path) -> str:
    """The full SHA the build is of: ``--commit``, else a CI variable, else ``HEAD``; else "".

    A symbolic name (``HEAD``, a branch, a short SHA: Buildkite allows
    ``BUILDKITE_COMMIT=HEAD``) is resolved in the source root's repository, so
    that a map never names a commit that moves. A name git cannot resolve is
    kept as given, and ``select`` then never matches it (:func:`is_full_sha`).
    """
    named = explicit or next((os.environ[n] for n in COMMIT_VARIABLES if os.environ.get(n)), "") or "HEAD"
    if is_full_sha(named):
        return named
    try:
        proc = subprocess.run(["git", "-C", str(source_root), "rev-parse", "--verify", "--quiet", f"{named}^{{commit}}"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "" if named == "HEAD" else named
    resolved = proc.stdout.strip()
    if proc.returncode == 0 and is_full_sha(resolved):
        return resolved
    return "" if named == "HEAD" else named


def is_full_sha(commit: str) -> bool:
    """A commit named by its full object id (SHA-1 or SHA-256 hex): the only name that never moves."""
    return len(commit) in (40, 64) and all(c in "0123456789abcdef" for c in commit)
