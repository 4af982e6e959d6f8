"""JSON as ``encode`` writes it, decoded with one ``str`` per distinct string of its big string arrays.

A map 10x vLLM's holds 4.5 million dep strings, about 7,000 distinct: ``json.loads``
makes a Python string of each (a GB, and most of a ``select``), and recordings
repeat each kernel name in hundreds of tests. Here a string array that escapes
nothing (``["a","b"]``: no backslash, quote or control character inside) is split
at ``","`` and each piece looked up in :class:`Interned`, so that a repeated
string is one object; everything else is ``json.loads``'s. Every function here
returns exactly what ``json.loads`` would, or None where it cannot be sure, and
the caller then decodes the plain way: the result never depends on which path
ran, and bad input gets the plain path's message.
"""

from __future__ import annotations

import gc
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, AnyStr

# The layout the map decoder takes, as mapformat.encode writes it (compact, ASCII, the objects last):
# {<head>,"objects":[{<object>},{<object>}...]}. Anything else decodes whole (test_consumer_scale checks
# that encode still writes this).
OBJECTS = b'"objects":['  # ends the head
SEPARATOR = b"},{"  # between two objects; inside a string it only makes a fragment that fails to decode
END = b"}]}"  # the last object's close, the list's and the document's
DEPS_KEY = b'"deps"'  # an object's one big array: split; the rest of the object is json.loads's
MIN_CONTAINER_BYTES = 16  # mapformat's bound: JSON bytes per '{' or '[' at least
# Bytes of one object (or of the head) held while it arrives: a vLLM object is ~70 KB. Past this the map
# decodes whole, so that a bomb costs what the whole path's bound lets it (the pending text is copied as
# it grows), and nothing here holds more.
MAX_PENDING = 4 << 20
# What a piece of a split array may not hold: a quote (then it was not split at its strings' ends), a
# backslash (an escape: json.loads undoes it) or a control character (json.loads refuses it).
_NOT_PLAIN = re.compile(rb'["\\\x00-\x1f]')
_NOT_PLAIN_TEXT = re.compile(r'["\\\x00-\x1f]')


