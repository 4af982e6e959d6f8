"""``validate``: check maps against version 1's rules and the JSON Schema shipped in the package.

The rules are :func:`mapformat.problems`, the same validator ``load`` and
``select`` use; the JSON Schema check adds the optional fields' types.
"""

from __future__ import annotations

import argparse

from .. import mapformat
from ..errors import MapError
from ._commands import SCHEMA_FILE, summary_of
from ._output import EXIT_INPUT, EXIT_OK, error, plural, write_json

JSON_SCHEMA = "kernel-symbol-map/validate/1"


def problems(document: object) -> list[str]:
    """Every problem of ``document``: version 1's rules first, then what only the schema catches."""
    found = mapformat.problems(document)
    return found + ([] if found else mapformat.schema_problems(document))


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "validate", help=summary_of("validate"),
        description="Check each map against format version 1's rules (the validator every command uses) and "
        f"the JSON Schema shipped in the package ({SCHEMA_FILE}). Exit 1 when any map is invalid.",
        allow_abbrev=False,
    )
    p.add_argument("maps", nargs="+", metavar="MAP", help="map file, wheel, folder holding one, or installed package")
    p.add_argument("--json", action="store_true", help=f"one record per map ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer.maps.kernelmap import read_document

    records = []
    for source in args.maps:
        try:
            document, where = read_document(source, validated=False)
            found = problems(document)
        except MapError as e:
            where, document, found = source, None, [str(e)]
        objects = len(document.get("objects", [])) if isinstance(document, dict) and \
            isinstance(document.get("objects"), list) else 0
        records.append({"map": where, "valid": not found, "problems": found, "objects": objects})
    if args.json:
        write_json(JSON_SCHEMA, {"maps": records})
    for r in records:
        if r["problems"]:
            more = f" (and {len(r['problems']) - 1} more)" if len(r["problems"]) > 1 else ""
            first = r["problems"][0]
            error(first + more if first.startswith(r["map"]) else f"{r['map']}: {first}{more}")
        elif not args.json:
            print(f"{r['map']}: valid (version {mapformat.VERSION}, {plural(r['objects'], 'object')})")
    return EXIT_INPUT if any(r["problems"] for r in records) else EXIT_OK
