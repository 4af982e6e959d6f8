"""What several subcommands share: how a map is named, and where relative paths are resolved from."""

from __future__ import annotations

from pathlib import Path

from ..errors import KernelSymbolMapError
from ._output import UsageError

MAP_HELP = "map file, wheel, folder holding one, or installed package"


def default_source_root(for_git: bool = False) -> Path:
    """Relative paths are the project's: the git top level of the current folder, else the folder itself."""
    from ..consumer.select import changes

    try:
        return changes.toplevel(Path.cwd())
    except KernelSymbolMapError:
        if for_git:
            raise UsageError("--diff needs a git repository; run inside one or give --source-root") from None
        return Path.cwd()
