"""Per-file decisions on real history (issue 28): ggml's last commits, selected per file and today's way.

    .venv/bin/python bench/bench_replay.py [--commits 200] [--work .cache/ggml] [--tip master] [--map MAP]
                                           [--check 3] [--subprocess] [--json FILE]

Opt-in, never part of ``scripts/test``. It reuses what ``bench/bench_emitted_ggml.py``
left under ``--work``: ggml's clone with its history (``--work/src``) and a kernel
map of ggml's CUDA build (``--work/maps/<SHA>.json.gz``; the newest by commit date
unless ``--map``: of the commit with the most ancestors). It builds nothing; with no map it says how to make one and stops.

For each of the last ``--commits`` commits on ``--tip``'s first-parent line that
change any file (C, its parent P = C^): the files C changed
(``git diff --name-only --no-renames P C``), and synthetic recordings of P:

* one test per kernel of the map, ``k::<kernel>``, complete, no Python run
  (``"python": {}``, ``"pyblocks": 1``);
* one test per Python file of ggml at P, ``py::<path>``, that executed every
  block of that file (``pyblocks.split`` of P's bytes), no kernels.

Then ``select --changed FILES --map M' --recordings R --rules RULES --json``, in a
``git worktree`` of ggml checked out at C (``--source-root`` it, so the Python
decider reads C's files and asks git about P), once per file (the default) and
once ``--whole-change`` (today's way: one file the map does not clear runs
everything, or the rules decide the whole change). The CLI runs in-process
(``kernel_symbol_map.cli.main``, stdout captured); ``--check`` commits are run
again as subprocesses and must give the same documents (``--subprocess``: every
call as a subprocess).

The approximation: there is one map, of one commit M, and the replay needs the
map, the recordings and the base to be of P. So for each commit the map's
document is copied with its ``commit`` field set to P (M' above): its objects,
sources and kernels are M's. A file P or C has that M lacks (added after M, or
removed before it) is a file no map knows, which is what a stale map would do;
a file M compiles that P did not (or compiled differently) is decided as M has
it. The kernel tests are M's kernels, the Python tests P's files.

The rules are the bench's assumption, not ggml's (printed with the figures):
docs and markdown, CI configuration and licence/authors files need no test.
The CUDA build mapped is the one ``bench_emitted_ggml.py`` configures (CUDA
backend and ggml-base/ggml-cpu, no tests, no examples): every other backend's
files, ggml's tests and examples are in no map.

Prints: the fraction of tests run per commit both ways (mean, median, share of
commits running everything), the same for commits touching ``src/ggml-cuda/``
and commits touching a ``.py`` file, how the changed files were decided (by
``decided_by``), the files no decider knew grouped by folder, the 10 commits
where per-file saves most, and the time taken.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
CUDA_DIR = "src/ggml-cuda/"
NONE = "(none)"  # a file entry without decided_by
# The bench's assumption of what needs no test in ggml (not ggml's own rules: it has none).
RULES = {"rules": [
    {"paths": ["docs/**", "*.md"], "tests": []},  # documentation
    {"paths": [".github/**"], "tests": []},  # CI configuration
    {"paths": ["LICENSE", "LICENSE.*", "AUTHORS", "AUTHORS.*"], "tests": []},  # licence and authors
]}
# What a team whose CI job builds and tests only the CUDA backend would add (--rules-set cuda-team): other
# backends' sources are built by no step of this job; scripts and examples are run by none of its tests; the
# backend test driver and the CUDA folder's files the map cannot clear (host-only objects' headers) reach every
# kernel test ("k" names every test "k::<kernel>").
OTHER_BACKENDS = ["sycl", "vulkan", "metal", "opencl", "hexagon", "webgpu", "openvino", "cann", "musa", "rpc", "blas",
                  "zdnn", "kompute", "zendnn"]
CUDA_TEAM_RULES = {"rules": [
    *RULES["rules"],
    {"paths": [f"src/ggml-{b}/**" for b in OTHER_BACKENDS], "tests": []},
    {"paths": ["scripts/**", "examples/**"], "tests": []},
    {"paths": ["tests/test-backend-ops.cpp", "src/ggml-cuda/**"], "tests": ["k"]},
]}
RULE_SETS = {"minimal": RULES, "cuda-team": CUDA_TEAM_RULES}


def log(message: str) -> None:
    print(f"bench_replay: {message}", file=sys.stderr, flush=True)


def git(repo: Path, *args: str, binary: bool = False) -> str | bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_replay: git {' '.join(args)} failed in {repo}: {proc.stderr.decode()[-2000:]}")
    return proc.stdout if binary else proc.stdout.decode()


def no_map(work: Path, why: str) -> int:
    print(f"bench_replay: {why}.\n"
          f"Make one with bench/bench_emitted_ggml.py (it clones ggml into {work / 'src'}, builds its CUDA backend, "
          f"about 50 minutes on 2 cores the first time, and maps it into {work / 'maps'}):\n"
          f"    .venv/bin/python bench/bench_emitted_ggml.py --work {work}\n"
          "then run this bench again (or give --map).", file=sys.stderr)
    return 1


def find_map(work: Path, src: Path) -> Path | None:
    """The newest map ``bench_emitted_ggml.py`` made: of the commit with the most ancestors (ggml rebases, so
    commit dates tie)."""
    found = []
    for path in (work / "maps").glob("*.json.gz"):
        sha = path.name[: -len(".json.gz")]
        proc = subprocess.run(["git", "-C", str(src), "rev-list", "--count", sha], capture_output=True,
                              text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            found.append((int(proc.stdout), path))
    return max(found)[1] if found else None


def history(src: Path, tip: str, count: int) -> list[tuple[str, str, list[str], str]]:
    """The last ``count`` first-parent commits of ``tip`` that change a file: (commit, parent, files, subject)."""
    out = []
    for line in str(git(src, "rev-list", "--first-parent", "--parents", tip)).splitlines():
        commit, *parents = line.split()
        if not parents:
            continue  # the root commit: no parent to diff against
        files = str(git(src, "diff", "--name-only", "--no-renames", parents[0], commit)).splitlines()
        if not files:
            continue
        subject = str(git(src, "log", "-1", "--format=%s", commit)).strip()
        out.append((commit, parents[0], files, subject))
        if len(out) == count:
            break
    return out


class Digests:
    """Python files' block digests at a commit, cached by blob."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.by_blob: dict[str, list[str]] = {}

    def at(self, commit: str) -> dict[str, list[str]]:
        from kernel_symbol_map.mapformat import pyblocks

        found = {}
        for line in str(git(self.src, "ls-tree", "-r", "--full-tree", commit)).splitlines():
            meta, path = line.split("\t", 1)
            mode, kind, blob = meta.split()
            if kind != "blob" or not path.endswith(".py") or mode == "120000":
                continue
            if blob not in self.by_blob:
                data = git(self.src, "cat-file", "blob", blob, binary=True)
                assert isinstance(data, bytes)
                self.by_blob[blob] = sorted(set(pyblocks.split(data).digests))
            found[path] = self.by_blob[blob]
        return found


