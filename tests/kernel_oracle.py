"""What a rebuild changed, kernel by kernel: the ground truth of ``select``'s output mode (issue 27).

Independent of the package: nothing here reads a map or uses kernel_symbol_map's readers. Each
object's device code is read by NVIDIA's own tools, in one ``cuobjdump -elf -res-usage -sass -ptx``
process per object (PyPI's cuobjdump 13.5 with its nvdisasm on PATH: ``-sass`` needs it); its host
code by :func:`oracle._host` (pyelftools). A snapshot is, per object, the host digest and, per
kernel, a digest for each device image (``sm_80#0`` for a cubin, ``compute_80#0`` for PTX) that
defines it.

A kernel's digest in a cubin covers, for the kernel and every function it reaches (transitively,
through the relocations of its code and the ``.nv.callgraph``: calls and taken addresses):

* its SASS (the ``Function : name`` block of ``-sass``), its resource usage (``-res-usage``:
  registers, stack, shared, local, constant banks), its own sections (``.text.<f>``,
  ``.rel[a].text.<f>``, ``.nv.constant0.<f>``, ``.nv.info.<f>``, ``.nv.shared.<f>``...: contents,
  and size, type and flags from the section table, as a section with no data prints none), the
  records of the module's ``.nv.info`` that name it, and its symbols;
* the constant banks its SASS reads (``c[0x4][...]`` in its ``Function`` block; ``cx[...]``: all),
  when a bank holds no variable (``.nv.constant4``'s addresses, ``.nv.constant2``'s compiler
  constants): the bank's contents, size and relocations;
* nvcc's literals (``$str``, ``$str$1``, ``__unnamed_1`` in ``.nv.global.init``) that its
  relocations or its banks' relocations name: each literal's bytes, sliced from the section's
  printed words at its symbol's value and size;
* and the module's data, folded into every kernel of the image: every other section (the
  ``.nv.constant<N>`` banks of ``__constant__`` variables, the rest of ``.nv.global.init`` by
  symbol, ``.nv.global``...), the symbols of data objects, the image's headers. The common resource
  usage (``GLOBAL:``, ``CONSTANT[4]:``) is not: it sums the sizes of sections listed on their own.

Left out, as not code: notes (``.note.nv.*``: the tools' names and command lines), debug sections
(``.debug_*``, ``.nv_debug_*`` and their relocations), the string tables (names are read where they
are used), and line information in PTX (``.loc``, ``.file``, ``.section .debug_*``) and an image's
``identifier`` (its source's path, which ``-lineinfo`` adds). A kernel's digest in PTX covers its
``.entry``, every ``.func`` it names (transitively), and the module's text outside any function body
(``.version``, ``.target``, variables with their initialisers, declarations), and the image's
``ptxasOptions``. (The cubin's ELF flags are kept: ``-lineinfo`` sets one whose meaning is not
documented.) LTO IR (``code=lto_80``, what ``-dlto`` compiles to) is not read: cuobjdump lists its
header only, and no GPU runs it; the code it becomes is the ``-dlto`` device link's cubin, which is.

Normalised, because they are references, not contents: symbol indices (in ``.nv.info`` records, the
callgraph, prototypes) become the names they index, and the records' ordinals (``<0x3>``, positions
in a section shared by every function) are dropped. Normalised, because it is layout: the SASS
listing's padding (cuobjdump pads every line to the widest instruction of the whole image, so a
longer instruction in one function moves the columns of every other). Nothing else is. Noise: two
clean builds of tests/projects/oracle give equal snapshots
(``test_kernel_oracle_clean_rebuild_changes_nothing``); offsets printed in the SASS (``/*0080*/``,
branch and ``CALL.REL`` targets) are offsets inside the function's own section. No listing prints an
absolute address of another function (a call to one is ``CALL.ABS.NOINC 0x0`` with a relocation
naming it, in relocatable and in device-linked images alike); a ``CALL.REL`` leaving its function,
or a ``CALL.ABS`` to a nonzero address, is refused (:class:`OracleError`) rather than guessed.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import regex
from elftools.elf.elffile import ELFFile
from oracle import _host


class OracleError(Exception):
    """A listing the oracle does not understand: it refuses rather than guesses."""


def cuobjdump() -> str | None:
    """PyPI's cuobjdump 13.5, with nvdisasm beside it (the test extra), else one on PATH next to an nvdisasm."""
    folder = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" \
        / "nvidia" / "cu13" / "bin"
    if (folder / "cuobjdump").is_file() and (folder / "nvdisasm").is_file():
        return str(folder / "cuobjdump")
    exe = shutil.which("cuobjdump")
    return exe if exe and (Path(exe).parent / "nvdisasm").is_file() else None


