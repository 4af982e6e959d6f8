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
from typing import Any

VERSION = 1
MAX_PROBLEMS = 20  # stop collecting: a broken map's first problems are what a person reads
MAX_PATH = 4096  # characters in one path or name (PATH_MAX)

Check = Callable[[Any, str, list[str]], None]


def _fail(found: list[str], where: str, what: str) -> None:
    if len(found) < MAX_PROBLEMS:
        found.append(f"{where}: {what}")


def _string(value: Any, where: str, found: list[str]) -> None:
    if not isinstance(value, str):
        _fail(found, where, f"expected a string, not {_kind(value)}")
    elif len(value) > MAX_PATH:
        _fail(found, where, f"a string of {len(value)} characters (at most {MAX_PATH})")


def _text(value: Any, where: str, found: list[str]) -> None:
    """A free-form string (a reason, a note): any length the map's size allows."""
    if not isinstance(value, str):
        _fail(found, where, f"expected a string, not {_kind(value)}")


def _boolean(value: Any, where: str, found: list[str]) -> None:
    if not isinstance(value, bool):
        _fail(found, where, f"expected true or false, not {_kind(value)}")


def _count(value: Any, where: str, found: list[str]) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        _fail(found, where, f"expected a count, not {_kind(value)}")


def _list_of(item: Check) -> Check:
    def check(value: Any, where: str, found: list[str]) -> None:
        if not isinstance(value, list):
            _fail(found, where, f"expected a list, not {_kind(value)}")
            return
        if item is _string:  # the hot case (deps, symbols): one C-speed pass when all is well
            if all(type(v) is str and len(v) <= MAX_PATH for v in value):
                return
        for i, v in enumerate(value):
            item(v, f"{where}[{i}]", found)
            if len(found) >= MAX_PROBLEMS:
                return
    return check


def _one_of(*allowed: str) -> Check:
    def check(value: Any, where: str, found: list[str]) -> None:
        if value not in allowed:
            _fail(found, where, f"expected one of {', '.join(allowed)}, not {_show(value)}")
    return check


def _record(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    def check(value: Any, where: str, found: list[str]) -> None:
        if not isinstance(value, dict):
            _fail(found, where, f"expected an object, not {_kind(value)}")
            return
        for key, item in required.items():
            if key not in value:
                _fail(found, f"{where}.{key}" if where else key, "missing")
            else:
                item(value[key], f"{where}.{key}" if where else key, found)
        for key, item in (optional or {}).items():
            if key in value:
                item(value[key], f"{where}.{key}" if where else key, found)
    return check


def _mapping_of(item: Check) -> Check:
    def check(value: Any, where: str, found: list[str]) -> None:
        if not isinstance(value, dict):
            _fail(found, where, f"expected an object, not {_kind(value)}")
            return
        for key, v in value.items():
            item(v, f"{where}.{key}", found)
    return check


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_STRINGS = _list_of(_string)
ERROR = _record({"object": _string, "source": _string, "error": _text}, {"target": _string})
OBJECT = _record(
    {"source": _string, "target": _string, "object": _string, "device": _boolean, "symbols": _STRINGS,
     "deps": _STRINGS},
    {"error": _text, "archs": _STRINGS, "device_link": _boolean, "unity_sources": _STRINGS,
     "compiled_from": _string, "deps_from": _one_of("cmake-scan", "device-preprocessor")},
)
UNMAPPED = _record({"target": _string, "outputs": _STRINGS, "sources": _STRINGS, "reason": _text})
MAP = _record(
    {"version": _one_of(VERSION), "commit": _string, "cuda": _string, "generated_at": _string,
     "build_dirs": _STRINGS, "incomplete": _boolean, "errors": _list_of(ERROR), "objects": _list_of(OBJECT),
     "stats": _mapping_of(_count)},
    {"reason": _text, "backend": _one_of("cuda", "rocm", "mixed"), "generator": _string, "cmake_version": _string,
     "tool": _string, "reader": _one_of("native", "cuobjdump"), "pairing": _string, "deps_from": _string,
     "notes": _list_of(_text), "config": _string, "only_targets": _STRINGS, "all_targets": _STRINGS,
     "excluded_targets": _STRINGS, "configure_inputs": _STRINGS, "third_party": _STRINGS,
     "target_links": _mapping_of(_STRINGS), "unmapped_targets": _list_of(UNMAPPED)},
)


def problems(document: Any) -> list[str]:
    """Every way ``document`` breaks version 1's rules (the first :data:`MAX_PROBLEMS`), each with its path."""
    if not isinstance(document, dict):
        return [f"the map is {_kind(document)}, not a JSON object"]
    if document.get("version") != VERSION:
        return [f"version: unknown map version {_show(document.get('version'))} (expected {VERSION})"]
    found: list[str] = []
    MAP(document, "", found)
    return found or fail_closed_problems(document)


def fail_closed_problems(document: dict[str, Any]) -> list[str]:
    """The schema's conditional rules: an incomplete map says why and lists no objects; a complete
    one has no errors and no object with an error. ``KernelMap`` holds in-memory documents to them too."""
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
    return found
