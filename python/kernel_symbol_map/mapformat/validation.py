"""Version 1's rules, checked before any code touches a map: the one validator every command shares.

Every field a consumer reads is checked for its type and shape, and each
problem names the JSON path of the field (``objects[3].deps[7]: expected a
string``). The fields are declared once, below, as the JSON Schema shipped
beside this module declares them; optional fields are checked when present,
unknown ones are left alone (a newer writer may add more). Then the
fail-closed rules: an ``incomplete`` map says why and lists no objects; a
complete one has no ``errors`` and no object carrying an ``error``.

Hand-written rather than ``jsonschema``: the library takes seconds on a
vLLM-sized map (a million dep strings), and this runs on every ``select``.
``validate`` adds the schema check on top.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, repeat
from typing import Any

from . import digests as map_digests

VERSION = 1
MAX_PROBLEMS = 20  # stop collecting: a broken map's first problems are what a person reads
MAX_PATH = 4096  # characters in one path or name (PATH_MAX)


class Rule:
    """A field's rule in two halves. ``sound`` answers for a whole column of values at once (every
    object's ``source``, every dep of every object), at C speed where it can: a map that is well formed
    is checked in a few passes, whatever the shape of its records. ``explain`` walks a column that is
    not sound to name each problem with its JSON path; it finds one wherever ``sound`` is false."""

    def __init__(self, sound: Callable[[list[Any]], bool], explain: Callable[[Any, str, list[str]], None],
                 by_value: bool = False):
        self.sound, self.explain = sound, explain
        # Its answer for a column is its distinct values' answer, and no value of another type equals one it
        # takes (strings: no JSON number, boolean or null equals a string), so a list column may be checked
        # as the set of its items: a vLLM map's 4.5 million deps are 7,000 strings.
        self.by_value = by_value

    def check(self, value: Any, where: str, found: list[str]) -> None:
        if not self.sound([value]):
            self.explain(value, where, found)


def _fail(found: list[str], where: str, what: str) -> None:
    if len(found) < MAX_PROBLEMS:
        found.append(f"{where}: {what}")


def _of_type(kind: type, test: Callable[[list[Any]], bool], what: Callable[[Any], str | None]) -> Rule:
    """Values of exactly ``kind`` (JSON gives no subclasses) that pass ``test`` as a column."""
    def sound(values: list[Any]) -> bool:
        return set(map(type, values)) <= {kind} and test(values)

    def explain(value: Any, where: str, found: list[str]) -> None:
        problem = what(value)
        if problem:
            _fail(found, where, problem)
    return Rule(sound, explain, by_value=kind is str)


def _expected(kind: type, description: str) -> Callable[[Any], str | None]:
    return lambda value: None if type(value) is kind else f"expected {description}, not {_kind(value)}"


def _short_enough(values: list[str]) -> bool:
    return max(map(len, values), default=0) <= MAX_PATH


def _path(value: Any) -> str | None:
    if type(value) is not str:
        return f"expected a string, not {_kind(value)}"
    return f"a string of {len(value)} characters (at most {MAX_PATH})" if len(value) > MAX_PATH else None


STRING = _of_type(str, _short_enough, _path)  # a path or a name
TEXT = _of_type(str, lambda values: True, _expected(str, "a string"))  # a reason, a note: any length
BOOLEAN = _of_type(bool, lambda values: True, _expected(bool, "true or false"))


def _is_count(value: Any) -> bool:
    return type(value) in (int, float) and value >= 0 and value == value


COUNT = Rule(lambda values: all(map(_is_count, values)),
             lambda value, where, found: None if _is_count(value) else
             _fail(found, where, f"expected a count, not {_kind(value)}"))


def _list_of(item: Rule) -> Rule:
    def sound(values: list[Any]) -> bool:  # the items of every list of the column, as one column
        if not set(map(type, values)) <= {list}:
            return False
        if not item.by_value:
            return item.sound(list(chain.from_iterable(values)))
        try:
            return item.sound(list(set().union(*values)))  # each distinct item once
        except TypeError:  # an item that is a list or an object: no string
            return False

    def explain(value: Any, where: str, found: list[str]) -> None:
        if type(value) is not list:
            _fail(found, where, f"expected a list, not {_kind(value)}")
            return
        for i, v in enumerate(value):
            item.check(v, f"{where}[{i}]", found)
            if len(found) >= MAX_PROBLEMS:
                return
    return Rule(sound, explain)


def _one_of(*allowed: Any) -> Rule:
    def ok(value: Any) -> bool:  # by type too: true is not 1
        return any(type(value) is type(a) and value == a for a in allowed)

    return Rule(lambda values: all(map(ok, values)),
                lambda value, where, found: None if ok(value) else
                _fail(found, where, f"expected one of {', '.join(map(str, allowed))}, not {_show(value)}"))


_ABSENT = object()


def _record(required: dict[str, Rule], optional: dict[str, Rule] | None = None) -> Rule:
    optional = optional or {}

    def sound(values: list[Any]) -> bool:  # column by column: every record's "source", then "target"...
        if not set(map(type, values)) <= {dict}:
            return False
        n = len(values)
        for key, rule in required.items():
            column = list(map(dict.get, values, repeat(key, n), repeat(_ABSENT, n)))
            if not rule.sound(column):  # an absent field is no value any rule accepts
                return False
        for key in optional.keys() & set(chain.from_iterable(values)):
            column = [v for v in map(dict.get, values, repeat(key, n), repeat(_ABSENT, n)) if v is not _ABSENT]
            if not optional[key].sound(column):
                return False
        return True

    def explain(value: Any, where: str, found: list[str]) -> None:
        if type(value) is not dict:
            _fail(found, where, f"expected an object, not {_kind(value)}")
            return
        for key, rule in required.items():
            if key not in value:
                _fail(found, f"{where}.{key}" if where else key, "missing")
            else:
                rule.check(value[key], f"{where}.{key}" if where else key, found)
        for key, rule in optional.items():
            if key in value:
                rule.check(value[key], f"{where}.{key}" if where else key, found)
    return Rule(sound, explain)


def _mapping_of(item: Rule) -> Rule:
    def sound(values: list[Any]) -> bool:
        return set(map(type, values)) <= {dict} and item.sound(list(chain.from_iterable(map(dict.values, values))))

    def explain(value: Any, where: str, found: list[str]) -> None:
        if type(value) is not dict:
            _fail(found, where, f"expected an object, not {_kind(value)}")
            return
        for key, v in value.items():
            item.check(v, f"{where}.{key}", found)
    return Rule(sound, explain)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return "missing" if value is _ABSENT else names.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


STRINGS = _list_of(STRING)
# A kernel: a name, never empty (an empty string names no kernel; refused, the map is no evidence).
NAMES = _list_of(_of_type(str, lambda values: _short_enough(values) and all(values),
                          lambda value: _path(value) or (None if value else "an empty string is no kernel's name")))
ERROR = _record({"object": STRING, "source": STRING, "error": TEXT}, {"target": STRING})
MAX_BYTES = 1 << 62  # bytes of one image: any real one is far below; 1e400, 10.5 and 10**400 are not bytes


def _is_bytes(value: Any) -> bool:
    return type(value) is int and 0 <= value < MAX_BYTES


BYTES = Rule(lambda values: all(map(_is_bytes, values)),
             lambda value, where, found: None if _is_bytes(value) else
             _fail(found, where, f"expected a whole number of bytes, not {_show(value)}"))
# One device image's bytes per architecture, kernels' in the order of "symbols" (mapformat.sizes).
SIZES = _mapping_of(_record({"image": BYTES, "stored": BYTES},
                            {"ptx": BOOLEAN, "code": _list_of(BYTES), "owned": _list_of(BYTES)}))
# Device and host code digests, kernels' in the order of "symbols" (mapformat.digests).
COVERS = _record({}, {"host": _one_of(*map_digests.HOST_COVERAGE), "kernels": COUNT})
HOST_PARTS = _record({"functions": _mapping_of(STRING), "init": NAMES, "data": STRING}, {"unseen": NAMES})
DIGESTS = _record({}, {"covers": COVERS, "host": STRING, "code": _mapping_of(_list_of(STRING)), "whole": STRINGS,
                       "ptx": _mapping_of(STRING), "relocatable": _mapping_of(STRING), "host_parts": HOST_PARTS})
OBJECT = _record(
    {"source": STRING, "target": STRING, "object": STRING, "device": BOOLEAN, "symbols": NAMES,
     "deps": STRINGS},
    {"error": TEXT, "archs": STRINGS, "device_link": BOOLEAN, "unity_sources": STRINGS,
     "compiled_from": STRING, "deps_from": _one_of("cmake-scan", "device-scan-deps",
                                                   "device-preprocessor"), "sizes": SIZES,
     "rule_inputs": STRINGS, "configure_generated": BOOLEAN, "digests": DIGESTS},
)
UNMAPPED = _record({"target": STRING, "outputs": STRINGS, "sources": STRINGS, "reason": TEXT})
MAP = _record(
    {"version": _one_of(VERSION), "commit": STRING, "cuda": STRING, "generated_at": STRING,
     "build_dirs": STRINGS, "incomplete": BOOLEAN, "errors": _list_of(ERROR), "objects": _list_of(OBJECT),
     "stats": _mapping_of(COUNT)},
    {"reason": TEXT, "backend": _one_of("cuda", "rocm", "mixed"), "generator": STRING, "cmake_version": STRING,
     "tool": STRING, "reader": _one_of("native", "cuobjdump"), "pairing": STRING, "deps_from": STRING,
     "notes": _list_of(TEXT), "config": STRING, "only_targets": STRINGS, "all_targets": STRINGS,
     "excluded_targets": STRINGS, "configure_inputs": STRINGS, "third_party": STRINGS,
     "target_links": _mapping_of(STRINGS), "artefacts": _mapping_of(STRINGS), "unmapped_targets": _list_of(UNMAPPED),
     "tracked_files_unknown": BOOLEAN, "dirty": STRINGS, "digests": _one_of(1, 2, 3, 4, 5),
     "toolchain": _mapping_of(STRING)},
)


def problems(document: Any) -> list[str]:
    """Every way ``document`` breaks version 1's rules (the first :data:`MAX_PROBLEMS`), each with its path."""
    if not isinstance(document, dict):
        return [f"the map is {_kind(document)}, not a JSON object"]
    if type(document.get("version")) is not int or document["version"] != VERSION:  # true is not 1
        return [f"version: unknown map version {_show(document.get('version'))} (expected {VERSION})"]
    found: list[str] = []
    MAP.check(document, "", found)
    return found or fail_closed_problems(document)


