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
stdout, in the command's own folder. Nothing is written in the build tree
(clang-scan-deps, below, reads its database from a temporary folder). vLLM's own ROCm dependency tracking re-runs the
preprocessor per GPU target for the same reason. Results are kept in the
tool's folder, keyed by the object's stat key and the command, so a re-run
preprocesses only objects that were rebuilt.

Those runs cost a driver and a full preprocessing each (94% of a HIP cold
``build``), so every object to do goes first to one ``clang-scan-deps``
process of the compiler's own version (:mod:`.scandeps`), one entry per
architecture (given two in one entry, clang-scan-deps-15 printed one job's
includes: a header taken for gfx90a only was missing, whatever the order,
with exit 0). An object it does not answer whole (no matching tool, hipcc, an
entry that failed, an output we cannot place) is preprocessed on its own, as
before; the map says which way each object's includes came (``method``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from .._statefile import FOLDER, read, stat_key, write
from . import scandeps
from .compdb import Command

CACHE_FILE = "device-deps.json"
# The flags that name offload architectures, in clang's spellings (and hipcc's old one).
ARCH_FLAGS = ("--offload-arch", "--cuda-gpu-arch", "-offload-arch", "--amdgpu-target")
_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ")  # dropped with their value: outputs of the real compile
_ALONE = ("-c", "-M", "-MM", "-MD", "-MMD", "-MP", "-MG", "--offload-compress", "-save-temps")
TIMEOUT = 600
SCAN_DEPS, PREPROCESSOR = "scan-deps", "preprocessor"  # how an object's device-side includes came
METHODS = (SCAN_DEPS, PREPROCESSOR)
# The spellings an architecture is split by for clang-scan-deps; any other (hipcc's) keeps the object whole.
_SPLIT_FLAGS = ("--offload-arch", "--cuda-gpu-arch")


class DeviceDeps(NamedTuple):
    """An object's device-side includes (absolute, normalised), or why they are unknown, and how they came."""

    deps: tuple[str, ...]
    error: str | None
    method: str  # SCAN_DEPS or PREPROCESSOR


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


def arch_commands(command: Command) -> list[list[str]] | None:
    """The device command (without ``-M``) once per offload architecture, for clang-scan-deps; None when the
    command is not split.

    The tool takes one compile job per entry, so each architecture gets its
    own: the command's architecture flags dropped, one put back. A command
    with none named keeps clang's default architecture, one job. Not split:
    hipcc, a wrapper that adds flags and picks a platform we never see, and
    anything whose architectures might be read otherwise (hipcc's spellings,
    ``--no-offload-arch``, a response file): those are preprocessed as the
    build ran them.
    """
    args = compiler_arguments(command.arguments)
    name = Path(args[0]).name if args else ""
    if "clang" not in name or "hipcc" in name:
        return None
    common: list[str] = []  # every job's arguments: all but the architectures
    skip = False
    for a in device_command(command)[:-1]:  # without its -M: the caller adds its own rule options
        if skip:
            skip = False
        elif a.startswith(("@", "--no-offload-arch", "--no-cuda-gpu-arch")) or not _utf8(a):
            return None  # (a name that is not UTF-8 cannot go through the tool's JSON database as it is)
        elif a in ARCH_FLAGS or any(a.startswith(flag + "=") for flag in ARCH_FLAGS):
            if not a.startswith(_SPLIT_FLAGS):
                return None
            skip = a in ARCH_FLAGS
        else:
            common.append(a)
    named = list(dict.fromkeys(archs(args)))  # the same architecture twice is one job
    return [[*common, f"{flag}={arch}"] for flag, arch in named] if named else [common]


def _utf8(argument: str) -> bool:
    try:
        argument.encode()
    except UnicodeEncodeError:  # bytes that are not UTF-8, as surrogateescape decoded them
        return False
    return True


def _environment(command: Command) -> dict[str, str] | None:
    """hipcc picks its platform from ``HIP_PLATFORM``, which the build had and we may not: AMD
    architectures (``gfx...``) say which it was."""
    if any(arch.startswith("gfx") for _, arch in archs(command.arguments)):
        return dict(os.environ, HIP_PLATFORM="amd")
    return None


def _preprocess(command: Command) -> DeviceDeps:
    """The device side's includes over every architecture (absolute, normalised), or why they are unknown."""
    argv = device_command(command)
    try:
        proc = subprocess.run(argv, cwd=command.directory, capture_output=True, text=True, timeout=TIMEOUT,
                              check=False, env=_environment(command), errors="surrogateescape")
    except (OSError, subprocess.SubprocessError) as e:
        return DeviceDeps((), f"device-side includes unknown: {argv[0]}: {e}", PREPROCESSOR)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        return DeviceDeps((), f"device-side includes unknown: the preprocessor failed (exit {proc.returncode}): "
                              f"{last}", PREPROCESSOR)
    rules = scandeps.rules_of(proc.stdout)  # the same reading, fast where nothing is escaped
    if not rules:
        return DeviceDeps((), "device-side includes unknown: the preprocessor printed no rule", PREPROCESSOR)
    return DeviceDeps(_absolute(command, (d for deps in rules.values() for d in deps)), None, PREPROCESSOR)


