"""An object's host code by parts, on small C++ files compiled by the real g++: which edit changes which part.

Each case compiles a base and an edited file (``g++ -c -O2 -fPIC``, with and
without ``-ffunction-sections``) and compares what :func:`host_parts` gives:
the functions whose digests differ, and whether the data or a static
initialiser does. The truth is the edit itself: a function whose code or
whose referenced string, constant or callee changed must differ; one the
edit did not touch, and the data, must not, unless the edit was to data.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernel_symbol_map._unitnames import host_function
from kernel_symbol_map.readers._blob import OpenFile
from kernel_symbol_map.readers.elf import ElfFile
from kernel_symbol_map.readers.folders import Folders
from kernel_symbol_map.readers.hostfunctions import HostParts, host_parts

BASE = r"""
#include <cstdio>
#include <stdexcept>
struct A {}; struct B {};
int table[4] = {1, 2, 3, 4};
void g1(); void g2(); int g0(int);
static int counter;
struct Init { Init() { counter = 7; } } init;
int f(int x) { if (x < 0) { std::puts("f: negative"); return -1; } return x * 3 + table[x & 3]; }
double h(double y) { return y * 1.5; }
void k() { g1(); }
int other(int x) { return x + counter; }
int caught() { try { g1(); } catch (A&) { return 1; } return 0; }
void thrower(int x) { if (x) throw A(); throw B(); }  // both types' typeinfo, whichever is caught
int dispatch(int op, int x) {  // a jump table in .rodata, pointing into the function
  switch (op) {
    case 0: return x + 1; case 1: return x * 7; case 2: return x - 3; case 3: return x ^ 9;
    case 4: return x << 2; case 5: return x / 5; case 6: return g0(x); default: return 0;
  }
}
"""
EDITS = {  # edit -> (old, new, the functions that must differ, data differs, a static initialiser differs)
    "string": ('"f: negative"', '"f: below zero"', {"_Z1fi"}, False),
    "code": ("x * 3", "x * 5", {"_Z1fi"}, False),
    "constant": ("y * 1.5", "y * 2.5", {"_Z1hd"}, False),
    "callee": ("void k() { g1(); }", "void k() { g2(); }", {"_Z1kv"}, False),
    "data": ("{1, 2, 3, 4}", "{1, 2, 3, 5}", set(), True),
    "initialiser": ("counter = 7;", "counter = 8;", {"_GLOBAL__sub_I_t.cpp"}, False),  # Init() inlined there
    "handler": ("catch (A&)", "catch (B&)", None, True),  # the type caught: data, whatever the code does
    "case": ("return x * 7;", "return x * 11;", {"_Z8dispatchii"}, False),  # its jump table is its own
    "cases": ("case 0: return x + 1; case 1:", "case 1: return x + 1; case 0:", {"_Z8dispatchii"}, False),
}


def _compile(tmp: Path, name: str, source: str, *flags: str, folder: str = "x", pic: str = "-fPIC"
             ) -> HostParts | str:
    where = tmp / folder / name
    where.mkdir(parents=True, exist_ok=True)
    (where / "t.cpp").write_text(source)
    subprocess.run(["g++", "-c", "-O2", pic, *flags, "t.cpp", "-o", "t.o"], cwd=where, check=True)
    with OpenFile(where / "t.o") as blob:
        return host_parts(ElfFile(blob), frozenset(), b"__CLANG_OFFLOAD_BUNDLE__", Folders({str(tmp / folder): "source"}))


@pytest.fixture(scope="module")
def gxx() -> str:
    found = shutil.which("g++")
    if found is None:
        pytest.skip("g++ not found")
    return found


@pytest.mark.parametrize("sections", [True, False], ids=["function-sections", "one-text-section"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_changes_its_own_part(gxx: str, tmp_path: Path, edit: str, sections: bool) -> None:
    old, new, functions, data = EDITS[edit]
    flags = ["-ffunction-sections"] if sections else []
    before, after = _compile(tmp_path, "a", BASE, *flags), _compile(tmp_path, "b", BASE.replace(old, new), *flags)
    assert isinstance(before, HostParts) and isinstance(after, HostParts), (before, after)
    changed = {host_function(n) for n in before.functions.keys() | after.functions.keys()
               if before.functions.get(n) != after.functions.get(n)}  # a cold part is its function
    assert (before.data != after.data) == data, edit
    if functions is not None:
        assert functions <= changed, (edit, changed)
        if sections:  # every call a relocation: nothing else moves
            assert changed == functions, (edit, changed)
    assert "_Z5otheri" not in changed  # a function the edit did not touch (a call displacement aside)
    init = before.init & after.init
    assert any(n.startswith("_GLOBAL__sub_I") for n in init), init
    assert (edit == "initialiser") == bool(changed & init), (edit, changed, init)


def test_two_folders_give_the_same_parts(gxx: str, tmp_path: Path) -> None:
    """__FILE__ in a function, compiled in two folders of different lengths: the same digests."""
    source = BASE.replace('"f: negative"', "__FILE__")
    short = _compile(tmp_path, "a", source, "-ffunction-sections", folder="x")
    long = _compile(tmp_path, "a", source, "-ffunction-sections", folder="a-second-runner-with-a-longer-folder")
    assert short == long


def test_code_no_function_symbol_covers_is_compared_whole(gxx: str, tmp_path: Path) -> None:
    source = BASE + '__asm__(".text\\n.globl stray\\nstray_code: nop\\n" + ' \
        '"movq $1, %rax\\nmovq $2, %rbx\\nmovq $3, %rcx\\nmovq $4, %rdx\\nmovq $5, %rsi\\nmovq $6, %rdi\\n' \
        'movq $7, %r8\\nmovq $8, %r9\\nmovq $9, %r10\\nmovq $10, %r11\\nret\\n");\n'
    found = _compile(tmp_path, "a", source.replace('" + "', ""))
    assert isinstance(found, str) and "no function symbol covers" in found


def test_host_coverage_sees_every_function_but_the_uninstrumented(gxx: str, tmp_path: Path) -> None:
    source = BASE + "__attribute__((no_instrument_function)) int quiet(int x) { return x ^ 5; }\n"
    plain = _compile(tmp_path, "a", source, "-ffunction-sections")
    covered = _compile(tmp_path, "b", source, "-ffunction-sections", "-finstrument-functions")
    assert isinstance(plain, HostParts) and plain.unseen is None  # not compiled with host coverage
    assert isinstance(covered, HostParts) and covered.unseen is not None
    assert "_Z5quieti" in covered.unseen and "_Z1fi" not in covered.unseen


def test_the_type_a_handler_catches_is_data_and_the_order_of_sections_is_not(gxx: str, tmp_path: Path) -> None:
    """Without -fPIC an exception table names the type it catches directly (no DW.ref symbol in the data); and
    swapping which type is caught swaps the order gcc emits the two types' sections in, which is no change."""
    old, new, _, _ = EDITS["handler"]
    before = _compile(tmp_path, "a", BASE, pic="-fno-pic")
    after = _compile(tmp_path, "b", BASE.replace(old, new), pic="-fno-pic")
    assert isinstance(before, HostParts) and isinstance(after, HostParts)
    assert before.data != after.data
    two = "struct C {}; struct D {};\n"
    first, second = "void tc() { throw C(); }\n", "void td() { throw D(); }\n"
    reordered = _compile(tmp_path, "c", BASE + two + second + first, "-ffunction-sections")
    again = _compile(tmp_path, "d", BASE + two + first + second, "-ffunction-sections")
    assert isinstance(reordered, HostParts) and isinstance(again, HostParts)
    assert reordered.data == again.data


