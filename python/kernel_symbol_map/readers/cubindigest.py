"""Per-kernel digests of a CUDA cubin: everything a kernel's device code can run or read.

A kernel's digest covers, each part compared by the names it refers to, never
by an address, an offset between sections or a symbol's index:

* its **node**: every section named for it (``.text.<k>`` with the register
  count nvcc keeps in its ``sh_info``, ``.nv.info.<k>``, ``.nv.constant0.<k>``,
  ``.nv.shared.<k>``'s size...), the relocations of those sections, its symbols
  and those of the callees nvcc cloned into its ``.text`` (``$<k>$<callee>``),
  its attributes in the module's ``.nv.info`` (register count, frame and stack
  sizes), its ``.debug_frame`` records, and its ``.nv.callgraph`` edges;
* the nodes of the device functions it calls or whose address it takes,
  transitively, found through relocations and ``.nv.callgraph``
  (separately compiled code, ``-rdc``, and device-linked images);
* the **constant banks it reads** that hold no variable (``.nv.constant4``,
  the addresses of the strings an ``assert`` or ``printf`` passes, with its
  relocations; ``.nv.constant2``, the compiler's constants), found in its
  machine code: on the
  architectures whose encoding was checked against ``cuobjdump -sass``
  (:data:`BANK_ENCODING`) an instruction's constant operand names its bank
  in bits 54-58; elsewhere every kernel reads every bank;
* the **literals it reaches**: nvcc's string pool in ``.nv.global.init``
  (``$str``, ``$str$1``, ``__unnamed_1``: names no source can spell), each
  by its contents, through the relocations of the code and banks that
  reach it. The build's folders (:mod:`.folders`) are masked in them: a
  device ``assert`` prints ``__FILE__``, an absolute path;
* the **module**: the ELF header, and every section, symbol, relocation,
  attribute or frame record that no function, bank or literal owns (the
  user's ``__device__`` data, whose address the host can hand any kernel,
  the toolkit's notes), folded into every kernel. So is every device function,
  bank or literal that no kernel is known to reach, or whose address a module
  section holds, with what it reaches, or, when some call's target is unknown
  (an indirect call), every device function.

``.nv.global.init`` is digested symbol by symbol, by name and contents,
never by offset: code reaches it only through relocations, which name a
symbol (or the section and an offset, which then shows), so a longer path in
one string, which moves the others, changes no digest.

nvcc's hash of the unit's path in the names of its anonymous namespace is
masked (:mod:`.._unitnames`). Debug information is left out (``.debug_line``, ``.nv_debug_*``: what
``-lineinfo`` and ``-G`` add, with the sources' mtimes in its file table):
the GPU never runs or reads it. ``-G`` changes the code itself, which counts.
A change to one kernel's body therefore leaves the others' digests alone,
while anything it cannot attribute changes them all. Hand-written: no library
reads nvcc's ``.nv.info``/``.nv.callgraph`` records. Their layouts were
checked against ``cuobjdump -elf`` 13.5 (the attribute names it prints for
each code) on nvcc 13.0 cubins, whole-program, ``-rdc`` and device-linked.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
import hashlib
import pickle
import re
import struct
from dataclasses import dataclass, field

from .._graph import reachable
from ._digest import DIGEST_BYTES
from .cubinsections import Namer
from .cuda import STO_CUDA_ENTRY
from .. import _unitnames as unitnames
from ._blob import Blob
from .devicecode import cubin_arch
from .folders import NONE, Folders
from .._unitnames import unit_hash
from .elf import (
    EM_CUDA,
    SHF_EXECINSTR,
    SHN_LORESERVE,
    SHN_UNDEF,
    SHT_NOBITS,
    SHT_REL,
    SHT_RELA,
    SHT_SYMTAB,
    STT_FUNC,
    STT_OBJECT,
    STT_SECTION,
    ElfFile,
    Header,
    Section,
)

MODULE = ""  # the node of what no function owns
GLOBAL_INIT = b".nv.global.init"  # initialised global data: user variables and nvcc's string pool
BANK = re.compile(rb"\.nv\.constant(\d+)")  # a module's constant bank (a kernel's own is .nv.constant0.<k>)
POOLED = re.compile(r"\$str(?:\$\d+)?|__unnamed_\d+")  # nvcc's literals: no source can name them
STT_CUDA_OBJECT = 13  # what relocatable device code (-rdc) types its data objects as (STT_LOPROC)
DATA = frozenset({STT_OBJECT, STT_CUDA_OBJECT})
# Where an instruction's constant operand names its bank (bits 54-58 of its first 64-bit word) on the
# architectures checked against cuobjdump -sass: every c[<bank>] it prints was found so, none missed.
BANK_ENCODING = frozenset({"sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
                           "sm_110", "sm_120", "sm_121"})
_BANK_LOW = bytes(b >> 6 for b in range(256))  # byte 6's top two bits: the bank's bits 0-1
_BANK_HIGH = bytes((b & 0x07) << 2 for b in range(256))  # byte 7's low three bits: the bank's bits 2-4
NV_INFO = b".nv.info"
CALLGRAPH = b".nv.callgraph"
DEBUG_FRAME = b".debug_frame"  # digested: nvcc writes it for every build, and it follows the code
DEBUG_PREFIXES = (b".debug_", b".nv_debug_")  # the rest of the debug information: left out

# .nv.info: a u8 format and a u8 attribute, then a u16 value, or (EIFMT_SVAL) a u16 size and that many bytes.
InfoHead = struct.Struct("<BBH")
EIFMT_SVAL = 0x04
# Attributes whose value starts with a u32 symbol index (cuobjdump prints "function: <name>(index)" or
# the parameter bank's section): EIATTR_FRAME_SIZE, MIN_STACK_SIZE, MAX_STACK_SIZE, REGCOUNT, PARAM_CBANK.
FIRST_IS_SYMBOL = frozenset({0x11, 0x12, 0x23, 0x2F, 0x0A})
EIATTR_EXTERNS = 0x0F  # every u32 is a symbol index
# .nv.callgraph: (caller, callee) symbol indices; markers have caller 0 and a negative callee. Each marker
# starts a group: calls (-1); then, as nvcc 12-13 write them (a pair per function, the second field 1):
# functions whose address is taken (-2) and functions that call through a pointer (-3); then -4.
CallEdge = struct.Struct("<II")
CALLS, ADDRESS_TAKEN, CALLS_INDIRECTLY = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
# .debug_frame (DWARF CFI): a u32 length, or 0xffffffff and a u64 length; then the CIE id or pointer.
U32 = struct.Struct("<I")
_HEAD64 = struct.Struct("<IQQ")  # a 64-bit record's 0xffffffff, length and CIE id or pointer
CIE_IDS = (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)


_blake2b, _dumps = hashlib.blake2b, pickle.dumps  # bound once: tens of thousands of facts per cubin
# Facts are pickled, and pickle writes a second reference to an object it has written, not a second copy: so
# which fields are one object is in the digest. Every field is made as it always was: a name looked up by
# index is one object per index (a symbol's, a section's), while a section symbol's "[<section>]", a
# symbol's section name in `_symbols` and a one-byte section's contents are made anew at each use.


def _part(*fields: bytes | str | int) -> bytes:
    """One fact as a digest of its fields (pickled: unambiguous, and one C call for tens of thousands of
    facts per cubin); a node's facts are sorted, then digested."""
    return _blake2b(_dumps(fields, protocol=5), digest_size=16).digest()


