"""The rules' glob semantics, pinned (issue 30, item 9).

Rules decide which tests a change skips, so the meaning of a glob must not
move when pathspec renames or reworks its patterns: pathspec 1.0 deprecated
``gitwildmatch`` and its ``gitignore`` basic pattern no longer matches inside
a matched folder (``csrc/*`` and ``csrc/moe/x.cu``). This table is git's
meaning, as ``gitwildmatch`` had it; a pathspec release that changes any row
fails here before it can change a selection.
"""

from __future__ import annotations

import warnings

import pytest

from kernel_symbol_map.consumer.select.rules import Patterns, StaticRules
from kernel_symbol_map.errors import KernelSymbolMapError

# (glob, path, matched)
GLOBS = [
    ("*.cu", "x.cu", True),
    ("*.cu", "csrc/moe/x.cu", True),  # no "/": a file name at any depth
    ("csrc/*.cu", "csrc/x.cu", True),
    ("csrc/*.cu", "csrc/moe/x.cu", False),  # "*" stays within a segment
    ("csrc/*", "csrc/moe/x.cu", True),  # csrc/moe matched: everything under it
    ("csrc/**", "csrc/a/b/c.cuh", True),
    ("csrc/", "csrc/a/x.cu", True),
    ("csrc/", "csrc", False),  # a folder glob: a file named csrc is not it
    ("**/attn.cu", "attn.cu", True),
    ("**/attn.cu", "csrc/attention/attn.cu", True),
    ("csrc/**/*.cuh", "csrc/a/b/c.cuh", True),
    ("csrc/**/*.cuh", "csrc/c.cuh", True),
    ("/csrc/x.cu", "csrc/x.cu", True),
    ("/x.cu", "csrc/x.cu", False),  # a leading "/" anchors at the top
    ("a/**/b", "a/x/y/b", True),
    ("cs?c/x.cu", "csrc/x.cu", True),
    ("[ab]*.py", "a.py", True),
    ("[ab]*.py", "c.py", False),
    ("docs", "docs/index.md", True),
    ("tests/test_*.py", "tests/sub/test_a.py", False),
]
# (globs of one rule, path, matched): later negations win, as in a .gitignore
NEGATIONS = [
    (("*.cu", "!csrc/x.cu"), "csrc/x.cu", False),
    (("*.cu", "!csrc/x.cu"), "csrc/y.cu", True),
    (("csrc/**", "!csrc/"), "csrc/x.cu", False),
    (("!csrc/x.cu", "*.cu"), "csrc/x.cu", True),
]


def rules_of(globs: tuple[str, ...]) -> StaticRules:
    return StaticRules(((globs, ("tests/test_k.py",)),))


