"""The cuobjdump backend: kernel entries from ``cuobjdump -symbols``, for cross-checks.

The native reader is the default; this backend exists so that users can compare
against NVIDIA's own tool. It parses both output formats, and refuses output it
does not recognise instead of finding zero kernels (the seed script's failure
with cuobjdump 13.5):

* 13.4 and older: ``STT_FUNC  STB_GLOBAL  STO_ENTRY  [U]  name``
* 13.5:           ``FUNC  GLOBAL  DEFAULT  ENTRY  [U]  name``

``U`` marks an undefined symbol (an extern kernel launched from device code),
which is not this object's kernel.
"""

from __future__ import annotations

import os
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import regex

from ..errors import FormatError, ToolError
from . import cuda
from ._blob import Blob, OpenFile
from .devicecode import Result, failed, is_clang_offload_section, read_kernels, unlinked_reason
from .elf import ElfFile, is_elf

TIMEOUT_S = 900
NO_DEVICE_CODE = "does not contain device code"
_REMOVED_ARCH = regex.compile(r"Support for '(\w+)' has been removed")
_MEMBER = regex.compile(r"^member (.*):([^:]+):$")
_BLOCK = regex.compile(r"^Fatbin (elf|ptx|nvvm) code:$")
_ARCH = regex.compile(r"^arch = (\w+)$")
# name, then 13.4-style or 13.5-style columns
_OLD = regex.compile(r"^(STT_\w+)\s+(STB_\w+)\s+(\S+)\s+(?:(U)\s+)?(\S+)$")
_NEW = regex.compile(r"^([A-Z_]+)\s+([A-Z_]+)\s+([A-Z_]+)\s+(\S+)\s+(?:(U)\s+)?(\S+)$")


@dataclass
class _Member:
    """What cuobjdump printed for one file or archive member."""

    elf: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    ptx_archs: set[str] = field(default_factory=set)
    nvvm_archs: set[str] = field(default_factory=set)


def parse_symbols(text: str, command: Sequence[str] = ("cuobjdump", "-symbols")) -> dict[str, _Member]:
    """Per member name ("" for a plain file): kernel entries per arch, and the other code kinds seen.

    Header lines of a block (``code version = ...``, ``compressed``, ``has debug
    info``) are skipped; inside ``symbols:`` every line must parse, and every
    ELF block must have a ``symbols:`` section, so a new format is an error.
    """
    members: dict[str, _Member] = defaultdict(_Member)
    member, block, arch, in_symbols = "", "elf", "", False
    unfinished = False  # an ELF block whose "symbols:" line has not been seen

    def close(number: int) -> None:
        if unfinished:
            raise ToolError(command, f"ELF block ending at line {number} has no symbols section")

    number = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("="):
            continue
        if m := _MEMBER.match(line):
            close(number)
            member, block, arch, in_symbols, unfinished = m.group(2), "elf", "", False, False
            members[member]  # noqa: B018 - a member with no device code is still a member
        elif m := _BLOCK.match(line):
            close(number)
            block, arch, in_symbols, unfinished = m.group(1), "", False, m.group(1) == "elf"
        elif not in_symbols and (m := _ARCH.match(line)):
            arch = m.group(1)
            kinds = {"ptx": members[member].ptx_archs, "nvvm": members[member].nvvm_archs}
            if block in kinds:
                kinds[block].add(arch)
            else:
                members[member].elf[arch]  # noqa: B018 - a cubin with no entries still counts
        elif line == "symbols:" and block == "elf":
            in_symbols, unfinished = True, False
        elif in_symbols:
            kind, entry, undefined, name = _symbol(line)
            if kind is None:
                raise ToolError(command, f"unrecognised cuobjdump -symbols line {number}: {line!r}")
            if kind and entry and not undefined:
                members[member].elf[arch].add(name)
    close(number + 1)
    return members


def _symbol(line: str) -> tuple[bool | None, bool, bool, str]:
    """(is a function, is an entry, is undefined, name); (None, ...) when neither format matches."""
    if m := _OLD.match(line):
        return m.group(1) == "STT_FUNC", m.group(3) == "STO_ENTRY", m.group(4) == "U", m.group(5)
    if m := _NEW.match(line):
        return m.group(1) == "FUNC", m.group(4) == "ENTRY", m.group(5) == "U", m.group(6)
    return None, False, False, ""


