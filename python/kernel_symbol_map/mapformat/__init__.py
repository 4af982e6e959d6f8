"""The map file: kernel_symbol_map.json.gz, format version 1 (the first release's contract, kept).

Version 1's fields and types are kept exactly: ``version``, ``commit``,
``cuda``, ``generated_at``, ``build_dirs``, ``incomplete``, ``errors[{object,
source, error}]``, ``objects[{source, target, object, device, symbols, deps,
error?}]``, ``stats`` and ``reason``. Added fields (consumers ignore them):
``backend``, ``generator``, ``cmake_version``, ``tool``, ``pairing``,
``deps_from``, ``only_targets`` and ``all_targets`` (a map of a subset of
targets, and what the whole build has), ``excluded_targets`` (never built:
EXCLUDE_FROM_ALL), ``target_links`` (target -> the targets it depends on),
``artefacts`` (target -> the libraries and executables its objects end up in),
``configure_inputs`` (files the configure read: never clearable), ``dirty``
(mapped files that differed from ``commit`` in the tree that was built), and per
object ``archs`` (and ``device_link`` on device-link objects, ``deps_from``
where deps came another way than the compiler's depfile).

Its parts: :mod:`.paths` (how a path is spelled: ``$BUILD/...`` inside a
build folder, so that a map does not depend on where the build ran),
:mod:`.document` (time, stats, failing closed, merging), :mod:`.file` (gzipped
JSON, written atomically, read within bounds; :mod:`.plainjson` decodes it an
object at a time), :mod:`.validation` (the checks every reader runs),
:mod:`.schema` (the JSON Schema, for ``validate``), and what an object holds:
:mod:`.sizes`, :mod:`.digests`, :mod:`.pyblocks`. The names below are the
format's interface; each lives in its part. With ``SOURCE_DATE_EPOCH`` set a
map is reproducible: ``generated_at`` comes from it, the gzip header carries
no time and ``stats.seconds`` is 0.
"""

from __future__ import annotations

from .._commit import COMMIT_VARIABLES, is_full_sha, resolve_commit
from .document import fail_closed, generated_at, merge, source_date_epoch, stats
from .file import (COMPRESS_LEVEL, INFLATE_IN, INFLATE_OUT, MAX_JSON, MAX_RATIO, MIN_CONTAINER_BYTES, decode,
                   decode_bytes, encode, read, validate, write)
from .paths import BUILD_MARKER, DEP_MARKER, Speller, build_marker, relpath, spell, unspell
from .schema import SCHEMA, schema, schema_problems
from .validation import VERSION, fail_closed_problems, problems

__all__ = [
    "BUILD_MARKER", "COMMIT_VARIABLES", "COMPRESS_LEVEL", "DEP_MARKER", "INFLATE_IN", "INFLATE_OUT", "MAX_JSON",
    "MAX_RATIO", "MIN_CONTAINER_BYTES", "SCHEMA", "VERSION", "Speller", "build_marker", "decode", "decode_bytes",
    "encode", "fail_closed", "fail_closed_problems", "generated_at", "is_full_sha", "merge", "problems", "read",
    "relpath", "resolve_commit", "schema", "schema_problems", "source_date_epoch", "spell", "stats", "unspell",
    "validate", "write",
]
