"""The device side's includes of objects clang compiles for a GPU: one preprocessor run per architecture.

clang's depfile (CMake's HIP language, hipcc, clang as the CUDA compiler)
holds the includes of one compilation job, the host's (facts.md). A header
included only under ``__HIP_DEVICE_COMPILE__`` or ``__CUDA_ARCH__``, or for
one offload architecture, is missing from it: a change to that header would
look as if it reached nothing of the object. nvcc's depfile is the union of
every pass, so nvcc objects need nothing here.

For each such object the compile command is re-run as ``-M`` for the device
side of each offload architecture (``--cuda-device-only``, which clang takes
for HIP and CUDA alike, and that one architecture), in the command's own
folder, with the depfile written to a temporary folder: the build tree is
read, never written. vLLM's own ROCm dependency tracking re-runs the
preprocessor per GPU target for the same reason. Results are kept in the
tool's folder, keyed by the object's stat key and the command, so a re-run
preprocesses only objects that were rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
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


def device_commands(command: Command, depfile: str) -> list[list[str]]:
    """One ``-M`` command per offload architecture (one with the compiler's default when none is named)."""
    kept: list[str] = []
    args = list(compiler_arguments(command.arguments))
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in _WITH_VALUE or a in ARCH_FLAGS:
            skip = True
        elif a in _ALONE or a.startswith(tuple(f + "=" for f in ARCH_FLAGS)) or a.startswith("-save-temps="):
            continue
        elif a.startswith(("-MF", "-MT", "-MQ")):  # the joined spellings: -MFfile
            continue
        else:
            kept.append(a)
    tail = ["--cuda-device-only", "-M", "-MF", depfile, "-o", os.devnull]
    named = archs(command.arguments)
    if not named:
        return [[*kept, *tail]]
    return [[*kept, f"{flag}={arch}", *tail] for flag, arch in dict.fromkeys(named)]


def _environment(command: Command) -> dict[str, str] | None:
    """hipcc picks its platform from ``HIP_PLATFORM``, which the build had and we may not: AMD
    architectures (``gfx...``) say which it was."""
    if any(arch.startswith("gfx") for _, arch in archs(command.arguments)):
        return dict(os.environ, HIP_PLATFORM="amd")
    return None


def _preprocess(command: Command) -> tuple[tuple[str, ...], str | None]:
    """The device side's includes over every architecture (absolute, normalised), or why they are unknown."""
    found: set[str] = set()
    env = _environment(command)
    with tempfile.TemporaryDirectory(prefix="ksm-device-deps-") as tmp:
        depfile = os.path.join(tmp, "device.d")
        for argv in device_commands(command, depfile):
            try:
                proc = subprocess.run(argv, cwd=command.directory, capture_output=True, text=True,
                                      timeout=TIMEOUT, check=False, env=env)
            except (OSError, subprocess.SubprocessError) as e:
                return (), f"device-side includes unknown: {argv[0]}: {e}"
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                return (), f"device-side includes unknown: the preprocessor failed (exit {proc.returncode}): {last}"
            try:
                with open(depfile, encoding="utf-8", errors="surrogateescape") as f:
                    rules = parse_depfile(f.read())
            except OSError as e:
                return (), f"device-side includes unknown: no depfile ({e.strerror or e})"
            found.update(os.path.normpath(os.path.join(command.directory, d)) for deps in rules.values() for d in deps)
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
