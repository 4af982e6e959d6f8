"""Output mode on real history (issue 27): ggml's CUDA backend, built commit by commit, selected both ways.

    .venv/bin/python bench/bench_emitted_ggml.py [--work .cache/ggml] [--commits SHA...] [--jobs 2]
                                                 [--mirror GITDIR] [--select-only] [--remap] [--json FILE]
                                                 [--archs 80-real] [--build-only]

``--build-only --archs 80 --commits c0011fe525567fa835af5801f2f7bf65bf4469c6`` builds the
tree ``bench_cold.py --tree .cache/ggml/build`` measures: one commit, sm_80 code and its PTX.

Opt-in, never part of ``scripts/test``: the first build of ggml's CUDA backend
took 50 minutes on 2 cores (sm_80 only, FlashAttention kernels compiled out;
166 objects, 141 of them CUDA), each later commit 10-30 s. Everything it makes
lives under ``--work`` and is reused, so a rerun only does what is missing
(about 40 s when all is built); one once ``select --base-map`` exists prints
the output-mode columns too.

1. ggml's source: ``--work/src``, cloned from ``--mirror`` (a local git
   directory, e.g. what the search tool's ``fetch github:ggml-org/ggml`` gives)
   or from GitHub when no mirror is given. One source path for every commit,
   checked out in place: ``__nv_static_`` kernel names embed it.
2. The CUDA libraries ggml links that the toolkit here lacks: cuBLAS from
   PyPI (``nvidia-cublas``, pinned) into ``--work/deps``, and an empty
   ``libcuda.so`` stub (linking a shared library needs no driver).
3. Configure once, at the first commit, in ``--work/build`` (this package's
   file-API query first, so every map pairs from the reply): Ninja, Release,
   ``GGML_CUDA=ON``, ``CMAKE_CUDA_ARCHITECTURES=80-real`` (``--archs``), no tests or
   examples, and ``GGML_CUDA_FA=OFF``, which defines ``GGML_CUDA_NO_FA``: the
   FlashAttention template instances are still compiled and still emit their
   kernels, but with empty bodies, which is most of the saving. Left out, so:
   FA kernels' real device code, other architectures, HIP/MUSA.
4. Per commit, in order: check it out, ``nice -n 19 cmake --build -j N``
   (timed; after the first it is incremental), then ``kernel-symbol-map build
   --commit SHA`` into ``--work/maps/SHA.json.gz``. The build folder is then
   copied to ``--work/snapshots/SHA`` (about 100 MB) so that a map can be made
   again later at that very commit, in the very same path, without rebuilding
   (``--remap``; automatically for a map without digests of this package's
   scheme or without evidence). The checkout for that gives the files it
   rewrites the commit's own date, so they are older than the objects built
   from them and the map's out-of-date check passes (their contents are what
   was compiled).
5. Per consecutive pair (base B, change C): synthetic recordings, one test
   per kernel of B's map (complete, of commit B); the files changed B..C
   (``git diff --name-only``); then

   * source mode: ``select --map B --recordings R --changed FILES --json``;
   * the same with only the files under ``src/ggml-cuda`` (what source mode
     could do without the change's host files, tests and other backends);
   * output mode: ``select --map C --base-map B --recordings R --changed FILES --json``,
     when ``select --help`` lists ``--base-map``, and the same with the CUDA files only.

Prints, per commit: the files changed, tests run of N in each mode, the
fallback code if any, and the rebuild time; and the first build's time, the
maps' sizes, and how many commits were replayed.

The default commits are five consecutive ggml commits touching
``src/ggml-cuda`` (August 2026), chosen because none of them, nor any commit
between them, changes a header every CUDA file includes (``common.cuh``,
``ggml.h``, ``ggml-backend.h``): each rebuild recompiles a few leaf ``.cu``
files and ``ggml-cuda.cu``, not the backend.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _run import checked  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
UPSTREAM = "https://github.com/ggml-org/ggml.git"
# Consecutive among ggml's commits that touch src/ggml-cuda (base first):
COMMITS = [
    "c035d792742a542ed72e7bd816f6175b8c56b72e",  # ci: onboard AMD ROCm CI (ggml-cuda.cu): the base build
    "c0011fe525567fa835af5801f2f7bf65bf4469c6",  # cuda: fix unused variable/function (ggml-cuda.cu, quantize.cu)
    "b64fb805e37feb9cd6c90ac7afbfffd03f819961",  # CUDA: fix thread/block count in quantized cpy (cpy.cu)
    "cf214b1d946ee17ae38681f16582de18ee5515b1",  # CUDA: fuse rms_norm + mul + rope (ggml-cuda.cu, rope.cu, rope.cuh)
    "24682d6c19515d4c189ce2a55aac0828be539fbe",  # ggml: require contiguous src for ROLL (ggml-cuda.cu)
]
CUBLAS = "nvidia-cublas==13.1.1.3"  # CUDA 13's cuBLAS; the toolkit here ships none
CUDA_DIR = "src/ggml-cuda/"


def log(message: str) -> None:
    print(f"bench_emitted_ggml: {message}", flush=True)


def run(command: list[object], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return checked("bench_emitted_ggml", command, **kwargs)


def git(src: Path, *args: str) -> str:
    return run(["git", "-C", src, *args]).stdout.strip()


def source(work: Path, mirror: Path | None, commits: list[str]) -> Path:
    src = work / "src"
    if not (src / ".git").exists():
        log(f"cloning ggml from {mirror or UPSTREAM} into {src}")
        run(["git", "clone", "--quiet", mirror or UPSTREAM, src])
    for commit in commits:
        if subprocess.run(["git", "-C", src, "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode:
            raise SystemExit(f"bench_emitted_ggml: commit {commit} is not in {src} (fetch it)")
    return src


def deps(work: Path) -> dict[str, Path]:
    """cuBLAS from PyPI and an empty libcuda.so: what configuring and linking ggml-cuda need here."""
    cublas = work / "deps" / "cublas"
    lib, include = cublas / "nvidia" / "cu13" / "lib", cublas / "nvidia" / "cu13" / "include"
    if not (lib / "libcublas.so.13").exists():
        log(f"installing {CUBLAS} into {cublas}")
        run(["nice", "-n", "19", PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--target", cublas, CUBLAS])
    stub = work / "deps" / "stubs" / "libcuda.so"
    if not stub.exists():
        stub.parent.mkdir(parents=True, exist_ok=True)
        (stub.parent / "empty.c").write_text("")
        run(["gcc", "-shared", "-o", stub, stub.parent / "empty.c"])
    return {"lib": lib, "include": include, "stub": stub}


def configure_command(src: Path, build: Path, found: dict[str, Path], archs: str = "80-real") -> list[object]:
    return ["nice", "-n", "19", "cmake", "-S", src, "-B", build, "-G", "Ninja",
            "-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={archs}", "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc",
            "-DCMAKE_BUILD_TYPE=Release", "-DGGML_BUILD_TESTS=OFF", "-DGGML_BUILD_EXAMPLES=OFF", "-DGGML_CUDA_FA=OFF",
            f"-DCUDA_cublas_LIBRARY={found['lib'] / 'libcublas.so.13'}",
            f"-DCUDA_cublasLt_LIBRARY={found['lib'] / 'libcublasLt.so.13'}",
            f"-DCUDA_cuda_driver_LIBRARY={found['stub']}",
            f"-DCMAKE_CUDA_FLAGS=-isystem {found['include']}"]


def load_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def load_map(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def digest_scheme() -> int | None:
    """The digest scheme this package writes (issue 27), or None before it had digests."""
    try:
        from kernel_symbol_map.mapformat.digests import SCHEME
    except ImportError:
        return None
    return SCHEME


def has_digests(doc: dict) -> bool:
    """Whether a map carries per-kernel device-code digests of the scheme this package compares."""
    return doc.get("digests") is not None and doc.get("digests") == digest_scheme()


def output_mode_exists() -> bool:
    proc = subprocess.run([PYTHON, "-m", "kernel_symbol_map", "select", "--help"], capture_output=True, text=True)
    return "--base-map" in proc.stdout


def make_map(work: Path, commit: str, fresh: bool) -> dict:
    out = work / "maps" / f"{commit}.json.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    proc = run([PYTHON, "-m", "kernel_symbol_map", "build", "--build-dir", work / "build", "--out", out,
                "--commit", commit, "--json", *(["--no-cache"] if fresh else [])], cwd=work / "src")
    seconds = time.perf_counter() - started
    summary = json.loads(proc.stdout)
    record = {"commit": commit, "seconds": round(seconds, 1), "bytes": out.stat().st_size,
              "digests": has_digests(load_map(out)), "summary": summary}
    (work / "maps" / f"{commit}.build.json").write_text(json.dumps(record, indent=1))
    log(f"mapped {commit[:10]} in {seconds:.0f} s: {out.stat().st_size} bytes, digests: {record['digests']}")
    return record


def snapshot(work: Path, commit: str) -> None:
    """Copy the build folder as it is at ``commit``, so a map can be made again there, in the same path."""
    target = work / "snapshots" / commit
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    run(["cp", "-a", "--reflink=auto", work / "build", target])


def checkout_as_built(src: Path, commit: str, touched: list[str]) -> None:
    """Check ``commit`` out for mapping a build of it made earlier: the files a checkout rewrites get
    ``commit``'s own date, older than every object built from them, so the map's out-of-date check (and
    ninja) see the tree as it was when that build ran; the contents are exactly what it compiled."""
    git(src, "checkout", "--quiet", "--detach", commit)
    when = int(git(src, "log", "-1", "--format=%ct", commit))
    for name in touched:
        path = src / name
        if path.is_file():
            os.utime(path, (when, when))


def remap_from_snapshot(work: Path, commit: str, live: str, touched: list[str]) -> dict:
    """Put ``commit``'s build folder back in ``work/build`` (the path its map names), map it, put the live one back."""
    build, aside, snap, src = work / "build", work / "build.live", work / "snapshots" / commit, work / "src"
    if commit == live:
        checkout_as_built(src, commit, touched)
        return make_map(work, commit, fresh=True)
    if not snap.exists():
        raise SystemExit(f"bench_emitted_ggml: no snapshot of {commit}'s build to map again (rebuild it)")
    checkout_as_built(src, commit, touched)
    build.rename(aside)
    snap.rename(build)
    try:
        return make_map(work, commit, fresh=True)
    finally:
        build.rename(snap)
        aside.rename(build)
        if live:
            checkout_as_built(src, live, touched)


