"""Per-entry digests of PTX text, for the architectures that JIT it (issue 27).

An entry's digest covers its own definition, the ``.func`` definitions it
names, transitively, and every module-level statement (``.version``,
``.target``, ``.const`` and ``.global`` data with their initialisers,
declarations), which is folded into every entry, with the ``.func``
definitions those statements name (a function pointer's initialiser). When
any definition calls through a register (``call (...), %rd4, ...``), every
``.func`` is folded in: an indirect call may reach any of them. Comments are left out: the
assembler ignores them, and nvcc's name the compiler build. Text that does not
split into statements as expected is digested whole, for every entry, and
:func:`entry_digests` says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import regex

from ._digest import DIGEST_BYTES, feed

# Strings are kept (a .file directive's path), comments dropped: neither may hold structure.
_LEXEMES = regex.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', regex.S)
_STRING = regex.compile(rb'"(?:[^"\\\n]|\\.)*"')
# Directives that end at the end of their line, with no semicolon.
_LINE_DIRECTIVES = regex.compile(rb"\.(?:version|target|address_size|file)\b")
_DEFINES = regex.compile(rb"\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_IDENTIFIER = regex.compile(rb"[A-Za-z_$%][\w$]*")
_INDIRECT_CALL = regex.compile(rb"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?%")
_BLANK = b" \t\r\n\0"  # the payload ends in a NUL


def entry_digests(text: bytes, entries: Iterable[str]) -> tuple[dict[str, str], bool]:
    """Each entry's digest (hex), and whether they are per entry (False: every entry has the text's)."""
    names = sorted(entries)
    code = _LEXEMES.sub(lambda m: m.group() if m.group().startswith(b'"') else b" ", text)
    masked = _STRING.sub(lambda m: b'"' + b"x" * (len(m.group()) - 2) + b'"', code)
    split = _split(code, masked, names)
    if split is None:
        whole = hashlib.blake2b(code, digest_size=DIGEST_BYTES).hexdigest()
        return dict.fromkeys(names, whole), False
    module, named, defined, funcs = split
    calls = {name: _named(body, funcs.keys() - {name}) for name, body in {**funcs, **defined}.items()}
    indirect = any(_INDIRECT_CALL.search(body) for body in (*funcs.values(), *defined.values()))
    folded = set(funcs) if indirect else _closure(calls, *(named & funcs.keys()))
    every = hashlib.blake2b(module, digest_size=16)
    for callee in sorted(folded):
        feed(every, callee.encode(), funcs[callee])
    out = {}
    for name in names:
        h = hashlib.blake2b(every.digest(), digest_size=DIGEST_BYTES)
        feed(h, name.encode(), defined[name])
        for callee in sorted(_closure(calls, name) - {name} - folded):
            feed(h, callee.encode(), funcs[callee])
        out[name] = h.hexdigest()
    return out, True


def _split(code: bytes, masked: bytes, names: list[str]
           ) -> tuple[bytes, set[str], dict[str, bytes], dict[str, bytes]] | None:
    """The module's statements (digested, and the names they hold), and each entry's and ``.func``'s
    definition; None when the text does not split so (braces unbalanced, an entry defined twice or not at
    all)."""
    module = hashlib.blake2b(digest_size=16)
    named: set[str] = set()
    entries: dict[str, bytes] = {}
    funcs: dict[str, bytes] = {}
    for start, end in _statements(masked):
        if end < 0:
            return None
        statement = code[start:end]
        brace = masked.find(b"{", start, end)
        head = _DEFINES.search(masked, start, brace if brace >= 0 else end)
        if head is None or brace < 0:  # data, a declaration, a directive: every entry's
            feed(module, statement)
            named |= {m.group().decode(errors="replace") for m in _IDENTIFIER.finditer(masked, start, end)}
            continue
        kind, name = head.group(1), head.group(2).decode(errors="replace")
        table = entries if kind == b"entry" else funcs
        if name in table:
            return None
        table[name] = statement
    if sorted(entries) != names:
        return None
    return module.digest(), named, entries, funcs


def _statements(masked: bytes) -> list[tuple[int, int]]:
    """Top-level statements as ``(start, end)``: up to a ``;`` or the ``}`` that closes a body, or a
    line-ending directive's newline; a last ``(start, -1)`` when braces do not balance."""
    out = []
    at, depth, start, opened = 0, 0, -1, -1
    size = len(masked)
    while at < size:
        c = masked[at]
        if start < 0:
            if c in _BLANK:
                at += 1
                continue
            start = at
            if _LINE_DIRECTIVES.match(masked, at):
                end = masked.find(b"\n", at)
                end = size if end < 0 else end
                out.append((start, end))
                at, start = end, -1
                continue
        if c == 0x7B:  # {
            depth += 1
            opened = at if depth == 1 else opened
        elif c == 0x7D:  # }
            depth -= 1
            if depth < 0:
                return [*out, (start, -1)]
            if depth == 0 and not masked[start:opened].rstrip().endswith(b"="):  # a body, not "= {...};"
                out.append((start, at + 1))
                start = -1
        elif c == 0x3B and depth == 0:  # ;
            out.append((start, at + 1))
            start = -1
        at += 1
    if depth or start >= 0 and masked[start:].strip(_BLANK):
        return [*out, (start, -1)]
    return out


def _named(body: bytes, funcs: set[str]) -> set[str]:
    return {w for m in _IDENTIFIER.finditer(body) if (w := m.group().decode(errors="replace")) in funcs}


def _closure(calls: dict[str, set[str]], *start: str) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in calls.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
