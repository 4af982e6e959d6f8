"""The ``build`` statements of a Ninja manifest, as CMake writes ``build.ninja``.

Written by hand: PyPI has ``ninja_syntax`` to write manifests, but no kept
library reads them. Only what a CMake-written manifest uses is read:
``build OUTS [| IMPLICIT_OUTS]: RULE INS [| IMPLICIT] [|| ORDER_ONLY]``,
its indented ``name = value`` bindings, ``$``-escapes (``$ ``, ``$:``,
``$$``, ``$\\n``) and ``include``/``subninja`` of further files. Variables
are not expanded: CMake writes paths literally. Anything else that does not
parse is a :class:`BuildTreeError` naming the file and line.

Bounded whatever the input: a file that includes itself (directly or not),
includes nested deeper than :data:`MAX_DEPTH`, more than :data:`MAX_FILES`
files or a logical line longer than :data:`MAX_LINE` are errors, and the
work is linear in the input's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import regex

from ..errors import BuildTreeError


@dataclass(frozen=True)
class BuildStatement:
    outputs: tuple[str, ...]
    rule: str
    inputs: tuple[str, ...]  # explicit inputs
    implicit: tuple[str, ...] = ()
    order_only: tuple[str, ...] = ()
    bindings: dict[str, str] = field(default_factory=dict)


MAX_DEPTH = 16  # include/subninja nesting (CMake writes 2 levels)
MAX_FILES = 4096  # manifests read for one build tree
MAX_LINE = 64 << 20  # characters in one logical line (a link of every object of a large tree fits)


def _logical_lines(text: str, path: Path) -> list[tuple[int, str]]:
    """(first line number, line) with ``$\\n`` continuations joined; comments and blank lines dropped.

    The pieces of a continued line are joined once at its end: linear, however
    many lines it spans.
    """
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    size, start = 0, 0
    for number, raw in enumerate(text.split("\n"), 1):
        if not pending:
            start = number
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        else:
            raw = raw.lstrip(" ")  # as ninja: a continued line's leading spaces are not part of it
        size += len(raw)
        if size > MAX_LINE:
            raise BuildTreeError(f"{path}:{start}: a line longer than {MAX_LINE >> 20} MiB")
        # a line ends in a continuation when it ends in an odd run of `$`
        run = len(raw) - len(raw.rstrip("$"))
        if run % 2:
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        out.append((start, "".join(pending)))
        pending, size = [], 0
    if pending:
        out.append((start, "".join(pending)))
    return out


_MARKERS = "\x01\x02\x03\x04"
_UNMARK = str.maketrans({"\x01": "$", "\x02": " ", "\x03": ":", "\x04": "\n"})
_SEPARATORS = regex.compile(r"( +|:)")


def _split(text: str, where: str) -> list[str]:
    """Whitespace-separated paths with ``$`` escapes undone; ``|``, ``||`` and ``:`` kept as tokens."""
    if "$" not in text:  # the common case, at C speed: nothing is escaped, so the first ':' separates
        head, colon, tail = text.partition(":")
        return head.split() + ([":"] if colon else []) + tail.split()
    if not any(marker in text for marker in _MARKERS):  # escapes swapped for markers: still at C speed
        marked = text.replace("$$", "\x01").replace("$ ", "\x02").replace("$:", "\x03").replace("$\n", "\x04")
        if marked.endswith("$"):
            raise BuildTreeError(f"{where}: a line ends in a lone '$'")
        return [t.translate(_UNMARK) for t in _SEPARATORS.split(marked) if t and not t.isspace()]
    tokens: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)

    def flush() -> None:
        if current:
            tokens.append("".join(current))
            current.clear()

    while i < n:
        c = text[i]
        if c == "$":
            if i + 1 >= n:
                raise BuildTreeError(f"{where}: a line ends in a lone '$'")
            nxt = text[i + 1]
            if nxt in " :$\n":
                current.append(nxt)
                i += 2
                continue
            current.append(c)  # a variable reference: kept as written
            i += 1
        elif c == " ":
            flush()
            i += 1
        elif c == ":" and not current:
            tokens.append(":")
            i += 1
        elif c == ":":
            flush()
            tokens.append(":")
            i += 1
        else:
            current.append(c)
            i += 1
    flush()
    return tokens


def parse_build(line: str, where: str) -> BuildStatement:
    """One ``build ...`` line (continuations joined), for readers that look for a single statement."""
    return _statement(line, where)


def _statement(line: str, where: str) -> BuildStatement:
    tokens = _split(line[len("build "):], where)
    if ":" not in tokens:
        raise BuildTreeError(f"{where}: a build statement without ':'")
    colon = tokens.index(":")
    outputs = [t for t in tokens[:colon] if t != "|"]
    rest = tokens[colon + 1:]
    if not rest or not outputs:
        raise BuildTreeError(f"{where}: a build statement without outputs or rule")
    rule, rest = rest[0], rest[1:]
    groups: list[list[str]] = [[], [], []]
    kind = 0
    for t in rest:
        if t == "|":
            kind = 1
        elif t == "||":
            kind = 2
        elif t == "|@":  # validations: not inputs
            kind = 3
        elif kind < 3:
            groups[kind].append(t)
    return BuildStatement(tuple(outputs), rule, tuple(groups[0]), tuple(groups[1]), tuple(groups[2]))


def read(path: Path, base: Path | None = None) -> list[BuildStatement]:
    """Every build statement of ``path`` and the files it includes (relative to ``base``, the build dir)."""
    statements: list[BuildStatement] = []
    _read(path, base or path.parent, statements, [], {"files": 0})
    return statements


def _read(path: Path, base: Path, statements: list[BuildStatement], stack: list[Path], count: dict[str, int]) -> None:
    real = path.resolve()
    if real in stack:
        raise BuildTreeError(f"{stack[-1]}: includes {path}, which includes it back (a cycle)")
    if len(stack) >= MAX_DEPTH:
        raise BuildTreeError(f"{stack[-1]}: include of {path} nests deeper than {MAX_DEPTH} files")
    count["files"] += 1
    if count["files"] > MAX_FILES:
        raise BuildTreeError(f"{path}: more than {MAX_FILES} manifests included")
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except (OSError, ValueError) as e:
        raise BuildTreeError(f"{path}: {getattr(e, 'strerror', None) or e}") from None
    current: BuildStatement | None = None
    for number, line in _logical_lines(text, path):
        where = f"{path}:{number}"
        if line.startswith((" ", "\t")):
            if current is not None:
                name, eq, value = line.strip().partition("=")
                if not eq:
                    raise BuildTreeError(f"{where}: an indented line that is not 'name = value'")
                current.bindings[name.strip()] = value.strip()
            continue
        current = None
        if line.startswith("build "):
            current = _statement(line, where)
            statements.append(current)
        elif line.startswith(("include ", "subninja ")):
            (name,) = _split(line.split(" ", 1)[1].strip(), where)[:1] or [""]
            if not name or "\0" in name:
                raise BuildTreeError(f"{where}: include of nothing")
            _read(base / name, base, statements, [*stack, real], count)
        # rule, pool, default and top-level bindings carry nothing this model needs
