"""``validate``: check maps against the JSON Schema shipped in the package."""

from __future__ import annotations

import argparse
import gzip
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import MapError
from ._output import EXIT_INPUT, EXIT_OK, error

SCHEMA = "kernel_symbol_map.v1.schema.json"


def schema() -> dict[str, Any]:
    return json.loads((files("kernel_symbol_map.mapformat") / SCHEMA).read_text())


def problems(document: Any) -> list[str]:
    """Every schema violation, as ``path: message``."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help=f"check maps against the shipped JSON Schema ({SCHEMA})", allow_abbrev=False)
    p.add_argument("maps", nargs="+", type=Path, metavar="MAP")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.maps:
        try:
            document = json.loads(gzip.decompress(path.read_bytes()))
        except OSError as e:
            raise MapError(f"{path}: {getattr(e, 'strerror', None) or e}") from None
        except (EOFError, ValueError) as e:
            raise MapError(f"{path}: not a gzipped JSON map ({e})") from None
        found = problems(document)
        if found:
            bad += 1
            error(f"{path}: {found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
        else:
            print(f"{path}: valid (version {document.get('version')}, {len(document.get('objects', []))} objects)")
    return EXIT_INPUT if bad else EXIT_OK
