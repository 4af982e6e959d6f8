"""One spelling per file: paths compared after resolving symlinks inside the source root.

The map stores paths as the compiler spelled them, so a header included
through a symlink appears under the link's name. A change to the real file
must still reach it, so both the map's paths and the changed files are
compared by this key; output keeps the spelled path, for people.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..mapformat import relpath


class Canonical:
    """``canonical(path)``: the real path, relative to the real source root when inside it."""

    def __init__(self, source_root: Path) -> None:
        self.spelled_root = os.path.abspath(source_root)
        self.real_root = os.path.realpath(source_root)
        self._memo: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        key = self._memo.get(path)
        if key is None:
            absolute = path if os.path.isabs(path) else os.path.join(self.spelled_root, path)
            key = self._memo[path] = relpath(os.path.realpath(absolute), self.real_root)
        return key
