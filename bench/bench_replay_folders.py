"""Output mode replayed on a project's real history, each build in a folder of its own, as CI builds them.

    .venv/bin/python bench/bench_replay_folders.py --repo GITDIR [--path src/ggml-cuda] [--commits 20]
                     [--range A..B] [--work .cache/replay] [--project ggml|plain] [--cmake-arg ARG ...]
                     [--jobs 2] [--json FILE]

Opt-in, never part of ``scripts/test``: on ggml's CUDA backend (``--project ggml``: one architecture,
FlashAttention's kernels compiled empty, as bench_emitted_ggml.py configures it) the first build of
each folder takes about 50 minutes on 2 cores. Everything lives under ``--work`` and is reused: a
rerun builds only what is missing.

1. The history: the last ``--commits`` commits that touch ``--path`` (``git log``), and the one before
   the first of them as the first base.
2. Two checkouts of ``--repo``, in folders of different lengths (``x/`` and
   ``y-a-second-runner-with-a-longer-folder/``), each with its own build folder: two CI runners. Each
   builds every commit in order (``cmake --build``: incremental after the first build, as a runner with
   ccache rebuilds), and maps it (``build --commit``).
3. The truth, which reads no map: the first folder's objects before and after each commit, compared by
   ``tests/kernel_oracle.py`` (cuobjdump's listings, one folder: no path in it differs).
4. Per commit, with one synthetic complete recording per kernel of the base's map (each test listing
   what its program loaded, as the recorder would: the library no other target links whose links reach
   the kernel's own, everything that one links, and libc; ggml's test programs link ``ggml``, which
   links every backend):

   * source mode: ``select --map BASE --changed FILES``;
   * output mode: ``select --base-map BASE --map CHANGE``, BASE from the first folder and CHANGE from
     the second: two builds, two folders, two processes;
   * the oracle's must-run set: the tests whose kernel's device code changed, and for an object whose
     host code changed, the tests that loaded its library (every test when the map cannot say);
   * misses: tests the oracle must run that output mode skipped (must be 0);
   * noise: objects whose digests differ between the two folders' builds of the same commit (must be 0).

Prints a Markdown table (the fraction of kernel tests each mode runs, the truth's, misses, noise, the
build times) and how long the replay took; ``--json`` writes the rows.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]
import kernel_oracle  # noqa: E402
from _run import checked  # noqa: E402

from kernel_symbol_map._graph import reachable  # noqa: E402

PYTHON = ROOT / ".venv" / "bin" / "python"
FOLDERS = ("x", "y-a-second-runner-with-a-longer-folder")
SYSTEM = ["libc.so.6", "libstdc++.so.6", "python3"]


def log(message: str) -> None:
    print(f"bench_replay_folders: {message}", flush=True)


def run(command: list[object], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return checked("bench_replay_folders", command, **kwargs)


def git(src: Path, *args: str) -> str:
    return run(["git", "-C", src, *args]).stdout.strip()


def history(repo: Path, path: str, count: int, window: str | None = None) -> list[str]:
    """The last ``count`` commits touching ``path`` (oldest first, in ``window``: ``A..B``), after the
    commit before the first."""
    touching = git(repo, "log", "--format=%H", f"-n{count}", *([window] if window else []), "--", path).split()[::-1]
    if not touching:
        raise SystemExit(f"bench_replay_folders: no commit of {repo} touches {path}")
    return [git(repo, "rev-parse", f"{touching[0]}^"), *touching]


def configure_args(project: str, work: Path, extra: list[str]) -> list[str]:
    if project == "ggml":
        import bench_emitted_ggml as ggml

        command = [str(a) for a in ggml.configure_command(Path("SRC"), Path("BUILD"), ggml.deps(work))]
        return command[command.index("Ninja") + 1 :] + extra  # its options, for each folder's configure
    return ["-DCMAKE_CUDA_ARCHITECTURES=80", "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc",
            "-DCMAKE_BUILD_TYPE=Release", *extra]


def build(folder: Path, repo: Path, commit: str, args: list[str], jobs: int) -> float:
    """Check ``commit`` out in ``folder``'s clone and build it there; the seconds the build took."""
    src, out = folder / "src", folder / "build"
    if not (src / ".git").exists():
        run(["git", "clone", "--quiet", repo, src])
    git(src, "checkout", "--quiet", "--force", "--detach", commit)
    if not (out / "CMakeCache.txt").exists():
        run([PYTHON, "-c", "import sys; from kernel_symbol_map.buildtree.fileapi import write_query; "
             "from pathlib import Path; write_query(Path(sys.argv[1]))", out])
        run(["nice", "-n", "19", "cmake", "-S", src, "-B", out, "-G", "Ninja", *args])
    started = time.perf_counter()
    run(["nice", "-n", "19", "cmake", "--build", out, "-j", str(jobs)])
    return time.perf_counter() - started


def make_map(folder: Path, commit: str, maps: Path) -> Path:
    out = maps / folder.name / f"{commit}.json.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    run([PYTHON, "-m", "kernel_symbol_map", "build", "--build-dir", folder / "build", "--out", out,
         "--commit", commit], cwd=folder / "src")
    return out


def load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def objects(build_dir: Path) -> dict[str, Path]:
    return {p.relative_to(build_dir).as_posix(): p for p in sorted(build_dir.rglob("*.o"))
            if "CMakeFiles" in p.relative_to(build_dir).parts}


