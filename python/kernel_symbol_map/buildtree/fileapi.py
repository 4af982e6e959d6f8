"""CMake's file API: our client query, and the reply's targets, sources and artifacts.

Modelled on scikit-build-core's ``file_api`` package: frozen dataclasses whose
fields are the JSON keys, built by a tolerant converter, so codemodel 2.4
(CMake 3.25) to 2.11 (CMake 4.4) all read. Backtraces are not modelled at
all, so their out-of-range indices (seen on CUDA targets) cannot hurt.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BuildTreeError
from ._jsonmodel import convert

CLIENT = "client-kernel_symbol_map"
QUERY = {
    "requests": [
        {"kind": "codemodel", "version": 2},
        {"kind": "toolchains", "version": 1},
        {"kind": "cache", "version": 2},
    ]
}


@dataclass(frozen=True)
class Paths:
    build: str = "."
    source: str = "."


@dataclass(frozen=True)
class CompileGroup:
    language: str = ""


@dataclass(frozen=True)
class Source:
    path: str
    compileGroupIndex: int | None = None  # noqa: N815 - the JSON key
    isGenerated: bool = False  # noqa: N815


@dataclass(frozen=True)
class Artifact:
    path: str


@dataclass(frozen=True)
class Dependency:
    id: str


@dataclass(frozen=True)
class Target:
    name: str
    type: str
    id: str = ""
    paths: Paths = field(default_factory=Paths)
    nameOnDisk: str = ""  # noqa: N815
    sources: tuple[Source, ...] = ()
    compileGroups: tuple[CompileGroup, ...] = ()  # noqa: N815
    artifacts: tuple[Artifact, ...] = ()
    dependencies: tuple[Dependency, ...] = ()  # targets built first: link, object-library and manual deps

    def language_of(self, source: Source) -> str | None:
        """The compile language of a compiled source; None for headers, rules and objects."""
        i = source.compileGroupIndex
        if i is None or not 0 <= i < len(self.compileGroups):
            return None
        return self.compileGroups[i].language


@dataclass(frozen=True)
class TargetRef:
    name: str
    jsonFile: str  # noqa: N815


@dataclass(frozen=True)
class Configuration:
    name: str = ""
    targets: tuple[TargetRef, ...] = ()


@dataclass(frozen=True)
class CodemodelPaths:
    build: str
    source: str


@dataclass(frozen=True)
class Codemodel:
    paths: CodemodelPaths
    configurations: tuple[Configuration, ...] = ()


@dataclass(frozen=True)
class CacheEntry:
    name: str
    value: str = ""


@dataclass(frozen=True)
class Cache:
    entries: tuple[CacheEntry, ...] = ()


@dataclass(frozen=True)
class Reply:
    """What one configure of one build tree said about itself."""

    cmake_version: str
    generator: str
    source_root: Path
    build_root: Path
    targets: tuple[Target, ...]
    cache: dict[str, str]
    compilers: dict[str, dict[str, Any]]  # language -> toolchains' "compiler" object
    index: Path

    def dependencies(self) -> dict[str, set[str]]:
        """Target -> the targets it depends on directly, by name."""
        names = {t.id: t.name for t in self.targets}
        return {t.name: {names[d.id] for d in t.dependencies if d.id in names} for t in self.targets}


def query_file(build_dir: Path) -> Path:
    return build_dir / ".cmake" / "api" / "v1" / "query" / CLIENT / "query.json"


def write_query(build_dir: Path) -> Path:
    """Write our client query; an identical one is left alone so its mtime stays put."""
    path = query_file(build_dir)
    text = json.dumps(QUERY, indent=2) + "\n"
    if path.is_file() and path.read_text() == text:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def latest_index(build_dir: Path) -> Path | None:
    reply = build_dir / ".cmake" / "api" / "v1" / "reply"
    indexes = sorted(reply.glob("index-*.json")) if reply.is_dir() else []
    return indexes[-1] if indexes else None


def reply_is_current(build_dir: Path) -> bool:
    """A reply exists, answers our client, and is not older than our query."""
    index = latest_index(build_dir)
    query = query_file(build_dir)
    if index is None or not query.is_file():
        return False
    if index.stat().st_mtime_ns < query.stat().st_mtime_ns:
        return False
    try:
        return "codemodel" in _reply_files(json.loads(index.read_text()))
    except (OSError, ValueError, BuildTreeError):
        return False


def _reply_files(index: Any) -> dict[str, str]:
    """kind -> reply file: our client's responses, else the shared (stateless) or
    ``cmake_file_api(QUERY)`` ones, which scikit-build-core and our CMake package ask for."""
    try:
        reply = index["reply"]
        client = reply.get(CLIENT, {}).get("query.json", {}).get("responses", [])
        files = {r["kind"]: r["jsonFile"] for r in client if isinstance(r, dict) and "jsonFile" in r}
        for key in ("codemodel-v2", "cache-v2", "toolchains-v1"):
            entry = reply.get(key)
            if isinstance(entry, dict) and "jsonFile" in entry:
                files.setdefault(entry["kind"], entry["jsonFile"])
        return files
    except (KeyError, TypeError, AttributeError):
        raise BuildTreeError("not a file-API reply index") from None


def cmake_command(build_dir: Path) -> str:
    """The CMake that configured ``build_dir`` (CMAKE_COMMAND in its cache)."""
    value = read_cmake_cache(build_dir).get("CMAKE_COMMAND")
    if not value:
        raise BuildTreeError(f"{build_dir}: CMakeCache.txt has no CMAKE_COMMAND; is this a CMake build tree?")
    return value


def refresh(build_dir: Path) -> list[str]:
    """Re-run the build's own CMake on ``build_dir`` so that it answers our query; returns the command."""
    write_query(build_dir)
    command = [cmake_command(build_dir), str(build_dir)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        log = build_dir / ".kernel_symbol_map" / "reconfigure.log"
        try:
            log.parent.mkdir(exist_ok=True)
            log.write_text(f"$ {' '.join(command)}\n{proc.stdout}{proc.stderr}")
        except OSError:
            log = None  # a read-only tree: the message's last line is all there is
        errors = [line for line in (proc.stderr or proc.stdout).splitlines() if "Error" in line] or \
            (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        where = f"; the whole output is in {log}" if log else ""
        raise BuildTreeError(
            f"re-running the project's configure failed ({' '.join(command)}, exit {proc.returncode}): "
            f"{errors[0].strip()}{where}. The tree's configure now is the one that failed: run your own "
            "configure (the one your build uses, with its environment) before building or mapping again")
    return command


def read_cmake_cache(build_dir: Path) -> dict[str, str]:
    """``NAME:TYPE=VALUE`` lines of CMakeCache.txt."""
    path = build_dir / "CMakeCache.txt"
    if not build_dir.is_dir():
        raise BuildTreeError(f"{build_dir}: no such folder")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise BuildTreeError(f"{path}: {e.strerror or e}") from None
    entries = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", "//")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        entries[key.partition(":")[0]] = value
    return entries


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BuildTreeError(f"{path}: missing (the file-API reply is incomplete)") from None
    except (OSError, ValueError) as e:
        raise BuildTreeError(f"{path}: not readable JSON: {e}") from None


def read_reply(build_dir: Path, config: str | None = None) -> Reply:
    index_path = latest_index(build_dir)
    if index_path is None:
        raise BuildTreeError(f"{build_dir}: no CMake file-API reply")
    index = _load(index_path)
    try:
        version = index["cmake"]["version"]["string"]
        generator = index["cmake"]["generator"]["name"]
        files = _reply_files(index)
    except (KeyError, TypeError, BuildTreeError):
        raise BuildTreeError(f"{index_path}: not a file-API reply index") from None
    if "codemodel" not in files:
        raise BuildTreeError(f"{index_path}: no codemodel in the reply")
    folder = index_path.parent
    codemodel = convert(Codemodel, _load(folder / files["codemodel"]), files["codemodel"])
    if not codemodel.configurations:
        raise BuildTreeError(f"{folder / files['codemodel']}: no configurations")
    # Single-config generators have one configuration; multi-config ones, one each: the one asked for.
    chosen = codemodel.configurations[0]
    if config is not None and len(codemodel.configurations) > 1:
        named = [c for c in codemodel.configurations if c.name == config]
        if not named:
            raise BuildTreeError(f"{folder / files['codemodel']}: no configuration {config!r}")
        chosen = named[0]
    targets = tuple(convert(Target, _load(folder / ref.jsonFile), ref.jsonFile) for ref in chosen.targets)
    cache: dict[str, str] = {}
    if "cache" in files:
        cache = {e.name: e.value for e in convert(Cache, _load(folder / files["cache"]), files["cache"]).entries}
    compilers: dict[str, dict[str, Any]] = {}
    if "toolchains" in files:
        toolchains = _load(folder / files["toolchains"])
        for tc in toolchains.get("toolchains", []) if isinstance(toolchains, dict) else []:
            if isinstance(tc, dict) and isinstance(tc.get("compiler"), dict):
                compilers[str(tc.get("language"))] = tc["compiler"]
    return Reply(
        cmake_version=version,
        generator=generator,
        source_root=Path(codemodel.paths.source),
        build_root=Path(codemodel.paths.build),
        targets=targets,
        cache=cache,
        compilers=compilers,
        index=index_path,
    )