def fail_closed_problems(document: dict[str, Any]) -> list[str]:
    """The schema's conditional rules: an incomplete map says why and lists no objects; a complete
    one has no errors and no object with an error; an object with code (kernels, or any but a precompiled
    header) has digests that say what they cover, never ``{}``. ``KernelMap`` holds in-memory documents to them too."""
    found = []
    objects = document.get("objects") or []
    if document.get("incomplete"):
        if not isinstance(document.get("reason"), str):
            found.append("reason: an incomplete map must say why")
        if objects:
            found.append(f"objects: an incomplete map must list no objects, this one lists {len(objects)}")
    else:
        if document.get("errors"):
            found.append(f"errors: a complete map must have none, this one has {len(document['errors'])}")
        with_error = [i for i, o in enumerate(objects) if isinstance(o, dict) and "error" in o]
        if with_error:
            found.append(f"objects[{with_error[0]}].error: a complete map must have no object with an error")
    # "digests": {} says nothing of what it covers: only a precompiled header's (of older writers) may be
    empty = [i for i, o in enumerate(objects) if isinstance(o, dict) and o.get("digests") == {} and
             (o.get("symbols") or not str(o.get("object", "")).endswith(map_digests.PRECOMPILED_HEADERS))]
    if empty:
        found.append(f"objects[{empty[0]}].digests: an object with code must say what its digests cover, not {{}}")
    return found
