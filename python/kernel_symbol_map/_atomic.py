"""Replacing a file atomically: readers see the complete old file or the complete new one.

A temporary file in the same folder is filled, then renamed over the target.
Writers of one folder hold an advisory lock on the folder itself while they
do so (``flock`` on its descriptor: no lock file to leave behind), so that a
temporary file a killed writer left is removed by the next writer, and never
one that another live writer is still filling.
"""

from __future__ import annotations

import fcntl
import glob
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock; so does the death of a killed writer


def replace(path: Path, data: bytes, *, durable: bool = False, mode: int | None = None) -> None:
    """Put ``data`` at ``path`` atomically (``durable``: fsync before the rename). Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    with _folder_lock(path.parent):
        for stale in glob.glob(os.path.join(glob.escape(str(path.parent)), glob.escape(prefix) + "*.tmp")):
            Path(stale).unlink(missing_ok=True)  # left by a writer that was killed: no live writer holds the lock
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
