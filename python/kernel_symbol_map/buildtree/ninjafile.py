"""The ``build`` statements of a Ninja manifest, as CMake writes ``build.ninja``.

Written by hand: PyPI has ``ninja_syntax`` to write manifests, but no kept
library reads them. Only what a CMake-written manifest uses is read:
``build OUTS [| IMPLICIT_OUTS]: RULE INS [| IMPLICIT] [|| ORDER_ONLY]``
(not its indented bindings: nothing here needs them), ``$``-escapes (``$ ``, ``$:``,
``$$``, ``$\\n``) and ``include``/``subninja`` of further files. Variables
are not expanded: CMake writes paths literally. Anything else that does not
parse is a :class:`BuildTreeError` naming the file and line.

Bounded whatever the input: a file that includes itself (directly or not),
includes nested deeper than :data:`MAX_DEPTH`, more than :data:`MAX_FILES`
files or a logical line longer than :data:`MAX_LINE` are errors. The work is
linear in the input's size, and most of it runs at C speed: escapes and
continuations become one-character markers in a few passes over the whole
file (a manifest holds no control characters, so none is taken for a
marker), and only the lines this model reads reach Python.
"""

from __future__ import annotations

import re
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from ..errors import BuildTreeError


class BuildStatement(NamedTuple):  # a NamedTuple: made at C speed, a million times for a large manifest
    outputs: tuple[str, ...]
    rule: str
    inputs: tuple[str, ...]  # explicit inputs
    implicit: tuple[str, ...] = ()
    order_only: tuple[str, ...] = ()


MAX_DEPTH = 16  # include/subninja nesting (CMake writes 2 levels)
MAX_FILES = 4096  # manifests read for one build tree
MAX_LINE = 64 << 20  # characters in one logical line (a link of every object of a large tree fits)

# Markers for what escapes and continuations stand for: NUL for a joined continuation (`$\n`), then
# `$$`, `$ ` and `$:`. Marked by str.replace, whose memory is the text's: re.sub holds a piece per match.
_JOINED, _DOLLAR, _SPACE, _COLON = "\0", "\x01", "\x02", "\x03"
_MARKERS = (_JOINED, _DOLLAR, _SPACE, _COLON)
_CONTROL = re.compile(r"[\x00-\x03]")
_COMMENT_DOLLAR = re.compile(r"^[ \t]*#[^\n]*\$$", re.MULTILINE)  # a comment's last `$` continues nothing
_READ = re.compile(r"^(?:build|include|subninja) [^\n]*", re.MULTILINE)  # the lines this model reads
_INCLUDE = re.compile(r"^(?:include|subninja) [^\n]*", re.MULTILINE)
_UNMARK = str.maketrans({_DOLLAR: "$", _SPACE: " ", _COLON: ":"})


def _marked(text: str, path: Path) -> str:
    """``text`` with escapes marked and continuations joined; lines keep their numbers (a joined line's
    NUL markers count the lines it took)."""
    control = _CONTROL.search(text) if any(c in text for c in _MARKERS) else None
    if control is not None:
        line = text.count("\n", 0, control.start()) + 1
        raise BuildTreeError(f"{path}:{line}: a control character ({control.group()!r}): not a manifest")
    if "$\n" in text:
        text = _COMMENT_DOLLAR.sub("", text)
    text = text.replace("$$", _DOLLAR)  # then every `$` before a newline continues
    return text.replace("$\n", _JOINED).replace("$ ", _SPACE).replace("$:", _COLON)


def _tokens(text: str) -> list[str]:
    """Whitespace-separated paths of marked text, escapes undone (``$x`` references kept as written).

    A continued line's leading spaces separate paths, as they follow the
    ``" $"`` every generator ends a continued line with; ninja itself would
    glue ``a$\\n  b`` into ``ab``, which no generator writes.
    """
    tokens = (text.replace(_JOINED, "") if _JOINED in text else text).split()
    if _DOLLAR in text or _SPACE in text or _COLON in text:
        return [t.translate(_UNMARK) for t in tokens]
    return tokens


class _Bad(Exception):
    """A line that does not parse; the reader adds its file and line number."""


def _logical(line: str) -> str:
    if len(line) > MAX_LINE:
        raise _Bad(f"a line longer than {MAX_LINE >> 20} MiB")
    if line.endswith("$"):  # every `$` before a newline was a continuation: this one ends the file
        raise _Bad("a line ends in a lone '$'")
    return line


_GROUPS = {"|": 1, "||": 2, "|@": 3}  # implicit inputs, order-only inputs, validations (not inputs)


