"""Python source split into blocks, each with a digest: how a test's Python coverage is recorded.

A file's blocks are its functions (``def`` and ``async def`` at any depth), each
holding its body only, and the module block: every line outside every function
body (imports, class bodies, decorators, signatures, ``def`` lines). A line
belongs to the innermost function whose body holds it. A function's body
starts at its first statement that a call runs: its docstring is the
enclosing block's (``__doc__`` is set where the function is defined). A
function with no such statement (a docstring, ``...``), or whose body starts
on a line of its signature (``def f(): return 1``), has no block of its own:
it is part of the enclosing one, since its signature runs there.

A block's digest covers its qualified name (with an ordinal among same-named
siblings), and the tokens of its own lines, with comments and blank lines left
out and the bodies of functions nested in it excluded. So a change inside one
function's body changes that function's digest alone; adding, removing or
renaming a function changes the enclosing block (its ``def`` line is there).
Moving a function to other lines changes nothing.

The recorder digests the files a test executed, at the recordings' commit: a
test's record names the digests of the blocks it executed. ``select`` digests a
changed file again from the checkout: a test is reached by the file when a
digest it executed is no longer among the file's. A file that does not parse
(or tokenize) is one block, its bytes' digest: any change to it is a change to
every block anyone executed.

Written by hand over ``ast`` and ``tokenize``: coverage.py and pytest-testmon
keep their own block models private.
"""

from __future__ import annotations

import ast
import hashlib
import io
import tokenize
from collections import Counter
from dataclasses import dataclass

SCHEME = 1  # bump when a digest's definition changes: recordings of another scheme are not comparable
MODULE = "<module>"
_SKIPPED = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER})


@dataclass(frozen=True)
class Blocks:
    """One file's blocks: ``names[i]`` and ``digests[i]``; ``lines[n]`` is line n's block (1-based); ``first`` the
    line of the module's first statement, which runs when, and only when, the module is executed."""

    names: tuple[str, ...]
    digests: tuple[str, ...]
    lines: tuple[int, ...]
    first: int = 1

    def executed(self, lines: set[int] | frozenset[int]) -> set[str]:
        """The digests of the blocks holding ``lines``; a line past the end counts as the module block's."""
        found = set()
        for n in lines:
            found.add(self.digests[self.lines[n] if 0 < n < len(self.lines) else 0])
        return found


def split(source: bytes) -> Blocks:
    """``source`` (a file's bytes) as blocks."""
    try:
        tree = ast.parse(source)
        tokens = list(tokenize.tokenize(io.BytesIO(source).readline))
    except (SyntaxError, ValueError, tokenize.TokenError, UnicodeDecodeError, RecursionError, MemoryError):
        return Blocks((MODULE,), (_digest(MODULE, [source]),), (0,))
    count = source.count(b"\n") + 2
    owner = [0] * count  # line -> block index
    names = [MODULE]
    seen: Counter[str] = Counter()

    def visit(node: ast.AST, scope: tuple[str, ...], block: int) -> None:
        for child in ast.iter_child_nodes(node):
            inner, here = scope, block
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = ".".join((*scope, child.name))
                seen[name] += 1
                inner = (*scope, child.name if seen[name] == 1 else f"{child.name}#{seen[name]}")
                body = _running(child.body)
                start = body[0].lineno if body else 0
                if not isinstance(child, ast.ClassDef) and body and start > _signature_end(child):
                    here = len(names)
                    names.append(".".join(inner))
                    for n in range(start, min(child.end_lineno or start, count - 1) + 1):
                        owner[n] = here
            visit(child, inner, here)

    visit(tree, (), 0)
    text: list[list[bytes]] = [[] for _ in names]
    for tok in tokens:
        if tok.type not in _SKIPPED:
            line = tok.start[0]
            text[owner[line] if line < count else 0].append(f"{tok.type}:{tok.string}\n".encode())
    return Blocks(tuple(names), tuple(_digest(n, t) for n, t in zip(names, text, strict=True)), tuple(owner),
                  tree.body[0].lineno if tree.body else 1)


def _running(body: list[ast.stmt]) -> list[ast.stmt]:
    """``body`` from its first statement that runs when the function is called: a docstring is ``__doc__``, set
    where the function is defined, and a body of docstrings and ``...`` alone compiles to no line a call runs."""
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            return body[i:]
    return []


def _signature_end(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The last line the signature's own nodes reach (decorators, arguments, defaults, annotations)."""
    parts: list[ast.AST] = [*node.decorator_list, node.args]
    if node.returns is not None:
        parts.append(node.returns)
    return max([node.lineno, *(getattr(sub, "end_lineno", 0) or 0 for part in parts for sub in ast.walk(part))])


def _digest(name: str, text: list[bytes]) -> str:
    h = hashlib.blake2b(f"pyblocks/{SCHEME}\0{name}\0".encode(), digest_size=8)
    for t in text:
        h.update(t)
    return h.hexdigest()
