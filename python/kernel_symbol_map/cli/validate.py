"""``validate``: check maps against version 1's rules and the JSON Schema shipped in the package.

The rules are :func:`mapformat.problems`, the same validator ``load`` and
``select`` use; the JSON Schema check adds the optional fields' types.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import mapformat
from ._output import EXIT_INPUT, EXIT_OK, error


def problems(document: object) -> list[str]:
    """Every problem of ``document``: version 1's rules first, then what only the schema catches."""
    found = mapformat.problems(document)
    return found + ([] if found else mapformat.schema_problems(document))


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help=f"check maps against the shipped JSON Schema ({mapformat.SCHEMA})",
                       allow_abbrev=False)
    p.add_argument("maps", nargs="+", type=Path, metavar="MAP")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.maps:
        document = mapformat.decode(path)
        found = problems(document)
        if found:
            bad += 1
            error(f"{path}: {found[0]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
        else:
            print(f"{path}: valid (version {document.get('version')}, {len(document.get('objects', []))} objects)")
    return EXIT_INPUT if bad else EXIT_OK
