"""The JSON Schema of version 1, shipped beside the package, and a map checked against it (``validate``)."""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "kernel_symbol_map.v1.schema.json"


def schema() -> dict[str, Any]:
    """The JSON Schema shipped beside this module."""
    import importlib.resources  # here: only validate reads the schema

    return json.loads((importlib.resources.files(__package__ or __name__.rpartition('.')[0]) / SCHEMA).read_text())


def schema_problems(document: Any) -> list[str]:
    """Every JSON Schema violation, as ``/path: message``; slower than :func:`problems`, so for ``validate``.

    The schema asks only that each item of an object's string lists be a
    string (a kernel's name, a non-empty one), so a map whose lists are all
    such strings, checked here at C speed, is valid exactly when it is with
    those lists empty: jsonschema then walks it so, not a vLLM map's million
    deps one by one. A map that is not valid is walked whole, for
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