def write_inputs(folder: Path, doc: dict, kernels: list[str], python: dict[str, list[str]],
                 parent: str) -> tuple[Path, Path]:
    """The map rewritten to be of ``parent``, and the synthetic recordings of ``parent``."""
    map_path = folder / f"map-{parent}.json.gz"
    map_path.write_bytes(gzip.compress(json.dumps({**doc, "commit": parent}).encode(), compresslevel=1))
    recs = folder / f"recordings-{parent}.jsonl"
    with open(recs, "w") as out:
        for kernel in kernels:
            out.write(json.dumps({"test": f"k::{kernel}", "kernels": [kernel], "complete": True, "commit": parent,
                                  "python": {}, "pyblocks": 1}) + "\n")
        for path, digests in sorted(python.items()):
            out.write(json.dumps({"test": f"py::{path}", "kernels": [], "complete": True, "commit": parent,
                                  "python": {path: digests}, "pyblocks": 1}) + "\n")
    return map_path, recs


def select_argv(tree: Path, map_path: Path, recs: Path, rules: Path, files: list[str], whole: bool) -> list[str]:
    return ["select", "--source-root", str(tree), "--map", str(map_path), "--recordings", str(recs),
            "--rules", str(rules), "--json", *(["--whole-change"] if whole else []), "--changed", *files]


def in_process(argv: list[str], cwd: Path) -> dict:
    from kernel_symbol_map.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    if rc != 0 or not out.getvalue().strip():
        return {"error": f"exit {rc}: {err.getvalue().strip()[-600:]}"}
    return json.loads(out.getvalue())


def as_subprocess(argv: list[str], cwd: Path) -> dict:
    proc = subprocess.run([str(PYTHON), "-m", "kernel_symbol_map", *argv], capture_output=True, text=True,
                          cwd=cwd, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}"}
    return json.loads(proc.stdout)


def fraction(doc: dict) -> float:
    return len(doc["run"]) / max(len(doc["decisions"]), 1)


def describe(values: list[float]) -> str:
    if not values:
        return "-"
    every = sum(1 for v in values if v >= 1.0)
    return (f"mean {statistics.mean(values):6.1%}, median {statistics.median(values):6.1%}, "
            f"everything runs in {every}/{len(values)} ({every / len(values):.0%})")