@dataclass
class _Graph:
    """Facts per node (a function's name, or MODULE) and what each node refers to."""

    facts: dict[str, list[bytes]] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    folded: set[str] = field(default_factory=set)  # device functions folded into the module
    unknown_call: bool = False

    def add(self, node: str, *fact: bytes | str | int) -> None:
        facts = self.facts.get(node)
        if facts is None:
            facts = self.facts[node] = []
        facts.append(_blake2b(_dumps(fact, protocol=5), digest_size=16).digest())  # _part, inlined: the hot path

    def edge(self, node: str, to: str) -> None:
        if to != node:
            if node == MODULE:
                self.folded.add(to)  # a module section holds its address: any kernel may reach it
            else:
                self.edges.setdefault(node, set()).add(to)

    def digest(self, node: str) -> bytes:
        """The node's sorted facts, digested (one update of them all: what an update of each gives)."""
        return _blake2b(b"".join(sorted(self.facts.get(node, ()))), digest_size=16).digest()


class CubinSymbols:
    """A cubin's symbols, its functions and which function each section is named for: what
    :func:`.sizes.cubin` parses and :func:`kernel_digests` walks, parsed once for both. Made from the
    section headers, the symbol table and its rows (:meth:`ElfFile.symbol_rows`); nothing here raises."""

    def __init__(self, headers: tuple[Header, ...], table: Section | None, rows: list[tuple[int, int, int, int, int, int]],
                 names: list[str]) -> None:
        self.headers = headers
        self.symtab = table.index if table else -1
        self.strtab = table.link if table else -1
        # By symbol index: (st_name, st_info, st_other, st_shndx, st_value, st_size), and the name.
        self.rows, self.symbol_names = rows, names
        self._limit = limit = min(len(headers), SHN_LORESERVE)
        # Defined functions, by name: the index of the last symbol of that name.
        self.functions = functions = {names[i]: i for i, r in enumerate(rows)
                                      if r[1] & 0xF == STT_FUNC and r[3] != SHN_UNDEF and r[3] < limit}
        self.kernels = sorted(n for n, i in functions.items() if rows[i][2] & STO_CUDA_ENTRY)
        namer = Namer({n.encode(): n for n in functions})
        self.dotted = namer.dotted  # a function's name has a dot: sections are named for the longest one
        self.section_owner = owner = namer.owners([h.name for h in headers], MODULE)
        # By symbol index, computed once: what symbol_name, function_at and node_at answer (thousands of calls
        # a cubin); a section symbol's name is None here, made at each call.
        self._symbol_names = [None if r[1] & 0xF == STT_SECTION else n for r, n in zip(rows, names)]
        self._function_of: list[str | None] = [None] * len(rows)
        self._node_at: list[str | None] = [None] * len(rows)
        for i in functions.values():
            self._function_of[i] = names[i]
            self._node_at[i] = owner[rows[i][3]]


