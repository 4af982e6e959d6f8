"""Which host functions a real commit changed: the objects it touches, built before and after it in two folders.

    .venv/bin/python bench/bench_host_diff.py --repo GITDIR --commit C [--commit C2 ...] [--project ggml|plain]
                     [--work .cache/hostdiff] [--cmake-arg ARG ...]

Opt-in, never part of ``scripts/test``. For each commit:

1. Two clones of ``--repo``, in folders of different lengths (``x/`` and
   ``y-a-second-runner-with-a-longer-folder/``): the commit's parent checked out in the first, the commit
   in the second, each configured as a CI build with host coverage would compile it (ggml as
   ``bench_emitted_ggml.py`` configures it, plus ``-ffunction-sections`` for C, C++ and CUDA's host code).
2. Only the objects compiled from the files the commit changed are built (their targets from
   ``compile_commands.json``): a whole ggml CUDA build is 45 minutes here, one of its objects a few.
3. Each object's host code by parts (``readers.hostfunctions``, each build's folders masked as ``build``
   masks them), compared: the functions whose digests differ, by demangled name, and whether its data or a
   static initialiser differs. ``--noise`` builds the commit in the first folder too, after, and says what
   differs between the two folders' builds of one commit (must be nothing).

This is the granularity ``select``'s function scope works at; how many tests it runs depends on which
tests ran those functions, which only recordings of a coverage build say (for ggml's CUDA backend, on a
GPU).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE)]
from _run import checked  # noqa: E402

import regex  # noqa: E402

from kernel_symbol_map._unitnames import host_function  # noqa: E402
from kernel_symbol_map.consumer.select.emitted import compare_parts  # noqa: E402
from kernel_symbol_map.consumer.maps.names import full  # noqa: E402
from kernel_symbol_map.mapformat import digests as map_digests  # noqa: E402
from kernel_symbol_map.producer.extract import _DEVICE_SECTIONS  # noqa: E402
from kernel_symbol_map.readers._blob import OpenFile  # noqa: E402
from kernel_symbol_map.readers.elf import ElfFile  # noqa: E402
from kernel_symbol_map.readers.folders import Folders  # noqa: E402
from kernel_symbol_map.readers.hostfunctions import HostParts, host_parts  # noqa: E402

FOLDERS = ("x", "y-a-second-runner-with-a-longer-folder")
SECTIONS = "-ffunction-sections"


def log(message: str) -> None:
    print(f"bench_host_diff: {message}", flush=True)


def run(command: list[object], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return checked("bench_host_diff", command, **kwargs)


def configure_args(project: str, work: Path, extra: list[str]) -> list[str]:
    if project == "ggml":
        import bench_emitted_ggml as ggml

        command = [str(a) for a in ggml.configure_command(Path("SRC"), Path("BUILD"), ggml.deps(work))]
        args = command[command.index("Ninja") + 1 :]
        args = [f"{a} -Xcompiler={SECTIONS}" if a.startswith("-DCMAKE_CUDA_FLAGS=") else a for a in args]
        return [*args, f"-DCMAKE_CXX_FLAGS={SECTIONS}", f"-DCMAKE_C_FLAGS={SECTIONS}", *extra]
    return ["-DCMAKE_CUDA_ARCHITECTURES=80", "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc",
            "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CUDA_FLAGS=-Xcompiler={SECTIONS}",
            f"-DCMAKE_CXX_FLAGS={SECTIONS}", *extra]


def checkout(folder: Path, repo: Path, commit: str, args: list[str]) -> Path:
    """``commit`` checked out and configured in ``folder``; its build folder."""
    src, out = folder / "src", folder / "build"
    if not (src / ".git").exists():
        run(["git", "clone", "--quiet", repo, src])
    run(["git", "-C", src, "checkout", "--quiet", "--force", "--detach", commit])
    run(["cmake", "-S", src, "-B", out, "-G", "Ninja", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *args])
    return out


def objects_of(build: Path, src: Path, files: list[str]) -> list[str]:
    """The objects (relative to ``build``) compiled from ``files`` (relative to ``src``)."""
    wanted = {str((src / f).resolve()) for f in files}
    found = []
    for entry in json.loads((build / "compile_commands.json").read_text()):
        source = str((Path(entry["directory"]) / entry["file"]).resolve())
        words = shlex.split(entry["command"])
        output = entry.get("output") or (words[words.index("-o") + 1] if "-o" in words else None)
        if source in wanted and output:
            found.append(output)
    return sorted(found)


def parts(path: Path, build: Path) -> HostParts | str:
    """The host parts of the object at ``path``, its build's folders masked as ``build`` masks them."""
    folders = Folders({str(build.parent / "src"): "source", str(build): "build0"})
    with OpenFile(path) as blob:
        return host_parts(ElfFile(blob), _DEVICE_SECTIONS, b"__CLANG_OFFLOAD_BUNDLE__", folders)


