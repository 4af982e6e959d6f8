"""The subcommands: each one's name, module and one-line summary, declared once.

The top-level parser lists every command with its summary, but imports and
builds only the parser of the command that runs (``--version`` and
``--help`` import no command module at all, and ``select --help`` only
``select``'s). Each module's ``populate_parser`` takes its summary from here (:func:`summary_of`).
"""

from __future__ import annotations

SCHEMA_FILE = "kernel_symbol_map.v1.schema.json"  # mapformat.SCHEMA, named here so that help imports no map code

# name -> (module in this package, one-line summary), in the order --help lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "symbols": ("symbols", "list kernel entry symbols of objects, archives, libraries, fatbins and cubins"),
    "build": ("build", "write the kernel symbol map of CMake build trees"),
    "show": ("show", "summarise a map: per target and per source"),
    "query": ("query", "a file's kernels, or a kernel's sources, with the reasons"),
    "select": ("select", "choose the tests a change needs, from maps and kernel recordings"),
    "record": ("record", "run a command and record the kernels it launches (CUPTI), for select"),
    "evaluate": ("evaluate", "shadow mode: compare a selection with a full run's JUnit results"),
    "merge": ("merge", "merge maps of one commit (shards) into one; any incomplete input makes it incomplete"),
    "diff": ("diffmaps", "kernels added, removed, moved or changed between two maps"),
    "validate": ("validate", f"check maps against the shipped JSON Schema ({SCHEMA_FILE})"),
    "size": ("size", "bytes of device code per source, target, kernel, family or architecture; a diff of two builds"),
    "doctor": ("doctor", "in a project folder: whether a wheel build will emit a map, and each fix"),
    "demo": ("demo", "pip-wheel the bundled example and show the kernel symbol map inside its wheel"),
}


def summary_of(name: str) -> str:
    return COMMANDS[name][1]