def recordings(base: dict[str, Any], commit: str, path: Path) -> dict[str, set[str]]:
    """One complete recording per kernel of ``base``, listing what a process that launched it had loaded, as
    the loader maps them: a program links a library no other target links (ggml's tests link ``ggml``), and
    with it everything that one links (``target_links``), the kernel's own library among them; and libc.
    Test -> the libraries it lists."""
    artefacts, links = base.get("artefacts") or {}, base.get("target_links") or {}
    linked = {t for deps in links.values() for t in deps}
    tops = [reachable(links, {t}) for t in {o["target"] for o in base["objects"]} | set(links) if t not in linked]
    tests: dict[str, tuple[str, set[str]]] = {}
    for o in base["objects"]:
        closure = set().union(*(c for c in tops if o["target"] in c)) or reachable(links, {o["target"]})
        loaded = {f for t in closure for f in artefacts.get(t, ())} | set(SYSTEM)
        for symbol in o["symbols"]:
            tests.setdefault(f"test::{symbol}", (symbol, loaded))
    path.write_text("".join(json.dumps({"test": t, "kernels": [k], "complete": True, "commit": commit,
                                        "libraries": sorted(libs)}) + "\n" for t, (k, libs) in tests.items()))
    return {t: libs for t, (_, libs) in tests.items()}


def select(src: Path, rec: Path, changed: list[str], new: Path, base: Path | None) -> dict[str, Any]:
    flags = ["--map", new] + (["--base-map", base] if base is not None else [])
    proc = subprocess.run([PYTHON, "-m", "kernel_symbol_map", "select", "--recordings", rec, *flags, "--json",
                           "--changed", *changed], capture_output=True, text=True, cwd=src, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"bench_replay_folders: select failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def must_run(truth: kernel_oracle.KernelDifference, base: dict[str, Any], tests: dict[str, set[str]]) -> set[str]:
    """The oracle's tests: a changed kernel's; for a changed object's host code, its library's loaders."""
    found = {t for t in tests if t.split("::", 1)[1] in truth.kernels_changed}
    by_object = {o["object"]: o["target"] for o in base["objects"]}
    artefacts = base.get("artefacts")
    for obj in truth.host_changed:
        files = set((artefacts or {}).get(by_object.get(obj, ""), ()))
        found |= {t for t, libs in tests.items() if libs & files} if files else set(tests)
    return found


def noise(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Objects whose digests differ between two builds of one commit, or that only one has."""
    da = {(o["target"], o["object"]): o.get("digests") for o in a["objects"]}
    db = {(o["target"], o["object"]): o.get("digests") for o in b["objects"]}
    return sorted(f"{t}:{o}" for t, o in da.keys() | db.keys() if da.get((t, o)) != db.get((t, o)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git directory of the project")
    parser.add_argument("--path", default="src/ggml-cuda", help="the history of this path is replayed")
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--range", help="only commits in this git range (A..B): a window of the history")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "replay")
    parser.add_argument("--project", choices=("ggml", "plain"), default="ggml")
    parser.add_argument("--cmake-arg", action="append", default=[], help="another configure argument")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    commits = history(args.repo, args.path, args.commits, args.range)
    cmake = configure_args(args.project, work, args.cmake_arg)
    folders = [work / name for name in FOLDERS]
    maps, snaps, times = work / "maps", {}, {}
    for commit in commits:
        for folder in folders:
            seconds = build(folder, args.repo, commit, cmake, args.jobs)
            times[(folder.name, commit)] = seconds
            make_map(folder, commit, maps)
            log(f"{folder.name} at {commit[:10]}: built in {seconds:.0f} s, mapped")
        snaps[commit] = kernel_oracle.snapshot_all(objects(folders[0] / "build"))
    rows = []
    for before, after in zip(commits, commits[1:]):
        base, change = maps / FOLDERS[0] / f"{before}.json.gz", maps / FOLDERS[1] / f"{after}.json.gz"
        base_doc = load(base)
        rec = work / "recordings" / f"{before}.jsonl"
        rec.parent.mkdir(exist_ok=True)
        tests = recordings(base_doc, before, rec)
        changed = git(folders[1] / "src", "diff", "--name-only", before, after).split()
        if not changed:
            continue  # a merge, or a commit that reverts its own change: nothing to select for
        source = select(folders[0] / "src", rec, changed, base, None)
        output = select(folders[1] / "src", rec, changed, change, base)
        must = must_run(kernel_oracle.compare(snaps[before], snaps[after]), base_doc, tests)
        ran = set(output["run"])
        rows.append({"commit": after, "subject": git(args.repo, "log", "-1", "--format=%s", after),
                     "files": len(changed), "tests": len(tests), "source": len(source["run"]),
                     "output": len(ran), "oracle": len(must), "misses": sorted(must - ran),
                     "noise": noise(load(maps / FOLDERS[0] / f"{after}.json.gz"), load(change)),
                     "fallback": output.get("fallback") or "", "build_s": round(times[(FOLDERS[1], after)])})
    print("| commit | files | source mode | output mode | oracle | misses | noise | rebuild |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        def pct(n: int) -> str:
            return f"{n} ({100 * n / max(r['tests'], 1):.0f}%)"
        print(f"| {r['commit'][:8]} {r['subject'][:40]} | {r['files']} | {pct(r['source'])} | {pct(r['output'])}"
              f"{' ' + r['fallback'] if r['fallback'] else ''} | {pct(r['oracle'])} | {len(r['misses'])} | "
              f"{len(r['noise'])} | {r['build_s']} s |")
    misses, noisy = sum(len(r["misses"]) for r in rows), sum(len(r["noise"]) for r in rows)
    print(f"{len(rows)} commits replayed in {time.perf_counter() - started:.0f} s; misses {misses}, noisy objects {noisy}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 1 if any(r["misses"] or r["noise"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
