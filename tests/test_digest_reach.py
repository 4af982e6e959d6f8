"""What a kernel's digest reaches in its module: the banks it reads, nvcc's literals, the user's data.

One file of real nvcc output, built once per variant (and relocatable, where
whole-program code would drop a function only data points at): a kernel's digest folds
in the literals it reaches (through the bank of addresses it reads, or its
PTX's names) and not another kernel's; the user's ``__device__`` data is every
kernel's (the host may hand its address to any kernel); a function whose
address module data holds is every kernel's, with what it calls. Shapes nvcc
writes rarely (bytes no symbol holds, a relocation by section and offset, a
callgraph cut short) are made by patching those real cubins, uncompressed.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import toolchains
from elftools.elf.elffile import ELFFile
from test_digests import _digests, _ptx_text
from toolchains import require

from kernel_symbol_map.readers import cubindigest
from kernel_symbol_map.readers.ptxdigest import entry_digests

SOURCE = """#include <cstdio>
__device__ int table[4] = {{1, 2, 3, {table}}};
__constant__ int scale[2] = {{3, 5}};
__device__ __noinline__ int helper(int v) {{ return v * {helper}; }}
__global__ void direct(int* x) {{ x[0] = helper(x[1]) * scale[x[2] & 1]; }}
__global__ void reader(int* x) {{ x[0] = table[x[1] & 3]; }}
__global__ void says(int* x) {{ if (x[0] < 0) printf("{message}", x[0]); }}
__global__ void alone(int* x) {{ x[0] = 7; }}
"""
# Relocatable: nvcc keeps target as a function of its own (whole-program code clones it into its caller), and
# chain's callees too. No kernel calls through a pointer (an indirect call would fold in every function).
RDC_SOURCE = """#include <cstdio>
__device__ __noinline__ void target(int v) {{ printf("{message}", v * {target}); }}
__device__ void (*pointer)(int) = target;
__global__ void through(int* x) {{ target(x[0]); }}
__global__ void alone(int* x) {{ x[0] = 7; }}
__device__ __noinline__ int inner(int v) {{ return v * {inner}; }}
__device__ __noinline__ int outer(int v) {{ return inner(v) + 1; }}
__global__ void chain(int* x) {{ x[0] = outer(x[1]); }}
__device__ __noinline__ int unused(int v) {{ return v * {unused}; }}
"""
# Initialised device data alone in .nv.global.init: a test makes its last word a byte no symbol holds.
DATA_SOURCE = """__device__ int table[4] = {{1, 2, 3, {table}}};
__global__ void reader(int* x) {{ x[0] = table[x[1] & 3]; }}
__global__ void alone(int* x) {{ x[0] = 7; }}
"""
BASE = {"table": "4", "helper": "2", "message": "negative: %d\\n", "target": "3", "inner": "5", "unused": "7"}
VARIANTS = {"base": {}, "table": {"table": "5"}, "message": {"message": "below zero: %d\\n"},
            "rdc-base": {}, "rdc-message": {"message": "below zero: %d\\n"}, "rdc-target": {"target": "4"},
            "rdc-inner": {"inner": "6"}, "rdc-unused": {"unused": "8"}, "data-base": {}, "data-table": {"table": "5"}}
K = {"direct": "_Z6directPi", "reader": "_Z6readerPi", "says": "_Z4saysPi", "alone": "_Z5alonePi"}
RDC = {"through": "_Z7throughPi", "alone": "_Z5alonePi", "chain": "_Z5chainPi"}


@pytest.fixture(scope="session")
def reach(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require(toolchains.nvcc(), "nvcc")
    out = tmp_path_factory.mktemp("reach")
    commands = []
    for name, change in VARIANTS.items():
        rdc = ["-rdc=true"] if name.startswith("rdc-") else []
        source = RDC_SOURCE if rdc else DATA_SOURCE if name.startswith("data-") else SOURCE
        (out / f"{name}.cu").write_text(source.format(**{**BASE, **change}))
        commands.append([nvcc, "-c", *rdc, "-O3", "-gencode", "arch=compute_80,code=[compute_80,sm_80]", f"{name}.cu",
                         "--compress-mode=none", "-o", f"{name}.o"])  # uncompressed: a test patches a cubin
    toolchains.run_all(commands, cwd=out)
    return {name: out / f"{name}.o" for name in VARIANTS}


def _with_ptx(path: Path) -> dict[str, dict[str, str]]:
    """Kernel -> arch -> digest: the map's (sm_80; its compute_80 PTX is digested whole), and the PTX's
    per-entry digests, as a build with PTX alone has them (compute_80)."""
    _, found, _ = _digests(path)
    for kernel, digest in entry_digests(_ptx_text(path))[0].items():
        found.setdefault(kernel, {})["compute_80"] = digest
    return found


def _changed(reach: dict[str, Path], variant: str) -> dict[str, set[str]]:
    """Arch -> the kernels (by short name) whose digest differs from the base's (of its kind)."""
    kind = variant.partition("-")[0] + "-" if variant.startswith(("rdc-", "data-")) else ""
    before, after = _with_ptx(reach[f"{kind}base"]), _with_ptx(reach[variant])
    short = {v: k for k, v in {**K, **RDC}.items()}
    found: dict[str, set[str]] = {}
    for kernel, archs in before.items():
        for arch, digest in archs.items():
            if after[kernel][arch] != digest:
                found.setdefault(arch, set()).add(short[kernel])
    return found