def build_all(work: Path, src: Path, commits: list[str], jobs: int, remap: bool, archs: str = "80-real"
              ) -> dict[str, dict]:
    build, state = work / "build", work / "build-commit"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    (work / "builds").mkdir(parents=True, exist_ok=True)
    found = deps(work)
    want_digests = output_mode_exists() and digest_scheme() is not None
    records: dict[str, dict] = {}
    for i, commit in enumerate(commits):
        timing = work / "builds" / f"{commit}.json"
        mapped = work / "maps" / f"{commit}.json.gz"
        if timing.exists() and load_json(timing).get("returncode") == 0 and mapped.exists():
            records[commit] = load_json(timing)
            continue
        live = state.read_text().strip() if state.exists() else ""
        if timing.exists() and load_json(timing).get("returncode") == 0 and live == commit:
            make_map(work, commit, fresh=False)  # built, not yet mapped
            snapshot(work, commit)
            records[commit] = load_json(timing)
            continue
        if live and live != (commits[i - 1] if i else ""):
            log(f"the build folder is at {live[:10]}, not {commits[i - 1][:10] if i else '(none)'}: "
                f"{commit[:10]}'s rebuild time is not the one step's")
        git(src, "checkout", "--quiet", "--detach", commit)
        if not (build / "build.ninja").exists():
            from kernel_symbol_map.buildtree.fileapi import write_query

            write_query(build.resolve())
            log(f"configuring at {commit[:10]}")
            proc = run(configure_command(src, build, found, archs))
            (work / "logs" / "configure.log").write_text(proc.stdout + proc.stderr)
        kind = "full" if not live else "incremental"
        log(f"building {commit[:10]} ({kind}, -j{jobs}); log: {work / 'logs' / (commit + '.log')}")
        started = time.perf_counter()
        with open(work / "logs" / f"{commit}.log", "w") as out:
            rc = subprocess.run(["nice", "-n", "19", "cmake", "--build", build, f"-j{jobs}"], stdout=out,
                                stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - started
        steps = sum(1 for line in (work / "logs" / f"{commit}.log").read_text().splitlines()
                    if line.startswith("[") and "Building" in line)
        record = {"commit": commit, "kind": kind, "from": live or None, "returncode": rc,
                  "seconds": round(seconds, 1), "compiled": steps}
        timing.write_text(json.dumps(record, indent=1))
        if rc != 0:
            raise SystemExit(f"bench_emitted_ggml: building {commit} failed; see {work / 'logs' / (commit + '.log')}")
        state.write_text(commit)
        log(f"built {commit[:10]} in {seconds:.0f} s ({steps} objects compiled)")
        make_map(work, commit, fresh=False)
        snapshot(work, commit)
        records[commit] = record
    live = state.read_text().strip() if state.exists() else ""
    touched = sorted({f for b, c in zip(commits, commits[1:]) for f in git(src, "diff", "--name-only", b, c).split()})
    for commit in commits:
        info = load_json(work / "maps" / f"{commit}.build.json")
        if remap or (want_digests and not info.get("digests")) or not info.get("summary", {}).get("evidence"):
            why = "--remap" if remap else "the map holds no evidence" if info.get("digests") else "it has no digests"
            log(f"mapping {commit[:10]} again ({why})")
            remap_from_snapshot(work, commit, live, touched)
    return records


def recordings(work: Path, base: str) -> tuple[Path, int, dict[str, str]]:
    """One complete test per kernel of ``base``'s map, recorded at ``base``; the tests' kernels' sources."""
    doc = load_map(work / "maps" / f"{base}.json.gz")
    sources: dict[str, str] = {}
    for obj in doc["objects"]:
        for symbol in obj.get("symbols", []):
            sources.setdefault(symbol, obj.get("source", "?"))
    path = work / "recordings" / f"{base}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    owner: dict[str, str] = {}
    with open(path, "w") as out:
        for n, kernel in enumerate(sorted(sources)):
            test = f"t{n:05d}:{Path(sources[kernel]).name}"
            owner[test] = sources[kernel]
            out.write(json.dumps({"test": test, "kernels": [kernel], "complete": True, "commit": base}) + "\n")
    return path, len(sources), owner


def select(src: Path, maps: list[str], base_map: str | None, recs: Path, changed: list[str]) -> dict:
    command: list[object] = [PYTHON, "-m", "kernel_symbol_map", "select", "--source-root", src]
    for m in maps:
        command += ["--map", m]
    if base_map:
        command += ["--base-map", base_map]
    command += ["--recordings", recs, "--changed", *changed, "--json"]
    started = time.perf_counter()
    proc = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=src)
    seconds = time.perf_counter() - started
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}", "seconds": seconds}
    doc = json.loads(proc.stdout)
    doc["seconds"] = seconds
    return doc


