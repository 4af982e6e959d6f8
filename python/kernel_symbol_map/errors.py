"""One error type per domain; each subclass carries only what its message needs."""

from __future__ import annotations

import os
from collections.abc import Sequence


class KernelSymbolMapError(Exception):
    """Base class of every error this package raises on bad input."""


class FormatError(KernelSymbolMapError):
    """A binary input is not what its headers claim (truncated, corrupt, unsupported)."""

    def __init__(self, path: str | os.PathLike[str], what: str, offset: int | None = None):
        self.path = os.fspath(path)
        self.what = what
        self.offset = offset
        super().__init__(f"{self.path}: {self.reason}")

    @property
    def reason(self) -> str:
        """The message without the path, for reports that already name the input."""
        where = f" at offset {self.offset:#x}" if self.offset is not None else ""
        return f"{self.what}{where}"


class ToolError(KernelSymbolMapError):
    """An external tool (cuobjdump) failed or printed something we cannot parse."""

    def __init__(self, command: Sequence[str], what: str, returncode: int | None = None):
        self.command = list(command)
        self.what = what
        self.returncode = returncode
        import shlex  # only when a tool failed: every command's start-up imports this module

        rc = f" (exit {returncode})" if returncode is not None else ""
        super().__init__(f"{shlex.join(self.command)}{rc}: {what}")


class BuildTreeError(KernelSymbolMapError):
    """A CMake build tree cannot be read: no reply, a missing or corrupt file, an ambiguous pairing."""


class MapError(KernelSymbolMapError):
    """A map file is not a valid version-1 kernel symbol map."""


class MapNotFound(MapError):
    """No map where the caller pointed: no such file or folder, a wheel or package that ships none."""


class RecordingError(KernelSymbolMapError):
    """A kernel recording cannot be read; the message names the file and line."""
