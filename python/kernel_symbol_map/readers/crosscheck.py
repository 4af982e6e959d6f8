"""Compare two readers' answers for the same input (native against cuobjdump)."""

from __future__ import annotations

from dataclasses import dataclass

from .devicecode import Result


@dataclass(frozen=True)
class Difference:
    path: str
    only_first: tuple[str, ...]
    only_second: tuple[str, ...]
    first_error: str | None
    second_error: str | None

    def describe(self, first: str = "native", second: str = "cuobjdump") -> str:
        parts = []
        if self.first_error != self.second_error and (self.first_error is None or self.second_error is None):
            parts.append(f"{first} error: {self.first_error}; {second} error: {self.second_error}")
        if self.only_first:
            parts.append(f"only {first}: {', '.join(self.only_first)}")
        if self.only_second:
            parts.append(f"only {second}: {', '.join(self.only_second)}")
        return f"{self.path}: " + "; ".join(parts)


def compare(first: Result, second: Result) -> list[Difference]:
    """Differences in kernel sets or in readability, file by file and member by member.

    Architectures are not compared: cuobjdump labels raw cubins with none and
    skips architectures it no longer supports.
    """
    if (first.error is None) != (second.error is None):
        return [Difference(first.path, (), (), first.error, second.error)]
    if first.members or second.members:
        theirs = {m.path: m for m in second.members}
        found = []
        for mine in first.members:
            found += compare(mine, theirs.pop(mine.path, Result(mine.path)))
        for rest in theirs.values():
            found += compare(Result(rest.path), rest)
        return found
    a, b = set(first.symbols), set(second.symbols)
    if a == b:
        return []
    return [Difference(first.path, tuple(sorted(a - b)), tuple(sorted(b - a)), first.error, second.error)]