@pytest.mark.parametrize(("glob", "path", "matched"), GLOBS)
def test_a_rule_glob_means_what_git_means(glob: str, path: str, matched: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pathspec's own deprecations too: we call its current API
        found = rules_of((glob,)).for_file(path)
    assert (found is not None) == matched, (glob, path)


@pytest.mark.parametrize(("globs", "path", "matched"), NEGATIONS)
def test_a_negated_glob_later_in_a_rule_takes_the_path_back(globs: tuple[str, ...], path: str, matched: bool) -> None:
    assert (rules_of(globs).for_file(path) is not None) == matched


@pytest.mark.parametrize(("glob", "path", "matched"), [g for g in GLOBS if set("*?[") & set(g[0])])
def test_a_test_pattern_glob_matches_test_files_the_same_way(glob: str, path: str, matched: bool) -> None:
    """A test pattern with a glob character matches a test's file as a rule's glob matches a path (a
    pattern without one names tests and what nests under them: not a glob)."""
    assert (f"{path}::test_x" in Patterns((glob,))) == matched


def test_a_bad_glob_is_one_error_naming_it(tmp_path) -> None:
    bad = tmp_path / "rules.json"
    bad.write_text('{"rules": [{"paths": ["csrc/[z-a].cu"], "tests": []}]}')
    with pytest.raises(KernelSymbolMapError, match=r"rules\[0\]: bad glob 'csrc/\[z-a\]\.cu'"):
        StaticRules.read(bad)


def test_a_rule_with_a_key_of_its_own_is_refused(tmp_path) -> None:
    """A misspelt or invented key (an "exclude") would be ignored, and the rule mean less than it says."""
    with pytest.raises(KernelSymbolMapError, match=r'rules\[0\] must have exactly "paths" and "tests"'):
        StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": [], "exclude": ["csrc/a.cu"]}]})


def test_a_file_several_rules_match_gets_every_rule_s_tests() -> None:
    """A kernel source under csrc/ that is also a .cu file: both rules speak for it, and their tests add up."""
    rules = StaticRules.parse({"rules": [
        {"paths": ["csrc/**"], "tests": ["tests/test_kernels.py"]},
        {"paths": ["docs/**"], "tests": []},
        {"paths": ["*.cu"], "tests": ["tests/test_cuda.py", "tests/test_kernels.py"]},
    ]})
    assert rules.for_file("csrc/moe/x.cu") == ("tests/test_kernels.py", "tests/test_cuda.py")
    assert rules.for_file("csrc/moe/x.h") == ("tests/test_kernels.py",)
    chosen = rules.tests_for(["csrc/moe/x.cu"])
    assert chosen is not None
    tests = ["tests/test_cuda.py::test_a", "tests/test_kernels.py::test_b", "tests/test_other.py::test_c"]
    assert chosen.chosen(tests) == tests[:2]


@pytest.mark.parametrize(("data", "message"), [
    ([], r'expected \{"rules": \[...\]\} and nothing else'),
    (["rules"], r'expected \{"rules": \[...\]\} and nothing else'),
    ({"rules": [["paths", "tests"]]}, r'rules\[0\] must have exactly "paths" and "tests"'),
    ({"rules": [], "extra": 1}, r'expected \{"rules": \[...\]\} and nothing else'),
    ({"rules": {"paths": ["a"]}}, r'expected \{"rules": \[...\]\} and nothing else'),
    ({"rules": ["csrc/**"]}, r'rules\[0\] must have exactly "paths" and "tests"'),
    ({"rules": [{"paths": [], "tests": []}]}, r"rules\[0\]\.paths must be a non-empty list of strings"),
    ({"rules": [{"paths": "csrc/**", "tests": []}]}, r"rules\[0\]\.paths must be a non-empty list of strings"),
    ({"rules": [{"paths": ["csrc/**", ""], "tests": []}]}, r"rules\[0\]\.paths must be a non-empty list"),
    ({"rules": [{"paths": ["csrc/**"], "tests": [1]}]}, r"rules\[0\]\.tests must be a list of strings \(maybe empty\)"),
    ({"rules": [{"paths": ["a"], "tests": []}, {"paths": ["b"], "tests": ["tests/[z-a].py"]}]},
     r"rules\[1\]: bad glob 'tests/\[z-a\]\.py'"),
])
def test_a_rules_file_of_another_shape_is_one_error_naming_where(data: object, message: str) -> None:
    """Read loosely, a rules file could decide files it was never meant to (a rule with no paths, a test
    list that is one string): every departure from the shape is refused."""
    with pytest.raises(KernelSymbolMapError, match=message):
        StaticRules.parse(data, "ci/rules.json")
    assert StaticRules.parse({"rules": [{"paths": ["a"], "tests": []}]}).rules == ((("a",), ()),)


def test_a_rules_file_that_is_not_json_is_one_error(tmp_path) -> None:
    bad = tmp_path / "rules.json"
    bad.write_text("{rules")
    with pytest.raises(KernelSymbolMapError, match="rules.json: not a rules file"):
        StaticRules.read(bad)
    with pytest.raises(KernelSymbolMapError, match="not a rules file"):
        StaticRules.read(tmp_path / "missing.json")


def test_a_file_is_the_rules_only_when_every_spelling_of_it_is() -> None:
    """docs/kernel.cu is a link to csrc/kernel.cu: the docs rule (no tests) speaks for one spelling only."""
    rules = StaticRules.parse({"rules": [{"paths": ["docs/**"], "tests": []}]})
    assert rules.for_file("docs/kernel.cu") == ()
    assert rules.for_file("docs/kernel.cu", canonical=lambda p: "csrc/kernel.cu") is None
    assert rules.tests_for(["docs/a.md", "csrc/kernel.cu"]) is None
    assert rules.tests_for(["docs/a.md", "docs/b.md"]) is not None


def test_only_patterns_without_a_glob_name_tests_outright() -> None:
    rules = StaticRules.parse({"rules": [{"paths": ["csrc/**"], "tests": ["kernels-A", "tests/kernels/**"]}]})
    assert rules.tests == {"kernels-A"}


def test_only_a_test_id_can_be_among_patterns() -> None:
    assert 1 not in Patterns(("tests/test_a.py",)) and "tests/test_a.py::t" in Patterns(("tests/test_a.py",))
