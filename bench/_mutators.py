"""Structure-aware mutations for the text and JSON readers, as an attacker (or a bad disk) would write them.

Each mutator takes an input and a seed and returns a new input; the seed
makes it repeatable (libFuzzer replays by seed). JSON inputs (maps, JSON
Lines) get one change at a random path of the document: a value swapped for
another type, a list or object nested thousands deep, a huge number, a
string with a NUL or a lone surrogate, a field removed, a list grown. Text
recordings get huge counts and odd names. ``build.ninja`` gets an ``include``
of itself or of a file that includes it back, very long lines, lines
continued thousands of times, runs of ``$``, and statements without parts.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

MAX_SIZE = 1 << 20  # the fuzz campaign's max_len
WEIRD_STRINGS = ["", "\x00", "\ud800", "\udfff", "a\x00b", "../" * 50, "$BUILD9999/x", "$BUILD", "$DEP/x",
                 "/" * 5000, "é" * 3, "\n", "_Z" + "9" * 4000, "HEAD", "c" * 40]
WEIRD_VALUES: list[Any] = [None, True, False, 0, -1, 2**64, 1e308, float("inf"), "x", [], {},
                           [None], {"a": None}, [[[]]], "9" * 5000]


def _weird(rng: random.Random) -> Any:
    """A fresh copy: a shared list or object, once put into a document, would be mutated inside it later."""
    return copy.deepcopy(rng.choice(WEIRD_VALUES))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indices) into a JSON value, breadth-limited so huge maps stay cheap."""
    found = [prefix]
    if isinstance(value, dict):
        for k in list(value)[:64]:
            found += _paths(value[k], (*prefix, k))
    elif isinstance(value, list):
        for i in range(min(len(value), 16)):
            found += _paths(value[i], (*prefix, i))
    return found


