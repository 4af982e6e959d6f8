"""The per-kernel oracle's reading of cuobjdump listings (:mod:`kernel_oracle`), on listings in cuobjdump
13.5's format, written here. On real builds: test_selection_oracle.py's clean rebuild changes nothing,
and its corpus pins the kernels each change reaches (a one-kernel edit is one kernel)."""

from __future__ import annotations

import kernel_oracle
import pytest
from kernel_oracle import OracleError, compare, kernels_of_listing

HEADER = "\nFatbin elf code:\n================\narch = sm_80\ncode version = [1,8]\nhost = linux\ncompile_size = 64bit\n\n"
PTX_HEADER = "\nFatbin ptx code:\n================\narch = sm_80\ncode version = [9,0]\nhost = linux\n" \
             "compile_size = 64bit\ncompressed\nptxasOptions = \n\n"


def cubin(sass: dict[str, str], calls: dict[str, str], constant3: str = "0x00000003", order: list[str] | None = None,
          entries: frozenset[str] = frozenset({"k1", "k2", "k3"})) -> str:
    """A cubin's ``-elf -res-usage -sass`` listing: functions ``sass`` (name -> one SASS line), ``calls``
    (caller -> callee, by a relocation and the callgraph), a ``.nv.constant3`` bank; ``order`` numbers
    the symbols (and sections) differently."""
    names = order or sorted(sass)
    sections = [".shstrtab", ".strtab", ".symtab", ".nv.info", *(f".nv.info.{f}" for f in names),
                ".nv.callgraph", *(f".rel.text.{f}" for f in names if f in calls), ".nv.constant3",
                *(f".text.{f}" for f in names)]
    index = {name: i + 1 for i, name in enumerate(sections)}
    rows = "".join(f"   {i:x}     40     10  0  4   PROGBITS        0    0        0 {name}\n"
                   for name, i in index.items())
    symbols = {f: 1 + i for i, f in enumerate(names)}
    symtab = "   Num  Value  Size  Type  Bind  Vis  Other  Ndx  Name\n" \
             "     0   0   0  NOTYPE  LOCAL  DEFAULT  -   0  (null)\n"
    for f in names:
        symtab += f"   {symbols[f]:#x}  0  0x80  FUNC  GLOBAL  DEFAULT  {'ENTRY' if f in entries else '-'}  " \
                  f"{index['.text.' + f]:#x}  {f}\n"
    n = len(names) + 1
    symtab += f"   {n:#x}  0  0x4  CUDA_OBJECT  GLOBAL  DEFAULT  CONSTANT  {index['.nv.constant3']:#x}  table\n"
    info = "".join(f"\t<0x{i + 1:x}>\n\tAttribute:\tEIATTR_REGCOUNT\n\tFormat:\tEIFMT_SVAL\n"
                   f"\tValue:\tfunction: {f}({symbols[f]:#x})\tregister count: 8\n" for i, f in enumerate(names))
    text = HEADER + "64-bit ELF: type=ET_REL, ABI=8, sm=80, toolkit=13.0, flags=0x6005004\nSections:\n" \
        "Index Offset   Size ES Align   Type    Flags Link     Info Name\n" + rows + "\n"
    text += ".section .strtab\n\n.section .shstrtab\n\n.section .symtab\n" + symtab + "\n"
    text += f".nv.constant3\n{constant3} \n\n\n.nv.info\n{info}\n"
    for f in names:
        text += f".nv.info.{f}\n\t<0x1>\n\tAttribute:\tEIATTR_PARAM_CBANK\n\tFormat:\tEIFMT_SVAL\n" \
                f"\tValue:\t{symbols[f]:#x} 0x80160 \n\n"
    text += ".nv.callgraph\n" + "".join(f" <{symbols[a]},{symbols[b]}>\n" for a, b in calls.items()) + "\n"
    for f in names:
        text += f".text.{f}\nlmem=0\tsmem=0\n0x00017a02 0x00000a00\n\n"
        if f in calls:
            text += f".section .rel.text.{f}\tREL\n0x80    {calls[f]}    R_CUDA_ABS47_34\n\n"
    text += "Resource usage:\n Common:\n  GLOBAL:0 CONSTANT[3]:4\n"
    text += "".join(f" Function {f}:\n  REG:8 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:360\n" for f in names)
    text += "\n\tcode for sm_80\n\t.target\tsm_80\n\n"
    for f in names:
        text += f"\t\tFunction : {f}\n\t.headerflags\t@\"EF_CUDA_SM80\"\n" \
                f"        /*0000*/                   {sass[f]} ;    /* 0x0000000000007918 */\n" \
                "        /*0010*/                   EXIT ;    /* 0x000000000000794d */\n\t\t..........\n\n"
    return text


SASS = {"k1": "MOV R1, 1", "k2": "MOV R1, 2", "k3": "MOV R1, 3", "helper": "MOV R2, 4"}
CALLS = {"k1": "helper"}


def digests(text: str) -> dict[str, str]:
    return {k: images["sm_80#0"] for k, images in kernels_of_listing(text).items()}


