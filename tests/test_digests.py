"""Device and host code digests (issue 27) on real nvcc and clang output, built once per session.

One 20-kernel ``.cu`` file is compiled in variants that each change one
thing; the digests must change for exactly the kernels the change can reach
(safety) and, where the compiler keeps kernels apart, for no other (precision):

* a kernel's body: that kernel, in SASS and in PTX;
* a comment, or a rebuild: nothing, host code included (nvcc's ``tmpxft`` name is noise);
* a header one kernel includes through an inline device function: that kernel;
* a ``__noinline__`` device function two kernels call: those two;
* a ``__constant__`` initialiser: every kernel (module data, folded);
* host code only: the host digest, no kernel;
* ``-rdc``: a device function of another object, called by a kernel, changes that
  kernel's digest in the device-link image, where the call is resolved.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import toolchains
from toolchains import require

from kernel_symbol_map.mapformat import digests as map_digests
from kernel_symbol_map.producer.extract import _DEVICE_SECTIONS, _read_and_measure
from kernel_symbol_map.readers._blob import OpenFile
from kernel_symbol_map.readers.devicecode import HIP_BUNDLE_SECTION_PREFIX
from kernel_symbol_map.readers.elf import ElfFile
from kernel_symbol_map.readers.hostfunctions import host_parts
from kernel_symbol_map.readers.devicecode import read_kernels
from kernel_symbol_map.readers.ptxdigest import entry_digests

KERNELS = 20
SASS = ["-gencode", "arch=compute_80,code=[compute_80,sm_80]"]


def _source(change: str = "") -> dict[str, str]:
    """many.cu and the header it includes, with ``change`` applied."""
    scale = "v * 2.5f + 1" if change == "shared" else "v * 1.5f + 1"
    table = "{1, 2, 3, 5}" if change == "constant" else "{1, 2, 3, 4}"
    lines = ['#include "h.cuh"', f"__constant__ float ctab[4] = {table};",
             f"__device__ __noinline__ float sharedf(float v) {{ return {scale}; }}"]
    if change == "comment":
        lines.append("// a comment, and nothing else")
    for i in range(KERNELS):
        body = f"x[threadIdx.x] = x[threadIdx.x] * {i + 1}.0f + {i};"
        if i == 7 and change == "body":
            body = f"x[threadIdx.x] = x[threadIdx.x] * 99.0f + {i};"
        if i == 3:
            body = "x[threadIdx.x] = hval(x[threadIdx.x]);"
        if i in (10, 11):
            body = f"x[threadIdx.x] = sharedf(x[threadIdx.x]) + {i};"
        if i == 12:
            body = "x[threadIdx.x] = ctab[threadIdx.x & 3];"
        lines.append(f"__global__ void kern{i}(float* x) {{ {body} }}")
    threads = 64 if change == "host" else 32  # an immediate operand: the host function keeps its size
    lines.append(f"void launch(float* x) {{ kern0<<<1, {threads}>>>(x); }}")
    add = "2.0f" if change == "header" else "1.0f"
    return {"many.cu": "\n".join(lines) + "\n",
            "h.cuh": f"#pragma once\n__device__ inline float hval(float v) {{ return v + {add}; }}\n"}


RDC = {
    "caller.cu": "extern __device__ int helper(int x);\n"
                 "__global__ void caller(int* x) { x[threadIdx.x] = helper(x[threadIdx.x]); }\n"
                 "__global__ void alone(int* x) { x[threadIdx.x] = 1; }\n",
    "helper.cu": "__device__ int helper(int x) { return x * HELPER_SCALE; }\n"
                 "__global__ void helper_kernel(int* x) { x[0] = helper(x[1]); }\n",
    # Indirect calls: target() is reached only through a pointer a module section holds; target2() through
    # one another kernel stores at run time.
    # One template kernel instantiated in two objects that `ld -r` joins: two images of one architecture.
    "tmpl.cu": "template <int N> __global__ void fill(int* x) { x[threadIdx.x] = N * FILL_VALUE; }\n"
               "template __global__ void fill<1>(int*);\n",
    "indirect.cu": "__device__ int target(int x) { return x * HELPER_SCALE; }\n"
                   "__device__ int (*pointer)(int) = target;\n"
                   "__global__ void through_pointer(int* x) { x[0] = pointer(x[1]); }\n",
    "stored.cu": "__device__ int target2(int x) { return x - HELPER_SCALE; }\n"
                 "__device__ int (*table[1])(int);\n"
                 "__global__ void setter(int* x) { table[0] = target2; }\n"
                 "__global__ void user(int* x) { x[0] = table[0](x[1]); }\n",
    # An indirect call through a pointer from elsewhere (code linked with this object may take callee's
    # address): callee, which direct reaches by name and nothing here takes the address of, is user's too.
    "param.cu": "__device__ __noinline__ int callee(int x) { return x * HELPER_SCALE; }\n"
                "__global__ void direct(int* x) { x[0] = callee(x[1]); }\n"
                "__global__ void through_param(int (*p)(int), int* x) { x[0] = p(x[1]); }\n",
}
VARIANTS = ["base", "again", "body", "comment", "header", "shared", "constant", "host"]


@pytest.fixture(scope="session")
def digest_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each variant's object (SASS + PTX, and PTX only), and the -rdc pair with its device link, twice."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    out = tmp_path_factory.mktemp("digests")
    src = out / "src"  # one path for every variant: the anonymous and static names embed it
    src.mkdir()
    found: dict[str, Path] = {}
    for variant in VARIANTS:
        for name, text in _source("" if variant in ("base", "again") else variant).items():
            (src / name).write_text(text)
        for label, arch in (("", SASS), ("-ptx", ["-gencode", "arch=compute_80,code=compute_80"]),
                            ("-lineinfo", [*SASS, "-lineinfo"])):
            if label == "-ptx" and variant not in ("base", "body") or \
                    label == "-lineinfo" and variant not in ("base", "comment", "body"):
                continue
            found[variant + label] = out / f"{variant}{label}.o"
            toolchains.run([nvcc, "-c", *arch, "-O3", str(src / "many.cu"), "-o", str(found[variant + label])],
                           cwd=src)
    for name, text in RDC.items():
        (src / name).write_text(text)
    for scale in ("2", "3"):
        commands = [[nvcc, "-c", "-rdc=true", "-arch=sm_80", f"-DHELPER_SCALE={scale}", f"{n}.cu", "-o",
                     str(out / f"{n}{scale}.o")] for n in ("caller", "helper", "indirect", "stored", "param")]
        toolchains.run_all(commands, cwd=src)
        toolchains.run([nvcc, "-dlink", "-arch=sm_80", str(out / f"caller{scale}.o"), str(out / f"helper{scale}.o"),
                        "-o", str(out / f"dlink{scale}.o")], cwd=src)
        for n in ("caller", "helper", "dlink", "indirect", "stored", "param"):
            found[f"{n}{scale}"] = out / f"{n}{scale}.o"
    toolchains.run_all([[nvcc, "-c", "-arch=sm_80", f"-DFILL_VALUE={v}", "tmpl.cu", "-o", str(out / f"tmpl{v}.o")]
                        for v in ("1", "2")], cwd=src)
    for pair, second in (("joined_same", "1"), ("joined_other", "2")):
        toolchains.run(["ld", "-r", str(out / "tmpl1.o"), str(out / f"tmpl{second}.o"), "-o", str(out / f"{pair}.o")])
        found[pair] = out / f"{pair}.o"
    for scale in ("2", "3"):  # two relocatable images of one architecture, helper changed: second, then first
        for name, pair in ((f"rdc_joined{scale}", ("caller2", f"helper{scale}")),
                           (f"rdc_joined_first{scale}", (f"helper{scale}", "caller2"))):
            found[name] = out / f"{name}.o"
            toolchains.run(["ld", "-r", *(str(out / f"{n}.o") for n in pair), "-o", str(found[name])])
    return found


def _digests(path: Path) -> tuple[str | None, dict[str, dict[str, str]], list[str]]:
    """(host digest, kernel -> arch -> digest, archs digested whole) as the map would hold them."""
    result, _sizes, packed = _read_and_measure(read_kernels, path)
    assert packed is not None, path
    return packed.get("host"), map_digests.kernel_digests(result.symbols, packed, str(path)), packed.get("whole", [])


def _ptx(path: Path) -> dict[str, str]:
    """The whole-image digests of PTX beside a cubin of its architecture."""
    packed = _read_and_measure(read_kernels, path)[2]
    assert packed is not None, path
    return packed.get("ptx", {})


def _changed(corpus: dict[str, Path], a: str, b: str) -> dict[str, set[str]]:
    """Arch -> the kernels whose digest differs between objects ``a`` and ``b``."""
    _, before, _ = _digests(corpus[a])
    _, after, _ = _digests(corpus[b])
    assert before.keys() == after.keys()
    found: dict[str, set[str]] = {}
    for kernel in before:
        assert before[kernel].keys() == after[kernel].keys(), kernel
        for arch in before[kernel]:
            if before[kernel][arch] != after[kernel][arch]:
                found.setdefault(arch, set()).add(kernel)
    return found


def kern(*indices: int) -> set[str]:
    return {f"_Z{4 + len(str(i))}kern{i}Pf" for i in indices}


EVERY = set(range(KERNELS))
CASES: list[tuple[str, Callable[[], set[str]]]] = [
    ("again", lambda: set()),
    ("comment", lambda: set()),
    ("body", lambda: kern(7)),
    ("header", lambda: kern(3)),
    ("shared", lambda: kern(10, 11)),
    ("constant", lambda: kern(*EVERY)),
    ("host", lambda: set()),
]


@pytest.mark.parametrize("variant,expected", CASES, ids=[c[0] for c in CASES])
def test_digests_change_for_exactly_the_kernels_a_change_reaches(digest_corpus: dict[str, Path], variant: str,
                                                                 expected: Callable[[], set[str]]) -> None:
    changed = _changed(digest_corpus, "base", variant)
    assert changed.get("sm_80", set()) == expected(), "SASS"
    assert "compute_80" not in changed  # the PTX beside sm_80 is digested whole
    assert (_ptx(digest_corpus["base"]) != _ptx(digest_corpus[variant])) == bool(expected()), "PTX"


@pytest.mark.parametrize("variant,expected", [("comment", set()), ("body", kern(7))])
def test_line_information_is_not_code(digest_corpus: dict[str, Path], variant: str, expected: set[str]) -> None:
    """-lineinfo adds a line table (with the sources' mtimes) and PTX .loc directives, which a comment moves:
    the GPU runs neither, so only what the code does counts."""
    changed = _changed(digest_corpus, "base-lineinfo", f"{variant}-lineinfo")
    assert changed.get("sm_80", set()) == expected
    assert b".loc" in _ptx_text(digest_corpus["base-lineinfo"])  # what this checks is there
    assert (_ptx(digest_corpus["base-lineinfo"]) != _ptx(digest_corpus[f"{variant}-lineinfo"])) == bool(expected)


def _ptx_text(path: Path) -> bytes:
    from kernel_symbol_map.readers import fatbin
    from kernel_symbol_map.readers._blob import OpenFile
    from kernel_symbol_map.readers.elf import ElfFile

    with OpenFile(path) as blob:
        elf = ElfFile(blob)
        window = elf.window(elf.section(".nv_fatbin") or elf.section("__nv_relfatbin"))
        return b"".join(e.payload(window) for e in fatbin.iter_entries(window) if e.kind is fatbin.EntryKind.PTX)


def test_every_kernel_has_a_digest_per_architecture(digest_corpus: dict[str, Path]) -> None:
    host, kernels, whole = _digests(digest_corpus["base"])
    assert host and whole == []
    assert set(kernels) == kern(*EVERY)
    assert all(set(archs) == {"sm_80"} for archs in kernels.values())
    assert _ptx(digest_corpus["base"]).keys() == {"compute_80"}  # beside sm_80: whole
    assert len({archs["sm_80"] for archs in kernels.values()}) == KERNELS  # kernels are told apart


def test_host_digest_sees_host_code_only(digest_corpus: dict[str, Path]) -> None:
    base = _digests(digest_corpus["base"])[0]
    assert _digests(digest_corpus["again"])[0] == base  # the temporary file's name is the only noise
    assert _digests(digest_corpus["body"])[0] == base  # a kernel's body is device code
    assert _digests(digest_corpus["host"])[0] != base


# No external function: GCC then names the initializer after the file, which nvcc compiles as tmpxft_...
INIT = ('#include <string>\nstatic std::string name = "{value}";\n'
        "static int size() {{ return int(name.size()); }}\nstatic int sized = size();\n")


@pytest.fixture(scope="session")
def static_initializers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A file with a static initializer, built with -ffunction-sections twice as it is (each in a folder of
    its own), and once with its string changed: nvcc's temporary name is in its initializer's section names."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    out = tmp_path_factory.mktemp("init")
    flags = ["-c", "-arch=sm_80", "-O2", "-Xcompiler=-ffunction-sections,-fdata-sections"]
    found = {}
    for label, value in (("base", "op"), ("again", "op"), ("string", "oq")):
        (out / label).mkdir()
        (out / label / "init.cu").write_text(INIT.format(value=value))
        found[label] = out / label / "init.o"
        toolchains.run([nvcc, *flags, "init.cu", "-o", "init.o"], cwd=out / label)
    return found


def test_a_static_initializers_section_names_are_not_code(static_initializers: dict[str, Path]) -> None:
    import oracle

    base, again, string = (static_initializers[k] for k in ("base", "again", "string"))
    assert b".text.startup._GLOBAL__sub_I_tmpxft_" in base.read_bytes()  # what this checks is there
    assert _digests(again)[0] == _digests(base)[0]
    assert oracle.snapshot(again).host == oracle.snapshot(base).host
    assert _digests(string)[0] != _digests(base)[0]  # a real change to a string still shows
    assert oracle.snapshot(string).host != oracle.snapshot(base).host


def test_ptx_only_objects_have_per_entry_digests(digest_corpus: dict[str, Path]) -> None:
    """An object with only PTX (the JIT's input) is digested per entry: a body edit changes one."""
    _, kernels, whole = _digests(digest_corpus["base-ptx"])
    assert whole == [] and all(set(archs) == {"compute_80"} for archs in kernels.values())
    assert _changed(digest_corpus, "base-ptx", "body-ptx") == {"compute_80": kern(7)}


def test_device_link_resolves_a_callee_of_another_object(digest_corpus: dict[str, Path]) -> None:
    """-rdc: caller.o names helper() unresolved, so its digest stays; the device-link image holds both, and
    caller's digest there covers helper's code."""
    _, before, _ = _digests(digest_corpus["dlink2"])
    _, after, _ = _digests(digest_corpus["dlink3"])
    assert set(before) == {"_Z6callerPi", "_Z5alonePi", "_Z13helper_kernelPi"}
    assert before["_Z6callerPi"] != after["_Z6callerPi"]
    assert before["_Z13helper_kernelPi"] != after["_Z13helper_kernelPi"]
    assert before["_Z5alonePi"] == after["_Z5alonePi"]  # calls nothing: the callee is not its
    assert _digests(digest_corpus["caller2"])[1] == _digests(digest_corpus["caller3"])[1]


def test_relocatable_device_code_has_a_digest_of_its_whole_image(digest_corpus: dict[str, Path]) -> None:
    """-rdc: helper.o's device function reaches kernels of other objects at a link no map may see; its whole
    image's digest says when it changed. Whole-program objects are final code and have none."""
    before = _read_and_measure(read_kernels, digest_corpus["helper2"])[2]
    after = _read_and_measure(read_kernels, digest_corpus["helper3"])[2]
    assert before["relocatable"].keys() == {"sm_80"} and before["relocatable"] != after["relocatable"]
    assert _read_and_measure(read_kernels, digest_corpus["caller2"])[2]["relocatable"] == \
        _read_and_measure(read_kernels, digest_corpus["caller3"])[2]["relocatable"]
    assert "relocatable" not in _read_and_measure(read_kernels, digest_corpus["base"])[2]
    # ld -r of caller.o and helper.o: two relocatable sm_80 images, and the second one's change counts
    for joined in ("rdc_joined", "rdc_joined_first"):  # the changed image second, then first
        found = [_read_and_measure(read_kernels, digest_corpus[f"{joined}{s}"])[2]["relocatable"] for s in "23"]
        assert found[0].keys() == {"sm_80"} and found[0] != found[1], joined


def test_a_function_reached_only_through_a_pointer_is_every_kernels(digest_corpus: dict[str, Path]) -> None:
    """No relocation or call of through_pointer names target(), the pointer's initialiser (a module section)
    does; user calls what setter stored; through_param calls what it is handed: in SASS and in PTX, each
    indirect callee is folded into every kernel of the image."""
    for name, kernel in (("indirect", "_Z15through_pointerPi"), ("stored", "_Z4userPi"),
                         ("param", "_Z13through_paramPFiiEPi")):
        _, before, _ = _digests(digest_corpus[f"{name}2"])
        _, after, _ = _digests(digest_corpus[f"{name}3"])
        assert before[kernel].keys() == after[kernel].keys() == {"sm_80"}
        assert before[kernel]["sm_80"] != after[kernel]["sm_80"], kernel
        # Its PTX, as a PTX-only build digests it: per entry
        ptx_before, per_entry = entry_digests(_ptx_text(digest_corpus[f"{name}2"]))
        ptx_after, _ = entry_digests(_ptx_text(digest_corpus[f"{name}3"]))
        assert per_entry and ptx_before[kernel] != ptx_after[kernel], kernel


def test_an_archive_says_its_host_code_is_not_digested(digest_corpus: dict[str, Path], cuda_corpus: dict[str, Path],
                                                      tmp_path: Path) -> None:
    """A static archive read as one object: its members' host code is not digested, and the record says so
    (it never claims to be device code alone), so output mode decides it by sources. A raw cubin or fatbin
    is device code alone: it has no host code to digest."""
    archive = tmp_path / "libbase.a"
    toolchains.run(["ar", "rcs", str(archive), str(digest_corpus["base"])])
    result, _sizes, packed = _read_and_measure(read_kernels, archive)
    assert packed is not None and result.symbols and "host" not in packed["covers"], packed["covers"]
    o = {"object": "libbase.a", "device": True, "symbols": list(result.symbols), "digests": packed}
    assert map_digests.uncovered(o) == "has host code that was not digested"
    for raw in ("raw.cubin", "raw.fatbin"):
        packed = _read_and_measure(read_kernels, cuda_corpus[raw])[2]
        assert packed is not None and packed["covers"]["host"] == "device image" and "host" not in packed, raw
        assert packed["covers"]["kernels"] > 0, raw


def test_a_kernel_in_two_images_of_one_architecture_has_both_in_its_digest(digest_corpus: dict[str, Path]) -> None:
    """ld -r of two objects instantiating one template kernel: the second image's code counts too."""
    _, same, _ = _digests(digest_corpus["joined_same"])
    _, other, _ = _digests(digest_corpus["joined_other"])
    assert same["_Z4fillILi1EEvPi"]["sm_80"] != other["_Z4fillILi1EEvPi"]["sm_80"]
    assert _ptx(digest_corpus["joined_same"]) != _ptx(digest_corpus["joined_other"])  # the two PTX images, whole


def test_a_record_counts_only_the_kernels_it_holds_a_digest_of() -> None:
    """An image that lacks a kernel of ``symbols`` (the two readers disagree on what an image holds): the
    record says it covers one of two kernels, and a consumer reads it as not covering the other."""
    image = map_digests.ImageDigests("sm_80", {"a": "11" * 8}, per_kernel=True)
    packed = map_digests.pack(["a", "b"], [image], "22" * 8)
    assert packed is not None and packed["covers"] == {"host": "digested", "kernels": 1}
    o = {"object": "x.o", "device": True, "symbols": ["a", "b"], "digests": packed}
    assert map_digests.uncovered(o) == "has no digest of kernel b in any architecture"


def test_an_image_naming_a_kernel_the_symbols_lack_leaves_the_object_without_digests() -> None:
    """The reader that listed the symbols and the one that digested disagree: no digests (sources decide)
    rather than a record without that image's architecture."""
    images = [map_digests.ImageDigests("sm_80", {"a": "11" * 8}, per_kernel=True),
              map_digests.ImageDigests("sm_90", {"a": "33" * 8, "c": "44" * 8}, per_kernel=True)]
    assert map_digests.pack(["a"], images, "22" * 8) is None


@pytest.mark.hip
def test_hip_code_objects_are_digested_whole(hip_corpus: dict[str, Path]) -> None:
    """Kernels share an AMDGPU code object's .text with no boundary nvcc's sections give: one digest per
    image, for each of its kernels, and the map says so (whole)."""
    _, kernels, whole = _digests(hip_corpus["hipcc.o"])
    assert kernels and whole
    for arch in whole:
        assert len({archs[arch] for archs in kernels.values() if arch in archs}) == 1
    _, rdc, rdc_whole = _digests(hip_corpus["clang_rdc.o"])  # bitcode: no final code, digested whole
    assert rdc and rdc_whole
    assert _read_and_measure(read_kernels, hip_corpus["clang_rdc.o"])[2]["relocatable"]  # linked elsewhere


# What scheme 4 gives for committed objects (tests/data/fuzz/objects): a change to how any digest is taken
# changes these, and must bump mapformat.digests.SCHEME, or a base map of the old definition would be
# compared with a new one and every kernel would look changed.
PINNED = {
    'cuda.o': {'covers': {'host': 'digested', 'kernels': 5}, 'host': 'aff0aa8870822b5f', 'code': {'sm_80': ['5948bd219c3f2cfd', 'ad1146e045543df1', '5beedf756c0b8f14', 'ba065ec3ae4cdde3', '0b55f3029ec19e74']}},
    'cuda_ptx.o': {'covers': {'host': 'digested', 'kernels': 3}, 'host': '83d94e1e85156f39', 'code': {'compute_90': ['cd96c6452e60c358', '75ef10cfaaea200e', 'dd116c9119c9a8e6']}},
    'cuda_rdc.o': {'covers': {'host': 'digested', 'kernels': 1}, 'host': '9a9eea662a6d9c9d', 'code': {'sm_80': ['31bf404c22ac52b3']}, 'relocatable': {'sm_80': '4d026057766c6d5f'}},
    'hip.o': {'covers': {'host': 'digested', 'kernels': 3}, 'host': 'e1852b77f94bf77c', 'code': {'gfx90a': ['985501757dc7e861', '985501757dc7e861', '985501757dc7e861']}, 'whole': ['gfx90a']},
}
# ...and the host parts' (each object's host code by parts, as a map of a build with host coverage holds them,
# as sorted JSON, hashed)
PINNED_PARTS = {'cuda.o': 'c884711cea5b22d4', 'cuda_ptx.o': 'f9de7b60de990a0b', 'cuda_rdc.o': 'bcc99a9538a56c26', 'hip.o': 'bedf43a3500ece49'}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_digest_scheme_is_pinned(name: str) -> None:
    path = Path(__file__).parent / "data" / "fuzz" / "objects" / name
    _, _, packed = _read_and_measure(read_kernels, path)
    assert "host_parts" not in packed  # built without host coverage
    with OpenFile(path) as blob:
        found = host_parts(ElfFile(blob), _DEVICE_SECTIONS, HIP_BUNDLE_SECTION_PREFIX.encode())
    assert not isinstance(found, str), found
    record = {"functions": dict(sorted(found.functions.items())), "init": sorted(found.init), "data": found.data}
    parts = hashlib.blake2b(json.dumps(record, sort_keys=True).encode(), digest_size=8).hexdigest()
    assert map_digests.SCHEME == 5 and packed == PINNED[name] and parts == PINNED_PARTS[name], \
        "a digest's definition changed: bump mapformat.digests.SCHEME and update PINNED"


def test_ptx_of_one_compile_is_not_beside_another_compiles_cubin(tmp_path: Path) -> None:
    """Two fatbins of one file, one after the other (as a library's section holds one per compile): the PTX of
    the first has no cubin in its own container, so it keeps its per-entry digests, though the second's
    cubin is of its architecture."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    for name, text in _source().items():
        (tmp_path / name).write_text(text)
    for out, code in (("ptx.fatbin", "compute_80"), ("sass.fatbin", "sm_80")):
        toolchains.run([nvcc, "-fatbin", "-gencode", f"arch=compute_80,code={code}", "-O3", "many.cu", "-o", out],
                       cwd=tmp_path)
    joined = tmp_path / "joined.fatbin"
    joined.write_bytes((tmp_path / "ptx.fatbin").read_bytes() + (tmp_path / "sass.fatbin").read_bytes())
    _, kernels, _ = _digests(joined)
    assert kernels and all(set(archs) == {"sm_80", "compute_80"} for archs in kernels.values()), kernels
    assert _ptx(joined) == {}