def test_a_jump_table_is_its_functions(gxx: str, tmp_path: Path) -> None:
    """Two entries of dispatch()'s jump table swapped in the object, its code left as it is: dispatch() differs
    (which case goes where is in the table alone), and the data does not (the table is the function's)."""
    import struct

    from kernel_symbol_map.readers.elf import Elf64_Rela

    before = _compile(tmp_path, "a", BASE, "-ffunction-sections")
    obj = tmp_path / "x" / "a" / "t.o"
    data = bytearray(obj.read_bytes())
    with OpenFile(obj) as blob:
        table = ElfFile(blob).section(".rela.rodata")
    assert table is not None and table.size >= 2 * Elf64_Rela.size
    first, second = table.offset + 16, table.offset + Elf64_Rela.size + 16  # r_addend of entries 0 and 1
    a, b = struct.unpack_from("<q", data, first)[0], struct.unpack_from("<q", data, second)[0]
    struct.pack_into("<q", data, first, b - 4)  # each entry's target counts its place in the table: 4 bytes on
    struct.pack_into("<q", data, second, a + 4)
    obj.write_bytes(bytes(data))
    with OpenFile(obj) as blob:
        after = host_parts(ElfFile(blob), frozenset(), b"__CLANG_OFFLOAD_BUNDLE__")
    assert isinstance(before, HostParts) and isinstance(after, HostParts)
    changed = {n for n in before.functions if before.functions[n] != after.functions.get(n)}
    assert changed == {"_Z8dispatchii"} and before.data == after.data, changed