class _Cubin(CubinSymbols):
    """A cubin's sections, symbols and which node owns each."""

    def __init__(self, elf: ElfFile, symbols: CubinSymbols | None = None, raw: bytes | None = None) -> None:
        self.elf = elf
        if symbols is None:
            headers = elf.header_list()  # first: its errors before the symbols' (the order they always had)
            table = elf.symbol_table(SHT_SYMTAB)
            rows, names = elf.symbol_rows(table) if table else ([], [])
            CubinSymbols.__init__(self, headers, table, rows, names)
        else:
            self.__dict__.update(symbols.__dict__)
        # sliced per section: one read, not one each (the caller's, when it has read it already)
        self.raw = elf.blob.read(0, elf.blob.size, "cubin") if raw is None else raw
        self._data()

    def _data(self) -> None:
        """The module's banks and literals as nodes of their own: which section is which bank's, which
        symbols are in ``.nv.global.init`` (by where they start) and which node each is, and what a
        relocation naming a symbol reaches."""
        owners = list(self.section_owner)
        self.banks: dict[int, str] = {}  # bank number -> its node
        self.literals: set[int] = set()  # .nv.global.init sections
        # A bank that holds a variable (__constant__) stays the module's: the host may hand its address to
        # any kernel. One of addresses (4) or of the compiler's constants (2) is read only where code reads it.
        named = {r[3] for r in self.rows if r[1] & 0xF != STT_SECTION and r[3] != SHN_UNDEF}
        for i, h in enumerate(self.headers):
            if owners[i] != MODULE:
                continue
            bank = BANK.fullmatch(h.name)
            if bank and i not in named:
                owners[i] = self.banks[int(bank.group(1))] = f"[bank {int(bank.group(1))}]"
            elif h.name == GLOBAL_INIT and h.type != SHT_NOBITS:
                self.literals.add(i)
        self.section_owner = owners  # this cubin's, banks added; the shared symbols' list is not changed
        self.spans: dict[int, list[tuple[int, int, int]]] = {i: [] for i in self.literals}  # (start, end, symbol)
        self.literal_nodes: dict[int, str] = {}  # symbol -> its node (a pooled literal's, else MODULE)
        self.data_nodes: dict[int, list[str]] = {}  # symbol -> the bank or literals a reference to it reaches
        pooled: dict[int, list[str]] = {i: [] for i in self.literals}
        for index, (_, info, _, shndx, value, size) in enumerate(self.rows):
            kind = info & 0xF
            if shndx in self.literals and kind != STT_SECTION:
                name = self.symbol_names[index]
                node = f"[literal {name}]" if kind in DATA and POOLED.fullmatch(name) else MODULE
                self.literal_nodes[index] = node
                if size:
                    self.spans[shndx].append((value, value + size, index))
                if node != MODULE:
                    pooled[shndx].append(node)
                    self.data_nodes[index] = [node]
            elif 0 < shndx < len(owners) and owners[shndx].startswith("[bank "):
                self.data_nodes[index] = [owners[shndx]]
        for index, (_, info, _, shndx, _, _) in enumerate(self.rows):  # a section and an offset: all its literals
            if info & 0xF == STT_SECTION and shndx in self.literals:
                self.data_nodes[index] = pooled[shndx]
        for found in self.spans.values():
            found.sort()
        self.pooled = {n for nodes in pooled.values() for n in nodes}
        self.decodes_banks = cubin_arch(self.elf) in BANK_ENCODING

    def literal_at(self, section: int, offset: int) -> int | None:
        """The symbol of ``.nv.global.init`` section ``section`` whose bytes hold ``offset``, if one does."""
        spans = self.spans[section]
        k = bisect_right(spans, (offset, float("inf"))) - 1  # the last that starts at or before it
        return spans[k][2] if k >= 0 and offset < spans[k][1] else None

    def node_of(self, function: str) -> str:
        """A function's node: the function its section is named for (nvcc clones callees into a kernel's
        ``.text``), or MODULE when its code is in a section no function owns."""
        return self.section_owner[self.rows[self.functions[function]][3]]

    def section_name(self, index: int) -> str:
        return self.headers[index].name.decode(errors="replace") if 0 <= index < len(self.headers) else f"#{index}"

    def symbol_name(self, index: int) -> str:
        """A symbol by name; a section symbol by its section's; an index out of range as itself."""
        if not 0 <= index < len(self._symbol_names):
            return f"#{index}"
        name = self._symbol_names[index]
        return f"[{self.section_name(self.rows[index][3])}]" if name is None else name

    def function_at(self, index: int) -> str | None:
        """The defined function symbol ``index`` names, if it names one."""
        return self._function_of[index] if 0 <= index < len(self._function_of) else None

    def node_at(self, index: int) -> str | None:
        """``node_of(function_at(index))``, or None where ``index`` names no defined function."""
        return self._node_at[index] if 0 <= index < len(self._node_at) else None

    def data(self, index: int) -> bytes:
        h = self.headers[index]
        if h.type == SHT_NOBITS:
            return b""
        if h.offset + h.size > len(self.raw) or h.size == 1:  # a size is a claim: the blob's own check names
            # it; one byte: a read's fresh object, not the singleton a slice gives (see _dumps)
            return self.elf.blob.read(h.offset, h.size, f"section {self.section_name(index)}")
        return self.raw[h.offset : h.offset + h.size]