# -- snapshots ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectSnapshot:
    host: str
    kernels: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> image key -> digest

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.kernels)


_CACHE: dict[tuple[str, str], dict[str, dict[str, str]]] = {}  # (cuobjdump, device sections' hash) -> kernels


def _device_sections(elf: ELFFile) -> bytes | None:
    """The sections cuobjdump reads device code from, by name and contents (None: no device code)."""
    h = hashlib.sha256()
    found = False
    for s in elf.iter_sections():
        if "fatbin" in s.name.lower() or s.name.startswith(("__nv", ".nv")):
            found = found or "fatbin" in s.name.lower()
            h.update(s.name.encode() + b"\0" + (s.data() if s["sh_type"] != "SHT_NOBITS" else b""))
    return h.digest() if found else None


def snapshot(path: Path, exe: str | None = None) -> ObjectSnapshot:
    """One object: its host digest, and each kernel's digest per device image.

    Identical device sections give identical cuobjdump listings, so they are read once per session
    (a rebuild recompiles objects whose device code did not change).
    """
    exe = exe or cuobjdump()
    if exe is None:
        raise OracleError("no cuobjdump with nvdisasm beside it")
    data = path.read_bytes()
    elf = ELFFile(io.BytesIO(data))
    host = _host(elf)
    device = _device_sections(elf)
    if device is None:
        return ObjectSnapshot(host)
    key = (exe, device.hex())
    if key not in _CACHE:
        _CACHE[key] = kernels_of_listing(_listing(exe, path))
    return ObjectSnapshot(host, _CACHE[key])


def snapshot_all(paths: dict[str, Path], exe: str | None = None) -> dict[str, ObjectSnapshot]:
    """Many objects, a cuobjdump process each, as many at once as there are cores."""
    exe = exe or cuobjdump()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        snaps = list(pool.map(lambda p: snapshot(p, exe), paths.values()))
    return dict(zip(paths, snaps))