def describe(doc: dict | None, total: int) -> str:
    if doc is None:
        return "-"
    if "error" in doc:
        return "error"
    return f"{len(doc['run'])}/{total}" + (f" [{doc['fallback']}]" if doc.get("fallback") else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=ROOT / ".cache" / "ggml")
    ap.add_argument("--commits", nargs="+", default=COMMITS, help="consecutive commits, base first (full SHAs)")
    ap.add_argument("--mirror", type=Path, help="a local git directory to clone ggml from (default: GitHub)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--select-only", action="store_true", help="build nothing: use the maps already made")
    ap.add_argument("--remap", action="store_true", help="make every map again from its build snapshot")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--archs", default="80-real", help="CMAKE_CUDA_ARCHITECTURES (80: sm_80 code and its PTX)")
    ap.add_argument("--build-only", action="store_true",
                    help="build and map the first commit, for bench_cold.py's --tree; select nothing")
    args = ap.parse_args()
    work = args.work.resolve()
    if len(args.commits) < 2 and not args.build_only:
        ap.error("--commits needs a base and at least one change")
    src = source(work, args.mirror, args.commits)
    commits = [git(src, "rev-parse", c) for c in args.commits]
    if args.build_only:
        build_all(work, src, commits[:1], args.jobs, args.remap, args.archs)
        return 0
    if args.select_only:
        records = {c: load_json(work / "builds" / f"{c}.json") for c in commits}
    else:
        records = build_all(work, src, commits, args.jobs, args.remap, args.archs)
    missing = [c for c in commits if not (work / "maps" / f"{c}.json.gz").exists()]
    if missing:
        raise SystemExit(f"bench_emitted_ggml: no map for {', '.join(c[:10] for c in missing)}")
    output_mode = output_mode_exists()

    rows = []
    for base, change in zip(commits, commits[1:]):
        changed = git(src, "diff", "--name-only", base, change).splitlines()
        cuda = [f for f in changed if f.startswith(CUDA_DIR)]
        recs, total, owner = recordings(work, base)
        base_map, change_map = str(work / "maps" / f"{base}.json.gz"), str(work / "maps" / f"{change}.json.gz")
        source_doc = select(src, [base_map], None, recs, changed)
        cuda_doc = select(src, [base_map], None, recs, cuda) if cuda else None
        output_doc = select(src, [change_map], base_map, recs, changed) if output_mode else None
        output_cuda_doc = select(src, [change_map], base_map, recs, cuda) if output_mode and cuda else None
        reached = {}
        for name, doc in (("source", source_doc), ("source, cuda files", cuda_doc), ("output", output_doc),
                          ("output, cuda files", output_cuda_doc)):
            if doc and "run" in doc and not doc.get("fallback"):
                by: dict[str, int] = {}
                for test in doc["run"]:
                    by[owner.get(test, "?")] = by.get(owner.get(test, "?"), 0) + 1
                reached[name] = dict(sorted(by.items(), key=lambda kv: -kv[1]))
        rows.append({"base": base, "change": change, "subject": git(src, "log", "-1", "--format=%s", change),
                     "changed": changed, "cuda_changed": cuda, "tests": total,
                     "rebuild_s": records.get(change, {}).get("seconds"),
                     "compiled": records.get(change, {}).get("compiled"),
                     "source": source_doc, "source_cuda": cuda_doc, "output": output_doc,
                     "output_cuda": output_cuda_doc, "reached": reached})

    first = records.get(commits[0], {})
    print(f"ggml: {len(commits) - 1} commits replayed on top of {commits[0][:10]}; first build "
          f"{first.get('seconds', float('nan')) / 60:.1f} min at -j{args.jobs} ({first.get('compiled')} objects)")
    for commit in commits:
        info = load_json(work / "maps" / f"{commit}.build.json")
        doc = load_map(work / "maps" / f"{commit}.json.gz")
        kernels = {s for o in doc["objects"] for s in o.get("symbols", [])}
        print(f"  map {commit[:10]}: {(work / 'maps' / f'{commit}.json.gz').stat().st_size / 1e6:.2f} MB gz, "
              f"{len(doc['objects'])} objects, {len(kernels)} kernels, mapped in {info.get('seconds', '?')} s, "
              f"digests: {info.get('digests')}")
    if not output_mode:
        print("  output mode: select has no --base-map yet; rerun once it does")
    print("rebuild: seconds/objects compiled; each mode: tests run of the base's, one test per kernel [fallback]")
    print(f"{'change':<11} {'files':>5} {'cuda':>4} {'rebuild':>8}  {'source mode':<24} "
          f"{'source, cuda files':<24} {'output mode':<24} {'output, cuda files':<24}")
    for row in rows:
        rebuild = f"{row['rebuild_s']:.0f} s/{row['compiled']}" if row["rebuild_s"] is not None else "?"
        print(f"{row['change'][:10]:<11} {len(row['changed']):>5} {len(row['cuda_changed']):>4} {rebuild:>8}  "
              f"{describe(row['source'], row['tests']):<24} {describe(row['source_cuda'], row['tests']):<24} "
              f"{describe(row['output'], row['tests']):<24} {describe(row['output_cuda'], row['tests']):<24}")
        print(f"    {row['subject'][:100]}")
        print(f"    cuda files: {', '.join(f[len(CUDA_DIR):] for f in row['cuda_changed']) or '-'}")
        for name, by in row["reached"].items():
            top = ", ".join(f"{Path(s).name} {n}" for s, n in list(by.items())[:6])
            print(f"    {name} runs tests of: {top}{' ...' if len(by) > 6 else ''}")
        for name in ("source", "source_cuda", "output", "output_cuda"):
            doc = row[name]
            if doc and "error" in doc:
                print(f"    {name}: {doc['error']}")
            elif doc and (doc.get("fallback") or doc.get("mode_why")):
                print(f"    {name}: {doc.get('fallback') or ''} {doc.get('mode_why') or doc.get('fallback_why', '')}"
                      [:300])
            if doc and doc.get("emitted"):
                kinds: dict[str, int] = {}
                for how in doc["emitted"]["kernels"].values():
                    kinds[how.split()[0]] = kinds.get(how.split()[0], 0) + 1
                hosts = doc["emitted"]["hosts"]
                print(f"    {name}: {len(doc['emitted']['kernels'])} of {doc['emitted']['compared']} kernels' device "
                      f"code differs {kinds or ''}; host code differs in {len(hosts)} objects "
                      f"({', '.join(Path(h['source']).name for h in hosts[:6])}{' ...' if len(hosts) > 6 else ''})")
        for mode, base_mode in (("output", "source"), ("output_cuda", "source_cuda")):
            if row[mode] and row[base_mode] and "run" in row[mode] and "run" in row[base_mode]:
                extra = set(row[mode]["run"]) - set(row[base_mode]["run"])
                if extra:
                    print(f"    NOTE: {mode} runs {len(extra)} tests {base_mode} does not, e.g. {sorted(extra)[:3]}")
    if args.json:
        args.json.write_text(json.dumps({"commits": commits, "builds": records, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