def kernel_digests(elf: ElfFile, symbols: CubinSymbols | None = None, folders: Folders = NONE) -> dict[str, str]:
    """Each kernel's digest (hex), for the kernels ``cuda.cubin_kernels`` lists; ``symbols``: ``elf``'s, if
    they were parsed already; ``folders``: the build's, masked in literals."""
    if elf.machine != EM_CUDA:
        raise elf.blob.error(f"cubin has e_machine {elf.machine}, expected {EM_CUDA} (CUDA)")
    raw = elf.blob.read(0, elf.blob.size, "cubin")
    unit = unit_hash(raw)
    if unit is not None:  # its unit's hash masked, at its length: digested as if built in any folder
        raw = unitnames.masked(raw, unit)
        elf, symbols = ElfFile(Blob.from_bytes(elf.blob.name, raw)), None
    return unitnames.unmasked(_kernel_digests(elf, symbols, folders, raw), unit)


def _kernel_digests(elf: ElfFile, symbols: CubinSymbols | None, folders: Folders, raw: bytes) -> dict[str, str]:
    cubin = _Cubin(elf, symbols, raw)
    banks = cubin.banks
    graph = _Graph()
    graph.add(MODULE, "elf", elf.ident, elf.type, elf.machine, elf.flags)
    relocations: dict[int, list[int]] = {}  # target section -> its relocation sections
    skipped = (0, cubin.symtab, cubin.strtab, elf.names_index)
    owners, info_prefix, raw = cubin.section_owner, NV_INFO + b".", cubin.raw
    whole = len(raw)
    for i, h in enumerate(cubin.headers):
        if i in skipped:
            continue
        if h.type in (SHT_REL, SHT_RELA):
            relocations.setdefault(h.info, []).append(i)
            continue
        if h.name != DEBUG_FRAME and h.name.startswith(DEBUG_PREFIXES):
            continue
        if h.name == DEBUG_FRAME:
            continue  # with its relocations, below
        owner = owners[i]
        if h.name == NV_INFO or h.name.startswith(info_prefix):
            _info(cubin, graph, i, owner)
        elif h.name == CALLGRAPH:
            _callgraph(cubin, graph, i)
        elif i in cubin.literals:
            _global_init(cubin, graph, i, folders)
        else:
            registers = h.info >> 24 if h.flags & SHF_EXECINSTR else 0  # nvcc: sh_info = regs << 24 | symbol
            end = h.offset + h.size  # data(i), inlined where it is a slice
            contents = b"" if h.type == SHT_NOBITS else raw[h.offset : end] if end <= whole and h.size != 1 else cubin.data(i)
            graph.add(owner, "section", h.name, h.type, h.flags, h.addralign, h.entsize, registers, h.size, contents)
            if registers or h.flags & SHF_EXECINSTR:
                _reads_banks(cubin, graph, owner, contents, banks)
    count = len(cubin.headers)
    for target, sections in relocations.items():
        debug = 0 <= target < count and cubin.headers[target].name.startswith(DEBUG_PREFIXES)
        if debug and cubin.headers[target].name != DEBUG_FRAME:
            continue  # relocations of left-out debug information
        if debug:
            _debug_frame(cubin, graph, target, sections)
        elif target in cubin.literals:
            for r in sections:
                _literal_relocations(cubin, graph, r)
        else:
            for r in sections:
                _relocations(cubin, graph, r, owners[target] if 0 <= target < count else MODULE)
    frames = [i for i, h in enumerate(cubin.headers) if h.name == DEBUG_FRAME and i not in relocations]
    for i in frames:  # a .debug_frame without relocations names no function: the module's
        graph.add(MODULE, "section", DEBUG_FRAME, cubin.data(i))
    _symbols(cubin, graph)
    return _digests(cubin, graph)


