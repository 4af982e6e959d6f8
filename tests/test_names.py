"""Issue 30.1: kernel names people read, from a real nvcc build of CUB templates.

``data/names_cub.cu`` instantiates CUB's device reduction with a functor of its
own, ``process_cube_op``, which then appears only inside the template arguments
of CUB's kernels, under CUB's version namespace (``cub::CUB_300001_SM_800::``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import toolchains
from toolchains import DATA, require, run

from kernel_symbol_map import mapformat, read_kernels
from kernel_symbol_map.cli import main
from kernel_symbol_map.consumer.maps import names
from kernel_symbol_map.consumer.maps.names import WIDTH, full, labels, name_filter, readable

COMMIT = "a" * 40
SOURCE = "csrc/reduce.cu"


@pytest.fixture(scope="session")
def cub_kernels(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The mangled kernels of names_cub.cu, compiled once for sm_80 and read by our own reader."""
    nvcc = require(toolchains.nvcc(), "nvcc")
    out = tmp_path_factory.mktemp("names") / "names_cub.o"
    run([nvcc, "-c", "names_cub.cu", "-gencode=arch=compute_80,code=sm_80", "-o", str(out)], cwd=DATA)
    found = read_kernels(out)
    assert found.error is None and found.symbols
    return sorted(found.symbols)