def _listing(exe: str, path: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(exe).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([exe, "-elf", "-res-usage", "-sass", "-ptx", str(path)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        if "does not contain device code" in proc.stderr:
            return ""
        raise OracleError(f"{exe} {path}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


# -- the listing, image by image ----------------------------------------------------------------------------

IMAGE = regex.compile(r"(?m)^Fatbin (elf|ptx|nvvm) code:\n=+\n")
NOT_CODE_HEADER = ("identifier = ",)  # the source's path, with -lineinfo


def kernels_of_listing(text: str) -> dict[str, dict[str, str]]:
    """Kernel -> image key -> digest, from ``cuobjdump -elf -res-usage -sass -ptx`` of one object."""
    return {k: {image: hashlib.sha256("\n".join(lines).encode()).hexdigest() for image, lines in images.items()}
            for k, images in material(text).items()}


def material(text: str) -> dict[str, dict[str, list[str]]]:
    """Kernel -> image key -> what its digest covers, line by line (the module's first, then each function's)."""
    found: dict[str, dict[str, list[str]]] = {}
    starts = list(IMAGE.finditer(text))
    counts: dict[str, int] = {}
    for i, m in enumerate(starts):
        if m.group(1) == "nvvm":
            continue  # LTO IR: cuobjdump lists its header only; what it becomes is the -dlto device link's cubin
        chunk = text[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        header, _, body = chunk.partition("\n\n")
        arch = regex.search(r"(?m)^arch = sm_(\w+)$", header)
        if arch is None:
            raise OracleError(f"an image without an arch: {header[:200]!r}")
        label = ("sm_" if m.group(1) == "elf" else "compute_") + arch.group(1)
        n = counts.get(label, 0)
        counts[label] = n + 1
        header = "\n".join(line for line in header.splitlines() if not line.startswith(NOT_CODE_HEADER))
        module, parts, closures = _cubin(header, body) if m.group(1) == "elf" else _ptx(header, body)
        for kernel, closure in closures.items():
            lines = [f"M {line}" for line in module]
            for f in sorted(closure):
                lines += [f"F {f}", *parts.get(f, [])]
            found.setdefault(kernel, {})[f"{label}#{n}"] = lines
    return found


def _reach(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for g in edges.get(todo.pop(), ()):
            if g not in seen:
                seen.add(g)
                todo.append(g)
    return seen


# -- a cubin: -elf, then -res-usage, then -sass ---------------------------------------------------------------

# Index Offset Size ES Align Type Flags Link Info Name (Link and Info are indices: not kept)
SECTION_ROW = regex.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\S+)\s+([0-9a-f]+)"
                            r"\s+[0-9a-f]+\s+[0-9a-f]+\s+(\S+)$")
PARSED = (".strtab", ".shstrtab", ".symtab", ".nv.callgraph", ".nv.prototype")  # read for what they name
FUNCTION = regex.compile(r"(?m)^\t\tFunction : (\S+)$")
SPACES = regex.compile(r"[ \t]+")
RECORD = regex.compile(r"(?m)^\t<0x[0-9a-f]+>\n")
# .nv.info attributes whose value starts with a symbol index (cuobjdump prints it as a number)
INDEXED = {"EIATTR_PARAM_CBANK", "EIATTR_MAX_STACK_SIZE", "EIATTR_MIN_STACK_SIZE", "EIATTR_CRS_STACK_SIZE",
           "EIATTR_EXTERNS", "EIATTR_FRAME_SIZE", "EIATTR_REGCOUNT"}
NOT_CODE = ("note", "debug")  # .note.nv.*, .debug_*, .nv_debug_*, and their relocations


@dataclass
class _Symbol:
    index: int
    value: str
    size: str
    type: str
    bind: str
    vis: str
    other: str
    ndx: int
    name: str


def _cubin(header: str, body: str) -> tuple[list[str], dict[str, list[str]], dict[str, set[str]]]:
    elf_part, sep, rest = body.partition("\nResource usage:\n")
    if not sep:
        raise OracleError("a cubin listing without its resource usage")
    res_part, sep, sass_part = rest.partition("\n\tcode for sm_")
    if not sep:
        raise OracleError("a cubin listing without its SASS")
    sections, rows, contents, symbols = _elf(elf_part)
    functions = {s.name for s in symbols if s.type == "FUNC"}
    by_index = {s.index: s for s in symbols}
    section_name = {i: n for i, n in sections.items()}
    parts: dict[str, list[str]] = {f: [] for f in functions}
    module: list[str] = [line for line in header.splitlines() if line.strip()]
    module.append(elf_part.strip().splitlines()[0] if elf_part.strip() else "")  # 64-bit ELF: type=..., sm=...
    edges: dict[str, set[str]] = {f: set() for f in functions}

    # Banks that hold no variable, read only by the code that names them; nvcc's literals in .nv.global.init.
    held = {s.ndx for s in symbols if s.type != "SECTION" and s.name != "(null)"}
    banks = {name: f"bank:{int(m.group(1))}" for i, name in sections.items()
             if (m := regex.fullmatch(r"\.nv\.constant(\d+)", name)) and i not in held}
    init = next((i for i, n in sections.items() if n == ".nv.global.init"), None)
    literals = {s.name: f"lit:{s.name}" for s in symbols
                if s.ndx == init and s.type == "OBJECT" and regex.fullmatch(r"\$str(\$\d+)?|__unnamed_\d+", s.name)}
    reached = {**{f: f for f in functions}, **literals}  # what a relocation's symbol is an edge to

    def owner(name: str) -> str | None:
        """The function a section belongs to: the longest function name it ends with, after a dot; a
        bank's (and its relocations'), its bank."""
        for prefix in ("", ".rel", ".rela"):
            if name.startswith(prefix) and name[len(prefix):] in banks:
                return banks[name[len(prefix):]]
        best = None
        for f in functions:
            if name.endswith("." + f) and (best is None or len(f) > len(best)):
                best = f
        return best

    def symbol_name(index: str) -> str:
        try:
            s = by_index[int(index, 0)]
        except (KeyError, ValueError):
            return index
        return s.name if s.name != "(null)" else f"section:{section_name.get(s.ndx, s.ndx)}"

    for s in symbols:
        where = section_name.get(s.ndx, str(s.ndx))
        line = f"sym {s.name} {s.type} {s.bind} {s.vis} {s.other} {where} {s.value} {s.size}"
        if s.type == "SECTION" or s.name == "(null)":
            continue
        if s.ndx == init and init is not None:  # by name: where it starts, and how long, are its bytes'
            line = f"sym {s.name} {s.type} {s.bind} {s.vis} {s.other} {where}"
            (parts.setdefault(literals[s.name], []) if s.name in literals else module).append(line)
            continue
        f = s.name if s.type == "FUNC" else owner(where)
        (parts[f] if f else module).append(line)

    for name, row in rows.items():  # sizes: a section with no data (.nv.shared.<f>, .nv.global) prints none
        if name not in PARSED and not name.startswith((".nv.info", ".rel")) and not any(w in name for w in NOT_CODE):
            f = owner(name)
            if name == ".nv.global.init":
                row = " ".join(row.split()[2:])  # not its size: its symbols' bytes are listed on their own
            (parts.setdefault(f, []) if f else module).append(f"section {name} {row}")
    for name, lines in contents.items():
        if name in (".strtab", ".shstrtab", ".symtab") or any(w in name for w in NOT_CODE):
            continue
        if name == ".nv.callgraph":
            for m in regex.finditer(r"<(-?\d+),(-?\d+)>", "\n".join(lines)):
                a, b = int(m.group(1)), int(m.group(2))
                if a in by_index and b in by_index:  # negative and 0 entries are markers, not calls
                    ca, cb = by_index[a].name, by_index[b].name
                    edges.setdefault(ca, set()).add(cb)
                    parts.setdefault(ca, []).append(f"callgraph -> {cb}")
            continue
        if name == ".nv.prototype":
            for m in regex.finditer(r"<(\d+),([^>]*)>", "\n".join(lines)):
                f = symbol_name(m.group(1))
                parts.setdefault(f, []).append(f"prototype {m.group(2)}")
            continue
        f = owner(name)
        if name == ".nv.global.init":
            _global_init(lines, rows[name], symbols, init, literals, parts, module)
            continue
        if name.startswith((".rel.", ".rela.")):
            target = parts.setdefault(f, []) if f else module
            for line in lines:
                fields = line.split()
                if not fields:
                    continue
                target.append(f"{name} " + " ".join(fields))
                if f and len(fields) >= 3 and fields[1] in reached:
                    edges.setdefault(f, set()).add(reached[fields[1]])
            continue
        if name.startswith(".nv.info"):
            for record in RECORD.split("\n".join(lines))[1:]:
                g, text = _info_record(record, symbol_name)
                g = g or f
                (parts.setdefault(g, []) if g else module).append(f"{name} {text}")
            continue
        (parts.setdefault(f, []) if f else module).append(f"{name}\n" + "\n".join(lines))

    current = None
    for line in res_part.splitlines():
        m = regex.match(r"^ Function (\S+):$", line)
        if m:
            current = m.group(1)
            continue
        if line.strip() == "Common:":
            current = "(common)"
            continue
        if current == "(common)":
            continue  # the sum of sections' sizes, each listed on its own
        if line.strip():
            (parts.setdefault(current, []) if current else module).append("res " + line.strip())

    listing = "\tcode for sm_" + sass_part
    blocks = list(FUNCTION.finditer(listing))
    for i, m in enumerate(blocks):
        f = m.group(1)
        end = blocks[i + 1].start() if i + 1 < len(blocks) else len(listing)
        block = listing[m.end():end]
        _check_calls(f, block)
        parts.setdefault(f, []).append("sass" + SPACES.sub(" ", block))  # padding: the image's widest line
        read = {int(n, 16) for n in regex.findall(r"\bc\[0x([0-9a-f]+)\]", block)}
        for section, bank in banks.items():
            if "cx[" in block or int(section[len(".nv.constant"):]) in read:
                edges.setdefault(f, set()).add(bank)

    kernels = {s.name for s in symbols if s.type == "FUNC" and "ENTRY" in s.other.split(",") and s.ndx != 0}
    return module, parts, {k: _reach(k, edges) for k in kernels}


def _global_init(lines: list[str], row: str, symbols: list[_Symbol], init: int | None, literals: dict[str, str],
                 parts: dict[str, list[str]], module: list[str]) -> None:
    """``.nv.global.init``'s printed words as bytes (little-endian, cut at the section's size): each symbol's
    bytes its literal's node's, or the module's by its name; the bytes no symbol holds the module's."""
    size = int(row.split()[1], 16)
    data = b"".join(int(w, 16).to_bytes(4, "little") for line in lines for w in line.split())[:size]
    covered = bytearray(len(data))
    for s in symbols:
        if s.ndx != init or s.type == "SECTION":
            continue
        start, length = int(s.value, 16), int(s.size, 16)
        covered[start:start + length] = b"\1" * len(data[start:start + length])
        line = f"data {s.name} {data[start:start + length].hex()}"
        (parts.setdefault(literals[s.name], []) if s.name in literals else module).append(line)
    module.append("data gaps " + bytes(b for b, c in zip(data, covered) if not c).hex())


def _info_record(record: str, symbol_name) -> tuple[str | None, str]:  # type: ignore[no-untyped-def]
    """One .nv.info record without its ordinal, symbol indices as names; and the function it names, if any."""
    attribute = regex.search(r"Attribute:\t(\S+)", record)
    owner = None
    named = regex.search(r"function: (\S+)\(0x[0-9a-f]+\)", record)
    if named:
        owner = named.group(1)
        record = regex.sub(r"function: (\S+)\(0x[0-9a-f]+\)", r"function: \1", record)
    elif attribute and attribute.group(1) in INDEXED:
        value = regex.search(r"Value:\t(0x[0-9a-f]+)", record)
        if value:
            name = symbol_name(value.group(1))
            if attribute.group(1) in ("EIATTR_MAX_STACK_SIZE", "EIATTR_MIN_STACK_SIZE", "EIATTR_CRS_STACK_SIZE"):
                owner = name
            record = record[:value.start(1)] + name + record[value.end(1):]
    return owner, record.strip()


def _elf(text: str) -> tuple[dict[int, str], dict[str, str], dict[str, list[str]], list[_Symbol]]:
    """The section table (index -> name; name -> size, type and flags), each section's printed contents,
    and the symbol table."""
    lines = text.splitlines()
    sections: dict[int, str] = {}
    rows: dict[str, str] = {}
    for line in lines:
        m = SECTION_ROW.match(line)
        if m:
            sections[int(m.group(1), 16)] = m.group(7)
            rows[m.group(7)] = f"size {m.group(2)} es {m.group(3)} align {m.group(4)} {m.group(5)} flags {m.group(6)}"
        elif sections and not line.strip():
            break
    names = set(sections.values())
    if not names:
        raise OracleError("an ELF listing without a section table")
    contents: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        header = None
        if line.startswith(".section "):
            header = line.split()[1]
        elif line in names:
            header = line
        if header is not None:
            if header in contents:
                raise OracleError(f"section {header} listed twice")
            current = header
            contents[current] = []
        elif current is not None:
            contents[current].append(line.rstrip())
    for name in contents:
        while contents[name] and not contents[name][-1]:
            contents[name].pop()
    symbols = []
    for line in contents.get(".symtab", [])[1:]:
        fields = line.split()
        if len(fields) != 9:
            if fields:
                raise OracleError(f"a symbol row of {len(fields)} fields: {line!r}")
            continue
        ndx = int(fields[7], 16) if fields[7] != "-" else 0
        symbols.append(_Symbol(int(fields[0], 16), fields[1], fields[2], fields[3], fields[4], fields[5], fields[6],
                               ndx, fields[8]))
    return sections, rows, contents, symbols


CALL = regex.compile(r"\b(CALL\.(REL|ABS)[\w.]*)\s+(?:R\d+\s+)?(0x[0-9a-f]+|`\(([^)]*)\))")
OFFSET = regex.compile(r"(?m)^\s+/\*([0-9a-f]{4,})\*/")


def _check_calls(function: str, block: str) -> None:
    """A relative call stays in the function (nvcc's clones of __noinline__ callees); an absolute one is 0x0,
    its target named by a relocation. Anything else is an address the oracle would have to resolve."""
    offsets = [int(o, 16) for o in OFFSET.findall(block)]
    end = max(offsets, default=0) + 16
    for m in CALL.finditer(block):
        if m.group(4) is not None:
            raise OracleError(f"{function}: a call by name ({m.group(0)}): not seen before, read it")
        target = int(m.group(3), 16)
        if m.group(2) == "REL" and not 0 <= target < end:
            raise OracleError(f"{function}: {m.group(0)} leaves the function")
        if m.group(2) == "ABS" and target != 0:
            raise OracleError(f"{function}: {m.group(0)}: an absolute address of another function")


# -- PTX ----------------------------------------------------------------------------------------------------

PTX_FUNCTION = regex.compile(r"(?m)^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)\b")
PTX_LINES = regex.compile(r"(?m)^[ \t]*\.(?:loc|file)\b[^\n]*$")  # line information: not code
PTX_DEBUG = regex.compile(r"(?ms)^[ \t]*\.section[ \t]+\.debug\w*[ \t]*\{.*?^[ \t]*\}")
TOKEN = regex.compile(r"[A-Za-z_$][\w$]*")
PTX_LITERAL = regex.compile(r"\.global\s+(?:\.align\s+\d+\s+)?\.b8\s+(\$str(?:\$\d+)?|__unnamed_\d+)\[")


def _ptx(header: str, body: str) -> tuple[list[str], dict[str, list[str]], dict[str, set[str]]]:
    """Each .entry: the module outside function bodies, its own text, and every .func and nvcc literal it
    names, transitively."""
    module = [line for line in header.splitlines() if line.strip()]
    body = PTX_LINES.sub("", PTX_DEBUG.sub("", body))
    items: dict[str, str] = {}
    entries: set[str] = set()
    outside: list[str] = []
    pos = 0
    for m in PTX_FUNCTION.finditer(body):
        if m.start() < pos:
            continue  # inside a function already taken
        name, end, defined = _ptx_item(body, m.end())
        outside.append(body[pos:m.start()])
        if defined:
            if name in items:
                raise OracleError(f"PTX defines {name} twice")
            items[name] = body[m.start():end]
            if m.group(1) == "entry":
                entries.add(name)
        else:
            outside.append(body[m.start():end])
        pos = end
    outside.append(body[pos:])
    for line in (line.strip() for line in "".join(outside).splitlines()):
        literal = PTX_LITERAL.match(line)
        if literal:  # nvcc's literal: the functions that name it reach it
            items[literal.group(1)] = line
        elif line:
            module.append(line)
    edges = {f: {t for t in TOKEN.findall(text) if t in items and t != f} for f, text in items.items()}
    named = {t for found in edges.values() for t in found}
    for name in [n for n in items if PTX_LITERAL.match(items[n]) and n not in named]:
        module.append(items.pop(name))  # no function names it: every entry's
        edges.pop(name)
    parts = {f: [line.strip() for line in text.splitlines() if line.strip()] for f, text in items.items()}
    return module, parts, {e: _reach(e, edges) for e in entries}


def _ptx_item(text: str, at: int) -> tuple[str, int, bool]:
    """From just after ``.entry``/``.func``: the name, where the item ends, and whether it has a body."""
    i, depth, name = at, 0, None
    while i < len(text):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and name is None and (c.isalpha() or c in "_$"):
            m = TOKEN.match(text, i)
            assert m is not None
            name = m.group(0)
            i = m.end()
            continue
        elif depth == 0 and c == ";":
            if name is None:
                raise OracleError(f"a PTX declaration without a name near {text[at:at + 80]!r}")
            return name, i + 1, False
        elif depth == 0 and c == "{":
            if name is None:
                raise OracleError(f"a PTX function without a name near {text[at:at + 80]!r}")
            braces = 0
            for j in range(i, len(text)):
                if text[j] == "{":
                    braces += 1
                elif text[j] == "}":
                    braces -= 1
                    if braces == 0:
                        return name, j + 1, True
            raise OracleError(f"PTX function {name} never ends")
        i += 1
    raise OracleError(f"PTX ends inside a function header near {text[at:at + 80]!r}")


# -- comparing two builds -------------------------------------------------------------------------------------


@dataclass
class KernelDifference:
    """What changed between two snapshots of a build, kernel by kernel."""

    host_changed: list[str] = field(default_factory=list)  # objects whose host code changed, appeared or went
    kernels_changed: set[str] = field(default_factory=set)  # device code changed, or appeared, or went away
    kernels_added: set[str] = field(default_factory=set)
    kernels_removed: set[str] = field(default_factory=set)
    objects_changed: list[str] = field(default_factory=list)
    why: dict[str, list[str]] = field(default_factory=dict)  # kernel -> "object image: before -> after"
    new_objects: dict[str, frozenset[str]] = field(default_factory=dict)  # object only after -> its kernels

    def must_run(self, tests: dict[str, set[str]], host_reaches: dict[str, set[str]]) -> set[str]:
        """As :meth:`oracle.Difference.must_run`: the tests that launched a changed kernel, and for a host
        change those ``host_reaches`` names for that object (every test, for a host-only object; an object
        the base did not have reaches as its kernels say, or every test if it has none)."""
        found = {t for t, launched in tests.items() if launched & self.kernels_changed}
        for obj in self.host_changed:
            if obj in host_reaches:
                found |= host_reaches[obj]
            else:
                kernels = self.new_objects.get(obj, frozenset())
                found |= {t for t, launched in tests.items() if launched & kernels} if kernels else set(tests)
        return found


def compare(before: dict[str, ObjectSnapshot], after: dict[str, ObjectSnapshot]) -> KernelDifference:
    diff = KernelDifference()
    names_before = frozenset().union(*(s.names for s in before.values()))
    names_after = frozenset().union(*(s.names for s in after.values()))
    diff.kernels_added = set(names_after - names_before)
    diff.kernels_removed = set(names_before - names_after)
    for obj in sorted(set(before) | set(after)):
        a, b = before.get(obj), after.get(obj)
        changed = False
        if a is None or b is None or a.host != b.host:
            diff.host_changed.append(obj)
            changed = True
        if a is None and b is not None:
            diff.new_objects[obj] = b.names
        ka, kb = (a.kernels if a else {}), (b.kernels if b else {})
        for kernel in sorted(set(ka) | set(kb)):
            da, db = ka.get(kernel, {}), kb.get(kernel, {})
            for image in sorted(set(da) | set(db)):
                if da.get(image) != db.get(image):
                    diff.kernels_changed.add(kernel)
                    diff.why.setdefault(kernel, []).append(
                        f"{obj} {image}: {da.get(image, '-')[:12]} -> {db.get(image, '-')[:12]}")
                    changed = True
        if changed:
            diff.objects_changed.append(obj)
    diff.kernels_changed |= diff.kernels_added | diff.kernels_removed
    return diff