# nvcc's .nv.info records, tokenised at C speed: a run of records that name no symbol (u16 values, and the
# values of 0 to 24 bytes of other attributes), or one that names a symbol first (4, 8 or 12 bytes). A record
# of another shape (an EXTERNS list, a longer value, a truncated end) leaves a gap: then the records are walked.
_NAMES_FIRST = rb"[\x0a\x11\x12\x23\x2f]"  # FIRST_IS_SYMBOL
_INFO_TOKENS = re.compile(
    rb"((?:[^\x04][\x00-\xff]{3}|\x04[^\x0a\x0f\x11\x12\x23\x2f](?:\x00\x00|\x04\x00[\x00-\xff]{4}"
    rb"|\x08\x00[\x00-\xff]{8}|\x0c\x00[\x00-\xff]{12}|\x10\x00[\x00-\xff]{16}|\x14\x00[\x00-\xff]{20}"
    rb"|\x18\x00[\x00-\xff]{24}))+)"
    rb"|(\x04" + _NAMES_FIRST + rb"(?:\x04\x00[\x00-\xff]{4}|\x08\x00[\x00-\xff]{8}|\x0c\x00[\x00-\xff]{12}))")
assert set(_NAMES_FIRST[1:-1].decode("unicode_escape").encode("latin-1")) == FIRST_IS_SYMBOL


def _info(cubin: _Cubin, graph: _Graph, index: int, owner: str) -> None:
    """``.nv.info`` attributes: the module's are each given to the function they name (register count,
    frame and stack sizes); a function's own (``.nv.info.<f>``) stay its, symbol indices named. Records
    that name no symbol are digested as they are, together."""
    data = cubin.data(index)
    name = cubin.headers[index].name
    plain: list[bytes] = []  # the owner's records that name no symbol, in order, as runs of records
    named: dict[str, list[tuple[object, ...]]] = {}  # node -> its records that name symbols, in order
    module = owner == MODULE
    covered = 0
    for run, record in _INFO_TOKENS.findall(data):
        if run:
            plain.append(run)
            covered += len(run)
            continue
        covered += len(record)
        symbol = record[4] | record[5] << 8 | record[6] << 16 | record[7] << 24
        text, node = _named_by(cubin, symbol, owner, module)
        facts = named.get(node)
        if facts is None:
            facts = named[node] = []
        facts.append((record[1], text, record[8:]))
    if covered != len(data):  # a record the tokens do not know: walked
        found = _info_walk(cubin, data, owner)
        if found is None:  # not the layout we know: kept whole, where it is
            graph.add(owner, "info", name, data)
            return
        plain, named = found
    graph.add(owner, "info", name, b"".join(plain))
    for node, facts in named.items():
        graph.add(node, "info-named", name, _dumps(facts, protocol=5))


