"""``[tool.kernel-symbol-map]`` in the project's ``pyproject.toml``: what ``select`` takes by default.

Where pytest reads ``[tool.pytest.ini_options]`` and testmon its own table,
a project keeps its maps, recordings, rules and external kernels here, once,
instead of in every CI step's flags::

    [tool.kernel-symbol-map]
    map = ["dist/"]                      # --map (a string or a list)
    base-map = ["base/"]                 # --base-map
    recordings = ["ci/kernels/"]         # --recordings
    rules = "ci/kernel-rules.json"       # --rules
    external-kernels = ["ncclDevKernel_.*"]  # --external-kernels
    jit-decorators = ["mylib.jit:compile"]  # the recorder's: decorators that compile from source text
    jit-sources = ["csrc/jit/**"]        # --jit-sources: files the package compiles at run time

A flag given on the command line replaces its key. Paths are relative to
the folder of the ``pyproject.toml``; the file is the first one found from
the current folder up to the project's top. A key this module does not know,
or a value of the wrong type, is a :class:`ConfigError`: a misspelt
``recording`` must not quietly select from no recordings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import KernelSymbolMapError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TABLE = "kernel-symbol-map"
PATH_LISTS = ("map", "base-map", "recordings")
KEYS = (*PATH_LISTS, "rules", "external-kernels", "jit-decorators", "jit-sources")


class ConfigError(KernelSymbolMapError):
    """``[tool.kernel-symbol-map]`` is not what this version reads."""


@dataclass(frozen=True)
class Config:
    """The table's values, paths made absolute; ``source`` is the file they came from ("" for none)."""

    source: str = ""
    # map, base-map, recordings, external-kernels, jit-decorators, jit-sources
    lists: dict[str, list[str]] = field(default_factory=dict)
    rules: str | None = None

    def get(self, key: str) -> list[str]:
        return self.lists.get(key, [])


def find(start: Path, top: Path) -> Path | None:
    """The first ``pyproject.toml`` from ``start`` up to ``top`` (both included), if any; none when
    ``start`` is outside ``top``: another project's table must not decide this one's tests."""
    here = start.resolve()
    top = top.resolve()
    if here != top and top not in here.parents:
        return None
    while True:
        candidate = here / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if here == top or here.parent == here or top not in here.parents:
            return None
        here = here.parent


def load(start: Path, top: Path) -> Config:
    """The table of the ``pyproject.toml`` :func:`find` finds; an empty :class:`Config` when there is none."""
    path = find(start, top)
    if path is None:
        return Config()
    tools = read(path).get("tool", {})
    if not isinstance(tools, dict):
        raise ConfigError(f"{path}: [tool] must be a table")
    table = tools.get(TABLE)
    if table is None:
        return Config()
    return parse(table, path)


def read(path: Path) -> dict[str, Any]:
    """The document of the ``pyproject.toml`` at ``path``."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: not readable TOML ({e})") from None


def parse(table: Any, path: Path) -> Config:
    where = f"{path}: [tool.{TABLE}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], KEYS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"the keys are {', '.join(KEYS)}"
        raise ConfigError(f"{where} has no key {unknown[0]!r} ({hint})")
    lists: dict[str, list[str]] = {}
    for key in (*PATH_LISTS, "external-kernels", "jit-sources"):
        if key not in table:
            continue
        value = table[key]
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            raise ConfigError(f"{where}: {key} must be a string or a non-empty list of strings")
        lists[key] = [_path(v, path) for v in values] if key in PATH_LISTS else list(values)
    decorators = table.get("jit-decorators", [])  # read by the recorder (recorder/jit.py); checked here too
    if not isinstance(decorators, list) or not all(isinstance(d, str) and ":" in d.strip(":") for d in decorators):
        raise ConfigError(f"{where}: jit-decorators must be a list of 'module:name' strings")
    if decorators:
        lists["jit-decorators"] = list(decorators)
    rules = table.get("rules")
    if rules is not None and (not isinstance(rules, str) or not rules):
        raise ConfigError(f"{where}: rules must be a path (a string)")
    return Config(str(path), lists, _path(rules, path) if rules else None)


def _path(value: str, pyproject: Path) -> str:
    """A path of the table, from the pyproject's folder; a package's name (no separator, no such file)
    stays a name, as ``--map my_pkg`` does."""
    candidate = pyproject.parent / value
    if value.isidentifier() and not candidate.exists():
        return value
    return str(candidate)
