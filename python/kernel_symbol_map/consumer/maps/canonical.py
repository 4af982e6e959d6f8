"""One spelling per file: paths compared after resolving symlinks inside the source root.

The map stores paths as the compiler spelled them, so a header included
through a symlink appears under the link's name. A change to the real file
must still reach it, so both the map's paths and the changed files are
compared by this key; output keeps the spelled path, for people.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ...mapformat import relpath, unspell


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
        self._folders: dict[str, str] = {}  # folder -> its real path: a map's 7,000 paths lie in a few dozen

    def __call__(self, path: str) -> str:
        key = self._memo.get(path)
        if key is None:
            unmarked = unspell(path, self.build_dirs)
            absolute = unmarked if os.path.isabs(unmarked) else os.path.join(self.spelled_root, unmarked)
            key = self._memo[path] = relpath(self._realpath(absolute), self.real_root)
        return key

    def _realpath(self, absolute: str) -> str:
        """``os.path.realpath(absolute)``, its folder resolved once for every file in it.

        realpath resolves a path's folder first, then its last name: so unless
        that name is a symlink (one ``lstat``, the call realpath makes for it),
        the real path is the folder's real path and the name. A symlink, or a
        name realpath treats apart ('..', '.'), takes realpath itself.
        """
        folder, name = os.path.split(absolute)
        if name in ("", os.curdir, os.pardir):
            return os.path.realpath(absolute)
        real = self._folders.get(folder)
        if real is None:
            real = self._folders[folder] = os.path.realpath(folder)
        candidate = os.path.join(real, name)
        try:
            if stat.S_ISLNK(os.lstat(candidate).st_mode):
                return os.path.realpath(absolute)
        except OSError:  # no such file, or a folder that is not one: realpath keeps the name as it is
            pass
        return candidate