def _named_by(cubin: _Cubin, symbol: int, owner: str, module: bool) -> tuple[str, str]:
    """A record's symbol by name, and the node the record is then a fact of: the function it names when the
    record is the module's, else its section's owner."""
    if symbol >= len(cubin._symbol_names):
        return f"#{symbol}", owner
    text = cubin._symbol_names[symbol]
    node = cubin._node_at[symbol] if module else None
    return (cubin.symbol_name(symbol) if text is None else text), (owner if node is None else node)


def _info_walk(cubin: _Cubin, data: bytes, owner: str) -> tuple[list[bytes], dict[str, list[tuple[object, ...]]]] | None:
    """The records of ``.nv.info`` data walked one by one: those that name no symbol (as runs), those that
    do by node; None when they do not end where the data does."""
    plain = []
    named: dict[str, list[tuple[object, ...]]] = {}
    symbol_name, module = cubin.symbol_name, owner == MODULE
    at, run, size = 0, 0, len(data)
    while at + InfoHead.size <= size:
        fmt, attr, value = InfoHead.unpack_from(data, at)
        if fmt != EIFMT_SVAL:
            at += InfoHead.size  # a u16 value: no symbol
            continue
        end = at + InfoHead.size + value
        if end > size:
            break
        if attr == EIATTR_EXTERNS and value % 4 == 0:
            if run < at:
                plain.append(data[run:at])
            run = end
            named.setdefault(owner, []).append(
                (attr, *(symbol_name(i) for (i,) in U32.iter_unpack(data[at + 4 : end]))))
        elif value >= 4 and attr in FIRST_IS_SYMBOL:
            if run < at:
                plain.append(data[run:at])
            run = end
            (symbol,) = U32.unpack_from(data, at + 4)
            text, node = _named_by(cubin, symbol, owner, module)
            named.setdefault(node, []).append((attr, text, data[at + 8 : end]))
        at = end
    if at != size:
        return None
    if run < at:
        plain.append(data[run:at])
    return plain, named


def _callgraph(cubin: _Cubin, graph: _Graph, index: int) -> None:
    """Call edges: each is its caller's, by the callee's name; a marker (no calling function) the module's.
    A function whose address is taken is the module's to reach (any kernel may call it through a pointer
    the host hands it); one that calls through a pointer, or an entry we cannot read, may call any."""
    data = cubin.data(index)
    if len(data) % CallEdge.size:
        graph.add(MODULE, "callgraph", data)
        graph.unknown_call = True  # not the layout we know: any function may call any other
        return
    group = None
    for caller, callee in CallEdge.iter_unpack(data):
        function = cubin.function_at(caller)
        if function is None:
            graph.add(MODULE, "callgraph", cubin.symbol_name(caller) if caller else 0, callee)
            group = callee if caller == 0 else None
            continue
        node = cubin.node_at(caller)
        target = cubin.node_at(callee)
        graph.add(node, "call", function, cubin.symbol_name(callee), group)
        if group == ADDRESS_TAKEN and callee == 1:
            graph.edge(MODULE, node)  # as when a module section holds its address
        elif group == CALLS and target is not None:
            graph.edge(node, target)
        elif group != CALLS or not _undefined_function(cubin, callee):
            graph.unknown_call = True  # an indirect call: its target is any function whose address is taken


def _undefined_function(cubin: _Cubin, index: int) -> bool:
    """An external function (``vprintf``, another object's under ``-rdc``): called by its name."""
    if not 0 <= index < len(cubin.rows):
        return False
    row = cubin.rows[index]
    return row[1] & 0xF == STT_FUNC and row[3] == SHN_UNDEF


def _relocations(cubin: _Cubin, graph: _Graph, index: int, node: str) -> None:
    """Relocations of a section, by the names they refer to; a reference to a function is an edge."""
    target = cubin.section_name(cubin.headers[index].info)
    for r in cubin.elf.relocations(cubin.elf.section_at(index)):
        graph.add(node, "reloc", target, r.offset, r.type, cubin.symbol_name(r.symbol), r.addend)
        _refers(cubin, graph, node, r.symbol)


def _banks_read(code: bytes) -> bytes:
    """The bank of each 128-bit instruction's constant operand, where it would be (bits 54-58): an
    instruction without one gives whatever its bits hold there, read as a bank too (never one too few).
    Sliced and combined as whole integers: at C speed, not an instruction at a time."""
    count = len(code) // 16
    low = code[6::16][:count].translate(_BANK_LOW)
    high = code[7::16][:count].translate(_BANK_HIGH)
    return (int.from_bytes(low, "little") | int.from_bytes(high, "little")).to_bytes(count, "little")


