"""The map file: kernel_symbol_map.json.gz, format version 1 (the seed script's contract).

Version 1's fields and types are kept exactly: ``version``, ``commit``,
``cuda``, ``generated_at``, ``build_dirs``, ``incomplete``, ``errors[{object,
source, error}]``, ``objects[{source, target, object, device, symbols, deps,
error?}]``, ``stats`` and ``reason``. Added fields (consumers ignore them):
``backend``, ``generator``, ``cmake_version``, ``tool``, ``pairing``,
``deps_from``, ``only_targets`` and ``all_targets`` (a map of a subset of
targets, and what the whole build has), ``excluded_targets`` (never built:
EXCLUDE_FROM_ALL), ``target_links`` (target -> the targets it depends on),
``artefacts`` (target -> the libraries and executables its objects end up in),
``configure_inputs`` (files the configure read: never clearable), and per
object ``archs`` (and ``device_link`` on device-link objects, ``deps_from``
where deps came another way than the compiler's depfile).

Paths inside a build folder are written behind a marker, ``$BUILD/...`` (the
second build folder ``$BUILD1/...``, and so on), so that a map does not depend
on where the build ran; ``build_dirs`` follows the same rule.

Writes are atomic (a temporary file in the same folder, then a rename) and,
with ``SOURCE_DATE_EPOCH`` set, reproducible: ``generated_at`` comes from it,
the gzip header carries no time and ``stats.seconds`` is 0.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import os
import re
import subprocess
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

try:  # zlib-ng: zlib's interface and behaviour, its inflate 2x as fast (a map 10x vLLM's: 0.10 s, not 0.19)
    from zlib_ng import zlib_ng as _inflating
except ImportError:  # a platform zlib-ng has no wheel for: the standard library's
    _inflating = zlib  # type: ignore[assignment]

from .. import _atomic
from .._commit import COMMIT_VARIABLES, is_full_sha, resolve_commit
from ..errors import MapError
from . import plainjson
from .validation import VERSION, fail_closed_problems, problems

__all__ = ["COMMIT_VARIABLES", "VERSION", "fail_closed_problems", "is_full_sha", "problems", "resolve_commit"]
# the validator's home is .validation; the commit's is .._commit (light: build's no-op path needs it)
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
BUILD_MARKER = "$BUILD"  # a path inside the i-th build folder: "$BUILD/gen/x.cu", "$BUILD1/..." for i >= 1


def build_marker(index: int) -> str:
    return BUILD_MARKER if index == 0 else f"{BUILD_MARKER}{index}"


DEP_MARKER = "$DEP"  # a file of a FetchContent dependency: "$DEP/cutlass/include/cute/tensor.hpp"


def spell(path: str | os.PathLike[str], source_root: str | os.PathLike[str], build_dirs: Sequence[str],
          deps: Mapping[str, str] | None = None) -> str:
    """How a map writes ``path``, whatever folder the build ran in.

    Inside a third-party dependency's folder (``deps``: FetchContent name ->
    folder): ``$DEP/<name>/...``, wherever it was fetched to (checked first: it
    may lie in a build folder, or in the source root's ``.deps``). Inside a
    build folder: relative to it, behind its marker (a build folder inside the
    source tree is still a build folder). Inside the source root: relative to
    it. A path spelled through a symlinked root (a project configured as
    ``-S /link``) is compared as the real file too. Anything else (system and
    toolkit headers) stays absolute.
    """
    return Speller(source_root, build_dirs, deps)(path)


class Speller:
    """:func:`spell` for many paths of one build: the roots' real paths are found once, not once a path."""

    def __init__(self, source_root: str | os.PathLike[str], build_dirs: Sequence[str],
                 deps: Mapping[str, str] | None = None) -> None:
        self.roots = (source_root, build_dirs, deps or {})
        self._real: tuple[str, list[str], dict[str, str]] | None = None  # found when a path first needs them

    def __call__(self, path: str | os.PathLike[str]) -> str:
        p = os.path.normpath(path)
        marked = _under(p, *self.roots)
        if marked is None:
            if self._real is None:
                source_root, build_dirs, deps = self.roots
                self._real = (os.path.realpath(source_root), [os.path.realpath(b) for b in build_dirs],
                              {n: os.path.realpath(f) for n, f in deps.items()})
            marked = _under(os.path.realpath(p), *self._real)
        return p if marked is None else marked


def _under(p: str, source_root: str | os.PathLike[str], build_dirs: Sequence[str],
           deps: Mapping[str, str]) -> str | None:
    for name, folder in deps.items():
        if p == folder or p.startswith(folder.rstrip("/") + "/"):
            return f"{DEP_MARKER}/{name}" + p[len(folder.rstrip("/")) :]
    for index, folder in enumerate(build_dirs):
        if p == folder or p.startswith(folder.rstrip("/") + "/"):
            return build_marker(index) + p[len(folder.rstrip("/")) :]
    rel = relpath(p, source_root)
    return None if os.path.isabs(rel) else rel


def unspell(path: str, build_dirs: Sequence[str]) -> str:
    """``path`` with its build marker replaced by the consumer's build folder, when it has that one."""
    if not path.startswith(BUILD_MARKER):
        return path
    rest = path[len(BUILD_MARKER) :]  # string operations: no regex import on the no-op path
    digits = len(rest) - len(rest.lstrip("0123456789"))
    number, tail = rest[:digits], rest[digits:]
    index = int(number or 0)
    if (tail and not tail.startswith("/")) or index >= len(build_dirs):
        return path
    return os.path.normpath(build_dirs[index] + tail)


def relpath(path: str | os.PathLike[str], source_root: str | os.PathLike[str]) -> str:
    """Relative to the source root when inside it, else absolute (FetchContent, CUDA headers).

    String operations on normalised absolute paths: this runs once per distinct dep.
    """
    p = os.path.normpath(path)
    root = os.path.normpath(source_root)
    if p == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return p[len(prefix) :] if p.startswith(prefix) else p


def source_date_epoch() -> int | None:
    value = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(value) if value.isdigit() else None


def generated_at() -> str:
    epoch = source_date_epoch()
    when = dt.datetime.fromtimestamp(epoch, dt.timezone.utc) if epoch is not None else dt.datetime.now(dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def fail_closed(document: dict[str, Any], reason: str | None = None) -> None:
    """Empty ``objects`` when any object failed: a partial map would let a consumer drop tests."""
    errors = document["errors"]
    if not errors:
        return
    document["incomplete"] = True
    document["objects"] = []
    first = errors[0]
    document["reason"] = reason or f"{len(errors)} object{'' if len(errors) == 1 else 's'} unreadable, e.g. " \
        f"{first['object']}: {first['error']}"


def merge(documents: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """One map from maps of one commit (shards built on several machines); fail closed.

    Any input without evidence, maps of different commits, or one object
    mapped two ways makes the result incomplete, with a reason. Subsets
    (``only_targets``) merge into their union, which is whole when together
    they cover ``all_targets``.
    """
    first = documents[0]
    merged: dict[str, Any] = {k: v for k, v in first.items() if k not in ("objects", "errors", "reason")}
    problems = [f"{n}: {d.get('reason') or 'incomplete'}" for n, d in zip(names, documents, strict=True)
                if d.get("incomplete") or d.get("reason")]
    commits = sorted({d["commit"] for d in documents})
    if len(commits) > 1 or not commits[0]:
        problems.append(f"the maps are of commits {', '.join(c or '(unknown)' for c in commits)}, not one")
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for name, doc in zip(names, documents, strict=True):
        for o in doc["objects"]:
            key = (o["source"], o["target"], o["object"])
            if key in objects and objects[key] != o:
                problems.append(f"{name}: {o['object']} of {o['target']} differs from another map's")
            objects[key] = o
    _union_fields(merged, documents)
    merged["build_dirs"] = sorted({b for d in documents for b in d["build_dirs"]})
    merged["generated_at"] = max(d["generated_at"] for d in documents)
    merged["cuda"] = ", ".join(sorted({d["cuda"] for d in documents if d["cuda"]}))
    backends = {d.get("backend", "cuda") for d in documents}
    merged["backend"] = backends.pop() if len(backends) == 1 else "mixed"
    if all("only_targets" in d for d in documents):
        covered = sorted({t for d in documents for t in d["only_targets"]})
        needed = sorted({t for d in documents for t in d.get("all_targets", [])})
        merged["only_targets"], merged["all_targets"] = covered, needed
        if needed and set(needed) <= set(covered):
            del merged["only_targets"], merged["all_targets"]
    else:
        merged.pop("only_targets", None)
        merged.pop("all_targets", None)
    merged["errors"] = [e for d in documents for e in d["errors"]]
    merged["objects"] = [objects[k] for k in sorted(objects)]
    merged["incomplete"] = False
    if problems:
        merged.update(incomplete=True, objects=[], reason="; ".join(problems))
    compiled = sum(_count(d) for d in documents)
    merged["stats"] = {**stats(compiled, merged["objects"], merged["errors"], merged.get("reader", "native")),
                       "merged_from": len(documents)}
    return merged


def _union_fields(merged: dict[str, Any], documents: list[dict[str, Any]]) -> None:
    """The fields that say what may change any object, or what no map covers, from every input.

    A configure input, a FetchContent dependency or a custom command of the
    second shard's tree is as much the merged map's as the first's, and one
    input built where git could not list its files makes the merge unable to
    say what the configure wrote (issue 26).
    """
    for key in ("configure_inputs", "third_party", "excluded_targets"):
        values = sorted({v for d in documents for v in d.get(key, [])})
        if values:
            merged[key] = values
    notes = list(dict.fromkeys(n for d in documents for n in d.get("notes", [])))
    if notes:
        merged["notes"] = notes
    links: dict[str, set[str]] = {}
    for d in documents:
        for target, deps in d.get("target_links", {}).items():
            links.setdefault(target, set()).update(deps)
    if links:
        merged["target_links"] = {t: sorted(v) for t, v in sorted(links.items())}
    if documents and all("artefacts" in d for d in documents):  # one shard without them: unknown
        artefacts: dict[str, set[str]] = {}
        for d in documents:
            for target, names in d["artefacts"].items():
                artefacts.setdefault(target, set()).update(names)
        merged["artefacts"] = {t: sorted(v) for t, v in sorted(artefacts.items())}
    unmapped = {json.dumps(u, sort_keys=True): u for d in documents for u in d.get("unmapped_targets", [])}
    if unmapped:
        merged["unmapped_targets"] = [unmapped[k] for k in sorted(unmapped)]
    if any(d.get("tracked_files_unknown") for d in documents):
        merged["tracked_files_unknown"] = True
    for key in ("deps_from", "pairing", "generator", "cmake_version"):
        values = sorted({p for d in documents if isinstance(d.get(key), str) for p in d[key].split(", ") if p})
        if values:
            merged[key] = ", ".join(values)
    toolchain: dict[str, set[str]] = {}
    for d in documents:
        for language, compiler in d.get("toolchain", {}).items():
            toolchain.setdefault(language, set()).update(compiler.split(", "))
    if toolchain:  # shards built by other compilers: a merge that says both
        merged["toolchain"] = {lang: ", ".join(sorted(c)) for lang, c in sorted(toolchain.items())}
    schemes = {d.get("digests") for d in documents}
    merged.pop("digests", None)
    if len(schemes) == 1 and None not in schemes:  # the digests of one scheme, or none to compare
        merged["digests"] = schemes.pop()


def stats(compiled: int, objects: list[dict[str, Any]], errors: list[dict[str, Any]],
          reader: str = "native") -> dict[str, int]:
    """The counts a map's ``stats`` holds, for ``build`` and ``merge`` alike, as the seed counted them.

    ``objects`` is every object the build compiles; the others count what the
    map holds (nothing, when it failed closed), never what was read.
    """
    found = {
        "objects": compiled,
        "device_objects": sum(1 for e in objects if e["device"]),
        "objects_with_symbols": sum(1 for e in objects if e["symbols"]),
        "symbols": sum(len(e["symbols"]) for e in objects),
        "errors": len(errors),
    }
    if reader == "cuobjdump":
        found["cuobjdump_errors"] = len(errors)  # the seed's name, meaningful when cuobjdump read the objects
    return found


def _count(document: dict[str, Any]) -> int:
    """How many objects a map's build compiled: its stats say, else what it lists."""
    counted = document.get("stats", {}).get("objects") if isinstance(document.get("stats"), dict) else None
    return counted if isinstance(counted, int) else len(document["objects"]) + len(document["errors"])


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
    # 6% fewer bytes (514 KB, not 545); 7 and 8 sit between (bench/bench_cold.py's tree, issue 29).
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
    collects its output in blocks and joins them: twice the bound, issue 26).
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


SCHEMA = "kernel_symbol_map.v1.schema.json"


def schema() -> dict[str, Any]:
    """The JSON Schema shipped beside this module."""
    import importlib.resources  # here: only validate reads the schema

    return json.loads((importlib.resources.files(__name__) / SCHEMA).read_text())


def schema_problems(document: Any) -> list[str]:
    """Every JSON Schema violation, as ``/path: message``; slower than :func:`problems`, so for ``validate``.

    The schema asks only that each item of an object's string lists be a
    string (a kernel's name, a non-empty one), so a map whose lists are all
    such strings, checked here at C speed, is valid exactly when it is with
    those lists empty: jsonschema then walks it so, not a vLLM map's million
    deps one by one (issue 29). A map that is not valid is walked whole, for
    the messages (some quote the object they are about).
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    if validator.is_valid(_without_string_lists(document)):
        return []
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


# An object's lists whose items the schema asks only to be strings, and "symbols", non-empty ones too.
_STRING_LISTS = ("deps", "unity_sources", "rule_inputs", "archs")


def _without_string_lists(document: Any) -> Any:
    """``document`` with each object's string lists that the schema holds nothing against left empty (the
    schema has no rule on a whole list of these: no length, no uniqueness)."""
    objects = document.get("objects") if isinstance(document, dict) else None
    if not isinstance(objects, list):
        return document
    slim = []
    for o in objects:
        if isinstance(o, dict):
            emptied = {k: [] for k in _STRING_LISTS if type(o.get(k)) is list and set(map(type, o[k])) <= {str}}
            symbols = o.get("symbols")
            if type(symbols) is list and set(map(type, symbols)) <= {str} and all(symbols):
                emptied["symbols"] = []
            o = {**o, **emptied} if emptied else o
        slim.append(o)
    return {**document, "objects": slim}
