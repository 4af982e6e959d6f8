"""The ``build`` statements of a Ninja manifest, as CMake writes ``build.ninja``.

Written by hand: PyPI has ``ninja_syntax`` to write manifests, but no kept
library reads them. Only what a CMake-written manifest uses is read:
``build OUTS [| IMPLICIT_OUTS]: RULE INS [| IMPLICIT] [|| ORDER_ONLY]``,
its indented ``name = value`` bindings, ``$``-escapes (``$ ``, ``$:``,
``$$``, ``$\\n``) and ``include``/``subninja`` of further files. Variables
are not expanded: CMake writes paths literally. Anything else that does not
parse is a :class:`BuildTreeError` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildTreeError


@dataclass(frozen=True)
class BuildStatement:
    outputs: tuple[str, ...]
    rule: str
    inputs: tuple[str, ...]  # explicit inputs
    implicit: tuple[str, ...] = ()
    order_only: tuple[str, ...] = ()
    bindings: dict[str, str] = field(default_factory=dict)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with ``$\\n`` continuations joined; comments and blank lines dropped."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.split("\n"), 1):
        if not pending:
            start = number
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        # a line ends in a continuation when it ends in an odd run of `$`
        run = len(raw) - len(raw.rstrip("$"))
        if run % 2:
            pending += raw[:-1]
            continue
        out.append((start, pending + raw))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _split(text: str, where: str) -> list[str]:
    """Whitespace-separated paths with ``$`` escapes undone; ``|``, ``||`` and ``:`` kept as tokens."""
    if "$" not in text:  # the common case, at C speed: nothing is escaped, so the first ':' separates
        head, colon, tail = text.partition(":")
        return head.split() + ([":"] if colon else []) + tail.split()
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
    base = base or path.parent
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None
    statements: list[BuildStatement] = []
    current: BuildStatement | None = None
    for number, line in _logical_lines(text):
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
            if not name:
                raise BuildTreeError(f"{where}: include of nothing")
            statements += read(base / name, base)
        # rule, pool, default and top-level bindings carry nothing this model needs
    return statements
