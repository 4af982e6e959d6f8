"""Issues 10 and 22's fuzz campaign: mutated inputs through every reader, with atheris (libFuzzer).

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python bench/fuzz.py [--runs 100000] [--only objects map ...]
    .venv/bin/python bench/fuzz.py --cli 1000       # every subcommand that reads a map or a recording
    .venv/bin/python bench/fuzz.py --make-seeds     # rebuild tests/data/fuzz (needs nvcc, clang-19)

The text and JSON targets (map, jsonl, text, build_ninja) mutate with the
structure of their format half of the time (:mod:`_mutators`: a JSON value
swapped for another type at any path, deep nesting, huge numbers, NUL and
lone surrogates, ``include`` cycles, very long and long-continued lines), and
byte by byte the other half. The map and recording targets then go through
everything a consumer does with them: load, reach, select, show's summary,
merge and diff.

Each target runs in its own process, coverage-guided from the seed corpus in
``tests/data/fuzz/<target>/``. A crash is any exception other than this
package's error types (device readers: any exception at all, since
``read_kernels`` never raises on bad input); a hang is an input that takes
over 5 s. libFuzzer stops at the first of either and writes it to
``.cache/bench/fuzz/<target>/``; copy it into ``tests/data/fuzz/<target>/``
and ``tests/test_fuzz_corpus.py`` replays it forever after. Prints, per
target: inputs run, speed, crashes, hangs, peak memory.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "tests" / "data" / "fuzz"
WORK = ROOT / ".cache" / "bench" / "fuzz"
TARGETS = ("objects", "map", "text", "jsonl", "nsys", "ninja_deps", "depfile", "build_ninja")
RSS_LIMIT_MB = 512  # Python, atheris and the largest seed's working set stay far below
MAX_LEN = 1 << 20  # inputs up to 1 MiB: long lines and deep nesting need room


def _read_object(path: Path) -> Any:
    """What ``build`` reads of an object: its kernels, then its images' sizes (issue 21)."""
    from kernel_symbol_map.errors import FormatError
    from kernel_symbol_map.readers.devicecode import read_kernels
    from kernel_symbol_map.readers.sizes import measure

    result = read_kernels(path)
    try:
        measure(path)
    except FormatError:
        pass  # the object keeps its kernels and has no sizes
    return result


def _reader(target: str):  # noqa: ANN202 - returns the reader of one file, typed per target
    """The reader ``target`` fuzzes: a function of a file path that may raise only our errors."""
    if target == "objects":
        return _read_object
    if target == "map":
        return _consume_map
    if target in ("text", "jsonl", "nsys"):
        return _consume_recording
    if target == "ninja_deps":
        from kernel_symbol_map.buildtree.ninjadeps import NinjaDeps

        return lambda p: NinjaDeps(p, base=Path("/b"))
    if target == "depfile":
        from kernel_symbol_map.buildtree.makedeps import read_depfile

        return lambda p: read_depfile(p, "a.o")
    if target == "build_ninja":
        return _consume_manifest
    raise SystemExit(f"unknown target {target}")


