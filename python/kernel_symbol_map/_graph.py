"""What every layer's graphs share: the nodes reachable from some, along directed edges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reachable(edges: Mapping[str, Iterable[str]], start: Iterable[str]) -> set[str]:
    """``start`` and every node reachable from it along ``edges``."""
    seen = set(start)
    todo = list(seen)
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