def test_a_literal_reaches_only_the_kernels_that_read_it(reach: dict[str, Path]) -> None:
    """In SASS, reader loads table's address from the bank that holds the literal's too (a bank is read
    whole: which of its words an indexed load reads is not known); PTX names each literal."""
    assert _changed(reach, "message") == {"sm_80": {"says", "reader"}, "compute_80": {"says"}}


def test_the_users_device_data_is_every_kernels(reach: dict[str, Path]) -> None:
    every = set(K)
    assert _changed(reach, "table") == {"sm_80": every, "compute_80": every}


def test_a_function_module_data_points_at_is_every_kernels_with_what_it_reads(reach: dict[str, Path]) -> None:
    """``pointer`` holds target's address, so any kernel may call it (the host may hand the pointer to code
    linked with this object): its code, and the literal it prints, are every kernel's, not only through's
    (which calls it by name, so neither is left over for the module)."""
    assert _changed(reach, "rdc-message")["sm_80"] == set(RDC)
    assert _changed(reach, "rdc-target") == {"sm_80": set(RDC), "compute_80": set(RDC)}


def test_a_change_in_a_function_a_callee_calls_reaches_the_kernel(reach: dict[str, Path]) -> None:
    """chain -> outer -> inner: a change in inner is chain's, in SASS and in PTX, and no other kernel's."""
    assert _changed(reach, "rdc-inner") == {"sm_80": {"chain"}, "compute_80": {"chain"}}


def test_a_function_no_kernel_is_known_to_reach_is_every_kernels(reach: dict[str, Path]) -> None:
    """unused is kept (relocatable code: another object may call it) though no kernel here calls it: where
    nothing says which kernel reaches a function, every kernel may, in SASS. PTX names every call and every
    address taken, so there no kernel's digest changes."""
    assert _changed(reach, "rdc-unused") == {"sm_80": set(RDC)}


def test_a_callgraph_entry_of_a_shape_we_do_not_know_folds_in_every_function(
        reach: dict[str, Path], tmp_path: Path) -> None:
    """nvcc lists a function whose address is taken as (function, 1) after the callgraph's second marker.
    Any other entry there may be a call we cannot place: every device function is then every kernel's, so a
    change in inner, which only chain calls, changes them all (in SASS; PTX has no callgraph)."""
    after_marker = struct.pack("<II", 0, cubindigest.ADDRESS_TAKEN)
    changed = {}
    for name in ("rdc-base", "rdc-inner"):
        data = reach[name].read_bytes()
        assert data.count(after_marker) == 1, name
        entry = data.index(after_marker) + after_marker.__len__()
        function, value = struct.unpack_from("<II", data, entry)
        assert value == 1, (name, function, value)
        changed[name] = tmp_path / f"{name}.o"
        changed[name].write_bytes(data[:entry + 4] + struct.pack("<I", 2) + data[entry + 8:])
    before = _with_ptx(changed["rdc-base"])
    after = _with_ptx(changed["rdc-inner"])
    short = {v: k for k, v in RDC.items()}
    assert {short[k] for k in before if before[k]["sm_80"] != after[k]["sm_80"]} == set(RDC)
    assert {short[k] for k in before if before[k]["compute_80"] != after[k]["compute_80"]} == {"chain"}


