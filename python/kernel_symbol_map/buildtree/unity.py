"""Unity builds (``CMAKE_UNITY_BUILD``): the generated unity sources, and the real sources they include.

CMake writes ``<object dir>/Unity/unity_<n>_<lang>.<ext>`` into the build tree:
one ``#include "<absolute source>"`` line per batched source, and nothing
else that compiles. The object's real sources are those includes.
"""

from __future__ import annotations

import os
from pathlib import Path

import regex

from ..errors import BuildTreeError

_UNITY_NAME = regex.compile(r"^unity_\d+_\w+\.\w+$")
_INCLUDE = regex.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', regex.M)


def is_unity_source(source: Path, build_dir: Path) -> bool:
    return (source.parent.name == "Unity" and _UNITY_NAME.match(source.name) is not None
            and source.is_relative_to(build_dir))


def constituents(source: Path) -> tuple[str, ...]:
    """The absolute, normalised paths the unity source includes, in order."""
    try:
        text = source.read_text(errors="surrogateescape")
    except OSError as e:
        raise BuildTreeError(f"{source}: unity source unreadable: {e.strerror or e}") from None
    found = tuple(os.path.normpath(os.path.join(source.parent, p)) for p in _INCLUDE.findall(text))
    if not found:
        raise BuildTreeError(f"{source}: a unity source that includes nothing")
    return found
