"""Which tests a host change reaches, on maps small enough to read: what the libraries a test loaded say,
and what the kernels it launched say about a library loaded under another name.

tests/test_two_folders.py checks the same on real builds; this checks the cases its one project has no
shape for (a kernel linked into two libraries).
"""

from __future__ import annotations

from kernel_symbol_map.consumer.emitted import HostChange
from kernel_symbol_map.consumer.hostscope import HostScope
from kernel_symbol_map.consumer.kernelmap import KernelMap
from kernel_symbol_map.consumer.recordings import Recording
from kernel_symbol_map.consumer.rules import StaticRules

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