def parse_ptx_entries(text: str) -> dict[str, dict[str, frozenset[str]]]:
    """``cuobjdump -ptx`` output: per member, per arch, the ``.entry`` names."""
    found: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    member, arch, chunk = "", "", []

    def flush() -> None:
        if arch:
            names = cuda.ptx_entries(Blob.from_bytes("cuobjdump -ptx", b""), "\n".join(chunk).encode())
            found[member][_ptx_arch(arch)] = found[member].get(_ptx_arch(arch), frozenset()) | names
        chunk.clear()

    for line in text.splitlines():
        if m := _MEMBER.match(line.strip()):
            flush()
            member, arch = m.group(2), ""
        elif _BLOCK.match(line.strip()):
            flush()
            arch = ""
        elif not arch and (m := _ARCH.match(line.strip())):
            arch = m.group(1)
        else:
            chunk.append(line)
    flush()
    return found


def _ptx_arch(arch: str) -> str:
    return arch.replace("sm_", "compute_", 1)


def unusable(executable: str) -> str | None:
    """Why ``executable`` (a path, or a name on ``PATH``) cannot be run, or None when it can.

    Checked once, before any input: a cuobjdump that cannot start would fail on
    every file alike, which a cross-check would report as the readers differing.
    """
    import shutil

    found = executable if os.sep in executable else shutil.which(executable)
    if found is None or not os.path.exists(found):
        return "not found"
    if os.path.isdir(found):
        return "a folder, not a program"
    if not os.access(found, os.X_OK):
        return "not executable"
    return None


class Cuobjdump:
    """Runs one cuobjdump binary; :meth:`read_kernels` returns the same :class:`Result` as the native reader."""

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [self.executable, *args]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ToolError(command, f"timed out after {TIMEOUT_S} s") from None
        except OSError as e:
            raise ToolError(command, e.strerror or str(e)) from None

    def read_kernels(self, path: str | os.PathLike[str]) -> Result:
        name = os.fspath(path)
        try:
            return self._read(name)
        except ToolError as e:
            return Result(name, error=str(e))
        except FormatError as e:
            return failed(name, e)

    def _read(self, path: str) -> Result:
        if os.path.isdir(path):
            raise FormatError(path, "is a directory")
        listing = self._symbols(path)
        if listing is None:  # "does not contain device code"
            _refuse_other_device_code(path)
            return Result(path)
        needs_ptx = any(not m.elf and m.ptx_archs for m in listing.values())
        ptx = parse_ptx_entries(self._checked("-ptx", path).stdout) if needs_ptx else {}
        if set(listing) == {""}:
            return _result(path, listing[""], ptx.get("", {}))
        return Result(
            path,
            members=tuple(
                _result(f"{path}({member})", listing[member], ptx.get(member, {})) for member in listing
            ),
        )

    def _checked(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self._run(*args)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise ToolError([self.executable, *args], lines[-1] if lines else "failed", proc.returncode)
        return proc

    def _symbols(self, path: str) -> dict[str, _Member] | None:
        proc = self._run("-symbols", path)
        message = proc.stderr + proc.stdout
        if proc.returncode != 0 and NO_DEVICE_CODE in message:
            return None
        if proc.returncode != 0 and (m := _REMOVED_ARCH.search(message)):
            return self._symbols_without(path, {m.group(1)})
        if proc.returncode != 0:
            self._checked("-symbols", path)  # raises with the message
        return parse_symbols(proc.stdout, [self.executable, "-symbols", path])

    def _symbols_without(self, path: str, removed: set[str]) -> dict[str, _Member]:
        """cuobjdump 13 aborts on removed architectures (sm_35) unless given ``-arch``.

        It cannot list the others either, so the architectures come from the
        native reader's listing; each remaining one is dumped on its own.
        """
        archs = [a for a in read_kernels(path).archs if a.startswith("sm_") and a not in removed]
        merged: dict[str, _Member] = defaultdict(_Member)
        for arch in archs:
            proc = self._checked("-symbols", "-arch", arch, path)
            for member, found in parse_symbols(proc.stdout, [self.executable, "-arch", arch]).items():
                for a, names in found.elf.items():
                    merged[member].elf[a].update(names)
        return merged


def _result(path: str, member: _Member, ptx: dict[str, frozenset[str]]) -> Result:
    if member.elf:
        kernels = {a: frozenset(s) for a, s in member.elf.items()}
    elif member.ptx_archs:
        kernels = dict(ptx)
    elif member.nvvm_archs:
        return Result(path, error=unlinked_reason(member.nvvm_archs), device=True)
    else:
        kernels = {}
    device = bool(member.elf or member.ptx_archs)
    return Result(path, kernels, device=device)


def _refuse_other_device_code(path: str) -> None:
    """cuobjdump reads CUDA only; "no device code" from it is not evidence for HIP or clang objects."""
    with OpenFile(path) as blob:
        if not is_elf(blob):
            return
        for s in ElfFile(blob).sections:
            if is_clang_offload_section(s.name):
                raise FormatError(path, f"holds {s.name}, which cuobjdump cannot read")