def test_kernels_are_the_entries() -> None:
    assert set(digests(cubin(SASS, CALLS))) == {"k1", "k2", "k3"}


def test_symbol_and_record_numbering_is_not_content() -> None:
    """The same module with its symbols and sections numbered otherwise: the same digests."""
    assert digests(cubin(SASS, CALLS)) == digests(cubin(SASS, CALLS, order=["k3", "helper", "k2", "k1"]))


def test_one_kernel_edit_is_one_kernel() -> None:
    before = digests(cubin(SASS, CALLS))
    after = digests(cubin({**SASS, "k2": "MOV R1, 20"}, CALLS))
    assert {k for k in before if before[k] != after[k]} == {"k2"}


def test_a_callee_reaches_its_callers_only() -> None:
    before = digests(cubin(SASS, CALLS))
    after = digests(cubin({**SASS, "helper": "MOV R2, 40"}, CALLS))
    assert {k for k in before if before[k] != after[k]} == {"k1"}


def test_module_data_reaches_every_kernel() -> None:
    before = digests(cubin(SASS, CALLS))
    after = digests(cubin(SASS, CALLS, constant3="0x00000004"))
    assert {k for k in before if before[k] != after[k]} == {"k1", "k2", "k3"}


@pytest.mark.parametrize("call", ["CALL.REL.NOINC 0x400", "CALL.ABS.NOINC 0x80"])
def test_a_call_the_oracle_cannot_place_is_refused(call: str) -> None:
    with pytest.raises(OracleError):
        digests(cubin({**SASS, "k2": call}, CALLS))


def test_calls_inside_the_function_are_read() -> None:
    digests(cubin({**SASS, "k2": "CALL.REL.NOINC 0x10"}, CALLS))  # nvcc's clone of a __noinline__ callee
    digests(cubin({**SASS, "k2": "CALL.ABS.NOINC 0x0"}, CALLS))  # resolved by the relocation


PTX = """.version 9.0
.target sm_80
.address_size 64

.const .align 4 .b8 table[4] = {3, 0, 0, 0};

.func (.param .b32 func_retval0) helper(
.param .b32 helper_param_0
)
{
.reg .b32 %r<2>;
ld.param.u32 %r1, [helper_param_0];
st.param.b32 [func_retval0+0], %r1;
ret;

}

.visible .entry k1(
.param .u64 k1_param_0
)
{
{
.param .b32 param0;
.param .b32 retval0;
call.uni (retval0),
helper,
(
param0
);
}
ret;

}

.weak .entry k2(
.param .u64 k2_param_0
)
{
mov.u32 %r1, 2;
ret;

}
"""


def ptx(text: str) -> dict[str, str]:
    return {k: images["compute_80#0"] for k, images in kernels_of_listing(PTX_HEADER + text).items()}


def test_ptx_entries_and_their_callees() -> None:
    before = ptx(PTX)
    assert set(before) == {"k1", "k2"}
    helper = ptx(PTX.replace("ld.param.u32 %r1, [helper_param_0];", "mov.u32 %r1, 7;"))
    assert {k for k in before if before[k] != helper[k]} == {"k1"}
    body = ptx(PTX.replace("mov.u32 %r1, 2;", "mov.u32 %r1, 3;"))
    assert {k for k in before if before[k] != body[k]} == {"k2"}
    data = ptx(PTX.replace("{3, 0, 0, 0}", "{4, 0, 0, 0}"))
    assert {k for k in before if before[k] != data[k]} == {"k1", "k2"}


def test_compare_and_must_run() -> None:
    a = {"x.o": kernel_oracle.ObjectSnapshot("h", {"k1": {"sm_80#0": "1"}, "k2": {"sm_80#0": "2"}}),
         "host.o": kernel_oracle.ObjectSnapshot("h")}
    b = {"x.o": kernel_oracle.ObjectSnapshot("h", {"k1": {"sm_80#0": "1", "compute_80#0": "p"},
                                                    "k3": {"sm_80#0": "3"}}),
         "host.o": kernel_oracle.ObjectSnapshot("h2")}
    diff = compare(a, b)
    assert diff.kernels_changed == {"k1", "k2", "k3"}  # an image appeared; one went; one came
    assert (diff.kernels_added, diff.kernels_removed, diff.host_changed) == ({"k3"}, {"k2"}, ["host.o"])
    tests = {"t1": {"k1"}, "t2": {"k2"}, "t4": set()}
    assert diff.must_run(tests, {"host.o": {"t4"}, "x.o": {"t1", "t2"}}) == {"t1", "t2", "t4"}
    assert compare(a, a).objects_changed == []


def test_ptx_line_information_is_not_code() -> None:
    lined = PTX.replace("mov.u32 %r1, 2;", ".loc\t1 12 3\nmov.u32 %r1, 2;").replace(".address_size 64",
                                                                                   '.address_size 64\n.file\t1 "/x/k.cu"')
    assert ptx(lined) == ptx(PTX)
    assert ptx(PTX.replace("mov.u32 %r1, 2;", "mov.u32 %r1, 2;\nmov.u32 %r2, 2;")) != ptx(PTX)