@contextmanager
def bulk() -> Iterator[None]:
    """Python's cyclic garbage collector held off while many acyclic containers are built.

    Reading a map 10x vLLM's and 50,000 recorded tests, and deciding each
    test, makes some 300,000 dicts, lists, frozensets and records that live
    on; each time the collector counts 700 new ones it may walk them all
    again: a third of a ``select``. None of them is a cycle, so holding the
    collector off frees nothing later. After, what was built is moved to the
    oldest generation, which only a full collection walks (``gc.freeze`` then
    ``gc.unfreeze``: two list splices, no walk; not when someone else froze
    objects, which unfreezing would let go), and the collector is on again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class _NotPlain(Exception):
    """A piece of a split array that is no whole JSON string by itself."""


class _Strings(dict):  # type: ignore[type-arg]
    """Piece -> its ``str``: a miss (a new piece) is checked and added by ``__missing__``, so that a lookup of
    every piece stays one C-speed ``map`` (a vLLM object's deps are its source and ~1,000 shared headers)."""

    def __init__(self, accept: Callable[[str], bool] | None) -> None:
        super().__init__()
        self.accept = accept

    def __missing__(self, piece: bytes | str) -> str:
        if isinstance(piece, bytes):
            if _NOT_PLAIN.search(piece) or not piece.isascii():
                raise _NotPlain
            text = piece.decode("ascii")
        elif _NOT_PLAIN_TEXT.search(piece):
            raise _NotPlain
        else:
            text = piece
        if self.accept is not None and not self.accept(text):
            raise _NotPlain
        # sys.intern: a recording's kernel and the map's symbol are then one object, and sets of them
        # compare by identity (select meets 2 million recorded kernels with the map's)
        self[piece] = text = sys.intern(text)
        return text


class Interned:
    """The strings of plain string arrays, one ``str`` per distinct one (a map's paths, a recording's kernels).

    A piece is checked once, when first seen: every later one is a dictionary hit. ``accept``, when given,
    is a further check of each (a recording's kernel names): a string it refuses is never split.
    """

    def __init__(self, accept: Callable[[str], bool] | None = None) -> None:
        self.strings = _Strings(accept)

    def intern(self, strings: list[Any]) -> list[Any]:
        """``strings`` (as json.loads made them) with each plain string the table's one."""
        found = []
        for text in strings:
            if type(text) is str:
                try:
                    text = self.strings[text]
                except _NotPlain:
                    pass
            found.append(text)
        return found

    def split(self, inner: AnyStr) -> list[str] | None:
        """What json.loads makes of ``["`` + ``inner`` + ``"]``, or None when that is not a plain string array."""
        try:
            return list(map(self.strings.__getitem__, inner.split(b'","' if isinstance(inner, bytes) else '","')))
        except _NotPlain:
            return None


def array_at(text: AnyStr, at: int, interned: Interned, stop: int | None = None) -> tuple[list[str], int] | None:
    """The plain string array whose '[' is ``text[at]`` (before ``stop``), and the index after its ']'; or None.

    Its end is the first '"]' after its first string opens, found by memchr's
    ']' (a path rarely holds one): a plain string holds no quote, so when every
    piece between is plain, that text is a whole array, and a JSON parser reads
    it to the same ']'.
    """
    quote, close = (b'"', b"]") if isinstance(text, bytes) else ('"', "]")
    stop = len(text) if stop is None else stop
    if text[at + 1 : at + 2] != quote:
        return None
    end = text.find(close, at + 2, stop)  # type: ignore[arg-type]
    while end >= 0 and text[end - 1 : end] != quote:
        end = text.find(close, end + 1, stop)  # type: ignore[arg-type]
    if end < 0 or end < at + 3:
        return None
    strings = interned.split(text[at + 2 : end - 1])
    return None if strings is None else (strings, end + 1)


def containers(text: bytes, start: int = 0, stop: int | None = None) -> int:
    """The '{' and '[' in ``text[start:stop]``, counted only where memchr finds one (a path rarely holds
    either), without copying the slice (an object's deps are most of a map)."""
    return sum(text.count(c, start, stop) for c in (b"{", b"[") if text.find(c, start, stop) >= 0)


def too_dense(length: int, count: int) -> bool:
    """mapformat's bound: more containers than one per MIN_CONTAINER_BYTES (+64) is no map."""
    return count > length // MIN_CONTAINER_BYTES + 64


_SCAN = json.JSONDecoder().scan_once  # json.loads's own scanner: one value at an index, without the wrapper


def whole(text: str) -> Any:
    """``json.loads(text)`` when ``text`` is one JSON value with nothing around it (no space either); else
    None, where json.loads would say why or take the spaces (the caller then asks it)."""
    try:
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    return value if end == len(text) else None


def _loads(text: bytes) -> Any:
    """json.loads of an ASCII fragment; None where it fails (the whole map then says why), or where it is
    denser in containers than a map (json.loads would make an object of each)."""
    if too_dense(len(text), containers(text)):
        return None
    try:
        return json.loads(text.decode("ascii"))
    except (ValueError, RecursionError):
        return None


class _Objects:
    """A map's ``objects``, decoded one at a time as the text arrives."""

    def __init__(self) -> None:
        self.interned = Interned()
        self.found: list[Any] = []
        self.containers = 0  # '{' and '[' in every object's text, mapformat's bound being over the whole text

    def add(self, text: bytes, start: int, stop: int) -> bool:
        """The object ``{`` + ``text[start:stop]`` + ``}``; False where it does not decode (the map then
        decodes whole)."""
        found = self._split(text, start, stop)
        if found is None:
            body = text[start:stop]
            found = _loads(b"{" + body + b"}")
            if found is None:
                return False
            self.containers += containers(body)
        self.found.append(found)
        return True

    def _split(self, text: bytes, start: int, stop: int) -> dict[str, Any] | None:
        """The object with its deps split and the rest json.loads's; None where that cannot be sure."""
        at = text.find(DEPS_KEY + b":[", start, stop)
        if at < 0:
            return None
        bracket = at + len(DEPS_KEY) + 1
        split = array_at(text, bracket, self.interned, stop)
        if split is None:
            return None
        deps, end = split
        rest = b"{" + text[start : bracket + 1] + text[end - 1 : stop] + b"}"  # "deps":[] in the array's place
        if rest.count(DEPS_KEY) != 1:  # the array's plain strings hold no quote: this counts the object's
            return None
        found = _loads(rest)
        if type(found) is not dict or type(found.get("deps")) is not list or found["deps"]:
            return None  # the one '"deps"' was not this object's key: json.loads decides
        found["deps"] = deps
        symbols = found.get("symbols")
        if type(symbols) is list and set(map(type, symbols)) <= {str}:  # one object with the recordings' names
            found["symbols"] = list(map(sys.intern, symbols))
        self.containers += containers(rest) - 1 + containers(text, bracket + 2, end - 2)  # less the '{' added
        return found


def _separators(text: bytes, start: int) -> Iterator[int]:
    """Where each '},{' whose '{' is at or after ``start`` begins, found by memchr's '{' (a map's objects hold
    few)."""
    at = text.find(b"{", max(start, 2))
    while at >= 0:
        if text[at - 2 : at] == b"},":
            yield at - 2
        at = text.find(b"{", at + 1)


def decode_map(pieces: Iterable[bytes]) -> dict[str, Any] | None:
    """``json.loads`` of the map whose text arrives in ``pieces``; None unless it is in encode's layout,
    ASCII, escapes nothing, and is no denser in containers than mapformat's bound.

    The text is held an object at a time, so memory stays near the decoded map's.
    """
    buffer, length = b"", 0
    # Pieces after ``buffer`` with no '{' (so no separator ends in them), joined to it once one comes: an object
    # that spans many pieces is copied once, not once a piece.
    held: list[bytes] = []
    pending = 0  # bytes of the object (or the head) still arriving: buffer's and held's
    head: Any = None
    count = 0  # '{' and '[' outside the objects' bodies: the head's, the list's, each object's own '{'
    objects: _Objects | None = None  # once the first object's '{' is read; buffer is then the object's body
    for piece in pieces:
        if not piece.isascii() or b"\\" in piece:  # an escape or a non-ASCII byte: json.loads decodes it
            return None
        length += len(piece)
        pending += len(piece)
        if pending > MAX_PENDING:
            return None  # an object (or a head) too big to hold twice
        if objects is not None and b"{" not in piece:
            held.append(piece)
            continue
        searched = len(buffer) if objects is not None else 0  # where a separator's '{' may be: the new text
        buffer = b"".join((buffer, *held, piece))
        held.clear()
        if head is None:
            if len(buffer) >= 2 and not buffer.startswith(b'{"'):
                return None  # not as encode's text starts: with its first key (spaces, a list, a bomb)
            at = buffer.find(OBJECTS)
            if at < 0:
                continue
            fields = buffer[:at]  # "{" or "{<fields>,"
            head = _loads(b"{}" if fields == b"{" else fields[:-1] + b"}" if fields.endswith(b",") else b"")
            if type(head) is not dict:
                return None
            count = containers(fields) + 1
            buffer = buffer[at + len(OBJECTS) :]
            pending = len(buffer)
        if objects is None:
            if not buffer.startswith(b"{"):
                continue  # "]}", or more text to come
            objects, buffer = _Objects(), buffer[1:]
        start = 0
        for sep in _separators(buffer, searched):
            if not objects.add(buffer, start, sep):
                return None
            start = sep + len(SEPARATOR)
        buffer = buffer[start:]  # the object still arriving
        pending = len(buffer)
    buffer = b"".join((buffer, *held))
    if head is None:
        return None
    if objects is None:
        if buffer != b"]}":
            return None
        head["objects"] = []
    else:
        if not buffer.endswith(END) or not objects.add(buffer, 0, len(buffer) - len(END)):
            return None
        count += objects.containers + len(objects.found)
        head["objects"] = objects.found
    return None if too_dense(length, count) else head
