"""Which tests a host change reaches, on maps small enough to read: what the libraries a test loaded say,
and what the kernels it launched say about a library loaded under another name.

tests/test_two_folders.py checks the same on real builds; this checks the cases its one project has no
shape for (a kernel linked into two libraries).
"""

from __future__ import annotations

from kernel_symbol_map.consumer.select.emitted import HostChange
from kernel_symbol_map.consumer.select.hostscope import HostScope
from kernel_symbol_map.consumer.maps.kernelmap import KernelMap
from kernel_symbol_map.consumer.select.recordings import Recording
from kernel_symbol_map.consumer.select.rules import StaticRules

# liba.so and libb.so both link the static library s, whose kernel is shared_k; liba.so's own kernel is a_k,
# libb.so's own host code is in b.cpp.
MAP = KernelMap({"objects": [
    {"target": "a", "object": "a.cu.o", "source": "a.cu", "symbols": ["a_k"]},
    {"target": "s", "object": "s.cu.o", "source": "s.cu", "symbols": ["shared_k"]},
    {"target": "b", "object": "b.cpp.o", "source": "b.cpp", "symbols": []},
], "artefacts": {"a": ["liba.so"], "b": ["libb.so"], "s": ["liba.so", "libb.so"]}})
B_CHANGED = HostChange("b.cpp.o", "b", "b.cpp", "changed", frozenset())
A_CHANGED = HostChange("a.cu.o", "a", "a.cu", "changed", frozenset({"a_k"}))


def _scope(*recordings: tuple[str, set[str], set[str]]) -> HostScope:
    recs = [Recording(t, frozenset(k), True, "c", "rec", libraries=frozenset(libs)) for t, k, libs in recordings]
    return HostScope([MAP], [r.test for r in recs], recs)


def test_a_kernel_linked_into_two_libraries_is_no_sign_of_a_renamed_copy() -> None:
    """t_a launched shared_k from liba.so: that is no sign it loaded libb.so under another name."""
    reach = _scope(("t_a", {"shared_k"}, {"liba.so"}), ("t_b", set(), {"libb.so"})).reach(B_CHANGED)
    assert not reach.everything and set(reach.tests) == {"t_b"}


def test_a_kernel_linked_into_one_library_only_shows_a_renamed_copy() -> None:
    """t_x launched a_k, which only liba.so holds, and lists no liba.so: it loaded liba.so under another name,
    and so may a test that launched nothing."""
    a_changed = A_CHANGED
    reach = _scope(("t_x", {"a_k"}, {"_a.cpython.so"}), ("t_a", set(), {"liba.so"})).reach(a_changed)
    assert "t_x launched kernels linked into liba.so" in reach.everything
    # Named as nvcc names an anonymous namespace's kernel in another folder: the same kernel.
    spelled = KernelMap({**MAP.document, "objects": [{**MAP.objects[0], "symbols": ["_GLOBAL__N__0a1b2c3d_4_a_k"]}]})
    recs = [Recording("t_x", frozenset({"_GLOBAL__N__99887766_4_a_k"}), True, "c", "rec",
                      libraries=frozenset({"_a.cpython.so"})),
            Recording("t_a", frozenset(), True, "c", "rec", libraries=frozenset({"liba.so"}))]
    assert HostScope([spelled], ["t_x", "t_a"], recs).reach(a_changed).everything


def test_a_kernel_of_two_libraries_launched_through_a_copy_shows_it() -> None:
    """t_x launched shared_k, which liba.so and libb.so hold, and lists neither: it loaded one of them under
    another name, maybe liba.so, whose host code changed."""
    reach = _scope(("t_x", {"shared_k"}, {"_a.cpython.so"}), ("t_a", set(), {"liba.so"})).reach(A_CHANGED)
    assert "t_x launched kernels linked into liba.so" in reach.everything