def _set(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return doc


NEST = "\x00nest:"  # a placeholder json.dumps can write; the nesting itself is spliced into the text


def _nested(depth: int, rng: random.Random) -> Any:
    """Nesting ``depth`` deep, written into the text after dumps (dumps itself would recurse that deep)."""
    return f"{NEST}{depth}:{rng.choice('[{')}"


def _copies(wanted: int, each: int, room: int) -> int:
    """``wanted`` copies of ``each`` bytes, or as many as fit in ``room``: libFuzzer cuts an input to its
    max_len anyway, so a mutator that built more would only measure its own memory."""
    return max(1, min(wanted, room // max(each, 1)))


def mutate_json_value(doc: Any, rng: random.Random, room: int = MAX_SIZE) -> Any:
    path = rng.choice(_paths(doc))
    kind = rng.randrange(8)
    if kind == 0:
        return _set(doc, path, _weird(rng))
    if kind == 1:
        return _set(doc, path, rng.choice(WEIRD_STRINGS))
    if kind == 2:
        return _set(doc, path, _nested(rng.choice([10, 1000, 5000, 100_000]), rng))
    if kind == 3 and path and isinstance(doc, (dict, list)):  # remove a field or an item
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif isinstance(parent, list) and parent:
            parent.pop(path[-1] if isinstance(path[-1], int) and path[-1] < len(parent) else 0)
        return doc
    if kind == 4:  # grow a list: many copies of one item
        item = rng.choice(WEIRD_STRINGS)
        return _set(doc, path, [item] * _copies(rng.choice([2, 1000, 100_000]), len(item) + 4, room))
    if kind == 5:
        return _set(doc, path, {"error": _weird(rng)} if rng.random() < 0.5 else {})
    if kind == 6:
        return _set(doc, path, rng.choice([10**18, -(10**18), 1.5, -0.0, 2**63]))
    return _set(doc, path, [_weird(rng) for _ in range(rng.randrange(1, 5))])


def _dumps(doc: Any, rng: random.Random) -> bytes:
    text = json.dumps(doc, ensure_ascii=False, allow_nan=True)
    while (at := text.find(json.dumps(NEST)[1:-1])) >= 0:  # "\u0000nest:<depth>:<bracket>"
        end = text.index('"', at)
        depth, bracket = text[at:end].rsplit(":", 2)[-2:]
        inner = ("[" * int(depth) + "]" * int(depth)) if bracket == "[" else ('{"a":' * int(depth) + "1" + "}" * int(depth))
        text = text[: at - 1] + inner + text[end + 1 :]
    if rng.random() < 0.5:
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text.encode("utf-8", "surrogatepass")


def json_document(data: bytes, seed: int, room: int = MAX_SIZE) -> bytes:
    """A map: one structural change somewhere in the document (the fuzz target gzips it)."""
    rng = random.Random(seed)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return _raw_json(rng)
    for _ in range(rng.choice([1, 1, 2, 3])):
        doc = mutate_json_value(doc, rng, room)
    return _dumps(doc, rng)


def json_lines(data: bytes, seed: int, room: int = MAX_SIZE) -> bytes:
    """JSON Lines: each line a document; one line changed, or added, or the file's lines multiplied."""
    rng = random.Random(seed)
    lines = data.split(b"\n") or [b"{}"]
    i = rng.randrange(len(lines))
    try:
        lines[i] = _dumps(mutate_json_value(json.loads(lines[i]), rng, room), rng)
    except (ValueError, RecursionError):
        lines[i] = _raw_json(rng)
    if rng.random() < 0.1:
        lines = lines * _copies(rng.choice([2, 100]), len(data) + 1, room)
    return b"\n".join(lines)


def _raw_json(rng: random.Random) -> bytes:
    return rng.choice([b"[" * 100_000, b"{\"a\":" * 50_000, b"1" * 100_000, b"\"\\ud800\"", b"{\"test\": \"\\u0000\"}",
                       b"[" + b"1," * 50_000 + b"1]"])


def text_recording(data: bytes, seed: int, room: int = MAX_SIZE) -> bytes:
    rng = random.Random(seed)
    lines = data.decode("utf-8", "replace").split("\n")
    kind = rng.randrange(5)
    if kind == 0:
        lines.append(f"# end records={'9' * rng.choice([20, 5000])} unique=1 dropped=0")
    elif kind == 1:
        lines.append(f"# dropped={'9' * rng.choice([19, 5000])}")
    elif kind == 2:
        lines.append("# test=" + rng.choice(WEIRD_STRINGS))
    elif kind == 3:
        lines.append("_Z" + "a" * rng.choice([100, 100_000]))
    else:
        lines = lines * _copies(rng.choice([2, 1000]), len(data) + 1, room)
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def build_ninja(data: bytes, seed: int, room: int = MAX_SIZE) -> bytes:
    rng = random.Random(seed)
    text = data.decode("utf-8", "surrogateescape")
    kind = rng.randrange(8)
    if kind == 0:  # a file that includes itself
        text += rng.choice(["include build.ninja\n", "subninja build.ninja\n", "include ./build.ninja\n"])
    elif kind == 1:  # deep or missing includes
        text += "include " + "sub/" * rng.choice([1, 50]) + "x.ninja\n"
    elif kind == 2:  # a very long line
        text += "build out: phony " + "a " * rng.choice([1000, 500_000]) + "\n"
    elif kind == 3:  # a statement continued thousands of times
        text += "build out: phony " + "a $\n " * rng.choice([100, 200_000]) + "b\n"
    elif kind == 4:  # runs of $ and escapes
        text += "build " + "$" * rng.choice([1, 2, 3, 10_001]) + ": " + rng.choice(["", "rule", "$:"]) + "\n"
    elif kind == 5:  # statements without parts
        text += rng.choice(["build\n", "build :\n", "build a:\n", "build : r\n", "  x = y\n", "include\n"])
    elif kind == 6:  # a compile statement with an odd rule name
        text += f"build a.o: CXX_COMPILER__{rng.choice(['.zz', '.2', 'x' * 5000, ''])}_Release a.cpp\n"
    else:
        text += "build cmake_object_order_depends_target_t: phony || " + "cmake_object_order_depends_target_t " * 3 + "\n"
    return text.encode("utf-8", "surrogateescape")


MUTATORS: dict[str, Callable[[bytes, int, int], bytes]] = {
    "map": json_document, "jsonl": json_lines, "text": text_recording, "build_ninja": build_ninja,
}