def _absolute(command: Command, deps: Iterable[str]) -> tuple[str, ...]:
    directory = str(command.directory)
    return tuple(sorted({_normalised(directory, d) for d in set(deps)}))


@lru_cache(maxsize=1 << 16)
def _normalised(directory: str, path: str) -> str:
    """``path`` absolute against ``directory``, normalised: the same few hundred headers recur in every object."""
    return os.path.normpath(os.path.join(directory, path))


def _source(arguments: list[str]) -> str:
    """The source among a device command's arguments, for the tool's messages only (it reads the arguments)."""
    return next((a for a in reversed(arguments[1:]) if not a.startswith("-") and "." in Path(a).name), arguments[0])


_Todo = tuple[Path, Command, "list[object] | None"]


def _scanned(todo: list[_Todo], jobs: int, log: Callable[[str], None]) -> dict[Path, DeviceDeps]:
    """The objects of ``todo`` one clang-scan-deps process per compiler answered whole.

    An object is answered only when every architecture's entry has its rule;
    any other is left to the caller's per-object run, never given a part.
    """
    finder = scandeps.Finder()
    groups: dict[scandeps.Match, list[tuple[Path, Command, list[list[str]]]]] = {}
    for obj, command, _key in todo:
        split = arch_commands(command)
        match = finder.match(split[0][0], command.directory) if split else None
        if split and match:
            groups.setdefault(match, []).append((obj, command, split))
    for compiler, why in sorted(finder.missing.items()):
        log(f"device-side includes: {compiler}: {why}; preprocessing its objects one by one")
    found: dict[Path, DeviceDeps] = {}
    for match, items in groups.items():
        entries: list[scandeps.Entry] = []
        targets: dict[Path, list[str]] = {}
        for obj, command, split in items:
            for argv in split:
                target = f"ksm-device-{len(entries)}"  # unique in the run: the rule's way back to its object
                args = [match.compiler, *argv[1:]]
                if not any(a == "-resource-dir" or a.startswith("-resource-dir=") for a in args):
                    args.append(f"-resource-dir={match.resource_dir}")  # the folder the compiler itself spells
                entries.append(scandeps.Entry(command.directory, (*args, "-M", "-MT", target), target,
                                              _source(argv)))
                targets.setdefault(obj, []).append(target)
        result = scandeps.scan(match.tool, entries, jobs)
        for obj, command, _split in items:
            answers = [result.rules.get(t) for t in targets[obj]]
            if all(answers):
                found[obj] = DeviceDeps(_absolute(command, (d for a in answers if a for d in a)), None, SCAN_DEPS)
        if result.problem:
            left = sum(obj not in found for obj, _, _ in items)
            log(f"device-side includes: {result.problem}; preprocessing {left} object(s) one by one")
    return found


def _key(obj: Path, command: Command) -> list[object] | None:
    stat = stat_key(obj)
    if stat is None:
        return None
    digest = hashlib.sha256("\0".join([str(command.directory), *command.arguments]).encode()).hexdigest()
    return [*stat, digest]


def device_deps(
    build_dir: Path, commands: dict[Path, Command], tool: str, use_cache: bool = True, jobs: int | None = None,
    log: Callable[[str], None] = lambda _m: None, scan_deps: bool = True,
) -> dict[Path, DeviceDeps]:
    """Object -> its device side's includes (or why they are unknown, and how they came), for every command.

    Cache misses go to clang-scan-deps first (``scan_deps``; False: one
    preprocessor run per object, the reference the tests hold it to), the
    rest to per-object runs, in parallel (threads wait on the processes).
    A cached answer keeps the method it came by.
    """
    path = build_dir / FOLDER / CACHE_FILE
    stored = read(path, tool, log) if use_cache else None
    cache: dict[str, object] = stored if isinstance(stored, dict) else {}
    found: dict[Path, DeviceDeps] = {}
    todo: list[_Todo] = []
    for obj, command in sorted(commands.items()):
        key = _key(obj, command)
        entry = cache.get(str(obj))
        method = entry.get("method", PREPROCESSOR) if isinstance(entry, dict) else None  # older caches: per object
        if key is not None and isinstance(entry, dict) and entry.get("key") == key and \
                isinstance(entry.get("deps"), list) and method in METHODS:
            found[obj] = DeviceDeps(tuple(entry["deps"]), None, str(method))
        else:
            todo.append((obj, command, key))
    if todo:
        cpus = os.cpu_count() or 1
        done = _scanned(todo, jobs or cpus, log) if scan_deps else {}
        rest = [t for t in todo if t[0] not in done]
        if rest:
            with ThreadPoolExecutor(max(1, jobs or min(len(rest), cpus))) as pool:
                done.update(zip((t[0] for t in rest), pool.map(lambda t: _preprocess(t[1]), rest), strict=True))
        for obj, _command, key in todo:
            deps, error, method = found[obj] = done[obj]
            if error is None and key is not None:
                cache[str(obj)] = {"key": key, "deps": list(deps), "method": method}
        if use_cache:
            keep = {str(o) for o in commands}
            write(path, tool, {k: v for k, v in cache.items() if k in keep}, log)
    return found
