"""``doctor``: whether a project's wheel builds will emit a map, and what stands in the way.

Each check prints one line: ``OK`` and what holds, ``PROBLEM`` and its fix (doctor then
exits 1), or ``NOTE`` and advice.
The checks read the project's ``pyproject.toml``, the environment pip's
isolated builds see (``PIP_FIND_LINKS``, an index) and git; they build nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import KernelSymbolMapError
from ._commands import summary_of
from ._output import EXIT_INPUT, EXIT_OK, plural, write_json

if TYPE_CHECKING:
    from packaging.requirements import Requirement

JSON_SCHEMA = "kernel-symbol-map/doctor/1"
PACKAGE = "kernel-symbol-map"
SCIKIT_BUILD_CORE = "scikit-build-core"
FIRST_EMITTING = "1.1"  # the first scikit-build-core whose builds find our CMake package by its entry point
OLDER = ("0.5", "0.8", "0.9", "0.10", "0.11", "1.0", "1.0.9")  # versions before it a specifier may allow
BACKENDS = ("scikit_build_core.build", "scikit_build_core.setuptools.build_meta")


@dataclass(frozen=True)
class Finding:
    ok: bool  # False: a problem, and doctor exits 1
    what: str  # what holds, or what is wrong
    fix: str = ""  # what to do: a problem's, or, where ok, a NOTE's advice


def populate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "doctor", help=summary_of("doctor"),
        description="In a project folder: whether `pip wheel .` will emit a kernel symbol map, and what stands in "
        "the way (scikit-build-core's version, the package findable by isolated builds, dist/ in the checkout, "
        "recordings for select), a line each with the fix. Exit 1 when any check finds a problem.",
        allow_abbrev=False)
    p.add_argument("project", nargs="?", type=Path, default=Path("."),
                   help="the project's folder, holding pyproject.toml (default: the current folder)")
    p.add_argument("--json", action="store_true", help=f"machine-readable output ({JSON_SCHEMA})")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    project = args.project
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        raise KernelSymbolMapError(f"{project}: no pyproject.toml here; run doctor in the project's folder")
    from ..consumer.maps import config

    findings = check(project, config.read(pyproject), os.environ)
    problems = [f for f in findings if not f.ok]
    if args.json:
        write_json(JSON_SCHEMA, {"project": str(project), "ok": not problems,
                                 "findings": [{"ok": f.ok, "what": f.what, "fix": f.fix} for f in findings]})
    else:
        for f in findings:
            label = "PROBLEM" if not f.ok else "NOTE" if f.fix else "OK"
            print(f"{label:<7} {f.what}" + (f"\n        fix: {f.fix}" if f.fix else ""))
        print(f"{plural(len(problems), 'problem')}: a wheel build "
              f"{'will emit a map' if not problems else 'may emit no map, or one select cannot use'}")
    return EXIT_INPUT if problems else EXIT_OK


def check(project: Path, pyproject: dict[str, Any], environ: os._Environ[str] | dict[str, str]) -> list[Finding]:
    """Every check, in the order a wheel build meets them."""
    system = pyproject.get("build-system", {})
    requires = _requirements([r for r in system.get("requires", []) if isinstance(r, str)])
    return [_backend(system.get("build-backend", "")), _scikit_build_core(requires), *_findable(requires, environ),
            _dist(project), _recordings(pyproject)]


def _requirements(texts: list[str]) -> dict[str, Requirement]:
    """The build's requirements that parse, by their normalised project names."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    found = {}
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        found[canonicalize_name(req.name)] = req
    return found


def _backend(backend: str) -> Finding:
    if backend in BACKENDS:
        return Finding(True, f"built by {backend}")
    return Finding(False, f"built by {backend or 'setuptools (no build-backend)'}, not scikit-build-core: no "
                   "automatic map", "build with scikit-build-core, or run `kernel-symbol-map build` after your "
                   "CMake build (README: Without scikit-build-core)")


