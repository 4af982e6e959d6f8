"""Where a build ran, as its strings spell it: the folders a digest masks.

A compiler writes the absolute path of what it compiles into the code
itself: ``__FILE__`` in a host ``assert`` or ``TORCH_CHECK``, the file name a
device ``assert()`` prints. Two clean builds of one commit in two folders
then differ in those bytes, and in nothing else that runs. The digests mask
each folder where a string spells it, at the start of a path (``/``
follows), with a token of the folder's role (the source root, the first
build folder...) that no C string can hold (it has a NUL in it): the same
string built elsewhere gives the same bytes, and any other change to it
still shows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import regex


class Folders:
    """Folder path -> role, longest first; :meth:`mask` replaces them in a string's bytes."""

    def __init__(self, roles: Mapping[str, str] | None = None) -> None:
        spelled: dict[bytes, bytes] = {}
        for folder, role in (roles or {}).items():
            for path in {os.path.normpath(folder), os.path.realpath(folder)}:  # as given, and the real path
                key = os.fsencode(path).rstrip(b"/")
                if len(key) > 1:  # "/" alone would match every path
                    spelled.setdefault(key, b"\0" + role.encode() + b"\0")
        self.roles = spelled
        self._pattern = _pattern(spelled)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __reduce__(self) -> tuple[object, ...]:  # to a worker process: the roles, compiled there again
        return _rebuilt, (self.roles,)

    def mask(self, data: bytes) -> bytes:
        """``data`` with every folder spelled at the start of a path replaced by its role's token."""
        if self._pattern is None or b"/" not in data:
            return data
        return self._pattern.sub(lambda m: self.roles[m.group()], data)

    def key(self) -> str:
        """What the masks depend on, for a cache: the folders and their roles."""
        return repr(sorted(self.roles.items()))


def _pattern(roles: Mapping[bytes, bytes]) -> regex.Pattern[bytes] | None:
    """A folder that starts a path: nothing of a path's name before it, a "/" after it; longest first."""
    if not roles:
        return None
    alternatives = b"|".join(regex.escape(f) for f in sorted(roles, key=len, reverse=True))
    return regex.compile(rb"(?<![\w.\-/~+])(?:" + alternatives + rb")(?=/)")


def _rebuilt(roles: dict[bytes, bytes]) -> Folders:
    folders = Folders()
    folders.roles, folders._pattern = roles, _pattern(roles)
    return folders


NONE = Folders()
