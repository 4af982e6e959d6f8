"""Header deps under CMake's Makefile generator: the compilers' depfiles, and CMake's own scan.

Depfiles (``*.o.d``) are Makefile syntax, as the compilers write them.
Languages whose compiler writes none (HIP, as CMake drives clang) are
scanned by CMake itself into ``depend.internal`` beside the target's
objects: an object path, then one indented dependency per line, project
headers only. Hand-written: both syntaxes are small and no maintained
library parses them.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BuildTreeError


def parse_depfile(text: str) -> dict[str, list[str]]:
    """Target -> prerequisites, for every rule in the file."""
    rules: dict[str, list[str]] = {}
    logical = text.replace("\\\r\n", " ").replace("\\\n", " ")
    for line in logical.splitlines():
        words = _words(line)
        if not words:
            continue
        colon = next((i for i, w in enumerate(words) if w.endswith(":") or w == ":"), None)
        if colon is None:
            continue
        targets = words[: colon + 1]
        targets[-1] = targets[-1][:-1]
        for target in filter(None, targets):
            rules.setdefault(target, []).extend(words[colon + 1 :])
    return rules


def _words(line: str) -> list[str]:
    words, current, i = [], [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] in " #\\":
            current.append(line[i + 1])
            i += 2
            continue
        if c == "$" and line[i + 1 : i + 2] == "$":
            current.append("$")
            i += 2
            continue
        if c in " \t":
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(c)
        i += 1
    if current:
        words.append("".join(current))
    return words


def read_depfile(path: Path, target: str) -> list[str]:
    """Prerequisites of ``target`` in the depfile at ``path``."""
    try:
        text = path.read_text(errors="surrogateescape")
    except FileNotFoundError:
        raise BuildTreeError(f"{path}: depfile missing") from None
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None
    rules = parse_depfile(text)
    if target in rules:
        return rules[target]
    if len(rules) >= 1:
        first = next(iter(rules))
        if Path(first).name == Path(target).name:
            return rules[first]
    raise BuildTreeError(f"{path}: no rule for {target}")


def read_cmake_scan(path: Path, target: str) -> list[str]:
    """Dependencies of ``target`` in CMake's ``depend.internal`` at ``path``."""
    try:
        lines = path.read_text(errors="surrogateescape").splitlines()
    except FileNotFoundError:
        raise BuildTreeError(f"{path}: CMake's dependency scan is missing (not built yet?)") from None
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None
    found: list[str] | None = None
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if not line.startswith(" "):
            if found is not None:
                break
            if line == target:
                found = []
        elif found is not None:
            found.append(line[1:])
    if found is None:
        raise BuildTreeError(f"{path}: no dependencies scanned for {target}")
    return found