@pytest.fixture(scope="session")
def cub_map(cub_kernels: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A map of one object holding those kernels, as ``build`` would write it."""
    path = tmp_path_factory.mktemp("names_map") / "kernel_symbol_map.json.gz"
    obj = {"source": SOURCE, "target": "reduce", "object": "CMakeFiles/reduce.dir/csrc/reduce.cu.o",
           "device": True, "symbols": cub_kernels, "deps": [SOURCE]}
    mapformat.write({"version": 1, "commit": COMMIT, "cuda": "13.0", "generated_at": "", "build_dirs": ["$BUILD"],
                     "incomplete": False, "errors": [], "stats": {"objects": 1}, "objects": [obj]}, path)
    return path


def _reduce_kernel(kernels: list[str]) -> str:
    (found,) = [k for k in kernels if "18DeviceReduceKernel" in k]
    return found


def _unrelated(kernels: list[str]) -> str:
    (found,) = [k for k in kernels if "unrelated_kernel" in k]
    return found


def test_a_cub_kernel_reads_short(cub_kernels: list[str]) -> None:
    kernel = _reduce_kernel(cub_kernels)
    assert "CUB_" in full(kernel) and len(full(kernel)) > WIDTH  # what the user saw: long and versioned
    label = readable(kernel)
    assert label == "cub::detail::reduce::DeviceReduceKernel<...>"
    assert "CUB_" not in label and "__4" not in label and len(label) <= WIDTH
    unfolded = readable(kernel, width=None)  # no cut; folded to WIDTH all the same
    assert unfolded == label
    narrow = readable(kernel, width=20)
    assert len(narrow) == 20 and narrow.endswith("...") and narrow.startswith("cub::detail::")


def test_short_template_arguments_are_kept(cub_kernels: list[str]) -> None:
    """Folding goes only as deep as the width needs: EmptyKernel<void> keeps its argument."""
    (empty,) = [k for k in cub_kernels if "EmptyKernel" in k]
    assert readable(empty) == "cub::detail::EmptyKernel<void>"
    wide = readable(_reduce_kernel(cub_kernels), width=400)  # room for all: nothing folded, nothing versioned
    assert wide.startswith("cub::detail::reduce::DeviceReduceKernel<cub::detail::reduce::policy_hub<float, ")
    assert "process_cube_op" in wide and "CUB_" not in wide and "cuda::std::__identity" in wide


def test_names_that_do_not_demangle_stay_as_they_are(cub_kernels: list[str]) -> None:
    assert "plain_c_kernel" in cub_kernels  # extern "C": not mangled at all
    assert full("plain_c_kernel") == readable("plain_c_kernel") == "plain_c_kernel"
    assert readable("?kernel@@YAXPEAM@Z") == full("?kernel@@YAXPEAM@Z") == "?kernel@@YAXPEAM@Z"  # MSVC's
    assert readable(_unrelated(cub_kernels)) == "ours::unrelated_kernel"  # no template, no parameters


def test_an_itanium_name_the_demangler_refuses_is_labelled_from_its_start() -> None:
    """cuBLASLt ships names the C++ runtime will not demangle (they run to 23,000 characters demangled)."""
    refused = "_ZN4xmma4gemm13kernel_blasl3INS0_30Kernel_triangular_input_traitsINS_23Ampere_ffma_cp32_traitsI"
    assert full(refused) == refused
    assert readable(refused) == "xmma::gemm::kernel_blasl3<...>"


def test_the_full_name_has_the_functor(cub_kernels: list[str]) -> None:
    kernel = _reduce_kernel(cub_kernels)
    assert "process_cube_op" in full(kernel) and full(kernel).startswith("void cub::CUB_")


def test_the_filter_finds_the_functor_inside_template_arguments(cub_kernels: list[str]) -> None:
    kernel, other = _reduce_kernel(cub_kernels), _unrelated(cub_kernels)
    cube = name_filter("process_cube_op")
    assert cube(kernel) and not cube(other)
    assert {k for k in cub_kernels if cube(k)} == {k for k in cub_kernels if "15process_cube_op" in k}
    assert name_filter(kernel)(kernel) and not name_filter(kernel)(other)  # the mangled name itself
    assert name_filter("cub::detail::reduce::DeviceReduceKernel")(kernel)  # as a label reads, unversioned


def test_a_regex_searches_the_demangled_name(cub_kernels: list[str]) -> None:
    single = name_filter(r"DeviceReduceSingleTileKernel<.*float\*, int, process_cube_op")
    (matched,) = [k for k in cub_kernels if single(k)]  # one of the two instantiations: (float*, int)
    assert "EPfS8_iS5_" in matched
    assert name_filter(r"^ours::unrelated_kernel$")(_unrelated(cub_kernels))  # the name a person reads, anchored
    assert not name_filter(r"^ours::unrelated$")(_unrelated(cub_kernels))
    assert name_filter(r"^ours::unrelated_kernel\(float\*")(_unrelated(cub_kernels))  # or the whole one


def test_a_pattern_that_is_no_regex_is_a_substring() -> None:
    foo = name_filter("foo(")  # an unclosed group: regex.error inside, never outside
    assert foo("_Z3fooi")  # foo(int)
    assert not foo("_Z3bari") and not foo("plain_c_kernel")
    assert name_filter("[")("_Z1kPi") is False and name_filter("k(int*")("_Z1kPi")
    assert name_filter("k(int*)")("_Z1kPi")  # a valid regex that means something else: still a substring


def test_a_label_copied_from_a_report_finds_its_kernels(cub_kernels: list[str]) -> None:
    kernel = _reduce_kernel(cub_kernels)
    assert name_filter(readable(kernel))(kernel)
    assert name_filter(readable(kernel, width=30))(kernel)  # cut with "..."
    assert not name_filter(readable(kernel))(_unrelated(cub_kernels))


def test_each_symbol_is_demangled_once(cub_kernels: list[str]) -> None:
    names.full.cache_clear()
    for _ in range(3):
        for k in cub_kernels:
            readable(k)
            full(k)
    assert names.full.cache_info().misses <= len(cub_kernels)


def _query(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["query", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_query_finds_the_cub_kernel_by_its_functor(cub_map: Path, cub_kernels: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    kernel = _reduce_kernel(cub_kernels)
    code, out, err = _query(capsys, str(cub_map), "process_cube_op")
    assert code == 0 and "Traceback" not in err
    lines = out.splitlines()
    assert "cub::detail::reduce::DeviceReduceKernel<...> (matched 'process_cube_op')" in lines
    assert f"  from {SOURCE} (target reduce, object CMakeFiles/reduce.dir/csrc/reduce.cu.o)" in lines
    assert kernel not in out and "CUB_" not in out and "unrelated" not in out
    assert "read alike once shortened; --mangled" in err  # the two single-tile instantiations

    code, out, _ = _query(capsys, str(cub_map), "process_cube_op", "--mangled")
    assert code == 0 and f"{kernel} (matched 'process_cube_op')" in out.splitlines()

    code, out, _ = _query(capsys, str(cub_map), "process_cube_op", "--json")
    answers: list[dict[str, Any]] = json.loads(out)["answers"]
    assert json.loads(out)["schema"] == "kernel-symbol-map/query/1"
    assert kernel in {a["symbol"] for a in answers} and _unrelated(cub_kernels) not in {a["symbol"] for a in answers}
    by_symbol = {a["symbol"]: a for a in answers}
    assert by_symbol[kernel]["demangled"] == full(kernel) and by_symbol[kernel]["asked"] == "process_cube_op"


def test_query_reads_regexes_and_keeps_exact_names_first(cub_map: Path, cub_kernels: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _query(capsys, str(cub_map), r"DeviceReduce\w*Kernel", "--json")
    assert len(json.loads(out)["answers"]) == 3
    _, out, _ = _query(capsys, str(cub_map), "unrelated_kernel", "--json")  # a family's last part: exact
    assert [a["symbol"] for a in json.loads(out)["answers"]] == [_unrelated(cub_kernels)]
    code, out, err = _query(capsys, str(cub_map), "foo(")  # no regex, no such substring: an error, and a tip
    assert code == 1 and "Traceback" not in err and "ERROR foo(: neither a file of the map nor a kernel" in err
    assert "TIP " in err


def test_query_of_a_file_prints_readable_kernels_once_each(cub_map: Path, cub_kernels: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _query(capsys, str(cub_map), SOURCE)
    lines = out.splitlines()
    assert "  cub::detail::reduce::DeviceReduceSingleTileKernel<...>  (2 kernels)" in lines
    assert "  ours::unrelated_kernel" in lines and "  plain_c_kernel" in lines and "CUB_" not in out
    _, out, _ = _query(capsys, str(cub_map), SOURCE, "--mangled")
    assert {line.strip() for line in out.splitlines()[1:]} == set(cub_kernels)


def test_a_path_that_is_not_in_the_map_is_never_a_pattern(cub_map: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``reduce.cu`` as a regex would match ``reduce_cu``-like names; spelled as a file it is a file."""
    code, out, err = _query(capsys, str(cub_map), "reduce.cu", "--json")
    (answer,) = json.loads(out)["answers"]
    assert answer["status"] == "not-in-map" and "neither a file of the map" in err and code == 1


def test_select_explains_with_readable_names(cub_map: Path, cub_kernels: list[str], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    kernel = _reduce_kernel(cub_kernels)
    recordings = tmp_path / "rec.jsonl"
    recordings.write_text(json.dumps({"test": "t::reduce", "kernels": [kernel], "complete": True,
                                      "commit": COMMIT}) + "\n")
    args = ["select", "--map", str(cub_map), "--recordings", str(recordings), "--changed", SOURCE,
            "--source-root", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "RUN  t::reduce: launched 1 reached kernels, e.g. cub::detail::reduce::DeviceReduceKernel<...>" in out
    assert kernel not in out
    assert main([*args, "--json"]) == 0
    (decision,) = json.loads(capsys.readouterr().out)["decisions"]
    assert kernel in decision["why"]  # scripts read the mangled name


def test_an_nvcc_rdc_static_kernel_reads_by_its_own_name() -> None:
    """nvcc -rdc=true prefixes a kernel of internal linkage with __nv_static_..._: the name after it is
    the one its author wrote (without it, every anonymous-namespace kernel of a file read alike)."""
    prefix = "__nv_static_25__5e6268aa_4_s_cu_d50de116_"
    assert full(prefix + "_Z2tkILi1EEvPf") == "void tk<1>(float*)"
    assert readable(prefix + "_ZN36_GLOBAL__N__5e6268aa_4_s_cu_d50de1165shiftEPf") == "(anonymous namespace)::shift"
    assert name_filter("(anonymous namespace)::shift")(prefix + "_ZN36_GLOBAL__N__5e6268aa_4_s_cu_d50de1165shiftEPf")


def test_kernels_that_would_read_alike_are_labelled_apart() -> None:
    """Overloads lose their parameters in a label: a report's rows keep them apart by their signature."""
    assert readable("_Z5scalePf") == readable("_Z5scalePd") == "scale"
    assert labels(["_Z5scalePf", "_Z5scalePd", "_Z4fillPi"]) == {
        "_Z5scalePf": "scale(float*)", "_Z5scalePd": "scale(double*)", "_Z4fillPi": "fill"}
    # a function template's overloads: by name and parameters, without the return type the demangler prints
    assert labels(["_Z1kIfEvPT_", "_Z1kIfEvPT_i"]) == {"_Z1kIfEvPT_": "k<float>(float*)",
                                                      "_Z1kIfEvPT_i": "k<float>(float*, int)"}
    long = [f"_Z{len(n)}{n}Pf" for n in ("k" * 100,)] + [f"_Z{len('k' * 100)}{'k' * 100}Pd"]
    apart = labels(long, 40)  # cut alike at 40: whole, they differ
    assert set(apart.values()) == {"k" * 100 + "(float*)", "k" * 100 + "(double*)"}


def test_kernels_whose_whole_names_read_alike_are_labelled_by_their_mangled_names() -> None:
    """Two files' static kernels of one name (nvcc -rdc) read alike to the last character, parameters and
    all: a report still never prints two rows under one label, so each reads by its mangled name."""
    one = "__nv_static_25__5e6268aa_4_a_cu_d50de116__Z5shiftPf"
    two = "__nv_static_25__0badcafe_4_b_cu_1234abcd__Z5shiftPf"
    assert full(one) == full(two) == "shift(float*)"
    assert labels([one, two, "_Z4fillPi"]) == {one: one, two: two, "_Z4fillPi": "fill"}


def test_instantiations_folded_alike_are_labelled_apart_by_their_arguments(tmp_path: Path) -> None:
    """Two instantiations CUB folds to one label (a long and an int size type) read by their whole names."""
    long_, int_ = (f"_ZN2ns1kIN2ns6policyILi{n}EEE{t}EEvv" for n, t in ((1, "l"), (1, "i")))
    assert readable(long_, 12) == readable(int_, 12)
    apart = labels([long_, int_], 12)
    assert apart == {long_: "ns::k<ns::policy<1>, long>", int_: "ns::k<ns::policy<1>, int>"}


def test_a_cut_label_with_folded_arguments_copied_from_a_report_finds_its_kernel() -> None:
    """A report cut ``ns::outer<...>::inner_kernel`` to ``ns::outer<...>::inner...``: the copied label finds
    that kernel (every instantiation it folds), and not a kernel the cut part does not begin."""
    inner = "_ZN2ns5outerINS_6policyILi1EEElE12inner_kernelEv"
    other = "_ZN2ns5outerINS_6policyILi1EEElE12other_kernelEv"
    assert full(inner) == "ns::outer<ns::policy<1>, long>::inner_kernel()"
    copied = readable(inner, 24)
    assert copied == "ns::outer<...>::inner..."
    found = name_filter(copied)
    assert found(inner) and found("_ZN2ns5outerINS_6policyILi2EEEiE12inner_kernelEv")
    assert not found(other)


def test_a_parenthesis_inside_template_arguments_is_not_the_parameter_list() -> None:
    """A character template argument demangles with a cast, ``fill<(char)65>``: the label keeps it."""
    assert full("_Z4fillILc65EEvPi") == "void fill<(char)65>(int*)"
    assert readable("_Z4fillILc65EEvPi") == "fill<(char)65>"


def test_a_family_is_the_same_under_every_version_namespace() -> None:
    """Two CUB or Thrust versions (a wheel built against each) name one family: query and size group by it."""
    assert names.family("void cub::CUB_300001_SM_800::detail::reduce::DeviceReduceKernel<float, int>(float*, int)") \
        == names.family("void cub::CUB_200800_SM_900::detail::reduce::DeviceReduceKernel<int, int>(int*, int)") \
        == "cub::detail::reduce::DeviceReduceKernel"
    assert names.family("void thrust::THRUST_300001_SM_800_NS::cuda_cub::core::_kernel_agent<int>(int)") \
        == "thrust::cuda_cub::core::_kernel_agent"