def _embedded_cubin(data: bytes) -> tuple[int, ELFFile]:
    """The sm_80 cubin an uncompressed object holds: where it starts, and pyelftools' reading of it."""
    at = data.find(b"\x7fELF", 1)
    while at >= 0:
        elf = ELFFile(io.BytesIO(data[at:]))
        if elf["e_machine"] == "EM_CUDA":
            return at, elf
        at = data.find(b"\x7fELF", at + 1)
    raise AssertionError("no cubin in the object")


def _symbol(elf: ELFFile, name: str) -> tuple[int, Any]:
    symtab = elf.get_section_by_name(".symtab")
    return next((i, s) for i, s in enumerate(symtab.iter_symbols()) if s.name == name)


def _patched(reach: dict[str, Path], names: tuple[str, ...], tmp_path: Path,
             patch: Callable[[bytearray, int, ELFFile], None]) -> dict[str, Path]:
    """Copies of ``names``, each with ``patch`` applied to its bytes, given where its cubin starts and the cubin."""
    patched = {}
    for name in names:
        data = bytearray(reach[name].read_bytes())
        at, elf = _embedded_cubin(bytes(data))
        patch(data, at, elf)
        patched[name] = tmp_path / f"{name}.o"
        patched[name].write_bytes(data)
    return patched


def _with_table_4_bytes_short(reach: dict[str, Path], names: tuple[str, ...], tmp_path: Path) -> dict[str, Path]:
    """Copies of ``names`` whose table symbol holds 12 of its 16 bytes: its last word, the one the table variants
    change, is then held by no symbol."""
    def shrink(data: bytearray, at: int, elf: ELFFile) -> None:
        index, table = _symbol(elf, "table")
        assert table["st_value"] == 0 and table["st_size"] == 16
        size_at = at + elf.get_section_by_name(".symtab")["sh_offset"] + index * 24 + 16  # Elf64_Sym.st_size
        struct.pack_into("<Q", data, size_at, 12)
    return _patched(reach, names, tmp_path, shrink)


def test_initialised_device_data_no_symbol_holds_is_every_kernels(reach: dict[str, Path], tmp_path: Path) -> None:
    """Bytes of .nv.global.init no symbol holds count, for every kernel (what reads them is not known): at the
    section's end (table alone in it), and between two symbols (table, then nvcc's $str)."""
    last = _with_table_4_bytes_short(reach, ("data-base", "data-table"), tmp_path)
    _, elf = _embedded_cubin(last["data-base"].read_bytes())
    assert elf.get_section_by_name(".nv.global.init")["sh_size"] == 16  # the word is the section's last
    assert _changed(last, "data-table")["sm_80"] == {"reader", "alone"}
    between = _with_table_4_bytes_short(reach, ("base", "table"), tmp_path)
    assert _symbol(_embedded_cubin(between["base"].read_bytes())[1], "$str")[1]["st_value"] == 16
    assert _changed(between, "table")["sm_80"] == set(K)


def test_a_relocation_by_section_and_offset_reaches_every_literal_of_that_section(
        reach: dict[str, Path], tmp_path: Path) -> None:
    """The bank's reference to $str rewritten as nvcc may write it: .nv.global.init's section symbol and the
    offset of $str. It reaches the section's literals: still the kernels that read the bank, and no other."""
    def by_section(data: bytearray, at: int, elf: ELFFile) -> None:
        section_symbol, _ = _symbol(elf, ".nv.global.init")
        string, literal = _symbol(elf, "$str")
        bank = elf.get_section_by_name(".rel.nv.constant4")
        ((k, relocation),) = [(k, r) for k, r in enumerate(bank.iter_relocations()) if r["r_info_sym"] == string]
        entry = at + bank["sh_offset"] + k * 16  # Elf64_Rel: r_offset, r_info
        struct.pack_into("<Q", data, entry + 8, (section_symbol << 32) | relocation["r_info_type"])
        word = at + elf.get_section_by_name(".nv.constant4")["sh_offset"] + relocation["r_offset"]
        assert struct.unpack_from("<Q", data, word) == (0,)  # the addend, in place
        struct.pack_into("<Q", data, word, literal["st_value"])
    patched = _patched(reach, ("base", "message"), tmp_path, by_section)
    assert _changed(patched, "message")["sm_80"] == {"says", "reader"}


