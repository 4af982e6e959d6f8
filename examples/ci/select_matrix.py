#!/usr/bin/env python3
"""GitHub Actions' test matrix for kernel-symbol-map: which suites a change needs (github-actions-after-build.yml).

    python3 select_matrix.py all SUITES.json                     # main: every suite, each recorded
    python3 select_matrix.py select SUITES.json SELECTION.json  # a PR: the suites the selection keeps

prints one line of JSON, ``{"include": [{"key": KEY, "command": COMMAND}, ...]}``,
for ``strategy.matrix: ${{ fromJSON(...) }}``. SUITES.json is
``{"suites": [{"key": KEY, "command": COMMAND}, ...]}``; a suite's recording
is named after its key (``kernel-symbol-map record --step KEY``), so ``select``
decides each suite as one test.

* ``all``: every suite.
* ``select``: every suite except those whose key the selection (``select
  --json``, in either mode) lists in ``skip``: a suite no recording names, any
  doubt at all, runs. A missing or unreadable selection, or one that is not
  the shape ``select --json`` writes, keeps every suite and says so (the
  checks are buildkite/select_steps.py's). Every suite skipped gives
  ``{"include": []}``: GitHub refuses an empty matrix, so the workflow skips
  its test job then.

A SUITES.json that cannot be read as suites is one ``ERROR`` line and exit 2.
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "buildkite"))
from select_steps import KEY, _load, load_skip  # noqa: E402


class SuitesError(Exception):
    """SUITES.json is not a list of suites with a key and a command each."""


def read_suites(path: str) -> list[dict[str, str]]:
    try:
        document: Any = _load(path)
    except (OSError, ValueError) as e:
        raise SuitesError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e})") from None
    suites = document.get("suites") if isinstance(document, dict) else None
    if not isinstance(suites, list):
        raise SuitesError(f'{path}: no "suites" list')
    seen: set[str] = set()
    for at, suite in enumerate(suites):
        if not isinstance(suite, dict) or set(suite) != {"key", "command"}:
            raise SuitesError(f'{path}: suites[{at}] is not {{"key", "command"}}')
        key, command = suite["key"], suite["command"]
        if not isinstance(key, str) or not KEY.fullmatch(key) or key in seen:
            raise SuitesError(f"{path}: suites[{at}] has key {key!r}: a key names a recording (letters, digits "
                              "and _ - : . (not first)), once")
        if not isinstance(command, str) or not command.strip():
            raise SuitesError(f"{path}: suites[{at}]: command is not a command")
        seen.add(key)
    return suites


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("all", "select") or (argv[0] == "select") != (len(argv) == 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        suites = read_suites(argv[1])
    except SuitesError as e:
        print(f"ERROR {e}", file=sys.stderr)
        return 2
    if argv[0] == "select":
        skip, why = load_skip(argv[2])
        kept = [s for s in suites if s["key"] not in skip]
        print(f"kernel-symbol-map: {len(suites) - len(kept)} of {len(suites)} suites skipped ({why})",
              file=sys.stderr)
        suites = kept
    print(json.dumps({"include": suites}, separators=(",", ":")))  # one line, for $GITHUB_OUTPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