def _scikit_build_core(requires: dict[str, Requirement]) -> Finding:
    req = requires.get(SCIKIT_BUILD_CORE)
    if req is None:
        return Finding(False, "[build-system] requires names no scikit-build-core",
                       f"requires = [\"{SCIKIT_BUILD_CORE}>={FIRST_EMITTING}\", \"{PACKAGE}\"]")
    if not req.specifier:  # pip takes the newest
        return Finding(True, f"'{req}': the newest scikit-build-core")
    older = [v for v in OLDER if req.specifier.contains(v, prereleases=True)]
    if older:
        return Finding(False, f"'{req}' allows scikit-build-core {older[-1]}, older than {FIRST_EMITTING}: "
                       "such a build finds no kernel-symbol-map and emits no map, silently",
                       f"require \"{SCIKIT_BUILD_CORE}>={FIRST_EMITTING}\" in [build-system] requires")
    return Finding(True, f"'{req}': scikit-build-core {FIRST_EMITTING} or later")


def _findable(requires: dict[str, Requirement], environ: os._Environ[str] | dict[str, str]) -> list[Finding]:
    """kernel-symbol-map in the build's requirements, and somewhere an isolated build can install it from."""
    if PACKAGE not in requires:
        return [Finding(False, f"[build-system] requires does not name {PACKAGE}: an isolated build cannot find "
                        "its CMake package", f"add \"{PACKAGE}\" to [build-system] requires")]
    links = environ.get("PIP_FIND_LINKS", "").split()
    wheels = [w for link in links if not _is_url(link) and Path(link).is_dir()
              for w in Path(link).glob("kernel_symbol_map-*.whl")]
    if wheels:
        return [Finding(True, f"{PACKAGE} is in [build-system] requires, and its wheel in PIP_FIND_LINKS "
                        f"({wheels[0].parent})")]
    if any(map(_is_url, links)) or environ.get("PIP_INDEX_URL") or environ.get("PIP_EXTRA_INDEX_URL"):
        return [Finding(True, f"{PACKAGE} is in [build-system] requires; pip is given an index or links to look "
                        "in (not checked here)")]
    return [Finding(False, f"{PACKAGE} is in [build-system] requires, but no folder in PIP_FIND_LINKS holds its "
                    "wheel, and it is on no package index: an isolated build fails to install it",
                    "python -m pip wheel --no-deps \"$KSM_CHECKOUT\" -w DIR; export "
                    "PIP_FIND_LINKS=\"DIR${PIP_FIND_LINKS:+ $PIP_FIND_LINKS}\" (README: Use it in your project)")]


def _is_url(link: str) -> bool:
    return "://" in link


def _dist(project: Path) -> Finding:
    """``dist/``, where ``pip wheel . -w dist`` and ``python -m build`` put wheels: ignored by git, or a
    wheel there is an untracked file that ``select --diff`` counts as a change."""
    try:
        proc = subprocess.run(["git", "-C", str(project), "check-ignore", "-q", "dist/"], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return Finding(True, "not a git checkout: select --diff is not used here")
    if proc.returncode == 0:
        return Finding(True, "dist/ is ignored by git")
    if proc.returncode == 1:
        return Finding(False, "dist/ is not ignored by git: a wheel built there is a change to select --diff, "
                       "and every test runs", "add dist/ to .gitignore, or build wheels outside the checkout")
    return Finding(True, "not a git checkout: select --diff is not used here")


def _recordings(pyproject: dict[str, Any]) -> Finding:
    table = pyproject.get("tool", {}).get(PACKAGE, {})
    if isinstance(table, dict) and table.get("recordings"):
        return Finding(True, f"select reads recordings from {table['recordings']} ([tool.{PACKAGE}])")
    return Finding(True, "no recordings configured: select needs --recordings every time",
                   f"recordings = [\"recordings/\"] in [tool.{PACKAGE}] of pyproject.toml, where CI puts what "
                   "`pytest --kernel-record` writes")
