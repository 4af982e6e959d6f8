"""The map file: gzipped JSON, written atomically and read back within bounds.

Writes are atomic (a temporary file in the same folder, then a rename) and,
with ``SOURCE_DATE_EPOCH`` set, reproducible: the gzip header carries no time.
A map is read a piece at a time, refused past :data:`MAX_JSON` bytes or
:data:`MAX_RATIO` times its size, and checked (:func:`validate`) before use.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:  # zlib-ng: zlib's interface and behaviour, its inflate 2x as fast (a map 10x vLLM's: 0.10 s, not 0.19)
    from zlib_ng import zlib_ng as _inflating
except ImportError:  # a platform zlib-ng has no wheel for: the standard library's
    _inflating = zlib  # type: ignore[assignment]

from .. import _atomic
from ..errors import MapError
from . import plainjson
from .document import source_date_epoch
from .validation import problems

MAX_JSON = 512 << 20  # bytes of JSON one map may decompress to: a vLLM map is tens of MB
MAX_RATIO = 256  # JSON bytes per gzip byte: maps build writes measure 20-130x; deflate can reach 1032x
INFLATE_IN, INFLATE_OUT = 1 << 16, 1 << 16  # gzip bytes fed at a time, JSON bytes taken at a time
# (64 KB: pieces of a MB would have malloc map and unmap pages for each, a tenth of a second of system time on a
# map 10x vLLM's)
MIN_CONTAINER_BYTES = 16  # JSON bytes per '{' or '[' at least: a map's smallest object record holds 80 for 3
# A NUL, or half a surrogate pair, in a JSON string: no path a file system gives (a pair is fine: U+10000 up).
_BAD_ESCAPE = re.compile(  # re, not regex: json imports re anyway, and build's no-op path stays light
    rb"\\u(?:0000|[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"  # a NUL, a high half alone
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u)[dD][c-fC-F][0-9a-fA-F]{2})")  # a low half alone
COMPRESS_LEVEL = 6  # gzip level of written maps


def encode(document: dict[str, Any], chunk: int = 64) -> bytes:
    """Gzipped JSON; without a time in the gzip header when SOURCE_DATE_EPOCH is set.

    The objects are encoded in slices while a second thread compresses the
    previous slice (zlib releases the GIL), so a 500-object map costs about
    the larger of the two instead of their sum. The bytes do not depend on
    the slicing: it is one JSON text in one gzip stream.
    """
    from concurrent.futures import ThreadPoolExecutor  # here: the consumers, which only read maps, never start it

    head = {k: v for k, v in document.items() if k != "objects"}
    objects = document.get("objects", [])
    prefix = json.dumps(head, separators=(",", ":"))[:-1] + ("," if head else "") + '"objects":['
    buffer = io.BytesIO()
    mtime = 0 if source_date_epoch() is not None else None
    # Level 6 (zlib's default): on a 500-object map (7.6 MB of JSON), 9 took 2.3x its time (98 ms, not 43) for
    # 6% fewer bytes (514 KB, not 545); 7 and 8 sit between (bench/bench_cold.py's tree).
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=mtime, compresslevel=COMPRESS_LEVEL) as f, \
            ThreadPoolExecutor(1) as compressor:
        pending = [compressor.submit(f.write, prefix.encode())]
        for i in range(0, len(objects), chunk):
            text = json.dumps(objects[i : i + chunk], separators=(",", ":"))[1:-1]
            pending.append(compressor.submit(f.write, (("," if i else "") + text).encode()))
        pending.append(compressor.submit(f.write, b"]}"))
        for p in pending:
            p.result()
    return buffer.getvalue()


def write(document: dict[str, Any], out: Path) -> int:
    """Write atomically: the old map stays intact until the complete new one replaces it."""
    data = encode(document)
    try:
        _atomic.replace(out, data, durable=True, mode=0o644)
    except OSError as e:
        raise MapError(f"{out}: cannot write: {e.strerror or e}; the previous map is untouched") from None
    return len(data)


def read(path: Path) -> dict[str, Any]:
    """A version-1 map; anything else is a one-line :class:`MapError`."""
    document = decode(path)
    validate(document, str(path))
    return document


def decode(path: Path) -> Any:
    """The gzipped JSON in ``path``, not yet validated."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise MapError(f"{path}: is a directory") from None
    except OSError as e:
        raise MapError(f"{path}: {e.strerror or e}") from None
    return decode_bytes(raw, str(path))


