"""The device side's includes of objects clang compiles for a GPU: one preprocessor run per architecture.

clang's depfile (CMake's HIP language, hipcc, clang as the CUDA compiler)
holds the includes of one compilation job, the host's (facts.md). A header
included only under ``__HIP_DEVICE_COMPILE__`` or ``__CUDA_ARCH__``, or for
one offload architecture, is missing from it: a change to that header would
look as if it reached nothing of the object. nvcc's depfile is the union of
every pass, so nvcc objects need nothing here.

For each such object the compile command is re-run as ``-M`` for the device
side (``--cuda-device-only``, which clang takes for HIP and CUDA alike): one
preprocessing job per offload architecture, each printing its rule to
stdout, in the command's own folder. Nothing is written, in the build tree
or anywhere else. vLLM's own ROCm dependency tracking re-runs the
preprocessor per GPU target for the same reason. Results are kept in the
tool's folder, keyed by the object's stat key and the command, so a re-run
preprocesses only objects that were rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .._statefile import FOLDER, read, stat_key, write
from .compdb import Command
from .makedeps import parse_depfile

CACHE_FILE = "device-deps.json"
# The flags that name offload architectures, in clang's spellings (and hipcc's old one).
ARCH_FLAGS = ("--offload-arch", "--cuda-gpu-arch", "-offload-arch", "--amdgpu-target")
_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ")  # dropped with their value: outputs of the real compile
_ALONE = ("-c", "-M", "-MM", "-MD", "-MMD", "-MP", "-MG", "--offload-compress", "-save-temps")
TIMEOUT = 600


LAUNCHERS = ("ccache", "sccache", "buildcache", "distcc")  # CMAKE_<LANG>_COMPILER_LAUNCHER


def compiler_arguments(arguments: tuple[str, ...]) -> tuple[str, ...]:
    """The compiler's own argument vector: a compiler launcher in front (ccache...) dropped."""
    while arguments and Path(arguments[0]).name in LAUNCHERS:
        arguments = arguments[1:]
    return arguments


def is_clang_offload(command: Command) -> bool:
    """Whether ``command`` is clang (or hipcc) compiling for a GPU: the depfile then holds one job."""
    args = compiler_arguments(command.arguments)
    name = Path(args[0]).name if args else ""
    if "clang" not in name and "hipcc" not in name:
        return False
    return bool(archs(args)) or any(a in ("hip", "cuda") for a in _values(args, "-x")) or \
        any(a.endswith((".hip", ".cu")) for a in args)


def archs(arguments: Iterable[str]) -> list[tuple[str, str]]:
    """(flag, architecture) for every offload architecture named, in order; comma lists split."""
    found: list[tuple[str, str]] = []
    args = list(arguments)
    for i, a in enumerate(args):
        for flag in ARCH_FLAGS:
            if a == flag and i + 1 < len(args):
                found += [(flag, v) for v in args[i + 1].split(",") if v]
            elif a.startswith(flag + "="):
                found += [(flag, v) for v in a[len(flag) + 1 :].split(",") if v]
    return found


def _values(args: tuple[str, ...], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def device_command(command: Command) -> list[str]:
    """The compile command as ``-M`` for the device side of every offload architecture it names.

    Its outputs dropped, ``--cuda-device-only -M`` added: clang runs one device
    preprocessing job per architecture and prints each job's rule to stdout,
    one after the other (a single ``-MF`` or ``-o`` cannot take several).
    """
    kept: list[str] = []
    skip = False
    for a in compiler_arguments(command.arguments):
        if skip:
            skip = False
        elif a in _WITH_VALUE:
            skip = True
        elif a in _ALONE or a.startswith(("-MF", "-MT", "-MQ", "-save-temps=")):
            continue
        else:
            kept.append(a)
    return [*kept, "--cuda-device-only", "-M"]


def _environment(command: Command) -> dict[str, str] | None:
    """hipcc picks its platform from ``HIP_PLATFORM``, which the build had and we may not: AMD
    architectures (``gfx...``) say which it was."""
    if any(arch.startswith("gfx") for _, arch in archs(command.arguments)):
        return dict(os.environ, HIP_PLATFORM="amd")
    return None


def _preprocess(command: Command) -> tuple[tuple[str, ...], str | None]:
    """The device side's includes over every architecture (absolute, normalised), or why they are unknown."""
    argv = device_command(command)
    try:
        proc = subprocess.run(argv, cwd=command.directory, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False, env=_environment(command), errors="surrogateescape")
    except (OSError, subprocess.SubprocessError) as e:
        return (), f"device-side includes unknown: {argv[0]}: {e}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return (), f"device-side includes unknown: the preprocessor failed (exit {proc.returncode}): {last}"
    rules = parse_depfile(proc.stdout)
    if not rules:
        return (), "device-side includes unknown: the preprocessor printed no rule"
    found = {os.path.normpath(os.path.join(command.directory, d)) for deps in rules.values() for d in deps}
    return tuple(sorted(found)), None


def _key(obj: Path, command: Command) -> list[object] | None:
    stat = stat_key(obj)
    if stat is None:
        return None
    digest = hashlib.sha256("\0".join([str(command.directory), *command.arguments]).encode()).hexdigest()
    return [*stat, digest]


def device_deps(
    build_dir: Path, commands: dict[Path, Command], tool: str, use_cache: bool = True, jobs: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[Path, tuple[tuple[str, ...], str | None]]:
    """Object -> (its device side's includes, or why they are unknown), for every command given.

    Preprocessor runs are processes, so they go in parallel (threads wait on them).
    """
    path = build_dir / FOLDER / CACHE_FILE
    stored = read(path, tool, log) if use_cache else None
    cache: dict[str, object] = stored if isinstance(stored, dict) else {}
    found: dict[Path, tuple[tuple[str, ...], str | None]] = {}
    todo: list[tuple[Path, Command, list[object] | None]] = []
    for obj, command in sorted(commands.items()):
        key = _key(obj, command)
        entry = cache.get(str(obj))
        if key is not None and isinstance(entry, dict) and entry.get("key") == key and \
                isinstance(entry.get("deps"), list):
            found[obj] = (tuple(entry["deps"]), None)
        else:
            todo.append((obj, command, key))
    if todo:
        workers = jobs or min(len(todo), os.cpu_count() or 1)
        with ThreadPoolExecutor(max(1, workers)) as pool:
            results = list(pool.map(lambda t: _preprocess(t[1]), todo))
        for (obj, _command, key), (deps, error) in zip(todo, results, strict=True):
            found[obj] = (deps, error)
            if error is None and key is not None:
                cache[str(obj)] = {"key": key, "deps": list(deps)}
        if use_cache:
            keep = {str(o) for o in commands}
            write(path, tool, {k: v for k, v in cache.items() if k in keep}, log)
    return found
