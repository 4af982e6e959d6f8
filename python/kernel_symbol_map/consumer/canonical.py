"""One spelling per file: paths compared after resolving symlinks inside the source root.

The map stores paths as the compiler spelled them, so a header included
through a symlink appears under the link's name. A change to the real file
must still reach it, so both the map's paths and the changed files are
compared by this key; output keeps the spelled path, for people.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..mapformat import relpath, unspell


class Canonical:
    """``canonical(path)``: the real path, relative to the real source root when inside it.

    A map's ``$BUILD/...`` path resolves against ``build_dirs`` (the consumer's
    build folders, in the map's order), so an absolute build-tree path and its
    marked spelling are the same file.
    """

    def __init__(self, source_root: Path, build_dirs: Sequence[Path] = ()) -> None:
        self.spelled_root = os.path.abspath(source_root)
        self.real_root = os.path.realpath(source_root)
        self.build_dirs = [os.path.abspath(b) for b in build_dirs]
        self._memo: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        key = self._memo.get(path)
        if key is None:
            unmarked = unspell(path, self.build_dirs)
            absolute = unmarked if os.path.isabs(unmarked) else os.path.join(self.spelled_root, unmarked)
            key = self._memo[path] = relpath(os.path.realpath(absolute), self.real_root)
        return key
