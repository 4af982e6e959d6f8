"""Per-entry digests of PTX text, for the architectures that JIT it.

An entry's digest covers its own definition, the ``.func`` definitions it
names, transitively, and every module-level statement (``.version``,
``.target``, ``.const`` and ``.global`` data with their initialisers,
declarations), which is folded into every entry, with the ``.func``
definitions those statements name (a function pointer's initialiser). When
any definition calls through a register (``call (...), %rd4, ...``), every
``.func`` is folded in: an indirect call may reach any of them. Line
information (``.loc`` and ``.file`` directives, ``.section .debug_*``, what
``-lineinfo`` adds) is left out with the comments: it only maps code to source
lines. nvcc's string literals (``.global .b8 $str$1[29] = {...}``, names no
source can spell) are each digested with the entries and functions that name
them, not folded into every entry, and any byte array's initialiser is read as
its bytes with the build's folders masked (:mod:`.folders`): a device
``assert`` holds ``__FILE__``, an absolute path. Comments are left out: the
assembler ignores them, and nvcc's name the compiler build. Text that does not
split into statements as expected is digested whole, for every entry, and
:func:`entry_digests` says so.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
import re  # these patterns are ASCII bytes: the standard module matches as the regex module does, in half the time

import regex

from .._graph import reachable
from . import cuda
from ._blob import Blob
from ._digest import DIGEST_BYTES, feed
from .. import _unitnames as unitnames
from .folders import NONE, Folders
from .._unitnames import unit_hash

# Strings are kept (a .file directive's path), comments dropped: neither may hold structure.
_LEXEMES = re.compile(rb'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
# Directives that end at the end of their line, with no semicolon.
_LINE_DIRECTIVES = re.compile(rb"\.(?:version|target|address_size|file)\b")
_DEFINES = re.compile(rb"\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_IDENTIFIER = re.compile(rb"[A-Za-z_$%][\w$]*")
# The regex module here: it scans for "call" first, where the standard one tries \b at every byte of a body (10x).
_INDIRECT_CALL = regex.compile(rb"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?%")
_STOPS = re.compile(rb"[{};]")  # what ends a statement at the top level
_LINE_COMMENT = re.compile(rb"//[^\n]*")
_LOC = re.compile(rb"^[ \t]*\.loc\b[^\n]*", re.M)  # inside bodies: line information
_DEBUG_STATEMENT = re.compile(rb"\.file\b|\.section\s+\.debug_")  # at the top level: line information
_NONBLANK = re.compile(rb"[^ \t\r\n\0]")  # the payload ends in a NUL
# A byte array with an initialiser: its bytes, masked, are what counts, not how many a path made them.
_BYTES = re.compile(rb"(\.global\s+(?:\.align\s+\d+\s+)?\.b8\s+)([A-Za-z_$%][\w$]*)\[(\d*)\]\s*=\s*\{([\d,\s]*)\}\s*;")
_POOLED = re.compile(rb"\$str(?:\$\d+)?|__unnamed_\d+")  # nvcc's literals


def entry_digests(text: bytes, folders: Folders = NONE) -> tuple[dict[str, str], bool]:
    """Each entry's digest (hex), and whether they are per entry (False: every entry has the text's). The
    entries are those the text defines, as many as it has ``.entry`` directives; when it does not split so,
    ``cuda.ptx_entries`` names them. ``folders``: the build's, masked in byte arrays. nvcc's hash of the
    unit's path in names is masked (:mod:`.._unitnames`)."""
    unit = unit_hash(text)
    if unit is None:
        return _entry_digests(text, folders)
    found, per_entry = _entry_digests(unitnames.masked(text, unit), folders)
    return unitnames.unmasked(found, unit), per_entry


