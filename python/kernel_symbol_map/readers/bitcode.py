"""LLVM bitcode: the kernels an AMDGPU module defines, read without LLVM.

``-fgpu-rdc`` HIP objects carry bitcode, not code objects, until the device
link. Each kernel is still there, exactly: a function *defined* in the
module (``isproto`` 0) with the ``amdgpu_kernel`` calling convention (91).

Hand-written: no kept Python library reads LLVM bitcode short of llvmlite,
which is a whole LLVM of its own. Only what this needs is read: the
bitstream container (blocks, abbreviations, BLOCKINFO), the module block's
``FUNCTION`` records and the string table they point into; every other
block is skipped by its length. Layouts follow LLVM's ``LLVMBitCodes.h``
and the bitstream format documentation.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._blob import Blob

MAGIC = b"BC\xc0\xde"

# Block ids (LLVMBitCodes.h)
BLOCKINFO_BLOCK = 0
MODULE_BLOCK = 8
STRTAB_BLOCK = 23
# Abbreviation ids every stream has
END_BLOCK, ENTER_SUBBLOCK, DEFINE_ABBREV, UNABBREV_RECORD = 0, 1, 2, 3
FIRST_APPLICATION_ABBREV = 4
# Record codes
BLOCKINFO_CODE_SETBID = 1
MODULE_CODE_VERSION = 1
MODULE_CODE_FUNCTION = 8  # [strtab offset, strtab size, type, callingconv, isproto, linkage, ...]
STRTAB_BLOB = 1
CALLING_CONV_AMDGPU_KERNEL = 91
# Abbreviation operand encodings
_FIXED, _VBR, _ARRAY, _CHAR6, _BLOB = 1, 2, 3, 4, 5
_CHAR6_TABLE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"
_MAX_RECORD_OPS = 1 << 20  # a bound on any record's length, so a corrupt count cannot allocate forever


@dataclass(frozen=True)
class _Op:
    encoding: int  # 0 for a literal
    value: int  # the literal, or the width of a fixed or VBR field


class _Stream:
    """A cursor over the bitstream, in bits; every read is checked against the end."""

    def __init__(self, blob: Blob) -> None:
        self.blob = blob
        self.data = blob.read(0, blob.size, "bitcode")
        self.end = len(self.data) * 8
        self.pos = len(MAGIC) * 8

    def error(self, what: str) -> Exception:
        return self.blob.error(f"bitcode: {what}", self.pos // 8)

    def fixed(self, width: int) -> int:
        if width == 0:
            return 0
        if width > 64 or self.pos + width > self.end:
            raise self.error(f"a {width}-bit field runs past the end")
        first, shift = self.pos >> 3, self.pos & 7
        chunk = self.data[first : (self.pos + width + 7) >> 3]
        self.pos += width
        return (int.from_bytes(chunk, "little") >> shift) & ((1 << width) - 1)

    def vbr(self, width: int) -> int:
        if width < 2 or width > 32:
            raise self.error(f"a VBR field of width {width}")
        value, shift, high = 0, 0, 1 << (width - 1)
        while True:
            piece = self.fixed(width)
            value |= (piece & (high - 1)) << shift
            if not piece & high:
                return value
            shift += width - 1
            if shift > 64:
                raise self.error("a VBR value longer than 64 bits")

    def align32(self) -> None:
        self.pos = min((self.pos + 31) & ~31, self.end)

    def seek(self, bit: int) -> None:
        if bit > self.end:
            raise self.error("a block runs past the end")
        self.pos = bit


def _define_abbrev(s: _Stream) -> list[_Op]:
    ops = []
    count = s.vbr(5)
    i = 0
    while i < count:
        if s.fixed(1):
            ops.append(_Op(0, s.vbr(8)))
        else:
            encoding = s.fixed(3)
            if encoding in (_FIXED, _VBR):
                ops.append(_Op(encoding, s.vbr(5)))
            elif encoding in (_ARRAY, _CHAR6, _BLOB):
                ops.append(_Op(encoding, 0))
            else:
                raise s.error(f"unknown abbreviation encoding {encoding}")
        i += 1
    if not ops or any(op.encoding == _ARRAY for op in ops[:-2]) or (ops[-1].encoding == _ARRAY):
        raise s.error("a malformed abbreviation")
    return ops


def _scalar(s: _Stream, op: _Op) -> int:
    if op.encoding == 0:
        return op.value
    if op.encoding == _FIXED:
        return s.fixed(op.value)
    if op.encoding == _VBR:
        return s.vbr(op.value)
    if op.encoding == _CHAR6:
        return ord(_CHAR6_TABLE[s.fixed(6)])
    raise s.error("an array or blob where a scalar belongs")


def _record(s: _Stream, abbrev_id: int, abbrevs: list[list[_Op]]) -> tuple[int, list[int], bytes]:
    """(code, operands, blob) of the record that starts with ``abbrev_id``."""
    if abbrev_id == UNABBREV_RECORD:
        code, count = s.vbr(6), s.vbr(6)
        if count > _MAX_RECORD_OPS:
            raise s.error(f"a record of {count} operands")
        return code, [s.vbr(6) for _ in range(count)], b""
    index = abbrev_id - FIRST_APPLICATION_ABBREV
    if not 0 <= index < len(abbrevs):
        raise s.error(f"undefined abbreviation {abbrev_id}")
    ops = abbrevs[index]
    values: list[int] = []
    blob = b""
    i = 0
    while i < len(ops):
        op = ops[i]
        if op.encoding == _ARRAY:
            count = s.vbr(6)
            if count > _MAX_RECORD_OPS:
                raise s.error(f"an array of {count} elements")
            values += [_scalar(s, ops[i + 1]) for _ in range(count)]
            i += 2
            continue
        if op.encoding == _BLOB:
            size = s.vbr(6)
            s.align32()
            start = s.pos >> 3
            if start + size > len(s.data):
                raise s.error(f"a blob of {size} bytes runs past the end")
            blob = bytes(s.data[start : start + size])
            s.seek((start + size) * 8)
            s.align32()
        else:
            values.append(_scalar(s, op))
        i += 1
    if not values:
        raise s.error("a record without a code")
    return values[0], values[1:], blob


class _Reader:
    def __init__(self, blob: Blob) -> None:
        self.s = _Stream(blob)
        self.blockinfo: dict[int, list[list[_Op]]] = {}
        self.functions: list[list[int]] = []
        self.strtab = b""
        self.version = 0

    def block(self, block_id: int, width: int) -> None:
        """Read one block's records (the cursor is past its header), skipping sub-blocks it does not need."""
        s = self.s
        abbrevs = list(self.blockinfo.get(block_id, []))
        current = -1  # BLOCKINFO's SETBID target
        while s.pos < s.end:
            abbrev_id = s.fixed(width)
            if abbrev_id == END_BLOCK:
                s.align32()
                return
            if abbrev_id == ENTER_SUBBLOCK:
                self.enter()
            elif abbrev_id == DEFINE_ABBREV:
                ops = _define_abbrev(s)
                if block_id == BLOCKINFO_BLOCK:
                    if current < 0:
                        raise s.error("an abbreviation in BLOCKINFO before SETBID")
                    self.blockinfo.setdefault(current, []).append(ops)
                else:
                    abbrevs.append(ops)
            else:
                code, values, blob = _record(s, abbrev_id, abbrevs)
                if block_id == BLOCKINFO_BLOCK and code == BLOCKINFO_CODE_SETBID and values:
                    current = values[0]
                elif block_id == MODULE_BLOCK and code == MODULE_CODE_VERSION and values:
                    self.version = values[0]
                elif block_id == MODULE_BLOCK and code == MODULE_CODE_FUNCTION:
                    self.functions.append(values)
                elif block_id == STRTAB_BLOCK and code == STRTAB_BLOB:
                    self.strtab = blob
        if block_id >= 0:
            raise s.error(f"block {block_id} has no end")

    def enter(self) -> None:
        s = self.s
        block_id, width = s.vbr(8), s.vbr(4)
        s.align32()
        words = s.fixed(32)
        end = s.pos + words * 32
        if end > s.end:
            raise s.error(f"block {block_id} of {words} words runs past the end")
        if block_id in (BLOCKINFO_BLOCK, MODULE_BLOCK, STRTAB_BLOCK):
            if width < 2 or width > 32:
                raise s.error(f"block {block_id} with abbreviation width {width}")
            self.block(block_id, width)
        s.seek(end)


def amdgpu_kernels(blob: Blob) -> frozenset[str]:
    """The ``amdgpu_kernel`` functions a bitcode module defines."""
    if not blob.startswith(MAGIC):
        raise blob.error("not raw LLVM bitcode")
    reader = _Reader(blob)
    s = reader.s
    while s.end - s.pos >= 32:  # top level: abbreviation width 2, only sub-blocks
        abbrev_id = s.fixed(2)
        if abbrev_id != ENTER_SUBBLOCK:
            raise s.error(f"abbreviation {abbrev_id} at the top level")
        reader.enter()
    if reader.version < 2:
        raise blob.error(f"bitcode: module version {reader.version} keeps names outside the string table")
    kernels = set()
    for values in reader.functions:
        if len(values) < 5:
            raise blob.error("bitcode: a FUNCTION record is too short")
        offset, size, _type, calling_conv, is_proto = values[:5]
        if calling_conv != CALLING_CONV_AMDGPU_KERNEL or is_proto:
            continue
        if offset + size > len(reader.strtab):
            raise blob.error("bitcode: a function name points outside the string table")
        kernels.add(reader.strtab[offset : offset + size].decode("utf-8", "surrogateescape"))
    return frozenset(kernels)