def decode_bytes(raw: bytes, where: str) -> Any:
    """The gzipped JSON in ``raw`` (read from ``where``), not yet validated; bounded in size, shape and depth.

    Memory stays proportional to the JSON: it inflates to at most
    :data:`MAX_RATIO` times the gzip (and :data:`MAX_JSON`), and JSON with more
    containers than a map has is refused before it is parsed (an empty ``{}``
    costs Python 64 bytes for its 2). A map as ``encode`` writes it is decoded
    an object at a time as it inflates, each repeated path one string
    (:mod:`.plainjson`: the same document, a tenth of the memory); any other
    text, and any text these rules refuse, is decoded whole below, which says why.
    """
    with plainjson.bulk():
        return _decode_bytes(raw, where)


def _decode_bytes(raw: bytes, where: str) -> Any:
    limit = min(MAX_JSON, MAX_RATIO * len(raw) + (1 << 20))
    document = plainjson.decode_map(_inflated(raw, where, limit))
    if document is not None:
        return document
    text = _inflate(raw, where, limit)
    bad = _BAD_ESCAPE.search(text)
    if bad is not None:
        raise MapError(f"{where}: a string holds a NUL or half a surrogate pair ({bad.group().decode()} at byte "
                       f"{bad.start()}): no file system path is spelled so")
    if text.count(b"{") + text.count(b"[") > len(text) // MIN_CONTAINER_BYTES + 64:
        raise MapError(f"{where}: more JSON objects and lists than a map has (one per {MIN_CONTAINER_BYTES} bytes "
                       "at most): not a map")
    try:
        return json.loads(text.decode("utf-8"))  # strict: json.loads(bytes) would let raw surrogates through
    except UnicodeDecodeError as e:
        raise MapError(f"{where}: not UTF-8 (at byte {e.start})") from None
    except RecursionError:
        raise MapError(f"{where}: JSON nested too deep to be a map") from None
    except ValueError as e:
        raise MapError(f"{where}: not JSON ({e})") from None


def _inflate(raw: bytes, where: str, limit: int) -> bytearray:
    """gzip's members in ``raw``, inflated to at most ``limit`` bytes, which is an error (:func:`_inflated`)."""
    text = bytearray()
    for piece in _inflated(raw, where, limit):
        text += piece
    return text


def _inflated(raw: bytes, where: str, limit: int) -> Iterator[bytes]:
    """gzip's members in ``raw``, inflated in pieces, to at most ``limit`` bytes, which is an error.

    Streamed: :data:`INFLATE_IN` bytes of gzip at a time, each inflated in
    pieces of at most :data:`INFLATE_OUT`, counted after every piece. A bomb is
    refused a piece past the bound, and whoever keeps the pieces holds no more
    than the bound meanwhile (``zlib.decompress`` with a ``max_length``
    collects its output in blocks and joins them: twice the bound).
    """
    too_big = MapError(f"{where}: decompresses to more than {limit >> 20} MiB "
                       f"({MAX_RATIO}x its size, {MAX_JSON >> 20} MiB at most): not a map")
    view, at, total = memoryview(raw), 0, 0
    try:
        while at < len(raw):  # concatenated gzip members, as gzip.decompress allows
            inflate = _inflating.decompressobj(wbits=31)
            while at < len(raw) and not inflate.eof:
                data = view[at : at + INFLATE_IN]
                at += len(data)
                while data and not inflate.eof:
                    text = b""
                    text += inflate.decompress(data, INFLATE_OUT)  # b"" + piece is the piece: no copy
                    total += len(text)
                    if total > limit:
                        raise too_big
                    if text:
                        yield text
                    data = inflate.unconsumed_tail
            if not inflate.eof:
                raise _inflating.error("truncated")
            at -= len(inflate.unused_data)  # the next member starts where this one ended
    except _inflating.error:
        raise MapError(f"{where}: not a gzip file") from None
    if not total:
        raise MapError(f"{where}: not a gzip file")


def validate(document: Any, where: str) -> None:
    """Raise a one-line :class:`MapError` naming the first of :func:`problems`."""
    found = problems(document)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise MapError(f"{where}: {found[0]}{more}")
