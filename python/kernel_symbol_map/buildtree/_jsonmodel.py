"""Plain frozen dataclasses from JSON, tolerant of what newer producers add.

Field names are the JSON keys. Unknown keys are ignored, missing fields take
their defaults, and a value of the wrong type is a :class:`BuildTreeError`
naming the file and the key, never a ``KeyError`` or ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import lru_cache
from typing import Any, TypeVar

from ..errors import BuildTreeError

T = TypeVar("T")


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def convert(cls: type[T], data: Any, where: str) -> T:
    """``cls`` built from ``data``; ``where`` names the file (and key path) for errors."""
    if not isinstance(data, dict):
        raise BuildTreeError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _value(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise BuildTreeError(f"{where}: missing required key {f.name!r}")
    return cls(**kwargs)


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _value(options[0], value, where)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise BuildTreeError(f"{where}: expected a list")
        (item,) = typing.get_args(hint)[:1]
        return tuple(_value(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise BuildTreeError(f"{where}: expected an object")
        return dict(value)
    if dataclasses.is_dataclass(hint):
        return convert(hint, value, where)  # type: ignore[arg-type]
    if hint is Any:
        return value
    if hint is int and isinstance(value, bool) or not isinstance(value, hint):
        raise BuildTreeError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
    return value
