"""Words for people, shared by every layer: counts in the singular where there is one."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 object``, ``2 objects``: counts people read."""
    return f"{count} {noun if count == 1 else (many or noun + 's')}"