def _reads_banks(cubin: _Cubin, graph: _Graph, owner: str, code: bytes, banks: dict[int, str]) -> None:
    """An edge from the owner of machine code ``code`` to each module bank it reads: every bank where
    the encoding is not one :data:`BANK_ENCODING` names."""
    if not banks:
        return
    read = _banks_read(code) if cubin.decodes_banks else None
    for number, node in banks.items():
        if read is None or bytes((number,)) in read:
            graph.edge(owner, node)


def _global_init(cubin: _Cubin, graph: _Graph, index: int, folders: Folders) -> None:
    """``.nv.global.init``: each symbol's bytes, ``folders`` masked, its node's (a pooled literal's, or the
    module's); the bytes no symbol holds the module's, in order, without their offsets."""
    h = cubin.headers[index]
    data = cubin.data(index)
    graph.add(MODULE, "section", h.name, h.type, h.flags, h.addralign, h.entsize)
    gaps, covered = [], 0
    for start, end, symbol in cubin.spans[index]:
        if start > covered:
            gaps.append(data[covered:start])
        graph.add(cubin.literal_nodes[symbol], "literal", h.name, cubin.symbol_names[symbol],
                  folders.mask(data[start:end]))
        covered = max(covered, end)
    gaps.append(data[covered:])
    graph.add(MODULE, "gaps", h.name, *gaps)


def _literal_relocations(cubin: _Cubin, graph: _Graph, index: int) -> None:
    """Relocations of ``.nv.global.init`` (an address in initialised data): each by the symbol that holds
    it and where in it, its node's, with an edge to what it names."""
    target = cubin.headers[index].info
    name = cubin.section_name(target)
    for r in cubin.elf.relocations(cubin.elf.section_at(index)):
        holder = cubin.literal_at(target, r.offset)
        if holder is None:
            node, where = MODULE, ("#", r.offset)
        else:
            node, where = cubin.literal_nodes[holder], (cubin.symbol_names[holder], r.offset - cubin.rows[holder][4])
        graph.add(node, "reloc", name, *where, r.type, cubin.symbol_name(r.symbol), r.addend)
        _refers(cubin, graph, node, r.symbol)


def _refers(cubin: _Cubin, graph: _Graph, node: str, symbol: int) -> None:
    """Edges from ``node`` to what a reference to ``symbol`` reaches: a function, a bank, literals."""
    to = cubin.node_at(symbol)
    if to is not None:
        graph.edge(node, to)
    for data in cubin.data_nodes.get(symbol, ()):
        graph.edge(node, data)


def _debug_frame(cubin: _Cubin, graph: _Graph, index: int, relocation_sections: list[int]) -> None:
    """``.debug_frame``: each FDE (with its CIE's bytes in place of the CIE's offset) is the function's its
    relocations name; a record naming no function, or several, is the module's."""
    data = cubin.data(index)
    relocs = [r for s in relocation_sections for r in cubin.elf.relocations(cubin.elf.section_at(s))]
    records = _frame_records(data)
    if records is None:
        graph.add(MODULE, "debug_frame", data)
        for r in relocs:
            graph.add(MODULE, "reloc", ".debug_frame", r.offset, r.type, cubin.symbol_name(r.symbol), r.addend)
        return
    cies = {start: data[start:end] for start, end, _id_at, _id_size, is_cie in records if is_cie}
    relocs.sort()
    offsets = [r.offset for r in relocs]
    names, nodes, symbol_name, symbols = cubin._symbol_names, cubin._node_at, cubin.symbol_name, len(cubin.rows)
    for start, end, id_at, id_size, is_cie in records:
        inside = relocs[bisect_left(offsets, start) : bisect_left(offsets, end)] if relocs else relocs
        if is_cie and not inside:
            continue  # a CIE is in the digest of every FDE that points to it
        node = MODULE  # unless they name functions of one node
        if len(inside) == 1:
            symbol = inside[0].symbol
            if symbol < symbols and nodes[symbol] is not None:
                node = nodes[symbol]
        elif inside:
            found = {n for r in inside if r.symbol < symbols and (n := nodes[r.symbol]) is not None}
            if len(found) == 1:
                node = found.pop()
        if is_cie:
            body = data[start:end]
        else:  # the CIE pointer is an offset in the section: its CIE's bytes instead
            pointer = int.from_bytes(data[id_at : id_at + id_size], "little")
            body = data[start:id_at] + cies.get(pointer, data[id_at : id_at + id_size]) + data[id_at + id_size : end]
        parts = []
        for offset, kind, symbol, addend in inside:  # _part, inlined
            text = names[symbol] if symbol < symbols else None
            parts.append(_blake2b(_dumps((offset - start, kind, symbol_name(symbol) if text is None else text,
                                          addend), protocol=5), digest_size=16).digest())
        graph.add(node, "frame", body, *parts)