def compare(before: HostParts, after: HostParts) -> tuple[dict[str, str], str]:
    """What ``select --base-map`` sees differ: functions by the name any build gives them, and what else."""
    def mapped(p: HostParts) -> map_digests.HostParts:
        return map_digests.HostParts(p.functions, p.init, p.data, p.unseen)

    return compare_parts(mapped(before), mapped(after))


def disassembly_differs(a: Path, b: Path) -> set[str]:
    """The functions whose section's disassembly (``objdump -dr``) differs between two objects, reading no
    digest: folders' names and places in ``.rodata`` and labels masked, the clones of one function one."""
    def sections(obj: Path) -> dict[str, str]:
        out = run(["objdump", "-dr", "--no-show-raw-insn", obj]).stdout
        found: dict[str, str] = {}
        for block in out.split("\nDisassembly of section ")[1:]:
            name, _, body = block.partition(":\n")
            if name.startswith(".text."):
                body = regex.sub(r"tmpxft_\w+|_[0-9a-f]{8}_\d+_|<[^>]*>|\.rodata[.\w]*\+0x[0-9a-f]+", "_", body)
                found[name.removeprefix(".text.").removeprefix("startup.").removeprefix("unlikely.")] = body
        return found

    before, after = sections(a), sections(b)
    return {host_function(f) for f in before.keys() | after.keys() if before.get(f) != after.get(f)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commit", action="append", required=True)
    parser.add_argument("--project", choices=("ggml", "plain"), default="ggml")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "hostdiff")
    parser.add_argument("--cmake-arg", action="append", default=[])
    parser.add_argument("--noise", action="store_true", help="then build the commit in the first folder too")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cmake_args = configure_args(args.project, work, args.cmake_arg)
    for commit in args.commit:
        files = run(["git", "-C", args.repo, "diff", "--name-only", f"{commit}^", commit]).stdout.split()
        builds = [checkout(work / f, args.repo, c, cmake_args) for f, c in zip(FOLDERS, (f"{commit}^", commit))]
        targets = [objects_of(b, b.parent / "src", files) for b in builds]
        if targets[0] != targets[1]:
            log(f"{commit}: the objects differ between the builds ({targets[0]} and {targets[1]})")
        t0 = time.perf_counter()
        procs = [subprocess.Popen(["nice", "-n", "19", "ninja", "-C", b, *t]) for b, t in zip(builds, targets) if t]
        if any(p.wait() for p in procs):
            raise SystemExit(f"bench_host_diff: building {commit}'s objects failed")
        seconds = time.perf_counter() - t0
        subject = run(["git", "-C", args.repo, "log", "-1", "--format=%s", commit]).stdout.strip()
        print(f"\n{commit[:8]} {subject}\n{len(files)} files changed; {len(targets[1])} objects built in both "
              f"folders in {seconds:.0f} s")
        for obj in sorted(set(targets[0]) & set(targets[1])):
            before, after = parts(builds[0] / obj, builds[0]), parts(builds[1] / obj, builds[1])
            if isinstance(before, str) or isinstance(after, str):
                print(f"- {obj}: compared whole ({before if isinstance(before, str) else after})")
                continue
            functions, also = compare(before, after)
            print(f"- {obj}: {len(functions)} of {len(after.functions)} host functions differ"
                  f"{'; ' + also if also == 'data' or functions and also else ''}")  # else: nothing differs
            for name, how in functions.items():
                print(f"    {how}: {full(name)[:160]}")
            truth = disassembly_differs(builds[0] / obj, builds[1] / obj)
            print(f"  cross-check, objdump per function section: {len(truth)} differ; not among ours: "
                  f"{sorted(truth - set(functions))[:5] or 'none'}; ours it does not list: "
                  f"{sorted(set(functions) - truth)[:5] or 'none'}")
        if args.noise:
            run(["git", "-C", builds[0].parent / "src", "checkout", "--quiet", "--force", "--detach", commit])
            run(["nice", "-n", "19", "ninja", "-C", builds[0], *targets[0]])
            for obj in sorted(set(targets[0]) & set(targets[1])):
                a, b = parts(builds[0] / obj, builds[0]), parts(builds[1] / obj, builds[1])
                differ = compare(a, b) if isinstance(a, HostParts) and isinstance(b, HostParts) else "whole"
                print(f"- noise, {obj} of {commit[:8]} in the two folders: {differ}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
