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
  children launched) as an artifact of main's build; a step with
  ``parallelism: N`` records each shard to ``recordings/KEY.<job>.jsonl``
  (``$BUILDKITE_PARALLEL_JOB``), and ``select`` unites them. A last step keeps
  the wheel and the recordings in ``$KSM_EVIDENCE`` for the pull requests;
  a sharded step with any shard's recording missing keeps none, so it runs.
* ``select``: drops exactly the keyed steps whose key the selection
  (``select --json``) lists in ``skip``, and keeps every other step: a step no
  recording names, one without a key, any doubt at all. A missing or
  unreadable selection, or one that is not the shape ``select --json``
  writes, keeps everything (and says so): it never blocks a pull request.
* ``shadow``: every step runs, writing ``junit/KEY.xml`` (pytest's
  ``--junitxml``; ``KEY.<job>.xml`` per shard; ``KEY[.<job>].<i>.xml`` for
  the i-th command of a list that runs pytest), and a last step compares
  what the selection would have skipped with what failed
  (``kernel-symbol-map evaluate``, given every one of those files).

A STEPS.json that cannot be read as steps is one ``ERROR`` line and exit 2:
there is no pipeline to upload. Standard library only: it runs on the agent
before anything is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from typing import Any

SELECTION_SCHEMA = "kernel-symbol-map/selection/1"
# Buildkite interpolates $VARS when the pipeline is uploaded; $$ leaves a $ for the job's shell.
SHARD = "$$BUILDKITE_PARALLEL_JOB"
CHECKOUT = "$$BUILDKITE_BUILD_CHECKOUT_PATH"
KEY = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9_:.-]*")  # a file name, and a word the shell leaves alone


class StepsError(Exception):
    """STEPS.json is not a list of Buildkite steps this script can wrap."""


def _load(path: str) -> Any:
    """A JSON document, or ValueError/OSError with a message people can read."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def load_skip(path: str) -> tuple[set[str], str]:
    """The step keys to drop, and why; nothing when the selection cannot be trusted."""
    try:
        selection = _load(path)
    except (OSError, ValueError) as e:
        return set(), f"{path}: unreadable ({getattr(e, 'strerror', None) or e}); every step runs"
    problem = _not_a_selection(selection)
    if problem:
        return set(), f"{path}: not a {SELECTION_SCHEMA} document ({problem}); every step runs"
    summary = selection.get("summary")
    return set(selection["skip"]), summary if isinstance(summary, str) else ""


def _not_a_selection(selection: Any) -> str:
    """What keeps ``selection`` from being ``select --json``'s output, or ``""``."""
    if not isinstance(selection, dict) or selection.get("schema") != SELECTION_SCHEMA:
        return "no such schema"
    decisions = selection.get("decisions")
    if not isinstance(decisions, list) or not all(
            isinstance(d, dict) and isinstance(d.get("test"), str) and isinstance(d.get("run"), bool)
            for d in decisions):
        return '"decisions" is not a list of {"test", "run"} decisions'
    for key, run in (("skip", False), ("run", True)):  # both are read off the decisions: they must agree
        listed = selection.get(key)
        if not isinstance(listed, list) or listed != [d["test"] for d in decisions if d["run"] is run]:
            return f'"{key}" is not the list of the decisions that {"" if run else "do not "}run'
    return ""


def _commands(step: dict) -> tuple[str, list[str]]:
    """The field that holds a step's command(s) (Buildkite takes either), and them as a list."""
    field = "command" if "command" in step else "commands"
    value = step[field]
    if isinstance(value, str):
        return field, [value]
    if isinstance(value, list) and value and all(isinstance(c, str) for c in value):
        return field, value
    raise StepsError(f"step {step['key']!r}: {field} is neither a string nor a list of strings")


