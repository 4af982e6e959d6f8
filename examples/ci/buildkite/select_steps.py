#!/usr/bin/env python3
"""Buildkite's dynamic pipeline for kernel-symbol-map: which of the test steps a change needs.

    python3 select_steps.py record STEPS.json                 # main: every step, each recorded
    python3 select_steps.py select STEPS.json SELECTION.json  # a PR: the steps the selection keeps
    python3 select_steps.py shadow STEPS.json                 # shadow mode: every step, with JUnit

prints a pipeline (JSON, which ``buildkite-agent pipeline upload`` takes).
STEPS.json is your pipeline's test steps; a step that should ever be skipped
needs a ``key``, and its recording is named after it (``record --step KEY``).

* ``record``: each keyed step runs under ``kernel-symbol-map record --step KEY``,
  and uploads ``recordings/KEY.jsonl`` (every kernel the step and its Python
  children launched) as an artifact of main's build; a last step keeps the
  wheel and the recordings in ``$KSM_EVIDENCE`` for the pull requests.
* ``select``: drops exactly the steps whose key the selection (``select --json``)
  lists in ``skip``, and keeps every other step: a step no recording names,
  one without a key, any doubt at all. A missing or unreadable selection
  keeps everything.
* ``shadow``: every step runs, writing ``junit/KEY.xml`` (pytest's
  ``--junitxml``), and a last step compares what the selection would have
  skipped with what failed (``kernel-symbol-map evaluate``).

Standard library only: it runs on the agent before anything is installed.
"""

from __future__ import annotations

import json
import shlex
import sys

SELECTION_SCHEMA = "kernel-symbol-map/selection/1"


def load_skip(path: str) -> tuple[set[str], str]:
    """The step keys to drop, and why; nothing when the selection cannot be trusted."""
    try:
        with open(path) as f:
            selection = json.load(f)
    except (OSError, ValueError) as e:
        return set(), f"{path}: unreadable ({e}); every step runs"
    if not isinstance(selection, dict) or selection.get("schema") != SELECTION_SCHEMA:
        return set(), f"{path}: not a {SELECTION_SCHEMA} document; every step runs"
    skip = selection.get("skip")
    if not isinstance(skip, list) or not all(isinstance(s, str) for s in skip):
        return set(), f"{path}: no list of steps to skip; every step runs"
    return set(skip), selection.get("summary", "")


def recorded(step: dict) -> dict:
    key = step["key"]
    command = step["command"] if isinstance(step["command"], str) else " && ".join(step["command"])
    wrapped = dict(step)
    wrapped["command"] = (f"kernel-symbol-map record --step {shlex.quote(key)} --out recordings -- "
                          f"bash -c {shlex.quote(command)}")
    wrapped["artifact_paths"] = [f"recordings/{key}.jsonl"]
    return wrapped


def shadowed(step: dict) -> dict:
    key = step["key"]
    wrapped = dict(step)
    wrapped["command"] = f"{step['command']} --junitxml=junit/{key}.xml"
    wrapped["artifact_paths"] = [f"junit/{key}.xml"]
    return wrapped


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("record", "select", "shadow") or (argv[0] == "select") != (len(argv) == 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        steps = json.load(f)["steps"]
    keyed = [s for s in steps if isinstance(s, dict) and "key" in s and "command" in s]
    if argv[0] == "record":
        out = [recorded(s) if s in keyed else s for s in steps]
        out += ["wait", {"key": "kernel-symbol-map-keep", "label": ":floppy_disk: keep main's map and recordings",
                         "allow_dependency_failure": True,  # a failed step's recording says so itself
                         "command": "buildkite-agent artifact download 'recordings/*.jsonl' . && "
                                    "buildkite-agent artifact download 'dist/*.whl' . && "
                                    'mkdir -p "$KSM_EVIDENCE" && rm -rf "$KSM_EVIDENCE/recordings" '
                                    '"$KSM_EVIDENCE/dist" && cp -r recordings dist "$KSM_EVIDENCE/"'}]
    elif argv[0] == "shadow":
        out = [shadowed(s) if s in keyed else s for s in steps]
        junit = " ".join(f"--junit-step {s['key']}=junit/{s['key']}.xml" for s in keyed)
        out += ["wait", {"key": "kernel-symbol-map-evaluate", "label": ":mag: what select would have skipped",
                         "command": "buildkite-agent artifact download 'junit/*.xml' . && "
                                    "buildkite-agent artifact download selection.json . && "
                                    f"kernel-symbol-map evaluate --selection selection.json {junit} "
                                    "--markdown evaluation.md",
                         "artifact_paths": ["evaluation.md"], "soft_fail": True}]
    else:
        skip, why = load_skip(argv[2])
        out = [s for s in steps if not (isinstance(s, dict) and s.get("key") in skip)]
        print(f"kernel-symbol-map: {len(steps) - len(out)} of {len(steps)} steps skipped ({why})", file=sys.stderr)
    json.dump({"steps": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
