"""The user's path rules: ``{"rules": [{"paths": [globs], "tests": [patterns]}]}``.

A changed file that a rule's ``paths`` match is decided by the rules: the tests
of every rule that matches it, and none at all when those rules name none
(``{"paths": ["docs/**", "*.md"], "tests": []}``: docs need no test). A file no
rule matches is not theirs to decide.

Globs are git's (gitignore syntax, through ``pathspec``): ``*`` stays within a
path segment, ``**`` crosses segments, a glob without a ``/`` matches a file
name at any depth, and a glob that matches a folder matches everything under it
(``csrc/*`` matches ``csrc/moe/x.cu``, as git ignores all of ``csrc/moe/``).
Each glob is pathspec's ``GitIgnoreSpecPattern``: what its deprecated name
``gitwildmatch`` meant, pattern for pattern, so no rule matched differently
when pathspec 1.0 renamed it (``gitignore``'s basic pattern does not match
inside a matched folder). tests/test_rules_globs.py holds the semantics. A test pattern matches a test (a pytest node id, or a CI
step's name) that is:

* the pattern itself (``tests/test_a.py::test_x``, ``kernels-A``);
* under it, as pytest nodes nest (``tests/test_a.py`` is every test of that
  file, ``tests/test_a.py::TestK`` every test of the class);
* a test whose file (the id before ``::``, or the whole name) the pattern
  matches as a glob (``tests/kernels/**``, ``test_moe_*.py``).

A pattern with no glob character also names a test (or step) that no
recording knows, so that it is listed to run.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from ...errors import KernelSymbolMapError

_GLOB = frozenset("*?[")


@dataclass(frozen=True)
class StaticRules:
    rules: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]

    @classmethod
    def read(cls, path: Path) -> StaticRules:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise KernelSymbolMapError(f"{path}: not a rules file ({e})") from None
        return cls.parse(data, str(path))

    @classmethod
    def parse(cls, data: Any, where: str = "rules") -> StaticRules:
        if not isinstance(data, dict) or set(data) != {"rules"} or not isinstance(data["rules"], list):
            raise KernelSymbolMapError(f"{where}: expected {{\"rules\": [...]}} and nothing else")
        rules = []
        for i, rule in enumerate(data["rules"]):
            if not isinstance(rule, dict) or set(rule) != {"paths", "tests"}:
                raise KernelSymbolMapError(f"{where}: rules[{i}] must have exactly \"paths\" and \"tests\"")
            for key, empty in (("paths", False), ("tests", True)):
                value = rule[key]
                if not isinstance(value, list) or not (value or empty) or \
                        not all(isinstance(v, str) and v for v in value):
                    kind = "a list of strings (maybe empty)" if empty else "a non-empty list of strings"
                    raise KernelSymbolMapError(f"{where}: rules[{i}].{key} must be {kind}")
            for glob in (*rule["paths"], *(t for t in rule["tests"] if _GLOB & set(t))):
                try:
                    pathspec.PathSpec.from_lines(GitIgnoreSpecPattern, [glob])
                except (ValueError, TypeError, re.error) as e:  # pathspec compiles globs with re
                    raise KernelSymbolMapError(f"{where}: rules[{i}]: bad glob {glob!r} ({e})") from None
            rules.append((tuple(rule["paths"]), tuple(rule["tests"])))
        return cls(tuple(rules))

    @cached_property
    def _specs(self) -> list[tuple[pathspec.PathSpec, tuple[str, ...]]]:
        return [(pathspec.PathSpec.from_lines(GitIgnoreSpecPattern, globs), tests) for globs, tests in self.rules]

    def for_file(self, path: str, canonical: Callable[[str], str] | None = None) -> tuple[str, ...] | None:
        """The test patterns the rules name for ``path``, or None when some spelling of it matches no rule.

        The path is matched as written once normalised (``csrc/moe/../attention/x.cu`` is
        ``csrc/attention/x.cu``) and, with ``canonical``, as the file it really is (symlinks
        resolved): the tests of every spelling, and None if any spelling matches no rule.
        """
        spellings = {posixpath.normpath(path)}
        if canonical is not None:
            spellings.add(canonical(path))
        found: list[str] = []
        for spelled in spellings:
            hits = [tests for spec, tests in self._specs if spec.match_file(spelled)]
            if not hits:
                return None
            found += [t for tests in hits for t in tests]
        return tuple(dict.fromkeys(found))

    def tests_for(self, changed: Sequence[str], canonical: Callable[[str], str] | None = None) -> Patterns | None:
        """The patterns for a whole change set, or None when some file matches no rule."""
        found: list[str] = []
        for path in changed:
            patterns = self.for_file(path, canonical)
            if patterns is None:
                return None
            found += patterns
        return Patterns(tuple(dict.fromkeys(found)))

    @property
    def tests(self) -> set[str]:
        """The tests (or CI steps) the rules name outright: every pattern with no glob character."""
        return {t for _, tests in self.rules for t in tests if not _GLOB & set(t)}


@dataclass(frozen=True)
class Patterns:
    """Test patterns (see the module's docstring), matched against test ids."""

    patterns: tuple[str, ...]

    @cached_property
    def _globs(self) -> pathspec.PathSpec:
        return pathspec.PathSpec.from_lines(GitIgnoreSpecPattern, [p for p in self.patterns if _GLOB & set(p)])

    def __contains__(self, test: object) -> bool:
        if not isinstance(test, str):
            return False
        for p in self.patterns:
            if test == p or test.startswith((p + "::", p.rstrip("/") + "/")):
                return True
        file = test.split("::", 1)[0]
        return bool(self._globs.patterns) and self._globs.match_file(file)

    def chosen(self, tests: Iterable[str]) -> list[str]:
        return [t for t in tests if t in self]