def _frame_records(data: bytes) -> list[tuple[int, int, int, int, bool]] | None:
    """``(start, end, where the CIE id or pointer is, its size, is a CIE)`` of each record; None if one
    runs past the section."""
    records = []
    at, size, unpack32, head64 = 0, len(data), U32.unpack_from, _HEAD64.unpack_from
    while at < size:
        if at + _HEAD64.size <= size:  # room for a 64-bit record's head: read at once
            first, length, cie_id = head64(data, at)
            if first == 0xFFFFFFFF:  # 64-bit DWARF, as nvcc writes it
                head = at + 12
                end = head + length
                if length < 8 or end > size:
                    return None
                records.append((at, end, head, 8, cie_id in CIE_IDS))
                at = end
                continue
        if at + 4 > size:
            return None
        (length,) = unpack32(data, at)
        if length == 0xFFFFFFFF:  # a 64-bit record needs 20 bytes at least (its head, a length >= 8): none left
            return None
        head = at + 4
        end = head + length
        if length < 4 or end > size:
            return None
        (cie_id,) = unpack32(data, head)
        records.append((at, end, head, 4, cie_id == 0xFFFFFFFF))
        at = end
    return records


def _symbols(cubin: _Cubin, graph: _Graph) -> None:
    """Each defined symbol is its section owner's fact; section symbols name sections, undefined ones are
    referred to by name where they are used."""
    per_node: dict[str, list[tuple[object, ...]]] = {}
    headers, owners, limit = cubin.headers, cubin.section_owner, cubin._limit
    literals, literal_nodes = cubin.literals, cubin.literal_nodes
    for index, ((_, info, other, shndx, value, size), name) in enumerate(zip(cubin.rows, cubin.symbol_names)):
        if index == 0 or info & 0xF == STT_SECTION or shndx == SHN_UNDEF:
            continue
        if shndx in literals:  # by name, not where it starts or how long a path made it
            where = headers[shndx].name.decode(errors="replace")
            per_node.setdefault(literal_nodes[index], []).append((name, info, other, where))
            continue
        if shndx < limit:  # defined: its section by name, decoded anew for each symbol (see _dumps)
            where, node = headers[shndx].name.decode(errors="replace"), owners[shndx]
        else:
            where, node = f"#{shndx}", MODULE
        facts = per_node.get(node)
        if facts is None:
            facts = per_node[node] = []
        facts.append((name, info, other, where, value, size))
    for node, facts in per_node.items():  # in table order: the same symbols in the same order
        graph.add(node, "symbols", _dumps(facts, protocol=5))


def _digests(cubin: _Cubin, graph: _Graph) -> dict[str, str]:
    digests: dict[str, bytes] = {}  # a callee's or a folded node's: every kernel's that reaches it

    def digest(node: str) -> bytes:
        found = digests.get(node)
        if found is None:
            found = digests[node] = graph.digest(node)
        return found

    owners, rows = cubin.section_owner, cubin.rows
    node_of = {f: owners[rows[i][3]] for f, i in cubin.functions.items()}  # cubin.node_of, for each function
    kernel_nodes = {node_of[k] for k in cubin.kernels}
    reached = reachable(graph.edges, kernel_nodes)
    devices = set(node_of.values()) - kernel_nodes - {MODULE}
    others = devices | set(cubin.banks.values()) | cubin.pooled
    seeds = graph.folded | (others - reached)  # no kernel is known to reach them: every kernel may
    if graph.unknown_call:
        seeds |= devices
    folded = reachable(graph.edges, seeds)  # with what they reach
    module = hashlib.blake2b(digest(MODULE), digest_size=16)
    for node in sorted(folded - {MODULE}):
        module.update(_part(node, digest(node)))
    base = module.digest()
    out = {}
    for kernel in cubin.kernels:
        node = node_of[kernel]
        h = hashlib.blake2b(base, digest_size=DIGEST_BYTES)
        for n in sorted(reachable(graph.edges, {node}) - folded - {MODULE}):
            h.update(_blake2b(_dumps((n, digest(n)), protocol=5), digest_size=16).digest())  # _part, inlined
        out[kernel] = h.hexdigest()
    return out