def image_digest(text: bytes, folders: Folders = NONE) -> str:
    """The digest (hex) of a PTX image as a whole, for the entries of an image whose every kernel is digested
    per kernel in the cubin of its architecture (``compute_80`` beside ``sm_80``): one pass over the text,
    where :func:`entry_digests` parses it. Normalised as the entries are, so two builds in two folders agree:
    comments and line information (``.loc``, ``.file``, ``.section .debug_*``) left out, nvcc's unit hash
    masked, and each byte array that spells a build folder read as its bytes, the folders masked, its size
    less what a path made it. Text with debugging sections in another form is digested by its entries'
    digests instead, all of them together."""
    # Each feature is looked for only where what it needs is there: a PTX image is hundreds of MB, and a
    # search for a rare byte ("/", '"') costs a tenth of one for a word. Line information (.loc, debug
    # sections) needs a .file directive, which quotes a path.
    unit = unit_hash(text)
    if unit is not None:
        text = unitnames.masked(text, unit)
    quoted = b'"' in text
    lines = quoted and b".file" in text
    if lines and _DEBUG_SECTION in text:  # -lineinfo's string table, -G's line and debug information
        text = _DEBUG_BLOCK.sub(b"", text)
        if _DEBUG_SECTION in text:  # in a form not recognised: its entries' digests, together
            found, _ = _entry_digests(text, folders)
            return _digest_of("\0".join(f"{k}={v}" for k, v in sorted(found.items())).encode())
    if b"/" in text and (b"//" in text or b"/*" in text):  # comments, outside strings (.pragma "nounroll")
        text = _LEXEMES.sub(lambda m: m.group() if m.group().startswith(b'"') else b" ", text) \
            if quoted or b"/*" in text else _LINE_COMMENT.sub(b" ", text)
    if lines:  # .file 1 "/abs/path/x.cu", .loc 1 23 4: which line of which file
        text = _FILE_LINE.sub(b"", text)
        if any(form in text for form in _LOC_DIRECTIVE):
            text = _LOC.sub(b"", text)
    # nvcc writes the module's data before its functions: byte arrays that may spell a folder are looked
    # for there (one written later is digested as it is: two folders then differ, the safe way)
    body = text.find(b")\n{")
    head, tail = (text, b"") if body < 0 else (text[:body], text[body:])
    spelled = _array_spellings(folders)
    if any(folder in head for folder in spelled):
        head = _BYTES.sub(lambda m: _masked_array(m, folders) if any(f in m.group(4) for f in spelled)
                          else m.group(), head)
    return _digest_of(head, tail)


_DEBUG_SECTION = b".debug_"
_DEBUG_BLOCK = re.compile(rb"^[ \t]*\.section[ \t]+\.debug_\w*\s*\{.*?^[ \t]*\}", re.M | re.S)
_LOC_DIRECTIVE = (b".loc\t", b".loc ")  # as nvcc writes them, where a search for ".loc" finds .local too
_FILE_LINE = re.compile(rb"^[ \t]*\.file\b[^\n]*", re.M)