def _consume_map(path: Path) -> None:
    """Everything a consumer does with a map."""
    from kernel_symbol_map import mapformat
    from kernel_symbol_map.cli.diffmaps import compare
    from kernel_symbol_map.cli.show import summary
    from kernel_symbol_map.consumer.size import sizereport, treemap
    from kernel_symbol_map.consumer.maps.canonical import Canonical
    from kernel_symbol_map.consumer.maps.kernelmap import kernels_named, load
    from kernel_symbol_map.consumer.select.recordings import Recording
    from kernel_symbol_map.consumer.select.selection import Options, StaticRules, select

    kmap = load(path)
    canonical = Canonical(path.parent, [path.parent])
    kmap.reach("csrc/a.cu", "include/h.cuh", "$BUILD/gen/x.cu", canonical=canonical)
    kmap.sources_for("_Z1kv")
    kernels_named(kmap, "k")
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": ["t"]}]})
    recordings = [Recording("t", frozenset({"_Z1kv"}), True, kmap.commit, "fuzz")]
    for whole in (False, True):
        select([kmap, kmap], recordings, ["csrc/a.cu", "include/h.cuh"],
               options=Options(rules=rules, whole_target=whole, canonical=canonical)).to_json()
    summary(kmap.document, 3)
    mapformat.merge([kmap.document, kmap.document], ["a", "b"])
    compare(kmap, kmap)
    found = sizereport.from_map(kmap.document, str(path)).pieces  # size: sums, duplicates, a diff, the picture
    for by in sizereport.BY:
        sizereport.rows(found, by)
    sizereport.duplicates(found)
    sizereport.changes(found, found[: len(found) // 2], "source")
    treemap.svg(found, "fuzz")


def _consume_recording(path: Path) -> None:
    from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
    from kernel_symbol_map.consumer.select.recordings import read_each
    from kernel_symbol_map.consumer.select.selection import select

    recordings, unreadable, _doubts = read_each([path], "c" * 40)
    doc = {"version": 1, "commit": "c" * 40, "cuda": "", "generated_at": "", "build_dirs": [], "incomplete": False,
           "errors": [], "stats": {}, "objects": [{"source": "csrc/a.cu", "target": "t", "object": "a.o",
                                                  "device": True, "symbols": ["_Z1kv"], "deps": ["csrc/a.cu"]}]}
    selection = select(KernelMap(doc), recordings, ["csrc/a.cu"], unreadable=unreadable)
    selection.to_json()
    selection.summary()


def _consume_manifest(path: Path) -> None:
    """A build tree's build.ninja through every reader of it: statements, objects, configure inputs, custom commands."""
    from kernel_symbol_map.buildtree import generatorfiles, ninjafile, thirdparty
    from kernel_symbol_map.errors import BuildTreeError

    ninjafile.read(path, path.parent)
    for read in (lambda: generatorfiles.from_ninja(path.parent, "Release"),
                 lambda: generatorfiles.configure_inputs(path.parent, "Ninja"),
                 lambda: thirdparty.custom_compiles(path.parent, "Ninja")):
        try:
            read()
        except BuildTreeError:
            pass


SUFFIX = {"objects": ".o", "map": ".json.gz", "text": ".txt", "jsonl": ".jsonl", "nsys": ".sqlite",
          "ninja_deps": "", "depfile": ".d", "build_ninja": ".ninja"}


def input_name(target: str) -> str:
    """The name an input is written under: a manifest is build.ninja, so that it can include itself."""
    return "build.ninja" if target == "build_ninja" else f"input{SUFFIX[target]}"


def prepare(target: str, data: bytes) -> bytes:
    """The bytes a reader gets for one input: maps are gzipped, so that mutations reach the JSON."""
    if target == "map" and data[:1] != b"\x1f":
        return gzip.compress(data, mtime=0)
    return data


def worker(target: str, libfuzzer_args: list[str]) -> None:
    """Runs inside the fuzzing process: instrument the package, then fuzz one reader."""
    import atheris

    read = _reader(target)
    from kernel_symbol_map.errors import KernelSymbolMapError

    # The editable install's loader defeats instrument_imports(); instrument what is loaded instead.
    atheris.instrument_all()

    scratch = Path(tempfile.mkdtemp(prefix=f"ksm-fuzz-{target}-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    path = scratch / input_name(target)

    from _mutators import MUTATORS

    def one_input(data: bytes) -> None:
        path.write_bytes(prepare(target, data))
        try:
            result = read(path)
        except KernelSymbolMapError:
            return
        if target == "objects" and result.error is None and not isinstance(result.symbols, tuple):
            raise AssertionError("read_kernels returned no symbol tuple")

    structured = MUTATORS.get(target)

    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        """Half the time by the format's structure, half byte by byte (libFuzzer's own mutations)."""
        if structured is not None and seed % 2:
            return structured(data, seed, max_size)[:max_size]
        return atheris.Mutate(data, max_size)

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input, custom_mutator=mutate)
    atheris.Fuzz()


def campaign(target: str, runs: int) -> dict[str, object]:
    seeds = SEEDS / target
    work = WORK / target
    corpus = work / "corpus"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(seeds, corpus)
    command = [sys.executable, __file__, "--worker", target, "--", str(corpus), f"-runs={runs}", "-timeout=5",
               f"-rss_limit_mb={RSS_LIMIT_MB}", f"-max_len={MAX_LEN}", "-print_final_stats=1",
               f"-artifact_prefix={work}/", "-seed=1"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    log = proc.stdout + proc.stderr
    (work / "log.txt").write_text(log)
    done = re.search(r"Done (\d+) runs in (\d+) second", log)
    peak = re.search(r"stat::peak_rss_mb:\s+(\d+)", log)
    crashes = sorted(p.name for p in work.glob("crash-*")) + sorted(p.name for p in work.glob("oom-*"))
    hangs = sorted(p.name for p in work.glob("timeout-*"))
    return {"target": target, "runs": int(done.group(1)) if done else 0,
            "seconds": int(done.group(2)) if done else 0, "crashes": crashes, "hangs": hangs,
            "peak_mb": int(peak.group(1)) if peak else 0, "rc": proc.returncode}


# The CLI end to end: every subcommand that reads a map or a recording. Exit codes the README documents:
# 0, 1 (one ERROR line: bad input, a difference, a miss) and 2 (usage); select's fallbacks exit 0.
EXIT_CODES = frozenset({0, 1, 2})
SHA = b"c" * 40  # the sound map's and recording's commit: select compares them
CHANGED = ["--changed", "csrc/a.cu", "include/h.cuh"]


def cli_cases(kind: str, bad: Path, good_map: Path, good_recording: Path, out: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) of each command that reads ``bad``, a malformed map or recording (``kind``)."""
    if kind == "map":
        return [("show", ["show", str(bad)]), ("show --json", ["show", "--json", str(bad)]),
                ("query", ["query", str(bad), "csrc/a.cu", "_Z1kv"]),
                ("query --json", ["query", "--json", str(bad), "include/h.cuh", "k"]),
                ("select", ["select", "--map", str(bad), "--recordings", str(good_recording), *CHANGED]),
                ("select --json", ["select", "--json", "--whole-target", "--map", str(bad), "--recordings",
                                   str(good_recording), *CHANGED]),
                ("merge", ["merge", str(out / "merged.json.gz"), str(good_map), str(bad)]),
                ("diff", ["diff", str(good_map), str(bad)]), ("diff --json", ["diff", "--json", str(bad), str(good_map)]),
                ("validate", ["validate", str(bad)]), ("validate --json", ["validate", "--json", str(bad)]),
                ("size", ["size", str(bad)]), ("size --json", ["size", "--json", "--by", "family", str(bad)]),
                ("size diff", ["size", str(good_map), str(bad)])]
    if kind == "objects":
        return [("size", ["size", str(bad)]), ("size --json", ["size", "--json", "--by", "arch", str(bad)])]
    return [("select", ["select", "--map", str(good_map), "--recordings", str(bad), *CHANGED]),
            ("select --json", ["select", "--json", "--map", str(good_map), "--recordings", str(bad), *CHANGED])]


def run_cli(argv: list[str]) -> tuple[int | None, str]:
    """``kernel-symbol-map ARGV`` in this process: (exit code, stdout and stderr); None with the traceback if it raised."""
    import contextlib
    import io
    import traceback

    from kernel_symbol_map.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            code: int | None = main(argv)
        except SystemExit as e:  # argparse's own exits
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - a traceback is the finding
            return None, buffer.getvalue() + traceback.format_exc()
    return code, buffer.getvalue()


def cli_problem(name: str, code: int | None, output: str) -> str | None:
    """Why one run is a crash: a traceback, an undocumented exit code, or a select that did not fall back."""
    if code is None or "Traceback (most recent call last)" in output:
        return f"{name}: a traceback\n{output[-2000:]}"
    if code not in EXIT_CODES:
        return f"{name}: exit {code}, not one of {sorted(EXIT_CODES)}"
    if name.startswith("select") and code != 0:
        return f"{name}: exit {code}; bad evidence falls back with exit 0\n{output[-2000:]}"
    return None


def _malformed(kind: str, seeds: list[bytes], i: int) -> bytes:
    """Input ``i`` of the CLI sample: a seed (mostly the sound first one) changed by its format's structure, or
    byte by byte (odd ``i``)."""
    import random

    from _mutators import MUTATORS

    rng = random.Random(i)
    data = seeds[0] if rng.random() < 0.75 else rng.choice(seeds)  # mostly one change away from a sound input
    if data[:1] == b"\x1f":
        data = gzip.decompress(data)
    if i % 2 == 0:
        return MUTATORS[kind](data, i)
    data = bytearray(data)
    for _ in range(rng.choice([1, 2, 8])):
        at = rng.randrange(len(data) + 1)
        choice = rng.randrange(4)
        if choice == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1:
            del data[at:]
        elif choice == 2:
            data[at:at] = rng.choice([b"\x00", b"\xff", b"\\ud800", b'"', b"[", b"}", b",", b"9" * 30, b"\n"])
        else:
            data[at:at] = data[at:at + rng.randrange(1, 64)] * rng.choice([2, 100])
    return bytes(data)


def cli_sample(count: int) -> int:
    """``count`` malformed inputs through each CLI command that reads them; prints a table, returns 1 on any crash."""
    import collections
    import time

    scratch = Path(tempfile.mkdtemp(prefix="ksm-fuzz-cli-"))
    good_map, good_recording = scratch / "good.json.gz", scratch / "good.jsonl"
    sound = {kind: (SEEDS / name).read_bytes().replace(b'"commit": "c"', b'"commit": "%s"' % SHA)
             for kind, name in (("map", "map/map.json"), ("jsonl", "jsonl/r.jsonl"), ("text", "text/test_a.txt"))}
    good_map.write_bytes(prepare("map", sound["map"]))
    good_recording.write_bytes(sound["jsonl"])
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    problems: list[str] = []
    started = time.perf_counter()
    for kind in ("map", "jsonl", "text"):
        seeds = [sound[kind], *(p.read_bytes() for p in sorted((SEEDS / kind).iterdir()) if p.stat().st_size < 1 << 20)]
        bad = scratch / kind / input_name(kind)
        bad.parent.mkdir()
        for i in range(count):
            bad.write_bytes(prepare(kind, _malformed(kind, seeds, i)))
            for name, argv in cli_cases(kind, bad, good_map, good_recording, scratch):
                code, output = run_cli(argv)
                row = tally[f"{name} ({kind})" if kind != "map" else name]
                row["inputs"] += 1
                row[f"exit {code}"] += 1
                if name.startswith("select") and "every test runs" in output:
                    row["fell back"] += 1
                problem = cli_problem(name, code, output)
                if problem:
                    row["crashes"] += 1
                    if len(problems) < 5:
                        kept = WORK / "cli" / f"crash-{kind}-{i}{SUFFIX[kind]}"
                        kept.parent.mkdir(parents=True, exist_ok=True)
                        kept.write_bytes(bad.read_bytes())
                        problems.append(f"{kept}: {problem}")
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"{'command':28} {'inputs':>7} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7} {'fell back':>9} {'crashes':>8}")
    for name, row in tally.items():
        print(f"{name:28} {row['inputs']:>7} {row['exit 0']:>7} {row['exit 1']:>7} {row['exit 2']:>7} "
              f"{row['fell back'] if name.startswith('select') else '':>9} {row['crashes']:>8}")
    print(f"{sum(r['inputs'] for r in tally.values())} runs in {time.perf_counter() - started:.0f} s; "
          f"crashes (a traceback, an exit code not in {sorted(EXIT_CODES)}, a select that did not exit 0): "
          f"{sum(r['crashes'] for r in tally.values())}")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def _seed_map(**changes: object) -> dict[str, object]:
    doc = json.loads((SEEDS / "map" / "map.json").read_text())
    doc.update(changes)
    return doc


def found() -> dict[str, bytes]:
    """Issue 22's crashes, rebuilt from its report: each replayed by tests/test_fuzz_corpus.py forever after.

    Before the fix (commit 9c5dd7c; ``bench/replay_found.py --python`` replays
    them against any install), ``crash-*`` printed a traceback, ``hang-*`` ran
    over 10 s and ``oom-*`` took over 2 GiB. ``bad-*`` are malformed inputs of
    the same kinds that version already refused: kept, so that it stays so.
    """
    entry = json.loads((SEEDS / "map" / "map.json").read_text())["objects"][0]

    def obj(**changes: object) -> list[dict[str, object]]:
        return [{**entry, **changes}]

    def no_evidence(**error: object) -> dict[str, object]:
        return _seed_map(incomplete=True, reason="1 object unreadable", errors=[error], objects=[])

    maps = {
        "crash-error-entry-without-error": no_evidence(object="b.o", source="csrc/b.cu"),
        "bad-error-source-int": no_evidence(object="b.o", source=7, error="unreadable"),
        "bad-error-source-list": no_evidence(object="b.o", source=["csrc/b.cu"], error="unreadable"),
        "crash-unity-source-int": _seed_map(objects=obj(unity_sources=["csrc/a.cu", 7])),
        "crash-build-dir-int": _seed_map(build_dirs=["build", 7]),
        "crash-nul-path": _seed_map(objects=obj(deps=["csrc/a.cu", "include/h\0.cuh"])),
        "crash-lone-surrogate-path": _seed_map(objects=obj(deps=["csrc/a.cu", "include/h\ud800.cuh"])),
        "bad-source-int": _seed_map(objects=obj(source=7)),
        "bad-dep-int": _seed_map(objects=obj(deps=["csrc/a.cu", 7])),
        "bad-symbol-list": _seed_map(objects=obj(symbols=[["_Z1kv"]])),
    }
    out = {f"map/{name}.json": json.dumps(doc).encode() for name, doc in maps.items()}
    out["map/bad-non-utf8-path.json"] = json.dumps(_seed_map()).encode().replace(b"h.cuh", b"h\xff.cuh")
    # nested 20,000 deep, spaced so that it passes the count of containers and reaches the parser
    out["map/crash-nesting.json"] = json.dumps(_seed_map(stats="@")).encode().replace(b'"@"', (b"[" + b" " * 16) * 20_000)
    bomb = b'{"version": 1, "objects": [' + b"{}," * 40_000_000 + b"{}]}"  # 120 MB of JSON, 40 million dicts
    out["map/oom-container-bomb.json.gz"] = gzip.compress(bomb, compresslevel=9, mtime=0)
    record = b'{"test": "t", "kernels": ["_Z1kv"], "complete": true, "commit": "c"'
    out["jsonl/crash-huge-number.jsonl"] = record + b', "dropped": ' + b"9" * 5000 + b"}\n"
    out["jsonl/crash-nesting.jsonl"] = b"[" * 100_000 + b"\n"
    out["jsonl/bad-record-not-object.jsonl"] = b'["t", ["_Z1kv"]]\n'
    out["jsonl/bad-kernels-not-list.jsonl"] = b'{"test": "t", "kernels": 5, "complete": true}\n'
    out["text/crash-huge-footer.txt"] = b"# test=t\n_Z1kv\n# end records=" + b"9" * 5000 + b" unique=1 dropped=0\n"
    out["text/crash-huge-dropped.txt"] = b"# test=t\n_Z1kv\n# dropped=" + b"9" * 5000 + b"\n"
    statements = b"".join(b"build o%d.o: CUDA_COMPILER__t_Release s%d.cu\n" % (i, i) for i in range(3000))
    out["build_ninja/crash-include-self.ninja"] = b"build a.o: r a.cu\ninclude build.ninja\n"
    out["build_ninja/crash-subninja-self-spelled-otherwise.ninja"] = b"build a.o: r a.cu\nsubninja ./build.ninja\n"
    out["build_ninja/crash-nul-include.ninja"] = b"include a\0b.ninja\n"
    out["build_ninja/hang-include-self-large.ninja"] = statements + b"include build.ninja\n"
    out["build_ninja/bad-long-continued-line.ninja"] = b"build a.o: r" + b" x $\n" * 200_000 + b"\n"
    out["build_ninja/bad-escapes.ninja"] = b"build a$$.o: r " + b"$$$ $:" * 150_000 + b"\n"
    return out


def write_found() -> None:
    for name, data in found().items():
        (SEEDS / name).write_bytes(data)
    print(f"{len(found())} found crashes written to {SEEDS}")


def make_seeds() -> None:
    """The committed seed corpus: small real inputs of every format, made by real tools."""
    sys.path.insert(0, str(ROOT / "tests"))
    import nsys
    from toolchains import DATA

    from kernel_symbol_map import mapformat
    from kernel_symbol_map.buildtree.toolchain import find_nvcc

    for t in TARGETS:
        (SEEDS / t).mkdir(parents=True, exist_ok=True)
    nvcc = find_nvcc() or "nvcc"
    objects = SEEDS / "objects"
    sm80 = ["-gencode=arch=compute_80,code=sm_80"]
    for name, args in {
        "cuda.o": ["-c", "k.cu", *sm80, "--compress-mode=none"],
        "cuda_zstd.o": ["-c", "k.cu", *sm80, "--compress-mode=size"],
        "cuda_lz4.o": ["-c", "k.cu", *sm80, "--compress-mode=speed"],
        "cuda_rdc.o": ["-c", "dp.cu", "-rdc=true", *sm80, "--compress-mode=none"],
        "cuda_ptx.o": ["-c", "k2.cu", "-gencode=arch=compute_90,code=compute_90"],
        "k.cubin": ["-cubin", "k2.cu", "-arch=sm_80"],
    }.items():
        subprocess.run([nvcc, *args, "-o", str(objects / name)], cwd=DATA, check=True)
    subprocess.run(["ar", "rc", str(objects / "lib.a"), str(objects / "cuda.o"), str(objects / "cuda_rdc.o")],
                   check=True)
    clang = shutil.which("clang-19") or shutil.which("clang++-19")
    if clang:
        bare = ["-x", "hip", "-nogpulib", "-nogpuinc", "-c", "h_bare.hip", "--offload-arch=gfx90a"]
        subprocess.run([clang, *bare, "-o", str(objects / "hip.o")], cwd=DATA, check=True)
        subprocess.run([clang, *bare, "--offload-compress", "-o", str(objects / "hip_zstd.o")], cwd=DATA, check=True)
        subprocess.run([clang, *bare, "-fgpu-rdc", "-o", str(objects / "hip_rdc.o")], cwd=DATA, check=True)
    doc = {"version": 1, "commit": "c", "cuda": "13.0", "generated_at": "", "build_dirs": ["build"],
           "incomplete": False, "errors": [], "stats": {},
           "objects": [{"source": "csrc/a.cu", "target": "t", "object": "a.o", "device": True,
                        "symbols": ["_Z1kv"], "deps": ["csrc/a.cu", "include/h.cuh"]}]}
    (SEEDS / "map" / "map.json").write_text(json.dumps(doc))
    mapformat.write(doc, SEEDS / "map" / "map.json.gz")
    (SEEDS / "text" / "test_a.txt").write_text("# test=test_a\n_Z1kv\n# dropped=0\n# end records=3 unique=1 dropped=0\n")
    (SEEDS / "jsonl" / "r.jsonl").write_text(json.dumps({"test": "t", "kernels": ["_Z1kv"], "complete": True,
                                                         "commit": "c"}) + "\n")
    nsys.sequential(SEEDS / "nsys" / "run.sqlite", {"test_a": ["_Z1kv", "_Z1jv"], "test_b": ["_Z1kv"]})
    paths = [b"a.o", b"/src/a.cu", b"/src/h.cuh"]
    log = bytearray(b"# ninjadeps\n" + struct.pack("<i", 4))
    for i, p in enumerate(paths):
        padded = p + b"\0" * (-len(p) % 4)
        log += struct.pack("<I", len(padded) + 4) + padded + struct.pack("<I", ~i & 0xFFFFFFFF)
    body = struct.pack("<iII", 0, 12, 0) + struct.pack("<2i", 1, 2)
    log += struct.pack("<I", len(body) | 0x8000_0000) + body
    (SEEDS / "ninja_deps" / ".ninja_deps").write_bytes(bytes(log))
    (SEEDS / "depfile" / "a.o.d").write_text("a.o: /src/a.cu \\\n  /src/include\\ dir/h.cuh /src/b.cuh\n")
    (SEEDS / "build_ninja" / "build.ninja").write_text(
        "ninja_required_version = 1.5\n"
        "build cmake_object_order_depends_target_t: phony || CMakeFiles/t.dir\n"
        "build CMakeFiles/t.dir/a.cu.o: CUDA_COMPILER__t_Release /src/a$ b.cu || cmake_object_order_depends_target_t\n"
        "  DEP_FILE = CMakeFiles/t.dir/a.cu.o.d\n  OBJECT_DIR = CMakeFiles/t.dir\n"
        "build libt.so: CUDA_SHARED_LIBRARY_LINKER__t_Release CMakeFiles/t.dir/a.cu.o $\n    | /usr/lib/x.so\n")
    print(f"seeds written to {SEEDS}")
    write_found()


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[4:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100_000, help="inputs per target (default 100,000)")
    ap.add_argument("--only", nargs="+", choices=TARGETS, default=list(TARGETS))
    ap.add_argument("--make-seeds", action="store_true", help="rebuild the seed corpus in tests/data/fuzz")
    ap.add_argument("--found", action="store_true", help="rewrite only issue 22's crashes in tests/data/fuzz")
    ap.add_argument("--cli", type=int, metavar="N", help="N malformed maps and recordings through each CLI command")
    args = ap.parse_args()
    if args.cli:
        return cli_sample(args.cli)
    if args.make_seeds or args.found:
        make_seeds() if args.make_seeds else write_found()
        return 0
    failed = False
    print(f"{'target':12} {'inputs':>8} {'seconds':>8} {'per s':>7} {'crashes':>8} {'hangs':>6} {'peak MB':>8}")
    for target in args.only:
        r = campaign(target, args.runs)
        rate = r["runs"] / r["seconds"] if r["seconds"] else float(r["runs"])
        print(f"{target:12} {r['runs']:>8} {r['seconds']:>8} {rate:>7.0f} {len(r['crashes']):>8} "
              f"{len(r['hangs']):>6} {r['peak_mb']:>8}", flush=True)
        for name in [*r["crashes"], *r["hangs"]]:
            print(f"    {WORK / target / name}")
        failed |= bool(r["crashes"] or r["hangs"] or r["rc"] or r["runs"] < args.runs)
    print(f"budget: peak memory < {RSS_LIMIT_MB} MB; every target ran its inputs with no crash and no hang: "
          f"{'NO' if failed else 'yes'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