def _statement(line: str) -> BuildStatement:
    """A marked ``build`` line: its first ``:`` is unescaped, so it ends the outputs."""
    head, colon, tail = line.partition(":")
    if not colon:
        raise _Bad("a build statement without ':'")
    tokens = str.split if line.isprintable() else _tokens  # printable: no marker, the common case
    outputs = tokens(head)[1:]  # after "build"
    rest = tokens(tail)
    if "|" in outputs:
        outputs = [t for t in outputs if t != "|"]
    if not rest or not outputs:
        raise _Bad("a build statement without outputs or rule")
    if "|" not in tail:  # no implicit or order-only inputs: at C speed
        return BuildStatement(tuple(outputs), rest[0], tuple(islice(rest, 1, None)))
    groups: list[tuple[str, ...]] = [(), (), (), ()]
    kind, start = 0, 1  # rest[0] is the rule
    for at in [at for at, t in enumerate(rest) if t in _GROUPS]:
        groups[kind] += tuple(islice(rest, start, at))  # islice: no copy of a long line's list on the way
        kind, start = _GROUPS[rest[at]], at + 1
    groups[kind] += tuple(islice(rest, start, None))
    return BuildStatement(tuple(outputs), rest[0], *groups[:3])


def read(path: Path, base: Path | None = None) -> list[BuildStatement]:
    """Every build statement of ``path`` and the files it includes (relative to ``base``, the build dir),
    in the order ninja reads them."""
    statements: list[BuildStatement] = []
    _read(path, base or path.parent, statements, [], {"files": 0})
    return statements


def find(path: Path, rule: str, base: Path | None = None) -> BuildStatement | None:
    """The first build statement of ``rule`` in ``path`` or the files it includes, for readers that need one
    (``RERUN_CMAKE``): each file is searched whole at C speed before its includes are followed, so the
    manifest's other statements are never parsed."""
    return _find(path, base or path.parent, f": {rule}", [], {"files": 0})


def _find(path: Path, base: Path, needle: str, stack: list[Path], count: dict[str, int]) -> BuildStatement | None:
    text = _manifest(path, stack, count)
    at = text.find(needle)
    while at >= 0:  # a build line whose first unescaped ':' is followed by the rule, as a whole word
        start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        line = text[start : end if end >= 0 else len(text)]
        after = line[at - start + len(needle) : at - start + len(needle) + 1]
        if line.startswith("build ") and ":" not in line[: at - start] and after in ("", " "):
            try:
                return _statement(_logical(line))
            except _Bad as e:
                raise BuildTreeError(f"{_where(path, text, start)}: {e}") from None
        at = text.find(needle, at + 1)
    for include in _includes(text):
        statement = _find(base / _included(path, text, include), base, needle, [*stack, path.resolve()], count)
        if statement is not None:
            return statement
    return None


def _includes(text: str) -> list[re.Match[str]]:
    """The ``include`` and ``subninja`` lines of marked text, in order: found by str.find, as a regex's
    ``^`` would be tried at every offset of a large manifest."""
    starts = [0] if text.startswith(("include ", "subninja ")) else []
    for needle in ("\ninclude ", "\nsubninja "):
        at = text.find(needle)
        while at >= 0:
            starts.append(at + 1)
            at = text.find(needle, at + 1)
    return [m for at in sorted(starts) if (m := _INCLUDE.match(text, at)) is not None]


def _manifest(path: Path, stack: list[Path], count: dict[str, int]) -> str:
    """``path``'s marked text, once the include bounds are checked."""
    real = path.resolve()
    if real in stack:
        raise BuildTreeError(f"{stack[-1]}: includes {path}, which includes it back (a cycle)")
    if len(stack) >= MAX_DEPTH:
        raise BuildTreeError(f"{stack[-1]}: include of {path} nests deeper than {MAX_DEPTH} files")
    count["files"] += 1
    if count["files"] > MAX_FILES:
        raise BuildTreeError(f"{path}: more than {MAX_FILES} manifests included")
    try:
        return _marked(path.read_text(encoding="utf-8", errors="surrogateescape"), path)
    except (OSError, ValueError) as e:
        raise BuildTreeError(f"{path}: {getattr(e, 'strerror', None) or e}") from None


def _read(path: Path, base: Path, statements: list[BuildStatement], stack: list[Path], count: dict[str, int]) -> None:
    text = _manifest(path, stack, count)
    for found in _READ.finditer(text):
        if found.group().startswith("build "):
            statements.append(_parsed(path, text, found))
        else:
            _read(base / _included(path, text, found), base, statements, [*stack, path.resolve()], count)
    # rule, pool, default and bindings carry nothing this model needs


def _parsed(path: Path, text: str, found: re.Match[str]) -> BuildStatement:
    try:
        return _statement(_logical(found.group()))
    except _Bad as e:
        raise BuildTreeError(f"{_where(path, text, found.start())}: {e}") from None


def _included(path: Path, text: str, found: re.Match[str]) -> str:
    """The file an ``include``/``subninja`` line names."""
    try:
        (name,) = _tokens(_logical(found.group()).split(" ", 1)[1])[:1] or [""]
        if not name:
            raise _Bad("include of nothing")
    except _Bad as e:
        raise BuildTreeError(f"{_where(path, text, found.start())}: {e}") from None
    return name


def _where(path: Path, marked: str, at: int) -> str:
    """``path:line`` of offset ``at`` of the marked text: counted only for an error message."""
    return f"{path}:{marked.count(chr(10), 0, at) + marked.count(_JOINED, 0, at) + 1}"