def folder_of(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else (parts[0] + "/" if len(parts) == 2 else "(top level)")


def blocker(f: dict) -> str:
    """What kind of file made every test run."""
    if f["status"] == "host":
        return "compiled into a host-only object (a header or .cu whose object has no kernels)"
    if f["status"] == "configure":
        return "a configure input (CMakeLists.txt, *.cmake, *.in)"
    if f["status"] != "not-in-map":
        return f"the map's status {f['status']}"
    if f["path"].startswith(("tests/", "examples/")):
        return "in no map: ggml's tests and examples (not built here)"
    if f["path"].startswith("src/"):
        return "in no map: sources this build does not compile (other backends, CPU variants)"
    return "in no map: anything else (scripts/, top-level files the rules do not name)"


def commit_line(r: dict) -> str:
    total = len(r["whole"]["decisions"])
    by = Counter(f.get("decided_by") for f in r["per_file"]["files"])
    return (f"{r['commit'][:10]} {len(r['whole']['run']):>5}/{total} -> {len(r['per_file']['run']):>5}/{total}  "
            f"{len(r['files'])} files ({', '.join(f'{n} {b}' for b, n in by.most_common())})  {r['subject'][:60]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=ROOT / ".cache" / "ggml")
    ap.add_argument("--commits", type=int, default=200, help="how many of the last commits to replay (200)")
    ap.add_argument("--tip", default="master", help="the branch (or commit) whose history is replayed")
    ap.add_argument("--map", type=Path, help="the map (default: the newest in --work/maps)")
    ap.add_argument("--check", type=int, default=3,
                    help="commits also run as subprocesses, whose documents must match the in-process ones (3)")
    ap.add_argument("--subprocess", action="store_true", help="run every select as a subprocess")
    ap.add_argument("--json", type=Path, help="also write the per-commit figures here")
    ap.add_argument("--rules-set", choices=sorted(RULE_SETS), default="minimal",
                    help="minimal: docs, CI config, licences need no test; cuda-team: also what a CUDA-only CI job "
                    "would say of other backends, scripts, examples and the backend test driver")
    args = ap.parse_args()
    started = time.perf_counter()
    work = args.work.resolve()
    src = work / "src"
    if not (src / ".git").exists():
        return no_map(work, f"no ggml clone in {src}")
    map_file = args.map.resolve() if args.map else find_map(work, src)
    if map_file is None or not map_file.exists():
        return no_map(work, f"no kernel map in {work / 'maps'}" if map_file is None else f"no map {map_file}")
    doc = json.loads(gzip.decompress(map_file.read_bytes()))
    mapped = doc.get("commit", "")
    kernels = sorted({k for o in doc["objects"] for k in o.get("symbols", [])})
    commits = history(src, args.tip, args.commits)
    if not commits:
        raise SystemExit(f"bench_replay: no commit of {args.tip} changes a file")
    prepared_s = time.perf_counter() - started
    tip_sha = str(git(src, "rev-parse", args.tip)).strip()

    digests = Digests(src)
    rows: list[dict] = []
    timing = Counter()
    with tempfile.TemporaryDirectory(prefix="bench_replay.") as tmp:
        folder = Path(tmp)
        tree = folder / "ggml"
        rules = folder / "rules.json"
        rules.write_text(json.dumps(RULE_SETS[args.rules_set], indent=1))
        git(src, "worktree", "add", "--quiet", "--detach", str(tree), commits[0][0])
        try:
            def prepare(commit: str, parent: str) -> tuple[Path, Path, int]:
                t0 = time.perf_counter()
                git(tree, "checkout", "--quiet", "--detach", commit)
                python = digests.at(parent)
                map_path, recs = write_inputs(folder, doc, kernels, python, parent)
                timing["prepare"] += time.perf_counter() - t0
                return map_path, recs, len(python)

            run = as_subprocess if args.subprocess else in_process
            for i, (commit, parent, files, subject) in enumerate(commits):
                map_path, recs, modules = prepare(commit, parent)
                found = {}
                for name, whole in (("per_file", False), ("whole", True)):
                    t0 = time.perf_counter()
                    found[name] = run(select_argv(tree, map_path, recs, rules, files, whole), tree)
                    timing[name] += time.perf_counter() - t0
                map_path.unlink()
                recs.unlink()
                rows.append({"commit": commit, "parent": parent, "subject": subject, "files": files,
                             "modules": modules, **found})
                if (i + 1) % 25 == 0:
                    log(f"{i + 1}/{len(commits)} commits in {time.perf_counter() - started:.0f} s")

            # The in-process answers against subprocesses, on a few commits of different kinds.
            picks: list[int] = []
            for wanted in (lambda r: any(f.endswith(".py") for f in r["files"]),
                           lambda r: "error" not in r["whole"] and "error" not in r["per_file"]
                           and len(r["per_file"]["run"]) < len(r["whole"]["run"]),
                           lambda r: any(f.startswith(CUDA_DIR) for f in r["files"]),
                           lambda r: True):
                hit = next((i for i, r in enumerate(rows) if wanted(r) and i not in picks), None)
                if hit is not None:
                    picks.append(hit)
            checks = []
            other = in_process if args.subprocess else as_subprocess
            for i in picks[: max(args.check, 0)]:
                row = rows[i]
                map_path, recs, _ = prepare(row["commit"], row["parent"])
                for name, whole in (("per_file", False), ("whole", True)):
                    t0 = time.perf_counter()
                    again = other(select_argv(tree, map_path, recs, rules, row["files"], whole), tree)
                    seconds = time.perf_counter() - t0
                    differs = sorted(k for k in set(again) | set(row[name]) if again.get(k) != row[name].get(k))
                    checks.append((row["commit"], name, seconds, differs))
                map_path.unlink()
                recs.unlink()
        finally:
            subprocess.run(["git", "-C", str(src), "worktree", "remove", "--force", str(tree)], capture_output=True,
                           check=False)
            subprocess.run(["git", "-C", str(src), "worktree", "prune"], capture_output=True, check=False)

    report(rows, doc, mapped, map_file, kernels, tip_sha, args, checks, timing, prepared_s, started)
    if args.json:
        slim = [{k: v for k, v in r.items() if k not in ("per_file", "whole")} |
                {name: ({"error": r[name]["error"]} if "error" in r[name] else
                        {"run": len(r[name]["run"]), "tests": len(r[name]["decisions"]),
                         "fallback": r[name]["fallback"], "files": r[name]["files"]})
                 for name in ("per_file", "whole")} for r in rows]
        args.json.write_text(json.dumps({"map": str(map_file), "map_commit": mapped, "rules": RULE_SETS[args.rules_set], "rows": slim},
                                        indent=1))
    return 1 if any("error" in r[n] for r in rows for n in ("per_file", "whole")) else 0


def report(rows: list[dict], doc: dict, mapped: str, map_file: Path, kernels: list[str], tip: str,
           args: argparse.Namespace, checks: list, timing: Counter, prepared_s: float, started: float) -> None:
    ok = [r for r in rows if "error" not in r["per_file"] and "error" not in r["whole"]]
    errors = [(r["commit"], n, r[n]["error"]) for r in rows for n in ("per_file", "whole") if "error" in r[n]]
    modules = sorted({r["modules"] for r in rows})
    print(f"ggml: the last {len(rows)} commits of {args.tip} ({tip[:10]}) that change a file, "
          f"{rows[-1]['commit'][:10]}..{rows[0]['commit'][:10]}")
    print(f"map: {map_file.name}, of {mapped[:10]} ({len(doc['objects'])} objects, {len(kernels)} kernels), "
          "rewritten for each commit C to be of C^ (its objects stay the map's)")
    print(f"recordings: one test per kernel ({len(kernels)}) and one per Python file at C^ "
          f"({modules[0]}..{modules[-1]}), all of C^")
    print("rules (the bench's assumption, not ggml's):")
    for rule in RULE_SETS[args.rules_set]["rules"]:
        print(f"    {json.dumps(rule)}")
    if errors:
        print(f"ERRORS: {len(errors)} select calls failed, e.g. {errors[0][0][:10]} {errors[0][1]}: {errors[0][2]}")

    def fractions(name: str, which: list[dict]) -> list[float]:
        return [fraction(r[name]) for r in which]

    print("\nfraction of the tests that run, per commit:")
    groups = [("all commits", ok),
              ("touching src/ggml-cuda/", [r for r in ok if any(f.startswith(CUDA_DIR) for f in r["files"])]),
              ("touching a .py file", [r for r in ok if any(f.endswith(".py") for f in r["files"])])]
    for label, which in groups:
        print(f"  {label} ({len(which)}):")
        if not which:
            print("      none")
            continue
        print(f"      per file:     {describe(fractions('per_file', which))}")
        print(f"      whole change: {describe(fractions('whole', which))}")
    worse = [r["commit"][:10] for r in ok if not set(r["per_file"]["run"]) <= set(r["whole"]["run"])]
    if worse:
        print(f"  NOTE: per file runs a test the whole-change way does not in {len(worse)} commits: {', '.join(worse[:5])}")

    print("\nchanged files, by how they were decided (all commits; a file counts once per commit):")
    per_file = Counter(f.get("decided_by", NONE) for r in ok for f in r["per_file"]["files"])
    whole = Counter(f.get("decided_by", NONE) for r in ok for f in r["whole"]["files"])
    print(f"  {'decided_by':<12} {'per file':>9} {'whole change':>13}")
    for by in sorted(set(per_file) | set(whole), key=lambda b: -(per_file[b] + whole[b])):
        print(f"  {by:<12} {per_file[by]:>9} {whole[by]:>13}")
    print(f"  {'total':<12} {sum(per_file.values()):>9} {sum(whole.values()):>13}"
          f"   (whole change: {NONE!r} is a file the map does not clear: select gives it no decided_by)")
    status = Counter((f["status"], f.get("decided_by")) for r in ok for f in r["per_file"]["files"])
    print("  per file, by the map's status: " + ", ".join(f"{s} -> {b}: {n}" for (s, b), n in status.most_common()))

    unknown = Counter()
    example: dict[str, str] = {}
    for r in ok:
        for f in r["per_file"]["files"]:
            if f.get("decided_by") == "everything":
                key = f"{folder_of(f['path'])} ({f['status']})"
                unknown[key] += 1
                example.setdefault(key, f["path"])
    print(f"\nfiles that made everything run per file ({sum(unknown.values())}), by folder and the map's status:")
    for key, n in unknown.most_common(15):
        print(f"  {n:>4}  {key:<48} e.g. {example[key]}")
    why = Counter()
    for r in ok:
        for f in r["per_file"]["files"]:
            if f.get("decided_by") == "everything":
                why[f["why"].split(";")[0][:110]] += 1
    print("  first reason given: " + "; ".join(f"{n}x {w!r}" for w, n in why.most_common(4)))

    saved = sorted((r for r in ok if fraction(r["per_file"]) < fraction(r["whole"])),
                   key=lambda r: fraction(r["per_file"]) - fraction(r["whole"]))
    print("\nthe 10 commits where per file saves the most (tests run: whole change -> per file):")
    for r in saved[:10]:
        print(f"  {commit_line(r)}")
    if not saved:
        print("  none: per file runs as many tests as the whole-change way in every commit")
    same = sum(1 for r in ok if r["per_file"]["run"] == r["whole"]["run"])
    print(f"  per file and whole change run the same tests in {same}/{len(ok)} commits")

    blocked = [r for r in ok if fraction(r["per_file"]) >= 1.0]
    kinds = Counter()
    only = Counter()
    for r in blocked:
        found = {blocker(f) for f in r["per_file"]["files"] if f.get("decided_by") == "everything"}
        kinds.update(found)
        if len(found) == 1:
            only.update(found)
    print(f"\nthe {len(blocked)} commits where everything runs per file, by what made it (commits with such a file; "
          "with only such files):")
    for kind, n in kinds.most_common():
        print(f"  {n:>4} {only[kind]:>4}  {kind}")
    misses = sorted((r for r in blocked if any(f.get("decided_by") != "everything" for f in r["per_file"]["files"])),
                    key=lambda r: (sum(f.get("decided_by") == "everything" for f in r["per_file"]["files"]),
                                   -len(r["files"])))
    print(f"  closest misses ({len(misses)} commits where per file decided some files and others ran everything; "
          "fewest such files first):")
    for r in misses[:8]:
        stuck = [f["path"] for f in r["per_file"]["files"] if f.get("decided_by") == "everything"]
        print(f"  {commit_line(r)}\n      everything because of {', '.join(stuck[:3])}{' ...' if len(stuck) > 3 else ''}")

    print("\nin-process against subprocess select (same JSON document?):")
    for commit, name, seconds, differs in checks:
        print(f"  {commit[:10]} {name:<8} {'same' if not differs else 'DIFFERENT in ' + ', '.join(differs)} "
              f"(the {'in-process' if args.subprocess else 'subprocess'} call: {seconds:.2f} s)")
    calls = 2 * len(rows)
    print(f"\ntime: {time.perf_counter() - started:.0f} s in all; history {prepared_s:.1f} s, "
          f"checkout + map + recordings {timing['prepare']:.0f} s, select {'(subprocess)' if args.subprocess else '(in-process)'} "
          f"per file {timing['per_file']:.0f} s + whole change {timing['whole']:.0f} s "
          f"({(timing['per_file'] + timing['whole']) / max(calls, 1):.2f} s a call, {calls} calls)")


if __name__ == "__main__":
    sys.exit(main())
