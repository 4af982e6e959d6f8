"""Words for people, shared by every layer: counts in the singular where there is one."""

from __future__ import annotations

from collections.abc import Iterable


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 object``, ``2 objects``: counts people read."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"


def some(items: Iterable[object], most: int = 3) -> str:
    """``a, b, c and 1,121 more``: a list people read in one line, in the order given."""
    found = [str(i) for i in items]
    shown = ", ".join(found[:most])
    return shown if len(found) <= most else f"{shown} and {len(found) - most:,} more"