def test_a_callgraph_of_a_layout_we_do_not_know_folds_in_every_function(
        reach: dict[str, Path], tmp_path: Path) -> None:
    """.nv.callgraph cut short of a whole entry: no call in it can be read, so every device function is every
    kernel's, and a change in inner, which only chain calls, changes them all (in SASS)."""
    def cut_short(data: bytearray, at: int, elf: ELFFile) -> None:
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".nv.callgraph")
        size_at = at + elf["e_shoff"] + index * elf["e_shentsize"] + 32  # Elf64_Shdr.sh_size
        (size,) = struct.unpack_from("<Q", data, size_at)
        struct.pack_into("<Q", data, size_at, size - 4)
    patched = _patched(reach, ("rdc-base", "rdc-inner"), tmp_path, cut_short)
    assert _changed(patched, "rdc-inner")["sm_80"] == set(RDC)


def test_a_bank_no_instruction_is_found_to_read_is_every_kernels(
        reach: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Were an instruction's bank held where the decoding does not look, no kernel would be found to read the
    bank of string addresses: it is then every kernel's, with the literals it reaches."""
    monkeypatch.setattr(cubindigest, "_banks_read", lambda code: b"")
    assert _changed(reach, "message")["sm_80"] == set(K)


def test_where_the_bank_encoding_is_unchecked_every_kernel_reads_every_bank(
        reach: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cubindigest, "BANK_ENCODING", frozenset())
    assert _changed(reach, "message")["sm_80"] == set(K)  # says's bank is alone's too, as far as is known


def test_every_bank_cuobjdump_prints_an_instruction_reading_is_found(reach: dict[str, Path]) -> None:
    """The bank decoding is checked against NVIDIA's disassembler: never a bank too few, per function."""
    import re
    import subprocess

    import kernel_oracle

    from kernel_symbol_map.readers import fatbin
    from kernel_symbol_map.readers._blob import Blob
    from kernel_symbol_map.readers.elf import SHF_EXECINSTR, ElfFile

    exe = kernel_oracle.cuobjdump()
    if exe is None:
        pytest.skip("no cuobjdump with nvdisasm beside it")
    listing = subprocess.run([exe, "-sass", str(reach["message"])], capture_output=True, text=True, check=True).stdout
    printed = {m.group(1): {int(b, 16) for b in re.findall(r"\bc\[0x([0-9a-f]+)\]", m.group(2))}
               for m in re.finditer(r"Function : (\S+)\n(.*?)(?=\n\s*Function : |\Z)", listing, re.S)}
    elf = ElfFile(Blob.from_bytes("o", reach["message"].read_bytes()))
    window = elf.window(elf.section(".nv_fatbin"))
    cubin = next(e for e in fatbin.iter_entries(window) if e.kind is fatbin.EntryKind.CUBIN)
    image = ElfFile(Blob.from_bytes("cubin", cubin.payload(window)))
    decoded = {}
    for h in image.all_headers():
        if h.flags & SHF_EXECINSTR and h.name.startswith(b".text."):
            code = image.blob.read(h.offset, h.size, "text")
            decoded[h.name[len(b".text."):].decode()] = set(cubindigest._banks_read(code))
    assert printed.keys() == decoded.keys() and any(4 in b for b in printed.values())
    for function, banks in printed.items():
        assert banks <= decoded[function], function


HOST = """extern void first(const char*); extern void second(const char*);
void both() {{ first("1"); second("2"); }}  // the symbol table's order, whichever the calls below name
void check(int n) {{ if (n < 0) {a}(__FILE__ ": n must not be negative, and this message is long"); }}
void other(int n) {{ if (n > 9) {b}({c}); if (n == 5) first({d}); }}
"""
STRINGS = {"c": '"n is too large"', "d": '"n is five"'}


@pytest.fixture(scope="session")
def host_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """A host file compiled at two folders' paths, as is, with two calls' targets swapped, and with two
    calls' strings swapped: (object, folder)."""
    out = tmp_path_factory.mktemp("host")
    found = {}
    commands = []
    for label, folder, change in (("base", "a", {}), ("again", "a-much-longer-folder", {}),
                                  ("other", "a", {"a": "second", "b": "first"}),
                                  ("swapped", "a", {"c": STRINGS["d"], "d": STRINGS["c"]})):
        source = out / label / folder / "check.cpp"
        source.parent.mkdir(parents=True)
        source.write_text(HOST.format(**{"a": "first", "b": "second", **STRINGS, **change}))
        found[label] = (out / label / "check.o", source.parent)
        commands.append(["g++", "-c", "-O2", "-g", "-ffunction-sections", str(source), "-o", str(found[label][0])])
    toolchains.run_all(commands, cwd=out)
    return found


def _host(found: tuple[Path, Path]) -> str:
    from kernel_symbol_map.producer.extract import _DEVICE_SECTIONS
    from kernel_symbol_map.readers._blob import Blob
    from kernel_symbol_map.readers.elf import ElfFile
    from kernel_symbol_map.readers.folders import Folders
    from kernel_symbol_map.readers.hostdigest import host_digest

    path, folder = found
    return host_digest(ElfFile(Blob.from_bytes(str(path), path.read_bytes())), _DEVICE_SECTIONS, b"__CLANG_",
                       Folders({str(folder): "source"}))


def test_a_host_string_with_the_folder_in_it_is_the_same_built_elsewhere(host_objects: dict) -> None:
    assert str(host_objects["again"][1]).encode() in host_objects["again"][0].read_bytes()
    assert _host(host_objects["again"]) == _host(host_objects["base"])


def test_a_call_to_another_function_shows_where_strings_are_read_by_name(host_objects: dict) -> None:
    """Only relocations differ (the calls' bytes and the symbols are the same): the by-name digest sees it."""
    assert _host(host_objects["other"]) != _host(host_objects["base"])


def test_a_reference_to_another_string_shows_where_strings_are_read_by_name(host_objects: dict) -> None:
    """The same strings, each passed where the other was: which string a reference points at counts."""
    assert _host(host_objects["swapped"]) != _host(host_objects["base"])


PTX = """.version 8.0
.target sm_80
.address_size 64
.global .align 1 .b8 buf[{size}] = {{1, 2, 3}};
.visible .entry k(.param .u64 p) {{ ret; }}
"""


def test_a_byte_arrays_size_past_its_initialiser_counts() -> None:
    """nvcc leaves the zeros past an initialiser out: the declared size is all that says how many."""
    from kernel_symbol_map.readers.ptxdigest import entry_digests

    small, large = (entry_digests(PTX.format(size=n).encode()) for n in (8, 64))
    assert small[1] and small[0] != large[0]


def test_a_ptx_literal_no_body_names_is_every_entrys() -> None:
    """nvcc's $str that neither an entry, a function nor module data names: who reads it is not known."""
    from kernel_symbol_map.readers.ptxdigest import entry_digests

    text = ".version 8.0\n.target sm_80\n.address_size 64\n.global .align 1 .b8 $str[3] = {{{first}, 105, 0}};\n" \
           ".visible .entry k(.param .u64 p) {{ ret; }}\n"
    (before, per_entry), (after, _) = (entry_digests(text.format(first=c).encode()) for c in (104, 72))
    assert per_entry and before["k"] != after["k"]


def test_a_function_defined_twice_leaves_every_entry_the_whole_texts_digest() -> None:
    """Which of f's two bodies k calls cannot be told: the text is digested whole, so a change to either shows."""
    from kernel_symbol_map.readers.ptxdigest import entry_digests

    text = ".version 8.0\n.target sm_80\n.address_size 64\n.func f() {{ {first} }}\n.func f() {{ ret; }}\n" \
           ".visible .entry k(.param .u64 p) {{ call f, (); ret; }}\n"
    (before, per_entry), (after, _) = (entry_digests(text.format(first=body).encode()) for body in ("ret;", "exit;"))
    assert not per_entry and before["k"] != after["k"]


def test_an_entry_the_text_does_not_define_as_expected_leaves_every_entry_the_whole_texts_digest() -> None:
    """j is declared, not defined: the text does not split into one body per ``.entry``, so each entry it
    names (j too) gets the whole text's digest, never a per-entry digest that leaves j out."""
    from kernel_symbol_map.readers.ptxdigest import entry_digests

    text = PTX.format(size=8) + ".visible .entry j(.param .u64 p);\n"
    found, per_entry = entry_digests(text.encode())
    assert not per_entry and found.keys() == {"k", "j"} and found["k"] == found["j"]