def _digest_of(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    for part in parts:
        h.update(part)
    return h.hexdigest()


@lru_cache(maxsize=8)
def _array_spellings(folders: Folders) -> tuple[bytes, ...]:
    """Each build folder as a PTX byte array's initialiser spells it: ``47, 119, 111, 114, 107``."""
    return tuple(b", ".join(b"%d" % c for c in folder) for folder in folders.roles)


def _masked_array(m: re.Match[bytes], folders: Folders) -> bytes:
    """A byte array's statement as its bytes, folders masked, and the zeros past its initialiser."""
    values = [int(b) for b in m.group(4).replace(b",", b" ").split()]
    if max(values, default=0) > 255:
        return m.group()
    zeros = int(m.group(3)) - len(values) if m.group(3) else -1
    return m.group(1) + m.group(2) + b"[+%d] = " % zeros + folders.mask(bytes(values)) + b";"


def _entry_digests(text: bytes, folders: Folders) -> tuple[dict[str, str], bool]:
    if b'"' in text or b"*" in text and b"/*" in text:  # "*" first: one byte is found at memchr's speed
        code = _LEXEMES.sub(lambda m: m.group() if m.group().startswith(b'"') else b" ", text)
        masked = _STRING.sub(lambda m: b'"' + b"x" * (len(m.group()) - 2) + b'"', code)
    else:  # nvcc's PTX: line comments only, no strings
        code = masked = _LINE_COMMENT.sub(b" ", text)
    if b".loc" in code:
        code, masked = (_LOC.sub(b"", code),) * 2 if masked is code else (_LOC.sub(b"", code), _LOC.sub(b"", masked))
    split = _split(code, masked, folders)
    names = sorted(split[2]) if split is not None else sorted(cuda.ptx_entries(Blob.from_bytes("PTX", text), text))
    if split is None:
        whole = hashlib.blake2b(code, digest_size=DIGEST_BYTES).hexdigest()
        return dict.fromkeys(names, whole), False
    module, spans, defined, funcs, literals = split
    reached = {**funcs, **literals}  # what a body may name: functions and literals
    if reached:
        calls = {name: _named(body, reached.keys() - {name}) for name, body in {**funcs, **defined}.items()}
        indirect = any(_INDIRECT_CALL.search(body) for body in (*funcs.values(), *defined.values()))
        named = {w.decode(errors="replace") for start, end in spans for w in _IDENTIFIER.findall(masked, start, end)}
    else:  # nothing to call, nor to fold in
        calls, indirect, named = {}, False, set()
    unnamed = literals.keys() - {n for found in calls.values() for n in found}  # no body names it: everyone's
    folded = reachable(calls, (funcs.keys() if indirect else set()) | (named & reached.keys()) | unnamed)
    every = hashlib.blake2b(module, digest_size=16)
    for callee in sorted(folded):
        feed(every, callee.encode(), reached[callee])
    base = every.digest()
    out = {}
    for name in names:
        h = hashlib.blake2b(base, digest_size=DIGEST_BYTES)
        feed(h, name.encode(), defined[name])
        for callee in sorted(reachable(calls, {name}) - {name} - folded):
            feed(h, callee.encode(), reached[callee])
        out[name] = h.hexdigest()
    return out, True


_Split = tuple[bytes, list[tuple[int, int]], dict[str, bytes], dict[str, bytes], dict[str, bytes]]


def _split(code: bytes, masked: bytes, folders: Folders = NONE) -> _Split | None:
    """The module's statements (digested, and where each is: the names they hold), each entry's and
    ``.func``'s definition, and nvcc's literals; None when the text does not split so (braces unbalanced, an
    entry defined twice, or fewer entries than ``.entry`` directives). Top-level statements end at a ``;`` or
    the ``}`` that closes a body (data's ``= {...};`` at its ``;``), or a line-ending directive's newline."""
    module = hashlib.blake2b(digest_size=16)
    spans: list[tuple[int, int]] = []  # the module's statements
    entries: dict[str, bytes] = {}
    funcs: dict[str, bytes] = {}
    literals: dict[str, bytes] = {}
    nonblank, directive, stops, debug, defines = (_NONBLANK.search, _LINE_DIRECTIVES.match, _STOPS.search,
                                                  _DEBUG_STATEMENT.match, _DEFINES.search)
    at, size = 0, len(masked)
    while True:
        m = nonblank(masked, at)
        if m is None:
            break
        start = m.start()
        if directive(masked, start):
            end = masked.find(b"\n", start)
            end = size if end < 0 else end
            brace = masked.find(b"{", start, end)
        else:
            m = stops(masked, start)
            if m is None:
                return None
            brace = m.start()  # the first of "{};": a ";" ends the statement, with no "{" in it
            stop = masked[brace]
            if stop == 0x3B:  # ;
                end, brace = brace + 1, -1
            elif stop == 0x7D:  # } before any {
                return None
            else:
                end = _closing(masked, brace)
                if end < 0:
                    return None
                if masked[start:brace].rstrip().endswith(b"="):  # "= {...};": data, up to its ";"
                    semicolon = masked.find(b";", end)
                    if semicolon < 0:
                        return None
                    end = semicolon + 1
        at = end
        if debug(masked, start):
            continue
        head = defines(masked, start, brace) if brace >= 0 else None
        if head is None:  # data, a declaration, a directive: every entry's, but for nvcc's literals
            statement = code[start:end]
            array = _BYTES.fullmatch(statement) if brace >= 0 and statement.startswith(b".global") else None
            values = [int(b) for b in array.group(4).replace(b",", b" ").split()] if array else []
            if array is not None and max(values, default=0) < 256:
                contents = bytes(values)
                # The zeros past the initialiser (a char buf[64] = "abc"): its size, less what a path made it.
                zeros = int(array.group(3)) - len(values) if array.group(3) else -1
                statement = array.group(1) + array.group(2) + b"[+%d] = " % zeros + folders.mask(contents)
                if _POOLED.fullmatch(array.group(2)):
                    literals[array.group(2).decode()] = statement
                    continue
            feed(module, statement)
            spans.append((start, end))
            continue
        kind, name = head.group(1), head.group(2).decode(errors="replace")
        table = entries if kind == b"entry" else funcs
        if name in table:
            return None
        table[name] = code[start:end]
    if len(entries) != masked.count(b".entry"):
        return None
    return module.digest(), spans, entries, funcs, literals


def _closing(masked: bytes, opened: int) -> int:
    """Just past the ``}`` that closes the ``{`` at ``opened``, or -1; braces found with ``bytes.find``
    (a body is most of the text: a byte-by-byte walk, even by regex, costs more than the digest)."""
    depth, at = 1, opened + 1
    next_open = masked.find(b"{", at)
    while True:
        close = masked.find(b"}", at)
        if close < 0:
            return -1
        while 0 <= next_open < close:
            depth += 1
            next_open = masked.find(b"{", next_open + 1)
        depth -= 1
        if depth == 0:
            return close + 1
        at = close + 1


def _named(body: bytes, funcs: set[str]) -> set[str]:
    if not funcs:
        return set()
    wanted = {f.encode(): f for f in funcs}
    return {wanted[w] for w in _IDENTIFIER.findall(body) if w in wanted}