def _shards(step: dict) -> int:
    n = step.get("parallelism", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise StepsError(f"step {step['key']!r}: parallelism {n!r} is not a positive whole number")
    return n


def read_steps(path: str) -> tuple[list[Any], list[dict]]:
    """Every step of STEPS.json, and the keyed ones (those ``record`` wraps and ``select`` may drop)."""
    try:
        document = _load(path)
    except (OSError, ValueError) as e:
        raise StepsError(f"{path}: unreadable ({getattr(e, 'strerror', None) or e})") from None
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        raise StepsError(f'{path}: not a pipeline (no "steps" list)')
    keyed = []
    for at, step in enumerate(steps):
        if isinstance(step, str):  # "wait", "block"
            continue
        if not isinstance(step, dict):
            raise StepsError(f"{path}: steps[{at}] is neither a step nor a string")
        if "key" in step and ("command" in step or "commands" in step):
            key = step["key"]
            if not isinstance(key, str) or not KEY.fullmatch(key):
                raise StepsError(f"{path}: steps[{at}] has key {key!r}; a key that names a recording is letters, "
                                 "digits and _ - : . (not first)")
            try:
                _commands(step)
                _shards(step)
            except StepsError as e:
                raise StepsError(f"{path}: {e}") from None
            keyed.append(step)
    return steps, keyed


def recorded(step: dict) -> dict:
    key = step["key"]
    field, commands = _commands(step)
    wrapped = dict(step) if field == "command" else {k: v for k, v in step.items() if k != field}
    run = f"bash -c {shlex.quote(' && '.join(commands))}"
    if _shards(step) == 1:
        wrapped["command"] = f"kernel-symbol-map record --step {key} --out recordings -- {run}"
        wrapped["artifact_paths"] = [f"recordings/{key}.jsonl"]
        return wrapped
    # Every shard records the same step into a file of its own; select unites them.
    folder = f"recordings/{key}.{SHARD}"
    wrapped["command"] = (f"status=0; kernel-symbol-map record --step {key} --out {folder} -- {run} || status=$$?; "
                          f"mv {folder}/{key}.jsonl {folder}.jsonl && rmdir {folder}; exit $$status")
    wrapped["artifact_paths"] = [f"recordings/{key}.*.jsonl"]
    return wrapped


def _pytest_runs(command: str) -> int:
    """How many times ``command`` starts pytest as a command (``pytest``, ``python -m pytest``, ``X=1 pytest``)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return 0
    runs, at = 0, 0
    while at < len(tokens):
        while at < len(tokens) and "=" in tokens[at] and not tokens[at].startswith("="):
            at += 1  # VAR=value before the command
        words = tokens[at:at + 3]
        name = words[0].rsplit("/", 1)[-1] if words else ""
        if name in ("pytest", "py.test") or (name.startswith("python") and words[1:3] == ["-m", "pytest"]):
            runs += 1
        while at < len(tokens) and tokens[at] not in ("&&", "||", ";", "|", "(", ")", "&"):
            at += 1
        at += 1
    return runs


def shadowed(step: dict) -> tuple[dict, list[str]]:
    """``step`` writing JUnit XML from each pytest it runs, and the files its shards write, all of them."""
    key = step["key"]
    field, commands = _commands(step)
    shards = _shards(step)
    runs = [_pytest_runs(c) for c in commands]
    if any(n > 1 for n in runs):
        raise StepsError(f"step {key!r} runs pytest more than once in one command; shadow mode needs each run in a "
                         "command of its own (a list), so that each writes its own results")
    if isinstance(step[field], str):
        names = [""]  # one command: assumed to be a pytest run, as ever
    elif any(runs):
        names = [f".{i}" for i, n in enumerate(runs) if n]
    else:
        raise StepsError(f"step {key!r}: no command of it runs pytest, so shadow mode has no results of it")

    def file(job: str, name: str) -> str:
        return f"junit/{key}{job}{name}.xml"

    here = f".{SHARD}" if shards > 1 else ""
    wrapped = dict(step)
    at = f'"{CHECKOUT}"/'  # from the checkout's root, also after a `cd`
    if isinstance(step[field], str):
        wrapped[field] = f"{step[field]} --junitxml={at}{file(here, '')}"
    else:  # a list stays a list. Buildkite runs it as one `bash -e` script: a pytest that fails must not stop
        # the ones after it (their results would be missing), and the job still fails
        wrapped[field] = [f"{c} --junitxml={at}{file(here, f'.{i}')} || ksm_failed=$$?" if n else c
                          for i, (c, n) in enumerate(zip(commands, runs))] + ["exit $${ksm_failed:-0}"]
    wrapped["artifact_paths"] = [file("", "") if names == [""] and shards == 1 else f"junit/{key}.*.xml"]
    jobs = [f".{job}" for job in range(shards)] if shards > 1 else [""]
    return wrapped, [file(job, name) for job in jobs for name in names]


def _keep(keyed: list[dict]) -> str:
    check = ""
    for step in keyed:  # a shard whose recording is missing could have reached anything: keep none of the step's
        if _shards(step) > 1:
            files = " ".join(f"recordings/{step['key']}.{job}.jsonl" for job in range(_shards(step)))
            check += f'for f in {files}; do test -f "$$f" || rm -f recordings/{step["key"]}.*.jsonl; done && '
    return ("buildkite-agent artifact download 'recordings/*.jsonl' . && "
            "buildkite-agent artifact download 'dist/*.whl' . && " + check +
            'mkdir -p "$KSM_EVIDENCE" && rm -rf "$KSM_EVIDENCE/recordings" '
            '"$KSM_EVIDENCE/dist" && cp -r recordings dist "$KSM_EVIDENCE/"')


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("record", "select", "shadow") or (argv[0] == "select") != (len(argv) == 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        steps, keyed = read_steps(argv[1])
        if argv[0] == "record":
            out = [recorded(s) if s in keyed else s for s in steps]
            out += ["wait", {"key": "kernel-symbol-map-keep", "label": ":floppy_disk: keep main's map and recordings",
                             "allow_dependency_failure": True,  # a failed step's recording says so itself
                             "command": _keep(keyed)}]
        elif argv[0] == "shadow":
            out, junit = [], []
            for s in steps:
                if s in keyed:
                    wrapped, files = shadowed(s)
                    out.append(wrapped)
                    junit += [f"--junit-step {s['key']}={f}" for f in files]
                else:
                    out.append(s)
            out += ["wait", {"key": "kernel-symbol-map-evaluate", "label": ":mag: what select would have skipped",
                             "command": "buildkite-agent artifact download 'junit/*.xml' . && "
                                        "buildkite-agent artifact download selection.json . && "
                                        f"kernel-symbol-map evaluate --selection selection.json {' '.join(junit)} "
                                        "--markdown evaluation.md",
                             "artifact_paths": ["evaluation.md"], "soft_fail": True}]
        else:
            skip, why = load_skip(argv[2])
            out = [s for s in steps if not (s in keyed and s["key"] in skip)]
            print(f"kernel-symbol-map: {len(steps) - len(out)} of {len(steps)} steps skipped ({why})",
                  file=sys.stderr)
    except StepsError as e:
        print(f"ERROR {e}", file=sys.stderr)
        return 2
    json.dump({"steps": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