def test_a_path_rule_does_not_decide_when_a_header_changed_under_another_spelling() -> None:
    """b.cpp includes csrc/gen/ver.h, a link to include/ver.h; git names the file the link points at. The
    rule for b.cpp decides b.cpp's change, not the header's."""
    doc = {**MAP.document, "objects": [*MAP.objects[:2], {**MAP.objects[2], "deps": ["csrc/gen/ver.h"]}]}
    rules = StaticRules.parse({"rules": [{"paths": ["b.cpp"], "tests": []}]})
    recs = [Recording("t_b", frozenset(), True, "c", "rec", libraries=frozenset({"libb.so"}))]

    def canonical(path: str) -> str:
        return path.replace("csrc/gen/", "include/")

    def reach(changed: list[str]) -> object:
        return HostScope([KernelMap(doc)], ["t_b"], recs, rules=rules, canonical=canonical,
                         changed=changed).reach(B_CHANGED)

    assert reach(["b.cpp"]).rule and not reach(["b.cpp"]).tests  # the rule's word: no test
    both = reach(["b.cpp", "include/ver.h"])
    assert not both.rule and set(both.tests) == {"t_b"}
    assert reach(["./b.cpp"]).rule  # the source, however spelled


# Function scope: b.cpp's host code split by function, compiled with host coverage, and b_helper changed.
B_HELPER = HostChange("b.cpp.o", "b", "b.cpp", "changed", frozenset(), {"_Z8b_helperv": "changed"}, "",
                      frozenset())


def _ran(*recordings: tuple[str, set[str], set[str], dict[str, set[str]] | None], change: HostChange = B_HELPER,
         scope: str = "functions") -> dict[str, tuple[str, str]]:
    recs = [Recording(t, frozenset(k), True, "c", "rec", libraries=frozenset(libs) if libs else None,
                      host_functions=None if ran is None else {n: frozenset(f) for n, f in ran.items()})
            for t, k, libs, ran in recordings]
    reach = HostScope([MAP], [r.test for r in recs], recs, scope).reach(change)
    assert not reach.everything and not reach.kernels, reach
    return reach.tests


def test_a_changed_function_reaches_the_tests_that_ran_it() -> None:
    tests = _ran(("t_ran", set(), {"libb.so"}, {"libb.so": {"_Z8b_helperv"}}),
                 ("t_loaded", set(), {"libb.so"}, {"libb.so": {"_Z5otherv"}}),
                 ("t_elsewhere", set(), {"liba.so"}, {"liba.so": {"_Z8b_helperv"}}))
    assert set(tests) == {"t_ran"} and tests["t_ran"][0] == "ran" and "b_helper()" in tests["t_ran"][1]
    # the library's file as the loader named it (a SONAME with a version): the same file
    assert set(_ran(("t", set(), {"libb.so.1"}, {"libb.so.1": {"_Z8b_helperv"}}))) == {"t"}


def test_a_test_without_host_functions_for_the_library_gets_the_library_scope() -> None:
    tests = _ran(("t_none", set(), {"libb.so"}, None),  # recorded without host coverage
                 ("t_other", set(), {"libb.so", "liba.so"}, {"liba.so": set()}),  # libb.so not instrumented
                 ("t_ran_none", set(), {"libb.so"}, {"libb.so": set()}))
    assert set(tests) == {"t_none", "t_other"}
    assert "lists no host functions" in tests["t_none"][1] and "not built with host coverage" in tests["t_other"][1]


def test_what_coverage_cannot_narrow_gets_the_library_scope() -> None:
    ran_none = ("t", set(), {"libb.so"}, {"libb.so": set()})
    for whole in ("data", "static initialiser _GLOBAL__sub_I_b.cpp", "the object is in the change only"):
        assert set(_ran(ran_none, change=HostChange(**{**B_HELPER.__dict__, "whole": whole}))) == {"t"}
    unseen = HostChange(**{**B_HELPER.__dict__, "unseen": frozenset({"_Z8b_helperv"})})  # no_instrument_function
    assert set(_ran(ran_none, change=unseen)) == {"t"}
    uninstrumented = HostChange(**{**B_HELPER.__dict__, "unseen": None})  # the base was built without coverage
    assert set(_ran(ran_none, change=uninstrumented)) == {"t"}
    assert set(_ran(ran_none, scope="libraries")) == {"t"}


def test_a_test_recorded_without_libraries_that_launched_the_objects_kernel_still_runs() -> None:
    change = HostChange("a.cu.o", "a", "a.cu", "changed", frozenset({"a_k"}), {"_Z8launchv": "changed"}, "",
                        frozenset())
    tests = _ran(("t_old", {"a_k"}, set(), None), ("t_new", {"a_k"}, {"liba.so"}, {"liba.so": set()}),
                 change=change)
    assert set(tests) == {"t_old"}  # t_new ran no changed function; the kernel's code did not change
