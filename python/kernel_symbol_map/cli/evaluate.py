"""``evaluate``: shadow mode. What a selection would have skipped, against a full run's results."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import KernelSymbolMapError
from ._commands import summary_of
# EXIT_CANNOT_TELL: the results and the selection do not line up (a skipped test is not in them, and a failure
# names no selected test): not a miss found (1), not a usage error (2), and never "no miss" (0).
from ._output import EXIT_CANNOT_TELL, EXIT_INPUT, EXIT_OK, UsageError, error, plural, tip, write_json


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "evaluate", help=summary_of("evaluate"),
        description="Run everything, select anyway, and compare: every test that failed although the "
        "selection would have skipped it (a miss: there must be none), with the change and the evidence "
        "behind the skip; the skip fraction, and the time the skips would have saved, from the run's "
        "durations. Exit 1 when there is a miss; exit 3 when it cannot tell (a test the selection skips is not "
        "in the results, and a failure in them matches no selected test: it may be that test under another name).",
        epilog="examples:\n  pytest tests/ --junitxml=results.xml\n"
        "  kernel-symbol-map select --map dist/*.whl --recordings rec/ --diff origin/main --json > selection.json\n"
        "  kernel-symbol-map evaluate --selection selection.json --junit results.xml --markdown comment.md\n"
        "  kernel-symbol-map evaluate --selection steps.json --junit-step kernels=kernels.xml --junit-step ops=ops.xml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--selection", type=Path, required=True, metavar="FILE", help="`select --json` output")
    p.add_argument("--junit", type=Path, action="append", default=[], metavar="XML",
                   help="JUnit XML of the full run (pytest --junitxml); repeat for shards")
    p.add_argument("--junit-step", action="append", default=[], metavar="STEP=XML",
                   help="a step-level selection (record --step): the results of each step's run")
    p.add_argument("--junit-prefix", metavar="PREFIX",
                   help="the run's `pytest --junit-prefix`: cut `PREFIX.` off every classname that has it")
    p.add_argument("--markdown", type=Path, metavar="FILE", help="also write a summary a CI can post on the PR")
    p.add_argument("--json", action="store_true", help="machine-readable (kernel-symbol-map/evaluate/1)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..consumer.select import junit
    from ..consumer.select.evaluation import SCHEMA, evaluate

    if bool(args.junit) == bool(args.junit_step):
        raise UsageError("give the run's results as --junit (tests) or --junit-step (steps), one of them")
    if args.junit_prefix is not None and not args.junit:
        raise UsageError("--junit-prefix is for --junit's test cases: a step's results are matched by its key")
    try:
        selection = json.loads(args.selection.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise KernelSymbolMapError(f"{args.selection}: not a selection ({getattr(e, 'strerror', None) or e})") \
            from None
    steps: dict[str, list[junit.Result]] = {}
    for spec in args.junit_step:
        step, eq, path = spec.partition("=")
        if not eq or not step or not path:
            raise UsageError(f"--junit-step {spec!r}: expected STEP=XML")
        steps.setdefault(step, []).extend(junit.read(Path(path)))  # a step's shards: one file each
    results = [r for path in args.junit for r in junit.read(path)]
    try:
        found = evaluate(selection, results, steps or None, args.junit_prefix)
    except KernelSymbolMapError as e:
        raise KernelSymbolMapError(f"{args.selection}: {e}") from None
    if args.markdown:
        _write(args.markdown, found.markdown())
    if args.json:
        write_json(SCHEMA, found.to_json())
    else:
        print(f"would skip {len(found.skipped)} of {plural(found.ran, 'test')} ({found.skip_fraction:.0%}), "
              f"saving {found.seconds_skipped:.1f} s of {found.seconds_total:.1f} s"
              + (f"; fell back: {found.fallback}" if found.fallback else ""))
        for m in found.misses:
            print(f"MISS {m.test}: failed ({m.message}); the selection would have skipped it: {m.why}")
        if found.unmatched:
            print(f"{plural(len(found.unmatched), 'skipped test')} not in the results, e.g. {found.unmatched[0]}")
        if found.cannot_tell:
            print(f"CANNOT TELL whether there is a miss: {found.cannot_tell_why()}")
    sys.stdout.flush()
    for m in found.misses:
        error(f"miss: {m.test} failed, and the selection would have skipped it")
    if found.cannot_tell:
        error(f"cannot tell whether there is a miss: {found.cannot_tell_why()}")
        if found.prefix_hint:
            tip(f"the results' classnames may carry pytest's --junit-prefix {found.prefix_hint}: "
                f"give evaluate --junit-prefix {found.prefix_hint}")
        else:
            tip("the results may come from another rootdir, or another --junit-prefix, than the selection's node ids")
    return EXIT_INPUT if found.misses else EXIT_CANNOT_TELL if found.cannot_tell else EXIT_OK


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise KernelSymbolMapError(f"--markdown {path}: cannot write it ({e.strerror or e})") from None
